"""Every check on every example of a run: the fact check (when the profile's checks.facts is on),
the checks of the profile's checks file that apply to the example, and the example's own check
columns (check_<check>, carried by the canonical table's `checks`), in that order.

Each example's outcomes follow evalbook.checks.protocol. The fact check reads the answer, the
reference and the example's context (the input's `context`, with the retrieved chunks' texts
where the row has them): a value the answer shares with its retrieved chunks is no invention.
An example without an answer (no prediction) gets an `error` from every check that reads the
answer: there is nothing to check, and it is not a pass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from evalbook.checks import facts
from evalbook.checks.assertions import Assertion, applies_to, run_assertion
from evalbook.checks.checksfile import assertions_from_entries
from evalbook.checks.protocol import CheckOutcome, guarded

NO_ANSWER = "no answer to check: the example has no prediction"
READ_COLUMNS = ("id", "row", "generated_answer", "has_prediction", "reference_answer", "context",
                "retrieved_contexts", "metadata", "checks")  # what example_inputs reads of a canonical row


@dataclass(frozen=True)
class CheckSettings:
    """The profile's `checks` section, read once: the fact check's switch and settings, and the
    assertions of its checks file (already read and checked by the runner's pre-flight)."""

    facts: facts.FactSettings | None  # None: the fact check is off
    assertions: tuple[Assertion, ...] = ()

    @property
    def any(self) -> bool:
        return self.facts is not None or bool(self.assertions)


def check_settings(config: Mapping[str, Any], assertions: Sequence[Assertion] = ()) -> CheckSettings:
    """CheckSettings from a profile's `checks` section and its checks file's assertions."""
    fact_config = config["facts"]
    settings = None if not fact_config["enabled"] else facts.FactSettings(
        fail_beyond_reference=fact_config["fail_beyond_reference"], fail_missing=fact_config["fail_missing"])
    return CheckSettings(settings, tuple(a for a in assertions if a.turn is None))


def _text(value: Any) -> str | None:
    return None if value is None or (not isinstance(value, (list, tuple)) and pd.isna(value)) else str(value)


def example_context(row: Mapping[str, Any]) -> str:
    """The text a fact of the answer may come from besides the reference: the example's context
    and the texts of its retrieved chunks, one paragraph each."""
    parts = [_text(row.get("context")) or ""]
    retrieved = row.get("retrieved_contexts")
    if retrieved is not None and not isinstance(retrieved, str) and len(retrieved):
        parts.extend(str(chunk) for chunk in retrieved if chunk is not None)
    return "\n\n".join(part for part in parts if part.strip())


@dataclass(frozen=True)
class ExampleInputs:
    """What the checks of one example read, and nothing else: the answer (None: no prediction),
    the reference and the context (empty when the fact check is off), the checks that apply to
    it in their order (the checks file's, then its own check columns'), and its latency where one
    of them limits it."""

    answer: str | None
    reference: str
    context: str
    assertions: tuple[Assertion, ...]
    latency_ms: float | None


def example_inputs(row: Mapping[str, Any], settings: CheckSettings,
                   latency_ms: float | None = None) -> ExampleInputs:
    """The inputs of one example's checks (a canonical row); `latency_ms` is how long the system
    took to answer it, where 00_generate asked."""
    answer = _text(row.get("generated_answer")) if row.get("has_prediction", True) else None
    reference, context = "", ""
    if settings.facts is not None and answer is not None:
        reference, context = _text(row.get("reference_answer")) or "", example_context(row)
    assertions = []
    if settings.assertions:
        metadata = row.get("metadata")
        metadata = json.loads(metadata) if isinstance(metadata, str) else (metadata or {})
        assertions = [assertion for assertion in settings.assertions if applies_to(assertion, row["id"], metadata)]
    assertions += assertions_from_entries(row.get("checks"), row["id"], row["row"])
    reads_latency = any(assertion.kind == "latency_ms" for assertion in assertions)
    return ExampleInputs(answer, reference, context, tuple(assertions), latency_ms if reads_latency else None)


def fact_outcome(inputs: ExampleInputs, settings: facts.FactSettings) -> CheckOutcome:
    """The fact check's outcome on one example: an error when it has no answer."""
    if inputs.answer is None:
        return CheckOutcome(facts.CHECK, "error", NO_ANSWER)
    return guarded(facts.CHECK, lambda: facts.check_facts(inputs.answer, inputs.reference, inputs.context, settings))


def assertion_outcomes(inputs: ExampleInputs) -> list[CheckOutcome]:
    """The outcomes of the checks that apply to one example, in their order."""
    return [run_assertion(assertion, inputs.answer, latency_ms=inputs.latency_ms) for assertion in inputs.assertions]


def example_checks(inputs: ExampleInputs, settings: CheckSettings) -> list[CheckOutcome]:
    """Every check's outcome on one example: the fact check's, then the assertions'."""
    first = [] if settings.facts is None else [fact_outcome(inputs, settings.facts)]
    return first + assertion_outcomes(inputs)


def has_check_columns(canonical: pd.DataFrame) -> bool:
    """Whether some example has check columns (a canonical table written before check columns
    has no `checks` column)."""
    return "checks" in canonical.columns and bool(canonical["checks"].notna().any())


def examples_inputs(canonical: pd.DataFrame, settings: CheckSettings,
                    latency_ms: Mapping[str, float] | None = None) -> list[ExampleInputs] | None:
    """Each example's inputs, in the canonical table's order (example_inputs); None when the
    profile asks for no check and no example has check columns."""
    if not settings.any and not has_check_columns(canonical):
        return None
    latency_ms = latency_ms or {}
    # only the columns the checks read: a row of every column costs twice as long to build
    read = canonical[[column for column in READ_COLUMNS if column in canonical.columns]]
    return [example_inputs(row, settings, latency_ms.get(row["id"])) for row in read.to_dict("records")]


def run_checks(canonical: pd.DataFrame, settings: CheckSettings,
               latency_ms: Mapping[str, float] | None = None) -> list[list[CheckOutcome]]:
    """Each example's outcomes, in the canonical table's order; `latency_ms` by example id,
    00_generate's, where it asked the system. evalbook.checks.cache keeps them between runs."""
    examples = examples_inputs(canonical, settings, latency_ms)
    if examples is None:
        return [[] for _ in range(len(canonical))]
    return [example_checks(inputs, settings) for inputs in examples]

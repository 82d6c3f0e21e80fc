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


def example_checks(row: Mapping[str, Any], settings: CheckSettings,
                   latency_ms: float | None = None) -> list[CheckOutcome]:
    """Every check's outcome on one example (a canonical row); `latency_ms` is how long the
    system took to answer it, where 00_generate asked."""
    answer = _text(row.get("generated_answer")) if row.get("has_prediction", True) else None
    outcomes = []
    if settings.facts is not None:
        if answer is None:
            outcomes.append(CheckOutcome(facts.CHECK, "error", NO_ANSWER))
        else:
            reference = _text(row.get("reference_answer")) or ""
            context = example_context(row)
            outcomes.append(guarded(facts.CHECK, lambda: facts.check_facts(answer, reference, context, settings.facts)))
    if settings.assertions:
        metadata = row.get("metadata")
        metadata = json.loads(metadata) if isinstance(metadata, str) else (metadata or {})
        for assertion in settings.assertions:
            if applies_to(assertion, row["id"], metadata):
                outcomes.append(run_assertion(assertion, answer, latency_ms=latency_ms))
    for assertion in assertions_from_entries(row.get("checks"), row["id"], row["row"]):
        outcomes.append(run_assertion(assertion, answer, latency_ms=latency_ms))
    return outcomes


def has_check_columns(canonical: pd.DataFrame) -> bool:
    """Whether some example has check columns (a canonical table written before check columns
    has no `checks` column)."""
    return "checks" in canonical.columns and bool(canonical["checks"].notna().any())


def run_checks(canonical: pd.DataFrame, settings: CheckSettings,
               latency_ms: Mapping[str, float] | None = None) -> list[list[CheckOutcome]]:
    """Each example's outcomes, in the canonical table's order; `latency_ms` by example id,
    00_generate's, where it asked the system."""
    if not settings.any and not has_check_columns(canonical):
        return [[] for _ in range(len(canonical))]
    latency_ms = latency_ms or {}
    return [example_checks(row, settings, latency_ms.get(row["id"])) for row in canonical.to_dict("records")]

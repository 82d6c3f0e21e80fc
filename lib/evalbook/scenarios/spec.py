"""The scenario file: conversations for evalbook to simulate, read and checked before any call.

A YAML file (`docs/scenarios.md`) holding `version: 1` and a list of `scenarios`, each with an
`id`, a `goal` and a `persona` for the simulated user, who speaks first, an optional opening
message, `max_turns`, an optional `expected_outcome`, the `criteria` judged on the whole
transcript, and optional per-turn `assertions` (`grounded` against a `ground_truth`,
`relevant`), each with a threshold written as a fraction.

It is checked against `schemas/scenarios-v1.json`, then for what a schema cannot say (ids
used twice, an assertion's turn past `max_turns`, an assistant that speaks first with nothing to
say). Every problem is reported at once, each naming the scenario (its position and id) and the
field; the file is refused (UnusableInput, exit 2) before anything is simulated.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from evalbook.errors import UnusableInput
from evalbook.validation import jsonschema, shipped_schema

SCHEMA = "scenarios-v1.json"
SHOWN_PROBLEMS = 20


class ScenarioFileError(UnusableInput, ValueError):
    """A scenario file that cannot be used; the message lists each problem with its scenario and field."""


@dataclass(frozen=True)
class Assertion:
    """One per-turn check: `kind` grounded or relevant, on `turn` (every, last, or a number from 1)."""

    kind: str
    threshold: float
    threshold_text: str  # as written: "4/5" or "0.8"
    turn: str | int = "every"
    ground_truth: str | None = None


@dataclass(frozen=True)
class Scenario:
    id: str
    goal: str
    persona: str
    first_speaker: str  # user or assistant
    max_turns: int  # the assistant's replies at most
    criteria: tuple[str, ...]
    opening: str | None = None  # the first speaker's first message, as written
    expected_outcome: str | None = None
    assertions: tuple[Assertion, ...] = ()


def threshold_value(written: float | int | str) -> tuple[float, str]:
    """A threshold's value and its text: 0.8 or "4/5" (which must not exceed 1)."""
    if isinstance(written, str):
        fraction = Fraction(written.replace(" ", ""))
        return float(fraction), f"{fraction.numerator}/{fraction.denominator}"
    return float(written), f"{written:g}"


def _where(document: Any, path: list[Any]) -> tuple[str, str]:
    """The scenario (position and id) and the field a schema error's path points at."""
    if len(path) < 2 or path[0] != "scenarios" or not isinstance(path[1], int):
        return "the file", "/".join(map(str, path)) or "(top level)"
    position = path[1]
    entry = document["scenarios"][position]
    name = entry.get("id") if isinstance(entry, dict) else None
    scenario = f"scenario {position + 1}" + (f" ({name!r})" if isinstance(name, str) else "")
    return scenario, ".".join(map(str, path[2:]))


def _schema_problem(document: Any, error) -> str:
    path = list(error.absolute_path)
    scenario, field = _where(document, path)
    if error.validator == "required":
        missing = [key for key in error.validator_value if key not in error.instance]
        field = ".".join(filter(None, [field, missing[0] if missing else ""]))
        return f"{scenario}: field {field!r} is missing"
    if error.validator == "additionalProperties":
        allowed = set(error.schema.get("properties", {}))
        unknown = sorted(key for key in error.instance if key not in allowed)
        where = f"{field}." if field else ""
        return (f"{scenario}: unknown field {where + unknown[0]!r}" + (f" (and {unknown[1:]})" if unknown[1:] else "")
                + f"; the fields are {', '.join(sorted(allowed))}")
    if field.endswith("max_turns") and error.validator == "minimum":
        return f"{scenario}: field 'max_turns' is {error.instance!r}; it must be a whole number of at least 1"
    shown = repr(error.instance)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return f"{scenario}: field {field or '(the scenario)'!r}: {shown} is not valid ({error.validator} {error.validator_value!r})"


def _semantic_problems(document: dict[str, Any]) -> list[str]:
    problems = []
    first_position: dict[str, int] = {}
    for position, entry in enumerate(document["scenarios"]):
        scenario = f"scenario {position + 1} ({entry['id']!r})"
        if entry["id"] in first_position:
            problems.append(f"{scenario}: field 'id' repeats scenario {first_position[entry['id']] + 1}'s id; "
                            "each scenario needs its own")
        first_position.setdefault(entry["id"], position)
        if entry["first_speaker"] == "assistant" and "opening" not in entry:
            problems.append(f"{scenario}: field 'opening' is missing: an assistant that speaks first "
                            "says the opening message")
        for index, assertion in enumerate(entry.get("assertions", [])):
            (kind, body), = assertion.items()
            value, _ = threshold_value(body["threshold"])
            if value > 1:
                problems.append(f"{scenario}: field 'assertions.{index}.{kind}.threshold' is {body['threshold']!r}; "
                                "a threshold is a fraction from 0 to 1")
            turn = body.get("turn", "every")
            if isinstance(turn, int) and turn > entry["max_turns"]:
                problems.append(f"{scenario}: field 'assertions.{index}.{kind}.turn' is {turn}, past max_turns "
                                f"{entry['max_turns']}: that turn can never happen")
    return problems


def parse_scenarios(document: Any, origin: str) -> list[Scenario]:
    """The scenarios of a parsed file; ScenarioFileError listing every problem, `origin` naming the file."""
    validator = jsonschema.Draft202012Validator(shipped_schema(SCHEMA))
    errors = sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path])
    problems = [_schema_problem(document, error) for error in errors]
    if not problems:
        problems = _semantic_problems(document)
    if problems:
        shown = problems[:SHOWN_PROBLEMS]
        more = len(problems) - len(shown)
        raise ScenarioFileError(f"{origin}: {len(problems)} problem(s); nothing was simulated:\n"
                                + "\n".join(f"  - {problem}" for problem in shown)
                                + (f"\n  - ... and {more} more" if more else ""))
    scenarios = []
    for entry in document["scenarios"]:
        assertions = []
        for assertion in entry.get("assertions", []):
            (kind, body), = assertion.items()
            value, text = threshold_value(body["threshold"])
            assertions.append(Assertion(kind, value, text, body.get("turn", "every"), body.get("ground_truth")))
        scenarios.append(Scenario(
            id=entry["id"], goal=entry["goal"], persona=entry["persona"], first_speaker=entry["first_speaker"],
            max_turns=entry["max_turns"], criteria=tuple(entry["criteria"]), opening=entry.get("opening"),
            expected_outcome=entry.get("expected_outcome"), assertions=tuple(assertions)))
    return scenarios


def load_scenarios(path: str | Path) -> list[Scenario]:
    """The scenarios of a YAML file; ScenarioFileError (exit 2) for a file that cannot be used."""
    from evalbook.params import read_yaml  # aliases bounded, as a profile's are

    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ScenarioFileError(f"{path}: cannot read the scenario file: {error}") from None
    try:
        document = read_yaml(text)
    except yaml.YAMLError as error:
        raise ScenarioFileError(f"{path}: not valid YAML: {error}") from None
    return parse_scenarios(document, str(path))

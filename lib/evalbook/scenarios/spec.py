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
from evalbook.validation import input_validator, shipped_schema

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


# What a field must hold, said to a person, for the fields whose schema error would otherwise
# print the schema itself (a `oneOf`, a pattern).
FIELD_RULES = {
    "id": "an id is 1 to 80 letters, digits, '.', '_' or '-', starting with a letter or a digit, "
          "on one line",
    "max_turns": "it must be a whole number from 1 to 50",
    "threshold": "a threshold is a fraction from 0 to 1: a number such as 0.8, or text such as 4/5",
    "turn": "a turn is every, last, or a whole number from 1",
    "first_speaker": "it must be user or assistant",
}
TEXT_RULE = "it must hold some text"


def _order(path: list[Any]) -> tuple:
    """A problem's place in the list: by scenario number (2 before 11), then field, numerically."""
    return tuple((0, item, "") if isinstance(item, int) else (1, 0, str(item)) for item in path)


def _where(document: Any, path: list[Any]) -> tuple[str, str]:
    """The scenario (position and id) and the field a schema error's path points at."""
    if len(path) < 2 or path[0] != "scenarios" or not isinstance(path[1], int):
        return "the file", "/".join(map(str, path)) or "(top level)"
    return _scenario_name(document["scenarios"][path[1]], path[1]), ".".join(map(str, path[2:]))


def _scenario_name(entry: Any, position: int) -> str:
    name = entry.get("id") if isinstance(entry, dict) else None
    return f"scenario {position + 1}" + (f" ({name!r})" if isinstance(name, str) else "")


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


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
    name = str(path[-1]) if path else ""
    rule = FIELD_RULES.get(name)
    if rule is None and error.validator in ("minLength", "pattern") and isinstance(error.instance, str):
        rule = TEXT_RULE
    if rule is not None and len(path) > 2:
        return f"{scenario}: field {field!r} is {_shown(error.instance)}; {rule}"
    return f"{scenario}: field {field or '(the scenario)'!r}: {_shown(error.instance)} is not valid ({error.message})"


def _semantic_problems(document: Any) -> list[tuple[tuple, str]]:
    """What a schema cannot say, for every scenario well-formed enough to tell: ids used twice,
    an assistant that speaks first with nothing to say, a threshold over 1, a turn past
    max_turns. Each with its place (_order) beside the schema's problems."""
    entries = document.get("scenarios") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        return []
    problems = []
    first_position: dict[str, int] = {}
    for position, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        scenario = _scenario_name(entry, position)

        def add(field: str, text: str) -> None:
            problems.append((_order(["scenarios", position, *field.split(".")]), f"{scenario}: field {field!r} {text}"))

        if isinstance(entry.get("id"), str):
            if entry["id"] in first_position:
                add("id", f"repeats scenario {first_position[entry['id']] + 1}'s id; each scenario needs its own")
            first_position.setdefault(entry["id"], position)
        if entry.get("first_speaker") == "assistant" and "opening" not in entry:
            add("opening", "is missing: an assistant that speaks first says the opening message")
        max_turns = entry.get("max_turns")
        assertions = entry.get("assertions")
        for index, assertion in enumerate(assertions if isinstance(assertions, list) else []):
            if not isinstance(assertion, dict) or len(assertion) != 1:
                continue
            (kind, body), = assertion.items()
            if not isinstance(body, dict):
                continue
            threshold = _readable_threshold(body.get("threshold"))
            if threshold is not None and threshold > 1:
                add(f"assertions.{index}.{kind}.threshold",
                    f"is {body['threshold']!r}; a threshold is a fraction from 0 to 1")
            turn = body.get("turn")
            if (type(turn) is int and type(max_turns) is int and max_turns >= 1  # noqa: E721 - not a bool
                    and turn > max_turns):
                add(f"assertions.{index}.{kind}.turn",
                    f"is {turn}, past max_turns {max_turns}: that turn can never happen")
    return problems


def _readable_threshold(written: Any) -> float | None:
    """A threshold's value where it is written as one could be (the schema names the others)."""
    if isinstance(written, str):
        try:
            return threshold_value(written)[0]
        except (ValueError, ZeroDivisionError):
            return None
    return None


def parse_scenarios(document: Any, origin: str) -> list[Scenario]:
    """The scenarios of a parsed file; ScenarioFileError listing every problem, `origin` naming the file."""
    validator = input_validator(shipped_schema(SCHEMA))
    problems = [(_order(list(error.absolute_path)), _schema_problem(document, error))
                for error in validator.iter_errors(document)]
    problems += _semantic_problems(document)
    if problems:
        lines = [text for _, text in sorted(problems, key=lambda problem: problem[0])]
        shown = lines[:SHOWN_PROBLEMS]
        more = len(lines) - len(shown)
        raise ScenarioFileError(f"{origin}: {len(lines)} problem(s); nothing was simulated:\n"
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

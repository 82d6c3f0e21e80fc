"""The user's own assertions: what an answer must hold, say or stay under, checked exactly.

An Assertion is one check of a checks file (or of a `check_*` column of the evaluation set,
evalbook.checks.checksfile reads both) with its scope. `run_assertion` checks one answer and
gives a CheckOutcome named after the assertion; `turn_outcomes` checks a scenario's assistant
replies (every one, the last, or reply N). The kinds, their arguments and what each passes on
are in docs/checks-assertions.md:

- text: contains, contains_any, contains_all, not_contains, equals (the whole answer, without its
  surrounding whitespace), regex and not_regex (Python's `re`, searched anywhere). Both sides
  are compared in Unicode NFC, so an é typed as one character or as e and an accent is the same;
  `ignore_case` compares them casefolded (Unicode's case folding: STRASSE holds straße).
- number: a number written in digits (ASCII digits, an optional sign, thousands separated by
  commas, a decimal point), within a tolerance of the value, and with its unit right before or
  after it when a unit is given. Number words are the fact check's (evalbook.checks.facts).
- json: the whole answer parses as strict JSON (no NaN), and matches a JSON Schema when given.
- max_words (whitespace-separated words), max_chars (characters, NFC), latency_ms and cost_usd
  (limits on what 00_generate recorded for the answer).

Every reason is plain text on one line: user text is quoted with repr (controls shown as
escapes) and cut to QUOTED_CHARACTERS, and pages escape it like any other user text.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from evalbook.checks.protocol import CheckOutcome, guarded
from evalbook.escaping import visible_controls
from evalbook.validation import jsonschema

TEXT_KINDS = ("contains", "contains_any", "contains_all", "not_contains", "equals", "regex", "not_regex")
KINDS = (*TEXT_KINDS, "number", "json", "max_words", "max_chars", "latency_ms", "cost_usd")
TURNS = ("every", "last")
# Characters of user text a reason quotes: enough to recognise it, short enough for a table cell.
QUOTED_CHARACTERS = 80
SHOWN_NUMBERS = 5
# A number in digits: an optional sign (the ASCII ones and U+2212 minus), digits with commas
# between groups of three or without, and a decimal part. Not after a letter, digit, point or
# comma (so "v2", "1.2.3" and "12,34" hold no number), and not followed by more digits.
_NUMBER = r"[-+\u2212]?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?"
_NUMBER_ALONE = rf"(?<![\w.,])(?P<number>{_NUMBER})(?![.,]?[0-9])"
_GAP = r"[^\S\n]*"  # spaces (no-break ones too) between a number and its unit, on one line


def quoted(text: str) -> str:
    """`text` as a reason quotes it: repr (one line, control characters as escapes) of at most
    QUOTED_CHARACTERS characters, a longer text cut with an ellipsis."""
    cut = text if len(text) <= QUOTED_CHARACTERS else text[:QUOTED_CHARACTERS - 1] + "\u2026"
    return repr(cut)


def _shown_pattern(pattern: str) -> str:
    """A regex as written, between slashes, on one line and cut like quoted text."""
    one_line = visible_controls(pattern).replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    cut = one_line if len(one_line) <= QUOTED_CHARACTERS else one_line[:QUOTED_CHARACTERS - 1] + "\u2026"
    return f"/{cut}/"


def _cut(text: str, limit: int = 2 * QUOTED_CHARACTERS) -> str:
    return visible_controls(" ".join(text.split()))[:limit]


def _plain_number(value: float | int | Decimal) -> str:
    """A number as written in a reason: 14, 0.0125, 1e-05 as 0.00001, no float noise."""
    return format(Decimal(repr(value)) if isinstance(value, float) else Decimal(value), "f")


def _listed(items: Sequence[str], total: int | None = None) -> str:
    """The first SHOWN_NUMBERS items, and how many more of `total` (default: len(items))."""
    total = len(items) if total is None else total
    shown = ", ".join(items[:SHOWN_NUMBERS])
    return shown + (f" and {total - SHOWN_NUMBERS} more" if total > SHOWN_NUMBERS else "")


@dataclass(frozen=True)
class Assertion:
    """One check and its scope.

    `argument` is as written: a text (contains, not_contains, equals, regex, not_regex), a list
    of texts (contains_any, contains_all, not_contains), a number or {value, tolerance, unit}
    (number), true or {schema} (json), a count (max_words, max_chars) or a limit (latency_ms,
    cost_usd). The scope: `metadata` pairs a row's metadata must hold (all of them), `ids` the
    example ids it is limited to, and `turn` (every, last or a reply number from 1) makes it a
    check of scenario replies, with `ids` naming scenarios. `place` names where it was written
    ("entry 2 ('refund')", "column 'check_contains', row 4 (id 's04')") and `column` the
    evaluation set's column it came from, if any.

    It is built from a checked file or column (checksfile); a regex that does not compile or a
    schema that is not JSON Schema raises here (re.error, jsonschema's SchemaError)."""

    name: str
    kind: str
    argument: Any
    ignore_case: bool = False
    metadata: tuple[tuple[str, Any], ...] = ()
    ids: frozenset[str] | None = None
    turn: str | int | None = None
    place: str = ""
    column: str | None = None
    _prepared: Any = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown check {self.kind!r}; the checks are {', '.join(KINDS)}")
        object.__setattr__(self, "_prepared", _PREPARE.get(self.kind, lambda a: a.argument)(self))


# ---------------------------------------------------------------- preparing an argument

def _fold(text: str, ignore_case: bool) -> str:
    normal = unicodedata.normalize("NFC", text)
    return normal.casefold() if ignore_case else normal


def _texts(assertion: Assertion) -> list[tuple[str, str]]:
    """Each text of the argument as written, and as compared."""
    written = [assertion.argument] if isinstance(assertion.argument, str) else list(assertion.argument)
    return [(text, _fold(text, assertion.ignore_case)) for text in written]


def _regex(assertion: Assertion) -> re.Pattern[str]:
    return re.compile(assertion.argument, re.IGNORECASE if assertion.ignore_case else 0)


@dataclass(frozen=True)
class _NumberTarget:
    value: Decimal
    tolerance: Decimal
    unit: str | None
    pattern: re.Pattern[str]
    shown: str  # "14 (±0) days", "£14 (±0)"


def _is_currency(unit: str) -> bool:
    return all(unicodedata.category(char) == "Sc" for char in unit)


def _number_target(assertion: Assertion) -> _NumberTarget:
    spec = assertion.argument if isinstance(assertion.argument, dict) else {"value": assertion.argument}
    value, tolerance, unit = spec["value"], spec.get("tolerance", 0), spec.get("unit")
    if unit is None:
        pattern = re.compile(_NUMBER_ALONE)
        shown = f"{_plain_number(value)} (±{_plain_number(tolerance)})"
    else:
        written = re.escape(unit)
        before = r"(?<!\w)" if re.match(r"\w", unit) else ""
        after = r"(?!\w)" if re.search(r"\w$", unit) else ""
        pattern = re.compile(rf"(?:{before}(?P<before>{written}){_GAP})?{_NUMBER_ALONE}"
                             rf"(?:{_GAP}(?P<after>{written}){after})?", re.IGNORECASE)
        shown = (f"{unit}{_plain_number(value)} (±{_plain_number(tolerance)})" if _is_currency(unit)
                 else f"{_plain_number(value)} (±{_plain_number(tolerance)}) {unit}")
    # Decimal, from the shortest repr of each float: 14.3 - 14.2 is 0.1 here, not 0.10000000000000142.
    return _NumberTarget(Decimal(repr(value)), Decimal(repr(tolerance)), unit, pattern, shown)


def _json_validator(assertion: Assertion):
    if not isinstance(assertion.argument, dict):
        return None
    return _schema_validator(json.dumps(assertion.argument["schema"], sort_keys=True))


@lru_cache(maxsize=256)
def _schema_validator(schema_text: str):
    """A validator of an embedded schema, checked as JSON Schema first: once per schema, as a
    check column repeats one schema on thousands of rows and checking it takes a millisecond."""
    schema = json.loads(schema_text)
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator_class.check_schema(schema)
    return validator_class(schema)


_PREPARE: dict[str, Callable[[Assertion], Any]] = {
    **{kind: _texts for kind in ("contains", "contains_any", "contains_all", "not_contains", "equals")},
    "regex": _regex, "not_regex": _regex, "number": _number_target, "json": _json_validator,
}


# ---------------------------------------------------------------- checking an answer

Result = tuple[str, str, dict[str, Any]]  # status, reason, details


def _contains(assertion: Assertion, answer: str) -> Result:
    ((written, wanted),) = assertion._prepared
    if wanted in _fold(answer, assertion.ignore_case):
        return "pass", f"{quoted(written)} found in the answer", {}
    return "fail", f"{quoted(written)} not found in the answer", {}


def _contains_any(assertion: Assertion, answer: str) -> Result:
    folded = _fold(answer, assertion.ignore_case)
    for written, wanted in assertion._prepared:
        if wanted in folded:
            return "pass", f"{quoted(written)} found in the answer", {}
    return "fail", f"none of {', '.join(quoted(w) for w, _ in assertion._prepared)} found in the answer", {}


def _contains_all(assertion: Assertion, answer: str) -> Result:
    folded = _fold(answer, assertion.ignore_case)
    missing = [written for written, wanted in assertion._prepared if wanted not in folded]
    if not missing:
        return "pass", f"all {len(assertion._prepared)} found in the answer", {}
    return ("fail", f"{', '.join(map(quoted, missing))} not found in the answer "
            f"({len(missing)} of {len(assertion._prepared)} missing)", {})


def _not_contains(assertion: Assertion, answer: str) -> Result:
    folded = _fold(answer, assertion.ignore_case)
    held = [written for written, wanted in assertion._prepared if wanted in folded]
    if held:
        return "fail", f"the answer holds {', '.join(map(quoted, held))} though it must not", {}
    return "pass", f"{', '.join(quoted(w) for w, _ in assertion._prepared)} not in the answer", {}


def _equals(assertion: Assertion, answer: str) -> Result:
    ((written, wanted),) = assertion._prepared
    if _fold(answer.strip(), assertion.ignore_case) == wanted:
        return "pass", f"the answer equals {quoted(written)}", {}
    return "fail", f"the answer is {quoted(answer.strip())}, not {quoted(written)}", {}


def _regex_search(assertion: Assertion, answer: str) -> Result:
    found = assertion._prepared.search(unicodedata.normalize("NFC", answer))
    shown = _shown_pattern(assertion.argument)
    if assertion.kind == "regex":
        if found:
            return "pass", f"the answer matches {shown}: {quoted(found.group())}", {}
        return "fail", f"no match for {shown} in the answer", {}
    if found:
        return "fail", f"the answer holds {quoted(found.group())}, matching {shown}, though it must not", {}
    return "pass", f"no match for {shown} in the answer", {}


def _number_value(written: str) -> Decimal:
    return Decimal(written.replace(",", "").replace("\u2212", "-"))


def _number(assertion: Assertion, answer: str) -> Result:
    """Streams the matches, keeping the first few for the reason: a 10 MB answer holds millions
    of numbers, and a list of them all took seconds more than the scan."""
    target: _NumberTarget = assertion._prepared
    with_unit: list[str] = []
    bare: list[str] = []
    n_with_unit = n_bare = 0
    for match in target.pattern.finditer(answer):
        if target.unit is not None and not (match.group("before") or match.group("after")):
            n_bare += 1
            if n_bare <= SHOWN_NUMBERS:
                bare.append(match.group("number"))
            continue
        if abs(_number_value(match.group("number")) - target.value) <= target.tolerance:
            return "pass", f"{_cut(match.group(), QUOTED_CHARACTERS)} found in the answer", {}
        n_with_unit += 1
        if n_with_unit <= SHOWN_NUMBERS:
            with_unit.append(_cut(match.group(), QUOTED_CHARACTERS))
    missing = f"no number {target.shown} in the answer"
    if n_with_unit:
        return "fail", f"{missing}; it holds {_listed(with_unit, n_with_unit)}", {}
    if n_bare:
        return "fail", f"{missing}; it holds no number with {target.unit} (numbers: {_listed(bare, n_bare)})", {}
    return "fail", f"{missing}; it holds no number", {}


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _json(assertion: Assertion, answer: str) -> Result:
    try:
        document = json.loads(answer, parse_constant=_not_json)
    except ValueError as error:  # json.JSONDecodeError is one
        return "fail", f"the answer is not JSON: {_cut(str(error))}", {}
    validator = assertion._prepared
    if validator is None:
        return "pass", "the answer is JSON", {}
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is None:
        return "pass", "the answer is JSON and matches the schema", {}
    at = f" at /{'/'.join(str(part) for part in error.absolute_path)}" if error.absolute_path else ""
    return "fail", f"the answer's JSON does not match the schema{at}: {_cut(error.message)}", {}


def _max_words(assertion: Assertion, answer: str) -> Result:
    words = len(answer.split())
    verdict = "within" if words <= assertion.argument else "over"
    return ("pass" if words <= assertion.argument else "fail",
            f"{words} word{'s' * (words != 1)}, {verdict} max_words {assertion.argument}", {"words": words})


def _max_chars(assertion: Assertion, answer: str) -> Result:
    characters = len(unicodedata.normalize("NFC", answer))
    verdict = "within" if characters <= assertion.argument else "over"
    return ("pass" if characters <= assertion.argument else "fail",
            f"{characters} character{'s' * (characters != 1)}, {verdict} max_chars {assertion.argument}",
            {"characters": characters})


_ON_ANSWER: dict[str, Callable[[Assertion, str], Result]] = {
    "contains": _contains, "contains_any": _contains_any, "contains_all": _contains_all,
    "not_contains": _not_contains, "equals": _equals, "regex": _regex_search, "not_regex": _regex_search,
    "number": _number, "json": _json, "max_words": _max_words, "max_chars": _max_chars,
}


def _recorded(value: float | None) -> float | None:
    """A recorded measure; None for a missing one, which a table may hold as NaN."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _limit(assertion: Assertion, measured: float | None) -> CheckOutcome:
    limit = assertion.argument
    if assertion.kind == "latency_ms":
        what, shown = "latency", None if measured is None else f"latency {measured:,.0f} ms"
    else:
        what, shown = "cost", None if measured is None else f"cost {_plain_number(measured)} USD"
    if measured is None:
        return CheckOutcome(assertion.name, "error", f"no {what} was recorded for this answer")
    within = measured <= limit
    return CheckOutcome(assertion.name, "pass" if within else "fail",
                        f"{shown}, {'within' if within else 'over'} {assertion.kind} {_plain_number(limit)}",
                        {assertion.kind: measured})


def run_assertion(assertion: Assertion, answer: str | None, *, latency_ms: float | None = None,
                  cost_usd: float | None = None) -> CheckOutcome:
    """The assertion on one answer: pass or fail with the reason, or an error (no answer to
    check, no latency or cost recorded, or the check raised: protocol.guarded), named after the
    assertion. `answer` None is a missing answer; "" is an empty one, and is checked."""
    def run() -> CheckOutcome:
        if assertion.kind == "latency_ms":
            return _limit(assertion, _recorded(latency_ms))
        if assertion.kind == "cost_usd":
            return _limit(assertion, _recorded(cost_usd))
        if not isinstance(answer, str):
            return CheckOutcome(assertion.name, "error", "no generated answer to check")
        status, reason, details = _ON_ANSWER[assertion.kind](assertion, answer)
        return CheckOutcome(assertion.name, status, reason, details)

    return guarded(assertion.name, run)


# ---------------------------------------------------------------- scope

def same_value(found: Any, wanted: Any) -> bool:
    """A metadata value equals the one a check selects: text to text, a number to a number
    (1 to 1.0), true/false to true/false (never to 1 or 0); a missing value to nothing."""
    if found is None:
        return False
    if isinstance(found, bool) or isinstance(wanted, bool):
        return isinstance(found, bool) and isinstance(wanted, bool) and found == wanted
    if isinstance(found, (int, float)) and isinstance(wanted, (int, float)):
        return found == wanted
    return isinstance(found, str) and isinstance(wanted, str) and found == wanted


def applies_to(assertion: Assertion, example_id: Any, metadata: Mapping[str, Any]) -> bool:
    """Whether the assertion checks this row of the evaluation set: a row check (no `turn`) whose
    ids, if listed, hold the example's id, and whose metadata pairs the row's metadata holds."""
    if assertion.turn is not None:
        return False
    if assertion.ids is not None and str(example_id) not in assertion.ids:
        return False
    return all(same_value(metadata.get(column), value) for column, value in assertion.metadata)


def applies_to_scenario(assertion: Assertion, scenario_id: str) -> bool:
    """Whether the assertion checks this scenario's replies: a scenario check (with `turn`) whose
    ids, if listed, hold the scenario's id."""
    return assertion.turn is not None and (assertion.ids is None or scenario_id in assertion.ids)


def turn_outcomes(assertion: Assertion, assistant_replies: Sequence[str]) -> list[CheckOutcome]:
    """The assertion on the replies its turn covers, one outcome per reply, its number from 1 in
    `details["reply"]` and its reason. A reply that never came (turn N past the last, or no
    reply at all) is one error: the check could not be applied."""
    if assertion.turn is None:
        raise ValueError(f"check {assertion.name!r} has no turn: it checks the evaluation set's rows, "
                         "not a scenario's replies")
    count = len(assistant_replies)
    if not count:
        return [CheckOutcome(assertion.name, "error", "the conversation has no assistant reply to check")]
    if assertion.turn == "every":
        numbers = range(1, count + 1)
    elif assertion.turn == "last":
        numbers = [count]
    elif assertion.turn > count:
        return [CheckOutcome(assertion.name, "error", f"reply {assertion.turn} never came: the conversation has "
                             f"{count} repl{'ies' if count != 1 else 'y'}", {"reply": assertion.turn})]
    else:
        numbers = [assertion.turn]
    outcomes = []
    for number in numbers:
        outcome = run_assertion(assertion, assistant_replies[number - 1])
        outcomes.append(CheckOutcome(assertion.name, outcome.status, f"reply {number}: {outcome.reason}",
                                     {"reply": number, **outcome.details}))
    return outcomes

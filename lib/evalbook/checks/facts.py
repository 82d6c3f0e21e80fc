"""The fact check: which answers are wrong because a fact changed (issue 48, item 2).

From the answer, the reference and the context (where the row has one) it takes the facts that
decide correctness: numbers in digits or words, amounts of money, percentages, quantities with
their unit, times, dates, years, weekdays, months and names. Then each answer fact that the
reference does not hold is

- changed: the reference holds a different fact of the same kind that the answer leaves out
  ("£15: the reference says £14"). It fails, even when the context mentions the answer's value:
  mixing up two facts of one document is the commonest RAG error.
- unsupported: neither the reference nor the context holds it. It fails.
- beyond the reference: the context holds it and it replaces nothing. Reported, not failed
  (FactSettings.fail_beyond_reference makes it fail).

A reference fact that the answer leaves out is missing: reported, not failed (fail_missing makes it
fail). An answer with no fact passes with the reason "no fact to check", which is no evidence that
it is right. The check is exact and deterministic: regular expressions and tables (docs/checks.md).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Hashable

from evalbook.checks import dates, names, numbers
from evalbook.checks.found import Found, Scan, masked
from evalbook.checks.protocol import CheckOutcome

CHECK = "facts"
KINDS = ("number", "ordinal", "money", "percent", "quantity", "time", "date", "year", "weekday", "month", "name")
WEB_ADDRESS = re.compile(r"\b(?:https?://|www\.)\S+|\b[\w.+-]+@[\w-]+\.[\w.-]+")
# "1." or "(2)" numbering a list is no fact: an answer that lists steps would fail on its numbering
LIST_MARKER = re.compile(r"(?m)^[ \t]*(?:[-*•][ \t]*)?\(?\d{1,2}[.)](?=[ \t])|(?<![\w(])\(\d{1,2}\)(?=[ \t])")
# "are: 1. Book ... 2. Pay": a list written on one line, each number after a colon or a sentence's
# end and before a capital; numbering only when the next or previous number is there in its style
INLINE_LIST_NUMBER = re.compile(r"[:.!?][\"”’')\]]*[ \t]+(?P<number>\d{1,2})(?P<mark>[.)])"
                                r"(?=[ \t]+[\"“‘(]?[A-Z])")
NEIGHBOUR_BEFORE = re.compile(r"([^\W\d_]+)[^\w]*$")
NEIGHBOUR_AFTER = re.compile(r"[^\w]*([^\W\d_]+)")
# words that stand beside any name ("the Maple Court", "Hope and Love"): sharing one of them does not
# put one name in another's place
NAME_NEIGHBOURS_TOO_COMMON = {"the", "a", "an", "and", "or"}
SHOWN = 6  # facts listed by name in a passing reason before "and N more"


@dataclass(frozen=True)
class Fact:
    """One fact of a text. `kind` is one of KINDS; `value` is what is compared for equality:
    ("number", Decimal("14")), ("ordinal", 3), ("GBP", Decimal("14")) for money,
    ("percent", Decimal("25")), (dimension, Decimal in the base unit) for a quantity
    (("length", Decimal("5000")) for 5 km), ("time", 21, 0) or ("time12", 9, 30) when the text
    leaves the half of the day open, ("date", 1989, 11, 9) with None for a part not given,
    ("year", 1989) or ("decade", 1990), ("weekday", 0) for Monday, ("month", 11) and
    ("name", "dr smith"). `text` is the span as written, text[start:end]."""

    kind: str
    value: Hashable
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class FactSettings:
    """What else fails besides changed and unsupported facts (a profile's checks.facts)."""

    fail_beyond_reference: bool = False
    fail_missing: bool = False


@dataclass(frozen=True)
class _Read:
    """What one text offers: its facts other than names, the keys they provide, and the spans
    they take (which names may not cross)."""

    text: str
    facts: tuple[Found, ...]
    provides: frozenset
    quantities: tuple[Found, ...]
    spans: tuple[tuple[int, int], ...]


@lru_cache(maxsize=8192)
def _read(text: str) -> _Read:
    scan = Scan(text)
    for pattern in (WEB_ADDRESS, LIST_MARKER):
        for match in pattern.finditer(text):
            scan.take(match.start(), match.end())
    for start, end in _inline_list_numbers(text):
        scan.take(start, end)
    dates.scan_dates(scan)
    dates.scan_times(scan)
    numbers.scan_money(scan)
    numbers.scan_percent(scan)
    numbers.scan_quantities(scan)
    numbers.scan_ordinals(scan)
    numbers.scan_numbers(scan)
    dates.scan_weekdays(scan)
    dates.scan_weekday_abbreviations(scan, names.sentence_start)
    dates.scan_months(scan, names.sentence_start)
    facts = tuple(sorted(scan.found, key=lambda found: found.start))
    return _Read(text, facts, frozenset().union(*(found.provides for found in facts)),
                 tuple(found for found in facts if found.kind == "quantity"), tuple(scan.spans))


def _inline_list_numbers(text: str) -> list[tuple[int, int]]:
    """The spans of the numbers of a list written on one line ("1. Book a slot. 2. Pay."): a
    number that a list's neighbour (the number before or after it, in the same style) does not
    stand beside is a fact ("The answer is: 42. That settles it.")."""
    marks = {(int(match["number"]), match["mark"]): (match.start("number"), match.end("mark"))
             for match in INLINE_LIST_NUMBER.finditer(text)}
    return [span for (number, mark), span in marks.items()
            if (number - 1, mark) in marks or (number + 1, mark) in marks]


@lru_cache(maxsize=8192)
def _names(text: str) -> tuple[tuple[Found, ...], tuple[Found, ...]]:
    """A text's names, and apart the single capitalised words that start a sentence; kept apart
    from _read because a context's names are wanted only when an answer name is not in the
    reference."""
    found, initials = names.scan_names(text, masked(text, _read(text).spans))
    return tuple(sorted(found, key=lambda name: name.start)), tuple(initials)


@lru_cache(maxsize=8192)
def _streams(text: str) -> tuple[str, str]:
    return names.streams(text)


def extract_facts(text: str) -> list[Fact]:
    """The facts of one text in the order written: numbers, ordinals, money, percentages,
    quantities, times, dates, years, weekdays, months and names (a sentence's first word alone
    only when the text also writes it capitalised inside a sentence)."""
    return [Fact(found.kind, found.value, text[found.start:found.end], found.start, found.end)
            for found in sorted(_read(text).facts + _names(text)[0], key=lambda found: found.start)]


class _Side:
    """One text of a row as the check sees it: its facts with the names the row makes of its
    sentence-initial words, and whether it holds another text's fact."""

    def __init__(self, text: str, others: Callable[[str], bool]) -> None:
        self.read = _read(text)
        self._others = others
        self._names: list[Found] | None = None
        self._all_names: list[Found] = []

    def names(self) -> list[Found]:
        """The text's names, with those of its sentence-initial words that the row's other texts
        write capitalised inside a sentence."""
        if self._names is None:
            found, initials = _names(self.read.text)
            promoted = [name for name in initials if self._others(self.read.text[name.start:name.end])]
            self._names = sorted(found + tuple(promoted), key=lambda name: name.start)
            self._all_names = self._names + [name for name in initials if name not in promoted]
        return self._names

    def _every_name(self) -> list[Found]:
        """The names with the sentence-initial words that are not names: "Smith" at a sentence's
        start still holds "Dr. Smith"."""
        self.names()
        return self._all_names

    def facts(self) -> list[Found]:
        return sorted(self.read.facts + tuple(self.names()), key=lambda found: found.start)

    def holds(self, found: Found) -> bool:
        if found.kind == "name":
            return names.held_name(found, self._every_name, lambda: _streams(self.read.text))
        if found.needs & self.read.provides:
            return True
        return found.kind == "quantity" and any(numbers.same_quantity(found, other)
                                                for other in self.read.quantities)

    def text_of(self, found: Found) -> str:
        return " ".join(self.read.text[found.start:found.end].split())

    def neighbours(self, found: Found) -> set[str]:
        """The words right before and after a fact, for telling a name put in another's place."""
        text = self.read.text
        before = NEIGHBOUR_BEFORE.search(text[max(0, found.start - 40):found.start])
        after = NEIGHBOUR_AFTER.match(text, found.end, found.end + 40)
        return ({("before", before.group(1).lower())} if before else set()) | (
            {("after", after.group(1).lower())} if after else set())


def _implied(found: Found) -> list[Found]:
    """The year and the month that a reference's date also states, so that "1990" or "December"
    in the answer is a change from "9 November 1989"."""
    if found.kind != "date" or len(found.needs) > 1:
        return []
    _, year, month, _ = found.value
    parts = [("month", month)] + ([("year", year)] if year is not None else [])
    return [Found(key[0], key, found.start, found.end, frozenset({key}), frozenset({key}), key[0])
            for key in parts]


def _unique(facts: list[Found]) -> list[Found]:
    seen: set = set()
    kept = []
    for found in facts:
        if (found.kind, found.value) not in seen:
            seen.add((found.kind, found.value))
            kept.append(found)
    return kept


def _listed(texts: list[str]) -> str:
    shown = ", ".join(texts[:SHOWN])
    return shown if len(texts) <= SHOWN else f"{shown} and {len(texts) - SHOWN} more"


def check_facts(answer: str, reference: str, context: str | None = None,
                settings: FactSettings = FactSettings()) -> CheckOutcome:
    """The fact check's outcome for one row: fail when an answer fact changed or nothing supports
    it (and, by the settings, when it is only in the context or a reference fact is left out),
    with one readable sentence saying which; pass otherwise, saying what was checked."""
    has_context = bool(context and context.strip())

    def named_in(*texts: str | None) -> Callable[[str], bool]:
        return lambda word: any(text and names.capitalised_inside_a_sentence(word, text) for text in texts)

    answer_side = _Side(answer, named_in(reference, context if has_context else None))
    reference_side = _Side(reference, named_in(answer, context if has_context else None))
    context_side: _Side | None = None

    def in_context(found: Found) -> bool:
        nonlocal context_side
        if not has_context:
            return False
        if context_side is None:
            context_side = _Side(context, named_in(answer, reference))
        return context_side.holds(found)

    answer_facts = _unique(answer_side.facts())
    reference_facts = _unique(reference_side.facts())
    pending = [found for found in answer_facts if not reference_side.holds(found)]
    left_out = [found for found in reference_facts + [part for f in reference_facts for part in _implied(f)]
                if not answer_side.holds(found)]

    changed: list[tuple[Found, Found]] = []
    unsupported: list[Found] = []
    beyond: list[Found] = []
    rank: dict[str, int] = {}
    new_of_family = Counter(found.family for found in pending)
    for found in pending:
        written = _written_number(found)
        candidates = [other for other in left_out if other.family == found.family] + [
            other for other in left_out if other.family != found.family
            and written is not None and _written_number(other) == written]
        alone = (new_of_family[found.family] == 1 and len(candidates) == 1
                 and _agreeing_before(found, answer_facts, reference_side)
                 == _agreeing_before(candidates[0], reference_facts, answer_side))
        replaced = _replaced(found, candidates, rank, answer_side, reference_side, in_context, alone)
        if replaced is not None:
            changed.append((found, replaced))
        elif in_context(found):
            beyond.append(found)
        else:
            unsupported.append(found)
    changed += _repeated_in_place(answer_side, reference_side, left_out, changed)
    changed.sort(key=lambda pair: pair[0].start)
    replaced_spans = {(other.start, other.end) for _, other in changed}
    missing = [found for found in reference_facts
               if found in left_out and (found.start, found.end) not in replaced_spans]

    return _outcome(answer_side, reference_side, answer_facts, changed, unsupported, beyond, missing,
                    has_context, settings)


def _repeated_in_place(answer_side: _Side, reference_side: _Side, left_out: list[Found],
                       changed: list[tuple[Found, Found]]) -> list[tuple[Found, Found]]:
    """Changes to a value the reference also has elsewhere: "6 rooms and 6 doors" for "5 rooms and
    6 doors". An answer fact written more often than the reference writes it, between the words
    around a reference fact of its kind that the answer leaves out, replaced that one."""
    paired = {(other.start, other.end) for _, other in changed}
    open_facts = [found for found in left_out if found.kind != "name" and (found.start, found.end) not in paired
                  and found in reference_side.read.facts]
    if not open_facts:
        return []
    counts = Counter((found.kind, found.value) for found in reference_side.read.facts)
    written = Counter((found.kind, found.value) for found in answer_side.read.facts)
    found_changes = []
    for found in answer_side.read.facts:
        if written[(found.kind, found.value)] <= counts[(found.kind, found.value)] or not open_facts:
            continue
        around = answer_side.neighbours(found)
        for other in open_facts:
            if other.family == found.family and around & reference_side.neighbours(other):
                found_changes.append((found, other))
                open_facts.remove(other)
                written[(found.kind, found.value)] -= 1
                break
    return found_changes


def _written_number(found: Found):
    """The figure of an amount, a percentage or a quantity as written (5 of "5 km"), by which one
    replaces another of a different unit ("5 km" for "5 kg"); None for other kinds."""
    if found.kind in ("money", "percent"):
        return found.value[1]
    if found.kind == "quantity":
        return found.extra[1]
    return None


def _agreeing_before(found: Found, facts: list[Found], other_side: _Side) -> int:
    """How many facts that the other text holds come before this one: a fact's place among the
    facts both texts agree on."""
    return sum(1 for other in facts if other.start < found.start and other_side.holds(other))


def _replaced(found: Found, candidates: list[Found], rank: dict[str, int], answer_side: _Side,
              reference_side: _Side, in_context: Callable[[Found], bool], alone: bool) -> Found | None:
    """The reference fact that an answer fact stands in place of, or None. A candidate written
    between the same words comes first; else they pair in the order written. A name that the
    context holds replaces another only between the same words (not merely "the" or "and"), or
    when it is the answer's one new name and the reference's one left out, in the same place among
    the facts both hold (after as many of them): a good answer adds names from its context far
    more often than it swaps two."""
    if not candidates:
        return None
    around = answer_side.neighbours(found)
    if found.kind == "name":
        around = {(side, word) for side, word in around if word not in NAME_NEIGHBOURS_TOO_COMMON}
    alike = [other for other in candidates if around & reference_side.neighbours(other)]
    if alike:
        return alike[0]
    if found.kind == "name" and not alone and in_context(found):
        return None
    index = rank.get(found.family, 0)
    rank[found.family] = index + 1
    return candidates[min(index, len(candidates) - 1)]


def _outcome(answer_side: _Side, reference_side: _Side, answer_facts: list[Found],
             changed: list[tuple[Found, Found]], unsupported: list[Found], beyond: list[Found],
             missing: list[Found], has_context: bool, settings: FactSettings) -> CheckOutcome:
    said = answer_side.text_of
    reference_said = reference_side.text_of
    not_held = ("neither the reference nor the context holds it" if has_context
                else "the reference does not hold it, and there is no context")
    problems: list[tuple[int, str]] = [(a.start, f"{said(a)}: the reference says {reference_said(r)}")
                                       for a, r in changed]
    problems += [(found.start, f"{said(found)}: {not_held}") for found in unsupported]
    if settings.fail_beyond_reference:
        problems += [(found.start, f"{said(found)}: only the context holds it, not the reference")
                     for found in beyond]
    problems.sort(key=lambda problem: problem[0])
    if settings.fail_missing:
        problems += [(0, f"{reference_said(found)}: the answer leaves it out") for found in missing]

    details = {
        "changed": [{"kind": a.kind, "answer": said(a), "reference": reference_said(r)} for a, r in changed],
        "unsupported": [{"kind": found.kind, "answer": said(found)} for found in unsupported],
        "beyond_reference": [{"kind": found.kind, "answer": said(found)} for found in beyond],
        "missing": [{"kind": found.kind, "reference": reference_said(found)} for found in missing],
    }
    if problems:
        return CheckOutcome(CHECK, "fail", "; ".join(text for _, text in problems), details)

    parts = []
    if not answer_facts:
        parts.append("no fact to check: the answer states no number, amount, date, time or name")
    else:
        questioned = {id(found) for found in beyond}
        held = [said(found) for found in answer_facts if id(found) not in questioned]
        if held:
            count = "the answer's only fact" if len(answer_facts) == 1 else (
                f"all {len(held)} of the answer's facts" if len(held) == len(answer_facts)
                else f"{len(held)} of the answer's {len(answer_facts)} facts")
            parts.append(f"the reference holds {count} ({_listed(held)})")
        if beyond:
            parts.append(f"beyond the reference, the context holds {_listed([said(f) for f in beyond])}")
    if missing:
        parts.append(f"the answer leaves out {_listed([reference_said(f) for f in missing])}")
    return CheckOutcome(CHECK, "pass", "; ".join(parts), details)

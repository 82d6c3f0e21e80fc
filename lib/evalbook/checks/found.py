"""What the fact check's extractors find in one text, before it becomes a public Fact.

A fact is matched by keys, not by its value alone, so that one fact can be written in forms that
hold more or less: `needs` are the keys any one of which, in another text, holds this fact;
`provides` are the keys this fact gives that text. "9 November 1989" provides its year, its month
and its weekday as well as itself; "9:30" (morning or evening) needs 9:30 or 21:30; "£14" is held
by "£14" or by a bare "14", and gives "14" to a bare number. `family` is what "the same kind"
means for a changed fact: £15 can replace £14 but not 14 km.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Iterator

WORD = re.compile(r"[^\W\d_]+")
DIGIT_RUN = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class Found:
    kind: str
    value: Hashable
    start: int
    end: int
    needs: frozenset
    provides: frozenset
    family: str
    extra: Any = field(default=None, compare=False)  # a quantity's unit, a name's tokens


class Scan:
    """One text, the spans its facts have taken so far (a later pattern never takes them again)
    and the facts found, in the order found.

    Patterns are tried only where a fact can start (`anchored`): at a digit, or at a word that a
    table knows (a number word, a month). Trying a pattern of many words at every position of a
    context would cost 20 ms a row; one pass over its words costs a tenth of that."""

    __slots__ = ("text", "lower", "taken", "spans", "found", "memo", "_digits")

    def __init__(self, text: str) -> None:
        self.text = text
        lower = text.lower()
        self.lower = lower if len(lower) == len(text) else text  # a few letters lengthen when lowered
        self.taken = bytearray(len(text))
        self.spans: list[tuple[int, int]] = []
        self.found: list[Found] = []
        self.memo: dict[str, Any] = {}
        self._digits: list[int] | None = None

    def word_starts(self, lexicon) -> list[int]:
        """Where the words of `lexicon` (lower case) stand, whole, in any case, in order."""
        present = self.memo.get("words")
        if present is None:
            present = self.memo["words"] = set(WORD.findall(self.lower))
        lower, starts = self.lower, []
        for word in present.intersection(lexicon):
            start = lower.find(word)
            while start >= 0:
                end = start + len(word)
                if not (start and lower[start - 1].isalpha()) and not (end < len(lower) and lower[end].isalpha()):
                    starts.append(start)
                start = lower.find(word, end)
        starts.sort()
        return starts

    def digit_starts(self) -> list[int]:
        """Where a figure may start: each run of digits, and a sign right before one."""
        if self._digits is None:
            text = self.text
            starts = []
            for match in DIGIT_RUN.finditer(text):
                start = match.start()
                if start and text[start - 1] in "-\u2212":
                    starts.append(start - 1)
                starts.append(start)
            self._digits = starts
        return self._digits

    def anchored(self, pattern, starts: Iterable[int]) -> Iterator:
        """The matches of a compiled pattern that start at one of `starts` (in order) and overlap
        nothing taken."""
        text, taken = self.text, self.taken
        for start in starts:
            if taken[start]:
                continue
            match = pattern.match(text, start)
            if match and self.free(match.start(), match.end()):
                yield match

    def free(self, start: int, end: int) -> bool:
        return self.taken.find(1, start, end) < 0

    def take(self, start: int, end: int) -> None:
        self.taken[start:end] = b"\x01" * (end - start)
        self.spans.append((start, end))

    def add(self, found: Found) -> None:
        self.found.append(found)
        self.take(found.start, found.end)

    def free_matches(self, pattern) -> Iterator:
        """The matches of a compiled pattern anywhere that overlap nothing taken; each is taken
        only when the caller adds a fact for it (or calls take)."""
        for match in pattern.finditer(self.text):
            if self.free(match.start(), match.end()):
                yield match



def masked(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """The text with every span blanked, so that a name never runs across a date or an amount."""
    pieces, done = [], 0
    for start, end in sorted(spans):
        if end > done:
            start = max(start, done)
            pieces += [text[done:start], "\x00" * (end - start)]
            done = end
    pieces.append(text[done:])
    return "".join(pieces)

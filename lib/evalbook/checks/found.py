"""What the fact check's extractors find in one text, before it becomes a public Fact.

A fact is matched by keys, not by its value alone, so that one fact can be written in forms that
hold more or less: `needs` are the keys any one of which, in another text, holds this fact;
`provides` are the keys this fact gives that text. "9 November 1989" provides its year, its month
and its weekday as well as itself; "9:30" (morning or evening) needs 9:30 or 21:30; "£14" is held
by "£14" or by a bare "14", and gives "14" to a bare number. `family` is what "the same kind"
means for a changed fact: £15 can replace £14 but not 14 km.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Iterator


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
    and the facts found, in the order found."""

    __slots__ = ("text", "taken", "spans", "found")

    def __init__(self, text: str) -> None:
        self.text = text
        self.taken = bytearray(len(text))
        self.spans: list[tuple[int, int]] = []
        self.found: list[Found] = []

    def free(self, start: int, end: int) -> bool:
        return self.taken.find(1, start, end) < 0

    def take(self, start: int, end: int) -> None:
        self.taken[start:end] = b"\x01" * (end - start)
        self.spans.append((start, end))

    def add(self, found: Found) -> None:
        self.found.append(found)
        self.take(found.start, found.end)

    def free_matches(self, pattern, text: str | None = None) -> Iterator:
        """The matches of a compiled pattern that overlap nothing taken; each is taken only when
        the caller adds a fact for it (or calls take)."""
        for match in pattern.finditer(self.text if text is None else text):
            if self.free(match.start(), match.end()):
                yield match

    def masked(self) -> str:
        """The text with every taken span blanked, so that a name never runs across a date."""
        pieces, done = [], 0
        for start, end in sorted(self.spans):
            if end > done:
                start = max(start, done)
                pieces += [self.text[done:start], "\x00" * (end - start)]
                done = end
        pieces.append(self.text[done:])
        return "".join(pieces)

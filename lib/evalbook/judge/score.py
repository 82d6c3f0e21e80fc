"""What a judged metric returns for one example, and how to read a threshold against it."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

PLACEHOLDER_THRESHOLD = 0.5  # the engine fallback of the seeds: a placeholder, not a recommendation


@dataclass(frozen=True)
class Score:
    """A score in its metric's range, or unscored (value None) with the reason."""

    value: float | None
    reason: str | None = None

    @classmethod
    def unscored(cls, reason: str) -> "Score":
        return cls(value=None, reason=reason)


def score_levels(n: int) -> list[Fraction]:
    """The scores a ratio over n items can take: 0, 1/n, ..., 1 (empty for n = 0)."""
    if n < 0:
        raise ValueError(f"n must be at least 0, got {n}")
    return [Fraction(k, n) for k in range(n + 1)] if n else []


def ratio_fields(n: int, threshold: float) -> dict[str, Any]:
    """The record fields of a ratio over n items: the levels it can take, and the threshold read
    against them."""
    return {"score_levels": [str(level) for level in score_levels(n)],
            "threshold_reading": threshold_reading(n, threshold)}


def threshold_reading(n: int, threshold: float) -> str:
    """What `score >= threshold` means for a ratio over n items, in words.

    With 2 statements, 0.8 falls between 1/2 and 2/2, so passing means both are supported.
    """
    levels = score_levels(n)
    if not levels:
        return "no statements: unscored, so neither pass nor fail"
    needed = next((level for level in levels if level >= threshold), None)
    if needed is None:
        return f"threshold {threshold} is above every level of {n} item(s): no answer can pass"
    supported = levels.index(needed)
    exact = any(float(level) == threshold for level in levels)
    between = "" if exact else f" (it falls between levels; the next level up is {supported}/{n})"
    if supported == n:
        return f"threshold {threshold} with {n} item(s) means all {n} must hold{between}"
    return f"threshold {threshold} with {n} item(s) means at least {supported} of {n} must hold{between}"

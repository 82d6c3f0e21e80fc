"""How a comparison is computed: the bootstrap, the tolerance and the regressions listed.

`DEFAULTS` are evalbook's, written once here and read by the command line, 05_compare and
`build_comparison`. This module imports nothing heavy, so the command line can read it at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalbook.compare import ComparisonError


def whole_number(name: str, value: Any, lowest: int, error: type[Exception] = ComparisonError) -> int:
    """`value` as an int when it is a whole number of at least `lowest`; else `error` naming it.
    Shared by the comparison's and the calibration's settings."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value or value < lowest:
        kind = "a positive" if lowest == 1 else "a non-negative"
        raise error(f"{name} must be {kind} integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Settings:
    """How a comparison is computed. Its defaults are evalbook's, used by the command line and 05."""

    resamples: int = 2000  # bootstrap resamples for each confidence interval
    seed: int = 0  # bootstrap seed
    confidence: float = 0.95  # confidence level of the intervals
    # Below this a delta counts as unchanged. Two runs of the same model on the same text agree to
    # about 1e-7, not bit for bit (float32 sums in a different order), so a tighter tolerance would
    # call float noise "better" or "worse".
    tolerance: float = 1e-6
    n_regressions: int = 10  # largest per-example regressions listed for each metric

    def __post_init__(self) -> None:
        object.__setattr__(self, "resamples", whole_number("resamples", self.resamples, 1))
        object.__setattr__(self, "seed", whole_number("seed", self.seed, 0))
        object.__setattr__(self, "n_regressions", whole_number("n_regressions", self.n_regressions, 0))
        if not 0 < self.confidence < 1:
            raise ComparisonError(f"confidence must lie strictly between 0 and 1, got {self.confidence}")
        if not self.tolerance >= 0:
            raise ComparisonError(f"tolerance must be at least 0, got {self.tolerance}")
        object.__setattr__(self, "confidence", float(self.confidence))
        object.__setattr__(self, "tolerance", float(self.tolerance))


DEFAULTS = Settings()

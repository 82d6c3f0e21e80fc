"""How a comparison is computed: the bootstrap, the tolerance and the regressions listed.

`DEFAULTS` are evalbook's, written once here and read by the command line, 05_compare and
`build_comparison`. This module imports nothing heavy, so the command line can read it at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalbook.compare import ComparisonError
from evalbook.stats import BOOTSTRAP, Bootstrap, whole_number


@dataclass(frozen=True)
class Settings:
    """How a comparison is computed. Its defaults are evalbook's, used by the command line and 05."""

    resamples: int = BOOTSTRAP.resamples  # the bootstrap (evalbook.stats.Bootstrap)
    seed: int = BOOTSTRAP.seed
    confidence: float = BOOTSTRAP.confidence
    # Below this a delta counts as unchanged. Two runs of the same model on the same text agree to
    # about 1e-7, not bit for bit (float32 sums in a different order), so a tighter tolerance would
    # call float noise "better" or "worse".
    tolerance: float = 1e-6
    n_regressions: int = 10  # largest per-example regressions listed for each metric

    def __post_init__(self) -> None:
        bootstrap = Bootstrap.checked(self.resamples, self.seed, self.confidence, ComparisonError)
        for name in ("resamples", "seed", "confidence"):
            object.__setattr__(self, name, getattr(bootstrap, name))
        object.__setattr__(self, "n_regressions",
                           whole_number("n_regressions", self.n_regressions, 0, ComparisonError))
        if not self.tolerance >= 0:
            raise ComparisonError(f"tolerance must be at least 0, got {self.tolerance}")
        object.__setattr__(self, "tolerance", float(self.tolerance))


DEFAULTS = Settings()

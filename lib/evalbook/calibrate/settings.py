"""How a calibration is computed: the bootstrap, the pass mark of the labels, the target precision.

`DEFAULTS` are evalbook's, written once here and read by the command line, 06_calibrate and
`build_calibration`. This module imports nothing heavy, so the command line can read it at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalbook.errors import UnusableInput
from evalbook.stats import BOOTSTRAP, Bootstrap, whole_number

LABEL_KINDS = ("ordinal", "binary", "continuous")
# A rank correlation, a ROC curve and a threshold each need two labelled examples at least.
MIN_EXAMPLES = 2


class CalibrationError(UnusableInput, ValueError):
    """A calibration that cannot be computed or written as asked; the message says why."""


@dataclass(frozen=True)
class Settings:
    """How a calibration is computed. Its defaults are evalbook's."""

    resamples: int = BOOTSTRAP.resamples  # the bootstrap (evalbook.stats.Bootstrap)
    seed: int = BOOTSTRAP.seed
    confidence: float = BOOTSTRAP.confidence
    # An ordinal or continuous label at or above this counts as a pass (4 on a 1-5 scale: "correct,
    # with a small gap" or better). Binary labels need no cut.
    good_label_min: float = 4.0
    # The second threshold of each metric is the lowest one whose precision reaches this: the score
    # above which an answer the metric passes is a human pass this often.
    target_precision: float = 0.9
    n_disagreements: int = 3  # examples listed per metric where metric and humans disagree most
    label_kind: str | None = None  # ordinal, binary or continuous; None: inferred and stated

    def __post_init__(self) -> None:
        bootstrap = Bootstrap.checked(self.resamples, self.seed, self.confidence, CalibrationError)
        for name in ("resamples", "seed", "confidence"):
            object.__setattr__(self, name, getattr(bootstrap, name))
        object.__setattr__(self, "n_disagreements",
                           whole_number("n_disagreements", self.n_disagreements, 0, CalibrationError))
        if not 0 < self.target_precision <= 1:
            raise CalibrationError(f"target_precision must lie in (0, 1], got {self.target_precision}")
        if self.label_kind is not None and self.label_kind not in LABEL_KINDS:
            raise CalibrationError(f"label_kind must be one of {', '.join(LABEL_KINDS)} (or None to "
                                   f"infer it), got {self.label_kind!r}")
        for name in ("target_precision", "good_label_min"):
            object.__setattr__(self, name, float(getattr(self, name)))


DEFAULTS = Settings()

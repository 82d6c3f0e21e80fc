"""Summary statistics of per-example scores, as written into the report, and paired statistics
of two runs' scores, as written into a comparison.

Percentiles use numpy's default `linear` method (Hyndman & Fan type 7): for sorted values
x_0..x_{n-1}, the q-th percentile sits at position h = (n - 1) q / 100 and is
x_floor(h) + (h - floor(h)) (x_ceil(h) - x_floor(h)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from evalbook.formatting import is_missing

PERCENTILE_METHOD = "linear"
SUMMARY_PERCENTILES = {"p10": 10, "p50": 50, "p90": 90}


@dataclass(frozen=True)
class Bootstrap:
    """How every interval evalbook reports is drawn: the report's means, a comparison's deltas
    and a calibration's agreement statistics. BOOTSTRAP holds evalbook's defaults; compare and
    calibrate take each field as a setting of their own."""

    resamples: int = 2000  # bootstrap resamples for each confidence interval
    seed: int = 0  # bootstrap seed
    confidence: float = 0.95  # confidence level of the intervals

    @classmethod
    def checked(cls, resamples: Any, seed: Any, confidence: Any, error: type[Exception]) -> Bootstrap:
        """The three values, checked: `error` names the first that is not usable."""
        resamples, seed = whole_number("resamples", resamples, 1, error), whole_number("seed", seed, 0, error)
        if not isinstance(confidence, (int, float)) or isinstance(confidence, bool) or not 0 < confidence < 1:
            raise error(f"confidence must lie strictly between 0 and 1, got {confidence}")
        return cls(resamples=resamples, seed=seed, confidence=float(confidence))


BOOTSTRAP = Bootstrap()


def whole_number(name: str, value: Any, lowest: int, error: type[Exception]) -> int:
    """`value` as an int when it is a whole number of at least `lowest`; else `error` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value or value < lowest:
        kind = "a positive" if lowest == 1 else "a non-negative"
        raise error(f"{name} must be {kind} integer, got {value!r}")
    return int(value)


def _present(values: Iterable[Any]) -> tuple[np.ndarray, int]:
    present, missing = [], 0
    for value in values:
        if pd.isna(value):
            missing += 1
        else:
            present.append(float(value))
    return np.asarray(present, dtype=np.float64), missing


def percentile(values: Iterable[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation; None when there are no values."""
    present, _ = _present(values)
    if present.size == 0:
        return None
    return float(np.percentile(present, q, method=PERCENTILE_METHOD))


def summarize(values: Iterable[Any]) -> dict[str, float | int | None]:
    """mean, p10, p50, p90 of the present values, with n (present) and n_missing.

    Missing values (None, NaN, <NA>) are counted, never averaged. With no present value every
    statistic is None (JSON null), never NaN.
    """
    present, missing = _present(values)
    summary: dict[str, float | int | None] = {
        "mean": float(present.mean()) if present.size else None,
    }
    for name, q in SUMMARY_PERCENTILES.items():
        summary[name] = percentile(present, q)
    summary["n"] = int(present.size)
    summary["n_missing"] = int(missing)
    return summary


def rate(flags: Iterable[Any]) -> dict[str, float | int | None]:
    """Share of True among present booleans, with n (present) and n_missing; rate None if n is 0."""
    present, missing = _present(flags)
    return {"rate": float(present.mean()) if present.size else None,
            "n": int(present.size), "n_missing": int(missing)}


# ---------------------------------------------------------------- paired statistics of two runs

@dataclass(frozen=True)
class PairedValues:
    """One metric over the paired examples: the pairs with both values, and the skipped counts."""

    ids: list[str]
    baseline: np.ndarray
    candidate: np.ndarray
    deltas: np.ndarray
    n_null_baseline_only: int
    n_null_candidate_only: int
    n_null_both: int

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def n_skipped(self) -> int:
        return self.n_null_baseline_only + self.n_null_candidate_only + self.n_null_both


def paired_deltas(ids: Sequence[str], baseline_values: Sequence[Any],
                  candidate_values: Sequence[Any]) -> PairedValues:
    """Per-pair deltas candidate - baseline over the pairs where both values are present.

    A value that is None or NaN skips its pair; the skipped pairs are counted by which side
    lacked the value. Deltas keep the sign: positive means the candidate scored higher.
    """
    if not len(ids) == len(baseline_values) == len(candidate_values):
        raise ValueError(f"ids, baseline and candidate values differ in length: "
                         f"{len(ids)}, {len(baseline_values)}, {len(candidate_values)}")
    kept, base, cand = [], [], []
    null_baseline = null_candidate = null_both = 0
    for example_id, b, c in zip(ids, baseline_values, candidate_values):
        b_missing, c_missing = is_missing(b), is_missing(c)
        if b_missing and c_missing:
            null_both += 1
        elif b_missing:
            null_baseline += 1
        elif c_missing:
            null_candidate += 1
        else:
            kept.append(example_id)
            base.append(float(b))
            cand.append(float(c))
    baseline = np.asarray(base, dtype=np.float64)
    candidate = np.asarray(cand, dtype=np.float64)
    return PairedValues(ids=kept, baseline=baseline, candidate=candidate, deltas=candidate - baseline,
                        n_null_baseline_only=null_baseline, n_null_candidate_only=null_candidate,
                        n_null_both=null_both)


def bootstrap_mean_ci(deltas: Sequence[float] | np.ndarray, *, resamples: int, seed: int,
                      confidence: float) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of `deltas`.

    With n deltas and B = `resamples`, a generator numpy.random.default_rng(seed) draws, for
    resample b = 1..B in turn, n indices uniformly with replacement (rng.integers(0, n, size=n));
    the resample mean is the mean of the deltas at those indices. The interval is the
    (1 - confidence) / 2 and (1 + confidence) / 2 quantiles of the B resample means, by linear
    interpolation (numpy's default method, as in evalbook.stats). With n = 1, or when every delta
    is equal, every resample mean is that delta and the interval is degenerate: [delta, delta].
    No deltas is an error (ValueError): there is no interval to give.
    """
    values = np.asarray(deltas, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"bootstrap_mean_ci needs a non-empty 1-d array of deltas, got shape {values.shape}")
    if not np.isfinite(values).all():
        raise ValueError("bootstrap_mean_ci: deltas must be finite; drop missing pairs first")
    if int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    rng = np.random.default_rng(seed)
    n = values.size
    means = np.empty(int(resamples), dtype=np.float64)
    for b in range(int(resamples)):
        means[b] = values[rng.integers(0, n, size=n)].mean()
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2], method=PERCENTILE_METHOD)
    return float(low), float(high)


# Resample means are drawn this many indices at a time, so that a large n never holds every
# resample's indices in memory at once.
BOOTSTRAP_CHUNK = 1 << 22


def bootstrap_mean_cis(deltas: Sequence[np.ndarray], *, resamples: int, seed: int,
                       confidence: float) -> list[tuple[float, float]]:
    """bootstrap_mean_ci of each array of `deltas`, equal to it value for value, in one pass.

    bootstrap_mean_ci draws a fresh generator's indices for each array, so arrays of the same
    length get the same indices: they are drawn once per length here, a block of resamples at a
    time (a generator's stream does not depend on how its draws are split), and every array of
    that length is averaged over them.
    """
    arrays = [np.asarray(values, dtype=np.float64) for values in deltas]
    for values in arrays:
        if values.ndim != 1 or values.size == 0 or not np.isfinite(values).all():
            raise ValueError("bootstrap_mean_cis needs non-empty 1-d arrays of finite deltas")
    if int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    alpha = 1.0 - confidence
    intervals: list[tuple[float, float] | None] = [None] * len(arrays)
    for n in sorted({values.size for values in arrays}):
        chosen = [i for i, values in enumerate(arrays) if values.size == n]
        stacked = np.stack([arrays[i] for i in chosen])
        means = np.empty((len(chosen), int(resamples)), dtype=np.float64)
        rng = np.random.default_rng(seed)
        block = max(1, BOOTSTRAP_CHUNK // n)
        for start in range(0, int(resamples), block):
            stop = min(int(resamples), start + block)
            indices = rng.integers(0, n, size=(stop - start, n))
            for row, values in enumerate(stacked):
                means[row, start:stop] = values[indices].mean(axis=1)
        for row, i in enumerate(chosen):
            low, high = np.quantile(means[row], [alpha / 2, 1 - alpha / 2], method=PERCENTILE_METHOD)
            intervals[i] = (float(low), float(high))
    return intervals  # type: ignore[return-value]


def direction_fractions(deltas: Sequence[float] | np.ndarray, tol: float) -> dict[str, Any]:
    """How many deltas are better (> tol), worse (< -tol) or unchanged (|delta| <= tol).

    Counts and fractions of n; the three fractions sum to 1. With no delta the fractions are
    None (JSON null), never NaN.
    """
    if tol < 0:
        raise ValueError(f"the tolerance must be at least 0, got {tol}")
    values = np.asarray(deltas, dtype=np.float64)
    n = int(values.size)
    better, worse = int((values > tol).sum()), int((values < -tol).sum())
    unchanged = n - better - worse
    counts = {"n_better": better, "n_worse": worse, "n_unchanged": unchanged}
    fractions = {f"fraction_{k[2:]}": (v / n if n else None) for k, v in counts.items()}
    return {**counts, **fractions}


def mean_interval(values: Iterable[Any], *, resamples: int, seed: int, confidence: float) -> dict[str, Any]:
    """The mean of the present values and its percentile bootstrap interval (bootstrap_mean_ci).

    None, NaN and <NA> are left out and counted apart. Returns {mean, low, high, n, n_missing};
    with no present value, mean, low and high are None (JSON null), never 0.
    """
    present, missing = _present(values)
    if present.size == 0:
        return {"mean": None, "low": None, "high": None, "n": 0, "n_missing": missing}
    low, high = bootstrap_mean_ci(present, resamples=resamples, seed=seed, confidence=confidence)
    return {"mean": float(present.mean()), "low": low, "high": high, "n": int(present.size),
            "n_missing": missing}


def wilson_interval(passed: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """The Wilson score interval of the rate passed / n (scipy's binomtest(...).proportion_ci):
    it stays inside [0, 1] and is honest at small n; None when n is 0 (no rate to bound)."""
    if n == 0:
        return None
    from scipy.stats import binomtest  # here: stats is read by the command line, scipy takes a while

    interval = binomtest(passed, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(interval.low), float(interval.high)

"""Summary statistics of per-example scores, as written into the report.

Percentiles use numpy's default `linear` method (Hyndman & Fan type 7): for sorted values
x_0..x_{n-1}, the q-th percentile sits at position h = (n - 1) q / 100 and is
x_floor(h) + (h - floor(h)) (x_ceil(h) - x_floor(h)).
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd

PERCENTILE_METHOD = "linear"
SUMMARY_PERCENTILES = {"p10": 10, "p50": 50, "p90": 90}


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

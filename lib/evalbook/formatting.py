"""How a number reads on every page and in every summary, and what counts as missing.

The pages' templates use these as filters (evalbook.templating registers them), and the
Markdown summary and the notebooks' tables call them directly, so a value reads the same
everywhere: three decimals, a sign where a change is shown, an interval in brackets, and an em
dash where there is no value.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

MISSING = "\u2014"  # an em dash: how a page and a summary show a missing value
DECIMALS = 3


def is_missing(value: Any) -> bool:
    """None, a float NaN (Python's or numpy's), pandas' NA or NaT. A container, even an empty one,
    and an empty string are values: a column that means "blank is missing" says so itself."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, (float, np.floating)):  # numpy.float64 is a float; float32 is not
        return math.isnan(value)
    return isinstance(value, np.datetime64) and bool(np.isnat(value))


def number(value: Any, decimals: int = DECIMALS) -> str:
    """`0.812`, or the em dash when missing."""
    return MISSING if is_missing(value) else f"{value:.{decimals}f}"


def signed(value: Any, decimals: int = DECIMALS) -> str:
    """`+0.012` / `-0.034`, or the em dash when missing."""
    return MISSING if is_missing(value) else f"{value:+.{decimals}f}"


def interval(low: Any, high: Any, decimals: int = DECIMALS) -> str:
    """`[0.781, 0.842]`, or the em dash when either end is missing."""
    if is_missing(low) or is_missing(high):
        return MISSING
    return f"[{low:.{decimals}f}, {high:.{decimals}f}]"


def p_value(value: Any) -> str:
    """A p-value to 3 decimals; one that would read 0.000 reads `< 0.001`, since it is not 0."""
    if is_missing(value):
        return MISSING
    return "< 0.001" if value < 0.0005 else f"{value:.3f}"


def percent(value: Any) -> str:
    """`95%`: a share or a confidence level in whole percents, or the em dash when missing."""
    return MISSING if is_missing(value) else f"{value:.0%}"


def as_written(value: Any) -> str:
    """`0.5`, `-0.02`: a threshold or a tolerance in its shortest form (Python's `g`), or the em dash."""
    return MISSING if is_missing(value) else f"{value:g}"


def count(value: Any) -> str:
    """A whole number as written (`12`), or the em dash when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int):
        return MISSING
    return str(value)

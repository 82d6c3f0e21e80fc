"""evalbook.formatting: one is_missing and one way a number reads; stats.Bootstrap: one set of
bootstrap defaults for the report, compare and calibrate (issue 25, item 4)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from evalbook import formatting
from evalbook.calibrate.settings import CalibrationError, Settings as CalibrationSettings
from evalbook.compare import ComparisonError
from evalbook.compare.settings import Settings as ComparisonSettings
from evalbook.formatting import MISSING, interval, is_missing, number, p_value, signed
from evalbook.stats import BOOTSTRAP


@pytest.mark.parametrize("value", [None, math.nan, np.float32("nan"), np.float64("nan"), pd.NA, pd.NaT,
                                   np.datetime64("NaT")])
def test_missing_values(value):
    assert is_missing(value)


@pytest.mark.parametrize("value", [0, 0.0, "", "nan", [], [None], False, np.float32(1.5), pd.Timestamp(0)])
def test_present_values(value):
    """An empty string or list is a value; a column where blank means missing says so itself."""
    assert not is_missing(value)


def test_numbers_read_the_same_everywhere():
    assert number(0.81249) == "0.812" and number(None) == MISSING and number(math.nan) == MISSING
    assert signed(0.0125) == "+0.013" and signed(-0.5) == "-0.500" and signed(pd.NA) == MISSING
    assert interval(0.1, 0.2) == "[0.100, 0.200]" and interval(0.1, None) == MISSING
    assert p_value(0.0004) == "< 0.001" and p_value(0.0005) == "0.001"


def test_there_is_one_is_missing():
    import evalbook.calibrate.agreement, evalbook.escaping, evalbook.score.retrieval, evalbook.stats
    for module in (evalbook.calibrate.agreement, evalbook.escaping, evalbook.score.retrieval, evalbook.stats):
        assert module.is_missing is formatting.is_missing
        assert not hasattr(module, "_is_missing") and not hasattr(module, "_missing")


def test_compare_and_calibrate_share_the_bootstrap_defaults():
    for settings in (ComparisonSettings(), CalibrationSettings()):
        assert (settings.resamples, settings.seed, settings.confidence) == \
            (BOOTSTRAP.resamples, BOOTSTRAP.seed, BOOTSTRAP.confidence)


@pytest.mark.parametrize("kind, error", [(ComparisonSettings, ComparisonError),
                                         (CalibrationSettings, CalibrationError)])
@pytest.mark.parametrize("field, value, message", [
    ("resamples", 0, "resamples must be a positive integer"),
    ("seed", 1.5, "seed must be a non-negative integer"),
    ("confidence", 1.0, "confidence must lie strictly between 0 and 1"),
])
def test_a_bad_bootstrap_setting_is_refused_in_the_same_words(kind, error, field, value, message):
    with pytest.raises(error, match=message):
        kind(**{field: value})

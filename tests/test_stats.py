"""Tests for evalbook.stats: summarize, percentile and rate."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from evalbook import stats
from evalbook.stats import percentile, rate, summarize

# Linear (type 7) percentile: sorted x_0..x_{n-1}, h = (n - 1) q / 100,
# value = x_floor(h) + (h - floor(h)) * (x_ceil(h) - x_floor(h)).


# ---------------------------------------------------------------- hand-computed values

def test_summarize_one_to_four():
    # n = 4, h = 3q/100
    # p10: h = 0.3 -> 1 + 0.3*(2-1) = 1.3
    # p50: h = 1.5 -> 2 + 0.5*(3-2) = 2.5
    # p90: h = 2.7 -> 3 + 0.7*(4-3) = 3.7
    # mean = (1+2+3+4)/4 = 2.5
    summary = summarize([1, 2, 3, 4])
    assert summary["mean"] == pytest.approx(2.5, abs=1e-12)
    assert summary["p10"] == pytest.approx(1.3, abs=1e-12)
    assert summary["p50"] == pytest.approx(2.5, abs=1e-12)
    assert summary["p90"] == pytest.approx(3.7, abs=1e-12)
    assert summary["n"] == 4
    assert summary["n_missing"] == 0
    assert set(summary) == {"mean", "p10", "p50", "p90", "n", "n_missing"}


def test_summarize_unsorted_three_values():
    # sorted: [0.2, 0.4, 0.9], n = 3, h = 2q/100
    # p10: h = 0.2 -> 0.2 + 0.2*(0.4-0.2) = 0.24
    # p50: h = 1.0 -> 0.4
    # p90: h = 1.8 -> 0.4 + 0.8*(0.9-0.4) = 0.8
    # mean = (0.2+0.4+0.9)/3 = 1.5/3 = 0.5
    summary = summarize([0.9, 0.2, 0.4])
    assert summary["mean"] == pytest.approx(0.5, abs=1e-12)
    assert summary["p10"] == pytest.approx(0.24, abs=1e-12)
    assert summary["p50"] == pytest.approx(0.4, abs=1e-12)
    assert summary["p90"] == pytest.approx(0.8, abs=1e-12)
    assert summary["n"] == 3


def test_summarize_single_value():
    # n = 1: every percentile is the value itself
    summary = summarize([0.7])
    assert summary == {"mean": 0.7, "p10": 0.7, "p50": 0.7, "p90": 0.7, "n": 1, "n_missing": 0}


def test_summarize_returns_plain_python_types():
    summary = summarize(np.array([0.25, 0.75], dtype=np.float32))
    for name in ("mean", "p10", "p50", "p90"):
        assert type(summary[name]) is float, name
    assert type(summary["n"]) is int and type(summary["n_missing"]) is int
    # p10 for [0.25, 0.75]: h = 0.1 -> 0.25 + 0.1*0.5 = 0.3
    assert summary["p10"] == pytest.approx(0.3, abs=1e-7)


@pytest.mark.parametrize("values, q, expected", [
    # [10, 20], h = 0.25 -> 10 + 0.25*10 = 12.5
    ([10, 20], 25, 12.5),
    # [20, 10] sorted is [10, 20]; h = 0.75 -> 10 + 0.75*10 = 17.5
    ([20, 10], 75, 17.5),
    # q = 0 is the minimum, q = 100 the maximum
    ([5, -3, 8, 1], 0, -3.0),
    ([5, -3, 8, 1], 100, 8.0),
    # [1, 3, 7, 15, 31], h = 4*0.4 = 1.6 -> 3 + 0.6*(7-3) = 5.4
    ([31, 1, 15, 3, 7], 40, 5.4),
])
def test_percentile_hand_computed(values, q, expected):
    assert percentile(values, q) == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------- agreement with numpy

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_summarize_agrees_with_numpy(seed):
    rng = np.random.default_rng(seed)
    values = rng.normal(0.6, 0.2, size=int(rng.integers(5, 400)))
    summary = summarize(values.tolist())
    assert summary["mean"] == pytest.approx(float(np.mean(values)), rel=1e-12, abs=1e-12)
    for name, q in (("p10", 10), ("p50", 50), ("p90", 90)):
        assert summary[name] == pytest.approx(float(np.percentile(values, q)), rel=1e-12, abs=1e-12)
    assert summary["n"] == values.size


def test_summarize_with_missing_agrees_with_numpy_nan_functions():
    rng = np.random.default_rng(7)
    values = rng.uniform(size=300)
    holes = rng.choice(300, size=40, replace=False)
    with_holes = values.copy()
    with_holes[holes] = np.nan
    summary = summarize(with_holes)
    assert summary["mean"] == pytest.approx(float(np.nanmean(with_holes)), rel=1e-12)
    assert summary["p90"] == pytest.approx(float(np.nanpercentile(with_holes, 90)), rel=1e-12)
    assert summary["n"] == 260
    assert summary["n_missing"] == 40


@pytest.mark.parametrize("q", [0, 3.5, 10, 37, 50, 90, 99.9, 100])
def test_percentile_agrees_with_numpy(q):
    values = np.random.default_rng(42).exponential(size=97)
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-12, abs=1e-15)


# ---------------------------------------------------------------- missing values

def test_missing_values_are_counted_and_excluded():
    # present values are [1, 2, 3, 4] -> same statistics as test_summarize_one_to_four
    summary = summarize([1, None, 2, float("nan"), pd.NA, 3, np.nan, 4])
    assert summary["n"] == 4
    assert summary["n_missing"] == 4
    assert summary["mean"] == pytest.approx(2.5, abs=1e-12)
    assert summary["p10"] == pytest.approx(1.3, abs=1e-12)
    assert summary["p90"] == pytest.approx(3.7, abs=1e-12)


def test_missing_values_from_a_nullable_pandas_array():
    values = pd.array([0.2, pd.NA, 0.4, 0.9, pd.NA], dtype="Float64")
    summary = summarize(values)
    assert summary["n"] == 3 and summary["n_missing"] == 2
    assert summary["mean"] == pytest.approx(0.5, abs=1e-12)
    assert summary["p90"] == pytest.approx(0.8, abs=1e-12)
    # [0.2, 0.4, 0.9], q = 50 -> 0.4
    assert percentile(values, 50) == pytest.approx(0.4, abs=1e-12)


@pytest.mark.parametrize("values", [
    [None, float("nan"), pd.NA],
    pd.array([pd.NA, pd.NA], dtype="Float64"),
    [],
])
def test_all_missing_gives_none_not_nan(values):
    summary = summarize(values)
    for name in ("mean", "p10", "p50", "p90"):
        assert summary[name] is None, name
    assert summary["n"] == 0
    assert summary["n_missing"] == len(values)
    text = json.dumps(summary, allow_nan=False)
    assert json.loads(text)["mean"] is None


def test_percentile_all_missing_is_none():
    assert percentile([None, np.nan, pd.NA], 50) is None
    assert percentile([], 10) is None


# ---------------------------------------------------------------- rate

def test_rate_hand_computed():
    # True, False, True, True -> 3/4 = 0.75
    assert rate([True, False, True, True]) == {"rate": 0.75, "n": 4, "n_missing": 0}


def test_rate_excludes_missing():
    # present: True, False, True -> 2/3; missing: None, pd.NA, nan
    result = rate([True, None, False, pd.NA, True, float("nan")])
    assert result["rate"] == pytest.approx(2 / 3, abs=1e-12)
    assert result["n"] == 3
    assert result["n_missing"] == 3


def test_rate_from_nullable_boolean_array():
    flags = pd.array([True, pd.NA, False, False, pd.NA], dtype="boolean")
    # present: True, False, False -> 1/3
    result = rate(flags)
    assert result == {"rate": pytest.approx(1 / 3, abs=1e-12), "n": 3, "n_missing": 2}


def test_rate_all_missing_is_none():
    result = rate(pd.array([pd.NA, pd.NA, pd.NA], dtype="boolean"))
    assert result == {"rate": None, "n": 0, "n_missing": 3}


def test_rate_all_false_is_zero_not_none():
    assert rate([False, False]) == {"rate": 0.0, "n": 2, "n_missing": 0}
    assert rate([False, None, False]) == {"rate": 0.0, "n": 2, "n_missing": 1}


def test_mean_interval_counts_the_missing_and_is_null_without_values():
    from evalbook.stats import bootstrap_mean_ci, mean_interval

    interval = mean_interval([0.2, None, 0.4, float("nan"), 0.9], resamples=500, seed=3, confidence=0.9)
    assert interval["mean"] == pytest.approx(0.5) and (interval["n"], interval["n_missing"]) == (3, 2)
    assert (interval["low"], interval["high"]) == bootstrap_mean_ci([0.2, 0.4, 0.9], resamples=500, seed=3,
                                                                      confidence=0.9)
    assert mean_interval([None], resamples=10, seed=0, confidence=0.95) == {
        "mean": None, "low": None, "high": None, "n": 0, "n_missing": 1}


def test_bootstrap_mean_cis_equals_bootstrap_mean_ci_for_each_array():
    rng = np.random.default_rng(7)
    arrays = [rng.normal(size=n) for n in (1, 2, 7, 32, 32, 100)]
    expected = [stats.bootstrap_mean_ci(a, resamples=500, seed=3, confidence=0.9) for a in arrays]
    assert stats.bootstrap_mean_cis(arrays, resamples=500, seed=3, confidence=0.9) == expected


def test_bootstrap_mean_cis_draws_in_blocks_as_in_one(monkeypatch):
    arrays = [np.random.default_rng(8).normal(size=50)]
    whole = stats.bootstrap_mean_cis(arrays, resamples=300, seed=1, confidence=0.95)
    monkeypatch.setattr(stats, "BOOTSTRAP_CHUNK", 50 * 7)  # blocks of 7 resamples
    assert stats.bootstrap_mean_cis(arrays, resamples=300, seed=1, confidence=0.95) == whole

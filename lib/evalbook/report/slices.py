"""Where a run fails: each slice level's metric against the rest of the run, with intervals and
false-discovery-controlled flags (issue 26).

A slice cuts the examples into levels: the values of a metadata column (`categorical_levels`),
or a numeric column's quantile bins with their edges (`quantile_levels`). For one metric and one
slice, `slice_statistics` gives each level:

- n and the mean over the level's examples with a value, and its percentile bootstrap interval;
- the difference between the level's mean and the rest of the run's, with its interval;
- a two-sided permutation p-value for that difference.

Both are cheap enough for a 12,000-example run:

- The bootstrap is stratified by level: each resample redraws every level's values from its own
  values, with replacement, so a level's resampled mean and the rest's (the other levels' resampled
  sums over their size) come from the same draws. Levels keep their sizes, as the interval is
  about the means given how the run is cut. A slice's metrics share each resample's draws.
- A permutation shuffles the level labels over the values once and gives every level's sum at
  once. Under the null that the label does not matter, a level's difference from the rest is
  a function of its sum; the p-value is (1 + the permutations at least as far from 0 as the
  observed difference) / (1 + permutations), the add-one estimate that is never 0. Permutations
  are drawn in rounds: a test whose flag the first round leaves undecided gets more, doubling,
  up to refined_permutations (_tested_p_values).

`flag_levels` adjusts every p-value of a run together with Benjamini-Hochberg
(scipy.stats.false_discovery_control) and flags a level "worse" or "better" only when its
adjusted q is under the threshold and n is at least `min_n`. A level with fewer examples is
"too few to tell": it is not tested, so it neither enters the adjustment nor is ever flagged.

Why by hand: scipy.stats.permutation_test and scipy.stats.bootstrap test one pair of samples at a
time; a slice with k levels would take k passes, each resampling the whole run.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy.stats import beta, false_discovery_control

from evalbook import stats
from evalbook.errors import UnusableInput
from evalbook.formatting import is_missing
from evalbook.metrics import of_kind
from evalbook.resultcache import ResultCache, code_identity
from evalbook.stats import BOOTSTRAP, PERCENTILE_METHOD, Bootstrap

MISSING_LEVEL = "(missing)"
MAX_LEVELS = 30  # a column with more distinct values is not sliced by value: bin it first
WORSE, BETTER, NO_CLEAR_DIFFERENCE, TOO_FEW = "worse", "better", "no clear difference", "too few to tell"
BATCH = 256  # permutations or resamples drawn at once


@dataclass(frozen=True)
class SliceSettings:
    """How slices are tested: a level with fewer than `min_n` examples is not; one is flagged
    when its adjusted q is under `q_threshold`; `permutations` is each test's first round
    (slice_run draws more where the adjustment needs them); the bootstrap gives the intervals."""

    min_n: int = 10
    q_threshold: float = 0.05
    permutations: int = 1000
    bootstrap: Bootstrap = BOOTSTRAP


@dataclass(frozen=True)
class LevelResult:
    """One level of one slice for one metric; `p_value` is None when it was not tested (n below
    min_n, or no rest to compare with). `q_value` and `verdict` are set by flag_levels."""

    slice: str
    level: str
    metric: str
    n: int
    mean: float | None
    low: float | None
    high: float | None
    rest_n: int
    rest_mean: float | None
    difference: float | None
    difference_low: float | None
    difference_high: float | None
    p_value: float | None
    q_value: float | None = None
    verdict: str | None = None
    # the levels of this slice left out of "the rest" when a level is tested again (slice_run)
    set_aside: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


# ---------------------------------------------------------------- levels


def categorical_levels(values: Sequence[Any]) -> np.ndarray:
    """Each value as its level's label (text as written, true/false, a number as written); a
    missing value is the level MISSING_LEVEL."""
    labels = []
    for value in values:
        if is_missing(value):
            labels.append(MISSING_LEVEL)
        elif isinstance(value, (bool, np.bool_)):
            labels.append("true" if value else "false")
        else:
            labels.append(str(value))
    return np.asarray(labels, dtype=object)


def quantile_levels(values: Sequence[Any], quantiles: int, unit: str = "") -> np.ndarray:
    """Each number's quantile bin (quartiles for 4, tertiles for 3) as a label showing its edges:
    the first bin `[3, 10.5]` holds both edges, each later one `(10.5, 40]` its upper edge only.
    The edges are numpy's quantiles of the present values (linear interpolation); bins whose
    edges coincide merge, so a column with one value has one bin. A missing value is
    MISSING_LEVEL."""
    numbers = np.asarray([np.nan if is_missing(value) else float(value) for value in values], dtype=float)
    labels = np.full(len(numbers), MISSING_LEVEL, dtype=object)
    present = ~np.isnan(numbers)
    if not present.any():
        return labels
    edges = np.unique(np.quantile(numbers[present], np.linspace(0, 1, quantiles + 1), method=PERCENTILE_METHOD))
    suffix = f" {unit}" if unit else ""
    if edges.size == 1:
        labels[present] = f"[{_edge(edges[0])}, {_edge(edges[0])}]{suffix}"
        return labels
    names = [f"{'[' if i == 0 else '('}{_edge(edges[i])}, {_edge(edges[i + 1])}]{suffix}" for i in range(edges.size - 1)]
    bins = np.clip(np.searchsorted(edges, numbers[present], side="left") - 1, 0, edges.size - 2)
    labels[present] = [names[b] for b in bins]
    return labels


def _edge(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"


# ---------------------------------------------------------------- one slice, one metric


_BIN = re.compile(r"[\[(](-?[\d.e+-]+|-?inf), ")


def _level_order(name: str) -> tuple[bool, float, str]:
    """Levels by name, quantile bins by their lower edge, MISSING_LEVEL last."""
    match = _BIN.match(name)
    return name == MISSING_LEVEL, float(match.group(1)) if match else math.inf, name


def _level_codes(levels: np.ndarray) -> tuple[list[str], np.ndarray]:
    names = sorted(set(levels), key=_level_order)
    index = {name: code for code, name in enumerate(names)}
    return names, np.fromiter((index[name] for name in levels), dtype=np.int64, count=len(levels))


def _differences(level_sums: np.ndarray, sizes: np.ndarray, total_sums: np.ndarray, n: int) -> np.ndarray:
    """Each level's mean minus the rest's, from level sums (rows) and their totals."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return level_sums / sizes - (total_sums[:, None] - level_sums) / (n - sizes)


@dataclass(frozen=True)
class _Test:
    """One slice and one metric over the examples with a value: what the tests need."""

    slice: str
    metric: str
    numbers: np.ndarray  # the metric's values
    codes: np.ndarray  # each value's level, as an index into names
    names: list[str]
    sizes: np.ndarray
    sums: np.ndarray
    observed: np.ndarray  # each level's mean minus the rest's
    tested: np.ndarray  # levels with at least min_n examples and a rest

    @property
    def n(self) -> int:
        return int(self.numbers.size)


def _numbers(values: Sequence[Any]) -> np.ndarray:
    """The values as float64, a missing one as NaN: numpy's conversion (None becomes NaN) where it
    applies, else value by value (pandas' NA)."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.asarray([np.nan if is_missing(v) else float(v) for v in values], dtype=np.float64)


def _prepare(values: Sequence[Any], levels: Sequence[str], slice_name: str, metric: str,
             settings: SliceSettings) -> _Test:
    numbers = _numbers(values)
    labels = np.asarray(levels, dtype=object)
    if numbers.shape != labels.shape:
        raise ValueError(f"{len(numbers)} values but {len(labels)} levels")
    present = ~np.isnan(numbers)
    numbers, labels = numbers[present], labels[present]
    names, codes = _level_codes(labels)
    k, n = len(names), numbers.size
    sizes = np.bincount(codes, minlength=k).astype(np.float64)
    sums = np.bincount(codes, weights=numbers, minlength=k)
    observed = _differences(sums[None, :], sizes, np.asarray([numbers.sum()]), n)[0] if k else np.zeros(0)
    return _Test(slice_name, metric, numbers, codes, names, sizes, sums, observed,
                 (sizes >= settings.min_n) & (sizes < n))


def _bootstrap_sums(tests: Sequence[_Test], resamples: int, rng: np.random.Generator) -> list[np.ndarray]:
    """For each test, (resamples, k): each level's sum in each stratified bootstrap resample.

    The tests must share their examples and levels (one slice, several metrics with values for
    the same examples), so that one resample serves them all: each batch of resamples is drawn
    once, as how many times each example is drawn (its level's size draws from its level, with
    replacement), and each metric's level sums are those counts times its values (BLAS)."""
    first = tests[0]
    n, k = first.n, first.sizes.size
    by_level = np.argsort(first.codes, kind="stable")  # each level's examples contiguous
    values = np.stack([test.numbers[by_level] for test in tests], axis=1)  # (n, metrics)
    starts = np.concatenate([[0], np.cumsum(first.sizes.astype(np.int64))])
    sums = [np.zeros((resamples, k)) for _ in tests]
    for start in range(0, resamples, BATCH):
        batch = min(BATCH, resamples - start)
        drawn = np.empty((batch, n), dtype=np.int64)
        for code in range(k):
            low, high = int(starts[code]), int(starts[code + 1])
            if high > low:
                drawn[:, low:high] = rng.integers(low, high, size=(batch, high - low), dtype=np.int32)
        drawn += np.arange(batch, dtype=np.int64)[:, None] * n
        counts = np.bincount(drawn.ravel(), minlength=batch * n).reshape(batch, n).astype(np.float64)
        for code in range(k):
            low, high = int(starts[code]), int(starts[code + 1])
            level = counts[:, low:high] @ values[low:high]  # (batch, metrics)
            for j, total in enumerate(sums):
                total[start:start + batch, code] = level[:, j]
    return sums


def _extreme_counts(tests: Sequence[_Test], count: int, rng: np.random.Generator) -> list[np.ndarray]:
    """For each test, how many of `count` permutations give each level a difference at least as
    far from 0 as the observed one.

    Tests of the same number of values share each permutation (a uniformly random order of
    positions is one for any labels of that length), so the random draws are made once per size.
    Tests of the same values (one metric, cut by several slices) share the permuted values too:
    each batch of permuted values is multiplied once by the one-hot matrix of all their slices'
    levels, which gives every level's sum in every permutation (BLAS, where a bincount per slice
    copied the permutation each time)."""
    counts = [np.zeros(test.sizes.size, dtype=np.int64) for test in tests]
    by_size: dict[int, dict[bytes, list[int]]] = {}
    for i, test in enumerate(tests):
        if test.tested.any():
            by_size.setdefault(test.n, {}).setdefault(test.numbers.tobytes(), []).append(i)
    for n, by_values in by_size.items():
        groups = []
        for members in by_values.values():
            onehot = np.zeros((n, sum(tests[i].sizes.size for i in members)))
            offset = 0
            for i in members:
                onehot[np.arange(n), offset + tests[i].codes] = 1.0
                offset += tests[i].sizes.size
            groups.append((members, tests[members[0]].numbers, onehot))
        for start in range(0, count, BATCH):
            batch = min(BATCH, count - start)
            # np.tile, not a broadcast view: the permuted rows come back in C order, and are the same
            order = rng.permuted(np.tile(np.arange(n), (batch, 1)), axis=1)
            for members, numbers, onehot in groups:
                all_sums = numbers[order] @ onehot
                total = np.full(batch, numbers.sum())
                # as far from 0 as the observed difference, up to float error in the sums
                tolerance = 1e-9 * max(1.0, float(np.abs(numbers).max()))
                offset = 0
                for i in members:
                    test, k = tests[i], tests[i].sizes.size
                    null = _differences(all_sums[:, offset:offset + k], test.sizes, total, n)
                    counts[i] += (np.abs(null) >= np.abs(test.observed)[None, :] - tolerance).sum(axis=0)
                    offset += k
    return counts


def _p_values(test: _Test, extreme: np.ndarray, count: int) -> np.ndarray:
    return np.where(test.tested, (1 + extreme) / (1 + count), np.nan)


def _level_results(test: _Test, p_values: np.ndarray, resampled: np.ndarray,
                   settings: SliceSettings) -> list[LevelResult]:
    """The test's levels with their means, the intervals from `resampled` (its stratified
    bootstrap level sums, _bootstrap_sums) and `p_values`."""
    n = test.n
    means = resampled / test.sizes
    differences = _differences(resampled, test.sizes, resampled.sum(axis=1), n)
    alpha = 1.0 - settings.bootstrap.confidence
    bounds = [alpha / 2, 1 - alpha / 2]
    total = test.numbers.sum()
    results = []
    for code, name in enumerate(test.names):
        low, high = np.quantile(means[:, code], bounds, method=PERCENTILE_METHOD)
        has_rest = test.sizes[code] < n
        d_low, d_high = (np.quantile(differences[:, code], bounds, method=PERCENTILE_METHOD)
                         if has_rest else (None, None))
        results.append(LevelResult(
            slice=test.slice, level=name, metric=test.metric, n=int(test.sizes[code]),
            mean=float(test.sums[code] / test.sizes[code]), low=float(low), high=float(high),
            rest_n=int(n - test.sizes[code]),
            rest_mean=float((total - test.sums[code]) / (n - test.sizes[code])) if has_rest else None,
            difference=float(test.observed[code]) if has_rest else None,
            difference_low=None if d_low is None else float(d_low),
            difference_high=None if d_high is None else float(d_high),
            p_value=None if math.isnan(p_values[code]) else float(p_values[code])))
    return results


def _results(tests: Sequence[_Test], p_values: Sequence[np.ndarray], settings: SliceSettings,
             seed: int) -> list[list[LevelResult]]:
    """Each test's level results. Tests of one slice over the same examples (its metrics) share
    their bootstrap resamples: each group draws its own seeded stream, in the order the groups
    first appear."""
    groups: dict[tuple[str, bytes], list[int]] = {}
    for i, test in enumerate(tests):
        groups.setdefault((test.slice, test.codes.tobytes()), []).append(i)
    resampled: dict[int, np.ndarray] = {}
    for number, members in enumerate(groups.values()):
        sums = _bootstrap_sums([tests[i] for i in members], settings.bootstrap.resamples,
                               np.random.default_rng([seed, 0, number]))
        resampled.update(zip(members, sums))
    return [_level_results(test, p, resampled[i], settings) for i, (test, p) in enumerate(zip(tests, p_values))]


def slice_statistics(values: Sequence[Any], levels: Sequence[str], *, slice_name: str, metric: str,
                     settings: SliceSettings = SliceSettings(), permutations: int | None = None,
                     seed: int | None = None) -> list[LevelResult]:
    """Each level of one slice for one metric (see the module docstring), levels by name (quantile
    bins by their lower edge) with MISSING_LEVEL last. Examples without a value of the metric are
    left out. `permutations` overrides settings.permutations; `seed` overrides the bootstrap's
    seed (the bootstrap and the permutations each get their own stream of it)."""
    test = _prepare(values, levels, slice_name, metric, settings)
    seed = settings.bootstrap.seed if seed is None else seed
    count = settings.permutations if permutations is None else permutations
    (extreme,) = _extreme_counts([test], count, np.random.default_rng([seed, 1]))
    (results,) = _results([test], [_p_values(test, extreme, count)], settings, seed)
    return results


def refined_permutations(n_tests: int, settings: SliceSettings = SliceSettings()) -> int:
    """The most permutations a test draws while a flag stays undecided (_tested_p_values): ten
    times the first round's, and at least enough that the smallest p-value they can give,
    1 / (1 + R), is half the first Benjamini-Hochberg threshold of `n_tests` tests."""
    return max(10 * settings.permutations, math.ceil(2 * n_tests / settings.q_threshold))


MONTE_CARLO_CONFIDENCE = 0.999  # of the bounds on a permutation p-value that decide what is refined


def _monte_carlo_bounds(extreme: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Clopper-Pearson bounds on the probability that a permutation is as extreme, from `extreme`
    of `count`; the upper bound is at least the p-value reported, (1 + extreme) / (1 + count)."""
    alpha = 1 - MONTE_CARLO_CONFIDENCE
    e = extreme.astype(np.float64)
    low = np.where(e > 0, beta.ppf(alpha / 2, np.maximum(e, 1), count - e + 1), 0.0)
    high = np.where(e < count, beta.ppf(1 - alpha / 2, e + 1, np.maximum(count - e, 1)), 1.0)
    return low, np.maximum(high, (1 + e) / (1 + count))


def _bh_cutoff(p_values: np.ndarray, settings: SliceSettings) -> float:
    """The largest p-value Benjamini-Hochberg rejects at q_threshold among `p_values`, as the
    threshold q * R / m (-1 when it rejects none)."""
    m = p_values.size
    ordered = np.sort(p_values)
    passing = np.nonzero(ordered <= settings.q_threshold * np.arange(1, m + 1) / max(m, 1))[0]
    return settings.q_threshold * (int(passing[-1]) + 1) / m if passing.size else -1.0


@dataclass(frozen=True)
class _Cutoffs:
    """Benjamini-Hochberg's cutoff on every tested level's upper bound (`sure`: a level under it
    is flagged whatever the true p-values within the bounds are, since lowering p-values never
    takes a rejection away) and on their lower bounds (`possible`: a level over it is never
    flagged). A level between the two is undecided: more permutations can change its flag."""

    sure: float
    possible: float

    def undecided(self, test: _Test, extreme: np.ndarray, count: int) -> bool:
        low, high = _monte_carlo_bounds(extreme, count)
        return bool((test.tested & (low <= self.possible) & (high > self.sure)).any())


def _cutoffs(tests: Sequence[_Test], extreme: Sequence[np.ndarray], counts: Sequence[int],
             settings: SliceSettings) -> _Cutoffs:
    bounds = [_monte_carlo_bounds(e, c) for e, c in zip(extreme, counts)]
    lows = np.concatenate([low[t.tested] for t, (low, _) in zip(tests, bounds)] or [np.zeros(0)])
    highs = np.concatenate([high[t.tested] for t, (_, high) in zip(tests, bounds)] or [np.zeros(0)])
    return _Cutoffs(sure=_bh_cutoff(highs, settings), possible=_bh_cutoff(lows, settings))


def _tested_p_values(tests: Sequence[_Test], settings: SliceSettings, rng_seed: int, most: int,
                     cutoffs: _Cutoffs | None = None) -> tuple[list[np.ndarray], _Cutoffs]:
    """Each test's permutation p-values, drawn in rounds. The first round draws
    settings.permutations for every test. Each later round doubles the permutations of each test
    with a level whose flag is still undecided (_Cutoffs over the run's tests as they now stand,
    or the fixed `cutoffs` when given), up to `most`, and its p-value counts all its
    permutations. So most tests stop after the first round, and only a level near the
    adjustment's cutoff draws `most`: the resolution is bought where a flag depends on it."""
    first = settings.permutations
    extreme = _extreme_counts(tests, first, np.random.default_rng([rng_seed, 1]))
    drawn = [first] * len(tests)
    fixed = cutoffs
    for round_ in range(1, 64):
        cutoffs = fixed or _cutoffs(tests, extreme, drawn, settings)
        target = min(first << round_, most)
        more: dict[int, list[int]] = {}
        for i, test in enumerate(tests):
            if drawn[i] < target and cutoffs.undecided(test, extreme[i], drawn[i]):
                more.setdefault(target - drawn[i], []).append(i)
        if not more:
            break
        for number, (count, members) in enumerate(sorted(more.items())):
            for i, e in zip(members, _extreme_counts([tests[i] for i in members], count,
                                                     np.random.default_rng([rng_seed, 2, round_, number]))):
                extreme[i] = extreme[i] + e
                drawn[i] += count
    assert cutoffs is not None
    return [_p_values(test, e, count) for test, e, count in zip(tests, extreme, drawn)], cutoffs


# ---------------------------------------------------------------- the run's flags


def flag_levels(results: Sequence[LevelResult], higher_is_better: dict[str, bool],
                settings: SliceSettings = SliceSettings()) -> list[LevelResult]:
    """`results` with q-values (Benjamini-Hochberg over every tested level of the run) and
    verdicts: "worse" or "better" (by the metric's direction) when q < q_threshold, "no clear
    difference" otherwise, and "too few to tell" for a level that was not tested."""
    tested = [i for i, result in enumerate(results) if result.p_value is not None]
    q_values = (false_discovery_control([results[i].p_value for i in tested], method="bh")
                if tested else [])
    q_of = dict(zip(tested, (float(q) for q in q_values)))
    flagged = []
    for i, result in enumerate(results):
        if i not in q_of:
            flagged.append(replace(result, verdict=TOO_FEW))
            continue
        q = q_of[i]
        verdict = NO_CLEAR_DIFFERENCE
        if q < settings.q_threshold and result.difference:
            up = result.difference > 0
            verdict = BETTER if up == higher_is_better.get(result.metric, True) else WORSE
        flagged.append(replace(result, q_value=q, verdict=verdict))
    return flagged


def slice_run(metrics: dict[str, Sequence[Any]], slices: dict[str, Sequence[str]], higher_is_better: dict[str, bool],
              settings: SliceSettings = SliceSettings(),
              untested: frozenset[tuple[str, str]] = frozenset()) -> list[LevelResult]:
    """Every level of every slice for every metric of a run, flagged (flag_levels).

    Permutations come in rounds (_tested_p_values): every test draws settings.permutations, and
    only a test whose flag is still undecided draws more, doubling up to refined_permutations,
    which at 12,000 examples is a few tests of some 250.

    Then one correction for what comparing a level with the rest does to the other levels. When
    one level is much worse, every other level is better than a rest that holds it, and with
    many examples that difference is real enough to be flagged; the flag would send a reader to
    a slice that is only ordinary. So where a slice has levels flagged in both directions, the
    direction of the level furthest from the rest is taken as the real one: each level flagged
    the other way is tested again against the rest without those levels (their names in
    `set_aside`), and the adjustment is made again over every test of the run. One pass: a level
    the second test no longer separates from the rest is "no clear difference"; a level that is
    better (or worse) than the ordinary ones stays flagged. A level with no other level left
    once those are set aside (the other level of a two-level slice) differs only from them: it
    keeps its p and q but is "no clear difference", with them in `set_aside`.

    `untested` holds (slice, metric) pairs left out: a slice defined by the metric itself
    (retrieval hit or miss cuts top-k match into all 1s and all 0s, and the other retrieval
    metrics at k into a level of 0s)."""
    seed = settings.bootstrap.seed
    tests = [_prepare(metrics[metric], slices[name], name, metric, settings) for metric in metrics for name in slices
             if (name, metric) not in untested]
    n_tests = int(sum(test.tested.sum() for test in tests))
    refined = refined_permutations(n_tests, settings)
    p_values, cutoffs = _tested_p_values(tests, settings, seed, refined)
    results = [r for rs in _results(tests, p_values, settings, seed) for r in rs]
    flagged = flag_levels(results, higher_is_better, settings)
    # the re-tests: (the levels' indices in `flagged`, the names set aside, the test without them)
    retests: list[tuple[list[int], tuple[str, ...], _Test]] = []
    mirrors: dict[int, tuple[str, ...]] = {}  # levels with nothing left to test them on once the others are aside
    for test in tests:
        group = [(i, r) for i, r in enumerate(flagged) if r.metric == test.metric and r.slice == test.slice]
        directions = {r.verdict for _, r in group} & {WORSE, BETTER}
        if len(directions) < 2:
            continue
        # The level furthest from the run's mean: with two levels, each's difference from the
        # other is as far from 0, and the smaller level is the one that moved.
        run_mean = float(test.numbers.mean())
        furthest = max((r for _, r in group if r.verdict in (WORSE, BETTER)), key=lambda r: abs(r.mean - run_mean))
        aside = {r.level for _, r in group if r.verdict == furthest.verdict}
        named = tuple(sorted(aside, key=_level_order))
        kept = [level not in aside for level in slices[test.slice]]
        again = _prepare([value for value, keep in zip(metrics[test.metric], kept) if keep],
                         [level for level, keep in zip(slices[test.slice], kept) if keep],
                         test.slice, test.metric, settings)
        others = [i for i, r in group if r.verdict in (WORSE, BETTER) and r.level not in aside]
        retests.append((others, named, again))
    if not retests:
        return flagged
    # one batch, so that re-tests of one slice over several metrics share their draws, and
    # refined only where a flag is undecided by the run's cutoffs
    again_tests = [again for _, _, again in retests]
    again_p, _ = _tested_p_values(again_tests, settings, seed + 1, refined, cutoffs)
    for (others, named, again), levels in zip(retests, _results(again_tests, again_p, settings, seed + 1)):
        by_level = {r.level: r for r in levels}
        for i in others:
            result = by_level.get(flagged[i].level)
            if result is None or result.rest_n == 0:
                mirrors[i] = named
            else:
                flagged[i] = replace(result, set_aside=named)
    final = flag_levels([replace(r, q_value=None, verdict=None) for r in flagged], higher_is_better, settings)
    for i, named in mirrors.items():
        final[i] = replace(final[i], verdict=NO_CLEAR_DIFFERENCE, set_aside=named)
    return final


# ---------------------------------------------------------------- which slices a run is cut by

METADATA, DERIVED, TOPIC = "metadata", "derived", "topic"
QUANTILES = 4  # a numeric metadata column is cut into quartiles
LENGTH_QUANTILES = 3  # lengths are cut into tertiles of words
# The retrieval metrics at k, which the retrieval slice is not tested on: a miss scores 0 on
# every one of them, so the slice's miss level differs from the rest by construction.
RETRIEVAL_AT_K = tuple(metric.name for metric in of_kind("retrieval") if metric.in_comparison)


@dataclass(frozen=True)
class SliceColumn:
    """One way a run is cut: its name as pages show it, where it comes from (METADATA, DERIVED
    or TOPIC), and each example's level."""

    name: str
    kind: str
    levels: np.ndarray
    untested: tuple[str, ...] = ()  # metrics this slice is not tested on: those that define it


def metadata_slices(metadata: Sequence[dict[str, Any]], types: dict[str, str],
                    by: Sequence[str] | None = None) -> tuple[list[SliceColumn], list[str]]:
    """The slices of the metadata columns `by` (None: every column, as `slices.by: auto`), and a
    note for each column that is not sliced. Text and true/false columns slice by value when they
    have 2 to MAX_LEVELS distinct values; numbers are cut into quartiles, their edges in the
    level names. A column with one value, or with more levels than MAX_LEVELS, is skipped with a
    note that says why (and how to bin it); a missing value is the level MISSING_LEVEL."""
    columns, notes = [], []
    for name in (types if by is None else by):
        if name not in types:
            kept = ", ".join(types) or "none"
            raise UnusableInput(f"slices.by names {name!r}, which is not a column of the input; the columns kept "
                                f"as metadata are: {kept}")
        values = [row.get(name) for row in metadata]
        distinct = {value for value in values if not is_missing(value)}
        if len(distinct) < 2:
            shown = f"one value ({next(iter(distinct))!r})" if distinct else "no value"
            notes.append(f"{name}: {shown} in every example, so it is not a slice")
        elif types[name] in ("integer", "float"):
            columns.append(SliceColumn(name, METADATA, quantile_levels(values, QUANTILES)))
        elif len(distinct) > MAX_LEVELS:
            notes.append(f"{name}: {len(distinct)} distinct values, over {MAX_LEVELS}: not sliced; to slice by it, "
                         f"add a column that groups its values into at most {MAX_LEVELS}")
        else:
            columns.append(SliceColumn(name, METADATA, categorical_levels(values)))
    return columns, notes


def _words(text: Any) -> int | None:
    return None if is_missing(text) else len(str(text).split())


def derived_slices(canonical: pd.DataFrame, scored: pd.DataFrame, k: int) -> list[SliceColumn]:
    """The slices evalbook derives itself: the question's, the reference's and the answer's length
    (tertiles of words; an example without an answer has no answer length), retrieval hit or
    miss at k where any example has retrieval data, truncated or not (either model cut the
    answer or the reference), and the answer's source where any example has one."""
    columns = [SliceColumn(f"{label} length", DERIVED,
                           quantile_levels([_words(text) for text in canonical[column]], LENGTH_QUANTILES, "words"))
               for label, column in (("question", "question"), ("reference", "reference_answer"),
                                     ("answer", "generated_answer"))]
    matches = scored["top_k_match"].tolist()
    if any(not is_missing(match) for match in matches):
        columns.append(SliceColumn(f"retrieval at k = {k}", DERIVED, np.asarray(
            [MISSING_LEVEL if is_missing(match) else "hit" if match else "miss" for match in matches], dtype=object),
            untested=RETRIEVAL_AT_K))
    truncated = (scored["truncated_bertscore"].fillna(False).astype(bool)
                 | scored["truncated_sentence"].fillna(False).astype(bool))
    columns.append(SliceColumn("truncated", DERIVED,
                               np.where(truncated.to_numpy(), "truncated", "not truncated").astype(object)))
    if canonical["source"].notna().any():
        columns.append(SliceColumn("source", DERIVED, categorical_levels(canonical["source"].tolist())))
    return columns


# ---------------------------------------------------------------- the report's section

TOPIC_SLICE = "topic (by meaning)"
LOWEST = 3  # a flagged level lists this many of its lowest-scoring examples
METHOD = (
    "Each slice cuts the run into levels: a metadata column's values (numbers in quartiles), the "
    "question, reference and answer lengths in tertiles of words, retrieval hit or miss at k, "
    "truncated or not, the answer's source, and the questions' topics by meaning (k-means of their "
    "sentence embeddings). For each level and metric: the mean over the level's examples with a "
    "value and a stratified percentile bootstrap interval; the difference from the rest of the run "
    "with its interval; and a two-sided permutation p-value, (1 + permutations at least as far from "
    "0) / (1 + permutations), from shuffling the level labels: permutations first, and for a test "
    "whose flag 99.9% Clopper-Pearson bounds on its p-values leave undecided, twice as many again "
    "and again up to refined_permutations. Every p-value of the run is adjusted "
    "together with Benjamini-Hochberg; a level is flagged worse or better when q < q_threshold and "
    "n >= min_n. A level under min_n is too few to tell and is not tested. Where a slice holds levels "
    "flagged both ways, those flagged against the furthest one's direction are tested again against "
    "the rest without it (set_aside).")


def _one_level_note(column: SliceColumn) -> str | None:
    levels = set(column.levels.tolist())
    if len(levels) > 1:
        return None
    level = next(iter(levels), MISSING_LEVEL)
    return f"{column.name}: every example is {level!r}, so it is not a slice"


def _topic_column(topics: dict[str, Any] | None, ids: list[str], notes: list[str]) -> SliceColumn | None:
    if topics is None:
        return None
    if topics.get("labels") is None:
        notes.append(f"{TOPIC_SLICE}: no topics, {topics.get('reason')}")
        return None
    if topics["ids"] != ids:
        raise ValueError("the topics' ids do not match the report's examples, row for row: run 02_score again")
    return SliceColumn(TOPIC_SLICE, TOPIC, np.asarray(topics["labels"], dtype=object))


def _lowest(result: LevelResult, values: Sequence[float | None], levels: np.ndarray,
            examples: Sequence[dict[str, Any]], higher_is_better: bool) -> list[dict[str, Any]]:
    """Up to LOWEST of the level's examples that score worst on the metric: id, question, value."""
    members = [i for i, level in enumerate(levels) if level == result.level and values[i] is not None]
    members.sort(key=lambda i: (values[i] if higher_is_better else -values[i], examples[i]["id"]))
    return [{"id": examples[i]["id"], "question": examples[i]["question"], "value": float(values[i])}
            for i in members[:LOWEST]]


def _slice_results(values: dict[str, list[Any]], columns: Sequence[SliceColumn], directions: dict[str, bool],
                   settings: SliceSettings, untested: frozenset[tuple[str, str]],
                   results_cache: ResultCache | None) -> list[LevelResult]:
    """slice_run's results, from `results_cache` when it holds those of the same values, levels,
    settings and code (evalbook.resultcache): the tests are seeded, so they are the same."""
    levels = {c.name: c.levels for c in columns}
    if results_cache is None:
        return slice_run(values, levels, directions, settings, untested)

    def compute() -> list[dict[str, Any]]:
        return [{**r.as_dict(), "set_aside": list(r.set_aside)}
                for r in slice_run(values, levels, directions, settings, untested)]

    key = [{name: np.asarray([np.nan if v is None else v for v in metric], dtype=np.float64)
            for name, metric in values.items()},
           {name: _coded(level) for name, level in levels.items()}, directions,
           [settings.min_n, settings.q_threshold, settings.permutations, repr(settings.bootstrap)],
           sorted(untested), code_identity([sys.modules[__name__], stats], ["numpy", "scipy"])]
    records = results_cache.result("slice_run", key, compute)
    return [LevelResult(**{**record, "set_aside": tuple(record["set_aside"])}) for record in records]


def _coded(levels: np.ndarray) -> list[Any]:
    """A slice's levels as their distinct labels and each example's code: exact, and quick to key."""
    labels, codes = np.unique(np.asarray(levels, dtype=object), return_inverse=True)
    return [labels.tolist(), codes.astype(np.int64)]


def report_slices(examples: Sequence[dict[str, Any]], canonical: pd.DataFrame, scored: pd.DataFrame, *,
                  metrics: Sequence[Any], metadata_types: dict[str, str], by: str | Sequence[str],
                  k: int, topics: dict[str, Any] | None,
                  settings: SliceSettings = SliceSettings(),
                  results_cache: ResultCache | None = None) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The report's `slices` section (METHOD), and each example's level in every slice.

    `examples` are the report's examples, aligned with `canonical` and `scored`; `metrics` the
    registry's metrics to test (each with `.name`, `.value(example)`, `.higher_is_better`);
    `metadata_types` the types 01_load gave the metadata columns; `by` the profile's
    `slices.by`; `topics` 02_score's topics record (None: topics are off); `results_cache` keeps
    the tests between runs (evalbook.resultcache). An unknown `by` column is UnusableInput
    (metadata_slices)."""
    columns, notes = metadata_slices([e["metadata"] for e in examples], metadata_types,
                                     None if by == "auto" else list(by))
    taken = {column.name for column in columns}
    for column in derived_slices(canonical, scored, k):
        name = column.name if column.name not in taken else f"{column.name} (derived)"
        column = replace(column, name=name)
        note = _one_level_note(column)
        if note is None:
            columns.append(column)
            taken.add(name)
        else:
            notes.append(note)
    topic = _topic_column(topics, [e["id"] for e in examples], notes)
    if topic is not None:
        if topic.name in taken:
            topic = replace(topic, name=f"{topic.name} (derived)")
        note = _one_level_note(topic)
        columns.append(topic) if note is None else notes.append(note)
    values = {m.name: [m.value(e) for e in examples] for m in metrics}
    directions = {m.name: m.higher_is_better for m in metrics}
    untested = frozenset((c.name, metric) for c in columns for metric in c.untested)
    results = _slice_results(values, columns, directions, settings, untested, results_cache) if columns else []
    by_name = {c.name: c for c in columns}
    levels = []
    for result in results:
        record = result.as_dict()
        record["kind"] = by_name[result.slice].kind
        record["set_aside"] = list(result.set_aside)
        record["lowest"] = (_lowest(result, values[result.metric], by_name[result.slice].levels, examples,
                                    directions[result.metric]) if result.verdict in (WORSE, BETTER) else [])
        levels.append(record)
    boot = settings.bootstrap
    section = {
        "method": METHOD,
        "settings": {"by": by if by == "auto" else list(by), "min_n": settings.min_n,
                     "q_threshold": settings.q_threshold, "permutations": settings.permutations,
                     "refined_permutations": refined_permutations(
                         sum(r.p_value is not None for r in results), settings),
                     "resamples": boot.resamples, "confidence": boot.confidence, "seed": boot.seed},
        "metrics": [m.name for m in metrics],
        "columns": [{"name": c.name, "kind": c.kind, "levels": sorted(set(c.levels.tolist()), key=_level_order)}
                    for c in columns],
        "notes": notes,
        "topics": None if topics is None else {key: topics.get(key) for key in
                                                ("k", "silhouette", "tried", "names", "reason")},
        "n_tests": sum(r.p_value is not None for r in results),
        "n_flagged": sum(r.verdict in (WORSE, BETTER) for r in results),
        "levels": levels,
    }
    per_example = [{c.name: str(c.levels[i]) for c in columns} for i in range(len(examples))]
    return section, per_example

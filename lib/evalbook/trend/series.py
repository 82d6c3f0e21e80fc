"""Which runs form a line, and which steps along it are real.

A series is the successful runs that share a dataset name, a split and the scoring pins (the
embedding models and everything 05_compare's embedding gate checks, and the scoring backend),
in the order they started. Its metrics are the headline similarity and retrieval metrics. Judge
metrics form series of their own, which additionally share the judge label: a different judge
starts a new line, never joined to the old one.

A step goes from a run to the next run of its series. Its paired delta is taken over the
examples both runs hold (paired by id, as a comparison pairs them), with the comparison's
bootstrap. It is `real` when the delta's interval lies wholly beyond the comparison's tolerance
on one side of 0, `within noise` otherwise, and `not paired` when fewer than `min_paired`
examples carry a value in both runs: such a step is never called real. A retrieval step between
runs measured at different k is `not comparable`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from evalbook.compare.settings import DEFAULTS as COMPARISON
from evalbook.metrics import METRICS, Metric
from evalbook.stats import bootstrap_mean_cis, whole_number
from evalbook.errors import UnusableInput

SCORING = "scoring"
JUDGE = "judge"
REAL, NOISE, NOT_PAIRED, NOT_COMPARABLE = "real", "within noise", "not paired", "not comparable"
MIN_PAIRED = 10  # fewer shared examples than this and a step is "not paired"


class TrendError(UnusableInput):
    """A trend setting or filter that cannot be used."""


@dataclass(frozen=True)
class StepSettings:
    """How a step is judged real: the comparison's bootstrap and tolerance, and `min_paired`."""

    resamples: int = COMPARISON.resamples
    seed: int = COMPARISON.seed
    confidence: float = COMPARISON.confidence
    tolerance: float = COMPARISON.tolerance
    min_paired: int = MIN_PAIRED

    def __post_init__(self) -> None:
        object.__setattr__(self, "min_paired", whole_number("min_paired", self.min_paired, 1, TrendError))

    def as_record(self) -> dict[str, Any]:
        return {"resamples": self.resamples, "seed": self.seed, "confidence": self.confidence,
                "tolerance": self.tolerance, "min_paired": self.min_paired}


def _scoring_key(headline: dict[str, Any]) -> dict[str, Any]:
    dataset, scoring = headline.get("dataset") or {}, headline.get("scoring") or {}
    return {"dataset": dataset.get("name"), "split": dataset.get("split"),
            "backend": scoring.get("backend"), "pins": scoring.get("pins") or {}}


def _judge_label(headline: dict[str, Any]) -> str | None:
    return (headline.get("run") or {}).get("judge_label")


def _metrics_of(kind: str) -> tuple[Metric, ...]:
    if kind == JUDGE:
        return tuple(m for m in METRICS if m.headline and m.kind == "judge")
    return tuple(m for m in METRICS if m.headline and m.kind != "judge")


@dataclass
class Series:
    """The runs of one line, oldest first, and the metrics any of them has a mean for."""

    kind: str
    key: dict[str, Any]
    judge_label: str | None
    runs: list[dict[str, Any]]

    @property
    def identity(self) -> str:
        """The series' key as one string, the same for the same key on every build."""
        return json.dumps([self.kind, self.key, self.judge_label], sort_keys=True)

    def metrics(self) -> list[str]:
        return [m.name for m in _metrics_of(self.kind)
                if any(_mean(run, m.name) is not None for run in self.runs)]


def _mean(headline: dict[str, Any], name: str) -> float | None:
    value = ((headline.get("metrics") or {}).get(name) or {}).get("mean")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def group_series(headlines: Sequence[dict[str, Any]]) -> list[Series]:
    """The series of the successful runs among `headlines`, each oldest run first; the series
    whose latest run is newest comes first."""
    found: dict[str, Series] = {}
    ordered = sorted((h for h in headlines if h.get("status") == "succeeded" and h.get("run")),
                     key=lambda h: (h["started_at"], h["run_id"]))
    for headline in ordered:
        kinds = [(SCORING, None)]
        if _judge_label(headline) is not None and any(_mean(headline, m.name) is not None for m in _metrics_of(JUDGE)):
            kinds.append((JUDGE, _judge_label(headline)))
        for kind, label in kinds:
            series = Series(kind, _scoring_key(headline), label, [])
            found.setdefault(series.identity, series).runs.append(headline)
    return sorted(found.values(), key=lambda s: (s.runs[-1]["started_at"], s.kind == SCORING), reverse=True)


# ---------------------------------------------------------------- steps

def _k(headline: dict[str, Any]) -> Any:
    return (headline.get("scoring") or {}).get("k")


def step(metric: Metric, before: dict[str, Any], after: dict[str, Any], deltas: np.ndarray | None,
         settings: StepSettings, interval: tuple[float, float] | None) -> dict[str, Any]:
    """One metric's step from `before` to `after`, given its paired deltas (None when the runs'
    values could not be read) and their interval (None when not drawn)."""
    if metric.kind == "retrieval" and _k(before) != _k(after):
        return {"status": NOT_COMPARABLE, "n": 0, "delta": None, "low": None, "high": None,
                "reason": f"k changed from {_k(before)} to {_k(after)}"}
    n = 0 if deltas is None else int(deltas.size)
    if n < settings.min_paired or interval is None:
        return {"status": NOT_PAIRED, "n": n, "delta": None, "low": None, "high": None,
                "reason": f"{n} example(s) with a value in both runs, fewer than min_paired = {settings.min_paired}"}
    low, high = interval
    real = low > settings.tolerance or high < -settings.tolerance
    return {"status": REAL if real else NOISE, "n": n, "delta": float(deltas.mean()), "low": low, "high": high,
            "reason": None}


def _column(table: pd.DataFrame, name: str) -> np.ndarray | None:
    return table[name].to_numpy(dtype="float64", na_value=np.nan) if name in table else None


def paired_metric_deltas(before: pd.DataFrame | None, after: pd.DataFrame | None,
                         names: Sequence[str]) -> dict[str, np.ndarray | None]:
    """For each metric, the deltas after - before over the ids both tables hold where both
    values are present; None for every metric when either table is missing."""
    if before is None or after is None:
        return {name: None for name in names}
    if before["id"].equals(after["id"]):
        pairs = before, after  # the same ids in the same order, as most reruns hold them
    else:
        joined = before.merge(after, on="id", suffixes=("_before", "_after"))
        pairs = (joined.rename(columns=lambda c: c.removesuffix("_before")),
                 joined.rename(columns=lambda c: c.removesuffix("_after")))
    deltas: dict[str, np.ndarray | None] = {}
    for name in names:
        earlier, later = _column(pairs[0], name), _column(pairs[1], name)
        if earlier is None or later is None:
            deltas[name] = np.empty(0)
            continue
        both = ~np.isnan(earlier) & ~np.isnan(later)
        deltas[name] = later[both] - earlier[both]
    return deltas


def series_steps(series: Series, values: Callable[[dict[str, Any]], pd.DataFrame | None],
                 settings: StepSettings, known: dict[tuple[str, str, str], dict[str, Any]] | None = None,
                 first: int = 0) -> list[dict[str, dict[str, Any]]]:
    """Each run's steps from the run before it in `series`, by metric (the first run's is empty,
    and so is every run's before position `first`, whose steps are not shown).

    `values` gives a run's values.parquet as a table, or None when it cannot be read. `known`
    holds steps already worked out, by `step_key`: those are taken as they are.
    """
    names = series.metrics()
    described = [m for m in METRICS if m.name in names]
    steps: list[dict[str, dict[str, Any]]] = [{} for _ in series.runs]
    pending: list[tuple[int, Metric, np.ndarray | None]] = []
    unknown = set(steps_to_work_out(series, known, first))
    for position in range(max(1, first), len(series.runs)):
        before, after = series.runs[position - 1], series.runs[position]
        if position not in unknown:
            cached = known[step_key(series, before, after)]
            steps[position] = {name: cached[name] for name in names}
            continue
        deltas = paired_metric_deltas(values(before), values(after), names)
        pending.extend((position, m, deltas[m.name]) for m in described)
    drawn = [d for _, _, d in pending if d is not None and d.size >= settings.min_paired]
    intervals = iter(bootstrap_mean_cis(drawn, resamples=settings.resamples, seed=settings.seed,
                                        confidence=settings.confidence) if drawn else [])
    for position, metric, deltas in pending:
        interval = next(intervals) if deltas is not None and deltas.size >= settings.min_paired else None
        steps[position][metric.name] = step(metric, series.runs[position - 1], series.runs[position], deltas,
                                            settings, interval)
    return steps


def steps_to_work_out(series: Series, known: dict[tuple[str, str, str], dict[str, Any]] | None,
                      first: int = 0) -> list[int]:
    """The positions from `first` on whose steps `known` does not hold for every metric."""
    names, known = set(series.metrics()), known or {}
    keys = {position: step_key(series, series.runs[position - 1], series.runs[position])
            for position in range(max(1, first), len(series.runs))}
    return [position for position, key in keys.items() if key not in known or not set(known[key]) >= names]


def step_key(series: Series, before: dict[str, Any], after: dict[str, Any]) -> tuple[str, str, str]:
    """What a worked-out step is known by, under the same settings: its line's kind (the same two
    runs make a step of the scoring line and of the judge's line, with other metrics) and its runs."""
    return series.kind, before["run_id"], after["run_id"]

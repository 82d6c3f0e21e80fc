"""One metric of a run against the human labels of its examples: the calibration's metric entry.

The statistics come from evalbook.calibrate.agreement, which assumes that a higher score predicts
a better answer. A metric whose lower values are better (the retrieval rank) is negated on the way
in, and its thresholds are turned back into its own units on the way out, with the operator that
reads them (`rank <= 2`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np

from evalbook.calibrate import agreement
from evalbook.calibrate.settings import MIN_EXAMPLES, Settings
from evalbook.judge.score import threshold_reading
from evalbook.metrics import Metric
from evalbook.report.reader import RunReport, judge_entry


def configured_threshold(metric: Metric, report: RunReport) -> tuple[float | None, str]:
    """The pass mark the run's profile gives `metric` (in its own units), and where it comes from;
    (None, why) when the profile configures none."""
    if metric.kind == "judge":
        summary = metric.summary(report.data) or {}
        if summary.get("threshold") is None:
            return None, "the judge summary records no threshold"
        placeholder = " (the placeholder: no threshold was configured)" if summary.get("threshold_is_placeholder") else ""
        return float(summary["threshold"]), f"judge.metrics.{metric.name}.threshold{placeholder}"
    if metric.name == "rank":
        return float(report.data["retrieval_summary"]["k"]), "retrieval.k: the gold context in the top k"
    if metric.name == "top_k_match":
        return 1.0, f"retrieval.k = {report.data['retrieval_summary']['k']}: a match passes"
    return None, "the profile configures no pass mark for this metric"


def _flip(metric: Metric, value: Any) -> Any:
    """A value (or array) of `metric` turned so that higher is better, or a turned threshold back
    into the metric's own units: the same negation both ways for a lower-is-better metric."""
    if value is None or metric.higher_is_better:
        return value
    return -value


def operator(metric: Metric) -> str:
    """How a threshold of `metric` reads: a pass is `value >= t`, or `value <= t` for a rank."""
    return ">=" if metric.higher_is_better else "<="


def score_levels(metric: Metric, examples: Sequence[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """For a judge metric that is a ratio of items (statements, criteria): how many examples had
    each item count, and the scores that count can reach. None for a metric without levels."""
    counts: Counter[int] = Counter()
    levels: dict[int, list[str]] = {}
    for example in examples:
        entry = judge_entry(example, metric.name) if metric.kind == "judge" else None
        if entry is None or entry.get("score") is None or not entry.get("score_levels"):
            continue
        n_items = len(entry["score_levels"]) - 1
        counts[n_items] += 1
        levels[n_items] = list(entry["score_levels"])
    if not counts:
        return None
    return [{"n_items": n, "n_examples": counts[n], "levels": levels[n]} for n in sorted(counts)]


def _threshold_entry(name: str, metric: Metric, threshold: float | None, reason: str | None,
                     scores: np.ndarray, passed: np.ndarray,
                     levels: list[dict[str, Any]] | None) -> dict[str, Any]:
    """One threshold of a metric in its own units, with the confusion at it, and for a metric with
    score levels what the threshold means for each item count."""
    value = None if threshold is None else float(_flip(metric, threshold))
    entry: dict[str, Any] = {"name": name, "value": value, "operator": operator(metric), "reason": reason,
                             "confusion": None, "readings": None}
    if threshold is not None:
        entry["confusion"] = agreement.confusion_at(scores, passed, threshold)
        entry["confusion"]["threshold"] = value
    if levels is not None and value is not None:
        entry["readings"] = [{"n_items": level["n_items"], "reading": threshold_reading(level["n_items"], value)}
                             for level in levels]
    return entry


def _pass_fail(metric: Metric, report: RunReport, scores: np.ndarray, passed: np.ndarray,
               levels: list[dict[str, Any]] | None, settings: Settings) -> dict[str, Any]:
    roc = agreement.roc(scores, passed, resamples=settings.resamples, seed=settings.seed,
                        confidence=settings.confidence)
    if roc["curve"] is not None:  # the curve's thresholds too are read in the metric's own units
        roc["curve"]["thresholds"] = [_flip(metric, t) for t in roc["curve"]["thresholds"]]
    configured, where = configured_threshold(metric, report)
    one_class = "undefined: the labelled examples are all of one class"
    youden = agreement.youden_threshold(scores, passed)
    # When every example passes, every threshold has precision 1: the lowest score would be
    # "chosen" without telling passes from fails.
    precise = None if youden is None else agreement.precision_threshold(scores, passed,
                                                                        settings.target_precision)
    target = f"{settings.target_precision:g}"
    if precise is not None:
        precise_reason = f"the lowest threshold whose precision reaches {target}"
    else:
        precise_reason = one_class if youden is None else f"no threshold reaches a precision of {target}"
    thresholds = [
        _threshold_entry("configured", metric, _flip(metric, configured),
                         where, scores, passed, levels),
        _threshold_entry("youden", metric, youden,
                         "maximises Youden's J (true-positive rate minus false-positive rate)"
                         if youden is not None else one_class, scores, passed, levels),
        _threshold_entry("target_precision", metric, precise, precise_reason, scores, passed, levels),
    ]
    return {"n": int(len(scores)), "roc": roc, "thresholds": thresholds}


def calibrate_metric(metric: Metric, report: RunReport, examples: Sequence[dict[str, Any]],
                     labels: Sequence[float], passed: Sequence[Any] | None, notes: Sequence[str | None],
                     settings: Settings) -> dict[str, Any]:
    """The calibration entry of `metric` over the labelled `examples` (report examples, with their
    aggregated `labels`, the humans' pass/fail in `passed` (None entries are undefined; `passed`
    None when no pass/fail applies) and the raters' `notes`), all in one order."""
    raw = [metric.value(example) for example in examples]
    present = np.array([value is not None for value in raw])
    entry: dict[str, Any] = {
        "metric": metric.name, "label": metric.label, "kind": metric.kind,
        "higher_is_better": metric.higher_is_better, "n": int(present.sum()),
        "n_missing": int((~present).sum()), "skipped_reason": None, "rank_agreement": None,
        "pass_fail": None, "score_levels": None, "disagreements": [],
    }
    if entry["n"] < MIN_EXAMPLES:
        entry["skipped_reason"] = f"only {entry['n']} labelled example(s) have a value; at least {MIN_EXAMPLES} are needed"
        return entry
    values = np.array([value for value in raw if value is not None], dtype=np.float64)
    scores = _flip(metric, values)
    kept = [example for example, keep in zip(examples, present) if keep]
    kept_labels = np.array([label for label, keep in zip(labels, present) if keep], dtype=np.float64)
    entry["rank_agreement"] = agreement.rank_agreement(scores, kept_labels, resamples=settings.resamples,
                                                       seed=settings.seed, confidence=settings.confidence)
    entry["score_levels"] = score_levels(metric, kept)
    if passed is not None:
        outcome = [flag for flag, keep in zip(passed, present) if keep]
        defined = np.array([flag is not None for flag in outcome])
        if defined.sum() >= MIN_EXAMPLES:
            entry["pass_fail"] = _pass_fail(metric, report, scores[defined],
                                            np.array([bool(f) for f in outcome if f is not None]),
                                            entry["score_levels"], settings)
            entry["pass_fail"]["n_undefined"] = int((~defined).sum())
    kept_notes = [note for note, keep in zip(notes, present) if keep]
    entry["disagreements"] = _disagreements(metric, kept, values, scores, kept_labels, kept_notes,
                                            settings.n_disagreements)
    return entry


def _disagreements(metric: Metric, examples: Sequence[dict[str, Any]], values: np.ndarray,
                   scores: np.ndarray, labels: np.ndarray, notes: Sequence[str | None],
                   n: int) -> list[dict[str, Any]]:
    ids = [example["id"] for example in examples]
    by_id = {example["id"]: (example, value, note) for example, value, note in zip(examples, values, notes)}
    listed = []
    for item in agreement.rank_disagreements(ids, scores, labels, n):
        example, value, note = by_id[item["id"]]
        listed.append({**item, "score": float(value), "question": example["question"],
                       "reference_answer": example["reference_answer"],
                       "generated_answer": example["generated_answer"], "note": note})
    return listed

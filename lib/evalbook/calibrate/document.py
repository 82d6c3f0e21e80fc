"""The calibration of a run against human labels: the calibrate-v1 document, and writing it once.

For every metric of the run with at least two labelled values, the document holds its rank
agreement with the labels, and, when the labels say pass or fail, its ROC AUC and three thresholds
(the profile's, Youden's and the lowest reaching the target precision) with the confusion at each
(evalbook.calibrate.analysis). It records what the thresholds are valid for: the judge label and
the model pins of the run. A threshold tuned here does not carry over to another judge, another
embedding model or another set of references.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from evalbook.calibrate import agreement
from evalbook.calibrate.analysis import calibrate_metric
from evalbook.calibrate.labels import Labels, Matched
from evalbook.calibrate.settings import DEFAULTS, MIN_EXAMPLES, CalibrationError, Settings
from evalbook.files import write_atomically
from evalbook.metrics import METRICS, Metric
from evalbook.metrics import metric as registered
from evalbook.provenance import git_commit, package_versions
from evalbook.report.reader import RunReport
from evalbook.validation import CALIBRATION_SCHEMA, mismatch

KIND = "calibration"
SCHEMA_VERSION = "1.0"
PACKAGES = ("evalbook", "scipy", "scikit-learn", "krippendorff", "numpy", "pandas")
# Krippendorff's alpha between raters is computed at the level of measurement of the labels.
ALPHA_LEVELS = {"ordinal": "ordinal", "binary": "nominal", "continuous": "interval"}
METHODS = {
    "label": "an example's label is the median of its raters' labels; for binary labels, the share "
             "of its raters who said pass",
    "pass": "binary labels: a share above 0.5 passes, below fails, and exactly 0.5 (raters tied) "
            "is left out; ordinal and continuous labels: the label at or above good_label_min passes",
    "rank": "Spearman's rho (scipy.stats.spearmanr) and Kendall's tau-b (scipy.stats.kendalltau) "
            "of each metric, turned so that higher is better (the retrieval rank is negated), "
            "against the label, over the labelled examples with a value",
    "interval": "paired percentile bootstrap (scipy.stats.bootstrap, method percentile, "
                "numpy.random.default_rng(seed)); null when the statistic is undefined in a resample",
    "roc": "ROC AUC of the metric against the humans' pass/fail (sklearn.metrics.roc_auc_score)",
    "thresholds": "a threshold passes an answer whose value is at or above it (at or below it for "
                  "the retrieval rank); confusion, precision, recall, F1, accuracy and Cohen's kappa "
                  "from scikit-learn",
    "raters": "Krippendorff's alpha between the raters (the krippendorff package), at the labels' "
              "level of measurement: the agreement a metric can hope to reach with them",
    "disagreements": "the examples where the metric's percentile rank and the label's differ most "
                     "(scipy.stats.rankdata, average ties)",
}


def _utc(moment: datetime) -> str:
    if moment.utcoffset() is None or moment.utcoffset().total_seconds() != 0:
        raise CalibrationError("created_at must be timezone-aware UTC")
    return moment.isoformat().replace("+00:00", "Z")


def valid_for(report: RunReport) -> dict[str, Any]:
    """What the run's scores, and so the thresholds tuned on them, depend on."""
    data, provenance = report.data, report.data["provenance"]
    weights = provenance.get("weights_sha256") or {}
    judge = report.judge_summary
    return {
        "dataset": data["dataset"].get("name"), "split": data["dataset"].get("split"),
        "generator": data["models"].get("generator"),
        "judge_label": judge.get("label") if report.judge_ran else None,
        "judge_model": data["models"].get("judge"),
        "sentence_transformer": {"name": data["models"].get("sentence_transformer"),
                                 "sha256": weights.get("sentence_transformer")},
        "bertscore": {"name": data["models"].get("bertscore"), "sha256": weights.get("bertscore"),
                      "num_layers": provenance.get("bertscore_num_layers"),
                      "hash": provenance.get("bertscore_hash")},
        "retrieval_k": data["retrieval_summary"]["k"],
    }


def _calibrated_metrics(report: RunReport) -> list[Metric]:
    """The registry's metrics that this run reports: a judge metric only when its judge ran; no
    check, whose pass and fail are fixed, with no threshold to tune (docs/checks.md measures the
    fact check against planted errors instead)."""
    judged = {m.name for m in report.judged_metrics()}
    return [m for m in METRICS if m.kind != "check" and (m.kind != "judge" or m.name in judged)]


def _raters(labels: Labels, ids: list[str]) -> dict[str, Any]:
    raters, label_ids, matrix = labels.ratings_matrix()
    keep = [i for i, label_id in enumerate(label_ids) if label_id in set(ids)]
    level = ALPHA_LEVELS[labels.kind]
    if len(raters) < 2:
        return {"alpha": None, "level": level, "n_raters": len(raters), "n_units": 0,
                "reason": "one rater: no agreement between raters to measure"}
    return agreement.krippendorff_alpha(matrix[:, keep], level)


def _pass_fail_rule(labels: Labels, settings: Settings) -> tuple[float | None, str]:
    if labels.kind == "binary":
        return None, "binary labels: pass and fail as the raters gave them"
    return settings.good_label_min, f"a label of {settings.good_label_min:g} or more passes"


def build_calibration(report: RunReport | dict[str, Any], labels: Labels, matched: Matched, *,
                      report_location: str, labels_sha256: str | None, created_at: datetime,
                      calibration_id: str, settings: Settings = DEFAULTS, root: Path | None = None) -> dict[str, Any]:
    """The calibrate-v1 document of `report` against `labels` (matched to it by `matched`)."""
    report = RunReport.of(report)
    by_id = {example["id"]: example for example in report.examples}
    ids = list(matched.ids)
    per_example = labels.per_example().set_index("id").loc[ids]
    cut, rule = _pass_fail_rule(labels, settings)
    passed = labels.passed(cut).loc[ids]
    outcome = [None if pd.isna(flag) else bool(flag) for flag in passed]
    examples = [by_id[i] for i in ids]
    label_values = [float(value) for value in per_example["label"]]
    notes = [None if pd.isna(note) else str(note) for note in per_example["notes"]]
    metrics = [calibrate_metric(m, report, examples, label_values, outcome, notes, settings)
               for m in _calibrated_metrics(report)]
    if not any(entry["skipped_reason"] is None for entry in metrics):
        raise CalibrationError(f"no metric of run {report.run_id} has {MIN_EXAMPLES} labelled values: nothing to calibrate")
    n_pass = sum(flag is True for flag in outcome)
    n_fail = sum(flag is False for flag in outcome)
    return {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "calibration_id": calibration_id,
        "created_at": _utc(created_at),
        "run": {"run_id": report.run_id, "location": report_location, "timestamp": report.data["timestamp"],
                "n_examples": len(report.examples), "judge_status": report.judge_summary.get("status")},
        "valid_for": valid_for(report),
        "labels": {"path": labels.path, "sha256": labels_sha256, "kind": labels.kind,
                   "kind_reason": labels.kind_reason, "n_rows": int(len(labels.table)),
                   "raters": list(labels.raters), "ignored_columns": list(labels.ignored_columns),
                   "distribution": _distribution(label_values)},
        "matching": {"n_matched": matched.n_matched, "n_unknown": matched.n_unknown,
                     "n_unlabelled": matched.n_unlabelled, "unknown_ids": list(matched.unknown_ids),
                     "unlabelled_ids": list(matched.unlabelled_ids)},
        "pass_fail": {"rule": rule, "good_label_min": cut, "n_pass": n_pass, "n_fail": n_fail,
                      "n_undefined": len(outcome) - n_pass - n_fail,
                      "base_rate": n_pass / (n_pass + n_fail) if n_pass + n_fail else None},
        "raters": _raters(labels, ids),
        "metrics": metrics,
        "examples": [{"id": i, "label": value, "passed": flag, "n_raters": int(n),
                      "scores": {m["metric"]: registered(m["metric"]).value(by_id[i]) for m in metrics}}
                     for i, value, flag, n in zip(ids, label_values, outcome, per_example["n_raters"])],
        "settings": {"resamples": settings.resamples, "seed": settings.seed, "confidence": settings.confidence,
                     "good_label_min": settings.good_label_min, "target_precision": settings.target_precision,
                     "n_disagreements": settings.n_disagreements, "label_kind": settings.label_kind},
        "methods": METHODS,
        "provenance": {"git_commit": git_commit(root) if root else None, "package_versions": package_versions(PACKAGES)},
    }


def _distribution(values: list[float]) -> list[dict[str, Any]]:
    """How many examples have each label value, lowest first."""
    counts: dict[float, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return [{"label": value, "n": counts[value]} for value in sorted(counts)]


def validate_calibration(doc: dict[str, Any]) -> None:
    """Raise CalibrationError listing every violation of schemas/calibrate-v1.json (and any NaN)."""
    problem = mismatch(doc, CALIBRATION_SCHEMA, "calibration")
    if problem:
        raise CalibrationError(problem)


def write_calibration(doc: dict[str, Any], path: Path, overwrite: bool = False) -> Path:
    """Validate, then write the calibration atomically; write-once unless `overwrite` (the
    interactive scratch folder). An invalid calibration is not written."""
    validate_calibration(doc)
    data = (json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    write_atomically(Path(path), data, overwrite=overwrite)
    return Path(path)

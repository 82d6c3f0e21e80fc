"""What the runs index lists: every run, comparison and calibration under an outputs root, as rows.

A run's row holds its state (evalbook.runs reads run.json and the markers), the headline fields
of its report and the files worth opening; a comparison's and a calibration's, the headline of
their JSON. evalbook.publish.index renders them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evalbook.layout import (CALIBRATE_STAGE, CALIBRATION_DIR, COMPARE_STAGE, COMPARISONS_DIR, REMOTE_CALIBRATIONS_DIR,
                             REPORT_STAGE, RUN_DAY_GLOB, RUN_JSON, report_path, run_json, stage_pages)
from evalbook.metrics import METRICS
from evalbook.publish.pages import noinput_path
from evalbook.trend.headline import ensure_headline
from evalbook.runs import RunJson, RunRecord, collect_run_records, json_field, not_tracked, not_uploaded, read_json, utc

REPORT_NOTEBOOK = f"{REPORT_STAGE}.ipynb"


# The headline metrics every run has a column for; judge metrics get one when a run has them.
RUN_COLUMNS = tuple(m.name for m in METRICS if m.headline and m.kind != "judge")


def _headline_fields(headline: dict[str, Any]) -> dict[str, Any]:
    """What the index shows of a run's headline (evalbook.trend.headline)."""
    run, scoring = headline.get("run") or {}, headline.get("scoring") or {}
    layer = scoring.get("bertscore_layer")
    models = run.get("models") or {}
    return {
        "dataset": {key: json_field(headline, "dataset", key) for key in ("name", "split", "n_examples")},
        "models": {"sentence_transformer": models.get("sentence_transformer"), "bertscore": models.get("bertscore"),
                   "bertscore_layer": layer if isinstance(layer, int) and not isinstance(layer, bool) else None,
                   "generator": models.get("generator")} if run else {},
        # the judge's label, else whether it ran; nothing for a report from before judging
        "judge_label": run.get("judge_label") or (run.get("judge_status") if run.get("judge_status") != "absent" else None),
        "k": scoring.get("k"),
        "metrics": {m.name: json_field(headline, "metrics", m.name, "mean") for m in METRICS
                    if m.headline and (m.kind != "judge" or m.name in (headline.get("metrics") or {}))},
        # how many examples failed a check; None for a headline from before the checks (1.0)
        "checks": headline.get("checks"),
    }


def _links(run_dir: Path, report_file: Path, summary: RunJson | None) -> dict[str, Path]:
    """The run's files worth opening, by label; only files that exist."""
    report_notebook = run_dir / REPORT_NOTEBOOK
    candidates = {"report": noinput_path(report_notebook),
                  "report with code": report_notebook.with_suffix(".html"),
                  "JSON": report_file,
                  RUN_JSON: run_json(run_dir)}
    for stage in summary.stages if summary else []:
        if stage.get("status") == "failed" and stage.get("html"):
            label = f"{stage.get('stage', 'failed stage')} (failed)"
            candidates[label] = run_dir / Path(stage["html"]).name
    return {label: path for label, path in candidates.items() if path.is_file()}


def _run_row(run: RunRecord) -> dict[str, Any]:
    row: dict[str, Any] = {"run_id": run.run_id, "env": run.env, "run_dir": run.run_dir,
                           "started_at": run.started_at, "status": run.status, "reason": run.reason,
                           "report": run.report, "dataset": {}, "models": {}, "judge_label": None,
                           "k": None, "metrics": {}, "checks": None, "overrides": run.overrides}
    headline = ensure_headline(run)
    if headline is not None and headline.get("run") is not None:
        row.update(_headline_fields(headline))
    row["links"] = _links(run.run_dir, report_path(run.run_dir), run.summary)
    return row


def collect_runs(outputs_root: Path) -> list[dict[str, Any]]:
    """One row per run folder under `outputs_root`, newest first: its RunRecord (evalbook.runs)
    and what the index shows of its report.

    Each row holds the record's run_id, env, run_dir, started_at, status, reason, report and
    overrides, then dataset, models, judge_label, k, metrics (the registry's headline means, by
    metric name) and links (label -> existing file).
    """
    return [_run_row(run) for run in collect_run_records(Path(outputs_root))]


_COMPARISON_GLOBS = (f"{RUN_DAY_GLOB}/{COMPARISONS_DIR}/*.json",
                     f"*/{COMPARISONS_DIR}/*.json")
# a comparison's page: the one without code when it was made, else the full one
COMPARE_PAGES = stage_pages(COMPARE_STAGE)
HEADLINE_DELTAS = tuple(m.name for m in METRICS if m.headline and m.kind == "similarity")


def collect_comparisons(outputs_root: Path) -> list[dict[str, Any]]:
    """One row per comparison JSON under `outputs_root` (05_compare's output), newest first.

    Each row holds path, created_at (aware UTC, None when unreadable), baseline and candidate
    run ids, n_paired, the headline deltas {metric: (mean_delta, ci_low, ci_high) or None when
    not compared}, the judge gate's outcome, reason (why the file is unreadable, else None),
    html (the comparison page, when it exists), not_uploaded (`not_uploaded`) and not_tracked
    (`not_tracked`).
    """
    outputs_root = Path(outputs_root)
    rows = []
    for path in sorted({p for pattern in _COMPARISON_GLOBS for p in outputs_root.glob(pattern)}):
        doc, error = read_json(path, "comparison JSON")
        page = next((path.with_suffix("") / name for name in COMPARE_PAGES
                     if (path.with_suffix("") / name).is_file()), None)
        row: dict[str, Any] = {"path": path, "html": page, "not_uploaded": not_uploaded(path.with_suffix("")),
                               "not_tracked": not_tracked(path.with_suffix("")),
                               "reason": error, "created_at": None, "baseline": None,
                               "candidate": None, "n_paired": None, "deltas": {}, "judge": None}
        if doc is not None and doc.get("kind") == "compare":
            metrics = {m["metric"]: m for m in doc.get("metrics", []) if isinstance(m, dict)}
            row.update(created_at=utc(doc.get("created_at")),
                       baseline=json_field(doc, "baseline", "run_id"),
                       candidate=json_field(doc, "candidate", "run_id"),
                       n_paired=json_field(doc, "pairing", "n_paired"),
                       judge="compared" if json_field(doc, "gates", "judge", "compared") else "not compared",
                       deltas={m: ((metrics[m]["mean_delta"], metrics[m]["ci_low"], metrics[m]["ci_high"])
                                   if m in metrics and metrics[m].get("compared") else None)
                               for m in HEADLINE_DELTAS})
        elif doc is not None:
            row["reason"] = "not a comparison document (kind is not 'compare')"
        rows.append(row)
    oldest = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(rows, key=lambda row: (row["created_at"] or oldest, str(row["path"])), reverse=True)


_CALIBRATION_GLOBS = (f"{RUN_DAY_GLOB}/*/{CALIBRATION_DIR}/*.json", f"*/{REMOTE_CALIBRATIONS_DIR}/*.json")
CALIBRATE_PAGES = stage_pages(CALIBRATE_STAGE)
# the metrics whose agreement with the labels the index shows: the headline similarity metrics
CALIBRATION_COLUMNS = HEADLINE_DELTAS


def _spearman(doc: dict[str, Any], name: str) -> tuple[float, float | None, float | None] | None:
    entry = next((m for m in doc.get("metrics", []) if isinstance(m, dict) and m.get("metric") == name), None)
    spearman = json_field(entry, "rank_agreement", "spearman")
    if not isinstance(spearman, dict) or spearman.get("estimate") is None:
        return None
    return spearman["estimate"], spearman.get("low"), spearman.get("high")


def collect_calibrations(outputs_root: Path) -> list[dict[str, Any]]:
    """One row per calibration JSON under `outputs_root` (06_calibrate's output), newest first.

    Each row holds path, html (the calibration page, when it exists), not_uploaded
    (`not_uploaded`), reason (why the file is unreadable, else None), created_at, run_id, labels
    (the labels file's name), kind, n_matched, alpha (the raters' Krippendorff's alpha) and rho
    {metric: (estimate, low, high) or None} for the headline similarity metrics.
    """
    outputs_root = Path(outputs_root)
    rows = []
    for path in sorted({p for pattern in _CALIBRATION_GLOBS for p in outputs_root.glob(pattern)}):
        doc, error = read_json(path, "calibration JSON")
        page = next((path.with_suffix("") / name for name in CALIBRATE_PAGES
                     if (path.with_suffix("") / name).is_file()), None)
        row: dict[str, Any] = {"path": path, "html": page, "not_uploaded": not_uploaded(path.with_suffix("")),
                               "reason": error, "created_at": None, "run_id": None,
                               "labels": None, "kind": None, "n_matched": None, "alpha": None, "rho": {}}
        if doc is not None and doc.get("kind") == "calibration":
            labels_path = json_field(doc, "labels", "path")
            row.update(created_at=utc(doc.get("created_at")), run_id=json_field(doc, "run", "run_id"),
                       labels=Path(labels_path).name if isinstance(labels_path, str) else None,
                       kind=json_field(doc, "labels", "kind"), n_matched=json_field(doc, "matching", "n_matched"),
                       alpha=json_field(doc, "raters", "alpha"),
                       rho={name: _spearman(doc, name) for name in CALIBRATION_COLUMNS})
        elif doc is not None:
            row["reason"] = "not a calibration document (kind is not 'calibration')"
        rows.append(row)
    oldest = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(rows, key=lambda row: (row["created_at"] or oldest, str(row["path"])), reverse=True)


# What the page shows: plain values for the templates index*.html, which write every tag.

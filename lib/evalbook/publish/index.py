"""The index of every run under an outputs root: one static page, `<outputs_root>/index.html`.

A run is a folder `<outputs_root>/<env>/eval-runs/<yyyy>/<mm>/<dd>/<run_id>/` (evalbook.layout);
its report, when the run succeeded, is `<run_id>.json` beside the folder. The page needs no
script and fetches nothing: the style sheet inline, links relative to the page. The template
index.html writes every tag and escapes every value; this module gathers the values it shows.
What state each run is in (its status, from run.json and the RUNNING, FAILED and NOT_UPLOADED
markers) is read by evalbook.runs; this module shows it.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

from evalbook.files import write_atomically
from evalbook.formatting import MISSING  # noqa: F401 - re-exported: how the page shows a missing value
from evalbook.metrics import METRICS, of_kind
from evalbook.metrics import metric as registered
from evalbook.publish.pages import noinput_path
from evalbook.report.reader import RunReport
from evalbook.layout import (CALIBRATION_DIR, COMPARISONS_DIR, REMOTE_CALIBRATIONS_DIR, RUN_DAY_GLOB, RUN_JSON,
                             report_path, run_json)
from evalbook.runs import RunJson, RunRecord, collect_run_records, json_field, not_uploaded, read_json, utc
from evalbook.templating import render

INDEX_NAME = "index.html"
REPORT_NOTEBOOK = "04_report.ipynb"


def _bertscore_layer(report: dict[str, Any]) -> int | None:
    layer = json_field(report, "provenance", "bertscore_num_layers")
    return layer if isinstance(layer, int) and not isinstance(layer, bool) else None


# The headline metrics every run has a column for; judge metrics get one when a run has them.
RUN_COLUMNS = tuple(m.name for m in METRICS if m.headline and m.kind != "judge")


def _report_fields(report: dict[str, Any]) -> dict[str, Any]:
    judge = report.get("judge_summary")
    return {
        "dataset": {key: json_field(report, "dataset", key) for key in ("name", "split", "n_examples")},
        "models": {"sentence_transformer": json_field(report, "models", "sentence_transformer"),
                   "bertscore": json_field(report, "models", "bertscore"),
                   "bertscore_layer": _bertscore_layer(report),
                   "generator": json_field(report, "models", "generator")},
        "judge_label": json_field(judge, "label") or json_field(judge, "status"),
        "k": json_field(report, "retrieval_summary", "k"),
        "metrics": RunReport(report).headline_means(),
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
                           "k": None, "metrics": {}, "overrides": run.overrides}
    if run.report_data is not None:
        row.update(_report_fields(run.report_data))
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
COMPARE_PAGES = ("05_compare.noinput.html", "05_compare.html")
HEADLINE_DELTAS = tuple(m.name for m in METRICS if m.headline and m.kind == "similarity")


def collect_comparisons(outputs_root: Path) -> list[dict[str, Any]]:
    """One row per comparison JSON under `outputs_root` (05_compare's output), newest first.

    Each row holds path, created_at (aware UTC, None when unreadable), baseline and candidate
    run ids, n_paired, the headline deltas {metric: (mean_delta, ci_low, ci_high) or None when
    not compared}, the judge gate's outcome, reason (why the file is unreadable, else None),
    html (the comparison page, when it exists) and not_uploaded (`not_uploaded`).
    """
    outputs_root = Path(outputs_root)
    rows = []
    for path in sorted({p for pattern in _COMPARISON_GLOBS for p in outputs_root.glob(pattern)}):
        doc, error = read_json(path, "comparison JSON")
        page = next((path.with_suffix("") / name for name in COMPARE_PAGES
                     if (path.with_suffix("") / name).is_file()), None)
        row: dict[str, Any] = {"path": path, "html": page, "not_uploaded": not_uploaded(path.with_suffix("")),
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
CALIBRATE_PAGES = ("06_calibrate.noinput.html", "06_calibrate.html")
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

def _shown(value: Any) -> Any:
    """`value` as a cell shows it, or None (the em dash) when missing, empty or NaN."""
    if value is None or value == "" or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return value


def _finite(value: Any) -> int | float | None:
    """`value` when it is a finite number (not a bool), else None, which the number filter shows
    as the em dash: a report's odd value (a string, infinity) never reaches a format."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def _href(page_dir: Path, target: Path) -> str:
    return "/".join(quote(part) for part in target.relative_to(page_dir).parts)


def _judge_metric_names(rows: list[dict[str, Any]]) -> list[str]:
    """The judge metrics any row has a mean for, in the registry's order."""
    return [m.name for m in of_kind("judge") if any(m.name in row["metrics"] for row in rows)]


def _overrides(overrides: dict[str, Any] | None) -> list[tuple[str, Any]] | None:
    """What the run changed from its profile, as (key, value) pairs: what tells runs apart. A
    local path is shown by its file name (an absolute path says nothing to the page's reader)."""
    if overrides is None:
        return None
    return [(key, _shown(Path(value).name if isinstance(value, str) and Path(value).is_absolute() else value))
            for key, value in overrides.items()]


def _scores(row: dict[str, Any], judge_metrics: list[str]) -> list[dict[str, Any]]:
    """The row's means, one per numeric column; a retrieval mean carries its run's k."""
    k = row["k"]
    scores = []
    for name in [*RUN_COLUMNS, *judge_metrics]:
        mean = _finite(row["metrics"].get(name))
        with_k = registered(name).kind == "retrieval" and mean is not None and isinstance(k, int)
        scores.append({"mean": mean, "k": k if with_k else None})
    return scores


def _dataset(dataset: dict[str, Any]) -> dict[str, Any] | None:
    """The dataset's name, split and size; None for a run without a report."""
    if not dataset:
        return None
    return {"name": _shown(dataset.get("name")), "split": _shown(dataset.get("split")),
            "n_examples": dataset.get("n_examples")}


def _models(models: dict[str, Any]) -> dict[str, Any] | None:
    """The run's models and BERTScore's layer; None for a run without a report."""
    if not models:
        return None
    return {"sentence_transformer": _shown(models.get("sentence_transformer")),
            "bertscore": _shown(models.get("bertscore")), "bertscore_layer": models.get("bertscore_layer"),
            "generator": _shown(models.get("generator"))}


def _run_view(row: dict[str, Any], judge_metrics: list[str], page_dir: Path) -> dict[str, Any]:
    """What index_runs.html shows of a row of collect_runs. The reason why a run is not a success
    shows its first line, and whole when pointed at."""
    reason = row["reason"]
    return {"started_at": row["started_at"], "run_id": _shown(row["run_id"]), "env": _shown(row["env"]),
            "status": _shown(row["status"]), "status_class": row["status"].replace(" ", "-"),
            "reason": reason or None, "reason_line": reason.strip().splitlines()[0] if reason else None,
            "dataset": _dataset(row["dataset"]), "models": _models(row["models"]),
            "judge": _shown(row["judge_label"]), "overrides": _overrides(row["overrides"]),
            "scores": _scores(row, judge_metrics),
            "links": [(label, _href(page_dir, path)) for label, path in row["links"].items()]}


def _document_links(row: dict[str, Any], page_label: str, page_dir: Path) -> list[tuple[str, str]]:
    """A comparison's or calibration's links: its page, when it exists, and its JSON."""
    links = [("JSON", _href(page_dir, row["path"]))]
    if row["html"] is not None:
        links.insert(0, (page_label, _href(page_dir, row["html"])))
    return links


def _document_view(row: dict[str, Any], page_label: str, page_dir: Path) -> dict[str, Any]:
    """What a comparison and a calibration row both show: when, why unreadable, links, upload."""
    return {"created_at": row["created_at"], "reason": row["reason"] or None,
            "links": _document_links(row, page_label, page_dir), "not_uploaded": row.get("not_uploaded") or None}


def _delta(delta: tuple[Any, Any, Any] | None) -> dict[str, Any] | None:
    """A headline delta with its interval, shaded worse or better when the whole interval lies
    below or above zero."""
    if delta is None:
        return None
    mean, low, high = delta
    shade = "worse" if high is not None and high < 0 else ("better" if low is not None and low > 0 else None)
    return {"mean": mean, "low": _finite(low), "high": _finite(high), "shade": shade}


def _comparison_view(row: dict[str, Any], page_dir: Path) -> dict[str, Any]:
    """What index_comparisons.html shows of a row of collect_comparisons."""
    return {**_document_view(row, "comparison", page_dir),
            "baseline": _shown(row["baseline"]), "candidate": _shown(row["candidate"]),
            "n_paired": _shown(row["n_paired"]),
            "deltas": [_delta(row["deltas"].get(name)) for name in HEADLINE_DELTAS]}


def _rho(rho: tuple[Any, Any, Any] | None) -> dict[str, Any] | None:
    """Spearman's rho with its interval, when the calibration has one."""
    if rho is None:
        return None
    estimate, low, high = rho
    return {"estimate": _finite(estimate), "low": _finite(low), "high": _finite(high),
            "has_interval": low is not None}


def _calibration_view(row: dict[str, Any], page_dir: Path) -> dict[str, Any]:
    """What index_calibrations.html shows of a row of collect_calibrations."""
    return {**_document_view(row, "calibration", page_dir),
            "run_id": _shown(row["run_id"]), "labels": _shown(row["labels"]),
            "n_matched": _shown(row["n_matched"]), "alpha": _finite(row["alpha"]),
            "rho": [_rho(row["rho"].get(name)) for name in CALIBRATION_COLUMNS]}


def _status_counts(rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return sorted(counts.items())


def render_index(rows: list[dict[str, Any]], page_dir: Path,
                 comparisons: list[dict[str, Any]] | None = None,
                 calibrations: list[dict[str, Any]] | None = None) -> str:
    """The index page for `rows` (from collect_runs), `comparisons` (from collect_comparisons) and
    `calibrations` (from collect_calibrations), with links relative to `page_dir`."""
    judge_metrics = _judge_metric_names(rows)
    labels = [*(registered(name).label for name in RUN_COLUMNS),
              *(f"judge {registered(name).label}" for name in judge_metrics)]
    return render("index.html",
                  runs=[_run_view(row, judge_metrics, page_dir) for row in rows],
                  status_counts=_status_counts(rows),
                  score_headers=[label[:1].upper() + label[1:] for label in labels],
                  comparisons=[_comparison_view(row, page_dir) for row in comparisons or []],
                  calibrations=[_calibration_view(row, page_dir) for row in calibrations or []],
                  rho_headers=[registered(name).label for name in CALIBRATION_COLUMNS])


def build_index(outputs_root: Path) -> Path:
    """Write `<outputs_root>/index.html` listing every run, comparison and calibration, replacing
    the previous index atomically."""
    outputs_root = Path(outputs_root)
    page = render_index(collect_runs(outputs_root), outputs_root, collect_comparisons(outputs_root),
                        collect_calibrations(outputs_root))
    index = outputs_root / INDEX_NAME
    write_atomically(index, page.encode("utf-8"), overwrite=True)
    return index

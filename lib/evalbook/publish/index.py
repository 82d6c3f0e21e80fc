"""The index of every run under an outputs root: one static page, `<outputs_root>/index.html`.

A run is a folder `<outputs_root>/<env>/eval-runs/<yyyy>/<mm>/<dd>/<run_id>/` (evalbook.layout);
its report, when the run succeeded, is `<run_id>.json` beside the folder. The page fetches
nothing: the style sheet and the filter box's small script inline (index_filter.js), links
relative to the page; without the script every row still shows. No cell breaks inside a word:
long values (a run id, a model's hub name, an override) are shown short, whole on hover, and a
run's failure is one sentence on a line of its own under its row, its paths shortened. This module only
renders: evalbook.publish.catalog gathers the rows (each run's state from evalbook.runs, and the
comparisons and calibrations), this module turns them into plain values, and the template
index_page.html writes every tag and escapes every value.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from evalbook.files import write_atomically
from evalbook.layout import INDEX_FILE, TREND_FILE, TREND_PAGE
from evalbook.metrics import metric as registered
from evalbook.metrics import of_kind
from evalbook.publish.catalog import (CALIBRATION_COLUMNS, HEADLINE_DELTAS, RUN_COLUMNS, collect_calibrations,
                                      collect_comparisons, collect_runs)
from evalbook.publish.pages import plain_paths
from evalbook.runs import utc
from evalbook.templating import render
from evalbook.trend.document import latest_series, read_previous, step_words

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


# The longest value a cell shows whole; a longer one is cut with an ellipsis and shown whole on hover.
SHOWN_VALUE = 16
RUN_ID_SHOWN = 8  # a run id's first characters, as git shows a commit
JUDGE_LABEL_SHOWN = 14  # `judge-` and the first 8 characters of its hash


def _clipped(value: Any, limit: int = SHOWN_VALUE) -> dict[str, Any] | None:
    """A value as a cell shows it: {"text", "full"}, the text cut to `limit` characters with an
    ellipsis, and the full text (for the hover title) when it was cut; None when missing."""
    value = _shown(value)
    if value is None:
        return None
    text = str(value)
    if len(text) <= limit:
        return {"text": text, "full": None}
    return {"text": text[:limit - 1] + "\u2026", "full": text}


def _model(name: Any) -> dict[str, Any] | None:
    """A model as a cell shows it: its name without the hub owner (`all-MiniLM-L6-v2`), whole on hover."""
    value = _shown(name)
    if value is None:
        return None
    short = _clipped(str(value).rsplit("/", 1)[-1])
    return {"text": short["text"], "full": str(value) if short["text"] != str(value) else None}


def _overrides(overrides: dict[str, Any] | None) -> list[tuple[str, Any]] | None:
    """What the run changed from its profile, as (key, value) pairs: what tells runs apart. A
    local path is shown by its file name (an absolute path says nothing to the page's reader);
    a long value is clipped (_clipped)."""
    if overrides is None:
        return None
    return [(key, _clipped(Path(value).name if isinstance(value, str) and Path(value).is_absolute() else value))
            for key, value in overrides.items()]


_OLD_FAILURE = re.compile(r"^stage (\S+) failed; executed notebook: ")
_PYTHON_ERROR = re.compile(r"^[A-Za-z_][\w.]*: (.+)$")


def reason_sentence(reason: str | None, page_dir: Path) -> str | None:
    """Why a run is not a success, in one sentence: the reason's first line, its absolute paths
    shortened (relative to the page's folder, else a file's name). A run from before the
    sentence (its first line named the executed notebook) gets its error's message instead."""
    if not reason or not reason.strip():
        return None
    lines = reason.strip().splitlines()
    old = _OLD_FAILURE.match(lines[0])
    found = _PYTHON_ERROR.match(lines[-1]) if old else None
    sentence = f"stage {old.group(1)} failed: {found.group(1)}" if old and found else lines[0]
    return plain_paths(sentence, page_dir)


def _judge(label: Any) -> dict[str, Any] | None:
    """The judge's label, clipped (`judge-01234567…`, whole on hover), or its status in words (`not run`)."""
    value = _shown(label)
    if value is None:
        return None
    text = str(value)
    return _clipped(text, JUDGE_LABEL_SHOWN) if text.startswith("judge-") else {"text": text.replace("_", " "),
                                                                                 "full": None}


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
    return {"name": _clipped(dataset.get("name")), "split": _clipped(dataset.get("split")),
            "n_examples": dataset.get("n_examples")}


def _models(models: dict[str, Any]) -> dict[str, Any] | None:
    """The run's models and BERTScore's layer; None for a run without a report."""
    if not models:
        return None
    return {"sentence_transformer": _model(models.get("sentence_transformer")),
            "bertscore": _model(models.get("bertscore")), "bertscore_layer": models.get("bertscore_layer"),
            "generator": _clipped(models.get("generator"))}


def _checks(checks: dict[str, Any] | None) -> dict[str, Any] | None:
    """How many of the run's examples failed a check, of how many; None for a run without checks."""
    if not isinstance(checks, dict):
        return None
    failing, examples = _finite(checks.get("n_examples_failing")), _finite(checks.get("n_examples"))
    if failing is None or examples is None:
        return None
    return {"failing": failing, "n": examples, "errors": _finite(checks.get("n_examples_with_errors")) or 0}


def _run_view(row: dict[str, Any], judge_metrics: list[str], page_dir: Path) -> dict[str, Any]:
    """What index_runs.html shows of a row of collect_runs. Why a run is not a success is one
    sentence (reason_sentence), on a line under the row; the whole reason, paths shortened, on hover."""
    reason = row["reason"]
    run_id = _shown(row["run_id"])
    return {"started_at": row["started_at"], "run_id": run_id,
            "run_id_short": run_id[:RUN_ID_SHOWN] if isinstance(run_id, str) else None, "env": _shown(row["env"]),
            "status": _shown(row["status"]), "status_class": row["status"].replace(" ", "-"),
            "reason": plain_paths(reason.strip(), page_dir) if reason else None,
            "reason_line": reason_sentence(reason, page_dir),
            "dataset": _dataset(row["dataset"]), "models": _models(row["models"]),
            "judge": _judge(row["judge_label"]), "overrides": _overrides(row["overrides"]),
            "scores": _scores(row, judge_metrics), "checks": _checks(row.get("checks")),
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
            "links": _document_links(row, page_label, page_dir), "not_uploaded": row.get("not_uploaded") or None,
            "not_tracked": row.get("not_tracked") or None}


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


def _trend_view(trend: dict[str, Any] | None, rows: list[dict[str, Any]], page_dir: Path) -> dict[str, Any] | None:
    """What the top of the index shows of trend.json (evalbook.trend.document): its latest
    series, its latest run's headline means with the step to it, and how many runs started after
    it was built."""
    series = latest_series(trend)
    if trend is None or series is None or not (page_dir / TREND_PAGE).is_file():
        return None
    point = series["points"][-1]
    k = point.get("k")
    cells = []
    for name in series["metrics"]:
        shown, step = point["metrics"].get(name) or {}, point["steps"].get(name) or {}
        moved = step_words(name, step)
        cells.append({"label": registered(name).label_at(k), "mean": _finite(shown.get("mean")),
                      "low": _finite(shown.get("low")), "high": _finite(shown.get("high")), "step": moved})
    built = utc(trend.get("created_at"))
    newer = sum(1 for row in rows if built is not None and row["started_at"] > built)
    title = f"{series['dataset']} · {series['split']}" + (" (judge metrics)" if series["kind"] == "judge" else "")
    return {"href": TREND_PAGE, "title": title, "n_runs": series["n_runs"], "latest": point["run_id"][:8],
            "cells": cells, "built": trend["created_at"][:16].replace("T", " "), "newer": newer}


def render_index(rows: list[dict[str, Any]], page_dir: Path,
                 comparisons: list[dict[str, Any]] | None = None,
                 calibrations: list[dict[str, Any]] | None = None,
                 trend: dict[str, Any] | None = None) -> str:
    """The index page for `rows` (from collect_runs), `comparisons` (from collect_comparisons),
    `calibrations` (from collect_calibrations) and `trend` (the last trend.json), with links
    relative to `page_dir`."""
    judge_metrics = _judge_metric_names(rows)
    labels = [*(registered(name).label for name in RUN_COLUMNS),
              *(f"judge {registered(name).label}" for name in judge_metrics)]
    return render("index_page.html",
                  runs=[_run_view(row, judge_metrics, page_dir) for row in rows],
                  status_counts=_status_counts(rows),
                  score_headers=[label[:1].upper() + label[1:] for label in labels],
                  comparisons=[_comparison_view(row, page_dir) for row in comparisons or []],
                  calibrations=[_calibration_view(row, page_dir) for row in calibrations or []],
                  rho_headers=[registered(name).label for name in CALIBRATION_COLUMNS],
                  trend=_trend_view(trend, rows, page_dir))


def build_index(outputs_root: Path) -> Path:
    """Write `<outputs_root>/index.html` listing every run, comparison and calibration, replacing
    the previous index atomically."""
    outputs_root = Path(outputs_root)
    page = render_index(collect_runs(outputs_root), outputs_root, collect_comparisons(outputs_root),
                        collect_calibrations(outputs_root), read_previous(outputs_root / TREND_FILE))
    index = outputs_root / INDEX_FILE
    write_atomically(index, page.encode("utf-8"), overwrite=True)
    return index

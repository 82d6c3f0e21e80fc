"""The trend document, `trend.json`: every series of runs under an outputs root, with each run's
means and intervals, what changed from the run before it, and which steps are real.

It reads each run's headline.json and, for the steps not worked out before, the two runs'
values.parquet; never a report. Steps already in the previous trend.json under the same
settings are taken from it, so a rebuild after one more run draws one step per series.
Runs under an s3:// outputs root are read there; their headlines are never written there.
"""

from __future__ import annotations

import io
import json
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from evalbook.compare.context import params_differences
from evalbook.compare.tables import changes
from evalbook.files import write_atomically
from evalbook.layout import EXAMPLE_VALUES, HEADLINE_FILE, PARAMS_FILE, RUN_DAY_GLOB
from evalbook.runs import HEADLINE_KIND, collect_run_records, read_json
from evalbook.storage import StorageError, find_objects, is_remote, read_bytes
from evalbook.trend.headline import ensure_headline
from evalbook.metrics import metric as registered
from evalbook.trend.series import REAL, SCORING, Series, StepSettings, TrendError, group_series, series_steps, step_key

KIND = "trend"
SCHEMA_VERSION = "1.0"
SHA_SHOWN = 12


# ---------------------------------------------------------------- reading the runs

def local_headlines(outputs_root: Path) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The headline of every ended run under a local `outputs_root` (making the missing ones
    from their reports, once), each with its `folder`; and counts of the runs left out, by why."""
    headlines, left_out = [], {}
    for record in collect_run_records(outputs_root):
        headline = ensure_headline(record)
        if headline is None:
            why = "not ended" if record.summary is None else "report unreadable"
            left_out[why] = left_out.get(why, 0) + 1
            continue
        headlines.append({**headline, "folder": str(record.run_dir)})
    return headlines, left_out


def remote_headlines(outputs_root: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The headline of every run under an s3:// `outputs_root` that has one, each with its
    `folder` URL; runs published before headlines existed have none there, and their reports
    are counted, not read."""
    headlines, left_out = [], {}
    found = find_objects(outputs_root, f"{RUN_DAY_GLOB}/*/{HEADLINE_FILE}")
    with_headline = {url.rsplit("/", 2)[-2] for url in found}
    reports = {url.rsplit("/", 1)[-1].removesuffix(".json") for url in find_objects(outputs_root, f"{RUN_DAY_GLOB}/*.json")}
    if reports - with_headline:
        left_out["published without a headline"] = len(reports - with_headline)
    for url in found:
        try:
            document = json.loads(read_bytes(url))
        except (StorageError, ValueError):
            left_out["headline unreadable"] = left_out.get("headline unreadable", 0) + 1
            continue
        if isinstance(document, dict) and document.get("kind") == HEADLINE_KIND:
            headlines.append({**document, "folder": url.rsplit("/", 1)[0]})
    return headlines, left_out


def read_values(headline: dict[str, Any]) -> pd.DataFrame | None:
    """The run's values.parquet as a table, None when it has none or it cannot be read."""
    location = f"{headline['folder']}/{EXAMPLE_VALUES}"
    try:
        return pd.read_parquet(io.BytesIO(read_bytes(location)))
    except (StorageError, OSError, ValueError):
        return None


def _params(headline: dict[str, Any]) -> dict[str, Any] | None:
    if is_remote(headline["folder"]):
        return None
    path = Path(headline["folder"]) / PARAMS_FILE
    try:
        return yaml.safe_load(path.read_text("utf-8"))
    except (OSError, yaml.YAMLError):
        return None


# ---------------------------------------------------------------- what changed

def what_changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs from the run `before` to the run `after`, as 05_compare says it
    (evalbook.compare.tables.changes), then the git commit when it differs."""
    doc = {"baseline": before["run"], "candidate": after["run"],
           "gates": {"embedding": {"differing_pins": []}}}
    lines = changes(doc, params_differences(_params(before), _params(after)))
    commits = [before.get("git_commit"), after.get("git_commit")]
    if commits[0] != commits[1]:
        lines.append(f"git commit: {(commits[0] or 'none')[:SHA_SHOWN]} → {(commits[1] or 'none')[:SHA_SHOWN]}")
    return lines


# ---------------------------------------------------------------- the document

def _since(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise TrendError(f"--since {text!r} is not a date; give it as YYYY-MM-DD") from None
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc)


def _point(run: dict[str, Any], metrics: list[str], steps: dict[str, Any], changed: list[str] | None) -> dict[str, Any]:
    dataset = run.get("dataset") or {}
    return {"run_id": run["run_id"], "env": run.get("env"), "started_at": run["started_at"],
            "n_examples": dataset.get("n_examples"), "k": (run.get("scoring") or {}).get("k"),
            "generator": ((run.get("run") or {}).get("models") or {}).get("generator"),
            "overrides": run.get("overrides"), "git_commit": run.get("git_commit"),
            "report": run.get("report"), "folder": run["folder"],
            "metrics": {name: (run.get("metrics") or {}).get(name) for name in metrics},
            "pass_rates": {name: (run.get("pass_rates") or {}).get(name) for name in metrics
                           if (run.get("pass_rates") or {}).get(name)},
            "changed": changed, "steps": steps}


def _series_record(series: Series, steps: list[dict[str, Any]], since: datetime | None) -> dict[str, Any] | None:
    metrics = series.metrics()
    points = []
    for position, run in enumerate(series.runs):
        if since is not None and datetime.fromisoformat(run["started_at"]) < since:
            continue
        changed = what_changed(series.runs[position - 1], run) if position else None
        points.append(_point(run, metrics, steps[position], changed))
    if not points:
        return None
    return {"kind": series.kind, "dataset": series.key["dataset"], "split": series.key["split"],
            "backend": series.key["backend"], "pins": series.key["pins"], "judge_label": series.judge_label,
            "metrics": metrics, "n_runs": len(points),
            "n_real_steps": sum(s.get("status") == "real" for p in points for s in p["steps"].values()),
            "points": points}


def _known_steps(previous: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The steps a previous trend.json worked out, by step_key."""
    return {entry["key"]: entry["steps"] for entry in (previous or {}).get("step_cache", [])
            if isinstance(entry, dict) and isinstance(entry.get("steps"), dict)}


def build_trend(outputs_root: str | Path, *, dataset: str | None = None, since: str | None = None,
                settings: StepSettings = StepSettings(), previous: dict[str, Any] | None = None,
                created_at: datetime | None = None) -> dict[str, Any]:
    """The trend-v1 document of the runs under `outputs_root` (local, or s3://), of `dataset`
    only when given, with the points from `since` (YYYY-MM-DD, UTC) on; `previous` is the last
    trend.json, whose steps are reused where the runs and settings are the same."""
    start = _since(since)
    if is_remote(str(outputs_root)):
        headlines, left_out = remote_headlines(str(outputs_root))
    else:
        headlines, left_out = local_headlines(Path(outputs_root))
    n_runs_read = len(headlines) + sum(left_out.values())
    not_succeeded = sum(h.get("status") != "succeeded" for h in headlines)
    if not_succeeded:
        left_out["did not succeed"] = not_succeeded
    if dataset is not None:
        other = [h for h in headlines if (h.get("dataset") or {}).get("name") != dataset]
        if other:
            left_out["another dataset"] = len(other)
        headlines = [h for h in headlines if (h.get("dataset") or {}).get("name") == dataset]
    known = _known_steps(previous)
    series_records, cache = [], []
    for series in group_series(headlines):
        steps = series_steps(series, read_values, settings, known)
        for position in range(1, len(series.runs)):
            key = step_key(series.runs[position - 1], series.runs[position], settings)
            cache.append({"key": key, "steps": {**known.get(key, {}), **steps[position]}})
        record = _series_record(series, steps, start)
        if record is not None:
            series_records.append(record)
    moment = created_at or datetime.now(timezone.utc)
    return {"kind": KIND, "schema_version": SCHEMA_VERSION,
            "created_at": moment.isoformat().replace("+00:00", "Z"),
            "filters": {"dataset": dataset, "since": since}, "settings": settings.as_record(),
            "n_runs_read": n_runs_read,
            "left_out": left_out, "series": series_records, "step_cache": cache}


def read_previous(path: Path) -> dict[str, Any] | None:
    """The trend.json at `path` when it is one, else None."""
    if not path.is_file():
        return None
    document, _ = read_json(path, "trend JSON")
    return document if document is not None and document.get("kind") == KIND else None


def write_trend(document: dict[str, Any], path: Path) -> Path:
    write_atomically(path, json.dumps(document, indent=1).encode("utf-8"), overwrite=True)
    return path


def step_direction(name: str, step: dict[str, Any]) -> str | None:
    """"better" or "worse" for a real step, by the metric's direction; None for any other."""
    if step.get("status") != REAL:
        return None
    return "better" if (step["delta"] > 0) == registered(name).higher_is_better else "worse"


def step_words(name: str, step: dict[str, Any]) -> str | None:
    """A step in words: `worse by 0.093`, `within noise`, `not paired`; None for a first run."""
    if step.get("status") == REAL:
        return f"{step_direction(name, step)} by {abs(step['delta']):.3f}"
    return step.get("status")


def latest_series(document: dict[str, Any] | None) -> dict[str, Any] | None:
    """The scoring series whose latest run is newest, else the first series; None without one."""
    series = (document or {}).get("series") or []
    return next((s for s in series if s["kind"] == SCORING), series[0] if series else None)

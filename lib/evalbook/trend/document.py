"""The trend document, `trend.json`: every series of runs under an outputs root, with each run's
means and intervals, what changed from the run before it, and which steps are real.

It reads each run's headline.json and, for the steps not worked out before, the two runs'
values.parquet, each once per build; never a report. Steps already in the previous trend.json
under the same settings are taken from it, so a rebuild after one more run draws one step per
series.
Runs under an s3:// outputs root are read there; their headlines are never written there.
The document is checked against schemas/trend-v1.json before it is written; a previous
trend.json that does not match it is not reused.
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
from evalbook.errors import EvalbookError
from evalbook.files import write_atomically
from evalbook.layout import EXAMPLE_VALUES, HEADLINE_FILE, PARAMS_FILE, RUN_DAY_GLOB
from evalbook.runs import HEADLINE_KIND, collect_run_records, read_json
from evalbook.storage import StorageError, find_objects, is_remote, read_bytes
from evalbook.trend.headline import ensure_headline
from evalbook.metrics import metric as registered
from evalbook.validation import TREND_SCHEMA, mismatch
from evalbook.trend.series import (REAL, SCORING, Series, StepSettings, TrendError, group_series, series_steps,
                                   step_key, steps_to_work_out)

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


class _Values:
    """Each run's values table, read once per build and kept only while a step still needs it."""

    def __init__(self, uses: dict[str, int]):
        self.uses, self.tables = uses, {}

    def __call__(self, headline: dict[str, Any]) -> pd.DataFrame | None:
        run_id = headline["run_id"]
        if run_id not in self.tables:
            self.tables[run_id] = read_values(headline)
        table = self.tables[run_id]
        self.uses[run_id] = self.uses.get(run_id, 1) - 1
        if self.uses[run_id] <= 0:
            del self.tables[run_id]
        return table


class _Params:
    """Each local run's params.yaml, parsed once per build (with libyaml's loader when there is one)."""

    LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def __init__(self):
        self.parsed: dict[str, dict[str, Any] | None] = {}

    def __call__(self, headline: dict[str, Any]) -> dict[str, Any] | None:
        folder = headline["folder"]
        if folder not in self.parsed:
            self.parsed[folder] = None if is_remote(folder) else self._read(Path(folder) / PARAMS_FILE)
        return self.parsed[folder]

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            return yaml.load(path.read_text("utf-8"), Loader=self.LOADER)
        except (OSError, yaml.YAMLError):
            return None


# ---------------------------------------------------------------- what changed

def what_changed(before: dict[str, Any], after: dict[str, Any], params: _Params | None = None) -> list[str]:
    """What differs from the run `before` to the run `after`, as 05_compare says it
    (evalbook.compare.tables.changes), then the git commit when it differs."""
    params = params or _Params()
    doc = {"baseline": before["run"], "candidate": after["run"],
           "gates": {"embedding": {"differing_pins": []}}}
    lines = changes(doc, params_differences(params(before), params(after)))
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


def _point(run: dict[str, Any], previous: dict[str, Any] | None, metrics: list[str], steps: dict[str, Any],
           changed: list[str] | None) -> dict[str, Any]:
    dataset = run.get("dataset") or {}
    return {"run_id": run["run_id"], "previous_run_id": previous["run_id"] if previous else None,
            "env": run.get("env"), "started_at": run["started_at"],
            "n_examples": dataset.get("n_examples"), "k": (run.get("scoring") or {}).get("k"),
            "generator": ((run.get("run") or {}).get("models") or {}).get("generator"),
            "overrides": run.get("overrides"), "git_commit": run.get("git_commit"),
            "report": run.get("report"), "folder": run["folder"],
            "metrics": {name: (run.get("metrics") or {}).get(name) for name in metrics},
            "pass_rates": {name: (run.get("pass_rates") or {}).get(name) for name in metrics
                           if (run.get("pass_rates") or {}).get(name)},
            "changed": changed, "steps": steps}


def _first_shown(series: Series, since: datetime | None) -> int:
    """The position of the series' first run from `since` on (len(runs) when none is)."""
    if since is None:
        return 0
    return next((position for position, run in enumerate(series.runs)
                 if datetime.fromisoformat(run["started_at"]) >= since), len(series.runs))


def _series_record(series: Series, steps: list[dict[str, Any]], first: int, params: _Params) -> dict[str, Any] | None:
    metrics = series.metrics()
    points = []
    for position in range(first, len(series.runs)):
        run, previous = series.runs[position], series.runs[position - 1] if position else None
        changed = what_changed(previous, run, params) if previous else None
        points.append(_point(run, previous, metrics, steps[position], changed))
    if not points:
        return None
    return {"kind": series.kind, "dataset": series.key["dataset"], "split": series.key["split"],
            "backend": series.key["backend"], "pins": series.key["pins"], "judge_label": series.judge_label,
            "metrics": metrics, "n_runs": len(points),
            "n_real_steps": sum(s.get("status") == "real" for p in points for s in p["steps"].values()),
            "points": points}


def _known_steps(previous: dict[str, Any] | None, settings: StepSettings) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The steps a previous trend.json worked out under the same settings, by step_key: each
    point holds its step from the run before it in its series."""
    if not previous or previous.get("settings") != settings.as_record():
        return {}
    known = {}
    for series in previous.get("series") or []:
        for point in series.get("points") or [] if isinstance(series, dict) else []:
            if isinstance(point, dict) and point.get("previous_run_id") and isinstance(point.get("steps"), dict):
                known[(series.get("kind"), point["previous_run_id"], point.get("run_id"))] = point["steps"]
    return known


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
    known = _known_steps(previous, settings)
    lines = [(series, _first_shown(series, start)) for series in group_series(headlines)]
    uses: dict[str, int] = {}
    for series, first in lines:
        for position in steps_to_work_out(series, known, first):
            for run in series.runs[position - 1:position + 1]:
                uses[run["run_id"]] = uses.get(run["run_id"], 0) + 1
    values, params = _Values(uses), _Params()
    series_records = []
    for series, first in lines:
        record = _series_record(series, series_steps(series, values, settings, known, first), first, params)
        if record is not None:
            series_records.append(record)
    moment = created_at or datetime.now(timezone.utc)
    return {"kind": KIND, "schema_version": SCHEMA_VERSION,
            "created_at": moment.isoformat().replace("+00:00", "Z"),
            "filters": {"dataset": dataset, "since": since}, "settings": settings.as_record(),
            "n_runs_read": n_runs_read, "left_out": left_out, "series": series_records}


class TrendDocumentError(EvalbookError, ValueError):
    """A trend document that does not match schemas/trend-v1.json; it is never written."""


def validate_trend(document: dict[str, Any]) -> None:
    """Raise TrendDocumentError listing every violation of schemas/trend-v1.json (and any NaN)."""
    problem = mismatch(document, TREND_SCHEMA, "trend document")
    if problem:
        raise TrendDocumentError(problem)


def read_previous(path: Path) -> dict[str, Any] | None:
    """The trend.json at `path` when it is one that matches trend-v1.json, else None (its steps
    are then worked out again)."""
    if not path.is_file():
        return None
    document, _ = read_json(path, "trend JSON")
    if not isinstance(document, dict) or document.get("kind") != KIND:
        return None
    return document if mismatch(document, TREND_SCHEMA, "trend document") is None else None


def write_trend(document: dict[str, Any], path: Path) -> Path:
    """Write trend.json at `path`, replacing the earlier one, once it matches trend-v1.json."""
    validate_trend(document)
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

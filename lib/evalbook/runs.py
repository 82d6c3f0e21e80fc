"""What state a run folder is in: its markers, reading them, and collecting runs as records.

A run folder (evalbook.layout says where) holds, besides the stages' files:
- `RUNNING` while the runner works on it, naming the runner's pid, host and process start time
  (`running_marker`), so that a reader can tell a live run from a crashed one (`marker_state`);
- `run.json` once the run has ended, with its status ("succeeded", "failed", "interrupted");
- `FAILED`, the error, when a stage failed;
- `NOT_UPLOADED` when a finished run's upload to a remote outputs root was refused (also in a
  comparison's or calibration's folder).

`collect_run_records` reads every run folder under an outputs root into a RunRecord; the runs
index (evalbook.publish.index) shows them, and `latest_reports` finds the latest successful ones.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil

from evalbook.layout import report_path, run_env, run_folders

RUNNING_MARKER = "RUNNING"
FAILED_MARKER = "FAILED"
# Written by the runner when a finished run's upload to a remote outputs root was refused
NOT_UPLOADED_MARKER = "NOT_UPLOADED"
# the statuses of a run folder without run.json, and of one whose run.json or report is not JSON
RUNNING = "running"
CRASHED = "crashed"
RUNNING_OR_CRASHED = "running or crashed"
UNREADABLE = "unreadable"
# within this many seconds, a live process's start time is the one its marker recorded
START_TIME_TOLERANCE_SECONDS = 0.05


def json_field(data: Any, *keys: str) -> Any:
    """data[k1][k2]...; None when a level is missing or is not an object."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def read_json(path: Path, label: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the object, None), or (None, why the file called `label` cannot be read)."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, f"{label}: {error}"
    if not isinstance(data, dict):
        return None, f"{label}: not a JSON object"
    return data, None


def utc(text: Any) -> datetime | None:
    """The ISO 8601 time `text` as an aware UTC datetime (a naive one is taken as UTC); None when
    it is not a string or not a time."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(timezone.utc) if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def running_marker(started: datetime) -> bytes:
    """The content of a run's RUNNING marker: the runner's pid, host and process start time, so
    that a later reader can tell a live run from one whose runner is gone."""
    runner = psutil.Process()
    return json.dumps({"pid": runner.pid, "host": socket.gethostname(),
                       "process_started": runner.create_time(),
                       "started_at": started.isoformat()}, indent=2).encode("utf-8")


def _runner_alive(marker: dict[str, Any]) -> bool:
    """True when the marker's pid is a live process that started when the marker says; a pid
    reused by a later process does not count."""
    try:
        started = psutil.Process(int(marker["pid"])).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    return abs(started - float(marker["process_started"])) <= START_TIME_TOLERANCE_SECONDS


def marker_state(run_dir: Path) -> tuple[str, str | None]:
    """(status, reason) of a run folder without run.json, from its RUNNING marker.

    "running" while the runner lives; "crashed" when the folder has no marker or the marker's
    process is gone on this host (a SIGKILL, a power cut); "running or crashed" when that
    cannot be told: a marker from another host, or from before markers named their runner.
    """
    marker = run_dir / RUNNING_MARKER
    if not marker.is_file():
        return CRASHED, "the run folder has neither run.json nor a RUNNING marker"
    record, _ = read_json(marker, RUNNING_MARKER)
    if record is None or not {"pid", "host", "process_started"} <= record.keys():
        return RUNNING_OR_CRASHED, None
    if record["host"] != socket.gethostname():
        return RUNNING_OR_CRASHED, f"its runner, pid {record['pid']}, runs on host {record['host']}"
    if _runner_alive(record):
        return RUNNING, None
    return CRASHED, (f"its runner, pid {record['pid']} on {record['host']}, is gone without "
                     f"finishing{_last_stage(run_dir)}")


def _last_stage(run_dir: Path) -> str:
    started = sorted(path.stem for path in run_dir.glob("0[0-9]_*.ipynb"))
    return f"; the last stage it started was {started[-1]}" if started else ""


def _started_without_summary(run_dir: Path) -> datetime:
    # The runner touches RUNNING as it creates the folder, so its mtime is the start time.
    marker = run_dir / RUNNING_MARKER
    stat = (marker if marker.exists() else run_dir).stat()
    return datetime.fromtimestamp(stat.st_mtime, tz=timezone.utc)


def not_uploaded(folder: Path) -> str | None:
    """What NOT_UPLOADED in a run's, comparison's or calibration's folder says (where it was
    not uploaded to, and why), else None."""
    marker = folder / NOT_UPLOADED_MARKER
    return marker.read_text("utf-8", errors="replace").strip() if marker.is_file() else None


def _failure_reason(run_dir: Path, summary: dict[str, Any]) -> str | None:
    failed = run_dir / FAILED_MARKER
    if failed.is_file():
        return failed.read_text("utf-8", errors="replace").strip() or None
    errors = [s.get("error") for s in summary.get("stages") or [] if isinstance(s, dict)]
    return next((e for e in errors if isinstance(e, str)), None)


@dataclass(frozen=True)
class RunRecord:
    """A run folder's state as read from its files.

    `started_at` is aware UTC; for a folder without run.json, the time its RUNNING marker was
    made, else the folder's mtime. `status` is run.json's ("succeeded", "failed",
    "interrupted"); without run.json, "running", "crashed" or "running or crashed" from the
    RUNNING marker (marker_state); "unreadable" when run.json or the report is not valid JSON.
    `reason` is the failure, the parse error, a missing report or a refused upload, else None.
    `report` is the report's path when it exists and parses; `report_data` is its content and
    `summary` run.json's, each when it parses.
    """

    run_id: str
    env: str
    run_dir: Path
    started_at: datetime
    status: str
    reason: str | None
    report: Path | None
    overrides: dict[str, Any] | None
    summary: dict[str, Any] | None
    report_data: dict[str, Any] | None


def _status(run_dir: Path, summary: dict[str, Any] | None, problem: str | None) -> tuple[str, str | None]:
    """(status, reason) of a run folder from its run.json (`summary`, or why it is unreadable)
    and its markers, before its report is read."""
    if summary is None:
        return (UNREADABLE, problem) if problem is not None else marker_state(run_dir)
    if not summary.get("status"):
        return UNREADABLE, "run.json: no status"
    status = str(summary["status"])
    if status in ("failed", "interrupted"):
        return status, _failure_reason(run_dir, summary)
    report_file = report_path(run_dir)
    if status == "succeeded" and not report_file.is_file():
        return status, f"the report {report_file.name} is missing"
    if status == "succeeded":
        return status, not_uploaded(run_dir)
    return status, None


def read_run(run_dir: Path) -> RunRecord:
    """The state of the run folder `run_dir`, from run.json, its markers and its report."""
    summary, problem = None, None
    if (run_dir / "run.json").is_file():
        summary, problem = read_json(run_dir / "run.json", "run.json")
    status, reason = _status(run_dir, summary, problem)
    started_at = utc(summary.get("started_at")) if summary is not None else None
    overrides = json_field(summary, "params_profile", "overrides")
    report_file, report, report_data = report_path(run_dir), None, None
    if report_file.is_file():
        report_data, problem = read_json(report_file, "report JSON")
        if report_data is None:
            status, reason = UNREADABLE, problem
        else:
            report = report_file
    return RunRecord(run_id=run_dir.name, env=run_env(run_dir), run_dir=run_dir,
                     started_at=started_at or _started_without_summary(run_dir), status=status,
                     reason=reason, report=report,
                     overrides=overrides if isinstance(overrides, dict) else None,
                     summary=summary, report_data=report_data)


def collect_run_records(outputs_root: Path) -> list[RunRecord]:
    """Every run folder under `outputs_root` as a RunRecord, newest first."""
    records = [read_run(path) for path in run_folders(Path(outputs_root))]
    return sorted(records, key=lambda record: (record.started_at, record.run_id), reverse=True)


def latest_reports(outputs_root: Path, env: str, count: int) -> list[Path]:
    """The reports of the latest `count` (or fewer) successful runs of `env`, oldest first."""
    runs = [run for run in collect_run_records(outputs_root)
            if run.env == env and run.status == "succeeded" and run.report]
    runs.sort(key=lambda run: run.started_at)
    return [Path(run.report) for run in runs[-count:]] if count > 0 else []

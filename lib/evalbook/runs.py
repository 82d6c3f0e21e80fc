"""What state a run folder is in: its markers, reading them, and collecting runs as records.

A run folder (evalbook.layout says where) holds, besides the stages' files:
- `RUNNING` while the runner works on it, naming the runner's pid, host and process start time
  (`running_marker`), so that a reader can tell a live run from a crashed one (`marker_state`);
- `run.json` once the run has ended, with its status ("succeeded", "failed", "interrupted", or
  "incomplete": every stage ran, and its report lists what the run left out, INCOMPLETE says why);
- `FAILED`, the error, when a stage failed;
- `NOT_UPLOADED` when a finished run's upload to a remote outputs root was refused (also in a
  comparison's or calibration's folder);
- `NOT_TRACKED` when a finished run (or comparison) could not be logged to the profile's MLflow
  server.

RunJson is run.json: the runner writes it, the index and the lookups read it.
`collect_run_records` reads every run folder under an outputs root into a RunRecord; the runs
index (evalbook.publish.index) shows them, and `latest_reports` finds the latest successful ones.
`find_report` and `find_run_folder` find a run by its id, an id prefix of at least MIN_PREFIX
characters (comparison ids show that many), or its report's path or URL.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil

from evalbook.errors import RunFailed, UnusableInput
from evalbook.layout import (FAILED_MARKER, HEADLINE_FILE, INCOMPLETE_MARKER, MIN_PREFIX, NOT_TRACKED_MARKER, NOT_UPLOADED_MARKER, PARAMS_FILE, RUN_JSON, RUNNING_MARKER,
                             RUNS_DIR, report_path, run_env, run_folders, run_json, run_paths, run_pattern)
from evalbook.storage import is_remote
# the statuses of a run folder without run.json, and of one whose run.json or report is not JSON
RUNNING = "running"
CRASHED = "crashed"
RUNNING_OR_CRASHED = "running or crashed"
UNREADABLE = "unreadable"
HEADLINE_KIND = "run-headline"  # the `kind` of a headline.json (evalbook.trend.headline)
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


@dataclass(frozen=True)
class RunJson:
    """run.json, written once as a run ends: its id and status ("succeeded", "failed",
    "interrupted"), where an interrupt stopped it (`interrupted`: stage and signal), its start and
    end (aware UTC), its report's location when it succeeded, what each stage did (`stages`: the
    stage, its notebook, status and pages, as the runner records them) and the run's provenance
    (git commit, params hash and profile, package versions; evalbook.provenance)."""

    run_id: str
    status: str
    started_at: datetime | None
    finished_at: datetime | None
    report: str | None
    stages: list[dict[str, Any]]
    provenance: dict[str, Any]
    interrupted: dict[str, str] | None = None

    def to_json(self) -> bytes:
        """The file's bytes: the fields in this order, the interrupt's beside the status."""
        document = {"run_id": self.run_id, "status": self.status, **(self.interrupted or {}),
                    "started_at": self.started_at.isoformat(), "finished_at": self.finished_at.isoformat(),
                    "report": self.report, "stages": self.stages, **self.provenance}
        return json.dumps(document, indent=2).encode("utf-8")

    @classmethod
    def read(cls, run_dir: Path) -> tuple[RunJson | None, str | None]:
        """(run.json of `run_dir`, None), or (None, why it cannot be read: not JSON, not an object,
        no status). A time that is missing or does not parse reads as None."""
        data, problem = read_json(run_json(run_dir), RUN_JSON)
        if data is None:
            return None, problem
        if not data.get("status"):
            return None, f"{RUN_JSON}: no status"
        known = {"run_id", "status", "stage", "signal", "started_at", "finished_at", "report", "stages"}
        stages = data.get("stages")
        interrupted = {key: data[key] for key in ("stage", "signal") if isinstance(data.get(key), str)}
        return cls(run_id=str(data.get("run_id") or run_dir.name), status=str(data["status"]),
                   started_at=utc(data.get("started_at")), finished_at=utc(data.get("finished_at")),
                   report=data.get("report") if isinstance(data.get("report"), str) else None,
                   stages=[stage for stage in stages if isinstance(stage, dict)] if isinstance(stages, list) else [],
                   provenance={key: value for key, value in data.items() if key not in known},
                   interrupted=interrupted or None), None

    @property
    def overrides(self) -> dict[str, Any] | None:
        """The profile overrides the run was given (`-p key=value`), when run.json records them."""
        overrides = json_field(self.provenance, "params_profile", "overrides")
        return overrides if isinstance(overrides, dict) else None

    def first_unfinished_stage(self) -> str | None:
        """The first stage whose status is not "succeeded", else None."""
        return next((str(stage.get("stage")) for stage in self.stages if stage.get("status") != "succeeded"), None)


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


def not_tracked(folder: Path) -> str | None:
    """What NOT_TRACKED in a run's or comparison's folder says (the MLflow server it was not
    logged to, and why), else None."""
    marker = folder / NOT_TRACKED_MARKER
    return marker.read_text("utf-8", errors="replace").strip() if marker.is_file() else None


def not_published(folder: Path) -> str | None:
    """NOT_UPLOADED's and NOT_TRACKED's texts, one per line, else None."""
    said = [text for text in (not_uploaded(folder), not_tracked(folder)) if text]
    return "\n".join(said) or None


def _failure_reason(run_dir: Path, summary: RunJson) -> str | None:
    failed = run_dir / FAILED_MARKER
    if failed.is_file():
        return failed.read_text("utf-8", errors="replace").strip() or None
    errors = [stage.get("error") for stage in summary.stages]
    return next((e for e in errors if isinstance(e, str)), None)


@dataclass(frozen=True)
class RunRecord:
    """A run folder's state as read from its files.

    `started_at` is aware UTC; for a folder without run.json, the time its RUNNING marker was
    made, else the folder's mtime. `status` is run.json's ("succeeded", "failed",
    "interrupted"); without run.json, "running", "crashed" or "running or crashed" from the
    RUNNING marker (marker_state); "unreadable" when run.json or the report is not valid JSON.
    `reason` is the failure, the parse error, a missing report or a refused upload, else None.
    `report` is the report's path when it exists (and parses, when it is read); `summary` is
    its run.json when it parses. `headline` is its headline.json (evalbook.trend.headline) when
    it has one; the report is then never read. Without one, `report_data` is the report's content
    when it parses, from which the headline is made once.
    """

    run_id: str
    env: str
    run_dir: Path
    started_at: datetime
    status: str
    reason: str | None
    report: Path | None
    overrides: dict[str, Any] | None
    summary: RunJson | None
    report_data: dict[str, Any] | None
    headline: dict[str, Any] | None = None


def _status(run_dir: Path, summary: RunJson | None, problem: str | None) -> tuple[str, str | None]:
    """(status, reason) of a run folder from its run.json (`summary`, or why it is unreadable)
    and its markers, before its report is read."""
    if summary is None:
        return (UNREADABLE, problem) if problem is not None else marker_state(run_dir)
    if summary.status in ("failed", "interrupted"):
        return summary.status, _failure_reason(run_dir, summary)
    if summary.status == "incomplete":
        marker = run_dir / INCOMPLETE_MARKER
        return summary.status, marker.read_text("utf-8", errors="replace").strip() if marker.is_file() else None
    report_file = report_path(run_dir)
    if summary.status == "succeeded" and not report_file.is_file():
        return summary.status, f"the report {report_file.name} is missing"
    if summary.status == "succeeded":
        return summary.status, not_published(run_dir)
    return summary.status, None


def read_run(run_dir: Path) -> RunRecord:
    """The state of the run folder `run_dir`, from run.json, its markers and its report."""
    summary, problem = RunJson.read(run_dir) if run_json(run_dir).is_file() else (None, None)
    status, reason = _status(run_dir, summary, problem)
    started_at = summary.started_at if summary is not None else None
    report_file, report, report_data = report_path(run_dir), None, None
    headline, _ = read_json(run_dir / HEADLINE_FILE, HEADLINE_FILE) if summary is not None else (None, None)
    headline = headline if headline is not None and headline.get("kind") == HEADLINE_KIND else None
    if headline is not None and report_file.is_file():
        report = report_file
    elif report_file.is_file():
        report_data, problem = read_json(report_file, "report JSON")
        if report_data is None:
            status, reason = UNREADABLE, problem
        else:
            report = report_file
    return RunRecord(run_id=run_dir.name, env=run_env(run_dir), run_dir=run_dir,
                     started_at=started_at or _started_without_summary(run_dir), status=status,
                     reason=reason, report=report, overrides=summary.overrides if summary else None,
                     summary=summary, report_data=report_data, headline=headline)


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



def latest_pair(local_root: Path, env: str) -> tuple[str, str]:
    """Report paths of the two latest successful runs of `env`: (baseline, candidate)."""
    runs = latest_reports(local_root, env, 2)
    if len(runs) < 2:
        raise RunFailed(f"comparing the latest runs needs two successful runs of env {env!r} under "
                        f"{local_root}; found {len(runs)}. Run `make run` twice (for example once "
                        "with a changed parameter), or name them: --baseline/--candidate")
    return str(runs[0]), str(runs[1])


# ---------------------------------------------------------------- finding a run


class RunNotFound(UnusableInput, LookupError):
    """A run id, prefix or report location that names no run, or more than one."""


def find_runs(outputs_root: Path, ref: str, env: str | None = None) -> list[Path]:
    """`<day>/<run_id>` of the runs `ref` names: those whose id is `ref`, else those whose id
    starts with `ref` when it has at least MIN_PREFIX characters. Empty when none does.

    One id may sit in several places (two envs); RunNotFound when a prefix fits several ids.
    """
    paths = run_paths(outputs_root, env)
    exact = [path for path in paths if path.name == ref]
    if exact or len(ref) < MIN_PREFIX:
        return exact
    prefixed = [path for path in paths if path.name.startswith(ref)]
    if len({path.name for path in prefixed}) > 1:
        listed = "\n".join(f"  - {path}" for path in prefixed)
        raise RunNotFound(f"run id prefix {ref!r} fits {len(prefixed)} runs under "
                          f"{run_pattern(outputs_root, env, '')}; give more of the id:\n{listed}")
    return prefixed


def find_run_folder(outputs_root: Path, ref: str, env: str | None = None) -> Path:
    """The one run folder `ref` names: a run folder's path, a run id or an id prefix."""
    as_path = Path(ref)
    if as_path.is_dir() and (as_path / PARAMS_FILE).is_file():
        return as_path.resolve()
    folders = [path for path in find_runs(outputs_root, ref, env) if path.is_dir()]
    if not folders:
        where = Path(outputs_root) / (env or "*") / RUNS_DIR
        raise RunNotFound(f"no run {ref!r} under {where}/<yyyy>/<mm>/<dd>/")
    if len(folders) > 1:
        listed = "\n".join(f"  {folder}" for folder in folders)
        raise RunNotFound(f"run id {ref!r} matches several run folders:\n{listed}")
    return folders[0]


def _run_state(folder: Path) -> str:
    """What the run folder's run.json says about how the run ended, for an error message."""
    summary, _ = RunJson.read(folder)
    if summary is None:
        return f"{folder} holds no readable {RUN_JSON}"
    stage = summary.first_unfinished_stage()
    return f"{run_json(folder)} says status {summary.status!r}{f', first unfinished stage {stage}' if stage else ''}"


def find_report(outputs_root: Path | str, ref: str, env: str | None = None, *,
                unreported: str = "there is nothing to compare") -> str:
    """The report that `ref` names: a report location ending in `.json` (a local file must
    exist; an s3:// URL is used as is), or a run id or id prefix looked up under `outputs_root`.
    `unreported` ends the message about a run that has a folder but no report, in the words of
    the command that needed it.
    """
    ref = str(ref).strip().removeprefix("file://")
    if ref.endswith(".json"):
        if is_remote(ref):
            return ref
        path = Path(ref).expanduser()
        if not path.is_file():
            raise RunNotFound(f"report {path} does not exist")
        return str(path)
    if not ref or "/" in ref or "\\" in ref or "://" in ref:
        raise RunNotFound(f"{ref!r} is neither a report location ending in .json nor a run id")
    if is_remote(str(outputs_root)):
        raise RunNotFound(f"run id {ref}: finding a run by id needs a local outputs root, got "
                          f"{outputs_root}; pass the report's URL instead (ending in .json)")
    root = Path(outputs_root)
    runs = find_runs(root, ref, env)
    reports = [report_path(run) for run in runs if report_path(run).is_file()]
    if len(reports) == 1:
        return str(reports[0])
    if reports:
        listed = "\n".join(f"  - {report}" for report in reports)
        raise RunNotFound(f"run id {ref} matches {len(reports)} reports under {root}; "
                          f"pass one report's path instead:\n{listed}")
    looked = run_pattern(root, env, f"{ref}.json")
    folders = [run for run in runs if run.is_dir()]
    if folders:
        raise RunNotFound(f"run {ref} has a run folder but no report (looked for {looked}): "
                          + "; ".join(_run_state(folder) for folder in folders)
                          + f". The run did not reach 04_report; {unreported}.")
    missing_root = "" if root.is_dir() else f" (the folder {root} does not exist)"
    raise RunNotFound(f"no report for run id {ref}: looked for {looked}{missing_root}")

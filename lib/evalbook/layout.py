"""Where a run's files live under an outputs root, and how a run is found.

Under an outputs root (local, or `s3://bucket/prefix` mirrored by evalbook.publish.storage):
- `<env>/eval-runs/<yyyy>/<mm>/<dd>/<run_id>/`: the run folder, dated by the run's UTC start;
- `<env>/eval-runs/<yyyy>/<mm>/<dd>/<run_id>.json`: its report, beside the folder;
- `<env>/eval-runs/<yyyy>/<mm>/<dd>/comparisons/`: the comparisons whose candidate is a run of
  that day (05_compare); comparisons are not runs;
- `<env>/comparisons/`: the local copy of a comparison whose candidate report is on S3;
- `<env>/eval-runs/<yyyy>/<mm>/<dd>/<run_id>/calibration/`: the run's calibrations against human
  labels (06_calibrate), each a JSON beside its folder; `<env>/calibrations/` holds the local copy
  of a calibration of a run on S3;
- `<env>/interactive/`: the scratch folder of a notebook opened with its defaults.

A run is named by its id, by a prefix of its id of at least MIN_PREFIX characters (comparison
ids show that many), or by its report's path or URL; the latest successful runs of an env are
found from the runs' state (evalbook.runs.latest_reports).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from evalbook.errors import UnusableInput
from evalbook.params import is_remote

RUNS_DIR = "eval-runs"
COMPARISONS_DIR = "comparisons"
CALIBRATION_DIR = "calibration"  # inside a run folder: its calibrations against human labels
REMOTE_CALIBRATIONS_DIR = "calibrations"  # under an env: the local copies for runs on S3
INTERACTIVE_DIR = "interactive"
# comparison ids carry the first 8 characters of each run id; a shorter prefix is too easily shared
MIN_PREFIX = 8
# the day folders of every env, `<env>/eval-runs/<yyyy>/<mm>/<dd>`, under an outputs root
RUN_DAY_GLOB = f"*/{RUNS_DIR}/[0-9][0-9][0-9][0-9]/[0-9][0-9]/[0-9][0-9]"


class RunNotFound(UnusableInput, LookupError):
    """A run id, prefix or report location that names no run, or more than one."""


def run_folder(outputs_root: Path, env: str, run_id: str, started: datetime) -> Path:
    """The folder of the run `run_id` of `env` started at `started` (UTC)."""
    return outputs_root / env / RUNS_DIR / f"{started:%Y}" / f"{started:%m}" / f"{started:%d}" / run_id


def report_path(run_dir: Path, run_id: str | None = None) -> Path:
    """The report of the run whose folder is `run_dir`: `<run_id>.json` beside it (the run id
    is the folder's name unless a stage was given a folder of another name)."""
    return run_dir.parent / f"{run_id or run_dir.name}.json"


def run_env(run_dir: Path) -> str:
    """The env whose runs hold the run folder `run_dir`."""
    return run_dir.parents[4].name


def comparisons_folder(report: Path) -> Path:
    """The folder for comparisons whose candidate report is `report` (a local path)."""
    return report.parent / COMPARISONS_DIR


def comparisons_url(report_url: str) -> str:
    """The s3:// prefix for comparisons whose candidate report is at `report_url`."""
    return report_url.rsplit("/", 1)[0] + "/" + COMPARISONS_DIR


def remote_comparisons_folder(outputs_root: Path, env: str) -> Path:
    """The local folder for comparisons whose candidate report is on S3."""
    return outputs_root / env / COMPARISONS_DIR


def calibration_folder(report: Path) -> Path:
    """The folder for calibrations of the run whose report is `report` (a local path): the run
    folder's `calibration/`."""
    return report.with_suffix("") / CALIBRATION_DIR


def calibration_url(report_url: str) -> str:
    """The s3:// prefix for calibrations of the run whose report is at `report_url`."""
    return report_url.removesuffix(".json") + "/" + CALIBRATION_DIR


def remote_calibration_folder(outputs_root: Path, env: str) -> Path:
    """The local folder for calibrations of runs whose report is on S3."""
    return outputs_root / env / REMOTE_CALIBRATIONS_DIR


def interactive_folder(outputs_root: Path, env: str) -> Path:
    """The scratch folder of `env`'s notebooks run without a run folder."""
    return outputs_root / env / INTERACTIVE_DIR


def run_of_key(key: str, run_id: str) -> str | None:
    """`<env>/eval-runs/<yyyy>/<mm>/<dd>/<run_id>` when `key` (a path relative to an outputs root,
    such as an S3 key under its prefix) lies in run `run_id`'s folder or is its report; else None."""
    parts = key.split("/")
    if len(parts) < 6 or parts[1] != RUNS_DIR:
        return None
    if not all(len(part) == width and part.isdigit() for part, width in zip(parts[2:5], (4, 2, 2))):
        return None
    in_folder = len(parts) > 6 and parts[5] == run_id
    is_report = len(parts) == 6 and parts[5] == f"{run_id}.json"
    return "/".join([*parts[:5], run_id]) if in_folder or is_report else None


def run_pattern(outputs_root: Path, env: str | None, name: str) -> str:
    """Where a run called `name` is looked for, as a glob for messages (`*` for any env)."""
    return str(Path(outputs_root) / (env or "*") / RUNS_DIR / "*" / "*" / "*" / name)


def _day_folders(outputs_root: Path, env: str | None) -> list[Path]:
    days = Path(outputs_root).glob(RUN_DAY_GLOB)
    return sorted(day for day in days if env is None or day.parents[3].name == env)


def run_folders(outputs_root: Path, env: str | None = None) -> list[Path]:
    """Every run folder under `outputs_root` (of `env`, else of every env), by path."""
    return [child for day in _day_folders(outputs_root, env) for child in sorted(day.iterdir())
            if child.is_dir() and child.name != COMPARISONS_DIR]


def run_paths(outputs_root: Path, env: str | None = None) -> list[Path]:
    """`<day>/<run_id>` of every run that has a folder or a report, by path."""
    found = set(run_folders(outputs_root, env))
    for day in _day_folders(outputs_root, env):
        found.update(report.with_suffix("") for report in day.glob("*.json") if report.is_file())
    return sorted(found)


def existing_run(outputs_root: Path, run_id: str) -> Path | None:
    """A run folder or report named `run_id` under `outputs_root`, on any date and in any env."""
    named = [path for path in run_paths(outputs_root) if path.name == run_id]
    return min((candidate for path in named for candidate in (path, report_path(path))
                if candidate.exists()), default=None)


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
    if as_path.is_dir() and (as_path / "params.yaml").is_file():
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
    try:
        record = json.loads((folder / "run.json").read_text("utf-8"))
    except (OSError, ValueError):
        return f"{folder} holds no readable run.json"
    failed = [s["stage"] for s in record.get("stages", []) if s.get("status") != "succeeded"]
    stage = f", first unfinished stage {failed[0]}" if failed else ""
    return f"{folder}/run.json says status {record.get('status')!r}{stage}"


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

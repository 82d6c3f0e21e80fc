"""Run the notebook pipeline with Papermill into one write-once run folder.

Layout of a run (`<outputs_root>/<env>/eval-runs/<yyyy>/<mm>/<dd>/`, evalbook.layout):
- `<run_id>.json`: the report, written by 04_report only when every stage succeeded;
- `<run_id>/`: `params.yaml` (the resolved profile), `provenance.json`, the canonical and scored
  tables, each executed notebook and its self-contained HTML (the report also without code),
  `figures/`, and at the end `run.json`. A failed run leaves `FAILED` (with the error) beside
  `run.json`; a run in progress has `RUNNING`, which names its runner's pid, host and process
  start time, so that the index can tell a live run from a crashed one (evalbook.runs).

Everything that can be checked is checked before the run folder is written (`plan_run`). Run ids
are write-once across every date and env. SIGINT and SIGTERM stop a run in order: the stage's
kernel and the judge server are stopped, `run.json` says "interrupted" and names the stage, and
RUNNING is removed. A SIGKILLed runner takes its judge server with it (a parent-death signal) and
its kernel exits on its own (ipykernel polls for its parent).

The parts of a run live beside this module: evalbook.interrupts (the signals), evalbook.services
(the servers and the service under test started around the stages) and evalbook.execution (the
one Papermill call of a stage). Comparisons and calibrations run through evalbook.sidedocs.

A run always executes in the local outputs root. After it, `<local root>/index.html` is rebuilt,
and when `outputs_root` is `s3://bucket/prefix` the run folder and then the report are published
there (evalbook.storage); a refused upload keeps the local copy, leaves `NOT_UPLOADED`
(the remote root and the error) in the run folder, and fails the command.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

import yaml

from evalbook.errors import PublishFailed, RunFailed
from evalbook.execution import NOTEBOOKS, execute_stage, mark_not_tracked, mark_not_uploaded, rebuild_index
from evalbook.files import write_new
from evalbook.interrupts import RunInterrupted, interrupts_raised, signals_held
from evalbook.checks.checksfile import check_against_data, check_against_scenarios, load_checks_file
from evalbook.checks.facts import CHECK as FACT_CHECK
from evalbook.load import LoadError, check_column_assertions, metadata_column_names, read_records
from evalbook.layout import (ALL_STAGES, CONVERSE_STAGE, FAILED_MARKER, INCOMPLETE_MARKER, GENERATE_STAGE, HEADLINE_FILE, PROVENANCE, REPORT_STAGE, RUNNING_MARKER, existing_run, params_file,
                             report_path, run_folder, run_json)
from evalbook.params import (ParamsError, Profile, check_input_files, is_remote, load_profile, local_outputs_root,
                             parse_overrides, resolve_path, resolved_values)
from evalbook.scenarios.spec import load_scenarios
from evalbook.scenarios.transcripts import IncompleteReplay, incomplete_replay, read_replay_source, replay_path
from evalbook.provenance import run_provenance
from evalbook.publish import tracking
from evalbook.publish.summary import page_links, run_summary_md, write_summary
from evalbook.publish.tracking import Target, TrackingFailed
from evalbook.runs import RunJson, read_run, running_marker
from evalbook.score.models import resolve_profile_models
from evalbook.services import StartFailed, ensure_local_model, serving
from evalbook.storage import StorageError, check_remote_root, publish_run
from evalbook.trend.headline import build_headline, write_headline


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    report_path: Path
    stages: list[dict[str, Any]] = field(default_factory=list)
    # where the report lives for readers: the local path, or its s3:// URL once published
    report_location: str = ""
    published: list[str] = field(default_factory=list)
    # the step running now: "judge server start" or a stage, named in run.json if interrupted
    current_stage: str | None = None
    summary: Path | None = None  # summary.md, once the run succeeded


def needs_hub(profile) -> bool:
    """True when a model or an input of the profile is read from the Hugging Face hub."""
    models = (profile["models"][role]["source"] for role in ("bertscore", "sentence_transformer"))
    inputs = (profile["input_path"], profile["predictions_path"] or "")
    return any(s.startswith("hub:") for s in models) or any(p.startswith("hf://") for p in inputs)


def stages_for(profile: Profile) -> tuple[str, ...]:
    """The stages a run of `profile` executes, in order."""
    optional = {GENERATE_STAGE: profile["generate"]["enabled"], CONVERSE_STAGE: profile["scenarios"]["enabled"]}
    return tuple(stage for stage in ALL_STAGES if optional.get(stage, True))


def _run_stages(profile: Profile, parameters: dict[str, Any], run_dir: Path, result: RunResult,
                log: TextIO) -> str | None:
    """Execute the stages in order; the failure message of the first that fails, else None."""
    for stage in stages_for(profile):
        if not (NOTEBOOKS / f"{stage}.ipynb").exists():
            return f"stage {stage}: notebook {NOTEBOOKS / (stage + '.ipynb')} is missing"
        result.current_stage = stage
        print(f"[evalbook] running {stage}", file=log, flush=True)
        record = execute_stage(stage, parameters, run_dir)
        result.stages.append(record)
        if record["status"] == "failed":
            return record["error"]
    return None


@dataclass(frozen=True)
class PlannedRun:
    """A run whose profile, models, outputs root and run id passed every check; nothing written."""

    profile: Profile
    overrides: dict[str, Any]
    values: dict[str, Any]
    run_id: str
    started: datetime
    local_root: Path
    run_dir: Path
    report_path: Path
    provenance: dict[str, Any]
    tracking: Target | None = None


def track_run(plan: PlannedRun, result: RunResult, log: TextIO) -> TrackingFailed | None:
    """Log the succeeded run to MLflow when its profile asks; on a failure, NOT_TRACKED (where to
    and why) in its folder, and the TrackingFailed to raise once the run is otherwise done."""
    if plan.tracking is None:
        return None
    print(f"[evalbook] logging the run to MLflow at {plan.tracking.shown_uri} "
          f"(experiment {plan.tracking.experiment!r})", file=log, flush=True)
    try:
        record = read_run(plan.run_dir)
        report = json.loads(plan.report_path.read_text("utf-8"))
        headline = record.headline or build_headline(record, report)  # when headline.json could not be written
        pages = [Path(stage["html_noinput"]) for stage in result.stages
                 if stage.get("stage") == REPORT_STAGE and stage.get("html_noinput")]
        logged = tracking.log_run(plan.tracking, plan.values, headline, report, plan.run_dir, plan.report_path, pages)
    except TrackingFailed as error:
        mark_not_tracked(plan.run_dir, plan.tracking, error, log, plan.local_root)
        return TrackingFailed(f"{error}\nthe run is complete and kept at {plan.run_dir}; NOT_TRACKED says so")
    print(f"[evalbook] MLflow run {logged.mlflow_run_id} in experiment {plan.tracking.experiment!r}: {logged.url}"
          + (f"; not logged, since they hold a secret: {', '.join(logged.withheld)}" if logged.withheld else ""),
          file=log, flush=True)
    return None


def ensure_outputs_root(root: Path, key: str, origin: Path) -> None:
    """Create the local outputs root when it is missing, and check that runs can be written in it.

    ParamsError names the key and the folder when it is a file, cannot be created or is not
    writable. Writability is tried with an unnamed temporary file: permissions alone do not tell
    (a read-only mount, or root, for whom every mode bit allows).
    """
    if root.exists() and not root.is_dir():
        raise ParamsError(f"{origin}: {key} {root} is a file, not a folder; give {key} a folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ParamsError(f"{origin}: {key} {root} does not exist and cannot be created "
                          f"({error.strerror or error}); give {key} a folder you can write") from error
    try:
        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as error:
        raise ParamsError(f"{origin}: {key} {root} is not writable ({error.strerror or error}); "
                          f"give {key} a folder you can write") from error


def _check_remote_root(profile: Profile, run_id: str, log: TextIO) -> None:
    """Refuse, before anything is written, an S3 root that cannot be used or already holds the run."""
    root = profile["outputs_root"]
    try:
        note = check_remote_root(root, run_id, run_id_given=profile["run_id"] is not None)
    except StorageError as error:
        raise ParamsError(f"{profile.source_path}: outputs_root {root}: {error}") from error
    if note:
        print(f"[evalbook] note: {note}", file=log, flush=True)


def check_slices_by(profile: Profile, overrides: dict[str, Any]) -> None:
    """Refuse (ParamsError, exit 2) a `slices.by` column that the input files do not have, listing
    the columns they keep as metadata, before the run folder is written. Local files only, as
    check_input_files: a remote input is read by 01_load, and 04_report refuses the column then.
    With generate on, the answers do not exist yet: only the examples file is read."""
    by = profile["slices"]["by"]
    input_path = profile.path("input_path")
    if by == "auto" or "://" in input_path:
        return
    predictions = None if profile["generate"]["enabled"] else profile.path("predictions_path")
    if predictions is not None and "://" in predictions:
        return
    try:
        present = metadata_column_names(input_path, predictions, profile["dataset"]["split"])
    except LoadError:
        return  # 01_load reports an unreadable file with its row and column
    unknown = [name for name in by if name not in present]
    if unknown:
        origin = "override -p slices.by" if "slices.by" in overrides else f"{profile.source_path}: slices.by"
        files = input_path + ("" if predictions is None else f" and {predictions}")
        raise ParamsError(f"{origin} names {', '.join(repr(name) for name in unknown)}, not a column of "
                          f"{files}; the columns kept as metadata are: {', '.join(present) or 'none'} "
                          "(-p slices.by=auto slices by each of them)")


def check_scenario_file(profile: Profile, log: TextIO | None = None) -> None:
    """With scenarios on, the scenario file is read and checked before the run folder is written:
    a missing field, an unknown key, max_turns <= 0 or a duplicate id is refused (ScenarioFileError,
    exit 2) before any call, naming the scenario and the field. So is, with scenarios.replay_from,
    the transcripts file to replay (TranscriptFileError: a line that cannot be used, a conversation
    given twice, an empty or missing file, naming the file, the line and the field); one that lacks
    some conversations is noted in `log`: the replay judges the rest and is incomplete."""
    config = profile["scenarios"]
    if not config["enabled"]:
        return
    scenarios = load_scenarios(resolve_path(config["path"], profile.root))
    if config["replay_from"] is None:
        return
    source = read_replay_source(replay_path(resolve_path(config["replay_from"], profile.root)), scenarios,
                                config["repeats"])
    lacking = source.incomplete()
    if lacking and log is not None:
        print(f"[evalbook] note: the replay is incomplete; its report lists what is missing: {lacking}",
              file=log, flush=True)


def check_checks_file(profile: Profile) -> None:
    """The checks are read and checked before the run folder is written (ChecksError, exit 2):
    the checks file of `checks.path` for its own problems (naming the file, the entry and the
    field), and for what it asks of the scenario file (its scenario checks' ids); the evaluation
    set's check columns, each column and cell (naming the file, the column and the row); then
    what the file asks of the data, from the local input files as 01_load reads them: ids and
    metadata columns that exist, latency limits only where 00_generate asks the system, and no
    name that a check column has. A remote input's check columns are refused by 01_load."""
    path = profile["checks"]["path"]
    origin = resolve_path(path, profile.root) if path is not None else None
    assertions = load_checks_file(origin) if origin is not None else []
    if origin is not None:
        scenarios = None
        if profile["scenarios"]["enabled"]:
            scenarios = [s.id for s in load_scenarios(resolve_path(profile["scenarios"]["path"], profile.root))]
        check_against_scenarios(assertions, scenarios, origin)
    input_path = profile.path("input_path")
    predictions = None if profile["generate"]["enabled"] else profile.path("predictions_path")
    if "://" in input_path or (predictions is not None and "://" in predictions):
        return
    split = profile["dataset"]["split"]
    try:
        columns_checks = check_column_assertions(input_path, split, profile["skip_incomplete_examples"])
        examples = read_records(input_path, split)
        columns = metadata_column_names(input_path, predictions, split)
    except LoadError:
        return  # 01_load reports an unreadable file with its row and column
    ids = examples["id"].tolist() if "id" in examples.columns else []
    check_against_data([a for a in assertions if a.turn is None] + columns_checks, ids, columns,
                       has_latency=profile["generate"]["enabled"], has_cost=False, origin=origin or input_path,
                       builtin_names={FACT_CHECK})


def plan_run(params_path: str, overrides: list[str] | None, log: TextIO) -> PlannedRun:
    """Every check a run needs before its folder is written; ParamsError (exit 2) on the first
    that fails: the profile and overrides, the local input files, the models and the BERTScore
    layer, the rescaling baseline, the S3 root (credentials, bucket, the run id), the local
    outputs root, and that the run id is new on every date and in every env."""
    parsed = parse_overrides(overrides)
    profile = load_profile(params_path, parsed, override_root=Path.cwd())
    check_input_files(profile, parsed)
    check_slices_by(profile, parsed)
    check_scenario_file(profile, log)
    check_checks_file(profile)
    models = resolve_profile_models(profile)
    values = resolved_values(profile)
    bertscore = values["models"]["bertscore"]
    if bertscore["rescale_with_baseline"] and not Path(bertscore["baseline_path"]).is_file():
        raise ParamsError(f"{profile.source_path}: models.bertscore.baseline_path "
                          f"{bertscore['baseline_path']} does not exist; bert-score would silently "
                          "return unrescaled scores")
    if not needs_hub(profile):
        os.environ["HF_HUB_OFFLINE"] = "1"
    where = tracking.profile_target(profile)
    ensure_local_model(profile, log)

    run_id = profile["run_id"] or str(uuid.uuid4())
    remote = is_remote(profile["outputs_root"])
    if remote:
        _check_remote_root(profile, run_id, log)
    local_root = local_outputs_root(profile)
    ensure_outputs_root(local_root, "local_outputs_root" if remote else "outputs_root", profile.source_path)
    found = existing_run(local_root, run_id)
    if found is not None:
        raise ParamsError(f"run {run_id} already exists at {found}; run ids are write-once across "
                          "every date and env")
    started = datetime.now(timezone.utc)
    run_dir = run_folder(local_root, profile["env"], run_id, started)
    return PlannedRun(profile, parsed, values, run_id, started, local_root, run_dir,
                      report_path(run_dir), run_provenance(profile, models, parsed), where)


def run_pipeline(params_path: str, overrides: list[str] | None = None,
                 log: TextIO | None = None) -> RunResult:
    """Validate the profile and its models, then run every stage; raise RunFailed on a failure.

    SIGINT and SIGTERM stop the run in order (RunInterrupted): see `_record_interrupted`. The
    log is `sys.stderr` as it is at the call, not at import (pytest swaps it per test).
    """
    log = log or sys.stderr
    with interrupts_raised():
        try:
            plan = plan_run(params_path, overrides, log)
        except RunInterrupted as interrupted:
            raise RunInterrupted(interrupted.signum, f"interrupted by {interrupted.signal_name} "
                                 "before the run folder was created") from None
        return _execute_plan(plan, log)


def _execute_plan(plan: PlannedRun, log: TextIO) -> RunResult:
    result = RunResult(plan.run_id, plan.run_dir, plan.report_path, report_location=str(plan.report_path))
    provenance: dict[str, Any] = {}
    try:
        with signals_held():  # a signal here is raised once the marker is there to be closed
            try:
                plan.run_dir.mkdir(parents=True)
            except FileExistsError:
                raise ParamsError(f"run {plan.run_id} already exists at {plan.run_dir}; run folders "
                                  "are write-once") from None
            write_new(plan.run_dir / RUNNING_MARKER, running_marker(plan.started))
        values = {**plan.values, "run_id": plan.run_id}
        write_new(params_file(plan.run_dir), yaml.safe_dump(values, sort_keys=False).encode("utf-8"))
        provenance = plan.provenance
        write_new(plan.run_dir / PROVENANCE, json.dumps(provenance, indent=2).encode("utf-8"))
        failure = _run_with_servers(plan, result, log)
    except RunInterrupted as interrupted:
        raise _record_interrupted(plan, result, provenance, interrupted, log) from None
    status = "failed" if failure else "succeeded"
    if failure is None and not plan.report_path.exists():
        status, failure = "failed", f"every stage ran but no report was written at {plan.report_path}"
    incomplete = _incomplete(plan.report_path) if failure is None else None
    try:
        with signals_held():
            if failure is None:
                failure = _write_run_summary(result, log)
                status = "failed" if failure else ("incomplete" if incomplete is not None else status)
            _close_run(plan, result, provenance, status, failure, log=log)
            if status == "incomplete":
                write_new(plan.run_dir / INCOMPLETE_MARKER, (str(incomplete) + "\n").encode("utf-8"))
            rebuild_index(plan.local_root, log)
        not_tracked = track_run(plan, result, log) if status == "succeeded" else None
        if is_remote(plan.profile["outputs_root"]):
            publish(result, plan.local_root, plan.profile["outputs_root"], log)
        if not_tracked is not None:
            raise not_tracked
    except RunInterrupted as interrupted:
        unpublished = (f"; its upload to {plan.profile['outputs_root']} was cut short before the "
                       "report, so it is not published" if is_remote(plan.profile["outputs_root"]) else "")
        raise RunInterrupted(interrupted.signum, f"run {plan.run_id} had finished ({status}) at "
                             f"{plan.run_dir} when {interrupted.signal_name} arrived{unpublished}") from None
    if failure:
        raise RunFailed(failure)
    if status == "incomplete":
        incomplete.result = result
        raise incomplete
    return result


def _incomplete(report: Path) -> IncompleteReplay | None:
    """What a finished run's report says it left out (a replay of an interrupted run), else None."""
    try:
        section = json.loads(report.read_text("utf-8")).get("scenarios")
    except (OSError, ValueError):
        return None  # the summary's writing names an unreadable report
    return incomplete_replay(section)


def _stage_pages(result: RunResult) -> list[tuple[str, str | None]]:
    """(label, path) of each stage's pages, those without code first (the readers' pages)."""
    return ([(f"{stage['stage']} without code", stage.get("html_noinput")) for stage in result.stages]
            + [(stage["stage"], stage.get("html")) for stage in result.stages])


def _write_run_summary(result: RunResult, log: TextIO) -> str | None:
    """Write the run's summary.md (evalbook.publish.summary); the failure message, else None."""
    try:
        report = json.loads(result.report_path.read_text("utf-8"))
        text = run_summary_md(report, page_links(result.run_dir, _stage_pages(result)))
        result.summary = write_summary(result.run_dir, text, log)
    except Exception as error:  # noqa: BLE001 - the run must still record how it ended
        return f"every stage ran but summary.md could not be written: {type(error).__name__}: {error}"
    return None


def _run_with_servers(plan: PlannedRun, result: RunResult, log: TextIO) -> str | None:
    """Run the stages with what the profile asks to be started; the failure message, else None."""
    parameters = {"params_path": str(params_file(plan.run_dir)), "run_dir": str(plan.run_dir),
                  "run_id": plan.run_id}

    def starting(name: str) -> None:
        result.current_stage = name

    try:
        with serving(plan.profile, plan.run_dir, log, on_start=starting):
            return _run_stages(plan.profile, parameters, plan.run_dir, result, log)
    except StartFailed as error:
        return str(error)


def _close_run(plan: PlannedRun, result: RunResult, provenance: dict[str, Any], status: str,
               failure: str | None, interrupted: dict[str, str] | None = None, *, log: TextIO) -> None:
    """Write run.json (and FAILED with the failure) and the headline, then remove RUNNING."""
    summary = RunJson(run_id=plan.run_id, status=status, started_at=plan.started,
                      finished_at=datetime.now(timezone.utc),
                      report=str(plan.report_path) if status in ("succeeded", "incomplete") else None,
                      stages=result.stages, provenance=provenance, interrupted=interrupted)
    write_new(run_json(plan.run_dir), summary.to_json())
    if failure:
        write_new(plan.run_dir / FAILED_MARKER, (failure + "\n").encode("utf-8"))
    _write_headline(plan.run_dir, log)
    (plan.run_dir / RUNNING_MARKER).unlink()


def _write_headline(run_dir: Path, log: TextIO) -> None:
    """Write the run's headline.json and values.parquet (evalbook.trend.headline). A failure is
    reported, never fatal: the index makes them from the report later."""
    try:
        record = read_run(run_dir)
        write_headline(record, record.report_data)
    except Exception as error:  # noqa: BLE001 - run.json already says how the run ended
        print(f"[evalbook] warning: {HEADLINE_FILE} was not written: {type(error).__name__}: {error}",
              file=log, flush=True)


def _record_interrupted(plan: PlannedRun, result: RunResult, provenance: dict[str, Any],
                        interrupted: RunInterrupted, log: TextIO) -> RunInterrupted:
    """Mark the run interrupted (run.json, FAILED, no RUNNING, the index rebuilt); the
    RunInterrupted to raise, saying where it stopped.

    By now the stage's kernel has been shut down (nbclient's clean-up runs as the exception
    passes) and the judge server stopped; further signals are ignored until this is done.
    """
    name = interrupted.signal_name
    stage = result.current_stage or "setup"
    reason = f"interrupted by {name} during {stage}"
    _close_run(plan, result, provenance, "interrupted", reason, {"stage": stage, "signal": name}, log=log)
    rebuild_index(plan.local_root, log)
    return RunInterrupted(interrupted.signum, f"run {plan.run_id} {reason}; marked interrupted in "
                          f"{plan.run_dir}")


def publish(result: RunResult, local_root: Path, remote_root: str, log: TextIO) -> None:
    """Upload the run folder, then the report last, to the remote outputs root."""
    report = result.report_path if result.report_path.exists() else None
    print(f"[evalbook] publishing the run to {remote_root}", file=log, flush=True)
    try:
        result.published = publish_run(result.run_dir, report, local_root, remote_root)
    except StorageError as error:
        # run.json says how the run ended; NOT_UPLOADED says that it is not on the remote root
        mark_not_uploaded(result.run_dir, remote_root, error, local_root, log)
        raise PublishFailed(f"{error}\nthe run is complete locally and kept at {result.run_dir}"
                            + (f" (report {report})" if report else "")) from error
    if report is not None:
        result.report_location = remote_root.rstrip("/") + "/" + report.relative_to(local_root).as_posix()



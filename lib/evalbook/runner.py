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

A run always executes in the local outputs root. After it, `<local root>/index.html` is rebuilt,
and when `outputs_root` is `s3://bucket/prefix` the run folder and then the report are published
there (evalbook.storage); a refused upload keeps the local copy, leaves `NOT_UPLOADED`
(the remote root and the error) in the run folder, and fails the command.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import yaml

from evalbook.calibrate.context import run_to_calibrate
from evalbook.calibrate.labels import match_labels, read_labels
from evalbook.calibrate.settings import Settings
from evalbook.errors import EvalbookError, PublishFailed, RunFailed
from evalbook.files import write_new
from evalbook.kernel import ipc_kernel
from evalbook.layout import (ALL_STAGES, FAILED_MARKER, NOT_UPLOADED_MARKER, RUNNING_MARKER, STAGES,
                             calibration_folder,
                             calibration_url, comparisons_folder, comparisons_url, existing_run, params_file, run_json,
                             remote_calibration_folder, remote_comparisons_folder, report_path, run_folder)
from evalbook.score.models import resolve_profile_models
from evalbook.params import (
    ParamsError,
    Profile,
    check_input_files,
    is_remote,
    load_profile,
    local_outputs_root,
    parse_overrides,
    resolved_values,
)
from evalbook.pipeline import PROVENANCE
from evalbook.provenance import run_provenance
from evalbook.publish.index import build_index
from evalbook.storage import StorageError, check_remote_root, publish_run
from evalbook.report.reader import ReportUnreadable, read_report
from evalbook.runs import RunJson, RunNotFound, find_report, latest_pair, running_marker

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = PROJECT_ROOT / "notebooks"


class RunInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the run; the message says where, and what was kept.

    A KeyboardInterrupt, so that code catching Exception (papermill, nbclient, asyncio) lets it
    through, as it would Ctrl-C.
    """

    def __init__(self, signum: int, message: str = ""):
        self.signum = signum
        super().__init__(message or f"interrupted by {self.signal_name}")

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """128 + the signal number, the shell's code for a process ended by that signal."""
        return 128 + self.signum


INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@dataclass
class _SignalState:
    """Whether a block holds SIGINT/SIGTERM back, and the first signal held; process-wide, as
    signal handlers are. Masking the signal would not do: the kernel may deliver it to another
    thread (zmq's, asyncio's), whose handler flag Python still runs in the main thread."""

    holding: bool = False
    pending: int | None = None


_SIGNALS = _SignalState()


def _raise_interrupted(signum: int) -> None:
    for each in INTERRUPTS:
        signal.signal(each, signal.SIG_IGN)
    raise RunInterrupted(signum)


def _on_interrupt(signum: int, frame: Any) -> None:
    if _SIGNALS.holding:
        _SIGNALS.pending = _SIGNALS.pending or signum
        return
    _raise_interrupted(signum)


@contextmanager
def interrupts_raised() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise RunInterrupted (in the main thread only, where
    Python runs signal handlers). The first also ignores any further ones, so that the orderly
    stop that follows it is not itself cut short; SIGKILL remains for a hung stop."""
    if not _in_main_thread():
        yield
        return
    previous = {each: signal.getsignal(each) for each in INTERRUPTS}
    for each in INTERRUPTS:
        signal.signal(each, _on_interrupt)
    try:
        yield
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends, so that what it writes is written whole; a
    signal that arrived meanwhile is raised as the block ends (unless an error already is)."""
    if _SIGNALS.holding:
        yield
        return
    _SIGNALS.holding = True
    try:
        yield
    finally:
        _SIGNALS.holding = False
        pending, _SIGNALS.pending = _SIGNALS.pending, None
        if pending is not None and sys.exc_info()[0] is None:
            _raise_interrupted(pending)


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


def _quote_failure(stage: str, notebook: Path, error: Exception) -> str:
    lines = [f"stage {stage} failed; executed notebook: {notebook}"]
    source = getattr(error, "source", None)
    if source:
        count = getattr(error, "exec_count", None)
        lines.append(f"failing cell{f' [{count}]' if count else ''}:")
        lines.extend(f"    {line}" for line in source.splitlines())
    ename, evalue = getattr(error, "ename", None), getattr(error, "evalue", None)
    lines.append(f"{ename}: {evalue}" if ename else f"{type(error).__name__}: {error}")
    return "\n".join(lines)


# The pages for readers who never open code: each also gets a version without the code cells.
NO_CODE_PAGES = ("04_report", "05_compare", "06_calibrate")


def render_stage_html(stage: str, notebook: Path) -> dict[str, str]:
    """Self-contained HTML of an executed notebook; the report, the comparison and the
    calibration also get a version without code (`.noinput.html`)."""
    from evalbook.publish.pages import noinput_path, render_html

    rendered = {"html": str(render_html(notebook))}
    if stage in NO_CODE_PAGES:
        rendered["html_noinput"] = str(render_html(notebook, noinput_path(notebook), exclude_input=True))
    return rendered


def _execute(stage: str, ctx_params: dict[str, Any], run_dir: Path, log: TextIO) -> dict[str, Any]:
    import papermill  # here, not at the top: slow to import, and only needed once a stage runs

    source = NOTEBOOKS / f"{stage}.ipynb"
    output = run_dir / f"{stage}.ipynb"
    print(f"[evalbook] running {stage}", file=log, flush=True)
    record: dict[str, Any] = {"stage": stage, "notebook": str(output)}
    try:
        with ipc_kernel() as kernel:
            papermill.execute_notebook(str(source), str(output), parameters=ctx_params,
                                       kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=False,
                                       **kernel)
    except Exception as error:  # noqa: BLE001 - every failure is reported with its notebook
        record.update(status="failed", error=_quote_failure(stage, output, error))
    else:
        record["status"] = "succeeded"
    if output.exists():
        _add_stage_html(record, stage, output)
    return record


def _add_stage_html(record: dict[str, Any], stage: str, notebook: Path) -> None:
    """Add the stage's pages to `record`; a page that cannot be rendered fails the stage, after
    any error of the notebook's own, so that the run still ends with its run.json."""
    try:
        record.update(render_stage_html(stage, notebook))
    except Exception as error:  # noqa: BLE001 - the run must still record how it ended
        failure = (f"stage {stage} ran but its HTML could not be rendered: "
                   f"{type(error).__name__}: {error}")
        record["error"] = f"{record['error']}\n{failure}" if record.get("error") else failure
        record["status"] = "failed"


def needs_hub(profile) -> bool:
    """True when a model or an input of the profile is read from the Hugging Face hub."""
    models = (profile["models"][role]["source"] for role in ("bertscore", "sentence_transformer"))
    inputs = (profile["input_path"], profile["predictions_path"] or "")
    return any(s.startswith("hub:") for s in models) or any(p.startswith("hf://") for p in inputs)


def stages_for(profile: Profile) -> tuple[str, ...]:
    """The stages a run of `profile` executes, in order."""
    return ALL_STAGES if profile["generate"]["enabled"] else STAGES


def _run_stages(profile: Profile, parameters: dict[str, Any], run_dir: Path, result: RunResult,
                log: TextIO) -> str | None:
    """Execute the stages in order; the failure message of the first that fails, else None."""
    for stage in stages_for(profile):
        if not (NOTEBOOKS / f"{stage}.ipynb").exists():
            return f"stage {stage}: notebook {NOTEBOOKS / (stage + '.ipynb')} is missing"
        result.current_stage = stage
        record = _execute(stage, parameters, run_dir, log)
        result.stages.append(record)
        if record["status"] == "failed":
            return record["error"]
    return None


def start_judge_server(profile, run_dir: Path, log: TextIO):
    """Start the local judge server when the profile asks for it; None when not needed.

    A server already answering at the profile's base URL is used as it is and left running.
    """
    judge = profile["judge"]
    if not (judge["enabled"] and judge["start_server"]):
        return None
    return start_local_model(judge["base_url"], judge["model"], run_dir / "judge-server.log", "judge", log)


def start_generation_server(profile, run_dir: Path, log: TextIO):
    """Start the local llama.cpp server for 00_generate when `generate.start_server` asks for it:
    at the openai kind's base URL, serving its model; for an http service (which calls the model
    itself, as the example service does), where the local judge is served, `judge.base_url` and
    `judge.model`, so that one server answers both. None when not needed or already running."""
    generate = profile["generate"]
    if not (generate["enabled"] and generate["start_server"]):
        return None
    served = generate["openai"] if generate["kind"] == "openai" else profile["judge"]
    return start_local_model(served["base_url"], served["model"], run_dir / "model-server.log", "model", log)


def start_local_model(base_url: str, alias: str, log_path: Path, role: str, log: TextIO):
    """The local llama.cpp server at `base_url`, serving the model as `alias`, started and ready;
    None when one already answers there (it is used as it is and left running)."""
    from evalbook.judge.server import LocalServer
    from evalbook.processes import is_serving

    if is_serving(base_url):
        print(f"[evalbook] {role} server already running at {base_url}", file=log, flush=True)
        return None
    address = urlsplit(base_url)
    server = LocalServer(host=address.hostname or "127.0.0.1", port=address.port or 80, model_alias=alias)
    print(f"[evalbook] starting the local {role} server at {server.base_url}", file=log, flush=True)
    try:
        server.start(log_path=log_path)
        server.wait_ready(timeout=300)
    except BaseException:
        server.stop()  # also when a signal interrupts the start: never leave the server behind
        raise
    return server


def start_service(profile: Profile, run_dir: Path, log: TextIO):
    """Start `generate.service`, the system under test, and wait until it is ready; None when
    the profile names none."""
    generate = profile["generate"]
    if not (generate["enabled"] and generate["service"]):
        return None
    from evalbook.generate.service import Service

    service = Service(generate["service"], profile.root, run_dir / "service.log")
    print(f"[evalbook] starting the service under test at {service.address}", file=log, flush=True)
    try:
        service.start()
    except BaseException:
        service.stop()
        raise
    return service


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


def plan_run(params_path: str, overrides: list[str] | None, log: TextIO) -> PlannedRun:
    """Every check a run needs before its folder is written; ParamsError (exit 2) on the first
    that fails: the profile and overrides, the local input files, the models and the BERTScore
    layer, the rescaling baseline, the S3 root (credentials, bucket, the run id), the local
    outputs root, and that the run id is new on every date and in every env."""
    parsed = parse_overrides(overrides)
    profile = load_profile(params_path, parsed, override_root=Path.cwd())
    check_input_files(profile, parsed)
    models = resolve_profile_models(profile)
    values = resolved_values(profile)
    bertscore = values["models"]["bertscore"]
    if bertscore["rescale_with_baseline"] and not Path(bertscore["baseline_path"]).is_file():
        raise ParamsError(f"{profile.source_path}: models.bertscore.baseline_path "
                          f"{bertscore['baseline_path']} does not exist; bert-score would silently "
                          "return unrescaled scores")
    if not needs_hub(profile):
        os.environ["HF_HUB_OFFLINE"] = "1"

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
                      report_path(run_dir), run_provenance(profile, models, parsed))


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
    try:
        with signals_held():
            if failure is None:
                failure = _write_run_summary(result, log)
                status = "failed" if failure else status
            _close_run(plan, result, provenance, status, failure)
            rebuild_index(plan.local_root, log)
        if is_remote(plan.profile["outputs_root"]):
            publish(result, plan.local_root, plan.profile["outputs_root"], log)
    except RunInterrupted as interrupted:
        unpublished = (f"; its upload to {plan.profile['outputs_root']} was cut short before the "
                       "report, so it is not published" if is_remote(plan.profile["outputs_root"]) else "")
        raise RunInterrupted(interrupted.signum, f"run {plan.run_id} had finished ({status}) at "
                             f"{plan.run_dir} when {interrupted.signal_name} arrived{unpublished}") from None
    if failure:
        raise RunFailed(failure)
    return result


def _stage_pages(result: RunResult) -> list[tuple[str, str | None]]:
    """(label, path) of each stage's pages, those without code first (the readers' pages)."""
    return ([(f"{stage['stage']} without code", stage.get("html_noinput")) for stage in result.stages]
            + [(stage["stage"], stage.get("html")) for stage in result.stages])


def _write_run_summary(result: RunResult, log: TextIO) -> str | None:
    """Write the run's summary.md (evalbook.publish.summary); the failure message, else None."""
    from evalbook.publish.summary import page_links, run_summary_md, write_summary

    try:
        report = json.loads(result.report_path.read_text("utf-8"))
        text = run_summary_md(report, page_links(result.run_dir, _stage_pages(result)))
        result.summary = write_summary(result.run_dir, text, log)
    except Exception as error:  # noqa: BLE001 - the run must still record how it ended
        return f"every stage ran but summary.md could not be written: {type(error).__name__}: {error}"
    return None


class StartFailed(EvalbookError, RuntimeError):
    """A server or service the profile asks for did not start; the message says which and why."""


STARTS = (("model server start", "the local model server did not start", start_generation_server),
          ("service start", "the service under test did not start", start_service),
          ("judge server start", "the local judge server did not start", start_judge_server))


@contextmanager
def serving(profile: Profile, folder: Path, log: TextIO, judge: bool = True,
            on_start: Any = None) -> Iterator[None]:
    """Start what the profile asks for (the model server for generation, the service under test,
    and with `judge` the judge server), logging into `folder`; stop them all on leaving, last
    started first. `on_start(name)` is told each start before it begins. A start that fails
    raises StartFailed after stopping what had started."""
    with ExitStack() as started:
        for name, failure, start in STARTS if judge else STARTS[:2]:
            if on_start is not None:
                on_start(name)
            try:
                process = start(profile, folder, log)
            except RuntimeError as error:
                raise StartFailed(f"{failure}: {error}") from error
            if process is not None:
                started.callback(process.stop)
        yield


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
               failure: str | None, interrupted: dict[str, str] | None = None) -> None:
    """Write run.json (and FAILED with the failure), then remove RUNNING."""
    summary = RunJson(run_id=plan.run_id, status=status, started_at=plan.started,
                      finished_at=datetime.now(timezone.utc),
                      report=str(plan.report_path) if status == "succeeded" else None,
                      stages=result.stages, provenance=provenance, interrupted=interrupted)
    write_new(run_json(plan.run_dir), summary.to_json())
    if failure:
        write_new(plan.run_dir / FAILED_MARKER, (failure + "\n").encode("utf-8"))
    (plan.run_dir / RUNNING_MARKER).unlink()


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
    _close_run(plan, result, provenance, "interrupted", reason, {"stage": stage, "signal": name})
    rebuild_index(plan.local_root, log)
    return RunInterrupted(interrupted.signum, f"run {plan.run_id} {reason}; marked interrupted in "
                          f"{plan.run_dir}")


def rebuild_index(local_root: Path, log: TextIO) -> None:
    """Rebuild `<local root>/index.html`; a failure is reported, never fatal to the run."""
    try:
        index = build_index(local_root)
    except Exception as error:  # noqa: BLE001 - the run's own outputs are already complete
        print(f"[evalbook] warning: the run index was not rebuilt: {error}", file=log, flush=True)
    else:
        print(f"[evalbook] run index: {index}", file=log, flush=True)


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


COMPARE_STAGE = "05_compare"


@dataclass
class ComparisonRun:
    comparison_id: str
    output_dir: Path
    comparison_path: Path
    html: str | None
    html_noinput: str | None
    # where the comparison JSON lives for readers: its local path, or its s3:// URL
    location: str = ""
    summary: Path | None = None  # summary.md, in the comparison's folder


def _write_comparison_summary(result: ComparisonRun, baseline: str, candidate: str, log: TextIO) -> Path:
    """Write the comparison's summary.md into its folder (evalbook.publish.summary); RunFailed
    when it cannot be written."""
    from evalbook.publish.summary import comparison_summary_md, page_links, write_summary

    try:
        comparison = json.loads(result.comparison_path.read_text("utf-8"))
        pages = [("05_compare without code", result.html_noinput), ("05_compare", result.html)]
        text = comparison_summary_md(comparison, read_report(baseline).data, read_report(candidate).data,
                                     page_links(result.output_dir, pages))
        return write_summary(result.output_dir, text, log)
    except Exception as error:  # noqa: BLE001 - the comparison itself is written; say what is missing
        raise RunFailed(f"the comparison is written at {result.comparison_path}, but its summary.md could "
                        f"not be: {type(error).__name__}: {error}") from error


def _new_document_folder(parent: Path, document_id: str, profile: Profile, what: str) -> tuple[Path, Path, Path]:
    """The write-once folder of a comparison or calibration `document_id` under `parent`, its JSON's
    path beside it, and the profile as resolved (overrides applied), written into the folder as
    `params.yaml` for the notebook to read."""
    output_dir, document = parent / document_id, parent / f"{document_id}.json"
    if output_dir.exists() or document.exists():
        raise RunFailed(f"{what} {document_id} already exists at {output_dir}")
    output_dir.mkdir(parents=True)
    resolved = params_file(output_dir)
    write_new(resolved, yaml.safe_dump(resolved_values(profile), sort_keys=False).encode("utf-8"))
    return output_dir, document, resolved


def _execute_beside_runs(stage: str, parameters: dict[str, Any], output_dir: Path, document: Path,
                         what: str) -> dict[str, str]:
    """Run `stage` (05_compare, 06_calibrate) with Papermill into `output_dir`, and render its HTML.

    A failure writes FAILED, with the failing cell quoted, and raises RunFailed; so does a
    notebook that ran but wrote no `document` (its JSON).
    """
    import papermill  # here, not at the top: slow to import, and only needed once a stage runs

    output = output_dir / f"{stage}.ipynb"
    try:
        with ipc_kernel() as kernel:
            papermill.execute_notebook(str(NOTEBOOKS / f"{stage}.ipynb"), str(output),
                                       parameters=parameters, kernel_name="python3",
                                       cwd=str(NOTEBOOKS), progress_bar=False, **kernel)
    except Exception as error:  # noqa: BLE001 - reported with the executed notebook
        message = _quote_failure(stage, output, error)
        if output.exists():
            message += f"\nHTML: {render_stage_html(stage, output)['html']}"
        write_new(output_dir / FAILED_MARKER, (message + "\n").encode("utf-8"))
        raise RunFailed(message) from error
    pages = render_stage_html(stage, output)
    if not document.exists():
        raise RunFailed(f"{stage} ran but wrote no {what} at {document}")
    return pages


def run_comparison(params_path: str, baseline: str | None = None, candidate: str | None = None,
                   notebook_parameters: dict[str, Any] | None = None,
                   log: TextIO | None = None, overrides: list[str] | None = None,
                   fail_on: list[str] | None = None) -> ComparisonRun:
    """Run 05_compare with Papermill on two runs (run ids or report paths/URLs).

    Without either run, the two latest successful runs of the profile's env are compared. The
    comparison JSON, executed notebook, HTML and figures go beside the candidate's report, under
    `comparisons/`; for a candidate on S3 they are written locally, then uploaded beside it.
    `fail_on` holds the regression gate's rules (evalbook.compare.gate); a rule that cannot be
    applied to the two runs is a RuleError before anything is written, and a report whose
    examples cannot be paired by id (a repeated id) a ComparisonError.
    """
    from evalbook.compare.document import check_pairable
    from evalbook.compare.gate import check_rules, parse_rules
    from evalbook.compare.tables import pairing_warnings

    log = log or sys.stderr
    parse_rules(fail_on)

    profile = load_profile(params_path, parse_overrides(overrides), override_root=Path.cwd())
    local_root = local_outputs_root(profile)
    if (baseline is None) != (candidate is None):
        raise RunFailed("give both --baseline and --candidate, or neither to compare the two latest runs")
    if baseline is None:
        baseline, candidate = latest_pair(local_root, profile["env"])
    try:
        baseline_location = find_report(local_root, baseline, profile["env"])
        candidate_location = find_report(local_root, candidate, profile["env"])
        baseline_report, candidate_report = read_report(baseline_location), read_report(candidate_location)
    except ReportUnreadable as error:  # a named run that cannot be used: exit 2, before any write
        raise RunNotFound(str(error)) from error
    check_pairable(baseline_report, candidate_report)
    check_rules(fail_on, baseline_report, candidate_report)
    baseline_id, candidate_id = baseline_report.run_id, candidate_report.run_id
    created = datetime.now(timezone.utc)
    # the time, and a random suffix so that two comparisons started in one second never collide
    comparison_id = (f"{baseline_id[:8]}-vs-{candidate_id[:8]}-{created:%Y%m%dT%H%M%SZ}-"
                     f"{uuid.uuid4().hex[:4]}")
    remote = is_remote(candidate_location)
    parent = (remote_comparisons_folder(local_root, profile["env"]) if remote
              else comparisons_folder(Path(candidate_location)))
    output_dir, comparison_path, resolved = _new_document_folder(parent, comparison_id, profile, "comparison")
    parameters = {"params_path": str(resolved), "baseline": baseline_location,
                  "candidate": candidate_location, "run_dir": str(output_dir),
                  "comparison_path": str(comparison_path), "run_id": comparison_id,
                  "fail_on": list(fail_on) if fail_on else None, **(notebook_parameters or {})}
    print(f"[evalbook] comparing {baseline_location} (baseline) with {candidate_location} (candidate)",
          file=log, flush=True)
    pages = _execute_beside_runs(COMPARE_STAGE, parameters, output_dir, comparison_path, "comparison")
    for warning in pairing_warnings(json.loads(comparison_path.read_text("utf-8"))):
        print(f"[evalbook] warning: {warning}", file=log, flush=True)
    result = ComparisonRun(comparison_id, output_dir, comparison_path, pages["html"], pages["html_noinput"],
                           str(comparison_path))
    result.summary = _write_comparison_summary(result, baseline_location, candidate_location, log)
    rebuild_index(local_root, log)
    if remote:
        result.location = _publish_beside(output_dir, comparison_path, parent,
                                          comparisons_url(candidate_location), "comparison", local_root, log)
    return result


def mark_not_uploaded(folder: Path, remote: str, error: Exception, local_root: Path, log: TextIO) -> None:
    """Leave NOT_UPLOADED (where to and why) in a folder whose upload was refused, and rebuild
    the local index, which shows it."""
    write_new(folder / NOT_UPLOADED_MARKER, f"not uploaded to {remote}: {error}\n".encode("utf-8"))
    rebuild_index(local_root, log)


def _publish_beside(output_dir: Path, document: Path, parent: Path, remote_parent: str, what: str,
                    local_root: Path, log: TextIO) -> str:
    """Upload a comparison's or calibration's folder, then its JSON, to `remote_parent`; the
    JSON's URL. A refused upload keeps the local copy, marks it NOT_UPLOADED and says where it is."""

    try:
        publish_run(output_dir, document, parent, remote_parent)
    except StorageError as error:
        mark_not_uploaded(output_dir, remote_parent, error, local_root, log)
        raise PublishFailed(f"{error}\nthe {what} is kept locally at {output_dir}") from error
    return f"{remote_parent}/{document.name}"


CALIBRATE_STAGE = "06_calibrate"


@dataclass
class CalibrationRun:
    calibration_id: str
    output_dir: Path
    calibration_path: Path
    html: str | None
    html_noinput: str | None
    # where the calibration JSON lives for readers: its local path, or its s3:// URL
    location: str = ""


def run_calibration(params_path: str, run: str | None, labels: str,
                    notebook_parameters: dict[str, Any] | None = None,
                    log: TextIO | None = None, overrides: list[str] | None = None) -> CalibrationRun:
    """Run 06_calibrate with Papermill on a run (id, prefix, report path or URL; None: the latest
    successful run of the profile's env) and a labels file.

    The labels are read, checked and matched to the run's examples before anything is written,
    so a bad labels file, labels off the scale most of them use, or fewer than two labelled
    examples of the run stop here (LabelError). The calibration JSON goes in the run folder's
    `calibration/`, beside its own folder (executed notebook, HTML, figures, params.yaml); for a
    run on S3 they are written locally, then uploaded into the run's folder there.
    """

    log = log or sys.stderr
    profile = load_profile(params_path, parse_overrides(overrides), override_root=Path.cwd())
    local_root = local_outputs_root(profile)
    given = {key: value for key, value in (notebook_parameters or {}).items() if value is not None}
    settings = Settings(**{("seed" if key == "bootstrap_seed" else key): value for key, value in given.items()})
    try:
        location = run_to_calibrate(local_root, run, profile["env"])
        report = read_report(location)
    except ReportUnreadable as error:  # a named run that cannot be used: exit 2, before any write
        raise RunNotFound(str(error)) from error
    labels_path = labels if is_remote(labels) else str(Path(labels).resolve())
    match_labels(read_labels(labels_path, settings.label_kind),
                 [example["id"] for example in report.examples], report.run_id)
    created = datetime.now(timezone.utc)
    calibration_id = f"{report.run_id[:8]}-{created:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:4]}"
    remote = is_remote(location)
    parent = remote_calibration_folder(local_root, profile["env"]) if remote else calibration_folder(Path(location))
    output_dir, calibration_path, resolved = _new_document_folder(parent, calibration_id, profile, "calibration")
    parameters = {**given, "params_path": str(resolved), "run": location, "labels_path": labels_path,
                  "run_dir": str(output_dir), "calibration_path": str(calibration_path),
                  "run_id": calibration_id}
    print(f"[evalbook] calibrating {location} against {labels_path}", file=log, flush=True)
    pages = _execute_beside_runs(CALIBRATE_STAGE, parameters, output_dir, calibration_path, "calibration")
    result = CalibrationRun(calibration_id, output_dir, calibration_path, pages["html"], pages["html_noinput"],
                            str(calibration_path))
    rebuild_index(local_root, log)
    if remote:
        result.location = _publish_beside(output_dir, calibration_path, parent, calibration_url(location),
                                          "calibration", local_root, log)
    return result

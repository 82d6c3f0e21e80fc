"""Comparisons (05_compare) and calibrations (06_calibrate): documents written beside runs.

Both go the same way, through `_run_document`: everything the command can check is checked
before anything is written (the runs and reports named, the pairing and the gate's rules, the
labels); then a write-once folder is made beside the run (or, for a run on S3, under the local
env), the resolved profile is written into it, the stage's notebook is executed there
(evalbook.execution), the runs index is rebuilt, and for a run on S3 the folder and then the
document are uploaded beside it. A comparison also gets its summary.md.
"""

from __future__ import annotations

import json
import sys
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from contextlib import ExitStack, contextmanager, nullcontext
from typing import Any, Callable, ContextManager, Iterator, TextIO

import yaml

from evalbook.calibrate.context import run_to_calibrate
from evalbook.calibrate.labelling import Labelling
from evalbook.calibrate.labels import match_labels, read_labels
from evalbook.calibrate.settings import Settings
from evalbook.compare.document import check_pairable
from evalbook.compare.gate import check_rules, parse_rules
from evalbook.compare.pairwise import plan_for_profile, select_pairs
from evalbook.compare.tables import pairing_warnings
from evalbook.errors import EvalbookError, PublishFailed, RunFailed
from evalbook.execution import execute_stage, mark_not_tracked, mark_not_uploaded, rebuild_index
from evalbook.files import write_new
from evalbook.layout import (CALIBRATE_STAGE, COMPARE_STAGE, FAILED_MARKER, calibration_folder, calibration_url, comparisons_folder, comparisons_url,
                             params_file, remote_calibration_folder, remote_comparisons_folder)
from evalbook.params import Profile, load_profile, local_outputs_root, parse_overrides, resolved_values
from evalbook.judge.estimate import describe
from evalbook.publish import tracking
from evalbook.publish.summary import comparison_summary_md, page_links, write_summary
from evalbook.publish.tracking import TrackingFailed
from evalbook.report.reader import ReportUnreadable, read_report
from evalbook.runs import RunNotFound, find_report, latest_pair
from evalbook.services import judge_serving
from evalbook.storage import StorageError, is_remote, publish_run

@dataclass
class DocumentRun:
    """A comparison or calibration that was written: its id, folder, JSON and pages."""

    document_id: str
    output_dir: Path
    path: Path  # the document's JSON, beside its folder
    html: str | None
    html_noinput: str | None
    # where the JSON lives for readers: its local path, or its s3:// URL once uploaded
    location: str = ""
    summary: Path | None = None  # a comparison's summary.md, in its folder


@dataclass(frozen=True)
class _Document:
    """What differs between a comparison and a calibration, for `_run_document`."""

    what: str  # "comparison" or "calibration"
    stage: str
    document_id: str
    parent: Path  # the local folder the document's folder and JSON go in
    remote_parent: str | None  # the s3:// prefix they are uploaded to, for a run on S3
    path_parameter: str  # the notebook parameter that names the JSON to write


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


def _execute_document(spec: _Document, parameters: dict[str, Any], output_dir: Path, document: Path) -> dict[str, Any]:
    """Execute the document's stage into `output_dir`: its record. A failure writes FAILED, with
    the failing cell quoted, and raises RunFailed; so does a notebook that ran but wrote no JSON."""
    record = execute_stage(spec.stage, parameters, output_dir)
    if record["status"] == "failed":
        message = record["error"] + (f"\nHTML: {record['html']}" if record.get("html") else "")
        write_new(output_dir / FAILED_MARKER, (message + "\n").encode("utf-8"))
        raise RunFailed(message)
    if not document.exists():
        raise RunFailed(f"{spec.stage} ran but wrote no {spec.what} at {document}")
    return record


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


def _run_document(spec: _Document, profile: Profile, parameters: dict[str, Any], local_root: Path,
                  log: TextIO, after=None, around: Callable[[Path], ContextManager] | None = None) -> DocumentRun:
    """Write the document `spec` names: its folder and resolved profile, the executed notebook
    with `parameters` (and the paths it needs), its pages; `after(result)` once it is written
    (a comparison's summary.md); then the index, and the upload when `spec.remote_parent`.
    `around(folder)` is entered around the notebook (a server it needs)."""
    output_dir, path, resolved = _new_document_folder(spec.parent, spec.document_id, profile, spec.what)
    parameters = {**parameters, "params_path": str(resolved), "run_dir": str(output_dir),
                  spec.path_parameter: str(path), "run_id": spec.document_id}
    with around(output_dir) if around is not None else nullcontext():
        record = _execute_document(spec, parameters, output_dir, path)
    result = DocumentRun(spec.document_id, output_dir, path, record["html"], record["html_noinput"], str(path))
    if after is not None:
        after(result)
    rebuild_index(local_root, log)
    if spec.remote_parent is not None:
        result.location = _publish_beside(output_dir, path, spec.parent, spec.remote_parent, spec.what,
                                          local_root, log)
    return result


def _document_id(*run_ids: str) -> str:
    """The runs' first 8 characters, the time, and a random suffix so that two documents started
    in one second never collide."""
    created = datetime.now(timezone.utc)
    return "-vs-".join(run_id[:8] for run_id in run_ids) + f"-{created:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:4]}"


def _write_comparison_summary(result: DocumentRun, baseline: str, candidate: str, log: TextIO) -> Path:
    """Write the comparison's summary.md into its folder (evalbook.publish.summary); RunFailed
    when it cannot be written."""
    try:
        comparison = json.loads(result.path.read_text("utf-8"))
        pages = [(f"{COMPARE_STAGE} without code", result.html_noinput), (COMPARE_STAGE, result.html)]
        text = comparison_summary_md(comparison, read_report(baseline).data, read_report(candidate).data,
                                     page_links(result.output_dir, pages))
        return write_summary(result.output_dir, text, log)
    except Exception as error:  # noqa: BLE001 - the comparison itself is written; say what is missing
        raise RunFailed(f"the comparison is written at {result.path}, but its summary.md could "
                        f"not be: {type(error).__name__}: {error}") from error


def run_comparison(params_path: str, baseline: str | None = None, candidate: str | None = None,
                   notebook_parameters: dict[str, Any] | None = None,
                   log: TextIO | None = None, overrides: list[str] | None = None,
                   fail_on: list[str] | None = None, pairwise: bool = False) -> DocumentRun:
    """Run 05_compare with Papermill on two runs (run ids or report paths/URLs).

    Without either run, the two latest successful runs of the profile's env are compared. The
    comparison JSON, executed notebook, HTML and figures go beside the candidate's report, under
    `comparisons/`; for a candidate on S3 they are written locally, then uploaded beside it.
    `fail_on` holds the regression gate's rules (evalbook.compare.gate); a rule that cannot be
    applied to the two runs is a RuleError before anything is written, and a report whose
    examples cannot be paired by id (a repeated id) a ComparisonError. With `pairwise`, the
    profile's judge also compares the answers (evalbook.compare.pairwise): two runs with no
    question to judge are a ComparisonError before anything is written; the judge server is
    started when the profile asks for it, and a judge that does not answer or a budget the calls
    would exceed fails the comparison, marked FAILED, before the notebook runs.
    """
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
    if pairwise:
        select_pairs(baseline_report.data, candidate_report.data, profile["judge"])
    where = tracking.profile_target(profile)
    remote = is_remote(candidate_location)
    spec = _Document(
        what="comparison", stage=COMPARE_STAGE,
        document_id=_document_id(baseline_report.run_id, candidate_report.run_id),
        parent=(remote_comparisons_folder(local_root, profile["env"]) if remote
                else comparisons_folder(Path(candidate_location))),
        remote_parent=comparisons_url(candidate_location) if remote else None, path_parameter="comparison_path")
    parameters = {"baseline": baseline_location, "candidate": candidate_location,
                  "fail_on": list(fail_on) if fail_on else None, "pairwise": pairwise, **(notebook_parameters or {})}
    print(f"[evalbook] comparing {baseline_location} (baseline) with {candidate_location} (candidate)",
          file=log, flush=True)

    not_tracked: list[TrackingFailed] = []

    def warn_summarise_and_track(result: DocumentRun) -> None:
        for warning in pairing_warnings(json.loads(result.path.read_text("utf-8"))):
            print(f"[evalbook] warning: {warning}", file=log, flush=True)
        result.summary = _write_comparison_summary(result, baseline_location, candidate_location, log)
        if where is not None:  # before the upload, so that NOT_TRACKED goes with the folder
            not_tracked.extend(_track_comparison(where, profile, result, log))

    @contextmanager
    def pairwise_judge(folder: Path) -> Iterator[None]:
        with ExitStack() as stack:
            try:
                stack.enter_context(judge_serving(profile, folder, log))
                plan = plan_for_profile(baseline_report.data, candidate_report.data, profile)
            except EvalbookError as error:
                write_new(folder / FAILED_MARKER, (f"pairwise judging could not start: {error}\n").encode("utf-8"))
                raise RunFailed(f"pairwise judging could not start: {error}") from error
            print(f"[evalbook] pairwise judging: {describe(plan.planned)}", file=log, flush=True)
            yield

    result = _run_document(spec, profile, parameters, local_root, log, after=warn_summarise_and_track,
                           around=pairwise_judge if pairwise else None)
    if not_tracked:
        raise not_tracked[0]
    return result


def _track_comparison(where: tracking.Target, profile: Profile, result: DocumentRun,
                      log: TextIO) -> list[TrackingFailed]:
    """Log the written comparison to MLflow; on a failure, NOT_TRACKED in its folder and the
    TrackingFailed to raise once the comparison is otherwise done."""
    print(f"[evalbook] logging the comparison to MLflow at {where.shown_uri} (experiment {where.experiment!r})",
          file=log, flush=True)
    try:
        comparison = json.loads(result.path.read_text("utf-8"))
        pages = [Path(result.html_noinput)] if result.html_noinput else []
        logged = tracking.log_comparison(where, resolved_values(profile), comparison, result.document_id,
                                         result.path, result.output_dir, pages)
    except TrackingFailed as error:
        mark_not_tracked(result.output_dir, where, error, log)
        return [TrackingFailed(f"{error}\nthe comparison is complete and kept at {result.output_dir}; "
                               "NOT_TRACKED says so")]
    print(f"[evalbook] MLflow run {logged.mlflow_run_id} in experiment {where.experiment!r}: {logged.url}",
          file=log, flush=True)
    return []


def run_calibration(params_path: str, run: str | None, labels: str,
                    notebook_parameters: dict[str, Any] | None = None,
                    log: TextIO | None = None, overrides: list[str] | None = None) -> DocumentRun:
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
    remote = is_remote(location)
    spec = _Document(
        what="calibration", stage=CALIBRATE_STAGE, document_id=_document_id(report.run_id),
        parent=remote_calibration_folder(local_root, profile["env"]) if remote else calibration_folder(Path(location)),
        remote_parent=calibration_url(location) if remote else None, path_parameter="calibration_path")
    print(f"[evalbook] calibrating {location} against {labels_path}", file=log, flush=True)
    return _run_document(spec, profile, {**given, "run": location, "labels_path": labels_path}, local_root, log)


def calibrate_labels(labelling: Labelling, log: TextIO | None = None) -> tuple[dict[str, Any], str]:
    """07_label's way on: the run it labels calibrated against its labels file by
    `run_calibration`, as make calibrate does; the calibration document and where it is."""
    result = run_calibration(labelling.params_path, labelling.report.location, str(labelling.labels.path),
                             {"label_kind": labelling.calibrate_kind}, log=log)
    return json.loads(result.path.read_text("utf-8")), result.location or str(result.path)

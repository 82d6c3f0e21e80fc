"""Executing one stage's notebook, and what every run, comparison and calibration does after it.

- `execute_stage`: the one Papermill call: a stage's notebook executed into a folder, its pages
  rendered (the readers' pages also without code), the failure quoted with its cell;
- `rebuild_index`: the runs index rebuilt after a run, a comparison or a calibration;
- `mark_not_uploaded`: NOT_UPLOADED left in a folder whose upload was refused.
- `mark_not_tracked`: NOT_TRACKED left in a run's or a comparison's folder that MLflow did not
  take, the one place that writes it.
"""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any, TextIO

import yaml

from evalbook.files import write_new
from evalbook.kernel import ipc_kernel
from evalbook.layout import (CALIBRATE_STAGE, COMPARE_STAGE, NOT_TRACKED_MARKER, NOT_UPLOADED_MARKER, REPORT_STAGE,
                             params_file)
from evalbook.publish import pages
from evalbook.publish.index import build_index
from evalbook.publish.tracking import Target, shown

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = PROJECT_ROOT / "notebooks"


def failure_sentence(stage: str, error: Exception) -> str:
    """The failure of `stage` in one sentence, as its page, the index and the first line of the
    run's error say it: the message of the error the notebook raised, which names the fix (an
    evalbook error's does), or, for a built-in error (a bug rather than a bad input), that it was
    unexpected and where, with its message. No class name: that is in the traceback."""
    ename = getattr(error, "ename", None) or type(error).__name__
    evalue = getattr(error, "evalue", None)
    message = " ".join(str(error if evalue is None else evalue).split())
    if ename in vars(builtins) or not message:
        count = getattr(error, "exec_count", None)
        where = f" in its cell [{count}]" if count else ""
        return (f"stage {stage} failed on an unexpected error{where}" + (f" ({message})" if message else "")
                + "; its page holds the traceback")
    return f"stage {stage} failed: {message}"


def quote_failure(stage: str, notebook: Path, error: Exception) -> str:
    """The run's error for a failed stage: its sentence, the executed notebook, the failing cell
    quoted and the error as Python names it."""
    lines = [failure_sentence(stage, error), f"executed notebook: {notebook}"]
    source = getattr(error, "source", None)
    if source:
        count = getattr(error, "exec_count", None)
        lines.append(f"failing cell{f' [{count}]' if count else ''}:")
        lines.extend(f"    {line}" for line in source.splitlines())
    ename, evalue = getattr(error, "ename", None), getattr(error, "evalue", None)
    lines.append(f"{ename}: {evalue}" if ename else f"{type(error).__name__}: {error}")
    return "\n".join(lines)


def stage_inputs(parameters: dict[str, Any], output_dir: Path) -> list[tuple[str, str]]:
    """What a stage read, for its failed page: its parameters (a path by its name or its place in
    the folder) and the input files its profile names (params.yaml in the folder)."""
    inputs = [(name, pages.plain_paths(str(value), output_dir)) for name, value in parameters.items()
              if value is not None and name != "run_dir"]
    params = params_file(output_dir)
    values = yaml.safe_load(params.read_text("utf-8")) if params.is_file() else None
    if isinstance(values, dict):
        inputs += [(key, pages.plain_paths(str(values[key]), output_dir)) for key in ("input_path", "predictions_path")
                   if values.get(key)]
    return inputs


# The pages for readers who never open code: each also gets a version without the code cells.
NO_CODE_PAGES = (REPORT_STAGE, COMPARE_STAGE, CALIBRATE_STAGE)


def render_stage_html(stage: str, notebook: Path, failure: dict[str, Any] | None = None) -> dict[str, str]:
    """Self-contained HTML of an executed notebook; the report, the comparison and the
    calibration also get a version without code (`.noinput.html`). A failed stage's pages open
    with `failure` (evalbook.publish.pages.as_failed_page)."""
    rendered = {"html": str(pages.render_html(notebook, failure=failure))}
    if stage in NO_CODE_PAGES:
        rendered["html_noinput"] = str(pages.render_html(notebook, pages.noinput_path(notebook), exclude_input=True,
                                                         failure=failure))
    return rendered


def execute_stage(stage: str, parameters: dict[str, Any], output_dir: Path) -> dict[str, Any]:
    """Execute notebooks/<stage>.ipynb with Papermill into `output_dir`, on a kernel over local IPC
    sockets, and render its pages: the stage's record (stage, notebook, status, its pages, and
    the failure with the failing cell quoted). Every papermill call of evalbook is this one; it
    raises nothing a notebook or its pages can cause."""
    import papermill  # here, not at the top: slow to import, and only needed once a stage runs

    source = NOTEBOOKS / f"{stage}.ipynb"
    output = output_dir / f"{stage}.ipynb"
    record: dict[str, Any] = {"stage": stage, "notebook": str(output)}
    failure = None
    try:
        with ipc_kernel() as kernel:
            papermill.execute_notebook(str(source), str(output), parameters=parameters,
                                       kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=False,
                                       **kernel)
    except Exception as error:  # noqa: BLE001 - every failure is reported with its notebook
        record.update(status="failed", error=quote_failure(stage, output, error))
        failure = {"stage": stage, "sentence": pages.plain_paths(failure_sentence(stage, error), output_dir),
                   "inputs": stage_inputs(parameters, output_dir), "root": PROJECT_ROOT}
    else:
        record["status"] = "succeeded"
    if output.exists():
        _add_stage_html(record, stage, output, failure)
    return record


def _add_stage_html(record: dict[str, Any], stage: str, notebook: Path, failure: dict[str, Any] | None) -> None:
    """Add the stage's pages to `record`; a page that cannot be rendered fails the stage, after
    any error of the notebook's own, so that the run still ends with its run.json."""
    try:
        record.update(render_stage_html(stage, notebook, failure))
    except Exception as error:  # noqa: BLE001 - the run must still record how it ended
        failure = (f"stage {stage} ran but its HTML could not be rendered: "
                   f"{type(error).__name__}: {error}")
        record["error"] = f"{record['error']}\n{failure}" if record.get("error") else failure
        record["status"] = "failed"


def rebuild_index(local_root: Path, log: TextIO) -> None:
    """Rebuild `<local root>/index.html`; a failure is reported, never fatal to the run."""
    try:
        index = build_index(local_root)
    except Exception as error:  # noqa: BLE001 - the run's own outputs are already complete
        print(f"[evalbook] warning: the run index was not rebuilt: {error}", file=log, flush=True)
    else:
        print(f"[evalbook] run index: {index}", file=log, flush=True)


def mark_not_uploaded(folder: Path, remote: str, error: Exception, local_root: Path, log: TextIO) -> None:
    """Leave NOT_UPLOADED (where to and why) in a folder whose upload was refused, and rebuild
    the local index, which shows it."""
    write_new(folder / NOT_UPLOADED_MARKER, f"not uploaded to {remote}: {error}\n".encode("utf-8"))
    rebuild_index(local_root, log)


def mark_not_tracked(folder: Path, where: Target, error: Exception, log: TextIO,
                     local_root: Path | None = None) -> None:
    """Leave NOT_TRACKED (where to and why, without credentials: `tracking.shown`) in a run's or
    a comparison's folder that could not be logged to MLflow; with `local_root`, rebuild the
    local index, which shows it (a comparison's caller rebuilds it once its folder is done)."""
    write_new(folder / NOT_TRACKED_MARKER, shown(where, error).encode("utf-8"))
    if local_root is not None:
        rebuild_index(local_root, log)

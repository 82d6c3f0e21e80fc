"""Run the notebook pipeline with Papermill into one write-once run folder.

Layout of a run (`<outputs_root>/<env>/eval-runs/<yyyy>/<mm>/<dd>/`):
- `<run_id>.json`: the report, written by 04_report only when every stage succeeded;
- `<run_id>/`: `params.yaml` (the resolved profile), `provenance.json`, the canonical and scored
  tables, each executed notebook and its HTML, and at the end `run.json`. A failed run leaves
  `FAILED` (with the error) beside `run.json`; a run in progress has `RUNNING`.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import yaml

from evalbook.models import resolve_profile_models
from evalbook.params import ParamsError, load_profile, parse_override, resolved_values
from evalbook.pipeline import PROVENANCE, run_provenance
from evalbook.report import write_new

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = PROJECT_ROOT / "notebooks"
STAGES = ("01_load", "02_score", "03_judge", "04_report")


class RunFailed(RuntimeError):
    """A stage failed; the message names the executed notebook and quotes the failing cell."""


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    report_path: Path
    stages: list[dict[str, Any]] = field(default_factory=list)


def run_folder(outputs_root: Path, env: str, run_id: str, started: datetime) -> Path:
    return outputs_root / env / "eval-runs" / f"{started:%Y}" / f"{started:%m}" / f"{started:%d}" / run_id


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


def render_html(notebook: Path) -> Path:
    """Render an executed notebook to HTML beside it."""
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(notebook, as_version=4))
    html = notebook.with_suffix(".html")
    write_new(html, body.encode("utf-8"))
    return html


def _execute(stage: str, ctx_params: dict[str, Any], run_dir: Path, log: TextIO) -> dict[str, Any]:
    import papermill

    source = NOTEBOOKS / f"{stage}.ipynb"
    output = run_dir / f"{stage}.ipynb"
    print(f"[evalbook] running {stage}", file=log, flush=True)
    record: dict[str, Any] = {"stage": stage, "notebook": str(output)}
    try:
        papermill.execute_notebook(str(source), str(output), parameters=ctx_params,
                                   kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=False)
    except Exception as error:  # noqa: BLE001 - every failure is reported with its notebook
        record.update(status="failed", error=_quote_failure(stage, output, error))
        if output.exists():
            record["html"] = str(render_html(output))
        return record
    record.update(status="succeeded", html=str(render_html(output)))
    return record


def needs_hub(profile) -> bool:
    """True when a model or an input of the profile is read from the Hugging Face hub."""
    models = (profile["models"][role]["source"] for role in ("bertscore", "sentence_transformer"))
    inputs = (profile["input_path"], profile["predictions_path"] or "")
    return any(s.startswith("hub:") for s in models) or any(p.startswith("hf://") for p in inputs)


def _run_stages(parameters: dict[str, Any], run_dir: Path, result: RunResult, log: TextIO) -> str | None:
    """Execute the stages in order; the failure message of the first that fails, else None."""
    for stage in STAGES:
        if not (NOTEBOOKS / f"{stage}.ipynb").exists():
            return f"stage {stage}: notebook {NOTEBOOKS / (stage + '.ipynb')} is missing"
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
    from evalbook.judge.server import LocalServer, is_serving

    if is_serving(judge["base_url"]):
        print(f"[evalbook] judge server already running at {judge['base_url']}", file=log, flush=True)
        return None
    address = urlsplit(judge["base_url"])
    server = LocalServer(host=address.hostname or "127.0.0.1", port=address.port or 80,
                         model_alias=judge["model"])
    print(f"[evalbook] starting the local judge server at {server.base_url}", file=log, flush=True)
    server.start(log_path=run_dir / "judge-server.log")
    try:
        server.wait_ready(timeout=300)
    except RuntimeError:
        server.stop()
        raise
    return server


def run_pipeline(params_path: str, overrides: list[str] | None = None,
                 log: TextIO = sys.stderr) -> RunResult:
    """Validate the profile and its models, then run every stage; raise RunFailed on a failure."""
    parsed = dict(parse_override(text) for text in overrides or [])
    profile = load_profile(params_path, parsed, override_root=Path.cwd())
    resolve_profile_models(profile)
    values = resolved_values(profile)
    bertscore = values["models"]["bertscore"]
    if bertscore["rescale_with_baseline"] and not Path(bertscore["baseline_path"]).is_file():
        raise ParamsError(f"{profile.source_path}: models.bertscore.baseline_path "
                          f"{bertscore['baseline_path']} does not exist; bert-score would silently "
                          "return unrescaled scores")
    if not needs_hub(profile):
        os.environ["HF_HUB_OFFLINE"] = "1"

    run_id = profile["run_id"] or str(uuid.uuid4())
    started = datetime.now(timezone.utc)
    run_dir = run_folder(Path(profile.path("outputs_root")), profile["env"], run_id, started)
    report_path = run_dir.parent / f"{run_id}.json"
    if run_dir.exists() or report_path.exists():
        raise RunFailed(f"run {run_id} already exists at {run_dir}; run folders are write-once")
    run_dir.mkdir(parents=True)
    (run_dir / "RUNNING").touch()

    values["run_id"] = run_id
    write_new(run_dir / "params.yaml", yaml.safe_dump(values, sort_keys=False).encode("utf-8"))
    provenance = run_provenance(profile, parsed)
    write_new(run_dir / PROVENANCE, json.dumps(provenance, indent=2).encode("utf-8"))

    result = RunResult(run_id, run_dir, report_path)
    parameters = {"params_path": str(run_dir / "params.yaml"), "run_dir": str(run_dir), "run_id": run_id}
    try:
        server = start_judge_server(profile, run_dir, log)
    except RuntimeError as error:
        server, failure = None, f"the local judge server did not start: {error}"
    else:
        try:
            failure = _run_stages(parameters, run_dir, result, log)
        finally:
            if server is not None:
                server.stop()

    status = "failed" if failure else "succeeded"
    if failure is None and not report_path.exists():
        status, failure = "failed", f"every stage ran but no report was written at {report_path}"
    summary = {"run_id": run_id, "status": status, "started_at": started.isoformat(),
               "finished_at": datetime.now(timezone.utc).isoformat(),
               "report": str(report_path) if status == "succeeded" else None,
               "stages": result.stages, **provenance}
    write_new(run_dir / "run.json", json.dumps(summary, indent=2).encode("utf-8"))
    if failure:
        write_new(run_dir / "FAILED", (failure + "\n").encode("utf-8"))
    (run_dir / "RUNNING").unlink()
    if failure:
        raise RunFailed(failure)
    return result

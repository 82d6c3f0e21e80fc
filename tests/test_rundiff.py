"""`make diff`: the params diff and the nbdime source diff of two runs' executed notebooks."""

from __future__ import annotations

import io
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from evalbook.publish.rundiff import diff_runs, notebook_diff, params_diff


def make_run(root: Path, run_id: str, limit: int, day: str = "30") -> Path:
    folder = root / "local" / "eval-runs" / "2026" / "11" / day / run_id
    folder.mkdir(parents=True)
    (folder / "params.yaml").write_text(f"name: default\nlimit: {limit}\nrun_id: {run_id}\n", "utf-8")
    cells = [new_markdown_cell("# 01 · Load"),
             new_code_cell('params_path: str = "../params/default.yaml"  # profile'),
             new_code_cell(f'# Parameters\nparams_path = "{folder}/params.yaml"\nrun_id = "{run_id}"\n'),
             new_code_cell("print('load')")]
    cells[2].metadata["tags"] = ["injected-parameters"]
    notebook = new_notebook(cells=cells)
    # what differs between any two executions and must not show: outputs, counts, timestamps
    cells[3].outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"load {run_id}\n")]
    cells[3].execution_count = limit
    notebook.metadata["papermill"] = {"start_time": f"2026-11-{day}T00:00:{limit:02d}",
                                      "parameters": {"run_id": run_id}}
    nbformat.write(notebook, folder / "01_load.ipynb")
    return folder


def test_params_diff_shows_the_changed_parameter(tmp_path: Path):
    a, b = make_run(tmp_path, "run-a", 3), make_run(tmp_path, "run-b", 5)
    lines = params_diff(a, b)
    assert "-limit: 3" in lines and "+limit: 5" in lines
    assert params_diff(a, a) == []


def test_notebook_diff_shows_injected_parameters_not_outputs_or_timestamps(tmp_path: Path):
    a, b = make_run(tmp_path, "run-a", 3), make_run(tmp_path, "run-b", 5)
    text = notebook_diff(a / "01_load.ipynb", b / "01_load.ipynb")
    assert '-run_id = "run-a"' in text and '+run_id = "run-b"' in text
    # papermill gives the injected cell a new id each run; the diff still reads as one changed cell
    assert "modified /cells/2/source" in text and "inserted before" not in text
    assert str(a / "01_load.ipynb") in text, "the diff names the run's notebooks, not scratch copies"
    assert "load run-a" not in text, "outputs must not be diffed"
    assert "start_time" not in text and "2026-11-30T" not in text, "timestamps must not be diffed"
    assert "\x1b[" not in text, "no colour codes unless asked"
    assert notebook_diff(a / "01_load.ipynb", a / "01_load.ipynb").strip() == ""


def test_diff_runs_reports_each_part(tmp_path: Path):
    a, b = make_run(tmp_path, "run-a", 3), make_run(tmp_path, "run-b", 5)
    out = io.StringIO()
    assert diff_runs(a, b, out=out) == 2
    text = out.getvalue()
    assert "## params.yaml: differs" in text and "## 01_load.ipynb: sources differ" in text
    assert "## 02_score: not executed in both runs" in text

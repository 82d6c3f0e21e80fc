"""The run layout and every way of naming a run: lib/evalbook/layout.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from evalbook import layout, runs
from evalbook.runs import RunNotFound

STARTED = datetime(2026, 11, 30, 9, 15, tzinfo=timezone.utc)
FIRST = "abcdef12-0000-4000-8000-000000000001"
SECOND = "abcdef12-9999-4000-8000-000000000002"
OTHER = "fedcba98-0000-4000-8000-000000000003"


def make_run(root: Path, run_id: str, env: str = "local", started: datetime = STARTED,
             status: str | None = "succeeded", report: bool = True) -> Path:
    """A run folder with params.yaml, run.json with `status` (none when None) and its report."""
    folder = layout.run_folder(root, env, run_id, started)
    folder.mkdir(parents=True)
    (folder / "params.yaml").write_text(f"run_id: {run_id}\n", "utf-8")
    if status is not None:
        (folder / "run.json").write_text(json.dumps(
            {"run_id": run_id, "status": status, "started_at": started.isoformat(), "stages": []}), "utf-8")
    if report:
        layout.report_path(folder).write_text(json.dumps({"run_id": run_id}), "utf-8")
    return folder


def test_the_layout_of_a_run_and_its_neighbours(tmp_path: Path):
    folder = layout.run_folder(tmp_path, "staging", FIRST, STARTED)
    assert folder == tmp_path / "staging" / "eval-runs" / "2026" / "11" / "30" / FIRST
    assert layout.report_path(folder) == folder.parent / f"{FIRST}.json"
    assert layout.comparisons_folder(layout.report_path(folder)) == folder.parent / "comparisons"
    assert layout.remote_comparisons_folder(tmp_path, "staging") == tmp_path / "staging" / "comparisons"
    assert layout.interactive_folder(tmp_path, "staging") == tmp_path / "staging" / "interactive"


def test_run_folders_leave_out_comparisons_and_other_folders(tmp_path: Path):
    folder = make_run(tmp_path, FIRST)
    (folder.parent / "comparisons" / "abcdef12-vs-fedcba98").mkdir(parents=True)
    (tmp_path / "local" / "interactive").mkdir()
    (tmp_path / "local" / "eval-runs" / "notes" / "11" / "30" / "stray").mkdir(parents=True)
    assert layout.run_folders(tmp_path) == [folder]
    assert layout.run_folders(tmp_path, env="prod") == []


def test_a_run_by_its_id_in_any_env_or_one(tmp_path: Path):
    local = make_run(tmp_path, FIRST)
    staging = make_run(tmp_path, FIRST, env="staging")
    assert runs.find_runs(tmp_path, FIRST) == [local, staging]
    assert runs.find_runs(tmp_path, FIRST, env="staging") == [staging]
    assert runs.find_runs(tmp_path, OTHER) == []


def test_an_id_prefix_of_8_characters_names_the_run(tmp_path: Path):
    folder = make_run(tmp_path, FIRST)
    make_run(tmp_path, OTHER)
    assert runs.find_runs(tmp_path, FIRST[:8]) == [folder]
    assert runs.find_run_folder(tmp_path, FIRST[:8]) == folder


def test_an_id_prefix_of_7_characters_names_no_run(tmp_path: Path):
    make_run(tmp_path, FIRST)
    assert runs.find_runs(tmp_path, FIRST[:7]) == []
    with pytest.raises(RunNotFound, match=f"no run '{FIRST[:7]}'"):
        runs.find_run_folder(tmp_path, FIRST[:7])


def test_a_prefix_two_runs_share_is_refused_listing_both(tmp_path: Path):
    first, second = make_run(tmp_path, FIRST), make_run(tmp_path, SECOND)
    with pytest.raises(RunNotFound, match="run id prefix 'abcdef12' fits 2 runs") as raised:
        runs.find_runs(tmp_path, "abcdef12")
    assert str(first) in str(raised.value) and str(second) in str(raised.value)
    assert runs.find_runs(tmp_path, "abcdef12-9") == [second]


def test_an_exact_id_wins_over_a_longer_id_it_prefixes(tmp_path: Path):
    short = make_run(tmp_path, "run-2026-11-30")
    make_run(tmp_path, "run-2026-11-30-retry")
    assert runs.find_runs(tmp_path, "run-2026-11-30") == [short]


def test_existing_run_finds_a_folder_or_a_lone_report_on_any_date(tmp_path: Path):
    folder = make_run(tmp_path, FIRST, env="staging", report=False)
    assert layout.existing_run(tmp_path, FIRST) == folder
    day = tmp_path / "local" / "eval-runs" / "2025" / "01" / "02"
    day.mkdir(parents=True)
    (day / f"{OTHER}.json").write_text("{}", "utf-8")
    assert layout.existing_run(tmp_path, OTHER) == day / f"{OTHER}.json"
    assert layout.existing_run(tmp_path, OTHER[:8]) is None, "the write-once check takes whole ids only"
    assert layout.existing_run(tmp_path, SECOND) is None


def test_find_report_by_path_url_id_and_prefix(tmp_path: Path):
    folder = make_run(tmp_path, FIRST)
    report = str(layout.report_path(folder))
    assert runs.find_report(tmp_path / "elsewhere", report) == report
    assert runs.find_report(tmp_path, f"file://{report}") == report
    assert runs.find_report(tmp_path, "s3://bucket/prefix/run.json") == "s3://bucket/prefix/run.json"
    assert runs.find_report(tmp_path, FIRST) == report
    assert runs.find_report(tmp_path, FIRST[:8], env="local") == report
    with pytest.raises(RunNotFound, match=r"no report for run id abcdef1: looked for .*/\*/eval-runs/"):
        runs.find_report(tmp_path, FIRST[:7])
    with pytest.raises(RunNotFound, match="needs a local outputs root"):
        runs.find_report("s3://bucket/prefix", FIRST)


def test_find_report_names_a_run_that_left_no_report(tmp_path: Path):
    make_run(tmp_path, FIRST, status="failed", report=False)
    with pytest.raises(RunNotFound, match=r"has a run folder but no report.*status 'failed'"):
        runs.find_report(tmp_path, FIRST[:8])


def test_latest_reports_are_the_newest_successful_runs_of_the_env(tmp_path: Path):
    old = make_run(tmp_path, FIRST, started=datetime(2026, 11, 28, tzinfo=timezone.utc))
    new = make_run(tmp_path, SECOND, started=datetime(2026, 11, 29, tzinfo=timezone.utc))
    make_run(tmp_path, OTHER, status="failed", report=False)
    make_run(tmp_path, "in-another-env", env="prod")
    # the latest successful runs are found from the runs' state: evalbook.runs
    assert runs.latest_reports(tmp_path, "local", 2) == [layout.report_path(old), layout.report_path(new)]
    assert runs.latest_reports(tmp_path, "local", 1) == [layout.report_path(new)]
    assert runs.latest_reports(tmp_path, "local", 5) == [layout.report_path(old), layout.report_path(new)]
    assert runs.latest_reports(tmp_path, "staging", 2) == []


def test_find_run_folder_by_id_by_folder_and_one_id_in_two_folders(tmp_path: Path):
    folder = make_run(tmp_path, FIRST)
    assert runs.find_run_folder(tmp_path, FIRST) == folder
    assert runs.find_run_folder(tmp_path, str(folder)) == folder.resolve()
    with pytest.raises(RunNotFound, match=f"no run '{OTHER}'"):
        runs.find_run_folder(tmp_path, OTHER)
    again = make_run(tmp_path, FIRST, started=datetime(2026, 12, 1, tzinfo=timezone.utc))
    with pytest.raises(RunNotFound, match="matches several run folders") as raised:
        runs.find_run_folder(tmp_path, FIRST)
    assert str(folder) in str(raised.value) and str(again) in str(raised.value)


def test_find_run_folder_refuses_a_shared_prefix(tmp_path: Path):
    make_run(tmp_path, FIRST), make_run(tmp_path, SECOND)
    with pytest.raises(RunNotFound, match="prefix 'abcdef12' fits 2 runs"):
        runs.find_run_folder(tmp_path, "abcdef12")


def test_comparisons_of_a_candidate_on_s3_go_beside_its_report():
    report = "s3://bucket/prefix/local/eval-runs/2026/11/30/run.json"
    assert layout.comparisons_url(report) == "s3://bucket/prefix/local/eval-runs/2026/11/30/comparisons"


def test_a_key_under_an_outputs_root_names_its_run_only_in_the_layout():
    run = "prod/eval-runs/2026/12/01/abc"
    assert layout.run_of_key(f"{run}/01_load.ipynb", "abc") == run
    assert layout.run_of_key(f"{run}.json", "abc") == run
    assert layout.run_of_key(f"{run}/figures/x.png", "abc") == run
    assert layout.run_of_key(f"{run}x/01_load.ipynb", "abc") is None  # another run whose id starts so
    assert layout.run_of_key(f"{run}.json.tmp", "abc") is None
    assert layout.run_of_key("prod/eval-runs/2026/12/01/comparisons/abc.json", "abc") is None
    assert layout.run_of_key("prod/other/2026/12/01/abc/x", "abc") is None
    assert layout.run_of_key("prod/eval-runs/26/12/01/abc/x", "abc") is None
    assert layout.run_of_key(run, "abc") is None  # the folder name alone is not an object in it


def test_no_module_but_layout_spells_a_file_name_of_a_run_folder():
    """layout names every file of a run folder; another module that wrote "run.json" itself would
    drift from it (issue 25). Every string constant of the package (docstrings aside) is compared
    with the names layout defines."""
    import ast

    names = {value for key, value in vars(layout).items()
             if key.isupper() and isinstance(value, str) and ("." in value or value.isupper())}
    assert {"run.json", "params.yaml", "RUNNING", "FAILED", "NOT_UPLOADED", "judge.json"} <= names
    package = Path(layout.__file__).parent
    spelled = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "layout.py":
            continue
        tree = ast.parse(path.read_text("utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        spelled += [f"{path.relative_to(package)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                    if isinstance(node, ast.Constant) and node.value in names and id(node) not in docstrings]
    assert not spelled, "file names spelled outside layout:\n" + "\n".join(spelled)

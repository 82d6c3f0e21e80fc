"""`evalbook calibrate` refusals (issue 24): each exits 2 with one line on stderr, starting
`evalbook: `, and no traceback, before anything is written.

The labels refusals need a run to match against: a copy of the session's sample runs (made once in
conftest.py), so that nothing here writes into another test's outputs. The failed run is a bare
run folder whose run.json says it failed: no real run is needed for it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from evalbook.__main__ import main
from paths import DEFAULT_PROFILE, ROOT

LABELS = ROOT / "data" / "sample" / "labels.csv"


@pytest.fixture(scope="module")
def outputs(sample_runs, tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("refusals") / "outputs"
    shutil.copytree(sample_runs.outputs, copy)
    return copy


@pytest.fixture(scope="module")
def run_id(sample_runs) -> str:
    return sample_runs.baseline.run_id


def tree(root: Path) -> list[Path]:
    return sorted(root.rglob("*"))


def refused(capsys, root: Path, *args: str) -> str:
    """Run `calibrate` with `args` against the runs under `root`, check that it was refused in one
    line and wrote nothing; the line."""
    before = tree(root)
    code = main(["calibrate", "--params", str(DEFAULT_PROFILE), "-p", f"outputs_root={root}", *args])
    error = capsys.readouterr().err
    assert code == 2, error
    assert error.startswith("evalbook: ") and "Traceback" not in error, error
    assert error.endswith("\n") and error.count("\n") == 1, error  # one line
    assert tree(root) == before  # no calibration folder, no FAILED, no index
    return error


def sample_labels() -> pd.DataFrame:
    return pd.read_csv(LABELS, dtype={"id": str, "rater": str, "note": str})


# ---------------------------------------------------------------- files that are not labels files

def empty_file(folder: Path) -> Path:
    (folder / "labels.csv").write_bytes(b"")
    return folder / "labels.csv"


def header_only(folder: Path) -> Path:
    (folder / "labels.csv").write_text("id,label,rater,note\n", encoding="utf-8")
    return folder / "labels.csv"


def latin1(folder: Path) -> Path:
    text = LABELS.read_text("utf-8") + "s01,4,reader-3,caf\u00e9\n"  # a third reader, in Latin-1
    (folder / "labels.csv").write_bytes(text.encode("latin-1"))
    return folder / "labels.csv"


def a_folder(folder: Path) -> Path:
    (folder / "labels.csv").mkdir()
    return folder / "labels.csv"


def missing(folder: Path) -> Path:
    return folder / "no-such-labels.csv"


@pytest.mark.parametrize(("make", "said"), [
    (empty_file, "the file is empty (0 bytes)"),
    (header_only, "has a header but no data rows"),
    (latin1, "is not UTF-8"),
    (a_folder, "is a folder, not a labels file"),
    (missing, "no such file"),
], ids=["empty", "header only", "latin-1", "a folder", "missing"])
def test_a_path_that_is_no_labels_file_is_refused_in_one_line(capsys, tmp_path, outputs, run_id, make, said):
    labels = make(tmp_path)
    error = refused(capsys, outputs, "--run", run_id, "--labels", str(labels))
    assert f"file {labels}" in error and said in error, error


# ---------------------------------------------------------------- values off the scale

def test_labels_off_the_scale_are_refused_naming_rows_ids_and_the_flag(capsys, tmp_path, outputs, run_id):
    frame = sample_labels()
    frame.loc[[3, 20, 41], "label"] = [7, -3, 99]  # rows 4, 21 and 42 of the file
    path = tmp_path / "labels.csv"
    frame.to_csv(path, index=False)
    error = refused(capsys, outputs, "--run", run_id, "--labels", str(path))
    ids = frame["id"].tolist()
    assert f"file {path}; column 'label'; rows 4, 21, 42: 3 labels lie outside 1-5" in error, error
    assert (f"7 (row 4, id {ids[3]!r}), -3 (row 21, id {ids[20]!r}), 99 (row 42, id {ids[41]!r})"
            in error), error
    assert "--label-kind continuous" in error, error


# ---------------------------------------------------------------- too few labelled examples

@pytest.mark.parametrize("rows", [
    [{"id": "s01", "label": 4}],  # one label in all
    [{"id": "s01", "label": 4}, {"id": "x98", "label": 2}, {"id": "x99", "label": 5}],  # one in the run
])
def test_a_single_labelled_example_is_refused_with_the_minimum(capsys, tmp_path, outputs, run_id, rows):
    path = tmp_path / "labels.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    error = refused(capsys, outputs, "--run", run_id, "--labels", str(path))
    assert "at least 2 labelled examples" in error and "'s01'" in error, error


# ---------------------------------------------------------------- a run that failed

def test_a_failed_run_is_refused_in_calibrate_s_words(capsys, tmp_path):
    run_id = "5e1f0c2a-0000-4000-8000-00000000dead"
    folder = tmp_path / "outputs" / "local" / "eval-runs" / "2026" / "01" / "02" / run_id
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"status": "failed", "stages": [
        {"stage": "01_load", "status": "succeeded"}, {"stage": "02_score", "status": "failed"}]}), "utf-8")
    error = refused(capsys, tmp_path / "outputs", "--run", run_id, "--labels", str(LABELS))
    assert f"run {run_id} has a run folder but no report" in error and "02_score" in error, error
    assert "nothing to compare" not in error, error
    assert "no scores to calibrate" in error and "--run" in error, error

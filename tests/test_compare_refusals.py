"""`python -m evalbook compare` on two runs it must refuse or warn about (issue 24).

A refusal exits 2 with one line on stderr, before anything is written: a report on S3 that is not
there, a report whose example ids repeat. Comparing a run with itself goes ahead, with a warning
on stderr and on the comparison's pages, as for runs of different datasets.

The runs are the session's two sample runs (conftest.sample_runs); each test compares a copy of
their outputs root, since a comparison writes beside the candidate.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest

from evalbook.__main__ import main
from evalbook.escaping import escape_html, escape_markdown
from s3server import MotoServer, new_bucket, use_test_credentials


@pytest.fixture
def outputs(sample_runs, tmp_path) -> Path:
    """A copy of the sample runs' outputs root, for this test to compare (and write) in."""
    copy = tmp_path / "outputs"
    shutil.copytree(sample_runs.outputs, copy)
    return copy


def files_under(root: Path) -> set[Path]:
    return {path.relative_to(root) for path in root.rglob("*")}


def compare(sample_runs, outputs: Path, *args: str) -> int:
    return main(["compare", "--params", str(sample_runs.profile), "-p", f"outputs_root={outputs}", *args])


def assert_refused_in_one_line(error: str) -> str:
    """The refusal's single line, after checking it is the only one and no traceback."""
    assert error.startswith("evalbook: ") and error.count("\n") == 1, error
    assert "Traceback" not in error
    return error.strip()


def copied_report(outputs: Path, sample_runs, run) -> Path:
    """`run`'s report in the copy `outputs` of the sample runs' outputs root."""
    return outputs / run.report_path.relative_to(sample_runs.outputs)


# ---------------------------------------------------------------- a report on S3 that is not there

@pytest.fixture
def s3(tmp_path, monkeypatch):
    """moto's S3 server with an empty bucket, reached with test credentials only."""
    with MotoServer(tmp_path / "access.log") as server:
        use_test_credentials(monkeypatch, server.url, tmp_path)
        admin, bucket = new_bucket(server.url)
        yield server, admin, bucket


@pytest.mark.parametrize("side", ["baseline", "candidate"])
def test_a_missing_s3_report_exits_2_naming_the_url_and_writes_nothing(sample_runs, outputs, s3, capsys, side):
    server, admin, bucket = s3
    missing = f"s3://{bucket}/team/local/eval-runs/2026/11/30/{uuid.uuid4()}.json"
    present = str(copied_report(outputs, sample_runs, sample_runs.baseline))
    runs = {"baseline": present, "candidate": present, side: missing}
    before = files_under(outputs)

    code = compare(sample_runs, outputs, "--baseline", runs["baseline"], "--candidate", runs["candidate"])

    line = assert_refused_in_one_line(capsys.readouterr().err)
    assert code == 2, line
    assert missing in line and "no such object" in line
    assert files_under(outputs) == before
    assert admin.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    assert {request.method for request in server.requests()} <= {"GET", "HEAD", "PUT"}
    assert [r for r in server.requests() if r.method == "PUT" and r.path.startswith(f"/{bucket}/")] == []


# ---------------------------------------------------------------- a report with duplicate example ids

def test_a_report_with_duplicate_ids_exits_2_naming_it_and_the_ids_before_writing(sample_runs, outputs, capsys):
    report_path = copied_report(outputs, sample_runs, sample_runs.candidate)
    report = json.loads(report_path.read_text("utf-8"))
    first, third = report["examples"][0]["id"], report["examples"][2]["id"]
    report["examples"] += [report["examples"][0], report["examples"][2], report["examples"][2]]
    report_path.write_text(json.dumps(report), "utf-8")
    before = files_under(outputs)

    code = compare(sample_runs, outputs, "--baseline", sample_runs.baseline.run_id,
                   "--candidate", str(report_path))

    line = assert_refused_in_one_line(capsys.readouterr().err)
    assert code == 2, line
    assert str(report_path) in line and "duplicate example ids" in line
    assert f"{first} (2 times)" in line and f"{third} (3 times)" in line
    assert "--candidate" in line
    assert files_under(outputs) == before


# ---------------------------------------------------------------- a run compared with itself

def test_a_run_compared_with_itself_is_warned_about_on_stderr_and_on_its_pages(sample_runs, outputs, capsys):
    run_id = sample_runs.baseline.run_id
    code = compare(sample_runs, outputs, "--baseline", run_id, "--candidate", run_id[:8])

    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    warning = f"the baseline and the candidate are the same run ({run_id})"
    assert f"[evalbook] warning: {warning}" in captured.err
    comparison = Path(captured.out.strip().splitlines()[-1])
    folder = comparison.with_suffix("")
    page = (folder / "05_compare.noinput.html").read_text("utf-8")
    assert f"<strong>Warning:</strong> {escape_html(warning)}" in page
    assert f"**Warning**: {escape_markdown(warning)}" in (folder / "summary.md").read_text("utf-8")

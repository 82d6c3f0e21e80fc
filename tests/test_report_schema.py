"""The command that writes the registry's metric ranges into report-v1.json
(`python -m evalbook.report.schema`, evalbook/report/schema.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from evalbook.report import schema
from paths import ROOT


@pytest.fixture
def stale_schema(tmp_path, monkeypatch):
    """A copy of the shipped schema without its metric ranges, in place of the shipped file."""
    shipped = json.loads(schema.SHIPPED.read_text("utf-8"))
    del shipped["$defs"]["metric_ranges"]
    copy = tmp_path / "report-v1.json"
    copy.write_text(json.dumps(shipped, indent=2), "utf-8")
    monkeypatch.setattr(schema, "SHIPPED", copy)
    return copy


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_what_the_command_does_and_changes_nothing(stale_schema, capsys, flag):
    before = stale_schema.read_bytes()
    with pytest.raises(SystemExit) as exited:
        schema.main([flag])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and "report-v1.json" in out
    assert stale_schema.read_bytes() == before


def test_an_unknown_argument_is_refused_and_changes_nothing(stale_schema, capsys):
    before = stale_schema.read_bytes()
    with pytest.raises(SystemExit) as exited:
        schema.main(["--force"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --force" in capsys.readouterr().err
    assert stale_schema.read_bytes() == before


def test_without_arguments_the_ranges_are_written(stale_schema, capsys):
    schema.main([])
    written = json.loads(stale_schema.read_text("utf-8"))
    assert written == schema.with_metric_ranges(written) and "metric_ranges" in written["$defs"]
    assert str(stale_schema) in capsys.readouterr().out


def test_the_module_s_help_leaves_the_shipped_schema_as_it_is():
    before = schema.SHIPPED.stat().st_mtime_ns, schema.SHIPPED.read_bytes()
    done = subprocess.run([sys.executable, "-m", "evalbook.report.schema", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage:"), done.stderr
    assert (schema.SHIPPED.stat().st_mtime_ns, schema.SHIPPED.read_bytes()) == before

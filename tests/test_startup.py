"""What the stages and commands that do not score import: never torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from paths import ROOT

NOT_SCORING = {
    "01_load, 03_judge, 04_report": ["evalbook.pipeline", "evalbook.judge.stage", "evalbook.judge.display",
                                     "evalbook.report.figures", "evalbook.report.tables", "evalbook.metrics"],
    "05_compare": ["evalbook.compare.context", "evalbook.compare.document", "evalbook.compare.tables",
                   "evalbook.compare.figures"],
    "the command line and the runner": ["evalbook.__main__", "evalbook.runner", "evalbook.publish.index"],
}


@pytest.mark.parametrize("modules", NOT_SCORING.values(), ids=NOT_SCORING.keys())
def test_modules_of_what_does_not_score_import_no_torch(modules):
    probe = f"import sys\nfor name in {modules!r}: __import__(name)\nprint('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"

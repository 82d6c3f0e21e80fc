"""Ctrl-C while a stage's cell runs: one line, the run marked interrupted, exit 130, no traceback.

The cheap companion of test_runner_signals: no judge, and the signal sent once a cell of 02_score
that takes about a second has started, so that it is still finishing as the runner stops the
kernel. Whether it ends in time to race the stop depends on the machine; test_kernel.py holds the
cell until then, and fails every time without the fix.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from paths import DEFAULT_PROFILE, ROOT

pytestmark = pytest.mark.slow  # a real run: kernels and models

STARTUP_BOUND_SECONDS = 600  # generous bounds for a loaded 2-core machine; the test waits on events
EXIT_BOUND_SECONDS = 120
PROGRESS_BAR = re.compile(r"\d+%\|")  # tqdm's "scoring:  40%|####      | 2/5"


def running_cell_source(notebook: Path) -> str | None:
    """The source of the cell papermill marks as running in an executed notebook, if any."""
    try:
        cells = json.loads(notebook.read_text("utf-8"))["cells"]
    except (OSError, ValueError):
        return None  # not written yet, or being written
    running = [cell for cell in cells if cell.get("metadata", {}).get("papermill", {}).get("status") == "running"]
    return "".join(running[0]["source"]) if running else None


def wait_for_running_cell(process: subprocess.Popen, outputs: Path, stage: str, code: str) -> Path:
    """The run folder, once `stage`'s cell containing `code` is running."""
    deadline = time.monotonic() + STARTUP_BOUND_SECONDS
    while time.monotonic() < deadline:
        for notebook in outputs.glob(f"local/eval-runs/*/*/*/*/{stage}.ipynb"):
            if code in (running_cell_source(notebook) or ""):
                return notebook.parent
        if process.poll() is not None:
            raise AssertionError(f"the run ended before {stage} ran {code!r}:\n{process.communicate()[1]}")
        time.sleep(0.05)
    raise AssertionError(f"{stage} did not run {code!r} within {STARTUP_BOUND_SECONDS} s")


def test_ctrl_c_during_02_score_prints_one_line_and_no_traceback(tmp_path):
    command = [sys.executable, "-m", "evalbook", "run", "--params", str(DEFAULT_PROFILE), "-p", "limit=3",
               "-p", "judge.enabled=false", "-p", f"outputs_root={tmp_path}"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    started: list[psutil.Process] = []
    try:
        run_dir = wait_for_running_cell(process, tmp_path, "02_score", "canonical_table(ctx)")
        started = psutil.Process(process.pid).children(recursive=True)
        os.killpg(process.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the runner's whole group
        _, stderr = process.communicate(timeout=EXIT_BOUND_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()

    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "ERROR" not in stderr, stderr
    # besides the runner's log lines and the stages' progress bars, which are meant for the terminal
    own = [line for line in stderr.splitlines()
           if line.strip() and not line.startswith("[evalbook] ") and not PROGRESS_BAR.search(line)]
    assert len(own) == 1 and re.match(rf"evalbook: run {run_dir.name} interrupted by SIGINT during 02_score",
                                       own[0]), stderr
    summary = json.loads((run_dir / "run.json").read_text("utf-8"))
    assert (summary["status"], summary["stage"], summary["signal"]) == ("interrupted", "02_score", "SIGINT")
    assert not (run_dir / "RUNNING").exists()
    _, alive = psutil.wait_procs(started, timeout=EXIT_BOUND_SECONDS)
    assert alive == [], f"left running after the runner: {[each.cmdline() for each in alive]}"

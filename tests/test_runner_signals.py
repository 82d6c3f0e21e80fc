"""SIGINT, SIGTERM and SIGKILL during a run: what the runner leaves, and what it takes with it.

Each test starts the real command, `python -m evalbook run`, in its own session, waits until a
stage is running, signals it, and checks the run folder, the index, stderr and that no process
the runner started is left. A SIGINT goes to the runner's whole process group, as Ctrl-C in a
terminal does; SIGTERM and SIGKILL go to the runner alone, as `kill` does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from evalbook.publish.catalog import collect_runs
from evalbook.publish.index import build_index
from evalbook.processes import is_serving
from paths import DEFAULT_PROFILE, ROOT

pytestmark = pytest.mark.slow  # real runs through the runner: kernels, models

LOCAL_JUDGE = str(ROOT / "params" / "local-judge.yaml")
# generous bounds for a loaded 2-core machine; the tests wait on events, never on a duration
STARTUP_BOUND_SECONDS = 600
EXIT_BOUND_SECONDS = 120


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Runner:
    process: subprocess.Popen
    outputs: Path
    # every process seen under the runner, for the clean-up after a failed test
    children: list[psutil.Process] = field(default_factory=list)

    def run_dir_once(self, stage: str) -> Path:
        """The run folder, once RUNNING is there, `stage`'s executed notebook exists and its kernel
        has started. Papermill writes the notebook before it starts the kernel: a test that
        signalled as soon as the notebook appeared could find no kernel yet under the runner."""
        deadline = time.monotonic() + STARTUP_BOUND_SECONDS
        while time.monotonic() < deadline:
            for folder in self.outputs.glob("local/eval-runs/*/*/*/*/"):
                if ((folder / "RUNNING").is_file() and (folder / f"{stage}.ipynb").is_file()
                        and self.kernel_started()):
                    return folder
            if self.process.poll() is not None:
                raise AssertionError(f"the run ended before {stage} started:\n{self.finish()[1]}")
            time.sleep(0.2)
        raise AssertionError(f"{stage} did not start within {STARTUP_BOUND_SECONDS} s")

    def kernel_started(self) -> bool:
        try:
            return any("ipykernel" in " ".join(process.cmdline())
                       for process in psutil.Process(self.process.pid).children(recursive=True))
        except psutil.NoSuchProcess:  # the runner, or a process under it, has just ended
            return False

    def descendants(self) -> list[psutil.Process]:
        found = psutil.Process(self.process.pid).children(recursive=True)
        self.children.extend(found)
        return found

    def finish(self) -> tuple[int, str]:
        _, stderr = self.process.communicate(timeout=EXIT_BOUND_SECONDS)
        return self.process.returncode, stderr


@pytest.fixture
def start_run():
    """Start `python -m evalbook run` into an outputs root; whatever a failed test leaves running,
    the runner and everything it started, is killed afterwards."""
    started: list[tuple[Runner, list[psutil.Process]]] = []

    def start(outputs: Path, params: str = str(DEFAULT_PROFILE), *overrides: str) -> Runner:
        command = [sys.executable, "-m", "evalbook", "run", "--params", params, "-p", "limit=3",
                   "-p", f"outputs_root={outputs}"]
        for override in overrides:
            command += ["-p", override]
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
        runner = Runner(process, outputs)
        started.append((runner, runner.children))
        return runner

    yield start
    for runner, children in started:
        if runner.process.poll() is None:
            children.extend(runner.descendants())
            runner.process.kill()
            runner.process.communicate()
        for child in children:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass


@pytest.fixture
def no_judge(start_run):
    # port 1 has no judge server: the judge records not_run and starts nothing
    return lambda outputs: start_run(outputs, str(DEFAULT_PROFILE), "judge.base_url=http://127.0.0.1:1/v1")


def assert_all_gone(processes: list[psutil.Process]) -> None:
    _, alive = psutil.wait_procs(processes, timeout=EXIT_BOUND_SECONDS)
    assert alive == [], f"left running after the runner: {[p.cmdline() for p in alive]}"


def assert_one_line_of_its_own(stderr: str, expected_start: str) -> str:
    """Besides log lines (`[evalbook] running 02_score`, the kernel's `[IPKernelApp] ...`),
    stderr holds one line: the command's message."""
    own = [line for line in stderr.splitlines() if not re.match(r"\[\w+\] ", line)]
    assert "Traceback" not in stderr, stderr
    assert len(own) == 1 and own[0].startswith(expected_start), stderr
    return own[0]


@pytest.mark.parametrize("name, send, code", [
    ("SIGINT", lambda pid: os.killpg(pid, signal.SIGINT), 130),
    ("SIGTERM", lambda pid: os.kill(pid, signal.SIGTERM), 143),
])
def test_an_interrupted_run_is_marked_interrupted_and_leaves_nothing_running(no_judge, tmp_path, name,
                                                                            send, code):
    runner = no_judge(tmp_path)
    run_dir = runner.run_dir_once("02_score")
    (row,) = collect_runs(tmp_path)
    assert row["status"] == "running", row
    started = runner.descendants()
    assert started, "the stage's kernel should be a child of the runner"

    send(runner.process.pid)
    returncode, stderr = runner.finish()

    assert returncode == code, stderr
    line = assert_one_line_of_its_own(stderr, f"evalbook: run {run_dir.name} interrupted by {name}")
    assert "during 02_score" in line and str(run_dir) in line
    summary = json.loads((run_dir / "run.json").read_text())
    assert (summary["status"], summary["stage"], summary["signal"]) == ("interrupted", "02_score", name)
    assert [stage["stage"] for stage in summary["stages"]] == ["01_load"]
    assert not (run_dir / "RUNNING").exists()
    assert f"interrupted by {name} during 02_score" in (run_dir / "FAILED").read_text()
    assert not (run_dir.parent / f"{run_dir.name}.json").exists()
    (row,) = collect_runs(tmp_path)
    assert row["status"] == "interrupted" and name in row["reason"]
    assert 'class="status interrupted"' in (tmp_path / "index.html").read_text()
    assert_all_gone(started)


def test_a_sigkilled_run_is_listed_as_crashed_and_its_kernel_exits(no_judge, tmp_path):
    runner = no_judge(tmp_path)
    run_dir = runner.run_dir_once("02_score")
    started = runner.descendants()
    marker = json.loads((run_dir / "RUNNING").read_text())
    assert marker["pid"] == runner.process.pid and marker["host"] == socket.gethostname()

    os.kill(runner.process.pid, signal.SIGKILL)
    returncode, _ = runner.finish()

    assert returncode == -signal.SIGKILL
    assert_all_gone(started)
    (row,) = collect_runs(tmp_path)
    assert row["status"] == "crashed", row
    assert f"pid {marker['pid']}" in row["reason"] and "02_score" in row["reason"]
    page = build_index(tmp_path).read_text()
    assert 'class="status crashed"' in page and "status running" not in page


def test_a_marker_whose_pid_now_belongs_to_another_process_is_crashed(tmp_path):
    # this test's own pid is alive, but it started long before the time the marker records
    run_dir = tmp_path / "local" / "eval-runs" / "2026" / "01" / "02" / "66666666-6666-4666-8666-666666666666"
    run_dir.mkdir(parents=True)
    me = psutil.Process()
    (run_dir / "RUNNING").write_text(json.dumps({
        "pid": me.pid, "host": socket.gethostname(), "process_started": me.create_time() + 3600,
        "started_at": "2026-01-02T10:00:00+00:00"}))
    (row,) = collect_runs(tmp_path)
    assert row["status"] == "crashed"


STAND_IN_SERVER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from evalbook.judge.server import LocalServer

    class StandIn(LocalServer):
        # a process that would run for ten minutes, in place of llama.cpp
        def command(self, model_path):
            return [sys.executable, "-c", "import time; time.sleep(600)"]

    StandIn(port=int(sys.argv[1]), model_path=Path(sys.executable)).start()
    print("started", flush=True)
    time.sleep(600)
""")


def test_a_local_server_dies_with_the_process_that_started_it():
    parent = subprocess.Popen([sys.executable, "-c", STAND_IN_SERVER, str(free_port())],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert parent.stdout.readline().strip() == "started"
        (server,) = psutil.Process(parent.pid).children()
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=EXIT_BOUND_SECONDS)
        assert_all_gone([server])
    finally:
        parent.kill()
        parent.wait()


def judge_server_running(base_url: str, runner: Runner) -> None:
    deadline = time.monotonic() + STARTUP_BOUND_SECONDS
    while not is_serving(base_url):
        if runner.process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the judge server did not start:\n{runner.finish()[1]}")
        time.sleep(0.5)


@pytest.mark.parametrize("name, send", [
    ("SIGTERM", lambda pid: os.kill(pid, signal.SIGTERM)),
    ("SIGKILL", lambda pid: os.kill(pid, signal.SIGKILL)),
])
def test_the_judge_server_the_runner_started_never_outlives_it(start_run, tmp_path, name, send):
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    runner = start_run(tmp_path, LOCAL_JUDGE, f"judge.base_url={base_url}")
    judge_server_running(base_url, runner)
    started = runner.descendants()
    assert any("llama_cpp.server" in " ".join(process.cmdline()) for process in started)

    send(runner.process.pid)
    returncode, stderr = runner.finish()

    assert returncode == (143 if name == "SIGTERM" else -signal.SIGKILL), stderr
    assert_all_gone(started)
    assert not is_serving(base_url)
    (row,) = collect_runs(tmp_path)
    assert row["status"] == ("interrupted" if name == "SIGTERM" else "crashed"), row


def test_a_signal_during_a_held_block_is_raised_once_the_block_has_finished():
    from evalbook.interrupts import RunInterrupted, interrupts_raised, signals_held

    # another thread, as papermill's client has, to which the kernel may deliver the signal
    release = threading.Event()
    bystander = threading.Thread(target=release.wait)
    bystander.start()
    finished = []
    try:
        with pytest.raises(RunInterrupted) as raised:
            with interrupts_raised():
                with signals_held():
                    os.kill(os.getpid(), signal.SIGTERM)
                    # the handler has run by the next bytecode; the block still goes on to its end
                    finished.append(sum(range(1000)))
    finally:
        release.set()
        bystander.join()
    assert finished == [499500] and raised.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

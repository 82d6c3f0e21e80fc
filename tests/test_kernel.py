"""Stage kernels talk over local IPC sockets: no TCP, so no unencrypted-traffic warning."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill

from evalbook.kernel import ipc_kernel
import pytest

pytestmark = pytest.mark.slow  # notebook kernels

WARNING = "Kernel is running over TCP without encryption"


def tiny_notebook(folder: Path) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    notebook.cells = [nbformat.v4.new_code_cell("answer = 6 * 7\nprint(answer)")]
    path = folder / "tiny.ipynb"
    nbformat.write(notebook, path)
    return path


def test_an_ipc_kernel_runs_the_notebook_without_the_tcp_warning(tmp_path, capfd):
    source = tiny_notebook(tmp_path)
    papermill.execute_notebook(str(source), str(tmp_path / "tcp.ipynb"), kernel_name="python3",
                               progress_bar=False)
    assert WARNING in capfd.readouterr().err  # what the default transport prints
    with ipc_kernel() as kernel:
        sockets = Path(kernel["config"]["KernelManager"]["ip"]).parent
        papermill.execute_notebook(str(source), str(tmp_path / "ipc.ipynb"), kernel_name="python3",
                                   progress_bar=False, **kernel)
    assert WARNING not in capfd.readouterr().err
    ran = nbformat.read(tmp_path / "ipc.ipynb", 4)
    assert ran.cells[0].outputs[0]["text"] == "42\n"
    assert not sockets.exists()


def test_the_socket_folder_goes_when_the_notebook_fails_and_stays_for_an_interrupted_start():
    for error in (RuntimeError("a cell failed"), KeyboardInterrupt()):
        try:
            with ipc_kernel() as kernel:
                sockets = Path(kernel["config"]["KernelManager"]["ip"]).parent
                assert sockets.is_dir()
                raise error
        except (RuntimeError, KeyboardInterrupt):
            pass
        assert sockets.exists() is isinstance(error, KeyboardInterrupt)
        if sockets.exists():
            sockets.rmdir()


def test_a_finished_notebook_s_kernel_is_shut_down_without_a_sigint(tmp_path, monkeypatch):
    """jupyter_client interrupts a kernel (SIGINT) before asking it to shut down; a kernel still
    leaving its last handler then logs "KeyboardInterrupt caught in kernel". The stage kernels
    are asked to shut down without it."""
    import signal

    from jupyter_client.manager import AsyncKernelManager

    sent = []
    real = AsyncKernelManager._async_signal_kernel

    async def recording(self, signum):
        sent.append(signum)
        await real(self, signum)

    monkeypatch.setattr(AsyncKernelManager, "_async_signal_kernel", recording)
    source = tiny_notebook(tmp_path)
    papermill.execute_notebook(str(source), str(tmp_path / "default.ipynb"), kernel_name="python3",
                               progress_bar=False)
    assert signal.SIGINT in sent  # what the default manager does at shutdown
    sent.clear()
    with ipc_kernel() as kernel:
        papermill.execute_notebook(str(source), str(tmp_path / "stage.ipynb"), kernel_name="python3",
                                   progress_bar=False, **kernel)
    assert signal.SIGINT not in sent


# A cell that runs until the kernel has begun to shut down, then returns: the moment at which a
# kernel asked to shut down mid-cell used to fail to send the cell's reply, with a traceback.
CELL_OUTLASTING_THE_SHUTDOWN_REQUEST = """\
import pathlib, threading, time
pathlib.Path({started!r}).touch()
deadline = time.monotonic() + 30
# the thread that carries the cell's reply ends once the kernel has been asked to shut down
while any(thread.name == "Shell channel" for thread in threading.enumerate()) and time.monotonic() < deadline:
    time.sleep(0.01)
"""


def test_an_interrupted_notebook_s_kernel_stops_without_a_traceback(tmp_path, capfd):
    """Ctrl-C (a KeyboardInterrupt in the runner) while a cell runs: the kernel is stopped at
    once. Asked to shut down instead, it stops its shell stream while the cell goes on, and the
    cell's reply then fails with a traceback on the runner's terminal."""
    import os
    import signal
    import threading
    import time

    started = tmp_path / "cell-started"
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    notebook.cells = [nbformat.v4.new_code_cell(CELL_OUTLASTING_THE_SHUTDOWN_REQUEST.format(started=str(started)))]
    source = tmp_path / "busy.ipynb"
    nbformat.write(notebook, source)

    def interrupt_once_the_cell_runs():
        deadline = time.monotonic() + 120
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    interrupter = threading.Thread(target=interrupt_once_the_cell_runs)
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            with ipc_kernel() as kernel:
                papermill.execute_notebook(str(source), str(tmp_path / "ran.ipynb"), kernel_name="python3",
                                           progress_bar=False, **kernel)
    finally:
        interrupter.join()
    assert started.exists()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ERROR" not in err, err

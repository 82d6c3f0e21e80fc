"""How the runner starts and stops a stage's kernel: over local IPC sockets, without a SIGINT.

- jupyter_client's default transport is TCP on 127.0.0.1, and ipykernel then warns, in every
  stage, that the kernel's traffic is sent unencrypted. A kernel on this machine needs no
  network: Unix domain sockets in a private temporary folder carry the same messages, reach no
  other host, and raise no warning. The folder is removed when the notebook is done.
- Before it asks a kernel to shut down, jupyter_client interrupts it (SIGINT). ipykernel takes
  SIGINT as KeyboardInterrupt only while it handles a message, so a kernel still leaving the
  handler of the last cell's reply logged "KeyboardInterrupt caught in kernel." after some
  stages. StageKernelManager sends no interrupt while it shuts the kernel down.
- A notebook stopped mid-cell (a KeyboardInterrupt: Ctrl-C, or evalbook.interrupts' SIGTERM)
  has its kernel killed at once rather than asked to shut down. Asked, ipykernel closes the
  channel that carries the cell's reply while the cell goes on, and a cell that ends before the
  SIGTERM at half of `shutdown_wait_time` then logs a ZMQError traceback on the runner's
  terminal. The kernel runs in a session of its own (jupyter_client starts it so), so a Ctrl-C in
  the terminal reaches the runner alone, and the kill goes to the kernel's whole process group.
- ipykernel forwards whatever the kernel process writes to its own stdout and stderr file
  descriptors into the notebook. The stages' progress bars write there on purpose, to reach the
  runner's terminal or CI log: StageKernelManager starts the kernel with
  `--IPKernelApp.capture_fd_output=False`, so that they do, and the executed notebook keeps only
  what its cells print.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from jupyter_client.manager import AsyncKernelManager
from traitlets.config import Config

# seconds a kernel has to leave after the shutdown request: SIGTERM at half of it, SIGKILL at the end
SHUTDOWN_WAIT_SECONDS = 2.0


class StageKernelManager(AsyncKernelManager):
    """jupyter_client's kernel manager without the interrupt that precedes a shutdown."""

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        return [*super().format_kernel_cmd(extra_arguments), "--IPKernelApp.capture_fd_output=False"]

    async def _async_interrupt_kernel(self) -> None:
        if self.shutting_down:
            return
        await super()._async_interrupt_kernel()

    async def shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        """Shut the kernel down; at once (SIGKILL) while a KeyboardInterrupt passes, as nbclient
        shuts it down in the `finally` of the notebook that the interrupt stopped."""
        interrupted = isinstance(sys.exc_info()[1], KeyboardInterrupt)
        await super()._async_shutdown_kernel(now=now or interrupted, restart=restart)


@contextmanager
def ipc_kernel() -> Iterator[dict[str, Any]]:
    """papermill.execute_notebook keyword arguments: IPC sockets and StageKernelManager.

    The socket folder is removed when the notebook ends, or fails. An interrupt (SIGINT or
    SIGTERM, a KeyboardInterrupt) can stop the run while the kernel is still starting; that
    kernel binds its sockets after this block and then exits on its own, as its parent is gone.
    Its folder is left in place, so that it does not fail to bind with a traceback.
    """
    folder = Path(tempfile.mkdtemp(prefix="evalbook-kernel-"))
    interrupted = False
    try:
        sockets = {"transport": "ipc", "ip": str(folder / "kernel"), "shutdown_wait_time": SHUTDOWN_WAIT_SECONDS}
        yield {"kernel_manager_class": StageKernelManager, "config": Config({"KernelManager": sockets})}
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if not interrupted:
            shutil.rmtree(folder, ignore_errors=True)

"""How the runner connects to a stage's kernel: over local IPC sockets, not TCP.

jupyter_client's default transport is TCP on 127.0.0.1, and ipykernel then warns, in every
stage, that the kernel's traffic is sent unencrypted. A kernel on this machine needs no network:
Unix domain sockets in a private temporary folder carry the same messages, reach no other host,
and raise no warning. The folder (and the sockets in it) is removed when the notebook is done.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from traitlets.config import Config


@contextmanager
def ipc_kernel() -> Iterator[dict[str, Any]]:
    """papermill.execute_notebook keyword arguments that give the kernel IPC sockets.

    The socket folder is removed when the notebook ends, or fails. An interrupt (SIGINT or
    SIGTERM, a KeyboardInterrupt) can stop the run while the kernel is still starting; that
    kernel binds its sockets after this block and then exits on its own, as its parent is gone.
    Its folder is left in place, so that it does not fail to bind with a traceback.
    """
    folder = Path(tempfile.mkdtemp(prefix="evalbook-kernel-"))
    interrupted = False
    try:
        yield {"config": Config({"KernelManager": {"transport": "ipc", "ip": str(folder / "kernel")}})}
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if not interrupted:
            shutil.rmtree(folder, ignore_errors=True)

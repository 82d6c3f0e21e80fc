"""How the runner connects to a stage's kernel: over local IPC sockets, not TCP.

jupyter_client's default transport is TCP on 127.0.0.1, and ipykernel then warns, in every
stage, that the kernel's traffic is sent unencrypted. A kernel on this machine needs no network:
Unix domain sockets in a private temporary folder carry the same messages, reach no other host,
and raise no warning. The folder (and the sockets in it) is removed when the notebook is done.
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from traitlets.config import Config


@contextmanager
def ipc_kernel() -> Iterator[dict[str, Any]]:
    """papermill.execute_notebook keyword arguments that give the kernel IPC sockets."""
    with tempfile.TemporaryDirectory(prefix="evalbook-kernel-") as folder:
        sockets = str(Path(folder) / "kernel")
        yield {"config": Config({"KernelManager": {"transport": "ipc", "ip": sockets}})}

"""A free port on 127.0.0.1, for the tests that start a server there (evalbook.processes.end_process
stops it)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the OS's choice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


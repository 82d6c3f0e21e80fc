"""Child processes and the servers they run, for the judge's local model server and the service
under test that 00_generate starts: probing a server (loopback, never through a proxy), tying a
child to its parent's life, ending it, and the tail of its log for an error message.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections import deque
from pathlib import Path
from typing import IO, Callable
from urllib.parse import urlsplit

LOG_TAIL_LINES = 20
STOP_GRACE_SECONDS = 10.0


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses, which are never reached through a proxy."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_serving(base_url: str, timeout: float = 2.0) -> bool:
    """True when GET `{base_url}/models` answers HTTP 200 within `timeout` seconds."""
    return answers_ok(f"{base_url.rstrip('/')}/models", timeout)


def answers_ok(url: str, timeout: float = 2.0) -> bool:
    """True when GET `url` answers HTTP 200 within `timeout` seconds."""
    handlers: list[urllib.request.BaseHandler] = []
    if is_loopback(urlsplit(url).hostname or ""):
        # A loopback server is never behind a proxy; an HTTP_PROXY set without NO_PROXY would
        # otherwise send the probe away and make a running local server look down.
        handlers.append(urllib.request.ProxyHandler({}))
    try:
        with urllib.request.build_opener(*handlers).open(url, timeout=timeout) as response:
            status: int = response.status
            return status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A `preexec_fn` that has Linux send SIGTERM to the child when its parent dies.

    So a server outlives no runner, not even one killed with SIGKILL, which runs no clean-up.
    The signal follows the thread that started the child: start the server from a thread that
    lives as long as it should (the main thread, as the runner does).
    """

    def arm() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            os._exit(127)
        if os.getppid() != parent_pid:  # the parent died before the signal was armed
            os._exit(1)

    return arm


def end_process(process: subprocess.Popen[bytes] | None) -> None:
    """Terminate a child process (SIGTERM) and kill it after STOP_GRACE_SECONDS; None or one that
    has exited already is left as it is."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def log_tail(path: Path, log_file: IO[bytes] | None = None) -> str:
    """The last LOG_TAIL_LINES lines of a child's log at `path` (`log_file` is flushed first)."""
    if log_file is not None:
        log_file.flush()
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            lines = deque(handle, maxlen=LOG_TAIL_LINES)
    except OSError as error:
        return f"(log {path} unreadable: {error})"
    return f"last lines of {path}:\n" + "".join(lines)

"""The system under test as a child process of the runner: `generate.service`.

The runner starts `command` (with `{python}` replaced by this interpreter, run from the project
root) before 00_generate, waits until GET `ready_url` answers 200, and stops it after the run,
as it does the local llama.cpp server: its own session, so that a Ctrl-C reaches the runner
first, and a parent-death signal, so that it outlives no runner. Its output goes to a log in
the run folder; a service that exits or is not ready in time is a RuntimeError quoting that log.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from evalbook.processes import answers_ok, die_with_parent, end_process, log_tail

POLL_SECONDS = 0.25


class Service:
    def __init__(self, config: dict[str, Any], root: Path, log_path: Path):
        self.command = [sys.executable if part == "{python}" else part for part in config["command"]]
        self.ready_url = config["ready_url"]
        self.timeout = config["start_timeout_seconds"]
        self.root = root
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def address(self) -> str:
        return urlsplit(self.ready_url).netloc

    def start(self) -> None:
        """Start the service and wait until it is ready; RuntimeError with its log's tail if not."""
        if answers_ok(self.ready_url):
            raise RuntimeError(f"something already answers at {self.ready_url}; stop it (maybe a service "
                               "left from an earlier run), or set generate.service to null to use it as it is")
        self._log = self.log_path.open("wb")
        try:
            self._process = subprocess.Popen(
                self.command, cwd=self.root, stdin=subprocess.DEVNULL, stdout=self._log,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=die_with_parent(os.getpid()) if sys.platform == "linux" else None)
        except OSError as error:
            self.stop()
            raise RuntimeError(f"the service command {self.command[0]} could not start: {error}") from error
        atexit.register(self.stop)
        deadline = time.monotonic() + self.timeout
        while not answers_ok(self.ready_url):
            code = self._process.poll()
            if code is not None:
                raise RuntimeError(f"the service exited with code {code} before it was ready\n{self.log_tail()}")
            if time.monotonic() >= deadline:
                raise RuntimeError(f"the service was not ready at {self.ready_url} after {self.timeout:g} s\n"
                                   f"{self.log_tail()}")
            time.sleep(POLL_SECONDS)

    def stop(self) -> None:
        """Terminate the service (SIGTERM), kill it after a grace period; safe to call twice."""
        atexit.unregister(self.stop)
        process, self._process = self._process, None
        end_process(process)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self) -> str:
        return log_tail(self.log_path, self._log)

"""SIGINT and SIGTERM during a run: raised as RunInterrupted where the runner can stop in order,
and held back while something must be written whole.

A run stops in order on either signal: the stage's kernel and the servers are stopped, run.json
says "interrupted" and names the stage, and RUNNING is removed (evalbook.runner). The first
signal ignores any further ones, so that the orderly stop is not itself cut short; SIGKILL
remains for a hung stop.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


class RunInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the run; the message says where, and what was kept.

    A KeyboardInterrupt, so that code catching Exception (papermill, nbclient, asyncio) lets it
    through, as it would Ctrl-C.
    """

    def __init__(self, signum: int, message: str = ""):
        self.signum = signum
        super().__init__(message or f"interrupted by {self.signal_name}")

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """128 + the signal number, the shell's code for a process ended by that signal."""
        return 128 + self.signum


INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@dataclass
class _SignalState:
    """Whether a block holds SIGINT/SIGTERM back, and the first signal held; process-wide, as
    signal handlers are. Masking the signal would not do: the kernel may deliver it to another
    thread (zmq's, asyncio's), whose handler flag Python still runs in the main thread."""

    holding: bool = False
    pending: int | None = None


_SIGNALS = _SignalState()


def _raise_interrupted(signum: int) -> None:
    for each in INTERRUPTS:
        signal.signal(each, signal.SIG_IGN)
    raise RunInterrupted(signum)


def _on_interrupt(signum: int, frame: Any) -> None:
    if _SIGNALS.holding:
        _SIGNALS.pending = _SIGNALS.pending or signum
        return
    _raise_interrupted(signum)


@contextmanager
def interrupts_raised() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise RunInterrupted (in the main thread only, where
    Python runs signal handlers). The first also ignores any further ones, so that the orderly
    stop that follows it is not itself cut short; SIGKILL remains for a hung stop."""
    if not _in_main_thread():
        yield
        return
    previous = {each: signal.getsignal(each) for each in INTERRUPTS}
    for each in INTERRUPTS:
        signal.signal(each, _on_interrupt)
    try:
        yield
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends, so that what it writes is written whole; a
    signal that arrived meanwhile is raised as the block ends (unless an error already is)."""
    if _SIGNALS.holding:
        yield
        return
    _SIGNALS.holding = True
    try:
        yield
    finally:
        _SIGNALS.holding = False
        pending, _SIGNALS.pending = _SIGNALS.pending, None
        if pending is not None and sys.exc_info()[0] is None:
            _raise_interrupted(pending)

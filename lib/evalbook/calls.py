"""What every outgoing call of evalbook shares: the judge's and the generate stage's clients.

- `run_in_worker(make_coroutine)`: runs a coroutine to its end on an event loop of its own, in a
  worker thread, and returns its result (or raises its error) in the caller's thread. The same
  code therefore works in a script, in Jupyter and in Papermill, where the kernel's loop is
  already running, without patching the user's loop.
- `retry_after_seconds` and `backoff_seconds`: how long to wait before a retry. The server's
  `Retry-After` (seconds or an HTTP date) when it sends one, else full jitter on an exponential
  ceiling, both capped at MAX_BACKOFF_SECONDS.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any, Awaitable, Callable, TypeVar

MAX_BACKOFF_SECONDS = 60.0

T = TypeVar("T")


def run_in_worker(make_coroutine: Callable[[], Awaitable[T]], name: str) -> T:
    """`asyncio.run(make_coroutine())` in a daemon thread named `name`; blocks until it ends."""
    outcome: dict[str, Any] = {}

    def worker() -> None:
        try:
            outcome["result"] = asyncio.run(make_coroutine())
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=worker, name=name, daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds to wait from a `Retry-After` header (seconds or an HTTP date), if any."""
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def backoff_seconds(attempt: int, base: float, retry_after: float | None) -> float:
    """Retry-After when the server sends it, else full jitter on an exponential ceiling."""
    if retry_after is not None:
        return min(retry_after, MAX_BACKOFF_SECONDS)
    return random.uniform(0, min(MAX_BACKOFF_SECONDS, base * 2 ** attempt))

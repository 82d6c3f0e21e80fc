"""The call machinery the judge and the generate stage share: evalbook.calls."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import httpx
import pytest

from evalbook import calls


def test_retry_after_in_seconds_or_as_an_http_date():
    assert calls.retry_after_seconds(httpx.Headers({"Retry-After": "2"})) == 2.0
    assert calls.retry_after_seconds(httpx.Headers({"Retry-After": "1.5"})) == 1.5
    assert calls.retry_after_seconds(httpx.Headers({})) is None
    assert calls.retry_after_seconds(httpx.Headers({"Retry-After": "soon"})) is None
    later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25 <= calls.retry_after_seconds(httpx.Headers({"Retry-After": later})) <= 31


def test_backoff_is_full_jitter_under_an_exponential_ceiling():
    for attempt in range(6):
        for _ in range(50):
            wait = calls.backoff_seconds(attempt, 0.5, None)
            assert 0 <= wait <= min(calls.MAX_BACKOFF_SECONDS, 0.5 * 2 ** attempt)
    assert calls.backoff_seconds(0, 0.5, 2.0) == 2.0
    assert calls.backoff_seconds(0, 0.5, 1e6) == calls.MAX_BACKOFF_SECONDS


def test_a_coroutine_runs_to_its_end_even_where_a_loop_is_already_running():
    # Jupyter and Papermill call the stages from inside the kernel's running event loop, where
    # asyncio.run() itself refuses to start.
    async def answer() -> tuple[int, str]:
        await asyncio.sleep(0)
        return 42, threading.current_thread().name

    async def as_a_notebook_cell_would():
        pending = answer()
        with pytest.raises(RuntimeError):
            asyncio.run(pending)
        pending.close()
        return calls.run_in_worker(answer, "evalbook-test")

    assert asyncio.run(as_a_notebook_cell_would()) == (42, "evalbook-test")


def test_the_coroutine_s_error_is_raised_in_the_caller_s_thread():
    async def fails():
        raise KeyError("lost")

    with pytest.raises(KeyError, match="lost"):
        calls.run_in_worker(fails, "evalbook-test")

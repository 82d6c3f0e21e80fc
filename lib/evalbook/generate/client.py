"""Generation calls: one HTTP request per example, through the judge's call machinery.

`GenerateClient.run(items)` is synchronous and works in Jupyter too (evalbook.calls.run_in_worker).
An `asyncio.Semaphore` bounds the requests in flight to `generate.concurrency`; each waits at
most `timeout_seconds`.

Retries: 429, 5xx, timeouts, lost connections and 2xx bodies that are not JSON are retried up to
`max_retries` times, with `Retry-After` honoured, else full-jitter exponential backoff from
`backoff_seconds`. Any other status is final. When the retries run out, the row is a failure
with its reason: its answer is missing, never invented.

Cache: each 2xx JSON response is stored as it arrives, under the endpoint's key for the request
(evalbook.generate.settings), so a rerun, or a run resumed after the server died, asks only for
the rows that have no stored response. Errors are never stored. The response is stored whole,
before the mapping reads it, so a corrected mapping needs no call.

No header value (a secret) appears in any reason or sample: each is replaced by `[redacted]`.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from evalbook.calls import backoff_seconds, retry_after_seconds, run_in_worker
from evalbook.generate.mapping import MappingError
from evalbook.generate.settings import Endpoint, Item
from evalbook.judge.cache import JudgeCache

REDACTED = "[redacted]"
SHOWN_BODY_CHARACTERS = 200


@dataclass(frozen=True)
class CallSettings:
    concurrency: int
    timeout_seconds: float
    max_retries: int
    backoff_seconds: float


@dataclass
class Generation:
    """One example's outcome: its answer and what came with it, or why there is none."""

    id: str
    status: str = "ok"  # ok, or failed
    answer: str | None = None
    retrieved_ids: list[str] | None = None
    retrieved_contexts: list[str] | None = None
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float | None = None  # of the call that gave the response (for a cached one, when it was made)
    cached: bool = False
    redacted: bool = False  # a header's value (a secret) was found in the response and replaced
    attempts: int = 0
    failure: str | None = None  # the kind of failure, for counting: "HTTP 503", "timed out", ...
    error: str | None = None  # the failure in full


@dataclass
class CallStats:
    calls: int = 0
    cache_hits: int = 0
    retries: int = 0


@dataclass
class _Attempt:
    document: Any = None
    failure: str | None = None
    error: str | None = None
    wait: float | None = None  # before a retry; None: a retry cannot help
    latency_ms: float | None = None


class GenerateClient:
    def __init__(self, endpoint: Endpoint, settings: CallSettings, cache: JudgeCache, http_transport=None):
        self.endpoint = endpoint
        self.settings = settings
        self.cache = cache
        self.http_transport = http_transport  # tests replace the HTTP transport here
        self.stats = CallStats()
        self.headers = endpoint.header_values()
        self.secrets = [value for value in self.headers.values() if value]

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
            bare = secret.split(" ", 1)[-1]  # the variable's own value, without its prefix
            if bare:
                text = text.replace(bare, REDACTED)
        return text

    def run(self, items: Sequence[Item],
            on_done: Callable[[Generation], None] | None = None) -> list[Generation]:
        """Every item's Generation, in order (cache first); blocks until all are done."""
        return run_in_worker(lambda: self._run_all(list(items), on_done), "evalbook-generate")

    def cached(self, item: Item) -> bool:
        return self.cache.get(self.endpoint.key(self.endpoint.render(item))) is not None

    async def _run_all(self, items: list[Item], on_done) -> list[Generation]:
        import httpx

        limit = asyncio.Semaphore(self.settings.concurrency)
        # A loopback service is never behind a proxy: HTTP_PROXY without NO_PROXY must not reroute it.
        async with httpx.AsyncClient(transport=self.http_transport, timeout=self.settings.timeout_seconds,
                                     trust_env=not self.endpoint.loopback) as client:
            async def one(item: Item) -> Generation:
                async with limit:
                    generation = await self._generate(client, item)
                if on_done is not None:
                    on_done(generation)
                return generation

            return list(await asyncio.gather(*(one(item) for item in items)))

    async def _generate(self, client, item: Item) -> Generation:
        generation = Generation(id=item.id)
        body = self.endpoint.render(item)
        key = self.endpoint.key(body)
        entry = self.cache.get(key)
        if entry is not None:
            self.stats.cache_hits += 1
            generation.cached = True
            return self._read(generation, entry["document"], entry["latency_ms"])
        attempt = _Attempt()
        for number in range(self.settings.max_retries + 1):
            generation.attempts = number + 1
            attempt = await self._attempt(client, body)
            if attempt.failure is None or attempt.wait is None or number == self.settings.max_retries:
                break
            self.stats.retries += 1
            await asyncio.sleep(backoff_seconds(number, self.settings.backoff_seconds, attempt.wait or None))
        if attempt.failure is not None:
            return self._failed(generation, attempt.failure, attempt.error)
        self.cache.put(key, {"document": attempt.document, "latency_ms": attempt.latency_ms})
        return self._read(generation, attempt.document, attempt.latency_ms)

    async def _attempt(self, client, body: Any) -> _Attempt:
        import httpx

        self.stats.calls += 1
        started = time.perf_counter()
        try:
            response = await client.request(self.endpoint.method, self.endpoint.url, json=body,
                                            headers=self.headers)
        except httpx.TimeoutException:
            return _Attempt(failure="timed out", wait=0.0,
                            error=f"no response within {self.settings.timeout_seconds} s")
        except httpx.TransportError as error:
            return _Attempt(failure="connection failed", wait=0.0,
                            error=f"connection failed: {type(error).__name__}: {error}")
        latency_ms = (time.perf_counter() - started) * 1000
        status = response.status_code
        if status == 429 or status >= 500:
            return _Attempt(failure=f"HTTP {status}", error=f"HTTP {status}: {self._shown(response)}",
                            wait=retry_after_seconds(response.headers) or 0.0)
        if not 200 <= status < 300:
            return _Attempt(failure=f"HTTP {status}", error=f"HTTP {status}: {self._shown(response)}")
        try:
            document = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _Attempt(failure="not JSON", wait=0.0,
                            error=f"HTTP {status}, but the body is not JSON: {self._shown(response)}")
        return _Attempt(document=document, latency_ms=latency_ms)

    def _shown(self, response) -> str:
        text = response.text
        return text if len(text) <= SHOWN_BODY_CHARACTERS else text[:SHOWN_BODY_CHARACTERS] + " ..."

    def _read(self, generation: Generation, document: Any, latency_ms: float | None) -> Generation:
        generation.latency_ms = latency_ms
        try:
            values = self.endpoint.mapping.apply(document)
        except MappingError as error:
            return self._failed(generation, "response mapping", str(error))
        generation.answer, generation.model = self._clean(generation, values["answer"], values["model"])
        generation.prompt_tokens = values["prompt_tokens"]
        generation.completion_tokens = values["completion_tokens"]
        ids, contexts = values["retrieved_ids"], values["retrieved_contexts"]
        generation.retrieved_ids = None if ids is None else self._clean(generation, *ids)
        generation.retrieved_contexts = None if contexts is None else self._clean(generation, *contexts)
        return generation

    def _clean(self, generation: Generation, *texts: str | None) -> list[str | None]:
        """`texts` with any header value (a secret the service echoed) redacted; marks the row."""
        cleaned = [None if text is None else self.redact(text) for text in texts]
        generation.redacted = generation.redacted or cleaned != list(texts)
        return cleaned

    def _failed(self, generation: Generation, failure: str, error: str | None) -> Generation:
        generation.status, generation.failure = "failed", failure
        generation.error = self.redact(error or failure)
        return generation

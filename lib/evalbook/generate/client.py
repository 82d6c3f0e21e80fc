"""Generation calls: one HTTP request per example, through the judge's call machinery.

`GenerateClient.run(items)` is synchronous and works in Jupyter too (evalbook.calls.run_in_worker).
An `asyncio.Semaphore` bounds the requests in flight to `generate.concurrency`; each waits at
most `timeout_seconds`.

Retries: 429, 5xx, timeouts, lost connections and 2xx bodies that are not JSON are retried up to
`max_retries` times, with `Retry-After` honoured, else full-jitter exponential backoff from
`backoff_seconds`. Any other status is final. When the retries run out, the row is a failure
with its reason: its answer is missing, never invented.

Cache: each 2xx JSON response that the mapping reads is stored as it arrives, under the
endpoint's key for the request (evalbook.generate.settings), so a rerun, or a run resumed after
the server died, asks only for the rows that have no stored response. Errors are never stored,
and neither is a response the mapping cannot read: a service that answered with the wrong
shape is asked again on the rerun, once it is fixed (a corrected mapping asks again too).

No secret (a header's value, or anything else the profile reads from the environment) appears
in any reason, sample, table or cache entry: the response passes through the run's Redactor
before it is stored or read, each occurrence becomes `[redacted]`, and the row is marked. A
cache entry that still holds a secret (written before redaction) is dropped on read, counted in
`CallStats.cache_dropped`, and asked again.
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
from evalbook.replycache import ReplyCache
from evalbook.redaction import Redactor, header_secrets

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
    cache_dropped: int = 0  # cache entries dropped on read because they held a secret


@dataclass
class _Attempt:
    document: Any = None  # redacted
    redacted: bool = False  # the response held a secret
    failure: str | None = None
    error: str | None = None
    wait: float | None = None  # before a retry; None: a retry cannot help
    latency_ms: float | None = None


class GenerateClient:
    def __init__(self, endpoint: Endpoint, settings: CallSettings, cache: ReplyCache, http_transport=None,
                 redactor: Redactor | None = None):
        self.endpoint = endpoint
        self.settings = settings
        self.cache = cache
        self.http_transport = http_transport  # tests replace the HTTP transport here
        self.stats = CallStats()
        self.headers = endpoint.header_values()
        # the endpoint's own header values always, whatever else the caller's redactor covers
        own = [secret for header in endpoint.headers
               for secret in header_secrets(self.headers[header.name][len(header.prefix):], header.prefix)]
        self.redactor = Redactor([*own, *(redactor.secrets if redactor is not None else ())])

    def redact(self, text: str) -> str:
        return self.redactor.text(text)

    def run(self, items: Sequence[Item],
            on_done: Callable[[Generation], None] | None = None) -> list[Generation]:
        """Every item's Generation, in order (cache first); blocks until all are done."""
        return run_in_worker(lambda: self._run_all(list(items), on_done), "evalbook-generate")

    def cached(self, item: Item) -> bool:
        return self._entry(self.endpoint.key(self.endpoint.render(item))) is not None

    def _entry(self, key: str) -> dict[str, Any] | None:
        """The stored response under `key`; one that holds a secret is dropped and counted."""
        entry = self.cache.get(key)
        if entry is not None and self.redactor.holds_secret(entry):
            self.cache.delete(key)
            self.stats.cache_dropped += 1
            return None
        return entry

    async def _run_all(self, items: list[Item], on_done) -> list[Generation]:
        # slow to import: only a stage that calls a model pays it
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
        entry = self._entry(key)
        if entry is not None:
            self.stats.cache_hits += 1
            generation.cached = True
            generation.redacted = bool(entry.get("redacted"))
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
        generation.redacted = attempt.redacted
        self._read(generation, attempt.document, attempt.latency_ms)
        if generation.status == "ok":
            self.cache.put(key, {"document": attempt.document, "latency_ms": attempt.latency_ms,
                                 "redacted": attempt.redacted})
        return generation

    async def _attempt(self, client, body: Any) -> _Attempt:
        # slow to import: only a stage that calls a model pays it
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
        redacted = self.redactor.document(document)
        return _Attempt(document=redacted, redacted=redacted != document, latency_ms=latency_ms)

    def _shown(self, response) -> str:
        """The start of a response's body, redacted before it is cut, so that a cut never
        leaves the start of a secret."""
        text = self.redact(response.text)
        return text if len(text) <= SHOWN_BODY_CHARACTERS else text[:SHOWN_BODY_CHARACTERS] + " ..."

    def _read(self, generation: Generation, document: Any, latency_ms: float | None) -> Generation:
        generation.latency_ms = latency_ms
        try:
            values = self.endpoint.mapping.apply(document)
        except MappingError as error:
            return self._failed(generation, "response mapping", str(error))
        generation.answer, generation.model = values["answer"], values["model"]
        generation.prompt_tokens = values["prompt_tokens"]
        generation.completion_tokens = values["completion_tokens"]
        generation.retrieved_ids, generation.retrieved_contexts = values["retrieved_ids"], values["retrieved_contexts"]
        return generation

    def _failed(self, generation: Generation, failure: str, error: str | None) -> Generation:
        generation.status, generation.failure = "failed", failure
        generation.error = self.redact(error or failure)
        return generation

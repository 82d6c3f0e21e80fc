"""Judge calls through the `openai` client: cache, bounded concurrency, retries, token counts.

`JudgeClient.run(requests)` is synchronous: it runs its own event loop in a worker thread
(evalbook.calls.run_in_worker), so it works in Jupyter too. Inside, an `asyncio.Semaphore`
bounds concurrency.

Retries: 429, 5xx, timeouts, lost connections and malformed HTTP 200 replies (a body that is
not JSON, or not a chat completion: no `choices`, no message) are retried with exponential
backoff and full jitter, honouring `Retry-After`; when they run out, the reply carries the error
and the metric records the example as unscored with it. A reply that does not parse or validate
against the request's schema is asked for again at once, up to `max_retries` times; the last one
is kept for the record (unscored, with the reason and the raw text).

Only replies that parse are cached, each as it arrives, so a run that loses the server keeps
every finished judgment, and a rerun asks again for exactly what was left unscored by an error
or an unparseable reply and reuses the rest. A cached entry that does not parse (left by an
older version) is dropped and asked again.

Secrets: every reply's text, error and fingerprint passes through the run's Redactor (the
judge's API key, and whatever else the profile reads from the environment) before it is kept,
cached or shown, so a server that echoes the key, in an error body or in its content, leaves
`[redacted]` (counted in `RunStats.redacted`). A cache entry that still holds a secret (written
before redaction) is dropped on read, counted in `RunStats.cache_dropped`, and asked again.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence
from urllib.parse import urlsplit

from evalbook.errors import EvalbookError
from evalbook.calls import backoff_seconds, retry_after_seconds, run_in_worker
from evalbook.processes import is_loopback
from evalbook.replycache import ReplyCache, cache_key
from evalbook.judge.parsing import Unparsed, Unreadable, parse_reply
from evalbook.redaction import Redactor, profile_secrets

STRUCTURED_MODES = ("json_schema", "json_object_schema", "json_instructions")
NO_KEY = "no-key"  # local servers ignore the key, but the openai client requires a value
SHOWN_ERROR_CHARACTERS = 320  # of a failed call's error, as the unscored reason shows it


class JudgeConfigError(EvalbookError, RuntimeError):
    """A judge setting the server rejects, explained (for example an unsupported response_format)."""


class MalformedReply(EvalbookError, ValueError):
    """An HTTP 200 reply that is not a chat completion; the message says what is wrong."""


@dataclass(frozen=True)
class JudgeSettings:
    base_url: str
    model: str
    api_key_env: str | None
    temperature: float
    seed: int | None
    max_tokens: int
    structured_output: str
    timeout_seconds: float
    max_retries: int
    concurrency: int
    backoff_seconds: float = 1.0

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).netloc

    @property
    def loopback(self) -> bool:
        return is_loopback(urlsplit(self.base_url).hostname or "")

    def api_key(self) -> str:
        """The key from the environment variable the profile names; never from a parameter."""
        if self.api_key_env is None:
            return NO_KEY
        key = os.environ.get(self.api_key_env)
        if not key:
            raise JudgeConfigError(f"the judge needs an API key in the environment variable "
                                   f"{self.api_key_env}, which is not set")
        return key

    def sampling(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "seed": self.seed, "max_tokens": self.max_tokens,
                "structured_output": self.structured_output}


def judge_key_parts(settings: JudgeSettings, template_sha256: str, metric: str, metric_version: int,
                    repeat: int = 0) -> dict[str, Any]:
    """What keys a judge request besides its prompt: the judge, its sampling, the template and the
    metric; a repeat after the first is its own entry, and the first keeps a one-repeat run's key."""
    parts = {"model": settings.model, "base_url": settings.base_url, "template_sha256": template_sha256,
             "sampling": settings.sampling(), "metric": metric, "metric_version": metric_version}
    return {**parts, "repeat": repeat} if repeat else parts


@dataclass(frozen=True)
class JudgeRequest:
    metric: str
    example_id: str
    prompt: str
    schema: dict[str, Any]
    key_parts: dict[str, Any]
    # which of judge.repeats this is: it is sent with the seed + repeat, so that each repeat is a
    # sample of its own where the temperature allows one
    repeat: int = 0

    @property
    def key(self) -> str:
        return cache_key({**self.key_parts, "prompt": self.prompt})


@dataclass
class JudgeReply:
    request: JudgeRequest
    text: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    system_fingerprint: str | None = None
    cached: bool = False
    attempts: int = 0
    error: str | None = None


@dataclass
class MetricStats:
    calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    replies_without_usage: int = 0


@dataclass
class RunStats:
    per_metric: dict[str, MetricStats] = field(default_factory=dict)
    system_fingerprints: set[str] = field(default_factory=set)
    redacted: int = 0  # replies (or their errors) that held a secret, replaced by [redacted]
    cache_dropped: int = 0  # cache entries dropped on read because they held a secret

    def metric(self, name: str) -> MetricStats:
        return self.per_metric.setdefault(name, MetricStats())


def response_format(mode: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The `response_format` for a structured-output mode; None means instructions only."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "judgment", "schema": schema, "strict": True}}
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    if mode == "json_instructions":
        return None
    raise JudgeConfigError(f"structured_output must be one of {STRUCTURED_MODES}, got {mode!r}")


def completion_message(response: Any) -> tuple[str | None, str | None]:
    """The message text and finish reason of a chat completion; MalformedReply when it is none.

    The openai client builds its objects without validating them, so a 200 with any JSON
    arrives here: a list, an object without `choices`, a choice without a message.
    """
    # slow to import: only a stage that calls a model pays it
    from openai.types.chat import ChatCompletion

    if isinstance(response, str):  # what the openai client returns for a body not typed as JSON
        raise MalformedReply("the body is not JSON")
    if not isinstance(response, ChatCompletion):
        raise MalformedReply("the body is not a JSON object")
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise MalformedReply("no choices in the body")
    message = getattr(choices[0], "message", None)
    text = getattr(message, "content", None)
    if message is None:
        raise MalformedReply("no message in the first choice")
    if text is not None and not isinstance(text, str):
        raise MalformedReply(f"the message content is a {type(text).__name__}, not text")
    finish_reason = getattr(choices[0], "finish_reason", None)
    return text, finish_reason if isinstance(finish_reason, str) else None


def token_count(usage: Any, name: str) -> int:
    value = getattr(usage, name, None)
    return value if isinstance(value, int) else 0


def _mentions_response_format(error: Any) -> bool:
    text = f"{getattr(error, 'message', '')} {getattr(error, 'body', '')}".lower()
    return "response_format" in text or "json_schema" in text


class JudgeClient:
    def __init__(self, settings: JudgeSettings, cache: ReplyCache, http_transport=None,
                 redactor: Redactor | None = None):
        if settings.structured_output not in STRUCTURED_MODES:
            raise JudgeConfigError(f"structured_output must be one of {STRUCTURED_MODES}, "
                                   f"got {settings.structured_output!r}")
        self.settings = settings
        self.cache = cache
        self.http_transport = http_transport  # tests replace the HTTP transport here
        self.stats = RunStats()
        # the judge's own key always, whatever else the caller's redactor covers
        own = profile_secrets({"judge": {"api_key_env": settings.api_key_env}})
        self.redactor = Redactor([*own, *(redactor.secrets if redactor is not None else ())])

    def run(self, requests: Sequence[JudgeRequest],
            on_reply: Callable[[JudgeReply], None] | None = None) -> list[JudgeReply]:
        """Answer every request (cache first), in order; blocks until all are done."""
        return run_in_worker(lambda: self._run_all(list(requests), on_reply), "evalbook-judge")

    async def _run_all(self, requests: list[JudgeRequest], on_reply) -> list[JudgeReply]:
        # slow to import: only a stage that calls a model pays it
        import httpx
        from openai import AsyncOpenAI

        # A loopback judge is never behind a proxy: HTTP_PROXY without NO_PROXY must not reroute it.
        http_client = httpx.AsyncClient(transport=self.http_transport,
                                        trust_env=not self.settings.loopback)
        client = AsyncOpenAI(base_url=self.settings.base_url, api_key=self.settings.api_key(),
                             timeout=self.settings.timeout_seconds, max_retries=0, http_client=http_client)
        limit = asyncio.Semaphore(self.settings.concurrency)

        async def one(request: JudgeRequest) -> JudgeReply:
            async with limit:
                reply = await self._answer(client, request)
            if on_reply is not None:
                on_reply(reply)
            return reply

        try:
            return list(await asyncio.gather(*(one(r) for r in requests)))
        finally:
            await client.close()

    async def _answer(self, client, request: JudgeRequest) -> JudgeReply:
        stats = self.stats.metric(request.metric)
        cached = self._cached_reply(request)
        if cached is not None:
            stats.cache_hits += 1
            if cached.system_fingerprint:
                self.stats.system_fingerprints.add(cached.system_fingerprint)
            return cached
        reply = JudgeReply(request=request)
        for attempt in range(self.settings.max_retries + 1):
            reply.attempts = attempt + 1
            wait = await self._attempt(client, request, reply, stats)
            if reply.error is None and self._parses(reply):
                break
            if wait is None or attempt == self.settings.max_retries:
                break
            if reply.error is not None:  # a transport error waits; an unparseable reply asks again at once
                await asyncio.sleep(backoff_seconds(attempt, self.settings.backoff_seconds, wait or None))
        self._redact(reply)
        if reply.system_fingerprint:
            self.stats.system_fingerprints.add(reply.system_fingerprint)
        if reply.error is not None:
            stats.errors += 1
        elif self._parses(reply):
            self.cache.put(request.key, {
                "text": reply.text, "finish_reason": reply.finish_reason,
                "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                "system_fingerprint": reply.system_fingerprint})
        return reply

    def _redact(self, reply: JudgeReply) -> None:
        """Replace any secret the server echoed in the reply's text, error or fingerprint."""
        kept = (reply.text, reply.error, reply.system_fingerprint)
        reply.text, reply.error, reply.system_fingerprint = (self.redactor.optional(value) for value in kept)
        if (reply.text, reply.error, reply.system_fingerprint) != kept:
            self.stats.redacted += 1
        # cut after redaction, so that a cut never leaves the start of a secret
        if reply.error is not None and len(reply.error) > SHOWN_ERROR_CHARACTERS:
            reply.error = reply.error[:SHOWN_ERROR_CHARACTERS] + " ..."

    def cached(self, request: JudgeRequest) -> bool:
        """True when the cache answers `request`, so that judging it makes no call."""
        return self._cached_reply(request) is not None

    def _cached_reply(self, request: JudgeRequest) -> JudgeReply | None:
        """The cached reply to `request` when it parses; an entry that does not is removed."""
        entry = self.cache.get(request.key)
        if entry is None:
            return None
        if self.redactor.holds_secret(entry):
            self.cache.delete(request.key)
            self.stats.cache_dropped += 1
            return None
        reply = JudgeReply(request=request, cached=True, **entry)
        if self._parses(reply):
            return reply
        self.cache.delete(request.key)
        return None

    def _parses(self, reply: JudgeReply) -> bool:
        """True for a reply that is final: it parses, or it is unreadable (a placeholder, which a
        retry or a rerun would only ask for again, to get the same copy)."""
        try:
            parse_reply(reply.text, reply.request.schema, reply.finish_reason)
        except Unreadable:
            return True
        except Unparsed:
            return False
        return True

    async def _attempt(self, client, request: JudgeRequest, reply: JudgeReply,
                       stats: MetricStats) -> float | None:
        """One call. Fills `reply`; returns how long to wait before a retry (0: default backoff),
        or None when retrying cannot help."""
        # slow to import: only a stage that calls a model pays it
        import openai

        settings = self.settings
        arguments: dict[str, Any] = {
            "model": settings.model, "messages": [{"role": "user", "content": request.prompt}],
            "temperature": settings.temperature, "max_tokens": settings.max_tokens}
        if settings.seed is not None:
            arguments["seed"] = settings.seed + request.repeat
        fmt = response_format(settings.structured_output, request.schema)
        if fmt is not None:
            arguments["response_format"] = fmt
        try:
            stats.calls += 1
            response = await client.chat.completions.create(**arguments)
            reply.text, reply.finish_reason = completion_message(response)
        except (json.JSONDecodeError, MalformedReply) as error:
            detail = "the body is not JSON" if isinstance(error, json.JSONDecodeError) else str(error)
            reply.error = f"malformed reply (HTTP 200): {detail}"
            return 0.0
        except openai.APIStatusError as error:
            status = error.status_code
            if settings.structured_output == "json_schema" and status in (400, 422, 500) \
                    and _mentions_response_format(error):
                raise JudgeConfigError(
                    f"the judge server at {settings.host} rejected response_format json_schema "
                    f"(HTTP {status}); set judge.structured_output to json_object_schema or "
                    f"json_instructions in the profile") from error
            reply.error = f"HTTP {status}: {getattr(error, 'message', error)}"
            if status == 429 or status >= 500:
                return retry_after_seconds(error.response.headers) or 0.0
            return None
        except openai.APITimeoutError:
            reply.error = f"timed out after {settings.timeout_seconds} s"
            return 0.0
        except openai.APIConnectionError as error:
            reply.error = f"connection failed: {error}"
            return 0.0
        reply.error = None
        usage = getattr(response, "usage", None)
        if usage is None:
            stats.replies_without_usage += 1
        reply.prompt_tokens = token_count(usage, "prompt_tokens")
        reply.completion_tokens = token_count(usage, "completion_tokens")
        stats.prompt_tokens += reply.prompt_tokens
        stats.completion_tokens += reply.completion_tokens
        reply.system_fingerprint = getattr(response, "system_fingerprint", None)
        return 0.0

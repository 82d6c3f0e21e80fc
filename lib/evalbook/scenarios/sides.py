"""The two sides of a conversation on the wire: the simulated user and the system under test.

- **The simulator** (`simulate:` in the profile) is an OpenAI-compatible chat endpoint, pinned
  apart from the judge, and called through the judge's client (evalbook.judge.client): the
  same retries on 429, 5xx and lost connections, the same redaction, the same cache file. Each
  call is sent with its conversation's derived seed, plus 1 for the one retry of an unusable
  reply. Its cache key holds the model, the base URL, the sampling, the prompt's sha256, the
  scenario, the repeat, the seed, the attempt and the whole prompt (so the conversation so far).
  A reply is cached whether or not it is the JSON asked for: the loop reads it, and a rerun
  then ends the conversation the same way, byte for byte, without a call.
- **The system under test** is `generate:`'s endpoint (evalbook.generate.settings), called
  through the generate stage's client. The openai kind is sent the whole conversation each
  turn; the http kind its body template, with `{question}` the user's latest message and
  `{session_id}` one per conversation and run (`<scenario>-<repeat>-<run token>`), so that a
  service keeping sessions never mixes two runs. Its cache key holds the endpoint, the
  scenario, the repeat, the seed and the conversation so far, not the session id: a rerun makes
  no call, and a resumed conversation reuses its finished turns (a service that keeps sessions
  then sees only the turns asked in this run; docs/scenarios.md says so).

`cached_only=True` answers from the cache alone and raises NotCached at the first call that
would go out: the pre-flight estimate replays each conversation that way to count what is left.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from evalbook.errors import EvalbookError
from evalbook.generate.client import CallSettings, GenerateClient
from evalbook.generate.settings import Endpoint, Item, endpoint_from
from evalbook.judge.client import JudgeClient, JudgeReply, JudgeRequest, JudgeSettings
from evalbook.prompts import PromptTemplate, load_template
from evalbook.redaction import Redactor
from evalbook.replycache import ReplyCache
from evalbook.scenarios.conversation import CallFailed
from evalbook.scenarios.simulator import REPLY_SCHEMA, simulator_prompt
from evalbook.scenarios.spec import Scenario

PROMPT_NAME = re.compile(r"(?P<name>[a-z][a-z0-9_-]*)-v(?P<version>[0-9]+)")  # whole names only (fullmatch)


class NotCached(EvalbookError, LookupError):
    """A call that the cache cannot answer, raised only when answering from the cache alone."""


class SidesConfigError(EvalbookError, ValueError):
    """A `simulate:` or `scenarios:` setting that cannot be used, naming its key."""


def prompt_template(name: str) -> PromptTemplate:
    match = PROMPT_NAME.fullmatch(name)
    if match is None:
        raise SidesConfigError(f"simulate.prompt {name!r} must read <name>-v<N>, e.g. simulator-v1")
    return load_template(match["name"], int(match["version"]), package="evalbook.scenarios")


def simulator_settings(config: dict[str, Any]) -> JudgeSettings:
    """The simulator's pins as the judge client's settings; the seed is set per conversation."""
    return JudgeSettings(base_url=config["base_url"], model=config["model"], api_key_env=config["api_key_env"],
                         temperature=config["temperature"], seed=config["seed"], max_tokens=config["max_tokens"],
                         structured_output=config["structured_output"], timeout_seconds=config["timeout_seconds"],
                         max_retries=config["max_retries"], concurrency=1,
                         backoff_seconds=config["backoff_seconds"])


class _EveryReplyKept(JudgeClient):
    """The judge client, keeping (and caching) every reply that arrived: whether it is the
    simulator's JSON is the conversation loop's to say, and it asks once more by itself."""

    def _parses(self, reply: JudgeReply) -> bool:
        return True


@dataclass
class SideStats:
    calls: int = 0  # requests sent, retries included
    cache_hits: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def timed_out(error: str | None) -> bool:
    return error is not None and error.startswith("timed out")


class Simulator:
    """`simulate:` as the conversation loop's `simulate` side, one conversation at a time."""

    def __init__(self, config: dict[str, Any], cache: ReplyCache, http_transport=None,
                 redactor: Redactor | None = None):
        self.config, self.cache, self.http_transport, self.redactor = config, cache, http_transport, redactor
        self.settings = simulator_settings(config)
        self.template = prompt_template(config["prompt"])
        self.stats = SideStats()

    def describe(self) -> dict[str, Any]:
        """What the simulator is pinned to, for the report (no URL path or key: the host only)."""
        return {"model": self.settings.model, "base_url_host": self.settings.host,
                "temperature": self.settings.temperature, "seed": self.settings.seed,
                "max_tokens": self.settings.max_tokens, "structured_output": self.settings.structured_output,
                "prompt": {"id": self.template.id, "sha256": self.template.sha256}}

    def request(self, scenario: Scenario, repeat: int, turns: list[dict[str, str]], seed: int,
                attempt: int) -> JudgeRequest:
        prompt = simulator_prompt(self.template, scenario, turns,
                                  self.settings.structured_output == "json_instructions")
        sampling = {**self.settings.sampling(), "seed": seed}
        key_parts = {"kind": "simulator", "model": self.settings.model, "base_url": self.settings.base_url,
                     "template_sha256": self.template.sha256, "sampling": sampling,
                     "scenario": scenario.id, "repeat": repeat, "attempt": attempt}
        return JudgeRequest(metric="simulator", example_id=f"{scenario.id}#{repeat}", prompt=prompt,
                            schema=REPLY_SCHEMA, key_parts=key_parts, repeat=attempt)

    def reply(self, scenario: Scenario, repeat: int, turns: list[dict[str, str]], seed: int, attempt: int,
              cached_only: bool = False) -> str | None:
        """The simulator's raw reply text; CallFailed when the call failed after its retries."""
        client = _EveryReplyKept(replace(self.settings, seed=seed), self.cache, self.http_transport, self.redactor)
        request = self.request(scenario, repeat, turns, seed, attempt)
        if cached_only and not client.cached(request):
            raise NotCached(request.example_id)
        [answer] = client.run([request])
        stats = client.stats.metric("simulator")
        self.stats.calls += stats.calls
        self.stats.cache_hits += stats.cache_hits
        self.stats.retries += max(0, answer.attempts - 1)
        self.stats.prompt_tokens += stats.prompt_tokens
        self.stats.completion_tokens += stats.completion_tokens
        if answer.error is not None:
            raise CallFailed(answer.error, timed_out=timed_out(answer.error))
        return answer.text


class System:
    """`generate:`'s endpoint as the conversation loop's `respond` side."""

    def __init__(self, generate_config: dict[str, Any], run_token: str, cache: ReplyCache, http_transport=None,
                 redactor: Redactor | None = None):
        self.endpoint: Endpoint = endpoint_from(generate_config)
        self.settings = CallSettings(concurrency=1, timeout_seconds=generate_config["timeout_seconds"],
                                     max_retries=generate_config["max_retries"],
                                     backoff_seconds=generate_config["backoff_seconds"])
        self.run_token, self.cache, self.http_transport, self.redactor = run_token, cache, http_transport, redactor
        self.stats = SideStats()
        self.models: set[str] = set()

    def describe(self) -> dict[str, Any]:
        return {"kind": self.endpoint.kind, "endpoint": self.endpoint.shown_url, "model": self.endpoint.model,
                "system_version": self.endpoint.identity.get("system_version")}

    def _call(self, scenario: Scenario, repeat: int, turns: list[dict[str, str]], seed: int):
        latest = next((turn["content"] for turn in reversed(turns) if turn["role"] == "user"), "")
        conversation = tuple((turn["role"], turn["content"]) for turn in turns)
        item = Item(id=scenario.id, question=latest, context="", turns=conversation,
                    session_id=f"{scenario.id}-{repeat}-{self.run_token}")
        keyed = self.endpoint.render(replace(item, session_id=f"{scenario.id}-{repeat}"))
        endpoint = replace(self.endpoint, keyed_body=keyed, identity={
            **self.endpoint.identity, "conversation": {"scenario": scenario.id, "repeat": repeat, "seed": seed,
                                                       "turns": [list(turn) for turn in conversation]}})
        return GenerateClient(endpoint, self.settings, self.cache, self.http_transport, self.redactor), item

    def reply(self, scenario: Scenario, repeat: int, turns: list[dict[str, str]], seed: int,
              cached_only: bool = False) -> str:
        """The system's answer to the conversation so far; CallFailed with the reason otherwise."""
        client, item = self._call(scenario, repeat, turns, seed)
        if cached_only and not client.cached(item):
            raise NotCached(f"{scenario.id}#{repeat}")
        [generation] = client.run([item])
        self.stats.calls += client.stats.calls
        self.stats.cache_hits += client.stats.cache_hits
        self.stats.retries += client.stats.retries
        self.stats.prompt_tokens += generation.prompt_tokens or 0
        self.stats.completion_tokens += generation.completion_tokens or 0
        if generation.status != "ok":
            raise CallFailed(generation.error or generation.failure or "the call failed",
                             timed_out=generation.failure == "timed out")
        if generation.answer is None:
            raise CallFailed("the system's response holds no answer (the response mapping gave null)")
        if generation.model:
            self.models.add(generation.model)
        return generation.answer

"""The `generate:` section of a profile, read into one Endpoint whatever its kind.

- **http**: the user's own service. `method`, `url`, `headers` (each value read from an
  environment variable, never written in the profile), a JSON `body` template whose strings may
  hold `{id}`, `{question}`, `{context}` (the example's gold context) and `{session_id}` (one
  per conversation: in 00_generate each example is a conversation of its own, its id; in
  02a_converse one per scenario repeat, whose `{question}` is the user's latest message), and
  the `response` mapping (evalbook.generate.mapping).
- **openai**: chat completions at `base_url` + `/chat/completions`, with the profile's model
  and sampling, and the packaged prompt template (`prompts/<name>-v<N>.txt`) given the question
  and, with `context: gold` or `retrieved`, the example's gold context or the evaluation set's
  `retrieved_contexts`. The answer, the model id and the tokens are read from the chat
  completion by the fixed mapping CHAT_COMPLETION.

Both become an HTTP request per example, sent by evalbook.generate.client. What changes an
answer is in the cache key (`Endpoint.key`): the kind, method and URL, the model and sampling,
the template's sha256, the request body, and `generate.system_version`, which the user changes
whenever the system under test changes (a live service's answers cannot otherwise be told apart).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from evalbook.errors import EvalbookError
from evalbook.generate.mapping import CHAT_COMPLETION, ResponseMapping
from evalbook.replycache import cache_key
from evalbook.prompts import PromptTemplate, load_template
from evalbook.processes import is_loopback

PLACEHOLDER = re.compile(r"\{(\w+)\}")
BODY_FIELDS = ("id", "question", "context", "session_id")
TEMPLATE_NAME = re.compile(r"(?P<name>[a-z][a-z0-9_-]*)-v(?P<version>[0-9]+)")  # whole names only (fullmatch)


class GenerateConfigError(EvalbookError, ValueError):
    """A `generate:` setting that cannot be used, naming its key."""


@dataclass(frozen=True)
class Item:
    """What one example gives the endpoint."""

    id: str
    question: str
    context: str
    retrieved_ids: list[str] | None = None
    retrieved_contexts: list[str] | None = None
    session_id: str | None = None  # None: the id
    # the conversation so far, for an endpoint that takes it whole (openai); None: the question alone
    turns: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class Header:
    name: str
    env: str  # the environment variable that holds the value
    prefix: str = ""  # written before it, e.g. "Bearer "


@dataclass(frozen=True)
class Endpoint:
    kind: str
    method: str
    url: str
    headers: tuple[Header, ...]
    mapping: ResponseMapping
    render: Callable[[Item], Any]  # the request body for one example
    identity: dict[str, Any]  # everything but the body that changes an answer
    # The http kind's service retrieves, so its rows carry retrieval; the openai kind's retrieval,
    # if any, is the evaluation set's own, which stays with the examples.
    returns_retrieval: bool = True
    template: PromptTemplate | None = None
    model: str | None = None  # the profile's model (openai kind)
    notes: list[str] = field(default_factory=list)
    # what keys the cache in place of the body sent, when a part of the body must not key it
    # (a conversation's session id, fresh in each run); None: the body
    keyed_body: Any = None

    @property
    def loopback(self) -> bool:
        return is_loopback(urlsplit(self.url).hostname or "")

    @property
    def shown_url(self) -> str:
        """The URL without its query string, which may carry a key, for reports and logs."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}{parts.path}"

    def header_values(self) -> dict[str, str]:
        """Each header's value from its environment variable; a variable that is not set is an error."""
        values = {}
        for header in self.headers:
            value = os.environ.get(header.env)
            if not value:
                raise GenerateConfigError(f"generate.{self.kind}: the header {header.name} needs the "
                                          f"environment variable {header.env}, which is not set")
            values[header.name] = header.prefix + value
        return values

    def key(self, body: Any) -> str:
        return cache_key({**self.identity, "body": body if self.keyed_body is None else self.keyed_body})


def _fill(template: Any, values: dict[str, str]) -> Any:
    """`template` with `{name}` replaced in every string, in one pass, so that a value holding
    `{id}` is sent as written."""
    if isinstance(template, str):
        return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
    if isinstance(template, dict):
        return {key: _fill(value, values) for key, value in template.items()}
    if isinstance(template, list):
        return [_fill(value, values) for value in template]
    return template


def _placeholders(template: Any) -> set[str]:
    if isinstance(template, str):
        return set(PLACEHOLDER.findall(template))
    if isinstance(template, dict):
        return set().union(*(_placeholders(v) for v in template.values()), set())
    if isinstance(template, list):
        return set().union(*(_placeholders(v) for v in template), set())
    return set()


def _headers(config: dict[str, Any] | None) -> tuple[Header, ...]:
    return tuple(Header(name, spec["env"], spec.get("prefix") or "") for name, spec in
                 (config or {}).items())


def http_endpoint(config: dict[str, Any], system_version: str | None) -> Endpoint:
    origin = "generate.http"
    body = config["body"]
    unknown = sorted(_placeholders(body) - set(BODY_FIELDS))
    if unknown:
        raise GenerateConfigError(f"{origin}.body: unknown placeholder(s) {['{' + u + '}' for u in unknown]}; "
                                  f"a body may hold {', '.join('{' + f + '}' for f in BODY_FIELDS)}")
    if "question" not in _placeholders(body):
        raise GenerateConfigError(f"{origin}.body must hold {{question}}, or every example would ask the same")

    def render(item: Item) -> Any:
        return _fill(body, {"id": item.id, "question": item.question, "context": item.context,
                            "session_id": item.session_id or item.id})

    headers = _headers(config["headers"])
    identity = {"kind": "http", "method": config["method"], "url": config["url"],
                "headers": sorted(h.name for h in headers), "system_version": system_version}
    return Endpoint("http", config["method"], config["url"], headers,
                    ResponseMapping(config["response"], f"{origin}.response"), render, identity)


def prompt_template(name: str) -> PromptTemplate:
    match = TEMPLATE_NAME.fullmatch(name)
    if match is None:
        raise GenerateConfigError(f"generate.openai.template {name!r} must read <name>-v<N>, e.g. answer-v1")
    return load_template(match["name"], int(match["version"]), package="evalbook.generate")


def openai_endpoint(config: dict[str, Any], system_version: str | None) -> Endpoint:
    template = prompt_template(config["template"])
    context = config["context"]

    def render(item: Item) -> Any:
        contexts = {"none": [], "gold": [item.context], "retrieved": item.retrieved_contexts or []}[context]
        body = {"model": config["model"], "temperature": config["temperature"],
                "max_tokens": config["max_tokens"],
                "messages": [{"role": "user", "content": template.render(question=item.question,
                                                                         contexts=contexts)}]}
        if item.turns is not None:  # a conversation: its turns as they are, the template unused
            body["messages"] = [{"role": role, "content": content} for role, content in item.turns]
        if config["seed"] is not None:
            body["seed"] = config["seed"]
        return body

    headers = (Header("Authorization", config["api_key_env"], "Bearer "),) if config["api_key_env"] else ()
    url = config["base_url"].rstrip("/") + "/chat/completions"
    identity = {"kind": "openai", "url": url, "template_sha256": template.sha256, "context": context,
                "system_version": system_version}
    return Endpoint("openai", "POST", url, headers, ResponseMapping(CHAT_COMPLETION, "generate.openai"),
                    render, identity, returns_retrieval=False, template=template,
                    model=config["model"])


def endpoint_from(config: dict[str, Any]) -> Endpoint:
    """The Endpoint of an enabled `generate:` section."""
    builders = {"http": http_endpoint, "openai": openai_endpoint}
    kind = config["kind"]
    return builders[kind](config[kind], config["system_version"])

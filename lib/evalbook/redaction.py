"""The one redactor: every response a stage stores or shows passes here.

A secret is the value of an environment variable that the profile reads. Every field of the
profile that names one is in SECRET_FIELDS, whatever section it sits in (the judge's key, the
simulator's, the generate stage's key and each of its headers); a test walks the profile's
schema and fails when a field that names a variable (`*_env`, a header's `env`) is missing
from it. A server may echo a secret back, in an error body or in the content of a reply, and
nothing it sends may carry it to a file: each occurrence is replaced by `[redacted]`, in texts
and in every key and string of a JSON document (a cached response).

A header is sent as `<prefix><value>` ("Bearer sk-..."); both the whole header and the bare
value are secrets, the longer first, so that a header echoed whole leaves one `[redacted]`.
Values shorter than MIN_SECRET_CHARACTERS are not redacted: replacing every "ab" in the answers
would alter ordinary text and protect nothing a two-letter value could hide.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_CHARACTERS = 4


class Redactor:
    """Replaces each secret in texts and JSON documents with REDACTED."""

    def __init__(self, secrets: Iterable[str | None] = ()):
        kept = {secret for secret in secrets if secret and len(secret) >= MIN_SECRET_CHARACTERS}
        self.secrets = tuple(sorted(kept, key=len, reverse=True))

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, text: str) -> str:
        """`text` with every secret replaced by REDACTED."""
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def optional(self, text: str | None) -> str | None:
        return None if text is None else self.text(text)

    def document(self, value: Any) -> Any:
        """A JSON value with every secret redacted in its strings and its objects' keys."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(key)): self.document(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.document(item) for item in value]
        return value

    def holds_secret(self, value: Any) -> bool:
        """True when a text or JSON value holds a secret (what a cache entry from before
        redaction may do: it is dropped, never served)."""
        return bool(self.secrets) and self.document(value) != value


def header_secrets(value: str, prefix: str = "") -> list[str]:
    """A header's value as sent and, when it has a prefix, the bare value too."""
    return [prefix + value, value] if prefix else [value]


EVERY = "*"  # in a field's path: every entry of a mapping


@dataclass(frozen=True)
class SecretField:
    """A profile field whose value names an environment variable holding a secret.

    `path` leads to it from the profile's top level (EVERY: each entry of a mapping); the value
    is sent after `prefix`, or after the text of the sibling field `prefix_field` when set."""

    path: tuple[str, ...]
    prefix: str = ""
    prefix_field: str | None = None

    def variables(self, values: Any) -> Iterator[tuple[str, str]]:
        """Each (variable, prefix) this field names in the profile `values`; none where unset."""
        for parent in _parents(values, self.path[:-1]):
            variable = parent.get(self.path[-1])
            if isinstance(variable, str) and variable:
                prefix = parent.get(self.prefix_field) if self.prefix_field else self.prefix
                yield variable, prefix if isinstance(prefix, str) else ""


def _parents(value: Any, path: tuple[str, ...]) -> Iterator[Mapping[str, Any]]:
    if not isinstance(value, Mapping):
        return
    if not path:
        yield value
        return
    head, rest = path[0], path[1:]
    children = value.values() if head == EVERY else [value.get(head)]
    for child in children:
        yield from _parents(child, rest)


# Every field of the profile (schemas/profile-v1.json) that names a secret's variable.
SECRET_FIELDS = (
    SecretField(("judge", "api_key_env"), prefix="Bearer "),
    SecretField(("generate", "http", "headers", EVERY, "env"), prefix_field="prefix"),
    SecretField(("generate", "openai", "api_key_env"), prefix="Bearer "),
    SecretField(("simulate", "api_key_env"), prefix="Bearer "),
)


def profile_secrets(values: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> list[str]:
    """The value of every environment variable a field of SECRET_FIELDS names, as sent (with
    its prefix) and bare. A variable that is not set holds no secret."""
    environ = os.environ if environ is None else environ
    secrets: list[str] = []
    for field in SECRET_FIELDS:
        for variable, prefix in field.variables(values):
            if environ.get(variable):
                secrets.extend(header_secrets(environ[variable], prefix))
    return secrets


def profile_redactor(values: Mapping[str, Any]) -> Redactor:
    """The redactor of everything the profile reads from the environment."""
    return Redactor(profile_secrets(values))

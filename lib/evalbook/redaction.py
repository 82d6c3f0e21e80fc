"""The one redactor: every response the judge or the generate stage stores or shows passes here.

A secret is the value of an environment variable that the profile reads: the judge's API key
(`judge.api_key_env`), each header of `generate.http.headers` and the generate stage's
`generate.openai.api_key_env`. A server may echo one back, in an error body or in the content
of a reply, and nothing it sends may carry it to a file: each occurrence is replaced by
`[redacted]`, in texts and in every key and string of a JSON document (a cached response).

A header is sent as `<prefix><value>` ("Bearer sk-..."); both the whole header and the bare
value are secrets, the longer first, so that a header echoed whole leaves one `[redacted]`.
Values shorter than MIN_SECRET_CHARACTERS are not redacted: replacing every "ab" in the answers
would alter ordinary text and protect nothing a two-letter value could hide.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
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


def profile_secrets(values: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> list[str]:
    """The value of every environment variable the profile's judge and generate sections read,
    as sent (with its prefix) and bare. A variable that is not set holds no secret."""
    environ = os.environ if environ is None else environ
    named: list[tuple[str, str]] = []
    judge = values.get("judge") or {}
    if judge.get("api_key_env"):
        named.append((judge["api_key_env"], "Bearer "))
    generate = values.get("generate") or {}
    for spec in ((generate.get("http") or {}).get("headers") or {}).values():
        if isinstance(spec, Mapping) and spec.get("env"):
            named.append((spec["env"], spec.get("prefix") or ""))
    openai = generate.get("openai") or {}
    if openai.get("api_key_env"):
        named.append((openai["api_key_env"], "Bearer "))
    secrets: list[str] = []
    for variable, prefix in named:
        if environ.get(variable):
            secrets.extend(header_secrets(environ[variable], prefix))
    return secrets


def profile_redactor(values: Mapping[str, Any]) -> Redactor:
    """The redactor of everything the profile reads from the environment."""
    return Redactor(profile_secrets(values))

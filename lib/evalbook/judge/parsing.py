"""Read a judge's reply as JSON and validate it against the metric's schema.

What is accepted, deliberately:
- the JSON object alone, or wrapped in a Markdown code fence, or with prose around it (the
  first complete object starting at the first `{` is taken; text after it is ignored);
- raw control characters (newlines, tabs) inside JSON strings, which small models emit and
  strict `json.loads` rejects; they carry no ambiguity, so `strict=False` is used.
Anything else (no object, invalid JSON, an object that breaks the schema, a reply cut off by
`max_tokens`) raises `Unparsed` with a reason; the caller records the example as unscored.
"""

from __future__ import annotations

import json
import re
from typing import Any

from evalbook.validation import jsonschema

FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


class Unparsed(ValueError):
    """A reply that is not usable; `reason` says why and `raw` keeps the text."""

    def __init__(self, reason: str, raw: str):
        super().__init__(reason)
        self.reason, self.raw = reason, raw


def parse_reply(raw: str | None, schema: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    """The validated JSON object of a reply, or Unparsed with the reason."""
    if raw is None or not raw.strip():
        raise Unparsed("empty reply", raw or "")
    text = raw.strip()
    fenced = FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    start = text.find("{")
    if start < 0:
        reason = "reply cut off by max_tokens" if finish_reason == "length" else "no JSON object in reply"
        raise Unparsed(reason, raw)
    try:
        value, _ = json.JSONDecoder(strict=False).raw_decode(text, start)
    except json.JSONDecodeError as exc:
        prefix = "reply cut off by max_tokens; " if finish_reason == "length" else ""
        raise Unparsed(f"{prefix}invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", raw) from exc
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "(top level)"
        raise Unparsed(f"reply does not match the schema: {where}: {errors[0].message}", raw)
    return value

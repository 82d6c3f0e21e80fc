"""Read a judge's reply as JSON and validate it against the metric's schema.

What is accepted, deliberately:
- the JSON object alone, or wrapped in a Markdown code fence, or with prose around it (the
  first complete object starting at the first `{` is taken; text after it is ignored);
- raw control characters (newlines, tabs) inside JSON strings, which small models emit and
  strict `json.loads` rejects; they carry no ambiguity, so `strict=False` is used.
- keys the schema does not define, which hosted and local models add now and then (a "note",
  a "confidence"): they are removed and named (`Reading.extra_keys`), so that the caller counts
  them, and the verdicts they sit beside count as usual.
Anything else (no object, invalid JSON, an object that breaks the schema, a missing or mistyped
required field, a reply cut off by `max_tokens`) raises `Unparsed` with a reason; the caller
records the example as unscored.

A reply holding a placeholder is unparsed too, with the reason "placeholder output": a small
base model copies the template's example JSON (`"statement": "..."`), and a copy must not be
scored. Every string value of the reply (a statement, justification, question or rationale) must
be readable (see `unreadable`). One placeholder leaves the whole reply unparsed, so the example is
unscored on that metric: its other statements were written beside a copy and their ratio would
not be the answer's. Placeholders are looked for before the schema is checked, so an empty
question gets this reason too, although relevance's schema refuses it as well. A placeholder
reply raises `Unreadable`, an `Unparsed` that is final: the reply is well-formed, and asked again
at temperature 0 a model gives the same copy, so it is neither retried nor asked again on a
rerun. The client caches it like a parsed reply, and it is read back as unscored.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Iterator

from evalbook.errors import EvalbookError
from evalbook.validation import jsonschema

FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
PLACEHOLDER_REASON = "placeholder output"
# Words a model writes where it has nothing to say, compared without case, spaces or punctuation.
FILLER = frozenset({"na", "none", "null", "nil", "tbd", "todo", "placeholder"})


class Unparsed(EvalbookError, ValueError):
    """A reply that is not usable; `reason` says why and `raw` keeps the text."""

    def __init__(self, reason: str, raw: str):
        super().__init__(reason)
        self.reason, self.raw = reason, raw


class Unreadable(Unparsed):
    """A well-formed reply holding a placeholder: unscored, but final (kept, not asked again)."""


@dataclass(frozen=True)
class Reading:
    """A reply read: its validated JSON object, and the keys removed because the schema does not
    define them, each as its path ("note", "statements/0/confidence")."""

    value: dict[str, Any]
    extra_keys: tuple[str, ...] = ()


def parse_reply(raw: str | None, schema: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    """The validated JSON object of a reply (keys the schema does not define removed), or
    Unparsed with the reason."""
    return read_reply(raw, schema, finish_reason).value


def read_reply(raw: str | None, schema: dict[str, Any], finish_reason: str | None = None) -> Reading:
    """A reply's validated JSON object and the extra keys removed from it, or Unparsed."""
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
    validator = jsonschema.Draft202012Validator(schema)
    extra = remove_extra_keys(validator, value)
    if any(unreadable(text) for text in string_values(value)):
        raise Unreadable(PLACEHOLDER_REASON, raw)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "(top level)"
        raise Unparsed(f"reply does not match the schema: {where}: {errors[0].message}", raw)
    return Reading(value, extra)


def remove_extra_keys(validator: Any, value: Any) -> tuple[str, ...]:
    """Remove from `value`, in place, each key that an object's schema forbids by
    `additionalProperties: false`; return their paths. What is left is checked as usual."""
    removed: list[str] = []
    for error in list(validator.iter_errors(value)):  # listed first: keys are removed below
        if error.validator != "additionalProperties" or not isinstance(error.instance, dict):
            continue
        defined = error.schema.get("properties", {})
        for key in [key for key in error.instance if key not in defined]:
            del error.instance[key]
            removed.append("/".join([*(str(part) for part in error.absolute_path), key]))
    return tuple(sorted(removed))


def unreadable(text: str) -> bool:
    """True for a text that says nothing: one without a letter or a digit (empty, whitespace,
    punctuation, ellipsis, symbols, invisible characters), a filler word (N/A, none, null, nil,
    TBD, TODO, placeholder) or a string value of a judge template's example reply."""
    alphanumerics = "".join(ch for ch in text if unicodedata.category(ch)[0] in "LN")
    return (not alphanumerics or alphanumerics.casefold() in FILLER
            or normalized(text) in template_examples())


def normalized(text: str) -> str:
    return " ".join(text.split()).casefold()


def string_values(value: Any) -> Iterator[str]:
    """Every string value in a decoded JSON value, through objects and arrays (keys excluded)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from string_values(item)
    elif isinstance(value, list):
        for item in value:
            yield from string_values(item)


def example_texts(template_text: str) -> set[str]:
    """The string values of the example replies a template shows: each of its lines that is a
    JSON object on its own (Jinja lines such as `{% if ... %}` are not JSON and are skipped)."""
    texts: set[str] = set()
    for line in template_text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            texts.update(string_values(json.loads(line)))
        except json.JSONDecodeError:
            continue
    return texts


@lru_cache(maxsize=1)
def template_examples() -> frozenset[str]:
    """The example texts of every judge template in `prompts/`, normalized: a reply that copies
    one copied the prompt, whichever metric's prompt it was."""
    folder = resources.files("evalbook.judge").joinpath("prompts")
    return frozenset(normalized(text) for entry in folder.iterdir() if entry.name.endswith(".txt")
                     for text in example_texts(entry.read_text("utf-8")))

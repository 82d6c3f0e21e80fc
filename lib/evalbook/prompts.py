"""Versioned prompt templates (`<package>/prompts/<name>-v<N>.txt`, the judge's and 00_generate's)
and their safe rendering.

A template is a Jinja template, rendered in a sandbox, with undefined values an error and no
HTML escaping (a prompt is plain text). It holds every word the judge is sent: the instructions,
the layout of the data (a conversation's turns, the numbered criteria) and the JSON Schema
paragraph of `json_instructions` mode. Its sha256 is part of the judge label and of every cache
key, so editing any of that changes both.

Untrusted data (the answer, the question, the ground truth, the conversation turns, the criteria
goals) only ever goes inside `<<<NAME ... NAME>>>` blocks, and every string handed to a template
has its block markers defused first, so the data cannot close its block and pose as
instructions. Values reach the template as data and are never rendered as templates themselves:
an answer holding `{{ 7*7 }}` is sent as written.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateError, TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment

from evalbook.errors import EvalbookError

MARKER = re.compile(r"<<<|>>>")
# trim_blocks and lstrip_blocks let a `{% for %}` sit on its own line without adding one.
ENVIRONMENT = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True,
                                   trim_blocks=True, lstrip_blocks=True)


class PromptError(EvalbookError, ValueError):
    """A template that cannot be found or rendered."""


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    version: int
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def id(self) -> str:
        return f"{self.name}-v{self.version}"

    def render(self, **fields: Any) -> str:
        """Fill the template; every string in the values has its block markers defused."""
        try:
            return compiled(self.text).render({key: defused(value) for key, value in fields.items()})
        except TemplateError as exc:
            raise PromptError(f"prompt {self.id}: {exc}") from exc


@lru_cache(maxsize=16)
def compiled(text: str) -> Template:
    return ENVIRONMENT.from_string(text)


def defuse(text: str) -> str:
    """Break any `<<<` or `>>>` in data so that it cannot open or close a data block."""
    return MARKER.sub(lambda m: " ".join(m.group(0)), text)


def defused(value: Any) -> Any:
    """`value` with every string in it defused, through mappings and sequences. Numbers, booleans
    and None pass unchanged; anything else is made a string first, so nothing escapes defusing."""
    if isinstance(value, str):
        return defuse(value)
    if isinstance(value, Mapping):
        return {defused(key): defused(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [defused(item) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return defuse(str(value))


def load_template(name: str, version: int, package: str = "evalbook.judge") -> PromptTemplate:
    """The template `<name>-v<version>.txt` in `package`'s `prompts/` folder (the judge's, or
    evalbook.generate's), checked to compile."""
    filename = f"{name}-v{version}.txt"
    where = package.replace(".", "/") + "/prompts"
    try:
        text = resources.files(package).joinpath("prompts", filename).read_text("utf-8")
    except FileNotFoundError as exc:
        raise PromptError(f"no prompt template {filename} in {where}") from exc
    try:
        compiled(text)
    except TemplateSyntaxError as exc:
        raise PromptError(f"prompt template {where}/{filename}, line {exc.lineno}: {exc.message}") from exc
    return PromptTemplate(name=name, version=version, text=text)

"""Versioned judge prompt templates (`prompts/<name>-v<N>.txt`) and their safe rendering.

A template is plain text with `$field` placeholders (string.Template). Untrusted data (the
answer, the question, the ground truth) only ever goes inside `<<<NAME ... NAME>>>` blocks,
and any block marker inside the data is defused first, so the data cannot close its block and
pose as instructions. The template's sha256 is part of the judge label and of every cache key:
editing the text changes both.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from string import Template

MARKER = re.compile(r"<<<|>>>")


class PromptError(ValueError):
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

    def render(self, **fields: str) -> str:
        """Fill the placeholders; every value has its block markers defused."""
        try:
            return Template(self.text).substitute({k: defuse(str(v)) for k, v in fields.items()})
        except KeyError as exc:
            raise PromptError(f"prompt {self.id}: no value for placeholder {exc}") from exc


def defuse(text: str) -> str:
    """Break any `<<<` or `>>>` in data so that it cannot open or close a data block."""
    return MARKER.sub(lambda m: " ".join(m.group(0)), text)


def load_template(name: str, version: int) -> PromptTemplate:
    filename = f"{name}-v{version}.txt"
    try:
        text = resources.files("evalbook.judge").joinpath("prompts", filename).read_text("utf-8")
    except FileNotFoundError as exc:
        raise PromptError(f"no judge prompt template {filename} in evalbook/judge/prompts") from exc
    return PromptTemplate(name=name, version=version, text=text)

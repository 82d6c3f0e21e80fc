"""Reading an endpoint's JSON response with JMESPath expressions (the `jmespath` library).

`generate.http.response` maps each field of a generated row to an expression over the response:
`answer` (required, a string), and optionally `retrieved_ids` (a list of ids, strings or
integers, which are written as strings), `retrieved_contexts` (a list of strings), `model` (the
model id the service reports) and `prompt_tokens` and `completion_tokens` (integers). An
optional field whose expression matches nothing is null for that row, and counted; `answer`
matching nothing, or any field of the wrong type, is a MappingError naming the field, the
expression and the start of the response.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError

from evalbook.errors import EvalbookError

FIELDS = ("answer", "retrieved_ids", "retrieved_contexts", "model", "prompt_tokens", "completion_tokens")
REQUIRED = ("answer",)
SAMPLE_CHARACTERS = 300
# The chat completions response, read the same way: the openai kind's fixed mapping.
CHAT_COMPLETION = {"answer": "choices[0].message.content", "model": "model",
                   "prompt_tokens": "usage.prompt_tokens", "completion_tokens": "usage.completion_tokens"}


class MappingError(EvalbookError, ValueError):
    """A response the mapping cannot read: the message names the field, the expression and
    shows the start of the response."""


def sample(document: Any) -> str:
    """The first SAMPLE_CHARACTERS characters of a response, as JSON."""
    text = json.dumps(document, ensure_ascii=False)
    return text if len(text) <= SAMPLE_CHARACTERS else text[:SAMPLE_CHARACTERS] + " ..."


def _is_list_of(value: Any, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, list) and all(isinstance(v, kinds) and not isinstance(v, bool) for v in value)


CHECKS = {
    "answer": (lambda v: isinstance(v, str), "a string"),
    "retrieved_ids": (lambda v: _is_list_of(v, (str, int)), "a list of strings or integers"),
    "retrieved_contexts": (lambda v: _is_list_of(v, (str,)), "a list of strings"),
    "model": (lambda v: isinstance(v, str), "a string"),
    "prompt_tokens": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "completion_tokens": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
}


@dataclass(frozen=True)
class ResponseMapping:
    expressions: dict[str, str]  # field -> JMESPath expression, as the profile gives it
    origin: str  # the profile key that holds them, for messages

    def __post_init__(self) -> None:
        unknown = sorted(set(self.expressions) - set(FIELDS))
        if unknown:
            raise MappingError(f"{self.origin}: unknown field(s) {unknown}; the fields are {list(FIELDS)}")
        for field in REQUIRED:
            if not self.expressions.get(field):
                raise MappingError(f"{self.origin}.{field} is required: the JMESPath expression of the answer")
        for field, expression in self.expressions.items():
            if expression is None:
                continue
            try:
                jmespath.compile(expression)
            except JMESPathError as error:
                raise MappingError(f"{self.origin}.{field}: {expression!r} is not a JMESPath "
                                   f"expression ({error})") from None

    def apply(self, document: Any) -> dict[str, Any]:
        """Each field's value in `document` (null where an optional expression matched nothing)."""
        values: dict[str, Any] = dict.fromkeys(FIELDS)
        for field, expression in self.expressions.items():
            if expression is None:
                continue
            value = jmespath.search(expression, document)
            if value is None:
                if field in REQUIRED:
                    raise MappingError(f"{self.origin}.{field}: the expression {expression!r} matched "
                                       f"nothing in the response, which begins: {sample(document)}")
                continue
            check, expected = CHECKS[field]
            if not check(value):
                raise MappingError(f"{self.origin}.{field}: the expression {expression!r} gave a "
                                   f"{type(value).__name__}, not {expected}, in the response, which "
                                   f"begins: {sample(document)}")
            values[field] = [str(v) for v in value] if field == "retrieved_ids" else value
        return values

"""The judged-metric protocol: what the judge stage asks of every judged metric.

A judged metric is a module (or any object) with the members of `JudgedMetric`. The stage
iterates `JUDGED_METRICS`, the one ordered tuple of them, and never tests a metric's name:
a new judged metric is an entry of kind `judge` in the metric registry (evalbook.metrics) and
a module of that name here, with its template in `prompts/`.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from evalbook.judge.score import Score
from evalbook.metrics import of_kind

Embedder = Callable[[list[str]], np.ndarray]


@runtime_checkable
class JudgedMetric(Protocol):
    """One judged metric; `config` is the profile's `judge` section and `row` a canonical row."""

    NAME: str
    METRIC_VERSION: int  # bumped when the score math changes; part of every cache key
    PROMPT: tuple[str, int]  # the template's name and version, `prompts/<name>-v<version>.txt`

    def reply_schema(self, config: dict[str, Any]) -> dict[str, Any]:
        """The JSON Schema the judge's reply must match."""

    def prompt_fields(self, row: Any, answer: str, config: dict[str, Any]) -> dict[str, Any]:
        """The template's data for one row; `answer` is its generated answer, stripped. The stage
        adds `json_instructions` (true in that structured-output mode) and `reply_schema` (the
        reply schema as JSON text)."""

    def texts_to_embed(self, parsed: dict[str, Any], row: Any) -> list[str]:
        """The texts `score_reply` will embed, so that the stage can embed them in batches."""

    def score_reply(self, parsed: dict[str, Any], row: Any, config: dict[str, Any],
                    embed: Embedder | None) -> tuple[Score, dict[str, Any]]:
        """The score of a parsed reply, and the detail its record keeps."""

    def record_fields(self, detail: dict[str, Any], threshold: float) -> dict[str, Any]:
        """Fields the metric adds to an example's record, after its score and detail."""

    def summary_fields(self, entries: list[dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
        """Fields the metric adds to its summary, from the records of the judged examples."""


# One module per judge metric of the registry that reads the answer, `evalbook.judge.<name>`, in
# the registry's order; the metrics that read the retrieved chunks are evalbook.judge.context's.
JUDGED_METRICS: tuple[JudgedMetric, ...] = tuple(import_module(f"evalbook.judge.{metric.name}")
                                                 for metric in of_kind("judge") if metric.reads == "answer")

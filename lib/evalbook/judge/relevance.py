"""Relevance: how well the questions an answer addresses match the question actually asked.

The judge sees only the answer, never the ground truth, and writes n questions that the answer
would address. Those questions and the user's question are embedded; the score is the mean
cosine similarity between the user's question and each invented question: -1 to 1, higher is
better, sign kept. A confidently wrong answer to the right question still scores high;
relevance catches evasion and drift, not fabrication. A reply with a placeholder question is
unscored ("placeholder output", parsing.py).

The module implements the judged-metric protocol (`protocol.JudgedMetric`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from evalbook.judge.score import Score
from evalbook.score.similarity import cosine_matrix

NAME = "relevance"
METRIC_VERSION = 1
PROMPT = ("relevance", 2)


def schema(n_questions: int) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["questions"],
        "properties": {"questions": {"type": "array", "minItems": n_questions, "maxItems": n_questions,
                                     "items": {"type": "string", "minLength": 1}}},
    }


def relevance_score(question_embedding: np.ndarray, generated_embeddings: np.ndarray) -> Score:
    """Mean cosine of the user's question with each generated question; unscored with none."""
    generated = np.atleast_2d(np.asarray(generated_embeddings, dtype=np.float64))
    if generated.size == 0:
        return Score.unscored("the judge wrote no question")
    try:
        similarities = cosine_matrix(np.atleast_2d(question_embedding), generated)[0]
    except ValueError as error:  # a zero embedding: cosine undefined
        return Score.unscored(f"relevance undefined: {error}")
    return Score(float(similarities.mean()))


def reply_schema(config: dict[str, Any]) -> dict[str, Any]:
    return schema(config["metrics"]["relevance"]["n_questions"])


def prompt_fields(row: Any, answer: str, config: dict[str, Any]) -> dict[str, Any]:
    return {"answer": answer, "n_questions": config["metrics"]["relevance"]["n_questions"]}


def texts_to_embed(parsed: dict[str, Any], row: Any) -> list[str]:
    return [row.question, *parsed["questions"]]


def score_reply(parsed: dict[str, Any], row: Any, config: dict[str, Any], embed) -> tuple[Score, dict[str, Any]]:
    """Score a parsed reply; `embed(texts) -> array` is the pinned embedding model."""
    questions: Sequence[str] = parsed["questions"]
    vectors = embed(texts_to_embed(parsed, row))
    return relevance_score(vectors[0], vectors[1:]), {"generated_questions": list(questions)}


def record_fields(detail: dict[str, Any], threshold: float) -> dict[str, Any]:
    return {}


def summary_fields(entries: list[dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
    return {}

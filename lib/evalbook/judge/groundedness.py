"""Groundedness: the share of an answer's atomic statements that the ground truth supports.

One judge call splits the answer into self-contained statements and gives each a verdict,
1 (supported) or 0 (contradicted or not verifiable), with a justification. The score is
supported / total: 0-1, higher is better. An answer split into no statement is unscored, and so
is a reply with a placeholder statement or justification ("placeholder output", parsing.py).
The judge decides how many statements there are, so a 2-statement answer can only score
0, 1/2 or 1 (see score.threshold_reading).

The module implements the judged-metric protocol (`protocol.JudgedMetric`).
"""

from __future__ import annotations

from typing import Any, Sequence

from evalbook.judge.score import Score, ratio_fields

NAME = "groundedness"
METRIC_VERSION = 1
PROMPT = ("groundedness", 2)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["statements"],
    "properties": {
        "statements": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["statement", "verdict", "justification"],
                "properties": {
                    "statement": {"type": "string"},
                    "verdict": {"type": "integer", "enum": [0, 1]},
                    "justification": {"type": "string"},
                },
            },
        },
    },
}


def groundedness_score(verdicts: Sequence[int]) -> Score:
    """supported / total over 0/1 verdicts; unscored when there is no statement."""
    if not verdicts:
        return Score.unscored("the judge found no statement in the answer")
    if any(v not in (0, 1) for v in verdicts):
        raise ValueError(f"verdicts must be 0 or 1, got {list(verdicts)}")
    return Score(sum(verdicts) / len(verdicts))


def reply_schema(config: dict[str, Any]) -> dict[str, Any]:
    return SCHEMA


def prompt_fields(row: Any, answer: str, config: dict[str, Any]) -> dict[str, Any]:
    return {"answer": answer, "ground_truth": getattr(row, config["ground_truth_column"])}


def texts_to_embed(parsed: dict[str, Any], row: Any) -> list[str]:
    return []


def score_reply(parsed: dict[str, Any], row: Any, config: dict[str, Any], embed) -> tuple[Score, dict[str, Any]]:
    statements = parsed["statements"]
    return groundedness_score([s["verdict"] for s in statements]), {
        "n_statements": len(statements), "statements": statements}


def record_fields(detail: dict[str, Any], threshold: float) -> dict[str, Any]:
    return ratio_fields(detail.get("n_statements", 0), threshold)


def summary_fields(entries: list[dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
    return {}

"""Criteria: natural-language goals judged against the transcript, each with a rationale.

The transcript is the example's multi-turn `conversation` when the data has one, else the
question and the answer.

The judge returns, for every criterion, whether the assistant met it and why. The example's
score is the share of criteria met: 0-1, higher is better; each criterion's own pass rate is
reported too. A reply that skips or reorders criteria is unscored.
"""

from __future__ import annotations

from typing import Any, Sequence

from evalbook.judge.score import Score

NAME = "criteria"
METRIC_VERSION = 1
PROMPT = ("criteria", 1)


def schema(n_criteria: int) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["criteria"],
        "properties": {"criteria": {
            "type": "array", "minItems": n_criteria, "maxItems": n_criteria,
            "items": {"type": "object", "additionalProperties": False,
                      "required": ["criterion", "met", "rationale"],
                      "properties": {"criterion": {"type": "integer", "minimum": 1, "maximum": n_criteria},
                                     "met": {"type": "boolean"},
                                     "rationale": {"type": "string"}}}}},
    }


def transcript(question: str, answer: str, conversation: Sequence[dict[str, str]] | None = None) -> str:
    """The text the criteria are judged against: the whole conversation when the data has one
    (its turns in order, ending with the judged answer), else the question and the answer."""
    if conversation is not None and len(conversation):
        return "\n".join(f"{turn['role'].upper()}: {turn['content']}" for turn in conversation)
    return f"USER: {question}\nASSISTANT: {answer}"


def prompt_fields(question: str, answer: str, goals: Sequence[str],
                  conversation: Sequence[dict[str, str]] | None = None) -> dict[str, str]:
    listed = "\n".join(f"{number}. {goal}" for number, goal in enumerate(goals, start=1))
    return {"transcript": transcript(question, answer, conversation), "criteria": listed}


def criteria_score(met: Sequence[bool]) -> Score:
    """Share of criteria met; unscored when there is none."""
    if not met:
        return Score.unscored("no criterion was judged")
    return Score(sum(bool(m) for m in met) / len(met))


def score_reply(parsed: dict[str, Any], goals: Sequence[str]) -> tuple[Score, dict[str, Any]]:
    entries = parsed["criteria"]
    if [e["criterion"] for e in entries] != list(range(1, len(goals) + 1)):
        return Score.unscored("the reply does not list every criterion once, in order"), {"criteria": entries}
    detail = [{"criterion": goal, "met": e["met"], "rationale": e["rationale"]} for goal, e in zip(goals, entries)]
    return criteria_score([e["met"] for e in entries]), {"criteria": detail}

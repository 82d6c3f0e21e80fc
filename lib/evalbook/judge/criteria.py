"""Criteria: natural-language goals judged against the transcript, each with a rationale.

The transcript is the example's multi-turn `conversation` when the data has one, else the
question and the answer.

The judge returns, for every criterion, whether the assistant met it and why. The example's
score is the share of criteria met: 0-1, higher is better; each criterion's own pass rate is
reported too. A reply that skips or reorders criteria is unscored, and so is a reply with a
placeholder rationale ("placeholder output", parsing.py).

The module implements the judged-metric protocol (`protocol.JudgedMetric`).
"""

from __future__ import annotations

from typing import Any, Sequence

from evalbook.judge.score import Score, ratio_fields

NAME = "criteria"
METRIC_VERSION = 1
PROMPT = ("criteria", 2)


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


def transcript(question: str, answer: str,
               conversation: Sequence[dict[str, str]] | None = None) -> list[dict[str, str]]:
    """The turns the criteria are judged against: the whole conversation when the data has one
    (its turns in order, ending with the judged answer), else the question and the answer.
    The template lays them out."""
    if conversation is not None and len(conversation):
        return [{"role": turn["role"], "content": turn["content"]} for turn in conversation]
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def goals_of(config: dict[str, Any]) -> list[str]:
    return list(config["metrics"]["criteria"]["goals"])


def reply_schema(config: dict[str, Any]) -> dict[str, Any]:
    return schema(len(goals_of(config)))


def prompt_fields(row: Any, answer: str, config: dict[str, Any]) -> dict[str, Any]:
    conversation = getattr(row, "conversation", None)
    return {"transcript": transcript(row.question, answer, conversation), "criteria": goals_of(config)}


def texts_to_embed(parsed: dict[str, Any], row: Any) -> list[str]:
    return []


def criteria_score(met: Sequence[bool]) -> Score:
    """Share of criteria met; unscored when there is none."""
    if not met:
        return Score.unscored("no criterion was judged")
    return Score(sum(bool(m) for m in met) / len(met))


def score_reply(parsed: dict[str, Any], row: Any, config: dict[str, Any], embed) -> tuple[Score, dict[str, Any]]:
    goals = goals_of(config)
    entries = parsed["criteria"]
    if [e["criterion"] for e in entries] != list(range(1, len(goals) + 1)):
        return Score.unscored("the reply does not list every criterion once, in order"), {"criteria": entries}
    detail = [{"criterion": goal, "met": e["met"], "rationale": e["rationale"]} for goal, e in zip(goals, entries)]
    return criteria_score([e["met"] for e in entries]), {"criteria": detail}


def record_fields(detail: dict[str, Any], threshold: float) -> dict[str, Any]:
    return ratio_fields(len(detail.get("criteria", [])), threshold)


def summary_fields(entries: list[dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
    """Each goal's pass rate over the scored examples."""
    per_goal = {}
    for index, goal in enumerate(goals_of(config)):
        verdicts = [e["criteria"][index]["met"] for e in entries
                    if e["score"] is not None and len(e.get("criteria", [])) > index]
        per_goal[goal] = {"pass_rate": (sum(verdicts) / len(verdicts)) if verdicts else None, "n": len(verdicts)}
    return {"per_criterion": per_goal}

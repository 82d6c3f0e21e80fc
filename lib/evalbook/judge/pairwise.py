"""Pairwise A/B judging: which of two runs' answers to the same question is better, judged in
both orders: the requests, the verdicts and the numbers (evalbook.compare.pairwise judges two
runs with them, `compare --pairwise`).

Each question's two answers are shown to the judge twice, under the neutral labels ANSWER 1 and
ANSWER 2: once with the baseline's answer (A) first (`ab`), once with the candidate's (B) first
(`ba`). The judge reasons, then gives a verdict in {1, 2, tie} (PAIR_SCHEMA). The two verdicts,
mapped back to A and B, give the pair's outcome:
- both for the same side: that side wins; both tie: a tie;
- otherwise `inconsistent` (one order for A, the other for B; or one tie and one win): the
  slot moved the verdict. It counts as a tie in the win rate and is reported apart;
- a reply that does not parse makes the pair `invalid`: counted, never scored.

The numbers (`pairwise_summary`):
- B's win rate over A: wins 1, ties and inconsistent pairs 0.5, losses 0, averaged over the
  valid pairs, with its percentile bootstrap interval (evalbook.stats). None when no valid pair
  is consistent: every 0.5 is then the slot's doing, the judge's preferences are position bias
  alone, and their mean, 0.5 with an interval of no width, would read as a certain tie between
  answers the judge told apart on no question;
- a two-sided sign test over the decisive pairs only (B wins against A wins; scipy's binomtest);
- position bias: the share of consistent pairs, and the rate at which the first slot won among
  the decisive single verdicts, with its Wilson interval and a binomial test against 0.5. A
  judge that always picks the first slot has 0 consistent pairs, a first-slot rate of 1 and no
  win rate.
With `judge.repeats` r, `pair_requests` asks each order r times, each repeat its own cache
entry, and `repeated_summary` takes each question's r judgments together: the outcome counts and
the position bias count every judgment; the win rate and the sign test count each question once,
by the mean of its valid judgments' points (a question whose judgments are all invalid is left
out); `repeat_agreement` is the share of questions whose valid judgments all give one outcome.
With one repeat this is `pairwise_summary`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from scipy.stats import binomtest

from evalbook.judge.client import JudgeRequest, JudgeSettings, judge_key_parts
from evalbook.judge.parsing import Unparsed, read_reply
from evalbook.prompts import PromptTemplate, load_template
from evalbook.stats import BOOTSTRAP, bootstrap_mean_ci

NAME = "pairwise"
METRIC_VERSION = 1
PROMPT = ("pairwise", 2)  # judge/prompts/pairwise-v2.txt (v1: docs/compare.md says why v2)
PAIR_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["reasoning", "verdict"],
    "properties": {"reasoning": {"type": "string"}, "verdict": {"enum": ["1", "2", "tie"]}},
}
ORDERS = ("ab", "ba")  # ab: the baseline's answer in slot 1
OUTCOMES = ("A", "B", "tie", "inconsistent", "invalid")
POINTS = {"B": 1.0, "tie": 0.5, "inconsistent": 0.5, "A": 0.0}


def pair_template() -> PromptTemplate:
    return load_template(*PROMPT)


def pair_requests(example_id: str, question: str, answer_a: str, answer_b: str, settings: JudgeSettings,
                  template: PromptTemplate, repeats: int = 1) -> list[JudgeRequest]:
    """2 x `repeats` requests for one question: `<id>#ab` and `<id>#ba`, each repeat its own cache entry."""
    requests = []
    for order in ORDERS:
        first, second = (answer_a, answer_b) if order == "ab" else (answer_b, answer_a)
        prompt = template.render(question=question, first=first, second=second,
                                 json_instructions=settings.structured_output == "json_instructions",
                                 reply_schema=json.dumps(PAIR_SCHEMA))
        for repeat in range(repeats):
            key = judge_key_parts(settings, template.sha256, NAME, METRIC_VERSION, repeat)
            requests.append(JudgeRequest(metric=NAME, example_id=f"{example_id}#{order}", prompt=prompt,
                                         schema=PAIR_SCHEMA, key_parts=key, repeat=repeat))
    return requests


def read_verdict(text: str | None, finish_reason: str | None = None) -> str:
    """"1", "2" or "tie"; "invalid" for a reply that is not the JSON asked for."""
    try:
        return read_reply(text, PAIR_SCHEMA, finish_reason).value["verdict"]
    except Unparsed:
        return "invalid"


def side(verdict: str, order: str) -> str:
    """The verdict of one order as a side: A, B, tie, or invalid for anything but 1, 2 and tie."""
    if verdict not in ("1", "2", "tie"):
        return "invalid"
    if verdict == "tie":
        return verdict
    first = "A" if order == "ab" else "B"
    return first if verdict == "1" else ("B" if first == "A" else "A")


def outcome(verdict_ab: str, verdict_ba: str) -> str:
    """One pair's outcome from its two verdicts (evalbook's 1 / 2 / tie in each order)."""
    a, b = side(verdict_ab, "ab"), side(verdict_ba, "ba")
    if "invalid" in (a, b):
        return "invalid"
    return a if a == b else "inconsistent"


@dataclass(frozen=True)
class Pair:
    id: str
    verdict_ab: str
    verdict_ba: str

    @property
    def outcome(self) -> str:
        return outcome(self.verdict_ab, self.verdict_ba)


def _wilson(successes: int, n: int, confidence: float) -> dict[str, float] | None:
    if n == 0:
        return None
    interval = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return {"low": float(interval.low), "high": float(interval.high)}


def pairwise_summary(pairs: Sequence[Pair], resamples: int = BOOTSTRAP.resamples, seed: int = BOOTSTRAP.seed,
                     confidence: float = BOOTSTRAP.confidence) -> dict[str, Any]:
    """The numbers of one judgment per question (judge.repeats 1)."""
    return repeated_summary([[pair] for pair in pairs], resamples, seed, confidence)


def repeated_summary(questions: Sequence[Sequence[Pair]], resamples: int = BOOTSTRAP.resamples,
                     seed: int = BOOTSTRAP.seed, confidence: float = BOOTSTRAP.confidence) -> dict[str, Any]:
    """The numbers of each question's judgments (one per repeat; see the module's docstring).
    `win_rate_b` is None when no valid judgment is consistent (position bias alone), as when
    every judgment is invalid."""
    judgments = [pair for repeats in questions for pair in repeats]
    counts = Counter(pair.outcome for pair in judgments)
    valid = [pair for pair in judgments if pair.outcome != "invalid"]
    consistent = counts["A"] + counts["B"] + counts["tie"]
    by_question = [[POINTS[pair.outcome] for pair in repeats if pair.outcome != "invalid"] for repeats in questions]
    points = [sum(scored) / len(scored) for scored in by_question if scored]
    win_rate = None
    if consistent:
        low, high = bootstrap_mean_ci(points, resamples=resamples, seed=seed, confidence=confidence)
        win_rate = {"mean": sum(points) / len(points), "low": low, "high": high, "n": len(points)}
    b_wins, a_wins = sum(p > 0.5 for p in points), sum(p < 0.5 for p in points)
    decisive = a_wins + b_wins
    sign = None if decisive == 0 else {"n": decisive, "b_wins": b_wins,
                                       "p_value": float(binomtest(b_wins, decisive, 0.5).pvalue)}
    slots = [verdict for pair in valid for verdict in (pair.verdict_ab, pair.verdict_ba) if verdict in ("1", "2")]
    first = slots.count("1")
    repeated = [{pair.outcome for pair in repeats if pair.outcome != "invalid"} for repeats in questions
                if sum(pair.outcome != "invalid" for pair in repeats) > 1]
    agreement = None if not repeated else {
        "n_questions": len(repeated), "n_unanimous": sum(len(outcomes) == 1 for outcomes in repeated),
        "unanimous": sum(len(outcomes) == 1 for outcomes in repeated) / len(repeated)}
    return {
        "n_pairs": len(questions), "n_judgments": len(judgments),
        "outcomes": {name: counts.get(name, 0) for name in OUTCOMES},
        "win_rate_b": win_rate, "sign_test": sign,
        "position_bias": {
            "consistency": consistent / len(valid) if valid else None, "n_consistent": consistent,
            "consistency_interval": _wilson(consistent, len(valid), confidence),
            "first_slot_rate": first / len(slots) if slots else None, "n_decisive_verdicts": len(slots),
            "first_slot_interval": _wilson(first, len(slots), confidence),
            "first_slot_p_value": float(binomtest(first, len(slots), 0.5).pvalue) if slots else None,
        },
        "repeat_agreement": agreement,
    }

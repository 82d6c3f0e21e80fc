"""Pairwise judging of two runs (`compare --pairwise`): for each question both runs answered,
which answer the profile's judge prefers, asked in both orders (evalbook.judge.pairwise).

What is judged: the ids both reports hold, with the same question and a non-empty answer on
each side; the rest is counted and left out (only in the baseline, only in the candidate, the
question differs, no answer on one side). `judge.sample_size` and `judge.sample_seed` draw the
same seeded sample the judge stage would; `judge.repeats` asks each order that many times.
Requests: 2 x pairs x repeats, each cached in the judge cache (a rerun makes no call), counted
by the pre-flight estimate and checked against `judge.max_calls` and `judge.max_cost_usd`
before the first call. A requested pairwise judgment that can judge nothing is an error, never
an empty section: two runs with no question to judge, or whose answers to every question left
are the same (a run compared with itself), are refused before any request (ComparisonError);
judging whose every judgment is invalid fails after it (NothingJudged), as scenarios with nothing
to score do.

A is the baseline, B the candidate: `win_rate_b` above 0.5 means the judge preferred the
candidate's answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from evalbook.compare import ComparisonError
from evalbook.errors import EvalbookError
from evalbook.judge.client import JudgeClient, JudgeReply, JudgeRequest
from evalbook.judge.estimate import check_budget, estimate
from evalbook.judge.pairwise import (METRIC_VERSION, NAME, ORDERS, PAIR_SCHEMA, POINTS, Pair, pair_requests,
                                     pair_template, read_verdict, repeated_summary)
from evalbook.judge.parsing import Unparsed, read_reply
from evalbook.judge.stage import repeats_of, seeded_sample, server_reachable, settings_from
from evalbook.params import judge_cache_path
from evalbook.redaction import Redactor, profile_redactor
from evalbook.replycache import ReplyCache
from evalbook.stats import BOOTSTRAP, Bootstrap

SHOWN_INVALID_CHARACTERS = 200  # of a reply that does not parse, as a judgment records it
CALL_FAILED, NOT_JSON = "the call failed: ", "not the JSON asked for: "  # how a judgment says why it is invalid
LEFT_OUT = ("only_baseline", "only_candidate", "question_differs", "no_answer")


class JudgeUnreachable(EvalbookError, RuntimeError):
    """`compare --pairwise` with no judge answering at the profile's base URL."""


class NothingJudged(EvalbookError, RuntimeError):
    """Pairwise judging ran, yet every judgment was invalid: no answer was preferred."""


@dataclass(frozen=True)
class Selection:
    """Which shared questions are judged, and what was left out of each side and why."""

    judged: list[str]
    left_out: dict[str, list[str]]
    not_sampled: list[str]
    n_shared: int


def _answer(example: Mapping[str, Any]) -> str | None:
    answer = example.get("generated_answer")
    return answer if isinstance(answer, str) and answer.strip() else None


def select_pairs(baseline: Mapping[str, Any], candidate: Mapping[str, Any], config: Mapping[str, Any]) -> Selection:
    """The questions to judge; ComparisonError, naming what was left out, when there is none, or
    when the two runs give the same answer to each (nothing to prefer)."""
    base = {example["id"]: example for example in baseline["examples"]}
    cand = {example["id"]: example for example in candidate["examples"]}
    shared = [i for i in base if i in cand]
    left_out: dict[str, list[str]] = {
        "only_baseline": [i for i in base if i not in cand], "only_candidate": [i for i in cand if i not in base],
        "question_differs": [i for i in shared if base[i]["question"] != cand[i]["question"]],
        "no_answer": [],
    }
    differs = set(left_out["question_differs"])
    for i in shared:
        if i not in differs and (_answer(base[i]) is None or _answer(cand[i]) is None):
            left_out["no_answer"].append(i)
    out = differs | set(left_out["no_answer"])
    eligible = [i for i in shared if i not in out]
    if not eligible:
        counts = ", ".join(f"{len(ids)} {name.replace('_', ' ')}" for name, ids in left_out.items())
        raise ComparisonError(f"pairwise judging has no question to judge: the two runs share {len(shared)} "
                              f"ids ({counts}); compare two runs of the same questions with answers")
    if all(base[i]["generated_answer"] == cand[i]["generated_answer"] for i in eligible):
        raise ComparisonError(f"pairwise judging has nothing to compare: the two runs give the same answer to "
                              f"each of the {len(eligible)} questions both answer, so no judge is asked; "
                              "compare two runs whose answers differ")
    judged = seeded_sample(eligible, config["sample_size"], config["sample_seed"])
    kept = set(judged)
    return Selection(judged=judged, left_out=left_out, not_sampled=[i for i in eligible if i not in kept],
                     n_shared=len(shared))


@dataclass
class PairwisePlan:
    """The requests of a pairwise judgment, its estimate (already checked against the budget) and
    the client that will send them."""

    selection: Selection
    requests: list[JudgeRequest]
    planned: dict[str, Any]
    client: JudgeClient
    repeats: int
    questions: dict[str, str]


def plan_pairwise(baseline: Mapping[str, Any], candidate: Mapping[str, Any], config: Mapping[str, Any],
                  cache: ReplyCache, redactor: Redactor | None = None, http_transport=None) -> PairwisePlan:
    """Select, build the requests and estimate them, with the judge `config` (a profile's `judge`)
    and its `cache`; raises before any judge call when no judge answers (JudgeUnreachable),
    nothing can be judged (ComparisonError) or the calls exceed the budget (OverBudget)."""
    selection = select_pairs(baseline, candidate, config)
    settings = settings_from(config)
    reason = server_reachable(settings, http_transport=http_transport)
    if reason is not None:
        raise JudgeUnreachable(f"compare --pairwise needs the profile's judge: {reason}")
    client = JudgeClient(settings, cache, http_transport, redactor)
    base = {example["id"]: example for example in baseline["examples"]}
    cand = {example["id"]: example for example in candidate["examples"]}
    template, repeats = pair_template(), repeats_of(config)
    requests = [request for i in selection.judged for request in
                pair_requests(i, base[i]["question"], base[i]["generated_answer"], cand[i]["generated_answer"],
                              settings, template, repeats)]
    planned = estimate(requests, [r for r in requests if not client.cached(r)], settings, config, http_transport)
    check_budget(planned)
    return PairwisePlan(selection, requests, planned, client, repeats,
                        {i: base[i]["question"] for i in selection.judged})


def plan_for_profile(baseline: Mapping[str, Any], candidate: Mapping[str, Any], profile: Any) -> PairwisePlan:
    """plan_pairwise with the profile's judge, its judge cache and the redactor of its secrets."""
    return plan_pairwise(baseline, candidate, profile["judge"], ReplyCache(judge_cache_path(profile)),
                         profile_redactor(profile.values))


def _judgment(reply: JudgeReply) -> dict[str, Any]:
    """One order's verdict as recorded: the verdict, the judge's reasoning, or why there is none."""
    if reply.error is not None:
        return {"verdict": "invalid", "reasoning": None, "problem": CALL_FAILED + reply.error}
    verdict = read_verdict(reply.text, reply.finish_reason)
    if verdict == "invalid":
        text = reply.text or ""
        shown = text[:SHOWN_INVALID_CHARACTERS] + (" ..." if len(text) > SHOWN_INVALID_CHARACTERS else "")
        return {"verdict": "invalid", "reasoning": None, "problem": f"{NOT_JSON}{shown!r}"}
    try:
        reasoning = read_reply(reply.text, PAIR_SCHEMA, reply.finish_reason).value["reasoning"]
    except Unparsed:  # read_verdict parsed it: this cannot happen, but a verdict never loses its record
        reasoning = None
    return {"verdict": verdict, "reasoning": reasoning, "problem": None}


def preferred(points: float | None) -> str | None:
    """Which side a question's judgments preferred on average: A, B, or neither (0.5)."""
    if points is None:
        return None
    return "B" if points > 0.5 else "A" if points < 0.5 else "neither"


def _nothing_judged(pairs: list[dict[str, Any]], n_judgments: int) -> NothingJudged:
    """The failure of judging whose `n_judgments` judgments, in `pairs`, are all invalid: how
    many calls failed and how many replies did not parse, and the first reason, in one line."""
    problems = [(f"{pair['id']}#{order}", judgment[order]["problem"]) for pair in pairs
                for judgment in pair["judgments"] for order in ORDERS if judgment[order]["problem"]]
    failed = sum(problem.startswith(CALL_FAILED) for _, problem in problems)
    where, first = problems[0]
    return NothingJudged(f"pairwise judging scored nothing: all {n_judgments} judgments were invalid ({failed} "
                         f"calls failed, {len(problems) - failed} replies not the JSON asked for), so no answer "
                         f"was preferred; the first: {where}: {' '.join(first.split())}")


def judge_pairwise(plan: PairwisePlan, bootstrap: Bootstrap = BOOTSTRAP,
                   progress: Callable[[JudgeReply], None] | None = None) -> dict[str, Any]:
    """Send the plan's requests (cache first) and build the comparison's `pairwise` section;
    NothingJudged when every judgment is invalid (nothing was compared)."""
    replies = plan.client.run(plan.requests, progress)
    by_key = {(r.request.example_id, r.request.repeat): _judgment(r) for r in replies}
    groups, pairs = [], []
    for i in plan.selection.judged:
        judgments, repeats = [], []
        for repeat in range(plan.repeats):
            ab, ba = (by_key[(f"{i}#{order}", repeat)] for order in ORDERS)
            pair = Pair(i, ab["verdict"], ba["verdict"])
            repeats.append(pair)
            judgments.append({"repeat": repeat, "outcome": pair.outcome, "ab": ab, "ba": ba})
        groups.append(repeats)
        scored = [POINTS[p.outcome] for p in repeats if p.outcome != "invalid"]
        points = sum(scored) / len(scored) if scored else None
        pairs.append({"id": i, "question": plan.questions[i], "points_b": points, "preferred": preferred(points),
                      "judgments": judgments})
    summary = repeated_summary(groups, bootstrap.resamples, bootstrap.seed, bootstrap.confidence)
    if summary["outcomes"]["invalid"] == summary["n_judgments"]:
        raise _nothing_judged(pairs, summary["n_judgments"])
    settings, template = plan.client.settings, pair_template()
    stats = plan.client.stats.metric(NAME)
    selection = plan.selection
    return {
        "judge": {"model": settings.model, "base_url_host": settings.host, **settings.sampling(),
                  "prompt": {"id": template.id, "sha256": template.sha256}, "metric_version": METRIC_VERSION,
                  "repeats": plan.repeats},
        "selection": {"n_shared": selection.n_shared, "n_judged": len(selection.judged),
                      "n_not_sampled": len(selection.not_sampled),
                      **{f"n_{name}": len(selection.left_out[name]) for name in LEFT_OUT},
                      **{f"{name}_ids": selection.left_out[name] for name in LEFT_OUT}},
        "estimate": plan.planned,
        "calls": {"requests": len(plan.requests), "made": stats.calls, "cached": stats.cache_hits,
                  "errors": stats.errors,
                  "redacted": plan.client.stats.redacted},
        **summary,
        "pairs": pairs,
    }


def preferred_counts(section: Mapping[str, Any]) -> dict[str, int]:
    """How many questions' judgments preferred the baseline (A), the candidate (B) or neither."""
    return {side: sum(pair["preferred"] == side for pair in section["pairs"]) for side in ("A", "B", "neither")}


def left_out_sentence(section: Mapping[str, Any]) -> str:
    """What was not judged, in one sentence (the page and the summary)."""
    selection = section["selection"]
    parts = [f"{selection['n_judged']} of the {selection['n_shared']} questions both runs hold were judged"]
    named = {"only_baseline": "only in the baseline", "only_candidate": "only in the candidate",
             "question_differs": "with a different question", "no_answer": "without an answer on one side"}
    out = [f"{selection[f'n_{name}']} {label}" for name, label in named.items() if selection[f"n_{name}"]]
    if selection["n_not_sampled"]:
        out.append(f"{selection['n_not_sampled']} not in the sample (judge.sample_size)")
    return parts[0] + ("; left out: " + ", ".join(out) if out else "") + "."


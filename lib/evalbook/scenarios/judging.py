"""The transcripts judged with the judge stage's own code: criteria on the whole conversation,
groundedness and relevance on the turns each assertion covers, then pass rates over repeats.

Each scenario is judged as a small table through `judge_table` (evalbook.judge.stage), with the
profile's judge pins and only the scenario's own settings changed, so the prompts, the cache,
the retries, the redaction and the pre-flight budget are the judge's:
- **criteria**: one row per transcript (the whole conversation, which the criteria prompt lays
  out turn by turn), judged on the scenario's `criteria`. A criterion passes a repeat when the
  judge says it is met; its rationale is kept.
- **assertions**: one row per assistant reply the assertion covers (`every` reply, the `last`,
  or reply N; the assistant's written opening is not a reply), its question the user message
  before it. `grounded` is judged against the assertion's `ground_truth`, `relevant` against
  that question; a reply passes at the assertion's threshold, a repeat when every covered reply
  passed (unjudged when one is unscored and none failed).
- A transcript whose conversation has no reply to judge, and an assertion that covers no reply
  in any repeat, are not passes: each is named in `nothing_to_score` (the scenario, the
  assertion and why), and judging that scores nothing at all raises NothingToScore.

Outcomes per scenario (evalbook.scenarios.outcomes): for each criterion, each assertion and the
scenario as a whole (every criterion and assertion passed), the pass rate over repeats with its
Wilson interval, pass^k and pass@k; and the spread of the criteria score (share met) between
repeats.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from evalbook.errors import EvalbookError
from evalbook.judge.stage import judge_table
from evalbook.replycache import ReplyCache
from evalbook.redaction import Redactor
from evalbook.scenarios.conversation import Transcript
from evalbook.scenarios.outcomes import pass_summary
from evalbook.scenarios.spec import Assertion, Scenario

GROUND_TRUTH = "assertion_ground_truth"
METRIC_OF = {"grounded": "groundedness", "relevant": "relevance"}


class NothingToScore(EvalbookError, RuntimeError):
    """Scenarios were judged, yet no transcript and no assertion had anything to score."""


def replies(transcript: Transcript) -> list[tuple[int, str, str]]:
    """(reply number from 1, the user message before it, the reply) for each assistant reply;
    an opening written in the scenario file is not one."""
    found, question = [], ""
    for position, turn in enumerate(transcript.turns):
        if turn["role"] == "user":
            question = turn["content"]
        elif position > 0 or question:  # turn 0 by the assistant is its written opening
            found.append((len(found) + 1, question, turn["content"]))
    return found


def covered(assertion: Assertion, transcript: Transcript) -> list[tuple[int, str, str]]:
    every = replies(transcript)
    if assertion.turn == "every":
        return every
    if assertion.turn == "last":
        return every[-1:]
    return [reply for reply in every if reply[0] == assertion.turn]


def transcript_id(transcript: Transcript) -> str:
    return f"{transcript.scenario_id}#{transcript.repeat}"


def _config_for(judge: dict[str, Any], metric: str, threshold: float | None = None,
                goals: Sequence[str] = ()) -> dict[str, Any]:
    config = copy.deepcopy(judge)
    for name, section in config["metrics"].items():
        section["enabled"] = name == metric
    if metric == "criteria":
        config["metrics"]["criteria"]["goals"] = list(goals)
    else:
        config["metrics"][metric]["threshold"] = threshold
    config["ground_truth_column"] = GROUND_TRUTH
    config["sample_size"] = None
    return config


def _table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["id", "question", "generated_answer", "source", "conversation", GROUND_TRUTH])


def judge_scenario(scenario: Scenario, transcripts: Sequence[Transcript], judge: dict[str, Any], cache: ReplyCache,
                   embed: Callable | None, http_transport=None, redactor: Redactor | None = None,
                   progress=None, on_estimate=None) -> dict[str, Any]:
    """One scenario's transcripts judged; its outcomes, each transcript's verdicts, and what had
    nothing to score."""
    nothing: list[str] = []
    verdicts: dict[str, dict[str, Any]] = {transcript_id(t): {"criteria": None, "assertions": []} for t in transcripts}
    calls = Counter()
    judged_any = False
    labels: set[str] = set()

    def run(config, rows):
        outcome = judge_table(_table(rows), config, cache, embed, seed=0, http_transport=http_transport,
                              progress=progress, on_estimate=on_estimate, redactor=redactor)
        totals = outcome.summary["totals"]
        calls.update({key: totals[key] for key in ("calls", "cache_hits", "errors")})
        labels.add(outcome.models_judge["label"])
        return outcome.records

    if scenario.criteria:
        rows = []
        for t in transcripts:
            said = replies(t)
            if said:
                rows.append({"id": transcript_id(t), "question": said[0][1], "generated_answer": said[-1][2],
                             "source": None, "conversation": [dict(turn) for turn in t.turns], GROUND_TRUTH: None})
            else:
                nothing.append(f"scenario {scenario.id!r}, repeat {t.repeat}: the criteria had nothing to score "
                               f"(no assistant reply; the conversation ended as {t.end_reason})")
        if rows:
            judged_any = True
            records = run(_config_for(judge, "criteria", goals=scenario.criteria), rows)
            for row in rows:
                record = records[row["id"]]["criteria"]
                verdicts[row["id"]]["criteria"] = {
                    "score": record["score"], "unscored_reason": record["unscored_reason"],
                    "criteria": record.get("criteria")}
    for index, assertion in enumerate(scenario.assertions):
        name = f"{assertion.kind} on {'reply ' + str(assertion.turn) if isinstance(assertion.turn, int) else assertion.turn + ' reply'}"
        rows = []
        for t in transcripts:
            for number, question, reply in covered(assertion, t):
                rows.append({"id": f"{transcript_id(t)}#reply{number}", "question": question, "generated_answer": reply,
                             "source": None, "conversation": None, GROUND_TRUTH: assertion.ground_truth,
                             "_transcript": transcript_id(t), "_reply": number})
        answered = [row for row in rows if row["generated_answer"].strip()]
        if not answered:
            nothing.append(f"scenario {scenario.id!r}: assertion {index + 1} ({name}) had nothing to score: "
                           f"no transcript has {'that reply' if rows == [] else 'a non-empty reply there'}")
            for t in transcripts:
                verdicts[transcript_id(t)]["assertions"].append({"passed": None, "replies": [],
                                                                "reason": "nothing to score"})
            continue
        judged_any = True
        metric = METRIC_OF[assertion.kind]
        records = run(_config_for(judge, metric, threshold=assertion.threshold),
                      [{k: v for k, v in row.items() if not k.startswith("_")} for row in answered])
        for t in transcripts:
            mine = [row for row in rows if row["_transcript"] == transcript_id(t)]
            judged = []
            for row in mine:
                record = records.get(row["id"], {}).get(metric) if row in answered else None
                judged.append({"reply": row["_reply"],
                               "score": None if record is None else record["score"],
                               "passed": None if record is None else record["passed"],
                               "unscored_reason": "empty reply" if record is None else record["unscored_reason"],
                               "detail": None if record is None else {key: record[key] for key in
                                                                      ("statements", "generated_questions") if key in record}})
            passes = [entry["passed"] for entry in judged]
            passed = (None if not passes else False if False in passes else None if None in passes else True)
            verdicts[transcript_id(t)]["assertions"].append({"passed": passed, "replies": judged,
                                                            "reason": None if mine else "no reply there"})
    outcomes = _outcomes(scenario, transcripts, verdicts)
    return {"outcomes": outcomes, "transcripts": verdicts, "nothing_to_score": nothing, "judged": judged_any,
            "calls": dict(calls), "labels": sorted(labels)}


def _outcomes(scenario: Scenario, transcripts: Sequence[Transcript], verdicts: dict[str, dict[str, Any]]):
    per_criterion = []
    for index, criterion in enumerate(scenario.criteria):
        met = []
        for t in transcripts:
            judged = verdicts[transcript_id(t)]["criteria"]
            entries = (judged or {}).get("criteria") or []
            met.append(entries[index]["met"] if len(entries) > index and judged["score"] is not None else None)
        per_criterion.append({"criterion": criterion, **pass_summary(met)})
    per_assertion = []
    for index, assertion in enumerate(scenario.assertions):
        passed = [verdicts[transcript_id(t)]["assertions"][index]["passed"] for t in transcripts]
        per_assertion.append({"kind": assertion.kind, "turn": assertion.turn, "threshold": assertion.threshold,
                              "threshold_text": assertion.threshold_text, **pass_summary(passed)})
    overall = []
    for t in transcripts:
        parts = [c["met"] for c in (verdicts[transcript_id(t)]["criteria"] or {}).get("criteria") or []]
        if scenario.criteria and len(parts) != len(scenario.criteria):
            parts = [None]
        parts += [a["passed"] for a in verdicts[transcript_id(t)]["assertions"]]
        overall.append(None if not parts or None in parts else all(parts))
    scores = [v["criteria"]["score"] for v in verdicts.values() if v["criteria"] and v["criteria"]["score"] is not None]
    spread = {"n_scored": len(scores), "min": min(scores, default=None), "max": max(scores, default=None),
              "std": float(np.std(scores, ddof=1)) if len(scores) > 1 else None}
    return {"overall": pass_summary(overall), "criteria": per_criterion, "assertions": per_assertion,
            "criteria_score_spread": spread}


def judge_scenarios(scenarios: Sequence[Scenario], transcripts: Sequence[Transcript], judge: dict[str, Any],
                    cache: ReplyCache, embed: Callable | None, http_transport=None,
                    redactor: Redactor | None = None, progress=None, on_estimate=None) -> dict[str, Any]:
    """Every scenario of the file judged on its transcripts; NothingToScore when none had anything."""
    by_scenario: dict[str, list[Transcript]] = {}
    for t in transcripts:
        by_scenario.setdefault(t.scenario_id, []).append(t)
    results = {s.id: judge_scenario(s, by_scenario.get(s.id, []), judge, cache, embed, http_transport, redactor,
                                    progress, on_estimate)
               for s in scenarios if s.id in by_scenario}
    nothing = [line for result in results.values() for line in result["nothing_to_score"]]
    if not any(result["judged"] for result in results.values()):
        raise NothingToScore("no scenario had anything to score, so nothing is reported as passed: "
                             + "; ".join(nothing))
    calls = Counter()
    for result in results.values():
        calls.update(result["calls"])
    return {"status": "ran", "scenarios": results, "nothing_to_score": nothing, "calls": dict(calls),
            "labels": sorted({label for r in results.values() for label in r["labels"]})}

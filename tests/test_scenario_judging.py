"""Transcripts judged by the judge stage's own code against a scripted judge on 127.0.0.1:
criteria on the whole conversation, grounded and relevant assertions on the replies they cover,
pass rates with Wilson intervals, pass^k beside pass@k, the spread between repeats, and the
loud 'nothing to score'."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from evalbook.replycache import ReplyCache
from evalbook.scenarios.conversation import Transcript
from evalbook.scenarios.judging import NothingToScore, covered, judge_scenarios, replies
from evalbook.scenarios.outcomes import wilson_interval
from evalbook.scenarios.spec import parse_scenarios
from faultserver import FaultServer, schema_of

BLOCK = re.compile(r"<<<(\w+)\n(.*?)\n\1>>>", re.DOTALL)


def scripted_judge(body: dict) -> str:
    """Criteria met, and statements supported, exactly when the text judged names the bottle bank."""
    prompt = body["messages"][-1]["content"]
    blocks = dict(BLOCK.findall(prompt))
    properties = schema_of(body)["properties"]
    if "criteria" in properties:
        said = "bottle bank" in blocks["TRANSCRIPT"]
        n = properties["criteria"]["minItems"]
        return json.dumps({"criteria": [{"criterion": i, "met": said if i == 1 else True,
                                         "rationale": f"criterion {i}: {'named' if said else 'not named'}"}
                                        for i in range(1, n + 1)]})
    if "statements" in properties:
        verdict = int("bottle bank" in blocks["ANSWER"])
        return json.dumps({"statements": [{"statement": "s", "verdict": verdict, "justification": "j"}]})
    return json.dumps({"questions": ["Where does glass go?"] * properties["questions"]["minItems"]})


SCENARIOS = parse_scenarios({"version": 1, "scenarios": [
    {"id": "glass", "goal": "g", "persona": "p", "first_speaker": "user", "max_turns": 3,
     "criteria": ["names the bottle bank", "is polite"],
     "assertions": [{"grounded": {"threshold": "1/1", "ground_truth": "Glass goes to a bottle bank."}},
                    {"relevant": {"threshold": 0.5, "turn": 1}},
                    {"grounded": {"threshold": 0.5, "turn": 2, "ground_truth": "x"}}]},
    {"id": "short", "goal": "g", "persona": "p", "first_speaker": "user", "max_turns": 3, "criteria": ["answers"],
     "assertions": [{"grounded": {"threshold": 0.5, "turn": 3, "ground_truth": "z"}}]},
    {"id": "greeted", "goal": "g", "persona": "p", "first_speaker": "assistant", "opening": "Hello!",
     "max_turns": 2, "criteria": ["answers"], "assertions": [{"grounded": {"threshold": 0.5, "ground_truth": "y"}}]},
]}, "scenarios.yaml")


def transcript(sid: str, repeat: int, turns: list[tuple[str, str]], end: str = "max_turns") -> Transcript:
    return Transcript(sid, repeat, 7, [{"role": r, "content": c} for r, c in turns], end_reason=end)


TRANSCRIPTS = [
    transcript("glass", 0, [("user", "Where does glass go?"), ("assistant", "To the bottle bank."),
                            ("user", "Thanks"), ("assistant", "The bottle bank takes jars too.")]),
    transcript("glass", 1, [("user", "Where does glass go?"), ("assistant", "In the teal bin."),
                            ("user", "Sure?"), ("assistant", "Yes, the bottle bank.")]),
    transcript("glass", 2, [("user", "Where does glass go?"), ("assistant", "To the bottle bank.")], "goal_met"),
    transcript("short", 0, [("user", "Where does glass go?"), ("assistant", "To the bottle bank.")], "goal_met"),
    # the assistant's written opening is no reply: a simulator that failed at once leaves nothing to judge
    transcript("greeted", 0, [("assistant", "Hello!")], "simulator_error"),
]


@pytest.fixture
def judge_config(default_judge_config):
    return default_judge_config


def embed(texts):
    """A stand-in for the pinned embedder: equal texts, equal vectors (relevance is its cosine)."""
    return np.asarray([[1.0, float(len(t) % 7)] for t in texts])


def judged(tmp_path, judge_config, server):
    judge_config.update(base_url=server.base_url, max_retries=0, backoff_seconds=0.0)
    cache = ReplyCache(tmp_path / "judge.sqlite")
    return judge_scenarios(SCENARIOS, TRANSCRIPTS, judge_config, cache, embed)


def test_replies_skip_the_written_opening_and_assertions_cover_their_turns():
    assert [n for n, _, _ in replies(TRANSCRIPTS[0])] == [1, 2]
    assert replies(TRANSCRIPTS[4]) == []
    every, first, second = SCENARIOS[0].assertions
    assert [n for n, _, _ in covered(every, TRANSCRIPTS[1])] == [1, 2]
    assert covered(first, TRANSCRIPTS[1])[0] == (1, "Where does glass go?", "In the teal bin.")
    assert covered(second, TRANSCRIPTS[2]) == []


def test_criteria_and_assertions_give_pass_rates_with_intervals_pass_all_and_pass_any(tmp_path, judge_config):
    with FaultServer(reply=scripted_judge) as server:
        result = judged(tmp_path, judge_config, server)
        # one criteria call per transcript with a reply; one grounded call per covered reply and one
        # relevant call per first reply, but the same reply to the same question is the same
        # judge request, answered by the cache: repeat 2's first reply is repeat 0's
        assert server.chat_calls == 3 + (5 - 1) + (3 - 1) + 2 + 1  # and glass's reply 2 (2), short's criteria (1)
    glass = result["scenarios"]["glass"]["outcomes"]
    named, polite = glass["criteria"]
    assert (named["n_judged"], named["n_passed"], named["pass_all"], named["pass_any"]) == (3, 3, True, True)
    assert polite["pass_rate"] == 1.0
    assert named["interval"]["low"] == pytest.approx(wilson_interval(3, 3)[0], abs=1e-12)
    grounded, relevant, second = glass["assertions"]
    # repeat 1's first reply names no bottle bank: unsupported, so the every-reply assertion fails there
    assert (grounded["n_passed"], grounded["n_judged"], grounded["pass_all"], grounded["pass_any"]) == (2, 3, False, True)
    assert grounded["interval"]["low"] == pytest.approx(wilson_interval(2, 3)[0], abs=1e-12)
    assert relevant["n_judged"] == 3
    # every criterion and assertion passed in repeat 0; repeat 1 failed one; repeat 2 has no reply 2 to judge
    assert (second["n_judged"], second["n_unjudged"]) == (2, 1)
    assert (glass["overall"]["n_passed"], glass["overall"]["n_judged"], glass["overall"]["n_unjudged"]) == (1, 2, 1)
    assert (glass["overall"]["pass_all"], glass["overall"]["pass_any"]) == (False, True)
    assert glass["criteria_score_spread"] == {"n_scored": 3, "min": 1.0, "max": 1.0, "std": 0.0}
    verdicts = result["scenarios"]["glass"]["transcripts"]["glass#1"]
    assert [r["passed"] for r in verdicts["assertions"][0]["replies"]] == [False, True]
    assert verdicts["criteria"]["criteria"][0]["rationale"] == "criterion 1: named"


def test_what_had_nothing_to_score_is_named_and_never_a_pass(tmp_path, judge_config):
    with FaultServer(reply=scripted_judge) as server:
        result = judged(tmp_path, judge_config, server)
    nothing = result["nothing_to_score"]
    assert any("scenario 'short': assertion 1 (grounded on reply 3) had nothing to score" in line for line in nothing)
    assert any("scenario 'greeted', repeat 0: the criteria had nothing to score" in line
               and "simulator_error" in line for line in nothing)
    greeted = result["scenarios"]["greeted"]["outcomes"]
    assert greeted["overall"]["n_judged"] == 0 and greeted["overall"]["pass_all"] is None
    assert result["scenarios"]["short"]["outcomes"]["assertions"][0]["pass_rate"] is None
    assert result["scenarios"]["short"]["outcomes"]["overall"]["pass_all"] is None


def test_judging_only_transcripts_without_replies_raises(tmp_path, judge_config):
    with FaultServer(reply=scripted_judge) as server:
        judge_config.update(base_url=server.base_url)
        with pytest.raises(NothingToScore, match="greeted"):
            judge_scenarios(SCENARIOS, TRANSCRIPTS[4:], judge_config, ReplyCache(tmp_path / "j.sqlite"), embed)
        assert server.chat_calls == 0


def test_a_rerun_is_answered_by_the_judge_cache(tmp_path, judge_config):
    with FaultServer(reply=scripted_judge) as server:
        first = judged(tmp_path, judge_config, server)
        calls = server.chat_calls
        second = judged(tmp_path, judge_config, server)
        assert server.chat_calls == calls
    assert json.dumps({k: v["outcomes"] for k, v in second["scenarios"].items()}) == \
        json.dumps({k: v["outcomes"] for k, v in first["scenarios"].items()})
    assert second["calls"]["calls"] == 0

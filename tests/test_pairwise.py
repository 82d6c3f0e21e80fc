"""Pairwise A/B judging in both orders against scripted judges on 127.0.0.1 (evalbook.judge.pairwise)."""

from __future__ import annotations

import json
import re

import pytest
from scipy.stats import binomtest

from evalbook.judge.client import JudgeClient
from evalbook.judge.pairwise import (Pair, outcome, pair_requests, pair_template, pairwise_summary, read_verdict,
                                     repeated_summary)
from evalbook.judge.stage import settings_from
from evalbook.replycache import ReplyCache
from faultserver import FaultServer

BLOCKS = re.compile(r"<<<(ANSWER_[12])\n(.*?)\n\1>>>", re.DOTALL)
QUESTIONS = {f"q{i}": f"Question {i}?" for i in range(8)}
BASELINE = {qid: f"Short answer {i}." for i, qid in enumerate(QUESTIONS)}
CANDIDATE = {qid: f"MARKER full answer {i}." for i, qid in enumerate(QUESTIONS)}


def first_slot(body) -> str:
    return json.dumps({"reasoning": "The first one reads better.", "verdict": "1"})


def marker(body) -> str:
    answers = dict(BLOCKS.findall(body["messages"][-1]["content"]))
    better = "1" if "MARKER" in answers["ANSWER_1"] else "2"
    return json.dumps({"reasoning": "It carries the marker.", "verdict": better})


def judged(tmp_path, config, script, answers_b=CANDIDATE):
    with FaultServer(reply=script) as server:
        config.update(base_url=server.base_url)
        settings = settings_from(config)
        requests = [request for qid in QUESTIONS for request in
                    pair_requests(qid, QUESTIONS[qid], BASELINE[qid], answers_b[qid], settings, pair_template())]
        replies = JudgeClient(settings, ReplyCache(tmp_path / "judge.sqlite")).run(requests)
        assert server.chat_calls == 2 * len(QUESTIONS)
    verdicts = {r.request.example_id: read_verdict(r.text) for r in replies}
    return [Pair(qid, verdicts[f"{qid}#ab"], verdicts[f"{qid}#ba"]) for qid in QUESTIONS]


def test_a_judge_that_always_picks_the_first_slot_is_never_consistent(tmp_path, default_judge_config):
    summary = pairwise_summary(judged(tmp_path, default_judge_config, first_slot))
    assert summary["outcomes"]["inconsistent"] == 8 and summary["position_bias"]["consistency"] == 0.0
    assert summary["position_bias"]["first_slot_rate"] == 1.0
    assert summary["position_bias"]["first_slot_p_value"] == pytest.approx(binomtest(16, 16, 0.5).pvalue)
    assert summary["win_rate_b"] is None and summary["sign_test"] is None


def test_a_judge_that_follows_the_marker_is_consistent_and_names_the_winner(tmp_path, default_judge_config):
    summary = pairwise_summary(judged(tmp_path, default_judge_config, marker))
    assert summary["outcomes"]["B"] == 8 and summary["position_bias"]["consistency"] == 1.0
    assert summary["position_bias"]["first_slot_rate"] == 0.5
    assert summary["win_rate_b"] == {"mean": 1.0, "low": 1.0, "high": 1.0, "n": 8}
    assert summary["sign_test"]["p_value"] == pytest.approx(2 * 0.5 ** 8)


def test_the_answers_are_shown_under_neutral_labels_in_both_orders(default_judge_config):
    requests = pair_requests("q", "Q?", "from the baseline", "from the candidate", settings_from(default_judge_config),
                             pair_template())
    ab, ba = (dict(BLOCKS.findall(r.prompt)) for r in requests)
    assert (ab["ANSWER_1"], ba["ANSWER_1"]) == ("from the baseline", "from the candidate")
    assert "baseline" not in pair_template().text and "candidate" not in pair_template().text


@pytest.mark.parametrize("ab, ba, expected", [
    ("1", "2", "A"), ("2", "1", "B"), ("tie", "tie", "tie"), ("1", "1", "inconsistent"),
    ("tie", "1", "inconsistent"), ("invalid", "2", "invalid")])
def test_two_verdicts_give_one_outcome(ab, ba, expected):
    assert outcome(ab, ba) == expected


def test_ties_and_inconsistent_pairs_count_half_and_invalid_pairs_not_at_all():
    pairs = [Pair("a", "2", "1"), Pair("b", "tie", "tie"), Pair("c", "1", "1"), Pair("d", "1", "2"),
             Pair("e", "yes.", "1")]
    summary = pairwise_summary(pairs)
    assert summary["win_rate_b"]["mean"] == (1 + 0.5 + 0.5 + 0) / 4 and summary["outcomes"]["invalid"] == 1
    assert read_verdict("yes.") == "invalid"


@pytest.mark.parametrize("verdicts", [("1", "1"), ("2", "2"), ("tie", "1"), ("2", "tie")])
def test_no_pair_decided_consistently_gives_no_win_rate(verdicts):
    """31 pairs whose two orders disagree (issue 47): their 0.5s are the slot's doing, so they make
    no win rate, where they made 0.500 [0.500, 0.500], a certain tie with no width."""
    pairs = [Pair(f"q{i}", *verdicts) for i in range(31)] + [Pair("q31", "yes.", "1")]
    summary = pairwise_summary(pairs)
    assert summary["outcomes"]["inconsistent"] == 31 and summary["outcomes"]["invalid"] == 1
    assert summary["win_rate_b"] is None and summary["sign_test"] is None
    assert summary["position_bias"]["n_consistent"] == 0 and summary["position_bias"]["consistency"] == 0.0


def test_repeats_whose_orders_never_agree_give_no_win_rate():
    questions = [[Pair(f"q{i}", "1", "1"), Pair(f"q{i}", "2", "2"), Pair(f"q{i}", "tie", "2")] for i in range(5)]
    summary = repeated_summary(questions)
    assert summary["outcomes"]["inconsistent"] == 15 and summary["win_rate_b"] is None


def test_one_consistent_pair_among_inconsistent_ones_gives_the_win_rate():
    pairs = [Pair("q0", "2", "1")] + [Pair(f"q{i}", "1", "1") for i in range(1, 31)]
    win = pairwise_summary(pairs)["win_rate_b"]
    assert win["n"] == 31 and win["mean"] == pytest.approx((1 + 30 * 0.5) / 31)
    assert 0.5 <= win["low"] < win["high"] <= 1

"""The context metrics under one protocol (issue 48): one definition of an unusable chunk verdict
(evalbook.judge.chunks), read by the score math and by the stage alike, and each judged chunk as
an outcome of the check protocol."""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace

import pytest

from evalbook.checks.protocol import CheckOutcome, check_summary
from evalbook.judge.chunks import (EMPTY, EMPTY_CHUNK, KINDS, NAME as CHUNK_CHECK, STATUS, UNUSABLE, VERDICTS,
                                   ChunkVerdict, chunk_outcome, context_scores, judged_outcomes, reply_verdict,
                                   unusable_reason)
from evalbook.judge.client import JudgeReply, JudgeRequest
from evalbook.judge.context import context_judgments
from evalbook.judge.score import Score

CHUNK = "The teal bin is emptied every second Tuesday."
FAILED = ChunkVerdict("failed", "judge call failed: HTTP 500: internal error")


def test_a_failed_call_leaves_the_question_unscored_in_the_score_math_as_in_the_stage():
    """The regression of issue 48. Before it, chunks.context_scores counted invalid and unsupported
    only, so a failed call was a judged chunk that is not relevant: [failed, relevant] scored 0.5
    on relevance and on precision, while the stage's own list (context.py) left the question
    unscored. A failed call says nothing about its chunk: unscored is right."""
    scores = context_scores([FAILED, ChunkVerdict("relevant", "it names the day", "Tuesday")])
    assert (scores.relevance, scores.precision, scores.n_failed) == (None, None, 1)
    assert scores.unscored_reason == "1 of 2 chunk verdicts are invalid or unsupported or failed"


def test_an_unusable_verdict_is_one_that_no_reply_a_bad_reply_or_a_false_quote_gives():
    def answered(text: str | None = None, error: str | None = None) -> JudgeReply:
        request = JudgeRequest(metric=CHUNK_CHECK, example_id="s01#chunk1", prompt="p", schema={}, key_parts={})
        return JudgeReply(request, text=text, error=error)

    relevant = json.dumps({"verdict": "relevant", "reason": "it says so", "quote": "every second Tuesday"})
    misquoted = json.dumps({"verdict": "partial", "reason": "it says so", "quote": "every Monday"})
    assert reply_verdict(answered(relevant), CHUNK).verdict == "relevant"
    assert (reply_verdict(None, CHUNK).verdict, reply_verdict(None, CHUNK).reason) == ("failed", "no reply")
    assert reply_verdict(answered(error="HTTP 500"), CHUNK).reason == "judge call failed: HTTP 500"
    assert reply_verdict(answered("yes."), CHUNK).verdict == "invalid"
    assert reply_verdict(answered(misquoted), CHUNK).verdict == "unsupported"
    assert reply_verdict(None, " \u200b ") == EMPTY_CHUNK  # never sent, so no reply is expected
    assert UNUSABLE == ("invalid", "unsupported", "failed")
    assert set(KINDS) == {*VERDICTS, *UNUSABLE, EMPTY}


@pytest.mark.parametrize("kind", UNUSABLE)
def test_each_unusable_verdict_alone_unscores_its_question_counted_over_the_judged_chunks(kind):
    verdicts = [ChunkVerdict("relevant"), EMPTY_CHUNK, ChunkVerdict(kind, "why"), ChunkVerdict("irrelevant")]
    assert unusable_reason(verdicts) == "1 of 3 chunk verdicts are invalid or unsupported or failed"
    assert context_scores(verdicts).unscored_reason == unusable_reason(verdicts)
    assert unusable_reason([ChunkVerdict("relevant"), EMPTY_CHUNK, ChunkVerdict("partial")]) is None


def test_each_judged_chunk_is_an_outcome_of_the_check_protocol_and_an_empty_one_has_none():
    statuses = {kind: chunk_outcome(ChunkVerdict(kind, "the reason")).status for kind in (*VERDICTS, *UNUSABLE)}
    assert statuses == {"relevant": "pass", "partial": "fail", "irrelevant": "fail",
                        "invalid": "error", "unsupported": "error", "failed": "error"}
    assert statuses == STATUS and chunk_outcome(EMPTY_CHUNK) is None
    outcome = chunk_outcome(ChunkVerdict("unsupported", "the quote is not in the chunk word for word", "x",
                                         claimed="relevant"))
    assert outcome == CheckOutcome(CHUNK_CHECK, "error", "unsupported: the quote is not in the chunk word for word",
                                   {"quote": "x", "claimed": "relevant"})
    assert chunk_outcome(ChunkVerdict("relevant")).reason == "relevant"  # a verdict with no reason still has one


def test_context_relevance_is_the_pass_rate_of_the_chunk_outcomes():
    for kinds in itertools.product(("relevant", "partial", "irrelevant", EMPTY), repeat=4):
        verdicts = [EMPTY_CHUNK if kind == EMPTY else ChunkVerdict(kind) for kind in kinds]
        outcomes = judged_outcomes(verdicts)
        assert context_scores(verdicts).relevance == (check_summary(outcomes)["pass_rate"] if outcomes else None)


def chunk_row(kinds: tuple[str, ...]) -> tuple[SimpleNamespace, dict, list[ChunkVerdict]]:
    """A row with one chunk per kind, the judge's replies that give each kind, and the verdicts."""
    chunks, replies = [], {}
    texts = {"relevant": json.dumps({"verdict": "relevant", "reason": "r", "quote": "RANK"}),
             "partial": json.dumps({"verdict": "partial", "reason": "p", "quote": "RANK"}),
             "irrelevant": json.dumps({"verdict": "irrelevant", "reason": "i", "quote": None}),
             "invalid": "yes.", "unsupported": json.dumps({"verdict": "relevant", "reason": "u", "quote": "absent"})}
    for rank, kind in enumerate(kinds, 1):
        chunks.append("" if kind == EMPTY else f"RANK {rank}")
        request = JudgeRequest(metric=CHUNK_CHECK, example_id=f"q#chunk{rank}", prompt="p", schema={}, key_parts={})
        if kind in texts:
            replies[(f"q#chunk{rank}", CHUNK_CHECK, 0)] = JudgeReply(request, text=texts[kind])
        elif kind == "failed" and rank % 2:  # a failed call; at an even rank, no reply at all
            replies[(f"q#chunk{rank}", CHUNK_CHECK, 0)] = JudgeReply(request, error="HTTP 500")
    row = SimpleNamespace(id="q", question="When?", retrieved_contexts=chunks, retrieved_ids=None, gold_id=None,
                          gold_ids=None, reference_answer="On Tuesdays.")
    return row, replies, [reply_verdict(replies.get((f"q#chunk{r}", CHUNK_CHECK, 0)), c)
                          for r, c in enumerate(chunks, 1)]


def context_config(*names: str) -> dict:
    return {"ground_truth_column": "reference_answer",
            "metrics": {name: {"enabled": True, "threshold": 0.5} for name in names}}


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_the_stage_and_the_score_math_agree_on_every_mix_of_verdicts(n):
    config = context_config("context_relevance", "context_precision")
    for kinds in itertools.product(KINDS, repeat=n):
        row, replies, verdicts = chunk_row(kinds)
        assert [v.verdict for v in verdicts] == list(kinds)
        judged, _ = context_judgments(row, replies, config, 1)
        scores = context_scores(verdicts)
        relevance, precision = judged["context_relevance"][0][0], judged["context_precision"][0][0]
        assert relevance == (Score(scores.relevance) if scores.unscored_reason is None
                             else Score.unscored(scores.unscored_reason)), kinds
        expected_precision = (Score(0.0) if not kinds else Score(scores.precision) if scores.unscored_reason is None
                              else Score.unscored(scores.unscored_reason))
        assert precision == expected_precision, kinds
        detail = judged["context_relevance"][0][1]
        assert {kind: detail[f"n_{kind}"] for kind in KINDS} == {kind: kinds.count(kind) for kind in KINDS}

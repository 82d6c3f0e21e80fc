"""The context metrics under one protocol (issue 48): one definition of an unusable chunk verdict
(evalbook.judge.chunks), read by the score math and by the stage alike; each judged chunk as an
outcome of the check protocol; and the per-metric behaviour as entries of
evalbook.judge.context's table, not tests of a metric's name."""

from __future__ import annotations

import ast
import itertools
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from evalbook.checks.protocol import CheckOutcome, check_summary
from evalbook.judge import context
from evalbook.judge.chunks import (EMPTY, EMPTY_CHUNK, KINDS, NAME as CHUNK_CHECK, STATUS, UNUSABLE, VERDICTS,
                                   ChunkVerdict, chunk_outcome, context_scores, judged_outcomes, reply_verdict,
                                   unusable_reason)
from evalbook.judge.client import JudgeReply, JudgeRequest
from evalbook.judge.context import (CHUNK_VERDICTS, CONTEXT_METRICS, CONTEXT_TABLE, NOTHING_RETRIEVED, RECALL_CLAIMS,
                                    ContextMetric, Judgment, context_judgments, context_requests)
from evalbook.judge.score import Score
from evalbook.metrics import of_kind

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


def test_the_context_metrics_are_the_registry_s_in_its_order_each_one_entry_of_the_table():
    registered = [m.name for m in of_kind("judge") if m.reads == "retrieval"]
    assert [m.NAME for m in CONTEXT_METRICS] == registered
    assert {m.NAME for m in CONTEXT_TABLE} == set(registered)
    with pytest.raises(LookupError, match="context_recall"):
        context._in_registry_order(CONTEXT_TABLE[:2])
    with pytest.raises(LookupError, match="context_novelty"):
        context._in_registry_order((*CONTEXT_TABLE, replace(CONTEXT_TABLE[0], NAME="context_novelty")))


def test_context_py_names_each_metric_once_in_its_table_and_tests_no_name():
    """A test of a metric's name anywhere else in the module is behaviour the table should hold."""
    source = Path(context.__file__).read_text("utf-8")
    names = {m.NAME for m in CONTEXT_METRICS}
    literals = [node.value for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.Constant) and node.value in names]
    assert sorted(literals) == sorted(names)


def test_what_each_metric_gives_when_nothing_was_retrieved_is_its_entry_s():
    by_name = {m.NAME: m for m in CONTEXT_METRICS}
    nothing = Judgment({"n_chunks": 0}, NOTHING_RETRIEVED, nothing_retrieved=True)
    assert by_name["context_relevance"].judged(nothing) == (Score.unscored(NOTHING_RETRIEVED), {"n_chunks": 0})
    assert by_name["context_precision"].judged(nothing) == (Score(0.0), {"n_chunks": 0})
    assert by_name["context_recall"].judged(replace(nothing, detail={"n_claims": 0}))[0] == Score(0.0)
    assert [m.reads for m in CONTEXT_METRICS] == [CHUNK_VERDICTS, CHUNK_VERDICTS, RECALL_CLAIMS]


def test_a_new_metric_of_the_chunk_verdicts_is_one_entry_and_asks_the_judge_nothing_more(monkeypatch,
                                                                                          default_judge_config):
    """A share of partial verdicts, as a new entry: its requests are the chunk verdicts' (shared),
    its scores, record and summary come from the entry alone."""
    from evalbook.judge.chunks import chunk_template
    from evalbook.judge.stage import settings_from

    partial_share = ContextMetric("context_partial_share", CHUNK_VERDICTS,
                                  lambda scores: scores.n_partial / (scores.n_chunks - scores.n_empty),
                                  nothing_retrieved=None,
                                  summary=(lambda entries: {"n_scored_here": sum(e["score"] is not None
                                                                                 for e in entries)},))
    monkeypatch.setattr(context, "CONTEXT_METRICS", (*CONTEXT_METRICS, partial_share))
    row, replies, _ = chunk_row(("relevant", "partial", EMPTY, "irrelevant"))
    config = context_config("context_relevance", "context_partial_share")
    judged, listed = context_judgments(row, replies, config, 1)
    assert judged["context_partial_share"][0][0] == Score(1 / 3)
    assert judged["context_relevance"][0][0] == Score(1 / 3)
    assert [c["verdict"] for c in listed] == ["relevant", "partial", EMPTY, "irrelevant"]
    templates = {name: chunk_template() for name in config["metrics"]}
    settings = settings_from(default_judge_config)
    rows = pd.DataFrame([vars(row)])
    alone = context_requests(rows, context_config("context_relevance"), settings, templates, 1)
    assert [r.example_id for r in context_requests(rows, config, settings, templates, 1)] == [
        r.example_id for r in alone] == ["q#chunk1", "q#chunk2", "q#chunk4"]
    summary = partial_share.summary_fields([{"score": 1 / 3, "unscored_reason": None,
                                             "verdicts": ["relevant", "partial"]}], config)
    assert summary["n_scored_here"] == 1 and summary["verdicts"] == {"relevant": 1, "partial": 1}
    assert partial_share.REQUESTS == CHUNK_CHECK

"""The metric registry: one description per metric, read the same way by every consumer."""

from __future__ import annotations

import pytest
import seaborn as sns

from evalbook.metrics import BY_NAME, METRICS, SCORE_FLAGS, metric, names, of_kind


def test_every_metric_has_a_label_and_a_colour_blind_safe_colour():
    palette = set(sns.color_palette("colorblind").as_hex())
    assert [m.name for m in METRICS] == ["bertscore_f1", "bertscore_precision", "bertscore_recall",
                                         "sentence_cosine", "top_k_match", "mrr_at_k", "precision_at_k",
                                         "recall_at_k", "ndcg_at_k", "rank", "groundedness",
                                         "relevance", "criteria", "context_relevance", "context_precision",
                                         "context_recall", "facts"]
    assert {m.colour for m in METRICS} <= palette
    scores = [m for m in METRICS if m.kind not in ("retrieval", "check")]  # a check is drawn in no figure
    assert len({m.colour for m in scores}) == len(scores), "two score metrics share a colour"
    assert len({m.label for m in METRICS}) == len(METRICS)
    assert metric("rank").higher_is_better is False
    assert all(m.higher_is_better for m in METRICS if m.name != "rank")


def test_an_unknown_metric_is_an_error_that_lists_the_known_ones():
    with pytest.raises(ValueError, match="'f1'.*known metrics: bertscore_f1"):
        metric("f1")


def test_kinds_keep_the_registry_order():
    assert names("similarity") == ("bertscore_f1", "bertscore_precision", "bertscore_recall", "sentence_cosine")
    assert names("judge") == ("groundedness", "relevance", "criteria", "context_relevance", "context_precision",
                              "context_recall")
    assert [m.name for m in of_kind("judge") if m.reads == "retrieval"] == ["context_relevance", "context_precision",
                                                                           "context_recall"]
    assert [m.name for m in of_kind("retrieval")] == ["top_k_match", "mrr_at_k", "precision_at_k", "recall_at_k",
                                                      "ndcg_at_k", "rank"]
    assert set(BY_NAME) == {m.name for m in METRICS}
    assert "bertscore_f1" not in SCORE_FLAGS


EXAMPLE = {
    "id": "e1",
    "retrieval": {"top_k_match": True, "mrr_at_k": 0.5, "precision_at_k": 0.25, "recall_at_k": 1.0,
                  "ndcg_at_k": 0.625, "rank": 2},
    "answer_similarity": {"bertscore": {"precision": 0.5, "recall": 0.25, "f1": None}, "sentence_cosine": -0.125},
    "judge": {"status": "judged", "groundedness": {"score": 0.75}, "relevance": {"score": None}},
}


def test_a_metric_reads_its_value_from_where_it_sits_in_a_report_example():
    values = {m.name: m.value(EXAMPLE) for m in METRICS}
    assert values == {"bertscore_f1": None, "bertscore_precision": 0.5, "bertscore_recall": 0.25,
                      "sentence_cosine": -0.125, "top_k_match": 1.0, "mrr_at_k": 0.5, "precision_at_k": 0.25,
                      "recall_at_k": 1.0, "ndcg_at_k": 0.625, "rank": 2.0, "groundedness": 0.75,
                      "relevance": None, "criteria": None, "context_relevance": None,
                      "context_precision": None, "context_recall": None, "facts": None}


def test_a_judge_value_counts_only_for_a_judged_example():
    sampled_out = {**EXAMPLE, "judge": {"status": "not_sampled", "groundedness": {"score": 0.75}}}
    assert metric("groundedness").value(sampled_out) is None
    assert metric("groundedness").value({**EXAMPLE, "judge": None}) is None
    assert metric("top_k_match").value({**EXAMPLE, "retrieval": None}) is None


def test_a_metric_reads_its_summary_and_mean_from_the_report():
    report = {"answer_similarity_summary": {"bertscore_f1": {"mean": 0.8, "n": 3}},
              "retrieval_summary": {"top_k_match_rate": 0.5, "k": 3},
              "judge_summary": {"status": "ran", "metrics": {"groundedness": {"mean": 0.6}}}}
    assert metric("bertscore_f1").mean(report) == 0.8
    assert metric("top_k_match").mean(report) == 0.5
    assert metric("mrr_at_k").mean(report) is None  # a report written before MRR@k
    assert metric("mrr_at_k").mean({"retrieval_summary": {"mrr_at_k": 0.25, "k": 3}}) == 0.25
    assert metric("rank").mean(report) is None
    assert metric("groundedness").mean(report) == 0.6
    assert metric("criteria").summary(report) is None and metric("criteria").mean(report) is None
    assert metric("sentence_cosine").mean({"answer_similarity_summary": "garbled"}) is None


def test_the_retrieval_metrics_are_the_scored_table_s_retrieval_columns():
    from evalbook.score.retrieval import COLUMNS

    assert set(names("retrieval")) == set(COLUMNS)
    at_k = [m for m in of_kind("retrieval") if m.name != "rank"]
    assert all(m.in_comparison and m.value_range == (0.0, 1.0) and m.higher_is_better for m in at_k)
    # MRR@k shows beside top-k match wherever the headline metrics show
    assert [m.name for m in METRICS if m.headline and m.kind == "retrieval"] == ["top_k_match", "mrr_at_k"]

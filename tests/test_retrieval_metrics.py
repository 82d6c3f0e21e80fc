"""hit@k, precision@k, recall@k, MRR@k and nDCG@k (evalbook.score.retrieval): by hand, against
trec_eval (pytrec_eval), with several relevant documents, and from the example RAG service's
response as generate-local maps it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import pytrec_eval

from evalbook.generate.mapping import ResponseMapping
from evalbook.params import load_profile
from evalbook.score.retrieval import (COLUMNS, ndcg_at_k, precision_at_k, recall_at_k, reciprocal_rank_at_k,
                                      relevant_ranks, retrieval_columns, retrieval_scores)
from paths import ROOT

TREC_MEASURES = {"P_{k}": "precision_at_k", "recall_{k}": "recall_at_k", "ndcg_cut_{k}": "ndcg_at_k"}


# ---------------------------------------------------------------- by hand

def test_one_relevant_document_at_rank_2_of_3():
    scores = retrieval_scores({"d2"}, ["d1", "d2", "d3"], k=3)
    assert scores.rank == 2 and scores.top_k_match is True
    assert scores.precision_at_k == pytest.approx(1 / 3)
    assert scores.recall_at_k == 1.0
    assert scores.mrr_at_k == 0.5
    assert scores.ndcg_at_k == pytest.approx(1 / math.log2(3))


def test_two_of_three_relevant_documents_in_the_top_k():
    # relevant at ranks 1 and 3 of k = 4; the third relevant document was not retrieved
    scores = retrieval_scores({"a", "c", "z"}, ["a", "b", "c", "d", "e"], k=4)
    assert scores.precision_at_k == 0.5
    assert scores.recall_at_k == pytest.approx(2 / 3)
    assert scores.mrr_at_k == 1.0
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert scores.ndcg_at_k == pytest.approx((1 + 1 / math.log2(4)) / ideal)


def test_an_empty_retrieval_scores_zero_and_is_no_match():
    scores = retrieval_scores({"d1"}, [], k=5)
    assert (scores.rank, scores.top_k_match) == (None, False)
    assert (scores.precision_at_k, scores.recall_at_k, scores.mrr_at_k, scores.ndcg_at_k) == (0.0, 0.0, 0.0, 0.0)


def test_a_gold_document_past_k_keeps_its_rank_but_scores_zero_at_k():
    scores = retrieval_scores({"gold"}, ["x", "y", "gold"], k=2)
    assert (scores.rank, scores.top_k_match) == (3, False)
    assert (scores.precision_at_k, scores.recall_at_k, scores.mrr_at_k, scores.ndcg_at_k) == (0.0, 0.0, 0.0, 0.0)
    # the same list at k = 3 finds it
    assert retrieval_scores({"gold"}, ["x", "y", "gold"], k=3).mrr_at_k == pytest.approx(1 / 3)


def test_precision_divides_by_k_even_when_fewer_were_retrieved():
    assert precision_at_k(relevant_ranks({"a"}, ["a"]), k=5) == 0.2


def test_a_document_retrieved_twice_counts_once_at_its_first_rank():
    assert relevant_ranks({"a", "b"}, ["a", "a", "b", "a"]) == [1, 3]
    scores = retrieval_scores({"a"}, ["a", "a"], k=2)
    assert (scores.precision_at_k, scores.recall_at_k, scores.ndcg_at_k) == (0.5, 1.0, 1.0)


def test_ndcg_is_one_for_an_ideal_ranking_cut_at_k():
    # three relevant, k = 2: the ideal holds only two, so two relevant on top is perfect
    assert ndcg_at_k([1, 2], n_relevant=3, k=2) == pytest.approx(1.0)
    assert recall_at_k([1, 2], n_relevant=3, k=2) == pytest.approx(2 / 3)


@pytest.mark.parametrize("function, arguments", [
    (precision_at_k, ([1],)), (reciprocal_rank_at_k, ([1],)),
    (recall_at_k, ([1], 1)), (ndcg_at_k, ([1], 1)),
])
def test_k_below_one_is_refused(function, arguments):
    with pytest.raises(ValueError, match="k must be at least 1, got 0"):
        function(*arguments, k=0)


def test_recall_and_ndcg_without_a_relevant_document_are_refused_not_zero():
    with pytest.raises(ValueError, match="at least one relevant"):
        recall_at_k([], n_relevant=0, k=3)
    with pytest.raises(ValueError, match="at least one relevant"):
        ndcg_at_k([], n_relevant=0, k=3)


# ---------------------------------------------------------------- against trec_eval

def _trec_eval(relevant: set[str], retrieved: list[str], k: int) -> dict[str, float]:
    """trec_eval's P_k, recall_k, ndcg_cut_k on the whole ranking, and recip_rank on the ranking
    cut at k (MRR@k); scores fall with the rank, so trec_eval ranks the documents as given."""
    qrels = {"q": {doc: 1 for doc in relevant}}

    def run(documents: list[str]) -> dict[str, dict[str, float]]:
        return {"q": {doc: float(len(documents) - position) for position, doc in enumerate(documents)}}

    measures = {measure.format(k=k) for measure in TREC_MEASURES}
    whole = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run(retrieved))["q"]
    cut = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run(retrieved[:k]))["q"]
    values = {name: whole[measure.format(k=k)] for measure, name in TREC_MEASURES.items()}
    return {**values, "mrr_at_k": cut["recip_rank"]}


def test_every_metric_equals_trec_eval_on_random_rankings_with_one_to_three_relevant_documents():
    rng = np.random.default_rng(27)
    pool = [f"doc-{i}" for i in range(15)]
    checked = 0
    for _ in range(400):
        retrieved = list(rng.choice(pool, size=int(rng.integers(1, 11)), replace=False))
        relevant = set(rng.choice(pool, size=int(rng.integers(1, 4)), replace=False))
        k = int(rng.choice([1, 2, 3, 5, 10]))
        ours = retrieval_scores(relevant, retrieved, k)
        for name, expected in _trec_eval(relevant, retrieved, k).items():
            assert getattr(ours, name) == pytest.approx(expected, abs=1e-9), (name, relevant, retrieved, k)
            checked += 1
    assert checked == 1600


# ---------------------------------------------------------------- per row of the canonical table

def test_gold_ids_give_the_relevant_set_and_ids_win_over_contexts():
    frame = pd.DataFrame({
        "id": ["a", "b", "c", "d"],
        "context": ["Ctx A.", "Ctx B.", "Ctx C.", "Ctx D."],
        "gold_id": ["doc-a", None, None, None],
        "gold_ids": [None, np.array(["doc-b1", "doc-b2"], dtype=object), None, ["doc-d"]],
        "retrieved_ids": [["doc-x", "doc-a"], ["doc-b2", "doc-x", "doc-b1"], None, None],
        "retrieved_contexts": [None, ["Ctx B."], ["Other.", "Ctx  C."], None],
    })
    result = retrieval_columns(frame, k=2)
    assert list(result.columns) == list(COLUMNS)
    plain = [{name: None if pd.isna(value) else value for name, value in row.items()}
             for row in result.to_dict("records")]
    assert plain[0] == {"rank": 2, "top_k_match": True, "precision_at_k": 0.5, "recall_at_k": 1.0,
                        "mrr_at_k": 0.5, "ndcg_at_k": pytest.approx(1 / math.log2(3))}
    # b: two relevant ids, one of them in the top 2; its context is not consulted
    assert plain[1]["rank"] == 1 and plain[1]["precision_at_k"] == 0.5 and plain[1]["recall_at_k"] == 0.5
    assert plain[1]["ndcg_at_k"] == pytest.approx(1 / (1 + 1 / math.log2(3)))
    # c: by context text, the single gold context is the relevant set
    assert plain[2]["rank"] == 2 and plain[2]["mrr_at_k"] == 0.5 and plain[2]["recall_at_k"] == 1.0
    # d: gold ids but nothing retrieved: no retrieval results, so every column is missing
    assert all(value is None for value in plain[3].values())
    assert [str(result[name].dtype) for name in COLUMNS] == ["Int64", "boolean", "Float64", "Float64",
                                                            "Float64", "Float64"]


# ---------------------------------------------------------------- the example RAG service

def test_generate_local_maps_the_example_service_s_ranked_ids_so_that_all_five_metrics_are_scored():
    profile = load_profile(ROOT / "params" / "generate-local.yaml")
    mapping = ResponseMapping(profile["generate"]["http"]["response"], "generate.http.response")
    # the example service's response (examples/rag_service/service.py): its top 3 by BM25 score
    response = {"id": "s01", "answer": "Every second Tuesday.", "model": "qwen2.5-coder-1.5b",
                "retrieved": [{"id": "doc-s07", "text": "Bins.", "score": 4.2},
                              {"id": "doc-s01", "text": "The teal bin ...", "score": 3.9},
                              {"id": "doc-s12", "text": "Glass.", "score": 1.1}],
                "usage": {"prompt_tokens": 212, "completion_tokens": 9}}
    values = mapping.apply(response)
    assert values["retrieved_ids"] == ["doc-s07", "doc-s01", "doc-s12"]
    frame = pd.DataFrame({"id": ["s01"], "context": ["The teal bin is emptied."], "gold_id": ["doc-s01"],
                          "gold_ids": [None], "retrieved_ids": [values["retrieved_ids"]],
                          "retrieved_contexts": [values["retrieved_contexts"]]})
    row = retrieval_columns(frame, k=profile["retrieval"]["k"]).iloc[0]
    assert profile["retrieval"]["k"] == 3
    assert (row["rank"], bool(row["top_k_match"])) == (2, True)
    assert (row["precision_at_k"], row["recall_at_k"], row["mrr_at_k"]) == pytest.approx((1 / 3, 1.0, 0.5))
    assert row["ndcg_at_k"] == pytest.approx(1 / math.log2(3))


# ---------------------------------------------------------------- where the report shows them

def test_the_headline_and_summary_md_show_mrr_beside_top_k_match_each_with_its_k():
    from evalbook.publish.summary import run_summary_md
    from evalbook.report.headline import first_screen, headline_html
    from test_report import make_report

    report = make_report()
    rows = [(row["label"], row["k"]) for row in first_screen(report)["metrics"]]
    at = [label for label, _ in rows].index("top-k match")
    assert rows[at:at + 2] == [("top-k match", 5), ("MRR@k", 5)]
    assert "MRR@k (k = 5)" in headline_html(report) and "top-k match (k = 5)" in headline_html(report)
    summary = run_summary_md(report, [])
    mrr = report["intervals"]["metrics"]["mrr_at_k"]
    assert f"| MRR@k (k = 5) | {mrr['mean']:.3f} |" in summary
    assert "| top-k match (k = 5) |" in summary

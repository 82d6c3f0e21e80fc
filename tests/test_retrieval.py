"""Tests for evalbook.score.retrieval: the first relevant rank, the ids retrieved more than once,
top_k_match and retrieval_columns (the other metrics at k: test_retrieval_metrics.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evalbook.score.retrieval import (duplicate_id_warnings, duplicate_retrieved_ids, normalise_text, relevant_ranks,
                                      repeated_ids, retrieval_columns, top_k_match)


# ---------------------------------------------------------------- the first relevant rank

@pytest.mark.parametrize("target, retrieved, expected", [
    ("d2", ["d1", "d2", "d3"], 2),
    ("d1", ["d1", "d2", "d3"], 1),
    ("d3", ["d1", "d2", "d3"], 3),
    ("d2", ["d2", "d1", "d2"], 1),  # first occurrence
    ("d9", ["d1", "d2"], None),
    ("d1", [], None),
    ("d1", ("d0", "d1"), 2),
    ("d1", np.array(["d0", "d5", "d1"], dtype=object), 3),
])
def test_the_first_rank_of_a_single_relevant_document(target, retrieved, expected):
    assert (relevant_ranks({target}, retrieved) or [None])[0] == expected


def test_ids_are_compared_exactly():
    assert relevant_ranks({"doc-1"}, ["doc-10", "Doc-1", "doc-1 "]) == []


# ---------------------------------------------------------------- ids retrieved more than once

def test_repeated_ids_are_the_ids_retrieved_more_than_once_with_their_counts_in_first_rank_order():
    assert repeated_ids(["b", "a", "b", "c", "a", "b"]) == {"b": 3, "a": 2}
    assert list(repeated_ids(["b", "a", "b", "c", "a", "b"])) == ["b", "a"]
    assert repeated_ids(["a", "b"]) == {} and repeated_ids([]) == {}


def test_a_warning_names_each_example_that_retrieved_an_id_twice_and_the_id():
    frame = pd.DataFrame({
        "id": ["s01", "s02", "s03", "s04"],
        "retrieved_ids": [["doc-a", "doc-b"], ["doc-b", "doc-c", "doc-b"], None,
                          np.array(["d", "e", "d", "e", "d"], dtype=object)],
    })
    assert duplicate_retrieved_ids(frame) == {"s02": {"doc-b": 2}, "s04": {"d": 3, "e": 2}}
    [warning] = duplicate_id_warnings(frame, "examples.jsonl")
    assert warning.startswith("2 example(s) retrieved the same id more than once in examples.jsonl "
                              "(s02: doc-b 2 times; s04: d 3 times, e 2 times): ")
    assert "each id counts at its first rank only" in warning
    assert duplicate_id_warnings(frame.iloc[:1], "examples.jsonl") == []
    assert duplicate_id_warnings(pd.DataFrame({"id": ["s01"]}), "examples.jsonl") == []


def test_the_warning_lists_the_first_five_examples_and_counts_the_rest():
    frame = pd.DataFrame({"id": [f"s{i}" for i in range(7)], "retrieved_ids": [["x", "x"]] * 7})
    [warning] = duplicate_id_warnings(frame, "in.jsonl")
    assert "(s0: x 2 times; s1: x 2 times; s2: x 2 times; s3: x 2 times; s4: x 2 times; and 2 more)" in warning
    assert warning.startswith("7 example(s)")


# ---------------------------------------------------------------- top_k_match

@pytest.mark.parametrize("rank, k, expected", [
    (3, 3, True),       # rank == k
    (4, 3, False),      # rank == k + 1
    (1, 1, True),
    (2, 1, False),
    (1, 5, True),
    (None, 3, False),   # not retrieved
    (None, 1, False),
])
def test_top_k_match(rank, k, expected):
    assert top_k_match(rank, k) is expected


@pytest.mark.parametrize("k", [0, -2])
def test_top_k_match_rejects_k_below_one(k):
    with pytest.raises(ValueError, match=rf"k must be at least 1, got {k}"):
        top_k_match(1, k)


def test_normalise_text():
    assert normalise_text("  The\tbrass\n\nbell  rang. ") == "The brass bell rang."


# ---------------------------------------------------------------- retrieval_columns

def _frame() -> pd.DataFrame:
    return pd.DataFrame({
        "id": ["a", "b", "c", "d", "e", "f", "g", "h"],
        "context": [
            "Passage A.",
            "Passage B.",
            "The ferry to Orlen\nleaves  at dawn.",
            "Passage D.",
            "Passage E.",
            "Passage F about kelp.",
            "Passage G.",
            "Passage H.",
        ],
        "gold_id": ["doc-a", "doc-b", None, "doc-d", "doc-e", None, None, "doc-h"],
        "retrieved_ids": [
            ["doc-x", "doc-a"],              # a: id match at rank 2
            ["doc-x", "doc-y", "doc-b"],     # b: id match at rank 3
            None,                            # c: no ids -> compare contexts
            None,                            # d: no retrieval at all
            ["doc-x", "doc-y"],              # e: retrieved, gold missing
            ["doc-q"],                       # f: ids but no gold id -> contexts
            ["doc-q"],                       # g: ids, no gold id, no contexts
            ["doc-h"],                       # h: ids win over contexts
        ],
        "retrieved_contexts": [
            None,
            None,
            ["Something else.", "  The ferry to Orlen leaves at\tdawn. "],
            None,
            None,
            ["Passage F about kelp."],
            None,
            ["Unrelated passage."],
        ],
    })


def _plain(series: pd.Series) -> list:
    return [None if pd.isna(v) else v for v in series]


def test_retrieval_columns_k2():
    result = retrieval_columns(_frame(), k=2)
    assert list(result.columns) == ["rank", "top_k_match", "precision_at_k", "recall_at_k", "mrr_at_k", "ndcg_at_k"]
    assert str(result["rank"].dtype) == "Int64"
    assert str(result["top_k_match"].dtype) == "boolean"
    assert _plain(result["rank"]) == [2, 3, 2, None, None, 1, None, 1]
    assert _plain(result["top_k_match"]) == [True, False, True, None, False, True, None, True]


def test_retrieval_columns_k_changes_only_the_match():
    result = retrieval_columns(_frame(), k=3)
    assert _plain(result["rank"]) == [2, 3, 2, None, None, 1, None, 1]
    assert _plain(result["top_k_match"]) == [True, True, True, None, False, True, None, True]
    result = retrieval_columns(_frame(), k=1)
    assert _plain(result["top_k_match"]) == [False, False, False, None, False, True, None, True]


def test_not_retrieved_is_false_not_missing():
    result = retrieval_columns(_frame(), k=2)
    e = 4
    assert result["rank"].isna()[e]
    assert not result["top_k_match"].isna()[e]
    assert bool(result["top_k_match"][e]) is False


def test_no_retrieval_is_missing_in_both_columns():
    result = retrieval_columns(_frame(), k=2)
    d = 3
    assert result["rank"].isna()[d]
    assert result["top_k_match"].isna()[d]


def test_context_match_needs_more_than_whitespace_equality():
    frame = pd.DataFrame({
        "id": ["a"], "context": ["The ferry leaves at dawn."],
        "retrieved_contexts": [["The ferry leaves at dusk.", "the ferry leaves at dawn."]],
    })
    result = retrieval_columns(frame, k=5)
    assert _plain(result["rank"]) == [None]
    assert _plain(result["top_k_match"]) == [False]


def test_frame_without_retrieval_columns_is_all_missing():
    frame = pd.DataFrame({"id": ["a", "b"], "context": ["x", "y"]})
    result = retrieval_columns(frame, k=3)
    assert result["rank"].isna().all()
    assert result["top_k_match"].isna().all()
    assert len(result) == 2


def test_canonical_style_frame_with_arrays_and_nan_gold():
    # Like the canonical table read back from Parquet: lists are numpy arrays, missing
    # lists are None, missing gold ids are NaN in a string column.
    frame = pd.DataFrame({
        "id": ["a", "b", "c"],
        "context": ["Ctx A.", "Ctx B.", "Ctx C."],
        "gold_id": pd.Series(["doc-a", None, "doc-c"], dtype="str"),
        "retrieved_ids": [np.array(["doc-z", "doc-y", "doc-a"], dtype=object),
                          np.array(["doc-b"], dtype=object), None],
        "retrieved_contexts": [None, np.array(["Ctx  B."], dtype=object), None],
    })
    result = retrieval_columns(frame, k=2)
    assert _plain(result["rank"]) == [3, 1, None]
    assert _plain(result["top_k_match"]) == [False, True, None]


def test_missing_retrieval_as_nan_from_records():
    # A frame built from records where row b has a gold id but no retrieved_ids key:
    # pandas fills the missing list with NaN. That row has no retrieval results, so it
    # must get <NA> in both columns (not raise).
    frame = pd.DataFrame.from_records([
        {"id": "a", "context": "Ctx A.", "gold_id": "doc-a", "retrieved_ids": ["doc-a"]},
        {"id": "b", "context": "Ctx B.", "gold_id": "doc-b"},
    ])
    result = retrieval_columns(frame, k=1)
    assert _plain(result["rank"]) == [1, None]
    assert _plain(result["top_k_match"]) == [True, None]


def test_retrieval_columns_rejects_k_below_one_when_a_row_has_retrieval():
    with pytest.raises(ValueError, match="k must be at least 1, got 0"):
        retrieval_columns(_frame(), k=0)

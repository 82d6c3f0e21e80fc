"""The scored table's retrieval metrics at k for hand-made scored tables that give only `rank` and
`top_k_match`, with one relevant document per example (evalbook.score.retrieval)."""

from __future__ import annotations

import pandas as pd

from evalbook.score.retrieval import ndcg_at_k, precision_at_k, recall_at_k, reciprocal_rank_at_k

METRICS_AT_K = {"precision_at_k": lambda ranks, k: precision_at_k(ranks, k),
                "recall_at_k": lambda ranks, k: recall_at_k(ranks, 1, k),
                "mrr_at_k": lambda ranks, k: reciprocal_rank_at_k(ranks, k),
                "ndcg_at_k": lambda ranks, k: ndcg_at_k(ranks, 1, k)}


def with_retrieval_metrics(scored: pd.DataFrame, k: int) -> pd.DataFrame:
    """`scored` with the four metrics beside top_k_match: missing where top_k_match is (no
    retrieval), else from the rank of the one gold document (missing rank: not retrieved)."""
    ranks = [None if pd.isna(match) else [] if pd.isna(rank) else [int(rank)]
             for rank, match in zip(scored["rank"], scored["top_k_match"])]
    columns = {name: pd.array([pd.NA if r is None else compute(r, k) for r in ranks], dtype="Float64")
               for name, compute in METRICS_AT_K.items()}
    return scored.assign(**columns)

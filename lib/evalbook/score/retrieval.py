"""Retrieval top-k match and rank of the gold context among a system's retrieved results."""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from evalbook.formatting import is_missing


def normalise_text(text: str) -> str:
    """Collapse whitespace so that a retrieved context matches its gold text despite re-wrapping."""
    return " ".join(text.split())


def rank_of(target: str, retrieved: Sequence[str]) -> int | None:
    """1-based rank of the first retrieved item equal to `target`; None when it was not retrieved."""
    for position, item in enumerate(retrieved, start=1):
        if item == target:
            return position
    return None


def top_k_match(rank: int | None, k: int) -> bool:
    """True when the gold item was retrieved within the first k results (rank <= k)."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return rank is not None and rank <= k


def retrieval_columns(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    """`rank` and `top_k_match` per row; missing (<NA>) where the row has no retrieval results.

    Ids are compared when the row has `retrieved_ids` and a `gold_id`; otherwise retrieved
    context texts are compared with the row's own context, whitespace-normalised.
    """
    ranks = pd.array([pd.NA] * len(frame), dtype="Int64")
    matches = pd.array([pd.NA] * len(frame), dtype="boolean")
    for position, row in enumerate(frame.itertuples(index=False)):
        retrieved_ids = getattr(row, "retrieved_ids", None)
        gold_id = getattr(row, "gold_id", None)
        retrieved_contexts = getattr(row, "retrieved_contexts", None)
        if not is_missing(retrieved_ids) and not is_missing(gold_id):
            rank = rank_of(gold_id, list(retrieved_ids))
        elif not is_missing(retrieved_contexts):
            rank = rank_of(normalise_text(row.context),
                           [normalise_text(text) for text in retrieved_contexts])
        else:
            continue
        ranks[position] = pd.NA if rank is None else rank
        matches[position] = top_k_match(rank, k)
    return pd.DataFrame({"rank": ranks, "top_k_match": matches})

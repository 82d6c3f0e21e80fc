"""Retrieval measured as IR people do: hit@k, precision@k, recall@k, MRR@k and nDCG@k.

An example's relevant set is its `gold_ids` (several relevant documents), else its `gold_id`,
compared with its `retrieved_ids`; without ids, its own context compared with the
`retrieved_contexts` texts, whitespace-normalised. Relevance is binary.

The five formulas are written here with plain Python rather than taken from an IR library: each
is a line or two, and a dependency for five formulas is not worth it. The conventions are
trec_eval's, and a test checks every metric against trec_eval (`pytrec_eval`) to 1e-9:

- precision@k divides by k even when fewer than k documents were retrieved (`P_k`);
- recall@k divides by the number of relevant documents, retrieved or not (`recall_k`);
- MRR@k is trec_eval's `recip_rank` (1 / the rank of the first relevant document) when that
  rank is at most k, else 0; the run's MRR is the mean over the examples;
- nDCG@k has gain 1 for a relevant document and discount log2(rank + 1); the ideal ranking puts
  min(number relevant, k) relevant documents first (`ndcg_cut_k` with binary judgements).

A document retrieved twice counts at its first rank only: a later copy is not relevant again (a
trec_eval run cannot hold a document twice), but takes its place in the top k. Such a copy is an
input problem the load stage warns of, naming each example and id (`duplicate_id_warnings`). An
empty retrieval scores 0 on all four and is no match.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, fields
from typing import Any, Iterable, Sequence

import pandas as pd

from evalbook.formatting import is_missing

SHOWN_EXAMPLES = 5  # the examples a warning names before it counts the rest


def normalise_text(text: str) -> str:
    """Collapse whitespace so that a retrieved context matches its gold text despite re-wrapping."""
    return " ".join(text.split())


def relevant_ranks(relevant: Iterable[str], retrieved: Sequence[str]) -> list[int]:
    """The 1-based ranks at which relevant documents were retrieved, ascending; a document
    retrieved again later counts only at its first rank."""
    wanted, seen, ranks = set(relevant), set(), []
    for position, item in enumerate(retrieved, start=1):
        if item in wanted and item not in seen:
            seen.add(item)
            ranks.append(position)
    return ranks


def repeated_ids(retrieved: Sequence[str]) -> dict[str, int]:
    """The ids retrieved more than once, each with how many times, in the order first retrieved."""
    return {item: times for item, times in Counter(retrieved).items() if times > 1}


def duplicate_retrieved_ids(frame: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per example whose `retrieved_ids` hold an id more than once: its repeated ids (repeated_ids)."""
    found = {}
    for row in frame.itertuples(index=False):
        ids = getattr(row, "retrieved_ids", None)
        repeated = {} if is_missing(ids) else repeated_ids(list(ids))
        if repeated:
            found[str(row.id)] = repeated
    return found


def duplicate_id_warnings(frame: pd.DataFrame, source: str) -> list[str]:
    """One sentence naming the examples of `source` that retrieved an id more than once, each
    with the id and how many times, and what that does to the metrics; none without such a copy."""
    found = duplicate_retrieved_ids(frame)
    if not found:
        return []
    listed = "; ".join(f"{example}: " + ", ".join(f"{item} {times} times" for item, times in repeated.items())
                       for example, repeated in list(found.items())[:SHOWN_EXAMPLES])
    more = f"; and {len(found) - SHOWN_EXAMPLES} more" if len(found) > SHOWN_EXAMPLES else ""
    return [f"{len(found)} example(s) retrieved the same id more than once in {source} ({listed}{more}): "
            "each id counts at its first rank only, so a copy takes a place in the top k without adding "
            "a relevant document; check the retriever or remove the copies from retrieved_ids"]


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")


def top_k_match(rank: int | None, k: int) -> bool:
    """hit@k: True when the first relevant item was retrieved within the first k (rank <= k)."""
    _check_k(k)
    return rank is not None and rank <= k


def precision_at_k(ranks: Sequence[int], k: int) -> float:
    """Relevant documents in the top k over k: 0-1, higher is better; k, not the number
    retrieved, is the denominator (trec_eval's P_k), so a short list is not rewarded."""
    _check_k(k)
    return sum(rank <= k for rank in ranks) / k


def recall_at_k(ranks: Sequence[int], n_relevant: int, k: int) -> float:
    """Relevant documents in the top k over all relevant documents: 0-1, higher is better."""
    _check_k(k)
    if n_relevant < 1:
        raise ValueError("recall needs at least one relevant document")
    return sum(rank <= k for rank in ranks) / n_relevant


def reciprocal_rank_at_k(ranks: Sequence[int], k: int) -> float:
    """1 / the rank of the first relevant document when it is within k, else 0: 0-1, higher is
    better. Its mean over the examples is MRR@k."""
    _check_k(k)
    return 1.0 / ranks[0] if ranks and ranks[0] <= k else 0.0


def _discounted_gain(ranks: Iterable[int]) -> float:
    return sum(1.0 / math.log2(rank + 1) for rank in ranks)


def ndcg_at_k(ranks: Sequence[int], n_relevant: int, k: int) -> float:
    """The top k's discounted gain (1 / log2(rank + 1) per relevant document) over the ideal
    ranking's, in which the first min(n_relevant, k) documents are relevant: 0-1, higher is better."""
    _check_k(k)
    if n_relevant < 1:
        raise ValueError("nDCG needs at least one relevant document")
    ideal = _discounted_gain(range(1, min(n_relevant, k) + 1))
    return _discounted_gain(rank for rank in ranks if rank <= k) / ideal


@dataclass(frozen=True)
class RetrievalScores:
    """One example's retrieval: the rank of its first relevant document (None: none retrieved)
    and the five metrics at k."""

    rank: int | None
    top_k_match: bool
    precision_at_k: float
    recall_at_k: float
    mrr_at_k: float
    ndcg_at_k: float


# The scored table's retrieval columns, named as the registry's retrieval metrics (evalbook.metrics).
COLUMNS = tuple(field.name for field in fields(RetrievalScores))
DTYPES = {"rank": "Int64", "top_k_match": "boolean"}  # every other column: Float64


def retrieval_scores(relevant: Iterable[str], retrieved: Sequence[str], k: int) -> RetrievalScores:
    """Every retrieval metric of one example at k; `relevant` must name at least one document."""
    relevant = set(relevant)
    ranks = relevant_ranks(relevant, retrieved)
    first = ranks[0] if ranks else None
    return RetrievalScores(rank=first, top_k_match=top_k_match(first, k),
                           precision_at_k=precision_at_k(ranks, k),
                           recall_at_k=recall_at_k(ranks, len(relevant), k),
                           mrr_at_k=reciprocal_rank_at_k(ranks, k),
                           ndcg_at_k=ndcg_at_k(ranks, len(relevant), k))


def _relevant_and_retrieved(row: Any) -> tuple[set[str], list[str]] | None:
    """The row's relevant set and retrieved list, by id where it has both, else by context
    text; None when it has no retrieval results to compare."""
    retrieved_ids = getattr(row, "retrieved_ids", None)
    gold_ids = getattr(row, "gold_ids", None)
    gold_id = getattr(row, "gold_id", None)
    retrieved_contexts = getattr(row, "retrieved_contexts", None)
    gold = list(gold_ids) if not is_missing(gold_ids) else [gold_id] if not is_missing(gold_id) else None
    if not is_missing(retrieved_ids) and gold:
        return set(gold), list(retrieved_ids)
    if not is_missing(retrieved_contexts):
        return {normalise_text(row.context)}, [normalise_text(text) for text in retrieved_contexts]
    return None


def retrieval_columns(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    """`rank` and the five metrics (COLUMNS) per row; missing (<NA>) where the row has no
    retrieval results.

    Ids are compared when the row has `retrieved_ids` and a `gold_ids` or `gold_id`; otherwise
    retrieved context texts are compared with the row's own context, whitespace-normalised.
    """
    columns = {name: pd.array([pd.NA] * len(frame), dtype=DTYPES.get(name, "Float64")) for name in COLUMNS}
    for position, row in enumerate(frame.itertuples(index=False)):
        compared = _relevant_and_retrieved(row)
        if compared is None:
            continue
        scores = asdict(retrieval_scores(*compared, k))
        for name, values in columns.items():
            values[position] = pd.NA if scores[name] is None else scores[name]
    return pd.DataFrame(columns)

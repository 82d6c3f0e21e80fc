"""The context metrics in the judge stage: context relevance, precision and recall from the
judge's verdicts on each retrieved chunk (issue 39; the replies and the math are
evalbook.judge.chunks).

The three are judge metrics of the registry that read the retrieval (`reads="retrieval"`), each
enabled under `judge.metrics.<name>` like the others. Relevance and precision share one request
per retrieved chunk (and repeat); recall makes one request per example (and repeat). They judge
the same sampled, eligible examples as the other metrics, and need the chunks' text,
`retrieved_contexts`:
- a row with `retrieved_ids` only is "not scored: no chunk text", counted, never a zero;
- a row with no retrieval results at all is "not scored: no retrieval results";
- a row whose retrieval came back empty scores 0 on precision and recall (nothing relevant was
  retrieved) and is unscored on relevance (a share of no chunks);
- recall needs the reference answer: without one it is unscored;
- a chunk whose text is empty or only whitespace is not sent to the judge: its verdict is
  `empty`, counted (`n_empty` in each record, `verdicts` in the summary) and left out of the
  three scores; a row whose chunks are all empty is unscored on all three (ALL_EMPTY), counted
  (`n_all_chunks_empty`).

Where the row has gold ids beside its retrieved ids, each chunk's judged verdict is set beside
the gold one, and `exact` is the average precision from the ids over the chunks the judge read
(those with text), each gold id counted once, at its first rank (`exact_precision`), so that
the summary can say how far the judge agrees with the ids.

What makes a chunk verdict unusable, and what that does to a question, is evalbook.judge.chunks'
(UNUSABLE, unusable_reason, context_scores); each judged chunk is an outcome of the check
protocol there (chunk_outcome).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from evalbook.formatting import is_missing
from evalbook.judge.chunks import (ALL_EMPTY, EMPTY, KINDS, NAME as CHUNK_REQUESTS, PROMPT as CHUNK_PROMPT,
                                   RECALL as RECALL_REQUESTS, RECALL_PROMPT, STATUS, ChunkVerdict,
                                   average_precision, chunk_requests, context_scores, read_recall, recall_request,
                                   reply_verdict, texted)
from evalbook.judge.client import JudgeReply, JudgeRequest, JudgeSettings
from evalbook.judge.parsing import Unparsed
from evalbook.judge.score import Score, ratio_fields
from evalbook.prompts import PromptTemplate
from evalbook.score.retrieval import relevant_ranks

NO_CHUNK_TEXT = "not scored: no chunk text"
NO_RETRIEVAL = "not scored: no retrieval results"
NO_REFERENCE = "not scored: no reference answer"


@dataclass(frozen=True)
class ContextMetric:
    """A context metric, as the stage's records and summaries see it."""

    NAME: str
    PROMPT: tuple[str, int]
    REQUESTS: str  # the requests' metric name; relevance and precision share theirs
    METRIC_VERSION: int = 1

    def record_fields(self, detail: dict[str, Any], threshold: float) -> dict[str, Any]:
        if self.NAME == "context_relevance" and "n_chunks" in detail:
            return ratio_fields(detail["n_chunks"] - detail["n_empty"], threshold)
        return {}

    def summary_fields(self, entries: list[dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
        fields: dict[str, Any] = {"n_no_chunk_text": sum(e["unscored_reason"] == NO_CHUNK_TEXT for e in entries),
                                  "n_no_retrieval": sum(e["unscored_reason"] == NO_RETRIEVAL for e in entries),
                                  "n_all_chunks_empty": sum(e["unscored_reason"] == ALL_EMPTY for e in entries)}
        if self.REQUESTS == CHUNK_REQUESTS:
            fields["verdicts"] = dict(Counter(v for e in entries for v in e.get("verdicts", [])))
        if self.NAME == "context_relevance":
            fields["by_rank"] = relevance_by_rank(entries)
        if self.NAME == "context_precision":
            fields["n_no_relevant"] = sum(e["score"] == 0.0 for e in entries)
            fields["against_gold"] = against_gold(entries)
        if self.NAME == "context_recall":
            fields["n_claims"] = sum(e.get("n_claims") or 0 for e in entries)
        return fields


CONTEXT_RELEVANCE = ContextMetric("context_relevance", CHUNK_PROMPT, CHUNK_REQUESTS)
CONTEXT_PRECISION = ContextMetric("context_precision", CHUNK_PROMPT, CHUNK_REQUESTS)
CONTEXT_RECALL = ContextMetric("context_recall", RECALL_PROMPT, RECALL_REQUESTS)
CONTEXT_METRICS: tuple[ContextMetric, ...] = (CONTEXT_RELEVANCE, CONTEXT_PRECISION, CONTEXT_RECALL)


def enabled_context(config: dict[str, Any]) -> list[ContextMetric]:
    """The context metrics the profile enables; an older profile has none of their keys (off)."""
    sections = config["metrics"]
    return [m for m in CONTEXT_METRICS if (sections.get(m.NAME) or {}).get("enabled")]


# ---------------------------------------------------------------- a row's retrieval

def chunk_texts(row: Any) -> list[str] | None:
    value = getattr(row, "retrieved_contexts", None)
    return None if is_missing(value) else [str(text) for text in value]


def exact_precision(retrieved_ids: Sequence[str], gold_ids: set[str]) -> float:
    """Average precision of a ranking by the gold ids, exact, as the judged precision is computed
    (over the gold ids retrieved; 0 when none was). A gold id counts at its first rank only: a
    copy later is not relevant again, as for precision@k (evalbook.score.retrieval).
    ["x", "b", "b"] against {"b"} gives 1/2."""
    first = set(relevant_ranks(gold_ids, retrieved_ids))
    return average_precision([rank in first for rank in range(1, len(retrieved_ids) + 1)])


def _gold_relevance(row: Any, chunks: Sequence[str]) -> tuple[list[bool], float] | None:
    """Where the row has gold ids and one retrieved id per chunk: whether each chunk's id is a
    gold id, and the exact precision over the chunks with text (those the judge read)."""
    ids = getattr(row, "retrieved_ids", None)
    gold_ids, gold_id = getattr(row, "gold_ids", None), getattr(row, "gold_id", None)
    gold = list(gold_ids) if not is_missing(gold_ids) else [gold_id] if not is_missing(gold_id) else None
    if is_missing(ids) or not gold or len(ids) != len(chunks):
        return None
    read_ids = [ids[index] for index in texted(chunks)]
    return [doc in set(gold) for doc in ids], exact_precision(read_ids, set(gold))


def not_scored_reason(row: Any) -> str | None:
    if chunk_texts(row) is not None:
        return None
    return NO_CHUNK_TEXT if not is_missing(getattr(row, "retrieved_ids", None)) else NO_RETRIEVAL


def _reference(row: Any, config: dict[str, Any]) -> str:
    value = getattr(row, config["ground_truth_column"], None)
    return "" if is_missing(value) else str(value).strip()


# ---------------------------------------------------------------- requests

def context_requests(rows: pd.DataFrame, config: dict[str, Any], settings: JudgeSettings,
                     templates: dict[str, PromptTemplate], repeats: int) -> list[JudgeRequest]:
    """The chunk requests (when relevance or precision is on) and the recall requests (when
    recall is on) of the rows that have chunk texts, in row order."""
    names = {m.NAME for m in enabled_context(config)}
    requests: list[JudgeRequest] = []
    for row in rows.itertuples(index=False):
        chunks = chunk_texts(row)
        if not chunks:
            continue
        if names & {"context_relevance", "context_precision"}:
            template = templates.get("context_relevance") or templates["context_precision"]
            requests += chunk_requests(row.id, row.question, chunks, settings, template, repeats)
        if "context_recall" in names and _reference(row, config) and texted(chunks):
            requests += [recall_request(row.id, _reference(row, config), chunks, settings,
                                        templates["context_recall"], repeat) for repeat in range(repeats)]
    return requests


# ---------------------------------------------------------------- scores

Replies = dict[tuple[str, str, int], JudgeReply]  # (request example id, request metric, repeat)


def _chunk_scores(verdicts: Sequence[ChunkVerdict],
                  gold: tuple[list[bool], float] | None) -> dict[str, tuple[Score, dict]]:
    """Relevance and precision of one repeat's verdicts, each with its detail; empty chunks are
    counted and left out, and an unusable verdict leaves both unscored (evalbook.judge.chunks'
    one definition, context_scores)."""
    kinds = [v.verdict for v in verdicts]
    detail = {"n_chunks": len(verdicts), "verdicts": kinds, **{f"n_{kind}": kinds.count(kind) for kind in KINDS}}
    scores = context_scores(verdicts)
    if not verdicts:
        return {"context_relevance": (Score.unscored(scores.unscored_reason), detail),
                "context_precision": (Score(0.0), detail)}
    if scores.unscored_reason is not None:  # an unusable verdict, or every chunk is empty (ALL_EMPTY)
        return {"context_relevance": (Score.unscored(scores.unscored_reason), detail),
                "context_precision": (Score.unscored(scores.unscored_reason), detail)}
    precision = dict(detail)
    if gold is not None:
        precision["gold_relevant"], precision["exact"] = gold  # each chunk's, and the whole ranking's
    return {"context_relevance": (Score(scores.relevance), detail),
            "context_precision": (Score(scores.precision), precision)}


def _recall_score(reply: JudgeReply | None, chunks: Sequence[str]) -> tuple[Score, dict[str, Any]]:
    if reply is None:
        return Score.unscored("no reply"), {}
    if reply.error is not None:
        return Score.unscored(f"judge call failed: {reply.error}"), {}
    try:
        recall, claims = read_recall(reply.text, chunks, reply.finish_reason)
    except Unparsed as failure:
        return Score.unscored(failure.reason), {"raw_reply": failure.raw}
    detail = {"n_claims": len(claims), "claims": claims, "n_empty": len(chunks) - len(texted(chunks))}
    if recall is None:
        return Score.unscored("the judge found no claim in the reference answer"), detail
    return Score(recall), detail


def chunk_list(chunks: Sequence[str], verdicts: Sequence[ChunkVerdict],
               gold: tuple[list[bool], float] | None) -> list[dict]:
    """Each chunk's verdict for the report's strip, rank first; the chunk text is the input's."""
    return [{"rank": rank, "verdict": v.verdict, "reason": v.reason, "quote": v.quote, "claimed": v.claimed,
             "gold": None if gold is None else gold[0][rank - 1]}
            for rank, v in enumerate(verdicts, 1)]


def context_judgments(row: Any, replies: Replies, config: dict[str, Any],
                      repeats: int) -> tuple[dict[str, list[tuple[Score, dict]]], list[dict] | None]:
    """Each enabled context metric's (score, detail) per repeat for one row, and the first
    repeat's chunk verdicts (None when no chunk was judged)."""
    names = [m.NAME for m in enabled_context(config)]
    reason = not_scored_reason(row)
    if reason is not None:
        return {name: [(Score.unscored(reason), {})] * repeats for name in names}, None
    chunks = chunk_texts(row)
    gold = _gold_relevance(row, chunks)
    judged: dict[str, list[tuple[Score, dict]]] = {name: [] for name in names}
    listed = None
    for repeat in range(repeats):
        if {"context_relevance", "context_precision"} & set(names):
            verdicts = [reply_verdict(replies.get((f"{row.id}#chunk{rank}", CHUNK_REQUESTS, repeat)), chunk)
                        for rank, chunk in enumerate(chunks, 1)]
            if listed is None and chunks:
                listed = chunk_list(chunks, verdicts, gold)
            for name, scored in _chunk_scores(verdicts, gold).items():
                if name in judged:
                    judged[name].append(scored)
        if "context_recall" in judged:
            if chunks and not texted(chunks):
                judged["context_recall"].append((Score.unscored(ALL_EMPTY), {"n_empty": len(chunks)}))
            elif not _reference(row, config):
                judged["context_recall"].append((Score.unscored(NO_REFERENCE), {}))
            elif not chunks:
                judged["context_recall"].append((Score(0.0), {"n_claims": 0}))
            else:
                judged["context_recall"].append(
                    _recall_score(replies.get((row.id, RECALL_REQUESTS, repeat)), chunks))
    return judged, listed


# ---------------------------------------------------------------- summaries

def relevance_by_rank(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Across the run, at each rank: how many chunks were judged and the share judged relevant
    (of the usable verdicts), so that rank 1 can be set against rank 5; the empty chunks at the
    rank, never judged, are counted apart (`n_empty`)."""
    at: dict[int, Counter] = {}
    for entry in entries:
        for rank, verdict in enumerate(entry.get("verdicts", []), 1):
            at.setdefault(rank, Counter())[verdict] += 1
    rows = []
    for rank in sorted(at):
        counts = at[rank]
        usable = sum(n for kind, n in counts.items() if STATUS.get(kind) in ("pass", "fail"))
        rows.append({"rank": rank, "n": sum(counts.values()) - counts[EMPTY], "n_empty": counts[EMPTY],
                     "n_usable": usable, "n_relevant": counts["relevant"], "n_partial": counts["partial"],
                     "relevant_share": counts["relevant"] / usable if usable else None})
    return rows


def against_gold(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The judged precision beside the exact one (from the gold ids) on the examples that have
    both, and how often the judge's relevant/not agrees with the ids, chunk by chunk (the chunks
    the judge read: empty ones are left out), with Cohen's kappa (scikit-learn; None when either
    side has one class only)."""
    both = [e for e in entries if e.get("exact") is not None and e["score"] is not None]
    if not both:
        return None
    read = [(v, g) for e in both for v, g in zip(e["verdicts"], e["gold_relevant"]) if v != EMPTY]
    judged = [v == "relevant" for v, _ in read]
    gold = [g for _, g in read]
    kappa = None
    if len(set(judged)) > 1 and len(set(gold)) > 1:
        from sklearn.metrics import cohen_kappa_score  # here: scikit-learn is slow to import

        kappa = float(cohen_kappa_score(gold, judged))
    return {"n": len(both), "judged_mean": float(np.mean([e["score"] for e in both])),
            "exact_mean": float(np.mean([e["exact"] for e in both])),
            "mean_abs_difference": float(np.mean([abs(e["score"] - e["exact"]) for e in both])),
            "n_chunks": len(gold), "n_chunks_agreeing": int(sum(j == g for j, g in zip(judged, gold))),
            "chunk_agreement": float(np.mean([j == g for j, g in zip(judged, gold)])), "kappa": kappa}

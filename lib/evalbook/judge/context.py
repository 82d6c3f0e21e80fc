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

Each metric is one entry of CONTEXT_TABLE, and the stage never tests a metric's name: the entry
says what the metric reads (a Reading: the chunk verdicts, which relevance and precision share,
or the reference's claims, recall's), its score when nothing was retrieved, how its value is
read from a repeat's judgment, and what its record and summary add. A new context metric is an
entry in the registry (evalbook.metrics, `reads="retrieval"`) and one here; one that reads the
chunk verdicts needs no other code. What makes a chunk verdict unusable, and what that does to
a question, is evalbook.judge.chunks' (UNUSABLE, unusable_reason), and each judged chunk is an
outcome of the check protocol there (chunk_outcome).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Callable, Sequence

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
from evalbook.metrics import of_kind
from evalbook.prompts import PromptTemplate
from evalbook.score.retrieval import relevant_ranks

NO_CHUNK_TEXT = "not scored: no chunk text"
NO_RETRIEVAL = "not scored: no retrieval results"
NO_REFERENCE = "not scored: no reference answer"
NOTHING_RETRIEVED = "no chunk was retrieved"

Replies = dict[tuple[str, str, int], JudgeReply]  # (request example id, request metric, repeat)
Gold = tuple[list[bool], float]  # each chunk's gold relevance, and the exact precision


@dataclass(frozen=True)
class Judgment:
    """One repeat of one row, as a Reading judged it: the detail its metrics' records keep, and
    either the reason none of them is scored or the result their values are read from."""

    detail: dict[str, Any]
    reason: str | None = None
    result: Any = None  # ContextScores, or the recall
    nothing_retrieved: bool = False  # the retrieval came back empty
    gold: Gold | None = None
    chunks: list[dict] | None = None  # each chunk's verdict, for the report's strip


@dataclass(frozen=True)
class Reading:
    """What the judge reads for a group of context metrics: its requests' metric name and
    prompt, its requests for a row (given its chunks and reference answer), and its judgment of
    one repeat of a row."""

    REQUESTS: str
    PROMPT: tuple[str, int]
    requests: Callable[[Any, list[str], str, JudgeSettings, PromptTemplate, int], list[JudgeRequest]]
    judge: Callable[[Any, Replies, list[str], str, int], Judgment]
    counts_verdicts: bool = False  # the summary counts the chunk verdicts (`verdicts`)


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


def _gold_relevance(row: Any, chunks: Sequence[str]) -> Gold | None:
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


# ---------------------------------------------------------------- the chunk verdicts

def chunk_list(chunks: Sequence[str], verdicts: Sequence[ChunkVerdict], gold: Gold | None) -> list[dict]:
    """Each chunk's verdict for the report's strip, rank first; the chunk text is the input's."""
    return [{"rank": rank, "verdict": v.verdict, "reason": v.reason, "quote": v.quote, "claimed": v.claimed,
             "gold": None if gold is None else gold[0][rank - 1]}
            for rank, v in enumerate(verdicts, 1)]


def _chunk_verdict_requests(row: Any, chunks: list[str], reference: str, settings: JudgeSettings,
                            template: PromptTemplate, repeats: int) -> list[JudgeRequest]:
    return chunk_requests(row.id, row.question, chunks, settings, template, repeats)


def _judge_chunks(row: Any, replies: Replies, chunks: list[str], reference: str, repeat: int) -> Judgment:
    """One repeat's verdicts on the row's chunks and their scores (chunks.context_scores); an
    empty chunk is counted and left out, an unusable verdict leaves the row unscored."""
    verdicts = [reply_verdict(replies.get((f"{row.id}#chunk{rank}", CHUNK_REQUESTS, repeat)), chunk)
                for rank, chunk in enumerate(chunks, 1)]
    kinds = [v.verdict for v in verdicts]
    detail = {"n_chunks": len(verdicts), "verdicts": kinds, **{f"n_{kind}": kinds.count(kind) for kind in KINDS}}
    gold = _gold_relevance(row, chunks)
    scores = context_scores(verdicts)
    return Judgment(detail, scores.unscored_reason, scores, nothing_retrieved=not verdicts, gold=gold,
                    chunks=chunk_list(chunks, verdicts, gold) if chunks else None)


CHUNK_VERDICTS = Reading(CHUNK_REQUESTS, CHUNK_PROMPT, _chunk_verdict_requests, _judge_chunks, counts_verdicts=True)


# ---------------------------------------------------------------- the reference's claims

def _recall_requests(row: Any, chunks: list[str], reference: str, settings: JudgeSettings,
                     template: PromptTemplate, repeats: int) -> list[JudgeRequest]:
    if not reference or not texted(chunks):
        return []
    return [recall_request(row.id, reference, chunks, settings, template, repeat) for repeat in range(repeats)]


def _judge_claims(row: Any, replies: Replies, chunks: list[str], reference: str, repeat: int) -> Judgment:
    """One repeat's recall of the reference's claims: each claim with the chunks that support it."""
    if chunks and not texted(chunks):
        return Judgment({"n_empty": len(chunks)}, ALL_EMPTY)
    if not reference:
        return Judgment({}, NO_REFERENCE)
    if not chunks:
        return Judgment({"n_claims": 0}, NOTHING_RETRIEVED, nothing_retrieved=True)
    reply = replies.get((row.id, RECALL_REQUESTS, repeat))
    if reply is None:
        return Judgment({}, "no reply")
    if reply.error is not None:
        return Judgment({}, f"judge call failed: {reply.error}")
    try:
        recall, claims = read_recall(reply.text, chunks, reply.finish_reason)
    except Unparsed as failure:
        return Judgment({"raw_reply": failure.raw}, failure.reason)
    detail = {"n_claims": len(claims), "claims": claims, "n_empty": len(chunks) - len(texted(chunks))}
    if recall is None:
        return Judgment(detail, "the judge found no claim in the reference answer")
    return Judgment(detail, result=recall)


RECALL_CLAIMS = Reading(RECALL_REQUESTS, RECALL_PROMPT, _recall_requests, _judge_claims)


# ---------------------------------------------------------------- the metrics

def _chunk_ratio(detail: dict[str, Any], threshold: float) -> dict[str, Any]:
    """The levels of a share of the judged chunks (the empty ones aside), and the threshold read."""
    return ratio_fields(detail["n_chunks"] - detail["n_empty"], threshold) if "n_chunks" in detail else {}


def _gold_detail(judgment: Judgment) -> dict[str, Any]:
    """Each chunk's gold relevance and the ranking's exact precision, where the row has gold ids."""
    return {} if judgment.gold is None else dict(zip(("gold_relevant", "exact"), judgment.gold))


@dataclass(frozen=True)
class ContextMetric:
    """A context metric, as the stage's requests, records and summaries see it: what it reads,
    its score when nothing was retrieved (None: unscored, with the reading's reason), how its
    value is read from a judgment's result, and what its scored records and summary add."""

    NAME: str
    reads: Reading
    value: Callable[[Any], float]  # from a scored judgment's result (ContextScores, or the recall)
    nothing_retrieved: float | None
    scored_detail: Callable[[Judgment], dict[str, Any]] = lambda judgment: {}
    record: Callable[[dict[str, Any], float], dict[str, Any]] = lambda detail, threshold: {}
    summary: tuple[Callable[[list[dict[str, Any]]], dict[str, Any]], ...] = ()
    METRIC_VERSION: int = 1

    @property
    def PROMPT(self) -> tuple[str, int]:
        return self.reads.PROMPT

    @property
    def REQUESTS(self) -> str:  # the requests' metric name; relevance and precision share theirs
        return self.reads.REQUESTS

    def judged(self, judgment: Judgment) -> tuple[Score, dict[str, Any]]:
        """The metric's score of one repeat, and the detail its record keeps."""
        if judgment.nothing_retrieved and self.nothing_retrieved is not None:
            return Score(self.nothing_retrieved), judgment.detail
        if judgment.reason is not None:
            return Score.unscored(judgment.reason), judgment.detail
        return Score(self.value(judgment.result)), {**judgment.detail, **self.scored_detail(judgment)}

    def record_fields(self, detail: dict[str, Any], threshold: float) -> dict[str, Any]:
        return self.record(detail, threshold)

    def summary_fields(self, entries: list[dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
        fields: dict[str, Any] = {"n_no_chunk_text": sum(e["unscored_reason"] == NO_CHUNK_TEXT for e in entries),
                                  "n_no_retrieval": sum(e["unscored_reason"] == NO_RETRIEVAL for e in entries),
                                  "n_all_chunks_empty": sum(e["unscored_reason"] == ALL_EMPTY for e in entries)}
        if self.reads.counts_verdicts:
            fields["verdicts"] = dict(Counter(v for e in entries for v in e.get("verdicts", [])))
        for extra in self.summary:
            fields.update(extra(entries))
        return fields


CONTEXT_TABLE: tuple[ContextMetric, ...] = (
    # relevant chunks over judged chunks; nothing retrieved is no share at all
    ContextMetric("context_relevance", CHUNK_VERDICTS, attrgetter("relevance"), nothing_retrieved=None,
                  record=_chunk_ratio, summary=(lambda entries: {"by_rank": relevance_by_rank(entries)},)),
    # average precision of the relevant chunks by rank; nothing retrieved found nothing relevant
    ContextMetric("context_precision", CHUNK_VERDICTS, attrgetter("precision"), nothing_retrieved=0.0,
                  scored_detail=_gold_detail,
                  summary=(lambda entries: {"n_no_relevant": sum(e["score"] == 0.0 for e in entries),
                                            "against_gold": against_gold(entries)},)),
    # the reference's claims that a chunk supports; nothing retrieved supports none
    ContextMetric("context_recall", RECALL_CLAIMS, float, nothing_retrieved=0.0,
                  summary=(lambda entries: {"n_claims": sum(e.get("n_claims") or 0 for e in entries)},)),
)


def _in_registry_order(table: Sequence[ContextMetric]) -> tuple[ContextMetric, ...]:
    """The table's metrics in the registry's order; a registry entry that reads the retrieval
    without an entry here, or the reverse, is an error naming it."""
    by_name = {metric.NAME: metric for metric in table}
    registered = [metric.name for metric in of_kind("judge") if metric.reads == "retrieval"]
    if set(registered) != set(by_name):
        raise LookupError(f"the context metrics of evalbook.metrics ({', '.join(registered)}) and of "
                          f"evalbook.judge.context's CONTEXT_TABLE ({', '.join(by_name)}) differ")
    return tuple(by_name[name] for name in registered)


CONTEXT_METRICS = _in_registry_order(CONTEXT_TABLE)


def enabled_context(config: dict[str, Any]) -> list[ContextMetric]:
    """The context metrics the profile enables; an older profile has none of their keys (off)."""
    sections = config["metrics"]
    return [m for m in CONTEXT_METRICS if (sections.get(m.NAME) or {}).get("enabled")]


def _readings(metrics: Sequence[ContextMetric]) -> dict[Reading, list[ContextMetric]]:
    """The readings the metrics need, in the metrics' order, each with its metrics."""
    readings: dict[Reading, list[ContextMetric]] = {}
    for metric in metrics:
        readings.setdefault(metric.reads, []).append(metric)
    return readings


# ---------------------------------------------------------------- requests

def context_requests(rows: pd.DataFrame, config: dict[str, Any], settings: JudgeSettings,
                     templates: dict[str, PromptTemplate], repeats: int) -> list[JudgeRequest]:
    """Each enabled reading's requests (the chunk verdicts' when relevance or precision is on, the
    claims' when recall is on) of the rows that have chunk texts, in row order. `templates` are
    by metric name; the metrics of one reading share theirs."""
    readings = _readings(enabled_context(config))
    requests: list[JudgeRequest] = []
    for row in rows.itertuples(index=False):
        chunks = chunk_texts(row)
        if not chunks:
            continue
        for reading, metrics in readings.items():
            requests += reading.requests(row, chunks, _reference(row, config), settings,
                                         templates[metrics[0].NAME], repeats)
    return requests


# ---------------------------------------------------------------- scores

def context_judgments(row: Any, replies: Replies, config: dict[str, Any],
                      repeats: int) -> tuple[dict[str, list[tuple[Score, dict]]], list[dict] | None]:
    """Each enabled context metric's (score, detail) per repeat for one row, and the first
    repeat's chunk verdicts (None when no chunk was judged)."""
    metrics = enabled_context(config)
    reason = not_scored_reason(row)
    if reason is not None:
        return {m.NAME: [(Score.unscored(reason), {})] * repeats for m in metrics}, None
    chunks, reference = chunk_texts(row), _reference(row, config)
    judged: dict[str, list[tuple[Score, dict]]] = {m.NAME: [] for m in metrics}
    listed = None
    for repeat in range(repeats):
        for reading, readers in _readings(metrics).items():
            judgment = reading.judge(row, replies, chunks, reference, repeat)
            if listed is None:
                listed = judgment.chunks
            for metric in readers:
                judged[metric.NAME].append(metric.judged(judgment))
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

"""Retrieval judged chunk by chunk: the judge's verdict on each retrieved chunk, and the context
metrics computed from those verdicts (issue 39, part 1: the reply and the math; the stage, the
registry entries and the report come next).

The judge reads one chunk at a time against the question and replies `{verdict, reason, quote}`
(CHUNK_SCHEMA), `verdict` one of relevant, partial, irrelevant, `quote` the passage of the
chunk it rests on. A reply becomes a verdict in `reply_verdict` (and `read_chunk_verdict`).

An unusable verdict is defined here, once (UNUSABLE), and the stage (evalbook.judge.context)
reads this definition: a verdict is unusable when
- no reply can be read: the call failed, or no reply came for the chunk (`failed`);
- the reply does not parse or does not match the schema (`invalid`);
- a relevant or partial verdict quotes a passage that is not in the chunk word for word
  (whitespace runs aside: `unsupported`); an irrelevant verdict needs no quote.
Each is counted under its own name, never mapped to a verdict (a peer maps a bad reply to
"irrelevant", which lowers a score on the judge's failure), and any one of them leaves its
question unscored on relevance and precision: "<n> of <m> chunk verdicts are invalid or
unsupported or failed", m the chunks sent to the judge (the empty ones aside). Until issue 48
the score math here counted invalid and unsupported only, so a failed call scored as an
irrelevant chunk when `context_scores` was called on it ([failed, relevant] gave 0.5 and 0.5),
while the stage left the question unscored; the stage's definition is the right one, because a
failed call says nothing about the chunk. The stage never passed a failed verdict to
`context_scores`, so no report's number moved.

Under the check protocol (evalbook.checks.protocol) each judged chunk is one outcome of the
check `chunk_relevance` (`chunk_outcome`): relevant passes, partial and irrelevant fail, an
unusable verdict is an error with its reason. Relevance is the share of passes over a
question's outcomes, and an error leaves the question unscored, since its rank cannot be told.

A chunk whose text is empty, or holds only whitespace and invisible format characters (a
zero-width space, a byte order mark), is never sent to the judge: its verdict is `empty`
(EMPTY_CHUNK), with the reason, and it is counted (`n_empty`). It is input with nothing to
judge, not an irrelevant chunk.

The metrics, over one question's chunks in rank order, count only `relevant` as relevant
(partial is reported beside them, not half-counted), and are exact: sums of fractions
(`fractions.Fraction`), turned into a float once, so that a perfect ranking scores 1.0, not
0.9999999999, and no epsilon hides a zero.
- context relevance: relevant chunks / judged chunks;
- context precision: average precision over the ranks, the mean of precision@k at each rank k
  that holds a relevant chunk; a question with no relevant chunk scores 0 (and is counted);
- context recall: the reference answer's claims (split as groundedness splits answers) that at
  least one retrieved chunk supports, over all claims; nothing retrieved scores 0.
All three read the chunks with text only: an empty chunk is left out of the denominator and of
the ranking (the next chunk with text takes its place), never counted as a 0, and its count is
reported beside the score; a question whose chunks are all empty is unscored (ALL_EMPTY).
An unusable verdict (above) leaves its question unscored on relevance and precision, with the
reason.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

from evalbook.checks.protocol import CheckOutcome, Status
from evalbook.judge.client import JudgeReply, JudgeRequest, JudgeSettings, judge_key_parts
from evalbook.judge.parsing import Unparsed, read_reply
from evalbook.prompts import PromptTemplate, load_template

VERDICTS = ("relevant", "partial", "irrelevant")  # the judge's, as CHUNK_SCHEMA allows them
UNUSABLE = ("invalid", "unsupported", "failed")  # verdicts that cannot be used (the module's docstring)
CHUNK_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["verdict", "reason", "quote"],
    "properties": {"verdict": {"enum": list(VERDICTS)}, "reason": {"type": "string"},
                   "quote": {"type": ["string", "null"]}},  # null: no passage (an irrelevant chunk)
}
SPACES = re.compile(r"\s+")
NAME = "chunk_relevance"
METRIC_VERSION = 1
PROMPT = ("chunk-relevance", 1)  # judge/prompts/chunk-relevance-v1.txt


EMPTY = "empty"
KINDS = (*VERDICTS, *UNUSABLE, EMPTY)  # every verdict a chunk can get, as its record counts them
ALL_EMPTY = "not scored: every retrieved chunk is empty or only whitespace"
# Each judged chunk's status under the check protocol; an empty chunk is never judged and has none.
STATUS: dict[str, Status] = {"relevant": "pass", "partial": "fail", "irrelevant": "fail",
                             **dict.fromkeys(UNUSABLE, "error")}


def is_empty_chunk(chunk: str) -> bool:
    """The chunk holds no character but whitespace and invisible format characters (Unicode
    category Cf: a zero-width space, a byte order mark), so there is nothing to judge."""
    return all(character.isspace() or unicodedata.category(character) == "Cf" for character in chunk)


def texted(chunks: Sequence[str]) -> list[int]:
    """The 0-based indices of the chunks that have text, in rank order: those sent to the judge."""
    return [index for index, chunk in enumerate(chunks) if not is_empty_chunk(chunk)]


RECALL = "context_recall"
RECALL_PROMPT = ("context-recall", 1)  # judge/prompts/context-recall-v1.txt


def recall_schema(n_chunks: int) -> dict[str, Any]:
    """The recall reply: each claim of the reference with the passages (1 to n) that support it."""
    return {"type": "object", "additionalProperties": False, "required": ["claims"],
            "properties": {"claims": {"type": "array", "items": {
                "type": "object", "additionalProperties": False, "required": ["claim", "passages"],
                "properties": {"claim": {"type": "string"},
                               "passages": {"type": "array", "uniqueItems": True,
                                            "items": {"type": "integer", "minimum": 1, "maximum": max(n_chunks, 1)}}}}}}}


def recall_request(example_id: str, reference: str, chunks: Sequence[str], settings: JudgeSettings,
                   template: PromptTemplate, repeat: int = 0) -> JudgeRequest:
    """The recall request: the reference and the chunks that have text, numbered from 1 in rank
    order (an empty chunk is left out, so the numbers are not the ranks; read_recall maps them back)."""
    passages = [chunks[index] for index in texted(chunks)]
    schema = recall_schema(len(passages))
    prompt = template.render(reference=reference, chunks=passages,
                             json_instructions=settings.structured_output == "json_instructions",
                             reply_schema=json.dumps(schema))
    return JudgeRequest(metric=RECALL, example_id=example_id, prompt=prompt, schema=schema,
                        key_parts=judge_key_parts(settings, template.sha256, RECALL, METRIC_VERSION, repeat),
                        repeat=repeat)


def read_recall(text: str | None, chunks: Sequence[str], finish_reason: str | None = None):
    """(the recall, each claim with the 0-based indices of its chunks among all `chunks`), or
    Unparsed; `chunks` as given to recall_request."""
    sent = texted(chunks)
    value = read_reply(text, recall_schema(len(sent)), finish_reason).value
    claims = [{"claim": c["claim"], "chunks": [sent[p - 1] for p in c["passages"]]} for c in value["claims"]]
    return context_recall([c["chunks"] for c in claims], len(chunks)), claims


def chunk_template() -> PromptTemplate:
    return load_template(*PROMPT)


def chunk_requests(example_id: str, question: str, chunks: Sequence[str], settings: JudgeSettings,
                   template: PromptTemplate, repeats: int = 1) -> list[JudgeRequest]:
    """One request per retrieved chunk with text (and repeat), in rank order; `example_id` carries
    the rank, `<id>#chunk<rank>` (from 1). An empty chunk (is_empty_chunk) has no request. The
    cache key holds the metric, its version, the template's sha256, the judge's model, URL and
    sampling, and the prompt (the question and the chunk), so the same chunk retrieved for the
    same question is judged once."""
    requests = []
    for index in texted(chunks):
        rank, chunk = index + 1, chunks[index]
        prompt = template.render(question=question, chunk=chunk,
                                 json_instructions=settings.structured_output == "json_instructions",
                                 reply_schema=json.dumps(CHUNK_SCHEMA))
        for repeat in range(repeats):
            parts = judge_key_parts(settings, template.sha256, NAME, METRIC_VERSION, repeat)
            requests.append(JudgeRequest(metric=NAME, example_id=f"{example_id}#chunk{rank}", prompt=prompt,
                                         schema=CHUNK_SCHEMA, key_parts=parts, repeat=repeat))
    return requests


@dataclass(frozen=True)
class ChunkVerdict:
    verdict: str  # one of KINDS: a verdict of the judge's, an unusable one, or empty
    reason: str | None = None  # the judge's, or why the reply could not be used
    quote: str | None = None
    claimed: str | None = None  # an unsupported reply's verdict, as the judge gave it


EMPTY_CHUNK = ChunkVerdict(EMPTY, "the chunk's text is empty or only whitespace: not sent to the judge")


def _words(text: str) -> str:
    return SPACES.sub(" ", text).strip()


def quote_in_chunk(quote: str | None, chunk: str) -> bool:
    """The quote occurs in the chunk word for word; runs of whitespace count as one space."""
    wanted = _words(quote or "")
    return bool(wanted) and wanted in _words(chunk)


def read_chunk_verdict(text: str | None, chunk: str, finish_reason: str | None = None) -> ChunkVerdict:
    try:
        value = read_reply(text, CHUNK_SCHEMA, finish_reason).value
    except Unparsed as failure:
        return ChunkVerdict("invalid", failure.reason)
    verdict, reason, quote = value["verdict"], value["reason"], value["quote"]
    if verdict != "irrelevant" and not quote_in_chunk(quote, chunk):
        return ChunkVerdict("unsupported", "the quote is not in the chunk word for word", quote, claimed=verdict)
    return ChunkVerdict(verdict, reason, quote)


def reply_verdict(reply: JudgeReply | None, chunk: str) -> ChunkVerdict:
    """The verdict on one chunk from the judge's reply to it (None: no reply came): EMPTY_CHUNK
    for a chunk never sent, `failed` with the reason when no reply can be read, else
    read_chunk_verdict's."""
    if is_empty_chunk(chunk):  # never sent: there is no reply to read
        return EMPTY_CHUNK
    if reply is None:
        return ChunkVerdict("failed", "no reply")
    if reply.error is not None:
        return ChunkVerdict("failed", f"judge call failed: {reply.error}")
    return read_chunk_verdict(reply.text, chunk, reply.finish_reason)


def chunk_outcome(verdict: ChunkVerdict) -> CheckOutcome | None:
    """The chunk's verdict as an outcome of the check `chunk_relevance`: relevant passes,
    partial and irrelevant fail, an unusable verdict is an error; each with its reason (the
    judge's, or why the reply could not be used). None for an empty chunk: it was not judged."""
    if verdict.verdict == EMPTY:
        return None
    reason = verdict.verdict if verdict.reason is None else f"{verdict.verdict}: {verdict.reason}"
    details = {key: value for key, value in (("quote", verdict.quote), ("claimed", verdict.claimed))
               if value is not None}
    return CheckOutcome(NAME, STATUS[verdict.verdict], reason, details)


def judged_outcomes(verdicts: Sequence[ChunkVerdict]) -> list[CheckOutcome]:
    """The outcomes of the judged chunks, in rank order (an empty chunk has none)."""
    return [outcome for outcome in map(chunk_outcome, verdicts) if outcome is not None]


def unusable_reason(verdicts: Sequence[ChunkVerdict]) -> str | None:
    """Why a question's chunk verdicts cannot be scored: how many are unusable (an error
    outcome) of those judged (the empty chunks aside); None when every one can be used."""
    return _unusable_reason(judged_outcomes(verdicts))


def _unusable_reason(outcomes: Sequence[CheckOutcome]) -> str | None:
    unusable = sum(outcome.status == "error" for outcome in outcomes)
    return f"{unusable} of {len(outcomes)} chunk verdicts are {' or '.join(UNUSABLE)}" if unusable else None


def average_precision(relevant: Sequence[bool]) -> float:
    """Average precision of a ranking given each rank's relevance (rank 1 first), exact; 0 when
    no chunk is relevant. [0, 0, 1, 1, 0] gives (1/3 + 2/4) / 2 = 5/12."""
    hits, total = 0, Fraction(0)
    for rank, is_relevant in enumerate(relevant, 1):
        if is_relevant:
            hits += 1
            total += Fraction(hits, rank)
    return float(total / hits) if hits else 0.0


@dataclass(frozen=True)
class ContextScores:
    relevance: float | None
    precision: float | None
    n_chunks: int
    n_relevant: int
    n_partial: int
    n_invalid: int
    n_unsupported: int
    n_failed: int
    n_empty: int  # chunks with no text, left out of both scores
    unscored_reason: str | None = None


def context_scores(verdicts: Sequence[ChunkVerdict]) -> ContextScores:
    """Context relevance and precision of one question's chunks, in rank order, over the judged
    chunks' outcomes (chunk_outcome): relevance is the share that pass, precision the average
    precision of the passes by rank. An empty chunk is counted and left out of both (the chunks
    after it move up a rank); an unusable verdict leaves both unscored (unusable_reason)."""
    counts = Counter(v.verdict for v in verdicts)
    common = {"n_chunks": len(verdicts), "n_relevant": counts["relevant"], "n_partial": counts["partial"],
              "n_invalid": counts["invalid"], "n_unsupported": counts["unsupported"], "n_failed": counts["failed"],
              "n_empty": counts[EMPTY]}
    if not verdicts:
        return ContextScores(None, None, **common, unscored_reason="no chunk was retrieved")
    outcomes = judged_outcomes(verdicts)
    if not outcomes:
        return ContextScores(None, None, **common, unscored_reason=ALL_EMPTY)
    unusable = _unusable_reason(outcomes)
    if unusable is not None:
        return ContextScores(None, None, **common, unscored_reason=unusable)
    relevant = [outcome.status == "pass" for outcome in outcomes]
    return ContextScores(float(Fraction(sum(relevant), len(relevant))), average_precision(relevant), **common)


def context_recall(claim_support: Sequence[Sequence[int]], n_chunks: int) -> float | None:
    """The share of the reference's claims that a retrieved chunk supports: each claim with the
    (0-based) indices of the chunks the judge says support it; an index outside the retrieved
    chunks supports nothing. Nothing retrieved: 0. No claim: None (nothing to recall)."""
    if not claim_support:
        return None
    if n_chunks == 0:
        return 0.0
    supported = sum(any(0 <= index < n_chunks for index in indices) for indices in claim_support)
    return float(Fraction(supported, len(claim_support)))

"""00_generate's computation: each example's question sent to the endpoint, every row accounted for.

`generate_answers` returns the predictions table that 01_load joins (`id`, `generated_answer`,
`retrieved_ids`, `retrieved_contexts`, `source`, `generator`) with, for each row, its `status`
(ok or failed), the failure and its reason, `latency_ms`, the tokens when the endpoint returned
them, whether it came from the cache and the attempts made; and the generation summary that the
report carries. A failed row keeps its place with a null answer, which 01_load counts as
missing: nothing is dropped or invented. A run in which every row failed raises GenerateFailed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd
import pyarrow as pa

from evalbook.errors import EvalbookError
from evalbook.generate.client import CallSettings, GenerateClient, Generation
from evalbook.generate.settings import Endpoint, Item, endpoint_from
from evalbook.replycache import ReplyCache
from evalbook.redaction import Redactor

LATENCY_PERCENTILES = (50, 90, 99)
TABLE_SCHEMA = pa.schema([
    pa.field("id", pa.string(), nullable=False),
    pa.field("generated_answer", pa.string()),
    pa.field("retrieved_ids", pa.list_(pa.string())),
    pa.field("retrieved_contexts", pa.list_(pa.string())),
    pa.field("source", pa.string()),
    pa.field("generator", pa.string()),
    pa.field("status", pa.string(), nullable=False),
    pa.field("failure", pa.string()),
    pa.field("error", pa.string()),
    pa.field("latency_ms", pa.float64()),
    pa.field("prompt_tokens", pa.int64()),
    pa.field("completion_tokens", pa.int64()),
    pa.field("cached", pa.bool_(), nullable=False),
    pa.field("redacted", pa.bool_(), nullable=False),
    pa.field("attempts", pa.int64(), nullable=False),
])


class GenerateFailed(EvalbookError, RuntimeError):
    """Every row failed: there is nothing to score. The message gives the failures and the first reason."""


@dataclass
class GenerateOutcome:
    table: pa.Table
    summary: dict[str, Any]
    examples: pd.DataFrame  # what was asked


def call_settings(config: dict[str, Any]) -> CallSettings:
    return CallSettings(concurrency=config["concurrency"], timeout_seconds=config["timeout_seconds"],
                        max_retries=config["max_retries"], backoff_seconds=config["backoff_seconds"])


def items_of(examples: pd.DataFrame) -> list[Item]:
    """One Item per example row (id, question, gold context, and the input's retrieval if any)."""
    def listed(row: pd.Series, column: str) -> list[str] | None:
        value = row.get(column)
        return None if value is None or (not isinstance(value, (list, np.ndarray)) and pd.isna(value)) \
            else [str(v) for v in value]

    return [Item(id=str(row["id"]), question=row["question"], context=row["context"],
                 retrieved_ids=listed(row, "retrieved_ids"), retrieved_contexts=listed(row, "retrieved_contexts"))
            for _, row in examples.iterrows()]


def latency_summary(latencies: list[float]) -> dict[str, Any]:
    """p50, p90 and p99 of the latencies in ms (numpy's linear percentiles), and their number."""
    if not latencies:
        return {"n": 0, **{f"p{q}": None for q in LATENCY_PERCENTILES}}
    values = np.percentile(np.asarray(latencies, dtype=float), LATENCY_PERCENTILES)
    return {"n": len(latencies), **{f"p{q}": float(v) for q, v in zip(LATENCY_PERCENTILES, values)}}


def _token_total(generations: list[Generation], name: str) -> int | None:
    counts = [getattr(g, name) for g in generations if getattr(g, name) is not None]
    return int(sum(counts)) if counts else None


def summarize_generations(generations: list[Generation], endpoint: Endpoint, client: GenerateClient,
                          config: dict[str, Any]) -> dict[str, Any]:
    ok = [g for g in generations if g.status == "ok"]
    failures = Counter(g.failure for g in generations if g.status == "failed")
    return {
        "status": "ran", "kind": endpoint.kind, "endpoint": endpoint.shown_url, "model": endpoint.model,
        "template": None if endpoint.template is None else {"id": endpoint.template.id,
                                                            "sha256": endpoint.template.sha256},
        "system_version": config["system_version"], "source": config["source"],
        "n": len(generations), "n_ok": len(ok), "n_failed": len(generations) - len(ok),
        "failures": dict(failures.most_common()),
        "failed_ids": [g.id for g in generations if g.status == "failed"],
        "latency_ms": latency_summary([g.latency_ms for g in ok if g.latency_ms is not None]),
        "n_latency_from_cache": sum(1 for g in ok if g.cached),
        "tokens": {"prompt": _token_total(ok, "prompt_tokens"),
                   "completion": _token_total(ok, "completion_tokens"),
                   "n_without_usage": sum(1 for g in ok if g.prompt_tokens is None and g.completion_tokens is None)},
        "calls": client.stats.calls, "cache_hits": client.stats.cache_hits, "retries": client.stats.retries,
        "models": sorted({g.model for g in ok if g.model}),
        "n_redacted": sum(1 for g in generations if g.redacted),
        "n_cache_dropped": client.stats.cache_dropped,
        "n_without_retrieved_ids": sum(1 for g in ok if g.retrieved_ids is None) if endpoint.returns_retrieval else None,
        "settings": {key: config[key] for key in ("concurrency", "timeout_seconds", "max_retries", "backoff_seconds")},
    }


def generations_table(generations: list[Generation], endpoint: Endpoint, source: str) -> pa.Table:
    """The predictions table; without the retrieval columns when the endpoint does not retrieve."""
    rows = []
    for g in generations:
        row = asdict(g)
        rows.append({"id": g.id, "generated_answer": g.answer, "retrieved_ids": g.retrieved_ids,
                     "retrieved_contexts": g.retrieved_contexts, "source": source,
                     # the model the endpoint reported; else the profile's, for the openai kind
                     "generator": (g.model or endpoint.model) if g.status == "ok" else None,
                     **{k: row[k] for k in ("status", "failure", "error", "latency_ms", "prompt_tokens",
                                            "completion_tokens", "cached", "redacted", "attempts")}})
    table = pa.Table.from_pylist(rows, schema=TABLE_SCHEMA)
    return table if endpoint.returns_retrieval else table.drop_columns(["retrieved_ids", "retrieved_contexts"])


def check_something_generated(summary: dict[str, Any], table: pa.Table) -> None:
    if summary["n_ok"]:
        return
    failures = ", ".join(f"{n} {kind}" for kind, n in summary["failures"].items())
    first = table.column("error")[0].as_py()
    raise GenerateFailed(f"every one of the {summary['n']} generation calls failed ({failures}), so there "
                         f"is nothing to score; the first: {first}")


def generate_answers(examples: pd.DataFrame, config: dict[str, Any], cache: ReplyCache,
                     http_transport=None, on_done: Callable[[Generation, GenerateClient], None] | None = None,
                     on_plan: Callable[[int, int], None] | None = None,
                     redactor: Redactor | None = None) -> GenerateOutcome:
    """Ask the endpoint of `config` (an enabled `generate:` section) for each example's answer.

    `on_plan(calls, cached)` is told before the first call how many rows need one; `on_done` is
    called as each row finishes. Every response passes through `redactor` (the profile's
    secrets; the endpoint's own header values always) before it is stored or read.
    """
    endpoint = endpoint_from(config)
    client = GenerateClient(endpoint, call_settings(config), cache, http_transport, redactor)
    items = items_of(examples)
    if on_plan is not None:
        cached = sum(client.cached(item) for item in items)
        on_plan(len(items) - cached, cached)
    generations = client.run(items, None if on_done is None else (lambda g: on_done(g, client)))
    summary = summarize_generations(generations, endpoint, client, config)
    return GenerateOutcome(generations_table(generations, endpoint, config["source"]), summary, examples)

"""The judge stage: choose what to judge, ask the judge, score the replies, summarize.

Only answers whose `source` is in the profile's eligible list are judged (data without any
source counts as eligible, and the summary says so). A judge left with nothing to judge is an
error naming what it saw. A seeded sample can limit the judged share. Every judged example
gets a record per metric: a score, or unscored with the reason and the raw reply.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from evalbook.errors import EvalbookError
from evalbook.replycache import ReplyCache, cache_key
from evalbook.judge.client import JudgeClient, JudgeReply, JudgeRequest, JudgeSettings, RunStats, judge_key_parts
from evalbook.judge.context import context_judgments, context_requests, enabled_context
from evalbook.judge.estimate import check_budget, estimate
from evalbook.judge.parsing import Unparsed, parse_reply, read_reply
from evalbook.prompts import PromptTemplate, load_template
from evalbook.judge.protocol import JUDGED_METRICS, JudgedMetric
from evalbook.judge.score import PLACEHOLDER_THRESHOLD, Score
from evalbook.redaction import Redactor, profile_secrets
from evalbook.score.models import quiet_weight_loading
from evalbook.stats import summarize

MISSING_SOURCE = "(missing)"
# Named when no judge answers: the runner then starts the local server for the run itself.
LOCAL_JUDGE_COMMAND = "make run PARAMS=params/local-judge.yaml"


class EmbeddingFailed(EvalbookError, RuntimeError):
    """The embedding endpoint refused a call; the message is redacted."""


class NothingEligible(EvalbookError, RuntimeError):
    """The judge saw answers but none was eligible; never reported as a pass."""


@dataclass
class JudgeOutcome:
    records: dict[str, dict[str, Any]]
    summary: dict[str, Any]
    models_judge: dict[str, Any] | None


@dataclass
class Selection:
    judged_ids: list[str]
    not_eligible_ids: list[str]
    not_sampled_ids: list[str]
    eligibility: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- settings and labels

def settings_from(config: dict[str, Any]) -> JudgeSettings:
    return JudgeSettings(
        base_url=config["base_url"], model=config["model"], api_key_env=config["api_key_env"],
        temperature=config["temperature"], seed=config["seed"], max_tokens=config["max_tokens"],
        structured_output=config["structured_output"], timeout_seconds=config["timeout_seconds"],
        max_retries=config["max_retries"], concurrency=config["concurrency"])


def by_name(metrics: Sequence[JudgedMetric]) -> dict[str, JudgedMetric]:
    return {metric.NAME: metric for metric in metrics}


def enabled(config: dict[str, Any], metrics: Sequence[JudgedMetric] = JUDGED_METRICS) -> list[JudgedMetric]:
    return [metric for metric in metrics if config["metrics"][metric.NAME]["enabled"]]


def enabled_metrics(config: dict[str, Any], metrics: Sequence[JudgedMetric] = JUDGED_METRICS) -> list[str]:
    return [metric.NAME for metric in enabled(config, metrics)]


def templates_for(config: dict[str, Any],
                  metrics: Sequence[JudgedMetric] = JUDGED_METRICS) -> dict[str, PromptTemplate]:
    return {metric.NAME: load_template(*metric.PROMPT) for metric in enabled(config, metrics)}


def describe_judge(config: dict[str, Any], templates: dict[str, PromptTemplate],
                   fingerprints: Sequence[str] = (),
                   metrics: Sequence[JudgedMetric] = JUDGED_METRICS) -> dict[str, Any]:
    """models.judge for the report; its label hashes everything that defines the judge.

    The server's system_fingerprint is recorded but not hashed into the label: it is known
    only after the calls, while the label must be fixed before them (it keys comparisons).
    """
    settings = settings_from(config)
    description = {
        "model": settings.model, "base_url_host": settings.host,
        "temperature": settings.temperature, "seed": settings.seed, "max_tokens": settings.max_tokens,
        "structured_output": settings.structured_output,
        "prompts": {m: {"id": t.id, "sha256": t.sha256} for m, t in templates.items()},
        "metric_versions": {m: by_name(metrics)[m].METRIC_VERSION for m in templates},
        "relevance_embedding": config["embedding"]["name"],
        "criteria": list(config["metrics"]["criteria"]["goals"]),
        "ground_truth_column": config["ground_truth_column"],
    }
    canonical = json.dumps(description, sort_keys=True, separators=(",", ":"))
    label = "judge-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]
    return {**description, "label": label, "note": config.get("note"),
            "system_fingerprint": sorted(fingerprints) or None}


def server_reachable(settings: JudgeSettings, timeout: float = 3.0, http_transport=None) -> str | None:
    """None when `GET <base_url>/models` answers; otherwise the reason, for a `not_run` record."""
    import httpx  # here, not at the top: a stage that judges nothing does not pay its import

    try:
        headers = {"Authorization": f"Bearer {settings.api_key()}"} if settings.api_key_env else {}
    except RuntimeError as error:
        return str(error)
    try:
        with httpx.Client(transport=http_transport, timeout=timeout, trust_env=not settings.loopback) as client:
            response = client.get(settings.base_url.rstrip("/") + "/models", headers=headers)
    except httpx.HTTPError as error:
        # The command goes before the parenthesis: the pages show the reason up to it (plain_reason).
        return (f"no judge server reachable at {settings.host}; to judge with the local model, run: "
                f"{LOCAL_JUDGE_COMMAND} ({type(error).__name__}: {error})")
    if response.status_code != 200:
        return f"the judge server at {settings.host} answered HTTP {response.status_code} to GET /models"
    return None


# ---------------------------------------------------------------- choosing what to judge

def select(table: pd.DataFrame, config: dict[str, Any], seed: int) -> Selection:
    """Eligible examples (by source), then a seeded sample of them; raises NothingEligible."""
    eligible_sources = list(config["eligible_sources"])
    # A missing source reads back as None, NaN or pd.NA depending on the column's dtype (pandas 3
    # reads Parquet strings as NaN-marked `str`), so each is made None before it is compared.
    sources = [None if pd.isna(s) else s for s in table["source"].tolist()]
    no_source_column = all(s is None for s in sources)
    seen = Counter(MISSING_SOURCE if s is None else s for s in sources)
    answered = table["generated_answer"].notna().to_numpy()
    eligible = [bool(a) and (no_source_column or s in eligible_sources) for a, s in zip(answered, sources)]
    ids = table["id"].tolist()
    eligible_ids = [i for i, ok in zip(ids, eligible) if ok]
    eligibility = {"eligible_sources": eligible_sources, "no_source_column": no_source_column,
                   "sources_seen": dict(seen), "n_seen": len(ids), "n_eligible": len(eligible_ids),
                   "n_without_prediction": int((~answered).sum())}
    if not eligible_ids:
        raise NothingEligible(
            f"the judge saw {len(ids)} answer(s) and none is eligible: sources seen "
            f"{dict(seen)}, eligible sources {eligible_sources}. Add a source to "
            f"judge.eligible_sources to judge it; nothing is reported as passed.")
    judged = seeded_sample(eligible_ids, config["sample_size"], seed)
    judged_set = set(judged)
    return Selection(judged_ids=judged,
                     not_eligible_ids=[i for i, ok in zip(ids, eligible) if not ok],
                     not_sampled_ids=[i for i in eligible_ids if i not in judged_set],
                     eligibility=eligibility)


# ---------------------------------------------------------------- requests and scoring

def seeded_sample(ids: list[str], size: int | None, seed: int) -> list[str]:
    """`size` of `ids` drawn with numpy's default_rng(seed), in their order; all of them when
    `size` is None or not smaller (judge.sample_size)."""
    if size is None or size >= len(ids):
        return list(ids)
    positions = np.sort(np.random.default_rng(seed).choice(len(ids), size, replace=False))
    return [ids[p] for p in positions]


def repeats_of(config: dict[str, Any]) -> int:
    """How many times each sampled example is judged on each metric (judge.repeats, default 1)."""
    return int(config.get("repeats", 1))


def build_requests(rows: pd.DataFrame, config: dict[str, Any], templates: dict[str, PromptTemplate],
                   metrics: Sequence[JudgedMetric] = JUDGED_METRICS) -> list[JudgeRequest]:
    """One request per (example, metric, repeat); empty answers get none (they are unscored as
    empty). A repeat after the first is its own cache entry (`repeat` in its key); the first
    keeps the key of a run with one repeat, so its cached replies serve both."""
    settings = settings_from(config)
    named = by_name(metrics)
    requests = []
    for row in rows.itertuples(index=False):
        answer = row.generated_answer.strip()
        if not answer:
            continue
        for name, template in templates.items():
            metric = named[name]
            schema = metric.reply_schema(config)
            prompt = template.render(**metric.prompt_fields(row, answer, config),
                                     json_instructions=settings.structured_output == "json_instructions",
                                     reply_schema=json.dumps(schema))
            for repeat in range(repeats_of(config)):
                parts = judge_key_parts(settings, template.sha256, name, metric.METRIC_VERSION, repeat)
                requests.append(JudgeRequest(metric=name, example_id=row.id, prompt=prompt,
                                             schema=schema, key_parts=parts, repeat=repeat))
    return requests


def score_one(metric: str, reply: JudgeReply, row: Any, config: dict[str, Any],
              embed: Callable[[list[str]], np.ndarray] | None,
              metrics: Sequence[JudgedMetric] = JUDGED_METRICS) -> tuple[Score, dict[str, Any]]:
    """The score of one reply to the metric named `metric`: unscored when the call failed or
    the reply does not parse."""
    if reply.error is not None:
        return Score.unscored(f"judge call failed: {reply.error}"), {}
    try:
        reading = read_reply(reply.text, reply.request.schema, reply.finish_reason)
    except Unparsed as failure:
        return Score.unscored(failure.reason), {"raw_reply": failure.raw}
    score, detail = by_name(metrics)[metric].score_reply(reading.value, row, config, embed)
    if reading.extra_keys:  # ignored, and named so that the summary counts them
        detail = {**detail, "extra_keys": list(reading.extra_keys)}
    return score, detail


def threshold_of(config: dict[str, Any], metric: str) -> tuple[float, bool]:
    value = config["metrics"][metric]["threshold"]
    return (PLACEHOLDER_THRESHOLD, True) if value is None else (float(value), False)


def metric_record(metric: JudgedMetric, score: Score, detail: dict[str, Any],
                  config: dict[str, Any]) -> dict[str, Any]:
    threshold, _ = threshold_of(config, metric.NAME)
    return {"score": score.value, "unscored_reason": score.reason,
            "passed": None if score.value is None else score.value >= threshold, **detail,
            **metric.record_fields(detail, threshold)}


def repeated_record(metric: JudgedMetric, judged: list[tuple[Score, dict[str, Any]]],
                    config: dict[str, Any]) -> dict[str, Any]:
    """One example's record on a metric judged several times (judge.repeats).

    Its score is the mean of the scored repeats, and passes at the threshold like any score;
    its verdicts (statements, criteria, questions) are those of the first scored repeat.
    `repeats` keeps each repeat's score, pass and reason; `spread` their min, max and standard
    deviation (ddof 1, None below two scored repeats); `flipped` whether the scored repeats
    disagree on pass or fail (None below two). Every repeat unscored: unscored with the first
    repeat's reason.
    """
    records = [metric_record(metric, score, detail, config) for score, detail in judged]
    scored = [record for record in records if record["score"] is not None]
    base = scored[0] if scored else records[0]
    values = [record["score"] for record in scored]
    score = Score(float(np.mean(values))) if values else Score.unscored(base["unscored_reason"])
    merged = {**base, **{key: value for key, value in metric_record(metric, score, {}, config).items()
                         if key in ("score", "unscored_reason", "passed")}}
    merged["repeats"] = [{key: record[key] for key in ("score", "passed", "unscored_reason")} for record in records]
    merged["spread"] = {"n_scored": len(values), "min": min(values, default=None), "max": max(values, default=None),
                        "std": float(np.std(values, ddof=1)) if len(values) > 1 else None}
    merged["flipped"] = len({record["passed"] for record in scored}) > 1 if len(values) > 1 else None
    return merged


def repeats_summary(entries: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
    """How much the judge moved across repeats: of the examples with two or more scored repeats
    (`n_compared`), how many flipped between pass and fail, the mean of their standard
    deviations and the widest range (max - min) of one example."""
    compared = [entry for entry in entries if entry.get("flipped") is not None]
    flipped = sum(entry["flipped"] for entry in compared)
    spreads = [entry["spread"] for entry in compared]
    return {"n": repeats, "n_compared": len(compared), "n_flipped": flipped,
            "flip_share": flipped / len(compared) if compared else None,
            "mean_std": float(np.mean([s["std"] for s in spreads])) if spreads else None,
            "max_range": max((s["max"] - s["min"] for s in spreads), default=None)}


# ---------------------------------------------------------------- the summary

def cost_of(stats, prices: dict[str, float] | None) -> float | str:
    """USD from the profile's prices per million tokens; "unknown" without prices or when a
    reply came without token usage, never a made-up 0."""
    if not prices or stats.replies_without_usage:
        return "unknown"
    return (stats.prompt_tokens * prices["input_usd_per_million"]
            + stats.completion_tokens * prices["output_usd_per_million"]) / 1e6


def summarize_judgments(records: dict[str, dict[str, Any]], selection: Selection, config: dict[str, Any],
                        stats: RunStats, label: str,
                        metrics: Sequence[JudgedMetric] = JUDGED_METRICS,
                        embeddings: EmbeddingUsage | None = None) -> dict[str, Any]:
    summaries = {}
    totals = Counter()
    counted: set[str] = set()
    for judged_metric in enabled(config, metrics):
        metric = judged_metric.NAME
        entries = [r[metric] for r in records.values() if r.get("status") == "judged"]
        scores = [e["score"] for e in entries]
        summary = summarize(scores)
        threshold, placeholder = threshold_of(config, metric)
        scored = [s for s in scores if s is not None]
        # the context metrics relevance and precision share their chunk calls: counted once
        requested = getattr(judged_metric, "REQUESTS", metric)
        metric_stats = stats.metric(requested)
        shared = requested in counted
        counted.add(requested)
        summaries[metric] = {
            "label": label,
            "mean": summary["mean"], "p10": summary["p10"], "p50": summary["p50"], "p90": summary["p90"],
            "n_scored": summary["n"], "n_unscored": summary["n_missing"],
            "unscored_reasons": dict(Counter(e["unscored_reason"] for e in entries if e["score"] is None)),
            # replies whose keys beyond the schema were ignored (their verdicts count)
            "n_extra_keys": sum(1 for e in entries if e.get("extra_keys")),
            "threshold": threshold, "threshold_is_placeholder": placeholder,
            "pass_rate": (sum(s >= threshold for s in scored) / len(scored)) if scored else None,
            **({"calls": 0, "cache_hits": 0, "errors": 0, "prompt_tokens": 0, "completion_tokens": 0,
                "cost_usd": 0.0, "calls_counted_under": next(m for m in summaries
                                                             if getattr(by_name(metrics)[m], "REQUESTS", m) == requested)}
               if shared else
               {"calls": metric_stats.calls, "cache_hits": metric_stats.cache_hits, "errors": metric_stats.errors,
                "prompt_tokens": metric_stats.prompt_tokens, "completion_tokens": metric_stats.completion_tokens,
                "cost_usd": cost_of(metric_stats, config.get("prices"))}),
            **judged_metric.summary_fields(entries, config),
        }
        if repeats_of(config) > 1:
            summaries[metric]["repeats"] = repeats_summary(entries, repeats_of(config))
        for key in ("calls", "cache_hits", "errors", "prompt_tokens", "completion_tokens"):
            totals[key] += summaries[metric][key]
    costs = [m["cost_usd"] for m in summaries.values()]
    spent = None if embeddings is None else embedding_summary(embeddings, config.get("prices"))
    if spent is not None:
        for key in ("calls", "cache_hits", "prompt_tokens"):
            totals[key] += spent[key]
        costs.append(spent["cost_usd"])
    n_eligible = selection.eligibility["n_eligible"]
    return {
        "status": "ran", "reason": None, "label": label, "note": config.get("note"),
        "eligibility": selection.eligibility,
        "sampling": {"sample_size": config["sample_size"], "seed": config["sample_seed"],
                     "n_judged": len(selection.judged_ids),
                     "fraction_of_eligible_judged": len(selection.judged_ids) / n_eligible},
        "metrics": summaries,
        # an embedding endpoint's calls for the metrics that embed (relevance); None: local embeddings
        "embeddings": spent,
        "totals": {**{k: int(totals[k]) for k in ("calls", "cache_hits", "errors", "prompt_tokens",
                                                  "completion_tokens")},
                   "cost_usd": "unknown" if any(c == "unknown" for c in costs) else float(sum(costs)),
                   # replies that held a secret (replaced by [redacted]), and cache entries from
                   # before redaction dropped because they held one
                   "n_redacted": stats.redacted, "n_cache_dropped": stats.cache_dropped},
    }


def not_run(reason: str, config: dict[str, Any] | None) -> dict[str, Any]:
    """The summary of a judge stage that did not run: a reason, no scores."""
    return {"status": "not_run", "reason": reason, "label": None,
            "note": None if config is None else config.get("note"),
            "eligibility": None, "sampling": None, "metrics": {}, "totals": None}


# ---------------------------------------------------------------- the whole stage

def local_embedder(folder: Path) -> Callable[[list[str]], np.ndarray]:
    from sentence_transformers import SentenceTransformer  # imports torch: only for a local embedder

    with quiet_weight_loading():
        model = SentenceTransformer(str(folder))
    return lambda texts: model.encode(list(texts), convert_to_numpy=True)


@dataclass
class EmbeddingUsage:
    """What an embedding endpoint was asked: calls, texts served from the cache, tokens."""

    model: str
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0


class OpenAIEmbedder:
    """Relevance's embedder on an OpenAI-compatible `/embeddings` endpoint, each text's vector
    kept in the judge cache (keyed by the endpoint, the model and the text), so that a rerun
    makes no call; `usage` counts the calls, the cache hits and the tokens the endpoint reports."""

    def __init__(self, settings: JudgeSettings, model_name: str, cache: ReplyCache, http_transport=None,
                 redactor: Redactor | None = None):
        # here, not at the top: openai and httpx take a while to import, and only this embedder uses them
        import httpx
        from openai import OpenAI

        http_client = httpx.Client(transport=http_transport, trust_env=not settings.loopback)
        self.client = OpenAI(base_url=settings.base_url, api_key=settings.api_key(), http_client=http_client,
                             timeout=settings.timeout_seconds, max_retries=settings.max_retries)
        self.base_url, self.cache = settings.base_url, cache
        self.usage = EmbeddingUsage(model_name)
        # the judge's own key always, whatever else the caller's redactor covers
        own = profile_secrets({"judge": {"api_key_env": settings.api_key_env}})
        self.redactor = Redactor([*own, *(redactor.secrets if redactor is not None else ())])

    def _key(self, text: str) -> str:
        return cache_key({"kind": "embedding", "base_url": self.base_url, "model": self.usage.model, "text": text})

    def __call__(self, texts: list[str]) -> np.ndarray:
        vectors: dict[str, list[float]] = {}
        for text in dict.fromkeys(texts):
            entry = self.cache.get(self._key(text))
            if entry is not None:
                vectors[text] = entry["embedding"]
                self.usage.cache_hits += 1
        missing = [text for text in dict.fromkeys(texts) if text not in vectors]
        if missing:
            import openai  # the module for its error classes; slow to import, as above

            try:
                response = self.client.embeddings.create(model=self.usage.model, input=missing)
            except openai.APIError as error:  # its message may echo the key: redacted, the cause dropped
                raise EmbeddingFailed(f"the embedding endpoint at {self.base_url} failed: "
                                      f"{self.redactor.text(str(error))}") from None
            self.usage.calls += 1
            usage = getattr(response, "usage", None)
            self.usage.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            for text, item in zip(missing, sorted(response.data, key=lambda item: item.index)):
                vectors[text] = [float(x) for x in item.embedding]
                self.cache.put(self._key(text), {"embedding": vectors[text]})
        return np.asarray([vectors[text] for text in texts], dtype=np.float64)


def openai_embedder(settings: JudgeSettings, model_name: str, cache: ReplyCache,
                    http_transport=None, redactor: Redactor | None = None) -> OpenAIEmbedder:
    return OpenAIEmbedder(settings, model_name, cache, http_transport, redactor)


def embedding_summary(usage: EmbeddingUsage, prices: dict[str, float] | None) -> dict[str, Any]:
    """The embedding endpoint's calls, cache hits, tokens and cost: the tokens at
    `prices.embedding_usd_per_million`; "unknown" when calls were made without that price."""
    price = (prices or {}).get("embedding_usd_per_million")
    cost: float | str = "unknown" if price is None and usage.calls else usage.prompt_tokens * (price or 0) / 1e6
    return {"model": usage.model, "calls": usage.calls, "cache_hits": usage.cache_hits,
            "prompt_tokens": usage.prompt_tokens, "cost_usd": cost}


EMBED_BATCH = 256  # texts per embedding call (OpenAI's endpoint takes up to 2,048 inputs)


def texts_to_embed(rows: pd.DataFrame, replies: Sequence[JudgeReply],
                   metrics: Sequence[JudgedMetric]) -> list[str]:
    """Every text the metrics will embed to score the replies that parse (for relevance, each
    judged question and the questions the judge wrote for it), in the order of `rows`."""
    named = by_name(metrics)
    by_example: dict[str, list[JudgeReply]] = {}
    for reply in replies:
        by_example.setdefault(reply.request.example_id, []).append(reply)
    texts: list[str] = []
    for row in rows.itertuples(index=False):
        for reply in by_example.get(row.id, []):
            if reply.error is not None or reply.request.metric not in named:
                continue
            try:
                parsed = parse_reply(reply.text, reply.request.schema, reply.finish_reason)
            except Unparsed:
                continue
            texts.extend(named[reply.request.metric].texts_to_embed(parsed, row))
    return texts


def batched_embedder(texts: Sequence[str], embed: Callable[[list[str]], np.ndarray],
                     batch: int = EMBED_BATCH) -> Callable[[list[str]], np.ndarray]:
    """`embed`, called on the distinct `texts` EMBED_BATCH at a time up front, then looked up.

    One call per batch instead of one per example: relevance's embeddings took most of the
    judge stage's time after the calls when each example was embedded alone. A batched vector
    can differ from a lone one in float32's last bits (padding within the batch), about 1e-7
    in a cosine. A text not embedded up front is embedded on its own when asked for.
    """
    distinct = list(dict.fromkeys(texts))
    vectors: dict[str, np.ndarray] = {}
    for start in range(0, len(distinct), batch):
        chunk = distinct[start:start + batch]
        vectors.update(zip(chunk, np.asarray(embed(chunk))))

    def lookup(wanted: list[str]) -> np.ndarray:
        missing = [text for text in dict.fromkeys(wanted) if text not in vectors]
        if missing:
            vectors.update(zip(missing, np.asarray(embed(missing))))
        return np.asarray([vectors[text] for text in wanted])

    return lookup


def judge_table(table: pd.DataFrame, config: dict[str, Any], cache: ReplyCache,
                embed: Callable[[list[str]], np.ndarray] | None, seed: int, http_transport=None,
                progress: Callable[[JudgeReply, RunStats], None] | None = None,
                metrics: Sequence[JudgedMetric] = JUDGED_METRICS,
                on_estimate: Callable[[dict[str, Any]], None] | None = None,
                redactor: Redactor | None = None) -> JudgeOutcome:
    """Judge the eligible (sampled) examples of a canonical table on each enabled metric.

    Every reply passes through `redactor` (the profile's secrets; the judge's own key always)
    before it is cached, scored or recorded.

    Before the first call the pre-flight estimate (evalbook.judge.estimate) is made, handed to
    `on_estimate`, and checked against the budget: over it, OverBudget is raised and nothing is
    called. The estimate is kept in the summary."""
    selection = select(table, config, seed)
    judged_metrics = enabled(config, metrics)
    context = enabled_context(config)
    templates = templates_for(config, judged_metrics)
    context_templates = {m.NAME: load_template(*m.PROMPT) for m in context}
    client = JudgeClient(settings_from(config), cache, http_transport, redactor)
    rows = table.set_index("id", drop=False)
    judged_rows = rows.loc[selection.judged_ids]
    requests = build_requests(judged_rows, config, templates, judged_metrics)
    requests += context_requests(judged_rows, config, client.settings, context_templates, repeats_of(config))
    planned = estimate(requests, [r for r in requests if not client.cached(r)], client.settings, config,
                       http_transport)
    check_budget(planned)
    if on_estimate is not None:
        on_estimate(planned)
    replies = client.run(requests, None if progress is None else (lambda r: progress(r, client.stats)))
    repeated = {(r.request.example_id, r.request.metric, r.request.repeat): r for r in replies}

    records: dict[str, dict[str, Any]] = {}
    for example_id in selection.not_eligible_ids:
        records[example_id] = {"status": "not_eligible"}
    for example_id in selection.not_sampled_ids:
        records[example_id] = {"status": "not_sampled"}
    usage = getattr(embed, "usage", None)  # an endpoint's embedder counts its calls and tokens
    if embed is not None:
        embed = batched_embedder(texts_to_embed(judged_rows, list(repeated.values()), judged_metrics), embed)
    for row in judged_rows.itertuples(index=False):
        record: dict[str, Any] = {"status": "judged"}
        for metric in judged_metrics:
            judged = []
            for repeat in range(repeats_of(config)):
                reply = repeated.get((row.id, metric.NAME, repeat))
                judged.append((Score.unscored("empty answer: nothing to judge"), {}) if reply is None
                              else score_one(metric.NAME, reply, row, config, embed, judged_metrics))
            record[metric.NAME] = (metric_record(metric, *judged[0], config) if len(judged) == 1
                                   else repeated_record(metric, judged, config))
        if context:
            judged_context, chunks = context_judgments(row, repeated, config, repeats_of(config))
            for metric in context:
                judged = judged_context[metric.NAME]
                record[metric.NAME] = (metric_record(metric, *judged[0], config) if len(judged) == 1
                                       else repeated_record(metric, judged, config))
            if chunks is not None:
                record["chunks"] = chunks
        records[row.id] = record
    every_metric = (*judged_metrics, *context)
    models_judge = describe_judge(config, {**templates, **context_templates},
                                  sorted(client.stats.system_fingerprints), every_metric)
    for record in records.values():
        record["label"] = models_judge["label"]
    summary = summarize_judgments(records, selection, config, client.stats, models_judge["label"],
                                  every_metric, usage)
    summary["estimate"] = planned
    return JudgeOutcome(records=records, summary=summary, models_judge=models_judge)

"""The versioned JSON report of ADR 014: its records, its summaries, and writing it once.

Its provenance comes from evalbook.provenance, its schema check from evalbook.validation.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from evalbook.files import write_atomically
from evalbook.metrics import METRICS, SCORE_FLAGS, Metric, names, of_kind
from evalbook.report.slices import SliceSettings, report_slices
from evalbook.resultcache import ResultCache
from evalbook.stats import BOOTSTRAP, PERCENTILE_METHOD, mean_interval, rate, summarize
from evalbook.validation import ReportError, validate_report

SCHEMA_VERSION = "1.14"
INTERVAL_METHOD = (
    "percentile bootstrap of the mean over the examples with a value: numpy.random.default_rng(seed) "
    "draws `resamples` resamples of n indices with replacement; the interval is the (1 - confidence) / 2 "
    "and (1 + confidence) / 2 quantiles of the resample means (evalbook.stats.bootstrap_mean_ci)")


def _number(value: Any) -> float | None:
    if value is None or pd.isna(value):
        return None
    number = float(value)
    return None if math.isnan(number) else number


def _text(value: Any) -> str | None:
    """A text cell as JSON: missing (None, NaN, <NA>) becomes null."""
    return None if value is None or pd.isna(value) else str(value)


def _flags(canonical_row: pd.Series, scored_row: pd.Series) -> list[str]:
    flags = [] if canonical_row["has_prediction"] else ["no_prediction"]
    for column in SCORE_FLAGS:
        value = scored_row[column]
        if not pd.isna(value) and bool(value):
            flags.append(column)
    return flags


def _retrieval(score: pd.Series) -> dict[str, Any] | None:
    """An example's retrieval metrics and rank (evalbook.score.retrieval); None without retrieval."""
    if pd.isna(score["top_k_match"]):
        return None
    record: dict[str, Any] = {metric.name: _number(score[metric.name]) for metric in of_kind("retrieval")}
    record["top_k_match"] = bool(score["top_k_match"])
    record["rank"] = None if pd.isna(score["rank"]) else int(score["rank"])
    return record


def retrieval_summary(scored: pd.DataFrame, k: int) -> dict[str, Any]:
    """top-k match's rate and each other retrieval metric's mean (under the registry's mean_key)
    over the n examples with retrieval results, at k."""
    matches = rate(scored["top_k_match"].tolist())
    means = {metric.mean_key: summarize(scored[metric.name].tolist())["mean"] for metric in of_kind("retrieval")
             if metric.mean_key is not None and metric.name != "top_k_match"}
    return {"top_k_match_rate": matches["rate"], **means, "k": k, "n": matches["n"], "n_missing": matches["n_missing"]}


def example_records(canonical: pd.DataFrame, scored: pd.DataFrame) -> list[dict[str, Any]]:
    """Per-example records in the ADR 014 shape, plus `source`, `metadata` (the input columns
    evalbook does not read, evalbook.load) and `flags`."""
    if canonical["id"].tolist() != scored["id"].tolist():
        raise ReportError("the scored table's ids do not match the canonical table's, row for row")
    records = []
    for (_, example), (_, score) in zip(canonical.iterrows(), scored.iterrows()):
        records.append({
            "id": example["id"],
            "question": example["question"],
            "reference_answer": example["reference_answer"],
            "generated_answer": _text(example["generated_answer"]),
            "source": _text(example["source"]),
            "metadata": json.loads(example["metadata"]),
            "retrieval": _retrieval(score),
            "answer_similarity": {
                "bertscore": {"precision": _number(score["bertscore_precision"]),
                              "recall": _number(score["bertscore_recall"]),
                              "f1": _number(score["bertscore_f1"])},
                "sentence_cosine": _number(score["sentence_cosine"]),
            },
            "flags": _flags(example, score),
        })
    return records


def headline_metrics(judged: dict[str, Any]) -> list[Metric]:
    """The metrics a report gives intervals for and slices by: the similarity metrics, the
    retrieval metrics at k (not the rank) and every judge metric the judge scored (`judged`:
    judge_summary.metrics)."""
    return [m for m in METRICS if m.in_comparison and (m.kind != "judge" or m.name in judged)]


def intervals(examples: list[dict[str, Any]], judged: dict[str, Any]) -> dict[str, Any]:
    """Each mean of the report with its bootstrap interval (headline_metrics), from the
    examples' values (evalbook.metrics)."""
    chosen = headline_metrics(judged)
    settings = {"resamples": BOOTSTRAP.resamples, "seed": BOOTSTRAP.seed, "confidence": BOOTSTRAP.confidence}
    return {**settings, "method": INTERVAL_METHOD,
            "metrics": {m.name: mean_interval([m.value(e) for e in examples], **settings) for m in chosen}}


def build_report(*, run_id: str, timestamp: datetime, dataset: dict[str, Any],
                 models: dict[str, str], canonical: pd.DataFrame, scored: pd.DataFrame,
                 load_counts: dict[str, Any], k: int, provenance: dict[str, Any],
                 judge: dict[str, Any] | None = None,
                 generation: dict[str, Any] | None = None,
                 slicing: dict[str, Any] | None = None,
                 scenarios: dict[str, Any] | None = None,
                 checks: tuple[list[list[dict[str, Any]]], dict[str, Any]] | None = None,
                 results_cache: ResultCache | None = None) -> dict[str, Any]:
    """Assemble the report; `timestamp` must be timezone-aware UTC.

    `judge` is 03_judge's result ({summary, models_judge, records}); without it the report
    says the judge did not run. `generation` is 00_generate's summary, None when the answers
    were read from a file. `slicing` says how the run is sliced (evalbook.report.slices):
    `metadata_types` (01_load's), the profile's `by` and `min_n`, and 02_score's `topics`
    record (None when topics are off); without it the report has no slices (`slices` null).
    `scenarios` is the scenarios section (evalbook.scenarios.report), None when the run
    simulated no conversation. `checks` is each example's check outcomes (as records, in the
    canonical order) and the run's checks summary (evalbook.checks.protocol), None when no check
    ran. `results_cache` keeps the slices' tests between runs (evalbook.resultcache); it changes
    no number.
    """
    if timestamp.utcoffset() is None or timestamp.utcoffset().total_seconds() != 0:
        raise ReportError("the report timestamp must be timezone-aware UTC")
    counts = dict(load_counts)
    counts["n_truncated_bertscore"] = int(scored["truncated_bertscore"].fillna(False).sum())
    counts["n_truncated_sentence"] = int(scored["truncated_sentence"].fillna(False).sum())
    if judge is None:
        judge = {"summary": {"status": "not_run", "reason": "no judge stage in this report",
                             "label": None, "note": None, "eligibility": None, "sampling": None,
                             "metrics": {}, "totals": None},
                 "models_judge": None, "records": {}}
    examples = example_records(canonical, scored)
    for example in examples:
        example["judge"] = judge["records"].get(example["id"])
    if checks is not None:
        for example, outcomes in zip(examples, checks[0], strict=True):
            example["checks"] = outcomes
    if judge["models_judge"] is not None:
        models = {**models, "judge": judge["models_judge"]}
    slices = None
    if slicing is not None:
        slices, levels = report_slices(
            examples, canonical, scored, metrics=headline_metrics(judge["summary"]["metrics"]),
            metadata_types=slicing["metadata_types"], by=slicing["by"], k=k, topics=slicing["topics"],
            settings=SliceSettings(min_n=slicing["min_n"], bootstrap=BOOTSTRAP), results_cache=results_cache)
        for example, example_levels in zip(examples, levels):
            example["slices"] = example_levels
    else:
        for example in examples:
            example["slices"] = {}
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "timestamp": timestamp.isoformat().replace("+00:00", "Z"),
        "dataset": {**dataset, "n_examples": int(len(canonical))},
        "models": models,
        "retrieval_summary": retrieval_summary(scored, k),
        "answer_similarity_summary": {column: summarize(scored[column].tolist())
                                      for column in names("similarity")},
        "counts": counts,
        "judge_summary": judge["summary"],
        "generation_summary": generation,
        "intervals": intervals(examples, judge["summary"]["metrics"]),
        "slices": slices,
        "scenarios": scenarios,
        "checks_summary": None if checks is None else checks[1],
        "examples": examples,
        "provenance": {**provenance, "percentile_method": PERCENTILE_METHOD},
    }


def write_report(report: dict[str, Any], path: Path, overwrite: bool = False) -> Path:
    """Validate, then write the report; an invalid report is not written at all."""
    validate_report(report)
    data = (json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    write_atomically(path, data, overwrite=overwrite)
    return path

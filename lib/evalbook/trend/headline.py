"""A run's headline file, `headline.json`, and its per-example values, `values.parquet`.

The runner writes both into the run folder as the run ends, beside run.json. The headline holds
what the runs index and the trend need, in a few KB whatever the run's size:
- the run's id, env, status, start and end, and its report's file name;
- the dataset (name, split, size) and the inputs' sha256;
- the pins: what 05_compare's "what changed" reads (evalbook.compare.document.run_summary), the
  embedding pins its gate checks, and the scoring backend;
- each metric's mean with its interval and n, as the report's `intervals` give them, and each
  judged metric's pass rate;
- how many examples failed a check (the report's `checks_summary`), for the index's column.

The headline is checked against schemas/headline-v1.json before anything is written.

`values.parquet` holds each example's id and its value of every metric a comparison pairs, so
that the trend can pair two runs example by example without reading either report.

A run from before these files existed gets them once, from its report, when the index or the
trend first reads it (`ensure_headline`), and only on a local outputs root.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from evalbook.compare.document import run_summary, scoring_backend
from evalbook.compare.gates import embedding_pins
from evalbook.errors import EvalbookError
from evalbook.files import write_new
from evalbook.layout import EXAMPLE_VALUES, HEADLINE_FILE, report_path
from evalbook.metrics import METRICS
from evalbook.runs import HEADLINE_KIND, RunRecord, json_field
from evalbook.validation import HEADLINE_SCHEMA, mismatch

SCHEMA_VERSION = "1.2"


class HeadlineError(EvalbookError, ValueError):
    """A headline that does not match schemas/headline-v1.json; it is never written."""


def validate_headline(headline: dict[str, Any]) -> None:
    """Raise HeadlineError listing every violation of schemas/headline-v1.json (and any NaN)."""
    problem = mismatch(headline, HEADLINE_SCHEMA, "headline")
    if problem:
        raise HeadlineError(problem)


def _pass_rates(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    judged = json_field(report, "judge_summary", "metrics") or {}
    return {name: {"rate": summary.get("pass_rate"), "threshold": summary.get("threshold"),
                   "n_scored": summary.get("n_scored")}
            for name, summary in judged.items() if isinstance(summary, dict)}


def _number_or_none(value: Any) -> Any:
    """A summary's number as it is; a NaN or infinity, which an old report may hold for a
    metric it had no value of, as None, since JSON (and the headline's schema) has no NaN."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _metrics(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each metric's mean, interval and n from the report's intervals. A metric whose summary
    holds its own interval (a check's pass rate with its Wilson interval) gives that, with n the
    examples that have a value (passed or failed); one the report summarises without an interval
    (a report from before intervals) gives its mean alone."""
    given = json_field(report, "intervals", "metrics") or {}
    examples = [e for e in report.get("examples") or [] if isinstance(e, dict)]
    metrics = {}
    for metric in METRICS:
        interval, summary = given.get(metric.name), metric.summary(report)
        if isinstance(interval, dict):
            metrics[metric.name] = {key: interval.get(key) for key in ("mean", "low", "high", "n")}
        elif metric.mean_key is not None and summary is not None and isinstance(summary.get("interval"), dict):
            metrics[metric.name] = {"mean": _number_or_none(metric.mean(report)),
                                    "low": summary["interval"].get("low"), "high": summary["interval"].get("high"),
                                    "n": sum(metric.value(e) is not None for e in examples)}
        elif metric.mean_key is not None and summary is not None:
            metrics[metric.name] = {"mean": _number_or_none(metric.mean(report)), "low": None, "high": None,
                                    "n": summary.get("n")}
    return metrics


def _checks(report: dict[str, Any]) -> dict[str, int] | None:
    """The counts of the report's checks_summary the index shows; None for a report without checks."""
    summary = report.get("checks_summary")
    if not isinstance(summary, dict):
        return None
    return {key: summary.get(key) for key in ("n_examples", "n_examples_failing", "n_examples_with_errors")}


def _scoring(report: dict[str, Any]) -> dict[str, Any]:
    return {"backend": scoring_backend(report), "pins": embedding_pins(report),
            "bertscore_layer": json_field(report, "provenance", "bertscore_num_layers"),
            "k": json_field(report, "retrieval_summary", "k")}


def build_headline(record: RunRecord, report: dict[str, Any] | None) -> dict[str, Any]:
    """The headline of the run `record` (evalbook.runs.read_run), with what its report says when
    it has one."""
    summary = record.summary
    provenance = summary.provenance if summary is not None else {}
    headline: dict[str, Any] = {
        "kind": HEADLINE_KIND, "schema_version": SCHEMA_VERSION, "run_id": record.run_id, "env": record.env,
        "status": record.status, "reason": record.reason,
        "started_at": record.started_at.isoformat(),
        "finished_at": summary.finished_at.isoformat() if summary and summary.finished_at else None,
        "git_commit": provenance.get("git_commit"), "overrides": record.overrides,
        "report": None, "dataset": None, "run": None, "scoring": None, "metrics": {}, "pass_rates": {},
        "intervals": None, "checks": None,
    }
    if report is not None:
        headline.update(report=report_path(record.run_dir).name, dataset=report.get("dataset"),
                        run=run_summary(report, report_path(record.run_dir).name), scoring=_scoring(report),
                        metrics=_metrics(report), pass_rates=_pass_rates(report),
                        intervals={key: json_field(report, "intervals", key) for key in ("resamples", "seed", "confidence")},
                        checks=_checks(report))
    return headline


def example_values(report: dict[str, Any]) -> pd.DataFrame:
    """Each example's id and its value of every metric a comparison pairs (NaN where it has none)."""
    names = [m.name for m in METRICS if m.in_comparison]
    examples = report.get("examples") or []
    rows = [{"id": e.get("id"), **{m.name: m.value(e) for m in METRICS if m.in_comparison}}
            for e in examples if isinstance(e, dict)]
    frame = pd.DataFrame(rows, columns=["id", *names])
    return frame.astype({"id": "string", **{name: "float64" for name in names}})


def write_headline(record: RunRecord, report: dict[str, Any] | None) -> dict[str, Any]:
    """Write the run's values.parquet (when it has a report) and then its headline.json, each
    write-once; the headline. A headline that does not match its schema raises HeadlineError
    before either is written."""
    headline = build_headline(record, report)
    validate_headline(headline)
    if report is not None:
        values = record.run_dir / EXAMPLE_VALUES
        if not values.exists():
            write_new(values, example_values(report).to_parquet(index=False))
    write_new(record.run_dir / HEADLINE_FILE, json.dumps(headline, indent=1).encode("utf-8"))
    return headline


def ensure_headline(record: RunRecord) -> dict[str, Any] | None:
    """The run's headline: its file when it has one, else, for a run that ended before headline
    files existed, one built from its report and written beside it. None for a run that has not
    ended (no run.json) or whose report cannot be read."""
    if record.headline is not None:
        return record.headline
    ended = record.status in ("failed", "interrupted") or (record.status in ("succeeded", "incomplete")
                                                           and record.report_data)
    if record.summary is None or not ended:
        return None
    try:
        return write_headline(record, record.report_data)
    except FileExistsError:  # another reader wrote it first: the same content
        return build_headline(record, record.report_data)

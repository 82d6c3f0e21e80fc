"""The first screen of a run's report: how good, on what, how sure.

`first_screen(report)` gathers it as plain values: the dataset and its size, the generator (and,
when 00_generate asked it, its endpoint and how many questions it answered), the model pins and
the judge (or one sentence on why it did not run); each headline metric's mean with its 95%
bootstrap interval and n, and the pass rate of each judged metric; top-k match and MRR@k with
their k; the counts of what was missing, empty, cut or unscored. `headline_html(report, earlier)` renders it
through `headline.html`, adding, when an earlier run of the same data with the same models exists,
the paired deltas against it; summary.md renders the same context (evalbook.publish.summary).
"""

from __future__ import annotations

from typing import Any

from evalbook.formatting import count_said, counted
from evalbook.judge.display import plain_reason
from evalbook.metrics import METRICS, Metric
from evalbook.metrics import metric as registered
from evalbook.report.checks import checks_view
from evalbook.report.reader import RunReport
from evalbook.templating import render

SHA_SHOWN = 12  # characters of a weights sha256 shown; the report holds all 64


def _judge(summary: dict[str, Any]) -> dict[str, Any]:
    """The judge in one line's parts: whether it ran, its label, and why it did not run without
    the exception's detail (plain_reason)."""
    return {"ran": summary.get("status") == "ran", "label": summary.get("label"),
            "reason": plain_reason(summary.get("reason"))}


def _model_pins(data: dict[str, Any]) -> list[dict[str, Any]]:
    models, provenance = data.get("models", {}), data.get("provenance", {})
    digests = provenance.get("weights_sha256") or {}
    pins = []
    for role, shown in (("sentence_transformer", "cosine"), ("bertscore", "BERTScore")):
        name = models.get(role)
        if name is None:
            continue
        digest = digests.get(role)
        pins.append({"shown": shown, "name": name,
                     "layer": provenance.get("bertscore_num_layers") if role == "bertscore" else None,
                     "digest": digest[:SHA_SHOWN] if digest else None})
    return pins


def _pass_rates(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each judged metric's pass rate (`rate`, None when nothing was scored) at its `threshold`,
    by metric name; a metric without a threshold has none."""
    judged = (report.get("judge_summary") or {}).get("metrics") or {}
    return {name: {"rate": summary.get("pass_rate"), "threshold": summary["threshold"]}
            for name, summary in judged.items() if summary.get("threshold") is not None}


def _retrieval_k(metric: Metric, data: dict[str, Any]) -> int | None:
    return (metric.summary(data) or {}).get("k") if metric.kind == "retrieval" else None


def _metric_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    intervals = (data.get("intervals") or {}).get("metrics") or {}
    rates = _pass_rates(data)
    return [{"label": metric.label, "k": _retrieval_k(metric, data), "mean": shown["mean"], "low": shown.get("low"),
             "high": shown.get("high"), "n": shown["n"], "passing": rates.get(metric.name)}
            for metric in METRICS if metric.headline and (shown := intervals.get(metric.name)) is not None]


COUNTS = (("n_examples_without_prediction", "examples without an answer"),
          ("n_empty_generated_answers", "empty answers"),
          ("n_empty_reference_answers", "empty references"),
          ("n_truncated_bertscore", "cut at BERTScore's token limit"),
          ("n_truncated_sentence", "cut at the sentence model's limit"))


def _judgments(report: dict[str, Any]) -> tuple[int, int]:
    """(unscored judgments, judged replies whose extra keys were ignored) over the judged metrics."""
    judged = list(((report.get("judge_summary") or {}).get("metrics") or {}).values())
    return (sum(m.get("n_unscored") or 0 for m in judged), sum(m.get("n_extra_keys") or 0 for m in judged))


EXTRA_KEYS = ("judged reply whose extra keys were ignored", "judged replies whose extra keys were ignored")


def counts(report: dict[str, Any]) -> list[tuple[str, int]]:
    """(what, how many) of the report's counts a reader needs, and the unscored judgments: the
    rows of summary.md's table of counts."""
    given = report.get("counts") or {}
    shown = [(text, given[key]) for key, text in COUNTS if given.get(key) is not None]
    unscored, extra = _judgments(report)
    shown.append(("unscored judgments", unscored))
    return shown + ([(EXTRA_KEYS[1], extra)] if extra else [])


def counts_said(report: dict[str, Any]) -> list[str]:
    """The same counts as the headline's sentence says them, each in the number it takes
    ("1 empty answer", "0 unscored judgments"), in the words of formatting.COUNT_LABELS."""
    given = report.get("counts") or {}
    said = [count_said(key, given[key]) for key, _ in COUNTS if given.get(key) is not None]
    unscored, extra = _judgments(report)
    said.append(counted(unscored, "unscored judgment"))
    return said + ([counted(extra, *EXTRA_KEYS)] if extra else [])


def earlier_context(comparison: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the headline says against an earlier run (compare.document.earlier_comparison): its
    short id and date, how many examples were paired, and each compared headline metric's delta
    with its interval; None without one."""
    if comparison is None:
        return None
    base = comparison["baseline"]
    headline = {m.name for m in METRICS if m.headline}
    deltas = [{"label": registered(row["metric"]).label, "delta": row["mean_delta"], "low": row["ci_low"],
               "high": row["ci_high"]}
              for row in comparison["metrics"] if row["compared"] and row["metric"] in headline]
    return {"run_id": base["run_id"][:8], "date": base["timestamp"][:10],
            "n_paired": comparison["pairing"]["n_paired"], "deltas": deltas}


def first_screen(report: RunReport | dict[str, Any]) -> dict[str, Any]:
    """The first screen described in the module docstring, as the context that headline.html
    and summary_run.md render: dataset, run_id, generator, generation (None unless 00_generate
    asked for the answers), judge (ran, label, reason), models (the pins), confidence, metrics
    (one row per headline metric with an interval: label, k, mean, low, high, n, passing),
    pass_rates (rate and threshold by judged metric), counts (each as a table's row names it)
    and counts_said (each as a sentence says it), and checks (how many answers
    failed a check, and what the similarity metrics cannot see; None without checks)."""
    view = RunReport.of(report)
    data = view.data
    return {"dataset": data["dataset"], "run_id": data["run_id"], "generator": data["models"].get("generator"),
            "generation": data.get("generation_summary") or None, "judge": _judge(view.judge_summary),
            "models": _model_pins(data), "confidence": (data.get("intervals") or {}).get("confidence", 0.95),
            "metrics": _metric_rows(data), "pass_rates": _pass_rates(data), "counts": counts(data),
            "counts_said": counts_said(data),
            "checks": checks_view(data)}


def headline_html(report: RunReport | dict[str, Any], earlier: dict[str, Any] | None = None) -> str:
    """The headline block described in the module docstring, as HTML; `earlier` is the
    comparison with an earlier comparable run (compare.document.earlier_comparison), whose
    deltas it adds."""
    return render("headline.html", **first_screen(report), earlier=earlier_context(earlier))

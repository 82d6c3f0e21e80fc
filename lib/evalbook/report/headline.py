"""The first screen of a run's report: how good, on what, how sure.

`headline_html(report)` is one block of HTML: the dataset and its size, the generator (and,
when 00_generate asked it, its endpoint and how many questions it answered), the model pins and the judge (or one sentence on why it did not run); each headline metric's mean with its
95% bootstrap interval and n, and the pass rate of each judged metric; top-k match with its n;
the counts of what was missing, empty, cut or unscored; and, when an earlier run of the same
data with the same models exists, the paired deltas against it. Numbers carry 3 decimals.
Every text that comes from the data or the profile is escaped by evalbook.escaping.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evalbook.compare.document import build_comparison
from evalbook.compare.gates import embedding_gate
from evalbook.escaping import escape_html
from evalbook.judge.display import plain_reason
from evalbook.metrics import METRICS, Metric
from evalbook.metrics import metric as registered
from evalbook.report.reader import ReportUnreadable, RunReport, read_report
from evalbook.runs import latest_reports

SHA_SHOWN = 12  # characters of a weights sha256 shown; the report holds all 64
LOOK_BACK = 20  # earlier runs searched for one on the same data with the same models


def number(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}"


def interval_text(interval: dict[str, Any] | None) -> str:
    if not interval or interval.get("low") is None:
        return "—"
    return f"[{interval['low']:.3f}, {interval['high']:.3f}]"


def judge_sentence(summary: dict[str, Any]) -> str:
    """The judge in one line: its label, or why it did not run without the exception's detail."""
    if summary.get("status") == "ran":
        return f"judged by <code>{escape_html(summary['label'])}</code>"
    return f"no judge ran: {escape_html(plain_reason(summary.get('reason')))}"


def _models_line(data: dict[str, Any]) -> str:
    models, provenance = data.get("models", {}), data.get("provenance", {})
    digests = provenance.get("weights_sha256") or {}
    parts = []
    for role, shown in (("sentence_transformer", "cosine"), ("bertscore", "BERTScore")):
        name = models.get(role)
        if name is None:
            continue
        layer = provenance.get("bertscore_num_layers") if role == "bertscore" else None
        pin = f" layer {layer}" if layer is not None else ""
        digest = digests.get(role)
        pin += f", sha256 {escape_html(digest[:SHA_SHOWN])}…" if digest else ""
        parts.append(f"{shown} <code>{escape_html(name)}</code>{pin}")
    return "; ".join(parts)


def _row(metric: Metric, view: RunReport) -> str | None:
    interval = (view.data.get("intervals") or {}).get("metrics", {}).get(metric.name)
    if interval is None:
        return None
    summary = metric.summary(view.data) or {}
    passed = summary.get("pass_rate") if metric.kind == "judge" else None
    threshold = f" at ≥ {summary['threshold']:g}" if passed is not None else ""
    label = metric.label + (f" (k = {summary['k']})" if metric.kind == "retrieval" else "")
    cells = [escape_html(label), number(interval["mean"]), interval_text(interval), str(interval["n"]),
             "—" if passed is None else f"{number(passed)}{threshold}"]
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


COUNTS = (("n_examples_without_prediction", "examples without an answer"),
          ("n_empty_generated_answers", "empty answers"),
          ("n_empty_reference_answers", "empty references"),
          ("n_truncated_bertscore", "cut at BERTScore's token limit"),
          ("n_truncated_sentence", "cut at the sentence model's limit"))


def counts(report: dict[str, Any]) -> list[tuple[str, int]]:
    """(what, how many) of the report's counts a reader needs, and the unscored judgments: the
    headline's and summary.md's."""
    given = report.get("counts") or {}
    shown = [(text, given[key]) for key, text in COUNTS if given.get(key) is not None]
    judged = list(((report.get("judge_summary") or {}).get("metrics") or {}).values())
    shown.append(("unscored judgments", sum(m.get("n_unscored") or 0 for m in judged)))
    extra = sum(m.get("n_extra_keys") or 0 for m in judged)
    return shown + ([("judged replies whose extra keys were ignored", extra)] if extra else [])


def _counts_line(data: dict[str, Any]) -> str:
    return " · ".join(f"{escape_html(str(value))} {text}" for text, value in counts(data))


def earlier_comparison(report: dict[str, Any], outputs_root: Path, env: str,
                       look_back: int = LOOK_BACK) -> dict[str, Any] | None:
    """The comparison of `report` with the latest earlier successful run of `env` on the same
    data (name and split) with the same model pins, or None when there is none among the last
    `look_back` runs. Its deltas are what the headline shows against that run."""
    data = (report["dataset"]["name"], report["dataset"]["split"])
    for path in reversed(latest_reports(outputs_root, env, look_back)):
        try:
            earlier = read_report(str(path))
        except ReportUnreadable:
            continue
        same_data = (earlier.data["dataset"].get("name"), earlier.data["dataset"].get("split")) == data
        if earlier.run_id == report["run_id"] or not same_data:
            continue
        if embedding_gate(earlier.data, report)["compared"]:
            return build_comparison(earlier, report, baseline_location=str(path), candidate_location="this run",
                                    created_at=datetime.now(timezone.utc))
    return None


def _against(comparison: dict[str, Any] | None) -> str:
    if comparison is None:
        return "<p>No earlier run of this data with these models to compare with.</p>"
    base = comparison["baseline"]
    headline = {m.name for m in METRICS if m.headline}
    deltas = [f"{escape_html(registered(row['metric']).label)} {row['mean_delta']:+.3f} "
              f"{interval_text({'low': row['ci_low'], 'high': row['ci_high']})}"
              for row in comparison["metrics"] if row["compared"] and row["metric"] in headline]
    said = "; ".join(deltas) if deltas else "no metric could be compared"
    return (f"<p>Against the earlier run <code>{escape_html(base['run_id'][:8])}</code> "
            f"({escape_html(base['timestamp'][:10])}), same data and models, "
            f"{comparison['pairing']['n_paired']} examples paired: {said}.</p>")


def _generation_text(data: dict[str, Any]) -> str:
    """Where the answers came from, when 00_generate asked the system under test for them."""
    generation = data.get("generation_summary")
    if not generation:
        return ""
    failed = f", {generation['n_failed']} failed" if generation["n_failed"] else ""
    return (f" (asked of <code>{escape_html(generation['endpoint'])}</code>: {generation['n_ok']} of "
            f"{generation['n']} answered{failed})")


def headline_html(report: RunReport | dict[str, Any], earlier: dict[str, Any] | None = None) -> str:
    """The headline block described in the module docstring, as HTML; `earlier` is the
    comparison with an earlier comparable run (earlier_comparison), whose deltas it adds."""
    view = RunReport.of(report)
    data = view.data
    dataset = data["dataset"]
    confidence = (data.get("intervals") or {}).get("confidence", 0.95)
    rows = [row for metric in METRICS if metric.headline and (row := _row(metric, view)) is not None]
    table = ("<table class='evalbook-headline'><thead><tr><th>metric</th><th>mean</th>"
             f"<th>{confidence:.0%} interval</th><th>n</th><th>pass rate</th></tr></thead>"
             f"<tbody>{''.join(rows)}</tbody></table>") if rows else "<p>No metric has a value.</p>"
    return (f"<div class='evalbook-headline'>"
            f"<p><strong>{escape_html(dataset['name'])}</strong> ({escape_html(dataset['split'])}), "
            f"{dataset['n_examples']} examples · generator <code>{escape_html(data['models'].get('generator'))}</code>"
            f"{_generation_text(data)} · {judge_sentence(view.judge_summary)}</p>"
            f"<p>{_models_line(data)}</p>{table}<p>{_counts_line(data)}</p>{_against(earlier)}</div>")

"""Tables and banners that the judge and report notebooks show."""

from __future__ import annotations

from typing import Any

import pandas as pd

SUMMARY_COLUMNS = ("mean", "p10", "p50", "p90", "n_scored", "n_unscored", "threshold",
                   "threshold_is_placeholder", "pass_rate", "calls", "cache_hits", "errors",
                   "prompt_tokens", "completion_tokens", "cost_usd")


def banner(summary: dict[str, Any]) -> str:
    """Markdown to put above any judge number: not run, placeholder thresholds, smoke-test notes."""
    lines = []
    if summary["status"] == "not_run":
        lines.append(f"> **The judge did not run.** {summary['reason']}. "
                     "No judge score is reported for this run.")
    else:
        lines.append(f"> Judge `{summary['label']}` judged {summary['sampling']['n_judged']} of "
                     f"{summary['eligibility']['n_eligible']} eligible answers "
                     f"({summary['sampling']['fraction_of_eligible_judged']:.0%}).")
        if summary["eligibility"]["no_source_column"]:
            lines.append("> The data has no `source`, so every answer counted as eligible.")
        placeholders = [m for m, s in summary["metrics"].items() if s["threshold_is_placeholder"]]
        if placeholders:
            lines.append(f"> Thresholds of {', '.join(placeholders)} are the 0.5 placeholder, not a "
                         "recommendation: set them in the profile for this judge and embedding model.")
    if summary.get("note"):
        lines.append(f"> **Note:** {summary['note']}")
    return "\n>\n".join(lines)


def metric_table(summary: dict[str, Any]) -> pd.DataFrame:
    """One row per judged metric with its statistics, pass rate, calls, tokens and cost."""
    rows = {metric: {column: values.get(column) for column in SUMMARY_COLUMNS}
            for metric, values in summary["metrics"].items()}
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(SUMMARY_COLUMNS))


def example_table(records: dict[str, dict[str, Any]], metric: str) -> pd.DataFrame:
    """The judged examples' scores for one metric, with what the threshold means for each."""
    rows = []
    for example_id, record in records.items():
        entry = record.get(metric)
        if record.get("status") != "judged" or entry is None:
            continue
        rows.append({"id": example_id, "score": entry["score"], "passed": entry["passed"],
                     "score_levels": ", ".join(entry.get("score_levels", [])),
                     "threshold_reading": entry.get("threshold_reading"),
                     "unscored_reason": entry["unscored_reason"]})
    return pd.DataFrame(rows)


def unscored_table(records: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Every unscored judgment with its reason and the start of the raw reply."""
    rows = []
    for example_id, record in records.items():
        for metric, entry in record.items():
            if isinstance(entry, dict) and entry.get("score", 0) is None:
                raw = entry.get("raw_reply") or ""
                rows.append({"id": example_id, "metric": metric, "reason": entry["unscored_reason"],
                             "raw_reply": raw[:200]})
    return pd.DataFrame(rows, columns=["id", "metric", "reason", "raw_reply"])

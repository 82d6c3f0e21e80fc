"""The generation summary for people: a headline, a table of what happened, the failures.

Every text from the endpoint or the user (the URL, the model ids, the reasons) is escaped by
evalbook.escaping; show `headline` as HTML and the tables through escaped_table or readable_table.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalbook.escaping import escape_html


def _ms(value: float | None) -> str:
    return "\u2014" if value is None else f"{value:,.0f} ms"


def headline(summary: dict[str, Any]) -> str:
    """One paragraph: how many answers came back, from what, how fast, and how many failed."""
    models = ", ".join(summary["models"]) or summary["model"] or "no model id reported"
    text = (f"<strong>{summary['n_ok']} of {summary['n']}</strong> questions were answered by "
            f"<code>{escape_html(summary['endpoint'])}</code> ({escape_html(models)}).")
    if summary["n_failed"]:
        reasons = ", ".join(f"{n} {reason}" for reason, n in summary["failures"].items())
        text += (f" <strong>{summary['n_failed']} failed</strong> ({escape_html(reasons)}): their answers "
                 "count as missing, never as empty or invented.")
    latency = summary["latency_ms"]
    if latency["n"]:
        text += f" Latency p50 {_ms(latency['p50'])}, p90 {_ms(latency['p90'])}, p99 {_ms(latency['p99'])}."
    if summary["n_redacted"]:
        text += (f" {summary['n_redacted']} responses held the value of a header (a secret), which was "
                 "replaced by [redacted].")
    text += f" {summary['calls']} calls were made and {summary['cache_hits']} answers came from the cache."
    if summary["cache_hits"]:
        text += (f" Cached answers were made by system version "
                 f"<code>{escape_html(summary['system_version'])}</code>: change generate.system_version "
                 "when the system under test changes.")
    return f"<blockquote><p>{text}</p></blockquote>"


def summary_table(summary: dict[str, Any]) -> pd.DataFrame:
    """The summary's numbers, one per row, with what each means."""
    latency, tokens = summary["latency_ms"], summary["tokens"]
    rows = [
        ("questions asked", summary["n"]), ("answered", summary["n_ok"]), ("failed", summary["n_failed"]),
        ("calls made", summary["calls"]), ("retries", summary["retries"]),
        ("answers from the cache", summary["cache_hits"]),
        ("latency p50 (ms)", latency["p50"]), ("latency p90 (ms)", latency["p90"]),
        ("latency p99 (ms)", latency["p99"]),
        ("prompt tokens", tokens["prompt"]), ("completion tokens", tokens["completion"]),
        ("answers without token counts", tokens["n_without_usage"]),
    ]
    if summary["n_without_retrieved_ids"] is not None:
        rows.append(("answers without retrieved ids", summary["n_without_retrieved_ids"]))
    return pd.DataFrame(rows, columns=["", "value"]).set_index("")


def failures_table(table: pd.DataFrame) -> pd.DataFrame:
    """The failed rows: id, the kind of failure, its reason in full and the attempts made."""
    failed = table.loc[table["status"] == "failed", ["id", "failure", "error", "attempts"]]
    return failed.rename(columns={"error": "reason"}).reset_index(drop=True)


def answers_table(table: pd.DataFrame, examples: pd.DataFrame) -> pd.DataFrame:
    """Each answered question with its answer, the ids it retrieved, the latency and whether it
    came from the cache."""
    questions = dict(zip(examples["id"].astype(str), examples["question"]))
    rows = table.loc[table["status"] == "ok"]
    frame = pd.DataFrame({
        "id": rows["id"], "question": rows["id"].map(questions), "answer": rows["generated_answer"],
        "latency (ms)": rows["latency_ms"].round().astype("Int64"), "cached": rows["cached"].map({True: "yes", False: "no"})})
    if "retrieved_ids" in rows.columns:
        frame.insert(3, "retrieved", rows["retrieved_ids"].map(
            lambda ids: "\u2014" if ids is None else ", ".join(ids)))
    return frame.reset_index(drop=True)

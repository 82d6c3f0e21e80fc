"""The generation summary for people: a headline, a table of what happened, the failures.

Every text from the endpoint or the user (the URL, the model ids, the reasons) is escaped by the
template `headline` renders; show it as HTML, and the tables through escaped_table or readable_table.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalbook.formatting import MISSING
from evalbook.templating import render


def _ms(value: float | None) -> str:
    return MISSING if value is None else f"{value:,.0f} ms"


def headline(summary: dict[str, Any]) -> str:
    """One paragraph: how many answers came back, from what, how fast, and how many failed
    (generate_headline.html)."""
    latency = summary["latency_ms"]
    return render("generate_headline.html", n_ok=summary["n_ok"], n=summary["n"], endpoint=summary["endpoint"],
                  models=", ".join(summary["models"]) or summary["model"] or "no model id reported",
                  n_failed=summary["n_failed"],
                  failures=", ".join(f"{n} {reason}" for reason, n in summary["failures"].items()),
                  latency={q: _ms(latency[q]) for q in ("p50", "p90", "p99")} if latency["n"] else None,
                  n_redacted=summary["n_redacted"], calls=summary["calls"], cache_hits=summary["cache_hits"],
                  system_version=summary["system_version"])


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
            lambda ids: MISSING if ids is None else ", ".join(ids)))
    return frame.reset_index(drop=True)

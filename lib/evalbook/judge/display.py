"""Tables and banners that the judge and report notebooks show."""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalbook.judge.estimate import describe
from evalbook.templating import render

# The summary's statistics of each metric, by the column a reader sees; the threshold is shown
# apart, read in words, and the calls, tokens and cost are a second table.
SCORE_COLUMNS = {"mean": "mean", "p10": "p10", "p50": "p50", "p90": "p90", "scored": "n_scored",
                 "unscored": "n_unscored", "extra keys ignored": "n_extra_keys"}
CALL_COLUMNS = {"calls": "calls", "cache hits": "cache_hits", "errors": "errors",
                "prompt tokens": "prompt_tokens", "completion tokens": "completion_tokens"}


def plain_reason(reason: str | None) -> str:
    """Why the judge did not run, in words: the exception's type and errno that follow in
    parentheses are left to judge.json and the report, which keep the whole reason."""
    return str(reason or "no reason was recorded").split(" (", 1)[0]


def _banner_context(summary: dict[str, Any]) -> dict[str, Any]:
    if summary["status"] == "not_run":
        return {"ran": False, "reason": plain_reason(summary["reason"])}
    totals = summary.get("totals") or {}
    return {"ran": True, "label": summary["label"], "n_judged": summary["sampling"]["n_judged"],
            "n_eligible": summary["eligibility"]["n_eligible"],
            "fraction_judged": summary["sampling"]["fraction_of_eligible_judged"],
            "no_source_column": summary["eligibility"]["no_source_column"],
            "placeholders": ", ".join(name for name, values in summary["metrics"].items()
                                      if values["threshold_is_placeholder"]),
            "estimate": describe(summary["estimate"]) if summary.get("estimate") else None,
            "n_redacted": totals.get("n_redacted"), "n_cache_dropped": totals.get("n_cache_dropped"),
            "note": summary.get("note")}


def banner(summary: dict[str, Any]) -> str:
    """HTML to put above any judge number (judge_banner.html): not run, placeholder thresholds,
    the profile's note on the judge (when it ran). The template escapes the reason, label and note."""
    return render("judge_banner.html", **_banner_context(summary))


def _threshold_text(values: dict[str, Any]) -> str | None:
    if values.get("threshold") is None:
        return None
    return f"{values['threshold']:.3f}" + (" (placeholder)" if values.get("threshold_is_placeholder") else "")


def scores_table(summary: dict[str, Any]) -> pd.DataFrame:
    """One row per judged metric: its mean and percentiles over the scored answers, how many
    were scored and unscored, the threshold (marked when it is the placeholder) and the pass rate."""
    rows = {metric: {**{shown: values.get(key) for shown, key in SCORE_COLUMNS.items()},
                     "threshold": _threshold_text(values), "pass rate": values.get("pass_rate")}
            for metric, values in summary["metrics"].items()}
    return pd.DataFrame.from_dict(rows, orient="index", columns=[*SCORE_COLUMNS, "threshold", "pass rate"])


def _cost_text(cost: Any) -> str:
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        return f"{cost:.4f}"
    return "unknown: no prices pinned"


def calls_table(summary: dict[str, Any]) -> pd.DataFrame:
    """One row per judged metric: calls made, cache hits, failed calls, tokens and cost."""
    rows = {metric: {**{shown: values.get(key) for shown, key in CALL_COLUMNS.items()},
                     "cost (USD)": _cost_text(values.get("cost_usd"))}
            for metric, values in summary["metrics"].items()}
    return pd.DataFrame.from_dict(rows, orient="index", columns=[*CALL_COLUMNS, "cost (USD)"])


def eligibility_table(summary: dict[str, Any]) -> pd.DataFrame:
    """Which answers could be judged and which were, as one readable value per row."""
    eligibility, sampling = summary["eligibility"], summary["sampling"]
    sources = ("every answer: the data has no source column" if eligibility["no_source_column"]
               else ", ".join(eligibility["eligible_sources"]))
    seen = ", ".join(f"{source} {n}" for source, n in (eligibility.get("sources_seen") or {}).items())
    sampled = ("every eligible answer" if sampling["sample_size"] is None
               else f"a seeded sample of {sampling['sample_size']} (seed {sampling['seed']})")
    rows = {"answers seen": str(eligibility["n_seen"]), "eligible sources": sources,
            "sources seen": seen or "no source recorded", "eligible": str(eligibility["n_eligible"]),
            "without a prediction": str(eligibility["n_without_prediction"]), "sampled": sampled,
            "judged": f"{sampling['n_judged']} ({sampling['fraction_of_eligible_judged']:.0%} of the eligible)"}
    return pd.DataFrame({"value": rows})


def _repeat_fields(entry: dict[str, Any]) -> dict[str, Any]:
    """An example judged several times (judge.repeats): each repeat's score, the spread, and
    whether pass and fail flipped; nothing for an example judged once."""
    if "repeats" not in entry:
        return {}
    spread = entry["spread"]
    flipped = {True: "yes", False: "no", None: "fewer than 2 scored"}[entry["flipped"]]
    return {"repeats": ", ".join("unscored" if r["score"] is None else f"{r['score']:.3f}" for r in entry["repeats"]),
            "min": spread["min"], "max": spread["max"], "std": spread["std"], "flipped": flipped}


def example_table(records: dict[str, dict[str, Any]], metric: str) -> pd.DataFrame:
    """The judged examples' scores for one metric, with what the threshold means for each, and
    with judge.repeats each repeat's score, their spread and whether pass and fail flipped."""
    rows = []
    for example_id, record in records.items():
        entry = record.get(metric)
        if record.get("status") != "judged" or entry is None:
            continue
        rows.append({"id": example_id, "score": entry["score"], "passed": entry["passed"],
                     "score_levels": ", ".join(entry.get("score_levels", [])),
                     "threshold_reading": entry.get("threshold_reading"),
                     "unscored_reason": entry["unscored_reason"], **_repeat_fields(entry)})
    return pd.DataFrame(rows)


NOISE_COLUMNS = {"repeats": "n", "compared": "n_compared", "flipped": "n_flipped", "flip share": "flip_share",
                 "mean std": "mean_std", "widest range": "max_range"}


def noise_table(summary: dict[str, Any]) -> pd.DataFrame:
    """With judge.repeats: per metric, how many examples had two or more scored repeats, how many
    of them flipped between pass and fail, the mean standard deviation and the widest range of
    one example's scores. Empty when each example was judged once."""
    rows = {metric: {shown: values["repeats"][key] for shown, key in NOISE_COLUMNS.items()}
            for metric, values in (summary.get("metrics") or {}).items() if "repeats" in values}
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(NOISE_COLUMNS))


def unscored_table(records: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Every unscored judgment with its reason and the judge's whole raw reply (show it with
    evalbook.escaping.readable_table, which wraps it and shows the first SHOWN_CHARACTERS: enough to
    see why it did not parse, while a page stays small; judge.json keeps the whole reply)."""
    rows = []
    for example_id, record in records.items():
        for metric, entry in record.items():
            if isinstance(entry, dict) and entry.get("score", 0) is None:
                rows.append({"id": example_id, "metric": metric, "reason": entry["unscored_reason"],
                             "raw_reply": entry.get("raw_reply") or ""})
    return pd.DataFrame(rows, columns=["id", "metric", "reason", "raw_reply"])


# ---------------------------------------------------------------- the one rendering of a verdict

MARKS = {True: "✓", False: "✗"}  # 1 and 0 hash like True and False; anything else shows as ?
QUESTION_MARK = "→"  # a question the judge wrote for relevance: no verdict of its own


def _verdict_line(verdict: Any, text: Any, why: Any) -> str:
    return f"{MARKS.get(verdict, '?')} {text}" + (f" — {why}" if why else "")


def verdict_text(record: dict[str, Any] | None) -> str:
    """A judge's record on one metric as lines: each statement or criterion with its verdict
    (✓, ✗, ? when unreadable) and reason, each generated question, and why it is unscored.

    Read from the record's own keys (statements, criteria, generated_questions), so every judge
    metric, in a run's tables and in a comparison's, renders the same way. None gives "".
    """
    if record is None:
        return ""
    lines = [_verdict_line(s.get("verdict"), s.get("statement", ""), s.get("justification"))
             for s in record.get("statements") or []]
    lines += [_verdict_line(c.get("met"), c.get("criterion", ""), c.get("rationale"))
              for c in record.get("criteria") or []]
    lines += [f"{QUESTION_MARK} {question}" for question in record.get("generated_questions") or []]
    if record.get("unscored_reason"):
        lines.append(f"unscored: {record['unscored_reason']}")
    return "\n".join(lines)


def answers_table(records: dict[str, dict[str, Any]], canonical: pd.DataFrame,
                  ground_truth_column: str) -> pd.DataFrame:
    """Each judged answer with the ground truth it was judged against and, per judged metric,
    its score and what the judge said (verdict_text), so that a reader can check the judge."""
    rows = canonical.set_index("id", drop=False)
    table = []
    for example_id, record in records.items():
        if record.get("status") != "judged":
            continue
        row = {"id": example_id, "answer": rows.at[example_id, "generated_answer"],
               "ground truth": rows.at[example_id, ground_truth_column]}
        for metric, entry in record.items():
            if isinstance(entry, dict):
                score = "unscored" if entry.get("score") is None else f"{entry['score']:.3f}"
                row[metric] = f"{score}\n{verdict_text(entry)}".strip()
        table.append(row)
    return pd.DataFrame(table)


VERDICT_MARKS = {"relevant": "✓", "partial": "~", "irrelevant": "✗", "invalid": "?", "unsupported": "!", "failed": "×",
                 "empty": "∅"}


def chunk_strip(report: dict[str, Any]) -> pd.DataFrame:
    """Per judged question with chunk verdicts, the rank × verdict strip (✓ relevant, ~ partial,
    ✗ irrelevant, ? invalid, ! unsupported quote, × failed call, ∅ empty chunk, never sent), its
    context scores, and each chunk's verdict with the judge's reason and quote, rank by rank.
    Empty when no chunk was judged."""
    rows = []
    for example in report.get("examples", []):
        record = example.get("judge") or {}
        chunks = record.get("chunks")
        if not chunks:
            continue
        scores = {m: (record.get(m) or {}).get("score") for m in ("context_relevance", "context_precision",
                                                                  "context_recall")}
        lines = [f"{c['rank']}. {c['verdict']}" + (f" (judge said {c['claimed']})" if c.get("claimed") else "")
                 + ("" if c.get("gold") is None else f" [gold: {'relevant' if c['gold'] else 'not'}]")
                 + (f": {c['reason']}" if c.get("reason") else "") + (f" «{c['quote']}»" if c.get("quote") else "")
                 for c in chunks]
        rows.append({"id": example["id"], "question": example.get("question"),
                     "strip": " ".join(VERDICT_MARKS.get(c["verdict"], "?") for c in chunks),
                     **{m.replace("context_", ""): v for m, v in scores.items()},
                     "chunks": "\n".join(lines)})
    return pd.DataFrame(rows)


def relevance_by_rank_table(summary: dict[str, Any]) -> pd.DataFrame:
    """Across the run, each rank's judged chunks and the share judged relevant."""
    metric = (summary.get("metrics") or {}).get("context_relevance") or {}
    return pd.DataFrame([{"rank": row["rank"], "chunks judged": row["n"], "empty chunks": row.get("n_empty"),
                          "usable verdicts": row["n_usable"],
                          "relevant": row["n_relevant"], "partial": row["n_partial"],
                          "relevant share": row["relevant_share"]} for row in metric.get("by_rank", [])])


def against_gold_text(summary: dict[str, Any]) -> str | None:
    """The judged context precision beside the exact one from the gold ids, in a sentence."""
    gold = ((summary.get("metrics") or {}).get("context_precision") or {}).get("against_gold")
    if not gold:
        return None
    kappa = "" if gold["kappa"] is None else f", Cohen's kappa {gold['kappa']:.2f}"
    return (f"Context precision judged {gold['judged_mean']:.3f} against {gold['exact_mean']:.3f} from the gold ids "
            f"on {gold['n']} questions (mean absolute difference {gold['mean_abs_difference']:.3f}); the judge agrees "
            f"with the ids on {gold['n_chunks_agreeing']} of {gold['n_chunks']} chunks{kappa}.")

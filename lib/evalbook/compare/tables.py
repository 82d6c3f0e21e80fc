"""Tables and HTML of a comparison document for the 05_compare notebook.

User text (ids, reasons, notes, answers) is escaped by evalbook.escaping: show these as HTML,
never as Markdown.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalbook.compare.document import ComparisonError
from evalbook.escaping import escape_html
from evalbook.report.tables import readable_table, verdict_text

RUN_FIELDS = ("run_id", "location", "timestamp", "dataset", "generator", "sentence_transformer",
              "bertscore", "judge", "k", "params_profile", "git_commit")


def runs_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """The two runs side by side: one row per field, columns baseline and candidate."""
    def column(run: dict[str, Any]) -> list[Any]:
        dataset, profile = run["dataset"], run["params_profile"]
        judge = run["judge_label"] if run["judge_status"] == "ran" else f"({run['judge_status']})"
        return [run["run_id"], run["location"], run["timestamp"], f"{dataset['name']}/{dataset['split']}",
                run["models"]["generator"], run["models"]["sentence_transformer"], run["models"]["bertscore"],
                judge, run["k"], f"{profile['name']} v{profile['version']}", run["git_commit"]]

    return pd.DataFrame({"baseline": column(doc["baseline"]), "candidate": column(doc["candidate"])},
                        index=pd.Index(RUN_FIELDS, name="field"))


def comparability_notes(doc: dict[str, Any]) -> str:
    """HTML: how the examples paired, what each gate allowed and why, and the notes.

    Ids, reasons and notes are user text, escaped by evalbook.escaping; show the result as HTML,
    not Markdown, so that Markdown in an id stays as written."""
    pairing, gates = doc["pairing"], doc["gates"]
    pairing_item = (f"<strong>Pairing</strong>: {pairing['n_paired']} paired by id, "
                    f"{pairing['n_only_baseline']} only in the baseline, {pairing['n_only_candidate']} "
                    "only in the candidate.")
    unpaired = [f"<li>only in the {side}: "
                + ", ".join(f"<code>{escape_html(i)}</code>" for i in pairing[f"only_{side}_ids"]) + "</li>"
                for side in ("baseline", "candidate") if pairing[f"only_{side}_ids"]]
    if unpaired:
        pairing_item += "<ul>" + "".join(unpaired) + "</ul>"
    items = [pairing_item]
    for name, gate in (("Embedding metrics", gates["embedding"]),
                       ("Retrieval top_k_match", gates["retrieval"]), ("Judge metrics", gates["judge"])):
        items.append(f"<strong>{name}</strong>: "
                     + ("compared." if gate["compared"] else escape_html(gate["reason"]) + "."))
    items.extend(escape_html(note) + "." for note in doc["notes"])
    return "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>"


def metric_table(doc: dict[str, Any]) -> pd.DataFrame:
    """The metric table for reading: means, delta with its interval, direction shares, why not compared."""
    confidence = f"{doc['parameters']['confidence']:.0%}"
    rows = [{"metric": r["metric"], "n": r["n"], "n_skipped": r["n_skipped"],
             "baseline": r["baseline_mean"], "candidate": r["candidate_mean"], "delta": r["mean_delta"],
             f"{confidence} CI low": r["ci_low"], f"{confidence} CI high": r["ci_high"],
             "better": r["fraction_better"], "worse": r["fraction_worse"],
             "unchanged": r["fraction_unchanged"],
             "note": r["reason"] or r["note"] or ""}
            for r in doc["metrics"]]
    return pd.DataFrame(rows).set_index("metric") if rows else pd.DataFrame(rows)


def deltas_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """The long per-example table (id, metric, baseline, candidate, delta) of compared metrics."""
    return pd.DataFrame(doc["deltas"], columns=["id", "metric", "baseline", "candidate", "delta"])


def regressions_table(doc: dict[str, Any], metric: str) -> pd.DataFrame:
    """The largest regressions on one compared metric, worst first, judge verdicts as text."""
    if metric not in doc["regressions"]:
        compared = ", ".join(doc["regressions"]) or "none"
        raise ComparisonError(f"no regressions for {metric!r}: it was not compared (compared: {compared})")
    rows = []
    for entry in doc["regressions"][metric]:
        row = {key: value for key, value in entry.items() if key not in ("baseline_judge", "candidate_judge")}
        if entry["baseline_judge"] is not None or entry["candidate_judge"] is not None:
            row["baseline_judge"] = verdict_text(entry["baseline_judge"])
            row["candidate_judge"] = verdict_text(entry["candidate_judge"])
        rows.append(row)
    return pd.DataFrame(rows)


def regressions_heading(doc: dict[str, Any], metric: str) -> str:
    """HTML: the heading over one metric's regressions, its name escaped."""
    n = len(doc["regressions"][metric])
    return f"<h3>{escape_html(metric)}: {n} largest regression{'s' if n != 1 else ''}</h3>"


def regressions_styled(doc: dict[str, Any], metric: str):
    """regressions_table for reading: full answers side by side, wrapped, the delta shaded red."""
    frame = regressions_table(doc, metric)
    caption = (f"{metric}: the {len(frame)} largest regressions (delta = candidate - baseline; "
               f"tolerance {doc['parameters']['tolerance']:g})")
    styler = readable_table(frame, caption)
    if len(frame):
        styler = styler.background_gradient(cmap="Reds_r", subset=["delta"], vmin=-1.0, vmax=0.0)
    return styler

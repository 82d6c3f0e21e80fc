"""Tables and HTML of a calibration document for the 06_calibrate notebook.

The HTML comes from templates (calibrate_*.html), which escape user text (ids, notes, paths); the
tables of answers are escaped by evalbook.escaping. Show these as HTML, never as Markdown.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pandas as pd

from evalbook.escaping import readable_table
from evalbook.formatting import MISSING, interval, is_missing, number
from evalbook.metrics import metric as registered
from evalbook.templating import render

THRESHOLD_NAMES = {"configured": "the profile's", "youden": "Youden's J", "target_precision": "target precision"}


def _estimate(estimate: dict[str, Any] | None, key: str = "estimate") -> str:
    """`0.712 [0.455, 0.861]`; the point estimate alone when the interval is undefined."""
    if estimate is None or is_missing(estimate.get(key)):
        return MISSING
    if is_missing(estimate.get("low")):
        return number(estimate[key])
    return f"{number(estimate[key])} {interval(estimate['low'], estimate['high'])}"


def _calibrated(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [entry for entry in doc["metrics"] if entry["skipped_reason"] is None]


def _threshold(entry: dict[str, Any], name: str) -> dict[str, Any] | None:
    if not entry["pass_fail"]:
        return None
    return next((t for t in entry["pass_fail"]["thresholds"] if t["name"] == name), None)


def _threshold_text(threshold: dict[str, Any], metric: str) -> str:
    """`≥ 0.716`; a threshold of a retrieval metric (a rank, a match) as the whole number it is (`≤ 2`)."""
    operator = "≥" if threshold["operator"] == ">=" else "≤"
    value = threshold["value"]
    whole = registered(metric).kind == "retrieval" and float(value).is_integer()
    return f"{operator} {value:.0f}" if whole else f"{operator} {value:.3f}"


def _agreement(entry: dict[str, Any]) -> dict[str, Any]:
    """One calibrated metric for the headline: Spearman's rho, and where pass/fail is defined the
    ROC AUC and the confusion at Youden's threshold (None where undefined)."""
    shown = {"label": registered(entry["metric"]).label, "n": entry["n"],
             "spearman": _estimate(entry["rank_agreement"]["spearman"]), "auc": None, "youden": None}
    if entry["pass_fail"] and entry["pass_fail"]["roc"]["auc"] is not None:
        shown["auc"] = _estimate(entry["pass_fail"]["roc"], "auc")
        youden = _threshold(entry, "youden")
        if youden and youden["confusion"]:
            shown["youden"] = {"threshold": _threshold_text(youden, entry["metric"]),
                               "kappa": youden["confusion"]["cohen_kappa"],
                               "accuracy": youden["confusion"]["accuracy"]}
    return shown


def headline_html(doc: dict[str, Any]) -> str:
    """The calibration's first screen: how far each metric agrees with the humans, with the
    intervals, beside the base rate and the raters' own agreement; then what it holds for."""
    skipped = [{"label": registered(entry["metric"]).label, "reason": entry["skipped_reason"]}
               for entry in doc["metrics"] if entry["skipped_reason"] is not None]
    return render("calibrate_headline.html", matching=doc["matching"], run_id=doc["run"]["run_id"],
                  n_examples=doc["run"]["n_examples"], label_kind=doc["labels"]["kind"],
                  confidence=doc["settings"]["confidence"],
                  calibrated=[_agreement(entry) for entry in _calibrated(doc)], skipped=skipped,
                  pass_fail=doc["pass_fail"], raters=doc["raters"], valid_for=valid_for_text(doc["valid_for"]))


def valid_for_text(valid_for: dict[str, Any]) -> str:
    """The pins the thresholds hold for, in one line."""
    def pin(model: dict[str, Any]) -> str:
        sha = (model.get("sha256") or "")[:12]
        return f"{model.get('name')}" + (f" (sha256 {sha}…)" if sha else "")

    judge = f"judge {valid_for['judge_label']}" if valid_for["judge_label"] else "no judge (it did not run)"
    return (f"{judge}; sentence embedding {pin(valid_for['sentence_transformer'])}; BERTScore "
            f"{pin(valid_for['bertscore'])} layer {valid_for['bertscore']['num_layers']}; data "
            f"{valid_for['dataset']}/{valid_for['split']}; retrieval k {valid_for['retrieval_k']}")


def agreement_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """One row per metric: n, n missing, Spearman's rho and Kendall's tau-b with their intervals,
    and the ROC AUC with its interval."""
    rows = []
    for entry in doc["metrics"]:
        rank = entry["rank_agreement"]
        roc = entry["pass_fail"]["roc"] if entry["pass_fail"] else None
        rows.append({"metric": registered(entry["metric"]).label, "n": entry["n"], "n missing": entry["n_missing"],
                     "Spearman ρ": _estimate(rank["spearman"]) if rank else MISSING,
                     "Kendall τ-b": _estimate(rank["kendall_tau_b"]) if rank else MISSING,
                     "ROC AUC": _estimate(roc, "auc") if roc else MISSING,
                     "note": entry["skipped_reason"] or _why_no_auc(entry)})
    return pd.DataFrame(rows)


def _why_no_auc(entry: dict[str, Any]) -> str | None:
    """Why the row lacks a number or an interval: no pass/fail, one class, a bootstrap undefined."""
    if entry["rank_agreement"] is None:
        return None
    notes = []
    spearman = entry["rank_agreement"]["spearman"]
    if spearman["estimate"] is not None and spearman["low"] is None:
        notes.append(f"no rank interval: {spearman['reason']}")
    if not entry["pass_fail"]:
        notes.append("fewer than 2 of its labelled examples pass or fail")
    elif entry["pass_fail"]["roc"]["reason"]:
        notes.append(f"ROC AUC: {entry['pass_fail']['roc']['reason']}")
    return "; ".join(notes) or None


COUNTS = ("tp", "fp", "fn", "tn")
RATES = (("precision", "precision"), ("recall", "recall"), ("F1", "f1"), ("accuracy", "accuracy"),
         ("κ", "cohen_kappa"), ("majority accuracy", "majority_accuracy"))


def thresholds_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """Each metric's defined thresholds (the profile's, Youden's, the target precision's) with the
    confusion at each, beside the majority class's accuracy; `thresholds_missing` lists the rest."""
    rows = []
    for entry in _calibrated(doc):
        for threshold in (entry["pass_fail"] or {}).get("thresholds", []):
            if threshold["confusion"] is None:
                continue
            confusion = threshold["confusion"]
            rows.append({"metric": registered(entry["metric"]).label, "threshold": THRESHOLD_NAMES[threshold["name"]],
                         "passes when": _threshold_text(threshold, entry["metric"]),
                         **{key: confusion[key] for key in COUNTS},
                         **{name: confusion[key] for name, key in RATES}})
    return pd.DataFrame(rows)


def thresholds_missing(doc: dict[str, Any]) -> str:
    """HTML: the thresholds that could not be read, grouped by why (no pass mark configured, the
    target precision out of reach)."""
    reasons: dict[str, list[str]] = {}
    for entry in _calibrated(doc):
        for threshold in (entry["pass_fail"] or {}).get("thresholds", []):
            if threshold["confusion"] is None:
                key = f"{THRESHOLD_NAMES[threshold['name']]} threshold: {threshold['reason']}"
                reasons.setdefault(key, []).append(registered(entry["metric"]).label)
    return render("calibrate_thresholds_missing.html", missing=list(reasons.items()))


def levels_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """For judge metrics that are ratios of items: the reachable scores of each item count, and
    what each chosen threshold means for it (the seeds' small-denominator point)."""
    rows = []
    for entry in _calibrated(doc):
        for level in entry["score_levels"] or []:
            readings = {THRESHOLD_NAMES[t["name"]]: next((r["reading"] for r in t["readings"] or []
                                                         if r["n_items"] == level["n_items"]), None)
                        for t in (entry["pass_fail"] or {}).get("thresholds", [])}
            rows.append({"metric": registered(entry["metric"]).label, "items": level["n_items"],
                         "examples": level["n_examples"], "reachable scores": ", ".join(level["levels"]),
                         **readings})
    return pd.DataFrame(rows)


UNMATCHED = (("unknown_ids", "label ids that are not examples of the run"),
             ("unlabelled_ids", "examples of the run without a label"))


def matching_html(doc: dict[str, Any]) -> str:
    """How the labels matched the run: counts, and the ids on either side that did not match."""
    matching, labels = doc["matching"], doc["labels"]
    unmatched = [(what, matching[key]) for key, what in UNMATCHED if matching[key]]
    return render("calibrate_matching.html", matching=matching, unmatched=unmatched, labels=labels,
                  labels_file=PurePosixPath(labels["path"]).name)


def disagreements_table(doc: dict[str, Any], metric: str):
    """The examples where `metric` and the humans disagree most, to read side by side."""
    entry = next(e for e in doc["metrics"] if e["metric"] == metric)
    rows = [{"id": d["id"], "question": d["question"], "reference": d["reference_answer"],
             "answer": d["generated_answer"], "score": d["score"], "label": f"{d['label']:g}",
             "score rank": d["score_rank"], "label rank": d["label_rank"], "note": d["note"]}
            for d in entry["disagreements"]]
    label = registered(metric).label
    return readable_table(pd.DataFrame(rows), f"{label}: the {len(rows)} largest gaps between its rank and the label's")

"""Tables and HTML of a calibration document for the 06_calibrate notebook.

User text (ids, questions, answers, notes, paths) is escaped by evalbook.escaping: show these as
HTML, never as Markdown.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pandas as pd

from evalbook.escaping import escape_html, readable_table
from evalbook.metrics import metric as registered

THRESHOLD_NAMES = {"configured": "the profile's", "youden": "Youden's J", "target_precision": "target precision"}


def _number(value: Any, places: int = 3) -> str:
    return "—" if value is None else f"{value:.{places}f}"


def _interval(estimate: dict[str, Any] | None, key: str = "estimate") -> str:
    """`0.712 [0.455, 0.861]`; the point estimate alone when the interval is undefined."""
    if estimate is None or estimate.get(key) is None:
        return "—"
    if estimate.get("low") is None:
        return _number(estimate[key])
    return f"{estimate[key]:.3f} [{estimate['low']:.3f}, {estimate['high']:.3f}]"


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


def _metric_line(entry: dict[str, Any], confidence: str) -> str:
    label = escape_html(registered(entry["metric"]).label)
    rank = entry["rank_agreement"]
    parts = [f"Spearman ρ {_interval(rank['spearman'])}"]
    if entry["pass_fail"] and entry["pass_fail"]["roc"]["auc"] is not None:
        parts.append(f"ROC AUC {_interval(entry['pass_fail']['roc'], 'auc')}")
        youden = _threshold(entry, "youden")
        if youden and youden["confusion"]:
            confusion = youden["confusion"]
            parts.append(f"passing at {_threshold_text(youden, entry['metric'])}: κ {_number(confusion['cohen_kappa'])}, "
                         f"accuracy {_number(confusion['accuracy'])}")
    return f"<strong>{label}</strong> (n {entry['n']}): " + "; ".join(parts)


def _raters_line(raters: dict[str, Any]) -> str:
    if raters["alpha"] is None:
        return f"Agreement between raters: not measured ({escape_html(raters['reason'])})."
    return (f"The {raters['n_raters']} raters agree at Krippendorff's α {raters['alpha']:.3f} "
            f"({escape_html(raters['level'])}, {raters['n_units']} examples rated by two or more): "
            "the ceiling of what a metric can be shown to agree with.")


def _base_rate_line(doc: dict[str, Any]) -> str:
    pass_fail = doc["pass_fail"]
    if pass_fail["base_rate"] is None:
        return "No labelled example passes or fails, so no pass/fail agreement is computed."
    rate = pass_fail["base_rate"]
    majority = "either answer" if rate == 0.5 else ("“fail”" if rate < 0.5 else "“pass”")
    return (f"{pass_fail['n_pass']} labelled examples pass and {pass_fail['n_fail']} fail "
            f"({escape_html(pass_fail['rule'])}): base rate {rate:.3f}. Always predicting {majority} "
            f"is right {max(rate, 1 - rate):.3f} of the time; an accuracy below that is worth nothing.")


def headline_html(doc: dict[str, Any]) -> str:
    """The calibration's first screen: how far each metric agrees with the humans, with the
    intervals, beside the base rate and the raters' own agreement; then what it holds for."""
    confidence = f"{doc['settings']['confidence']:.0%}"
    matching = doc["matching"]
    lines = [_metric_line(entry, confidence) for entry in _calibrated(doc)]
    items = "".join(f"<li>{line}</li>" for line in lines)
    skipped = [entry for entry in doc["metrics"] if entry["skipped_reason"] is not None]
    skipped_text = "".join(f"<li>{escape_html(registered(e['metric']).label)}: {escape_html(e['skipped_reason'])}</li>"
                           for e in skipped)
    unmatched = ""
    if matching["n_unknown"] or matching["n_unlabelled"]:
        unmatched = (f"<p><strong>Not all examples are labelled:</strong> {matching['n_unlabelled']} of the "
                     f"run's {doc['run']['n_examples']} examples have no label, and {matching['n_unknown']} "
                     "label ids are not examples of the run (listed below).</p>")
    return (f"<div class='evalbook-verdict'>"
            f"<p>{matching['n_matched']} labelled examples of run <code>{escape_html(doc['run']['run_id'])}</code>, "
            f"{escape_html(doc['labels']['kind'])} labels. Intervals are {confidence} bootstrap intervals.</p>"
            f"{unmatched}<ul>{items}</ul>"
            + (f"<p>Not calibrated:</p><ul>{skipped_text}</ul>" if skipped_text else "")
            + f"<p>{_base_rate_line(doc)}</p><p>{_raters_line(doc['raters'])}</p>"
            f"<p><strong>Valid for:</strong> {escape_html(valid_for_text(doc['valid_for']))}. A threshold "
            "chosen here does not carry over to another judge, embedding model or set of references.</p></div>")


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
                     "Spearman ρ": _interval(rank["spearman"]) if rank else "—",
                     "Kendall τ-b": _interval(rank["kendall_tau_b"]) if rank else "—",
                     "ROC AUC": _interval(roc, "auc") if roc else "—",
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
    if not reasons:
        return ""
    return "<ul>" + "".join(f"<li>{escape_html(reason)}: {escape_html(', '.join(labels))}.</li>"
                            for reason, labels in reasons.items()) + "</ul>"


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


def matching_html(doc: dict[str, Any]) -> str:
    """How the labels matched the run: counts, and the ids on either side that did not match."""
    matching = doc["matching"]
    items = [f"{matching['n_matched']} label ids are examples of the run."]
    for key, text in (("unknown_ids", "label ids that are not examples of the run"),
                      ("unlabelled_ids", "examples of the run without a label")):
        ids = matching[key]
        if ids:
            items.append(f"{len(ids)} {text}: " + ", ".join(f"<code>{escape_html(i)}</code>" for i in ids))
    labels = doc["labels"]
    items.append(f"Labels file <code>{escape_html(PurePosixPath(labels['path']).name)}</code>: "
                 f"{labels['n_rows']} rows, {escape_html(labels['kind_reason'])}.")
    if labels["ignored_columns"]:
        items.append("Columns not read: " + ", ".join(f"<code>{escape_html(c)}</code>" for c in labels["ignored_columns"]))
    return "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>"


def disagreements_table(doc: dict[str, Any], metric: str):
    """The examples where `metric` and the humans disagree most, to read side by side."""
    entry = next(e for e in doc["metrics"] if e["metric"] == metric)
    rows = [{"id": d["id"], "question": d["question"], "reference": d["reference_answer"],
             "answer": d["generated_answer"], "score": d["score"], "label": f"{d['label']:g}",
             "score rank": d["score_rank"], "label rank": d["label_rank"], "note": d["note"]}
            for d in entry["disagreements"]]
    label = registered(metric).label
    return readable_table(pd.DataFrame(rows), f"{label}: the {len(rows)} largest gaps between its rank and the label's")

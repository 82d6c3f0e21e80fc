"""Figures of a calibration document (calibrate-v1): each metric against the human label, and
the ROC curves with the chosen thresholds marked.

Both read only the document. A metric has one label and one colour everywhere, from the registry
(evalbook.metrics). A builder returns None when there is nothing to draw; `no_data_reason` says why.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from evalbook.metrics import metric as registered
from evalbook.report.figures import new_figure, styled

PANELS_PER_ROW = 3
LINE_STYLES = ("-", "--", ":")
# How each threshold of a metric is marked on its ROC curve.
THRESHOLD_MARKERS = {"configured": ("s", "the profile's"), "youden": ("o", "Youden's J"),
                     "target_precision": ("^", "target precision")}


def _calibrated(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [entry for entry in doc["metrics"] if entry["skipped_reason"] is None]


def _label_text(value: float, kind: str) -> str:
    if kind == "binary":
        return "pass" if value == 1 else ("fail" if value == 0 else f"{value:g} pass")
    return f"{value:g}"


@styled
def metric_by_label(doc: dict[str, Any]) -> Figure | None:
    """One panel per calibrated metric: its values for each label value, as a box with the points
    over it (continuous labels: a scatter), with Spearman's rho in the title."""
    entries = _calibrated(doc)
    if not entries:
        return None
    kind = doc["labels"]["kind"]
    rows = math.ceil(len(entries) / PANELS_PER_ROW)
    cols = min(len(entries), PANELS_PER_ROW)
    fig, axes = new_figure(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False)
    for ax, entry in zip(axes.flat, entries):
        described = registered(entry["metric"])
        frame = pd.DataFrame([{"label": e["label"], "value": e["scores"].get(entry["metric"])}
                              for e in doc["examples"]]).dropna()
        if kind == "continuous":
            sns.scatterplot(frame, x="label", y="value", ax=ax, color=described.colour)
        else:
            order = sorted(frame["label"].unique())
            frame["shown"] = [_label_text(v, kind) for v in frame["label"]]
            shown_order = [_label_text(v, kind) for v in order]
            # matplotlib's own boxplot: seaborn 0.13's passes an argument matplotlib 3.11 deprecates
            groups = [frame.loc[frame["label"] == value, "value"].to_numpy() for value in order]
            ax.boxplot(groups, positions=range(len(order)), widths=0.5, showfliers=False,
                       orientation="vertical", boxprops={"color": described.colour},
                       whiskerprops={"color": described.colour}, capprops={"color": described.colour},
                       medianprops={"color": described.colour})
            sns.stripplot(frame, x="shown", y="value", order=shown_order, ax=ax, color=described.colour,
                          size=4, jitter=0.15, alpha=0.8)
            ax.set_xticks(range(len(order)), shown_order)
        rho = entry["rank_agreement"]["spearman"]["estimate"]
        ax.set_title(f"{described.label}: rho {rho:.3f}" if rho is not None else described.label,
                     fontsize="medium")
        ax.set_xlabel("human label")
        ax.set_ylabel(described.label)
    for ax in list(axes.flat)[len(entries):]:
        ax.set_visible(False)
    return fig


def _pass_fail_entries(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [entry for entry in _calibrated(doc)
            if entry["pass_fail"] and entry["pass_fail"]["roc"]["curve"] is not None]


def _point(confusion: dict[str, Any]) -> tuple[float, float] | None:
    positives, negatives = confusion["tp"] + confusion["fn"], confusion["fp"] + confusion["tn"]
    if not positives or not negatives:
        return None
    return confusion["fp"] / negatives, confusion["tp"] / positives


@styled
def roc_curves(doc: dict[str, Any]) -> Figure | None:
    """Each metric's ROC curve against the humans' pass/fail, with its AUC in the legend and its
    thresholds marked: the profile's (square), Youden's (circle), the target precision's (triangle)."""
    entries = _pass_fail_entries(doc)
    if not entries:
        return None
    fig, ax = new_figure(figsize=(6.4, 5.2))
    ax.plot([0, 1], [0, 1], color="0.7", linestyle="--", linewidth=1, label="chance")
    drawn: dict[str, int] = {}
    for entry in entries:
        described, roc = registered(entry["metric"]), entry["pass_fail"]["roc"]
        # metrics of one kind may share a colour (top-k match and the rank): tell them apart by line
        style = LINE_STYLES[drawn.get(described.colour, 0) % len(LINE_STYLES)]
        drawn[described.colour] = drawn.get(described.colour, 0) + 1
        ax.plot(roc["curve"]["fpr"], roc["curve"]["tpr"], color=described.colour, linewidth=1.6,
                linestyle=style, label=f"{described.label} (AUC {roc['auc']:.3f})")
        for threshold in entry["pass_fail"]["thresholds"]:
            point = _point(threshold["confusion"]) if threshold["confusion"] else None
            if point is not None:
                marker, _ = THRESHOLD_MARKERS[threshold["name"]]
                ax.plot(*point, marker=marker, color=described.colour, markersize=7,
                        markeredgecolor="black", linestyle="none")
    for name, (marker, text) in THRESHOLD_MARKERS.items():
        ax.plot([], [], marker=marker, color="white", markeredgecolor="black", linestyle="none",
                label=f"threshold: {text}")
    ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel="false-positive rate (human fails passed)",
           ylabel="true-positive rate (human passes passed)")
    ax.set_aspect("equal")
    ax.legend(loc="lower right", fontsize="x-small")
    return fig


def no_data_reason(doc: dict[str, Any], figure: str) -> str | None:
    """Why `figure` ("metric_by_label" or "roc_curves") has nothing to draw; None when it has."""
    if not _calibrated(doc):
        return "no metric has two labelled values, so there is nothing to draw"
    if figure == "roc_curves" and not _pass_fail_entries(doc):
        pass_fail = doc["pass_fail"]
        return (f"the labelled examples are not of both classes ({pass_fail['n_pass']} pass, "
                f"{pass_fail['n_fail']} fail under the rule: {pass_fail['rule']}), so there is no ROC curve")
    return None

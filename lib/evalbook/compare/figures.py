"""The figure of a comparison: per-example changes, candidate - baseline, one panel per metric."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from evalbook.escaping import visible_controls
from evalbook.metrics import METRICS
from evalbook.metrics import metric as registered
from evalbook.report.figures import new_figure, styled

DELTA_COLUMNS = ("id", "metric", "baseline", "candidate", "delta")


def _delta_panel(ax, rows: pd.DataFrame, metric: str, k: int | None) -> None:
    """Sorted per-example changes, worst first; changes for the worse in full colour."""
    style = registered(metric)
    present = rows[rows["delta"].notna()]
    gain = present["delta"].astype(float) * (1 if style.higher_is_better else -1)
    ordered = present.assign(gain=gain).sort_values(["gain", "id"], kind="mergesort")
    worse = ordered["gain"].to_numpy() < 0
    ax.bar(np.arange(len(ordered)), ordered["delta"].astype(float), width=0.85, gid=f"deltas:{metric}",
           color=[to_rgba(style.colour, 1.0 if w else 0.35) for w in worse])
    ax.axhline(0, color="0.2", lw=0.8)
    ax.set_xlim(-0.6, max(len(ordered), 1) - 0.4)
    ax.set_xticks([])
    ax.set_ylabel("Δ")
    better = int((ordered["gain"] > 0).sum())
    title = (f"{style.label_at(k)}: {int(worse.sum())} worse, {better} better, "
             f"{len(ordered) - int(worse.sum()) - better} unchanged of {len(ordered)}")
    if len(present) < len(rows):
        title += f" ({len(rows) - len(present)} without a delta)"
    worst = ordered[worse].head(3)
    if len(worst):
        title += "\nworst: " + ", ".join(f"{visible_controls(r.id)} {r.delta:+.3f}"
                                         for r in worst.itertuples())
    ax.set_title(title, fontsize="small", loc="left", parse_math=False)  # ids are drawn as written


@styled
def delta_figure(deltas: pd.DataFrame, k: int | None = None) -> Figure | None:
    """One panel per metric of per-example changes (candidate - baseline), sorted, zero line drawn.

    `deltas` is long: columns id, metric, baseline, candidate, delta. A change for the worse
    (delta < 0, or > 0 where lower is better, as for rank) is drawn in full colour, others pale;
    the three worst are named. Rows with a missing delta are counted. None when no row has a delta.
    `k`, the runs' k (compare.document.compared_k), names the retrieval metrics' panels.
    """
    missing = [c for c in DELTA_COLUMNS if c not in deltas.columns]
    if missing:
        raise ValueError(f"delta_figure needs columns {list(DELTA_COLUMNS)}; missing {missing}")
    for metric in deltas["metric"].unique():
        registered(metric)
    present = set(deltas.loc[deltas["delta"].notna(), "metric"])
    metrics = [m.name for m in METRICS if m.name in present]
    if not metrics:
        return None
    fig, axes = new_figure(len(metrics), 1, figsize=(9, 0.6 + 2.3 * len(metrics)), squeeze=False)
    for ax, metric in zip(axes[:, 0], metrics):
        _delta_panel(ax, deltas[deltas["metric"] == metric], metric, k)
    axes[-1, 0].set_xlabel("examples, sorted from the worst change to the best")
    fig.suptitle("Per-example change, candidate − baseline")
    return fig


@styled
def position_bias_figure(section: dict | None) -> Figure | None:
    """compare --pairwise at a glance: the candidate's win rate with its bootstrap interval, the
    share of judgments whose two orders agreed and the first slot's win rate, each with its
    Wilson interval, on one 0-1 axis with 0.5 marked (no preference, no position bias). Without a
    win rate (no question decided consistently) the two position-bias rows alone, which then say
    the most. None without a pairwise section or any judgment with a valid reply in both orders."""
    if not section or section["position_bias"].get("consistency") is None:
        return None
    bias, win = section["position_bias"], section["win_rate_b"]
    rows = [] if win is None else [(f"candidate's win rate ({win['n']} questions)", win["mean"],
                                    (win["low"], win["high"]))]
    rows.append((f"orders agree ({bias['n_consistent']} consistent)", bias["consistency"],
                 (bias["consistency_interval"]["low"], bias["consistency_interval"]["high"])))
    if bias["first_slot_rate"] is not None:
        rows.append((f"first slot wins ({bias['n_decisive_verdicts']} verdicts)", bias["first_slot_rate"],
                     (bias["first_slot_interval"]["low"], bias["first_slot_interval"]["high"])))
    fig, ax = new_figure(figsize=(8, 0.9 + 0.55 * len(rows)))
    positions = np.arange(len(rows))[::-1]
    values = np.array([value for _, value, _ in rows])
    errors = np.array([[value - low, high - value] for _, value, (low, high) in rows]).T
    ax.errorbar(values, positions, xerr=errors, fmt="o", color="0.15", capsize=4, gid="pairwise:estimates")
    ax.axvline(0.5, color="0.5", lw=0.8, ls="--")
    ax.set_yticks(positions, [label for label, _, _ in rows])
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("share (0.5: no preference; the first slot at 0.5: no position bias)")
    ax.set_title("Pairwise judging: preference and position bias", loc="left", fontsize="small")
    return fig

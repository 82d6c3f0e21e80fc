"""Figures of a run's report (report-v1).

Every builder reads the validated report that `evalbook.report.document.build_report` writes
(a dict, or its evalbook.report.reader.RunReport view) and draws what the report holds: means,
thresholds and pass rates come from its summaries, scores from its examples. A metric has one
label and one colour everywhere, from the registry (evalbook.metrics).

No data: a figure builder returns None when there is nothing to draw (no retrieval data, the
judge did not run, no score); `no_data_reason(report, builder)` says why, for the notebook to
print: in the reader's words, so a judge that did not run is said as the banner says it
(evalbook.judge.display.plain_reason), without the exception's text.

Figures are made through pyplot and detached from it at once (`plt.close`), so Jupyter shows a
figure only when a cell returns or displays it, and none piles up in pyplot's registry. Nothing
here calls `plt.show`.
"""

from __future__ import annotations

import functools
import io
import re
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable

import matplotlib.pyplot as plt
from matplotlib.transforms import offset_copy
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator, PercentFormatter

from evalbook.escaping import visible_controls
from evalbook.files import write_atomically
from evalbook.judge.display import plain_reason
from evalbook.metrics import metric as registered
from evalbook.metrics import names
from evalbook.report.failures import q_phrase
from evalbook.report.reader import RunReport
from evalbook.report.slices import BETTER, NO_CLEAR_DIFFERENCE, TOO_FEW, WORSE

MAX_POINT_LABELS = 20  # above this many distinct points, labels would hide the points
SIMILARITY_METRICS = names("similarity")


# ---------------------------------------------------------------- reading the report

def _score_frame(report: dict[str, Any], metrics: Iterable[str]) -> pd.DataFrame:
    """One row per example: its id and its score for each metric (NaN when absent)."""
    metrics = list(metrics)
    frame = pd.DataFrame(RunReport.of(report).score_rows(metrics), columns=["id", *metrics])
    return frame.astype({m: "float64" for m in metrics})


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# ---------------------------------------------------------------- figure scaffolding

def styled(draw: Callable[..., Figure | None]) -> Callable[..., Figure | None]:
    """Draw inside seaborn's whitegrid style without changing the caller's rcParams."""
    @functools.wraps(draw)
    def styled(*args, **kwargs):
        with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.85):
            return draw(*args, **kwargs)
    return styled


def new_figure(nrows: int = 1, ncols: int = 1, **options) -> tuple[Figure, Any]:
    fig, axes = plt.subplots(nrows, ncols, layout="constrained", **options)
    plt.close(fig)
    return fig, axes


def _note(fig: Figure, notes: list[str]) -> None:
    """Put what the figure leaves out under it, in small grey text."""
    if notes:
        fig.supxlabel("; ".join(notes), x=0.01, ha="left", fontsize="small", color="0.35")


_LABEL_OFFSETS = ((5, 4, "left"), (5, -11, "left"), (-5, 4, "right"), (-5, -11, "right"))


def _annotate_apart(ax, texts: list[str], xs: Iterable[float], ys: Iterable[float]) -> None:
    """Label points in small text, moving a label to another side of its point when it would
    cover an earlier label (boxes estimated in points: 4.5 per character, 9 high).

    Labels are ids, user text: drawn as written, never as mathtext (an id like `$\\x$` would
    fail to draw), with control characters as visible escapes."""
    texts, xs, ys = [visible_controls(text) for text in texts], list(xs), list(ys)
    ax.get_xlim(), ax.get_ylim()  # settle autoscaling before reading display positions
    anchors = ax.transData.transform(np.column_stack([xs, ys])) * 72 / ax.figure.dpi
    placed: list[tuple[float, float, float, float]] = []
    for text, (px, py), x, y in zip(texts, anchors, xs, ys):
        width = 4.5 * len(text)
        for dx, dy, ha in _LABEL_OFFSETS:
            left = px + dx - (width if ha == "right" else 0)
            box = (left, py + dy, left + width, py + dy + 9)
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
                break
        else:
            dx, dy, ha = _LABEL_OFFSETS[0]
        placed.append(box)
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, fontsize="x-small",
                    parse_math=False)


def _label_points(ax, ids: list[str], xs: np.ndarray, ys: np.ndarray) -> None:
    """Label each distinct point with its example ids (several ids when points coincide)."""
    groups: dict[tuple[float, float], list[str]] = {}
    for example_id, x, y in zip(ids, xs, ys):
        groups.setdefault((float(x), float(y)), []).append(example_id)
    if len(groups) > MAX_POINT_LABELS:
        return
    texts = [", ".join(m[:3]) + (f" +{len(m) - 3}" if len(m) > 3 else "") for m in groups.values()]
    _annotate_apart(ax, texts, [x for x, _ in groups], [y for _, y in groups])


# ---------------------------------------------------------------- answer similarity

def _missing_similarity_notes(report: dict[str, Any]) -> list[str]:
    missing = [e for e in report["examples"] if registered("bertscore_f1").value(e) is None]
    no_answer = sum("no_prediction" in e["flags"] for e in missing)
    empty = sum(bool({"generated_empty", "reference_empty"} & set(e["flags"])) for e in report["examples"])
    notes = []
    if no_answer:
        notes.append(f"{no_answer} without a generated answer (no score)")
    if len(missing) > no_answer:
        notes.append(f"{_count(len(missing) - no_answer, 'other example')} without a score")
    if empty:
        notes.append(f"{_count(empty, 'empty answer')} scored 0")
    return notes


def _distribution_panel(ax, values: np.ndarray, summary: dict[str, Any], metric: str,
                        edges: np.ndarray) -> None:
    style = registered(metric)
    ax.set_title(f"{style.label}  (n = {summary['n']})")
    if values.size == 0:
        ax.text(0.5, 0.5, "no score", transform=ax.transAxes, ha="center", color="0.4")
        return
    # a kernel density needs spread; on fewer than 3 distinct points it would invent a shape
    smooth = np.unique(values).size >= 3
    sns.histplot(values, bins=edges, kde=smooth, color=style.colour, ax=ax, alpha=0.6, edgecolor="white")
    ax.axvline(summary["mean"], color="0.15", ls="--", lw=1.2, label=f"mean {summary['mean']:.3f}",
               gid=f"mean:{metric}")
    ax.legend(loc="upper left", frameon=False, fontsize="small")
    ax.set(xlabel="score", ylabel="examples")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


@styled
def similarity_distributions(report: dict[str, Any]) -> Figure | None:
    """One histogram (with a density curve) per answer-similarity metric, its mean dashed.

    The mean is the report's summary mean; examples without a score are counted under the
    figure, with empty answers (scored 0 by the scorer). None when no example has a score.
    """
    if _similarity_gap(report) is not None:
        return None
    scores = _score_frame(report, SIMILARITY_METRICS)
    lowest = min(0.0, float(np.nanmin(scores[list(SIMILARITY_METRICS)].to_numpy())))
    edges = np.linspace(lowest, 1.0, 21)
    fig, axes = new_figure(2, 2, figsize=(9, 6.2), sharex=True)
    for ax, metric in zip(axes.flat, SIMILARITY_METRICS):
        summary = report["answer_similarity_summary"][metric]
        _distribution_panel(ax, scores[metric].dropna().to_numpy(), summary, metric, edges)
    fig.suptitle(f"Answer similarity to the reference answer ({report['dataset']['n_examples']} examples)")
    _note(fig, _missing_similarity_notes(report))
    return fig


def _extremes(x: np.ndarray, y: np.ndarray, n_disagreements: int) -> list[int]:
    """Positions of the lowest and highest on each axis and of the largest |x - y|, each once."""
    picks = [int(np.argmin(x)), int(np.argmax(x)), int(np.argmin(y)), int(np.argmax(y))]
    picks += [int(i) for i in np.argsort(-np.abs(x - y), kind="stable")[:n_disagreements]]
    return list(dict.fromkeys(picks))


@styled
def f1_vs_cosine(report: dict[str, Any], n_label: int = 3) -> Figure | None:
    """Scatter of BERTScore F1 (x) against the sentence cosine (y), one point per example.

    Labelled by id: the lowest and highest example on each axis and the `n_label` examples
    where the two metrics disagree most (largest |F1 - cosine|). The dotted diagonal is where
    they agree. None when no example has both scores.
    """
    if _f1_cosine_gap(report) is not None:
        return None
    pairs = _score_frame(report, ("bertscore_f1", "sentence_cosine")).dropna()
    ids = pairs["id"].tolist()
    f1, cosine = pairs["bertscore_f1"].to_numpy(), pairs["sentence_cosine"].to_numpy()
    fig, ax = new_figure(figsize=(6.5, 6))
    lowest = min(0.0, f1.min(), cosine.min())
    ax.plot([lowest, 1], [lowest, 1], ls=":", color="0.55", lw=1, label="equal scores")
    ax.scatter(f1, cosine, s=30, color="0.2", alpha=0.75, gid="points")
    picks = _extremes(f1, cosine, n_label)
    _annotate_apart(ax, [ids[i] for i in picks], f1[picks], cosine[picks])
    for axis, metric in ((ax.xaxis, "bertscore_f1"), (ax.yaxis, "sentence_cosine")):
        axis.set_label_text(registered(metric).label, color=registered(metric).colour)
    ax.legend(loc="upper left", frameon=False)
    ax.set_title(f"BERTScore F1 against sentence cosine (n = {len(ids)})")
    _note(fig, _missing_similarity_notes(report))
    return fig


# ---------------------------------------------------------------- the judge

def _threshold_label(summary: dict[str, Any], metric: str) -> str:
    placeholder = "\n(placeholder, not tuned)" if summary["threshold_is_placeholder"] else ""
    return f"{registered(metric).label} threshold {summary['threshold']:g}{placeholder}"


QUADRANTS = {  # name: (groundedness high?, relevance high?, caption)
    "confident lie": (False, True, "confident lie\nrelevant but\nnot grounded"),
    "accurate dodge": (True, False, "accurate dodge\ngrounded but\nnot relevant"),
    "both high": (True, True, "grounded\nand relevant"),
    "both low": (False, False, "neither grounded\nnor relevant"),
}


def _quadrants(ax, grounded_at: float, relevant_at: float) -> None:
    """Shade and caption the four regions the two thresholds cut; the named failures in grey."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    for name, (grounded, relevant, caption) in QUADRANTS.items():
        left, right = (grounded_at, x1) if grounded else (x0, grounded_at)
        bottom, top = (relevant_at, y1) if relevant else (y0, relevant_at)
        failure = grounded != relevant
        ax.add_patch(Rectangle((left, bottom), right - left, top - bottom, edgecolor="none",
                               facecolor="0.9" if failure else "none", zorder=0, gid=f"quadrant:{name}"))
        ax.text((left + right) / 2, (bottom + top) / 2, caption, ha="center", va="center", fontsize="small",
                color="0.25" if failure else "0.5", fontweight="bold" if failure else "normal",
                zorder=1, gid=f"caption:{name}")


def _one_sided_notes(scores: pd.DataFrame) -> list[str]:
    only_grounded = int((scores["groundedness"].notna() & scores["relevance"].isna()).sum())
    only_relevant = int((scores["relevance"].notna() & scores["groundedness"].isna()).sum())
    notes = []
    if only_grounded:
        notes.append(f"{_count(only_grounded, 'example')} with a groundedness score only")
    if only_relevant:
        notes.append(f"{_count(only_relevant, 'example')} with a relevance score only")
    return notes + (["not plotted; see unscored_judgments()"] if notes else [])


@styled
def groundedness_vs_relevance(report: dict[str, Any]) -> Figure | None:
    """Per-example groundedness (x) against relevance (y), cut into quadrants by the thresholds.

    High relevance with low groundedness is the confident lie (relevance cannot see the
    reference); high groundedness with low relevance is the accurate dodge. "High" means at or
    above the report's threshold, the pass rule. Points are labelled by id when few; examples
    with only one of the two scores are counted under the figure. None when the judge did not
    run, did not score both metrics, or no example has both scores.
    """
    if _judge_pair_gap(report) is not None:
        return None
    summaries = report["judge_summary"]["metrics"]
    scores = _score_frame(report, ("groundedness", "relevance"))
    pairs = scores.dropna()
    grounded, relevant = pairs["groundedness"].to_numpy(), pairs["relevance"].to_numpy()
    fig, ax = new_figure(figsize=(9, 6.2))
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(min(-0.05, np.floor(relevant.min() * 10) / 10 - 0.05), 1.05)
    _quadrants(ax, summaries["groundedness"]["threshold"], summaries["relevance"]["threshold"])
    ax.axvline(summaries["groundedness"]["threshold"], color=registered("groundedness").colour, ls="--",
               label=_threshold_label(summaries["groundedness"], "groundedness"), gid="threshold:groundedness")
    ax.axhline(summaries["relevance"]["threshold"], color=registered("relevance").colour, ls="--",
               label=_threshold_label(summaries["relevance"], "relevance"), gid="threshold:relevance")
    ax.scatter(grounded, relevant, s=36, color="0.15", alpha=0.8, zorder=3, gid="points")
    _label_points(ax, pairs["id"].tolist(), grounded, relevant)
    for axis, metric in ((ax.xaxis, "groundedness"), (ax.yaxis, "relevance")):
        axis.set_label_text(registered(metric).label, color=registered(metric).colour)
    ax.set_title(f"Groundedness against relevance (n = {len(pairs)} judged examples)")
    fig.legend(loc="outside right upper", frameon=False, fontsize="small")
    _note(fig, _one_sided_notes(scores))
    return fig


def pass_rates(scores: Iterable[Any], thresholds: Iterable[float]) -> np.ndarray:
    """Share of the present scores at or above each threshold t: the pass rate as a function of t.

    rate(t) = #{s : s >= t} / n over the n present scores, the same rule as a judge record's
    `passed`. None, NaN and <NA> are left out of both counts (the report's summaries count
    them). Range 0-1, non-increasing in t; shaped like `thresholds`. With no present score
    every rate is NaN (undefined), never 0.
    """
    present = np.asarray([float(s) for s in scores if not pd.isna(s)], dtype=np.float64)
    grid = np.asarray(thresholds, dtype=np.float64)
    if present.size == 0:
        return np.full(grid.shape, np.nan)
    return (present[None, :] >= grid.reshape(-1, 1)).mean(axis=1).reshape(grid.shape)


def _rated_metrics(report: dict[str, Any], similarity: bool) -> list[str]:
    judged = [m.name for m in RunReport.of(report).judged_metrics() if m.summary(report)["n_scored"]]
    summaries = report["answer_similarity_summary"]
    return judged + ([m for m in SIMILARITY_METRICS if summaries[m]["n"]] if similarity else [])


def _pass_curve(ax, report: dict[str, Any], metric: str, grid: np.ndarray) -> None:
    style = registered(metric)
    rates = pass_rates(_score_frame(report, [metric])[metric], grid)
    if registered(metric).kind != "judge":
        n = report["answer_similarity_summary"][metric]["n"]
        ax.plot(grid, rates, drawstyle="steps-pre", ls="--", lw=1.4, color=style.colour,
                label=f"{style.label} (n = {n}), no threshold", gid=f"curve:{metric}")
        return
    summary = report["judge_summary"]["metrics"][metric]
    unscored = f", {summary['n_unscored']} unscored" if summary["n_unscored"] else ""
    label = (f"{style.label} (n = {summary['n_scored']}{unscored}): {summary['pass_rate']:.0%} pass at "
             f"{summary['threshold']:g}{' (placeholder)' if summary['threshold_is_placeholder'] else ''}")
    # judge metrics are drawn widest first, so a curve lying on another still shows around it
    width = max(3.5 - 0.9 * names("judge").index(metric), 0.8)
    ax.plot(grid, rates, drawstyle="steps-pre", lw=width, color=style.colour, label=label,
            gid=f"curve:{metric}")
    ax.axvline(summary["threshold"], color=style.colour, ls=":", lw=1.2, gid=f"threshold:{metric}")
    ax.plot([summary["threshold"]], [summary["pass_rate"]], "o", ms=7, color=style.colour,
            markeredgecolor="white", gid=f"pass:{metric}")


@styled
def pass_rate_by_threshold(report: dict[str, Any], similarity: bool = False) -> Figure | None:
    """For each judged metric, the share of scored examples with score >= t, for t across the range.

    The report's threshold is dotted and its pass rate marked on the curve; the legend gives
    n, the unscored count and whether the threshold is the placeholder. With `similarity`,
    the answer-similarity metrics are drawn dashed, without a threshold (ADR 014 sets none).
    None when there is no score to rate.
    """
    if _pass_rate_gap(report, similarity) is not None:
        return None
    metrics = _rated_metrics(report, similarity)
    lowest = float(np.nanmin(_score_frame(report, metrics)[metrics].to_numpy()))
    start = min(0.0, np.floor(lowest * 10) / 10)  # relevance and cosine can fall below 0
    # steps of 0.005 put every threshold of up to 3 decimals ending in 0 or 5 on the grid
    grid = np.linspace(start, 1.0, int(round((1.0 - start) / 0.005)) + 1)
    fig, ax = new_figure(figsize=(9, 4.8))
    for metric in metrics:
        _pass_curve(ax, report, metric, grid)
    ax.set(xlabel="threshold t", ylabel="scored examples with score ≥ t", ylim=(-0.03, 1.03))
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_title("Pass rate by threshold")
    fig.legend(loc="outside lower center", ncols=1, frameon=False, fontsize="small")
    return fig


# ---------------------------------------------------------------- retrieval

def _rank_counts(report: dict[str, Any]) -> Counter:
    """How many examples have each gold rank; None counts those whose gold was not retrieved."""
    counts: Counter = Counter()
    for example in report["examples"]:
        retrieval = example["retrieval"]
        if retrieval is None:
            continue
        if retrieval["rank"] is None and retrieval["top_k_match"]:
            raise ValueError(f"example {example['id']!r}: retrieval says top-k match but has no rank")
        counts[retrieval["rank"]] += 1
    return counts


@styled
def retrieval_rank_histogram(report: dict[str, Any]) -> Figure | None:
    """Bars of how many examples found their first relevant document at rank 1, 2, ..., and a bar
    for not retrieved.

    Ranks past k (retrieved, but not a top-k match) are drawn pale; the dashed line is k. None
    when no example has retrieval data.
    """
    if _retrieval_gap(report) is not None:
        return None
    counts, summary = _rank_counts(report), report["retrieval_summary"]
    k = summary["k"]
    ranks = list(range(1, max([k, *(r for r in counts if r is not None)]) + 1))
    colour = registered("rank").colour
    fig, ax = new_figure(figsize=(7.5, 4.5))
    bars = ax.bar(ranks, [counts[r] for r in ranks], gid="bars:rank",
                  color=[to_rgba(colour, 1.0 if r <= k else 0.4) for r in ranks])
    missing_at = ranks[-1] + 1.5
    missing = ax.bar([missing_at], [counts[None]], color="white", edgecolor="0.3", hatch="//",
                     gid="bars:not retrieved")
    for container in (bars, missing):
        ax.bar_label(container, padding=2, fontsize="small")
    ax.axvline(k + 0.5, color="0.2", ls="--", lw=1, label=f"k = {k}")
    ax.set_xticks([*ranks, missing_at], [*map(str, ranks), "not\nretrieved"])
    ax.set(xlabel="rank of the gold context", ylabel="examples")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.margins(y=0.12)
    ax.legend(loc="upper right", frameon=False)
    ax.set_title(f"Retrieval rank (n = {summary['n']} with retrieval data)")
    rate = "n/a" if summary["top_k_match_rate"] is None else f"{summary['top_k_match_rate']:.0%}"
    _note(fig, [f"top-{k} match rate {rate}", f"{summary['n_missing']} without retrieval data, not counted"])
    return fig


# ---------------------------------------------------------------- where it fails

FOREST_LABEL_CHARACTERS = 40  # of a slice's or level's name on the forest plot's axis
# how a level is drawn, by verdict: (colour, marker, filled, legend text). Flagged levels take a
# red-blue diverging pair, the rest greys, so that no metric's colour reads as a verdict; the
# metric's colour marks the run's mean.
FOREST_STYLES = {
    WORSE: ("#b2182b", "D", True, "worse than the rest (flagged)"),
    BETTER: ("#2166ac", "D", True, "better than the rest (flagged)"),
    NO_CLEAR_DIFFERENCE: ("0.3", "o", True, "no clear difference"),
    TOO_FEW: ("0.55", "o", False, "too few to tell (not tested)"),
}


def _forest_text(text: str) -> str:
    """A name as the plot shows it: controls visible, cut to FOREST_LABEL_CHARACTERS."""
    text = visible_controls(str(text))
    return text if len(text) <= FOREST_LABEL_CHARACTERS else text[:FOREST_LABEL_CHARACTERS - 1] + "…"


def _forest_rows(report: dict[str, Any], metric: str,
                 tested_only: bool = False) -> list[tuple[str, dict[str, Any] | None]]:
    """The plot's rows from the top: (slice name, None) heading each slice, then (level, its entry);
    with `tested_only`, only the levels tested (flagged or not), none too few to tell."""
    section = report["slices"]
    entries = {(e["slice"], e["level"]): e for e in section["levels"] if e["metric"] == metric
               and not (tested_only and e["verdict"] == TOO_FEW)}
    rows: list[tuple[str, dict[str, Any] | None]] = []
    for column in section["columns"]:
        levels = [(level, entries[column["name"], level]) for level in column["levels"]
                  if (column["name"], level) in entries]
        if levels:
            rows += [(column["name"], None), *levels]
    return rows


def _forest_points(ax, placed: list[tuple[float, dict[str, Any]]]) -> None:
    """Each level's mean with its interval, one errorbar per verdict, and its n (and q when flagged)
    at the right."""
    for verdict, (shade, marker, filled, text) in FOREST_STYLES.items():
        chosen = [(y, e) for y, e in placed if e["verdict"] == verdict and e["mean"] is not None]
        if not chosen:
            continue
        ys = np.array([y for y, _ in chosen])
        means = np.array([e["mean"] for _, e in chosen], dtype=float)
        lows = np.array([e["mean"] if e["low"] is None else e["low"] for _, e in chosen], dtype=float)
        highs = np.array([e["mean"] if e["high"] is None else e["high"] for _, e in chosen], dtype=float)
        ax.errorbar(means, ys, xerr=[means - lows, highs - means], fmt=marker, color=shade, ecolor=shade,
                    markerfacecolor=shade if filled else "white", markersize=6, capsize=2.5, lw=1.4,
                    label=text, gid=f"levels:{verdict}", zorder=3)
    for y, entry in placed:
        flagged = entry["verdict"] in (WORSE, BETTER)
        shown = f"n = {entry['n']}" + (f", {entry['verdict']}, {q_phrase(entry['q_value'])}" if flagged else "")
        ax.text(1.01, y, shown, transform=ax.get_yaxis_transform(), va="center", fontsize="x-small",
                color=FOREST_STYLES[entry["verdict"]][0] if flagged else "0.35",
                fontweight="bold" if flagged else "normal")


@styled
def slice_forest(report: dict[str, Any], metric: str = "bertscore_f1", tested_only: bool = False) -> Figure | None:
    """A forest plot of `metric` by slice: each level's mean with its interval, slices in the
    report's order (each named above its levels, on a band of its own), the run's mean as a
    dashed line in the metric's colour. Flagged levels are drawn as diamonds in red (worse) or
    blue (better) with their q at the right, slice headings in bold; levels too few to tell are
    hollow. Every level shows its n.

    With `tested_only`, the levels too few to tell are left out (the page's table holds them),
    and so is a slice with none tested.

    None when the report has no slices, the metric was not tested by slice, or no level has a
    value, or none was tested with `tested_only` (slice_forest_gap says which)."""
    if _slice_forest_gap(report, metric, tested_only) is not None:
        return None
    style = registered(metric)
    rows = _forest_rows(report, metric, tested_only)
    fig, ax = new_figure(figsize=(8.5, 1.4 + 0.24 * len(rows)))
    placed, labels, band, top = [], [], 0, 0
    for position, (name, entry) in enumerate(rows):
        y = -position
        if entry is None:
            if band % 2 == 0 and position:
                ax.axhspan(y + 0.5, top + 0.5, color="0.95", zorder=0)
            band, top = band + 1, y
            labels.append((y, _forest_text(name), True))
            continue
        placed.append((y, entry))
        labels.append((y, _forest_text(name), False))
    if band % 2 == 0:
        ax.axhspan(-len(rows) + 0.5, top + 0.5, color="0.95", zorder=0)
    _forest_points(ax, placed)
    # The names are texts at the axis, not tick labels: a tick is five artists, and making 60 of
    # them took half of building the plot.
    ax.set_yticks([])
    at_axis = offset_copy(ax.get_yaxis_transform(), fig=fig, x=-plt.rcParams["ytick.major.pad"], units="points")
    colour = plt.rcParams["ytick.labelcolor"]
    for y, text, heading in labels:
        ax.text(0, y, text, transform=at_axis, ha="right", va="center_baseline", parse_math=False, gid="row-name",
                fontsize=plt.rcParams["ytick.labelsize"], fontweight="bold" if heading else "normal",
                color=plt.rcParams["ytick.color"] if colour == "inherit" else colour)
    ax.set_ylim(-len(rows) + 0.4, 0.6)
    ax.grid(axis="y", visible=False)
    run_mean = style.mean(report)
    if run_mean is not None:
        ax.axvline(run_mean, color=style.colour, ls="--", lw=1.4, label=f"run mean {run_mean:.3f}",
                   gid=f"mean:{metric}", zorder=2)
    ax.set_xlabel(style.label, color=style.colour)
    n_levels = sum(entry is not None for _, entry in rows)
    confidence = report["slices"]["settings"].get("confidence", 0.95)
    # The title's height and the (empty) y label's place are fixed: placed automatically, matplotlib
    # measured every row's name again at each layout pass and draw to place them, a fifth of the
    # time 04 spent on these plots. They land where it would put them (no ticks at the top).
    ax.set_title(f"{style.label} by slice: each level's mean and {confidence:.0%} interval ({n_levels} levels)",
                 y=1.0)
    ax.yaxis.set_label_coords(0, 0.5)
    fig.legend(loc="outside lower center", ncols=3, frameon=False, fontsize="small")
    return fig


def forest_metrics(report: dict[str, Any], tested_only: bool = False) -> list[str]:
    """The metrics a forest plot is drawn for: those tested by slice with a value in some level
    (with `tested_only`, in some level tested), in the report's order."""
    return [name for name in (report.get("slices") or {}).get("metrics", [])
            if _slice_forest_gap(report, name, tested_only) is None]


def page_forest_metrics(report: dict[str, Any]) -> list[str]:
    """The metrics 04_report's page draws a forest plot for, tested levels only: each headline
    metric and each metric with a flagged level, among those with a level tested, in the report's
    order. Every level of every metric is in the page's table; the plots are what a reader looks at."""
    flagged = {e["metric"] for e in (report.get("slices") or {}).get("levels", []) if e["verdict"] in (WORSE, BETTER)}
    return [name for name in forest_metrics(report, tested_only=True) if registered(name).headline or name in flagged]


# ---------------------------------------------------------------- saving

PNG_DPI = 150  # a saved figure's resolution


def save_png(fig: Figure, run_dir: Path, name: str, dpi: int = PNG_DPI, overwrite: bool = False) -> Path:
    """Write `fig` to `<run_dir>/figures/<name>.png`, atomically.

    In a run folder a figure is written once: an existing file is refused (FileExistsError).
    `overwrite=True` is for the interactive scratch folder, where reruns replace the file.
    """
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name):
        raise ValueError(f"figure name {name!r} must be letters, digits, '-' and '_' (no folder, no suffix)")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    path = Path(run_dir) / "figures" / f"{name}.png"
    write_atomically(path, buffer.getvalue(), overwrite=overwrite)
    return path


SHOWN_DPI = 100  # the inline backend's: a saved figure is shown at the size it would have there


def shown_png(path: Path):
    """The PNG at `path`, for a notebook to show at the size the inline backend would show its
    figure. Showing the saved PNG, not the figure, draws it once: the inline backend would draw
    the figure a second time, which doubled the time 04 spent on its figures."""
    from IPython.display import Image  # only a notebook's kernel pays it

    png = Path(path).read_bytes()
    width = int.from_bytes(png[16:20], "big")  # the IHDR chunk's width, right after the signature
    return Image(data=png, format="png", width=round(width * SHOWN_DPI / PNG_DPI))


# ---------------------------------------------------------------- why a figure is empty

def _similarity_gap(report: dict[str, Any]) -> str | None:
    if _score_frame(report, SIMILARITY_METRICS)[list(SIMILARITY_METRICS)].notna().any(axis=None):
        return None
    empty = "" if report["examples"] else " (the report has no example)"
    return "no example has an answer-similarity score" + empty


def _f1_cosine_gap(report: dict[str, Any]) -> str | None:
    if len(_score_frame(report, ("bertscore_f1", "sentence_cosine")).dropna()):
        return None
    return "no example has both a BERTScore F1 and a sentence cosine score"


def _judge_gap(report: dict[str, Any], metrics: Iterable[str]) -> str | None:
    summary = report["judge_summary"]
    if summary["status"] != "ran":
        return f"the judge did not run: {plain_reason(summary['reason'])}"
    off = [m for m in metrics if m not in summary["metrics"]]
    return f"the judge did not score {' or '.join(off)} (not enabled)" if off else None


def _judge_pair_gap(report: dict[str, Any]) -> str | None:
    gap = _judge_gap(report, ("groundedness", "relevance"))
    if gap is None and not len(_score_frame(report, ("groundedness", "relevance")).dropna()):
        gap = "no judged example has both a groundedness and a relevance score (see unscored_judgments)"
    return gap


def _pass_rate_gap(report: dict[str, Any], similarity: bool = False) -> str | None:
    if _rated_metrics(report, similarity):
        return None
    gap = _judge_gap(report, ())
    return gap or "no judged example has a score (see unscored_judgments)"


def _slice_forest_gap(report: dict[str, Any], metric: str = "bertscore_f1", tested_only: bool = False) -> str | None:
    section = report.get("slices")
    if not section:
        return "the run was not sliced" if "slices" in report else "the report was written before slices existed"
    if not section["columns"]:
        return "the run is not cut into any slice"
    if metric not in section["metrics"]:
        return f"{registered(metric).label} was not tested by slice"
    if not any(e["metric"] == metric and e["mean"] is not None for e in section["levels"]):
        return f"no level has a {registered(metric).label} value"
    if tested_only and not any(e["metric"] == metric and e["verdict"] != TOO_FEW for e in section["levels"]):
        return f"no level has enough examples to test {registered(metric).label}"
    return None


def _retrieval_gap(report: dict[str, Any]) -> str | None:
    if any(e["retrieval"] is not None for e in report["examples"]):
        return None
    return "no example has retrieval data (retrieved ids or contexts)"


def _conversations_gap(report: dict[str, Any], **_) -> str | None:
    section = report.get("scenarios")
    if section is None:
        return "this run simulated no conversation (scenarios.enabled is false)"
    return None if section["n_transcripts"] else "no conversation was held"


def conversation_endings(report: dict[str, Any]) -> Figure | None:
    """Bars of how the run's conversations ended, every end reason drawn (0 included), the
    ones that are failures of a side (timeout, system error, simulator error) hatched."""
    if _conversations_gap(report) is not None:
        return None
    section = report["scenarios"]
    reasons = list(section["end_reasons"])
    counts = [section["end_reasons"][reason] for reason in reasons]
    failures = {"timeout", "system_error", "simulator_error"}
    fig, ax = new_figure(figsize=(7.5, 4.0))
    bars = ax.barh([r.replace("_", " ") for r in reasons], counts, color="0.55",
                   hatch=None, gid="bars:end reasons")
    for bar, reason in zip(bars, reasons):
        if reason in failures:
            bar.set_hatch("//")
            bar.set_facecolor("white")
            bar.set_edgecolor("0.3")
    ax.bar_label(bars, padding=2, fontsize="small")
    ax.invert_yaxis()
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.margins(x=0.12)
    ax.set(xlabel="conversations", ylabel="")
    ax.set_title(f"How the conversations ended (n = {section['n_transcripts']}, "
                 f"{section['n_scenarios']} scenarios × {section['repeats']})")
    _note(fig, ["hatched: a side failed (timeout, system error, simulator error); recorded, never dropped"])
    return fig


_GAPS: dict[str, Callable[..., str | None]] = {
    "conversation_endings": _conversations_gap,
    "similarity_distributions": _similarity_gap,
    "f1_vs_cosine": lambda report, **_: _f1_cosine_gap(report),
    "groundedness_vs_relevance": _judge_pair_gap,
    "pass_rate_by_threshold": _pass_rate_gap,
    "retrieval_rank_histogram": _retrieval_gap,
    "slice_forest": _slice_forest_gap,
}


# The figures of 04_report's Figures section, in its order: (the PNG's name, its builder).
PAGE_FIGURES: tuple[tuple[str, Callable[..., Figure | None]], ...] = (
    ("similarity-distributions", similarity_distributions),
    ("f1-vs-cosine", f1_vs_cosine),
    ("groundedness-vs-relevance", groundedness_vs_relevance),
    ("pass-rate-by-threshold", pass_rate_by_threshold),
    ("retrieval-ranks", retrieval_rank_histogram),
)


def no_data_reason(report: dict[str, Any], figure: Callable[..., Any] | str, **options) -> str | None:
    """Why `figure` (a builder of this module, or its name) returns None for `report`; None when it draws.

    `options` are the builder's own keyword arguments that change what it draws
    (`similarity=` of pass_rate_by_threshold, `metric=` of slice_forest); a builder given as a
    functools.partial brings its own.
    """
    if isinstance(figure, functools.partial):
        figure, options = figure.func, {**figure.keywords, **options}
    name = figure if isinstance(figure, str) else figure.__name__
    if name not in _GAPS:
        raise ValueError(f"{name!r} always draws or is not a report figure; known: {', '.join(_GAPS)}")
    return _GAPS[name](report, **options)

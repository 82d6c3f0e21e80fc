"""The trend's figure: small multiples, one panel per metric of a series, each run's mean with
its 95% interval in the order the runs started, and the steps marked.

A real step is drawn as a large triangle on the later run, pointing the way the metric moved:
dark red when it got worse, black when it got better. Neither colour is a metric's, so a
metric's own colour never reads as a verdict. A step that is not paired (or not comparable) is
a dashed grey segment, so the eye never joins what the data cannot. The y axis stays within the
metric's range (from the registry) but for a small margin.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from evalbook.metrics import metric as registered
from evalbook.report.figures import new_figure, styled
from evalbook.trend.series import NOT_COMPARABLE, NOT_PAIRED, REAL

WORSE_COLOUR = "#a50021"  # a dark red that no metric of the registry uses
BETTER_COLOUR = "#111111"
MAX_TICKS = 8  # run labels under a panel; more runs than this are labelled every few
PNG_DPI = 110
DENSE = 100  # runs in a series past which a panel draws its intervals as a band


def _value(entry: Any, key: str) -> float:
    value = entry.get(key) if isinstance(entry, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def _panel(ax, series: dict[str, Any], name: str) -> None:
    described = registered(name)
    points = series["points"]
    xs = np.arange(len(points))
    means = np.array([_value(p["metrics"].get(name), "mean") for p in points])
    lows = np.array([_value(p["metrics"].get(name), "low") for p in points])
    highs = np.array([_value(p["metrics"].get(name), "high") for p in points])
    has = ~np.isnan(lows) & ~np.isnan(highs)
    # Past DENSE runs a panel has a pixel or two per run, where error bars would only overlap:
    # each run's interval is then drawn as a band, a step wide, and each mean as a small dot.
    if len(points) > DENSE:
        ax.fill_between(xs, lows, highs, where=has, step="mid", color=described.colour, alpha=0.3,
                        linewidth=0, zorder=1)
        ax.plot(xs, means, "o", color=described.colour, markersize=1.5, zorder=3)
    else:
        ax.errorbar(xs[has], means[has], yerr=[means[has] - lows[has], highs[has] - means[has]], fmt="o",
                    color=described.colour, ecolor=described.colour, elinewidth=1.2, capsize=3, markersize=4,
                    zorder=3)
        ax.plot(xs[~has], means[~has], "o", color=described.colour, markersize=4, zorder=3)
    solid, dashed, marks = [], [], {}
    for position in range(1, len(points)):
        step = points[position]["steps"].get(name) or {}
        segment = [(xs[position - 1], means[position - 1]), (xs[position], means[position])]
        if step.get("status") in (NOT_PAIRED, NOT_COMPARABLE) or not step:
            dashed.append(segment)
            continue
        solid.append(segment)
        if step.get("status") == REAL:
            better = (step["delta"] > 0) == described.higher_is_better
            marker = ("^" if step["delta"] > 0 else "v", BETTER_COLOUR if better else WORSE_COLOUR)
            marks.setdefault(marker, []).append(position)
    # one collection per kind of segment and one call per kind of mark: a panel of 500 runs
    # draws in a few calls, not one per run
    ax.add_collection(LineCollection(dashed, linestyles="--", colors="0.6", linewidths=1, zorder=2))
    ax.add_collection(LineCollection(solid, colors=described.colour, linewidths=1, alpha=0.6, zorder=2))
    for (shape, colour), positions in marks.items():
        ax.plot(xs[positions], means[positions], shape, markersize=10, color=colour, linestyle="none", zorder=4)
    k = next((p.get("k") for p in reversed(points) if p.get("k") is not None), None)
    ax.set_title(described.label_at(k))
    every = max(1, math.ceil(len(points) / MAX_TICKS))
    ax.set_xticks(xs[::every], [f"{p['started_at'][5:16].replace('T', ' ')}\n{p['run_id'][:8]}"
                                 for p in points[::every]], fontsize="x-small")
    ax.set_xlim(-0.5, len(points) - 0.5)
    _within_range(ax, described.value_range)


def _within_range(ax, value_range: tuple[float | None, float | None]) -> None:
    """Keep the y axis inside the metric's range but for a margin of 2% of it (a rate of 1.000
    everywhere would otherwise show an axis up to 1.04)."""
    lowest, highest = value_range
    low, high = ax.get_ylim()
    margin = 0.02 * (highest - lowest) if lowest is not None and highest is not None else 0.0
    if highest is not None and high > highest + margin:
        high = highest + margin
    if lowest is not None and low < lowest - margin:
        low = lowest - margin
    ax.set_ylim(low, high)


@styled
def trend_figure(series: dict[str, Any]) -> Figure | None:
    """The series' panels, two per row; None when it has no metric."""
    names = series["metrics"]
    if not names:
        return None
    columns = min(2, len(names))
    rows = math.ceil(len(names) / columns)
    fig, axes = new_figure(rows, columns, figsize=(4.6 * columns, 2.3 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        _panel(ax, series, name)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    return fig


# The trend page holds a figure per series inline: drawn with at most this many colours (a
# palette PNG), one is about a third of matplotlib's full-colour PNG and looks the same, since a
# figure has a few line colours, greys and their anti-aliased edges.
PALETTE_COLOURS = 32


def png_bytes(fig: Figure) -> bytes:
    """The figure as a palette PNG of PALETTE_COLOURS colours (Pillow's median cut)."""
    # slow to import: only a trend page with a figure needs Pillow
    from PIL import Image

    drawn = io.BytesIO()
    fig.savefig(drawn, format="png", dpi=PNG_DPI)
    image = Image.open(io.BytesIO(drawn.getvalue())).convert("RGB")
    buffer = io.BytesIO()
    image.quantize(colors=PALETTE_COLOURS, method=Image.Quantize.MEDIANCUT).save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()

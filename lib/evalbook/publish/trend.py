"""The trend page, `<outputs_root>/trend.html`, and its document, `trend.json`.

evalbook.trend.document builds the document; this module draws each series' figure, turns the
document into plain values for the template trend_page.html (which writes every tag and escapes
every value), and writes both files at the local outputs root. The page needs no script and
fetches nothing: its figures are embedded PNGs.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from evalbook.files import write_atomically
from evalbook.layout import REPORT_STAGE, TREND_FILE, TREND_PAGE
from evalbook.metrics import metric as registered
from evalbook.publish.pages import noinput_path
from evalbook.storage import is_remote
from evalbook.trend.document import build_trend, read_previous, step_direction, step_words, write_trend
from evalbook.trend.figures import png_bytes, trend_figure
from evalbook.trend.series import JUDGE, NOISE, REAL, StepSettings
from evalbook.templating import render


def _href(page_dir: Path, point: dict[str, Any]) -> str | None:
    """The run's report page relative to the trend page, when it is on this machine."""
    if is_remote(point["folder"]):
        return None
    page = noinput_path(Path(point["folder"]) / f"{REPORT_STAGE}.ipynb")
    try:
        return "/".join(quote(part) for part in page.relative_to(page_dir).parts) if page.is_file() else None
    except ValueError:
        return None


def _pins(series: dict[str, Any]) -> str:
    pins = series["pins"]
    models = dict.fromkeys(value for key, value in pins.items() if key.startswith("models."))
    layer = pins.get("provenance.bertscore_num_layers")
    return " · ".join([*models, *([f"layer {layer}"] if layer is not None else []), f"{series['backend']}"])


def _cells(point: dict[str, Any], names: list[str]) -> list[dict[str, Any]]:
    """A point's metrics: each mean, interval and the step to it, labelled with the run's k."""
    cells = []
    for name in names:
        shown, step = point["metrics"].get(name) or {}, point["steps"].get(name) or {}
        cells.append({"label": registered(name).label_at(point.get("k")), "mean": shown.get("mean"),
                      "low": shown.get("low"), "high": shown.get("high"), "shade": step_direction(name, step),
                      "step": step_words(name, step), "delta": step.get("delta"), "step_low": step.get("low"),
                      "step_high": step.get("high"), "n": step.get("n")})
    return cells


def _point_view(point: dict[str, Any], names: list[str], page_dir: Path) -> dict[str, Any]:
    return {"started": point["started_at"][:16].replace("T", " "), "run_id": point["run_id"][:8],
            "href": _href(page_dir, point), "n": point.get("n_examples"), "cells": _cells(point, names),
            "changed": point["changed"]}


def _series_view(series: dict[str, Any], page_dir: Path, png: bytes | None) -> dict[str, Any]:
    """What trend_page.html shows of one series: its latest run first, the figure, the real
    steps (one line per run, newest first) and every run, newest first."""
    names = series["metrics"]
    k = next((p["k"] for p in reversed(series["points"]) if p.get("k") is not None), None)
    title = f"{series['dataset']} · {series['split']}" + (" · judge metrics" if series["kind"] == JUDGE else "")
    points = [_point_view(point, names, page_dir) for point in series["points"]]
    real_steps = [{**point, "moved": [cell for cell in point["cells"] if cell["shade"]]}
                  for point in points if any(cell["shade"] for cell in point["cells"])]
    return {"title": title, "pins": _pins(series), "judge": series["judge_label"], "n_runs": series["n_runs"],
            "png": base64.b64encode(png).decode("ascii") if png else None,
            "headers": [registered(name).label_at(k) for name in names], "latest": points[-1],
            "real_steps": real_steps[::-1], "points": points[::-1]}


def render_trend(document: dict[str, Any], page_dir: Path) -> str:
    """The trend page for `document` (trend-v1), with links relative to `page_dir`."""
    views = []
    for series in document["series"]:
        figure = trend_figure(series)
        views.append(_series_view(series, page_dir, png_bytes(figure) if figure is not None else None))
    base = _shared_folder([point["href"] for view in views for point in view["points"] if point["href"]])
    for view in views:  # each link written from the page's <base>: a fifth of a row at 500 runs
        for point in view["points"]:
            if point["href"]:
                point["href"] = point["href"][len(base):]
    filters = ", ".join(f"{key} {value}" for key, value in document["filters"].items() if value is not None)
    settings = document["settings"]
    return render("trend_page.html", series=views, n_runs=document["n_runs_read"], filters=filters,
                  left_out=sorted(document["left_out"].items()), created_at=document["created_at"][:16].replace("T", " "),
                  n_real=sum(s["n_real_steps"] for s in document["series"]), n_judged=_judged(document),
                  confidence=settings["confidence"], min_paired=settings["min_paired"], NOISE=NOISE,
                  base=base)


def _shared_folder(hrefs: list[str]) -> str:
    """The folder (ending in /) every relative link starts with, or "" when they share none."""
    shared = os.path.commonprefix(hrefs) if hrefs else ""
    return shared[:shared.rfind("/") + 1]


def _judged(document: dict[str, Any]) -> int:
    """How many metric steps were judged real or within noise (paired and comparable)."""
    return sum(step.get("status") in (REAL, NOISE) for series in document["series"]
               for point in series["points"] for step in point["steps"].values())


def build_trend_page(outputs_root: str | Path, page_dir: Path, *, dataset: str | None = None,
                     since: str | None = None, settings: StepSettings = StepSettings()) -> tuple[Path, Path]:
    """Build the trend of the runs under `outputs_root` (local, or s3://) and write trend.json and
    trend.html into the local folder `page_dir`, replacing the earlier ones; their paths."""
    page_dir = Path(page_dir)
    json_path = page_dir / TREND_FILE
    document = build_trend(outputs_root, dataset=dataset, since=since, settings=settings,
                           previous=read_previous(json_path))
    page = render_trend(document, page_dir)
    write_trend(document, json_path)
    html_path = page_dir / TREND_PAGE
    write_atomically(html_path, page.encode("utf-8"), overwrite=True)
    return html_path, json_path

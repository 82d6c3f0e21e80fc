"""The trend page (evalbook.publish.trend) of two real runs, in offline Chromium.

The runs are the session's sample runs: the sample, then the same questions with the answers
truncated, one override (predictions_path) apart. Truncation is a real step down in BERTScore F1
and sentence cosine. The trend is built beside a copy of their outputs root, where `make trend`
writes it, so that its links to the runs' reports are the ones a reader follows.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from browser import inspect_offline, offline_browser
from evalbook.layout import TREND_FILE
from evalbook.publish.trend import build_trend_page

SCREEN = {"width": 1280, "height": 800}
STEPPED_DOWN = ("BERTScore F1", "sentence cosine")  # the headline metrics truncation lowers

# Where the first figure sits on the screen, whether it loaded, and each real step of the list.
_LAYOUT = """() => {
    const figure = document.querySelector("img.trend");
    const box = figure && figure.getBoundingClientRect();
    return {
        figure: figure && {top: box.top, bottom: box.bottom, width: box.width, height: box.height,
                           complete: figure.complete, naturalWidth: figure.naturalWidth},
        real_steps: Array.from(document.querySelectorAll("section.series li > span"), (span) => ({
            shade: span.className, metric: span.innerText, text: span.closest("li").innerText})),
    };
}"""


@pytest.fixture(scope="module")
def trend_page(sample_runs, tmp_path_factory) -> Path:
    # Other tests read the session's outputs root: the trend is written into a copy of it.
    root = tmp_path_factory.mktemp("trend") / "outputs"
    shutil.copytree(sample_runs.outputs, root)
    page, document = build_trend_page(root, root)
    assert (page.parent, document.name) == (root, TREND_FILE)
    return page


def on_screen(page_path: Path, browser: Any) -> tuple[dict[str, Any], Any]:
    """The page's layout on a SCREEN-sized window, offline."""
    context = browser.new_context(offline=True, viewport=SCREEN)
    try:
        page = context.new_page()
        page.goto(page_path.resolve().as_uri(), wait_until="load")
        figure = page.locator("img.trend").first
        return page.evaluate(_LAYOUT), figure.is_visible()
    finally:
        context.close()


def test_the_trend_page_opens_offline_with_its_figure_on_the_first_screen(trend_page, sample_runs):
    with offline_browser() as browser:
        seen = inspect_offline(trend_page, browser)
        layout, figure_visible = on_screen(trend_page, browser)
    assert seen["non_local_requests"] == [], seen["non_local_requests"]
    assert seen["console_errors"] == [], seen["console_errors"]
    assert seen["images"] and all(image["src"].startswith("data:image/png") for image in seen["images"])
    figure = layout["figure"]
    assert figure is not None, "no figure on the trend page"
    assert figure["complete"] and figure["naturalWidth"] > 0, figure
    assert figure_visible and figure["height"] > 0, figure
    assert 0 <= figure["top"] < SCREEN["height"], figure
    # Both runs are in it, the later a real step down from the earlier in each stepped metric,
    # and the step names the override that made it.
    for run in (sample_runs.baseline, sample_runs.candidate):
        assert run.run_id[:8] in seen["text"]
    assert len(layout["real_steps"]) == len(STEPPED_DOWN), layout["real_steps"]
    for label in STEPPED_DOWN:
        (step,) = [s for s in layout["real_steps"] if s["metric"].startswith(f"{label} ")]
        assert step["shade"] == "worse", step
        assert re.match(rf"{label} worse: -\d\.\d{{3}} ", step["metric"]), step
        assert step["text"].startswith(f"To run {sample_runs.candidate.run_id[:8]} "), step
        assert "-p predictions_path:" in step["text"] and "predictions-truncated.jsonl" in step["text"], step


def test_the_trend_page_links_each_run_to_its_report(trend_page, sample_runs):
    text = trend_page.read_text("utf-8")
    # the links are written from the page's <base>, the folder they share, as a browser reads them
    base = re.findall(r'<base href="([^"]*)">', text)
    hrefs = [unquote(html.unescape(href)) for href in re.findall(r'<a href="([^"]*)"', text)]
    targets = [trend_page.parent / unquote(html.unescape(base[0] if base else "")) / href for href in hrefs]
    assert len(targets) == 2 and all(target.is_file() for target in targets), targets
    for run in (sample_runs.baseline, sample_runs.candidate):
        assert any(run.run_id in href and href.endswith("04_report.noinput.html") for href in hrefs), hrefs

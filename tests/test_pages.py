"""Rendered notebook pages open complete with no network: lib/evalbook/publish/pages.py."""

import json
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from matplotlib import image as mpimg
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

import hostile
from browser import inspect_offline
from evalbook.publish.pages import external_references, noinput_path, render_html

PLOT_SOURCE = """%matplotlib inline
import matplotlib.pyplot as plt
figure, axes = plt.subplots(figsize=(3, 2))
axes.plot([0, 1, 2], [0, 1, 4])
plt.show()"""
PRINT_SOURCE = 'print("printed " + "by the kernel")'
# Each of these would make nbconvert's lab template load a script from a CDN.
MARKDOWN = """# Offline page

Inline math $e^{i\\pi} + 1 = 0$ and display math:

$$\\int_0^1 x\\,dx = \\frac{1}{2}$$

![a small square](square.png)

```mermaid
graph TD; A-->B
```
"""
WIDGET_STATE = {"application/vnd.jupyter.widget-state+json": {
    "state": {}, "version_major": 2, "version_minor": 0}}
WIDGET_STATE_TAG = '<script type="application/vnd.jupyter.widget-state+json">'
CDN_HOSTS = ("cdnjs.cloudflare.com", "unpkg.com", "cdn.jsdelivr.net")


@pytest.fixture(scope="module")
def executed_notebook(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("notebook")
    square = np.zeros((12, 16, 3))
    square[:, :, 2] = 1.0
    mpimg.imsave(folder / "square.png", square)
    notebook = new_notebook(cells=[new_markdown_cell(MARKDOWN), new_code_cell(PLOT_SOURCE),
                                   new_code_cell(PRINT_SOURCE)])
    notebook.metadata["widgets"] = WIDGET_STATE
    NotebookClient(notebook, kernel_name="python3", timeout=120,
                   resources={"metadata": {"path": str(folder)}}).execute()
    path = folder / "offline.ipynb"
    nbformat.write(notebook, path)
    return path


@pytest.fixture(scope="module")
def pages(executed_notebook) -> dict[str, Path]:
    return {"full": render_html(executed_notebook, title="Offline <test>"),
            "noinput": render_html(executed_notebook, exclude_input=True)}


@pytest.mark.slow  # a notebook kernel
def test_pages_are_written_where_the_convention_says(executed_notebook, pages):
    assert pages["full"] == executed_notebook.with_suffix(".html")
    assert pages["noinput"] == executed_notebook.with_name("offline.noinput.html")
    assert noinput_path(Path("run/04_report.ipynb")) == Path("run/04_report.noinput.html")


def test_pages_reference_nothing_on_the_network(pages):
    for page in pages.values():
        text = page.read_text("utf-8")
        assert external_references(text) == []
        # Scripts that build a CDN URL at run time are invisible to external_references.
        assert not [host for host in CDN_HOSTS if host in text]
        # The only script left is the widget state, JSON data that nothing runs.
        assert set(re.findall(r"<script[^>]*>", text)) <= {WIDGET_STATE_TAG}


def test_markdown_and_outputs_survive_and_math_stays_as_tex(pages):
    for page in pages.values():
        text = page.read_text("utf-8")
        assert "Offline page" in text
        assert "e^{i\\pi} + 1 = 0" in text
        assert "printed by the kernel" in text
        assert text.count('src="data:image/png;base64,') == 2


def test_title_is_escaped(pages):
    assert "<title>Offline &lt;test&gt;</title>" in pages["full"].read_text("utf-8")


def test_noinput_page_has_no_code_input(pages):
    full, noinput = (pages[name].read_text("utf-8") for name in ("full", "noinput"))
    # Pygments splits code into spans; these pieces occur only in the code input.
    for marker in ("figsize", '"by the kernel"', "In\xa0["):
        assert marker in full
        assert marker not in noinput
    assert 'class="jp-CodeMirrorEditor' in full
    assert 'class="jp-CodeMirrorEditor' not in noinput


@pytest.mark.slow  # headless Chromium
def test_pages_load_completely_in_offline_chromium(pages, browser):
    for page in pages.values():
        seen = inspect_offline(page, browser)
        assert seen["non_local_requests"] == []
        assert seen["requests"] == [page.resolve().as_uri()]
        assert len(seen["images"]) >= 2
        for image in seen["images"]:
            assert image["src"].startswith("data:image/png;base64,")
            assert image["complete"] and image["naturalWidth"] > 0 and image["naturalHeight"] > 0
        assert seen["console_errors"] == []


def test_the_browser_check_sees_a_page_that_phones_home(tmp_path, browser):
    page = tmp_path / "phones-home.html"
    page.write_text('<img src="https://example.invalid/pixel.png">'
                    '<script>fetch("https://example.invalid/beacon")</script>')
    seen = inspect_offline(page, browser)
    assert sorted(seen["non_local_requests"]) == ["https://example.invalid/beacon",
                                                  "https://example.invalid/pixel.png"]
    assert seen["images"][0]["naturalWidth"] == 0


def test_the_browser_check_sees_dialogs_and_elements_that_run_script(tmp_path, browser):
    page = tmp_path / "injected.html"
    page.write_text(f"<div>{hostile.DETAILS}</details></div><div>{hostile.SVG}</svg></div>{hostile.SCRIPT}"
                    f'<a href="javascript:alert(5)">x</a>', "utf-8")
    seen = inspect_offline(page, browser)
    assert sorted(seen["dialogs"]) == ["1", "3", "4"]
    active = seen["active"]
    assert len(active["handlers"]) == 2 and len(active["javascript_urls"]) == 1
    assert active["scripts"] == [{"type": "", "text": "alert(1)"}]
    assert len(active["details"]) == 1 and len(active["svgs"]) == 1
    assert "alert(1)" in seen["text"] and hostile.SCRIPT not in seen["text"]


def test_render_html_refuses_to_overwrite(executed_notebook, pages):
    before = pages["full"].read_bytes()
    with pytest.raises(FileExistsError, match="write-once"):
        render_html(executed_notebook)
    with pytest.raises(FileExistsError):
        render_html(executed_notebook, exclude_input=True)
    assert pages["full"].read_bytes() == before


def _notebook_with_html_output(tmp_path: Path, markup: str) -> Path:
    cell = new_code_cell("show()", outputs=[new_output("display_data", data={"text/html": markup})])
    path = tmp_path / "outputs.ipynb"
    nbformat.write(new_notebook(cells=[cell]), path)
    return path


def test_render_html_refuses_a_page_that_would_fetch(tmp_path):
    notebook = _notebook_with_html_output(
        tmp_path, '<script src="https://cdn.plot.ly/plotly.min.js"></script>')
    with pytest.raises(ValueError, match="cdn.plot.ly"):
        render_html(notebook)
    assert not notebook.with_suffix(".html").exists()


def test_render_html_refuses_a_markdown_image_it_cannot_embed(tmp_path):
    notebook = tmp_path / "missing.ipynb"
    nbformat.write(new_notebook(cells=[new_markdown_cell("![gone](missing.png)")]), notebook)
    with pytest.raises(ValueError, match="missing.png"):
        render_html(notebook)
    assert not notebook.with_suffix(".html").exists()


def test_markdown_images_can_come_from_another_folder(tmp_path):
    sources = tmp_path / "notebooks"
    sources.mkdir()
    mpimg.imsave(sources / "dot.png", np.ones((4, 4, 3)))
    executed = tmp_path / "run" / "stage.ipynb"
    executed.parent.mkdir()
    nbformat.write(new_notebook(cells=[new_markdown_cell("![dot](dot.png)")]), executed)
    page = render_html(executed, image_dir=sources).read_text("utf-8")
    assert 'src="data:image/png;base64,' in page


def test_external_references_finds_every_kind_of_fetch():
    page = """<!DOCTYPE html><html><head>
    <script src="https://cdn.example/lib.js"></script>
    <link rel="stylesheet" href="http://fonts.example/style.css">
    <link rel="icon" href="//icons.example/favicon.ico">
    <style>
      @import "https://css.example/imported.css";
      @import url('https://css.example/imported-url.css');
      body { background: url(https://img.example/background.png); }
      .local { background: url(data:image/png;base64,AAAA); }
      /* url(https://comment.example/not-loaded.png) */
    </style></head><body>
    <img src="https://img.example/picture.png" srcset="//img.example/small.png 1x, local.png 2x">
    <iframe src="https://frame.example/"></iframe>
    <video poster="https://img.example/poster.png"><source src="https://media.example/clip.mp4"></video>
    <div style="background-image: url('//img.example/inline.png')"></div>
    <svg><image href="https://img.example/in-svg.png"/><use xlink:href="#local-glyph"/></svg>
    <a href="https://docs.example/read-more">a link is not a fetch</a>
    <img src="data:image/png;base64,AAAA"><img src="figure.png"><img src="file:///tmp/x.png">
    <script src="&#104;ttps://entity.example/encoded.js"></script>
    </body></html>"""
    assert external_references(page) == [
        "https://cdn.example/lib.js",
        "http://fonts.example/style.css",
        "//icons.example/favicon.ico",
        "https://css.example/imported.css",
        "https://css.example/imported-url.css",
        "https://img.example/background.png",
        "https://img.example/picture.png",
        "//img.example/small.png",
        "https://frame.example/",
        "https://img.example/poster.png",
        "https://media.example/clip.mp4",
        "//img.example/inline.png",
        "https://img.example/in-svg.png",
        "https://entity.example/encoded.js",
    ]


def test_external_references_of_a_page_without_any_is_empty():
    assert external_references('<p><a href="https://example.org">only a link</a></p>') == []


def test_the_stock_lab_template_would_phone_home_for_this_notebook(executed_notebook):
    """The fixture exercises every CDN block that render_html's template removes."""
    from nbconvert import HTMLExporter

    stock, _ = HTMLExporter().from_notebook_node(nbformat.read(executed_notebook, as_version=4))
    fetched = " ".join(external_references(stock))
    assert "require.min.js" in fetched and "mathjax" in fetched
    assert "unpkg.com" in stock and "mermaid.esm.min.mjs" in stock


def test_no_control_character_reaches_a_page_raw(tmp_path):
    # What escape_html does not see: a DataFrame's own HTML, plain text and printed output.
    raw = f"{hostile.SCRIPT}{hostile.CONTROLS}"
    frame_html = f"<table><tr><td>{raw.replace('<', '&lt;')}</td></tr></table>"
    cell = new_code_cell("show()", outputs=[
        new_output("display_data", data={"text/html": frame_html}),
        new_output("execute_result", data={"text/plain": raw}, execution_count=1),
        new_output("stream", name="stdout", text=raw + "\n")])
    notebook = tmp_path / "controls.ipynb"
    nbformat.write(new_notebook(cells=[new_markdown_cell(f"# A title{hostile.CONTROLS}"), cell]), notebook)
    for page in (render_html(notebook), render_html(notebook, exclude_input=True)):
        text = page.read_text("utf-8")
        assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", text), page
        assert text.count(hostile.VISIBLE_CONTROLS) == 4, page
        assert hostile.payload_elements(text) == []


def test_the_no_code_report_of_a_run_without_a_judge_server_shows_no_exception_text(sample_runs):
    """The sample runs point the judge at a closed port: the report JSON keeps the whole reason,
    the no-code page's banner, headline and figure captions give it without the exception."""
    run_dir = sample_runs.baseline.run_dir
    report = json.loads(sample_runs.baseline.report_path.read_text("utf-8"))
    assert "ConnectError" in report["judge_summary"]["reason"]
    page = noinput_path(run_dir / "04_report.ipynb").read_text("utf-8")
    assert "vs relevance (the judge did not run: no judge server reachable" in page  # Figures' not drawn
    for raw in ("ConnectError", "Errno", "Connection refused"):
        assert raw not in page, raw

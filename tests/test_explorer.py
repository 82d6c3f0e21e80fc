"""The explorer of every example (evalbook.report.explorer): its frame, its HTML, and the table in a
real browser, offline, with hostile text, at 32 and at 12,000 rows."""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import re
import socket
import string
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import nbformat
import pytest

import hostile
from browser import inspect_offline, is_local
from evalbook.escaping import escape_html, visible_controls
from evalbook.publish.pages import render_html
from evalbook.report.explorer import explorer_frame, explorer_html
from local_servers import free_port
from test_report import judge_outcome, make_report

ROOT = Path(__file__).resolve().parents[1]
REPORT_NOTEBOOK = ROOT / "notebooks" / "04_report.ipynb"
HOSTILE = " ".join(hostile.PAYLOADS) + " " + hostile.CONTROLS
SHOWN = visible_controls(HOSTILE)
PAGE_LIMIT = 15_000_000  # bytes: issue 49's limit for a page at 12,000 rows


def with_checks_and_slices(report: dict) -> dict:
    """The built report with a fact check and a user check on every example, and two slices."""
    for n, example in enumerate(report["examples"]):
        failed = n in (1, 3)
        example["checks"] = [
            {"check": "facts", "status": "fail" if failed else "pass",
             "reason": f"the answer says {n + 7} where the reference says {n}" if failed else "no fact differs"},
            {"check": "mentions-refund", "status": "error" if n == 4 else "pass",
             "reason": "the pattern did not compile" if n == 4 else "the answer contains refund"},
        ]
        example["slices"] = {"domain": example["metadata"]["domain"] or "(missing)",
                             "question length": "short" if n < 3 else "long"}
    report["checks_summary"] = {"n_examples": 5, "n_examples_failing": 2, "n_examples_with_errors": 1,
                                "checks": {}}
    return report


@pytest.fixture
def report() -> dict:
    return with_checks_and_slices(make_report(judge=judge_outcome()))


# ---------------------------------------------------------------- the frame

def test_the_frame_has_one_row_per_example_and_a_column_for_every_value(report):
    frame = explorer_frame(report)
    assert frame["id"].tolist() == ["e1", "e2", "e3", "e4", "e5"]
    assert list(frame.columns) == [
        "id", "question", "answer", "reference",
        "BERTScore F1", "BERTScore precision", "BERTScore recall", "sentence cosine",
        "top-5 match", "MRR@5", "precision@5", "recall@5", "nDCG@5", "retrieval rank",
        "groundedness", "relevance", "criteria", "context relevance", "context precision", "context recall",
        "failed checks", "facts check", "mentions-refund check",
        "domain", "question length", "source"]
    first = frame.iloc[0]
    assert (first["question"], first["answer"], first["reference"]) == ("q1", "g1", "r1")
    assert first["BERTScore F1"] == pytest.approx(0.2) and first["sentence cosine"] == pytest.approx(1.0)
    assert first["top-5 match"] == "yes" and first["retrieval rank"] == 1
    assert first["groundedness"] == pytest.approx(0.0) and first["failed checks"] is None
    assert first["facts check"] == "pass" and first["source"] == "sysA"
    second = frame.iloc[1]
    assert second["failed checks"] == "facts" and second["retrieval rank"] == 3
    last = frame.iloc[4]
    assert last["answer"] is None and last["BERTScore F1"] is None and last["top-5 match"] is None
    assert last["groundedness"] is None, "e5 was not sampled by the judge"
    assert last["mentions-refund check"] == "error" and last["domain"] == "council"


def test_a_column_no_example_has_a_value_for_is_left_out():
    frame = explorer_frame(make_report())
    assert "groundedness" not in frame.columns and "failed checks" not in frame.columns
    assert "domain" in frame.columns, "metadata is shown where the report has no slices"
    assert frame["domain"].tolist() == ["bank", "bank", "council", None, "council"]


# ---------------------------------------------------------------- the HTML

PACKED = re.compile(r'decoded\("([A-Za-z0-9+/=]+)"\)\.stream\(\)')


def unpacked_rows(page: str) -> str:
    """The rows' JSON the page carries gzipped and base64."""
    (packed,) = PACKED.findall(page)
    return gzip.decompress(base64.b64decode(packed)).decode("utf-8")


def test_the_html_holds_every_row_and_each_record_with_reasons_and_the_judge_s_words(report):
    page = explorer_html(report)
    rows = unpacked_rows(page)
    assert len(json.loads(rows)) == 5
    for text in ("q1", "g4", "r5", "the answer says 8 where the reference says 1", "the pattern did not compile",
                 "groundedness 0.250"):
        assert text in rows, text
    assert "mentions-refund check" in page and "question length" in page, "the columns' names"


def hostile_report() -> dict:
    report = with_checks_and_slices(make_report(judge=judge_outcome()))
    for example in report["examples"]:
        example["id"] = f"{example['id']} {HOSTILE}"
        example["question"] = f"question {HOSTILE}"
        example["generated_answer"] = f"answer {HOSTILE}"
        example["reference_answer"] = f"reference {HOSTILE}"
        example["metadata"] = {f"topic {HOSTILE}": f"level {HOSTILE}"}
        example["slices"] = {f"slice {HOSTILE}": f"level {HOSTILE}"}
        for outcome in example["checks"]:
            outcome["reason"] = f"reason {HOSTILE}"
        entry = (example["judge"] or {}).get("groundedness")
        if entry:
            entry["statements"] = [{"statement": f"statement {HOSTILE}", "verdict": 0,
                                    "justification": f"why {HOSTILE}"}]
    report["examples"][0]["checks"][0]["check"] = f"check {HOSTILE}"
    return report


SCRIPT = re.compile(r"<script[^>]*>(.*?)</script>", re.DOTALL)


def test_hostile_text_reaches_no_script_and_makes_no_element():
    page = explorer_html(hostile_report())
    scripts = SCRIPT.findall(page)
    assert scripts and not [script for script in scripts if "alert(" in script], \
        "no user text inside a script: the rows are HTML, escaped by the templates, and packed"
    markup = SCRIPT.sub("", page)
    assert hostile.payload_elements(markup) == []
    assert hostile.VISIBLE_CONTROLS in markup and hostile.CONTROLS not in markup, "the columns' names"
    rows = json.loads(unpacked_rows(page))
    cells = [cell for row in rows for cell in row[:-1]] + [line for row in rows for line in row[-1]]
    assert [cell for cell in cells if hostile.payload_elements(cell) or hostile.CONTROLS in cell] == []
    assert f"question {escape_html(HOSTILE)}" in cells and f"{escape_html(SHOWN)}" in cells[0]
    assert any(line.startswith(f"check {escape_html(SHOWN)}: pass, reason ") for line in cells)


def test_a_report_without_examples_says_so_in_one_sentence():
    report = make_report()
    report["examples"] = []
    page = explorer_html(report)
    assert "<table" not in page and "No example" in page


# ---------------------------------------------------------------- in a browser

def page_of(html: str, folder: Path, exclude_input: bool = False) -> Path:
    """`html` as the output of one code cell, exported by the pipeline's own nbconvert export."""
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("display(HTML(explorer_html(report)))")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": html})]
    notebook.cells = [nbformat.v4.new_markdown_cell("## Every example"), cell]
    path = folder / "explorer.ipynb"
    nbformat.write(notebook, path)
    return render_html(path, exclude_input=exclude_input)


def sentence(rng: random.Random, n_words: int) -> str:
    """Words of random letters: text that compresses worse than English (gzip: about 1.9 times
    smaller, rag-dataset-12000's texts 2.5), so that the page's size is not understated."""
    words = ("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(n_words))
    return " ".join(words).capitalize() + "."


def wide_report(n: int) -> dict:
    """A report of `n` examples at rag-dataset-12000's lengths (questions about 80 characters,
    answers and references about 250), each with a fact check, a score, retrieval and 3 slices."""
    report = with_checks_and_slices(make_report())
    template = report["examples"][0]
    rng = random.Random(49)
    examples = []
    for i in range(n):
        example = json.loads(json.dumps(template))
        example["id"] = f"ex-{i:05d}"
        example["question"] = sentence(rng, 12)[:-1] + "?"
        example["reference_answer"] = sentence(rng, 38)
        example["generated_answer"] = sentence(rng, 38)
        example["answer_similarity"] = {"bertscore": {name: rng.random() for name in ("precision", "recall", "f1")},
                                        "sentence_cosine": rng.uniform(-1, 1)}
        rank = rng.choice([1, 2, 3, None])
        example["retrieval"] = {"top_k_match": rank is not None, "mrr_at_k": 1 / rank if rank else 0.0,
                                "precision_at_k": 0.2 if rank else 0.0, "recall_at_k": 1.0 if rank else 0.0,
                                "ndcg_at_k": 1.0 / rank if rank else 0.0, "rank": rank}
        failed = rng.random() < 0.2
        example["checks"] = [{"check": "facts", "status": "fail" if failed else "pass",
                              "reason": (f"the answer says {i % 97} where the reference says {i % 89 + 100}"
                                         if failed else "the reference holds the answer's 2 facts")}]
        example["metadata"] = {"domain": rng.choice(["bank", "council", "telecom"])}
        example["slices"] = {"domain": example["metadata"]["domain"], "question length": rng.choice(
            ["(0, 12] words", "(12, 16] words", "(16, 40] words"]), "retrieval at k = 5": "hit" if rank else "miss"}
        examples.append(example)
    report["examples"] = examples
    return report


OPENED = "() => document.querySelector('.dt-container') !== null"
INFO = "() => document.querySelector('.dt-info').textContent"
FIRST_ROW = "() => Array.from(document.querySelectorAll('table.dataTable tbody tr:first-child td'), td => td.textContent)"


def open_offline(browser, page_path: Path):
    """A page in a new offline context that aborts (and records) every request leaving the machine."""
    context = browser.new_context(offline=True, service_workers="block", viewport={"width": 1400, "height": 900})
    left: list[str] = []
    dialogs: list[str] = []

    def only_local(route):
        if is_local(route.request.url):
            route.continue_()
        else:
            left.append(route.request.url)
            route.abort()

    context.route("**/*", only_local)
    page = context.new_page()
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    started = time.perf_counter()
    page.goto(page_path.resolve().as_uri(), wait_until="load")
    page.wait_for_function(OPENED, timeout=60_000)
    loaded = time.perf_counter() - started
    return context, page, {"left": left, "dialogs": dialogs, "errors": errors, "load_s": loaded}


def column_index(page, title: str) -> int:
    titles = page.evaluate("() => Array.from(document.querySelectorAll('.dt-scroll-head thead th'), "
                           "th => th.querySelector('.dt-column-title').textContent)")
    return titles.index(title)


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def explore(page, report: dict) -> dict:
    """Search, filter one column, sort by BERTScore F1 both ways, open a record: the seconds each took."""
    n_rows = len(report["examples"])
    scores = [example["answer_similarity"]["bertscore"]["f1"] for example in report["examples"]]
    assert page.evaluate(INFO) == f"Showing 1 to 10 of {n_rows:,} examples"
    figures = {}
    search = page.locator(".dt-search input")
    figures["search_s"] = timed(lambda: (search.fill("ex-00017"), page.wait_for_function(
        "() => document.querySelector('.dt-info').textContent.includes('filtered')")))
    assert page.evaluate(INFO) == f"Showing 1 to 1 of 1 example (filtered from {n_rows:,} total examples)"
    search.fill("")
    page.wait_for_function(f"() => document.querySelector('.dt-info').textContent === 'Showing 1 to 10 of {n_rows:,} examples'")
    facts = page.locator(".dt-scroll-foot input[placeholder='facts check']")
    figures["filter_s"] = timed(lambda: (facts.fill("fail"), page.wait_for_function(
        "() => document.querySelector('.dt-info').textContent.includes('filtered')")))
    n_failing = int(page.evaluate(INFO).split(" of ")[1].split(" ")[0].replace(",", ""))
    assert 0 < n_failing < n_rows
    facts.fill("")
    page.wait_for_function(f"() => !document.querySelector('.dt-info').textContent.includes('filtered')")
    f1 = column_index(page, "BERTScore F1")
    header = page.locator(".dt-scroll-head thead th").nth(f1)
    figures["sort_s"] = timed(lambda: (header.click(), page.wait_for_function(
        f"() => document.querySelectorAll('.dt-scroll-head thead th')[{f1}].classList.contains('dt-ordering-asc')")))
    assert page.evaluate(FIRST_ROW)[f1] == f"{min(scores):.3f}"
    header.click()
    page.wait_for_function(
        f"() => document.querySelectorAll('.dt-scroll-head thead th')[{f1}].classList.contains('dt-ordering-desc')")
    assert page.evaluate(FIRST_ROW)[f1] == f"{max(scores):.3f}"
    page.locator("table.dataTable tbody tr:first-child td").first.click()
    page.wait_for_selector("table.dataTable tbody tr:first-child + tr .evalbook-record")
    return figures


@pytest.mark.parametrize("exclude_input", [False, True], ids=["04_report.html", "04_report.noinput.html"])
def test_the_explorer_searches_filters_sorts_and_opens_a_record_offline(browser, tmp_path, exclude_input):
    report = wide_report(32)
    path = page_of(explorer_html(report), tmp_path, exclude_input)
    context, page, seen = open_offline(browser, path)
    try:
        explore(page, report)
    finally:
        context.close()
    assert seen["left"] == [] and seen["dialogs"] == [] and seen["errors"] == []


def test_hostile_text_shows_as_text_in_the_browser_and_runs_nothing(browser, tmp_path):
    path = page_of(explorer_html(hostile_report()), tmp_path)
    seen = inspect_offline(path, browser)
    assert seen["dialogs"] == [] and seen["non_local_requests"] == [] and seen["console_errors"] == []
    active = seen["active"]
    assert active["handlers"] == [] and active["javascript_urls"] == [] and active["details"] == []
    assert active["svgs"] == [] and not [s for s in active["scripts"] if "alert(" in s["text"]]
    context, page, opened = open_offline(browser, path)
    try:
        assert f"question {SHOWN}" in page.inner_text(".dt-container")
        page.locator("table.dataTable tbody tr:first-child td").first.click()
        record = page.locator(".evalbook-record").first
        record.wait_for()
        assert f"reason {SHOWN}" in record.inner_text() and f"why {SHOWN}" in record.inner_text()
        assert page.evaluate("() => document.querySelectorAll('img, svg, details, [onerror], [onload]').length") == 0
    finally:
        context.close()
    assert opened["dialogs"] == [] and opened["errors"] == []


@pytest.mark.parametrize("n_rows", [32, 12_000])
def test_the_explorer_s_page_size_and_speed(browser, tmp_path, n_rows):
    """The figures in docs/performance.md: the page's size, the seconds to open it and to search,
    filter, sort and open a record in Chromium."""
    started = time.perf_counter()
    report = wide_report(n_rows)
    html = explorer_html(report)
    rendered_s = time.perf_counter() - started
    path = page_of(html, tmp_path, exclude_input=True)
    size = path.stat().st_size
    context, page, seen = open_offline(browser, path)
    try:
        figures = explore(page, report)
    finally:
        context.close()
    print(json.dumps({"rows": n_rows, "page_MB": round(size / 1e6, 2), "render_s": round(rendered_s, 2),
                      "load_s": round(seen["load_s"], 2), **{k: round(v, 3) for k, v in figures.items()}}))
    assert size < PAGE_LIMIT * 0.8, "the explorer leaves a fifth of the page's limit to the rest of the report"
    assert seen["left"] == [] and seen["errors"] == []
    assert figures["search_s"] < 3 and figures["sort_s"] < 3 and figures["filter_s"] < 3


# ---------------------------------------------------------------- in the notebook

def test_the_report_notebook_shows_the_explorer_right_after_the_checks():
    cells = json.loads(REPORT_NOTEBOOK.read_text("utf-8"))["cells"]
    ids = [cell["id"] for cell in cells]
    checks = ids.index("04-report-checks")
    assert ids[checks + 1:checks + 3] == ["04-report-explorer-intro", "04-report-explorer"]
    intro, code = cells[checks + 1], cells[checks + 2]
    assert "".join(intro["source"]).startswith("## Every example")
    assert "explorer_html(report)" in "".join(code["source"])
    assert code["outputs"] == [] and code["execution_count"] is None


# ---------------------------------------------------------------- in JupyterLab

@contextmanager
def jupyterlab(folder: Path) -> Iterator[tuple[str, dict]]:
    """A JupyterLab server on `folder`, offline (no extension manager, no news), with its own data
    folder; yields the URL of a notebook (its name left to fill in) and the environment. Stopped on exit."""
    port = free_port()
    env = {**os.environ, "JUPYTER_DATA_DIR": str(folder / ".jupyter-data"),
           "JUPYTER_CONFIG_DIR": str(folder / ".jupyter-config"), "JUPYTER_RUNTIME_DIR": str(folder / ".jupyter-run")}
    token = "explorer-test"
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={folder}",
               "--LabApp.news_url=", "--LabApp.extension_manager=readonly", "--allow-root"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.5)
        else:
            raise RuntimeError("JupyterLab did not start within 60 s")
        yield f"http://127.0.0.1:{port}/lab/tree/{{name}}?token={token}", env
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_explorer_works_in_jupyterlab(browser, tmp_path):
    """The notebook's output as JupyterLab shows it: a trusted notebook (one the user ran) runs
    the explorer's script; the table searches, filters and sorts there as in the exported page."""
    report = wide_report(32)
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("display(HTML(explorer_html(report)))")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": explorer_html(report)})]
    notebook.cells = [nbformat.v4.new_markdown_cell("## Every example"), cell]
    # a kernel named, so that JupyterLab asks for none in a dialog over the page
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "explorer.ipynb")
    with jupyterlab(tmp_path) as (url, env):
        subprocess.run([sys.executable, "-m", "jupyter", "trust", str(tmp_path / "explorer.ipynb")], env=env,
                       check=True, capture_output=True)
        context = browser.new_context(service_workers="block", viewport={"width": 1400, "height": 1000})
        left: list[str] = []
        context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(
            ("http://127.0.0.1", "blob:", "data:")) else (left.append(route.request.url), route.abort()))
        try:
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(url.format(name="explorer.ipynb"))
            page.wait_for_function(OPENED, timeout=120_000)
            explore(page, report)
        finally:
            context.close()
    assert errors == [] and not [url for url in left if "itables" in url or "unpkg" in url or "datatables" in url]

"""Every page a reader opens, linted (issue 49's Done-when): the pages of a sample run, of a run on a
user's own small CSV, of a failed run and of a comparison, and the runs index over them.

A page fails on what a reader should never see: a Python dict or list repr, an absolute path, an
exception's class name outside a collapsed traceback (a <details> block), an empty section (a
heading followed directly by another heading of the same or a higher level, or by the end), a
page over PAGE_LIMIT bytes, and, in the index, a word that the browser's layout breaks across two
lines. What a page shows is its rendered text: markdown, outputs and templates. The code cells'
input (on the pages with code) is code, read as code, and left out; so are <style> and <script>.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

from evalbook.errors import RunFailed
from paths import DEFAULT_PROFILE, NO_JUDGE, ROOT

pytestmark = pytest.mark.slow  # real runs through the runner, and Chromium

PAGE_LIMIT = 15_000_000  # bytes
HEADINGS = {f"h{level}": level for level in range(1, 7)}
# Elements whose text is no reader's text: code cells' input (its editor; a markdown cell's text is
# in an input area too, and is read), prompts, styles and scripts.
SKIPPED_CLASSES = ("jp-InputArea-editor", "jp-InputPrompt", "jp-OutputPrompt")
SKIPPED_TAGS = ("style", "script", "head", "title")
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

# A dict or list as Python (or JSON) prints it: {'key': ..., {"key": ..., ['a', ...], ["a"], [] and {}.
# A bracketed pair of numbers ([0.781, 0.842], an interval) is no repr.
REPR = re.compile(r"""\{\s*['"][^'"\n]{0,80}['"]\s*:|\[\s*['"][^'"\n]{0,80}['"]\s*[,\]\s]|(?<![\w\]])\[\]|(?<![\w$])\{\}""")
# The class name of an exception, and Python's traceback header.
EXCEPTION = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception)\b|\bTraceback \(most recent call last\)")


def absolute_path_pattern(*roots: Path) -> re.Pattern:
    """An absolute path: under one of `roots` (the checkout, the test's temporary folders, the home
    folder), or under a folder no relative path starts with (/tmp/, /home/ ...)."""
    named = "|".join(re.escape(str(root)) for root in roots)
    common = r"(?<![\w:/.~-])/(?:tmp|home|work|Users|root|var|private|mnt|opt|usr|srv)/"
    return re.compile(f"(?:{named})|{common}")


class ReaderText(HTMLParser):
    """A page as its reader sees it: the text outside <details> blocks (`text`), the text inside
    them (`collapsed`), and the headings in document order, each with whether anything a reader
    sees (text, an image, a table) follows it before the next heading (`sections`)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.collapsed: list[str] = []
        self.sections: list[dict] = []  # {"level", "title", "content"}
        self._stack: list[tuple[str, bool, bool]] = []  # (tag, skipped, details)
        self._heading: dict | None = None

    @property
    def _skipped(self) -> bool:
        return any(skipped for _, skipped, _ in self._stack)

    @property
    def _in_details(self) -> bool:
        return any(details for _, _, details in self._stack)

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        skipped = tag in SKIPPED_TAGS or any(name in classes for name in SKIPPED_CLASSES)
        if not self._skipped and not skipped:
            if tag in HEADINGS:
                self._heading = {"level": HEADINGS[tag], "title": "", "content": False}
                self.sections.append(self._heading)
            elif tag in ("img", "svg", "table") and self.sections and not self._in_details_heading():
                self.sections[-1]["content"] = True
        if tag not in VOID_TAGS:
            self._stack.append((tag, skipped, tag == "details"))

    def _in_details_heading(self) -> bool:
        return self._heading is not None and any(tag in HEADINGS for tag, _, _ in self._stack)

    def handle_endtag(self, tag):
        for position in range(len(self._stack) - 1, -1, -1):
            if self._stack[position][0] == tag:
                del self._stack[position:]
                break
        if tag in HEADINGS:
            self._heading = None

    def handle_data(self, data):
        if self._skipped or not data.strip():
            return
        (self.collapsed if self._in_details else self.text).append(data)
        if self._heading is not None and any(tag in HEADINGS for tag, _, _ in self._stack):
            self._heading["title"] += data.strip().rstrip("¶")
        elif self.sections:
            self.sections[-1]["content"] = True


def reader_text(page: Path) -> ReaderText:
    parsed = ReaderText()
    parsed.feed(page.read_text("utf-8"))
    parsed.close()
    return parsed


def empty_sections(sections: list[dict]) -> list[str]:
    """Each heading with nothing under it: followed directly by a heading of the same or a higher
    level (a smaller number), or by the end of the page."""
    empty = []
    for position, section in enumerate(sections):
        if section["content"]:
            continue
        following = sections[position + 1] if position + 1 < len(sections) else None
        if following is None or following["level"] <= section["level"]:
            empty.append(f"h{section['level']} {section['title']!r}")
    return empty


def lint(page: Path, absolute: re.Pattern) -> list[str]:
    """What is wrong with `page`, one line per kind of fault, with what was found."""
    faults = []
    size = page.stat().st_size
    if size > PAGE_LIMIT:
        faults.append(f"{size:,} bytes, over the {PAGE_LIMIT:,}-byte limit")
    parsed = reader_text(page)
    text = "\n".join(parsed.text)
    for name, pattern in (("a dict or list repr", REPR), ("an absolute path", absolute),
                          ("an exception name outside a collapsed traceback", EXCEPTION)):
        found = [text[max(0, m.start() - 50):m.end() + 50].replace("\n", " ") for m in pattern.finditer(text)]
        if found:
            faults.append(f"{name} ({len(found)}): " + " | ".join(found[:3]))
    collapsed = "\n".join(parsed.collapsed)
    paths = [collapsed[max(0, m.start() - 50):m.end() + 50] for m in absolute.finditer(collapsed)]
    if paths:
        faults.append(f"an absolute path in a collapsed block ({len(paths)}): " + " | ".join(paths[:3]))
    empty = empty_sections(parsed.sections)
    if empty:
        faults.append(f"empty sections: {', '.join(empty)}")
    return faults


# ---------------------------------------------------------------- the lint, on pages made by hand

def test_the_lint_finds_each_fault(tmp_path):
    absolute = absolute_path_pattern(tmp_path)
    page = tmp_path / "page.html"
    page.write_text(
        "<html><head><style>td { x: '{}' }</style></head><body>"
        "<h1>Title</h1><h2>Empty</h2><h2>Counts</h2><pre>{'weights_sha256': 'ab'}</pre>"
        f"<p>cache at {tmp_path}/cache and /home/me/x.csv</p><p>ConnectionError: refused</p>"
        "<div class='jp-InputArea'><div class='jp-InputArea-editor'><pre>except LoadError: {'a': 1}</pre></div></div>"
        "<details><summary>Traceback</summary><pre>Traceback (most recent call last): ValueError</pre></details>"
        "<h2>Last</h2></body></html>", "utf-8")
    faults = "\n".join(lint(page, absolute))
    assert "a dict or list repr (1)" in faults
    assert "an absolute path (2)" in faults
    assert "an exception name outside a collapsed traceback (1): " in faults and "ConnectionError" in faults
    assert "empty sections: h2 'Empty', h2 'Last'" in faults
    assert "LoadError" not in faults and "ValueError" not in faults


@pytest.mark.parametrize("text", ["[0.781, 0.842]", "3 of 4 [0.1, 0.2]", "make run PARAMS=params/local-judge.yaml",
                                  "judge.base_url=http://127.0.0.1:1/v1", "outputs/local/eval-runs/x.json",
                                  "P/R/F1", "GET /models", "a {count} of"])
def test_the_lint_passes_what_a_reader_may_read(tmp_path, text):
    page = tmp_path / "page.html"
    page.write_text(f"<html><body><h1>T</h1><p>{text}</p></body></html>", "utf-8")
    assert lint(page, absolute_path_pattern(tmp_path)) == []


def test_a_heading_with_a_table_or_a_lower_heading_under_it_is_not_empty(tmp_path):
    page = tmp_path / "page.html"
    page.write_text("<html><body><h1>T</h1><h2>A</h2><h3>A.1</h3><p>x</p><h2>B</h2><table><tr><td></td></tr>"
                    "</table></body></html>", "utf-8")
    assert lint(page, absolute_path_pattern(tmp_path)) == []


# ---------------------------------------------------------------- the pages of real runs

@dataclass
class Pages:
    pages: list[Path]  # every HTML page of the runs and the comparison
    indexes: list[Path]  # each outputs root's index.html
    absolute: re.Pattern


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory) -> Path:
    """A run that fails in 01_load, on an input with a missing context (12 s): its run folder."""
    from evalbook.runner import run_pipeline

    folder = tmp_path_factory.mktemp("failed")
    examples = folder / "helpdesk-missing-context.jsonl"
    examples.write_text(
        '{"id": "a", "question": "What colour is the sky?", "context": null, "answer": "Blue.", '
        '"generated_answer": "It is blue."}\n'
        '{"id": "b", "question": "How many legs?", "context": "Spiders have eight legs.", "answer": "Eight.", '
        '"generated_answer": "Eight."}\n', "utf-8")
    outputs = folder / "outputs"
    with pytest.raises(RunFailed):
        run_pipeline(str(DEFAULT_PROFILE), [f"input_path={examples}", f"outputs_root={outputs}", NO_JUDGE])
    [run_json] = outputs.glob("local/eval-runs/*/*/*/*/run.json")
    return run_json.parent


@pytest.fixture(scope="module")
def comparison_page(sample_runs) -> Path:
    """The comparison of the sample runs: one that another module made in this session, else one
    made here (`make compare`)."""
    from evalbook.layout import COMPARISONS_DIR

    made = sorted(sample_runs.outputs.glob(f"**/{COMPARISONS_DIR}/*/05_compare.noinput.html"))
    if made:
        return made[0]
    from test_compare_e2e import compare_cli

    return compare_cli(sample_runs.profile).folder / "05_compare.noinput.html"


@pytest.fixture(scope="module")
def real_pages(sample_runs, own_run, failed_run, comparison_page, tmp_path_factory) -> Pages:
    own_folder, own_report, _ = own_run
    run_dirs = [sample_runs.baseline.run_dir, own_report.with_suffix(""), failed_run]
    pages = [page for run_dir in run_dirs for page in sorted(run_dir.glob("*.html"))]
    pages += sorted(comparison_page.parent.glob("*.html"))
    indexes = [sample_runs.outputs / "index.html", own_folder / "outputs" / "index.html",
               failed_run.parents[5] / "index.html"]
    absolute = absolute_path_pattern(ROOT, tmp_path_factory.getbasetemp(), Path.home())
    return Pages(pages, indexes, absolute)


def test_the_real_pages_are_all_there(real_pages, failed_run):
    names = {page.name for page in real_pages.pages}
    assert {"01_load.html", "02_score.html", "03_judge.html", "04_report.html", "04_report.noinput.html",
            "05_compare.html", "05_compare.noinput.html"} <= names
    assert failed_run / "01_load.html" in real_pages.pages
    assert all(index.is_file() for index in real_pages.indexes)


@pytest.mark.parametrize("stage", ["01_load", "02_score", "03_judge", "04_report", "05_compare", "index"])
def test_no_page_shows_a_raw_value_an_absolute_path_an_exception_or_an_empty_section(real_pages, stage):
    pages = real_pages.indexes if stage == "index" else [page for page in real_pages.pages
                                                         if page.name.startswith(stage)]
    assert pages
    faults = {f"{page.parent.name}/{page.name}": lint(page, real_pages.absolute) for page in pages}
    faults = {page: found for page, found in faults.items() if found}
    assert not faults, "\n".join(f"{page}:\n  " + "\n  ".join(found) for page, found in faults.items())


# Each word of the index's table cells (a run of characters without white space), with the number of
# lines the browser laid it out on: more than one is a word broken by wrapping ("not_ru n").
_BROKEN_WORDS = """() => {
    const broken = [];
    for (const cell of document.querySelectorAll("td, th")) {
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        while (walker.nextNode()) {
            const node = walker.currentNode;
            for (const match of node.textContent.matchAll(/\\S+/g)) {
                const range = document.createRange();
                range.setStart(node, match.index);
                range.setEnd(node, match.index + match[0].length);
                const tops = new Set(Array.from(range.getClientRects(), (rect) => Math.round(rect.top)));
                if (tops.size > 1) broken.push(match[0]);
            }
        }
    }
    return broken;
}"""


def test_the_index_breaks_no_word_and_fits_a_1280_pixel_screen(real_pages, browser):
    for index in real_pages.indexes:
        context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
        try:
            page = context.new_page()
            page.goto(index.resolve().as_uri(), wait_until="load")
            assert page.evaluate(_BROKEN_WORDS) == [], index
            assert page.evaluate("() => document.documentElement.scrollWidth") <= 1280, index
        finally:
            context.close()


def test_a_failed_run_s_row_gives_its_reason_in_one_sentence(real_pages, failed_run):
    text = "\n".join(reader_text(real_pages.indexes[2]).text)
    assert "failed" in text
    assert "column 'context'" in text and "-p skip_incomplete_examples=true" in text
    assert "executed notebook" not in text and "failing cell" not in text


def test_a_failed_stage_s_page_opens_with_the_reason_and_the_input_and_folds_the_traceback(failed_run):
    parsed = reader_text(failed_run / "01_load.html")
    opening = " ".join(parsed.text[:12])
    assert "01_load failed" in opening, opening
    assert "column 'context'" in opening and "skip_incomplete_examples=true" in opening, opening
    assert "helpdesk-missing-context.jsonl" in opening, opening
    collapsed = "\n".join(parsed.collapsed)
    assert "LoadError" in collapsed
    # the traceback starts at the notebook's own cell; evalbook's frames follow it
    assert 0 <= collapsed.find("Cell In[") < collapsed.find("File lib/evalbook/"), collapsed[:400]
    # the cells after the failing one never ran: no heading stands over nothing
    assert "did not run" in " ".join(parsed.text)


# Tables of the three stage pages fit the page's width: none is cut off on the right.
_WIDE_TABLES = """() => Array.from(document.querySelectorAll(".jp-OutputArea-output table"))
    .filter((table) => table.getBoundingClientRect().right > document.documentElement.clientWidth + 1
                       || table.parentElement.scrollWidth > table.parentElement.clientWidth + 1)
    .map((table) => table.innerText.slice(0, 80))"""


def test_the_stage_pages_tables_fit_the_page(real_pages, browser):
    stage_pages = [page for page in real_pages.pages if page.name in ("01_load.html", "02_score.html",
                                                                         "03_judge.html")]
    for stage_page in stage_pages:
        context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
        try:
            page = context.new_page()
            page.goto(stage_page.resolve().as_uri(), wait_until="load")
            assert page.evaluate(_WIDE_TABLES) == [], stage_page
        finally:
            context.close()


def test_the_stage_pages_read_counts_ranks_and_means_as_a_reader_would(sample_runs):
    from evalbook.formatting import COUNT_LABELS

    def read(page: str) -> str:
        parsed = reader_text(sample_runs.baseline.run_dir / page)
        return "\n".join(parsed.text + parsed.collapsed)

    load, score = read("01_load.html"), read("02_score.html")
    assert "n_unmatched_differing_only_in_case_or_space" not in load
    assert COUNT_LABELS["n_unmatched_differing_only_in_case_or_space"] in load
    assert "How this run was made" in score and "weights_sha256" not in score
    assert not re.search(r"\b0\.\d{4,}\b", score), "a mean to more than 3 decimals"
    assert "1 empty answer" in load + score and "1 empty answers" not in load + score


"""The run report's page (04_report.noinput.html) as a reader opens it (issue 49, items 1 and 3):
the headline, then a contents list drawn from the sections the run shows, then the failing
checks, the worst examples and the rest; no section for a feature that is off, no empty heading,
nothing raw (no dict or list, no absolute path, no variable name for a count), and at most half
the height the page had (22,232 px on the sample)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from evalbook.report import sections
from evalbook.report.tables import counts_table, provenance_table, similarity_table
from paths import ROOT
from test_report import make_report

REPORT_NOTEBOOK = ROOT / "notebooks" / "04_report.ipynb"
HEIGHT_BEFORE = 22_232  # px, the sample's page at 1,280 px wide when issue 49 was filed
# The features a run can leave off, by the heading of their section.
OFF_HEADINGS = ("Which answers fail a check", "Judge", "Each judged answer", "Each retrieved chunk", "Scenarios",
                "Each conversation", "How the answers were obtained", "Unscored judgments")
RAW_REPR = re.compile(r"\{'|\{\"|\['|\[\"|': |OrderedDict|defaultdict")


def _off(report: dict) -> dict:
    """`report` with every optional feature off: no checks, no judge, no scenarios, no generation."""
    off = copy.deepcopy(report)
    off["checks_summary"] = None
    off["scenarios"] = None
    off["generation_summary"] = None
    off["judge_summary"] = {"status": "not_run", "reason": "the judge is off in the profile"}
    return off


# ---------------------------------------------------------------- the sections and the contents

def test_the_sections_run_in_the_reader_s_order():
    keys = [section.key for section in sections.SECTIONS]
    assert keys[:3] == ["checks", "explorer", "worst"]
    assert keys.index("where") < keys.index("judge") < keys.index("chunks") < keys.index("scenarios")
    assert keys.index("scenarios") < keys.index("similarity") < keys.index("counts") < keys.index("generation")
    assert keys.index("generation") < keys.index("figures") < keys.index("unscored") < keys.index("provenance")
    assert len(set(keys)) == len(keys)


def test_an_anchor_is_the_id_nbconvert_and_jupyterlab_give_the_heading():
    section = sections.section("worst")
    assert section.anchor == "Worst-examples"
    assert sections.section("provenance").anchor == "How-this-run-was-made"


def test_the_contents_list_only_the_sections_the_run_shows():
    report = _off(make_report())
    shown = [section.key for section in sections.shown(report)]
    assert "checks" not in shown and "judge" not in shown and "scenarios" not in shown
    assert "generation" not in shown and "chunks" not in shown and "unscored" not in shown
    assert {"worst", "similarity", "counts", "figures", "provenance"} <= set(shown)
    assert "where" not in shown  # this report was not sliced
    html = sections.contents_html(report)
    for section in sections.SECTIONS:
        link = f"href='#{section.anchor}'"
        assert (link in html or f'href="#{section.anchor}"' in html) == (
            section.key in shown and section.level == 2), section.key
    assert "Scenarios" not in html and "Judge" not in html


def test_a_heading_carries_its_anchor_and_says_what_the_section_holds():
    html = sections.heading_html("where")
    assert "id='Where-it-fails'" in html or 'id="Where-it-fails"' in html
    assert "<h2" in html and "Where it fails" in html
    assert "<h3" in sections.heading_html("conversations")
    with pytest.raises(KeyError, match="no section"):
        sections.heading_html("nonsense")


def test_the_notebook_shows_the_sections_in_the_registry_s_order_and_each_heading_once():
    source = [("".join(cell["source"]), cell["cell_type"], cell["id"])
              for cell in json.loads(REPORT_NOTEBOOK.read_text("utf-8"))["cells"]]
    code = "\n".join(text for text, kind, _ in source if kind == "code")
    rendered = [section.key for section in sections.SECTIONS if section.rendered]
    positions = [code.index(f'heading_html("{key}")') for key in rendered]
    assert positions == sorted(positions), "the notebook's sections follow sections.SECTIONS"
    markdown = "\n".join(text for text, kind, _ in source if kind == "markdown")
    for section in sections.SECTIONS:
        if section.rendered:  # the heading is the cell's output, so an off section has none
            assert f"# {section.title}\n" not in markdown + "\n", section.title
    ids = [cell_id for _, _, cell_id in source]
    assert ids.index("04-report-04") < ids.index("04-report-contents") < ids.index("04-report-checks")
    assert ids.index("04-report-checks") < ids.index("04-report-22") < ids.index("04-report-where-2")
    assert ids.index("04-report-where-2") < ids.index("04-report-06") < ids.index("04-report-26")


# ---------------------------------------------------------------- nothing raw

def test_every_count_reads_in_words_with_its_plural():
    report = make_report()
    report["counts"]["n_unmatched_differing_only_in_case_or_space"] = 1
    report["counts"]["n_empty_generated_answers"] = 1
    table = counts_table(report)
    names = list(table.index)
    assert "1 example whose id differs only in case or spaces" not in names  # the count is its own column
    assert "examples whose id differs only in case or spaces" in names
    assert not [name for name in names if "_" in name], names
    assert table.loc["empty answers", "count"] == 1


def test_the_headline_s_counts_read_as_singular_or_plural():
    from evalbook.report.headline import counts_said, headline_html

    report = make_report()
    report["counts"]["n_empty_generated_answers"] = 1
    report["counts"]["n_examples_without_prediction"] = 2
    said = counts_said(report)
    assert "1 empty answer" in said and "2 examples without a prediction" in said and "0 unscored judgments" in said
    assert "1 empty answer ·" in headline_html(report) and "1 empty answers" not in headline_html(report)


def test_the_similarity_summary_names_its_metrics_and_statistics_for_a_reader():
    table = similarity_table(make_report())
    assert "BERTScore F1" in table.index and "bertscore_f1" not in table.index
    assert "median" in table.columns and "p50" not in table.columns
    assert str(table["n"].dtype) == "int64"


def test_how_the_run_was_made_has_readable_names_and_no_path_or_dict():
    report = make_report()
    report["provenance"]["params_profile"]["overrides"] = {"outputs_root": "/home/me/runs", "limit": 4}
    report["provenance"]["weights_sha256"] = {"bertscore": "a" * 64}
    report["provenance"]["embedding_cache"] = {"path": "/home/me/.cache/emb", "hits": 3, "misses": 1}
    table = provenance_table(report)
    text = table.to_string()
    assert "/home/me" not in text and not RAW_REPR.search(text), text
    assert "params_profile" not in text and "package_versions" not in text, text
    assert "BERTScore weights (sha256)" in table.index
    assert "torch version" in table.index


# ---------------------------------------------------------------- the pages, in Chromium

def _layout(page_path: Path, browser) -> dict:
    context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(Path(page_path).resolve().as_uri(), wait_until="load")
        return page.evaluate("""() => ({
            height: document.documentElement.scrollHeight,
            ids: Array.from(document.querySelectorAll('[id]'), (element) => element.id),
            links: Array.from(document.querySelectorAll('nav.evalbook-contents a'), (a) => a.getAttribute('href')),
            // each h2/h3 with whether something (text, a table, an image) follows it before the
            // next heading of its level or a higher one
            headings: Array.from(document.querySelectorAll('h2, h3'), (heading) => {
                const level = Number(heading.tagName[1]);
                const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
                walker.currentNode = heading;
                let node = walker.nextNode();
                while (node && heading.contains(node)) node = walker.nextNode();
                let followed = false;
                for (; node; node = walker.nextNode()) {
                    if (node.nodeType === 1 && /^H[1-6]$/.test(node.tagName) && Number(node.tagName[1]) <= level) break;
                    if (node.nodeType === 1 && ['IMG', 'TABLE', 'DETAILS'].includes(node.tagName)) { followed = true; break; }
                    if (node.nodeType === 3 && node.textContent.trim() && !node.parentElement.closest('style, script')) {
                        followed = true; break;
                    }
                }
                return {text: heading.textContent.replace('\u00b6', '').trim(), followed};
            }),
            text: document.body.innerText,
        })""")
    finally:
        context.close()


def _check_page(page_path: Path, seen: dict, folder: Path) -> None:
    text = seen["text"]
    assert not RAW_REPR.search(text), RAW_REPR.search(text).group() + " in " + text[
        max(0, RAW_REPR.search(text).start() - 200):RAW_REPR.search(text).end() + 200]
    assert str(folder) not in text and str(ROOT) not in text  # no absolute path
    assert "n_unmatched" not in text and "n_empty" not in text
    missing = [link for link in seen["links"] if link.lstrip("#") not in seen["ids"]]
    assert seen["links"] and not missing, f"contents links without a target: {missing}"
    empty = [heading["text"] for heading in seen["headings"] if not heading["followed"]]
    assert not empty, f"headings with nothing under them: {empty}"


def test_the_sample_s_page_opens_with_the_headline_and_the_contents_at_half_its_height(sample_runs, browser):
    from browser import first_screen

    page_path = sample_runs.baseline.run_dir / "04_report.noinput.html"
    above = first_screen(page_path, browser=browser)["above"]
    assert "95% interval" in above and "BERTScore F1" in above
    assert "Contents" in above and "Worst examples" in above and "How this run was made" in above
    assert above.index("95% interval") < above.index("Contents")
    seen = _layout(page_path, browser)
    assert seen["height"] <= HEIGHT_BEFORE / 2, f"{seen['height']} px, over half of {HEIGHT_BEFORE}"
    _check_page(page_path, seen, sample_runs.outputs)
    headings = [heading["text"] for heading in seen["headings"]]
    order = ["Which answers fail a check", "Every example", "Worst examples", "Where it fails",
             "Answer similarity summary", "Counts", "Figures", "How this run was made"]
    positions = [headings.index(title) for title in order]
    assert positions == sorted(positions), headings


def test_a_users_own_small_csv_shows_no_section_of_a_feature_that_is_off(own_run, browser):
    folder, report_path, _ = own_run
    page_path = report_path.with_suffix("") / "04_report.noinput.html"
    seen = _layout(page_path, browser)
    _check_page(page_path, seen, folder)
    headings = [heading["text"] for heading in seen["headings"]]
    for off in ("Judge", "Each judged answer", "Each retrieved chunk", "Scenarios", "Each conversation",
                "How the answers were obtained", "Unscored judgments"):
        assert off not in headings, (off, headings)
    assert "1 empty answer " in seen["text"] or "1 empty answer\n" in seen["text"] or "1 empty answer ·" in seen["text"]
    assert "1 empty answers" not in seen["text"]
    # nothing was tested on four rows: one line, no forest plot
    assert not list((report_path.with_suffix("") / "figures").glob("slices-*.png"))

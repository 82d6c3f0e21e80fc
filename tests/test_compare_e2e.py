"""End-to-end: two real runs of the sample, one with truncated answers, compared with 05_compare.

The baseline scores `data/sample/predictions.jsonl`; the candidate changes one parameter,
`predictions_path`, to `predictions-truncated.jsonl` (each answer cut to the first half of its
words). `python -m evalbook compare` without runs, as `make compare` calls it, must find the
regression. The report, the comparison and the run index must open complete in offline Chromium.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import nbformat
import papermill
import pytest
import yaml

from browser import inspect_offline
from evalbook.compare.checks import fixed_said, newly_failing_said
from evalbook.compare.document import validate_comparison
from evalbook.publish.pages import external_references, noinput_path
from evalbook.layout import COMPARISONS_DIR
from evalbook.publish.catalog import collect_runs
from evalbook.publish.index import build_index
from evalbook.report.figures import page_forest_metrics
from paths import DEFAULT_PROFILE, ROOT, TRUNCATED

pytestmark = pytest.mark.slow  # real runs through the runner: kernels, models

N_SAMPLE = 32
# 04_report's figures on the sample; the judge's two are not drawn when the judge did not run.
DRAWN_FIGURES = {"similarity-distributions", "f1-vs-cosine", "retrieval-ranks"}
JUDGE_FIGURES = {"groundedness-vs-relevance", "pass-rate-by-threshold"}
# Half an answer matches less of the reference. Precision (the answer's share that matches)
# may move either way, so it is not asserted.
LOST_BY_TRUNCATION = ("bertscore_f1", "bertscore_recall", "sentence_cosine")
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d")


@dataclass
class Comparison:
    path: Path
    doc: dict
    folder: Path
    stdout: str


def evalbook_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalbook", *args], capture_output=True, text=True,
                          cwd=ROOT, check=False)


def compare_cli(profile: Path, *args: str) -> Comparison:
    done = evalbook_cli("compare", "--params", str(profile), *args)
    # A comparison is a report, not a gate: a regression found still exits 0.
    assert done.returncode == 0, done.stderr[-3000:]
    path = Path(done.stdout.strip().splitlines()[-1])
    assert path.is_absolute() and path.suffix == ".json" and path.is_file(), done.stdout
    return Comparison(path, json.loads(path.read_text("utf-8")), path.with_suffix(""), done.stdout)


def metric(doc: dict, name: str) -> dict:
    (row,) = [row for row in doc["metrics"] if row["metric"] == name]
    return row


def first_half(answer: str) -> str:
    """The truncation data/sample/README.md describes: the first half of the words, at least one."""
    words = answer.split()
    return " ".join(words[:max(1, len(words) // 2)])


@pytest.fixture(scope="module")
def runs(sample_runs):
    return sample_runs


@pytest.fixture(scope="module")
def comparison(runs) -> Comparison:
    # `make compare` with neither A nor B: the two latest successful runs.
    return compare_cli(runs.profile)


def page_text(page: Path) -> str:
    """The page's text without markup (Pygments splits code into one span per token)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text("utf-8")))


def assert_opens_offline(page: Path, browser, min_images: int = 0) -> dict:
    text = page.read_text("utf-8")
    assert external_references(text) == [], page
    seen = inspect_offline(page, browser)
    assert seen["non_local_requests"] == [], page
    assert seen["console_errors"] == [], page
    assert len(seen["images"]) >= min_images, (page, seen["images"])
    for image in seen["images"]:
        assert image["complete"] and image["naturalWidth"] > 0 and image["naturalHeight"] > 0, (page, image)
    return seen


# ---------------------------------------------------------------- 1. the comparison found the right runs

def test_compare_without_runs_pairs_the_two_latest(runs, comparison):
    doc = comparison.doc
    validate_comparison(doc)
    assert doc["baseline"]["run_id"] == runs.baseline.run_id  # the earlier run
    assert doc["candidate"]["run_id"] == runs.candidate.run_id
    assert doc["baseline"]["timestamp"] < doc["candidate"]["timestamp"]
    assert doc["baseline"]["location"] == str(runs.baseline.report_path)
    assert doc["candidate"]["location"] == str(runs.candidate.report_path)
    pairing = doc["pairing"]
    assert (pairing["n_paired"], pairing["n_only_baseline"], pairing["n_only_candidate"]) == (N_SAMPLE, 0, 0)
    assert pairing["n_question_differs"] == 0
    # Written beside the candidate's report, in its own folder, as the CLI printed.
    assert comparison.path.parent == runs.candidate.report_path.parent / COMPARISONS_DIR
    assert comparison.folder.is_dir()
    assert f"comparison folder: {comparison.folder}" in comparison.stdout
    assert f"05_compare HTML: {comparison.folder / '05_compare.html'}" in comparison.stdout


# ---------------------------------------------------------------- 2. the degradation is found

def test_truncated_answers_are_found_worse(comparison):
    doc = comparison.doc
    assert doc["gates"]["embedding"]["compared"]
    for name in LOST_BY_TRUNCATION:
        row = metric(doc, name)
        assert row["compared"] and row["n"] == N_SAMPLE
        assert row["candidate_mean"] < row["baseline_mean"], row
        assert row["mean_delta"] < 0, row
        # the whole interval lies below 0, around the mean delta
        assert row["ci_low"] <= row["mean_delta"] <= row["ci_high"] < 0, row
        assert row["fraction_worse"] > 0.7, row
    # Truncating answers changes no retrieval result: the comparison invents no difference.
    for name in ("top_k_match", "mrr_at_k", "precision_at_k", "recall_at_k", "ndcg_at_k"):
        at_k = metric(doc, name)
        assert at_k["compared"] and at_k["mean_delta"] == 0 and at_k["n_unchanged"] == at_k["n"] == 20, name


def test_regressions_list_the_truncated_answers_worst_first(comparison):
    rows = comparison.doc["regressions"]["bertscore_f1"]
    assert len(rows) == comparison.doc["parameters"]["n_regressions"]
    deltas = [row["delta"] for row in rows]
    assert deltas == sorted(deltas) and deltas[-1] < 0
    worst_possible = min(d["delta"] for d in comparison.doc["deltas"] if d["metric"] == "bertscore_f1")
    assert deltas[0] == worst_possible
    for row in rows[:5]:
        assert row["candidate_answer"] == first_half(row["baseline_answer"]), row["id"]
        assert len(row["candidate_answer"]) < len(row["baseline_answer"])
        assert row["candidate_score"] - row["baseline_score"] == pytest.approx(row["delta"])


def test_judge_metrics_are_refused_because_no_judge_ran(comparison):
    doc = comparison.doc
    gate = doc["gates"]["judge"]
    assert not gate["compared"] and gate["metrics"] == []
    assert (gate["baseline_status"], gate["candidate_status"]) == ("not_run", "not_run")
    assert "the baseline judge did not run (not_run: no judge server reachable" in gate["reason"]
    assert "the candidate judge did not run (not_run: no judge server reachable" in gate["reason"]
    assert not [row for row in doc["metrics"] if row["family"] == "judge"]
    assert set(doc["regressions"]) == {"bertscore_f1", "bertscore_precision", "bertscore_recall",
                                       "sentence_cosine", "top_k_match", "mrr_at_k", "precision_at_k",
                                       "recall_at_k", "ndcg_at_k"}


# ---------------------------------------------------------------- 3. determinism, write-once

def test_seeded_rerun_by_run_id_gives_the_same_numbers_in_a_new_comparison(runs, comparison):
    first_bytes = comparison.path.read_bytes()
    rerun = compare_cli(runs.profile, "--baseline", runs.baseline.run_id,
                        "--candidate", runs.candidate.run_id)
    assert rerun.path != comparison.path and rerun.folder != comparison.folder
    assert rerun.path.parent == comparison.path.parent
    assert comparison.path.read_bytes() == first_bytes  # the first comparison is left as it was
    assert rerun.doc["metrics"] == comparison.doc["metrics"]
    assert rerun.doc["regressions"] == comparison.doc["regressions"]
    assert rerun.doc["deltas"] == comparison.doc["deltas"]
    assert rerun.doc["parameters"] == comparison.doc["parameters"]
    assert (rerun.folder / "05_compare.html").is_file()
    written = sorted(p.name for p in comparison.path.parent.glob("*.json"))
    assert written == sorted([comparison.path.name, rerun.path.name])


# ---------------------------------------------------------------- 4. the comparison page

def test_comparison_page_is_self_contained_and_shows_the_deltas(comparison, browser):
    page = comparison.folder / "05_compare.html"
    assert (comparison.folder / "figures" / "deltas.png").stat().st_size > 0
    seen = assert_opens_offline(page, browser, min_images=1)
    assert seen["requests"] == [page.resolve().as_uri()]
    assert all(image["src"].startswith("data:image/png;base64,") for image in seen["images"])
    text = page.read_text("utf-8")
    assert "What moved" in text and "the 10 examples that lost most on BERTScore F1" in text


# Measured on the sample in Chromium at 1,280 px wide before issue 49: 18,115 px (the slice table
# alone 8,080, nine delta panels 2,141, nine regression headings, five of them of 0 regressions).
HEIGHT_BEFORE = 18_115
# Text a reader must never see on the page, folded parts included: a metric's key, an exception's
# class, a status or a Python None.
RAW = re.compile(r"\b(?:[A-Z][A-Za-z]*(?:Error|Exception)|None|not_run)\b")
# The page's height, its text with the folded parts, and each h2/h3 with nothing under it before
# the next heading of the same or a higher level.
_LAYOUT = """() => {
    const body = document.body.cloneNode(true);
    body.querySelectorAll("style, script").forEach((element) => element.remove());
    const headings = Array.from(document.querySelectorAll("h2, h3"));
    const empty = headings.filter((heading) => {
        const level = Number(heading.tagName[1]);
        const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
        walker.currentNode = heading;
        let node = walker.nextNode();
        while (node && heading.contains(node)) node = walker.nextNode();
        for (; node; node = walker.nextNode()) {
            if (node.nodeType === 1 && /^H[1-6]$/.test(node.tagName) && Number(node.tagName[1]) <= level) return true;
            if (node.nodeType === 1 && ["IMG", "TABLE"].includes(node.tagName)) return false;
            if (node.nodeType === 3 && node.textContent.trim()) return false;
        }
        return true;
    }).map((heading) => heading.textContent.trim());
    return {height: document.documentElement.scrollHeight, text: body.textContent, empty_headings: empty};
}"""


def page_layout(page: Path, browser) -> dict:
    context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
    try:
        opened = context.new_page()
        opened.goto(page.resolve().as_uri(), wait_until="load")
        return opened.evaluate(_LAYOUT)
    finally:
        context.close()


def test_the_no_code_comparison_opens_with_the_verdict(comparison, browser):
    from browser import first_screen

    from evalbook.compare.tables import sections
    from evalbook.compare.verdict import verdict_sentence

    page = comparison.folder / "05_compare.noinput.html"
    assert f"05_compare HTML without code: {page}" in comparison.stdout
    seen = first_screen(page, browser=browser)
    doc = comparison.doc
    f1 = next(row for row in doc["metrics"] if row["metric"] == "bertscore_f1")
    assert f1["mean_delta"] < 0  # the candidate's answers are cut to half their words
    # the verdict is the first thing under the title and its one-line blockquote
    sentence = verdict_sentence(doc)
    assert sentence.startswith("Candidate worse on 4 of 9 metrics, unchanged on 5; "
                               f"{f1['n_worse']} of 32 examples worse on BERTScore F1")
    assert sentence.endswith("; gate off.")
    above = re.sub(r"\s+(?=[,;.])", "", seen["above"])  # the sentence's coloured parts are text nodes of their own
    assert sentence in above, above[:800]
    assert above.startswith("05 · Compare") and \
        above[:above.index(sentence)].rstrip().endswith("beside the candidate."), above[:400]
    contents = "Contents: " + " · ".join(title for _, title in sections(doc))
    assert contents in above and above.index(sentence) < above.index(contents)
    assert [key for key, _ in sections(doc)] == ["deltas", "checks", "worse", "slices", "per-example", "runs",
                                                 "method"]
    assert f"{doc['pairing']['n_paired']} examples paired by id" in above
    assert "What changed: -p predictions_path: " in above and "predictions-truncated.jsonl" in above
    # then the deltas, whose first row is on the first screen
    assert f"BERTScore F1 32 {f1['baseline_mean']:.3f} {f1['candidate_mean']:.3f} {f1['mean_delta']:.3f}" in above
    assert "judge metrics: no judge ran for either run" in seen["text"]
    # right after the deltas, the checks that newly fail (issue 48): both runs ran the fact check
    checks = doc["checks"]
    assert checks["compared"], checks["reason"]
    said = f"Checks: {newly_failing_said(checks)}; {fixed_said(checks)}."
    text = seen["text"]
    headings = [text.index(f"\n{title}\n") for title in ("What moved", "Examples that got worse")]
    assert headings[0] < text.index(said) < headings[1]
    assert "from evalbook" not in text and "Warning" not in above
    assert str(comparison.folder.parent) not in text  # no absolute path
    assert not seen["empty_tables"], seen["empty_tables"]
    assert "{'" not in text and '{"' not in text  # no raw dict
    stderr = [output.get("text", "") for cell in nbformat.read(comparison.folder / "05_compare.ipynb", 4).cells
              for output in cell.get("outputs", []) if output.get("name") == "stderr"]
    assert not stderr, stderr


def test_the_comparison_page_is_a_third_of_its_old_height_with_nothing_empty_or_raw(comparison, browser):
    from evalbook.metrics import METRICS

    layout = page_layout(comparison.folder / "05_compare.noinput.html", browser)
    assert layout["height"] <= HEIGHT_BEFORE / 3, layout["height"]
    assert layout["empty_headings"] == []
    text = layout["text"]
    assert [m.name for m in METRICS if "_" in m.name and m.name in text] == []
    assert not RAW.search(text), text[max(RAW.search(text).start() - 200, 0):RAW.search(text).end() + 50]
    assert "largest regressions" not in text and "0.000, 0.000" not in text  # no empty list, no all-zero row


# ---------------------------------------------------------------- 5. the candidate's report pages

def test_report_pages_open_offline_with_their_figures(runs, browser):
    run_dir = runs.candidate.run_dir
    drawn = {path.stem for path in (run_dir / "figures").glob("*.png")}
    # and Where it fails' forest plot of each headline or flagged metric with a level tested
    report = json.loads(runs.candidate.report_path.read_text("utf-8"))
    forests = {f"slices-{name}" for name in page_forest_metrics(report)}
    assert len(forests) >= 4 and drawn == DRAWN_FIGURES | forests
    report_notebook = nbformat.read(run_dir / "04_report.ipynb", as_version=4)
    printed = "".join(output.get("text", "") for cell in report_notebook.cells
                      for output in cell.get("outputs", []))
    full, noinput = run_dir / "04_report.html", noinput_path(run_dir / "04_report.ipynb")
    assert "not drawn" not in printed  # a figure with nothing to draw is named on the page, not printed
    for name in JUDGE_FIGURES:
        said = f"{name.replace('-', ' ')} (the judge did not run: no judge server reachable"
        assert said in page_text(noinput) and said in page_text(full)
    for page in (full, noinput):
        seen = assert_opens_offline(page, browser, min_images=len(DRAWN_FIGURES | forests))
        assert seen["requests"] == [page.resolve().as_uri()]
    # The code input is in the full page only: its text, and the editor blocks that hold it.
    assert "from evalbook" in page_text(full) and "show_figure(" in page_text(full)
    assert "from evalbook" not in page_text(noinput) and "show_figure(" not in page_text(noinput)
    assert 'class="jp-CodeMirrorEditor' in full.read_text("utf-8")
    assert 'class="jp-CodeMirrorEditor' not in noinput.read_text("utf-8")


# ---------------------------------------------------------------- 6. the run index

def link_targets(page: Path) -> list[Path]:
    """The files the page's links point at (hrefs are relative to the page, percent-encoded)."""
    hrefs = re.findall(r'<a href="([^"]*)"', page.read_text("utf-8"))
    return [page.parent / unquote(html.unescape(href)) for href in hrefs]


def test_index_lists_both_runs_and_the_comparison_apart(runs, comparison, browser):
    index = runs.outputs / "index.html"
    written_after_the_comparison = index.read_text("utf-8")  # the compare command rebuilt it
    # The next run rebuilds it again: still two runs, not three, and the comparison in its table.
    assert build_index(runs.outputs) == index
    assert [row["run_id"] for row in collect_runs(runs.outputs)] == [runs.candidate.run_id,
                                                                    runs.baseline.run_id]
    for text in (written_after_the_comparison, index.read_text("utf-8")):
        assert "2 runs: 2 succeeded" in text
        assert runs.baseline.run_id in text and runs.candidate.run_id in text
        runs_table, _, comparisons_table = text.partition("<h2>Comparisons</h2>")
        assert COMPARISONS_DIR not in runs_table, "a comparison is not listed as a run"
        assert f"{COMPARISONS_DIR}/{comparison.path.stem}/05_compare.noinput.html" in comparisons_table
        assert 'class="num worse"' in comparisons_table, "the F1 regression is marked worse"
    targets = link_targets(index)
    assert all(target.is_file() for target in targets), targets
    for run in (runs.baseline, runs.candidate):
        assert run.run_dir / "04_report.html" in targets
    assert_opens_offline(index, browser)


# ---------------------------------------------------------------- 7. make diff

def test_diff_shows_the_changed_parameter_and_no_outputs(runs):
    done = evalbook_cli("diff", "--params", str(runs.profile), runs.baseline.run_id, runs.candidate.run_id)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "## params.yaml: differs" in out
    assert f"-predictions_path: {ROOT / 'data' / 'sample' / 'predictions.jsonl'}" in out
    assert f"+predictions_path: {TRUNCATED}" in out
    # The runner injects params_path, run_dir and run_id; the profile's values, the changed
    # predictions_path among them, are read from params.yaml, so they differ in the params diff.
    for stage in ("01_load", "02_score", "03_judge", "04_report"):
        assert f"## {stage}.ipynb: sources differ" in out
    for run in (runs.baseline, runs.candidate):
        sign = "-" if run is runs.baseline else "+"
        assert f'{sign}run_id = "{run.run_id}"' in out
        assert f'{sign}params_path = "{run.run_dir / "params.yaml"}"' in out
    # Only the injected-parameters cell differs: no output, execution count or metadata shows,
    # and no timestamp (nbdime's file headers carry modification times; they are cut).
    changed_parts = re.findall(r"^## [a-z ]+ (/\S*?):?$", out, re.MULTILINE)
    assert changed_parts and set(changed_parts) == {"/cells/2/source"}, changed_parts
    assert not TIMESTAMP.search(out), TIMESTAMP.search(out)
    assert str(runs.candidate.report_path) not in out  # 04_report prints it: an output, not a source


# ---------------------------------------------------------------- 8. 05_compare opened interactively

def test_compare_notebook_runs_alone_with_its_defaults_and_reruns(runs, comparison, tmp_path):
    scratch = runs.outputs / "local" / "interactive" / "compare"
    comparisons_before = sorted(comparison.path.parent.iterdir())
    created = []
    for attempt in (1, 2):
        papermill.execute_notebook(str(ROOT / "notebooks" / "05_compare.ipynb"),
                                   str(tmp_path / f"05_compare-{attempt}.ipynb"),
                                   parameters={"params_path": str(runs.profile)}, cwd=str(ROOT / "notebooks"),
                                   kernel_name="python3", progress_bar=False)
        doc = json.loads((scratch / "comparison.json").read_text("utf-8"))
        validate_comparison(doc)
        assert doc["baseline"]["run_id"] == runs.baseline.run_id
        assert doc["candidate"]["run_id"] == runs.candidate.run_id
        assert doc["metrics"] == comparison.doc["metrics"]
        assert (scratch / "figures" / "deltas.png").is_file()
        created.append(doc["created_at"])
    assert created[0] < created[1]  # the second run replaced the scratch comparison
    assert sorted(p.name for p in scratch.rglob("*") if p.is_file()) == ["comparison.json", "deltas.png"]
    # Exploring writes only to the scratch folder; the recorded comparisons are left alone.
    assert sorted(comparison.path.parent.iterdir()) == comparisons_before


def test_the_candidate_report_opens_with_its_deltas_against_the_earlier_run(runs, comparison, browser):
    from browser import first_screen

    seen = first_screen(runs.candidate.run_dir / "04_report.noinput.html", browser=browser)
    f1 = next(row for row in comparison.doc["metrics"] if row["metric"] == "bertscore_f1")
    against = (f"Against the earlier run {runs.baseline.run_id[:8]}", "same data and models",
               f"BERTScore F1 {f1['mean_delta']:+.3f} [{f1['ci_low']:.3f}, {f1['ci_high']:.3f}]")
    for expected in against:
        assert expected in seen["above"], (expected, seen["above"][:900])
    baseline_page = first_screen(runs.baseline.run_dir / "04_report.noinput.html", browser=browser)
    assert "No earlier run of this data with these models to compare with." in baseline_page["text"]

"""Hostile text everywhere, end to end: two real runs with a judge, a comparison, the trend and
the run index.

Every user-text field (question, context, answer, generated_answer, retrieved contexts, the
conversation, source), every id (example ids, retrieved_ids, gold_id) and the parameter values
that pages show (dataset name, generator, the judge's note, its criteria and eligible sources)
carry script, event-handler, Markdown, TeX and control-character payloads, and so does the one
override the candidate is run with (`-p description=...`, free text that changes no score). The
judge, the test fault server, answers with the same payloads in every statement, justification,
question and rationale, and one reply is not JSON, so its raw text reaches the unscored tables.
The two runs differ in one example each, so the comparison lists hostile unpaired ids, and one
paired example changes its question. Every HTML page written under the outputs root, the trend
page among them, is opened in offline Chromium: no dialog may fire, no element may come from a
payload, and the payloads show as text. No commit message is tested: evalbook records a run's git
commit hash, never its message, so no commit message reaches a page.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

import hostile
from browser import inspect_offline, offline_browser
from evalbook.escaping import visible_controls
from evalbook.publish.index import build_index
from evalbook.publish.trend import build_trend_page
from evalbook.runner import RunResult, run_pipeline
from evalbook.sidedocs import DocumentRun, run_comparison
from faultserver import FaultServer, valid_reply
from paths import read_default_values

pytestmark = pytest.mark.slow  # real runs through the runner: kernels, models

HOSTILE = " ".join(hostile.PAYLOADS) + " " + hostile.CONTROLS
SHOWN = visible_controls(HOSTILE)
SOURCE = f"source {HOSTILE}"
OVERRIDE = f"override {HOSTILE}"
UNPARSED_MARKER = "unparsed-reply"
UNPARSED_REPLY = f"not JSON {HOSTILE}"
STAGE_PAGES = ("01_load.html", "02_score.html", "03_judge.html", "04_report.html",
               "04_report.noinput.html")
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def example(key: str, question: str | None = None) -> dict:
    answer = f"answer {key} {UNPARSED_MARKER if key == '2' else ''} {HOSTILE}"
    return {
        "id": f"{key} {HOSTILE}",
        "question": question or f"question {key} {HOSTILE}",
        "context": f"context {key} {HOSTILE}",
        "answer": f"reference {key} {HOSTILE}",
        "generated_answer": answer,
        "source": SOURCE,
        "gold_id": f"doc {key} {HOSTILE}",
        "retrieved_ids": [f"doc {key} {HOSTILE}", f"other {HOSTILE}"],
        "retrieved_contexts": [f"retrieved {key} {HOSTILE}", f"other {HOSTILE}"],
        "conversation": [{"role": "user", "content": f"turn {key} {HOSTILE}"},
                         {"role": "assistant", "content": answer}],
        # a column evalbook does not read, kept as metadata: its name and values reach the pages
        f"topic {HOSTILE}": f"topic {key} {HOSTILE}",
    }


BASELINE = [example(key) for key in ("1", "2", "3", "4", "only-baseline")]
CANDIDATE = [example("1", question=f"changed question 1 {HOSTILE}"),
             *(example(key) for key in ("2", "3", "4", "only-candidate"))]


def judge_reply(body: dict) -> str:
    """Hostile text in every string of a valid reply; the groundedness reply of example 2 is not JSON."""
    prompt = body["messages"][-1]["content"]
    if UNPARSED_MARKER in prompt and "statements" in json.dumps(body.get("response_format")):
        return UNPARSED_REPLY
    return valid_reply(body, text=f"judge {HOSTILE}")


@dataclass
class Outputs:
    root: Path
    baseline: RunResult
    candidate: RunResult
    comparison: DocumentRun
    trend: Path
    index: Path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")
    return path


def hostile_profile(folder: Path, outputs: Path, base_url: str, side: str, rows: list[dict]) -> Path:
    """One run's profile: its own input, with the hostile dataset name and generator (a run on
    another input_path drops the name and generator it would inherit, so each side sets them)."""
    values = read_default_values()
    values.update(outputs_root=str(outputs), local_outputs_root=str(outputs), predictions_path=None,
                  input_path=str(write_jsonl(folder / f"{side}.jsonl", rows)),
                  generator=f"generator {HOSTILE}")
    values["dataset"]["name"] = f"dataset {HOSTILE}"
    judge = values["judge"]
    judge.update(base_url=base_url, note=f"note {HOSTILE}", sample_size=None, concurrency=2,
                 max_retries=1, timeout_seconds=30, eligible_sources=[SOURCE])
    judge["metrics"]["criteria"]["goals"] = [f"goal {HOSTILE}"]
    judge["metrics"]["relevance"]["n_questions"] = 2
    profile = folder / f"hostile-{side}.yaml"
    profile.write_text(yaml.safe_dump(values, sort_keys=False), "utf-8")
    return profile


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> Outputs:
    folder = tmp_path_factory.mktemp("hostile")
    root = folder / "outputs"
    with FaultServer(reply=judge_reply) as server, pytest.MonkeyPatch.context() as patch:
        # run_pipeline sets HF_HUB_OFFLINE=1 for the offline profile; this undoes it after.
        patch.setenv("HF_HUB_OFFLINE", "1")
        profile = hostile_profile(folder, root, server.base_url, "baseline", BASELINE)
        baseline = run_pipeline(str(profile))
        # A JSON string is a YAML double-quoted scalar: -p reads the control characters from its escapes.
        candidate = run_pipeline(str(hostile_profile(folder, root, server.base_url, "candidate", CANDIDATE)),
                                 [f"description={json.dumps(OVERRIDE)}"])
        assert server.chat_calls > 0
    comparison = run_comparison(str(profile), baseline.run_id, candidate.run_id)
    trend, _ = build_trend_page(root, root)
    # the index as the next run rebuilds it (make trend does not), linking the trend at its top
    return Outputs(root, baseline, candidate, comparison, trend, build_index(root))


def pages_written(outputs: Outputs) -> dict[Path, list[str]]:
    """Every HTML page under the outputs root, with the hostile texts it must show in full."""
    # the last: a level of the metadata column's slice, in Where it fails' table of every level
    report_texts = [f"judge {SHOWN}", f"note {SHOWN}", f"1 {SHOWN}", f"question 1 {SHOWN}", f"topic 1 {SHOWN}"]
    expected: dict[Path, list[str]] = {}
    for run in (outputs.baseline, outputs.candidate):
        expected[run.run_dir / "03_judge.html"] = [f"2 {SHOWN}", visible_controls(UNPARSED_REPLY),
                                                  f"note {SHOWN}"]
        expected[run.run_dir / "04_report.html"] = report_texts
        expected[run.run_dir / "04_report.noinput.html"] = report_texts
        # pandas cuts long cells in its own tables; these pages must still show the ids' start
        for page in ("01_load.html", "02_score.html"):
            expected[run.run_dir / page] = [hostile.SCRIPT]
        expected[run.run_dir / "01_load.html"].append("topic " + hostile.SCRIPT)  # the metadata column's name
    for page in (outputs.comparison.html, outputs.comparison.html_noinput):
        expected[Path(page)] = [f"only-baseline {SHOWN}", f"only-candidate {SHOWN}", f"1 {SHOWN}",
                                f"dataset {SHOWN}", f"override {SHOWN}"]
    # the trend's series titles name the dataset; what changed to the candidate names its override
    expected[outputs.trend] = [f"dataset {SHOWN}", f"(the profile's) → override {SHOWN}"]
    # the index clips a long value to its first characters, whole in its hover title (below)
    expected[outputs.index] = [f"Trend of dataset {SHOWN}", *(clipped(text) for text in INDEX_VALUES)]
    return expected


INDEX_VALUES = (f"dataset {SHOWN}", f"generator {SHOWN}", f"override {SHOWN}")


def clipped(text: str) -> str:
    from evalbook.publish.index import SHOWN_VALUE

    return text[:SHOWN_VALUE - 1] + "\u2026"


def test_the_index_holds_each_clipped_value_whole_in_its_hover_title(outputs):
    from html.parser import HTMLParser

    class Titles(HTMLParser):
        def __init__(self):
            super().__init__()
            self.titles = []

        def handle_starttag(self, tag, attrs):
            self.titles += [value for name, value in attrs if name == "title"]

    titles = Titles()
    titles.feed(outputs.index.read_text("utf-8"))
    for text in INDEX_VALUES:
        assert any(text in title for title in titles.titles), text


def test_the_hostile_text_reaches_the_reports_unaltered(outputs):
    for run, rows in ((outputs.baseline, BASELINE), (outputs.candidate, CANDIDATE)):
        report = json.loads(run.report_path.read_text("utf-8"))
        overrides = {"description": OVERRIDE} if run is outputs.candidate else {}
        assert report["provenance"]["params_profile"]["overrides"] == overrides
        assert [e["id"] for e in report["examples"]] == [row["id"] for row in rows]
        assert report["dataset"]["name"] == f"dataset {HOSTILE}"
        assert [e["metadata"] for e in report["examples"]] == [{f"topic {HOSTILE}": row[f"topic {HOSTILE}"]}
                                                               for row in rows]
        judged = {e["id"]: e["judge"] for e in report["examples"]}
        statement = judged[BASELINE[0]["id"]]["groundedness"]["statements"][0]
        assert statement == {"statement": f"judge {HOSTILE}", "verdict": 1,
                             "justification": f"judge {HOSTILE}"}
        unparsed = judged[BASELINE[1]["id"]]["groundedness"]
        assert unparsed["score"] is None and unparsed["raw_reply"] == UNPARSED_REPLY
        assert judged[BASELINE[0]["id"]]["relevance"]["generated_questions"] == [f"judge {HOSTILE}"] * 2
        assert judged[BASELINE[0]["id"]]["criteria"]["criteria"][0]["rationale"] == f"judge {HOSTILE}"


def test_the_trend_records_the_hostile_dataset_name_and_override_unaltered(outputs):
    doc = json.loads((outputs.root / "trend.json").read_text("utf-8"))
    assert [(series["kind"], series["dataset"]) for series in doc["series"]] == [
        ("scoring", f"dataset {HOSTILE}"), ("judge", f"dataset {HOSTILE}")]
    for series in doc["series"]:
        baseline, candidate = series["points"]
        assert (baseline["run_id"], candidate["run_id"]) == (outputs.baseline.run_id, outputs.candidate.run_id)
        assert (baseline["overrides"], candidate["overrides"]) == ({}, {"description": OVERRIDE})
        assert any(line.startswith("-p description: ") and line.endswith(f"(the profile's) → {OVERRIDE}")
                   for line in candidate["changed"]), candidate["changed"]


def test_the_comparison_lists_the_hostile_unpaired_ids(outputs):
    doc = json.loads(outputs.comparison.path.read_text("utf-8"))
    assert doc["pairing"]["only_baseline_ids"] == [BASELINE[-1]["id"]]
    assert doc["pairing"]["only_candidate_ids"] == [CANDIDATE[-1]["id"]]
    assert doc["pairing"]["question_differs_ids"] == [BASELINE[0]["id"]]


def test_every_page_is_written_and_holds_no_raw_control_character(outputs):
    written = sorted(outputs.root.rglob("*.html"))
    assert written == sorted(pages_written(outputs)), "a page the test does not open, or a missing page"
    for page in written:
        assert not RAW_CONTROL.search(page.read_text("utf-8")), page


def test_every_page_opens_without_a_dialog_or_an_element_made_from_a_payload(outputs):
    with offline_browser() as browser:
        for page, texts in pages_written(outputs).items():
            seen = inspect_offline(page, browser)
            active = seen["active"]
            assert seen["dialogs"] == [], page
            assert active["handlers"] == [] and active["javascript_urls"] == [], (page, active)
            # the pages fold sections in details elements of their own; none made from the payload
            assert not [d for d in active["details"] if "ontoggle" in d.lower()] and active["svgs"] == [], (page, active)
            assert not [s for s in active["scripts"] if "alert(" in s["text"]], (page, active["scripts"])
            assert all(image["src"].startswith("data:") for image in seen["images"]), (page, seen["images"])
            assert seen["non_local_requests"] == [], page
            for text in texts:
                assert text in seen["text"], (page, text)

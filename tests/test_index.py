"""The runs index lists every run folder, escaped, offline and newest first: lib/evalbook/publish/index.py."""

import json
import os
import re
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest

from browser import inspect_offline
from evalbook.publish.pages import external_references
from evalbook.layout import CALIBRATION_DIR, COMPARISONS_DIR
from evalbook.formatting import MISSING
from evalbook.publish.catalog import collect_calibrations, collect_comparisons, collect_runs
from evalbook.publish.index import build_index

JUDGED = "11111111-1111-4111-8111-111111111111"
FAILED = "22222222-2222-4222-8222-222222222222"
RUNNING = "33333333-3333-4333-8333-333333333333"
BROKEN_REPORT = "44444444-4444-4444-8444-444444444444"
OLD_SCHEMA = "55555555-5555-4555-8555-555555555555"
HOSTILE_NAME = "<script>alert('x')</script> & co"


def _day(root: Path, env: str, started: datetime) -> Path:
    return root / env / "eval-runs" / f"{started:%Y}" / f"{started:%m}" / f"{started:%d}"


def _summary(mean: float | None) -> dict:
    return {"mean": mean, "p10": None, "p50": None, "p90": None, "n": 4, "n_missing": 0}


def _report(run_id: str, dataset_name: str, f1: float | None, judge: dict | None) -> dict:
    report = {
        "schema_version": "1.1", "run_id": run_id, "timestamp": "2026-11-29T10:00:30Z",
        "dataset": {"name": dataset_name, "split": "validation", "n_examples": 4},
        "models": {"generator": "gen-model", "bertscore": "bert-model",
                   "sentence_transformer": "st-model"},
        "retrieval_summary": {"top_k_match_rate": 0.5, "mrr_at_k": 0.375, "k": 5, "n": 4, "n_missing": 0},
        "answer_similarity_summary": {"bertscore_f1": _summary(f1), "sentence_cosine": _summary(0.25)},
        "provenance": {"bertscore_num_layers": 6},
    }
    if judge is not None:
        report["judge_summary"] = judge
    return report


def _run(root: Path, env: str, run_id: str, started: datetime, status: str | None,
         report: str | dict | None = None, files: tuple[str, ...] = (), failure: str | None = None,
         stages: list | None = None, overrides: dict | None = None) -> Path:
    run_dir = _day(root, env, started) / run_id
    run_dir.mkdir(parents=True)
    for name in files:
        (run_dir / name).write_text(f"<p>{name}</p>")
    if status is None:
        marker = run_dir / "RUNNING"
        marker.touch()
        os.utime(marker, (started.timestamp(), started.timestamp()))
        return run_dir
    summary = {"run_id": run_id, "status": status, "started_at": started.isoformat(),
               "finished_at": started.isoformat(), "stages": stages or []}
    if overrides is not None:
        summary["params_profile"] = {"name": "default", "version": 1, "overrides": overrides}
    (run_dir / "run.json").write_text(json.dumps(summary))
    if failure is not None:
        (run_dir / "FAILED").write_text(failure)
    if report is not None:
        text = report if isinstance(report, str) else json.dumps(report)
        (run_dir.parent / f"{run_id}.json").write_text(text)
    return run_dir


def at(hour: int, day: int = 29) -> datetime:
    return datetime(2026, 11, day, hour, 0, 5, tzinfo=timezone.utc)


@pytest.fixture
def outputs(tmp_path) -> Path:
    judge = {"status": "ran", "label": "judge-0123456789abcdef",
             "metrics": {"groundedness": {"mean": 0.875}, "relevance": {"mean": None}}}
    not_run = {"status": "not_run", "label": None, "metrics": {}}
    judged = _report(JUDGED, HOSTILE_NAME, 0.8125, judge)
    judged["checks_summary"] = {"checks": {}, "n_examples": 4, "n_examples_failing": 1, "n_examples_with_errors": 0}
    _run(tmp_path, "local", JUDGED, at(10), "succeeded", judged,
         files=("04_report.html", "04_report.noinput.html", "04_report.ipynb"))
    failed_stage = {"stage": "02_score", "status": "failed", "error": "boom",
                    "html": "/elsewhere/02_score.html"}
    _run(tmp_path, "ci", FAILED, at(8, day=30), "failed", files=("02_score.html",),
         failure="stage 02_score failed\nValueError: boom", stages=[failed_stage])
    _run(tmp_path, "local", RUNNING, at(9, day=30), None)
    _run(tmp_path, "local", BROKEN_REPORT, at(23, day=28), "succeeded", "{not json",
         files=("04_report.html",))
    # Schema 1.0 reports have no judge_summary; NaN must never reach the page.
    old = _report(OLD_SCHEMA, "plain", None, None)
    old["retrieval_summary"]["top_k_match_rate"] = float("nan")
    del old["retrieval_summary"]["mrr_at_k"]  # a report before schema 1.10
    _run(tmp_path, "local", OLD_SCHEMA, at(7), "succeeded", old)
    return tmp_path


class _Page(HTMLParser):
    """The rows' cell texts, each run's reason line (by its row's position), every link's href and
    every hover title."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.reasons: dict[int, str] = {}
        self.hrefs: list[str] = []
        self.titles: list[str] = []
        self._in_body = False
        self._reason_row = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if "title" in attributes:
            self.titles.append(attributes["title"])
        if tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self._reason_row = "reason-row" in (attributes.get("class") or "")
            if self._reason_row:
                self.reasons[len(self.rows) - 1] = ""
            else:
                self.rows.append([])
        elif tag == "td" and self._in_body and not self._reason_row:
            self.rows[-1].append("")
        elif tag == "a":
            self.hrefs.append(attributes["href"])

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._in_body = False

    def handle_data(self, data):
        if self._in_body and self._reason_row:
            self.reasons[len(self.rows) - 1] += data.strip()
        elif self._in_body and self.rows and self.rows[-1]:
            self.rows[-1][-1] += data


def _parse(index: Path) -> _Page:
    page = _Page()
    page.feed(index.read_text("utf-8"))
    return page


def test_collect_runs_lists_every_run_newest_first(outputs):
    rows = collect_runs(outputs)
    assert [row["run_id"] for row in rows] == [RUNNING, FAILED, JUDGED, OLD_SCHEMA, BROKEN_REPORT]
    by_id = {row["run_id"]: row for row in rows}
    assert by_id[RUNNING]["status"] == "running or crashed"
    assert by_id[RUNNING]["started_at"] == at(9, day=30)
    assert by_id[FAILED]["status"] == "failed" and by_id[FAILED]["env"] == "ci"
    assert by_id[FAILED]["reason"].startswith("stage 02_score failed")
    assert by_id[BROKEN_REPORT]["status"] == "unreadable"
    assert by_id[BROKEN_REPORT]["reason"].startswith("report JSON: Expecting property name")
    assert by_id[JUDGED]["report"] == outputs / "local/eval-runs/2026/11/29" / f"{JUDGED}.json"
    assert [row["run_id"] for row in rows if row["status"] == "succeeded" and row["report"]] == [
        JUDGED, OLD_SCHEMA]
    assert by_id[JUDGED]["metrics"] == {"bertscore_f1": 0.8125, "sentence_cosine": 0.25,
                                        "top_k_match": 0.5, "mrr_at_k": 0.375, "groundedness": 0.875,
                                        "relevance": None}


def test_index_shows_every_run_with_its_values(outputs):
    index = build_index(outputs)
    assert index == outputs / "index.html"
    page = _parse(index)
    rows = page.rows
    assert [next(i for i in (RUNNING, FAILED, JUDGED, OLD_SCHEMA, BROKEN_REPORT) if i[:8] in row[0])
            for row in rows] == [RUNNING, FAILED, JUDGED, OLD_SCHEMA, BROKEN_REPORT]
    running, failed, judged, old, broken = rows
    assert running[0].startswith("2026-11-30 09:00:05")
    assert running[2] == "running or crashed"
    # why a run is not a success: one sentence on a line of its own under its row
    assert failed[2] == "failed" and page.reasons[1] == "stage 02_score failed"
    assert broken[2] == "unreadable" and "Expecting property name" in page.reasons[4]
    assert 2 not in page.reasons  # a success has no reason line
    # a run id shows its first 8 characters, whole on hover
    assert judged[:3] == [f"2026-11-29 10:00:05{JUDGED[:8]}", "local", "succeeded"]
    assert JUDGED in page.titles
    # a long value is cut with an ellipsis, whole on hover; the judge's label shows its hash's start
    assert judged[3] == f"{HOSTILE_NAME[:15]}\u2026validation · n=4" and HOSTILE_NAME in page.titles
    assert judged[4] == "sentence st-modelBERTScore bert-model (layer 6)generator gen-model"
    assert judged[5] == "judge-0123456\u2026" and "judge-0123456789abcdef" in page.titles
    assert judged[6] == MISSING  # its run.json records no overrides
    # BERTScore F1, sentence cosine, top-k match (k), MRR@k (k), judge groundedness, judge relevance
    assert judged[7:13] == ["0.812", "0.250", "0.500k=5", "0.375k=5", "0.875", MISSING]
    assert judged[13] == "1 of 4"  # examples failing a check (issue 48)
    assert old[5] == MISSING and old[7:13] == [MISSING, "0.250", MISSING, MISSING, MISSING, MISSING]
    assert old[13] == MISSING  # a report from before the checks
    assert running[3:14] == [MISSING] * 11


def test_index_escapes_data_and_never_says_nan(outputs):
    text = build_index(outputs).read_text("utf-8")
    assert "<script>alert" not in text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; co" in text
    assert not re.search(r"\bnan\b", text, re.IGNORECASE)


def test_index_links_are_relative_and_point_at_files(outputs):
    index = build_index(outputs)
    hrefs = _parse(index).hrefs
    assert hrefs
    for href in hrefs:
        assert not re.match(r"^([a-z]+:|/)", href), href
        assert (index.parent / href).is_file(), href
    judged = f"local/eval-runs/2026/11/29/{JUDGED}"
    assert {f"{judged}/04_report.html", f"{judged}/04_report.noinput.html",
            f"local/eval-runs/2026/11/29/{JUDGED}.json", f"{judged}/run.json"} <= set(hrefs)
    assert f"ci/eval-runs/2026/11/30/{FAILED}/02_score.html" in hrefs
    # An unreadable report stays reachable, so one can see what is wrong with it.
    assert f"local/eval-runs/2026/11/28/{BROKEN_REPORT}.json" in hrefs


def test_index_is_self_contained(outputs):
    text = build_index(outputs).read_text("utf-8")
    assert external_references(text) == []
    assert "<link" not in text
    # one script, the filter box's, inline
    assert text.count("<script") == 1 and "<script>" in text and "<script src" not in text


def test_rebuilding_replaces_the_index(outputs):
    index = build_index(outputs)
    assert "66666666" not in index.read_text("utf-8")
    later = "66666666-6666-4666-8666-666666666666"
    _run(outputs, "local", later, at(12, day=30), "failed", failure="later failure")
    assert build_index(outputs) == index
    assert _parse(index).rows[0][0].endswith(later[:8])
    assert sorted(path.name for path in outputs.iterdir()) == ["ci", "index.html", "local"]


def test_an_empty_outputs_root_gets_an_index(tmp_path):
    assert collect_runs(tmp_path) == []
    assert "No runs yet." in build_index(tmp_path).read_text("utf-8")


@pytest.mark.slow  # headless Chromium
def test_index_opens_offline_in_chromium(outputs):
    seen = inspect_offline(build_index(outputs))
    assert seen["non_local_requests"] == []
    assert seen["console_errors"] == []
    assert seen["title"] == "evalbook runs"


def test_a_succeeded_run_without_its_report_says_so(tmp_path):
    _run(tmp_path, "local", JUDGED, at(10), "succeeded")
    (row,) = collect_runs(tmp_path)
    assert (row["status"], row["report"]) == ("succeeded", None)
    assert row["reason"] == f"the report {JUDGED}.json is missing"
    assert f"the report {JUDGED}.json is missing" in build_index(tmp_path).read_text("utf-8")


def test_comparison_folders_beside_runs_are_not_runs(outputs):
    day = outputs / "local/eval-runs/2026/11/29"
    (day / COMPARISONS_DIR / "aaaa-vs-bbbb-20261129T000000Z").mkdir(parents=True)
    (day / COMPARISONS_DIR / "aaaa-vs-bbbb-20261129T000000Z.json").write_text("{}", "utf-8")
    assert COMPARISONS_DIR not in [row["run_id"] for row in collect_runs(outputs)]


def test_comparisons_get_their_own_table_with_deltas_and_links(outputs):
    day = outputs / "local/eval-runs/2026/11/29" / COMPARISONS_DIR
    name = "aaaa-vs-bbbb-20261129T100000Z-1f2e"
    (day / name).mkdir(parents=True)
    (day / name / "05_compare.html").write_text("<html></html>", "utf-8")
    metric = {"metric": "bertscore_f1", "compared": True, "mean_delta": -0.0931,
              "ci_low": -0.12, "ci_high": -0.064}
    cosine = {"metric": "sentence_cosine", "compared": False, "mean_delta": None,
              "ci_low": None, "ci_high": None}
    doc = {"kind": "compare", "created_at": "2026-11-29T10:00:00Z",
           "baseline": {"run_id": "aaaa-run"}, "candidate": {"run_id": "bbbb-<run>"},
           "pairing": {"n_paired": 32}, "gates": {"judge": {"compared": False}},
           "metrics": [metric, cosine]}
    (day / f"{name}.json").write_text(json.dumps(doc), "utf-8")
    (day / "broken.json").write_text("{nope", "utf-8")
    rows = collect_comparisons(outputs)
    by_name = {row["path"].name: row for row in rows}
    assert by_name[f"{name}.json"]["deltas"] == {"bertscore_f1": (-0.0931, -0.12, -0.064),
                                               "sentence_cosine": None}
    assert by_name["broken.json"]["reason"]
    page = build_index(outputs).read_text("utf-8")
    assert "<h2>Comparisons</h2>" in page and "2 comparisons" in page
    assert "-0.093" in page and 'class="num worse"' in page, "a CI wholly below 0 is marked worse"
    assert "bbbb-&lt;run&gt;" in page, "values are escaped"
    assert f"{COMPARISONS_DIR}/{name}/05_compare.html" in page
    assert "unreadable" in page and "not uploaded" not in page
    assert external_references(page) == []
    # a comparison whose upload was refused says so, escaped
    (day / name / "NOT_UPLOADED").write_text('not uploaded to s3://b/"<x>: access denied\n', "utf-8")
    (row,) = [row for row in collect_comparisons(outputs) if row["path"].name == f"{name}.json"]
    assert row["not_uploaded"] == 'not uploaded to s3://b/"<x>: access denied'
    page = build_index(outputs).read_text("utf-8")
    assert 'title="not uploaded to s3://b/&quot;&lt;x&gt;: access denied">not uploaded</div>' in page
    # the comparisons are not runs
    assert name not in [row["run_id"] for row in collect_runs(outputs)]


def test_calibrations_get_their_own_table_with_rho_alpha_and_links(outputs):
    calibrations = outputs / "local/eval-runs/2026/11/29/run-<a>" / CALIBRATION_DIR
    name = "run-a-20261129T110000Z-9c1d"
    (calibrations / name).mkdir(parents=True)
    (calibrations / name / "06_calibrate.noinput.html").write_text("<html></html>", "utf-8")
    rho = {"estimate": 0.688, "low": 0.408, "high": 0.872, "p_value": 0.0, "reason": None}
    doc = {"kind": "calibration", "created_at": "2026-11-29T11:00:00Z", "run": {"run_id": "run-<a>"},
           "labels": {"path": "/somewhere/labels<x>.csv", "kind": "ordinal"}, "matching": {"n_matched": 32},
           "raters": {"alpha": 0.993},
           "metrics": [{"metric": "bertscore_f1", "rank_agreement": {"spearman": rho}},
                       {"metric": "sentence_cosine", "rank_agreement": None}]}
    (calibrations / f"{name}.json").write_text(json.dumps(doc), "utf-8")
    (calibrations / "broken.json").write_text("{nope", "utf-8")
    rows = {row["path"].name: row for row in collect_calibrations(outputs)}
    assert rows[f"{name}.json"]["rho"] == {"bertscore_f1": (0.688, 0.408, 0.872), "sentence_cosine": None}
    assert rows[f"{name}.json"]["labels"] == "labels<x>.csv", "the file's name, not where it lay"
    assert rows["broken.json"]["reason"]
    page = build_index(outputs).read_text("utf-8")
    assert "<h2>Calibrations</h2>" in page and "2 calibrations" in page
    assert "0.688" in page and "[0.408, 0.872]" in page and "0.993" in page
    assert "run-&lt;a&gt;" in page and "labels&lt;x&gt;.csv" in page, "values are escaped"
    assert "/somewhere" not in page
    assert "06_calibrate.noinput.html" in page and "unreadable" in page
    assert external_references(page) == []


# ---------------------------------------------------------------- live, crashed and interrupted runs

def _marker(run_dir: Path, **fields) -> None:
    from evalbook.runs import running_marker

    record = json.loads(running_marker(at(9)))
    (run_dir / "RUNNING").write_text(json.dumps({**record, **fields}))


def test_a_run_whose_runner_lives_is_running(tmp_path):
    run_dir = _day(tmp_path, "local", at(9)) / RUNNING
    run_dir.mkdir(parents=True)
    _marker(run_dir)  # this test's process is the runner
    (row,) = collect_runs(tmp_path)
    assert (row["status"], row["reason"]) == ("running", None)


def test_a_run_whose_runner_is_gone_is_crashed_with_its_last_stage(tmp_path):
    import psutil

    finished = psutil.Popen(["true"])
    finished.wait()
    run_dir = _day(tmp_path, "local", at(9)) / RUNNING
    run_dir.mkdir(parents=True)
    (run_dir / "01_load.ipynb").write_text("{}")
    (run_dir / "02_score.ipynb").write_text("{}")
    _marker(run_dir, pid=finished.pid)
    (row,) = collect_runs(tmp_path)
    assert row["status"] == "crashed"
    assert f"pid {finished.pid}" in row["reason"] and "last stage it started was 02_score" in row["reason"]
    assert 'class="status crashed"' in build_index(tmp_path).read_text()


def test_a_folder_with_neither_run_json_nor_marker_is_crashed(tmp_path):
    (_day(tmp_path, "local", at(9)) / RUNNING).mkdir(parents=True)
    (row,) = collect_runs(tmp_path)
    assert row["status"] == "crashed" and "neither run.json nor a RUNNING marker" in row["reason"]


def test_a_marker_from_another_host_cannot_be_told(tmp_path):
    run_dir = _day(tmp_path, "local", at(9)) / RUNNING
    run_dir.mkdir(parents=True)
    _marker(run_dir, host="elsewhere.invalid")
    (row,) = collect_runs(tmp_path)
    assert row["status"] == "running or crashed" and "host elsewhere.invalid" in row["reason"]


def test_an_interrupted_run_shows_its_reason(tmp_path):
    _run(tmp_path, "local", FAILED, at(9), "interrupted", failure="interrupted by SIGTERM during 02_score")
    (row,) = collect_runs(tmp_path)
    assert row["status"] == "interrupted" and row["reason"] == "interrupted by SIGTERM during 02_score"
    assert 'class="status interrupted"' in build_index(tmp_path).read_text()


def test_the_report_link_opens_the_no_code_page_and_each_run_shows_its_overrides(tmp_path):
    run_id = "77777777-7777-4777-8777-777777777777"
    overrides = {"predictions_path": "/home/me/evalbook/data/sample/predictions-truncated.jsonl", "limit": 5,
                 "judge.base_url": "http://127.0.0.1:1/v1"}
    _run(tmp_path, "local", run_id, at(10), "succeeded", _report(run_id, "set", 0.5, None),
         files=("04_report.html", "04_report.noinput.html", "04_report.ipynb"), overrides=overrides)
    _run(tmp_path, "local", OLD_SCHEMA, at(9), "succeeded", _report(OLD_SCHEMA, "set", 0.4, None),
         overrides={})
    text = build_index(tmp_path).read_text("utf-8")
    folder = f"local/eval-runs/2026/11/29/{run_id}"
    assert f'<a href="{folder}/04_report.noinput.html">report</a>' in text
    assert f'<a href="{folder}/04_report.html">report with code</a>' in text
    assert "predictions_path = <span class=\"nw\" title=\"predictions-truncated.jsonl\">predictions-tru" in text
    assert "limit = <span class=\"nw\">5</span>" in text
    assert "judge.base_url = <span class=\"nw\" title=\"http://127.0.0.1:1/v1\">" in text and "/home/me" not in text
    assert "no overrides" in text


def test_the_index_fits_a_1280_pixel_screen(outputs):
    from browser import offline_browser

    index = build_index(outputs)
    with offline_browser() as browser:
        page = browser.new_context(offline=True, viewport={"width": 1280, "height": 900}).new_page()
        page.goto(index.resolve().as_uri(), wait_until="load")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 1280


def test_the_index_breaks_no_word_and_its_filter_box_hides_rows(outputs):
    """Checked in Chromium's layout: no cell's word runs over two lines (test_page_lint's check),
    and typing in the filter box leaves the rows whose text holds every word typed."""
    from browser import offline_browser
    from test_page_lint import _BROKEN_WORDS

    index = build_index(outputs)
    with offline_browser() as browser:
        page = browser.new_context(offline=True, viewport={"width": 1280, "height": 900}).new_page()
        page.goto(index.resolve().as_uri(), wait_until="load")
        assert page.evaluate(_BROKEN_WORDS) == []
        visible = "() => Array.from(document.querySelectorAll('tbody.run'), (run) => !run.hidden)"
        assert page.evaluate(visible) == [True] * 5
        page.fill("#evalbook-filter", "FAILED ci")
        assert page.evaluate(visible) == [False, True, False, False, False]
        assert page.inner_text("#evalbook-filter-count") == "1 of 5 rows shown"
        page.fill("#evalbook-filter", JUDGED)  # a full run id, though the row shows its first 8 characters
        assert page.evaluate(visible) == [False, False, True, False, False]
        page.fill("#evalbook-filter", "")
        assert page.evaluate(visible) == [True] * 5


@pytest.mark.parametrize("reason, sentence", [
    ("stage 01_load failed: file /tmp/x/mine.jsonl; column 'context'; row 1: must hold text\n"
     "executed notebook: /tmp/x/out/01_load.ipynb\nfailing cell [4]:\n    run_load(ctx)\nLoadError: ...",
     "stage 01_load failed: file mine.jsonl; column 'context'; row 1: must hold text"),
    # a run from before the sentence: its first line named the notebook; its error's message stands in
    ("stage 02_score failed; executed notebook: /tmp/x/out/02_score.ipynb\nfailing cell [5]:\n    x\n"
     "ScoringError: the model ran out of memory",
     "stage 02_score failed: the model ran out of memory"),
    ("interrupted by SIGTERM during 02_score", "interrupted by SIGTERM during 02_score"),
])
def test_a_reason_reads_as_one_sentence_without_absolute_paths(reason, sentence, tmp_path):
    from evalbook.publish.index import reason_sentence

    assert reason_sentence(reason, tmp_path) == sentence

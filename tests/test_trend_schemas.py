"""headline.json and trend.json against their shipped schemas (schemas/headline-v1.json and
trend-v1.json): what evalbook writes matches them, and a document that does not is refused
before anything is written."""

import json
import re

import pytest

from evalbook.metrics import METRICS
from evalbook.layout import EXAMPLE_VALUES, HEADLINE_FILE, TREND_FILE
from evalbook.publish.trend import build_trend_page
from evalbook.runs import read_run
from evalbook.trend import document as trend_document
from evalbook.trend import headline as headline_module
from evalbook.trend.document import TrendDocumentError, build_trend, read_previous, validate_trend, write_trend
from evalbook.trend.headline import HeadlineError, build_headline, validate_headline, write_headline
from evalbook.validation import HEADLINE_SCHEMA, TREND_SCHEMA, schema_problems, shipped_schema
from test_trend import N, f1_values, make_run, report, run_id


@pytest.fixture
def runs(tmp_path):
    """Five runs under tmp_path: judged and not, a real step, a step within noise, one not
    paired (other ids) and a failed run."""
    f1 = f1_values()
    make_run(tmp_path, 0, report(run_id(1), f1, judge_label="judge-A"))
    make_run(tmp_path, 1, report(run_id(2), f1 - 0.05, judge_label="judge-A", overrides={"seed": 1}))
    make_run(tmp_path, 2, report(run_id(3), f1 - 0.05, judge_label="judge-A", commit="b" * 40))
    make_run(tmp_path, 3, report(run_id(4), f1, ids=[f"other-{i}" for i in range(N)]))
    failed = make_run(tmp_path, 4, report(run_id(5), f1), headline=False)
    summary = json.loads((failed / "run.json").read_text())
    (failed / "run.json").write_text(json.dumps({**summary, "status": "failed"}))
    return tmp_path


def test_each_schema_names_the_version_its_writer_stamps():
    assert shipped_schema(HEADLINE_SCHEMA)["title"].endswith(f"schema version {headline_module.SCHEMA_VERSION}")
    assert shipped_schema(TREND_SCHEMA)["title"].endswith(f"schema version {trend_document.SCHEMA_VERSION}")


def test_the_headlines_evalbook_writes_match_their_schema(runs):
    written = sorted(runs.rglob(HEADLINE_FILE))
    assert len(written) == 4
    for path in written:
        assert schema_problems(json.loads(path.read_text()), shipped_schema(HEADLINE_SCHEMA), "headline") == []
    failed = read_run(next(p for p in runs.rglob("run.json") if run_id(5) in str(p)).parent)
    headline = build_headline(failed, failed.report_data)
    validate_headline(headline)
    assert headline["status"] == "failed"


@pytest.mark.parametrize("damage, said", [
    (lambda h: h.update(status="done"), "status"),
    (lambda h: h["metrics"]["bertscore_f1"].update(mean=float("nan")), "NaN"),
    (lambda h: h.update(surplus=1), "surplus"),
    (lambda h: h["pass_rates"]["groundedness"].update(rate=1.5), "pass_rates/groundedness/rate"),
    (lambda h: h.pop("run_id"), "run_id"),
])
def test_a_headline_that_does_not_match_is_refused_before_anything_is_written(tmp_path, monkeypatch, damage, said):
    built = headline_module.build_headline

    def damaged(record, report_data):
        headline = built(record, report_data)
        damage(headline)
        return headline

    run_dir = make_run(tmp_path, 0, report(run_id(1), f1_values(), judge_label="judge-A"), headline=False)
    monkeypatch.setattr(headline_module, "build_headline", damaged)
    record = read_run(run_dir)
    with pytest.raises(HeadlineError, match="headline does not match schema headline-v1.json") as refused:
        write_headline(record, record.report_data)
    assert said in str(refused.value)
    assert not (run_dir / HEADLINE_FILE).exists() and not (run_dir / EXAMPLE_VALUES).exists()


def test_the_trend_evalbook_writes_matches_its_schema_with_every_kind_of_step(runs):
    build_trend_page(runs, runs)
    document = json.loads((runs / TREND_FILE).read_text())
    assert schema_problems(document, shipped_schema(TREND_SCHEMA), "trend") == []
    statuses = {step["status"] for series in document["series"] for point in series["points"]
                for step in point["steps"].values()}
    assert statuses == {"real", "within noise", "not paired"}
    assert {series["kind"] for series in document["series"]} == {"scoring", "judge"}
    assert document["left_out"] == {"did not succeed": 1}


@pytest.mark.parametrize("damage, said", [
    (lambda d: d["series"][0]["points"][1]["steps"]["bertscore_f1"].update(status="huge"), "status"),
    (lambda d: d["series"][0]["points"][1]["steps"]["bertscore_f1"].update(delta=None), "delta"),
    (lambda d: d["settings"].update(min_paired=0), "min_paired"),
    (lambda d: d["left_out"].update(odd="1"), "left_out/odd"),
    (lambda d: d.update(schema_version="2.0"), "schema_version"),
])
def test_a_trend_that_does_not_match_is_refused_and_the_earlier_one_kept(runs, damage, said):
    build_trend_page(runs, runs)
    before = (runs / TREND_FILE).read_bytes()
    document = json.loads(before)
    real = document["series"][0]["points"][1]["steps"]["bertscore_f1"]
    assert real["status"] in ("real", "within noise")  # the step the damage reaches is a judged one
    damage(document)
    with pytest.raises(TrendDocumentError, match="trend document does not match schema trend-v1.json") as refused:
        write_trend(document, runs / TREND_FILE)
    assert said in str(refused.value)
    assert (runs / TREND_FILE).read_bytes() == before


def test_a_previous_trend_that_does_not_match_is_not_reused(runs, monkeypatch):
    build_trend_page(runs, runs)
    path = runs / TREND_FILE
    document = json.loads(path.read_text())
    assert read_previous(path) == document
    document["series"][0]["points"][1]["steps"]["bertscore_f1"]["delta"] = "0.5"
    path.write_text(json.dumps(document))
    assert read_previous(path) is None
    read = []
    monkeypatch.setattr(trend_document, "read_values", lambda headline: read.append(headline["run_id"]) or None)
    validate_trend(build_trend(runs, previous=read_previous(path)))
    assert read  # its steps are worked out again, not taken from it


def test_the_headline_schema_takes_every_metric_name_of_the_registry():
    for where in ("metrics", "pass_rates"):
        pattern = shipped_schema(HEADLINE_SCHEMA)["properties"][where]["propertyNames"]["pattern"]
        assert all(re.fullmatch(pattern, metric.name) for metric in METRICS)


def test_an_old_report_s_nan_mean_becomes_null_in_its_headline(tmp_path):
    """A report read by Python's json may hold NaN for a mean it had no value of; the headline,
    JSON with no NaN, says null."""
    old = report(run_id(1), f1_values())
    del old["intervals"]
    old["answer_similarity_summary"] = {"bertscore_f1": {"mean": float("nan"), "n": N},
                                        "sentence_cosine": {"mean": 0.5, "n": N}}
    run_dir = make_run(tmp_path, 0, old)
    headline = json.loads((run_dir / HEADLINE_FILE).read_text())
    assert headline["metrics"]["bertscore_f1"]["mean"] is None
    assert headline["metrics"]["sentence_cosine"]["mean"] == 0.5

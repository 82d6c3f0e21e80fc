"""Checks in a run (issue 48): every check on every example (evalbook.checks.run), the report's
`checks` and `checks_summary`, what the headline and summary.md say of them, and a checks file
refused in the runner's pre-flight."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from evalbook.__main__ import main
from evalbook.checks.checksfile import parse_checks
from evalbook.checks.protocol import checks_summary
from evalbook.checks.run import NO_ANSWER, check_settings, example_context, run_checks
from evalbook.params import load_profile
from evalbook.publish.summary import run_summary_md
from evalbook.report.checks import SIMILARITY_IS_NOT_CORRECTNESS, checks_table, failing_answers
from evalbook.report.headline import headline_html
from evalbook.validation import validate_report
from paths import DEFAULT_PROFILE, ROOT
from test_report import canonical_frame, make_report

FACTS_ON = {"facts": {"enabled": True, "fail_beyond_reference": False, "fail_missing": False}, "path": None}
HOSTILE = "<script>alert('answer')</script>"


def canonical(**columns) -> pd.DataFrame:
    frame = canonical_frame()
    for name, values in columns.items():
        frame[name] = pd.Series(values, dtype=object)
    return frame


def statuses(outcomes) -> list[list[tuple[str, str]]]:
    return [[(o.check, o.status) for o in example] for example in outcomes]


def test_the_fact_check_reads_the_answer_against_the_reference_and_a_missing_answer_is_an_error():
    frame = canonical(reference_answer=["Spiders have eight legs.", "It opens at 9 a.m.", "Plain prose.",
                                        "Water boils at 100 °C.", "x"],
                      generated_answer=["Spiders have six legs.", "It opens at 9am.", "Some prose.",
                                        "Water boils at 100 degrees Celsius.", None])
    frame["has_prediction"] = [True, True, True, True, False]
    outcomes = run_checks(frame, check_settings(FACTS_ON))
    assert statuses(outcomes) == [[("facts", "fail")], [("facts", "pass")], [("facts", "pass")],
                                  [("facts", "pass")], [("facts", "error")]]
    assert "six" in outcomes[0][0].reason and "eight" in outcomes[0][0].reason
    assert outcomes[4][0].reason == NO_ANSWER


def test_a_fact_of_the_retrieved_chunks_is_supported_and_is_not_an_invention():
    row = {"context": "The museum opens at 10:00.", "retrieved_contexts": ["Tickets cost £12.", "  "]}
    assert example_context(row) == "The museum opens at 10:00.\n\nTickets cost £12."
    frame = canonical(reference_answer=["The museum opens at 10:00."] * 5,
                      generated_answer=["It opens at 10:00 and tickets cost £12."] * 4 + [None],
                      context=["The museum opens at 10:00."] * 5,
                      retrieved_contexts=[["Tickets cost £12."], None, [], ["Tickets cost £15."], None])
    outcomes = run_checks(frame, check_settings(FACTS_ON))
    assert [example[0].status for example in outcomes[:4]] == ["pass", "fail", "fail", "fail"]


def test_the_file_s_checks_apply_by_scope_after_the_fact_check():
    assertions = parse_checks({"version": 1, "checks": [
        {"name": "short", "max_words": 3},
        {"name": "e2-says-g2", "contains": "g2", "ids": ["e2"]},
    ]}, "checks.yaml")
    off = {**FACTS_ON, "facts": {**FACTS_ON["facts"], "enabled": False}}
    outcomes = run_checks(canonical_frame(), check_settings(off, assertions))
    assert statuses(outcomes)[:2] == [[("short", "pass")], [("short", "pass"), ("e2-says-g2", "pass")]]
    assert statuses(outcomes)[4] == [("short", "error")]  # e5 has no prediction
    assert run_checks(canonical_frame(), check_settings(off)) == [[]] * 5


def test_a_scenario_reply_check_is_not_a_row_check():
    assertions = parse_checks({"version": 1, "checks": [
        {"name": "short", "max_words": 3}, {"name": "polite", "not_contains": "no", "turn": "every"}]}, "c.yaml")
    assert not check_settings(FACTS_ON, assertions).assertions[1:]  # tests/test_scenario_checks.py applies it


def checked_report() -> dict:
    frame = canonical(reference_answer=["Spiders have eight legs.", "It costs £14.", "ok", "ok", "x"],
                      generated_answer=[f"Spiders have six legs. {HOSTILE}", "It costs £14.", "ok", "ok", None])
    outcomes = run_checks(frame, check_settings(FACTS_ON))
    records = [[outcome.as_record() for outcome in example] for example in outcomes]
    return make_report(canonical=frame, checks=(records, checks_summary(outcomes)))


def test_the_report_holds_each_example_s_outcomes_and_the_run_s_summary():
    report = checked_report()
    validate_report(report)
    assert [len(example["checks"]) for example in report["examples"]] == [1] * 5
    assert report["examples"][0]["checks"][0]["status"] == "fail"
    summary = report["checks_summary"]
    assert (summary["n_examples"], summary["n_examples_failing"], summary["n_examples_with_errors"]) == (5, 1, 1)
    assert summary["checks"]["facts"]["pass_rate"] == 0.75
    assert make_report()["checks_summary"] is None  # no check ran
    validate_report(make_report())


def test_the_headline_and_summary_md_say_how_many_failed_with_hostile_text_escaped():
    report = checked_report()
    page = headline_html(report)
    assert "1 of 5 answers failed a check</strong> (facts: 1); 1 could not be checked." in page
    assert SIMILARITY_IS_NOT_CORRECTNESS.replace("'", "&#x27;") in page
    markdown = run_summary_md(report, [])
    assert "**1 of 5 answers failed a check** (facts: 1); 1 could not be checked." in markdown
    assert re.search(r"^- e1: facts: six: the reference says eight", markdown, re.M)
    failing = failing_answers(report)
    assert failing["id"].tolist() == ["e1"] and HOSTILE in failing["answer"].iloc[0]
    assert "<script>" not in page and "<script>" not in markdown
    table = checks_table(report)
    assert table.to_dict("records") == [{"check": "facts", "passed": 3, "failed": 1, "errors": 1, "pass rate": 0.75,
                                         "95% interval": table["95% interval"].iloc[0]}]


def test_a_reason_quoting_hostile_text_reaches_summary_md_and_the_page_escaped():
    from evalbook.escaping import readable_table

    assertions = parse_checks({"version": 1, "checks": [{"name": "says-it", "contains": HOSTILE}]}, "checks.yaml")
    frame = canonical_frame()
    outcomes = run_checks(frame, check_settings({**FACTS_ON, "facts": {**FACTS_ON["facts"], "enabled": False}},
                                                assertions))
    records = [[outcome.as_record() for outcome in example] for example in outcomes]
    report = make_report(canonical=frame, checks=(records, checks_summary(outcomes)))
    assert HOSTILE in report["examples"][0]["checks"][0]["reason"]  # the JSON keeps it as written
    markdown = run_summary_md(report, [])
    assert "- e1: says-it:" in markdown and "<script>" not in markdown and "&lt;script&gt;" in markdown
    page = readable_table(failing_answers(report), "failing").to_html()
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_failing_answers_come_most_checks_failed_first_then_the_highest_bertscore():
    report = make_report()
    fail = {"check": "c", "status": "fail", "reason": "r"}
    for example, outcomes in zip(report["examples"], [[fail], [fail, {**fail, "check": "d"}], [fail], [], []]):
        example["checks"] = outcomes
    f1 = {e["id"]: e["answer_similarity"]["bertscore"]["f1"] for e in report["examples"]}
    assert f1["e3"] > f1["e1"]
    assert failing_answers(report)["id"].tolist() == ["e2", "e3", "e1"]


# ---------------------------------------------------------------- the pre-flight

def run_with_checks(tmp_path: Path, checks: dict) -> tuple[int, str]:
    path = tmp_path / "checks.yaml"
    path.write_text(yaml.safe_dump(checks), "utf-8")
    outputs = tmp_path / "outputs"
    code = main(["run", "--params", str(DEFAULT_PROFILE), "-p", f"outputs_root={outputs}", "-p", f"checks.path={path}"])
    return code, str(path)


@pytest.mark.parametrize("checks, expected", [
    ({"version": 1, "checks": [{"name": "x", "regex": "(unclosed"}]}, "entry 1 ('x')"),
    ({"version": 1, "checks": [{"name": "x", "contains": "a", "ids": ["no-such-id"]}]}, "no-such-id"),
    ({"version": 1, "checks": [{"name": "facts", "max_words": 3}]}, "facts"),
    ({"version": 1, "checks": [{"name": "x", "max_words": 3, "where": {"metadata": {"colour": "red"}}}]}, "colour"),
])
def test_a_bad_checks_file_exits_2_before_the_run_folder_is_written(tmp_path, capsys, checks, expected):
    code, path = run_with_checks(tmp_path, checks)
    error = capsys.readouterr().err
    assert code == 2, error
    assert path in error and expected in error and "Traceback" not in error
    assert not (tmp_path / "outputs").exists() or not list((tmp_path / "outputs").rglob("params.yaml"))


def test_the_sample_checks_file_is_accepted_and_an_older_profile_checks_nothing(tmp_path):
    from evalbook.runner import check_checks_file

    profile = load_profile(DEFAULT_PROFILE, {"checks.path": str(ROOT / "examples" / "checks" / "sample.yaml")})
    check_checks_file(profile)  # nothing to refuse
    older = yaml.safe_load(DEFAULT_PROFILE.read_text("utf-8"))
    del older["checks"]
    path = tmp_path / "older.yaml"
    path.write_text(yaml.safe_dump({**older, "input_path": str(ROOT / older["input_path"]),
                                    "predictions_path": str(ROOT / older["predictions_path"])}), "utf-8")
    assert not check_settings(load_profile(path)["checks"]).any
    assert json.dumps(load_profile(path)["checks"]["facts"]["enabled"]) == "false"

"""The checks in a comparison (issue 48, item 4): the checks that newly fail in the candidate,
example by example, those newly fixed, each check's pass rate in both runs, the gate
`--fail-on checks`, and what the page and summary.md show, hostile reasons escaped."""

from __future__ import annotations

import json
import re

import pytest
from markdown_it import MarkdownIt

import hostile
from evalbook.checks.protocol import CheckOutcome, checks_summary
from evalbook.compare.document import validate_comparison
from evalbook.compare.gate import CHECKS_TEST, RuleError, check_rules, gate_html, parse_rules, regression_gate
from evalbook.compare.tables import check_rates_table, checks_html, newly_failing_styled
from evalbook.publish.summary import comparison_summary_md
from evalbook.validation import validate_report
from paths import ROOT
from test_compare import compare, make_report

CHANGED = "£15: the reference says £14"


def with_checks(report: dict, outcomes: dict[str, dict[str, str]], reasons: dict[str, str] | None = None) -> dict:
    """`report` with each example's checks: outcomes[id] = {check: status}; an id not named has
    none. A reason is `<check> <status> on <id>`, or reasons[id] for that example's failures."""
    reasons = reasons or {}
    by_example = []
    for example in report["examples"]:
        example_id = example["id"]
        checks = [CheckOutcome(name, status, reasons[example_id] if status == "fail" and example_id in reasons
                               else f"{name} {status} on {example_id}")
                  for name, status in outcomes.get(example_id, {}).items()]
        example["checks"] = [outcome.as_record() for outcome in checks]
        by_example.append(checks)
    report["checks_summary"] = checks_summary(by_example)
    validate_report(report)
    return report


def pair(base: dict[str, dict[str, str]], cand: dict[str, dict[str, str]], *, base_scores=None, cand_scores=None,
         reasons: dict[str, str] | None = None) -> tuple[dict, dict]:
    base_scores = base_scores or dict.fromkeys(base, 0.5)
    cand_scores = cand_scores or dict.fromkeys(cand, 0.5)
    return (with_checks(make_report(base_scores), base),
            with_checks(make_report(cand_scores, tag="cand"), cand, reasons))


# ---------------------------------------------------------------- example by example

def test_a_check_that_passed_in_the_baseline_and_fails_in_the_candidate_is_listed_with_its_example():
    baseline, candidate = pair(
        {"e0": {"facts": "pass", "max_words": "pass"}, "e1": {"facts": "fail"}, "e2": {"facts": "pass"},
         "gone": {"facts": "pass"}},
        {"e0": {"facts": "fail", "max_words": "pass"}, "e1": {"facts": "pass"}, "e2": {"facts": "pass"},
         "new": {"facts": "fail"}},
        reasons={"e0": CHANGED})
    section = compare(baseline, candidate)["checks"]
    assert section["compared"] and section["reason"] is None
    assert section["n_newly_failing"] == 1 and section["n_examples_newly_failing"] == 1
    (entry,) = section["newly_failing"]
    assert entry["id"] == "e0"
    assert entry["checks"] == [{"check": "facts", "reason": CHANGED, "baseline_reason": "facts pass on e0"}]
    assert (entry["question"], entry["reference_answer"]) == ("question e0", "reference e0")
    assert (entry["baseline_answer"], entry["candidate_answer"]) == ("base answer e0", "cand answer e0")
    # fail -> pass is counted as fixed; `new` (candidate only) fails but is no shared example
    assert section["n_fixed"] == 1 and section["fixed"] == [{"id": "e1", "checks": ["facts"]}]


def test_an_error_on_either_side_is_neither_a_new_failure_nor_a_fix():
    baseline, candidate = pair({"a": {"facts": "pass"}, "b": {"facts": "error"}, "c": {"facts": "fail"}},
                               {"a": {"facts": "error"}, "b": {"facts": "fail"}, "c": {"facts": "error"}})
    section = compare(baseline, candidate)["checks"]
    assert (section["n_newly_failing"], section["n_fixed"]) == (0, 0)
    (facts,) = section["checks"]
    assert facts["n"] == 0 and facts["n_skipped"] == 3 and facts["delta"] is None


def test_the_newly_failing_examples_come_worst_first():
    """The most checks newly failed first, then the highest candidate BERTScore F1 (where
    similarity misleads most), then the order of the pairing."""
    both = {"facts": "pass", "max_words": "pass"}
    baseline, candidate = pair(
        {"low": both, "high": both, "two": both, "also_low": both},
        {"low": {"facts": "fail", "max_words": "pass"}, "high": {"facts": "fail", "max_words": "pass"},
         "two": {"facts": "fail", "max_words": "fail"}, "also_low": {"facts": "fail", "max_words": "pass"}},
        cand_scores={"low": 0.2, "high": 0.9, "two": 0.1, "also_low": 0.2})
    section = compare(baseline, candidate)["checks"]
    assert [entry["id"] for entry in section["newly_failing"]] == ["two", "high", "low", "also_low"]
    assert section["n_newly_failing"] == 5 and section["n_examples_newly_failing"] == 4


def test_each_checks_pass_rate_in_both_runs_over_the_pairs_decided_in_both():
    baseline, candidate = pair(
        {"a": {"facts": "pass"}, "b": {"facts": "pass"}, "c": {"facts": "fail"}, "d": {"facts": "pass"}},
        {"a": {"facts": "pass", "json": "fail"}, "b": {"facts": "fail"}, "c": {"facts": "fail"},
         "d": {"facts": "error"}})
    section = compare(baseline, candidate)["checks"]
    facts, json_check = section["checks"]
    assert facts["check"] == "facts" and facts["reason"] is None
    assert (facts["n"], facts["n_skipped"]) == (3, 1)
    assert facts["baseline_pass_rate"] == pytest.approx(2 / 3)
    assert facts["candidate_pass_rate"] == pytest.approx(1 / 3)
    assert facts["delta"] == pytest.approx(-1 / 3)
    assert (facts["n_newly_failing"], facts["n_fixed"]) == (1, 0)
    # a check only one run ran is listed, not compared, and says why
    assert json_check["check"] == "json" and json_check["n"] == 0
    assert json_check["baseline_pass_rate"] is None and json_check["delta"] is None
    assert json_check["reason"] == "only the candidate run ran it"
    frame = check_rates_table(compare(baseline, candidate))
    assert list(frame["check"]) == ["facts", "json"]
    assert frame.loc[0, "change"] == pytest.approx(-1 / 3)


def older(report: dict, version: str = "1.12") -> dict:
    """The report as a run before schema 1.13 wrote it: no checks anywhere."""
    report.pop("checks_summary", None)
    for example in report["examples"]:
        example.pop("checks", None)
    report["schema_version"] = version
    return report


@pytest.mark.parametrize("which, said", [
    ("baseline_old", "the baseline report (schema 1.12) has no checks: reports hold them since schema 1.13"),
    ("candidate_off", "no check ran in the candidate run"),
])
def test_a_report_without_checks_is_not_compared_and_the_page_says_so_in_one_sentence(which, said):
    baseline, candidate = pair({"a": {"facts": "pass"}}, {"a": {"facts": "fail"}})
    if which == "baseline_old":
        older(baseline)
    else:
        candidate["checks_summary"] = None
        candidate["examples"][0]["checks"] = []
    doc = compare(baseline, candidate)
    validate_comparison(doc)
    section = doc["checks"]
    assert section["compared"] is False and said in section["reason"]
    assert section["newly_failing"] == [] and section["checks"] == []
    page = checks_html(doc)
    elements, text = hostile.read_markup(page)
    assert [tag for tag, _ in elements].count("p") == 1 and "table" not in page
    assert said in text
    summary = comparison_summary_md(doc, baseline, candidate, [])
    checks_part = summary.split("### Checks", 1)[1].split("###", 1)[0]
    assert said in checks_part and "|" not in checks_part


def test_two_runs_that_share_no_check_are_not_compared():
    baseline, candidate = pair({"a": {"facts": "pass"}}, {"a": {"json": "fail"}})
    section = compare(baseline, candidate)["checks"]
    assert section["compared"] is False
    assert section["reason"] == "no check ran in both runs (the baseline ran facts, the candidate json)"


# ---------------------------------------------------------------- the gate

def test_the_checks_rule_is_the_word_checks_alone():
    (rule,) = parse_rules(["checks"])
    assert (rule.text, rule.metric, rule.tolerance) == ("checks", "checks", 0.0)
    assert parse_rules(" checks ")[0].text == "checks"
    for text in ("checks<0", "checks<-0.05"):
        with pytest.raises(RuleError, match=rf"--fail-on {text!r}: the checks rule takes no tolerance"):
            parse_rules([text])
    with pytest.raises(RuleError, match="a second rule for checks"):
        parse_rules(["checks", "checks"])
    with pytest.raises(RuleError) as refused:
        parse_rules(["bleu<-0.02"])
    assert re.search(r"metrics a rule can name: bertscore_f1, .*groundedness_pass.*, checks \(", str(refused.value))


def test_the_gate_fails_on_a_check_newly_failing_and_names_the_count_the_ids_and_the_checks():
    statuses = {f"e{i}": {"facts": "pass", "max_words": "pass"} for i in range(8)}
    broken = {key: dict(value) for key, value in statuses.items()}
    for example_id in ("e1", "e3", "e4", "e5", "e6"):
        broken[example_id]["facts"] = "fail"
    broken["e3"]["max_words"] = "fail"
    baseline, candidate = pair(statuses, broken)
    doc = compare(baseline, candidate)
    doc["gate"] = regression_gate(doc, baseline, candidate, ["checks"])
    validate_comparison(doc)
    (rule,) = doc["gate"]["rules"]
    assert doc["gate"]["failed"] and rule["failed"] and rule["test"] == CHECKS_TEST
    assert rule["n"] == 16 and rule["discordant"] == [6, 0] and rule["delta"] == pytest.approx(-6 / 16)
    assert rule["why"].startswith("6 checks newly fail in the candidate on 5 of the 8 shared examples")
    assert "e3 (facts, max_words), e1 (facts), e4 (facts)" in rule["why"] and "and 2 more examples" in rule["why"]
    assert "e7" not in rule["why"]
    assert "The gate failed" in gate_html(doc)


def test_the_gate_holds_when_no_check_newly_fails_even_when_many_fail():
    baseline, candidate = pair({"a": {"facts": "fail"}, "b": {"facts": "pass"}, "c": {"facts": "fail"}},
                               {"a": {"facts": "fail"}, "b": {"facts": "pass"}, "c": {"facts": "pass"}})
    gate = regression_gate(compare(baseline, candidate), baseline, candidate, ["checks"])
    (rule,) = gate["rules"]
    assert gate["failed"] is False and rule["failed"] is False and rule["discordant"] == [0, 1]
    assert rule["why"].startswith("no check newly fails in the candidate on the 3 shared examples")


def test_the_checks_rule_is_refused_on_reports_without_checks_naming_why():
    baseline, candidate = pair({"a": {"facts": "pass"}}, {"a": {"facts": "fail"}})
    older(candidate, "1.11")
    with pytest.raises(RuleError, match=r"--fail-on 'checks': the checks cannot be compared: the candidate "
                                        r"report \(schema 1.11\) has no checks") as refused:
        check_rules(["checks"], baseline, candidate)
    assert "metrics a rule can name: bertscore_f1" in str(refused.value)
    assert ", checks (" not in str(refused.value)  # not offered where it cannot apply
    with pytest.raises(RuleError, match="the checks cannot be compared"):
        regression_gate(compare(baseline, candidate), baseline, candidate, ["checks"])


def test_the_checks_rule_is_refused_when_no_shared_example_was_decided_in_both_runs():
    # `b`, in the baseline only, passed: a run whose every outcome errored is refused before
    baseline, candidate = pair({"a": {"facts": "error"}, "b": {"facts": "pass"}}, {"a": {"facts": "fail"}})
    with pytest.raises(RuleError, match="no shared example has a check passed or failed in both runs"):
        check_rules(["checks"], baseline, candidate)


# ---------------------------------------------------------------- pages and summary.md

def hostile_pair() -> tuple[dict, dict, dict]:
    reason = f"{hostile.SCRIPT} {hostile.MARKDOWN_LINK}{hostile.CONTROLS}"
    baseline, candidate = pair({"a": {"facts": "pass"}, "b": {"facts": "pass"}},
                               {"a": {"facts": "fail"}, "b": {"facts": "pass"}}, reasons={"a": reason})
    for example in candidate["examples"]:
        example["generated_answer"] = hostile.IMG
    doc = compare(baseline, candidate)
    doc["gate"] = regression_gate(doc, baseline, candidate, ["checks"])
    return doc, baseline, candidate


def test_hostile_reasons_are_escaped_on_the_page():
    doc, _, _ = hostile_pair()
    page = checks_html(doc) + newly_failing_styled(doc).to_html() + gate_html(doc)
    assert hostile.payload_elements(page) == []
    _, text = hostile.read_markup(page)
    assert hostile.SCRIPT in text and hostile.IMG in text and hostile.VISIBLE_CONTROLS in text
    assert "1 check newly fails in the candidate on 1 of the 2 shared examples" in text


def test_hostile_reasons_are_escaped_in_summary_md():
    doc, baseline, candidate = hostile_pair()
    source = comparison_summary_md(doc, baseline, candidate, [])
    assert "<script>" not in source and "\\[x\\](javascript" in source
    rendered = MarkdownIt("commonmark").enable("table").render(source)
    assert hostile.payload_elements(rendered) == []
    _, shown = hostile.read_markup(rendered)
    assert hostile.SCRIPT in shown and hostile.MARKDOWN_LINK + hostile.VISIBLE_CONTROLS in shown
    checks_part = source.split("### Checks", 1)[1].split("\n### ", 1)[0]
    assert "1 check newly fails in the candidate on 1 of the 2 shared examples" in checks_part
    assert "| facts |" in checks_part


def test_summary_md_lists_the_first_five_newly_failing_examples():
    statuses = {f"e{i}": {"facts": "pass"} for i in range(7)}
    baseline, candidate = pair(statuses, {key: {"facts": "fail"} for key in statuses})
    doc = compare(baseline, candidate)
    checks_part = comparison_summary_md(doc, baseline, candidate, []).split("### Checks", 1)[1].split("\n### ", 1)[0]
    listed = re.findall(r"^\| (e\d) \|", checks_part, flags=re.MULTILINE)
    assert listed == ["e0", "e1", "e2", "e3", "e4"]
    assert "and 2 more" in checks_part


# ---------------------------------------------------------------- the document and the notebook

def test_the_checks_section_is_in_the_schema_and_a_broken_one_is_refused():
    baseline, candidate = pair({"a": {"facts": "pass"}}, {"a": {"facts": "fail"}})
    doc = compare(baseline, candidate)
    assert doc["schema_version"] == "1.6"
    json.dumps(doc, allow_nan=False)
    broken = json.loads(json.dumps(doc))
    broken["checks"]["newly_failing"][0]["checks"][0]["check"] = 3
    with pytest.raises(Exception, match="checks/newly_failing/0/checks/0/check"):
        validate_comparison(broken)
    del broken["checks"]
    with pytest.raises(Exception, match="'checks' is a required property"):
        validate_comparison(broken)


def test_05_compare_shows_the_checks_right_after_the_first_screen_and_the_deltas():
    notebook = json.loads((ROOT / "notebooks" / "05_compare.ipynb").read_text("utf-8"))
    ids = [cell["id"] for cell in notebook["cells"]]
    first_screen = ids.index("05-compare-02")
    # the verdict, the deltas (issue 49), then the checks
    assert ids[first_screen + 1:first_screen + 3] == ["05-compare-10", "05-compare-checks"]
    code = "".join(notebook["cells"][first_screen + 2]["source"])
    assert "checks_html(comparison)" in code and "newly_failing_styled(comparison)" in code

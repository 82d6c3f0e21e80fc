"""The fact check as a registered metric of kind `check` (issue 48, item 1): read from a report
like every other metric, and carried, or left out, by each consumer of the registry on purpose."""

from __future__ import annotations

import pytest
import seaborn as sns

from evalbook.calibrate.document import _calibrated_metrics
from evalbook.checks.protocol import CheckOutcome, checks_summary
from evalbook.compare.gate import RuleError, parse_rules
from evalbook.load import RESERVED_NAMES
from evalbook.metrics import METRICS, metric, of_kind
from evalbook.report.explorer import explorer_frame
from evalbook.report.reader import RunReport
from evalbook.report.schema import locations
from evalbook.trend.headline import _metrics as headline_metrics
from evalbook.validation import ReportError, validate_report
from test_report import make_report

FACTS = metric("facts")
STATUSES = ["pass", "fail", "pass", "error", "pass"]  # e1 ... e5 of test_report's report


def outcomes() -> list[list[CheckOutcome]]:
    """Each example's fact check by STATUSES, and a user check beside it that always passes."""
    return [[CheckOutcome("facts", status, f"the fact check says {status}"),
             CheckOutcome("mentions-refund", "pass", "the answer contains refund")] for status in STATUSES]


def checked_report() -> dict:
    by_example = outcomes()
    return make_report(checks=([[o.as_record() for o in example] for example in by_example],
                               checks_summary(by_example)))


def test_the_fact_check_is_registered_as_a_check():
    assert of_kind("check") == (FACTS,)
    assert (FACTS.name, FACTS.kind, FACTS.label, FACTS.check_name) == ("facts", "check", "fact check", "facts")
    assert FACTS.colour in sns.color_palette("colorblind").as_hex()
    assert (FACTS.value_range, FACTS.mean_key, FACTS.summary_statistics) == ((0.0, 1.0), "pass_rate", ("pass_rate",))
    assert FACTS.higher_is_better and not FACTS.in_comparison and not FACTS.headline
    assert [m.name for m in METRICS if m.check_name is not None] == ["facts"]


def test_an_example_s_value_is_its_fact_check_outcome():
    def example(*checks: dict) -> dict:
        return {"id": "e1", "checks": list(checks)}

    user = {"check": "mentions-refund", "status": "fail", "reason": "no refund"}
    assert FACTS.value(example(user, {"check": "facts", "status": "pass", "reason": "no fact differs"})) == 1.0
    assert FACTS.value(example({"check": "facts", "status": "fail", "reason": "£15: the reference says £14"})) == 0.0
    assert FACTS.value(example({"check": "facts", "status": "error", "reason": "it raised"})) is None
    assert FACTS.value(example(user)) is None, "another check's outcome is not the fact check's"
    assert FACTS.value({"id": "e1"}) is None and FACTS.value(example()) is None
    assert FACTS.value({"id": "e1", "checks": None}) is None


def test_the_summary_is_the_fact_check_s_and_its_mean_the_pass_rate():
    report = checked_report()
    assert [FACTS.value(e) for e in report["examples"]] == [1.0, 0.0, 1.0, None, 1.0]
    summary = FACTS.summary(report)
    assert summary is report["checks_summary"]["checks"]["facts"]
    assert FACTS.mean(report) == pytest.approx(3 / 4) == summary["pass_rate"]
    assert FACTS.summary(make_report()) is None and FACTS.mean(make_report()) is None, "no check ran"


def test_the_report_schema_bounds_the_pass_rate_and_no_interval_is_added():
    assert locations(FACTS) == [("checks_summary", "checks", "facts", "pass_rate")]
    report = checked_report()
    validate_report(report)
    assert "facts" not in report["intervals"]["metrics"], "the check's interval is its Wilson interval"
    report["checks_summary"]["checks"]["facts"]["pass_rate"] = 1.5
    with pytest.raises(ReportError, match="pass_rate"):
        validate_report(report)


def test_the_headline_carries_the_pass_rate_with_its_wilson_interval():
    report = checked_report()
    summary = report["checks_summary"]["checks"]["facts"]
    carried = headline_metrics(report)["facts"]
    assert carried == {"mean": summary["pass_rate"], "low": summary["interval"]["low"],
                       "high": summary["interval"]["high"], "n": 4}
    assert "mentions-refund" not in headline_metrics(report), "only registered checks"
    assert "facts" not in headline_metrics(make_report())


def test_the_explorer_shows_the_check_once_as_its_status():
    frame = explorer_frame(checked_report())
    assert "fact check" not in frame.columns
    assert frame["facts check"].tolist() == STATUSES


def test_a_comparison_gates_the_fact_check_through_the_checks_rule():
    with pytest.raises(RuleError, match="facts is gated with the other checks: --fail-on checks"):
        parse_rules(["facts<0"])


def test_calibration_leaves_the_check_out():
    assert FACTS not in _calibrated_metrics(RunReport.of(checked_report()))


def test_a_metadata_column_cannot_be_named_facts():
    assert "facts" in RESERVED_NAMES

"""The check protocol (evalbook.checks.protocol): outcomes, errors kept per example, and the
pass rate with its Wilson interval per run."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from evalbook.checks.protocol import CheckOutcome, NothingChecked, check_summary, checks_summary, guarded


def outcomes(check: str, statuses: str) -> list[CheckOutcome]:
    """One outcome per letter: p pass, f fail, e error."""
    words = {"p": "pass", "f": "fail", "e": "error"}
    return [CheckOutcome(check, words[letter], f"{check} {words[letter]}") for letter in statuses]


def test_the_pass_rate_is_over_passes_and_fails_with_errors_counted_beside_it():
    summary = check_summary(outcomes("facts", "pppfe"))
    assert (summary["n"], summary["n_passed"], summary["n_failed"], summary["n_errors"]) == (5, 3, 1, 1)
    assert summary["pass_rate"] == 0.75
    expected = binomtest(3, 4).proportion_ci(confidence_level=0.95, method="wilson")
    assert summary["interval"] == {"low": pytest.approx(expected.low), "high": pytest.approx(expected.high),
                                   "confidence": 0.95, "method": "wilson"}


def test_a_check_with_only_errors_has_no_rate():
    summary = check_summary(outcomes("regex", "ee"))
    assert summary["pass_rate"] is None and summary["interval"] is None and summary["n_errors"] == 2


def test_a_check_that_raises_is_an_error_on_that_example_only():
    def broken() -> CheckOutcome:
        raise ValueError("bad <input>")

    outcome = guarded("contains", broken)
    assert (outcome.check, outcome.status) == ("contains", "error")
    assert outcome.reason == "the check could not run: ValueError: bad <input>"
    assert guarded("contains", lambda: CheckOutcome("contains", "pass", "found")).status == "pass"


def test_a_run_counts_the_examples_that_failed_any_check():
    by_example = [outcomes("facts", "p") + outcomes("max_words", "f"),
                  outcomes("facts", "f") + outcomes("max_words", "f"),
                  outcomes("facts", "e") + outcomes("max_words", "p"),
                  []]
    summary = checks_summary(by_example)
    assert list(summary["checks"]) == ["facts", "max_words"]
    assert (summary["n_examples"], summary["n_examples_failing"], summary["n_examples_with_errors"]) == (4, 2, 1)
    assert summary["checks"]["max_words"]["n_failed"] == 2


def test_a_run_where_every_check_errors_checked_nothing():
    with pytest.raises(NothingChecked, match=r"every check errored on every example \(3 outcomes\)"):
        checks_summary([outcomes("facts", "e"), outcomes("facts", "e") + outcomes("regex", "e")])
    assert checks_summary([])["n_examples_failing"] == 0  # no check asked for: nothing to fail


def test_an_outcome_has_one_of_three_statuses_and_a_record():
    with pytest.raises(ValueError, match="one of pass, fail, error"):
        CheckOutcome("facts", "passed", "x")
    assert CheckOutcome("facts", "fail", "£15: the reference says £14", {"changed": 1}).as_record() == {
        "check": "facts", "status": "fail", "reason": "£15: the reference says £14", "details": {"changed": 1}}
    assert "details" not in CheckOutcome("facts", "pass", "ok").as_record()

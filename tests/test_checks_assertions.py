"""The user's own assertions (evalbook.checks.assertions): each kind's pass and fail on one
answer, with the reason a person reads, which rows a check applies to, per-turn outcomes in a
scenario, an error on one row that leaves the others, and hostile text kept as plain text."""

from __future__ import annotations

import json

import pytest

from evalbook.checks.assertions import KINDS, TEXT_KINDS, Assertion, applies_to, run_assertion, turn_outcomes
from evalbook.escaping import escape_html
from hostile import CONTROLS, SCRIPT, payload_elements


def check(kind: str, argument, **options) -> Assertion:
    return Assertion(name="my-check", kind=kind, argument=argument, **options)


def outcome(kind: str, argument, answer, **options):
    run_options = {key: options.pop(key) for key in ("latency_ms", "cost_usd") if key in options}
    return run_assertion(check(kind, argument, **options), answer, **run_options)


def status(kind: str, argument, answer, **options) -> str:
    return outcome(kind, argument, answer, **options).status


# ---------------------------------------------------------------- text

def test_contains_is_case_sensitive_unless_told():
    assert status("contains", "14 days", "Refunds take 14 days.") == "pass"
    assert status("contains", "14 Days", "Refunds take 14 days.") == "fail"
    assert status("contains", "14 Days", "Refunds take 14 days.", ignore_case=True) == "pass"
    found = outcome("contains", "14 days", "Refunds take 10 days.")
    assert (found.check, found.reason) == ("my-check", "'14 days' not found in the answer")
    assert outcome("contains", "14 days", "Refunds take 14 days.").reason == "'14 days' found in the answer"


def test_ignore_case_folds_case_as_unicode_does():
    assert status("contains", "STRASSE", "Die Hauptstraße 5", ignore_case=True) == "pass"
    assert status("contains", "STRASSE", "Die Hauptstraße 5") == "fail"


def test_text_is_compared_in_one_unicode_form():
    decomposed = "cafe\u0301"  # é as e and a combining accent
    assert status("contains", "café", f"Meet at the {decomposed}.") == "pass"
    assert status("equals", decomposed, "café") == "pass"


def test_contains_any_and_contains_all():
    assert status("contains_any", ["two weeks", "14 days"], "It takes 14 days.") == "pass"
    failed = outcome("contains_any", ["two weeks", "14 days"], "It takes a month.")
    assert (failed.status, failed.reason) == ("fail", "none of 'two weeks', '14 days' found in the answer")
    assert status("contains_all", ["teal", "Tuesday"], "The teal bin goes out on Tuesday.") == "pass"
    missing = outcome("contains_all", ["teal", "Tuesday", "glass"], "The teal bin.")
    assert (missing.status, missing.reason) == ("fail", "'Tuesday', 'glass' not found in the answer (2 of 3 missing)")
    assert status("contains_all", ["TEAL", "tuesday"], "The teal bin goes out on Tuesday.", ignore_case=True) == "pass"


def test_not_contains_takes_a_text_or_a_list():
    held = outcome("not_contains", "refund", "You can get a refund.")
    assert (held.status, held.reason) == ("fail", "the answer holds 'refund' though it must not")
    assert status("not_contains", "refund", "You can get a Refund.") == "pass"
    assert status("not_contains", "refund", "You can get a Refund.", ignore_case=True) == "fail"
    assert status("not_contains", ["guarantee", "promise"], "We promise nothing.") == "fail"
    assert status("not_contains", ["guarantee", "promise"], "Nothing is certain.") == "pass"


def test_equals_is_the_whole_answer_without_surrounding_whitespace():
    assert status("equals", "Yes", "  Yes\n") == "pass"
    assert status("equals", "Yes", "Yes, it is") == "fail"
    assert status("equals", "yes", "YES", ignore_case=True) == "pass"
    assert outcome("equals", "Yes", "No").reason == "the answer is 'No', not 'Yes'"


def test_regex_searches_the_answer_with_python_re():
    assert status("regex", r"\b\d+ days\b", "within 14 days of purchase") == "pass"
    assert status("regex", r"^\d+ days$", "within 14 days of purchase") == "fail"
    assert outcome("regex", r"\bdays\b", "a week").reason == r"no match for /\bdays\b/ in the answer"
    assert status("regex", "DAYS", "14 days") == "fail"
    assert status("regex", "DAYS", "14 days", ignore_case=True) == "pass"
    held = outcome("not_regex", r"\bguarantee[ds]?\b", "This is guaranteed to work.")
    assert (held.status, held.reason) == (
        "fail", r"the answer holds 'guaranteed', matching /\bguarantee[ds]?\b/, though it must not")
    assert status("not_regex", r"\bguarantee[ds]?\b", "This should work.") == "pass"


# ---------------------------------------------------------------- numbers

def test_a_number_with_its_unit():
    days = {"value": 14, "tolerance": 0, "unit": "days"}
    assert status("number", days, "Refunds take 14 days.") == "pass"
    assert status("number", days, "Refunds take 14 Days.") == "pass"  # a unit's case does not matter
    assert status("number", days, "Refunds take 14days.") == "pass"
    failed = outcome("number", days, "Refunds take 10 days, not 3 weeks.")
    assert (failed.status, failed.reason) == ("fail", "no number 14 (±0) days in the answer; it holds 10 days")
    assert status("number", days, "Refunds take 14 weeks, or 20 days.") == "fail"  # 14 is there, not as days
    assert status("number", days, "14 daysx") == "fail"  # the unit is a whole word
    assert outcome("number", days, "Refunds take a fortnight.").reason == \
        "no number 14 (±0) days in the answer; it holds no number"
    assert outcome("number", days, "Refunds in 2 steps within 3 weeks").reason == \
        "no number 14 (±0) days in the answer; it holds no number with days (numbers: 2, 3)"


def test_a_unit_may_come_before_the_number():
    assert status("number", {"value": 24, "unit": "£"}, "We charge £24 per item.") == "pass"
    assert status("number", {"value": 24, "unit": "£"}, "We charge £ 24 per item.") == "pass"
    assert status("number", {"value": 24, "unit": "£"}, "We charge £25 per item, 24 hours a day.") == "fail"


def test_a_number_without_a_unit_is_any_number():
    assert status("number", 2009, "It was made in 2009 by Mireille.") == "pass"
    assert status("number", {"value": 2009}, "It was made in 2010.") == "fail"


def test_digits_with_thousands_separators_decimals_and_signs():
    assert status("number", {"value": 1200, "unit": "kg"}, "It weighs 1,200 kg.") == "pass"
    assert status("number", {"value": 1234567.5}, "a total of 1,234,567.5 units") == "pass"
    assert status("number", {"value": 2.4, "unit": "GHz"}, "It works on 2.4 GHz Wi-Fi only.") == "pass"
    assert status("number", {"value": -8, "unit": "°C"}, "It survives -8 °C.") == "pass"
    assert status("number", {"value": -8, "unit": "°C"}, "It survives −8 °C.") == "pass"  # U+2212 minus
    assert status("number", {"value": 8, "unit": "°C"}, "It survives -8 °C.") == "fail"
    assert status("number", {"value": 8, "unit": "°C"}, "It survives minus 8 °C.") == "pass"  # words are not read
    assert status("number", {"value": 12}, "an ambiguous 12,34 stays out") == "fail"


def test_a_tolerance_is_exact_in_decimal():
    # 14.3 - 14.2 is 0.10000000000000142 in binary floating point: over a tolerance of 0.1.
    assert status("number", {"value": 14.2, "tolerance": 0.1}, "about 14.3 seconds") == "pass"
    assert status("number", {"value": 14.2, "tolerance": 0.1}, "about 14.31 seconds") == "fail"
    assert outcome("number", {"value": 14.2, "tolerance": 0.1}, "14.31").reason == \
        "no number 14.2 (±0.1) in the answer; it holds 14.31"


def test_a_reason_lists_at_most_five_numbers():
    reason = outcome("number", 99, "1 2 3 4 5 6 7").reason
    assert reason == "no number 99 (±0) in the answer; it holds 1, 2, 3, 4, 5 and 2 more"


# ---------------------------------------------------------------- JSON

def test_json_parses():
    assert status("json", True, ' {"refund_days": 14}\n') == "pass"
    failed = outcome("json", True, "Refunds take 14 days.")
    assert failed.status == "fail" and failed.reason.startswith("the answer is not JSON: Expecting value")
    assert status("json", True, '{"a": NaN}') == "fail"  # not JSON, though Python's json reads it


def test_json_against_a_schema():
    schema = {"type": "object", "required": ["refund_days"],
              "properties": {"refund_days": {"type": "integer", "minimum": 1}}}
    assert status("json", {"schema": schema}, '{"refund_days": 14}') == "pass"
    failed = outcome("json", {"schema": schema}, '{"refund_days": "14"}')
    assert failed.status == "fail"
    assert failed.reason == "the answer's JSON does not match the schema at /refund_days: '14' is not of type 'integer'"
    assert status("json", {"schema": schema}, "[]") == "fail"


# ---------------------------------------------------------------- lengths, latency, cost

def test_max_words_and_max_chars():
    answer = " ".join(["word"] * 52)
    failed = outcome("max_words", 50, answer)
    assert (failed.status, failed.reason, failed.details) == ("fail", "52 words, over max_words 50", {"words": 52})
    assert outcome("max_words", 52, answer).reason == "52 words, within max_words 52"
    assert status("max_words", 3, "one\ttwo\n three ") == "pass"
    assert status("max_chars", 5, "héllo") == "pass"  # characters, not bytes
    assert outcome("max_chars", 4, "héllo").reason == "5 characters, over max_chars 4"


def test_latency_and_cost_limits():
    assert status("latency_ms", 2000, "an answer", latency_ms=1999.6) == "pass"
    slow = outcome("latency_ms", 2000, "an answer", latency_ms=2340.2)
    assert (slow.status, slow.reason) == ("fail", "latency 2,340 ms, over latency_ms 2000")
    unknown = outcome("latency_ms", 2000, "an answer")
    assert (unknown.status, unknown.reason) == ("error", "no latency was recorded for this answer")
    assert status("cost_usd", 0.01, None, cost_usd=0.004) == "pass"  # a limit needs no answer
    assert outcome("cost_usd", 0.01, "x", cost_usd=0.0125).reason == "cost 0.0125 USD, over cost_usd 0.01"


# ---------------------------------------------------------------- missing answers, errors

def test_a_missing_answer_is_an_error_and_an_empty_one_is_checked():
    missing = outcome("contains", "14 days", None)
    assert (missing.status, missing.reason) == ("error", "no generated answer to check")
    assert status("contains", "14 days", "") == "fail"
    assert status("not_contains", "refund", "") == "pass"
    assert status("max_words", 0, "") == "pass"


def test_a_check_that_raises_on_one_row_is_an_error_there_and_the_others_go_on():
    deep = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError
    answers = ['{"ok": true}', deep, "not json"]
    outcomes = [run_assertion(check("json", True), answer) for answer in answers]
    assert [o.status for o in outcomes] == ["pass", "error", "fail"]
    assert outcomes[1].reason.startswith("the check could not run: RecursionError")
    assert outcomes[1].check == "my-check"


# ---------------------------------------------------------------- hostile text

def test_a_reason_quotes_hostile_text_as_plain_text():
    answer = f"Click {SCRIPT} now"
    reason = outcome("not_contains", "<script>", answer).reason
    assert reason == "the answer holds '<script>' though it must not"  # as written, not escaped, not dropped
    reason = outcome("equals", "Yes", answer).reason
    assert SCRIPT in reason and payload_elements(escape_html(reason)) == []


def test_a_reason_shows_control_characters_and_cuts_long_text():
    reason = outcome("equals", "Yes", f"No{CONTROLS}\nreally").reason
    assert "\x00" not in reason and "\n" not in reason and "\\x00" in reason
    long_answer = "x" * 10_000
    reason = outcome("equals", "Yes", long_answer).reason
    quoted = reason.removeprefix("the answer is ").removesuffix(", not 'Yes'")
    assert len(quoted) <= 82 and quoted.endswith("…'")


def test_a_huge_regex_match_is_cut_in_the_reason():
    reason = outcome("not_regex", "a+", "a" * 5_000).reason
    assert len(reason) < 200


# ---------------------------------------------------------------- scope

def test_a_check_applies_to_every_row_by_default():
    assert applies_to(check("contains", "x"), "s01", {})


def test_a_check_applies_to_listed_ids():
    listed = check("contains", "x", ids=frozenset({"s01", "s02"}))
    assert applies_to(listed, "s01", {}) and not applies_to(listed, "s03", {})


def test_a_check_applies_to_rows_with_a_metadata_value():
    council = check("contains", "x", metadata=(("domain", "council"),))
    assert applies_to(council, "s01", {"domain": "council"})
    assert not applies_to(council, "s02", {"domain": "bank"})
    assert not applies_to(council, "s03", {})
    assert not applies_to(council, "s03", {"domain": None})
    both = check("contains", "x", metadata=(("domain", "council"), ("tier", 2)))
    assert applies_to(both, "s01", {"domain": "council", "tier": 2})
    assert applies_to(both, "s01", {"domain": "council", "tier": 2.0})  # a number is a number
    assert not applies_to(both, "s01", {"domain": "council", "tier": 3})


def test_true_is_not_the_number_one():
    flagged = check("contains", "x", metadata=(("reviewed", True),))
    assert applies_to(flagged, "s01", {"reviewed": True})
    assert not applies_to(flagged, "s01", {"reviewed": 1})
    one = check("contains", "x", metadata=(("tier", 1),))
    assert not applies_to(one, "s01", {"tier": True})
    assert not applies_to(one, "s01", {"tier": "1"})


def test_a_scenario_check_never_applies_to_a_row():
    assert not applies_to(check("contains", "x", turn="every"), "s01", {})


# ---------------------------------------------------------------- turns

REPLIES = ["Hello, how can I help?", "A refund takes 14 days.", "Anything else?"]


def test_every_turn_gives_one_outcome_per_reply():
    outcomes = turn_outcomes(check("contains", "?", turn="every"), REPLIES)
    assert [o.status for o in outcomes] == ["pass", "fail", "pass"]
    assert [o.details["reply"] for o in outcomes] == [1, 2, 3]
    assert outcomes[1].reason == "reply 2: '?' not found in the answer"
    assert {o.check for o in outcomes} == {"my-check"}


def test_the_last_turn_and_a_numbered_turn():
    (last,) = turn_outcomes(check("not_contains", "refund", turn="last"), REPLIES)
    assert (last.status, last.details["reply"]) == ("pass", 3)
    (second,) = turn_outcomes(check("number", {"value": 14, "unit": "days"}, turn=2), REPLIES)
    assert (second.status, second.details["reply"]) == ("pass", 2)


def test_a_turn_never_reached_and_a_conversation_without_replies_are_errors():
    (never,) = turn_outcomes(check("contains", "x", turn=5), REPLIES)
    assert (never.status, never.reason) == ("error", "reply 5 never came: the conversation has 3 replies")
    for turn in ("every", "last", 1):
        (nothing,) = turn_outcomes(check("contains", "x", turn=turn), [])
        assert (nothing.status, nothing.reason) == ("error", "the conversation has no assistant reply to check")


def test_turn_outcomes_need_a_scenario_check():
    with pytest.raises(ValueError, match="has no turn"):
        turn_outcomes(check("contains", "x"), REPLIES)


# ---------------------------------------------------------------- the kinds

def test_the_kinds_and_those_that_read_text():
    assert set(TEXT_KINDS) < set(KINDS)
    assert "ignore_case" not in KINDS and len(KINDS) == 13


def test_an_assertion_of_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown check 'contain'"):
        check("contain", "x")


def test_an_outcome_is_a_report_record():
    record = outcome("max_words", 1, "two words").as_record()
    assert json.loads(json.dumps(record)) == {"check": "my-check", "status": "fail",
                                              "reason": "2 words, over max_words 1", "details": {"words": 2}}

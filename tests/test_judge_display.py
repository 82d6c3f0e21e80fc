"""The judge's banner in the judge and report notebooks: lib/evalbook/judge/display.py."""

import hostile
from evalbook.judge.display import banner

HOSTILE = hostile.SCRIPT + hostile.MARKDOWN_LINK + hostile.CONTROLS


def ran_summary(note: str | None) -> dict:
    metric = {"threshold_is_placeholder": True}
    return {"status": "ran", "reason": None, "label": "judge-0123456789abcdef", "note": note,
            "eligibility": {"n_eligible": 4, "no_source_column": True},
            "sampling": {"n_judged": 2, "fraction_of_eligible_judged": 0.5},
            "metrics": {"groundedness": metric, "criteria": metric}}


def test_the_banner_of_a_judge_that_ran_says_what_was_judged():
    elements, text = hostile.read_markup(banner(ran_summary(None)))
    assert [tag for tag, _ in elements][0] == "blockquote"
    assert "Judge judge-0123456789abcdef judged 2 of 4 eligible answers (50%)." in text
    assert "The data has no source, so every answer counted as eligible." in text
    assert "Thresholds of groundedness, criteria are the 0.5 placeholder" in text


def test_the_banner_escapes_the_reason_and_the_note():
    shown = hostile.SCRIPT + hostile.MARKDOWN_LINK + hostile.VISIBLE_CONTROLS
    not_run = {"status": "not_run", "reason": HOSTILE, "note": HOSTILE}
    for summary in (not_run, ran_summary(HOSTILE)):
        page = banner(summary)
        assert hostile.payload_elements(page) == [] and hostile.CONTROLS[0] not in page
        assert f"Note: {shown}" in hostile.read_markup(page)[1]
    _, text = hostile.read_markup(banner(not_run))
    assert f"The judge did not run. {shown}. No judge score is reported for this run." in text

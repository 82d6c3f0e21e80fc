"""The scenarios' part of the report page, built as 04_report builds it (the headline, the pass
rates, the spread, the endings and every transcript, from the report's `scenarios` section): no
text on it is longer than escaping.SHOWN_CHARACTERS, a cut text says how much was left out, and
hostile text stays inert. A rationale is still placed beside the turn it quotes when the quote
lies past the cut."""

from __future__ import annotations

import pytest

from evalbook.escaping import SHOWN_CHARACTERS, escape_html, escaped_table, readable_table, shown_text
from evalbook.scenarios.conversation import Transcript
from evalbook.scenarios.display import (END_MEANINGS, end_reasons_table, headline, outcomes_table, spread_table,
                                        transcript_view, transcripts_html)
from evalbook.scenarios.judging import transcript_id
from evalbook.scenarios.outcomes import pass_summary
from evalbook.scenarios.report import scenarios_section
from evalbook.scenarios.spec import parse_scenarios
from hostile import SCRIPT, read_markup

QUOTED_PASSAGE = "the teal bin by the library"
# Each long text has its own filler letter, so that a run of it longer than the cap on the page
# can only be that text shown whole.
SIMULATOR_REPLY = SCRIPT + "u" * 10_000_000
SYSTEM_REPLY = SCRIPT + "a" * 3_000_000 + f" Glass goes in {QUOTED_PASSAGE}."
END_DETAIL = SCRIPT + "d" * 1_000_000
CRITERION = SCRIPT + "names the bin " + "c" * 1_000_000
CITING_RATIONALE = f'It said "{QUOTED_PASSAGE}". ' + SCRIPT + "q" * 1_000_000
UNCITED_RATIONALE = SCRIPT + "n" * 1_000_000
STATEMENT = SCRIPT + "s" * 1_000_000
JUSTIFICATION = SCRIPT + "j" * 1_000_000
GOAL = SCRIPT + "g" * 5_000_000
PERSONA = SCRIPT + "p" * 1_000_000
EXPECTED = SCRIPT + "e" * 1_000_000
UNSCORED_REASON = SCRIPT + "w" * 1_000_000
JUDGE_REASON = SCRIPT + "r" * 1_000_000
MODEL = SCRIPT + "m" * 1_000_000
LONG_TEXTS = {"u": SIMULATOR_REPLY, "a": SYSTEM_REPLY, "d": END_DETAIL, "c": CRITERION, "q": CITING_RATIONALE,
              "n": UNCITED_RATIONALE, "s": STATEMENT, "j": JUSTIFICATION, "g": GOAL, "p": PERSONA, "e": EXPECTED,
              "w": UNSCORED_REASON}
PAGE_BYTES = 100_000  # a handful of conversations; the long texts whole would make tens of MB

SCENARIOS = parse_scenarios({"version": 1, "scenarios": [
    {"id": "long-reply", "goal": "find where glass goes", "persona": "a resident", "first_speaker": "user",
     "max_turns": 2, "criteria": [CRITERION, "is polite"],
     "assertions": [{"grounded": {"threshold": 0.5, "turn": 1, "ground_truth": "Glass goes in the teal bin."}}]},
    {"id": "long-goal", "goal": GOAL, "persona": PERSONA, "expected_outcome": EXPECTED, "first_speaker": "user",
     "max_turns": 1, "criteria": ["answers"]},
]}, "scenarios.yaml")

TRANSCRIPTS = [
    Transcript("long-reply", 0, 7, [{"role": "user", "content": SIMULATOR_REPLY},
                                    {"role": "assistant", "content": SYSTEM_REPLY},
                                    {"role": "user", "content": "Thanks"},
                                    {"role": "assistant", "content": "You are welcome."}],
               end_reason="goal_met", end_detail=END_DETAIL),
    Transcript("long-reply", 1, 8, [{"role": "user", "content": "Where does glass go?"},
                                    {"role": "assistant", "content": "In the green bin."}], end_reason="max_turns"),
    Transcript("long-goal", 0, 9, [{"role": "user", "content": "Hello"},
                                   {"role": "assistant", "content": "Hello!"}], end_reason="max_turns"),
]


def _criteria(met: list[bool], rationales: list[str], criteria: list[str]) -> dict:
    return {"score": sum(met) / len(met), "unscored_reason": None,
            "criteria": [{"criterion": c, "met": m, "rationale": r} for c, m, r in zip(criteria, met, rationales)]}


def _grounded(passed: bool, statement: str, justification: str) -> dict:
    return {"passed": passed, "reason": None, "replies": [{
        "reply": 1, "score": float(passed), "passed": passed, "unscored_reason": None,
        "detail": {"statements": [{"statement": statement, "verdict": int(passed), "justification": justification}]}}]}


def judgments() -> dict:
    """What 03_judge records for TRANSCRIPTS (judging.judge_scenarios' shape), its texts the long ones."""
    long_reply, short_reply, long_goal = (transcript_id(t) for t in TRANSCRIPTS)
    criteria = list(SCENARIOS[0].criteria)
    return {"status": "ran", "nothing_to_score": [], "calls": {"calls": 4}, "labels": ["judge"], "scenarios": {
        "long-reply": {
            "transcripts": {
                long_reply: {"criteria": _criteria([True, False], [CITING_RATIONALE, UNCITED_RATIONALE], criteria),
                             "assertions": [_grounded(True, STATEMENT, JUSTIFICATION)]},
                short_reply: {"criteria": _criteria([False, True], ["not named", "polite"], criteria),
                              "assertions": [_grounded(False, "In the green bin.", "not stated")]}},
            "outcomes": {"overall": pass_summary([False, False]),
                         "criteria": [{"criterion": criteria[0], **pass_summary([True, False])},
                                      {"criterion": criteria[1], **pass_summary([False, True])}],
                         "assertions": [{"kind": "grounded", "turn": 1, "threshold": 0.5, "threshold_text": "0.5",
                                         **pass_summary([True, False])}],
                         "criteria_score_spread": {"n_scored": 2, "min": 0.5, "max": 0.5, "std": 0.0}}},
        "long-goal": {
            "transcripts": {long_goal: {"criteria": {"score": None, "unscored_reason": UNSCORED_REASON,
                                                     "criteria": None}, "assertions": []}},
            "outcomes": {"overall": pass_summary([None]), "criteria": [{"criterion": "answers",
                                                                        **pass_summary([None])}],
                         "assertions": [], "criteria_score_spread": {"n_scored": 0, "min": None, "max": None,
                                                                     "std": None}}}}}


def summary() -> dict:
    """02a_converse's conversations.json for TRANSCRIPTS, the simulator's model name a long one."""
    ends = {reason: 0 for reason in END_MEANINGS}
    ends.update(goal_met=1, max_turns=2)
    return {"status": "ran", "scenario_file": "scenarios.yaml", "repeats": 2, "seed": 0, "end_reasons": ends,
            "simulator": {"model": MODEL, "base_url_host": "127.0.0.1:8080", "temperature": 0.7, "seed": 0,
                          "calls": 4, "cache_hits": 0, "prompt": {"id": "simulate-v1", "sha256": "0" * 64}},
            "system": {"kind": "openai", "endpoint": "http://127.0.0.1:8081/v1", "model": "system", "calls": 4,
                       "cache_hits": 0}}


def scenarios_page(section: dict) -> str:
    """The HTML of the scenarios' section of 04_report, its figure left out (a PNG of counts)."""
    parts = [headline(section)]
    outcomes = outcomes_table(section)
    if len(outcomes):
        parts += [readable_table(outcomes, "pass rates over the repeats").to_html(),
                  escaped_table(spread_table(section), "the criteria score (share met) across repeats").to_html()]
    parts += [escaped_table(end_reasons_table(section)).to_html(), transcripts_html(section)]
    return "\n".join(parts)


def cut_note(text: str) -> str:
    return f"… ({len(text) - SHOWN_CHARACTERS} more characters; full text in the report JSON)"


@pytest.fixture(scope="module")
def judged_section() -> dict:
    return scenarios_section(SCENARIOS, TRANSCRIPTS, summary(), judgments())


@pytest.mark.parametrize("judged", [True, False], ids=["judged", "not judged"])
def test_no_text_on_the_scenarios_page_is_longer_than_the_cap_and_each_cut_says_so(judged, judged_section):
    section = (judged_section if judged else
               scenarios_section(SCENARIOS, TRANSCRIPTS, summary(), {"status": "failed", "reason": JUDGE_REASON}))
    page = scenarios_page(section)
    page_bytes = len(page.encode("utf-8"))
    assert page_bytes < PAGE_BYTES
    shown = {letter: text for letter, text in LONG_TEXTS.items()
             if judged or letter not in "cqnsjw"}  # unjudged, no verdict is shown; the criteria are in no table
    shown.update({"m": MODEL} if judged else {"m": MODEL, "r": JUDGE_REASON})
    for letter, text in shown.items():
        assert letter * (SHOWN_CHARACTERS + 1) not in page, f"the text of {letter!r}s is shown whole"
        assert cut_note(text) in page and escape_html(shown_text(text)) in page, letter


def test_hostile_text_on_the_scenarios_page_stays_inert(judged_section):
    page = scenarios_page(judged_section)
    elements, text = read_markup(page)
    assert "script" not in {tag for tag, _ in elements}
    assert not [attributes for _, attributes in elements if any(name.startswith("on") for name in attributes)]
    assert SCRIPT not in page and SCRIPT in text  # shown as the text it is


def test_a_rationale_sits_beside_the_turn_it_quotes_past_the_cut_and_is_shown_cut(judged_section):
    scenario = judged_section["scenarios"][0]
    view = transcript_view(scenario, scenario["transcripts"][0])
    assert QUOTED_PASSAGE not in view["turns"][1]["content"]  # the quote lies past what the page shows
    [beside] = [v for v in view["turns"][1]["verdicts"] if v["kind"] == "criterion"]
    assert beside["rationale"] == shown_text(CITING_RATIONALE) and beside["name"] == shown_text(CRITERION)
    [unplaced] = view["criteria_unplaced"]
    assert unplaced["rationale"] == shown_text(UNCITED_RATIONALE)
    assert [turn["content"] for turn in view["turns"]] == [shown_text(turn["content"])
                                                         for turn in scenario["transcripts"][0]["turns"]]
    assert view["end_detail"] == shown_text(END_DETAIL)

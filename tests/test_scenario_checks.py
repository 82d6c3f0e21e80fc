"""A checks file's checks on scenario replies (`turn`), applied to 02a_converse's transcripts in
the report's scenarios section (evalbook.scenarios.report): each transcript holds the outcome on
every reply a check covers (`every`, `last`, reply N; a written opening is not a reply), each
scenario each check rolled up over its repeats (it fails when it fails in any repeat), and the
section each check's pass rate over replies and over scenarios with its Wilson interval. A reply
that never came is an error, never a pass; reply text and reasons reach the page escaped."""

from __future__ import annotations

import pytest
import yaml

from evalbook.checks.checksfile import parse_checks
from evalbook.checks.protocol import NothingChecked
from evalbook.params import Profile
from evalbook.report.document import validate_report
from evalbook.scenarios.conversation import END_REASONS, Transcript
from evalbook.scenarios.display import headline, transcripts_html
from evalbook.scenarios.report import reply_checks, scenarios_section
from evalbook.scenarios.spec import parse_scenarios
from evalbook.stats import wilson_interval
from hostile import IMG, SCRIPT, read_markup
from test_report import make_report

SCENARIOS = parse_scenarios({"version": 1, "scenarios": [
    {"id": "bins", "goal": "find where glass goes", "persona": "a resident", "first_speaker": "user",
     "max_turns": 3, "criteria": ["answers"]},
    {"id": "greeter", "goal": "say hello", "persona": "a visitor", "first_speaker": "assistant",
     "opening": "Sorry to bother you: how can I help?", "max_turns": 2, "criteria": ["answers"]},
]}, "scenarios.yaml")
NOT_JUDGED = {"status": "not_run", "reason": "03_judge judges them next"}
POLITE = {"name": "polite", "not_contains": "sorry", "ignore_case": True, "turn": "every"}


def checks(*entries: dict) -> list:
    return parse_checks({"version": 1, "checks": list(entries)}, "checks.yaml")


def transcript(scenario_id: str, repeat: int, replies: list[str], opening: str | None = None) -> Transcript:
    turns = [] if opening is None else [{"role": "assistant", "content": opening}]
    for number, reply in enumerate(replies, 1):
        turns += [{"role": "user", "content": f"question {number}"}, {"role": "assistant", "content": reply}]
    return Transcript(scenario_id, repeat, 100 + repeat, turns, end_reason="max_turns" if replies else "simulator_error",
                      end_detail=None if replies else "the simulator call failed")


def summary(transcripts: list[Transcript], repeats: int, missing: list[dict] | None = None) -> dict:
    ends = {reason: 0 for reason in END_REASONS}
    for t in transcripts:
        ends[t.end_reason] += 1
    return {"status": "ran", "scenario_file": {"path": "scenarios.yaml", "sha256": "0" * 64}, "repeats": repeats,
            "seed": 0, "end_reasons": ends, "simulator": None, "system": None, "estimate": None,
            "missing": missing or []}


def section(transcripts: list[Transcript], assertions, repeats: int = 1, missing: list[dict] | None = None) -> dict:
    return scenarios_section(SCENARIOS, transcripts, summary(transcripts, repeats, missing), NOT_JUDGED, assertions)


def scenario(built: dict, scenario_id: str) -> dict:
    return next(entry for entry in built["scenarios"] if entry["id"] == scenario_id)


def outcomes(built: dict, scenario_id: str, repeat: int = 0) -> list[tuple]:
    mine = next(t for t in scenario(built, scenario_id)["transcripts"] if t["repeat"] == repeat)
    return [(o["check"], o["status"], o.get("details", {}).get("reply")) for o in mine["checks"]]


def rolled_up(built: dict, scenario_id: str, check: str) -> dict:
    return next(entry for entry in scenario(built, scenario_id)["checks"] if entry["check"] == check)


def page(built: dict) -> str:
    return headline(built) + transcripts_html(built)


# ---------------------------------------------------------------- which replies a check covers

def test_every_checks_each_reply_last_the_last_and_n_the_nth():
    built = section([transcript("bins", 0, ["Glass goes in the teal bin.", "Sorry, the teal bin.", "Goodbye!"])],
                    checks(POLITE, {"name": "closes", "contains": "bye", "turn": "last"},
                           {"name": "second-names-bin", "contains": "bin", "turn": 2}))
    assert outcomes(built, "bins") == [("polite", "pass", 1), ("polite", "fail", 2), ("polite", "pass", 3),
                                       ("closes", "pass", 3), ("second-names-bin", "pass", 2)]
    failed = scenario(built, "bins")["transcripts"][0]["checks"][1]
    assert failed["reason"] == "reply 2: the answer holds 'sorry' though it must not"


def test_a_written_opening_is_not_a_reply():
    built = section([transcript("greeter", 0, ["Hello there.", "Bye."], opening="Sorry to bother you: how can I help?")],
                    checks(POLITE, {"name": "first-greets", "contains": "Hello", "turn": 1}))
    assert outcomes(built, "greeter") == [("polite", "pass", 1), ("polite", "pass", 2), ("first-greets", "pass", 1)]


def test_ids_limit_a_check_to_the_scenarios_listed_and_a_row_check_is_not_a_reply_check():
    built = section([transcript("bins", 0, ["Sorry, no idea."]), transcript("greeter", 0, ["Sorry!"], opening="Hi")],
                    checks({**POLITE, "ids": ["greeter"]}, {"name": "short", "max_words": 3}))
    assert outcomes(built, "bins") == [] and scenario(built, "bins")["checks"] == []
    assert outcomes(built, "greeter") == [("polite", "fail", 1)]
    assert list(built["checks_summary"]["checks"]) == ["polite"]
    assert built["checks_summary"]["checks"]["polite"]["scenarios"]["n"] == 1


# ---------------------------------------------------------------- a reply that never came

def test_a_reply_that_never_came_is_an_error_never_a_pass():
    built = section([transcript("bins", 0, ["One.", "Two."]), transcript("greeter", 0, [], opening="Hi")],
                    checks({"name": "third-says-three", "contains": "Three", "turn": 3, "ids": ["bins"]}, POLITE))
    never = scenario(built, "bins")["transcripts"][0]["checks"][0]
    assert (never["status"], never["reason"]) == ("error", "reply 3 never came: the conversation has 2 replies")
    assert rolled_up(built, "bins", "third-says-three")["status"] == "error"
    silent = scenario(built, "greeter")["transcripts"][0]["checks"]
    assert [(o["status"], o["reason"]) for o in silent] == [
        ("error", "the conversation has no assistant reply to check")]
    assert rolled_up(built, "greeter", "polite")["status"] == "error"
    shown = read_markup(page(built))[1]
    assert "reply 3 never came: the conversation has 2 replies" in shown
    assert "third-says-three on reply 3: no reply passed or failed, 1 not checked" in shown
    assert "bins · third-says-three: could not be checked in 1 of 1 repeat" in shown


def test_a_run_where_every_reply_check_errored_checked_nothing():
    with pytest.raises(NothingChecked, match="reply 3 never came"):
        section([transcript("bins", 0, ["One."])], checks({"name": "third", "contains": "x", "turn": 3, "ids": ["bins"]}))


# ---------------------------------------------------------------- over the repeats

def five_repeats() -> list[Transcript]:
    replies = {0: ["Teal bin.", "Yes."], 1: ["Sorry, teal.", "Yes."], 2: ["Teal bin.", "Yes."],
               3: ["Teal bin.", "SORRY."], 4: ["Teal bin.", "Yes."]}
    return [transcript("bins", repeat, texts) for repeat, texts in replies.items()]


def test_a_check_fails_for_the_scenario_when_it_fails_in_any_repeat_with_the_count():
    built = section(five_repeats(), checks(POLITE, {"name": "names-teal", "contains": "teal", "ignore_case": True, "turn": 1}), repeats=5)
    polite = rolled_up(built, "bins", "polite")
    assert polite["status"] == "fail" and polite["failed_repeats"] == [1, 3]
    assert polite["reason"] == "failed in 2 of 5 repeats; repeat 1, reply 1: the answer holds 'sorry' though it must not"
    assert {key: polite["repeats"][key] for key in ("n", "n_passed", "n_failed", "n_errors")} == \
        {"n": 5, "n_passed": 3, "n_failed": 2, "n_errors": 0}
    low, high = wilson_interval(3, 5, 0.95)
    assert polite["repeats"]["pass_rate"] == 0.6
    assert (polite["repeats"]["interval"]["low"], polite["repeats"]["interval"]["high"]) == (low, high)
    teal = rolled_up(built, "bins", "names-teal")
    assert (teal["status"], teal["reason"], teal["failed_repeats"]) == ("pass", "passed in all 5 repeats", [])
    assert "failed in 2 of 5 repeats" in read_markup(headline(built))[1]


def test_a_repeat_that_could_not_be_checked_keeps_the_scenario_from_passing():
    transcripts = [transcript("bins", 0, ["A.", "B."]), transcript("bins", 1, ["A."])]
    built = section(transcripts, checks({"name": "second", "contains": "B", "turn": 2}), repeats=2)
    second = rolled_up(built, "bins", "second")
    assert second["status"] == "error" and second["failed_repeats"] == []
    assert second["reason"] == ("could not be checked in 1 of 2 repeats; repeat 1: "
                                "reply 2 never came: the conversation has 1 reply")
    assert (second["repeats"]["n_passed"], second["repeats"]["n_errors"]) == (1, 1)


def test_a_repeat_a_replay_lacks_is_not_checked_and_not_a_pass():
    missing = [{"scenario_id": "bins", "repeats": [1], "n_transcripts": 1}]
    built = section([transcript("bins", 0, ["Teal."])], checks(POLITE), repeats=2, missing=missing)
    polite = rolled_up(built, "bins", "polite")
    assert polite["status"] == "error" and polite["repeats"]["n"] == 2
    assert polite["reason"] == "could not be checked in 1 of 2 repeats; repeat 1: no transcript of this repeat"


def test_a_repeat_fails_when_any_reply_it_covers_fails():
    built = section([transcript("bins", 0, ["Sorry.", "Fine.", "sorry again"])], checks(POLITE))
    polite = rolled_up(built, "bins", "polite")
    assert polite["status"] == "fail"
    assert polite["reason"] == ("failed in 1 of 1 repeat; repeat 0, reply 1: the answer holds 'sorry' though it "
                                "must not (and 1 more reply)")


# ---------------------------------------------------------------- the run's summary

def test_each_check_has_its_pass_rate_over_replies_and_over_scenarios_with_a_wilson_interval():
    transcripts = [*five_repeats(), transcript("greeter", 0, ["Hello.", "Bye."], opening="Hi"),
                   transcript("greeter", 1, ["Hello.", "Bye."], opening="Hi")]
    built = scenarios_section(SCENARIOS, transcripts, summary(transcripts, 5, [
        {"scenario_id": "greeter", "repeats": [2, 3, 4], "n_transcripts": 2}]), NOT_JUDGED, checks(POLITE))
    polite = built["checks_summary"]["checks"]["polite"]
    assert polite["turn"] == "every"
    replies = polite["replies"]
    assert (replies["n"], replies["n_passed"], replies["n_failed"], replies["n_errors"]) == (14, 12, 2, 0)
    low, high = wilson_interval(12, 14, 0.95)
    assert replies["interval"] == {"low": low, "high": high, "confidence": 0.95, "method": "wilson"}
    over_scenarios = polite["scenarios"]
    assert (over_scenarios["n"], over_scenarios["n_passed"], over_scenarios["n_failed"],
            over_scenarios["n_errors"]) == (2, 0, 1, 1)
    assert built["checks_summary"]["n_scenarios"] == 2 and built["checks_summary"]["n_scenarios_failing"] == 1
    validate_report(make_report(scenarios=built))


def test_without_reply_checks_the_section_has_none_and_the_page_says_nothing_of_them():
    built = section([transcript("bins", 0, ["Sorry."])], checks({"name": "short", "max_words": 3}))
    assert built["checks_summary"] is None
    assert scenario(built, "bins")["checks"] == [] and scenario(built, "bins")["transcripts"][0]["checks"] == []
    assert "check" not in read_markup(headline(built))[1]
    validate_report(make_report(scenarios=built))


def test_the_profile_s_reply_checks_come_from_its_checks_file(tmp_path):
    (tmp_path / "checks.yaml").write_text(yaml.safe_dump({"version": 1, "checks": [
        {"name": "short", "max_words": 3}, POLITE, {"name": "last-says-bye", "contains": "bye", "turn": "last"}]}))
    profile = Profile({"checks": {"path": "checks.yaml"}}, tmp_path / "p.yaml", tmp_path)
    assert [(a.name, a.turn) for a in reply_checks(profile)] == [("polite", "every"), ("last-says-bye", "last")]
    assert reply_checks(Profile({"checks": {"path": None}}, tmp_path / "p.yaml", tmp_path)) == ()


# ---------------------------------------------------------------- the page

def test_hostile_reply_text_and_reasons_are_escaped_on_the_page():
    hostile_reply = f"{SCRIPT} {IMG} sorry"
    built = section([transcript("bins", 0, [hostile_reply])],
                    checks(POLITE, {"name": "no-img", "not_contains": IMG, "turn": 1}))
    reasons = [o["reason"] for o in scenario(built, "bins")["transcripts"][0]["checks"]]
    assert any(IMG in reason for reason in reasons)  # the reason quotes the reply's text
    shown = page(built)
    elements, text = read_markup(shown)
    assert not {"script", "img"} & {tag for tag, _ in elements}
    assert not [attributes for _, attributes in elements if any(name.startswith("on") for name in attributes)]
    assert SCRIPT not in shown and SCRIPT in text and IMG in text  # shown as text, not markup
    assert "failed in 1 of 1 repeat" in text and "no-img" in text


def test_the_page_shows_each_failing_check_beside_its_reply():
    built = section([transcript("bins", 0, ["Teal bin.", "Sorry, teal."])], checks(POLITE))
    transcripts = transcripts_html(built)
    reply_at = transcripts.index("Sorry, teal.")
    assert transcripts.index("reply 2: the answer holds", reply_at) > reply_at

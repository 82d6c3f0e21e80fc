"""The report's `scenarios` section: each scenario with its outcomes and its transcripts, each
transcript with the judge's verdicts beside the replies they judged.

Built from 02a_converse's summary and transcripts and 03_judge's scenario judgments. When the
judge did not run (disabled, unreachable) the section keeps every transcript and end reason,
with `status` not_judged and the reason: nothing is reported as passed.

Every scenario of the file is in the section. A replay of a file that lacks some conversations
(its run was interrupted) lists them in `missing` and, with how that run ended, in
`nothing_to_score`; a scenario with no transcript keeps its entry, with none, and the repeats a
scenario lacks count as unjudged in its pass rates (evalbook.scenarios.outcomes.with_absent).

The checks file's checks on replies (those with `turn`, docs/checks-assertions.md) are applied
here, to every transcript of the scenarios they cover: exact and free, so 02a_converse shows
them as soon as the conversations end, and the report (04_report) keeps each transcript's
outcomes beside it (`checks`), each scenario's check over its repeats (`checks`, a repeat
lacking in a replay counted as not checked) and, per check, the pass rate over the replies and
over the scenarios with their Wilson intervals (`checks_summary`). A run whose every reply
check errored checked nothing, and fails (NothingChecked).
"""

from __future__ import annotations

from typing import Any, Sequence

from evalbook.checks.assertions import Assertion as Check
from evalbook.checks.assertions import applies_to_scenario, turn_outcomes
from evalbook.checks.checksfile import load_checks_file
from evalbook.checks.protocol import CheckOutcome, check_summary, checks_summary
from evalbook.params import Profile, resolve_path
from evalbook.scenarios.conversation import Transcript
from evalbook.scenarios.judging import replies, transcript_id
from evalbook.scenarios.outcomes import repeat_check, scenario_check, with_absent
from evalbook.scenarios.spec import Scenario
from evalbook.scenarios.transcripts import missing_lines


def _assertion(assertion) -> dict[str, Any]:
    return {"kind": assertion.kind, "turn": assertion.turn, "threshold": assertion.threshold,
            "threshold_text": assertion.threshold_text, "ground_truth": assertion.ground_truth}


def _outcomes(result: dict[str, Any] | None, absent: int) -> dict[str, Any] | None:
    """A scenario's judged outcomes, its `absent` repeats (no transcript) counted as unjudged."""
    if result is None:
        return None
    outcomes = result["outcomes"]
    if not absent:
        return outcomes
    return {**outcomes, "overall": with_absent(outcomes["overall"], absent),
            "criteria": [with_absent(c, absent) for c in outcomes["criteria"]],
            "assertions": [with_absent(a, absent) for a in outcomes["assertions"]]}


def reply_checks(profile: Profile) -> tuple[Check, ...]:
    """The checks of the profile's checks file that check scenario replies (with `turn`), in the
    file's order; none without a checks file. The runner's pre-flight has refused a bad file."""
    path = profile["checks"]["path"]
    if path is None:
        return ()
    return tuple(check for check in load_checks_file(resolve_path(path, profile.root)) if check.turn is not None)


def transcript_checks(transcript: Transcript, checks: Sequence[Check]) -> list[CheckOutcome]:
    """Each check's outcome on each reply of `transcript` it covers, check by check in order."""
    texts = [text for _, _, text in replies(transcript)]
    return [outcome for check in checks for outcome in turn_outcomes(check, texts)]


def _over_repeats(check: Check, transcripts: Sequence[Transcript], checked: Sequence[Sequence[CheckOutcome]],
                  absent: Sequence[int]) -> dict[str, Any]:
    """`check` over one scenario's repeats: each repeat's outcome from its replies' (`checked`,
    one list per transcript), then the scenario's (evalbook.scenarios.outcomes.scenario_check)."""
    by_repeat = {transcript.repeat: repeat_check(check.name, [o for o in outcomes if o.check == check.name])
                 for transcript, outcomes in zip(transcripts, checked)}
    return {**scenario_check(check.name, by_repeat, absent), "turn": check.turn}


def _checks_summary(checks: Sequence[Check], by_transcript: list[list[CheckOutcome]],
                    by_scenario: list[list[dict[str, Any]]]) -> dict[str, Any] | None:
    """Per check, its pass rate over the replies it checked and over the scenarios it covers;
    how many transcripts and scenarios failed any check. None when no check covers a scenario."""
    if not any(by_scenario):
        return None
    checked = [outcomes for outcomes in by_transcript if outcomes]
    over_replies = checks_summary(checked)  # NothingChecked when every outcome is an error
    scenario_outcomes: dict[str, list[CheckOutcome]] = {}
    for entries in by_scenario:
        for entry in entries:
            scenario_outcomes.setdefault(entry["check"], []).append(
                CheckOutcome(entry["check"], entry["status"], entry["reason"]))
    return {
        "checks": {check.name: {"turn": check.turn,
                                "replies": over_replies["checks"].get(check.name, check_summary([])),
                                "scenarios": check_summary(scenario_outcomes[check.name])}
                   for check in checks if check.name in scenario_outcomes},
        "n_transcripts": over_replies["n_examples"], "n_transcripts_failing": over_replies["n_examples_failing"],
        "n_scenarios": sum(bool(entries) for entries in by_scenario),
        "n_scenarios_failing": sum(any(e["status"] == "fail" for e in entries) for entries in by_scenario),
    }


def scenarios_section(scenarios: Sequence[Scenario], transcripts: Sequence[Transcript], summary: dict[str, Any],
                      judgments: dict[str, Any], checks: Sequence[Check] = ()) -> dict[str, Any]:
    """The section; `checks` are the checks file's checks (reply_checks), those with `turn`
    applied to the replies they cover."""
    judged = judgments.get("status") == "ran"
    by_scenario = judgments.get("scenarios", {}) if judged else {}
    missing = summary.get("missing", [])  # a summary written before replays listed them has none
    absent = {entry["scenario_id"]: entry["repeats"] for entry in missing}
    entries, by_transcript, scenario_checks = [], [], []
    for scenario in scenarios:
        mine = [t for t in transcripts if t.scenario_id == scenario.id]
        result = by_scenario.get(scenario.id)
        covering = [check for check in checks if applies_to_scenario(check, scenario.id)]
        checked = [transcript_checks(t, covering) for t in mine]
        rolled = [_over_repeats(check, mine, checked, absent.get(scenario.id, ())) for check in covering]
        by_transcript += checked
        scenario_checks.append(rolled)
        entries.append({
            "id": scenario.id, "goal": scenario.goal, "persona": scenario.persona,
            "first_speaker": scenario.first_speaker, "max_turns": scenario.max_turns,
            "expected_outcome": scenario.expected_outcome, "criteria": list(scenario.criteria),
            "assertions": [_assertion(a) for a in scenario.assertions],
            "outcomes": _outcomes(result, len(absent.get(scenario.id, ()))),
            "checks": rolled,
            "transcripts": [{**t.as_record(),
                             "judgment": None if result is None else result["transcripts"].get(transcript_id(t)),
                             "checks": [outcome.as_record() for outcome in outcomes]}
                            for t, outcomes in zip(mine, checked)],
        })
    return {
        "status": "judged" if judged else "not_judged",
        "reason": None if judged else judgments.get("reason"),
        "conversations": summary["status"],  # ran, or replayed from an earlier run
        "replayed_from": summary.get("replayed_from"),
        "replay_source": summary.get("replay_source"),
        "scenario_file": summary["scenario_file"], "repeats": summary["repeats"], "seed": summary.get("seed"),
        "n_scenarios": len(entries), "n_transcripts": len(transcripts),
        "end_reasons": summary["end_reasons"],
        "simulator": summary.get("simulator"), "system": summary.get("system"),
        "estimate": summary.get("estimate"),
        "judge_calls": judgments.get("calls") if judged else None,
        "judge_labels": judgments.get("labels", []) if judged else [],
        "nothing_to_score": ((judgments.get("nothing_to_score", []) if judged else [])
                             + missing_lines(missing, summary.get("replay_source"))),
        "missing": missing,
        "checks_summary": _checks_summary(checks, by_transcript, scenario_checks),
        "scenarios": entries,
    }

"""The report's `scenarios` section: each scenario with its outcomes and its transcripts, each
transcript with the judge's verdicts beside the replies they judged.

Built from 02a_converse's summary and transcripts and 03_judge's scenario judgments. When the
judge did not run (disabled, unreachable) the section keeps every transcript and end reason,
with `status` not_judged and the reason: nothing is reported as passed.

Every scenario of the file is in the section. A replay of a file that lacks some conversations
(its run was interrupted) lists them in `missing` and, with how that run ended, in
`nothing_to_score`; a scenario with no transcript keeps its entry, with none, and the repeats a
scenario lacks count as unjudged in its pass rates (evalbook.scenarios.outcomes.with_absent).
"""

from __future__ import annotations

from typing import Any, Sequence

from evalbook.scenarios.conversation import Transcript
from evalbook.scenarios.judging import transcript_id
from evalbook.scenarios.outcomes import with_absent
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


def scenarios_section(scenarios: Sequence[Scenario], transcripts: Sequence[Transcript], summary: dict[str, Any],
                      judgments: dict[str, Any]) -> dict[str, Any]:
    judged = judgments.get("status") == "ran"
    by_scenario = judgments.get("scenarios", {}) if judged else {}
    missing = summary.get("missing", [])  # a summary written before replays listed them has none
    absent = {entry["scenario_id"]: len(entry["repeats"]) for entry in missing}
    entries = []
    for scenario in scenarios:
        mine = [t for t in transcripts if t.scenario_id == scenario.id]
        result = by_scenario.get(scenario.id)
        entries.append({
            "id": scenario.id, "goal": scenario.goal, "persona": scenario.persona,
            "first_speaker": scenario.first_speaker, "max_turns": scenario.max_turns,
            "expected_outcome": scenario.expected_outcome, "criteria": list(scenario.criteria),
            "assertions": [_assertion(a) for a in scenario.assertions],
            "outcomes": _outcomes(result, absent.get(scenario.id, 0)),
            "transcripts": [{**t.as_record(),
                             "judgment": None if result is None else result["transcripts"].get(transcript_id(t))}
                            for t in mine],
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
        "scenarios": entries,
    }

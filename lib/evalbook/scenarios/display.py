"""The scenarios for people: a headline, how the conversations ended, the pass rates, and each
transcript with the judge's verdicts beside the replies they judged.

Every text from a scenario file, the simulator, the system or the judge is cut to
SHOWN_CHARACTERS by evalbook.escaping.shown_text (a 10 MB reply is kept whole in the report JSON,
not on the page) and escaped by the templates (evalbook.templating); the tables go through
escaped_table or readable_table, which cut and escape each cell.

Where a rationale goes: a criterion's rationale is shown beside the turn it cites, the first
turn holding a passage it quotes (in quotation marks, at least CITED_CHARACTERS long, case
aside); a rationale that quotes no turn is shown after the transcript, with its criterion. The
whole rationale is matched against the whole turn: a passage past the cut still places it.
Assertions judge one reply each, and their verdicts sit beside that reply; so do the outcomes
of the checks file's reply checks, a failed or unchecked one with its reason, and a check on a
reply that never came sits after the transcript. The headline gives each reply check's pass
rate over the replies with its Wilson interval, and names every scenario that failed one (or
could not be checked throughout) with the count over its repeats.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from evalbook.escaping import shown_text
from evalbook.formatting import MISSING, interval, percent
from evalbook.templating import render

CITED_CHARACTERS = 8
QUOTED = re.compile(r"[\"“']([^\"”']{%d,})[\"”']" % CITED_CHARACTERS)
END_MEANINGS = {
    "goal_met": "the simulated user said its goal was met",
    "gave_up": "the simulated user gave up",
    "max_turns": "the assistant replied max_turns times",
    "loop_detected": "the user repeated an earlier message, word for word or nearly",
    "timeout": "a call or the whole conversation ran out of time",
    "system_error": "the system under test failed to answer, after its retries",
    "simulator_error": "the simulator failed, or twice replied with what was not the JSON asked for",
}
MARK = {True: "✓", False: "✗", None: "?"}
CHECK_MARK = {"pass": "✓", "fail": "✗", "error": "?"}
HEADLINE_FIELDS = ("n_transcripts", "n_scenarios", "repeats", "conversations", "replayed_from", "status", "reason",
                   "nothing_to_score")
SCENARIO_FIELDS = ("id", "goal", "persona", "expected_outcome")


def _shown(value: Any) -> Any:
    """`value` as a page shows it: each text in it, at any depth of dicts and lists, cut by
    shown_text; anything else as it is. Apply it once: a cut text, its note included, is longer
    than the cap and would be cut again."""
    if isinstance(value, str):
        return shown_text(value)
    if isinstance(value, dict):
        return {key: _shown(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shown(item) for item in value]
    return value


def covered_replies(turn: str | int) -> str:
    """Which replies a check's `turn` covers, in words."""
    return {"every": "every reply", "last": "the last reply"}.get(turn, f"reply {turn}")


def checks_view(section: dict[str, Any]) -> dict[str, Any] | None:
    """What the headline says of the reply checks: each check's pass rate over the replies and
    the scenarios, and each scenario's check that failed or could not be checked throughout;
    None when no reply check ran (a section written before them has none)."""
    summary = section.get("checks_summary")
    if not summary:
        return None
    rates = []
    for name, entry in summary["checks"].items():
        replies, scenarios = entry["replies"], entry["scenarios"]
        bounds = replies["interval"] or {}
        rates.append({"name": name, "covers": covered_replies(entry["turn"]), "n_passed": replies["n_passed"],
                      "n_decided": replies["n_passed"] + replies["n_failed"], "n_errors": replies["n_errors"],
                      "pass_rate": replies["pass_rate"], "low": bounds.get("low"), "high": bounds.get("high"),
                      "scenarios_passed": scenarios["n_passed"], "n_scenarios": scenarios["n"]})
    listed = [{"scenario": scenario["id"], "check": check["check"], "mark": CHECK_MARK[check["status"]],
               "reason": check["reason"]}
              for status in ("fail", "error") for scenario in section["scenarios"]
              for check in scenario.get("checks") or [] if check["status"] == status]
    return _shown({"n_scenarios": summary["n_scenarios"], "n_failing": summary["n_scenarios_failing"],
                   "rates": rates, "listed": listed})


def headline(section: dict[str, Any]) -> str:
    """One paragraph: how many conversations of how many scenarios, how they ended, how many
    passed, what the reply checks found, and what was called."""
    ends = {reason: n for reason, n in section["end_reasons"].items() if n}
    outcomes = [s["outcomes"]["overall"] for s in section["scenarios"] if s.get("outcomes")]
    return render("scenarios_headline.html", section=_shown({key: section.get(key) for key in HEADLINE_FIELDS}),
                  ends=", ".join(f"{n} {reason.replace('_', ' ')}" for reason, n in ends.items()),
                  n_passed=sum(o["n_passed"] for o in outcomes), n_judged=sum(o["n_judged"] for o in outcomes),
                  n_reliable=sum(bool(o["pass_all"]) for o in outcomes), checks=checks_view(section),
                  simulator=_shown(section.get("simulator")), system=_shown(section.get("system")))


def end_reasons_table(section: dict[str, Any]) -> pd.DataFrame:
    rows = [{"ended": reason.replace("_", " "), "conversations": n, "meaning": END_MEANINGS[reason]}
            for reason, n in section["end_reasons"].items()]
    return pd.DataFrame(rows).set_index("ended")


def _rate(summary: dict[str, Any]) -> dict[str, Any]:
    bounds = summary["interval"]
    return {"passed": f"{summary['n_passed']} of {summary['n_judged']}",
            "pass rate": percent(summary["pass_rate"]) if summary["pass_rate"] is not None else MISSING,
            "95% interval (Wilson)": MISSING if bounds is None else interval(bounds["low"], bounds["high"]),
            "pass^k (every repeat)": MARK[summary["pass_all"]] if summary["n_judged"] else MISSING,
            "pass@k (any repeat)": MARK[summary["pass_any"]] if summary["n_judged"] else MISSING,
            "unjudged repeats": summary["n_unjudged"]}


def _assertion_name(assertion: dict[str, Any]) -> str:
    turn = assertion["turn"]
    where = f"reply {turn}" if isinstance(turn, int) else f"{turn} reply"
    return f"{assertion['kind']} on {where}, at {assertion['threshold_text']}"


def outcomes_table(section: dict[str, Any]) -> pd.DataFrame:
    """Per scenario: the whole scenario, each criterion and each assertion, over the repeats."""
    rows = []
    for scenario in section["scenarios"]:
        outcomes = scenario["outcomes"]
        if outcomes is None:
            continue
        rows.append({"scenario": scenario["id"], "check": "all of them", **_rate(outcomes["overall"])})
        rows += [{"scenario": scenario["id"], "check": f"criterion: {c['criterion']}", **_rate(c)}
                 for c in outcomes["criteria"]]
        rows += [{"scenario": scenario["id"], "check": _assertion_name(a), **_rate(a)} for a in outcomes["assertions"]]
    return pd.DataFrame(rows)


def spread_table(section: dict[str, Any]) -> pd.DataFrame:
    """How far the repeats of each scenario differ: the criteria score (share met) per repeat."""
    rows = []
    for scenario in section["scenarios"]:
        if scenario["outcomes"] is None:
            continue
        spread = scenario["outcomes"]["criteria_score_spread"]
        rows.append({"scenario": scenario["id"], "repeats scored": spread["n_scored"],
                     "lowest": spread["min"], "highest": spread["max"], "std": spread["std"]})
    return pd.DataFrame(rows, columns=["scenario", "repeats scored", "lowest", "highest", "std"]).set_index("scenario")


def _cited_turn(rationale: str, folded_turns: list[str]) -> int | None:
    """The position of the first turn (casefolded, whole) holding a passage `rationale` quotes."""
    for passage in QUOTED.findall(rationale or ""):
        wanted = passage.strip().casefold()
        for position, content in enumerate(folded_turns):
            if wanted and wanted in content:
                return position
    return None


def _statements(detail: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [{"mark": MARK.get(bool(s.get("verdict")) if s.get("verdict") in (0, 1) else None),
             "statement": s.get("statement"), "justification": s.get("justification")}
            for s in (detail or {}).get("statements") or []]


def transcript_view(scenario: dict[str, Any], transcript: dict[str, Any]) -> dict[str, Any]:
    """One transcript as the template shows it: each turn with the verdicts that belong beside it,
    every text cut by shown_text (after the rationales are placed, on the whole texts)."""
    turns = transcript["turns"]
    beside: dict[int, list[dict[str, Any]]] = {}
    reply_positions, number = {}, 0
    for position, turn in enumerate(turns):
        if turn["role"] == "assistant" and (position > 0 or scenario["first_speaker"] == "user"):
            number += 1
            reply_positions[number] = position
    judgment = transcript.get("judgment") or {}
    for assertion, verdict in zip(scenario["assertions"], judgment.get("assertions") or []):
        for reply in verdict.get("replies", []):
            position = reply_positions.get(reply["reply"])
            if position is not None:
                beside.setdefault(position, []).append({
                    "kind": "assertion", "name": _assertion_name(assertion), "mark": MARK[reply["passed"]],
                    "score": reply["score"], "reason": reply["unscored_reason"],
                    "statements": _statements(reply.get("detail"))})
    checks_unplaced = []
    for outcome in transcript.get("checks") or []:
        position = reply_positions.get((outcome.get("details") or {}).get("reply"))
        verdict = {"kind": "check", "name": f"check {outcome['check']}", "mark": CHECK_MARK[outcome["status"]],
                   "reason": None if outcome["status"] == "pass" else outcome["reason"]}
        (beside.setdefault(position, []) if position is not None else checks_unplaced).append(verdict)
    unplaced = []
    criteria = (judgment.get("criteria") or {})
    entries = criteria.get("criteria") or []
    folded_turns = [turn["content"].casefold() for turn in turns] if entries else []
    for entry in entries:
        verdict = {"kind": "criterion", "name": entry["criterion"], "mark": MARK[entry["met"]],
                   "rationale": entry["rationale"]}
        position = _cited_turn(entry["rationale"], folded_turns)
        (beside.setdefault(position, []) if position is not None else unplaced).append(verdict)
    return _shown({"id": scenario["id"], "repeat": transcript["repeat"], "seed": transcript["seed"],
                   "end_reason": transcript["end_reason"].replace("_", " "), "end_detail": transcript["end_detail"],
                   "turns": [{"role": turn["role"], "content": turn["content"], "verdicts": beside.get(position, [])}
                             for position, turn in enumerate(turns)],
                   "criteria_unplaced": unplaced, "checks_unplaced": checks_unplaced,
                   "criteria_reason": criteria.get("unscored_reason"), "judged": bool(judgment)})


def transcripts_html(section: dict[str, Any]) -> str:
    """Every transcript of the run, scenario by scenario."""
    views = [{"scenario": _shown({key: scenario[key] for key in SCENARIO_FIELDS}),
              "transcripts": [transcript_view(scenario, t) for t in scenario["transcripts"]]}
             for scenario in section["scenarios"]]
    return render("scenarios_transcripts.html", scenarios=views, nothing=_shown(section["nothing_to_score"]))

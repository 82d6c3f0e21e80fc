"""The checks of two runs, example by example: the comparison's `checks` section.

A check's outcome on an example is `pass`, `fail` or `error` (evalbook.checks.protocol). On each
example both runs hold, a check that passed in the baseline and fails in the candidate *newly
fails*; one that failed and now passes is *fixed*. An error on either side is neither: the check
said nothing there. Each check's pass rate is given in both runs over the same pairs, those it
passed or failed in both, so that its change is paired like every delta of a comparison:
(fixed - newly failing) / pairs.

Reports carry checks since schema 1.13. When either run has none (an older report, or a run
whose profile checked nothing), the section is not compared and says why in one sentence.
"""

from __future__ import annotations

from typing import Any, Sequence

from evalbook.metrics import metric as registered

CHECKS_SINCE = "1.13"  # the report schema that first holds checks
DECIDED = ("pass", "fail")
TALLIED = ("n", "base_passed", "cand_passed", "newly_failing", "fixed")  # counted per check over the pairs
# Where similarity misleads most: among examples with as many checks newly failing, the
# highest BERTScore F1 comes first, as the report's failing answers do (evalbook.report.checks).
SIMILARITY = "bertscore_f1"


def _checks_ran(report: dict[str, Any]) -> list[str]:
    """The checks a report ran, in its summary's order; [] when it has none."""
    return list(((report.get("checks_summary") or {}).get("checks") or {}))


def _before_checks(version: Any) -> bool:
    """Whether a report schema version predates checks (a version that does not read as one does)."""
    def parts(text: Any) -> tuple[int, ...]:
        return tuple(int(part) for part in str(text).split("."))

    try:
        return parts(version) < parts(CHECKS_SINCE)
    except ValueError:
        return True


def _without_checks(report: dict[str, Any], side: str) -> str | None:
    """Why a report has no checks to compare, or None when it has some."""
    if "checks_summary" not in report and _before_checks(report.get("schema_version")):
        return (f"the {side} report (schema {report.get('schema_version')}) has no checks: reports hold them "
                f"since schema {CHECKS_SINCE}")
    if not _checks_ran(report):
        return f"no check ran in the {side} run (its profile's checks were off)"
    return None


def _statuses(example: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each check's outcome on an example, by check name."""
    return {outcome["check"]: outcome for outcome in example.get("checks") or []}


def not_compared(reason: str) -> dict[str, Any]:
    """The section when the checks cannot be compared, with the reason."""
    return {"compared": False, "reason": reason, "n_paired": 0, "checks": [], "n_newly_failing": 0,
            "n_examples_newly_failing": 0, "newly_failing": [], "n_fixed": 0, "fixed": []}


def check_changes(baseline: dict[str, Any], candidate: dict[str, Any], paired_ids: Sequence[str]) -> dict[str, Any]:
    """The comparison's `checks` section for two reports and the ids they share (in pairing order)."""
    missing = [why for why in (_without_checks(baseline, "baseline"), _without_checks(candidate, "candidate")) if why]
    if missing:
        return not_compared("; ".join(missing))
    base_checks, cand_checks = _checks_ran(baseline), _checks_ran(candidate)
    shared = [name for name in base_checks if name in cand_checks]
    if not shared:
        return not_compared(f"no check ran in both runs (the baseline ran {', '.join(base_checks)}, "
                            f"the candidate {', '.join(cand_checks)})")
    base_by_id = {example["id"]: example for example in baseline["examples"]}
    cand_by_id = {example["id"]: example for example in candidate["examples"]}
    tallies = {name: dict.fromkeys(TALLIED, 0) for name in shared}
    newly_failing, fixed = [], []
    for position, example_id in enumerate(paired_ids):
        base, cand = base_by_id[example_id], cand_by_id[example_id]
        failing, passing = _example_changes(_statuses(base), _statuses(cand), shared, tallies)
        if failing:
            newly_failing.append((position, registered(SIMILARITY).value(cand), {
                "id": example_id, "question": cand["question"], "reference_answer": cand["reference_answer"],
                "baseline_answer": base["generated_answer"], "candidate_answer": cand["generated_answer"],
                "checks": failing}))
        if passing:
            fixed.append({"id": example_id, "checks": passing})
    rows = [_check_row(name, tallies.get(name), len(paired_ids), name in base_checks)
            for name in dict.fromkeys([*base_checks, *cand_checks])]
    return {"compared": True, "reason": None, "n_paired": len(paired_ids), "checks": rows,
            "n_newly_failing": sum(len(entry["checks"]) for _, _, entry in newly_failing),
            "n_examples_newly_failing": len(newly_failing), "newly_failing": _worst_first(newly_failing),
            "n_fixed": sum(len(entry["checks"]) for entry in fixed), "fixed": fixed}


def _example_changes(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], shared: Sequence[str],
                     tallies: dict[str, dict[str, int]]) -> tuple[list[dict[str, Any]], list[str]]:
    """One shared example: its checks newly failing (with both reasons) and the names of those
    fixed, each check passed or failed in both runs counted into `tallies`."""
    failing, passing = [], []
    for name in shared:
        was, now = (before.get(name) or {}).get("status"), (after.get(name) or {}).get("status")
        if was not in DECIDED or now not in DECIDED:
            continue
        tally = tallies[name]
        tally["n"] += 1
        tally["base_passed"] += was == "pass"
        tally["cand_passed"] += now == "pass"
        if (was, now) == ("pass", "fail"):
            tally["newly_failing"] += 1
            failing.append({"check": name, "reason": after[name]["reason"], "baseline_reason": before[name]["reason"]})
        elif (was, now) == ("fail", "pass"):
            tally["fixed"] += 1
            passing.append(name)
    return failing, passing


def _worst_first(found: list[tuple[int, float | None, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The most checks newly failing first, then the highest candidate BERTScore F1 (missing
    last), then the pairing's order."""
    ordered = sorted(found, key=lambda item: (-len(item[2]["checks"]), item[1] is None, -(item[1] or 0.0), item[0]))
    return [entry for _, _, entry in ordered]


def _check_row(name: str, tally: dict[str, int] | None, n_paired: int, in_baseline: bool) -> dict[str, Any]:
    """One check's pass rates in both runs over the pairs it passed or failed in both, its change,
    and its newly failing and fixed counts; a check only one run ran says so."""
    if tally is None:
        reason = f"only the {'baseline' if in_baseline else 'candidate'} run ran it"
        tally = dict.fromkeys(TALLIED, 0)
    else:
        reason = None if tally["n"] else "no shared example has it passed or failed in both runs"
    n = tally["n"]
    return {"check": name, "reason": reason, "n": n, "n_skipped": n_paired - n,
            "baseline_pass_rate": tally["base_passed"] / n if n else None,
            "candidate_pass_rate": tally["cand_passed"] / n if n else None,
            "delta": (tally["cand_passed"] - tally["base_passed"]) / n if n else None,
            "n_newly_failing": tally["newly_failing"], "n_fixed": tally["fixed"]}


# ---------------------------------------------------------------- what a reader is told

def section_of(comparison: dict[str, Any]) -> dict[str, Any]:
    """A comparison's `checks`; one made before checks were compared (schema 1.5) has none, and
    reads as not compared, saying so."""
    return comparison.get("checks") or not_compared(
        f"this comparison (schema {comparison.get('schema_version')}) was made before checks were compared")


def _checks(n: int) -> str:
    return f"{n} check{'' if n == 1 else 's'}"


def newly_failing_said(section: dict[str, Any]) -> str:
    """How many checks newly fail in the candidate, on how many of the shared examples."""
    failing, shared = section["n_newly_failing"], f"the {section['n_paired']} shared examples"
    if not failing:
        return f"no check newly fails in the candidate on {shared}"
    return (f"{_checks(failing)} newly fail{'s' if failing == 1 else ''} in the candidate on "
            f"{section['n_examples_newly_failing']} of {shared} (pass in the baseline, fail in the candidate)")


def fixed_said(section: dict[str, Any]) -> str:
    """How many checks newly pass (fixed: fail in the baseline, pass in the candidate)."""
    fixed = section["n_fixed"]
    return f"{_checks(fixed)} newly pass{'es' if fixed == 1 else ''} (fixed)"

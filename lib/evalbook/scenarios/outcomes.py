"""Pass rates over a scenario's repeats: the rate with its Wilson interval, pass^k and pass@k.

A scenario run k times passes a criterion in some of them. The pass rate is the share that
passed, with a Wilson score interval (scipy's `binomtest(...).proportion_ci`), which stays
inside [0, 1] and is honest at the small k a scenario is repeated. pass^k says whether every
repeat passed (the assistant is reliable), pass@k whether at least one did (the assistant can).
Repeats that could not be judged count in neither: they are reported as unjudged, and so are
the repeats a replayed file has no transcript of (`with_absent`), so that n_repeats is always
scenarios.repeats.

A checks file's checks on replies (`turn`) roll up the same way, as exact checks do
(evalbook.checks.protocol): a repeat fails a check when any reply it covers failed, and a
scenario when any repeat failed ("failed in 2 of 5 repeats"). A repeat or scenario that no
reply failed but that could not be checked throughout (a reply that never came, a repeat a
replay lacks) is an error, never a pass.
"""

from __future__ import annotations

from typing import Any, Sequence

from evalbook.checks.protocol import CheckOutcome, check_summary
from evalbook.stats import wilson_interval

CONFIDENCE = 0.95


def pass_summary(verdicts: Sequence[bool | None], confidence: float = CONFIDENCE) -> dict[str, Any]:
    """One scenario's verdicts on one criterion, one per repeat (None: that repeat was not judged)."""
    judged = [bool(v) for v in verdicts if v is not None]
    passed = sum(judged)
    interval = wilson_interval(passed, len(judged), confidence)
    return {
        "n_repeats": len(verdicts), "n_judged": len(judged), "n_unjudged": len(verdicts) - len(judged),
        "n_passed": passed, "pass_rate": passed / len(judged) if judged else None,
        "interval": None if interval is None else {"low": interval[0], "high": interval[1],
                                                   "confidence": confidence, "method": "wilson"},
        # over the judged repeats; None when none was judged (not a pass, not a fail)
        "pass_all": all(judged) if judged else None,
        "pass_any": any(judged) if judged else None,
    }


def with_absent(summary: dict[str, Any], absent: int) -> dict[str, Any]:
    """`summary` with `absent` more repeats that have no transcript (a replay of an incomplete
    run): they count as unjudged, so the rate, its interval, pass^k and pass@k are unchanged."""
    return {**summary, "n_repeats": summary["n_repeats"] + absent, "n_unjudged": summary["n_unjudged"] + absent}


def _plural(n: int, word: str, plural: str) -> str:
    return f"{n} {word if n == 1 else plural}"


def repeat_check(check: str, replies: Sequence[CheckOutcome]) -> CheckOutcome:
    """One repeat's outcome of `check` over the replies it covers (evalbook.checks.assertions'
    turn_outcomes): fail when any reply failed, with the first failure's reason; else error when
    any could not be checked; else pass."""
    for status in ("fail", "error"):
        found = [outcome for outcome in replies if outcome.status == status]
        if found:
            more = f" (and {_plural(len(found) - 1, 'more reply', 'more replies')})" if len(found) > 1 else ""
            return CheckOutcome(check, status, found[0].reason + more)
    reason = replies[0].reason if len(replies) == 1 else f"all {len(replies)} replies passed"
    return CheckOutcome(check, "pass", reason)


def scenario_check(check: str, repeats: dict[int, CheckOutcome], absent: Sequence[int] = ()) -> dict[str, Any]:
    """`check` over a scenario's repeats (each repeat's repeat_check, by repeat number; `absent`
    the repeats with no transcript): the scenario's outcome, fail when it failed in any repeat,
    error when none failed but one could not be checked, else pass; with the repeats' counts and
    pass rate (evalbook.checks.protocol.check_summary) and the repeats that failed."""
    every = {**repeats, **{repeat: CheckOutcome(check, "error", "no transcript of this repeat") for repeat in absent}}
    ordered = sorted(every.items())
    total = len(ordered)
    failed = [(repeat, outcome) for repeat, outcome in ordered if outcome.status == "fail"]
    errors = [(repeat, outcome) for repeat, outcome in ordered if outcome.status == "error"]
    of = f"of {_plural(total, 'repeat', 'repeats')}"
    if failed:
        repeat, first = failed[0]
        outcome = CheckOutcome(check, "fail", f"failed in {len(failed)} {of}; repeat {repeat}, {first.reason}")
    elif errors:
        repeat, first = errors[0]
        outcome = CheckOutcome(check, "error", f"could not be checked in {len(errors)} {of}; "
                                               f"repeat {repeat}: {first.reason}")
    elif total:
        outcome = CheckOutcome(check, "pass", f"passed in all {total} repeats" if total > 1 else "passed in its one repeat")
    else:
        outcome = CheckOutcome(check, "error", "the scenario has no conversation to check")
    return {**outcome.as_record(), "repeats": check_summary([o for _, o in ordered]),
            "failed_repeats": [repeat for repeat, _ in failed]}

"""Pass rates over a scenario's repeats: the rate with its Wilson interval, pass^k and pass@k.

A scenario run k times passes a criterion in some of them. The pass rate is the share that
passed, with a Wilson score interval (scipy's `binomtest(...).proportion_ci`), which stays
inside [0, 1] and is honest at the small k a scenario is repeated. pass^k says whether every
repeat passed (the assistant is reliable), pass@k whether at least one did (the assistant can).
Repeats that could not be judged count in neither: they are reported as unjudged, and so are
the repeats a replayed file has no transcript of (`with_absent`), so that n_repeats is always
scenarios.repeats.
"""

from __future__ import annotations

from typing import Any, Sequence

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

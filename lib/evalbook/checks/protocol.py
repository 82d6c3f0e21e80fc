"""One protocol for every check: per example `pass`, `fail` or `error` with a reason a person
can read; per run, each check's pass rate with its Wilson interval.

A check asserts what can be asserted, exactly and for free, before any judge is asked: the
facts of an answer against its reference (evalbook.checks.facts), or the user's own assertions
(a column or a checks file). Each outcome names its check, so that a report example holds a
list of them (`checks`) and a run one summary per check (`checks_summary`).

- `pass`: the answer holds what the check asserts.
- `fail`: it does not; the reason says what is wrong ("£15: the reference says £14").
- `error`: the check could not be applied to this example (it raised, or its input is missing);
  the reason says why. An error is neither a pass nor a fail: the pass rate is over the examples
  that passed or failed, and the errors are counted beside it. A run where every outcome of
  every check is an error has checked nothing, and fails (NothingChecked).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Sequence

from evalbook.errors import EvalbookError
from evalbook.stats import wilson_interval

Status = Literal["pass", "fail", "error"]
STATUSES: tuple[Status, ...] = ("pass", "fail", "error")
CONFIDENCE = 0.95


class NothingChecked(EvalbookError, RuntimeError):
    """Every outcome of every check was an error: the run checked nothing."""


@dataclass(frozen=True)
class CheckOutcome:
    """One check on one example. `details` holds what a page may show beyond the reason (the
    facts found, for the fact check), as JSON values."""

    check: str
    status: Status
    reason: str
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"a check's status is one of {', '.join(STATUSES)}, not {self.status!r}")

    def as_record(self) -> dict[str, Any]:
        """The outcome as a report example's `checks` holds it."""
        record: dict[str, Any] = {"check": self.check, "status": self.status, "reason": self.reason}
        if self.details:
            record["details"] = self.details
        return record


def guarded(check: str, run: Callable[[], CheckOutcome]) -> CheckOutcome:
    """`run()`'s outcome; a check that raises on one example is an `error` there, with the
    exception in its reason, and the run goes on."""
    try:
        return run()
    except Exception as error:  # noqa: BLE001 - one example's failure must not stop the others
        return CheckOutcome(check, "error", f"the check could not run: {type(error).__name__}: {error}")


def check_summary(outcomes: Sequence[CheckOutcome], confidence: float = CONFIDENCE) -> dict[str, Any]:
    """One check's run-level summary: its counts, its pass rate over the examples that passed or
    failed (None when none did) with the Wilson interval, and its errors beside them."""
    counts = Counter(outcome.status for outcome in outcomes)
    decided = counts["pass"] + counts["fail"]
    interval = wilson_interval(counts["pass"], decided, confidence)
    return {
        "n": len(outcomes), "n_passed": counts["pass"], "n_failed": counts["fail"], "n_errors": counts["error"],
        "pass_rate": counts["pass"] / decided if decided else None,
        "interval": None if interval is None else {"low": interval[0], "high": interval[1],
                                                   "confidence": confidence, "method": "wilson"},
    }


def checks_summary(by_example: Iterable[Sequence[CheckOutcome]], confidence: float = CONFIDENCE) -> dict[str, Any]:
    """Every check's summary, in the order the checks first appear, and how many examples
    failed at least one check; NothingChecked when there were outcomes and all were errors."""
    examples = [list(outcomes) for outcomes in by_example]
    by_check: dict[str, list[CheckOutcome]] = {}
    for outcomes in examples:
        for outcome in outcomes:
            by_check.setdefault(outcome.check, []).append(outcome)
    every = [outcome for outcomes in examples for outcome in outcomes]
    if every and all(outcome.status == "error" for outcome in every):
        first = every[0]
        raise NothingChecked(f"every check errored on every example ({len(every)} outcomes), so nothing was "
                             f"checked; the first: {first.check}: {first.reason}")
    return {
        "checks": {name: check_summary(outcomes, confidence) for name, outcomes in by_check.items()},
        "n_examples": len(examples),
        "n_examples_failing": sum(any(o.status == "fail" for o in outcomes) for outcomes in examples),
        "n_examples_with_errors": sum(any(o.status == "error" for o in outcomes) for outcomes in examples),
    }

"""The opt-in regression gate of a comparison: `compare --fail-on '<metric><-<tolerance>'`.

ADR 014: the harness never gates on its own. A comparison is a report; only rules the user
gives can fail it, and each rule fails only on a drop that is both significant and beyond the
tolerance it names:
- a metric with a value per example (similarity, top-k match, a judge score) fails when the
  whole bootstrap interval of its paired mean delta, the one the comparison computes (same seed,
  resamples and confidence), lies below the tolerance: high < tolerance;
- a judge metric's pass outcome, named `<metric>_pass` (`groundedness_pass`), fails when the
  pass-rate delta over the pairs judged in both runs is below the tolerance and the exact
  McNemar test on those pairs gives p < 1 - confidence;
- `checks`, alone, fails when any check newly fails in the candidate on any shared example: it
  passed there in the baseline and fails in the candidate (the comparison's `checks` section,
  evalbook.compare.checks). A check's outcome is exact, not a noisy score, so the rule needs no
  statistical test and takes no tolerance: one changed fact is one regression.

A rule's tolerance is a number at most 0: the drop it tolerates. The rule's parsing and what
the two runs can be compared on are checked before 05_compare runs (`check_rules`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence

from evalbook.compare import ComparisonError
from evalbook.compare.checks import fixed_said, newly_failing_said, section_of
from evalbook.compare.document import build_comparison, pair_examples
from evalbook.metrics import METRICS, Metric
from evalbook.report.reader import RunReport, judge_entry
from evalbook.templating import render

PASS_SUFFIX = "_pass"
BOOTSTRAP_TEST = "bootstrap interval of the paired mean delta"
MCNEMAR_TEST = "exact McNemar test on paired pass/fail"
CHECKS_TEST = "checks newly failing on shared examples"
CHECKS_RULE = "checks"  # the rule that gates on the checks, written alone
CHECKS_NAMED = f"{CHECKS_RULE} (alone: any check newly failing)"
# Why a registered metric is not a rule's, by its kind.
NOT_GATED = {"retrieval": "{name} is not compared example by example (a comparison pairs the retrieval metrics "
                          "at k instead)",
             "check": f"{{name}} is gated with the other checks: --fail-on {CHECKS_RULE}, which fails when "
                      "any check newly fails in the candidate"}
NEWLY_FAILING_NAMED = 3  # examples a failed checks rule names, worst first
EXAMPLE_RULE = "bertscore_f1<-0.02"


class RuleError(ComparisonError):
    """A --fail-on rule that cannot be applied: malformed, unknown, repeated or not comparable."""


@dataclass(frozen=True)
class Rule:
    text: str  # as the user wrote it
    metric: str  # the name the rule gives: a metric, `<judge metric>_pass`, or `checks`
    tolerance: float  # at most 0: the drop tolerated
    measured: Metric | None  # the registered metric whose values (or pass outcomes) are compared; None for checks
    pass_outcome: bool  # True: the judge's pass/fail outcome, tested with McNemar


def _gated_metrics() -> dict[str, tuple[Metric, bool]]:
    """Every name a rule may give: each metric paired in a comparison, and each judge metric's
    pass outcome."""
    named = {m.name: (m, False) for m in METRICS if m.in_comparison}
    named.update({m.name + PASS_SUFFIX: (m, True) for m in METRICS if m.kind == "judge"})
    return named


def _refused(text: str, problem: str, names: Sequence[str] | None = None) -> RuleError:
    """A rule refused, with the names a rule can give (all of them, unless `names` narrows them)."""
    named = [*_gated_metrics(), CHECKS_RULE] if names is None else names
    listed = ", ".join(CHECKS_NAMED if name == CHECKS_RULE else name for name in named) or "none"
    return RuleError(f"--fail-on {text!r}: {problem}; metrics a rule can name: {listed} "
                     f"(example: --fail-on '{EXAMPLE_RULE}')")


def parse_rule(text: str) -> Rule:
    """One rule `<metric><<tolerance>`, e.g. `bertscore_f1<-0.02`, or `checks` alone; RuleError
    naming what is wrong."""
    if not isinstance(text, str):
        raise _refused(repr(text), "a rule is a string")
    name, sign, number = text.partition("<")
    name = name.strip()
    if name == CHECKS_RULE:
        if sign:
            raise _refused(text, f"the checks rule takes no tolerance: write --fail-on {CHECKS_RULE}, which "
                                 f"fails when any check newly fails in the candidate on a shared example")
        return Rule(CHECKS_RULE, CHECKS_RULE, 0.0, None, False)
    if not sign or not name or not number.strip():
        raise _refused(text, "not a rule of the form <metric><<tolerance>")
    gated = _gated_metrics()
    if name not in gated:
        registered = {m.name: m for m in METRICS}
        raise _refused(text, NOT_GATED.get(registered[name].kind, NOT_GATED["retrieval"]).format(name=name)
                       if name in registered else f"no metric {name!r}")
    try:
        tolerance = float(number)
    except ValueError:
        raise _refused(text, f"the tolerance {number.strip()!r} is not a number") from None
    if not math.isfinite(tolerance):
        raise _refused(text, f"the tolerance {number.strip()!r} is not a number")
    if tolerance > 0:
        raise _refused(text, f"a tolerance above 0 ({tolerance:g}) would fail a candidate that did not get worse; "
                             f"the tolerance is the drop allowed, a number at most 0")
    measured, pass_outcome = gated[name]
    # + 0.0 turns a tolerance of -0 into 0, so that it is never shown as "-0"
    return Rule(text.strip(), name, tolerance + 0.0, measured, pass_outcome)


def parse_rules(texts: Sequence[str] | str | None) -> list[Rule]:
    """The rules, one per metric; RuleError for a bad rule or a second rule on one metric.

    One string is one rule: `papermill -p fail_on 'bertscore_f1<-0.02'` passes a string, not a list.
    """
    rules: dict[str, Rule] = {}
    for text in [texts] if isinstance(texts, str) else texts or []:
        rule = parse_rule(text)
        if rule.metric in rules:
            raise _refused(rule.text, f"a second rule for {rule.metric} (after {rules[rule.metric].text!r}); "
                                      f"give one rule per metric")
        rules[rule.metric] = rule
    return list(rules.values())


# ---------------------------------------------------------------- the two tests

def interval_verdict(rule: Rule, delta: float, low: float, high: float, n: int,
                     confidence: float) -> dict[str, Any]:
    """A continuous metric's rule: it fails when the interval [low, high] lies wholly below the
    tolerance (high < tolerance)."""
    failed = high < rule.tolerance
    interval = (f"{rule.metric}'s paired mean delta is {delta:+.4f}, {confidence:.0%} interval "
                f"[{low:.4f}, {high:.4f}] over {n} pairs")
    why = (f"{interval}: the whole interval lies below the tolerance {rule.tolerance:g}, a drop both "
           f"significant and beyond it" if failed else
           f"{interval}: its high end is not below the tolerance {rule.tolerance:g}, so a drop beyond it is not shown")
    return _result(rule, BOOTSTRAP_TEST, delta, low, high, None, n, None, failed, why)


def mcnemar(baseline_passed: Sequence[bool], candidate_passed: Sequence[bool]) -> tuple[int, int, float]:
    """(b, c, p): b pairs passed in the baseline only, c in the candidate only, and the two-sided
    exact McNemar p, scipy's binomtest(b, b + c, 0.5); p = 1 when no pair is discordant."""
    # slow to import: only a pass-rate rule pays it
    from scipy.stats import binomtest

    pairs = list(zip(baseline_passed, candidate_passed, strict=True))
    b = sum(1 for base, cand in pairs if base and not cand)
    c = sum(1 for base, cand in pairs if cand and not base)
    p = 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5).pvalue)
    return b, c, p


def mcnemar_verdict(rule: Rule, baseline_passed: Sequence[bool], candidate_passed: Sequence[bool],
                    confidence: float) -> dict[str, Any]:
    """A pass outcome's rule: it fails when the pass-rate delta (candidate - baseline) is below the
    tolerance and McNemar's p is below 1 - confidence."""
    n = len(baseline_passed)
    b, c, p = mcnemar(baseline_passed, candidate_passed)
    delta = (c - b) / n
    alpha = 1 - confidence
    beyond, significant = delta < rule.tolerance, p < alpha
    said = (f"the pass rate of {rule.measured.name} moved by {delta:+.4f} over {n} pairs judged in both runs "
            f"({b} passed only in the baseline, {c} only in the candidate), "
            f"{'' if beyond else 'not '}below the tolerance {rule.tolerance:g}, and McNemar's exact "
            f"p = {p:.4f} is {'' if significant else 'not '}below {alpha:g}")
    why = f"{said}: {'a drop both significant and beyond the tolerance' if beyond and significant else 'the rule holds'}"
    return _result(rule, MCNEMAR_TEST, delta, None, None, p, n, [b, c], beyond and significant, why)


def checks_verdict(rule: Rule, checks: dict[str, Any]) -> dict[str, Any]:
    """The checks rule on a comparison's `checks` section: it fails when any check passed in the
    baseline and fails in the candidate on a shared example. Its delta is the pass-rate change
    over the check outcomes decided in both runs, (fixed - newly failing) / n, and its
    discordant pairs [newly failing, fixed], as McNemar's are; the why names the first examples."""
    n = sum(row["n"] for row in checks["checks"])
    failing, fixed = checks["n_newly_failing"], checks["n_fixed"]
    if failing:
        named = [f"{entry['id']} ({', '.join(outcome['check'] for outcome in entry['checks'])})"
                 for entry in checks["newly_failing"][:NEWLY_FAILING_NAMED]]
        more = checks["n_examples_newly_failing"] - len(named)
        if more:
            named[-1] += f" and {more} more example{'' if more == 1 else 's'}"
        said = f"{newly_failing_said(checks)}: {', '.join(named)}"
    else:
        said = f"{newly_failing_said(checks)} ({n} check outcomes decided in both runs)"
    return _result(rule, CHECKS_TEST, (fixed - failing) / n, None, None, None, n, [failing, fixed], failing > 0,
                   f"{said}; {fixed_said(checks)}")


def _result(rule: Rule, test: str, delta: float, low: float | None, high: float | None, p: float | None,
            n: int, discordant: list[int] | None, failed: bool, why: str) -> dict[str, Any]:
    return {"rule": rule.text, "metric": rule.metric, "tolerance": rule.tolerance, "test": test,
            "delta": delta, "low": low, "high": high, "p_value": p, "n": n, "discordant": discordant,
            "failed": bool(failed), "why": why}


# ---------------------------------------------------------------- the gate of a comparison

def _gateable_here(comparison: dict[str, Any]) -> list[str]:
    """The names a rule can give for this comparison: its compared metrics and, for judge ones,
    their pass outcomes; `checks` when both runs' checks are compared."""
    compared = {row["metric"] for row in comparison["metrics"] if row["compared"]}
    named = [name for name, (metric, _) in _gated_metrics().items() if metric.name in compared]
    return named + ([CHECKS_RULE] if section_of(comparison)["compared"] else [])


def _not_compared(comparison: dict[str, Any], rule: Rule) -> RuleError:
    name = rule.measured.name
    rows = [row for row in comparison["metrics"] if row["metric"] == name]
    gates = comparison["gates"]
    if rows:
        reason = rows[0]["reason"] or "no paired example has a value in both runs"
    elif rule.measured.kind == "judge":
        reason = gates["judge"]["reason"] or f"no {name} score in both runs"
    else:
        reason = gates["retrieval"]["reason"]
    return _refused(rule.text, f"{name} is not compared in this comparison: {reason}", _gateable_here(comparison))


def _pass_outcomes(rule: Rule, baseline: dict[str, Any], candidate: dict[str, Any]) -> tuple[list[bool], list[bool]]:
    """The pairs' pass outcomes where both runs judged the example and gave it a pass or fail."""
    pairing = pair_examples(baseline["examples"], candidate["examples"])
    base_passed, cand_passed = [], []
    for example_id in pairing.paired_ids:
        outcomes = [(judge_entry(side[example_id], rule.measured.name) or {}).get("passed")
                    for side in (pairing.baseline, pairing.candidate)]
        if all(isinstance(outcome, bool) for outcome in outcomes):
            base_passed.append(outcomes[0])
            cand_passed.append(outcomes[1])
    return base_passed, cand_passed


def _checks_result(comparison: dict[str, Any], rule: Rule) -> dict[str, Any]:
    checks = section_of(comparison)
    if not checks["compared"]:
        raise _refused(rule.text, f"the checks cannot be compared: {checks['reason']}", _gateable_here(comparison))
    if not any(row["n"] for row in checks["checks"]):
        raise _refused(rule.text, "no shared example has a check passed or failed in both runs",
                       _gateable_here(comparison))
    return checks_verdict(rule, checks)


def _rule_result(comparison: dict[str, Any], rule: Rule, baseline: dict[str, Any],
                 candidate: dict[str, Any]) -> dict[str, Any]:
    if rule.metric == CHECKS_RULE:
        return _checks_result(comparison, rule)
    confidence = comparison["parameters"]["confidence"]
    row = next((r for r in comparison["metrics"] if r["metric"] == rule.measured.name and r["compared"]), None)
    if row is None:
        raise _not_compared(comparison, rule)
    if not rule.pass_outcome:
        return interval_verdict(rule, row["mean_delta"], row["ci_low"], row["ci_high"], row["n"], confidence)
    base_passed, cand_passed = _pass_outcomes(rule, baseline, candidate)
    if not base_passed:
        raise _refused(rule.text, f"no paired example has a {rule.measured.name} pass or fail in both runs",
                       _gateable_here(comparison))
    return mcnemar_verdict(rule, base_passed, cand_passed, confidence)


def regression_gate(comparison: dict[str, Any], baseline: Any, candidate: Any,
                    fail_on: Sequence[str] | None) -> dict[str, Any] | None:
    """The comparison's `gate` section for the rules `fail_on` on its two reports (RunReport or
    dicts); None without rules. RuleError when a rule's metric is not compared."""
    rules = parse_rules(fail_on)
    if not rules:
        return None
    baseline, candidate = RunReport.of(baseline).data, RunReport.of(candidate).data
    results = [_rule_result(comparison, rule, baseline, candidate) for rule in rules]
    return {"rules": results, "failed": any(result["failed"] for result in results)}


def check_rules(fail_on: Sequence[str] | None, baseline: Any, candidate: Any) -> None:
    """Raise RuleError when a rule cannot be applied to these two reports, before 05_compare runs.

    It builds the comparison the notebook will build, so both say the same about what is compared.
    A comparison that fails for another reason is left to 05_compare, which reports it.
    """
    rules = parse_rules(fail_on)
    if not rules:
        return
    try:
        comparison = build_comparison(baseline, candidate, baseline_location="baseline",
                                      candidate_location="candidate", created_at=datetime.now(timezone.utc))
    except ComparisonError:
        return
    regression_gate(comparison, baseline, candidate, fail_on)


def gate_html(comparison: dict[str, Any]) -> str:
    """The gate for 05's pages: each rule, whether it held or failed and why; or one sentence
    saying that no gate was set (older comparisons have none)."""
    return render("compare_gate.html", gate=comparison.get("gate"))

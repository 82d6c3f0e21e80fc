"""The opt-in regression gate, `compare --fail-on`: rule parsing, the two tests on paired data
with a known answer, the compare-v1 `gate` section, and the command's exit codes on real runs."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from evalbook.compare.document import validate_comparison
from evalbook.compare.gate import (
    BOOTSTRAP_TEST,
    MCNEMAR_TEST,
    RuleError,
    check_rules,
    gate_html,
    interval_verdict,
    mcnemar,
    parse_rules,
    regression_gate,
)
from evalbook.compare.settings import DEFAULTS
from evalbook.stats import bootstrap_mean_ci
from paths import ROOT
from test_compare import LABEL_A, LABEL_B, compare, ids_of, make_report, row, seeded_scores

pytestmark = pytest.mark.slow  # real runs through the runner: kernels, models

TOLERANCE = -0.02


# ---------------------------------------------------------------- rules

def test_a_rule_names_a_metric_and_a_drop_it_tolerates():
    (similarity, passing, zero) = parse_rules(["bertscore_f1<-0.02", " groundedness_pass < -0.05 ",
                                               "top_k_match<0"])
    assert (similarity.text, similarity.metric, similarity.tolerance, similarity.pass_outcome) == \
        ("bertscore_f1<-0.02", "bertscore_f1", -0.02, False)
    assert (passing.metric, passing.measured.name, passing.tolerance, passing.pass_outcome) == \
        ("groundedness_pass", "groundedness", -0.05, True)
    assert zero.tolerance == 0.0
    assert parse_rules(None) == [] and parse_rules([]) == []
    assert parse_rules("bertscore_f1<-0.02") == [similarity]  # papermill -p passes one rule as a string
    assert math.copysign(1.0, parse_rules(["sentence_cosine<-0"])[0].tolerance) == 1.0  # shown as 0, not -0


@pytest.mark.parametrize("text, said", [
    ("bleu<-0.02", "no metric 'bleu'"),
    ("rank<-1", "rank is not compared example by example"),
    ("bertscore_f1<0.02", "a tolerance above 0"),
    ("bertscore_f1<-0.02x", "not a number"),
    ("bertscore_f1<nan", "not a number"),
    ("bertscore_f1<-inf", "not a number"),
    ("bertscore_f1>-0.02", "not a rule of the form <metric><<tolerance>"),
    ("bertscore_f1", "not a rule of the form <metric><<tolerance>"),
    ("", "not a rule of the form <metric><<tolerance>"),
    ("<-0.02", "not a rule of the form <metric><<tolerance>"),
])
def test_a_bad_rule_is_refused_naming_it_and_the_known_metrics(text, said):
    with pytest.raises(RuleError) as refused:
        parse_rules([text])
    message = str(refused.value)
    assert said in message and f"--fail-on {text!r}" in message
    assert "bertscore_f1, bertscore_precision" in message and "groundedness_pass" in message


def test_a_rule_that_is_not_a_string_is_refused():
    with pytest.raises(RuleError, match=r"--fail-on '0.02': a rule is a string"):
        parse_rules([0.02])


def test_a_second_rule_for_the_same_metric_is_refused():
    with pytest.raises(RuleError, match=r"'bertscore_f1<-0.05': a second rule for bertscore_f1 "
                                        r"\(after 'bertscore_f1<-0.02'\).*metrics a rule can name: bertscore_f1"):
        parse_rules(["bertscore_f1<-0.02", "sentence_cosine<-0.01", "bertscore_f1<-0.05"])


# ---------------------------------------------------------------- the bootstrap interval, known answers

def shifted(baseline: dict[str, float], shift: float, noise: float, seed: int) -> dict[str, float]:
    wobble = np.random.default_rng(seed).normal(0.0, noise, len(baseline))
    return {i: float(np.clip(v + shift + w, -1.0, 1.0)) for (i, v), w in zip(baseline.items(), wobble)}


def gated(baseline: dict, candidate: dict, rules: list[str]) -> tuple[dict, dict]:
    base, cand = make_report(baseline), make_report(candidate, tag="cand")
    doc = compare(base, cand)
    doc["gate"] = regression_gate(doc, base, cand, rules)
    validate_comparison(doc)
    return doc, doc["gate"]


def test_a_shift_inside_the_tolerance_holds():
    baseline = seeded_scores(60)
    doc, gate = gated(baseline, shifted(baseline, -0.01, 0.005, seed=3), ["bertscore_f1<-0.02"])
    (rule,) = gate["rules"]
    f1 = row(doc, "bertscore_f1")
    assert (rule["delta"], rule["low"], rule["high"], rule["n"]) == \
        (f1["mean_delta"], f1["ci_low"], f1["ci_high"], 60)
    assert -0.02 < rule["low"] < rule["high"] < 0  # a significant drop, but a small one
    assert rule["failed"] is False and gate["failed"] is False
    assert rule["test"] == BOOTSTRAP_TEST and rule["p_value"] is None and rule["discordant"] is None
    assert "its high end is not below the tolerance -0.02, so a drop beyond it is not shown" in rule["why"]


def test_a_significant_shift_beyond_the_tolerance_fails():
    baseline = seeded_scores(60)
    candidate = shifted(baseline, -0.05, 0.01, seed=4)
    doc, gate = gated(baseline, candidate, ["bertscore_f1<-0.02", "sentence_cosine<-0.2"])
    f1, cosine = gate["rules"]
    deltas = np.array([candidate[i] - baseline[i] for i in baseline])
    # the interval the comparison computed, recomputed here with the same seed and resamples
    low, high = bootstrap_mean_ci(deltas, resamples=DEFAULTS.resamples, seed=DEFAULTS.seed,
                                  confidence=DEFAULTS.confidence)
    assert f1["low"] == pytest.approx(low, abs=1e-12) and f1["high"] == pytest.approx(high, abs=1e-12)
    assert high < -0.02
    assert f1["failed"] is True and gate["failed"] is True
    assert "the whole interval lies below the tolerance -0.02, a drop both significant" in f1["why"]
    assert cosine["failed"] is False  # the same drop, within a looser tolerance


def test_a_large_noisy_shift_whose_interval_straddles_the_tolerance_holds():
    baseline = seeded_scores(12)
    doc, gate = gated(baseline, shifted(baseline, -0.04, 0.15, seed=5), ["bertscore_f1<-0.02"])
    (rule,) = gate["rules"]
    assert rule["delta"] < -0.02 < rule["high"]  # the mean drop is beyond the tolerance, the interval is not
    assert rule["low"] < -0.02
    assert rule["failed"] is False and gate["failed"] is False


def test_the_interval_verdict_compares_the_high_end_with_the_tolerance():
    rule = parse_rules(["sentence_cosine<-0.02"])[0]
    assert interval_verdict(rule, -0.05, -0.07, -0.0200001, 10, 0.95)["failed"] is True
    at_the_tolerance = interval_verdict(rule, -0.05, -0.07, -0.02, 10, 0.95)
    assert at_the_tolerance["failed"] is False  # high == tolerance: not wholly below it
    assert interval_verdict(rule, 0.01, 0.0, 0.02, 10, 0.95)["failed"] is False


# ---------------------------------------------------------------- McNemar, known answers

def test_mcnemar_counts_discordant_pairs_and_matches_scipy_and_a_hand_value():
    baseline = [True] * 10 + [False] * 6 + [True, False]
    candidate = [True] * 10 + [True] * 6 + [False, False]
    b, c, p = mcnemar(baseline, candidate)
    assert (b, c) == (1, 6)
    assert p == pytest.approx(binomtest(1, 7, 0.5).pvalue, abs=1e-15)
    assert p == pytest.approx(2 * (1 + 7) * 0.5 ** 7, abs=1e-15)  # P(X <= 1) doubled, X ~ Bin(7, 1/2)
    assert mcnemar([False] * 6, [True] * 6) == (0, 6, pytest.approx(2 * 0.5 ** 6, abs=1e-15))
    assert 2 * 0.5 ** 6 == 0.03125
    assert mcnemar([True, False], [True, False]) == (0, 0, 1.0)


def judged(passes: list[bool], tag: str, label: str = LABEL_A) -> dict:
    """A report whose groundedness scores pass (1.0) or fail (0.0) as `passes` says."""
    ids = ids_of(len(passes))
    scores = {i: 1.0 if passed else 0.0 for i, passed in zip(ids, passes)}
    return make_report(dict(zip(ids, seeded_scores(len(ids)).values())), tag=tag,
                       judge={"label": label, "scores": {i: {"groundedness": s} for i, s in scores.items()}})


def pass_gate(baseline: list[bool], candidate: list[bool], rule: str = "groundedness_pass<-0.05") -> dict:
    base, cand = judged(baseline, "base"), judged(candidate, "cand")
    doc = compare(base, cand)
    doc["gate"] = regression_gate(doc, base, cand, [rule])
    validate_comparison(doc)
    (result,) = doc["gate"]["rules"]
    assert result["test"] == MCNEMAR_TEST and result["low"] is None and result["high"] is None
    return result


def test_a_significant_drop_in_pass_rate_beyond_the_tolerance_fails():
    # six examples passed in the baseline and fail in the candidate, none the other way
    result = pass_gate([True] * 14 + [False] * 6, [True] * 8 + [False] * 12)
    assert result["discordant"] == [6, 0] and result["n"] == 20
    assert result["delta"] == pytest.approx(-0.3, abs=1e-12)
    assert result["p_value"] == pytest.approx(0.03125, abs=1e-15)
    assert result["failed"] is True
    assert "below the tolerance -0.05" in result["why"] and "below 0.05" in result["why"]


def test_a_drop_in_pass_rate_that_is_not_significant_holds():
    result = pass_gate([True] * 15 + [False] * 5, [True] * 10 + [False] * 10)
    assert result["discordant"] == [5, 0] and result["p_value"] == pytest.approx(0.0625, abs=1e-15)
    assert result["failed"] is False
    assert "not below 0.05" in result["why"]


def test_a_significant_drop_in_pass_rate_inside_the_tolerance_holds():
    result = pass_gate([True] * 150 + [False] * 50, [True] * 142 + [False] * 58, "groundedness_pass<-0.05")
    assert result["discordant"] == [8, 0] and result["p_value"] < 0.05
    assert result["delta"] == pytest.approx(-0.04, abs=1e-12)
    assert result["failed"] is False
    assert "not below the tolerance -0.05" in result["why"]


def test_no_discordant_pair_gives_p_one_and_holds():
    result = pass_gate([True] * 5 + [False] * 5, [True] * 5 + [False] * 5, "groundedness_pass<0")
    assert result["discordant"] == [0, 0] and result["p_value"] == 1.0 and result["delta"] == 0.0
    assert result["failed"] is False


# ---------------------------------------------------------------- the document

def test_without_rules_the_gate_is_null_and_older_comparisons_read_as_without_one():
    base, cand = make_report(seeded_scores(8)), make_report(seeded_scores(8, seed=2), tag="cand")
    doc = compare(base, cand)
    assert doc["gate"] is None and doc["schema_version"] == "1.6"
    assert regression_gate(doc, base, cand, None) is None
    # a comparison written before the gate existed has no `gate`: it is shown as having none
    older = {key: value for key, value in doc.items() if key != "gate"}
    older["schema_version"] = "1.2"
    assert "No regression gate was set" in gate_html(older)


def test_a_rule_on_a_metric_the_comparison_cannot_compare_is_refused():
    base = judged([True, False, True], "base")
    cand = judged([True, True, True], "cand", label=LABEL_B)
    with pytest.raises(RuleError, match=r"--fail-on 'groundedness_pass<-0.05': groundedness is not compared "
                                        r"in this comparison: judge metrics not compared: baseline judge label"):
        check_rules(["groundedness_pass<-0.05"], base, cand)
    with pytest.raises(RuleError, match=r"'top_k_match<-0.1': top_k_match is not compared in this comparison: "
                                        r"retrieval metrics not compared: neither run has retrieval results"):
        check_rules(["top_k_match<-0.1"], base, cand)
    with pytest.raises(RuleError, match=r"can name: bertscore_f1, bertscore_precision, bertscore_recall, "
                                        r"sentence_cosine \(example"):
        check_rules(["criteria_pass<0"], base, cand)
    check_rules(["bertscore_f1<-0.02"], base, cand)


def test_the_gate_is_shown_escaped_or_said_to_be_absent():
    base, cand = make_report(seeded_scores(8)), make_report(seeded_scores(8, seed=2), tag="cand")
    doc = compare(base, cand)
    assert "No regression gate was set" in gate_html(doc)
    doc["gate"] = regression_gate(doc, base, cand, ["bertscore_f1<-0.02"])
    shown = gate_html(doc)
    assert "bertscore_f1&lt;-0.02" in shown and "<script" not in shown
    assert ("failed" if doc["gate"]["failed"] else "held") in shown


# ---------------------------------------------------------------- the command on two real runs

def evalbook_compare(profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalbook", "compare", "--params", str(profile), *args],
                          capture_output=True, text=True, cwd=ROOT, check=False)


def written_comparison(done: subprocess.CompletedProcess) -> dict:
    path = Path(done.stdout.strip().splitlines()[-1])
    assert path.suffix == ".json" and path.is_file(), done.stdout
    return json.loads(path.read_text("utf-8"))


def test_a_failing_rule_exits_3_and_says_why_after_writing_the_comparison(sample_runs):
    done = evalbook_compare(sample_runs.profile, "--fail-on", "bertscore_f1<-0.02",
                            "--fail-on", "sentence_cosine<-0.9")
    assert done.returncode == 3, done.stderr[-3000:]
    doc = written_comparison(done)
    assert doc["gate"]["failed"] is True
    f1, cosine = doc["gate"]["rules"]
    assert f1["failed"] is True and cosine["failed"] is False
    lines = done.stdout.strip().splitlines()
    assert f"gate failed: 'bertscore_f1<-0.02': {f1['why']}" in lines
    assert f"gate held: 'sentence_cosine<-0.9': {cosine['why']}" in lines
    page = (Path(lines[-1]).with_suffix("") / "05_compare.noinput.html").read_text("utf-8")
    assert "<strong>bertscore_f1&lt;-0.02</strong> failed" in page and "The gate failed" in page


def test_without_rules_or_with_a_rule_that_holds_compare_exits_0(sample_runs):
    plain = evalbook_compare(sample_runs.profile)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert written_comparison(plain)["gate"] is None and "gate" not in plain.stdout
    held = evalbook_compare(sample_runs.profile, "--fail-on", "bertscore_f1<-0.5")
    assert held.returncode == 0, held.stderr[-3000:]
    assert written_comparison(held)["gate"]["failed"] is False
    assert "gate held: 'bertscore_f1<-0.5'" in held.stdout


def test_a_bad_rule_exits_2_before_anything_is_written(sample_runs):
    comparisons = sorted(sample_runs.outputs.rglob("comparisons/*.json"))
    for rule, said in (("bleu<-0.1", "no metric 'bleu'"),
                       ("groundedness_pass<-0.05", "groundedness is not compared in this comparison")):
        done = evalbook_compare(sample_runs.profile, "--fail-on", rule)
        assert done.returncode == 2, done.stderr[-3000:]
        assert said in done.stderr and f"--fail-on {rule!r}" in done.stderr
    assert sorted(sample_runs.outputs.rglob("comparisons/*.json")) == comparisons

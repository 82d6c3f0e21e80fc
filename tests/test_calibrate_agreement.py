"""Tests for evalbook.calibrate.agreement: every statistic against scipy or scikit-learn called
directly, the bootstrap on data with a known answer, thresholds on cases worked out by hand,
Krippendorff's alpha on a published and a hand-computed case, and the undefined cases."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics

from evalbook.calibrate import agreement
from evalbook.calibrate.agreement import (
    bootstrap_interval,
    confusion_at,
    krippendorff_alpha,
    precision_threshold,
    rank_agreement,
    rank_disagreements,
    roc,
    scored_pairs,
    youden_threshold,
)

RESAMPLES = 400
SEED = 20261201
CONFIDENCE = 0.95
TOLERANCE = 1e-9


def noisy_ordinal(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Continuous scores and 1-5 labels that follow them loosely."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=n)
    labels = np.clip(np.round(3 + scores + rng.normal(scale=0.8, size=n)), 1, 5)
    return scores, labels


def scipy_interval(statistic, *samples, seed: int = SEED) -> tuple[float, float]:
    result = stats.bootstrap(samples, statistic, paired=True, vectorized=False,
                             n_resamples=RESAMPLES, method="percentile",
                             confidence_level=CONFIDENCE, rng=np.random.default_rng(seed))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def assert_json_ready(value) -> None:
    json.dumps(value, allow_nan=False)


# ---------------------------------------------------------------- against scipy directly

def test_rank_agreement_equals_scipy_called_directly():
    scores, labels = noisy_ordinal(40, seed=1)
    result = rank_agreement(scores, labels, resamples=RESAMPLES, seed=SEED, confidence=CONFIDENCE)
    assert_json_ready(result)
    assert (result["n"], result["n_missing"]) == (40, 0)
    for name, test in (("spearman", lambda x, y: stats.spearmanr(x, y)),
                       ("kendall_tau_b", lambda x, y: stats.kendalltau(x, y, variant="b"))):
        direct = test(scores, labels)
        entry = result[name]
        assert entry["estimate"] == pytest.approx(direct.statistic, abs=TOLERANCE)
        assert entry["p_value"] == pytest.approx(direct.pvalue, abs=TOLERANCE)
        low, high = scipy_interval(lambda x, y: test(x, y).statistic, scores, labels)
        assert entry["low"] == pytest.approx(low, abs=TOLERANCE)
        assert entry["high"] == pytest.approx(high, abs=TOLERANCE)
        assert entry["reason"] is None
        assert entry["low"] < entry["estimate"] < entry["high"]


def test_roc_equals_sklearn_called_directly():
    scores, labels = noisy_ordinal(40, seed=2)
    passed = labels >= 4
    result = roc(scores, passed, resamples=RESAMPLES, seed=SEED, confidence=CONFIDENCE)
    assert_json_ready(result)
    assert (result["n"], result["n_pass"], result["n_fail"]) == (40, passed.sum(), (~passed).sum())
    assert result["auc"] == pytest.approx(metrics.roc_auc_score(passed, scores), abs=TOLERANCE)
    low, high = scipy_interval(lambda s, p: metrics.roc_auc_score(p.astype(bool), s), scores,
                               passed.astype(float))
    assert (result["low"], result["high"]) == pytest.approx((low, high), abs=TOLERANCE)
    fpr, tpr, thresholds = metrics.roc_curve(passed, scores, drop_intermediate=False)
    curve = result["curve"]
    assert curve["fpr"] == pytest.approx(list(fpr), abs=TOLERANCE)
    assert curve["tpr"] == pytest.approx(list(tpr), abs=TOLERANCE)
    assert curve["thresholds"][0] is None and math.isinf(thresholds[0])
    assert curve["thresholds"][1:] == pytest.approx(list(thresholds[1:]), abs=TOLERANCE)
    assert len(curve["thresholds"]) == len(set(scores)) + 1


def test_confusion_at_equals_sklearn_called_directly():
    scores, labels = noisy_ordinal(40, seed=3)
    passed = labels >= 4
    threshold = 0.25
    predicted = scores >= threshold
    result = confusion_at(scores, passed, threshold)
    assert_json_ready(result)
    (tn, fp), (fn, tp) = metrics.confusion_matrix(passed, predicted)
    assert (result["tp"], result["fp"], result["fn"], result["tn"]) == (tp, fp, fn, tn)
    for key, score in (("precision", metrics.precision_score), ("recall", metrics.recall_score),
                       ("f1", metrics.f1_score), ("accuracy", metrics.accuracy_score),
                       ("cohen_kappa", metrics.cohen_kappa_score)):
        assert result[key] == pytest.approx(score(passed, predicted), abs=TOLERANCE), key
    assert result["base_rate"] == pytest.approx(passed.mean(), abs=TOLERANCE)
    assert result["predicted_pass_rate"] == pytest.approx(predicted.mean(), abs=TOLERANCE)
    assert result["threshold"] == threshold


# ---------------------------------------------------------------- the bootstrap, known answers

def test_monotone_data_gives_rho_and_tau_one_with_interval_one_one():
    scores = np.linspace(0.0, 1.0, 20)
    result = rank_agreement(scores, np.exp(scores), resamples=RESAMPLES, seed=SEED,
                            confidence=CONFIDENCE)
    for name in ("spearman", "kendall_tau_b"):
        entry = result[name]
        assert entry["estimate"] == pytest.approx(1.0, abs=1e-12)
        assert (entry["low"], entry["high"]) == pytest.approx((1.0, 1.0), abs=1e-12)


def test_large_bivariate_normal_interval_holds_the_population_spearman_and_is_narrow():
    rho = 0.6
    rng = np.random.default_rng(7)
    sample = rng.multivariate_normal([0.0, 0.0], [[1.0, rho], [rho, 1.0]], size=2000)
    population_spearman = 6 / math.pi * math.asin(rho / 2)
    spearman = rank_agreement(sample[:, 0], sample[:, 1], resamples=RESAMPLES, seed=SEED,
                              confidence=CONFIDENCE)["spearman"]
    assert spearman["low"] < population_spearman < spearman["high"]
    # The standard error of rho at n = 2000 is about (1 - rho_s^2) / sqrt(n) = 0.015.
    assert spearman["high"] - spearman["low"] < 0.1


def test_the_same_seed_repeats_the_interval_and_another_seed_does_not():
    scores, labels = noisy_ordinal(30, seed=4)

    def interval(seed: int) -> dict:
        return bootstrap_interval(lambda x, y: stats.spearmanr(x, y).statistic, scores, labels,
                                  resamples=RESAMPLES, seed=seed, confidence=CONFIDENCE)

    assert interval(SEED) == interval(SEED)
    assert interval(SEED) != interval(SEED + 1)
    assert (interval(SEED)["low"], interval(SEED)["high"]) == pytest.approx(
        scipy_interval(lambda x, y: stats.spearmanr(x, y).statistic, scores, labels),
        abs=TOLERANCE)


def test_a_resample_with_an_undefined_statistic_makes_the_interval_undefined_without_a_warning():
    # n = 3: a resample draws the same example three times with probability 3 / 27.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = rank_agreement([0.1, 0.5, 0.9], [1, 3, 5], resamples=RESAMPLES, seed=SEED,
                                confidence=CONFIDENCE)
    for name in ("spearman", "kendall_tau_b"):
        entry = result[name]
        assert entry["estimate"] == pytest.approx(1.0, abs=1e-12)
        assert (entry["low"], entry["high"]) == (None, None)
        assert "undefined in" in entry["reason"] and f"of {RESAMPLES} resamples" in entry["reason"]
    assert_json_ready(result)


def test_bootstrap_interval_needs_two_examples():
    result = bootstrap_interval(np.mean, [0.4], resamples=RESAMPLES, seed=SEED,
                                confidence=CONFIDENCE)
    assert result == {"low": None, "high": None,
                      "reason": "too few examples for an interval (n = 1; at least 2 needed)"}


def test_bootstrap_interval_refuses_samples_of_different_lengths():
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap_interval(np.mean, [1.0, 2.0], [1.0], resamples=RESAMPLES, seed=SEED,
                           confidence=CONFIDENCE)
    with pytest.raises(ValueError, match="at least one sample"):
        bootstrap_interval(np.mean, resamples=RESAMPLES, seed=SEED, confidence=CONFIDENCE)


# ---------------------------------------------------------------- thresholds, worked by hand

TENTHS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
PASSES_ABOVE_045 = [score > 0.45 for score in TENTHS]


def test_youden_picks_the_first_passing_score_when_passes_sit_exactly_above_a_cut():
    # At t = 0.5: TPR = 6/6, FPR = 0/4, J = 1, the most J can be.
    assert youden_threshold(TENTHS, PASSES_ABOVE_045) == 0.5


def test_youden_breaks_a_tie_in_j_towards_the_highest_threshold():
    # From the top: pass, fail, pass, fail, pass, fail; 3 passes, 3 fails.
    # t = 6: J = 1/3 - 0/3;  t = 4: J = 2/3 - 1/3;  t = 2: J = 3/3 - 2/3, each 1/3, though in
    # floating point 1 - 2/3 comes out a hair above 1/3. The highest threshold, 6, wins.
    assert youden_threshold([6, 5, 4, 3, 2, 1], [True, False, True, False, True, False]) == 6.0


def test_precision_threshold_takes_the_lowest_score_that_reaches_the_target():
    # Everything passes at t = 0.5 and above (precision 1); at t = 0.1 precision is 6/10.
    assert precision_threshold(TENTHS, PASSES_ABOVE_045, 1.0) == 0.5
    assert precision_threshold(TENTHS, PASSES_ABOVE_045, 0.6) == 0.1
    assert precision_threshold(TENTHS, PASSES_ABOVE_045, 0.61) == pytest.approx(0.2)


def test_precision_threshold_reached_only_at_a_high_threshold():
    # scores 1..6, passed T T F T F T. Precision of score >= t:
    # t=6: 1/1, t=5: 1/2, t=4: 2/3, t=3: 2/4, t=2: 3/5, t=1: 4/6.
    scores, passed = [1, 2, 3, 4, 5, 6], [True, True, False, True, False, True]
    assert precision_threshold(scores, passed, 0.9) == 6.0
    # 2/3 is reached at t = 4 and again at t = 1: the lowest one keeps all the recall.
    assert precision_threshold(scores, passed, 0.65) == 1.0


def test_precision_threshold_never_reached_is_none():
    # Precision of score >= t: t=3: 0/1, t=2: 1/2, t=1: 2/3.
    assert precision_threshold([1, 2, 3], [True, True, False], 0.9) is None
    assert precision_threshold([1, 2, 3], [False, False, False], 0.5) is None


def test_precision_threshold_refuses_a_target_outside_zero_one():
    with pytest.raises(ValueError, match="target precision"):
        precision_threshold([1, 2], [True, False], 1.5)


def test_thresholds_are_none_with_one_class_or_no_example():
    assert youden_threshold([0.2, 0.8], [True, True]) is None
    assert youden_threshold([0.2, 0.8], [False, False]) is None
    assert youden_threshold([], []) is None
    assert precision_threshold([], [], 0.9) is None


# ---------------------------------------------------------------- confusion and kappa

def test_kappa_is_exactly_zero_for_a_constant_predictor_beside_a_higher_accuracy():
    passed = [True, True, True, False, True, False, True, True]
    result = confusion_at([0.3] * len(passed), passed, 0.0)
    assert result["cohen_kappa"] == 0.0
    assert (result["tp"], result["fp"], result["fn"], result["tn"]) == (6, 2, 0, 0)
    assert result["predicted_pass_rate"] == 1.0
    assert result["base_rate"] == 0.75
    assert result["accuracy"] == 0.75
    assert (result["majority_class"], result["majority_accuracy"]) == ("pass", 0.75)


def test_confusion_at_turns_undefined_ratios_into_none():
    # Threshold above every score: nothing is predicted to pass, so precision divides by zero.
    result = confusion_at([0.1, 0.2, 0.3, 0.4], [True, False, True, False], 1.0)
    assert result["precision"] is None
    assert result["recall"] == 0.0
    assert result["majority_class"] == "tie" and result["majority_accuracy"] == 0.5
    assert_json_ready(result)
    # Humans and predictor both constant: chance agreement is 1 and kappa is 0 / 0.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        constant = confusion_at([0.1, 0.2], [False, False], 1.0)
    assert constant["cohen_kappa"] is None and constant["recall"] is None
    assert constant["majority_class"] == "fail"
    assert_json_ready(constant)


def test_confusion_at_needs_an_example():
    with pytest.raises(ValueError, match="at least one scored example"):
        confusion_at([], [], 0.5)


# ---------------------------------------------------------------- undefined and missing

def test_rank_agreement_counts_missing_scores_and_leaves_their_pairs_out():
    scores, labels = noisy_ordinal(12, seed=5)
    with_gaps = [None, *scores[:5], float("nan"), *scores[5:]]
    labels_with_gaps = [3, *labels[:5], 2, *labels[5:]]
    result = rank_agreement(with_gaps, labels_with_gaps, resamples=RESAMPLES, seed=SEED,
                            confidence=CONFIDENCE)
    full = rank_agreement(scores, labels, resamples=RESAMPLES, seed=SEED, confidence=CONFIDENCE)
    assert (result["n"], result["n_missing"]) == (12, 2)
    assert result["spearman"] == full["spearman"]
    assert result["kendall_tau_b"] == full["kendall_tau_b"]


@pytest.mark.parametrize(("scores", "labels", "reason"), [
    ([0.2, 0.4, 0.6], [3, 3, 3], "every label is the same"),
    ([0.5, 0.5, 0.5], [1, 2, 3], "every score is the same"),
    ([0.5, 0.5], [2, 2], "every score and every label is the same"),
    ([0.5, None], [2, 3], "too few scored examples (n = 1; at least 2 needed)"),
    ([], [], "too few scored examples (n = 0; at least 2 needed)"),
])
def test_rank_agreement_undefined_cases_say_which(scores, labels, reason):
    result = rank_agreement(scores, labels, resamples=RESAMPLES, seed=SEED, confidence=CONFIDENCE)
    for name in ("spearman", "kendall_tau_b"):
        assert result[name] == {"estimate": None, "low": None, "high": None, "p_value": None,
                                "reason": result[name]["reason"]}
        assert reason in result[name]["reason"]
    assert_json_ready(result)


def test_spearman_at_two_examples_has_no_p_value():
    result = rank_agreement([0.1, 0.9], [1, 5], resamples=RESAMPLES, seed=SEED,
                            confidence=CONFIDENCE)
    assert result["spearman"]["estimate"] == pytest.approx(1.0, abs=1e-12)
    assert result["spearman"]["p_value"] is None
    assert result["kendall_tau_b"]["p_value"] == pytest.approx(1.0)


def test_a_missing_label_is_an_error_naming_its_position():
    with pytest.raises(ValueError, match="label at position 1 is missing"):
        rank_agreement([0.1, 0.2, 0.3], [1, None, 3], resamples=RESAMPLES, seed=SEED,
                       confidence=CONFIDENCE)


def test_scored_pairs_keeps_the_scored_pairs_in_order_and_counts_the_rest():
    assert scored_pairs([0.3, None, float("nan"), 0.1], [1, 2, 3, 4]) == ([0.3, 0.1], [1.0, 4.0], 2)


@pytest.mark.parametrize(("passed", "reason"), [
    ([True, True, True], "every labelled example passes"),
    ([False, False, False], "every labelled example fails"),
])
def test_roc_with_one_class_is_undefined(passed, reason):
    result = roc([0.1, 0.5, 0.9], passed, resamples=RESAMPLES, seed=SEED, confidence=CONFIDENCE)
    assert result == {"n": 3, "n_pass": sum(passed), "n_fail": 3 - sum(passed), "auc": None,
                      "low": None, "high": None, "reason": reason, "curve": None}


def test_roc_keeps_the_auc_when_its_interval_is_undefined():
    # n = 4: some resamples draw passes only.
    result = roc([0.1, 0.4, 0.6, 0.9], [False, True, False, True], resamples=RESAMPLES, seed=SEED,
                 confidence=CONFIDENCE)
    assert result["auc"] == pytest.approx(0.75)
    assert (result["low"], result["high"]) == (None, None)
    assert "undefined in" in result["reason"]


def test_a_missing_score_where_every_score_is_needed_is_an_error_naming_its_position():
    with pytest.raises(ValueError, match="score at position 2 is missing"):
        roc([0.1, 0.2, None], [True, False, True], resamples=RESAMPLES, seed=SEED,
            confidence=CONFIDENCE)
    with pytest.raises(ValueError, match="score at position 0 is missing"):
        youden_threshold([float("nan"), 0.2], [True, False])


def test_passed_must_be_true_or_false():
    with pytest.raises(ValueError, match="passed at position 1 is not true or false: 'yes'"):
        confusion_at([0.1, 0.2], [True, "yes"], 0.5)
    with pytest.raises(ValueError, match="passed at position 0 is not true or false"):
        youden_threshold([0.1, 0.2], [None, True])


# ---------------------------------------------------------------- Krippendorff's alpha

NAN = math.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the example with 4 observers,
# 12 units and missing values: values 1-5, one row per observer A-D.
PUBLISHED_RELIABILITY_DATA = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]


@pytest.mark.parametrize(("level", "published_alpha"), [
    ("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849),
])
def test_krippendorff_alpha_matches_the_published_example(level, published_alpha):
    result = krippendorff_alpha(PUBLISHED_RELIABILITY_DATA, level)
    assert round(result["alpha"], 3) == published_alpha
    # Unit 12 has one rating only, so 11 units are pairable.
    assert (result["level"], result["n_raters"], result["n_units"], result["reason"]) == (
        level, 4, 11, None)


def test_krippendorff_alpha_matches_a_hand_computed_nominal_case():
    # Rater 1: 1 1 2 2 1 1; rater 2: 1 2 2 2 1 -. The sixth unit has one rating and drops out.
    # Coincidences (each pairable unit has m_u = 2 ratings, so each ordered pair weighs 1):
    #   o_11 = 2 + 2 = 4 (units 1, 5), o_22 = 2 + 2 = 4 (units 3, 4), o_12 = o_21 = 1 (unit 2).
    #   n_1 = 5, n_2 = 5, n = 10.
    # alpha = 1 - (n - 1) * (o_12 + o_21) / (n_1 n_2 + n_2 n_1) = 1 - 9 * 2 / 50 = 0.64.
    ratings = [[1, 1, 2, 2, 1, 1], [1, 2, 2, 2, 1, None]]
    result = krippendorff_alpha(ratings, "nominal")
    assert result["alpha"] == pytest.approx(0.64, abs=TOLERANCE)
    assert (result["n_raters"], result["n_units"]) == (2, 5)


@pytest.mark.parametrize(("ratings", "reason"), [
    ([[1, 2, 3]], "fewer than 2 raters rated any unit"),
    ([[1, 2, 3], [NAN, NAN, NAN]], "fewer than 2 raters rated any unit"),
    ([[1, 2, NAN], [NAN, NAN, 3]], "no unit was rated by 2 raters or more"),
    ([[4, 4, 2], [4, 4, NAN]], "every rating of the units rated twice or more is the same value"),
])
def test_krippendorff_alpha_undefined_cases(ratings, reason):
    result = krippendorff_alpha(ratings, "ordinal")
    assert result["alpha"] is None and result["reason"] == reason
    assert_json_ready(result)


def test_krippendorff_alpha_refuses_an_unknown_level():
    with pytest.raises(ValueError, match="level must be one of nominal, ordinal, interval"):
        krippendorff_alpha(PUBLISHED_RELIABILITY_DATA, "ratio")


# ---------------------------------------------------------------- disagreements

def test_rank_disagreements_on_a_constructed_case():
    # Scored pairs (c has no score): a (0.9, 1), b (0.1, 5), d (0.5, 4), e (0.7, 4); m = 4.
    # Score ranks 4, 1, 2, 3 -> (rank - 1) / 3: a 1, b 0, d 1/3, e 2/3.
    # Label ranks 1, 4, 2.5, 2.5 -> a 0, b 1, d 0.5, e 0.5.
    # Disagreement: a 1, b 1, d 1/6, e 1/6; ties keep input order.
    result = rank_disagreements(["a", "b", "c", "d", "e"], [0.9, 0.1, None, 0.5, 0.7],
                                [1, 5, 3, 4, 4], 3)
    assert [item["id"] for item in result] == ["a", "b", "d"]
    assert result[0] == {"id": "a", "score": 0.9, "label": 1.0, "score_rank": 1.0,
                         "label_rank": 0.0, "disagreement": 1.0}
    assert result[2]["score_rank"] == pytest.approx(1 / 3)
    assert result[2]["label_rank"] == pytest.approx(0.5)
    assert result[2]["disagreement"] == pytest.approx(1 / 6)
    assert_json_ready(result)


def test_rank_disagreements_with_one_scored_pair_or_none():
    one = rank_disagreements(["a", "b"], [None, 0.4], [2, 5], 5)
    assert one == [{"id": "b", "score": 0.4, "label": 5.0, "score_rank": 0.5, "label_rank": 0.5,
                    "disagreement": 0.0}]
    assert rank_disagreements(["a"], [None], [2], 5) == []


# ---------------------------------------------------------------- the bootstrap's statistics, all rows at once

def rows_with_ties_and_constants(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """200 resample-like rows: scores rounded to 1 decimal (ties), labels 1-5, a few rows whose
    scores or labels are constant, as a bootstrap resample can draw."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random((200, n)), 1)
    labels = rng.integers(1, 6, (200, n)).astype(float)
    scores[3] = 0.5
    labels[7] = 2.0
    scores[11], labels[11] = 0.1, 4.0
    return scores, labels


@pytest.mark.parametrize("n", [3, 25, agreement.KENDALL_BY_PAIRS_UP_TO + 1])
def test_the_rank_correlations_of_all_resamples_at_once_equal_scipys_row_by_row(n):
    scores, labels = rows_with_ties_and_constants(n, seed=n)
    for name, test in agreement.RANK_CORRELATIONS.items():
        expected = []
        for x, y in zip(scores, labels):
            constant = np.unique(x).size < 2 or np.unique(y).size < 2
            expected.append(math.nan if constant else float(test(x, y).statistic))
        actual = agreement.ROWS[name](scores, labels, axis=-1)
        assert actual.shape == (200,)
        np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-12, equal_nan=True)
        assert np.isnan(actual[[3, 7, 11]]).all()


@pytest.mark.parametrize("n", [2, 30])
def test_the_auc_of_all_resamples_at_once_equals_sklearns_row_by_row(n):
    from sklearn.metrics import roc_auc_score

    scores, labels = rows_with_ties_and_constants(n, seed=100 + n)
    passed = labels >= 3
    passed[5] = True  # one class only: undefined
    expected = [roc_auc_score(p, x) if 0 < p.sum() < n else math.nan for x, p in zip(scores, passed)]
    actual = agreement._auc_rows(scores, passed.astype(float), axis=-1)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-12, equal_nan=True)
    assert math.isnan(actual[5])


def test_a_vectorized_statistic_gives_the_interval_of_its_row_by_row_twin():
    scores, labels = noisy_ordinal(40, seed=9)
    one_by_one = bootstrap_interval(lambda x, y: stats.spearmanr(x, y).statistic, scores, labels,
                                    resamples=RESAMPLES, seed=SEED, confidence=CONFIDENCE)
    at_once = bootstrap_interval(agreement.ROWS["spearman"], scores, labels, resamples=RESAMPLES, seed=SEED,
                                 confidence=CONFIDENCE, vectorized=True)
    assert at_once["low"] == pytest.approx(one_by_one["low"], abs=1e-12)
    assert at_once["high"] == pytest.approx(one_by_one["high"], abs=1e-12)

"""Agreement between a metric's scores and human labels: rank correlation, ROC, thresholds,
confusion at a threshold, Krippendorff's alpha between raters, and the largest disagreements.

Every statistic comes from scipy, scikit-learn or the krippendorff package; this module only
shapes inputs and results. Results are JSON-ready: plain floats, ints, lists and dicts, with None
(never NaN) for an undefined value and, where the dict has room, a reason saying why.

Every function assumes the score is oriented so that HIGHER predicts a better (human-preferred)
answer; a lower-is-better metric is negated by the caller.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Sequence

import krippendorff
import numpy as np
from scipy import stats
from sklearn import metrics

from evalbook.formatting import is_missing

ALPHA_LEVELS = ("nominal", "ordinal", "interval")


# ---------------------------------------------------------------- input shaping

def _as_float(value: Any, what: str, position: int) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} at position {position} is not a number: {value!r}") from None


def _same_length(**sequences: Sequence[Any]) -> int:
    lengths = {name: len(values) for name, values in sequences.items()}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{name} {length}" for name, length in lengths.items())
        raise ValueError(f"the sequences differ in length: {described}")
    return next(iter(lengths.values()))


def scored_pairs(scores: Sequence[Any], labels: Sequence[Any]) -> tuple[list[float], list[float], int]:
    """The scores and labels of the pairs that have a score, and how many pairs had none.

    A score that is None or NaN leaves its pair out and is counted. Every label must be present
    (the labels file is checked before this): a missing label is a ValueError naming its position.
    """
    _same_length(scores=scores, labels=labels)
    kept_scores, kept_labels, n_missing = [], [], 0
    for position, (score, label) in enumerate(zip(scores, labels)):
        if is_missing(label):
            raise ValueError(f"label at position {position} is missing; every pair needs a label")
        if is_missing(score):
            n_missing += 1
            continue
        kept_scores.append(_as_float(score, "score", position))
        kept_labels.append(_as_float(label, "label", position))
    return kept_scores, kept_labels, n_missing


def _score_array(scores: Sequence[Any]) -> np.ndarray:
    values = []
    for position, score in enumerate(scores):
        if is_missing(score):
            raise ValueError(f"score at position {position} is missing; pass only the scored pairs "
                             "(scored_pairs leaves the others out and counts them)")
        values.append(_as_float(score, "score", position))
    return np.asarray(values, dtype=np.float64)


def _passed_array(passed: Sequence[Any]) -> np.ndarray:
    for position, value in enumerate(passed):
        if is_missing(value) or value not in (True, False):
            raise ValueError(f"passed at position {position} is not true or false: {value!r}")
    return np.asarray([bool(value) for value in passed], dtype=bool)


def _scores_and_passed(scores: Sequence[Any], passed: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    _same_length(scores=scores, passed=passed)
    return _score_array(scores), _passed_array(passed)


def _float_or_none(value: Any) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


# ---------------------------------------------------------------- the bootstrap

def bootstrap_interval(statistic: Callable[..., float], *samples: Sequence[float], resamples: int,
                       seed: int, confidence: float, vectorized: bool = False) -> dict[str, Any]:
    """Paired percentile bootstrap interval of `statistic` over equally long samples.

    `vectorized`: statistic(*samples, axis=-1) takes every resample at once, one per row (see
    scipy.stats.bootstrap), and gives what it would give row by row; the resamples drawn are
    the same either way.

    scipy.stats.bootstrap with paired=True draws, `resamples` times, n example indices with
    replacement from numpy.random.default_rng(seed) and evaluates statistic(*resampled samples);
    the interval is the (1 - confidence) / 2 and (1 + confidence) / 2 quantiles of those values.
    Returns {low, high, reason}: low and high floats, reason None, when the interval is defined;
    low and high None, with the reason, when n < 2 or when the statistic is undefined (NaN) in any resample (for
    example a resample whose scores or labels are all equal); such resamples are never dropped,
    since dropping them would bias the interval.
    """
    if not samples:
        raise ValueError("bootstrap_interval needs at least one sample")
    n = _same_length(**{f"sample {index}": sample for index, sample in enumerate(samples)})
    if n < 2:
        return {"low": None, "high": None,
                "reason": f"too few examples for an interval (n = {n}; at least 2 needed)"}
    arrays = tuple(np.asarray(sample, dtype=np.float64) for sample in samples)
    # A NaN resample makes scipy warn that the interval cannot be computed; that is reported
    # below as the reason instead.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap(arrays, statistic, paired=True, vectorized=vectorized,
                                 n_resamples=resamples, method="percentile",
                                 confidence_level=confidence, rng=np.random.default_rng(seed))
    n_undefined = int(np.isnan(result.bootstrap_distribution).sum())
    if n_undefined:
        return {"low": None, "high": None,
                "reason": f"undefined in {n_undefined} of {resamples} resamples (for example a "
                          "resample whose scores or labels are all equal)"}
    interval = result.confidence_interval
    return {"low": float(interval.low), "high": float(interval.high), "reason": None}


# ---------------------------------------------------------------- rank agreement

def _constant_reason(scores: np.ndarray, labels: np.ndarray) -> str | None:
    constant_scores = np.unique(scores).size < 2
    constant_labels = np.unique(labels).size < 2
    if constant_scores and constant_labels:
        return "every score and every label is the same, so no rank correlation is defined"
    if constant_scores:
        return "every score is the same, so no rank correlation is defined"
    if constant_labels:
        return "every label is the same, so no rank correlation is defined"
    return None


def _spearman_test(scores: np.ndarray, labels: np.ndarray) -> Any:
    return stats.spearmanr(scores, labels)


def _kendall_b_test(scores: np.ndarray, labels: np.ndarray) -> Any:
    return stats.kendalltau(scores, labels, variant="b")


RANK_CORRELATIONS = {"spearman": _spearman_test, "kendall_tau_b": _kendall_b_test}

# Every resample at once, for the bootstrap: a call of scipy's tests per resample cost about 20 s
# of a calibration's 2000 resamples for each metric and statistic (scipy's functions pair two
# samples at a time, and their input handling dominates at the sizes of a labelled set). Each
# gives what the per-resample statistic gives (NaN where that is undefined), to rounding; the
# tests check them against scipy row by row.


def _rows(array: np.ndarray, axis: int) -> np.ndarray:
    return np.moveaxis(np.asarray(array, dtype=np.float64), axis, -1)


def _pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    scale = np.sqrt((a * a).sum(axis=-1) * (b * b).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(scale > 0, np.clip((a * b).sum(axis=-1) / scale, -1.0, 1.0), np.nan)


def _spearman_rows(scores: np.ndarray, labels: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman's rho of each row: the Pearson correlation of the average ranks, as
    scipy.stats.spearmanr; NaN where a row's scores or labels are constant."""
    return _pearson_rows(stats.rankdata(_rows(scores, axis), axis=-1), stats.rankdata(_rows(labels, axis), axis=-1))


KENDALL_PAIRS_AT_ONCE = 4_000_000  # pair signs held at once (float64: 32 MB)
KENDALL_BY_PAIRS_UP_TO = 400  # above this n, scipy's O(n log n) per row is cheaper than n^2 pairs


def _kendall_b_rows(scores: np.ndarray, labels: np.ndarray, axis: int = -1) -> np.ndarray:
    """Kendall's tau-b of each row, as scipy.stats.kendalltau(variant="b"): the sum over pairs of
    sign(score difference) * sign(label difference), over the square root of the product of the
    pairs untied in scores and in labels; NaN where a row's scores or labels are constant."""
    x, y = _rows(scores, axis), _rows(labels, axis)
    shape, n = x.shape[:-1], x.shape[-1]
    x, y = x.reshape(-1, n), y.reshape(-1, n)
    out = np.empty(x.shape[0])
    if n > KENDALL_BY_PAIRS_UP_TO:
        statistic = _nan_when_constant(_kendall_b_test)
        out[:] = [statistic(xs, ys) for xs, ys in zip(x, y)]
        return out.reshape(shape)
    step = max(1, KENDALL_PAIRS_AT_ONCE // (n * n))
    for start in range(0, x.shape[0], step):
        xs, ys = x[start:start + step], y[start:start + step]
        sx = np.sign(xs[:, :, None] - xs[:, None, :])
        sy = np.sign(ys[:, :, None] - ys[:, None, :])
        scale = np.sqrt(np.abs(sx).sum(axis=(1, 2)) * np.abs(sy).sum(axis=(1, 2)))
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start:start + step] = np.where(scale > 0, np.clip((sx * sy).sum(axis=(1, 2)) / scale, -1.0, 1.0),
                                               np.nan)
    return out.reshape(shape)


ROWS = {"spearman": _spearman_rows, "kendall_tau_b": _kendall_b_rows}


def _nan_when_constant(test: Callable[[np.ndarray, np.ndarray], Any]) -> Callable[..., float]:
    # A resample can draw one value only; the correlation is then undefined, and NaN says so
    # without scipy's ConstantInputWarning for every such resample.
    def statistic(scores: np.ndarray, labels: np.ndarray) -> float:
        if _constant_reason(scores, labels):
            return math.nan
        return float(test(scores, labels).statistic)
    return statistic


def _correlation_entry(test: Callable[..., Any], scores: np.ndarray, labels: np.ndarray,
                       reason: str | None, bootstrap: dict[str, Any]) -> dict[str, Any]:
    if reason:
        return {"estimate": None, "low": None, "high": None, "p_value": None, "reason": reason}
    result = test(scores, labels)
    return {"estimate": float(result.statistic), "low": bootstrap["low"], "high": bootstrap["high"],
            "p_value": _float_or_none(result.pvalue), "reason": bootstrap["reason"]}


def rank_agreement(scores: Sequence[Any], labels: Sequence[Any], *, resamples: int, seed: int,
                   confidence: float) -> dict[str, Any]:
    """Spearman's rho and Kendall's tau-b between scores and labels, each with a bootstrap interval.

    Spearman's rho is the Pearson correlation of the two rankings (ties at their average rank);
    Kendall's tau-b is (concordant - discordant pairs) / sqrt((n0 - ties in scores)(n0 - ties in
    labels)) with n0 = n(n - 1)/2 (scipy.stats.spearmanr and kendalltau, variant "b"). Both run
    -1 to 1; 1 means the score orders the examples exactly as the labels do. p_value is scipy's
    two-sided test of no association (None where scipy gives none, as for Spearman at n = 2).
    Pairs with a missing score are left out and counted in n_missing. With n < 2, or constant
    scores or labels, each estimate is None with the reason. The intervals are bootstrap_interval
    over the same pairs. Returns {n, n_missing, spearman: {estimate, low, high, p_value, reason},
    kendall_tau_b: {...}}.
    """
    kept_scores, kept_labels, n_missing = scored_pairs(scores, labels)
    score_array = np.asarray(kept_scores, dtype=np.float64)
    label_array = np.asarray(kept_labels, dtype=np.float64)
    n = int(score_array.size)
    if n < 2:
        reason = f"too few scored examples (n = {n}; at least 2 needed)"
    else:
        reason = _constant_reason(score_array, label_array)
    result: dict[str, Any] = {"n": n, "n_missing": n_missing}
    for name, test in RANK_CORRELATIONS.items():
        bootstrap = {} if reason else bootstrap_interval(
            ROWS[name], score_array, label_array,
            resamples=resamples, seed=seed, confidence=confidence, vectorized=True)
        result[name] = _correlation_entry(test, score_array, label_array, reason, bootstrap)
    return result


# ---------------------------------------------------------------- pass/fail agreement

def _one_class_reason(passed: np.ndarray) -> str | None:
    if passed.size == 0:
        return "no scored example"
    if passed.all():
        return "every labelled example passes"
    if not passed.any():
        return "every labelled example fails"
    return None


def _auc_rows(scores: np.ndarray, passed: np.ndarray, axis: int = -1) -> np.ndarray:
    """The ROC AUC of each row, as sklearn.metrics.roc_auc_score gives it (ties count half), from
    the Mann-Whitney U of the average ranks: the passing scores' rank sum - n_pass (n_pass + 1) / 2,
    over n_pass * n_fail. NaN where a row has one class only, which a resample can draw."""
    x, outcome = _rows(scores, axis), _rows(passed, axis).astype(bool)
    n = x.shape[-1]
    n_pass = outcome.sum(axis=-1)
    ranks = stats.rankdata(x, axis=-1)
    u = np.where(outcome, ranks, 0.0).sum(axis=-1) - n_pass * (n_pass + 1) / 2
    both = (n_pass > 0) & (n_pass < n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(both, u / (n_pass * (n - n_pass)), np.nan)


def roc(scores: Sequence[Any], passed: Sequence[Any], *, resamples: int, seed: int,
        confidence: float) -> dict[str, Any]:
    """ROC AUC of the scores against the human pass/fail, with its bootstrap interval and curve.

    AUC is the probability that a random passing example scores above a random failing one (ties
    count half), sklearn.metrics.roc_auc_score: 0 to 1, 0.5 is chance, 1 separates perfectly. The
    curve is sklearn.metrics.roc_curve(drop_intermediate=False): one point per distinct score,
    predicting pass when score >= threshold; its first point (sklearn's +inf threshold, where
    nothing is predicted to pass) keeps fpr = tpr = 0 and has the threshold None. Every score must
    be present (see scored_pairs). With one class only, or no example, auc, low, high and curve
    are None with the reason. Returns {n, n_pass, n_fail, auc, low, high, reason,
    curve: {fpr, tpr, thresholds}}.
    """
    score_array, passed_array = _scores_and_passed(scores, passed)
    n_pass = int(passed_array.sum())
    result: dict[str, Any] = {"n": int(passed_array.size), "n_pass": n_pass,
                              "n_fail": int(passed_array.size) - n_pass}
    reason = _one_class_reason(passed_array)
    if reason:
        return {**result, "auc": None, "low": None, "high": None, "reason": reason, "curve": None}
    interval = bootstrap_interval(_auc_rows, score_array, passed_array, resamples=resamples,
                                  seed=seed, confidence=confidence, vectorized=True)
    fpr, tpr, thresholds = metrics.roc_curve(passed_array, score_array, drop_intermediate=False)
    curve = {"fpr": [float(x) for x in fpr], "tpr": [float(x) for x in tpr],
             "thresholds": [None if math.isinf(t) else float(t) for t in thresholds]}
    return {**result, "auc": float(metrics.roc_auc_score(passed_array, score_array)), **interval,
            "curve": curve}


def youden_threshold(scores: Sequence[Any], passed: Sequence[Any]) -> float | None:
    """The score threshold that maximises Youden's J = TPR - FPR, predicting pass when score >= t.

    The candidates are the observed scores (sklearn.metrics.roc_curve's thresholds, its +inf one
    left out). J runs -1 to 1; 1 separates passes from fails perfectly. Where several thresholds
    reach the largest J, the highest of them is chosen (the fewest predicted passes). Every score
    must be present (see scored_pairs). None when there is no example or only one class.
    """
    score_array, passed_array = _scores_and_passed(scores, passed)
    if _one_class_reason(passed_array):
        return None
    fpr, tpr, thresholds = metrics.roc_curve(passed_array, score_array, drop_intermediate=False)
    youden = (tpr - fpr)[1:]
    # Equal J from different counts can differ in the last bit; they are a tie all the same.
    ties = np.flatnonzero(np.isclose(youden, youden.max(), rtol=0.0, atol=1e-12))
    # roc_curve orders thresholds from high to low, so the first tie is the highest.
    return float(thresholds[1:][ties[0]])


def precision_threshold(scores: Sequence[Any], passed: Sequence[Any], target: float) -> float | None:
    """The lowest observed score t such that the precision of predicting pass when score >= t
    reaches `target`.

    Precision is passes among the predicted passes, TP / (TP + FP), from
    sklearn.metrics.precision_recall_curve: 0 to 1, higher is better. The lowest such threshold
    keeps the most recall. Every score must be present (see scored_pairs). None when no threshold
    reaches the target, including when no example passes or there is no example. A target outside
    (0, 1] is a ValueError.
    """
    if not 0 < target <= 1:
        raise ValueError(f"the target precision must lie in (0, 1], got {target}")
    score_array, passed_array = _scores_and_passed(scores, passed)
    if not passed_array.any():
        return None
    precision, _, thresholds = metrics.precision_recall_curve(passed_array, score_array)
    # The last precision (1, at recall 0) belongs to no threshold.
    reaching = thresholds[precision[:-1] >= target]
    return float(reaching.min()) if reaching.size else None


def confusion_at(scores: Sequence[Any], passed: Sequence[Any], threshold: float) -> dict[str, Any]:
    """The confusion matrix and agreement statistics of predicting pass when score >= threshold.

    tp, fp, fn, tn from sklearn.metrics.confusion_matrix; precision TP / (TP + FP), recall
    TP / (TP + FN), F1 their harmonic mean and accuracy (TP + TN) / n from sklearn (0 to 1, higher
    is better); Cohen's kappa (po - pe) / (1 - pe), observed agreement corrected for the agreement
    expected by chance, sklearn.metrics.cohen_kappa_score (-1 to 1; 0 is chance, as for a constant
    predictor). Beside them: predicted_pass_rate, base_rate (the share of human passes),
    majority_class ("pass", "fail" or "tie" at 0.5) and majority_accuracy, the accuracy of always
    predicting the majority class, max(base_rate, 1 - base_rate). A statistic that divides by
    zero (precision with no predicted pass, recall with no human pass, kappa when both sides are
    constant) is None. Every score must be present (see scored_pairs); no example is a ValueError.
    """
    score_array, passed_array = _scores_and_passed(scores, passed)
    if passed_array.size == 0:
        raise ValueError("confusion_at needs at least one scored example")
    predicted = score_array >= threshold
    (tn, fp), (fn, tp) = metrics.confusion_matrix(passed_array, predicted, labels=[False, True])
    base_rate = float(passed_array.mean())
    majority_class = "pass" if base_rate > 0.5 else "fail" if base_rate < 0.5 else "tie"
    return {
        "threshold": float(threshold), "tp": int(tp), "fp": int(fp), "fn": int(fn), "tn": int(tn),
        "precision": _float_or_none(metrics.precision_score(passed_array, predicted, zero_division=np.nan)),
        "recall": _float_or_none(metrics.recall_score(passed_array, predicted, zero_division=np.nan)),
        "f1": _float_or_none(metrics.f1_score(passed_array, predicted, zero_division=np.nan)),
        "accuracy": float(metrics.accuracy_score(passed_array, predicted)),
        "cohen_kappa": _float_or_none(metrics.cohen_kappa_score(passed_array, predicted)),
        "predicted_pass_rate": float(predicted.mean()), "base_rate": base_rate,
        "majority_class": majority_class, "majority_accuracy": max(base_rate, 1.0 - base_rate),
    }


# ---------------------------------------------------------------- raters

def krippendorff_alpha(ratings: Any, level: str) -> dict[str, Any]:
    """Krippendorff's alpha between raters: agreement beyond chance over the units they share.

    alpha = 1 - D_o / D_e, the observed disagreement between ratings of the same unit over the
    disagreement expected from all pairable ratings, with the distance of the level: "nominal"
    (equal or not), "ordinal" (by the ranks between two values) or "interval" (squared
    difference); krippendorff.alpha. 1 is perfect agreement, 0 is chance, below 0 is systematic
    disagreement. `ratings` is raters x units with NaN (or None) where a rater did not rate a unit;
    only units with at least 2 ratings count. Returns {alpha, level, n_raters (raters with a
    rating), n_units (units rated at least twice), reason}: alpha is None with the reason when
    fewer than 2 raters rated, no unit has 2 ratings, or every such rating is the same value.
    """
    if level not in ALPHA_LEVELS:
        raise ValueError(f"level must be one of {', '.join(ALPHA_LEVELS)}, got {level!r}")
    matrix = np.asarray(ratings, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"ratings must be a 2-d array of raters x units, got shape {matrix.shape}")
    rated = ~np.isnan(matrix)
    pairable_units = rated.sum(axis=0) >= 2
    result = {"level": level, "n_raters": int(rated.any(axis=1).sum()),
              "n_units": int(pairable_units.sum())}
    if result["n_raters"] < 2:
        reason = "fewer than 2 raters rated any unit"
    elif result["n_units"] == 0:
        reason = "no unit was rated by 2 raters or more"
    elif np.unique(matrix[:, pairable_units][rated[:, pairable_units]]).size < 2:
        reason = "every rating of the units rated twice or more is the same value"
    else:
        reason = None
    if reason:
        return {"alpha": None, **result, "reason": reason}
    alpha = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
    return {"alpha": float(alpha), **result, "reason": None}


# ---------------------------------------------------------------- disagreements

def _percentile_ranks(values: np.ndarray) -> np.ndarray:
    if values.size == 1:
        return np.array([0.5])
    return (stats.rankdata(values, method="average") - 1) / (values.size - 1)


def rank_disagreements(ids: Sequence[Any], scores: Sequence[Any], labels: Sequence[Any],
                       n: int) -> list[dict[str, Any]]:
    """The n examples whose rank by score differs most from their rank by label.

    Over the pairs with a score (m of them), each value's percentile rank is
    (rank - 1) / (m - 1) with ties at their average rank (scipy.stats.rankdata), 0 the lowest and
    1 the highest (0.5 for both when m is 1); disagreement = |score_rank - label_rank|, 0 to 1.
    The n largest come first, ties in input order. Each item: {id, score, label, score_rank,
    label_rank, disagreement}. Fewer than n scored pairs give them all; none give [].
    """
    if int(n) != n or n < 0:
        raise ValueError(f"n must be a whole number of at least 0, got {n}")
    _same_length(ids=ids, scores=scores, labels=labels)
    kept_scores, kept_labels, _ = scored_pairs(scores, labels)
    kept_ids = [example_id for example_id, score in zip(ids, scores) if not is_missing(score)]
    if not kept_ids:
        return []
    score_array = np.asarray(kept_scores, dtype=np.float64)
    label_array = np.asarray(kept_labels, dtype=np.float64)
    score_ranks, label_ranks = _percentile_ranks(score_array), _percentile_ranks(label_array)
    disagreement = np.abs(score_ranks - label_ranks)
    order = np.argsort(-disagreement, kind="stable")[: int(n)]
    return [{"id": kept_ids[i], "score": kept_scores[i], "label": kept_labels[i],
             "score_rank": float(score_ranks[i]), "label_rank": float(label_ranks[i]),
             "disagreement": float(disagreement[i])} for i in order]

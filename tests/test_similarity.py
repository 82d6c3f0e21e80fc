"""Tests for evalbook.score.similarity: cosine math and BERTScore greedy matching (numpy only)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalbook.score.similarity import (
    BertScore,
    cosine_matrix,
    greedy_match,
    mean_pool,
    pairwise_cosine,
    rescale,
)


def _cos(u: np.ndarray, v: np.ndarray) -> float:
    return float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))


# ---------------------------------------------------------------- cosine

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pairwise_cosine_against_formula(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(40, 24))
    b = rng.normal(size=(40, 24)) * rng.uniform(0.1, 10, size=(40, 1))
    expected = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    got = pairwise_cosine(a, b)
    assert got.shape == (40,)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_pairwise_cosine_known_values():
    a = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 0.0], [3.0, 4.0]])
    b = np.array([[0.0, 2.0], [2.0, 2.0], [-3.0, 0.0], [4.0, 3.0]])
    # orthogonal 0; same direction 1; opposite -1; (3*4 + 4*3) / (5*5) = 24/25 = 0.96
    np.testing.assert_allclose(pairwise_cosine(a, b), [0.0, 1.0, -1.0, 0.96], atol=1e-12)


@pytest.mark.parametrize("seed", [0, 3])
def test_cosine_matrix_against_formula(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(7, 16))
    b = rng.normal(size=(5, 16))
    got = cosine_matrix(a, b)
    assert got.shape == (7, 5)
    expected = np.array([[_cos(a[i], b[j]) for j in range(5)] for i in range(7)])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_cosine_matrix_diagonal_matches_pairwise():
    rng = np.random.default_rng(9)
    a, b = rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
    np.testing.assert_allclose(np.diag(cosine_matrix(a, b)), pairwise_cosine(a, b), atol=1e-12)


@pytest.mark.parametrize("func", [pairwise_cosine, cosine_matrix])
def test_zero_vector_in_a_raises(func):
    a = np.array([[1.0, 2.0], [0.0, 0.0]])
    b = np.array([[1.0, 1.0], [2.0, 1.0]])
    with pytest.raises(ValueError, match="cosine is undefined for a zero vector in a"):
        func(a, b)


@pytest.mark.parametrize("func", [pairwise_cosine, cosine_matrix])
def test_zero_vector_in_b_raises(func):
    a = np.array([[1.0, 2.0], [3.0, 1.0]])
    b = np.array([[1.0, 1.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match="cosine is undefined for a zero vector in b"):
        func(a, b)


def test_pairwise_cosine_shape_mismatch_raises():
    with pytest.raises(ValueError, match=r"needs equal shapes, got \(3, 4\) and \(2, 4\)"):
        pairwise_cosine(np.ones((3, 4)), np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"needs equal shapes, got \(3, 4\) and \(3, 5\)"):
        pairwise_cosine(np.ones((3, 4)), np.ones((3, 5)))


def test_cosine_matrix_dimension_mismatch_raises():
    with pytest.raises(ValueError, match="mismatch"):
        cosine_matrix(np.ones((3, 4)), np.ones((2, 5)))


def test_mean_pool():
    tokens = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 1.0]])
    # ((1+3+5)/3, (2+6+1)/3) = (3, 3)
    np.testing.assert_allclose(mean_pool(tokens), [3.0, 3.0], atol=1e-12)


# ---------------------------------------------------------------- greedy matching

def reference_greedy(cand, ref, w_cand, w_ref):
    """BERTScore greedy matching, written as plain loops."""
    def unit(v):
        norm = math.sqrt(sum(x * x for x in v))
        return [x / norm for x in v]

    cand = [unit(list(map(float, v))) for v in cand]
    ref = [unit(list(map(float, v))) for v in ref]
    sim = [[sum(x * y for x, y in zip(c, r)) for r in ref] for c in cand]
    p_num = sum(w * max(sim[i]) for i, w in enumerate(w_cand))
    precision = p_num / sum(w_cand)
    r_num = sum(w * max(sim[i][j] for i in range(len(cand))) for j, w in enumerate(w_ref))
    recall = r_num / sum(w_ref)
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return precision, recall, f1


@pytest.mark.parametrize("seed", range(5))
def test_greedy_match_against_loop_implementation(seed):
    rng = np.random.default_rng(seed)
    n_cand, n_ref, dim = int(rng.integers(3, 12)), int(rng.integers(3, 12)), 10
    cand = rng.normal(size=(n_cand, dim))
    ref = rng.normal(size=(n_ref, dim))
    # [CLS] and [SEP] weigh 0, other tokens get idf-like positive weights
    w_cand = np.concatenate([[0.0], rng.uniform(0.2, 3.0, size=n_cand - 2), [0.0]])
    w_ref = np.concatenate([[0.0], rng.uniform(0.2, 3.0, size=n_ref - 2), [0.0]])
    got = greedy_match(cand, ref, w_cand, w_ref)
    assert isinstance(got, BertScore)
    expected = reference_greedy(cand, ref, w_cand.tolist(), w_ref.tolist())
    np.testing.assert_allclose([got.precision, got.recall, got.f1], expected, rtol=0, atol=1e-12)


def test_greedy_match_zero_weight_tokens_still_in_matching_pool():
    # candidate c0=[1,0] (weight 0, like [CLS]), c1=[0,1] (weight 1)
    # reference r0=[1,0] (weight 1)
    # R: r0's best match is c0 (cos 1) even though c0 weighs 0 -> R = 1
    # P: only c1 counts; cos(c1, r0) = 0 -> P = 0
    score = greedy_match(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 0.0]]),
                         np.array([0.0, 1.0]), np.array([1.0]))
    assert score.precision == pytest.approx(0.0, abs=1e-12)
    assert score.recall == pytest.approx(1.0, abs=1e-12)
    # F1 = 2*0*1/(0+1) = 0
    assert score.f1 == pytest.approx(0.0, abs=1e-12)


def test_greedy_match_hand_computed_2d():
    # candidate c1 = [1, 0], c2 = [0, 1]; reference r1 = [1, 0], r2 = [1, 1]
    # cosines: c1.r1 = 1, c1.r2 = 1/sqrt2, c2.r1 = 0, c2.r2 = 1/sqrt2
    # weights: candidate [1, 0], reference [1, 1]
    # P = (1 * max(1, 1/sqrt2)) / 1 = 1
    # R = (max(1, 0) + max(1/sqrt2, 1/sqrt2)) / 2 = (1 + 1/sqrt2) / 2 ~ 0.853553
    # F1 = 2 * 1 * R / (1 + R) = 1.707107 / 1.853553 ~ 0.920991
    s = 1 / math.sqrt(2)
    recall = (1 + s) / 2
    score = greedy_match(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 0.0], [1.0, 1.0]]),
                         np.array([1.0, 0.0]), np.array([1.0, 1.0]))
    assert score.precision == pytest.approx(1.0, abs=1e-12)
    assert score.recall == pytest.approx(recall, abs=1e-12)
    assert score.recall == pytest.approx(0.8535533905932737, abs=1e-12)
    assert score.f1 == pytest.approx(2 * recall / (1 + recall), abs=1e-12)
    assert score.f1 == pytest.approx(0.9209914264, abs=1e-9)


def test_greedy_match_identical_texts_score_one():
    tokens = np.random.default_rng(4).normal(size=(6, 5))
    score = greedy_match(tokens, tokens * 3.0, np.ones(6), np.ones(6))
    assert score == pytest.approx((1.0, 1.0, 1.0), abs=1e-12)


def test_f1_is_zero_when_precision_and_recall_are_zero():
    # single orthogonal tokens: cos = 0 -> P = R = 0; F1 would be 0/0
    score = greedy_match(np.array([[1.0, 0.0]]), np.array([[0.0, 5.0]]), [1.0], [1.0])
    assert score.precision == 0.0 and score.recall == 0.0
    assert score.f1 == 0.0


def test_f1_is_zero_when_precision_plus_recall_is_zero():
    # candidate c1 = [1, 0] (w 1), c2 = [3, -4] (w 0)
    # reference r1 = [3, 4] (w 0), r2 = [-3, 4] (w 1)
    # cos(c1, r1) = 3/5 = 0.6, cos(c1, r2) = -0.6, cos(c2, r2) = (-9 - 16)/25 = -1
    # P = max(0.6, -0.6) = 0.6; R = max(-0.6, -1) = -0.6; P + R = 0 -> F1 = 0
    score = greedy_match(np.array([[1.0, 0.0], [3.0, -4.0]]), np.array([[3.0, 4.0], [-3.0, 4.0]]),
                         np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    assert score.precision == pytest.approx(0.6, abs=1e-12)
    assert score.recall == pytest.approx(-0.6, abs=1e-12)
    assert score.precision + score.recall == 0
    assert score.f1 == 0.0


@pytest.mark.parametrize("w_cand, w_ref", [([0.0, 0.0], [1.0]), ([1.0, 0.0], [0.0])])
def test_greedy_match_needs_a_weighted_token_on_each_side(w_cand, w_ref):
    with pytest.raises(ValueError, match="at least one weighted token on each side"):
        greedy_match(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 1.0]]), w_cand, w_ref)


def test_greedy_match_zero_token_raises():
    with pytest.raises(ValueError, match="zero vector in b"):
        greedy_match(np.array([[1.0, 0.0]]), np.array([[0.0, 0.0]]), [1.0], [1.0])


# ---------------------------------------------------------------- rescale

@pytest.mark.parametrize("score, baseline, expected", [
    (0.9, 0.8, 0.5),     # (0.9 - 0.8) / (1 - 0.8) = 0.1 / 0.2
    (0.8, 0.8, 0.0),     # the baseline maps to 0
    (1.0, 0.83, 1.0),    # 1 maps to 1
    (0.7, 0.8, -0.5),    # (0.7 - 0.8) / 0.2; can be negative
    (0.5, -0.5, 2 / 3),  # (0.5 + 0.5) / 1.5
    (0.3, 0.0, 0.3),
])
def test_rescale_formula(score, baseline, expected):
    assert rescale(score, baseline) == pytest.approx(expected, abs=1e-12)


def test_rescale_against_formula_random():
    rng = np.random.default_rng(5)
    for score, baseline in zip(rng.uniform(-1, 1, 50), rng.uniform(-0.5, 0.99, 50)):
        assert rescale(score, baseline) == pytest.approx((score - baseline) / (1 - baseline), rel=1e-12)


@pytest.mark.parametrize("baseline", [1, 1.0, 1.5])
def test_rescale_baseline_at_least_one_raises(baseline):
    with pytest.raises(ValueError, match=rf"must be below 1, got {baseline}"):
        rescale(0.9, baseline)

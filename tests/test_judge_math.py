"""The judge's pure score math: groundedness, relevance, criteria, score levels, threshold readings."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from evalbook.judge.criteria import criteria_score
from evalbook.judge.groundedness import groundedness_score
from evalbook.judge.relevance import relevance_score
from evalbook.judge.score import Score, score_levels, threshold_reading


# ---------------------------------------------------------------- groundedness

def test_groundedness_two_of_three_supported_is_two_thirds():
    score = groundedness_score([1, 1, 0])
    assert score.value == pytest.approx(2 / 3)
    assert score.reason is None


def test_groundedness_single_supported_statement_is_one():
    assert groundedness_score([1]).value == 1.0
    assert groundedness_score([0]).value == 0.0


def test_groundedness_without_statements_is_unscored_with_a_reason():
    score = groundedness_score([])
    assert score.value is None  # never 0, never NaN
    assert isinstance(score.reason, str) and "no statement" in score.reason


@pytest.mark.parametrize("verdicts", [[1, 2], [0, -1], [1, 0.5], ["1"]])
def test_groundedness_rejects_a_verdict_other_than_0_or_1(verdicts):
    with pytest.raises(ValueError, match="verdicts must be 0 or 1"):
        groundedness_score(verdicts)


# ---------------------------------------------------------------- relevance

def _numpy_mean_cosine(question: np.ndarray, generated: np.ndarray) -> float:
    q = question / np.linalg.norm(question)
    g = generated / np.linalg.norm(generated, axis=1, keepdims=True)
    return float(np.mean(g @ q))


def test_relevance_is_the_mean_cosine_numpy_computes():
    rng = np.random.default_rng(7)
    question = rng.normal(size=16)
    generated = rng.normal(size=(3, 16))
    score = relevance_score(question, generated)
    assert score.value == pytest.approx(_numpy_mean_cosine(question, generated), abs=1e-12)


def test_relevance_keeps_a_negative_mean():
    question = np.array([1.0, 0.0, 0.0])
    generated = np.array([[-1.0, 0.2, 0.0], [-0.5, -0.5, 0.1], [0.1, 1.0, 0.0]])
    expected = _numpy_mean_cosine(question, generated)
    assert expected < 0
    score = relevance_score(question, generated)
    assert score.value == pytest.approx(expected, abs=1e-12)
    assert score.value < 0  # the sign is kept, not clipped to 0 or taken absolute


def test_relevance_of_identical_and_opposite_questions():
    question = np.array([0.3, 0.4, 0.5])
    assert relevance_score(question, np.array([question * 2.0])).value == pytest.approx(1.0)
    assert relevance_score(question, np.array([-question])).value == pytest.approx(-1.0)


def test_relevance_without_questions_is_unscored():
    score = relevance_score(np.array([1.0, 0.0]), np.empty((0, 2)))
    assert score.value is None
    assert "no question" in score.reason


# ---------------------------------------------------------------- criteria

def test_criteria_score_is_the_share_met():
    assert criteria_score([True, False]).value == 0.5
    assert criteria_score([True, True, True]).value == 1.0
    assert criteria_score([False, False, False, True]).value == 0.25


def test_criteria_without_criteria_is_unscored():
    score = criteria_score([])
    assert score.value is None and score.reason


def test_score_unscored_constructor():
    assert Score.unscored("why") == Score(value=None, reason="why")


# ---------------------------------------------------------------- levels and thresholds

def test_score_levels_are_exact_fractions():
    levels = score_levels(2)
    assert levels == [Fraction(0), Fraction(1, 2), Fraction(1)]
    assert all(isinstance(level, Fraction) for level in levels)
    assert score_levels(3) == [Fraction(0), Fraction(1, 3), Fraction(2, 3), Fraction(1)]
    assert score_levels(0) == []


def test_score_levels_rejects_a_negative_count():
    with pytest.raises(ValueError):
        score_levels(-1)


def test_threshold_between_levels_on_two_statements_means_both():
    reading = threshold_reading(2, 0.8)
    assert "all 2 must hold" in reading
    assert "between" in reading


def test_threshold_half_on_three_statements_means_at_least_two():
    reading = threshold_reading(3, 0.5)
    assert "at least 2 of 3" in reading
    assert "between" in reading  # 0.5 lies between 1/3 and 2/3


def test_threshold_on_an_exact_level_is_not_between():
    reading = threshold_reading(4, 0.5)
    assert "at least 2 of 4" in reading
    assert "between" not in reading


def test_threshold_above_one_cannot_be_passed():
    assert "no answer can pass" in threshold_reading(2, 1.2)


def test_threshold_reading_without_statements():
    reading = threshold_reading(0, 0.5)
    assert "unscored" in reading


def test_relevance_with_a_zero_embedding_is_unscored_not_a_crash():
    score = relevance_score(np.zeros(4), np.ones((3, 4)))
    assert score.value is None and "zero vector" in score.reason

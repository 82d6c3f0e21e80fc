"""Answer-similarity math: cosine similarity and BERTScore's greedy token matching.

These are pure functions of embeddings. Producing the embeddings (and reproducing
`bert_score.score` and `SentenceTransformer.encode` exactly) is `scoring.py`'s job.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

class BertScore(NamedTuple):
    precision: float
    recall: float
    f1: float


def _unit_rows(matrix: np.ndarray, what: str) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError(f"cosine is undefined for a zero vector in {what}")
    return matrix / norms


def pairwise_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of row i of `a` with row i of `b`.

    cos(a_i, b_i) = a_i . b_i / (|a_i| |b_i|); range -1..1, higher is more similar.
    A zero row makes the cosine undefined and raises ValueError rather than returning NaN.
    """
    a_unit, b_unit = _unit_rows(a, "a"), _unit_rows(b, "b")
    if a_unit.shape != b_unit.shape:
        raise ValueError(f"pairwise_cosine needs equal shapes, got {a_unit.shape} and {b_unit.shape}")
    return np.einsum("ij,ij->i", a_unit, b_unit)


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of `a` with every row of `b`, shape (len(a), len(b)).

    Range -1..1, higher is more similar; a zero row raises ValueError.
    """
    return _unit_rows(a, "a") @ _unit_rows(b, "b").T


def mean_pool(token_embeddings: np.ndarray) -> np.ndarray:
    """Mean of a text's token embeddings (all tokens of the pass, special tokens included).

    This is SentenceTransformers' `mean` pooling for one unpadded text.
    """
    return np.asarray(token_embeddings, dtype=np.float64).mean(axis=0)


def greedy_match(candidate_tokens: np.ndarray, reference_tokens: np.ndarray,
                 candidate_weights: np.ndarray, reference_weights: np.ndarray) -> BertScore:
    """BERTScore of one pair from its token embeddings (Zhang et al. 2020, greedy matching).

    Every token is normalised; sim = cosine of each candidate token with each reference token.
    P = sum_i w_i max_j sim_ij / sum_i w_i over candidate tokens, R likewise over reference
    tokens, F1 = 2PR / (P + R). The matching pool holds every token of the other side, special
    tokens included; the weights (0 for [CLS]/[SEP], 1 otherwise without idf) decide what is
    averaged. Range -1..1 (in practice 0..1), higher is better. F1 is 0 when P + R is 0.
    """
    similarity = cosine_matrix(candidate_tokens, reference_tokens)
    candidate_weights = np.asarray(candidate_weights, dtype=np.float64)
    reference_weights = np.asarray(reference_weights, dtype=np.float64)
    if candidate_weights.sum() <= 0 or reference_weights.sum() <= 0:
        raise ValueError("greedy_match needs at least one weighted token on each side")
    precision = float(similarity.max(axis=1) @ candidate_weights / candidate_weights.sum())
    recall = float(similarity.max(axis=0) @ reference_weights / reference_weights.sum())
    total = precision + recall
    f1 = 2 * precision * recall / total if total != 0 else 0.0
    return BertScore(precision, recall, f1)


def rescale(score: float, baseline: float) -> float:
    """BERTScore baseline rescaling: (score - baseline) / (1 - baseline).

    Maps the baseline to 0 and 1 to 1; the result can be negative.
    """
    if baseline >= 1:
        raise ValueError(f"a rescaling baseline must be below 1, got {baseline}")
    return (score - baseline) / (1 - baseline)

"""Questions grouped by meaning, for slicing a run by topic (issue 26, item 2).

`find_topics` clusters the questions' embeddings (the scoring model's, L2-normalised, so that
k-means' Euclidean distance ranks as cosine does) with scikit-learn's KMeans, seeded. Unless k is
given, it tries k = 3 to 12 and keeps the k with the highest silhouette (scikit-learn's
silhouette_score; a tie keeps the smaller k). Over 2,000 questions, k is chosen on a seeded sample
of 2,000: each k is fitted and scored on the sample (`tried`), and only the chosen k is fitted on
every question, its silhouette taken on the same sample. Fitting ten k with ten starts each on all of a
12,000-question run took most of the time slicing adds to a run (docs/performance.md, Slices).

Each topic is named by its 3 most distinctive terms, by class-based TF-IDF: the questions of a
topic are one document, scikit-learn's CountVectorizer counts their words (English stop words
left out), and a term's weight in a topic is its share of the topic's words times
log(1 + the mean words per topic / the term's count over all topics), so that a word frequent
in one topic and rare elsewhere ranks first. That weighting (the c-TF-IDF of BERTopic, Grootendorst
2022) is written here because scikit-learn's TfidfTransformer weighs by document frequency, which
with one document per topic cannot tell a word used once in a topic from one used everywhere in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from sklearn.cluster import KMeans
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer
from sklearn.metrics import silhouette_score
from sklearn.preprocessing import normalize
from threadpoolctl import threadpool_limits

MIN_EXAMPLES = 30  # fewer questions than this are not grouped: the topics would be noise
K_RANGE = (3, 12)
TERMS = 3  # terms in a topic's name
SILHOUETTE_SAMPLE = 2_000
SEPARATOR = " \u00b7 "  # a middle dot between a name's terms
# scikit-learn's English stop words, and the words that make a sentence a question ("how long
# does", "what did"), which every topic of questions shares and so would otherwise name them
STOP_WORDS = sorted(ENGLISH_STOP_WORDS | {"can", "could", "did", "do", "does", "doing", "done", "get", "gets",
                                          "got", "long", "many", "may", "might", "much", "must", "need",
                                          "needs", "shall", "should", "will", "would"})


@dataclass(frozen=True)
class Topics:
    """Each question's topic name (None when the questions were not grouped, with `reason`), the
    number of topics, the silhouette of that choice, and each k tried with its silhouette."""

    labels: list[str] | None
    k: int | None
    silhouette: float | None
    tried: dict[int, float]
    reason: str | None = None
    names: list[str] | None = None  # each topic's name, by topic number

    def as_record(self, ids: Sequence[str], seed: int, k_setting: int | None) -> dict:
        """What 02_score writes (layout.TOPICS) and 04_report reads: the choice and each
        example's topic, by id."""
        return {"k": self.k, "k_setting": k_setting, "silhouette": self.silhouette, "seed": seed,
                "tried": {str(k): value for k, value in self.tried.items()}, "names": self.names,
                "reason": self.reason, "ids": list(ids), "labels": self.labels}


def _sample(n: int, seed: int) -> np.ndarray:
    """The positions k is chosen on: all n, or a seeded sample of SILHOUETTE_SAMPLE, in order."""
    if n <= SILHOUETTE_SAMPLE:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, SILHOUETTE_SAMPLE, replace=False))


def _fit(points: np.ndarray, k: int, seed: int) -> np.ndarray:
    return KMeans(n_clusters=k, random_state=seed, n_init=10).fit_predict(points)


def _cluster(points: np.ndarray, candidates: list[int], seed: int) -> tuple[int, np.ndarray, float, dict[int, float]]:
    """(k, each point's topic, the silhouette, each k tried with its silhouette): see the module
    docstring. In one thread (OpenMP and BLAS): on a shared 2-core machine KMeans' threads wait on
    each other (ten k on 2,000 questions took 46-66 s with 2 threads under load, 5-7 s with 1), and
    one thread keeps the labels independent of the machine's core count."""
    sample = _sample(len(points), seed)
    tried: dict[int, float] = {}
    with threadpool_limits(limits=1):
        if len(candidates) > 1:
            fits = {candidate: _fit(points[sample], candidate, seed) for candidate in candidates}
            tried = {candidate: float(silhouette_score(points[sample], fits[candidate])) for candidate in candidates}
            best = max(candidates, key=lambda c: (tried[c], -c))
            labels = fits[best] if len(sample) == len(points) else _fit(points, best, seed)
        else:
            best = candidates[0]
            labels = _fit(points, best, seed)
        silhouette = float(silhouette_score(points[sample], labels[sample]))
    tried.setdefault(best, silhouette)
    return best, labels, silhouette, tried


def topic_names(questions: Sequence[str], labels: np.ndarray, k: int, terms: int = TERMS) -> list[str]:
    """The name of each topic 0..k-1: its `terms` most distinctive words by class-based TF-IDF
    (module docstring), joined by a middle dot; a topic whose words are all stop words is named
    "topic <i>", and two topics of the same name get their number after it."""
    documents = [" ".join(q for q, label in zip(questions, labels) if label == topic) for topic in range(k)]
    try:
        vectorizer = CountVectorizer(stop_words=STOP_WORDS, token_pattern=r"(?u)\b[^\W\d_][\w'-]+\b")
        counts = vectorizer.fit_transform(documents).toarray().astype(float)
    except ValueError:  # no word left at all
        return [f"topic {topic + 1}" for topic in range(k)]
    vocabulary = vectorizer.get_feature_names_out()
    words_per_topic = counts.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        tf = np.where(words_per_topic > 0, counts / words_per_topic, 0.0)
    idf = np.log(1 + words_per_topic.mean() / counts.sum(axis=0))
    weights = tf * idf
    names = []
    for topic in range(k):
        order = [i for i in np.lexsort((vocabulary, -weights[topic])) if weights[topic, i] > 0][:terms]
        names.append(SEPARATOR.join(vocabulary[i] for i in order) if order else f"topic {topic + 1}")
    seen: dict[str, int] = {}
    for topic, name in enumerate(names):
        seen[name] = seen.get(name, 0) + 1
        if names.count(name) > 1:
            names[topic] = f"{name} ({seen[name]})"
    return names


def find_topics(embeddings: np.ndarray, questions: Sequence[str], *, k: int | None = None,
                seed: int = 0, min_size: int = 1) -> Topics:
    """The questions grouped by meaning (module docstring); `k` fixes the number of topics.
    Otherwise k is tried up to 12, and no further than the number of questions over `min_size`
    (the slices' min_n): more topics than that would mostly be too small to test."""
    n = len(questions)
    if n < MIN_EXAMPLES:
        return Topics(None, None, None, {}, reason=f"{n} questions: topics need at least {MIN_EXAMPLES}")
    points = normalize(np.asarray(embeddings, dtype=np.float64))
    if points.shape[0] != n:
        raise ValueError(f"{points.shape[0]} embeddings for {n} questions")
    # rows as bytes (+ 0.0 makes -0.0 equal 0.0): np.unique(axis=0) sorts and took seconds at 12,000
    distinct = len({row.tobytes() for row in points.round(decimals=9) + 0.0})
    low, high = K_RANGE
    upper = min(high, distinct - 1, max(low, n // max(min_size, 1)))
    candidates = [k] if k is not None else list(range(low, upper + 1))
    if not candidates or candidates[0] < 2:
        return Topics(None, None, None, {}, reason=f"{distinct} distinct questions: too few to group")
    best, labels, silhouette, tried = _cluster(points, candidates, seed)
    names = topic_names(questions, labels, best)
    return Topics([names[label] for label in labels], best, silhouette, tried, names=names)


def topics_summary(record: dict) -> str:
    """One sentence on 02_score's topics record: how many topics and how k was chosen, or why
    there are none."""
    if record.get("labels") is None:
        return f"No topics by meaning: {record.get('reason')}."
    how = (f"k = {record['k']} as set by slices.topics.k" if record.get("k_setting") is not None
           else f"k = {record['k']}, the best silhouette of k = {min(map(int, record['tried']))}-"
                f"{max(map(int, record['tried']))}")
    return (f"{len(set(record['labels']))} topics by meaning over {len(record['labels'])} questions ({how}; "
            f"silhouette {record['silhouette']:.3f}, seed {record['seed']}).")


def topics_table(record: dict) -> pd.DataFrame:
    """Each topic's name and its number of questions, largest first; empty without topics."""
    if record.get("labels") is None:
        return pd.DataFrame(columns=["topic", "questions"])
    counts = pd.Series(record["labels"]).value_counts()
    return pd.DataFrame({"topic": counts.index, "questions": counts.to_numpy()}).sort_values(
        ["questions", "topic"], ascending=[False, True], ignore_index=True)

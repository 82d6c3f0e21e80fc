"""Questions grouped by meaning: evalbook.report.topics (issue 26, item 2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import adjusted_rand_score

from evalbook.report.topics import MIN_EXAMPLES, SEPARATOR, find_topics, topic_names

# the cache where the profile puts it, as these tests check
pytestmark = pytest.mark.usefixtures("own_embedding_cache")

VOCABULARY = {
    "refund": ["refund", "card", "fee", "charge"],
    "parking": ["parking", "permit", "street", "resident"],
    "ferry": ["ferry", "sailing", "timetable", "harbour"],
    "garden": ["garden", "plot", "compost", "allotment"],
}


def planted(n_per_topic: int = 20, seed: int = 0, spread: float = 0.05):
    """Questions of four topics, each with its own words, and embeddings in four tight groups."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(VOCABULARY), 64))
    questions, embeddings, truth = [], [], []
    for topic, (name, words) in enumerate(VOCABULARY.items()):
        for _ in range(n_per_topic):
            picked = rng.choice(words, size=3, replace=False)
            questions.append(f"What is the {picked[0]} rule for the {picked[1]} and the {picked[2]}?")
            embeddings.append(centres[topic] + rng.normal(scale=spread, size=64))
            truth.append(topic)
    return questions, np.asarray(embeddings), np.asarray(truth)


def test_planted_topics_are_found_with_k_chosen_by_silhouette():
    questions, embeddings, truth = planted()
    topics = find_topics(embeddings, questions, seed=0)
    assert topics.k == 4 and set(topics.tried) == set(range(3, 13))
    assert topics.tried[4] == max(topics.tried.values())
    assert adjusted_rand_score(truth, topics.labels) == 1.0


def test_each_topic_is_named_by_its_own_words():
    questions, embeddings, truth = planted()
    topics = find_topics(embeddings, questions, seed=0)
    for topic, words in enumerate(VOCABULARY.values()):
        (name,) = {label for label, t in zip(topics.labels, truth) if t == topic}
        terms = name.split(SEPARATOR)
        assert len(terms) == 3 and set(terms) <= set(words), name


def test_the_grouping_is_deterministic_for_a_seed():
    questions, embeddings, _ = planted(spread=0.8)  # overlapping groups: the seed matters
    first, second = find_topics(embeddings, questions, seed=5), find_topics(embeddings, questions, seed=5)
    assert first == second


def test_k_can_be_set():
    questions, embeddings, _ = planted()
    topics = find_topics(embeddings, questions, k=3, seed=0)
    assert topics.k == 3 and list(topics.tried) == [3] and len(set(topics.labels)) == 3


def test_too_few_questions_give_no_topics_and_say_why():
    questions, embeddings, _ = planted()
    topics = find_topics(embeddings[:MIN_EXAMPLES - 1], questions[:MIN_EXAMPLES - 1])
    assert topics.labels is None and topics.reason == f"{MIN_EXAMPLES - 1} questions: topics need at least 30"


def test_identical_questions_cannot_be_grouped():
    topics = find_topics(np.ones((40, 8)), ["same question"] * 40)
    assert topics.labels is None and "distinct" in topics.reason


def test_names_of_stop_words_only_and_repeated_names_stay_distinct():
    questions = ["what is it", "what is it", "refund card fee", "refund card fee"]
    names = topic_names(questions, np.asarray([0, 0, 1, 1]), 2)
    assert names == ["topic 1", "card" + SEPARATOR + "fee" + SEPARATOR + "refund"]
    twins = topic_names(["refund card fee"] * 4, np.asarray([0, 0, 1, 1]), 2)
    assert len(set(twins)) == 2


@pytest.mark.parametrize("n", [MIN_EXAMPLES, 200])
def test_every_question_gets_a_topic(n):
    questions, embeddings, _ = planted(n_per_topic=n // 4 + 1)
    topics = find_topics(embeddings[:n], questions[:n], seed=1)
    assert len(topics.labels) == n and topics.reason is None


def test_k_is_tried_no_further_than_the_questions_over_the_smallest_testable_topic():
    questions, embeddings, _ = planted()
    capped = find_topics(embeddings, questions, seed=0, min_size=len(questions) // 3)
    assert sorted(capped.tried) == [3]
    assert sorted(find_topics(embeddings, questions, seed=0).tried) == list(range(3, 13))


@pytest.mark.slow  # the scoring model
def test_a_warm_run_groups_the_questions_again_from_the_cache_with_no_new_encoding(relocated_default_values,
                                                                                  write_profile):
    from evalbook.layout import TOPICS
    from evalbook.pipeline import open_stage, run_score

    values = {**relocated_default_values, "local_outputs_root": relocated_default_values["outputs_root"]}
    ctx = open_stage(str(write_profile(values)))
    run_score(ctx)
    cold, cold_topics = ctx.read_json("scoring.json"), ctx.read_json(TOPICS)
    assert cold_topics["labels"] is not None and len(cold_topics["labels"]) == len(set(cold_topics["ids"])) == 32
    run_score(ctx)
    warm, warm_topics = ctx.read_json("scoring.json"), ctx.read_json(TOPICS)
    assert cold["sequences_encoded"] > 0 and warm["sequences_encoded"] == 0
    assert warm["embedding_cache"]["writes"] == 0
    assert warm_topics == cold_topics


@pytest.mark.slow  # the scoring model
def test_the_questions_embeddings_are_the_sentence_cosines(relocated_default_values, write_profile):
    """What the topics cluster is the sentence model's embedding of each question: its cosine
    with an answer's is the sentence cosine 02_score gives that pair."""
    from evalbook.params import load_profile
    from evalbook.score.models import resolve_profile_models
    from evalbook.score.scoring import AnswerScorer, score_answers
    from evalbook.score.similarity import pairwise_cosine

    profile = load_profile(write_profile(relocated_default_values))
    scorer = AnswerScorer.from_profile(profile, resolve_profile_models(profile))
    texts = ["How often is the green bin collected?", "  Every other Tuesday.  ", ""]
    embedded = scorer.sentence_embeddings(texts)
    frame = pd.DataFrame({"id": ["a"], "question": [texts[0]], "generated_answer": [texts[1]],
                          "reference_answer": [texts[0]], "retrieved_ids": [None], "gold_id": [None], "gold_ids": [None],
                          "retrieved_contexts": [None]})
    scored = score_answers(frame, scorer, 5, show_progress=False, question_embeddings=True)
    assert pairwise_cosine(embedded[:1], embedded[1:2])[0] == pytest.approx(scored["sentence_cosine"][0], abs=1e-6)
    assert np.array_equal(np.asarray(scored["question_embedding"][0]), embedded[0].astype(np.float32))
    assert not embedded[2].any()


def test_question_words_do_not_name_a_topic():
    questions = ["How long does the refund take?", "How much does the refund cost?", "Did the refund arrive?",
                 "How long does the bus take?", "How much does the bus ticket cost?", "Did the bus arrive?"]
    names = topic_names(questions, np.array([0, 0, 0, 1, 1, 1]), 2)
    assert names[0].startswith("refund") and names[1].startswith("bus")
    assert not {"long", "does", "did", "much"} & {word for name in names for word in name.split(" \u00b7 ")}


def test_with_topics_off_02_records_why_and_groups_nothing():
    """slices.topics: false gives the record 04 reads as "no topics", with the reason, and needs
    no embeddings."""
    from evalbook.params import load_profile
    from evalbook.pipeline import question_topics
    from paths import DEFAULT_PROFILE

    profile = load_profile(DEFAULT_PROFILE, {"slices.topics": False})
    canonical = pd.DataFrame({"id": ["a", "b"], "question": ["How long?", "Who pays?"]})
    record = question_topics(profile, canonical, None)
    assert record == {"k": None, "k_setting": None, "silhouette": None, "seed": 0, "tried": {}, "names": None,
                      "reason": "slices.topics is false", "ids": ["a", "b"], "labels": None}

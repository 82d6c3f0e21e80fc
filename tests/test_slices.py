"""The slice statistics of evalbook.report.slices against the reference libraries and known answers
(issue 26, item 2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import false_discovery_control, permutation_test

from evalbook.report.slices import (BETTER, MISSING_LEVEL, NO_CLEAR_DIFFERENCE, TOO_FEW, WORSE, SliceSettings,
                                    categorical_levels, derived_slices, flag_levels, metadata_slices, quantile_levels,
                                    refined_permutations, slice_run, slice_statistics)
from evalbook.errors import UnusableInput
from evalbook.stats import Bootstrap

FAST = SliceSettings(bootstrap=Bootstrap(resamples=200, seed=0, confidence=0.95), permutations=999)


def frame(seed: int = 0, n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"topic": rng.choice(["refund", "card", "fee", "app", "login", "limits"], size=n),
                         "score": rng.normal(0.7, 0.1, size=n)})


def test_level_means_and_sizes_equal_pandas_groupby():
    data = frame()
    data.loc[::7, "score"] = np.nan  # a missing value leaves its example out of that metric
    results = slice_statistics(data["score"], categorical_levels(data["topic"]), slice_name="topic",
                               metric="score", settings=FAST)
    grouped = data.dropna(subset=["score"]).groupby("topic")["score"]
    for result in results:
        assert result.n == grouped.size()[result.level]
        assert result.mean == pytest.approx(grouped.mean()[result.level], abs=1e-12)
        rest = data.loc[(data["topic"] != result.level) & data["score"].notna(), "score"]
        assert result.rest_mean == pytest.approx(rest.mean(), abs=1e-12)
        assert result.difference == pytest.approx(grouped.mean()[result.level] - rest.mean(), abs=1e-12)
        assert result.low <= result.mean <= result.high
        assert result.difference_low <= result.difference <= result.difference_high


def test_the_adjustment_is_scipys_benjamini_hochberg():
    data = frame(seed=4)
    results = slice_statistics(data["score"], categorical_levels(data["topic"]), slice_name="topic",
                               metric="score", settings=FAST)
    flagged = flag_levels(results, {"score": True}, FAST)
    expected = false_discovery_control([r.p_value for r in results], method="bh")
    assert [r.q_value for r in flagged] == pytest.approx(list(expected), abs=1e-15)


def test_the_permutation_p_value_of_a_known_case():
    """1, 2, 3 against 4, 5, 6: of the 20 ways to split six values into two threes, 2 are as far
    apart (the observed split and its mirror), so the exact two-sided p is 0.1, which scipy's
    exact permutation test also gives."""
    values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    levels = ["a", "a", "a", "b", "b", "b"]
    exact = permutation_test(([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), lambda x, y: np.mean(x) - np.mean(y),
                             permutation_type="independent", alternative="two-sided").pvalue
    assert exact == pytest.approx(0.1)
    settings = SliceSettings(min_n=3, permutations=40_000, bootstrap=FAST.bootstrap)
    results = slice_statistics(values, levels, slice_name="s", metric="m", settings=settings)
    assert [r.p_value for r in results] == pytest.approx([0.1, 0.1], abs=0.005)


def test_equal_values_give_p_one_and_separated_groups_the_smallest_p():
    settings = SliceSettings(min_n=10, permutations=999, bootstrap=FAST.bootstrap)
    same = slice_statistics([0.5] * 40, ["a"] * 20 + ["b"] * 20, slice_name="s", metric="m", settings=settings)
    assert [r.p_value for r in same] == [1.0, 1.0]
    apart = slice_statistics([0.0] * 20 + [1.0] * 20, ["a"] * 20 + ["b"] * 20, slice_name="s", metric="m",
                             settings=settings)
    assert [r.p_value for r in apart] == [1 / 1000, 1 / 1000]


def test_the_statistics_are_seeded():
    data = frame(seed=2)
    first, second = (slice_statistics(data["score"], categorical_levels(data["topic"]), slice_name="t",
                                       metric="score", settings=FAST) for _ in range(2))
    assert first == second
    other = slice_statistics(data["score"], categorical_levels(data["topic"]), slice_name="t", metric="score",
                             settings=FAST, seed=1)
    assert [r.p_value for r in other] != [r.p_value for r in first]


def test_a_planted_effect_is_flagged_and_nothing_else():
    """One topic's answers truncated: its scores drop by 0.15. That level is flagged worse; no
    other level of the topic (each is better than a rest that holds the truncated one, and
    flag_levels alone calls them better) or of a column with no effect is flagged."""
    data = frame(seed=7, n=600)
    data["noise"] = np.random.default_rng(11).choice(["x", "y", "z"], size=len(data))
    data.loc[data["topic"] == "refund", "score"] -= 0.15
    slices = {column: categorical_levels(data[column]) for column in ("topic", "noise")}
    one_pass = flag_levels([r for name, levels in slices.items()
                            for r in slice_statistics(data["score"], levels, slice_name=name, metric="score",
                                                      settings=FAST)], {"score": True}, FAST)
    assert BETTER in {r.verdict for r in one_pass}  # what slice_run corrects
    flagged = {(r.slice, r.level): r for r in slice_run({"score": data["score"]}, slices, {"score": True}, FAST)}
    refund = flagged.pop(("topic", "refund"))
    assert refund.verdict == WORSE and refund.set_aside == ()
    assert {r.verdict for r in flagged.values()} == {NO_CLEAR_DIFFERENCE}
    # the levels flagged better at first were tested again against the rest without refund
    assert {r.set_aside for (name, _), r in flagged.items() if name == "topic"} == {(), ("refund",)}


def test_a_level_better_than_the_ordinary_ones_stays_flagged_beside_a_worse_one():
    data = frame(seed=8, n=900)
    data.loc[data["topic"] == "refund", "score"] -= 0.15
    data.loc[data["topic"] == "app", "score"] += 0.08
    verdicts = {r.level: r.verdict for r in slice_run({"score": data["score"]},
                                                      {"topic": categorical_levels(data["topic"])},
                                                      {"score": True}, FAST)}
    assert verdicts.pop("refund") == WORSE and verdicts.pop("app") == BETTER
    assert set(verdicts.values()) == {NO_CLEAR_DIFFERENCE}


def test_a_lower_is_better_metric_is_flagged_better_when_lower():
    data = frame(seed=3)
    data.loc[data["topic"] == "fee", "score"] -= 0.2
    results = slice_statistics(data["score"], categorical_levels(data["topic"]), slice_name="topic",
                               metric="latency", settings=FAST)
    verdicts = {r.level: r.verdict for r in flag_levels(results, {"latency": False}, FAST)}
    assert verdicts["fee"] == BETTER


def test_no_effect_is_flagged_in_at_most_5_of_100_seeds():
    runs_with_a_flag = 0
    for seed in range(100):
        rng = np.random.default_rng(1000 + seed)
        values = rng.normal(0.6, 0.15, size=200)
        levels = categorical_levels(rng.choice(["a", "b", "c", "d"], size=200))
        settings = SliceSettings(bootstrap=Bootstrap(resamples=50, seed=seed, confidence=0.95), permutations=499)
        results = slice_statistics(values, levels, slice_name="random", metric="m", settings=settings)
        if any(r.verdict in (WORSE, BETTER) for r in flag_levels(results, {"m": True}, settings)):
            runs_with_a_flag += 1
    assert runs_with_a_flag <= 5


def test_a_small_level_is_too_few_to_tell_and_not_tested():
    values = [0.9] * 30 + [0.1] * 4
    levels = ["big"] * 30 + ["small"] * 4
    results = flag_levels(slice_statistics(values, levels, slice_name="s", metric="m", settings=FAST),
                          {"m": True}, FAST)
    small = next(r for r in results if r.level == "small")
    assert small.p_value is None and small.q_value is None and small.verdict == TOO_FEW
    assert small.n == 4 and small.mean == pytest.approx(0.1)


def test_levels_of_a_column_and_quantile_bins_show_their_edges():
    assert list(categorical_levels(["bank", None, True, 3, float("nan")])) == \
        ["bank", MISSING_LEVEL, "true", "3", MISSING_LEVEL]
    words = [3, 5, 8, 13, 21, 34, None, 55, 89, 144, 233, 377]
    assert list(quantile_levels(words, 4, unit="words")) == [
        "[3, 10.5] words"] * 3 + ["(10.5, 34] words"] * 3 + [MISSING_LEVEL] + ["(34, 116.5] words"] * 2 + [
        "(116.5, 377] words"] * 3
    assert list(quantile_levels([1, 1, 1, 1], 3)) == ["[1, 1]"] * 4  # one bin when the edges coincide
    # bins are listed by their lower edge, the missing level last
    results = slice_statistics([1.0] * 12, quantile_levels(words, 4, unit="words"), slice_name="s", metric="m",
                               settings=FAST)
    assert [r.level for r in results] == ["[3, 10.5] words", "(10.5, 34] words", "(34, 116.5] words",
                                          "(116.5, 377] words", MISSING_LEVEL]


# ---------------------------------------------------------------- which slices a run is cut by


def test_auto_slices_take_few_valued_text_and_bin_numbers_and_say_what_they_skip():
    rows = [{"domain": ["bank", "council", None][i % 3], "difficulty": i, "city": f"city {i}",
             "constant": "x", "hard": i % 2 == 0} for i in range(40)]
    types = {"domain": "string", "difficulty": "integer", "city": "string", "constant": "string", "hard": "boolean"}
    columns, notes = metadata_slices(rows, types)
    by_name = {column.name: column for column in columns}
    assert list(by_name) == ["domain", "difficulty", "hard"]
    assert set(by_name["domain"].levels) == {"bank", "council", MISSING_LEVEL}
    assert set(by_name["hard"].levels) == {"true", "false"}
    assert len(set(by_name["difficulty"].levels)) == 4 and "[0, 9.75]" in set(by_name["difficulty"].levels)
    assert notes == ["city: 40 distinct values, over 30: not sliced; to slice by it, add a column that groups its "
                     "values into at most 30",
                     "constant: one value ('x') in every example, so it is not a slice"]


def test_slices_by_named_columns_and_an_unknown_one_is_refused_listing_the_columns():
    rows = [{"domain": "bank"}, {"domain": "council"}]
    columns, _ = metadata_slices(rows, {"domain": "string"}, by=["domain"])
    assert [column.name for column in columns] == ["domain"]
    with pytest.raises(UnusableInput, match="slices.by names 'topic'.*kept as metadata are: domain"):
        metadata_slices(rows, {"domain": "string"}, by=["topic"])


def test_derived_slices():
    canonical = pd.DataFrame({
        "question": ["a b", "a b c d", "a b c d e f", "a"], "reference_answer": ["x"] * 4,
        "generated_answer": ["y y", None, "y", "y y y"], "source": [None, "rephraser", None, None]})
    scored = pd.DataFrame({"top_k_match": pd.array([True, False, None, True], dtype="boolean"),
                           "truncated_bertscore": [False, True, False, False],
                           "truncated_sentence": [False, False, False, True]})
    columns = {column.name: list(column.levels) for column in derived_slices(canonical, scored, k=5)}
    assert list(columns) == ["question length", "reference length", "answer length", "retrieval at k = 5",
                             "truncated", "source"]
    assert columns["answer length"][1] == MISSING_LEVEL and columns["reference length"] == ["[1, 1] words"] * 4
    assert columns["retrieval at k = 5"] == ["hit", "miss", MISSING_LEVEL, "hit"]
    assert columns["truncated"] == ["not truncated", "truncated", "not truncated", "truncated"]
    assert columns["source"] == [MISSING_LEVEL, "rephraser", MISSING_LEVEL, MISSING_LEVEL]
    no_retrieval = scored.assign(top_k_match=pd.array([None] * 4, dtype="boolean"))
    assert "retrieval at k = 5" not in {c.name for c in derived_slices(canonical.assign(source=None), no_retrieval, 5)}


def report_inputs(n: int = 120, seed: int = 0):
    """Report-shaped examples, with their canonical and scored tables: a `domain` column whose
    level `bank` scores far lower, a one-valued `region`, and a topics record."""
    rng = np.random.default_rng(seed)
    domains = np.array(["bank", "council", "retail", "nature"])[np.arange(n) % 4]
    f1 = rng.normal(0.7, 0.05, n) - np.where(domains == "bank", 0.3, 0.0)
    examples = [{"id": f"e{i:03d}", "question": " ".join(["what"] * (i % 5)) + f" question {i}", "metadata": {"domain": str(d), "region": "north"},
                 "retrieval": None, "judge": None,
                 "answer_similarity": {"bertscore": {"precision": v, "recall": v, "f1": v}, "sentence_cosine": v}}
                for i, (d, v) in enumerate(zip(domains, f1.tolist()))]
    canonical = pd.DataFrame({"id": [e["id"] for e in examples], "question": [e["question"] for e in examples],
                              "reference_answer": ["a reference of five words"] * n,
                              "generated_answer": [" ".join(["w"] * (1 + i % 9)) for i in range(n)],
                              "source": [None] * n})
    scored = pd.DataFrame({"top_k_match": pd.array([None] * n, dtype="boolean"),
                           "truncated_bertscore": [False] * n, "truncated_sentence": [False] * n})
    topics = {"ids": [e["id"] for e in examples], "labels": [f"topic {i % 3}" for i in range(n)], "k": 3,
              "silhouette": 0.2, "tried": {"3": 0.2}, "names": ["topic 0", "topic 1", "topic 2"], "reason": None}
    return examples, canonical, scored, topics


def test_the_report_section_flags_the_planted_level_names_its_lowest_and_gives_each_example_its_levels():
    from evalbook.metrics import metric
    from evalbook.report.slices import TOPIC_SLICE, report_slices

    examples, canonical, scored, topics = report_inputs()
    section, per_example = report_slices(
        examples, canonical, scored, metrics=[metric("bertscore_f1")],
        metadata_types={"domain": "string", "region": "string"}, by="auto", k=5, topics=topics)
    assert [c["name"] for c in section["columns"]] == ["domain", "question length", "answer length", TOPIC_SLICE]
    notes = " ".join(section["notes"])
    assert "region: one value ('north')" in notes and "reference length: every example is" in notes
    assert "truncated: every example is 'not truncated'" in notes
    flagged = [(r["slice"], r["level"], r["verdict"]) for r in section["levels"] if r["verdict"] in (WORSE, BETTER)]
    assert ("domain", "bank", WORSE) in flagged and all(slice_ == "domain" for slice_, _, _ in flagged)
    bank = next(r for r in section["levels"] if r["level"] == "bank")
    values = [e["answer_similarity"]["bertscore"]["f1"] for e in examples if e["metadata"]["domain"] == "bank"]
    assert [low["value"] for low in bank["lowest"]] == sorted(values)[:3]
    assert section["n_flagged"] == len(flagged) and section["n_tests"] == sum(
        r["p_value"] is not None for r in section["levels"])
    assert per_example[0] == {"domain": "bank", "question length": per_example[0]["question length"],
                              "answer length": "[1, 3] words", TOPIC_SLICE: "topic 0"}
    assert section["topics"]["k"] == 3 and section["settings"]["by"] == "auto"


def test_the_report_section_without_topics_and_with_a_clashing_column_name():
    from evalbook.metrics import metric
    from evalbook.report.slices import report_slices

    examples, canonical, scored, _ = report_inputs()
    for example in examples:
        example["metadata"]["answer length"] = "long" if example["id"] < "e060" else "short"
    section, per_example = report_slices(
        examples, canonical, scored, metrics=[metric("sentence_cosine")],
        metadata_types={"domain": "string", "region": "string", "answer length": "string"},
        by=["answer length"], k=5, topics=None)
    assert [c["name"] for c in section["columns"]] == ["answer length", "question length",
                                                        "answer length (derived)"]
    assert section["topics"] is None and set(per_example[0]) == {c["name"] for c in section["columns"]}
    with pytest.raises(UnusableInput, match="'product'.*domain, region, answer length"):
        report_slices(examples, canonical, scored, metrics=[metric("sentence_cosine")],
                      metadata_types={"domain": "string", "region": "string", "answer length": "string"},
                      by=["product"], k=5, topics=None)
    few = {"ids": [e["id"] for e in examples], "labels": None, "reason": "12 questions: topics need at least 30"}
    section, _ = report_slices(examples, canonical, scored, metrics=[metric("sentence_cosine")],
                               metadata_types={"domain": "string"}, by="auto", k=5, topics=few)
    assert "topic (by meaning): no topics, 12 questions: topics need at least 30" in section["notes"]


def test_retrieval_hit_or_miss_is_not_tested_on_top_k_match_which_defines_it():
    from evalbook.metrics import metric
    from evalbook.report.slices import report_slices

    examples, canonical, scored, _ = report_inputs()
    hits = [i % 3 != 0 for i in range(len(examples))]
    for example, hit in zip(examples, hits):
        example["retrieval"] = {"top_k_match": hit, "rank": 1 if hit else None}
    scored = scored.assign(top_k_match=pd.array(hits, dtype="boolean"))
    section, _ = report_slices(examples, canonical, scored, metrics=[metric("bertscore_f1"), metric("top_k_match")],
                               metadata_types={"domain": "string"}, by="auto", k=5, topics=None)
    tested = {(r["slice"], r["metric"]) for r in section["levels"]}
    assert ("retrieval at k = 5", "bertscore_f1") in tested and ("domain", "top_k_match") in tested
    assert ("retrieval at k = 5", "top_k_match") not in tested


@pytest.mark.parametrize("first", ["truncated", "not truncated"])
def test_in_a_two_level_slice_the_level_that_moved_is_flagged_not_its_mirror(first):
    """Two levels are each other's rest: both differences are equally far from 0 with the same p.
    The level furthest from the run's mean (the smaller one, which moved) keeps its flag; the
    other, different only from it, is no clear difference: nothing else is left to test it on."""
    rng = np.random.default_rng(3)
    names = np.array(["truncated"] * 20 + ["not truncated"] * 40) if first == "truncated" else \
        np.array(["not truncated"] * 40 + ["truncated"] * 20)
    scores = rng.normal(0.7, 0.05, names.size) - np.where(names == "truncated", 0.2, 0.0)
    results = {r.level: r for r in slice_run({"score": scores}, {"truncated": names}, {"score": True}, FAST)}
    assert results["truncated"].verdict == WORSE and results["truncated"].set_aside == ()
    mirror = results["not truncated"]
    assert mirror.verdict == NO_CLEAR_DIFFERENCE and mirror.set_aside == ("truncated",)
    assert mirror.p_value is not None and mirror.difference > 0


def _drawn(p_value: float) -> int:
    """The permutations behind an add-one p-value (1 + e) / (1 + N) whose N is a multiple of 1000."""
    return next(n for n in range(1000, 200_001, 1000) if abs(p_value * (1 + n) - round(p_value * (1 + n))) < 1e-6)


def test_only_a_test_whose_flag_is_undecided_draws_more_permutations():
    """Three slices over 400 examples: one with no effect (every p far above any cutoff), one with a
    level far worse (p at its floor, far under the cutoff) and one with a level whose p lies near
    the Benjamini-Hochberg cutoff. Only the last draws past the first 1,000 permutations (up to
    refined_permutations); the others keep their first round's p."""
    rng = np.random.default_rng(11)
    n = 400
    noise = rng.choice(list("abcd"), n)
    planted = np.array(["far"] * 40 + ["ordinary"] * (n - 40))
    near = np.array(["near"] * 60 + ["other"] * (n - 60))
    rng.shuffle(near)
    scores = rng.normal(0.7, 0.1, n) - np.where(planted == "far", 0.3, 0.0)
    # the near level's p is about 0.02, beside the cutoff of 0.025 (4 of 8 tests flagged)
    scores = scores - np.where(near == "near", 0.025, 0.0)
    settings = SliceSettings(permutations=1000, bootstrap=FAST.bootstrap)
    results = slice_run({"m": scores}, {"noise": noise, "planted": planted, "near": near}, {"m": True}, settings)
    by_slice: dict[str, list] = {}
    for r in results:
        if r.p_value is not None:
            by_slice.setdefault(r.slice, []).append(r)
    assert {_drawn(r.p_value) for r in by_slice["noise"]} == {1000}
    assert {_drawn(r.p_value) for r in by_slice["planted"]} == {1000}
    assert min(r.p_value for r in by_slice["planted"]) == pytest.approx(1 / 1001)
    drawn = {_drawn(r.p_value) for r in by_slice["near"]}
    assert len(drawn) == 1 and 1000 < drawn.pop() <= refined_permutations(8, settings)


def test_a_slice_s_metrics_share_their_bootstrap_draws():
    """Two metrics with the same values, cut by the same slice, get the same intervals: one draw of
    each resample serves every metric of a slice, as with paired data it should."""
    data = frame(seed=5)
    values = data["score"].to_numpy()
    results = slice_run({"a": values, "b": values.copy()}, {"topic": categorical_levels(data["topic"])},
                        {"a": True, "b": True}, FAST)
    a = {(r.level): (r.low, r.high, r.difference_low, r.difference_high) for r in results if r.metric == "a"}
    b = {(r.level): (r.low, r.high, r.difference_low, r.difference_high) for r in results if r.metric == "b"}
    assert a == b


def test_the_stratified_bootstrap_interval_matches_the_normal_approximation_for_a_large_level():
    """For 2,000 normal values in one level of two, the bootstrap interval of its mean is close to
    mean +- 1.96 sd / sqrt(n), and the other level's to its own."""
    rng = np.random.default_rng(12)
    values = np.concatenate([rng.normal(0.5, 0.2, 2000), rng.normal(0.6, 0.1, 1000)])
    levels = np.array(["x"] * 2000 + ["y"] * 1000)
    settings = SliceSettings(bootstrap=Bootstrap(resamples=4000, seed=3, confidence=0.95), permutations=200)
    for r in slice_statistics(values, levels, slice_name="s", metric="m", settings=settings):
        own = values[levels == r.level]
        half = 1.96 * own.std(ddof=1) / np.sqrt(own.size)
        assert r.low == pytest.approx(own.mean() - half, abs=0.1 * half)
        assert r.high == pytest.approx(own.mean() + half, abs=0.1 * half)

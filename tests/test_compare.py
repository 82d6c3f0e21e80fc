"""Comparing two runs: pairing, paired bootstrap deltas, the gates, regressions, the compare-v1 document."""

from __future__ import annotations

import copy
import json
import sys
import types
import uuid
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

import hostile
from evalbook.compare import ComparisonError
from evalbook.compare.document import (
    CI_METHOD,
    build_comparison,
    pair_examples,
    validate_comparison,
    write_comparison,
)
from evalbook.compare.settings import DEFAULTS
from evalbook.compare.tables import (
    comparability_notes,
    deltas_frame,
    deltas_html,
    regressions_styled,
    regressions_table,
    runs_frame,
    worse_html,
)
from evalbook.runs import RunNotFound, find_report
from evalbook.report.document import SCHEMA_VERSION
from evalbook.report.reader import ReportUnreadable, read_report
from evalbook.stats import bootstrap_mean_ci, direction_fractions, paired_deltas
from evalbook.validation import comparison_schema, validate_report
from evalbook.stats import summarize
from evalbook.metrics import metric as registered
from evalbook.score.retrieval import retrieval_scores

CREATED = datetime(2026, 12, 1, 9, 30, 0, tzinfo=timezone.utc)
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_SHA = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
BERTSCORE_HASH = f"{MINILM}_L6_no-idf_version=0.3.12(hug_trans=5.24.0)"
EMBEDDING = ("bertscore_f1", "bertscore_precision", "bertscore_recall", "sentence_cosine")
JUDGE_METRICS = ("groundedness", "relevance", "criteria")
RETRIEVAL = ("top_k_match", "mrr_at_k", "precision_at_k", "recall_at_k", "ndcg_at_k")  # paired, in the registry's order
LABEL_A = "judge-" + "a" * 16
LABEL_B = "judge-" + "b" * 16


# ---------------------------------------------------------------- a report-v1 factory

def judge_metric_record(metric: str, score: float | None, tag: str) -> dict:
    record = {"score": score, "passed": None if score is None else score >= 0.5,
              "unscored_reason": None if score is not None else "the judge found no statement"}
    if metric == "groundedness":
        record["statements"] = [{"statement": f"{tag} statement", "verdict": int(bool(score)),
                                 "justification": f"{tag} justification"}]
    elif metric == "relevance":
        record["generated_questions"] = [f"{tag} question"]
    else:
        record["criteria"] = [{"criterion": "goal", "met": bool(score), "rationale": f"{tag} rationale"}]
    return record


def judge_parts(judge: dict | None, ids: list[str], tag: str) -> tuple[dict, dict | None, dict]:
    """(judge_summary, models.judge, records by id) for `judge` = {label, scores: {id: {metric: score}}}."""
    if judge is None:
        summary = {"status": "not_run", "reason": "no judge server reachable", "label": None, "note": None,
                   "eligibility": None, "sampling": None, "metrics": {}, "totals": None}
        return summary, None, {}
    label, scores = judge["label"], judge["scores"]
    records = {}
    for example_id in ids:
        if example_id not in scores:
            records[example_id] = {"status": "not_sampled", "label": label}
            continue
        records[example_id] = {"status": "judged", "label": label,
                               **{m: judge_metric_record(m, s, f"{tag}:{example_id}")
                                  for m, s in scores[example_id].items()}}
    metrics = {}
    for metric in JUDGE_METRICS:
        stats = summarize([s.get(metric) for s in scores.values()])
        metrics[metric] = {"label": label, "mean": stats["mean"], "p10": stats["p10"], "p50": stats["p50"],
                           "p90": stats["p90"], "n_scored": stats["n"], "n_unscored": stats["n_missing"],
                           "unscored_reasons": {}, "threshold": 0.5, "threshold_is_placeholder": True,
                           "pass_rate": None, "calls": 0, "cache_hits": 0, "errors": 0,
                           "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": "unknown"}
    summary = {"status": "ran", "reason": None, "label": label, "note": None, "eligibility": {},
               "sampling": {}, "metrics": metrics, "totals": {}}
    models_judge = {"model": "judge-model", "base_url_host": "127.0.0.1:8080", "temperature": 0.0, "seed": 0,
                    "max_tokens": 600, "structured_output": "json_object_schema", "prompts": {},
                    "metric_versions": {m: 1 for m in JUDGE_METRICS}, "relevance_embedding": MINILM,
                    "label": label, "note": None, "system_fingerprint": None}
    return summary, models_judge, records


def retrieval_record(hit: bool, k: int) -> dict:
    """An example's retrieval with one relevant document, retrieved first (a hit) or not at all."""
    return asdict(retrieval_scores({"gold"}, ["gold"] if hit else ["other"], k))


def make_report(scores: dict[str, float | None], *, tag: str = "base", retrieval: dict | None = None,
                k: int = 5, judge: dict | None = None, sentence_model: str = MINILM,
                weights_sha: str = MINILM_SHA, bertscore_hash: str = BERTSCORE_HASH,
                questions: dict[str, str] | None = None) -> dict:
    """A valid report-v1 dict: every embedding metric of example `id` equals scores[id]."""
    ids = list(scores)
    retrieval = retrieval or {}
    judge_summary, models_judge, records = judge_parts(judge, ids, tag)
    examples = []
    for example_id in ids:
        value = scores[example_id]
        hit = retrieval.get(example_id)
        examples.append({
            "id": example_id,
            "question": (questions or {}).get(example_id, f"question {example_id}"),
            "reference_answer": f"reference {example_id}",
            "generated_answer": f"{tag} answer {example_id}",
            "source": None,
            "metadata": {},
            "slices": {},
            "retrieval": None if hit is None else retrieval_record(hit, k),
            "answer_similarity": {"bertscore": {"precision": value, "recall": value, "f1": value},
                                  "sentence_cosine": value},
            "flags": [],
            "judge": records.get(example_id),
        })
    models = {"generator": f"{tag}-generator", "bertscore": MINILM, "sentence_transformer": sentence_model}
    if models_judge is not None:
        models["judge"] = models_judge
    values = list(scores.values())
    hits = [retrieval.get(i) for i in ids]
    present = [h for h in hits if h is not None]
    report = {
        "schema_version": SCHEMA_VERSION,
        "run_id": str(uuid.uuid4()),
        "timestamp": "2026-11-30T12:00:00Z",
        "dataset": {"name": "synthetic", "split": "test", "n_examples": len(ids)},
        "models": models,
        "retrieval_summary": {"top_k_match_rate": (sum(present) / len(present)) if present else None,
                              **{name: (sum(retrieval_record(h, k)[name] for h in present) / len(present))
                                 if present else None for name in RETRIEVAL[1:]},
                              "k": k, "n": len(present), "n_missing": len(hits) - len(present)},
        "answer_similarity_summary": {metric: summarize(values) for metric in EMBEDDING},
        "counts": {"n_input_rows": len(ids), "n_examples": len(ids), "n_unmatched_predictions": 0,
                   "unmatched_prediction_ids": [], "n_examples_without_prediction": 0,
                   "examples_without_prediction": [], "n_empty_generated_answers": 0,
                   "n_empty_reference_answers": 0, "n_left_out_by_limit": 0, "n_with_retrieval": len(present),
                   "n_truncated_bertscore": 0, "n_truncated_sentence": 0,
                   "n_skipped_incomplete_examples": 0, "skipped_incomplete_rows": []},
        "judge_summary": judge_summary,
        "generation_summary": None,
        "slices": None,
        "scenarios": None,
        "examples": examples,
        "provenance": {"git_commit": None, "params_hash": "sha256:" + "0" * 64,
                       "params_profile": {"path": "params/default.yaml", "name": "default", "version": 1,
                                          "overrides": {}},
                       "package_versions": {}, "bertscore_hash": bertscore_hash, "bertscore_num_layers": 6,
                       "weights_sha256": {"sentence_transformer": weights_sha, "bertscore": MINILM_SHA},
                       "shared_forward_pass": True, "scoring_device": "cpu", "percentile_method": "linear"},
    }
    validate_report(report)
    return report


def ids_of(n: int) -> list[str]:
    return [f"e{i:03d}" for i in range(n)]


def compare(baseline: dict, candidate: dict, **options) -> dict:
    doc = build_comparison(baseline, candidate, baseline_location="baseline.json",
                           candidate_location="candidate.json", created_at=CREATED,
                           settings=replace(DEFAULTS, **options))
    validate_comparison(doc)
    return doc


def row(doc: dict, metric: str) -> dict:
    (found,) = [r for r in doc["metrics"] if r["metric"] == metric]
    return found


def seeded_scores(n: int, seed: int = 1) -> dict[str, float]:
    values = np.random.default_rng(seed).uniform(0.3, 0.8, n)
    return dict(zip(ids_of(n), values.tolist()))


# ---------------------------------------------------------------- the bootstrap

def test_a_constant_shift_gives_that_delta_and_a_degenerate_ci():
    baseline = seeded_scores(50)
    candidate = {i: v + 0.1 for i, v in baseline.items()}
    doc = compare(make_report(baseline), make_report(candidate, tag="cand"))
    f1 = row(doc, "bertscore_f1")
    assert f1["mean_delta"] == pytest.approx(0.1, abs=1e-12)
    # every resample of identical deltas has the same mean: the interval collapses onto it
    assert f1["ci_low"] == pytest.approx(0.1, abs=1e-12) and f1["ci_high"] == pytest.approx(0.1, abs=1e-12)
    assert f1["ci_low"] <= f1["mean_delta"] + 1e-12 and f1["ci_high"] >= f1["mean_delta"] - 1e-12
    assert f1["fraction_better"] == 1.0 and f1["n_better"] == 50
    assert f1["baseline_mean"] == pytest.approx(np.mean(list(baseline.values())), abs=1e-12)
    assert f1["candidate_mean"] == pytest.approx(np.mean(list(baseline.values())) + 0.1, abs=1e-12)


def test_a_noisy_shift_is_recovered_and_excludes_zero():
    rng = np.random.default_rng(7)
    baseline = rng.uniform(0.3, 0.8, 300)
    noise = rng.normal(0.0, 0.03, 300)
    candidate = baseline + 0.1 + (noise - noise.mean())  # centred, so the known mean shift is 0.1
    doc = compare(make_report(dict(zip(ids_of(300), baseline.tolist()))),
                  make_report(dict(zip(ids_of(300), candidate.tolist())), tag="cand"))
    f1 = row(doc, "bertscore_f1")
    low, high = f1["ci_low"], f1["ci_high"]
    assert f1["mean_delta"] == pytest.approx(0.1, abs=1e-12)
    # the standard error is about 0.03 / sqrt(300) = 0.0017: the interval is about 0.1 +- 0.0034
    assert high - low == pytest.approx(2 * 1.96 * 0.03 / np.sqrt(300), rel=0.25)
    assert f1["fraction_better"] > 0.95  # a shift of 0.1 against noise of sd 0.03
    assert low < 0.1 < high
    assert low > 0


def test_an_unchanged_run_gives_zero_delta():
    scores = seeded_scores(40)
    doc = compare(make_report(scores), make_report(scores, tag="cand"))
    f1 = row(doc, "bertscore_f1")
    assert f1["mean_delta"] == 0.0 and f1["ci_low"] == 0.0 and f1["ci_high"] == 0.0
    assert f1["fraction_unchanged"] == 1.0 and f1["n_worse"] == 0
    assert doc["regressions"]["bertscore_f1"] == []


def test_pure_noise_gives_a_ci_around_zero():
    deltas = np.random.default_rng(3).normal(0.0, 0.05, 400)
    deltas -= deltas.mean()
    low, high = bootstrap_mean_ci(deltas, seed=0, resamples=2000, confidence=0.95)
    assert low < 0 < high


def test_the_ci_narrows_as_n_grows():
    rng = np.random.default_rng(11)
    widths = []
    for n in (25, 250, 2500):
        low, high = bootstrap_mean_ci(rng.normal(0.05, 0.1, n), resamples=1000, seed=0,
                                      confidence=0.95)
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]
    # the standard error falls as 1/sqrt(n): ten times the data, about a third of the width
    assert widths[1] / widths[0] == pytest.approx(10 ** -0.5, rel=0.3)


def test_the_seed_fixes_the_ci():
    deltas = np.random.default_rng(5).normal(0.02, 0.1, 60)
    def interval(seed):
        return bootstrap_mean_ci(deltas, seed=seed, resamples=2000, confidence=0.95)

    assert interval(4) == interval(4)
    assert interval(4) != interval(5)


def test_the_ci_matches_a_direct_numpy_percentile_bootstrap():
    deltas = np.random.default_rng(9).normal(-0.01, 0.08, 37)
    rng = np.random.default_rng(123)
    means = [deltas[rng.integers(0, deltas.size, size=deltas.size)].mean() for _ in range(500)]
    expected = np.percentile(means, [5.0, 95.0])  # confidence 0.90
    assert bootstrap_mean_ci(deltas, resamples=500, seed=123, confidence=0.90) == pytest.approx(
        tuple(expected), abs=1e-15)


def test_the_ci_agrees_with_scipys_percentile_bootstrap():
    stats = pytest.importorskip("scipy.stats")
    deltas = np.random.default_rng(21).normal(0.03, 0.1, 80)
    ours = bootstrap_mean_ci(deltas, resamples=20000, seed=0, confidence=0.95)
    theirs = stats.bootstrap((deltas,), np.mean, n_resamples=20000, method="percentile",
                             confidence_level=0.95, rng=np.random.default_rng(1)).confidence_interval
    width = ours[1] - ours[0]
    assert ours[0] == pytest.approx(theirs.low, abs=0.05 * width)
    assert ours[1] == pytest.approx(theirs.high, abs=0.05 * width)


def test_two_deltas_zero_and_one_give_the_hand_computed_interval():
    # resample means of [0, 1] are 0, 1/2, 1 with probabilities 1/4, 1/2, 1/4: the 2.5% and
    # 97.5% quantiles of many resample means are 0 and 1
    assert bootstrap_mean_ci([0.0, 1.0], resamples=4000, seed=0, confidence=0.95) == (0.0, 1.0)


def test_bootstrap_edge_cases():
    assert bootstrap_mean_ci([0.25], resamples=50, seed=0, confidence=0.95) == (0.25, 0.25)
    with pytest.raises(ValueError, match="non-empty"):
        bootstrap_mean_ci([], seed=0, resamples=2000, confidence=0.95)
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_mean_ci([0.1, 0.2], confidence=1.0, resamples=2000, seed=0)
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_mean_ci([0.1, 0.2], resamples=0, seed=0, confidence=0.95)
    with pytest.raises(ValueError, match="finite"):
        bootstrap_mean_ci([0.1, float("nan")], resamples=2000, seed=0, confidence=0.95)


# ---------------------------------------------------------------- fractions and paired values

def test_direction_fractions_by_hand():
    result = direction_fractions([0.2, -0.1, 0.0, 1e-10, -1e-10, 0.05], tol=1e-9)
    assert (result["n_better"], result["n_worse"], result["n_unchanged"]) == (2, 1, 3)
    assert result["fraction_better"] == pytest.approx(2 / 6)
    assert result["fraction_worse"] == pytest.approx(1 / 6)
    assert result["fraction_unchanged"] == pytest.approx(3 / 6)
    # a delta exactly at the tolerance is unchanged
    assert direction_fractions([0.1, -0.1], tol=0.1)["n_unchanged"] == 2
    empty = direction_fractions([], tol=1e-9)
    assert empty["fraction_better"] is None and empty["n_better"] == 0


def test_paired_deltas_skip_and_count_missing_values():
    paired = paired_deltas(["a", "b", "c", "d", "e"], [0.5, None, 0.2, float("nan"), None],
                           [0.7, 0.4, None, None, 0.1])
    assert paired.ids == ["a"]
    assert paired.deltas.tolist() == pytest.approx([0.2])
    assert (paired.n_null_baseline_only, paired.n_null_candidate_only, paired.n_null_both) == (2, 1, 1)
    assert paired.n_skipped == 4


# ---------------------------------------------------------------- pairing

def test_pairing_counts_and_id_lists():
    baseline = make_report({"a": 0.5, "b": 0.6, "c": 0.7, "d": 0.1})
    candidate = make_report({"c": 0.7, "b": 0.5, "x": 0.2, "a": 0.5, "y": 0.3}, tag="cand")
    pairing = pair_examples(baseline["examples"], candidate["examples"])
    assert pairing.paired_ids == ["a", "b", "c"]
    assert pairing.only_baseline == ["d"] and pairing.only_candidate == ["x", "y"]
    doc = compare(baseline, candidate)
    assert doc["pairing"] == {"n_paired": 3, "n_only_baseline": 1, "n_only_candidate": 2,
                              "only_baseline_ids": ["d"], "only_candidate_ids": ["x", "y"],
                              "n_question_differs": 0, "question_differs_ids": []}
    assert row(doc, "bertscore_f1")["n"] == 3
    assert any("1 example(s) only in the baseline and 2 only in the candidate" in n for n in doc["notes"])


def test_duplicate_ids_are_an_error_naming_the_report_and_the_id():
    baseline = make_report({"a": 0.5, "b": 0.6})
    baseline["examples"].append(copy.deepcopy(baseline["examples"][0]))
    with pytest.raises(ComparisonError, match=r"baseline report holds duplicate example ids.*a \(2 times\)"):
        pair_examples(baseline["examples"], make_report({"a": 0.5})["examples"])


def test_check_pairable_names_the_report_file_the_ids_and_the_flag():
    from evalbook.compare.document import check_pairable
    from evalbook.report.reader import RunReport

    baseline, candidate = make_report({"a": 0.5, "b": 0.6}), make_report({"a": 0.5, "b": 0.6}, tag="cand")
    check_pairable(RunReport(baseline, "runs/base.json"), RunReport(candidate, "runs/cand.json"))
    candidate["examples"] += [copy.deepcopy(candidate["examples"][1]) for _ in range(2)]
    with pytest.raises(ComparisonError) as refused:
        check_pairable(RunReport(baseline, "runs/base.json"), RunReport(candidate, "runs/cand.json"))
    assert str(refused.value).startswith("the candidate report runs/cand.json holds duplicate example ids")
    assert "b (3 times)" in str(refused.value) and "--candidate" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_two_runs_that_share_no_example_are_refused_before_anything_is_written():
    from evalbook.compare.document import check_pairable
    from evalbook.report.reader import RunReport

    baseline, candidate = make_report({"a": 0.5, "b": 0.6}), make_report({"A ": 0.5, "x": 0.6}, tag="cand")
    with pytest.raises(ComparisonError) as refused:
        check_pairable(RunReport(baseline, "runs/base.json"), RunReport(candidate, "runs/cand.json"))
    message = str(refused.value)
    assert message.startswith("runs/base.json and runs/cand.json share no example id")
    assert "baseline: 'a', 'b'" in message and "candidate: 'A ', 'x'" in message
    assert "--baseline" in message and "--candidate" in message
    assert ComparisonError.exit_code == 2


def test_a_changed_question_under_the_same_id_is_reported():
    doc = compare(make_report({"a": 0.5, "b": 0.6}),
                  make_report({"a": 0.5, "b": 0.6}, tag="cand", questions={"b": "something else"}))
    assert doc["pairing"]["question_differs_ids"] == ["b"]
    assert any("different question" in n for n in doc["notes"])


# ---------------------------------------------------------------- the judge gate

def judged(label: str, scores: dict[str, float | None]) -> dict:
    return {"label": label, "scores": {i: {m: s for m in JUDGE_METRICS} for i, s in scores.items()}}


def test_different_judge_labels_are_refused_naming_both():
    scores = {"a": 0.5, "b": 0.6}
    doc = compare(make_report(scores, judge=judged(LABEL_A, {"a": 1.0})),
                  make_report(scores, tag="cand", judge=judged(LABEL_B, {"a": 0.0})))
    gate = doc["gates"]["judge"]
    assert gate["compared"] is False
    assert gate["reason"] == (f"judge metrics not compared: baseline judge label '{LABEL_A}' differs "
                              f"from candidate judge label '{LABEL_B}'")
    assert not {r["metric"] for r in doc["metrics"]} & set(JUDGE_METRICS)
    assert not set(doc["regressions"]) & set(JUDGE_METRICS)


def test_a_judge_that_did_not_run_is_refused_with_its_reason():
    scores = {"a": 0.5}
    doc = compare(make_report(scores, judge=judged(LABEL_A, {"a": 1.0})), make_report(scores, tag="cand"))
    gate = doc["gates"]["judge"]
    assert gate["compared"] is False and gate["candidate_status"] == "not_run"
    assert "candidate judge did not run" in gate["reason"] and "no judge server reachable" in gate["reason"]
    assert LABEL_A in gate["reason"]


def test_a_report_without_a_judge_section_is_refused():
    baseline = make_report({"a": 0.5}, judge=judged(LABEL_A, {"a": 1.0}))
    old = make_report({"a": 0.5}, tag="cand")
    old["schema_version"] = "1.0"
    del old["judge_summary"]
    for example in old["examples"]:
        del example["judge"]
    doc = compare(baseline, old)
    assert doc["gates"]["judge"]["candidate_status"] == "absent"
    assert "report schema 1.0 has no judge section" in doc["gates"]["judge"]["reason"]


def test_matching_judge_labels_compare_the_judged_pairs():
    scores = dict.fromkeys(ids_of(6), 0.5)
    baseline_judge = judged(LABEL_A, {"e000": 1.0, "e001": 1.0, "e002": 0.5, "e003": None})
    candidate_judge = judged(LABEL_A, {"e000": 0.0, "e001": 1.0, "e002": 1.0, "e003": 1.0, "e004": 1.0})
    doc = compare(make_report(scores, judge=baseline_judge),
                  make_report(scores, tag="cand", judge=candidate_judge))
    assert doc["gates"]["judge"]["compared"] is True and doc["gates"]["judge"]["reason"] is None
    assert doc["gates"]["judge"]["metrics"] == list(JUDGE_METRICS)
    grounded = row(doc, "groundedness")
    assert grounded["family"] == "judge" and grounded["compared"] is True
    # e000: 1 -> 0, e001: 1 -> 1, e002: 0.5 -> 1; e003 unscored in the baseline;
    # e004 judged only in the candidate; e005 in neither
    assert grounded["n"] == 3 and grounded["n_paired"] == 6
    skipped = (grounded["n_null_baseline_only"], grounded["n_null_candidate_only"], grounded["n_null_both"])
    assert skipped == (2, 0, 1)
    assert grounded["n_skipped"] == 3
    assert grounded["mean_delta"] == pytest.approx((-1.0 + 0.0 + 0.5) / 3)
    assert grounded["baseline_mean"] == pytest.approx(2.5 / 3)
    assert grounded["candidate_mean"] == pytest.approx(2 / 3)
    (worst,) = doc["regressions"]["groundedness"]
    assert worst["id"] == "e000" and worst["delta"] == -1.0
    assert worst["baseline_judge"]["statements"][0]["statement"] == "base:e000 statement"
    assert worst["candidate_judge"]["statements"][0]["statement"] == "cand:e000 statement"
    assert "score" not in worst["baseline_judge"]
    criteria = doc["regressions"]["criteria"][0]["candidate_judge"]["criteria"]
    assert criteria[0]["rationale"] == "cand:e000 rationale"


# ---------------------------------------------------------------- the embedding and retrieval gates

def test_different_weights_show_means_side_by_side_without_deltas():
    baseline, candidate = seeded_scores(10), {i: v - 0.2 for i, v in seeded_scores(10).items()}
    doc = compare(make_report(baseline), make_report(candidate, tag="cand", weights_sha="f" * 64))
    gate = doc["gates"]["embedding"]
    assert gate["compared"] is False
    assert gate["differing_pins"] == [{"pin": "provenance.weights_sha256.sentence_transformer",
                                       "baseline": MINILM_SHA, "candidate": "f" * 64}]
    assert "provenance.weights_sha256.sentence_transformer" in gate["reason"]
    for metric in EMBEDDING:
        side_by_side = row(doc, metric)
        assert side_by_side["compared"] is False and side_by_side["reason"] == gate["reason"]
        assert side_by_side["baseline_mean"] == pytest.approx(np.mean(list(baseline.values())))
        assert side_by_side["candidate_mean"] == pytest.approx(np.mean(list(candidate.values())))
        for key in ("mean_delta", "ci_low", "ci_high", "fraction_better", "fraction_worse",
                    "fraction_unchanged", "n_better"):
            assert side_by_side[key] is None
    assert not set(doc["regressions"]) & set(EMBEDDING)
    assert deltas_frame(doc).empty


def test_a_different_model_name_and_hash_are_named():
    doc = compare(make_report({"a": 0.5}),
                  make_report({"a": 0.5}, tag="cand", sentence_model="BAAI/bge-small-en-v1.5",
                              bertscore_hash="roberta-large_L17_no-idf_version=0.3.12(hug_trans=5.24.0)"))
    pins = [d["pin"] for d in doc["gates"]["embedding"]["differing_pins"]]
    assert pins == ["models.sentence_transformer", "provenance.bertscore_hash"]
    assert "'BAAI/bge-small-en-v1.5'" in doc["gates"]["embedding"]["reason"]


def test_a_pin_recorded_on_one_side_only_counts_as_differing():
    candidate = make_report({"a": 0.5}, tag="cand")
    candidate["provenance"]["params_profile"]["models"] = {"bertscore": {"idf": False, "source": "anywhere"}}
    doc = compare(make_report({"a": 0.5}), candidate)
    assert doc["gates"]["embedding"]["differing_pins"] == [
        {"pin": "provenance.params_profile.models.bertscore.idf", "baseline": None, "candidate": False}]
    assert "baseline not recorded, candidate False" in doc["gates"]["embedding"]["reason"]


def test_runs_scored_on_different_devices_are_compared_with_a_note():
    candidate = make_report({"a": 0.5000001}, tag="cand")
    candidate["provenance"]["scoring_device"] = "cuda:0"
    doc = compare(make_report({"a": 0.5}), candidate)
    assert doc["gates"]["embedding"]["compared"]
    assert [run["scoring_device"] for run in (doc["baseline"], doc["candidate"])] == ["cpu", "cuda:0"]
    assert any("different devices (baseline cpu, candidate cuda:0)" in note for note in doc["notes"])
    assert not any("devices" in note for note in compare(make_report({"a": 0.5}),
                                                          make_report({"a": 0.5}, tag="c"))["notes"])
    older = make_report({"a": 0.5}, tag="old")
    older["schema_version"] = "1.1"
    del older["provenance"]["scoring_device"]
    assert compare(older, candidate)["baseline"]["scoring_device"] == "cpu"


def test_runs_scored_through_different_backends_are_compared_with_a_note():
    candidate = make_report({"a": 0.5000001}, tag="cand")
    candidate["provenance"]["scoring_backend"] = "onnxruntime"
    doc = compare(make_report({"a": 0.5}), candidate)
    assert doc["gates"]["embedding"]["compared"]
    assert any("different backends (baseline torch, candidate onnxruntime)" in note
               for note in doc["notes"])
    same = make_report({"a": 0.5}, tag="c")
    same["provenance"]["scoring_backend"] = "torch"
    assert not any("backends" in note for note in compare(make_report({"a": 0.5}), same)["notes"])


def test_top_k_match_is_compared_as_zero_or_one_when_k_is_equal():
    scores = dict.fromkeys(["a", "b", "c", "d"], 0.5)
    doc = compare(make_report(scores, retrieval={"a": True, "b": True, "c": False}),
                  make_report(scores, tag="cand", retrieval={"a": True, "b": False, "c": True, "d": True}))
    top = row(doc, "top_k_match")
    assert top["compared"] is True and top["family"] == "retrieval"
    assert top["n"] == 3 and top["n_null_baseline_only"] == 1
    assert top["baseline_mean"] == pytest.approx(2 / 3) and top["candidate_mean"] == pytest.approx(2 / 3)
    assert (top["n_better"], top["n_worse"], top["n_unchanged"]) == (1, 1, 1)
    assert [r["id"] for r in doc["regressions"]["top_k_match"]] == ["b"]


def test_top_k_match_with_different_k_is_side_by_side():
    scores = dict.fromkeys(["a", "b"], 0.5)
    doc = compare(make_report(scores, retrieval={"a": True, "b": False}, k=5),
                  make_report(scores, tag="cand", retrieval={"a": True, "b": True}, k=10))
    assert doc["gates"]["retrieval"]["reason"] == ("retrieval metrics shown side by side without deltas: "
                                                   "baseline k=5 differs from candidate k=10")
    top = row(doc, "top_k_match")
    assert top["compared"] is False and top["mean_delta"] is None
    assert (top["baseline_mean"], top["candidate_mean"]) == (0.5, 1.0)


def test_top_k_match_needs_retrieval_in_both_runs():
    doc = compare(make_report({"a": 0.5}, retrieval={"a": True}), make_report({"a": 0.5}, tag="cand"))
    assert doc["gates"]["retrieval"]["reason"] == ("retrieval metrics not compared: only the baseline run "
                                                   "has retrieval results")
    assert not set(RETRIEVAL) & {r["metric"] for r in doc["metrics"]}


def test_every_retrieval_metric_at_k_is_paired_and_a_report_before_them_leaves_them_uncompared():
    scores = dict.fromkeys(["a", "b", "c"], 0.5)
    baseline = make_report(scores, retrieval={"a": True, "b": True, "c": False})
    candidate = make_report(scores, tag="cand", retrieval={"a": True, "b": False, "c": True})
    doc = compare(baseline, candidate)
    for name in RETRIEVAL:
        assert row(doc, name)["compared"] is True and row(doc, name)["family"] == "retrieval", name
    mrr = row(doc, "mrr_at_k")  # one relevant document, first or not retrieved: MRR@k is 1 or 0
    assert (mrr["baseline_mean"], mrr["candidate_mean"], mrr["mean_delta"]) == pytest.approx((2 / 3, 2 / 3, 0.0))
    assert [r["id"] for r in doc["regressions"]["mrr_at_k"]] == ["b"]
    # a baseline from schema 1.9 holds top-k match but none of the other four
    older = copy.deepcopy(baseline)
    for example in older["examples"]:
        example["retrieval"] = {key: example["retrieval"][key] for key in ("top_k_match", "rank")}
    older["schema_version"] = "1.9"
    doc = build_comparison(older, candidate, baseline_location="old.json", candidate_location="new.json",
                           created_at=datetime(2026, 12, 2, tzinfo=timezone.utc))
    assert row(doc, "top_k_match")["compared"] is True
    assert row(doc, "mrr_at_k")["compared"] is False
    assert row(doc, "mrr_at_k")["reason"] == "no paired example has a value in both runs"


# ---------------------------------------------------------------- regressions and edge cases

def test_a_degradation_lists_the_worst_regressions_first():
    baseline = dict.fromkeys(ids_of(20), 0.8)
    # half the examples lose 0.01 * (i + 1): e009 loses most, e000 least
    candidate = {i: (0.8 - 0.01 * (n + 1) if n < 10 else 0.8) for n, i in enumerate(ids_of(20))}
    doc = compare(make_report(baseline), make_report(candidate, tag="cand"), n_regressions=4)
    f1 = row(doc, "bertscore_f1")
    assert (f1["n_worse"], f1["n_better"], f1["n_unchanged"]) == (10, 0, 10)
    assert f1["fraction_better"] + f1["fraction_worse"] + f1["fraction_unchanged"] == pytest.approx(1.0)
    assert f1["mean_delta"] == pytest.approx(-0.01 * 55 / 20)
    assert f1["ci_high"] < 0
    regressions = doc["regressions"]["bertscore_f1"]
    assert [r["id"] for r in regressions] == ["e009", "e008", "e007", "e006"]
    assert [r["delta"] for r in regressions] == sorted(r["delta"] for r in regressions)
    first = regressions[0]
    assert first["delta"] == pytest.approx(-0.1)
    assert (first["baseline_answer"], first["candidate_answer"]) == ("base answer e009", "cand answer e009")
    assert first["question"] == "question e009"
    assert first["baseline_score"] == 0.8 and first["candidate_score"] == pytest.approx(0.7)
    assert first["baseline_judge"] is None
    assert list(regressions_table(doc, "bertscore_f1")["id"]) == ["e009", "e008", "e007", "e006"]
    html = regressions_styled(doc, "bertscore_f1").to_html()
    assert "cand answer e009" in html and "white-space: pre-wrap" in html, "answers are shown whole"
    assert "the 4 examples that lost most on BERTScore F1" in html and "http" not in html
    long = deltas_frame(doc)
    assert list(long.columns) == ["id", "metric", "baseline", "candidate", "delta"]
    assert len(long) == 20 * len(EMBEDDING)
    shown = deltas_html(doc)
    assert [shown.index(f"<td>{registered(name).label}</td>") for name in EMBEDDING] == \
        sorted(shown.index(f"<td>{registered(name).label}</td>") for name in EMBEDDING)


def test_a_metric_missing_in_one_run_has_n_zero_and_a_reason():
    doc = compare(make_report({"a": 0.5, "b": 0.6}), make_report({"a": None, "b": None}, tag="cand"))
    f1 = row(doc, "bertscore_f1")
    assert f1["n"] == 0 and f1["n_null_candidate_only"] == 2 and f1["compared"] is False
    assert f1["reason"] == "no paired example has a value in both runs"
    assert f1["baseline_mean"] is None and f1["mean_delta"] is None and f1["fraction_worse"] is None


def test_a_single_pair_gives_a_degenerate_ci_and_says_so():
    doc = compare(make_report({"a": 0.5, "b": None}), make_report({"a": 0.75, "b": 0.1}, tag="cand"))
    f1 = row(doc, "bertscore_f1")
    assert f1["n"] == 1 and f1["n_skipped"] == 1
    assert (f1["mean_delta"], f1["ci_low"], f1["ci_high"]) == (0.25, 0.25, 0.25)
    assert f1["note"].startswith("n=1: the confidence interval is degenerate")


def test_parameters_are_recorded_and_checked():
    doc = compare(make_report({"a": 0.5}), make_report({"a": 0.5}, tag="cand"),
                  resamples=300, seed=7, confidence=0.9, tolerance=1e-6, n_regressions=3)
    assert doc["parameters"] == {"resamples": 300, "seed": 7, "confidence": 0.9, "tolerance": 1e-6,
                                 "n_regressions": 3, "ci_method": CI_METHOD, "quantile_method": "linear"}
    assert doc["created_at"] == "2026-12-01T09:30:00Z"
    assert doc["kind"] == "compare" and doc["schema_version"] == "1.6"
    assert doc["baseline"]["location"] == "baseline.json"
    assert doc["candidate"]["models"]["generator"] == "cand-generator"
    with pytest.raises(ComparisonError, match="confidence"):
        compare(make_report({"a": 0.5}), make_report({"a": 0.5}), confidence=95)
    with pytest.raises(ComparisonError, match="UTC"):
        build_comparison(make_report({"a": 0.5}), make_report({"a": 0.5}), baseline_location="b",
                         candidate_location="c", created_at=datetime(2026, 12, 1))


def test_the_tolerance_decides_unchanged():
    doc = compare(make_report({"a": 0.5, "b": 0.5}), make_report({"a": 0.5 + 1e-7, "b": 0.4}, tag="cand"),
                  tolerance=1e-6)
    f1 = row(doc, "bertscore_f1")
    assert (f1["n_better"], f1["n_worse"], f1["n_unchanged"]) == (0, 1, 1)


# ---------------------------------------------------------------- the document: schema, NaN, write-once

def full_document() -> dict:
    scores = seeded_scores(12)
    retrieval = {i: n % 2 == 0 for n, i in enumerate(scores)}
    judge = judged(LABEL_A, {i: 0.5 for i in list(scores)[:5]})
    return compare(make_report(scores, retrieval=retrieval, judge=judge),
                   make_report({i: v - 0.05 for i, v in scores.items()}, tag="cand", retrieval=retrieval,
                               judge=judged(LABEL_A, {i: 0.0 for i in list(scores)[:5]})))


def test_a_built_document_matches_the_schema_and_holds_no_nan():
    doc = full_document()
    validate_comparison(doc)
    json.dumps(doc, allow_nan=False)
    assert [r["metric"] for r in doc["metrics"]] == [*EMBEDDING, *RETRIEVAL, *JUDGE_METRICS]
    assert comparison_schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("breakage, expected", [
    (lambda d: d.pop("pairing"), r"\(top level\): 'pairing' is a required property"),
    (lambda d: d["metrics"][0].update(mean_delta=float("nan")), "NaN or infinity"),
    (lambda d: d["metrics"][0].update(mean_delta=None),
     r"metrics/0/mean_delta: None is not of type 'number'"),
    (lambda d: d["gates"]["judge"].update(extra=1), "gates/judge: Additional properties are not allowed"),
    (lambda d: d.update(schema_version="2.0"), "schema_version: '1.6' was expected"),
])
def test_a_broken_document_fails_naming_the_violation(breakage, expected):
    doc = full_document()
    breakage(doc)
    with pytest.raises(ComparisonError, match=expected):
        validate_comparison(doc)


def test_write_comparison_is_write_once(tmp_path):
    doc = full_document()
    path = write_comparison(doc, tmp_path / "compare" / "comparison.json")
    assert json.loads(path.read_text("utf-8")) == doc
    with pytest.raises(FileExistsError, match="written once"):
        write_comparison(doc, path)
    broken = copy.deepcopy(doc)
    broken["metrics"][0]["ci_low"] = float("inf")
    with pytest.raises(ComparisonError):
        write_comparison(broken, tmp_path / "broken.json")
    assert not (tmp_path / "broken.json").exists()
    assert sorted(p.name for p in path.parent.iterdir()) == ["comparison.json"]
    replaced = copy.deepcopy(doc)
    replaced["notes"] = ["rerun in the scratch folder"]
    write_comparison(replaced, path, overwrite=True)
    assert json.loads(path.read_text("utf-8"))["notes"] == ["rerun in the scratch folder"]


# ---------------------------------------------------------------- tables for the notebook

def test_the_notebook_tables():
    doc = full_document()
    runs = runs_frame(doc)
    assert list(runs.columns) == ["baseline", "candidate"]
    assert runs.loc["generator"].tolist() == ["base-generator", "cand-generator"]
    assert runs.loc["judge"].tolist() == [LABEL_A, LABEL_A]
    table = deltas_html(doc)
    assert "<td>BERTScore F1</td><td>12</td>" in table and "<td>-0.050</td>" in table.replace(
        "<td style='color: #c62828'>", "<td>")
    assert "95% interval" in table and "top-5 match" in table  # retrieval unchanged: said in one line
    grounded = regressions_table(doc, "groundedness")
    assert grounded["baseline judge"].iloc[0] == "✓ base:e000 statement — base:e000 justification"
    assert grounded["candidate judge"].iloc[0] == "✗ cand:e000 statement — cand:e000 justification"
    assert "baseline judge" not in regressions_table(doc, "bertscore_f1").columns
    with pytest.raises(ComparisonError, match="'rank': it was not compared"):
        regressions_table(doc, "rank")
    notes = comparability_notes(doc)
    assert "<li><strong>Pairing</strong>: 12 paired by id, 0 only in the baseline, 0 only in the candidate." \
        in notes
    assert "<details><summary>Both runs" in notes and "base-generator" in notes
    assert "<summary>groundedness: the 5 examples that lost most</summary>" in worse_html(doc)


def test_the_notes_give_the_reason_of_a_refused_gate():
    doc = compare(make_report({"a": 0.5, "b": 0.5}),
                  make_report({"a": 0.5, "c": 0.5}, tag="cand", weights_sha="f" * 64))
    notes = comparability_notes(doc)
    assert ("<ul><li>only in the baseline: <code>b</code></li>"
            "<li>only in the candidate: <code>c</code></li></ul>") in notes
    assert "the embedding models differ, so their scores are shown side by side without deltas" in deltas_html(doc)
    assert runs_frame(doc).loc["judge"].tolist() == ["did not run", "did not run"]


def test_the_notes_escape_hostile_ids_notes_and_reasons():
    only_baseline = [hostile.SVG, hostile.IMG + hostile.CONTROLS]
    only_candidate = [hostile.DETAILS, f"{hostile.MARKDOWN_LINK} {hostile.MARKDOWN_EMPHASIS}"]
    paired = hostile.SCRIPT
    baseline = make_report({paired: 0.5, **{i: 0.5 for i in only_baseline}})
    candidate = make_report({paired: 0.5, **{i: 0.5 for i in only_candidate}}, tag="cand",
                            questions={paired: hostile.SCRIPT}, weights_sha="f" * 64)
    baseline["dataset"]["name"] = hostile.IMG
    notes = comparability_notes(compare(baseline, candidate))
    # the one details element is the template's, folding the runs table; a payload's has attributes
    assert [element for element in hostile.payload_elements(notes) if element != ("details", {})] == []
    _, text = hostile.read_markup(notes)
    assert hostile.CONTROLS not in text and hostile.VISIBLE_CONTROLS in text
    for shown in (hostile.SVG, hostile.IMG, hostile.DETAILS, hostile.MARKDOWN_LINK,
                  hostile.MARKDOWN_EMPHASIS):
        assert text.count(shown) >= 1, shown
    assert f"carry a different question in the two runs: {hostile.SCRIPT}" in text
    assert f"the datasets differ: baseline {hostile.IMG}/test" in text


# ---------------------------------------------------------------- locating and loading

def save(root: Path, env: str, day: str, report: dict) -> Path:
    folder = root / env / "eval-runs" / day
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{report['run_id']}.json"
    path.write_text(json.dumps(report), "utf-8")
    (folder / report["run_id"]).mkdir()
    return path


def test_find_report_by_id_and_by_path(tmp_path):
    report = make_report({"a": 0.5})
    path = save(tmp_path, "local", "2026/11/30", report)
    assert find_report(tmp_path, report["run_id"]) == str(path)
    assert find_report(tmp_path, report["run_id"], env="local") == str(path)
    assert find_report(tmp_path / "elsewhere", str(path)) == str(path)
    assert find_report(tmp_path, "s3://bucket/prefix/run.json") == "s3://bucket/prefix/run.json"
    assert read_report(str(path)).data == report
    with pytest.raises(RunNotFound, match=rf"no report for run id {report['run_id']}: "
                                          r"looked for .*/prod/eval-runs"):
        find_report(tmp_path, report["run_id"], env="prod")


def test_find_report_missing_id_and_path(tmp_path):
    with pytest.raises(RunNotFound,
                       match=r"no report for run id 1234: looked for .*\*/eval-runs/\*/\*/\*/1234\.json"):
        find_report(tmp_path, "1234")
    with pytest.raises(RunNotFound, match="report .*nope.json does not exist"):
        find_report(tmp_path, str(tmp_path / "nope.json"))
    with pytest.raises(RunNotFound, match="neither a report location ending in .json nor a run id"):
        find_report(tmp_path, "runs/1234")


def test_find_report_says_when_the_run_failed(tmp_path):
    run_id = str(uuid.uuid4())
    folder = tmp_path / "local" / "eval-runs" / "2026" / "11" / "30" / run_id
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({
        "run_id": run_id, "status": "failed",
        "stages": [{"stage": "01_load", "status": "succeeded"}, {"stage": "02_score", "status": "failed"}]}))
    with pytest.raises(RunNotFound, match=r"has a run folder but no report.*status 'failed', first "
                                              r"unfinished stage 02_score.*did not reach 04_report"):
        find_report(tmp_path, run_id)


def test_find_report_lists_several_matches(tmp_path):
    report = make_report({"a": 0.5})
    first = save(tmp_path, "local", "2026/11/30", report)
    second = save(tmp_path, "staging", "2026/12/01", report)
    with pytest.raises(RunNotFound, match="matches 2 reports") as raised:
        find_report(tmp_path, report["run_id"])
    assert str(first) in str(raised.value) and str(second) in str(raised.value)


def test_find_report_by_an_id_prefix_of_8_characters(tmp_path):
    report = make_report({"a": 0.5})
    path = save(tmp_path, "local", "2026/11/30", report)
    assert find_report(tmp_path, report["run_id"][:8]) == str(path)
    with pytest.raises(RunNotFound, match=rf"no report for run id {report['run_id'][:7]}:"):
        find_report(tmp_path, report["run_id"][:7])
    sharing = {**make_report({"a": 0.5}), "run_id": report["run_id"][:8] + "-0000-4000-8000-000000000000"}
    save(tmp_path, "local", "2026/11/30", sharing)
    with pytest.raises(RunNotFound, match=rf"prefix '{report['run_id'][:8]}' fits 2 runs"):
        find_report(tmp_path, report["run_id"][:8])


def test_read_report_checks_the_schema_major_version(tmp_path):
    report = make_report({"a": 0.5})
    report["schema_version"] = "2.0"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    with pytest.raises(ReportUnreadable, match=r"schema_version '2.0' is not a report-v1 version \(major 1\)"):
        read_report(str(path))
    comparison = tmp_path / "c.json"
    comparison.write_text(json.dumps(full_document()))
    with pytest.raises(ReportUnreadable, match="is a comparison, not a run report"):
        read_report(str(comparison))
    garbled = tmp_path / "g.json"
    garbled.write_text("{")
    with pytest.raises(ReportUnreadable, match="g.json is not JSON"):
        read_report(str(garbled))


def test_read_report_reads_s3_through_storage(monkeypatch):
    report = make_report({"a": 0.5})
    asked = []

    def read_bytes(location: str) -> bytes:
        asked.append(location)
        return json.dumps(report).encode("utf-8")

    monkeypatch.setitem(sys.modules, "evalbook.storage", types.SimpleNamespace(read_bytes=read_bytes))
    assert read_report("s3://bucket/runs/r.json").data == report
    assert asked == ["s3://bucket/runs/r.json"]


def test_compare_with_a_run_that_cannot_be_found_exits_2_with_one_line(tmp_path, capsys, write_extending_profile):
    from evalbook.__main__ import main

    profile = write_extending_profile(outputs_root=str(tmp_path / "outputs"))
    code = main(["compare", "--params", str(profile), "--baseline", "0f4a3c2e-no-such-run",
                 "--candidate", "9b1d7e6a-no-such-run"])
    error = capsys.readouterr().err
    assert code == 2, error
    assert error.startswith("evalbook: ") and "0f4a3c2e-no-such-run" in error
    assert "Traceback" not in error


def test_the_verdict_leads_with_its_sentence_and_warns_on_thin_pairing():
    from evalbook.compare.tables import pairing_warnings, verdict_html

    doc = full_document()
    f1 = next(row for row in doc["metrics"] if row["metric"] == "bertscore_f1")
    html = verdict_html(doc)
    assert f"{f1['n_worse']} of {f1['n']} examples worse on BERTScore F1" in html
    assert pairing_warnings(doc) == []
    apart = compare(make_report({"a": 0.5, "b": 0.6}), make_report({"c": 0.5}, tag="cand"))
    [warning] = pairing_warnings(apart)
    assert warning.startswith("the two runs share no example id (baseline 2, candidate 1 examples)")
    assert "<strong>Warning:</strong> the two runs share no example id" in verdict_html(apart)
    few = compare(make_report({f"e{i}": 0.5 for i in range(10)}), make_report({"e0": 0.4, "x": 0.1}, tag="cand"))
    assert pairing_warnings(few)[0].startswith("only 1 examples are paired, of the baseline's 10")


def test_a_run_compared_with_itself_is_warned_about_first_as_other_datasets_are():
    from evalbook.compare.tables import pairing_warnings, verdict_html

    report = make_report({"a": 0.5, "b": 0.6})
    itself = compare(report, copy.deepcopy(report))
    warning = f"the baseline and the candidate are the same run ({report['run_id']})"
    assert pairing_warnings(itself) == [f"{warning}: every delta is 0, so nothing is compared"]
    assert f"<strong>Warning:</strong> {warning}" in verdict_html(itself)
    assert pairing_warnings(compare(report, make_report({"a": 0.5, "b": 0.6}))) == []


def test_the_verdict_says_what_changed_between_the_runs():
    from evalbook.compare.tables import changes, verdict_html

    baseline, candidate = make_report({"a": 0.5}), make_report({"a": 0.4}, tag="cand")
    for report, overrides in ((baseline, {"limit": 5}),
                              (candidate, {"limit": 5, "predictions_path": "/home/me/p-truncated.jsonl"})):
        report["provenance"]["params_profile"] = {"name": "default", "version": 1, "overrides": overrides}
    baseline["provenance"]["inputs_sha256"] = {"input_path": "a" * 64, "predictions_path": "b" * 64}
    candidate["provenance"]["inputs_sha256"] = {"input_path": "a" * 64, "predictions_path": "c" * 64}
    doc = compare(baseline, candidate)
    assert doc["candidate"]["params_profile"]["overrides"]["predictions_path"] == "/home/me/p-truncated.jsonl"
    assert changes(doc) == ["-p predictions_path: not set → p-truncated.jsonl",
                            f"predictions_path file sha256: {'b' * 12} → {'c' * 12}",
                            "generator: base-generator → cand-generator"]
    assert "<strong>What changed:</strong> -p predictions_path: not set → p-truncated.jsonl" in verdict_html(doc)
    same = compare(make_report({"a": 0.5}), make_report({"a": 0.5}))
    assert changes(same) == [] and "are the same" in verdict_html(same)


def test_an_override_new_in_one_run_shows_the_value_the_profile_gave_the_other():
    from evalbook.compare.tables import changes

    baseline, candidate = make_report({"a": 0.5}), make_report({"a": 0.4}, tag="cand")
    baseline["provenance"]["params_profile"] = {"name": "default", "version": 1, "overrides": {}}
    candidate["provenance"]["params_profile"] = {"name": "default", "version": 1,
                                                 "overrides": {"predictions_path": "/data/p-truncated.jsonl"}}
    doc = compare(baseline, candidate)
    params = [("predictions_path", "/data/predictions.jsonl", "/data/p-truncated.jsonl")]
    assert changes(doc, params)[0] == "-p predictions_path: predictions.jsonl (the profile's) → p-truncated.jsonl"
    # the other way round, an override dropped
    back = compare(candidate, baseline)
    assert changes(back, [(k, a, b) for k, b, a in params])[0] == \
        "-p predictions_path: p-truncated.jsonl → predictions.jsonl (the profile's)"


def test_what_changed_names_another_profile_and_unexplained_parameters():
    from evalbook.compare.tables import changes

    baseline, candidate = make_report({"a": 0.5}), make_report({"a": 0.5})
    baseline["provenance"]["params_profile"] = {"name": "default", "version": 1, "overrides": {}}
    candidate["provenance"]["params_profile"] = {"name": "local-judge", "version": 2, "overrides": {}}
    assert changes(compare(baseline, candidate)) == ["profile: default v1 → local-judge v2"]
    candidate["provenance"]["params_profile"] = {"name": "default", "version": 1, "overrides": {}}
    candidate["provenance"]["params_hash"] = "sha256:" + "f" * 64
    assert changes(compare(baseline, candidate))[0].startswith("the resolved parameters differ (params hash)")


def test_what_changed_lists_the_resolved_parameters_that_differ_beyond_the_overrides(tmp_path):
    import yaml

    from evalbook.compare.context import ComparisonContext
    from evalbook.compare.tables import changes
    from evalbook.report.reader import RunReport

    reports = []
    for tag, k, seed in (("base", 5, 0), ("cand", 3, 0)):
        report = make_report({"a": 0.5}, tag=tag)
        path = save(tmp_path, "local", "2026/12/01", report)
        params = {"run_id": report["run_id"], "input_path": f"/data/{tag}/examples.jsonl", "seed": seed,
                  "retrieval": {"k": k}}
        (path.with_suffix("") / "params.yaml").write_text(yaml.safe_dump(params), "utf-8")
        reports.append(RunReport(report, str(path)))
    context = ComparisonContext(profile=None, baseline=reports[0], candidate=reports[1], output_dir=tmp_path,
                                output_path=tmp_path / "c.json", run_id="t", interactive=True, settings=DEFAULTS)
    differences = context.params_differences()
    assert differences == [("input_path", "/data/base/examples.jsonl", "/data/cand/examples.jsonl"),
                           ("retrieval.k", 5, 3)]
    lines = changes(compare(reports[0].data, reports[1].data), differences)
    assert "retrieval.k: 5 → 3" in lines and "input_path: base/examples.jsonl → cand/examples.jsonl" in lines
    remote = ComparisonContext(profile=None, baseline=RunReport(reports[0].data, "s3://b/r.json"),
                               candidate=reports[1], output_dir=tmp_path, output_path=tmp_path / "c.json",
                               run_id="t", interactive=True, settings=DEFAULTS)
    assert remote.params_differences() is None


def test_every_retrieval_metric_is_named_with_its_k_where_a_comparison_names_it():
    """The deltas, the examples that got worse, the delta figure and summary.md
    write the runs' k into a retrieval metric's name (MRR@5); runs at different k keep @k."""
    from evalbook.compare.figures import delta_figure
    from evalbook.metrics import metric as registered
    from evalbook.publish.summary import comparison_summary_md

    doc = full_document()
    table = deltas_html(doc)
    assert all(label in table for label in ("top-5 match", "MRR@5", "precision@5", "recall@5", "nDCG@5"))
    assert "bertscore_f1" not in table and registered("bertscore_f1").label in table
    for name, rows in doc["regressions"].items():
        if registered(name).kind == "retrieval" and rows:
            assert registered(name).label_at(5) in worse_html(doc), name
    titles = [ax.get_title(loc="left") for ax in delta_figure(deltas_frame(doc), k=5).axes]
    assert any(title.startswith("MRR@5") for title in titles), titles
    scores = seeded_scores(12)
    retrieval = {i: n % 2 == 0 for n, i in enumerate(scores)}
    baseline = make_report(scores, retrieval=retrieval)
    candidate = make_report({i: v - 0.05 for i, v in scores.items()}, tag="cand",
                            retrieval={i: not hit for i, hit in retrieval.items()})
    summary = comparison_summary_md(compare(baseline, candidate), baseline, candidate, [])
    assert "| MRR@5 |" in summary and "| top-5 match |" in summary

    scores = dict.fromkeys(["a", "b"], 0.5)
    apart = compare(make_report(scores, retrieval={"a": True, "b": False}, k=5),
                    make_report(scores, tag="cand", retrieval={"a": True, "b": True}, k=10))
    assert "<td>MRR@k</td>" in deltas_html(apart)

"""Tests for the calibration document (evalbook.calibrate.document, analysis, tables, figures):
every number against scipy, scikit-learn and krippendorff called directly on small reports built
by hand, the retrieval rank's orientation, the configured thresholds, the judge's score levels,
pass/fail under each label kind, matching, skipped metrics, the schema and the write-once file,
hostile text in the HTML, and what the thresholds are valid for."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from scipy import stats
from sklearn import metrics

import hostile
from evalbook.calibrate import figures, tables
from evalbook.calibrate.document import build_calibration, validate_calibration, write_calibration
from evalbook.calibrate.labels import Matched, match_labels, read_labels
from evalbook.calibrate.settings import CalibrationError, Settings
from evalbook.judge.score import threshold_reading
from evalbook.metrics import metric as registered
from evalbook.score.retrieval import retrieval_scores

TOLERANCE = 1e-9
SETTINGS = Settings(resamples=200, seed=11)
RETRIEVAL_K = 3
JUDGE_LABEL = "judge-0123456789abcdef"
JUDGE_MODEL = {"model": "judge-model", "base_url_host": "127.0.0.1", "temperature": 0.0, "seed": 1,
               "label": JUDGE_LABEL}
RATERS = ("ann", "bob")
N_EXAMPLES = 20


# ---------------------------------------------------------------- building reports and labels

def judge_record(score: float, n_items: int) -> dict:
    levels = [str(Fraction(k, n_items)) for k in range(n_items + 1)]
    return {"status": "judged", "label": JUDGE_LABEL,
            "groundedness": {"score": score, "passed": score >= 0.5, "unscored_reason": None,
                             "score_levels": levels}}


def retrieval_record(rank: int | None) -> dict:
    """An example's retrieval with one relevant document, retrieved at `rank` (None: not retrieved)."""
    retrieved = ["other"] if rank is None else [f"other-{i}" for i in range(1, rank)] + ["gold"]
    return asdict(retrieval_scores({"gold"}, retrieved, RETRIEVAL_K))


def make_example(example_id: str, *, f1: float, cosine: float, rank: int | None,
                 judged: tuple[float, int] | None = None, question: str = "What is it?",
                 answer: str = "It is.") -> dict:
    """A report-v1 example; `judged` is (groundedness score, item count), None when not judged."""
    return {
        "id": example_id, "question": question, "reference_answer": "The reference.",
        "generated_answer": answer,
        "retrieval": retrieval_record(rank),
        "answer_similarity": {"bertscore": {"precision": f1 + 0.01, "recall": f1 - 0.01, "f1": f1},
                              "sentence_cosine": cosine},
        "judge": None if judged is None else judge_record(*judged),
    }


def make_report(examples: list[dict], *, judge: bool = True, threshold: float = 0.5,
                placeholder: bool = True, run_id: str = "run-0001", dataset: str = "sample") -> dict:
    judge_summary = {"status": "not_run", "label": None, "metrics": {}}
    if judge:
        judge_summary = {"status": "ran", "label": JUDGE_LABEL, "metrics": {"groundedness": {
            "threshold": threshold, "threshold_is_placeholder": placeholder, "mean": 0.5}}}
    models = {"generator": "gen-model", "sentence_transformer": "st-model", "bertscore": "bert-model"}
    if judge:
        models["judge"] = JUDGE_MODEL
    return {
        "run_id": run_id, "timestamp": "2026-12-01T12:00:00Z", "examples": examples,
        "dataset": {"name": dataset, "split": "test"}, "models": models,
        "retrieval_summary": {"k": RETRIEVAL_K, "top_k_match_rate": 0.5},
        "judge_summary": judge_summary,
        "generation_summary": None,
        "provenance": {"weights_sha256": {"sentence_transformer": "a" * 64, "bertscore": "b" * 64},
                       "bertscore_num_layers": 17, "bertscore_hash": "bert-model_L17_no-idf"},
    }


def write_labels(folder: Path, rows: list[dict], name: str = "labels.jsonl") -> str:
    path = folder / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def calibrate(report: dict, labels_path: str, settings: Settings = SETTINGS, kind: str | None = None) -> dict:
    labels = read_labels(labels_path, kind)
    matched = match_labels(labels, [example["id"] for example in report["examples"]], report["run_id"])
    return build_calibration(report, labels, matched, report_location="outputs/run/report.json",
                             labels_sha256=None, created_at=datetime(2026, 12, 1, 13, tzinfo=timezone.utc),
                             calibration_id="calibration-1", settings=settings)


def noisy_run(n: int = N_EXAMPLES, seed: int = 3) -> tuple[dict, list[dict]]:
    """A run whose metrics follow two raters' 1-5 labels loosely: some ranks missing, the judge
    scoring most examples over 2 or 3 items. Returns (report, label rows)."""
    rng = np.random.default_rng(seed)
    quality = rng.normal(size=n)
    examples, rows = [], []
    for i, q in enumerate(quality):
        example_id = f"q{i:02d}"
        rank = None if i % 7 == 3 else int(np.clip(round(3 - q + rng.normal()), 1, 6))
        n_items = 2 + i % 2
        judged = None if i % 9 == 4 else (round(float(np.clip(0.5 + q / 3, 0, 1)) * n_items) / n_items, n_items)
        examples.append(make_example(example_id, f1=float(0.8 + 0.05 * q + 0.03 * rng.normal()),
                                     cosine=float(0.6 + 0.1 * q + 0.1 * rng.normal()), rank=rank, judged=judged))
        for rater in RATERS:
            label = int(np.clip(round(3.6 + q + rng.normal(scale=0.7)), 1, 5))
            rows.append({"id": example_id, "label": label, "rater": rater, "note": f"{rater} on {example_id}"})
    return make_report(examples), rows


def entry_of(doc: dict, name: str) -> dict:
    return next(entry for entry in doc["metrics"] if entry["metric"] == name)


def threshold_of(entry: dict, name: str) -> dict:
    return next(t for t in entry["pass_fail"]["thresholds"] if t["name"] == name)


def median_labels(rows: list[dict], ids: list[str]) -> np.ndarray:
    return np.array([np.median([row["label"] for row in rows if row["id"] == i]) for i in ids], dtype=float)


def close(actual, expected) -> bool:
    """Equal to 1e-9, an undefined (NaN) expectation matching None."""
    if expected is None or (isinstance(expected, float) and math.isnan(expected)):
        return actual is None
    return actual is not None and abs(actual - expected) <= TOLERANCE


def values_of(doc: dict, report: dict, name: str) -> tuple[np.ndarray, list[str]]:
    """The metric's raw values over the labelled examples that have one, and their ids."""
    by_id = {example["id"]: example for example in report["examples"]}
    pairs = [(i, registered(name).value(by_id[i])) for i in (e["id"] for e in doc["examples"])]
    kept = [(i, value) for i, value in pairs if value is not None]
    return np.array([value for _, value in kept], dtype=float), [i for i, _ in kept]


# ---------------------------------------------------------------- 1. every number against the libraries

@pytest.fixture
def noisy(tmp_path):
    report, rows = noisy_run()
    return report, rows, calibrate(report, write_labels(tmp_path, rows))


def test_rank_agreement_and_roc_of_every_metric_equal_scipy_and_sklearn(noisy):
    report, rows, doc = noisy
    calibrated = [entry for entry in doc["metrics"] if entry["skipped_reason"] is None]
    assert {entry["metric"] for entry in calibrated} == {
        "bertscore_f1", "bertscore_precision", "bertscore_recall", "sentence_cosine", "top_k_match",
        "mrr_at_k", "precision_at_k", "recall_at_k", "ndcg_at_k", "rank", "groundedness"}
    for entry in calibrated:
        values, ids = values_of(doc, report, entry["metric"])
        oriented = values if registered(entry["metric"]).higher_is_better else -values
        labels = median_labels(rows, ids)
        rank = entry["rank_agreement"]
        assert close(rank["spearman"]["estimate"], stats.spearmanr(oriented, labels).statistic), entry["metric"]
        assert close(rank["kendall_tau_b"]["estimate"],
                     stats.kendalltau(oriented, labels, variant="b").statistic), entry["metric"]
        passed = labels >= SETTINGS.good_label_min
        assert close(entry["pass_fail"]["roc"]["auc"], metrics.roc_auc_score(passed, oriented)), entry["metric"]
        assert (entry["n"], entry["n_missing"]) == (len(ids), len(doc["examples"]) - len(ids))


def sklearn_confusion(values: np.ndarray, passed: np.ndarray, threshold: dict) -> dict:
    predicted = values >= threshold["value"] if threshold["operator"] == ">=" else values <= threshold["value"]
    tn, fp, fn, tp = metrics.confusion_matrix(passed, predicted, labels=[False, True]).ravel()
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "precision": metrics.precision_score(passed, predicted, zero_division=np.nan),
            "recall": metrics.recall_score(passed, predicted, zero_division=np.nan),
            "f1": metrics.f1_score(passed, predicted, zero_division=np.nan),
            "accuracy": metrics.accuracy_score(passed, predicted),
            "cohen_kappa": metrics.cohen_kappa_score(passed, predicted)}


def test_confusion_at_every_threshold_equals_sklearn_in_the_metrics_own_units(noisy):
    report, rows, doc = noisy
    checked = 0
    for entry in (e for e in doc["metrics"] if e["pass_fail"]):
        values, ids = values_of(doc, report, entry["metric"])
        passed = median_labels(rows, ids) >= SETTINGS.good_label_min
        for threshold in entry["pass_fail"]["thresholds"]:
            if threshold["value"] is None:
                continue
            expected = sklearn_confusion(values, passed, threshold)
            confusion = threshold["confusion"]
            for key in ("tp", "fp", "fn", "tn"):
                assert confusion[key] == expected[key], (entry["metric"], threshold["name"], key)
            for key in ("precision", "recall", "f1", "accuracy", "cohen_kappa"):
                assert close(confusion[key], float(expected[key])), (entry["metric"], threshold["name"], key)
            assert close(confusion["base_rate"], passed.mean())
            assert close(confusion["majority_accuracy"], max(passed.mean(), 1 - passed.mean()))
            checked += 1
    assert checked >= 10


def test_youden_and_target_precision_thresholds_are_the_best_observed_values(noisy):
    report, rows, doc = noisy
    for name in ("bertscore_f1", "sentence_cosine", "rank"):
        entry = entry_of(doc, name)
        values, ids = values_of(doc, report, name)
        passed = median_labels(rows, ids) >= SETTINGS.good_label_min
        youden, precise = threshold_of(entry, "youden"), threshold_of(entry, "target_precision")
        candidates = {}
        for value in np.unique(values):
            confusion = sklearn_confusion(values, passed, {"value": value, "operator": youden["operator"]})
            candidates[value] = (confusion["tp"] / passed.sum() - confusion["fp"] / (~passed).sum(),
                                 confusion["precision"])
        best_j = max(j for j, _ in candidates.values())
        tied = [value for value, (j, _) in candidates.items() if abs(j - best_j) < 1e-12]
        # the fewest predicted passes among the ties: the highest score, the lowest rank
        assert youden["value"] == (max(tied) if youden["operator"] == ">=" else min(tied)), name
        reaching = [value for value, (_, p) in candidates.items() if p >= SETTINGS.target_precision]
        most_recall = (min(reaching) if precise["operator"] == ">=" else max(reaching)) if reaching else None
        assert precise["value"] == most_recall, name


def test_raters_alpha_equals_krippendorff_called_directly(noisy):
    _, rows, doc = noisy
    ids = [example["id"] for example in doc["examples"]]
    matrix = np.array([[next(r["label"] for r in rows if r["id"] == i and r["rater"] == rater) for i in ids]
                       for rater in RATERS], dtype=float)
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal")
    assert doc["raters"]["level"] == "ordinal"
    assert (doc["raters"]["n_raters"], doc["raters"]["n_units"]) == (2, len(ids))
    assert close(doc["raters"]["alpha"], float(expected))


def scipy_interval(statistic, *samples) -> tuple[float, float]:
    result = stats.bootstrap(samples, statistic, paired=True, vectorized=False,
                             n_resamples=SETTINGS.resamples, method="percentile",
                             confidence_level=SETTINGS.confidence, rng=np.random.default_rng(SETTINGS.seed))
    if np.isnan(result.bootstrap_distribution).any():
        return math.nan, math.nan
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _auc_or_nan(scores: np.ndarray, passed: np.ndarray) -> float:
    outcome = passed.astype(bool)
    return metrics.roc_auc_score(outcome, scores) if 0 < outcome.sum() < outcome.size else math.nan


def test_intervals_equal_scipy_bootstrap_with_the_same_seed(noisy):
    report, rows, doc = noisy
    entry = entry_of(doc, "sentence_cosine")
    values, ids = values_of(doc, report, "sentence_cosine")
    labels = median_labels(rows, ids)
    for key, statistic in (("spearman", lambda x, y: stats.spearmanr(x, y).statistic),
                           ("kendall_tau_b", lambda x, y: stats.kendalltau(x, y, variant="b").statistic)):
        low, high = scipy_interval(statistic, values, labels)
        assert close(entry["rank_agreement"][key]["low"], low), key
        assert close(entry["rank_agreement"][key]["high"], high), key
    passed = (labels >= SETTINGS.good_label_min).astype(float)
    low, high = scipy_interval(_auc_or_nan, values, passed)
    roc = entry["pass_fail"]["roc"]
    assert close(roc["low"], low) and close(roc["high"], high)
    assert roc["low"] is not None, "the interval should be defined on 20 examples of both classes"


# ---------------------------------------------------------------- 2. the rank is lower-is-better

@pytest.fixture
def ordered_by_rank(tmp_path):
    """Ranks 1-5 in the order of labels 5-1, and one example with no rank."""
    examples = [make_example(f"r{i}", f1=0.5, cosine=0.1 * i, rank=i + 1) for i in range(5)]
    examples.append(make_example("r5", f1=0.6, cosine=0.9, rank=None))
    rows = [{"id": f"r{i}", "label": 5 - i} for i in range(5)] + [{"id": "r5", "label": 2}]
    report = make_report(examples, judge=False)
    return report, calibrate(report, write_labels(tmp_path, rows))


def test_a_rank_that_orders_as_the_labels_do_has_rho_one(ordered_by_rank):
    _, doc = ordered_by_rank
    entry = entry_of(doc, "rank")
    assert entry["higher_is_better"] is False
    assert entry["rank_agreement"]["spearman"]["estimate"] == pytest.approx(1.0, abs=TOLERANCE)
    assert entry["rank_agreement"]["kendall_tau_b"]["estimate"] == pytest.approx(1.0, abs=TOLERANCE)
    assert (entry["n"], entry["n_missing"]) == (5, 1)
    assert entry["rank_agreement"]["n_missing"] == 0  # the missing rank never reached the statistics
    assert entry_of(doc, "top_k_match")["n_missing"] == 0  # a missing rank is a top-k miss, not missing


def test_rank_thresholds_are_ranks_read_at_or_below(ordered_by_rank):
    _, doc = ordered_by_rank
    entry = entry_of(doc, "rank")
    youden, configured = threshold_of(entry, "youden"), threshold_of(entry, "configured")
    # labels 5 and 4 pass: they hold ranks 1 and 2
    assert (youden["value"], youden["operator"]) == (2.0, "<=")
    assert {k: youden["confusion"][k] for k in ("tp", "fp", "fn", "tn")} == {"tp": 2, "fp": 0, "fn": 0, "tn": 3}
    assert youden["confusion"]["threshold"] == 2.0
    assert (configured["value"], configured["operator"]) == (float(RETRIEVAL_K), "<=")
    assert {k: configured["confusion"][k] for k in ("tp", "fp", "fn", "tn")} == {"tp": 2, "fp": 1, "fn": 0, "tn": 2}
    assert threshold_of(entry, "target_precision")["value"] == 2.0
    assert tables._threshold_text(youden, "rank") == "≤ 2"
    validate_calibration(doc)


def test_the_rank_roc_curve_is_sklearns_with_thresholds_in_rank_units(ordered_by_rank):
    _, doc = ordered_by_rank
    curve = entry_of(doc, "rank")["pass_fail"]["roc"]["curve"]
    ranks = np.arange(1, 6)
    fpr, tpr, thresholds = metrics.roc_curve(5 - ranks + 1 >= 4, -ranks, drop_intermediate=False)
    assert curve["fpr"] == pytest.approx(list(fpr), abs=TOLERANCE)
    assert curve["tpr"] == pytest.approx(list(tpr), abs=TOLERANCE)
    # like every other threshold of the rank, read as rank <= t
    assert curve["thresholds"] == [None, *(-thresholds[1:])]
    assert curve["thresholds"][1:] == sorted(curve["thresholds"][1:])


# ---------------------------------------------------------------- 3. the configured thresholds

def test_a_judge_metric_takes_the_judge_summarys_threshold_and_says_placeholder(tmp_path):
    report, rows = noisy_run()
    labels_path = write_labels(tmp_path, rows)
    placeholder = threshold_of(entry_of(calibrate(report, labels_path), "groundedness"), "configured")
    assert (placeholder["value"], placeholder["operator"]) == (0.5, ">=")
    assert "placeholder" in placeholder["reason"]
    configured = make_report(report["examples"], threshold=2 / 3, placeholder=False)
    chosen = threshold_of(entry_of(calibrate(configured, labels_path), "groundedness"), "configured")
    assert chosen["value"] == pytest.approx(2 / 3, abs=TOLERANCE)
    assert "placeholder" not in chosen["reason"]
    assert chosen["confusion"]["threshold"] == pytest.approx(2 / 3, abs=TOLERANCE)


def test_the_configured_judge_threshold_passes_what_the_judge_passed(noisy):
    report, _, doc = noisy
    by_id = {example["id"]: example for example in report["examples"]}
    judged = [(by_id[e["id"]]["judge"]["groundedness"]["passed"], e["passed"]) for e in doc["examples"]
              if by_id[e["id"]]["judge"] is not None]
    confusion = threshold_of(entry_of(doc, "groundedness"), "configured")["confusion"]
    assert confusion["tp"] == sum(judge and human for judge, human in judged)
    assert confusion["fp"] == sum(judge and not human for judge, human in judged)
    assert confusion["fn"] == sum(human and not judge for judge, human in judged)
    assert confusion["tn"] == sum(not judge and not human for judge, human in judged)


def test_the_rank_takes_retrieval_k_and_similarity_metrics_have_none(noisy):
    _, _, doc = noisy
    rank = threshold_of(entry_of(doc, "rank"), "configured")
    assert (rank["value"], rank["operator"]) == (float(RETRIEVAL_K), "<=")
    assert "retrieval.k" in rank["reason"]
    for name in ("bertscore_f1", "bertscore_precision", "bertscore_recall", "sentence_cosine"):
        configured = threshold_of(entry_of(doc, name), "configured")
        assert configured["value"] is None and configured["confusion"] is None, name
        assert configured["readings"] is None, name
        assert configured["reason"], name
    assert "configures no pass mark" in tables.thresholds_missing(doc)


# ---------------------------------------------------------------- 4. the judge's score levels

def test_judge_score_levels_count_the_examples_and_read_each_threshold(noisy):
    report, _, doc = noisy
    entry = entry_of(doc, "groundedness")
    judged = [e["judge"]["groundedness"] for e in report["examples"] if e["judge"] is not None]
    counts = Counter(len(record["score_levels"]) - 1 for record in judged)
    assert set(counts) == {2, 3} and sum(counts.values()) < N_EXAMPLES  # some examples are not judged
    assert entry["score_levels"] == [
        {"n_items": n, "n_examples": counts[n], "levels": [str(Fraction(k, n)) for k in range(n + 1)]}
        for n in sorted(counts)]
    for threshold in entry["pass_fail"]["thresholds"]:
        assert threshold["value"] is not None, threshold["name"]
        assert threshold["readings"] == [{"n_items": n, "reading": threshold_reading(n, threshold["value"])}
                                         for n in sorted(counts)], threshold["name"]
    shown = tables.levels_frame(doc)
    assert list(shown["items"]) == sorted(counts) and list(shown["examples"]) == [counts[n] for n in sorted(counts)]
    assert entry_of(doc, "bertscore_f1")["score_levels"] is None


def percentile_ranks(values: np.ndarray) -> np.ndarray:
    return (stats.rankdata(values, method="average") - 1) / (values.size - 1)


def test_disagreements_are_the_largest_rank_gaps_with_their_text_and_notes(noisy):
    report, rows, doc = noisy
    for name in ("sentence_cosine", "rank"):
        values, ids = values_of(doc, report, name)
        oriented = values if registered(name).higher_is_better else -values
        gaps = np.abs(percentile_ranks(oriented) - percentile_ranks(median_labels(rows, ids)))
        listed = entry_of(doc, name)["disagreements"]
        assert len(listed) == SETTINGS.n_disagreements
        assert [d["disagreement"] for d in listed] == pytest.approx(sorted(gaps, reverse=True)[:len(listed)],
                                                                    abs=TOLERANCE)
        by_id = {example["id"]: example for example in report["examples"]}
        for item in listed:
            example = by_id[item["id"]]
            assert item["score"] == registered(name).value(example)
            assert (item["question"], item["reference_answer"], item["generated_answer"]) == (
                example["question"], example["reference_answer"], example["generated_answer"])
            assert item["note"] == f"ann: ann on {item['id']} | bob: bob on {item['id']}"
        shown = tables.disagreements_table(doc, name).data
        assert list(shown["id"]) == [d["id"] for d in listed]


def test_the_label_distribution_counts_the_aggregated_labels(noisy):
    _, rows, doc = noisy
    counts = Counter(median_labels(rows, [e["id"] for e in doc["examples"]]).tolist())
    assert doc["labels"]["distribution"] == [{"label": label, "n": counts[label]} for label in sorted(counts)]
    assert doc["labels"]["n_rows"] == len(rows) and doc["labels"]["raters"] == list(RATERS)


# ---------------------------------------------------------------- 5. pass and fail

def test_ordinal_labels_pass_at_good_label_min(tmp_path):
    report, rows = noisy_run()
    doc = calibrate(report, write_labels(tmp_path, rows), Settings(resamples=50, good_label_min=3))
    labels = median_labels(rows, [e["id"] for e in doc["examples"]])
    assert [e["passed"] for e in doc["examples"]] == [bool(label >= 3) for label in labels]
    assert doc["pass_fail"]["good_label_min"] == 3.0
    n_pass = int((labels >= 3).sum())
    assert (doc["pass_fail"]["n_pass"], doc["pass_fail"]["n_fail"]) == (n_pass, N_EXAMPLES - n_pass)
    assert 0 < n_pass < N_EXAMPLES
    assert entry_of(doc, "bertscore_f1")["pass_fail"]["roc"]["n_pass"] == n_pass


def test_binary_labels_with_a_raters_tie_leave_it_out_and_count_it(tmp_path):
    report, _ = noisy_run()
    rng = np.random.default_rng(5)
    verdicts = {e["id"]: bool(e["answer_similarity"]["sentence_cosine"] + 0.1 * rng.normal() > 0.6)
                for e in report["examples"]}
    rows = [{"id": i, "label": "pass" if v else "fail", "rater": rater}
            for i, v in verdicts.items() for rater in RATERS]
    rows[1]["label"] = "fail" if rows[0]["label"] == "pass" else "pass"  # q00: the raters tie
    doc = calibrate(report, write_labels(tmp_path, rows), Settings(resamples=50))
    assert doc["labels"]["kind"] == "binary" and doc["raters"]["level"] == "nominal"
    matrix = np.array([[float(row["label"] == "pass") for row in rows if row["rater"] == rater] for rater in RATERS])
    assert close(doc["raters"]["alpha"], float(krippendorff.alpha(reliability_data=matrix,
                                                                   level_of_measurement="nominal")))
    assert doc["examples"][0]["passed"] is None and doc["pass_fail"]["n_undefined"] == 1
    entry = entry_of(doc, "sentence_cosine")
    assert entry["pass_fail"]["n_undefined"] == 1 and entry["pass_fail"]["n"] == N_EXAMPLES - 1
    defined = [(e["scores"]["sentence_cosine"], e["passed"]) for e in doc["examples"] if e["passed"] is not None]
    scores, passed = np.array([s for s, _ in defined]), np.array([p for _, p in defined])
    assert close(entry["pass_fail"]["roc"]["auc"], metrics.roc_auc_score(passed, scores))
    for threshold in entry["pass_fail"]["thresholds"]:
        if threshold["confusion"]:
            assert sum(threshold["confusion"][k] for k in ("tp", "fp", "fn", "tn")) == N_EXAMPLES - 1
    # the tie still counts in the rank agreement, at its share of passes (0.5)
    assert entry["rank_agreement"]["n"] == N_EXAMPLES
    assert doc["pass_fail"]["good_label_min"] is None
    validate_calibration(doc)


def test_continuous_labels_rank_and_pass_at_good_label_min(tmp_path):
    report, _ = noisy_run()
    scores = np.array([e["answer_similarity"]["bertscore"]["f1"] for e in report["examples"]])
    rows = [{"id": e["id"], "label": round(float(np.clip(value - 0.3, 0.05, 0.95)), 6)}
            for e, value in zip(report["examples"], scores)]
    doc = calibrate(report, write_labels(tmp_path, rows), Settings(resamples=50, good_label_min=0.5))
    assert doc["labels"]["kind"] == "continuous" and doc["raters"]["alpha"] is None
    labels = np.array([row["label"] for row in rows])
    entry = entry_of(doc, "bertscore_f1")
    assert close(entry["rank_agreement"]["spearman"]["estimate"], stats.spearmanr(scores, labels).statistic)
    assert [e["passed"] for e in doc["examples"]] == [bool(label >= 0.5) for label in labels]
    assert close(entry["pass_fail"]["roc"]["auc"], metrics.roc_auc_score(labels >= 0.5, scores))
    validate_calibration(doc)


def test_every_example_passing_has_no_roc_no_thresholds_and_says_why(tmp_path):
    report, _ = noisy_run()
    rows = [{"id": e["id"], "label": 4 + i % 2} for i, e in enumerate(report["examples"])]
    doc = calibrate(report, write_labels(tmp_path, rows), Settings(resamples=50))
    assert (doc["pass_fail"]["n_pass"], doc["pass_fail"]["n_fail"]) == (N_EXAMPLES, 0)
    for entry in (e for e in doc["metrics"] if e["pass_fail"]):
        roc = entry["pass_fail"]["roc"]
        assert roc["auc"] is None and roc["curve"] is None and roc["reason"] == "every labelled example passes"
        for name in ("youden", "target_precision"):
            threshold = threshold_of(entry, name)
            assert threshold["value"] is None and threshold["confusion"] is None, (entry["metric"], name)
            assert "one class" in threshold["reason"], (entry["metric"], name)
    assert figures.roc_curves(doc) is None
    assert "20 pass, 0 fail" in figures.no_data_reason(doc, "roc_curves")
    assert figures.metric_by_label(doc) is not None and figures.no_data_reason(doc, "metric_by_label") is None
    validate_calibration(doc)


# ---------------------------------------------------------------- 6. matching

def test_unknown_and_unlabelled_ids_are_counted_and_listed(tmp_path):
    report, rows = noisy_run()
    kept = [row for row in rows if row["id"] not in ("q18", "q19")]
    kept += [{"id": "ghost-1", "label": 3, "rater": "ann"}, {"id": "ghost-2", "label": 2, "rater": "bob"}]
    doc = calibrate(report, write_labels(tmp_path, kept))
    assert doc["matching"] == {"n_matched": N_EXAMPLES - 2, "n_unknown": 2, "n_unlabelled": 2,
                               "unknown_ids": ["ghost-1", "ghost-2"], "unlabelled_ids": ["q18", "q19"]}
    assert [e["id"] for e in doc["examples"]] == [f"q{i:02d}" for i in range(N_EXAMPLES - 2)]
    shown = tables.matching_html(doc)
    for identifier in ("ghost-1", "ghost-2", "q18", "q19"):
        assert f"<code>{identifier}</code>" in shown
    assert "2 of the run's 20 examples have no label, and 2 label ids" in tables.headline_html(doc)
    assert doc["raters"]["n_units"] == N_EXAMPLES - 2  # the raters' agreement over the matched ids only


# ---------------------------------------------------------------- 7. too few values

def test_a_metric_with_one_labelled_value_is_skipped_with_its_reason(tmp_path):
    report, rows = noisy_run()
    for i, example in enumerate(report["examples"]):
        example["judge"] = judge_record(0.5, 2) if i == 0 else None
    doc = calibrate(report, write_labels(tmp_path, rows))
    entry = entry_of(doc, "groundedness")
    assert entry["skipped_reason"] and "only 1 labelled" in entry["skipped_reason"]
    assert (entry["n"], entry["n_missing"]) == (1, N_EXAMPLES - 1)
    assert entry["rank_agreement"] is None and entry["pass_fail"] is None
    assert entry["score_levels"] is None and entry["disagreements"] == []
    assert "groundedness" not in tables.thresholds_frame(doc).get("metric", []).tolist()
    validate_calibration(doc)


def test_every_metric_skipped_is_a_calibration_error(tmp_path):
    report, rows = noisy_run()
    labels = read_labels(write_labels(tmp_path, [row for row in rows if row["id"] == "q00"]))
    # match_labels refuses a single labelled example first (test_calibrate_labels); the document
    # keeps its own guard for a Matched built otherwise
    matched = Matched(ids=("q00",), unknown_ids=(),
                      unlabelled_ids=tuple(e["id"] for e in report["examples"] if e["id"] != "q00"))
    with pytest.raises(CalibrationError, match="no metric of run run-0001 has 2 labelled values"):
        build_calibration(report, labels, matched, report_location="outputs/run/report.json",
                          labels_sha256=None, created_at=datetime(2026, 12, 1, 13, tzinfo=timezone.utc),
                          calibration_id="calibration-1", settings=SETTINGS)


# ---------------------------------------------------------------- 8. the schema and the file

def test_the_document_validates_and_a_nan_or_missing_key_does_not(noisy):
    _, _, doc = noisy
    validate_calibration(doc)
    json.dumps(doc, allow_nan=False)
    with_nan = json.loads(json.dumps(doc))
    with_nan["metrics"][0]["rank_agreement"]["spearman"]["estimate"] = math.nan
    with pytest.raises(CalibrationError):
        validate_calibration(with_nan)
    for key in ("valid_for", "matching"):
        missing = json.loads(json.dumps(doc))
        del missing[key]
        with pytest.raises(CalibrationError, match=key):
            validate_calibration(missing)


def test_created_at_must_be_utc(tmp_path):
    report, rows = noisy_run()
    labels = read_labels(write_labels(tmp_path, rows))
    matched = match_labels(labels, [example["id"] for example in report["examples"]], report["run_id"])
    with pytest.raises(CalibrationError, match="timezone-aware UTC"):
        build_calibration(report, labels, matched, report_location="r.json", labels_sha256=None,
                          created_at=datetime(2026, 12, 1, 13), calibration_id="c", settings=SETTINGS)


def test_the_agreement_table_shows_the_documents_numbers(noisy):
    _, _, doc = noisy
    shown = tables.agreement_frame(doc).set_index("metric")
    for entry in doc["metrics"]:
        row, spearman = shown.loc[entry["label"]], entry["rank_agreement"]["spearman"]
        assert row["Spearman ρ"] == f"{spearman['estimate']:.3f} [{spearman['low']:.3f}, {spearman['high']:.3f}]"
        roc = entry["pass_fail"]["roc"] if entry["pass_fail"] else None
        if roc and roc["auc"] is not None and roc["low"] is not None:
            assert row["ROC AUC"] == f"{roc['auc']:.3f} [{roc['low']:.3f}, {roc['high']:.3f}]"
        assert (row["n"], row["n missing"]) == (entry["n"], entry["n_missing"])


def test_write_calibration_is_write_once_unless_overwrite(noisy, tmp_path):
    _, _, doc = noisy
    path = write_calibration(doc, tmp_path / "calibration" / "calibration.json")
    assert json.loads(path.read_text(encoding="utf-8")) == doc
    with pytest.raises(FileExistsError):
        write_calibration(doc, path)
    changed = {**doc, "calibration_id": "calibration-2"}
    write_calibration(changed, path, overwrite=True)
    assert json.loads(path.read_text(encoding="utf-8"))["calibration_id"] == "calibration-2"
    broken = {**doc, "created_at": math.nan}
    with pytest.raises(CalibrationError):
        write_calibration(broken, tmp_path / "never.json", overwrite=True)
    assert not (tmp_path / "never.json").exists()


# ---------------------------------------------------------------- 9. hostile text

HOSTILE = f"{hostile.SCRIPT} {hostile.MARKDOWN_LINK} {hostile.MARKDOWN_EMPHASIS} nul{hostile.CONTROLS[0]}end"


def assert_only_escaped(markup: str, where: str) -> None:
    assert hostile.payload_elements(markup) == [], where
    assert "<script" not in markup and "\x00" not in markup, where
    _, text = hostile.read_markup(markup)
    assert hostile.SCRIPT in text and "nul\\x00end" in text, where
    assert hostile.MARKDOWN_LINK in text and hostile.MARKDOWN_EMPHASIS in text, where


@pytest.fixture
def hostile_doc(tmp_path):
    report, rows = noisy_run()
    for example in report["examples"][:4]:
        example["question"], example["generated_answer"] = f"Q {HOSTILE}", f"A {HOSTILE}"
    report["examples"][0]["id"] = f"id {HOSTILE}"
    hostile_report = make_report(report["examples"], run_id=f"run {HOSTILE}", dataset=f"data {HOSTILE}")
    for row in rows:
        row["note"], row[f"column {HOSTILE}"] = f"note {HOSTILE}", "not read"
        row["id"] = f"id {HOSTILE}" if row["id"] == "q00" else row["id"]
    rows.append({"id": f"unknown {HOSTILE}", "label": 3, "rater": "ann", "note": HOSTILE})
    return calibrate(hostile_report, write_labels(tmp_path, rows))


def test_hostile_text_reaches_the_pages_only_escaped(hostile_doc):
    validate_calibration(hostile_doc)
    assert_only_escaped(tables.headline_html(hostile_doc), "headline_html")
    assert_only_escaped(tables.matching_html(hostile_doc), "matching_html")
    assert hostile_doc["labels"]["ignored_columns"] == [f"column {HOSTILE}"]
    for name in ("bertscore_f1", "groundedness"):
        assert hostile_doc["metrics"] and entry_of(hostile_doc, name)["disagreements"]
        # every rater's note holds the hostile text, so every listed row does
        assert_only_escaped(tables.disagreements_table(hostile_doc, name).to_html(), f"disagreements of {name}")


def test_hostile_disagreements_show_every_field_escaped(hostile_doc):
    everything = json.loads(json.dumps(hostile_doc))
    first = everything["metrics"][0]["disagreements"][0]
    first.update(id=f"id {HOSTILE}", question=f"Q {HOSTILE}", reference_answer=f"R {HOSTILE}",
                 generated_answer=f"A {HOSTILE}", note=f"note {HOSTILE}")
    assert_only_escaped(tables.disagreements_table(everything, everything["metrics"][0]["metric"]).to_html(),
                        "disagreements_table")


def test_thresholds_missing_escapes_its_reasons(hostile_doc):
    shown = tables.thresholds_missing(hostile_doc)
    assert "configures no pass mark" in shown
    tampered = json.loads(json.dumps(hostile_doc))
    threshold_of(entry_of(tampered, "bertscore_f1"), "configured")["reason"] = HOSTILE
    assert_only_escaped(tables.thresholds_missing(tampered), "thresholds_missing")


# ---------------------------------------------------------------- 10. what the thresholds hold for

def test_valid_for_names_the_judge_label_and_the_model_pins(noisy, tmp_path):
    report, rows, doc = noisy
    assert doc["valid_for"] == {
        "dataset": "sample", "split": "test", "generator": "gen-model", "judge_label": JUDGE_LABEL,
        "judge_model": JUDGE_MODEL,
        "sentence_transformer": {"name": "st-model", "sha256": "a" * 64},
        "bertscore": {"name": "bert-model", "sha256": "b" * 64, "num_layers": 17, "hash": "bert-model_L17_no-idf"},
        "retrieval_k": RETRIEVAL_K}
    assert JUDGE_LABEL in tables.headline_html(doc)
    unjudged = make_report(report["examples"], judge=False)
    no_judge = calibrate(unjudged, write_labels(tmp_path, rows, "again.jsonl"))
    assert no_judge["valid_for"]["judge_label"] is None and no_judge["valid_for"]["judge_model"] is None
    assert "groundedness" not in [entry["metric"] for entry in no_judge["metrics"]]
    assert "no judge (it did not run)" in tables.headline_html(no_judge)


def test_each_metric_by_label_panel_names_the_label_values_on_its_axis(tmp_path):
    report, _ = noisy_run()
    rows = [{"id": e["id"], "label": 1 + i % 3 + (0.5 if i == 0 else 0)} for i, e in enumerate(report["examples"])]
    doc = calibrate(report, write_labels(tmp_path, rows), Settings(resamples=50, label_kind="continuous"))
    shown = sorted({f"{e['label']:g}" for e in doc["examples"]}, key=float)
    doc["labels"]["kind"] = "ordinal"  # drawn per label value, as for an ordinal scale
    figure = figures.metric_by_label(doc)
    drawn = [ax for ax in figure.axes if ax.get_visible()]
    assert drawn and all([tick.get_text() for tick in ax.get_xticklabels()] == shown for ax in drawn)

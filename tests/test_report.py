"""The ADR 014 report: its fields, summary values, schema checks and write-once storage."""

from __future__ import annotations

import copy
import json
import math
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pandas as pd
import pyarrow.parquet as pq
import pytest

from evalbook.load import canonical_arrow, read_canonical
from evalbook.report.document import (
    SCHEMA_VERSION,
    ReportError,
    build_report,
    validate_report,
    write_report,
)
from evalbook.validation import report_schema
from retrievalrows import with_retrieval_metrics

RUN_ID = "2d6b3516-cc7d-4cf4-ac99-07b0159bfb11"
TIMESTAMP = datetime(2026, 11, 30, 12, 34, 56, tzinfo=timezone.utc)
METRICS = ("bertscore_precision", "bertscore_recall", "bertscore_f1", "sentence_cosine")
SUMMARY_KEYS = {"mean", "p10", "p50", "p90", "n", "n_missing"}


def canonical_frame(with_missing: bool = True) -> pd.DataFrame:
    """Five examples; e5 has no prediction. Text columns are object dtype so None stays None."""
    ids = ["e1", "e2", "e3", "e4", "e5"]
    generated = ["g1", "g2", "g3", "g4", None if with_missing else "g5"]
    return pd.DataFrame({
        "id": pd.Series(ids, dtype=object),
        "row": [1, 2, 3, 4, 5],
        "question": pd.Series([f"q{i}" for i in range(1, 6)], dtype=object),
        "context": pd.Series([f"c{i}" for i in range(1, 6)], dtype=object),
        "reference_answer": pd.Series([f"r{i}" for i in range(1, 6)], dtype=object),
        "generated_answer": pd.Series(generated, dtype=object),
        "has_prediction": [True, True, True, True, not with_missing],
        "generated_empty": [False] * 5,
        "reference_empty": [False] * 5,
        "gold_id": pd.Series(["d1", "d2", "d3", None, None], dtype=object),
        "gold_ids": pd.Series([None] * 5, dtype=object),
        "retrieved_ids": pd.Series([["d1", "x"], ["x", "y", "d2"], ["x"], None, None], dtype=object),
        "retrieved_contexts": pd.Series([None] * 5, dtype=object),
        "source": pd.Series(["sysA", "sysA", "sysB", None, "sysA"], dtype=object),
        "conversation": pd.Series([None] * 5, dtype=object),
        "metadata": ['{"domain": "bank"}', '{"domain": "bank"}', '{"domain": "council"}', '{"domain": null}',
                     '{"domain": "council"}'],
        "checks": pd.Series([None] * 5, dtype=object),
    })


def scored_frame() -> pd.DataFrame:
    """Scores as score_answers returns them: nullable Float64/boolean/Int64 columns."""
    na = pd.NA
    return pd.DataFrame({
        "id": ["e1", "e2", "e3", "e4", "e5"],
        "bertscore_precision": pd.array([0.1, 0.3, 0.5, 0.7, na], dtype="Float64"),
        "bertscore_recall": pd.array([0.3, 0.5, 0.7, 0.9, na], dtype="Float64"),
        "bertscore_f1": pd.array([0.2, 0.4, 0.6, 0.8, na], dtype="Float64"),
        "sentence_cosine": pd.array([1.0, 0.0, 0.5, 0.25, na], dtype="Float64"),
        "generated_empty": pd.array([False, False, False, False, na], dtype="boolean"),
        "reference_empty": [False] * 5,
        "truncated_bertscore": pd.array([False, True, False, False, na], dtype="boolean"),
        "truncated_sentence": pd.array([False, True, True, False, na], dtype="boolean"),
        "rank": pd.array([1, 3, na, na, na], dtype="Int64"),
        "top_k_match": pd.array([True, True, False, na, na], dtype="boolean"),
    }).pipe(with_retrieval_metrics, k=5)


def load_counts() -> dict:
    return {
        "n_input_rows": 5, "n_skipped_incomplete_examples": 0, "skipped_incomplete_rows": [],
        "n_predictions": 4, "n_unmatched_predictions": 0,
        "unmatched_prediction_ids": [], "n_left_out_by_limit": 0, "n_examples": 5,
        "n_examples_without_prediction": 1, "examples_without_prediction": ["e5"],
        "n_empty_generated_answers": 0, "n_empty_reference_answers": 0, "n_with_retrieval": 3,
    }


def provenance() -> dict:
    return {
        "git_commit": None,
        "params_hash": "sha256:" + "a" * 64,
        "params_profile": {"path": "/p/default.yaml", "name": "default", "version": 1, "overrides": {}},
        "package_versions": {"torch": "2.13.0"},
        "bertscore_hash": "all-MiniLM-L6-v2_L6_no-idf_version=0.3.13(hug_trans=5.24.0)",
    }


def make_report(canonical: pd.DataFrame | None = None, scored: pd.DataFrame | None = None,
                **changes) -> dict:
    arguments = dict(
        run_id=RUN_ID, timestamp=TIMESTAMP,
        dataset={"name": "evalbook-sample", "split": "sample"},
        models={"generator": "gen-x", "bertscore": "sentence-transformers/all-MiniLM-L6-v2",
                "sentence_transformer": "sentence-transformers/all-MiniLM-L6-v2"},
        canonical=canonical_frame() if canonical is None else canonical,
        scored=scored_frame() if scored is None else scored,
        load_counts=load_counts(), k=5, provenance=provenance())
    arguments.update(changes)
    return build_report(**arguments)


@pytest.fixture
def report() -> dict:
    return make_report()


def rejection(report: dict) -> str:
    with pytest.raises(ReportError) as info:
        validate_report(report)
    return str(info.value)


# ---------------------------------------------------------------- shape

def test_report_schema_is_a_valid_json_schema():
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["additionalProperties"] is False


def json_native_leaves(value, path="report"):
    """(path, type) of each part of `value` that json.loads would not give back as it is:
    numpy scalars, tuples, keys that are not text."""
    if type(value) is dict:
        keys = [(f"{path}.{key!r}", "key " + type(key).__name__) for key in value if type(key) is not str]
        return keys + [leaf for key, child in value.items() for leaf in json_native_leaves(child, f"{path}.{key}")]
    if type(value) is list:
        return [leaf for index, child in enumerate(value) for leaf in json_native_leaves(child, f"{path}[{index}]")]
    return [] if type(value) in (str, int, float, bool, type(None)) else [(path, type(value).__name__)]


def test_built_report_validates_and_holds_only_json_types(report: dict):
    validate_report(report)
    json.dumps(report, allow_nan=False)
    # json.dumps takes a numpy float64 as a float, so only the types show that the report
    # written is the report built.
    assert json_native_leaves(report) == []


def test_every_adr_field_is_present(report: dict):
    assert report["schema_version"] == SCHEMA_VERSION
    assert report["run_id"] == RUN_ID
    assert report["timestamp"] == "2026-11-30T12:34:56Z"
    assert report["dataset"] == {"name": "evalbook-sample", "split": "sample", "n_examples": 5}
    assert report["models"] == {"generator": "gen-x",
                                "bertscore": "sentence-transformers/all-MiniLM-L6-v2",
                                "sentence_transformer": "sentence-transformers/all-MiniLM-L6-v2"}
    assert "top_k_match_rate" in report["retrieval_summary"]
    assert report["retrieval_summary"]["k"] == 5
    assert set(report["answer_similarity_summary"]) == set(METRICS)
    for metric in METRICS:
        assert set(report["answer_similarity_summary"][metric]) == SUMMARY_KEYS, metric
    assert [e["id"] for e in report["examples"]] == ["e1", "e2", "e3", "e4", "e5"]
    for example in report["examples"]:
        assert {"id", "question", "reference_answer", "generated_answer", "retrieval",
                "answer_similarity", "source", "flags"} <= set(example)
        assert set(example["answer_similarity"]) == {"bertscore", "sentence_cosine"}
        assert set(example["answer_similarity"]["bertscore"]) == {"precision", "recall", "f1"}
    assert report["examples"][0]["retrieval"] == {"top_k_match": True, "mrr_at_k": 1.0, "precision_at_k": 0.2,
                                                  "recall_at_k": 1.0, "ndcg_at_k": 1.0, "rank": 1}
    provenance_block = report["provenance"]
    for key in ("git_commit", "params_hash", "params_profile", "package_versions",
                "bertscore_hash", "percentile_method"):
        assert key in provenance_block, key
    assert provenance_block["percentile_method"] == "linear"


def test_timestamp_is_iso_utc_with_z():
    with_micro = make_report(timestamp=datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc))
    assert with_micro["timestamp"] == "2026-01-02T03:04:05.123456Z"
    parsed = datetime.fromisoformat(with_micro["timestamp"].replace("Z", "+00:00"))
    assert parsed.utcoffset() == timedelta(0)


def test_naive_timestamp_is_rejected():
    with pytest.raises(ReportError, match="timezone-aware UTC"):
        make_report(timestamp=datetime(2026, 11, 30, 12, 0, 0))


def test_non_utc_timestamp_is_rejected():
    with pytest.raises(ReportError, match="timezone-aware UTC"):
        make_report(timestamp=datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone(timedelta(hours=2))))


# ---------------------------------------------------------------- values

def test_f1_summary_by_hand(report: dict):
    f1 = report["answer_similarity_summary"]["bertscore_f1"]
    # present values [0.2, 0.4, 0.6, 0.8], linear percentiles: h = (n - 1) q / 100
    assert f1["mean"] == pytest.approx(0.5)
    assert f1["p10"] == pytest.approx(0.26)
    assert f1["p50"] == pytest.approx(0.5)
    assert f1["p90"] == pytest.approx(0.74)
    assert (f1["n"], f1["n_missing"]) == (4, 1)


def test_sentence_cosine_summary_by_hand(report: dict):
    cosine = report["answer_similarity_summary"]["sentence_cosine"]
    # present values sorted [0, 0.25, 0.5, 1.0]
    assert cosine["mean"] == pytest.approx(0.4375)
    assert cosine["p10"] == pytest.approx(0.075)
    assert cosine["p50"] == pytest.approx(0.375)
    assert cosine["p90"] == pytest.approx(0.85)
    assert (cosine["n"], cosine["n_missing"]) == (4, 1)


def test_precision_and_recall_summaries(report: dict):
    summary = report["answer_similarity_summary"]
    assert summary["bertscore_precision"]["mean"] == pytest.approx(0.4)
    assert summary["bertscore_recall"]["mean"] == pytest.approx(0.6)
    assert summary["bertscore_recall"]["p50"] == pytest.approx(0.6)


def test_missing_metrics_are_null_and_counted(report: dict, tmp_path: Path):
    path = write_report(report, tmp_path / "r.json")
    text = path.read_text("utf-8")
    assert "NaN" not in text and "Infinity" not in text
    written = json.loads(text)
    missing = written["examples"][4]
    assert missing["answer_similarity"] == {
        "bertscore": {"precision": None, "recall": None, "f1": None}, "sentence_cosine": None}
    assert missing["generated_answer"] is None
    assert missing["flags"] == ["no_prediction"]
    assert missing["retrieval"] is None
    assert written["examples"][3]["source"] is None
    for metric in METRICS:
        assert written["answer_similarity_summary"][metric]["n_missing"] == 1, metric


def test_all_missing_metric_summary_is_null():
    scored = scored_frame()
    scored["sentence_cosine"] = pd.array([pd.NA] * 5, dtype="Float64")
    summary = make_report(scored=scored)["answer_similarity_summary"]["sentence_cosine"]
    assert summary == {"mean": None, "p10": None, "p50": None, "p90": None, "n": 0, "n_missing": 5}


def test_top_k_match_rate_counts_only_rows_with_retrieval(report: dict):
    retrieval = report["retrieval_summary"]
    # e1 True, e2 True, e3 False; e4 and e5 have no retrieval results
    assert retrieval["top_k_match_rate"] == pytest.approx(2 / 3)
    assert (retrieval["n"], retrieval["n_missing"]) == (3, 2)


def test_each_retrieval_metric_s_mean_is_over_the_rows_with_retrieval(report: dict):
    retrieval = report["retrieval_summary"]
    # k = 5: e1 gold at rank 1, e2 at rank 3, e3 retrieved without it; e4 and e5 have no retrieval
    assert retrieval["mrr_at_k"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert retrieval["precision_at_k"] == pytest.approx((0.2 + 0.2 + 0) / 3)
    assert retrieval["recall_at_k"] == pytest.approx(2 / 3)
    assert retrieval["ndcg_at_k"] == pytest.approx((1 + 0.5 + 0) / 3)
    for name in ("mrr_at_k", "precision_at_k", "recall_at_k", "ndcg_at_k"):
        interval = report["intervals"]["metrics"][name]
        assert (interval["mean"], interval["n"], interval["n_missing"]) == (retrieval[name], 3, 2), name
        assert interval["low"] <= interval["mean"] <= interval["high"], name


def test_top_k_match_rate_is_null_without_any_retrieval():
    scored = scored_frame()
    scored["rank"] = pd.array([pd.NA] * 5, dtype="Int64")
    scored["top_k_match"] = pd.array([pd.NA] * 5, dtype="boolean")
    report = make_report(scored=scored.pipe(with_retrieval_metrics, k=5))
    assert report["retrieval_summary"]["top_k_match_rate"] is None
    assert report["retrieval_summary"]["mrr_at_k"] is None and report["retrieval_summary"]["ndcg_at_k"] is None
    assert all(e["retrieval"] is None for e in report["examples"])
    validate_report(report)


def test_example_retrieval_and_scores(report: dict):
    examples = {e["id"]: e for e in report["examples"]}
    assert examples["e2"]["retrieval"] == {"top_k_match": True, "mrr_at_k": pytest.approx(1 / 3),
                                           "precision_at_k": 0.2, "recall_at_k": 1.0, "ndcg_at_k": 0.5, "rank": 3}
    assert examples["e3"]["retrieval"] == {"top_k_match": False, "mrr_at_k": 0.0, "precision_at_k": 0.0,
                                           "recall_at_k": 0.0, "ndcg_at_k": 0.0, "rank": None}
    assert examples["e4"]["retrieval"] is None
    assert examples["e1"]["answer_similarity"] == {
        "bertscore": {"precision": pytest.approx(0.1), "recall": pytest.approx(0.3),
                      "f1": pytest.approx(0.2)},
        "sentence_cosine": pytest.approx(1.0)}
    for example in report["examples"]:
        for value in example["answer_similarity"]["bertscore"].values():
            assert value is None or type(value) is float
        rank = (example["retrieval"] or {}).get("rank")
        assert rank is None or type(rank) is int


def test_flags_and_truncation_counts(report: dict):
    flags = {e["id"]: e["flags"] for e in report["examples"]}
    assert flags["e1"] == []
    assert flags["e2"] == ["truncated_bertscore", "truncated_sentence"]
    assert flags["e3"] == ["truncated_sentence"]
    assert flags["e5"] == ["no_prediction"]
    assert report["counts"]["n_truncated_bertscore"] == 1
    assert report["counts"]["n_truncated_sentence"] == 2
    assert report["counts"]["examples_without_prediction"] == ["e5"]


def test_mismatched_ids_are_rejected():
    scored = scored_frame()
    scored["id"] = ["e1", "e2", "e3", "e5", "e4"]
    with pytest.raises(ReportError, match="ids do not match"):
        make_report(scored=scored)


def test_report_from_parquet_round_tripped_canonical_table(tmp_path: Path):
    """The real pipeline reads the canonical table back from Parquet; a missing prediction or
    source must still become null in the report, never NaN."""
    path = tmp_path / "canonical.parquet"
    pq.write_table(canonical_arrow(canonical_frame()), path)  # as 01_load writes it
    report = make_report(canonical=read_canonical(path))
    assert report["examples"][4]["generated_answer"] is None
    assert report["examples"][3]["source"] is None
    validate_report(report)
    assert "NaN" not in json.dumps(report)


# ---------------------------------------------------------------- validation

def test_missing_run_id_is_rejected(report: dict):
    del report["run_id"]
    assert "'run_id' is a required property" in rejection(report)


# uuid.NAMESPACE_DNS is a version-1 UUID; a fixed one, so that every xdist worker collects the same test ids
@pytest.mark.parametrize("run_id", [str(uuid.NAMESPACE_DNS), "not-a-uuid", RUN_ID.upper()])
def test_non_uuid4_run_id_is_rejected(report: dict, run_id: str):
    report["run_id"] = run_id
    message = rejection(report)
    assert "run_id" in message and "does not match" in message


@pytest.mark.parametrize("where", ["example", "summary"])
def test_nan_score_is_rejected(report: dict, where: str):
    if where == "example":
        report["examples"][0]["answer_similarity"]["sentence_cosine"] = math.nan
    else:
        report["answer_similarity_summary"]["bertscore_f1"]["mean"] = math.nan
    assert "NaN or infinity" in rejection(report)


def test_extra_top_level_key_is_rejected(report: dict):
    report["extra_key"] = 1
    message = rejection(report)
    assert "(top level)" in message and "extra_key" in message


def test_string_where_a_number_belongs_is_rejected(report: dict):
    report["answer_similarity_summary"]["bertscore_f1"]["mean"] = "0.5"
    message = rejection(report)
    assert "answer_similarity_summary/bertscore_f1/mean" in message and "is not of type" in message


def test_string_score_in_example_is_rejected(report: dict):
    report["examples"][1]["answer_similarity"]["bertscore"]["f1"] = "high"
    message = rejection(report)
    assert "examples/1/answer_similarity/bertscore/f1" in message


def test_unknown_flag_is_rejected(report: dict):
    report["examples"][0]["flags"] = ["weird"]
    assert "examples/0/flags/0" in rejection(report)


def test_wrong_schema_version_is_rejected(report: dict):
    report["schema_version"] = "2.0"
    assert "schema_version" in rejection(report)


# ---------------------------------------------------------------- each metric's range

JUDGE_LABEL = "judge-0123456789abcdef"


def judge_entry(score: float) -> dict:
    """A judge metric's entry for an example judged twice, both repeats giving `score`."""
    repeat = {"score": score, "passed": score >= 0.5, "unscored_reason": None}
    return {"score": score, "unscored_reason": None, "passed": score >= 0.5, "repeats": [repeat, dict(repeat)],
            "spread": {"n_scored": 2, "min": score, "max": score, "std": 0.0}, "flipped": False}


def judge_outcome() -> dict:
    """Every judge metric of the registry scored on e1-e4, each example judged twice."""
    from evalbook.metrics import names
    from evalbook.stats import summarize

    scores = {"e1": 0.0, "e2": 0.25, "e3": 0.75, "e4": 1.0}
    records = {i: {"status": "judged", "label": JUDGE_LABEL, **{m: judge_entry(s) for m in names("judge")}}
               for i, s in scores.items()}
    records["e5"] = {"status": "not_sampled", "label": JUDGE_LABEL}
    summary = summarize(list(scores.values()))
    metrics = {m: {"label": JUDGE_LABEL, "mean": summary["mean"], "p10": summary["p10"], "p50": summary["p50"],
                   "p90": summary["p90"], "n_scored": 4, "n_unscored": 0, "unscored_reasons": {},
                   "threshold": 0.5, "threshold_is_placeholder": True, "pass_rate": 0.5, "calls": 8,
                   "cache_hits": 0, "errors": 0, "prompt_tokens": 0, "completion_tokens": 0,
                   "cost_usd": "unknown"} for m in names("judge")}
    return {"summary": {"status": "ran", "reason": None, "label": JUDGE_LABEL, "note": None,
                        "eligibility": None, "sampling": None, "metrics": metrics, "totals": None},
            "models_judge": None, "records": records}


def scale_fields(report: dict) -> list[tuple[str, tuple]]:
    """(metric, path) of every number on a metric's scale: each example's value of a similarity
    or judge metric (with a judged example's repeats and spread), each summary's mean and
    percentiles (top-k match's rate, a check's pass rate), and each interval's mean and bounds."""
    from evalbook.metrics import METRICS

    fields = []
    for m in METRICS:
        if m.kind in ("retrieval", "check"):  # a match is a boolean, a rank an integer, a check's status a word
            continue
        for index, example in enumerate(report["examples"]):
            if m.value(example) is None:
                continue
            fields.append((m.name, ("examples", index, *m.example_path)))
            if m.kind == "judge":
                entry = ("examples", index, "judge", m.name)
                fields += [(m.name, (*entry, "repeats", 1, "score")), (m.name, (*entry, "spread", "min")),
                           (m.name, (*entry, "spread", "max"))]
        fields += [(m.name, (*m.summary_path, key)) for key in ("mean", "p10", "p50", "p90")]
    fields += [(m.name, ("retrieval_summary", m.mean_key)) for m in METRICS if m.kind == "retrieval" and m.mean_key]
    fields += [(m.name, (*m.summary_path, m.mean_key)) for m in METRICS if m.kind == "check" and m.summary(report)]
    fields += [(m.name, ("examples", 0, *m.example_path)) for m in METRICS
               if m.kind == "retrieval" and m.in_comparison and m.name != "top_k_match"]
    fields += [(name, ("intervals", "metrics", name, key)) for name in report["intervals"]["metrics"]
               for key in ("mean", "low", "high")]
    return fields


def set_field(report: dict, path: tuple, value) -> dict:
    edited = copy.deepcopy(report)
    node = edited
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return edited


@pytest.fixture
def judged_report() -> dict:
    report = make_report(judge=judge_outcome())
    validate_report(report)
    return report


def test_the_shipped_schema_holds_the_registry_s_ranges_as_generated():
    from evalbook.report.schema import with_metric_ranges

    shipped = report_schema()
    assert shipped == with_metric_ranges(shipped), "run: python -m evalbook.report.schema"


def test_a_bertscore_f1_of_7_5_is_rejected_naming_the_field(report: dict):
    report["examples"][0]["answer_similarity"]["bertscore"]["f1"] = 7.5
    message = rejection(report)
    assert "examples/0/answer_similarity/bertscore/f1" in message and "7.5" in message


def test_every_value_on_a_metric_s_scale_is_checked_against_the_registry_s_range(judged_report: dict):
    from evalbook.metrics import metric

    fields = scale_fields(judged_report)
    assert {name for name, _ in fields} == {"bertscore_f1", "bertscore_precision", "bertscore_recall",
                                           "sentence_cosine", "top_k_match", "mrr_at_k", "precision_at_k",
                                           "recall_at_k", "ndcg_at_k", "groundedness", "relevance", "criteria",
                                           "context_relevance", "context_precision", "context_recall"}
    for name, path in fields:
        low, high = metric(name).value_range
        for value in (low - 0.01, high + 0.01):
            message = rejection(set_field(judged_report, path, value))
            assert "/".join(map(str, path)) in message, (path, value, message)
        validate_report(set_field(judged_report, path, low))
        validate_report(set_field(judged_report, path, high))


def test_float_error_at_a_range_s_end_is_accepted(judged_report: dict):
    just_over = math.nextafter(1.0, 2.0)  # a cosine of a text with itself, in float64
    report = set_field(judged_report, ("examples", 0, "answer_similarity", "sentence_cosine"), just_over)
    report = set_field(report, ("examples", 1, "answer_similarity", "sentence_cosine"), -just_over)
    validate_report(set_field(report, ("examples", 0, "judge", "relevance", "score"), -just_over))


@pytest.mark.parametrize("suffix", ["-rescaled", "-custom-rescaled"])
def test_rescaled_bertscore_has_no_floor_but_keeps_its_ceiling(report: dict, suffix: str):
    report["provenance"]["bertscore_hash"] += suffix
    low = set_field(report, ("examples", 0, "answer_similarity", "bertscore", "f1"), -4.2)
    validate_report(set_field(low, ("answer_similarity_summary", "bertscore_recall", "p10"), -3.0))
    assert "examples/0/answer_similarity/bertscore/f1" in rejection(
        set_field(report, ("examples", 0, "answer_similarity", "bertscore", "f1"), 1.5))
    assert "examples/0/answer_similarity/sentence_cosine" in rejection(
        set_field(report, ("examples", 0, "answer_similarity", "sentence_cosine"), -1.5)), "not BERTScore"


# ---------------------------------------------------------------- writing

def test_invalid_report_is_not_written(report: dict, tmp_path: Path):
    del report["run_id"]
    folder = tmp_path / "runs"
    path = folder / "r.json"
    with pytest.raises(ReportError, match="run_id"):
        write_report(report, path)
    assert not path.exists()
    assert not folder.exists() or list(folder.iterdir()) == []


def test_invalid_report_does_not_replace_existing_file(report: dict, tmp_path: Path):
    path = tmp_path / "r.json"
    path.write_text("original", "utf-8")
    report["extra"] = True
    with pytest.raises(ReportError):
        write_report(report, path, overwrite=True)
    assert path.read_text("utf-8") == "original"


def test_write_report_writes_valid_json(report: dict, tmp_path: Path):
    path = tmp_path / "deep" / "folder" / f"{RUN_ID}.json"
    assert write_report(report, path) == path
    assert json.loads(path.read_text("utf-8")) == report
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name], "temporary file left behind"


def test_write_report_refuses_to_overwrite(report: dict, tmp_path: Path):
    path = tmp_path / "r.json"
    path.write_text("original", "utf-8")
    with pytest.raises(FileExistsError):
        write_report(report, path)
    assert path.read_text("utf-8") == "original"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"], "temporary file left behind"


def test_write_report_overwrite_replaces(report: dict, tmp_path: Path):
    path = tmp_path / "r.json"
    path.write_text("original", "utf-8")
    write_report(report, path, overwrite=True)
    assert json.loads(path.read_text("utf-8"))["run_id"] == RUN_ID


def test_each_mean_carries_its_seeded_bootstrap_interval(report: dict):
    from evalbook.stats import bootstrap_mean_ci

    intervals = report["intervals"]
    assert (intervals["resamples"], intervals["seed"], intervals["confidence"]) == (2000, 0, 0.95)
    assert set(intervals["metrics"]) == {"bertscore_f1", "bertscore_precision", "bertscore_recall",
                                         "sentence_cosine", "top_k_match", "mrr_at_k", "precision_at_k",
                                         "recall_at_k", "ndcg_at_k"}  # the judge did not run
    for metric, summary in report["answer_similarity_summary"].items():
        interval = intervals["metrics"][metric]
        assert (interval["mean"], interval["n"], interval["n_missing"]) == (
            summary["mean"], summary["n"], summary["n_missing"])
        if summary["n"]:
            assert interval["low"] <= interval["mean"] <= interval["high"]
    f1 = [e["answer_similarity"]["bertscore"]["f1"] for e in report["examples"]]
    expected = bootstrap_mean_ci([v for v in f1 if v is not None], resamples=2000, seed=0, confidence=0.95)
    assert (intervals["metrics"]["bertscore_f1"]["low"], intervals["metrics"]["bertscore_f1"]["high"]) == expected
    top_k = intervals["metrics"]["top_k_match"]
    assert top_k["mean"] == report["retrieval_summary"]["top_k_match_rate"]
    assert top_k["n"] == report["retrieval_summary"]["n"]

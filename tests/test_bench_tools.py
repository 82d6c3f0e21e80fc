"""The benchmarks' own tools: the stand-in judge server and RAG service, the seeded pairs, the
result tables.

The stand-in must answer real evalbook judge calls (every metric, every structured-output mode)
with replies the parsers and score math accept, and the generate stage's calls with the example
service's shape, after its delay, and count what it served so that a cached rerun's zero calls
can be asserted.
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_generate  # noqa: E402
import bench_judge  # noqa: E402
import bench_run  # noqa: E402
import bench_scoring  # noqa: E402
import bench_slices  # noqa: E402
import bench_trend  # noqa: E402
from benchlib import perturb, synthetic_texts  # noqa: E402
from standin_server import StandinServer, spawn_standin  # noqa: E402

from evalbook.replycache import ReplyCache  # noqa: E402
from evalbook.judge.stage import judge_table  # noqa: E402

DELAY = 0.05
VOCABULARY = ["river", "bridge", "harbour", "lantern", "meadow", "orchard", "quarry", "signal",
              "timber", "valley", "window", "yellow"]
METRICS = ("groundedness", "relevance", "criteria")


def fake_embed(texts):
    return np.random.default_rng(len(texts)).normal(size=(len(texts), 8))


@pytest.fixture(scope="module")
def server():
    with StandinServer(DELAY) as running:
        yield running


@pytest.fixture(scope="module")
def examples():
    return bench_judge.synthetic_examples(3, VOCABULARY)


def config_for(base_url: str, mode: str = "json_object_schema") -> dict:
    config = copy.deepcopy(bench_judge.judge_config(base_url, concurrency=8))
    config["structured_output"] = mode
    return config


@pytest.mark.parametrize("mode", ["json_schema", "json_object_schema", "json_instructions"])
def test_the_stand_in_answers_every_metric_with_replies_evalbook_scores(server, examples, tmp_path, mode):
    before = server.stats()
    cache = ReplyCache(tmp_path / "cache.sqlite")
    try:
        outcome = judge_table(examples, config_for(server.base_url, mode), cache, fake_embed, seed=0)
    finally:
        cache.close()
    after = server.stats()
    for example_id in examples["id"]:
        record = outcome.records[example_id]
        assert record["status"] == "judged"
        for metric in METRICS:
            assert record[metric]["unscored_reason"] is None, (metric, record[metric])
            assert record[metric]["score"] is not None
    assert outcome.summary["totals"]["calls"] == 9 and outcome.summary["totals"]["errors"] == 0
    for metric in METRICS:
        assert after.get(metric, 0) - before.get(metric, 0) == 3


def test_groundedness_statements_come_from_the_answer(server, examples, tmp_path):
    cache = ReplyCache(tmp_path / "cache.sqlite")
    try:
        outcome = judge_table(examples.head(1), config_for(server.base_url), cache, fake_embed, seed=0)
    finally:
        cache.close()
    statements = [s["statement"] for s in outcome.records[examples["id"][0]]["groundedness"]["statements"]]
    answer = examples["generated_answer"][0]
    assert statements and all(statement in answer for statement in statements)


def test_the_stand_in_replies_after_its_delay():
    with StandinServer(0.2) as slow, httpx.Client(trust_env=False, timeout=10) as client:
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}],
                "response_format": {"type": "json_object", "schema": {
                    "properties": {"questions": {"minItems": 2}}}}}
        client.post(slow.base_url + "/chat/completions", json=body)  # opens the connection
        elapsed = []
        for _ in range(3):
            started = time.perf_counter()
            response = client.post(slow.base_url + "/chat/completions", json=body)
            elapsed.append(time.perf_counter() - started)
            assert response.status_code == 200
    assert min(elapsed) >= 0.2
    assert sorted(elapsed)[1] < 0.2 + 0.3  # the median: one slow call on a busy machine is not the server's


def test_a_warm_rerun_makes_no_call_and_the_stand_in_counts_it(server, examples, tmp_path):
    config = config_for(server.base_url)
    cold = bench_judge.judge_once(examples, config, tmp_path / "cache.sqlite", fake_embed, server)
    warm = bench_judge.judge_once(examples, config, tmp_path / "cache.sqlite", fake_embed, server)
    assert (cold["calls"], cold["server_requests"], cold["cache_hits"]) == (9, 9, 0)
    assert (warm["calls"], warm["server_requests"], warm["cache_hits"]) == (0, 0, 9)
    assert bench_judge.problems(cold) == [] and bench_judge.problems(warm) == []
    checks = bench_judge.targets([bench_judge.with_ideal(cold, 8, DELAY)], {**warm, "concurrency": 8})
    assert checks["warm_rerun_zero_calls"]["met"] is True


def test_the_stand_in_refuses_a_request_without_a_schema(server):
    before = server.stats().get("unknown_shape", 0)
    response = httpx.post(server.base_url + "/chat/completions", trust_env=False,
                          json={"model": "m", "messages": [{"role": "user", "content": "hello"}]})
    assert response.status_code == 400
    assert "no JSON Schema" in response.json()["error"]["message"]
    assert server.stats()["unknown_shape"] == before + 1


def test_the_spawned_stand_in_serves_and_stops():
    with spawn_standin(0.01) as spawned:
        models = httpx.get(spawned.base_url + "/models", trust_env=False).json()
        assert models["data"][0]["id"] == "standin"
        assert spawned.stats()["delay_seconds"] == pytest.approx(0.01)
    assert spawned.process.poll() is not None


# ---------------------------------------------------------------- result tables

def test_judge_throughput_is_compared_with_concurrency_over_delay():
    run = {"requests": 1500, "calls_per_s": 32.0}
    assert bench_judge.with_ideal(run, 8, 0.2)["ideal_calls_per_s"] == pytest.approx(40.0)
    assert bench_judge.with_ideal(run, 8, 0.2)["fraction_of_ideal"] == pytest.approx(0.8)
    at_target = bench_judge.targets([bench_judge.with_ideal(run, 8, 0.2)], None)
    assert at_target["concurrency_8_fraction_of_ideal"]["met"] is True
    assert at_target["warm_rerun_zero_calls"]["met"] is None
    slow = bench_judge.targets([bench_judge.with_ideal({**run, "calls_per_s": 31.9}, 8, 0.2)],
                               {"calls": 0, "server_requests": 1})
    assert slow["concurrency_8_fraction_of_ideal"]["met"] is False
    assert slow["warm_rerun_zero_calls"]["met"] is False


def test_scoring_ratios_and_targets_by_hand():
    summary = bench_scoring.summarize(100, {"floor": 10.0, "peer": 30.0, "cold": 12.0, "warm": 2.0,
                                            "onnx_floor": 5.0, "onnx_cold": 5.5, "onnx_warm": 0.5,
                                            "ray": None})
    assert summary["floor_pairs_per_s"] == pytest.approx(10.0)
    assert summary["peer_pairs_per_s"] == pytest.approx(100 / 30)
    assert summary["ray_pairs_per_s"] is None
    assert summary["ratios"]["cold_vs_peer_speedup"] == pytest.approx(2.5)
    assert summary["ratios"]["cold_vs_floor_slowdown"] == pytest.approx(1.2)
    assert summary["ratios"]["warm_vs_cold_speedup"] == pytest.approx(6.0)
    assert summary["ratios"]["onnx_cold_vs_floor_speedup"] == pytest.approx(10 / 5.5)
    assert summary["ratios"]["onnx_cold_vs_onnx_floor_slowdown"] == pytest.approx(1.1)
    assert summary["ratios"]["onnx_warm_vs_onnx_cold_speedup"] == pytest.approx(11.0)
    assert all(target["met"] is True for target in summary["targets"].values())
    slower = bench_scoring.summarize(100, {"floor": 10.0, "peer": 30.0, "cold": 17.0, "warm": None})
    assert slower["targets"]["cold_vs_peer_speedup"]["met"] is False  # 30 / 17 = 1.76
    assert slower["targets"]["cold_vs_floor_slowdown"]["met"] is False  # 1.7
    assert slower["targets"]["warm_vs_cold_speedup"]["met"] is None
    assert slower["targets"]["onnx_cold_vs_onnx_floor_slowdown"]["met"] is None
    assert bench_scoring.summarize(100, {"floor": 10.0, "onnx_floor": 5.0, "onnx_cold": 6.5})[
        "targets"]["onnx_cold_vs_floor_speedup"]["met"] is False  # 10 / 6.5 = 1.54


def test_the_printed_table_names_what_did_not_run():
    results = {"floor": {"status": "ok", "seconds": 10.0, "peak_rss_mb": 700.0},
               "peer": {"status": "ok", "seconds": 30.0, "peak_rss_mb": 900.0,
                        "bert_score_seconds": 14.0, "sentence_transformer_seconds": 16.0},
               "cold": {"status": "ok", "seconds": 12.0, "peak_rss_mb": 800.0},
               "warm": {"status": bench_scoring.NOT_AVAILABLE, "reason": "no embedding cache"},
               "ray": {"status": "not run", "reason": "left out by --methods"}}
    table = bench_scoring.format_table(100, results)
    assert "evalbook warm (10% answers changed)" in table and "not available yet (no embedding cache)" in table
    assert "cold >= 1.8x faster than peer: 2.50x, met" in table
    assert "warm >= 4x faster than cold: not measured (warm did not run)" in table
    assert "onnx cold >= 1.6x faster than the torch floor: not measured (onnx_cold did not run)" in table


def test_pairs_are_references_and_their_seeded_perturbations():
    answers, references = bench_scoring.build_pairs(50)
    assert (answers, references) == bench_scoring.build_pairs(50)
    assert len(set(references)) == 50
    assert all(a != r and set(a.split()) <= set(r.split()) for a, r in zip(answers, references))
    changed, positions = bench_scoring.changed_answers(answers, references)
    assert len(positions) == 5
    assert [i for i, (a, b) in enumerate(zip(answers, changed)) if a != b] == positions


@pytest.mark.skipif(not bench_scoring.SHARED.exists(),
                    reason=f"the sample alone has too few 200-word windows; no {bench_scoring.SHARED}")
def test_longer_passages_are_windows_of_the_asked_length():
    _, references = bench_scoring.build_pairs(20, words=200)
    assert len(set(references)) == 20
    assert {len(reference.split()) for reference in references} == {200}
    assert {len(r.split()) for r in bench_scoring.build_pairs(20)[1]} == {bench_scoring.WINDOW_WORDS}


def test_perturb_and_synthetic_texts_are_seeded():
    text = "one two three four five six seven eight nine ten"
    assert perturb(text, (0, 1)) == perturb(text, (0, 1)) != text
    assert len(perturb(text, (0, 1)).split()) == 9
    texts = synthetic_texts(20, VOCABULARY, seed=3)
    assert texts == synthetic_texts(20, VOCABULARY, seed=3) and len(set(texts)) == 20
    assert all(20 <= len(t.split()) <= 50 and set(t.lower().replace(".", "").split()) <= set(VOCABULARY)
               for t in texts)


def test_the_run_benchmark_reports_the_ratio_to_its_floor_against_the_target():
    assert bench_run.summarize(10.0, 24.0) == {"floor_seconds": 10.0, "warm_run_seconds": 24.0, "ratio": 2.4,
                                               "target_ratio": 2.5, "meets_target": True}
    assert bench_run.summarize(10.0, 26.0)["meets_target"] is False


@pytest.mark.slow  # the scoring models
def test_the_run_benchmark_floor_scores_the_32_sample_pairs():
    import subprocess

    floor = bench_run.FLOOR.format(profile=str(ROOT / "params" / "default.yaml"))
    result = subprocess.run([sys.executable, "-c", floor], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------- the slices benchmark

def test_the_slices_benchmark_rows_load_with_six_typed_metadata_columns_and_are_seeded(tmp_path):
    from evalbook.load import load_evaluation_set

    examples, predictions = bench_slices.synthetic_rows(200)
    assert (examples, predictions) == bench_slices.synthetic_rows(200)
    loaded = load_evaluation_set(str(bench_slices.write_jsonl(tmp_path / "e.jsonl", examples)),
                                 str(bench_slices.write_jsonl(tmp_path / "p.jsonl", predictions)))
    assert {c.name: c.type for c in loaded.metadata} == {
        "product": "string", "difficulty": "string", "language": "string", "escalated": "boolean",
        "latency_ms": "float", "turns": "integer"}
    questions = loaded.table["question"].str.split().str.len()
    assert questions.between(6, 25).all() and loaded.table["question"].nunique() == 200
    truncated = [p["generated_answer"] for e, p in zip(examples, predictions) if e["product"] == "legacy"]
    assert truncated and all(len(a.split()) < len(e["answer"].split())
                             for a, e in zip(truncated, [e for e in examples if e["product"] == "legacy"]))


def test_the_slices_benchmark_reports_the_added_share_against_the_target():
    cold, warm = bench_slices.TARGET_SHARE, bench_slices.WARM_TARGET_SHARE
    assert (cold, warm) == (0.10, 0.40)
    assert bench_slices.share({"total_seconds": 100.0}, {"total_seconds": 110.0}, cold) == {
        "added_seconds": 10.0, "added_share": 0.1, "target_share": 0.1, "meets_target": True}
    assert bench_slices.share({"total_seconds": 100.0}, {"total_seconds": 111.0}, cold)["meets_target"] is False
    assert bench_slices.share({"total_seconds": 25.9}, {"total_seconds": 36.2}, warm)["meets_target"] is True
    assert bench_slices.share({"total_seconds": 25.9}, {"total_seconds": 36.3}, warm)["meets_target"] is False


def test_the_slices_benchmark_keeps_each_warm_variant_s_fastest_round():
    assert bench_slices.WARM_ORDER == ("plain", "sliced", "sliced", "plain")
    rounds = {"plain": [{"total_seconds": 29.1, "n": 1}, {"total_seconds": 21.6, "n": 2}],
              "sliced": [{"total_seconds": 29.5, "n": 3}, {"total_seconds": 30.2, "n": 4}]}
    assert bench_slices.fastest_rounds(rounds) == {
        "plain": {"total_seconds": 21.6, "n": 2, "round_totals": [29.1, 21.6]},
        "sliced": {"total_seconds": 29.5, "n": 3, "round_totals": [29.5, 30.2]}}


def test_the_slices_benchmark_measures_a_cache_as_its_cap_counts_it(tmp_path):
    (tmp_path / "v1" / "ab").mkdir(parents=True)
    (tmp_path / "v1" / "ab" / "one.emb").write_bytes(b"x" * 1000)
    (tmp_path / "v1" / "two.emb").write_bytes(b"y" * 24)
    assert bench_slices.bytes_on_disk(tmp_path) == 1024


# ---------------------------------------------------------------- the generate benchmark

def test_the_stand_in_answers_a_question_after_its_delay_in_the_example_services_shape():
    with StandinServer(0.2) as slow, httpx.Client(trust_env=False, timeout=10) as client:
        url = bench_generate.answer_url(slow.base_url)
        started = time.perf_counter()
        response = client.post(url, json={"id": "q-7", "question": "Where is the harbour?"})
        elapsed = time.perf_counter() - started
        served = slow.stats()
    assert response.status_code == 200
    reply = response.json()
    assert elapsed >= 0.2  # never before its delay; how much later is the machine's business
    assert reply["id"] == "q-7" and "Where is the harbour?" in reply["answer"]
    assert reply["model"] == "standin"
    assert reply["retrieved"] and all(set(document) == {"id", "text"} and isinstance(document["id"], str)
                                      and isinstance(document["text"], str) for document in reply["retrieved"])
    assert all(isinstance(reply["usage"][key], int) for key in ("prompt_tokens", "completion_tokens"))
    assert served["answers"] == 1


def test_the_stand_in_refuses_an_answer_request_without_a_question(server):
    before = server.stats().get("bad_answer_request", 0)
    response = httpx.post(bench_generate.answer_url(server.base_url), trust_env=False, json={"id": "q-1"})
    assert response.status_code == 400
    assert "question" in response.json()["error"]
    assert server.stats()["bad_answer_request"] == before + 1


def test_the_generate_questions_are_distinct_and_seeded():
    examples = bench_generate.synthetic_examples(50)
    assert examples.equals(bench_generate.synthetic_examples(50))
    assert examples["question"].is_unique and examples["id"].is_unique
    assert all(question.endswith("?") for question in examples["question"])


def test_generate_throughput_is_compared_with_concurrency_over_delay():
    serial = bench_generate.with_ideal({"examples": 40, "requests": 40, "calls_per_s": 4.0}, 1, 0.2)
    assert serial["ideal_calls_per_s"] == pytest.approx(5.0)  # 1 / 0.2 s
    assert serial["fraction_of_ideal"] == pytest.approx(0.8)
    at_eight = bench_generate.with_ideal({"examples": 320, "requests": 320, "calls_per_s": 32.0}, 8, 0.2)
    assert at_eight["ideal_calls_per_s"] == pytest.approx(40.0)  # 8 / 0.2 s
    assert bench_generate.targets([serial, at_eight], None)["concurrency_8_fraction_of_ideal"]["met"] is True
    short = bench_generate.with_ideal({**at_eight, "calls_per_s": 31.9}, 8, 0.2)
    assert short["fraction_of_ideal"] == pytest.approx(0.7975)
    assert bench_generate.targets([short], None)["concurrency_8_fraction_of_ideal"]["met"] is False
    few = bench_generate.with_ideal({"examples": 5, "requests": 5, "calls_per_s": 20.0}, 8, 0.2)
    assert few["ideal_calls_per_s"] == pytest.approx(25.0)  # only 5 calls can be in flight


def test_the_generate_benchmark_fails_when_the_warm_rerun_makes_a_call():
    cold = [bench_generate.with_ideal({"examples": 320, "requests": 320, "calls_per_s": 36.0}, 8, 0.2)]
    clean = bench_generate.targets(cold, {"calls": 0, "server_requests": 0})
    assert clean["warm_rerun_zero_calls"]["met"] is True and bench_generate.exit_code(clean) == 0
    slow = bench_generate.targets([{**cold[0], "fraction_of_ideal": 0.5}], {"calls": 0, "server_requests": 0})
    assert bench_generate.exit_code(slow) == 0  # a throughput target missed is reported, not a failure
    for warm in ({"calls": 1, "server_requests": 1}, {"calls": 0, "server_requests": 1}):
        assert bench_generate.exit_code(bench_generate.targets(cold, warm)) == 1


def test_a_warm_generate_rerun_makes_no_call_and_the_stand_in_counts_it(server, tmp_path):
    examples = bench_generate.synthetic_examples(5)
    config = bench_generate.generate_config(server.base_url, concurrency=2)
    cold = bench_generate.generate_once(examples, config, tmp_path / "cache.sqlite", server)
    warm = bench_generate.generate_once(examples, config, tmp_path / "cache.sqlite", server)
    assert (cold["calls"], cold["server_requests"], cold["cache_hits"], cold["n_ok"]) == (5, 5, 0, 5)
    assert (warm["calls"], warm["server_requests"], warm["cache_hits"], warm["n_ok"]) == (0, 0, 5, 5)
    assert bench_generate.problems(cold) == [] and bench_generate.problems(warm) == []
    checks = bench_generate.targets([bench_generate.with_ideal(cold, 2, DELAY)], {**warm, "concurrency": 2})
    assert checks["warm_rerun_zero_calls"]["met"] is True


# ---------------------------------------------------------------- the trend benchmark

def test_the_trend_runs_are_seeded_and_vary_as_planned():
    planned = bench_trend.plan_runs(500)
    assert planned == bench_trend.plan_runs(500)
    assert sum(run.failed for run in planned) == 13
    assert {run.dataset for run in planned} == set(bench_trend.DATASETS)
    assert {run.judge_model for run in planned} == {*bench_trend.JUDGE_MODELS, None}
    assert [run.started for run in planned] == sorted(run.started for run in planned)
    assert (planned[-1].started - planned[0].started).days >= 124


def test_the_trend_benchmark_on_six_runs_reads_no_report_and_sees_one_when_read(tmp_path):
    from evalbook.layout import EXAMPLE_VALUES, HEADLINE_FILE, report_path, run_folders

    results = bench_trend.run(6, 12, tmp_path)
    assert results["successful_runs"] == 7  # the six, then one more
    for part in ("trend_cold", "trend_warm", "trend_warm_one_more", "trend_reports_unreadable", "index",
                 "index_reports_unreadable"):
        assert results[part]["reports_opened"] == 0, part
    assert results["index_reports_unreadable"]["runs_with_means_shown"] == 7
    assert results["migration"]["headlines_made"] == results["migration"]["equal_to_the_runners"] == 6
    assert results["trend_cold"]["series"] == 6 and results["trend_cold"]["values_read"] > 0
    assert results["targets"]["index_reads_no_report"]["met"] is True
    assert bench_trend.report_lines(results)[2].startswith("trend cold: ")
    # the count can fail: a run without its headline has its report opened, and is not shown
    root = tmp_path / "outputs"
    folders = run_folders(root)
    reports = {str(report_path(folder)) for folder in folders}
    headlines = bench_trend.successful_headlines(root)
    (folders[0] / HEADLINE_FILE).unlink()
    (folders[0] / EXAMPLE_VALUES).unlink()
    index = bench_trend.measure_index(root, bench_trend.FileOpens(), reports, headlines)
    assert index["reports_opened"] == 1 and index["runs_with_means_shown"] == 6

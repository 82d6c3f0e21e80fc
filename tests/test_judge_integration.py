"""Integration: the real local llama.cpp server, started by the runner, judging sample answers.

The model (Qwen2.5-Coder-1.5B-Instruct, joined from its PyPI part packages on first use) is a
smoke test of the wiring: these tests check the plumbing (structured output through the openai
client, records, tokens, the cache), never the verdicts. Three answers, three metrics: 9 calls,
then a rerun served from the cache with none.
"""

import json
import socket
from pathlib import Path

import pytest

from evalbook.report.document import validate_report
from evalbook.runner import run_pipeline

pytestmark = pytest.mark.slow  # real runs against a stand-in or the local model server

ROOT = Path(__file__).resolve().parents[1]
LOCAL_JUDGE = str(ROOT / "params" / "local-judge.yaml")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    overrides = [f"outputs_root={outputs}", "limit=6", "judge.sample_size=3",
                 f"judge.base_url=http://127.0.0.1:{free_port()}/v1",
                 f"judge.cache_path={outputs / 'judge-cache.sqlite'}"]
    first = run_pipeline(LOCAL_JUDGE, overrides)
    second = run_pipeline(LOCAL_JUDGE, overrides)
    return [json.loads(run.report_path.read_text()) for run in (first, second)], first


def test_the_runner_starts_the_server_and_judges_three_answers(two_runs):
    (report, _), first = two_runs
    validate_report(report)
    summary = report["judge_summary"]
    assert summary["status"] == "ran", summary["reason"]
    assert summary["sampling"]["n_judged"] == 3
    judged = [e for e in report["examples"] if e["judge"] and e["judge"]["status"] == "judged"]
    assert len(judged) == 3
    for example in judged:
        for metric in ("groundedness", "relevance", "criteria"):
            entry = example["judge"][metric]
            assert (entry["score"] is None) == (entry["unscored_reason"] is not None)
        # An instruction-tuned model writes the answer's own statements, where Gemma 3 270M, a
        # base model, copied the prompt's example "...": the output is real, whatever its verdicts.
        statements = example["judge"]["groundedness"].get("statements")
        assert statements and all(len(s["statement"].split()) >= 2 for s in statements), statements
    assert report["models"]["judge"]["model"] == "qwen2.5-coder-1.5b"
    assert report["models"]["judge"]["structured_output"] == "json_object_schema"
    assert "smoke test" in report["models"]["judge"]["note"]
    assert (first.run_dir / "judge-server.log").exists()


def test_tokens_are_counted_from_the_server(two_runs):
    (report, _), _ = two_runs
    totals = report["judge_summary"]["totals"]
    assert totals["calls"] > 0 and totals["prompt_tokens"] > 0 and totals["completion_tokens"] > 0
    assert totals["cost_usd"] == "unknown"


def test_a_rerun_is_served_entirely_from_the_cache(two_runs):
    (first, second), _ = two_runs
    assert first["judge_summary"]["totals"]["errors"] == 0
    requests = 3 * sum(1 for e in first["examples"]
                       if e["judge"] and e["judge"]["status"] == "judged" and e["generated_answer"].strip())
    totals = second["judge_summary"]["totals"]
    assert totals["calls"] == 0 and totals["errors"] == 0
    assert totals["cache_hits"] == requests

    def scores(report):
        return {e["id"]: {m: e["judge"][m]["score"] for m in ("groundedness", "relevance", "criteria")}
                for e in report["examples"] if e["judge"] and e["judge"]["status"] == "judged"}
    assert scores(first) == scores(second)


def test_the_judged_run_is_calibrated_with_its_judge_metrics(two_runs, tmp_path):
    from evalbook.calibrate.document import validate_calibration
    from evalbook.sidedocs import run_calibration

    (_, report), first = two_runs
    outputs = first.run_dir.parents[5]
    result = run_calibration(LOCAL_JUDGE, report["run_id"], str(ROOT / "data" / "sample" / "labels.csv"),
                             {"resamples": 200}, overrides=[f"outputs_root={outputs}"])
    doc = json.loads(result.path.read_text("utf-8"))
    validate_calibration(doc)
    assert doc["valid_for"]["judge_label"] == report["judge_summary"]["label"]
    assert doc["valid_for"]["judge_model"] == report["models"]["judge"]
    by_name = {entry["metric"]: entry for entry in doc["metrics"]}
    for name, summary in report["judge_summary"]["metrics"].items():
        entry = by_name[name]  # every metric the judge ran is calibrated, or says why not
        scored = [e for e in report["examples"] if e["judge"] and e["judge"]["status"] == "judged"
                  and e["judge"][name]["score"] is not None]
        assert entry["n"] == len(scored)
        if entry["n"] < 2:
            assert entry["skipped_reason"], entry
            continue
        configured = next(t for t in entry["pass_fail"]["thresholds"] if t["name"] == "configured")
        assert configured["value"] == summary["threshold"] and "placeholder" in configured["reason"]
        levels = {len(e["judge"][name]["score_levels"]) - 1 for e in scored if e["judge"][name].get("score_levels")}
        assert {level["n_items"] for level in entry["score_levels"] or []} == levels

"""Integration: `params/generate-local.yaml` as a user runs it, with the real example RAG service
(examples/rag_service: BM25 over the sample's contexts) and the real local llama.cpp server
(Qwen2.5-Coder-1.5B-Instruct), both started by the runner, on free ports.

Two questions (about 15-25 s each here), then a rerun that the cache answers with no call. The
checks are of the plumbing, not of the model's answers: each answer is real text from the
service, its retrieval is the service's BM25 ranking (compared with bm25s called directly), and
the report carries the generation summary and the reported model.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest

from evalbook.processes import answers_ok
from evalbook.report.document import validate_report
from evalbook.runner import run_pipeline
from evalbook.score.retrieval import retrieval_scores
from faultserver import free_port

pytestmark = pytest.mark.slow  # real runs against a stand-in or the local model server

ROOT = Path(__file__).resolve().parents[1]
GENERATE_LOCAL = str(ROOT / "params" / "generate-local.yaml")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    model, service = free_port(), free_port()
    command = (f"['{{python}}', examples/rag_service/service.py, --examples, data/sample/examples.jsonl, "
               f"--port, '{service}', --llm-base-url, 'http://127.0.0.1:{model}/v1', "
               f"--llm-model, qwen2.5-coder-1.5b, --top-k, '3']")
    overrides = [f"outputs_root={outputs}", "limit=2", f"judge.base_url=http://127.0.0.1:{model}/v1",
                 f"generate.service={{command: {command}, ready_url: 'http://127.0.0.1:{service}/health', "
                 "start_timeout_seconds: 120}",
                 f"generate.http.url=http://127.0.0.1:{service}/answer"]
    first = run_pipeline(GENERATE_LOCAL, overrides)
    second = run_pipeline(GENERATE_LOCAL, overrides)
    return first, second, model, service


def test_the_answers_come_from_the_example_service_on_the_local_model(two_runs):
    first, _, model, service = two_runs
    report = json.loads(first.report_path.read_text())
    validate_report(report)
    summary = report["generation_summary"]
    assert (summary["n"], summary["n_ok"], summary["calls"]) == (2, 2, 2), summary["failures"]
    assert summary["models"] == ["qwen2.5-coder-1.5b"] and report["models"]["generator"] == "qwen2.5-coder-1.5b"
    assert summary["tokens"]["prompt"] > 100 and summary["tokens"]["completion"] > 0
    for example in report["examples"]:
        assert len(example["generated_answer"].split()) >= 3  # real text from the model
        assert example["answer_similarity"]["bertscore"]["f1"] is not None
    assert (first.run_dir / "model-server.log").exists() and (first.run_dir / "service.log").exists()
    assert not answers_ok(f"http://127.0.0.1:{service}/health")  # both stopped with the run
    assert not answers_ok(f"http://127.0.0.1:{model}/v1/models")


def test_the_retrieval_ranks_are_the_service_s_bm25_ranking(two_runs):
    first, *_ = two_runs
    import bm25s

    report = json.loads(first.report_path.read_text())
    generated = pd.read_parquet(first.run_dir / "generated.parquet")
    examples = pd.read_json(ROOT / "data" / "sample" / "examples.jsonl", lines=True)
    documents = examples.drop_duplicates("gold_id")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(documents["context"].tolist(), stopwords="en", show_progress=False),
                    show_progress=False)
    questions = dict(zip(examples["id"], examples["question"]))
    for example, row in zip(report["examples"], generated.itertuples(), strict=True):
        found, _ = retriever.retrieve(bm25s.tokenize([questions[row.id]], stopwords="en", show_progress=False),
                                      k=3, show_progress=False)
        assert list(row.retrieved_ids) == documents["gold_id"].iloc[found[0]].tolist()
        gold = examples.set_index("id").loc[row.id, "gold_id"]
        rank = list(row.retrieved_ids).index(gold) + 1 if gold in list(row.retrieved_ids) else None
        assert example["retrieval"] == asdict(retrieval_scores({gold}, list(row.retrieved_ids), 3))
        assert (example["retrieval"]["top_k_match"], example["retrieval"]["rank"]) == (rank is not None, rank)
    assert report["retrieval_summary"]["n"] == 2 and report["retrieval_summary"]["k"] == 3


def test_a_rerun_makes_no_call_and_reports_the_same_answers(two_runs):
    first, second, *_ = two_runs
    before, after = (json.loads(run.report_path.read_text()) for run in (first, second))
    summary = after["generation_summary"]
    assert (summary["calls"], summary["cache_hits"], summary["n_ok"]) == (0, 2, 2)
    assert [e["generated_answer"] for e in after["examples"]] == [e["generated_answer"] for e in before["examples"]]

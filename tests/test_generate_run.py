"""The generate stage in whole runs: the runner, 00_generate and everything after it, against a
stand-in RAG service on 127.0.0.1 (tests/ragstandin.py) that answers with the sample's recorded
answers and retrieval, so that a generated run must report what the same answers read from
predictions.jsonl report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import papermill
import pytest
import yaml

from evalbook.processes import answers_ok
from evalbook.runner import RunFailed, run_pipeline
from faultserver import free_port
from paths import DEFAULT_PROFILE, NO_JUDGE, ROOT
from ragstandin import MODEL, RagStandIn

pytestmark = pytest.mark.slow  # real runs against a stand-in or the local model server

GENERATE_LOCAL = ROOT / "params" / "generate-local.yaml"
SECRET = "sk-standin-5e1f0c9d2a"
HEADERS = "generate.http.headers={Authorization: {env: RAG_TOKEN, prefix: 'Bearer '}}"


def overrides(outputs: Path, url: str, *more: str) -> list[str]:
    return [f"outputs_root={outputs}", "generate.service=null", "generate.start_server=false",
            f"generate.http.url={url}", "generate.backoff_seconds=0", *more]


def report_of(result) -> dict:
    return json.loads(result.report_path.read_text("utf-8"))


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A generate-local run against the stand-in, with a secret header, and the same answers
    read from predictions.jsonl by the default profile at the same k."""
    outputs = tmp_path_factory.mktemp("outputs")
    patch = pytest.MonkeyPatch()
    patch.setenv("RAG_TOKEN", SECRET)
    # ipykernel forwards a kernel's own stderr (fd 2) into the notebook, except under pytest:
    # without this variable the stages' kernels run as they do for a user.
    patch.delenv("PYTEST_CURRENT_TEST", raising=False)
    try:
        with RagStandIn() as service:
            result = run_pipeline(str(GENERATE_LOCAL), overrides(outputs, service.url, HEADERS))
            headers = list(service.headers)
    finally:
        patch.undo()
    read = run_pipeline(str(DEFAULT_PROFILE), [f"outputs_root={outputs}", "retrieval.k=3", NO_JUDGE])
    return result, read, headers, outputs


def test_a_generated_run_reports_the_service_s_answers_and_its_retrieval(generated):
    result, read, _, _ = generated
    report, baseline = report_of(result), report_of(read)
    assert [s["stage"] for s in json.loads((result.run_dir / "run.json").read_text())["stages"]] == \
        ["00_generate", "01_load", "02_score", "03_judge", "04_report"]
    assert report["models"]["generator"] == MODEL
    for mine, theirs in zip(report["examples"], baseline["examples"], strict=True):
        assert mine["id"] == theirs["id"]
        assert mine["generated_answer"] == theirs["generated_answer"]
        assert mine["retrieval"] == theirs["retrieval"]
        assert mine["answer_similarity"] == theirs["answer_similarity"]
    assert report["retrieval_summary"] == baseline["retrieval_summary"]
    assert report["retrieval_summary"]["n"] == 20  # the 20 rows recorded with retrieval, ranked for real


def test_the_report_carries_the_generation_summary(generated):
    result, *_ = generated
    summary = report_of(result)["generation_summary"]
    assert (summary["kind"], summary["n"], summary["n_ok"], summary["n_failed"]) == ("http", 32, 32, 0)
    assert summary["calls"] == 32 and summary["cache_hits"] == 0 and summary["models"] == [MODEL]
    assert summary["tokens"] == {"prompt": 3200, "completion": 640, "n_without_usage": 0}
    assert summary["latency_ms"]["n"] == 32 and summary["latency_ms"]["p50"] <= summary["latency_ms"]["p99"]
    assert summary["n_without_retrieved_ids"] == 12
    page = (result.run_dir / "04_report.noinput.html").read_text("utf-8")
    assert "How the answers were obtained" in page and "32 of 32</strong> questions were answered" in page
    assert f"generator <code>{MODEL}</code> (asked of <code>http://127.0.0.1:" in page  # the headline
    assert (result.run_dir / "00_generate.html").exists()
    # The progress bar goes to the runner's terminal, not into the executed notebook.
    assert "generating:" not in (result.run_dir / "00_generate.ipynb").read_text("utf-8")
    assert "before the first call: 32 calls to make" in (result.run_dir / "00_generate.ipynb").read_text("utf-8")


def test_the_header_s_secret_was_sent_and_is_in_no_output_file(generated):
    _, _, headers, outputs = generated
    assert {h["Authorization"] for h in headers} == {f"Bearer {SECRET}"}
    files = [path for path in outputs.rglob("*") if path.is_file()]
    assert len(files) > 20
    leaking = [str(path) for path in files if SECRET.encode() in path.read_bytes()]
    assert leaking == []


def test_failed_rows_are_missing_answers_and_a_rerun_asks_only_for_them(tmp_path):
    with RagStandIn(fail_ids={"s03", "s07"}) as service:
        first = run_pipeline(str(GENERATE_LOCAL), overrides(tmp_path, service.url, "generate.max_retries=0"))
        report = report_of(first)
        summary = report["generation_summary"]
        assert (summary["n_ok"], summary["n_failed"], summary["failures"]) == (30, 2, {"HTTP 503": 2})
        assert summary["failed_ids"] == ["s03", "s07"]
        headline = (first.run_dir / "04_report.noinput.html").read_text("utf-8")
        assert "/answer</code>: 30 of 32 answered, 2 failed)" in headline
        assert report["counts"]["examples_without_prediction"] == ["s03", "s07"]
        missing = {e["id"]: e for e in report["examples"] if "no_prediction" in e["flags"]}
        assert set(missing) == {"s03", "s07"} and all(e["generated_answer"] is None for e in missing.values())
        service.heal()
        asked_before = len(service.questions)
        second = run_pipeline(str(GENERATE_LOCAL), overrides(tmp_path, service.url))
        asked_again = service.questions[asked_before:]
    assert sorted(asked_again) == sorted(service.question_of(i) for i in ("s03", "s07"))
    summary = report_of(second)["generation_summary"]
    assert (summary["n_ok"], summary["calls"], summary["cache_hits"]) == (32, 2, 30)


def test_a_mapping_that_reads_nothing_fails_the_run_with_the_expression_and_a_sample(tmp_path):
    with RagStandIn() as service, pytest.raises(RunFailed) as failed:
        run_pipeline(str(GENERATE_LOCAL), overrides(tmp_path, service.url, "limit=3",
                                                    "generate.http.response.answer=data.answer"))
    message = str(failed.value)
    assert "stage 00_generate failed" in message
    assert "every one of the 3 generation calls failed (3 response mapping)" in message
    assert "the expression 'data.answer' matched nothing in the response, which begins: {" in message
    (run_dir,) = [p.parent for p in tmp_path.rglob("FAILED")]
    assert (run_dir / "generated.parquet").exists()  # the rows and their reasons are kept
    assert not (run_dir.parent / f"{run_dir.name}.json").exists()  # no report


def test_the_runner_starts_the_service_under_test_and_stops_it_after_the_run(tmp_path):
    port = free_port()
    ready = f"http://127.0.0.1:{port}/health"
    service = (f"generate.service={{command: ['{{python}}', tests/ragstandin.py, --port, '{port}'], "
               f"ready_url: '{ready}', start_timeout_seconds: 60}}")
    result = run_pipeline(str(GENERATE_LOCAL), [f"outputs_root={tmp_path}", "generate.start_server=false",
                                                f"generate.http.url=http://127.0.0.1:{port}/answer",
                                                "limit=2", service])
    assert report_of(result)["generation_summary"]["n_ok"] == 2
    assert "stand-in RAG service ready" in (result.run_dir / "service.log").read_text()
    assert not answers_ok(ready)  # stopped with the run


def test_a_service_that_never_gets_ready_fails_the_run_with_its_log(tmp_path):
    port = free_port()
    service = (f"generate.service={{command: ['{{python}}', -c, 'print(\"starting\"); import sys; sys.exit(4)'], "
               f"ready_url: 'http://127.0.0.1:{port}/health', start_timeout_seconds: 30}}")
    with pytest.raises(RunFailed) as failed:
        run_pipeline(str(GENERATE_LOCAL), [f"outputs_root={tmp_path}", "generate.start_server=false", service])
    message = str(failed.value)
    assert "the service under test did not start: the service exited with code 4" in message
    assert "starting" in message


def test_00_generate_opened_alone_starts_its_service_and_writes_the_scratch_folder(tmp_path):
    port = free_port()
    profile = tmp_path / "mine.yaml"
    profile.write_text(yaml.safe_dump({
        "extends": str(GENERATE_LOCAL), "name": "mine", "version": 1, "outputs_root": str(tmp_path / "out"),
        "input_path": str(ROOT / "data" / "sample" / "examples.jsonl"),
        "generate": {"start_server": False, "http": {"url": f"http://127.0.0.1:{port}/answer"},
                     "service": {"command": [sys.executable, str(ROOT / "tests" / "ragstandin.py"), "--port", str(port)],
                                 "ready_url": f"http://127.0.0.1:{port}/health", "start_timeout_seconds": 60}}}))
    executed = tmp_path / "00.ipynb"
    papermill.execute_notebook(str(ROOT / "notebooks" / "00_generate.ipynb"), str(executed),
                               parameters={"params_path": str(profile), "limit": 3}, cwd=str(ROOT / "notebooks"),
                               kernel_name="python3", progress_bar=False)
    scratch = tmp_path / "out" / "local" / "interactive"
    summary = json.loads((scratch / "generation.json").read_text())
    assert (summary["n"], summary["n_ok"]) == (3, 3)
    assert "3 of 3</strong> questions were answered" in executed.read_text()
    assert not answers_ok(f"http://127.0.0.1:{port}/health")

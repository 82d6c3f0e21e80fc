"""The example system under test, examples/rag_service/service.py: its BM25 retrieval against
bm25s called directly, its HTTP contract with the LLM on a replaced transport, its errors (422,
502, bad examples files), and one real start of the service against a stand-in LLM server."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import time

import bm25s
import httpx
import openai
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from faultserver import FaultServer, free_port
from paths import ROOT

pytestmark = pytest.mark.slow  # the example service and the local model server

SERVICE_PATH = ROOT / "examples" / "rag_service" / "service.py"
SAMPLE = ROOT / "data" / "sample" / "examples.jsonl"
FLAG_MODEL = "qwen2.5-coder-1.5b"
REPORTED_MODEL = "qwen2.5-coder-1.5b-instruct-q8_0.gguf"  # what the server says it ran, not the flag
REPLY = "The teal bin is emptied every second Tuesday; glass goes to a bottle bank."


@pytest.fixture(scope="module")
def service():
    """The service script as a module (it is an example to copy, not a package)."""
    spec = importlib.util.spec_from_file_location("rag_service", SERVICE_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["rag_service"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sample() -> pd.DataFrame:
    return pd.read_json(SAMPLE, lines=True, dtype=False)


@pytest.fixture(scope="module")
def documents(service):
    return service.load_documents(SAMPLE, id_column="gold_id", context_column="context")


def chat_completion(content: str | None = REPLY, model: str = REPORTED_MODEL) -> httpx.Response:
    return httpx.Response(200, json={
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 412, "completion_tokens": 23, "total_tokens": 435}})


class RecordingLlm:
    """A MockTransport handler standing in for the LLM server: records each request's JSON body."""

    def __init__(self, answer=lambda request: chat_completion()):
        self.answer = answer
        self.bodies: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        return self.answer(request)

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url="http://llm.test/v1", api_key="unused", max_retries=0,
                             http_client=httpx.Client(transport=httpx.MockTransport(self)))


def service_client(service, documents, llm: RecordingLlm) -> TestClient:
    settings = service.Settings(llm_model=FLAG_MODEL, top_k=3)
    return TestClient(service.build_app(documents, llm.client(), settings))


def bm25s_top_k(corpus: list[str], questions: list[str], k: int):
    """The library's own answer: its README's tokenize, index and retrieve, English stopwords."""
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
    query_tokens = bm25s.tokenize(questions, stopwords="en", show_progress=False)
    return retriever.retrieve(query_tokens, k=k, show_progress=False)


# Retrieval

def test_retrieval_equals_bm25s_called_directly_for_every_sample_question(service, sample, documents):
    corpus = sample.drop_duplicates(["gold_id", "context"])
    indices, scores = bm25s_top_k(corpus["context"].tolist(), sample["question"].tolist(), k=3)
    index = service.Bm25Index(documents)
    for question, expected_rows, expected_scores in zip(sample["question"], indices, scores):
        hits = index.search(question, k=3)
        assert [hit.document.id for hit in hits] == corpus["gold_id"].iloc[expected_rows].tolist()
        assert [hit.document.text for hit in hits] == corpus["context"].iloc[expected_rows].tolist()
        assert [hit.score for hit in hits] == pytest.approx(expected_scores.tolist())


def test_the_gold_document_is_in_the_top_3_for_most_sample_questions(service, sample, documents):
    index = service.Bm25Index(documents)
    ranked = [[hit.document.id for hit in index.search(question, k=3)] for question in sample["question"]]
    in_top_3 = sum(gold in ids for gold, ids in zip(sample["gold_id"], ranked))
    at_rank_1 = sum(gold == ids[0] for gold, ids in zip(sample["gold_id"], ranked))
    # measured on the sample with bm25s 0.3.16: every gold doc is in the top 3, all but one first
    assert (in_top_3, at_rank_1) == (32, 31)


def test_documents_are_the_distinct_id_context_pairs(service, tmp_path):
    rows = [{"gold_id": "doc-a", "context": "Alpha text.", "question": "q1"},
            {"gold_id": "doc-b", "context": "Beta text.", "question": "q2"},
            {"gold_id": "doc-a", "context": "Alpha text.", "question": "q3"}]
    path = tmp_path / "examples.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")
    documents = service.load_documents(path, id_column="gold_id", context_column="context")
    assert [(document.id, document.text) for document in documents] == [
        ("doc-a", "Alpha text."), ("doc-b", "Beta text.")]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_csv_and_parquet_give_the_same_documents_as_jsonl(service, sample, documents, tmp_path, suffix):
    path = tmp_path / f"examples{suffix}"
    if suffix == ".csv":
        sample.to_csv(path, index=False)
    else:
        sample.to_parquet(path)
    assert service.load_documents(path, id_column="gold_id", context_column="context") == documents


# The HTTP contract

def test_answer_returns_the_answer_the_ranked_contexts_and_the_reported_model(service, sample, documents):
    llm = RecordingLlm()
    question = sample["question"].iloc[0]
    response = service_client(service, documents, llm).post("/answer",
                                                            json={"question": question, "id": "s01"})
    assert response.status_code == 200
    body = response.json()
    expected = service.Bm25Index(documents).search(question, k=3)
    assert body == {
        "id": "s01", "answer": REPLY,
        "retrieved": [{"id": hit.document.id, "text": hit.document.text, "score": pytest.approx(hit.score)}
                      for hit in expected],
        "model": REPORTED_MODEL, "usage": {"prompt_tokens": 412, "completion_tokens": 23}}
    assert body["retrieved"][0]["id"] == "doc-s01"


def test_one_chat_completion_carries_the_question_and_the_contexts_in_rank_order(service, sample, documents):
    llm = RecordingLlm()
    question = sample["question"].iloc[4]
    service_client(service, documents, llm).post("/answer", json={"question": question})
    assert len(llm.bodies) == 1
    request = llm.bodies[0]
    assert (request["model"], request["temperature"], request["seed"], request["max_tokens"]) == (
        FLAG_MODEL, 0.0, 0, 200)
    prompt = "\n".join(message["content"] for message in request["messages"])
    assert question in prompt
    positions = [prompt.find(hit.document.text) for hit in service.Bm25Index(documents).search(question, k=3)]
    assert -1 not in positions and positions == sorted(positions)


def test_a_session_sends_its_earlier_turns_and_retrieves_with_its_earlier_questions(service, sample, documents):
    llm = RecordingLlm(lambda request: chat_completion(f"reply {len(llm.bodies)}"))
    client = service_client(service, documents, llm)
    first, follow_up = sample["question"].iloc[0], "And how often is that?"
    client.post("/answer", json={"question": first, "session_id": "conv-1"})
    body = client.post("/answer", json={"question": follow_up, "session_id": "conv-1"}).json()
    messages = llm.bodies[1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[:2] == [{"role": "user", "content": first}, {"role": "assistant", "content": "reply 1"}]
    assert follow_up in messages[2]["content"]
    expected = service.Bm25Index(documents).search(f"{first} {follow_up}", k=3)
    assert [hit["id"] for hit in body["retrieved"]] == [hit.document.id for hit in expected]
    # another session, and no session at all, start from nothing
    client.post("/answer", json={"question": follow_up, "session_id": "conv-2"})
    client.post("/answer", json={"question": follow_up})
    assert [len(b["messages"]) for b in llm.bodies[2:]] == [1, 1]


def test_the_id_is_optional_and_only_echoed(service, sample, documents):
    llm = RecordingLlm()
    client = service_client(service, documents, llm)
    question = sample["question"].iloc[2]
    without_id = client.post("/answer", json={"question": question}).json()
    with_id = client.post("/answer", json={"question": question, "id": "anything"}).json()
    assert without_id["id"] is None and with_id["id"] == "anything"
    assert llm.bodies[0] == llm.bodies[1]


def test_usage_the_server_does_not_report_is_null_not_invented(service, sample, documents):
    def no_usage(request):
        response = chat_completion()
        body = response.json()
        del body["usage"]
        return httpx.Response(200, json=body)

    response = service_client(service, documents, RecordingLlm(no_usage)).post(
        "/answer", json={"question": sample["question"].iloc[0]})
    assert response.json()["usage"] == {"prompt_tokens": None, "completion_tokens": None}


def test_health_reports_the_documents_and_the_model_flag(service, documents):
    response = service_client(service, documents, RecordingLlm()).get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "documents": 32, "model": FLAG_MODEL}


@pytest.mark.parametrize("body", [{}, {"id": "s01"}, {"question": ""}, {"question": "   "},
                                  {"question": None}, {"question": 7}, {"question": ["a"]}, "not an object"],
                         ids=["empty", "no-question", "empty-string", "blank", "null", "number", "list",
                              "string"])
def test_a_body_without_a_non_empty_string_question_is_422_with_a_json_error(service, documents, body):
    llm = RecordingLlm()
    response = service_client(service, documents, llm).post("/answer", json=body)
    assert response.status_code == 422
    assert "question" in response.json()["error"]
    assert llm.bodies == []


def test_a_body_that_is_not_json_is_422_with_a_json_error(service, documents):
    response = service_client(service, documents, RecordingLlm()).post(
        "/answer", content=b"question=hello", headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    assert response.json()["error"]


def raise_timeout(request):
    raise httpx.ReadTimeout("the model is slow", request=request)


def raise_refused(request):
    raise httpx.ConnectError("connection refused", request=request)


@pytest.mark.parametrize(("answer", "reason"), [
    (lambda request: httpx.Response(500, json={"error": {"message": "boom"}}), "HTTP 500"),
    (raise_timeout, "did not answer within"),
    (raise_refused, "could not reach"),
    (lambda request: httpx.Response(200, json={"id": "x", "object": "chat.completion", "created": 0,
                                                "model": REPORTED_MODEL, "choices": []}), "no answer"),
    (lambda request: chat_completion(content=None), "no answer"),
], ids=["500", "timeout", "refused", "no-choices", "no-text"])
def test_the_llm_failing_is_a_502_with_the_reason(service, sample, documents, answer, reason):
    response = service_client(service, documents, RecordingLlm(answer)).post(
        "/answer", json={"question": sample["question"].iloc[0]})
    assert response.status_code == 502
    assert reason in response.json()["error"]


# The command line

@pytest.fixture
def run_main(service, capsys, monkeypatch):
    """main() in-process with these flags: its exit code and stderr. A start that should have been
    refused fails the test instead of serving on a real port."""
    def refuse_to_serve(server, sockets=None):
        pytest.fail("main() started the server")

    monkeypatch.setattr(service.Server, "run", refuse_to_serve)

    def run(*arguments: str) -> tuple[int, str]:
        code = service.main(["--llm-base-url", "http://127.0.0.1:1/v1", "--llm-model", FLAG_MODEL,
                             *arguments])
        return code, capsys.readouterr().err
    return run


def write_jsonl(path, rows: list[dict]):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")
    return path


def test_a_missing_examples_file_exits_2_naming_the_file(run_main, tmp_path):
    missing = tmp_path / "nowhere.jsonl"
    code, err = run_main("--examples", str(missing))
    assert code == 2
    assert str(missing) in err and "--examples" in err


@pytest.mark.parametrize(("flag", "column"), [("--id-column", "doc_id"), ("--context-column", "passage")])
def test_a_missing_column_exits_2_naming_the_file_the_column_and_the_flag(run_main, flag, column):
    code, err = run_main("--examples", str(SAMPLE), flag, column)
    assert code == 2
    assert str(SAMPLE) in err and repr(column) in err and flag in err


def test_an_id_with_two_different_contexts_exits_2_naming_the_id_and_rows(run_main, tmp_path):
    path = write_jsonl(tmp_path / "examples.jsonl", [
        {"gold_id": "doc-a", "context": "Alpha text."}, {"gold_id": "doc-b", "context": "Beta text."},
        {"gold_id": "doc-a", "context": "Alpha text, edited."}])
    code, err = run_main("--examples", str(path))
    assert code == 2
    assert str(path) in err and "'doc-a'" in err and "rows 1 and 3" in err


@pytest.mark.parametrize("row", [{"gold_id": None, "context": "Text."}, {"gold_id": "doc-b", "context": ""},
                                 {"gold_id": "doc-b", "context": 5}],
                         ids=["null-id", "empty-context", "number-context"])
def test_a_row_without_an_id_or_a_text_context_exits_2_naming_the_row(run_main, tmp_path, row):
    path = write_jsonl(tmp_path / "examples.jsonl", [{"gold_id": "doc-a", "context": "Alpha text."}, row])
    code, err = run_main("--examples", str(path))
    assert code == 2
    assert str(path) in err and "row 2" in err


@pytest.mark.parametrize(("name", "content"), [("examples.txt", "text"), ("examples.jsonl", "{not json\n")])
def test_an_unreadable_examples_file_exits_2_naming_the_file(run_main, tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content, "utf-8")
    code, err = run_main("--examples", str(path))
    assert code == 2
    assert str(path) in err


def test_a_top_k_above_the_documents_exits_2_naming_the_flag(run_main):
    code, err = run_main("--examples", str(SAMPLE), "--top-k", "33")
    assert code == 2
    assert "--top-k 33" in err and "32 documents" in err


# The real service

def wait_for_health(process: subprocess.Popen, url: str) -> dict:
    """Poll /health until it answers; fail with the service's stderr if it exits or never answers."""
    deadline = time.monotonic() + 120  # a bound on a hang, not a timing check: start-up takes ~2 s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the service exited with {process.returncode}: {process.stderr.read()}")
        try:
            return httpx.get(url, timeout=5).json()
        except httpx.TransportError:
            time.sleep(0.2)
    pytest.fail("the service never answered /health")


def test_the_service_starts_answers_through_a_real_llm_server_and_stops_cleanly(sample):
    port = free_port()
    with FaultServer(reply=lambda body: REPLY) as llm:
        # a password in the URL may be a key: it must not reach the log
        base_url = llm.base_url.replace("//", "//user:url-secret@")
        process = subprocess.Popen(
            [sys.executable, str(SERVICE_PATH), "--examples", str(SAMPLE), "--port", str(port),
             "--llm-base-url", base_url, "--llm-model", FLAG_MODEL, "--top-k", "3"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            health = wait_for_health(process, f"http://127.0.0.1:{port}/health")
            answer = httpx.post(f"http://127.0.0.1:{port}/answer", timeout=30,
                                json={"question": sample["question"].iloc[0], "id": "s01"})
        finally:
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=60)
    assert health == {"status": "ok", "documents": 32, "model": FLAG_MODEL}
    assert answer.status_code == 200
    body = answer.json()
    assert (body["id"], body["answer"], body["model"]) == ("s01", REPLY, "fault-judge")
    assert body["usage"] == {"prompt_tokens": 10, "completion_tokens": 5}
    assert body["retrieved"][0]["id"] == "doc-s01" and len(body["retrieved"]) == 3
    assert llm.chat_calls == 1 and sample["question"].iloc[0] in llm.bodies[0]["messages"][-1]["content"]
    ready_lines = [line for line in stderr.splitlines() if f"ready on http://127.0.0.1:{port}" in line]
    assert len(ready_lines) == 1, stderr
    assert f"at {llm.base_url}" in ready_lines[0] and "secret" not in stderr
    assert "Traceback" not in stderr
    # uvicorn shuts down gracefully on SIGTERM, then lets the signal end the process as usual
    assert process.returncode == -signal.SIGTERM

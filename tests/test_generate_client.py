"""The generate stage's calls: evalbook.generate (settings, mapping, client, stage), on a replaced
HTTP transport. The integration test with the real example service and the real local server is
tests/test_generate_integration.py."""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

from evalbook.generate import client as client_module
from evalbook.generate.mapping import MappingError, ResponseMapping
from evalbook.generate.settings import GenerateConfigError, Item, endpoint_from
from evalbook.generate.stage import GenerateFailed, check_something_generated, generate_answers
from evalbook.replycache import ReplyCache
from evalbook.params import load_profile
from evalbook.redaction import Redactor

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = pd.DataFrame({"id": ["e1", "e2", "e3"],
                         "question": ["Where does glass go?", "When is the bin emptied?", "Who pays {id}?"],
                         "context": ["Glass goes to the bottle bank.", "Every second Tuesday.", "The council."]})
# A response as the example service gives it, recorded
SERVICE_REPLY = {"id": "e1", "answer": "To the bottle bank.",
                 "retrieved": [{"id": "doc-s01", "text": "Glass goes to the bottle bank.", "score": 2.5},
                               {"id": 7, "text": "Bins.", "score": 0.5}],
                 "model": "qwen2.5-coder-1.5b", "usage": {"prompt_tokens": 212, "completion_tokens": 9}}
# A chat completion as llama.cpp's OpenAI-compatible server gives it, recorded
CHAT_REPLY = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1764547200,
              "model": "qwen2.5-coder-1.5b",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "Every second Tuesday."},
                           "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 61, "completion_tokens": 6, "total_tokens": 67}}


@pytest.fixture
def config() -> dict:
    """generate-local's section, with nothing for the runner to start."""
    section = copy.deepcopy(load_profile(ROOT / "params" / "generate-local.yaml")["generate"])
    section.update(service=None, start_server=False, backoff_seconds=0.0, concurrency=2)
    return section


@pytest.fixture
def openai_config(config) -> dict:
    config["kind"] = "openai"
    config["openai"] = {"base_url": "http://127.0.0.1:8080/v1", "model": "qwen2.5-coder-1.5b",
                        "api_key_env": None, "temperature": 0.0, "seed": 0, "max_tokens": 120,
                        "template": "answer-v1", "context": "gold"}
    return config


@pytest.fixture
def cache(tmp_path):
    store = ReplyCache(tmp_path / "generate-cache.sqlite")
    yield store
    store.close()


class Service:
    """A replaced transport answering like the example service; `script` gives, per question,
    the responses to return in turn (an httpx.Response, or an exception to raise)."""

    def __init__(self, script=None, reply=None):
        self.script = {question: list(responses) for question, responses in (script or {}).items()}
        self.reply = reply or (lambda body: {**SERVICE_REPLY, "id": body.get("id"),
                                             "answer": f"answer to {body['question']}"})
        self.requests: list[httpx.Request] = []
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        with self.lock:
            self.requests.append(request)
            queued = self.script.get(body.get("question") or body["messages"][0]["content"])
            step = queued.pop(0) if queued else None
        if isinstance(step, Exception):
            raise step
        return step if step is not None else httpx.Response(200, json=self.reply(body))

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def bodies(self) -> list[dict]:
        return [json.loads(r.content) for r in self.requests]


def generate(config, cache, service, examples=EXAMPLES):
    return generate_answers(examples, config, cache, http_transport=service.transport())


# ---------------------------------------------------------------- the response mapping

def test_the_mapping_reads_the_recorded_service_response():
    mapping = ResponseMapping({"answer": "answer", "retrieved_ids": "retrieved[].id",
                               "retrieved_contexts": "retrieved[].text", "model": "model",
                               "prompt_tokens": "usage.prompt_tokens",
                               "completion_tokens": "usage.completion_tokens"}, "generate.http.response")
    values = mapping.apply(SERVICE_REPLY)
    assert values == {"answer": "To the bottle bank.", "retrieved_ids": ["doc-s01", "7"],
                      "retrieved_contexts": ["Glass goes to the bottle bank.", "Bins."],
                      "model": "qwen2.5-coder-1.5b", "prompt_tokens": 212, "completion_tokens": 9}


def test_an_optional_field_that_matches_nothing_is_null():
    mapping = ResponseMapping({"answer": "answer", "retrieved_ids": "hits[].id"}, "generate.http.response")
    assert mapping.apply({"answer": "yes"})["retrieved_ids"] is None


def test_an_answer_that_matches_nothing_names_the_expression_and_shows_the_response():
    mapping = ResponseMapping({"answer": "data.text"}, "generate.http.response")
    with pytest.raises(MappingError) as raised:
        mapping.apply({"result": {"text": "It is Tuesday."}, "padding": "x" * 500})
    message = str(raised.value)
    assert "generate.http.response.answer: the expression 'data.text' matched nothing" in message
    assert '{"result": {"text": "It is Tuesday."}' in message and message.endswith(" ...")
    assert len(message) < 500  # a sample of the response, not all of it


@pytest.mark.parametrize("field, expression, document, expected", [
    ("answer", "answer", {"answer": 3}, "gave a int, not a string"),
    ("retrieved_ids", "ids", {"answer": "a", "ids": "doc-1"}, "gave a str, not a list of strings or integers"),
    ("retrieved_contexts", "ctx", {"answer": "a", "ctx": [1]}, "gave a list, not a list of strings"),
    ("prompt_tokens", "n", {"answer": "a", "n": True}, "gave a bool, not an integer"),
])
def test_a_field_of_the_wrong_type_is_a_mapping_error(field, expression, document, expected):
    mapping = ResponseMapping({"answer": "answer", field: expression}, "generate.http.response")
    with pytest.raises(MappingError, match=expected):
        mapping.apply(document)


def test_a_mapping_that_is_not_jmespath_or_names_an_unknown_field_is_refused():
    with pytest.raises(MappingError, match=r"generate.http.response.answer: 'answer\[' is not a JMESPath"):
        ResponseMapping({"answer": "answer["}, "generate.http.response")
    with pytest.raises(MappingError, match=r"unknown field\(s\) \['text'\]"):
        ResponseMapping({"answer": "a", "text": "b"}, "generate.http.response")


# ---------------------------------------------------------------- requests

def test_each_question_is_sent_in_the_body_template_and_every_field_is_read(config, cache):
    service = Service()
    outcome = generate(config, cache, service)
    table = outcome.table.to_pandas()
    assert sorted(b["question"] for b in service.bodies()) == sorted(EXAMPLES["question"])
    assert {b["id"] for b in service.bodies()} == {"e1", "e2", "e3"}
    assert table["id"].tolist() == ["e1", "e2", "e3"]  # in the examples' order, whatever order they came back
    assert table["generated_answer"].tolist() == [f"answer to {q}" for q in EXAMPLES["question"]]
    assert [list(ids) for ids in table["retrieved_ids"]] == [["doc-s01", "7"]] * 3
    assert set(table["status"]) == {"ok"} and table["generator"].tolist() == ["qwen2.5-coder-1.5b"] * 3
    assert table["prompt_tokens"].tolist() == [212] * 3 and table["latency_ms"].notna().all()
    assert outcome.summary["tokens"] == {"prompt": 636, "completion": 27, "n_without_usage": 0}


def test_a_question_holding_a_placeholder_is_sent_as_written(config, cache):
    service = Service()
    generate(config, cache, service)
    assert {"id": "e3", "question": "Who pays {id}?"} in service.bodies()


def test_a_body_template_with_an_unknown_placeholder_or_without_the_question_is_refused(config):
    config["http"]["body"] = {"q": "{question}", "lang": "{language}"}
    with pytest.raises(GenerateConfigError, match=r"unknown placeholder\(s\) \['\{language\}'\]"):
        endpoint_from(config)
    config["http"]["body"] = {"q": "{id}"}
    with pytest.raises(GenerateConfigError, match=r"must hold \{question\}"):
        endpoint_from(config)


def test_the_openai_kind_sends_the_versioned_prompt_and_reads_the_chat_completion(openai_config, cache):
    service = Service(reply=lambda body: CHAT_REPLY)
    outcome = generate(openai_config, cache, service)
    (first, *_) = service.bodies()
    assert service.requests[0].url.path == "/v1/chat/completions"
    assert first["model"] == "qwen2.5-coder-1.5b" and first["seed"] == 0 and first["max_tokens"] == 120
    prompt = first["messages"][0]["content"]
    assert "<<<CONTEXT 1" in prompt and "<<<QUESTION" in prompt
    table = outcome.table.to_pandas()
    assert table["generated_answer"].tolist() == ["Every second Tuesday."] * 3
    assert "retrieved_ids" not in table.columns  # the evaluation set's own retrieval stays with it
    assert outcome.summary["template"]["id"] == "answer-v1" and outcome.summary["models"] == ["qwen2.5-coder-1.5b"]


def test_the_openai_kind_without_context_sends_only_the_question(openai_config, cache):
    openai_config["openai"]["context"] = "none"
    service = Service(reply=lambda body: CHAT_REPLY)
    generate(openai_config, cache, service)
    prompt = service.bodies()[0]["messages"][0]["content"]
    assert "CONTEXT" not in prompt and "Glass goes to the bottle bank." not in prompt


# ---------------------------------------------------------------- faults

@pytest.fixture
def waits(monkeypatch) -> list[float]:
    seen: list[float] = []
    real_sleep = client_module.asyncio.sleep

    async def record(seconds, *args, **kwargs):
        seen.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(client_module.asyncio, "sleep", record)
    return seen


def test_a_429_is_retried_after_its_retry_after(config, cache, waits):
    service = Service({"Where does glass go?": [httpx.Response(429, headers={"Retry-After": "7"})]})
    outcome = generate(config, cache, service)
    assert waits == [7.0]
    assert outcome.summary["n_ok"] == 3 and outcome.summary["retries"] == 1 and outcome.summary["calls"] == 4
    assert outcome.table.to_pandas().set_index("id").loc["e1", "attempts"] == 2


def test_a_5xx_and_a_timeout_are_retried(config, cache, waits):
    service = Service({"Where does glass go?": [httpx.Response(503), httpx.ReadTimeout("slow")],
                       "When is the bin emptied?": [httpx.ConnectError("refused")]})
    outcome = generate(config, cache, service)
    assert outcome.summary["n_ok"] == 3 and outcome.summary["retries"] == 3 and len(waits) == 3


def test_a_row_whose_retries_run_out_is_a_failure_with_its_reason_never_an_answer(config, cache, waits):
    config["max_retries"] = 1
    service = Service({"Where does glass go?": [httpx.Response(503, text="overloaded")] * 2,
                       "When is the bin emptied?": [httpx.ReadTimeout("slow")] * 2})
    outcome = generate(config, cache, service)
    table = outcome.table.to_pandas().set_index("id")
    assert table.loc["e1", "status"] == "failed" and table.loc["e1", "failure"] == "HTTP 503"
    assert table.loc["e1", "error"] == "HTTP 503: overloaded"
    assert table.loc["e2", "failure"] == "timed out" and "no response within 300 s" in table.loc["e2", "error"]
    assert table.loc[["e1", "e2"], "generated_answer"].isna().all()  # missing, not empty, not invented
    assert table.loc["e3", "status"] == "ok"
    assert outcome.summary["failures"] == {"HTTP 503": 1, "timed out": 1}
    assert outcome.summary["failed_ids"] == ["e1", "e2"] and outcome.summary["n_failed"] == 2


def test_a_client_error_is_not_retried(config, cache, waits):
    service = Service({"Where does glass go?": [httpx.Response(400, text="bad question")]})
    outcome = generate(config, cache, service)
    row = outcome.table.to_pandas().set_index("id").loc["e1"]
    assert (row["status"], row["failure"], row["attempts"]) == ("failed", "HTTP 400", 1) and waits == []


def test_a_body_that_is_not_json_is_retried_then_a_failure(config, cache, waits):
    config["max_retries"] = 1
    service = Service({"Where does glass go?": [httpx.Response(200, text="<html>proxy</html>")] * 2})
    row = generate(config, cache, service).table.to_pandas().set_index("id").loc["e1"]
    assert row["failure"] == "not JSON" and "<html>proxy</html>" in row["error"] and row["attempts"] == 2


def test_a_server_that_dies_mid_run_loses_and_duplicates_nothing_and_a_resume_repeats_no_call(config, cache, waits):
    config.update(max_retries=0, concurrency=1)
    answered: list[str] = []

    def dies_after_two(request: httpx.Request) -> httpx.Response:
        if len(answered) == 2:
            raise httpx.ConnectError("connection refused")
        body = json.loads(request.content)
        answered.append(body["id"])
        return httpx.Response(200, json={**SERVICE_REPLY, "answer": f"answer to {body['id']}"})

    first = generate_answers(EXAMPLES, config, cache, http_transport=httpx.MockTransport(dies_after_two))
    table = first.table.to_pandas()
    assert table["id"].tolist() == ["e1", "e2", "e3"]
    assert table["status"].tolist() == ["ok", "ok", "failed"] and table.loc[2, "failure"] == "connection failed"
    service = Service(reply=lambda body: {**SERVICE_REPLY, "answer": f"answer to {body['id']}"})
    resumed = generate(config, cache, service)
    assert [b["id"] for b in service.bodies()] == ["e3"]  # only the row that failed is asked again
    table = resumed.table.to_pandas()
    assert table["id"].tolist() == ["e1", "e2", "e3"] and set(table["status"]) == {"ok"}
    assert table["generated_answer"].tolist() == ["answer to e1", "answer to e2", "answer to e3"]
    assert table["cached"].tolist() == [True, True, False]
    assert (resumed.summary["calls"], resumed.summary["cache_hits"]) == (1, 2)


# ---------------------------------------------------------------- the cache

def test_a_rerun_makes_no_call_and_gives_the_same_answers(config, cache):
    first = generate(config, cache, Service())
    service = Service()
    again = generate(config, cache, service)
    assert service.requests == [] and again.summary["calls"] == 0 and again.summary["cache_hits"] == 3
    assert (first.summary["n_latency_from_cache"], again.summary["n_latency_from_cache"]) == (0, 3)
    columns = ["id", "generated_answer", "retrieved_ids", "latency_ms", "prompt_tokens"]
    pd.testing.assert_frame_equal(first.table.to_pandas()[columns], again.table.to_pandas()[columns])


@pytest.mark.parametrize("change", [
    lambda c: c.update(system_version="examples/rag_service 2"),
    lambda c: c["http"].update(url="http://127.0.0.1:8091/answer"),
    lambda c: c["http"].update(body={"question": "{question}"}),
])
def test_the_system_version_the_endpoint_and_the_body_are_in_the_cache_key(config, cache, change):
    generate(config, cache, Service())
    change(config)
    service = Service()
    generate(config, cache, service)
    assert len(service.requests) == 3


def test_the_prompt_template_and_the_model_are_in_the_openai_kind_s_key(openai_config, cache):
    generate(openai_config, cache, Service(reply=lambda body: CHAT_REPLY))
    openai_config["openai"]["model"] = "another"
    service = Service(reply=lambda body: CHAT_REPLY)
    generate(openai_config, cache, service)
    assert len(service.requests) == 3


def test_a_response_the_mapping_cannot_read_is_not_cached_so_the_fixed_service_is_asked_again(config, cache):
    """docs/usage.md: a failed row's response is never cached. A service that answered with the
    wrong shape, once fixed, must be asked again rather than fail again from the cache."""
    broken = generate(config, cache, Service(reply=lambda body: {"error": "overloaded"}))
    assert set(broken.table.column("failure").to_pylist()) == {"response mapping"}
    assert len(cache) == 0
    service = Service()
    fixed = generate(config, cache, service)
    assert len(service.requests) == 3 and fixed.summary["n_ok"] == 3 and len(cache) == 3


def test_errors_are_never_cached(config, cache, waits):
    config["max_retries"] = 0
    generate(config, cache, Service({q: [httpx.Response(500)] for q in EXAMPLES["question"]}))
    assert len(cache) == 0


# ---------------------------------------------------------------- nothing generated, secrets, the summary

def test_a_run_in_which_every_row_failed_is_an_error_naming_the_first_reason(config, cache):
    config["http"]["response"]["answer"] = "data.answer"
    outcome = generate(config, cache, Service())
    with pytest.raises(GenerateFailed) as raised:
        check_something_generated(outcome.summary, outcome.table)
    message = str(raised.value)
    assert "every one of the 3 generation calls failed (3 response mapping)" in message
    assert "the expression 'data.answer' matched nothing in the response, which begins: {" in message


def test_a_header_comes_from_the_environment_and_its_value_never_reaches_the_outputs(config, cache, monkeypatch):
    secret = "sk-rag-7d3f9a2b41c0"
    monkeypatch.setenv("RAG_TOKEN", secret)
    config["http"]["headers"] = {"Authorization": {"env": "RAG_TOKEN", "prefix": "Bearer "}}
    config["max_retries"] = 0
    echo = httpx.Response(500, text=f"denied for Bearer {secret}")
    service = Service({"Where does glass go?": [echo]},
                      reply=lambda body: {"answer": "yes", "echo": secret, "model": secret})
    config["http"]["response"]["model"] = "model"
    outcome = generate(config, cache, service)
    assert {r.headers["authorization"] for r in service.requests} == {f"Bearer {secret}"}
    written = json.dumps(outcome.summary) + outcome.table.to_pandas().to_json()
    assert "[redacted]" in written and secret not in written
    assert outcome.summary["n_redacted"] == 2  # the two answered rows' model; e1's error is redacted too


def cache_bytes(cache: ReplyCache) -> bytes:
    """The cache file's bytes with its write-ahead log's, where recent entries sit."""
    return b"".join(path.read_bytes() for path in cache.path.parent.glob(cache.path.name + "*"))


def echoing_service(secret: str) -> Service:
    """A service that echoes the secret in the answer, a retrieved id and the model."""
    return Service(reply=lambda body: {**SERVICE_REPLY, "answer": f"answer for {secret}",
                                       "retrieved": [{"id": f"doc-{secret}", "text": "t", "score": 1.0}],
                                       "model": secret})


def test_the_cache_stores_only_redacted_responses(config, cache, monkeypatch):
    secret = "sk-rag-cache-5b8e1d"
    monkeypatch.setenv("RAG_TOKEN", secret)
    config["http"]["headers"] = {"Authorization": {"env": "RAG_TOKEN", "prefix": "Bearer "}}
    first = generate(config, cache, echoing_service(secret))
    assert first.summary["n_redacted"] == 3 and len(cache) == 3
    assert secret.encode() not in cache_bytes(cache)
    assert first.table.column("generated_answer").to_pylist()[0] == "answer for [redacted]"
    rerun = generate(config, cache, Service())
    assert rerun.summary["cache_hits"] == 3 and rerun.summary["n_redacted"] == 3  # still marked
    assert rerun.table.column("retrieved_ids").to_pylist()[0] == ["doc-[redacted]"]


def test_a_cached_response_holding_a_secret_is_dropped_counted_and_asked_again(config, cache):
    secret = "sk-rag-old-entry-93c1"
    # as a version before redaction did: the whole response stored, the echoed secret in it
    generate(config, cache, echoing_service(secret))  # no redactor knows the secret yet
    assert secret.encode() in cache_bytes(cache)
    service = Service()
    outcome = generate_answers(EXAMPLES, config, cache, http_transport=service.transport(),
                               redactor=Redactor([secret]))
    assert outcome.summary["n_cache_dropped"] == 3 and outcome.summary["cache_hits"] == 0
    assert len(service.requests) == 3
    assert secret.encode() not in cache_bytes(cache)


def test_a_header_whose_variable_is_not_set_is_a_config_error_naming_it(config, cache, monkeypatch):
    monkeypatch.delenv("RAG_TOKEN", raising=False)
    config["http"]["headers"] = {"X-Key": {"env": "RAG_TOKEN"}}
    with pytest.raises(GenerateConfigError, match="the header X-Key needs the environment variable RAG_TOKEN"):
        generate(config, cache, Service())


def test_the_latency_percentiles_are_numpy_s_over_the_answered_rows(config, cache, monkeypatch):
    config["max_retries"] = 0
    outcome = generate(config, cache, Service({"Who pays {id}?": [httpx.Response(404)]}))
    latencies = outcome.table.to_pandas().query("status == 'ok'")["latency_ms"].to_numpy()
    expected = np.percentile(latencies, [50, 90, 99])
    summary = outcome.summary["latency_ms"]
    assert summary["n"] == 2 and [summary["p50"], summary["p90"], summary["p99"]] == pytest.approx(expected)


def test_the_url_s_query_string_is_left_out_of_the_summary(config, cache):
    config["http"]["url"] = "http://127.0.0.1:8090/answer?key=hunter2"
    outcome = generate(config, cache, Service())
    assert outcome.summary["endpoint"] == "http://127.0.0.1:8090/answer"


def test_an_item_carries_the_example_s_fields():
    item = Item(id="e1", question="q", context="c")
    assert (item.retrieved_ids, item.retrieved_contexts) == (None, None)


# ---------------------------------------------------------------- profiles

def test_the_docs_profile_for_your_own_service_replaces_the_example_s_request_whole(tmp_path, monkeypatch):
    import re

    block = re.search(r"```yaml\n(# params/my-rag.yaml\n.*?)```", (ROOT / "docs" / "generate.md").read_text(), re.S).group(1)
    profile = tmp_path / "my-rag.yaml"
    profile.write_text(block.replace("extends: generate-local.yaml", f"extends: {ROOT / 'params' / 'generate-local.yaml'}"))
    section = load_profile(profile)["generate"]
    assert section["http"]["body"] == {"query": "{question}", "top_k": 3}
    assert section["http"]["response"] == {"answer": "data.answer", "retrieved_ids": "data.sources[].id",
                                           "model": "meta.model"}
    assert (section["service"], section["start_server"]) == (None, False)
    monkeypatch.setenv("RAG_TOKEN", "t0ken")
    endpoint = endpoint_from(section)
    assert endpoint.render(Item(id="e1", question="Where?", context="c")) == {"query": "Where?", "top_k": 3}
    assert endpoint.header_values() == {"Authorization": "Bearer t0ken"}


def test_generating_and_reading_a_predictions_file_at_once_is_refused(tmp_path):
    from evalbook.params import ParamsError

    with pytest.raises(ParamsError, match=r"keep one: -p predictions_path=null"):
        load_profile(ROOT / "params" / "generate-local.yaml", {"predictions_path": "answers.jsonl"})

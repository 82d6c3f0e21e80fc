"""Judge calls against a replaced HTTP transport: tokens, cache, retries, errors, modes, loops, keys."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest

from evalbook.judge import client as client_module
from evalbook.judge import groundedness
from evalbook.replycache import ReplyCache
from evalbook.judge.client import JudgeClient, JudgeConfigError, JudgeRequest, JudgeSettings
from evalbook.judge.stage import score_one

GOOD_TEXT = json.dumps({"statements": [
    {"statement": "Bins are collected on Tuesdays.", "verdict": 1, "justification": "Stated."}]})
KEY_PARTS = {"model": "m", "base_url": "http://judge.test/v1", "template_sha256": "a" * 64,
             "sampling": {"temperature": 0.0, "seed": 0, "max_tokens": 100,
                          "structured_output": "json_object_schema"},
             "metric": "groundedness", "metric_version": 1}


def settings(**changes) -> JudgeSettings:
    values = dict(base_url="http://judge.test/v1", model="m", api_key_env=None, temperature=0.0,
                  seed=0, max_tokens=100, structured_output="json_object_schema",
                  timeout_seconds=5.0, max_retries=2, concurrency=4, backoff_seconds=0.001)
    values.update(changes)
    return JudgeSettings(**values)


def request(example_id: str = "e1", prompt: str | None = None, metric: str = "groundedness",
            **key_changes) -> JudgeRequest:
    return JudgeRequest(metric=metric, example_id=example_id,
                        prompt=prompt if prompt is not None else f"judge the answer of {example_id}",
                        schema=groundedness.SCHEMA, key_parts={**KEY_PARTS, **key_changes})


def completion(content: str | None = GOOD_TEXT, finish_reason: str = "stop", prompt_tokens: int = 11,
               completion_tokens: int = 7, fingerprint: str | None = "fp_1") -> httpx.Response:
    return httpx.Response(200, json={
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
        "system_fingerprint": fingerprint})


class Server:
    """A MockTransport handler that records requests and answers from a script or a function."""

    def __init__(self, answer=None):
        self.answer = answer or (lambda req, body: completion())
        self.requests: list[httpx.Request] = []
        self.bodies: list[dict] = []
        self._lock = threading.Lock()

    def __call__(self, req: httpx.Request) -> httpx.Response:
        body = json.loads(req.content) if req.content else {}
        with self._lock:
            self.requests.append(req)
            self.bodies.append(body)
        return self.answer(req, body)

    @property
    def calls(self) -> int:
        return len(self.requests)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def scripted(*steps):
    """Answer the n-th call with steps[n] (a Response, or an exception to raise); the last repeats."""
    counter = {"n": 0}

    def answer(req, body):
        step = steps[min(counter["n"], len(steps) - 1)]
        counter["n"] += 1
        if isinstance(step, BaseException):
            raise step
        return step
    return answer


@pytest.fixture
def cache(tmp_path):
    cache = ReplyCache(tmp_path / "c.sqlite")
    yield cache
    cache.close()


@pytest.fixture
def sleeps(monkeypatch):
    waits: list[float] = []

    async def record(seconds, *args, **kwargs):
        waits.append(seconds)

    monkeypatch.setattr(client_module.asyncio, "sleep", record)
    return waits


# ---------------------------------------------------------------- tokens and cache

def test_tokens_are_counted_per_metric_from_usage(cache):
    server = Server(lambda req, body: completion(prompt_tokens=11, completion_tokens=7))
    client = JudgeClient(settings(), cache, http_transport=server.transport())
    requests = [request("e1"), request("e2"), request("e3", metric="relevance")]
    replies = client.run(requests)
    assert server.calls == 3
    assert [r.error for r in replies] == [None] * 3
    assert [(r.prompt_tokens, r.completion_tokens) for r in replies] == [(11, 7)] * 3
    grounded, relevant = client.stats.metric("groundedness"), client.stats.metric("relevance")
    assert (grounded.calls, grounded.prompt_tokens, grounded.completion_tokens) == (2, 22, 14)
    assert (relevant.calls, relevant.prompt_tokens, relevant.completion_tokens) == (1, 11, 7)
    assert client.stats.system_fingerprints == {"fp_1"}
    assert [r.request.example_id for r in replies] == ["e1", "e2", "e3"]  # in request order


def test_a_rerun_is_served_from_the_cache_with_no_call(cache):
    counter = {"n": 0}

    def answer(req, body):
        counter["n"] += 1
        return completion(content=GOOD_TEXT.replace("Tuesdays", f"Tuesdays {counter['n']}"))

    server = Server(answer)
    requests = [request("e1"), request("e2")]
    first = JudgeClient(settings(), cache, http_transport=server.transport()).run(requests)
    assert server.calls == 2 and len(cache) == 2
    rerun_client = JudgeClient(settings(), cache, http_transport=server.transport())
    second = rerun_client.run(requests)
    assert server.calls == 2  # zero new HTTP calls
    assert [r.text for r in second] == [r.text for r in first]
    assert all(r.cached for r in second) and not any(r.cached for r in first)
    stats = rerun_client.stats.metric("groundedness")
    assert (stats.calls, stats.cache_hits) == (0, 2)


def test_the_cache_persists_across_connections(tmp_path):
    server = Server()
    first = ReplyCache(tmp_path / "c.sqlite")
    JudgeClient(settings(), first, http_transport=server.transport()).run([request("e1")])
    first.close()
    second = ReplyCache(tmp_path / "c.sqlite")
    try:
        replies = JudgeClient(settings(), second, http_transport=server.transport()).run([request("e1")])
    finally:
        second.close()
    assert server.calls == 1 and replies[0].cached and replies[0].text == GOOD_TEXT


@pytest.mark.parametrize("change", [
    {"prompt": "judge the answer of e1, edited"},
    {"model": "another-model"},
    {"template_sha256": "b" * 64},
    {"base_url": "http://other.test/v1"},
    {"sampling": {"temperature": 0.7, "seed": 0, "max_tokens": 100, "structured_output": "json_object_schema"}},
    {"metric_version": 2},
])
def test_a_change_that_alters_the_reply_misses_the_cache(cache, change):
    server = Server()
    JudgeClient(settings(), cache, http_transport=server.transport()).run([request("e1")])
    assert server.calls == 1
    prompt = change.pop("prompt", None)
    changed = request("e1", prompt=prompt, **change)
    replies = JudgeClient(settings(), cache, http_transport=server.transport()).run([changed])
    assert server.calls == 2
    assert not replies[0].cached


def test_an_error_is_never_cached(cache, sleeps):
    bad = httpx.Response(400, json={"error": {"message": "bad request", "type": "invalid_request_error"}})
    server = Server(scripted(bad))
    replies = JudgeClient(settings(), cache, http_transport=server.transport()).run([request("e1")])
    assert server.calls == 1  # a 400 is not retried
    assert replies[0].error and "HTTP 400" in replies[0].error
    assert len(cache) == 0
    client = JudgeClient(settings(), cache, http_transport=server.transport())
    again = client.run([request("e1")])
    assert server.calls == 2  # the rerun asks again
    assert again[0].error and not again[0].cached
    assert client.stats.metric("groundedness").errors == 1


# ---------------------------------------------------------------- retries

def test_429_with_retry_after_then_500_then_success(cache, sleeps):
    server = Server(scripted(
        httpx.Response(429, headers={"Retry-After": "2"}, json={"error": {"message": "slow down"}}),
        httpx.Response(500, json={"error": {"message": "internal error"}}),
        completion()))
    client = JudgeClient(settings(), cache, http_transport=server.transport())
    reply = client.run([request("e1")])[0]
    assert server.calls == 3
    assert reply.error is None and reply.text == GOOD_TEXT and reply.attempts == 3
    assert len(sleeps) == 2
    assert sleeps[0] == 2  # Retry-After honoured exactly
    assert 0 <= sleeps[1] <= 0.001 * 2  # exponential ceiling base * 2**1, full jitter
    assert len(cache) == 1
    assert client.stats.metric("groundedness").calls == 3
    assert client.stats.metric("groundedness").errors == 0


def test_a_timeout_is_retried(cache, sleeps):
    server = Server(scripted(httpx.ReadTimeout("too slow"), completion()))
    reply = JudgeClient(settings(), cache, http_transport=server.transport()).run([request("e1")])[0]
    assert server.calls == 2
    assert reply.error is None and reply.text == GOOD_TEXT
    assert len(sleeps) == 1


def test_retries_give_up_after_max_retries(cache, sleeps):
    server = Server(scripted(httpx.Response(503, json={"error": {"message": "unavailable"}})))
    reply = JudgeClient(settings(max_retries=3), cache, http_transport=server.transport()).run([request("e1")])[0]
    assert server.calls == 4  # one call and three retries
    assert "HTTP 503" in reply.error
    assert len(sleeps) == 3
    assert len(cache) == 0


def test_a_server_that_dies_halfway_keeps_finished_judgments_and_a_rerun_resumes(cache, sleeps):
    def dying(req, body):
        prompt = body["messages"][0]["content"]
        if prompt.endswith("C"):
            raise httpx.ConnectError("connection refused")
        return completion(content=GOOD_TEXT)

    requests = [request("A", prompt="judge A"), request("B", prompt="judge B"), request("C", prompt="judge C")]
    server = Server(dying)
    client = JudgeClient(settings(concurrency=1, max_retries=2), cache, http_transport=server.transport())
    replies = client.run(requests)
    assert [r.error is None for r in replies] == [True, True, False]
    assert "connection failed" in replies[2].error
    assert server.calls == 2 + 3  # C tried 1 + max_retries times
    assert len(cache) == 2 and cache.get(requests[2].key) is None
    assert client.stats.metric("groundedness").errors == 1

    healthy = Server()
    rerun = JudgeClient(settings(), cache, http_transport=healthy.transport()).run(requests)
    assert healthy.calls == 1
    assert healthy.bodies[0]["messages"][0]["content"] == "judge C"
    assert [r.cached for r in rerun] == [True, True, False]
    assert all(r.error is None for r in rerun)


def test_an_unparseable_reply_is_asked_again_scored_as_unscored_and_never_cached(cache, sleeps):
    server = Server(lambda req, body: completion(content="I think it is mostly supported."))
    client = JudgeClient(settings(max_retries=2), cache, http_transport=server.transport())
    reply = client.run([request("e1")])[0]
    assert server.calls == 3 and reply.attempts == 3
    assert reply.error is None and reply.text == "I think it is mostly supported."
    assert sleeps == []  # a bad reply is asked again at once, without backoff
    score, detail = score_one("groundedness", reply, None, {}, embed=None)
    assert score.value is None
    assert "no JSON object" in score.reason
    assert detail["raw_reply"] == "I think it is mostly supported."
    assert len(cache) == 0  # only a reply that parsed is kept

    server.answer = lambda req, body: completion()
    again = JudgeClient(settings(), cache, http_transport=server.transport()).run([request("e1")])[0]
    assert server.calls == 4 and not again.cached  # the rerun asks again, and is answered
    assert score_one("groundedness", again, None, {}, embed=None)[0].value == 1.0
    assert len(cache) == 1


def test_an_unparseable_reply_left_in_the_cache_is_asked_again_and_replaced(cache):
    """A cache written before only parsed replies were kept must not replay its bad replies."""
    stale = request("e1")
    cache.put(stale.key, {"text": "no verdict today", "finish_reason": "stop", "prompt_tokens": 1,
                          "completion_tokens": 1, "system_fingerprint": None})
    server = Server()
    client = JudgeClient(settings(), cache, http_transport=server.transport())
    reply = client.run([stale])[0]
    assert server.calls == 1 and not reply.cached and reply.text == GOOD_TEXT
    assert cache.get(stale.key)["text"] == GOOD_TEXT
    assert client.stats.metric("groundedness").cache_hits == 0


MALFORMED_200 = {
    "a body that is not JSON": (b"<html>502 Bad Gateway</html>", "not JSON"),
    "an HTML body": (b"<html>502 Bad Gateway</html>", "not JSON"),
    "a body without choices": (json.dumps({"id": "x", "object": "chat.completion"}).encode(), "no choices"),
    "empty choices": (json.dumps({"id": "x", "object": "chat.completion", "choices": []}).encode(),
                      "no choices"),
    "a choice without a message": (json.dumps({"id": "x", "choices": [{"index": 0}]}).encode(),
                                   "no message"),
    "a JSON list": (b"[1, 2]", "not a JSON object"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_200))
def test_a_malformed_200_is_an_error_retried_with_backoff_and_never_cached(cache, sleeps, case):
    content, reason = MALFORMED_200[case]
    content_type = "text/html" if case == "an HTML body" else "application/json"
    malformed = httpx.Response(200, content=content, headers={"Content-Type": content_type})
    server = Server(scripted(malformed))
    client = JudgeClient(settings(max_retries=2), cache, http_transport=server.transport())
    reply = client.run([request("e1")])[0]
    assert server.calls == 3 and len(sleeps) == 2
    assert reply.error is not None and reply.error.startswith("malformed reply (HTTP 200)")
    assert reason in reply.error
    assert len(cache) == 0 and client.stats.metric("groundedness").errors == 1
    score, _ = score_one("groundedness", reply, None, {}, embed=None)
    assert score.value is None and "malformed reply" in score.reason


def test_a_malformed_200_then_a_good_reply_is_scored(cache, sleeps):
    malformed = httpx.Response(200, content=b"not json", headers={"Content-Type": "application/json"})
    server = Server(scripted(malformed, completion()))
    reply = JudgeClient(settings(), cache, http_transport=server.transport()).run([request("e1")])[0]
    assert server.calls == 2 and reply.error is None and reply.text == GOOD_TEXT
    assert len(cache) == 1


def test_an_unparseable_reply_that_is_fixed_on_retry_is_scored(cache, sleeps):
    server = Server(scripted(completion(content='{"statements": [{"verdict": 3}]}'), completion()))
    reply = JudgeClient(settings(), cache, http_transport=server.transport()).run([request("e1")])[0]
    assert server.calls == 2 and reply.text == GOOD_TEXT
    score, _ = score_one("groundedness", reply, None, {}, embed=None)
    assert score.value == 1.0


# ---------------------------------------------------------------- structured output

def test_json_schema_rejected_by_the_server_is_a_config_error(cache, sleeps):
    body = {"error": {"code": 500, "message": "Unrecognized response_format type: json_schema",
                      "type": "server_error"}}
    server = Server(scripted(httpx.Response(500, json=body)))
    client = JudgeClient(settings(structured_output="json_schema"), cache, http_transport=server.transport())
    with pytest.raises(JudgeConfigError) as info:
        client.run([request("e1")])
    assert "json_object_schema" in str(info.value)
    assert "structured_output" in str(info.value)
    assert len(cache) == 0


def test_a_plain_500_in_json_schema_mode_is_retried_not_a_config_error(cache, sleeps):
    server = Server(scripted(httpx.Response(500, json={"error": {"message": "overloaded"}}), completion()))
    reply = JudgeClient(settings(structured_output="json_schema"), cache,
                        http_transport=server.transport()).run([request("e1")])[0]
    assert server.calls == 2 and reply.error is None


@pytest.mark.parametrize(("mode", "expected"), [
    ("json_schema", {"type": "json_schema",
                     "json_schema": {"name": "judgment", "schema": groundedness.SCHEMA, "strict": True}}),
    ("json_object_schema", {"type": "json_object", "schema": groundedness.SCHEMA}),
    ("json_instructions", None),
])
def test_response_format_matches_the_mode(cache, mode, expected):
    server = Server()
    JudgeClient(settings(structured_output=mode), cache, http_transport=server.transport()).run([request("e1")])
    body = server.bodies[0]
    assert body.get("response_format") == expected
    assert body["model"] == "m" and body["temperature"] == 0.0 and body["seed"] == 0
    assert body["max_tokens"] == 100
    assert body["messages"] == [{"role": "user", "content": "judge the answer of e1"}]


def test_an_unknown_mode_is_refused(cache):
    with pytest.raises(JudgeConfigError, match="structured_output"):
        JudgeClient(settings(structured_output="xml"), cache)


# ---------------------------------------------------------------- concurrency and event loops

def test_concurrency_is_bounded(cache):
    state = {"in_flight": 0, "max": 0}

    async def handler(req):
        state["in_flight"] += 1
        state["max"] = max(state["max"], state["in_flight"])
        await asyncio.sleep(0.02)
        state["in_flight"] -= 1
        return completion()

    client = JudgeClient(settings(concurrency=2), cache, http_transport=httpx.MockTransport(handler))
    replies = client.run([request(f"e{i}") for i in range(8)])
    assert all(r.error is None for r in replies)
    assert state["max"] == 2


def test_run_works_inside_a_running_event_loop(cache):
    server = Server()
    client = JudgeClient(settings(), cache, http_transport=server.transport())

    async def main():
        assert asyncio.get_running_loop().is_running()
        return client.run([request("e1"), request("e2")])

    replies = asyncio.run(main())
    assert [r.text for r in replies] == [GOOD_TEXT, GOOD_TEXT]
    assert server.calls == 2


def test_on_reply_is_called_once_per_reply(cache):
    seen = []
    JudgeClient(settings(), cache, http_transport=Server().transport()).run(
        [request("e1"), request("e2")], on_reply=lambda r: seen.append(r.request.example_id))
    assert sorted(seen) == ["e1", "e2"]


# ---------------------------------------------------------------- the API key

def test_the_api_key_comes_from_the_named_environment_variable(cache, monkeypatch):
    monkeypatch.setenv("EVALBOOK_TEST_JUDGE_KEY", "sk-from-env")
    server = Server()
    JudgeClient(settings(api_key_env="EVALBOOK_TEST_JUDGE_KEY"), cache,
                http_transport=server.transport()).run([request("e1")])
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_a_missing_key_variable_is_a_config_error(cache, monkeypatch):
    monkeypatch.delenv("EVALBOOK_TEST_JUDGE_KEY", raising=False)
    server = Server()
    client = JudgeClient(settings(api_key_env="EVALBOOK_TEST_JUDGE_KEY"), cache,
                         http_transport=server.transport())
    with pytest.raises(JudgeConfigError, match="EVALBOOK_TEST_JUDGE_KEY"):
        client.run([request("e1")])
    assert server.calls == 0


def test_without_a_key_variable_a_placeholder_key_is_sent(cache, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-be-used")
    server = Server()
    JudgeClient(settings(api_key_env=None), cache, http_transport=server.transport()).run([request("e1")])
    assert server.requests[0].headers["authorization"] == f"Bearer {client_module.NO_KEY}"


def test_a_loopback_judge_is_reached_directly_even_with_a_proxy_set(tmp_path, monkeypatch):
    # A real HTTP server on 127.0.0.1, and a proxy variable pointing nowhere: the judge must
    # not send loopback traffic through the proxy.
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = completion().content

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        for variable in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
            monkeypatch.setenv(variable, "http://127.0.0.1:1")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        local = settings(base_url=f"http://127.0.0.1:{server.server_port}/v1", max_retries=0)
        assert local.loopback and not settings().loopback
        [reply] = JudgeClient(local, ReplyCache(tmp_path / "c.sqlite")).run([request()])
        assert reply.error is None and reply.text == GOOD_TEXT
    finally:
        server.shutdown()

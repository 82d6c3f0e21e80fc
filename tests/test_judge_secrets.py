"""The API key never reaches a file, and a judge with nothing eligible fails through run_judge."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from evalbook.judge.stage import NothingEligible
from evalbook.layout import JUDGE
from evalbook.pipeline import assemble_report, canonical_table, open_stage, run_judge, save_report
from faultserver import valid_reply

SECRET = "sk-test-DO-NOT-LEAK"


@pytest.fixture
def write_judge_profile(relocated_default_values, write_profile):
    """Write a profile of the sample's first 4 examples, the judge section changed as given."""

    def write(**judge_changes) -> Path:
        relocated_default_values["limit"] = 4
        relocated_default_values["judge"].update(judge_changes)
        return write_profile(relocated_default_values)

    return write


def reply_for(prompt: str) -> str:
    if "strict fact checker" in prompt:
        return json.dumps({"statements": [{"statement": "s", "verdict": 1, "justification": "j"}]})
    if "You do not see the question" in prompt:
        return json.dumps({"questions": ["What day are bins collected?", "Where does glass go?",
                                         "How often is collection?"]})
    return json.dumps({"criteria": [{"criterion": 1, "met": True, "rationale": "r"},
                                    {"criterion": 2, "met": True, "rationale": "r"}]})


class Server:
    """A judge on httpx's mock transport. `echo`: "error" answers each completion with HTTP 500
    whose message echoes the Authorization header; "content" puts the header in every string of
    the reply and in the fingerprint."""

    def __init__(self, expected_key: str | None, echo: str | None = None):
        self.expected_key = expected_key
        self.echo = echo
        self.models_checks = 0
        self.completions = 0
        self.authorizations: set[str] = set()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        authorization = request.headers.get("authorization", "")
        self.authorizations.add(authorization)
        if self.expected_key is not None and authorization != f"Bearer {self.expected_key}":
            return httpx.Response(401, json={"error": {"message": "bad key"}})
        if request.method == "GET" and request.url.path.endswith("/models"):
            self.models_checks += 1
            return httpx.Response(200, json={"object": "list", "data": [
                {"id": "gemma3-270m", "object": "model", "created": 0, "owned_by": "me"}]})
        if request.url.path.endswith("/extras/tokenize/count"):  # the pre-flight estimate, with the key
            return httpx.Response(200, json={"count": 12})
        assert request.url.path.endswith("/chat/completions"), request.url
        self.completions += 1
        if self.echo == "error":
            return httpx.Response(500, json={"error": {"message": f"bad key {authorization}"}})
        body = json.loads(request.content)
        content = reply_for(body["messages"][0]["content"])
        fingerprint = "fp_1"
        if self.echo == "content":
            content = valid_reply(body, text=f"the key is {authorization}")
            fingerprint = authorization
        return httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
            "system_fingerprint": fingerprint})


def files_holding(root: Path, needle: bytes) -> list[Path]:
    return [path for path in sorted(root.rglob("*")) if path.is_file() and needle in path.read_bytes()]


def test_the_api_key_leaves_no_trace_in_any_file(tmp_path, monkeypatch, write_judge_profile):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    ctx = open_stage(str(write_judge_profile(api_key_env="OPENAI_API_KEY")))
    server = Server(expected_key=SECRET)
    result = run_judge(ctx, canonical_table(ctx), http_transport=httpx.MockTransport(server))

    # the judge really ran with the key: it was sent, and the calls were answered
    assert server.models_checks == 1
    assert server.authorizations == {f"Bearer {SECRET}"}
    assert result["summary"]["status"] == "ran", result["summary"]["reason"]
    assert server.completions > 0
    assert result["summary"]["totals"]["errors"] == 0
    report_path = save_report(ctx, assemble_report(ctx))
    report = json.loads(report_path.read_text())
    assert report["judge_summary"]["status"] == "ran"

    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in written}
    assert {"judge-cache.sqlite", JUDGE, "report.json"} <= names
    assert files_holding(tmp_path, SECRET.encode("utf-8")) == []
    assert files_holding(tmp_path, SECRET.encode("utf-16-le")) == []


def judged_with_key(monkeypatch, write_judge_profile, server: Server):
    """judge.json and the report of the sample's first 4 examples, judged with the key by `server`."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    ctx = open_stage(str(write_judge_profile(api_key_env="OPENAI_API_KEY", max_retries=0)))
    result = run_judge(ctx, canonical_table(ctx), http_transport=httpx.MockTransport(server))
    save_report(ctx, assemble_report(ctx))
    return result


def test_a_judge_that_echoes_the_key_in_its_error_leaves_it_in_no_file(tmp_path, monkeypatch, write_judge_profile):
    result = judged_with_key(monkeypatch, write_judge_profile, Server(SECRET, echo="error"))
    summary = result["summary"]
    assert summary["totals"]["errors"] > 0 and summary["totals"]["n_redacted"] == summary["totals"]["errors"]
    reasons = [reason for metric in summary["metrics"].values() for reason in metric["unscored_reasons"]]
    assert reasons and all("bad key [redacted]" in reason for reason in reasons), reasons
    assert files_holding(tmp_path, SECRET.encode("utf-8")) == []


def test_a_judge_that_echoes_the_key_in_its_reply_leaves_it_in_no_file(tmp_path, monkeypatch, write_judge_profile):
    result = judged_with_key(monkeypatch, write_judge_profile, Server(SECRET, echo="content"))
    summary = result["summary"]
    assert summary["totals"]["errors"] == 0 and summary["totals"]["n_redacted"] == summary["totals"]["calls"] > 0
    written = tmp_path.rglob(JUDGE)
    assert "the key is [redacted]" in next(written).read_text("utf-8")
    assert all(metric["n_scored"] > 0 for metric in summary["metrics"].values())  # the verdicts still count
    assert files_holding(tmp_path, SECRET.encode("utf-8")) == []


def test_a_cache_entry_holding_the_key_is_dropped_counted_and_asked_again(tmp_path, monkeypatch, write_judge_profile):
    """An entry written before redaction existed: never served, and gone from the file."""
    import sqlite3

    first = judged_with_key(monkeypatch, write_judge_profile, Server(SECRET))
    calls = first["summary"]["totals"]["calls"]
    [cache_path] = tmp_path.rglob("judge-cache.sqlite")
    connection = sqlite3.connect(cache_path)
    with connection:
        changed = connection.execute("UPDATE replies SET reply = replace(reply, '\"fp_1\"', ?)",
                                     (json.dumps(f"fp {SECRET}"),)).rowcount
    connection.close()
    assert changed == calls and files_holding(tmp_path, SECRET.encode("utf-8")) == [cache_path]

    server = Server(SECRET)
    again = judged_with_key(monkeypatch, write_judge_profile, server)
    totals = again["summary"]["totals"]
    assert totals["n_cache_dropped"] == calls and totals["cache_hits"] == 0 and server.completions == calls
    assert files_holding(tmp_path, SECRET.encode("utf-8")) == []


def test_the_leak_check_would_see_a_key_in_the_cache(tmp_path):
    """The scan reads sqlite files too: a key stored there would be found."""
    from evalbook.replycache import ReplyCache

    cache = ReplyCache(tmp_path / "c.sqlite")
    cache.put("k", {"text": SECRET})
    cache.close()
    assert files_holding(tmp_path, SECRET.encode("utf-8")) == [tmp_path / "c.sqlite"]


def test_nothing_eligible_fails_the_judge_stage_loudly(write_judge_profile):
    ctx = open_stage(str(write_judge_profile(eligible_sources=["NoSuchPolicy"])))
    server = Server(expected_key=None)
    with pytest.raises(NothingEligible) as info:
        run_judge(ctx, canonical_table(ctx), http_transport=httpx.MockTransport(server))
    message = str(info.value)
    assert "4 answer(s)" in message and "none is eligible" in message
    assert "NoSuchPolicy" in message
    assert server.completions == 0
    assert not ctx.artifact(JUDGE).exists()  # no judge.json, so no report can claim a pass


def test_an_embedding_endpoint_that_echoes_the_key_raises_a_redacted_error(tmp_path, monkeypatch, default_judge_config):
    from evalbook.replycache import ReplyCache
    from evalbook.judge.stage import EmbeddingFailed, openai_embedder, settings_from

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    default_judge_config.update(api_key_env="OPENAI_API_KEY", max_retries=0)

    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"error": {"message": f"bad key {request.headers['authorization']}"}})

    cache = ReplyCache(tmp_path / "c.sqlite")
    embed = openai_embedder(settings_from(default_judge_config), "text-embedding-3-small", cache,
                            http_transport=httpx.MockTransport(echo))
    with pytest.raises(EmbeddingFailed) as raised:
        embed(["a question"])
    cache.close()
    assert "bad key [redacted]" in str(raised.value) and SECRET not in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__

"""A stand-in judge server and RAG service for load generation: valid JSON after a fixed delay.

It answers `POST /v1/chat/completions` for every evalbook judge metric (groundedness,
relevance, criteria) with a reply that the metric's parser and score math accept, after
sleeping a fixed delay, plus `GET /v1/models` (the judge stage's reachability check). The
reply's shape is read from the request's JSON Schema: `response_format` in the
json_schema and json_object_schema modes, the schema the stage appends to the prompt in
json_instructions mode. It judges nothing (every statement is supported, every criterion met):
it exists to measure the judge client, never the verdicts. `GET /stats` counts the requests
served, so a benchmark can check that a cached rerun made no call.

For the generate stage it also answers `POST /answer` (`{"id", "question"}`) the way
examples/rag_service does: `{"id", "answer", "retrieved": [{"id", "text"}], "model", "usage"}`,
after the same delay. The answer repeats the question and the retrieved documents are fixed: it
exists to measure the generate client, never the answers.

    python benchmarks/standin_server.py --delay-ms 200    # prints: listening on http://127.0.0.1:<port>/v1

`spawn_standin()` runs it in a subprocess (so its CPU time is not charged to the client under
test) and `StandinServer` in a thread of the calling process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from aiohttp import web

MODEL = "standin"
# The sentence evalbook.judge.stage.build_requests appends in json_instructions mode.
SCHEMA_IN_PROMPT = "The JSON must match this JSON Schema:\n"
ANSWER_BLOCK = re.compile(r"<<<ANSWER\n(.*?)\nANSWER>>>", re.DOTALL)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
MAX_STATEMENTS = 3
NOT_JUDGED = "stand-in server: not judged"
RETRIEVED = [{"id": f"standin-doc-{rank}", "text": f"Stand-in context number {rank}."} for rank in (1, 2, 3)]


class UnknownShape(ValueError):
    """A request whose reply shape the stand-in cannot tell (no schema, or an unknown one)."""


def request_schema(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema a chat request asks its reply to follow."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"]["schema"]
    if fmt.get("type") == "json_object" and "schema" in fmt:
        return fmt["schema"]
    prompt = body["messages"][-1]["content"]
    start = prompt.rfind(SCHEMA_IN_PROMPT)
    if start < 0:
        raise UnknownShape("the request carries no JSON Schema (response_format or prompt)")
    return json.loads(prompt[start + len(SCHEMA_IN_PROMPT):])


def judgment(schema: dict[str, Any], prompt: str) -> tuple[str, dict[str, Any]]:
    """(metric, reply object) for a judge request: a valid reply of the metric's shape."""
    properties = schema.get("properties", {})
    if "statements" in properties:
        found = ANSWER_BLOCK.search(prompt)
        sentences = [s for s in SENTENCE_END.split(found.group(1).strip()) if s] if found else []
        statements = sentences[:MAX_STATEMENTS] or ["The answer makes one claim."]
        return "groundedness", {"statements": [
            {"statement": s, "verdict": 1, "justification": NOT_JUDGED} for s in statements]}
    if "questions" in properties:
        n = properties["questions"]["minItems"]
        return "relevance", {"questions": [f"What does the answer say about point {i}?"
                                           for i in range(1, n + 1)]}
    if "criteria" in properties:
        n = properties["criteria"]["minItems"]
        return "criteria", {"criteria": [{"criterion": i, "met": True, "rationale": NOT_JUDGED}
                                         for i in range(1, n + 1)]}
    raise UnknownShape(f"no judge metric replies with the properties {sorted(properties)}")


def completion(body: dict[str, Any], text: str) -> dict[str, Any]:
    """An OpenAI chat.completion object carrying `text`, with rough token counts."""
    prompt = body["messages"][-1]["content"]
    usage = {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(text) // 4}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {"id": "chatcmpl-standin", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", MODEL), "system_fingerprint": "standin",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": usage}


def rag_answer(body: dict[str, Any]) -> dict[str, Any]:
    """The example RAG service's reply to `body`, with rough token counts."""
    answer = f"Stand-in answer to: {body['question']}"
    return {"id": body.get("id"), "answer": answer, "retrieved": RETRIEVED, "model": MODEL,
            "usage": {"prompt_tokens": len(body["question"]) // 4, "completion_tokens": len(answer) // 4}}


def make_app(delay_seconds: float) -> web.Application:
    """The aiohttp application; `GET /stats` returns its requests counted by metric and route."""
    app = web.Application()
    counts: Counter = Counter()

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        counts["chat_completions"] += 1
        await asyncio.sleep(delay_seconds)
        prompt = body["messages"][-1]["content"]
        try:
            metric, reply = judgment(request_schema(body), prompt)
        except UnknownShape as error:
            counts["unknown_shape"] += 1
            return web.json_response({"error": {"message": str(error), "type": "invalid_request_error"}},
                                     status=400)
        counts[metric] += 1
        return web.json_response(completion(body, json.dumps(reply)))

    async def answer(request: web.Request) -> web.Response:
        body = await request.json()
        if not isinstance(body, dict) or not isinstance(body.get("question"), str):
            counts["bad_answer_request"] += 1
            return web.json_response({"error": "the body must be a JSON object with a string question"},
                                     status=400)
        counts["answers"] += 1
        await asyncio.sleep(delay_seconds)
        return web.json_response(rag_answer(body))

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"delay_seconds": delay_seconds, **counts})

    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/answer", answer)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/stats", stats)
    return app


def bound_socket() -> socket.socket:
    """A listening socket on a free loopback port, bound before the server starts (no race)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    return sock


async def serve(app: web.Application, sock: socket.socket) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock, backlog=1024).start()
    return runner


def base_url_of(sock: socket.socket) -> str:
    return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def fetch_stats(base_url: str) -> dict[str, Any]:
    """The server's request counts, read over HTTP (works for a thread or a subprocess)."""
    import httpx

    root = base_url.rsplit("/v1", 1)[0]
    with httpx.Client(trust_env=False, timeout=10) as client:
        return client.get(root + "/stats").raise_for_status().json()


class StandinServer:
    """The stand-in on a background thread of this process: `with StandinServer(0.05) as s:`."""

    def __init__(self, delay_seconds: float):
        self.delay_seconds = delay_seconds
        self.app = make_app(delay_seconds)
        self._sock = bound_socket()
        self.base_url = base_url_of(self._sock)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="standin-server", daemon=True)
        self._runner: web.AppRunner | None = None

    def start(self) -> "StandinServer":
        self._thread.start()
        self._runner = asyncio.run_coroutine_threadsafe(serve(self.app, self._sock), self._loop).result(10)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def stats(self) -> dict[str, Any]:
        return fetch_stats(self.base_url)

    def __enter__(self) -> "StandinServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class SpawnedStandin:
    """Handle of a stand-in running in a subprocess."""

    def __init__(self, process: subprocess.Popen, base_url: str, delay_seconds: float):
        self.process, self.base_url, self.delay_seconds = process, base_url, delay_seconds

    def stats(self) -> dict[str, Any]:
        return fetch_stats(self.base_url)


@contextmanager
def spawn_standin(delay_seconds: float, startup_timeout: float = 30.0) -> Iterator[SpawnedStandin]:
    """Run the stand-in in a subprocess for the duration of the block."""
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--delay-ms", str(delay_seconds * 1000)],
        stdout=subprocess.PIPE, text=True)
    try:
        line = _first_line(process, startup_timeout)
        if not line.startswith("listening on "):
            raise RuntimeError(f"the stand-in server did not start (exit code {process.poll()}, "
                               f"first line {line!r})")
        yield SpawnedStandin(process, line.removeprefix("listening on ").strip(), delay_seconds)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _first_line(process: subprocess.Popen, timeout: float) -> str:
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not lines:
        raise RuntimeError(f"the stand-in server printed nothing within {timeout} s")
    return lines[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=float, default=200.0, help="fixed delay before each reply")
    args = parser.parse_args()
    sock = bound_socket()

    async def run() -> None:
        await serve(make_app(args.delay_ms / 1000), sock)
        print(f"listening on {base_url_of(sock)}", flush=True)
        await asyncio.Event().wait()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

"""A fault-injecting OpenAI-compatible judge server for tests, on 127.0.0.1 only.

It answers `POST <base_url>/chat/completions` and `GET <base_url>/models` (the judge stage's
reachability check) from a thread running the standard library's `http.server`, on a free
loopback port, so the real `JudgeClient` talks to it through the real `openai` client over real
HTTP. Use it as a context manager (or through a pytest fixture that does):

    from faultserver import FaultServer, valid_reply

    with FaultServer("server_error") as server:
        config["base_url"] = server.base_url          # http://127.0.0.1:<port>/v1
        ...run the judge...
        assert server.chat_calls == 3                  # chat calls received, whatever the answer
        server.set_mode("healthy")                     # same port, so the same cache keys
        ...run the judge again...

Modes (`MODES`); a fault mode answers every chat call with its fault unless `faults=N` is given,
in which case the first N calls get the fault and later ones are healthy:
- "healthy": a chat completion whose message text is `reply(body)`;
- "rate_limited": HTTP 429 with `Retry-After: <retry_after>`;
- "server_error": HTTP 500;
- "unavailable_then_ok": HTTP 503 for the first `faults` calls (default 1), then healthy;
- "hang": holds the call for `hang_seconds` (set it above the client's timeout), then answers;
- "die_after": answers `die_after` calls healthily, then stops accepting connections: later
  calls get connection errors (calls already connected are dropped without a reply);
  `set_mode` brings it back on the same port;
- "not_json": HTTP 200, `Content-Type: application/json`, a body that is not JSON;
- "no_choices": HTTP 200 with a JSON body that has no `choices`;
- "text_not_json": a well-formed completion whose message text is not JSON;
- "echo_key_error": HTTP 500 whose error message echoes the request's Authorization header
  ("bad key Bearer sk-..."), as a misconfigured proxy may;
- "echo_key_content": a valid reply with the Authorization header in every string field
  (statements, justifications, questions, rationales), and in the system fingerprint.

`reply` is a callable from the request's JSON body (a dict: `messages`, `response_format`, ...)
to the message text. The default, `valid_reply`, writes a reply that parses against the schema
of the metric asked for (groundedness, relevance or criteria); `valid_reply(body, text=...)`
puts the given text in every string field (statements, justifications, questions, rationales),
for example hostile text:

    FaultServer(reply=lambda body: valid_reply(body, text="<script>alert(1)</script>\\x00"))

`chat_calls` counts the chat calls received; `bodies` holds their JSON bodies, in order;
`authorizations` their Authorization headers; `models_calls` counts `GET /models`.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

MODES = ("healthy", "rate_limited", "server_error", "unavailable_then_ok", "hang", "die_after",
         "not_json", "no_choices", "text_not_json", "echo_key_error", "echo_key_content")
SCHEMA_IN_PROMPT = re.compile(r"The JSON must match this JSON Schema:\n(\{.*\})\s*$", re.DOTALL)
NOT_JSON_BODY = b"<html><body>502 Bad Gateway</body></html>"
NOT_JSON_TEXT = "The answer looks well grounded to me."


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def schema_of(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema a chat request asks for: from `response_format`, else from the prompt."""
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return response_format["json_schema"]["schema"]
    if "schema" in response_format:
        return response_format["schema"]
    match = SCHEMA_IN_PROMPT.search(body["messages"][-1]["content"])
    if match is None:
        raise ValueError("the request carries no JSON Schema")
    return json.loads(match.group(1))


def valid_reply(body: dict[str, Any], text: str = "Stated in the ground truth.") -> str:
    """A reply that parses against the request's schema, with `text` in every string field."""
    properties = schema_of(body)["properties"]
    if "statements" in properties:
        return json.dumps({"statements": [{"statement": text, "verdict": 1, "justification": text}]})
    if "questions" in properties:
        return json.dumps({"questions": [text] * properties["questions"]["minItems"]})
    if "criteria" in properties:
        n = properties["criteria"]["minItems"]
        return json.dumps({"criteria": [{"criterion": number, "met": True, "rationale": text}
                                        for number in range(1, n + 1)]})
    raise ValueError(f"a schema of no known metric: {sorted(properties)}")


def completion(text: str | None, fingerprint: str = "fp_fault") -> dict[str, Any]:
    return {"id": "chatcmpl-fault", "object": "chat.completion", "created": 0, "model": "fault-judge",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            "system_fingerprint": fingerprint}


class FaultServer:
    """The fault server; `base_url` ends in /v1, as the profile's `judge.base_url` does."""

    def __init__(self, mode: str = "healthy", *, reply: Callable[[dict[str, Any]], str] = valid_reply,
                 faults: int | None = None, retry_after: str = "0", hang_seconds: float = 30.0,
                 die_after: int = 1):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.reply = reply
        self.retry_after, self.hang_seconds, self.die_after = retry_after, hang_seconds, die_after
        self.bodies: list[dict[str, Any]] = []
        self.authorizations: set[str | None] = set()  # the Authorization headers of the chat calls
        self.models_calls = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._http: ThreadingHTTPServer | None = None
        self._death: threading.Thread | None = None
        self.set_mode(mode, faults=faults)

    @property
    def chat_calls(self) -> int:
        with self._lock:
            return len(self.bodies)

    def set_mode(self, mode: str, *, faults: int | None = None) -> None:
        """Switch the mode (counting faults afresh); brings a dead server back on its port."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        with self._lock:
            self.mode = mode
            self.faults = 1 if mode == "unavailable_then_ok" and faults is None else faults
            self._calls_in_mode = 0
            self._dead = False
        if self._death is not None:
            self._death.join()
            self._death = None
            self._listen()

    def __enter__(self) -> FaultServer:
        self._listen()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stopping.set()
        self._close()

    def _listen(self) -> None:
        handler = type("Handler", (_Handler,), {"fault_server": self})
        self._http = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._http.daemon_threads = True
        threading.Thread(target=self._http.serve_forever, name="fault-server", daemon=True).start()

    def _close(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            http.shutdown()
            http.server_close()

    def _die(self) -> None:
        # shutdown() waits for the serving loop, so it runs apart from the handler that asks for it
        self._death = threading.Thread(target=self._close, name="fault-server-death", daemon=True)
        self._death.start()

    def _next_chat(self, body: dict[str, Any]) -> str:
        """Record a chat call and decide what it gets: a mode's fault, "healthy" or "drop"."""
        with self._lock:
            self.bodies.append(body)
            if self._dead:
                return "drop"
            self._calls_in_mode += 1
            if self.mode == "die_after":
                if self._calls_in_mode <= self.die_after:
                    return "healthy"
                self._dead = True
                self._die()
                return "drop"
            if self.faults is not None and self._calls_in_mode > self.faults:
                return "healthy"
            return self.mode


class _Handler(BaseHTTPRequestHandler):
    fault_server: FaultServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            with self.fault_server._lock:
                self.fault_server.models_calls += 1
            self._send_json(200, {"object": "list", "data": [{"id": "fault-judge", "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        server = self.fault_server
        with server._lock:
            server.authorizations.add(self.headers.get("Authorization"))
        outcome = server._next_chat(body)
        if outcome == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif outcome == "rate_limited":
            self._send_json(429, {"error": {"message": "rate limited"}}, {"Retry-After": server.retry_after})
        elif outcome == "server_error":
            self._send_json(500, {"error": {"message": "internal error"}})
        elif outcome == "unavailable_then_ok":
            self._send_json(503, {"error": {"message": "loading model"}})
        elif outcome == "not_json":
            self._send(200, NOT_JSON_BODY, "application/json")
        elif outcome == "no_choices":
            self._send_json(200, {"id": "chatcmpl-fault", "object": "chat.completion", "created": 0,
                                  "model": "fault-judge"})
        elif outcome == "text_not_json":
            self._send_json(200, completion(NOT_JSON_TEXT))
        elif outcome == "echo_key_error":
            self._send_json(500, {"error": {"message": f"bad key {self.headers.get('Authorization')}"}})
        elif outcome == "echo_key_content":
            echoed = f"the key is {self.headers.get('Authorization')}"
            self._send_json(200, completion(valid_reply(body, text=echoed), fingerprint=echoed))
        else:
            if outcome == "hang" and server._stopping.wait(server.hang_seconds):
                return
            self._send_json(200, completion(server.reply(body)))

    def _send_json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(value).encode("utf-8"), "application/json", headers)

    def _send(self, status: int, data: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout), which is the point of some modes

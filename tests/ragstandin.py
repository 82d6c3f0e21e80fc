"""A stand-in for the user's RAG service, for the generate stage's run-level tests, on 127.0.0.1.

It answers `POST /answer` with the sample's recorded answer and retrieved ids for the question's
example (data/sample/predictions.jsonl), in the example service's shape, and `GET /health`. It
runs in a thread (`with RagStandIn() as service:`), or as a process the runner starts
(`python tests/ragstandin.py --port N`), which is how `generate.service` is tested.

- `fail_ids`: examples answered with HTTP 503 until `heal()`;
- `headers`: each request's headers, to check what the client sent;
- `questions`: the questions asked, in order.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "standin-rag-model"


def recorded() -> tuple[dict[str, str], dict[str, dict]]:
    """The sample's question -> id, and id -> its recorded prediction."""
    examples = [json.loads(line) for line in (ROOT / "data" / "sample" / "examples.jsonl").open()]
    predictions = [json.loads(line) for line in (ROOT / "data" / "sample" / "predictions.jsonl").open()]
    return {e["question"]: e["id"] for e in examples}, {p["id"]: p for p in predictions}


class RagStandIn:
    def __init__(self, port: int = 0, fail_ids: set[str] | None = None):
        self.ids, self.predictions = recorded()
        self.fail_ids = set(fail_ids or ())
        self.headers: list[dict[str, str]] = []
        self.questions: list[str] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/answer"

    def question_of(self, identifier: str) -> str:
        return next(question for question, known in self.ids.items() if known == identifier)

    def heal(self) -> None:
        self.fail_ids.clear()

    def answer(self, question: str) -> tuple[int, dict]:
        identifier = self.ids.get(question)
        if identifier is None:
            return 404, {"error": "unknown question"}
        if identifier in self.fail_ids:
            return 503, {"error": "overloaded"}
        prediction = self.predictions[identifier]
        reply = {"answer": prediction["generated_answer"], "model": MODEL,
                 "usage": {"prompt_tokens": 100, "completion_tokens": 20}}
        if prediction.get("retrieved_ids"):  # a row recorded without retrieval gets none
            reply["retrieved"] = [{"id": doc, "text": f"text of {doc}"} for doc in prediction["retrieved_ids"]]
        return 200, reply

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"status": "ok"}) if self.path == "/health" else self._send(404, {})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with standin.lock:
                    standin.headers.append(dict(self.headers))
                    standin.questions.append(body["question"])
                self._send(*standin.answer(body["question"]))

        return Handler

    def __enter__(self) -> "RagStandIn":
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    standin = RagStandIn(port=parser.parse_args().port)
    print(f"stand-in RAG service ready on {standin.url}", flush=True)
    standin.server.serve_forever()

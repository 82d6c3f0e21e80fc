"""A small RAG service to evaluate: BM25 retrieval over an examples file's contexts, then one chat
completion on an OpenAI-compatible server (llama.cpp's, by default) that answers from them.

    python examples/rag_service/service.py --examples data/sample/examples.jsonl --port 8090 \\
        --llm-base-url http://127.0.0.1:8080/v1 --llm-model qwen2.5-coder-1.5b --top-k 3

POST /answer {"question": "...", "id": "..."} returns the answer, the retrieved documents in rank
order, the model id the LLM server reported and its token usage; GET /health says it is up.
With a `session_id`, the question continues that conversation: the model is sent the session's
earlier questions and answers before it, and retrieval reads the earlier questions too, so that
a follow-up ("and glass?") finds its documents. Sessions live in memory, the latest
MAX_SESSIONS of them; a restart forgets them.
Exit codes: 2 for a bad flag, examples file or prompt template, 3 when it cannot listen (uvicorn's
start-up failure, such as a port in use), 130 for Ctrl-C; SIGTERM stops it gracefully.
"""

from __future__ import annotations

import argparse
import logging
import string
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import bm25s
import openai
import pandas as pd
import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, field_validator

PROMPT_PATH = Path(__file__).with_name("prompt.txt")
PROMPT_FIELDS = {"contexts", "question"}
READERS = {".jsonl": lambda path: pd.read_json(path, lines=True, dtype=False),
           ".csv": lambda path: pd.read_csv(path, dtype=str, keep_default_na=False),
           ".parquet": pd.read_parquet}
log = logging.getLogger("rag_service")


class StartupError(ValueError):
    """An examples file, a flag or the prompt template the service cannot start with."""


@dataclass(frozen=True)
class Document:
    id: str | int
    text: str


@dataclass(frozen=True)
class Hit:
    document: Document
    score: float


@dataclass(frozen=True)
class Settings:
    llm_model: str
    top_k: int = 3
    max_tokens: int = 200
    temperature: float = 0.0
    seed: int = 0
    llm_timeout: float = 120.0
    prompt: string.Template = field(default_factory=lambda: load_prompt(PROMPT_PATH))


def load_prompt(path: Path) -> string.Template:
    template = string.Template(path.read_text("utf-8"))
    if set(template.get_identifiers()) != PROMPT_FIELDS or not template.is_valid():
        raise StartupError(f"{path}: the template must use exactly ${{contexts}} and ${{question}}, "
                           f"found {sorted(template.get_identifiers())}")
    return template


def load_documents(path: Path, id_column: str, context_column: str) -> list[Document]:
    """The distinct (id, context) pairs of an examples file, in the order they first appear."""
    table = read_examples(path)
    for column, flag in ((id_column, "--id-column"), (context_column, "--context-column")):
        if column not in table.columns:
            columns = ", ".join(map(str, table.columns))
            raise StartupError(f"{path}: no column {column!r} (it has {columns}); name the right one "
                               f"with {flag}")
    documents: dict[str | int, tuple[int, Document]] = {}
    for row, (doc_id, text) in enumerate(zip(table[id_column].tolist(), table[context_column].tolist()), 1):
        check_cell(path, row, id_column, doc_id, allow_int=True)
        check_cell(path, row, context_column, text, allow_int=False)
        first_row, seen = documents.setdefault(doc_id, (row, Document(doc_id, text)))
        if seen.text != text:
            raise StartupError(f"{path}: id {doc_id!r} has two different contexts (rows {first_row} and "
                               f"{row}); an id must name one document")
    return [document for _, document in documents.values()]


def read_examples(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise StartupError(f"{path}: no such file (--examples)")
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise StartupError(f"{path}: unsupported file type {path.suffix!r} (--examples takes "
                           f"{', '.join(READERS)})")
    try:
        return reader(path)
    except (ValueError, OSError) as error:
        raise StartupError(f"{path}: cannot read it as {path.suffix[1:]}: {error}") from error


def check_cell(path: Path, row: int, column: str, value, allow_int: bool) -> None:
    """Rows count from 1, without a CSV header; an id may be a whole number, a context may not."""
    is_int = allow_int and isinstance(value, int) and not isinstance(value, bool)
    if not is_int and not (isinstance(value, str) and value.strip()):
        raise StartupError(f"{path}: row {row}, column {column!r}: expected non-empty text, got {value!r}")


class Bm25Index:
    """BM25 (bm25s's Lucene variant) over the documents, English stopwords removed, no stemming."""

    def __init__(self, documents: list[Document]):
        self.documents = documents
        self._retriever = bm25s.BM25()
        corpus_tokens = bm25s.tokenize([document.text for document in documents], stopwords="en",
                                       show_progress=False)
        self._retriever.index(corpus_tokens, show_progress=False)

    def search(self, question: str, k: int) -> list[Hit]:
        """The top k documents, best first; a question sharing no word with any scores 0 everywhere."""
        query_tokens = bm25s.tokenize(question, stopwords="en", show_progress=False)
        rows, scores = self._retriever.retrieve(query_tokens, k=k, show_progress=False)
        return [Hit(self.documents[row], float(score)) for row, score in zip(rows[0], scores[0])]


MAX_SESSIONS = 1000


class AnswerRequest(BaseModel):
    question: str
    id: str | int | None = None
    session_id: str | None = None

    @field_validator("question")
    @classmethod
    def question_is_not_blank(cls, question: str) -> str:
        if not question.strip():
            raise ValueError("must not be empty")
        return question


class LlmFailure(Exception):
    """The LLM server gave no answer; the message says why, without the question."""


def build_app(documents: list[Document], llm_client: openai.OpenAI, settings: Settings) -> FastAPI:
    """The service over these documents; the index is built here, once."""
    index = Bm25Index(documents)
    app = FastAPI(title="evalbook example RAG service")
    sessions: OrderedDict[str, list[tuple[str, str]]] = OrderedDict()  # id -> (question, answer) turns

    @app.exception_handler(RequestValidationError)
    async def invalid_body(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(map(str, problem['loc']))}: {problem['msg']}"
                             for problem in error.errors())
        return JSONResponse(status_code=422, content={
            "error": f"the body must be a JSON object with a non-empty string 'question' ({problems})"})

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "documents": len(documents), "model": settings.llm_model}

    @app.post("/answer")
    def answer(request: AnswerRequest):
        earlier = sessions.get(request.session_id, []) if request.session_id is not None else []
        query = " ".join([*(question for question, _ in earlier), request.question])
        hits = index.search(query, settings.top_k)
        history = [message for question, reply in earlier
                   for message in ({"role": "user", "content": question}, {"role": "assistant", "content": reply})]
        try:
            completion = complete(llm_client, settings, prompt_for(settings, request.question, hits), history)
        except LlmFailure as failure:
            log.warning("answer failed: %s", failure)
            return JSONResponse(status_code=502, content={"error": str(failure)})
        if request.session_id is not None:
            sessions[request.session_id] = [*earlier, (request.question, completion.choices[0].message.content or "")]
            sessions.move_to_end(request.session_id)
            while len(sessions) > MAX_SESSIONS:
                sessions.popitem(last=False)
        usage = completion.usage
        return {"id": request.id, "answer": completion.choices[0].message.content,
                "retrieved": [{"id": hit.document.id, "text": hit.document.text, "score": hit.score}
                              for hit in hits],
                "model": completion.model,
                "usage": {"prompt_tokens": usage.prompt_tokens if usage else None,
                          "completion_tokens": usage.completion_tokens if usage else None}}

    return app


def prompt_for(settings: Settings, question: str, hits: list[Hit]) -> str:
    contexts = "\n\n".join(f"Context {rank} ({hit.document.id}):\n{hit.document.text}"
                           for rank, hit in enumerate(hits, 1))
    return settings.prompt.substitute(contexts=contexts, question=question)


def complete(llm_client: openai.OpenAI, settings: Settings, prompt: str, history: list[dict] = ()):
    """One chat completion after the conversation's earlier messages, or LlmFailure with the reason."""
    try:
        completion = llm_client.chat.completions.create(
            model=settings.llm_model, messages=[*history, {"role": "user", "content": prompt}],
            max_tokens=settings.max_tokens, temperature=settings.temperature, seed=settings.seed)
    except openai.APITimeoutError as error:
        raise LlmFailure(f"the LLM server did not answer within {settings.llm_timeout:g} s") from error
    except openai.APIConnectionError as error:
        raise LlmFailure(f"could not reach the LLM server: {error}") from error
    except openai.APIStatusError as error:
        raise LlmFailure(f"the LLM server answered HTTP {error.status_code}") from error
    except openai.APIError as error:
        raise LlmFailure(f"the LLM server's reply is not a chat completion: {error}") from error
    if not completion.choices or completion.choices[0].message.content is None:
        raise LlmFailure("the LLM server's completion holds no answer text")
    return completion


class Server(uvicorn.Server):
    """uvicorn, saying once that it listens (the sockets exist only after its start-up)."""

    def __init__(self, config: uvicorn.Config, ready_message: str):
        super().__init__(config)
        self.ready_message = ready_message

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if self.started:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            log.info("ready on http://%s:%d: %s", host, port, self.ready_message)


def positive(kind):
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value
    return parse


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=Path, required=True, help=".jsonl, .csv or .parquet")
    parser.add_argument("--id-column", default="gold_id", help="the document id column")
    parser.add_argument("--context-column", default="context", help="the document text column")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--llm-base-url", required=True, help="an OpenAI-compatible /v1 URL")
    parser.add_argument("--llm-model", required=True, help="the model name sent to the server")
    parser.add_argument("--llm-timeout", type=positive(float), default=120.0, help="seconds per call")
    parser.add_argument("--top-k", type=positive(int), default=3)
    parser.add_argument("--max-tokens", type=positive(int), default=200)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def without_credentials(url: str) -> str:
    """The URL to log, without a user and password (which may be a key)."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    try:
        settings = Settings(llm_model=arguments.llm_model, top_k=arguments.top_k,
                            max_tokens=arguments.max_tokens, temperature=arguments.temperature,
                            seed=arguments.seed, llm_timeout=arguments.llm_timeout)
        documents = load_documents(arguments.examples, arguments.id_column, arguments.context_column)
        if settings.top_k > len(documents):
            raise StartupError(f"--top-k {settings.top_k} is more than the {len(documents)} documents "
                               f"of {arguments.examples}")
    except StartupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    # llama.cpp needs no key; a fixed dummy keeps any OPENAI_API_KEY in the environment from being sent
    llm_client = openai.OpenAI(base_url=arguments.llm_base_url, api_key="not-needed", max_retries=1,
                               timeout=settings.llm_timeout)
    ready = (f"{len(documents)} documents from {arguments.examples}, top-k {settings.top_k}, "
             f"model {settings.llm_model} at {without_credentials(arguments.llm_base_url)}")
    return serve(build_app(documents, llm_client, settings), arguments.host, arguments.port, ready)


def serve(app: FastAPI, host: str, port: int, ready_message: str) -> int:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s rag_service %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    # uvicorn's own start-up lines are silenced so that the ready line is the one to wait for
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    try:
        Server(config, ready_message).run()
    except KeyboardInterrupt:
        return 130
    return 0

if __name__ == "__main__":
    sys.exit(main())

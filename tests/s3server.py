"""A real S3-compatible HTTP server for tests: moto's standalone server on 127.0.0.1.

`MotoServer` runs `python -m moto.server` in a subprocess, keeps its access log (werkzeug's
`"PUT /bucket/key HTTP/1.1" 200` lines) to tell which requests reached it, and can switch on
moto's IAM enforcement. `StallingProxy` sits between a client and the server and holds a request
after a given number of bytes, so a test can kill the client in the middle of a body.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ACCESS_LOG_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    status: int


class MotoServer:
    """moto's S3 server on a free loopback port; use it as a context manager."""

    def __init__(self, log_path: Path):
        self.log_path = log_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> MotoServer:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self, timeout: float = 30) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=subprocess.DEVNULL, stderr=log, env=env)
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self._process.poll() is not None:
                raise RuntimeError(f"moto server exited with {self._process.returncode}:\n"
                                   + self.log_path.read_text(errors="replace"))
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"moto server did not answer on {self.url} within {timeout} s")
            time.sleep(0.1)

    def _request(self, method: str, path: str, body: bytes | None = None) -> int:
        # http.client ignores proxy variables, so the probe always reaches the loopback server
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            connection.request(method, path, body=body)
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()

    def _answers(self) -> bool:
        try:
            return self._request("GET", "/moto-api/") == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def requests(self) -> list[Request]:
        """Every request in the server's access log so far, in the order they were answered."""
        text = self.log_path.read_text(errors="replace")
        return [Request(m["method"], m["path"], int(m["status"]))
                for m in ACCESS_LOG_LINE.finditer(text)]

    def requests_since(self, mark: int) -> list[Request]:
        return self.requests()[mark:]

    def wait_for_request(self, method: str, path: str, mark: int, timeout: float = 10) -> Request:
        """The first `method path` request logged after `mark`, waiting for it to be answered."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for request in self.requests_since(mark):
                if (request.method, request.path) == (method, path):
                    return request
            time.sleep(0.05)
        raise AssertionError(f"the server logged no {method} {path} within {timeout} s")

    def enforce_iam(self, enforce: bool) -> None:
        """Switch moto's IAM checks on (every request must be signed by an IAM user whose
        policies allow its action) or off."""
        count = b"0" if enforce else b"inf"
        status = self._request("POST", "/moto-api/reset-auth", body=count)
        if status != 200:
            raise RuntimeError(f"moto refused /moto-api/reset-auth: HTTP {status}")


class StallingProxy:
    """A TCP proxy to 127.0.0.1:`upstream_port` that forwards only the first `limit` bytes a
    client sends, then holds the rest; `close()` drops every connection, so the server sees its
    request end in the middle."""

    def __init__(self, upstream_port: int, limit: int):
        self.upstream_port = upstream_port
        self.limit = limit
        self.forwarded = 0
        self.stalled = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._sockets += [client, upstream]
            threading.Thread(target=self._client_to_server, args=(client, upstream),
                             daemon=True).start()
            threading.Thread(target=self._server_to_client, args=(upstream, client),
                             daemon=True).start()

    def _client_to_server(self, client: socket.socket, upstream: socket.socket) -> None:
        try:
            while self.forwarded < self.limit:
                chunk = client.recv(min(65536, self.limit - self.forwarded))
                if not chunk:
                    return
                upstream.sendall(chunk)
                self.forwarded += len(chunk)
        except OSError:
            return
        self.stalled.set()

    @staticmethod
    def _server_to_client(upstream: socket.socket, client: socket.socket) -> None:
        try:
            while chunk := upstream.recv(65536):
                client.sendall(chunk)
        except OSError:
            return

    def close(self) -> None:
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


# The AWS settings a developer's machine may carry, which a test must not inherit.
AWS_VARIABLES_REPLACED = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                          "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE",
                          "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")


def aws_test_variables(endpoint_url: str, home: Path) -> dict[str, str]:
    """Test credentials and the loopback endpoint, with no config or credentials file (`home`
    holds neither), no instance metadata and no proxy for the loopback server."""
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1,localhost"]))
    return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": endpoint_url,
            "AWS_CONFIG_FILE": str(home / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true", "NO_PROXY": no_proxy, "no_proxy": no_proxy}


def use_test_credentials(monkeypatch: Any, endpoint_url: str, home: Path) -> None:
    """Point this process at the loopback server with test credentials only, dropping the AWS
    settings the machine may carry (AWS_VARIABLES_REPLACED)."""
    for name in AWS_VARIABLES_REPLACED:
        monkeypatch.delenv(name, raising=False)
    for name, value in aws_test_variables(endpoint_url, home).items():
        monkeypatch.setenv(name, value)


def new_bucket(endpoint_url: str) -> tuple[Any, str]:
    """An empty bucket with a fresh name, and the boto3 client that made it (for the test's own
    set-up and checks, never for the code under test)."""
    import boto3

    admin = boto3.client("s3", endpoint_url=endpoint_url, region_name="us-east-1",
                         aws_access_key_id="testing", aws_secret_access_key="testing")
    name = f"evalbook-{uuid.uuid4().hex[:12]}"
    admin.create_bucket(Bucket=name)
    return admin, name

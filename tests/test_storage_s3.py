"""evalbook.storage against a real S3-compatible server: moto's standalone server on 127.0.0.1.

The server's access log is the witness of what the writer sent and in which order: werkzeug logs
a request when it starts answering it, and the writer sends one request at a time, so the log
order is the send order and every request of a call is logged before the call returns.
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest

from evalbook.files import write_new
from evalbook.storage import SINGLE_PUT_LIMIT, StorageError, is_remote, join, publish_run, read_bytes
from s3server import AWS_VARIABLES_REPLACED, MotoServer, Request, StallingProxy, aws_test_variables, free_port

pytestmark = pytest.mark.slow  # moto's S3 server

RUN_ID = "3f6c2a1e-7b1d-4c55-9a0e-2d4b8e9f0c11"
DAY = "local/eval-runs/2026/11/30"
RUN_FILES = {
    "params.yaml": b"run_id: 3f6c2a1e-7b1d-4c55-9a0e-2d4b8e9f0c11\nlimit: 6\n",
    "provenance.json": b'{"git_commit": null}\n',
    "01_load.ipynb": json.dumps({"cells": [], "nbformat": 4}).encode(),
    "01_load.html": b"<!DOCTYPE html><html><body>loaded</body></html>\n",
    "canonical.parquet": os.urandom(300_000),
    "figures/similarity.png": os.urandom(20_000),
    "run.json": b'{"status": "succeeded"}\n',
}
# publish_run's order: sorted paths of the run folder (a folder sorts by its name), report last
UPLOAD_ORDER = ["01_load.html", "01_load.ipynb", "canonical.parquet", "figures/similarity.png",
                "params.yaml", "provenance.json", "run.json"]
REPORT = b'{"schema_version": "1.1", "run_id": "3f6c2a1e-7b1d-4c55-9a0e-2d4b8e9f0c11"}\n'


@dataclass
class LocalRun:
    root: Path
    run_dir: Path
    report: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with MotoServer(tmp_path_factory.mktemp("moto") / "access.log") as running:
        yield running


@pytest.fixture(autouse=True)
def aws_env(monkeypatch, tmp_path, server):
    """Test credentials and the loopback endpoint; nothing from the developer's own AWS setup."""
    for name in AWS_VARIABLES_REPLACED:
        monkeypatch.delenv(name, raising=False)
    for name, value in aws_test_variables(server.url, tmp_path).items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def admin(server):
    """A boto3 client for the test's own setup and checks, never used by the code under test."""
    return boto3.client("s3", endpoint_url=server.url, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture
def bucket(admin):
    name = f"evalbook-{uuid.uuid4().hex[:12]}"
    admin.create_bucket(Bucket=name)
    return name


@pytest.fixture
def run(tmp_path) -> LocalRun:
    """A finished run laid out like the runner's, with a temporary file of an interrupted write."""
    root = tmp_path / "outputs"
    run_dir = root / DAY / RUN_ID
    for name, data in RUN_FILES.items():
        write_new(run_dir / name, data)
    (run_dir / ".run.json.k2x9q1.tmp").write_bytes(b'{"status": "succ')
    report = root / DAY / f"{RUN_ID}.json"
    write_new(report, REPORT)
    return LocalRun(root, run_dir, report)


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(path.relative_to(root)): (path.read_bytes(), path.stat().st_mtime_ns)
            for path in sorted(root.rglob("*")) if path.is_file()}


def keys(admin, bucket: str) -> list[str]:
    return [item["Key"] for item in admin.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_a_run_is_published_under_the_dated_layout_byte_for_byte(run, bucket, admin, caplog):
    uploaded = publish_run(run.run_dir, run.report, run.root, f"s3://{bucket}/some/prefix")

    day_url = f"s3://{bucket}/some/prefix/{DAY}"
    assert uploaded == ([f"{day_url}/{RUN_ID}/{name}" for name in UPLOAD_ORDER]
                        + [f"s3://{bucket}/some/prefix/local/eval-runs/2026/11/30/{RUN_ID}.json"])
    assert sorted(keys(admin, bucket)) == sorted(url.removeprefix(f"s3://{bucket}/") for url in uploaded)
    for name, data in RUN_FILES.items():
        assert read_bytes(f"{day_url}/{RUN_ID}/{name}") == data, name
    assert read_bytes(f"{day_url}/{RUN_ID}.json") == REPORT
    html = admin.head_object(Bucket=bucket, Key=f"some/prefix/{DAY}/{RUN_ID}/01_load.html")
    assert html["ContentType"] == "text/html"
    assert any(".run.json.k2x9q1.tmp" in record.getMessage() for record in caplog.records)


def test_the_writer_sends_only_object_puts_and_the_report_last(run, bucket, server):
    mark = len(server.requests())
    uploaded = publish_run(run.run_dir, run.report, run.root, f"s3://{bucket}/prefix")

    sent = server.requests_since(mark)
    assert sent == [Request("PUT", "/" + url.removeprefix("s3://"), 200) for url in uploaded]
    assert sent[-1].path == f"/{bucket}/prefix/{DAY}/{RUN_ID}.json"


def test_publishing_needs_nothing_but_put_object_on_the_prefix(run, bucket, server, monkeypatch):
    iam = boto3.client("iam", endpoint_url=server.url, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    user = f"publisher-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    policy = {"Version": "2012-10-17",
              "Statement": [{"Effect": "Allow", "Action": "s3:PutObject",
                             "Resource": f"arn:aws:s3:::{bucket}/allowed/*"}]}
    iam.put_user_policy(UserName=user, PolicyName="publish-only", PolicyDocument=json.dumps(policy))
    access_key = iam.create_access_key(UserName=user)["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", access_key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", access_key["SecretAccessKey"])
    before = snapshot(run.root)

    server.enforce_iam(True)
    try:
        uploaded = publish_run(run.run_dir, run.report, run.root, f"s3://{bucket}/allowed")
        with pytest.raises(StorageError) as refused:
            publish_run(run.run_dir, run.report, run.root, f"s3://{bucket}/elsewhere")
        with pytest.raises(StorageError) as unreadable:
            read_bytes(uploaded[-1])
    finally:
        server.enforce_iam(False)

    assert len(uploaded) == len(RUN_FILES) + 1
    message = str(refused.value)
    assert "access denied" in message and "s3:PutObject" in message
    assert f"arn:aws:s3:::{bucket}/elsewhere/{DAY}/{RUN_ID}/01_load.html" in message
    assert "s3:GetObject" in str(unreadable.value)
    assert snapshot(run.root) == before


def test_a_missing_bucket_is_refused_and_never_created(run, server, admin):
    missing = f"evalbook-missing-{uuid.uuid4().hex[:8]}"
    before = snapshot(run.root)
    mark = len(server.requests())

    with pytest.raises(StorageError) as refused:
        publish_run(run.run_dir, run.report, run.root, f"s3://{missing}/prefix")

    message = str(refused.value)
    assert f"bucket {missing!r}" in message and "does not exist" in message
    assert f"prefix/{DAY}/{RUN_ID}/01_load.html" in message
    # the first refused file stops the publish: no bucket creation, no further file, no report
    assert server.requests_since(mark) == [
        Request("PUT", f"/{missing}/prefix/{DAY}/{RUN_ID}/01_load.html", 404)]
    assert missing not in [entry["Name"] for entry in admin.list_buckets()["Buckets"]]
    assert snapshot(run.root) == before


def run_folder_for(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A local root and the path of `name` in an otherwise empty run folder under it."""
    root = tmp_path / "local-root"
    (root / DAY / RUN_ID).mkdir(parents=True)
    return root, root / DAY / RUN_ID / name


def test_an_upload_killed_mid_body_leaves_no_object(bucket, server, admin, tmp_path):
    size = 32 * 2**20
    root, big = run_folder_for(tmp_path, "scored.parquet")
    big.write_bytes(os.urandom(size))
    key = f"prefix/{DAY}/{RUN_ID}/scored.parquet"
    proxy = StallingProxy(server.port, limit=4 * 2**20)
    script = ("import sys; from pathlib import Path; from evalbook.storage import publish_run; "
              "publish_run(Path(sys.argv[1]), None, Path(sys.argv[2]), sys.argv[3]); "
              "print('done', flush=True)")
    mark = len(server.requests())
    writer = subprocess.Popen([sys.executable, "-c", script, str(big.parent), str(root),
                               f"s3://{bucket}/prefix"],
                              env={**os.environ, "AWS_ENDPOINT_URL_S3": proxy.url},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proxy.stalled.wait(timeout=30), "the upload never got 4 MiB into its request"
        assert writer.poll() is None, writer.communicate()
        writer.send_signal(signal.SIGKILL)
        output, _ = writer.communicate(timeout=10)
    finally:
        proxy.close()
        if writer.poll() is None:
            writer.kill()
            writer.wait()

    assert writer.returncode == -signal.SIGKILL
    assert b"done" not in output
    assert proxy.forwarded == 4 * 2**20 < size
    # the server did receive the start of the PUT, and refused it once the connection dropped
    assert server.wait_for_request("PUT", f"/{bucket}/{key}", mark).status != 200
    assert keys(admin, bucket) == []
    assert admin.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert big.stat().st_size == size


@pytest.mark.parametrize("root, remote", [
    ("s3://bucket/prefix", True), ("S3://bucket", True), ("gs://bucket/prefix", True),
    ("outputs", False), (Path("outputs"), False), ("/srv/outputs", False),
    ("file:///srv/outputs", False), ("FILE:///srv/outputs", False), (None, False),
])
def test_is_remote(root, remote):
    assert is_remote(root) is remote


def test_there_is_one_is_remote():
    """params once had its own, case-sensitive one, which took FILE:// for a remote root."""
    import evalbook.params
    assert evalbook.params.is_remote is is_remote


def test_join_uses_slashes_for_urls_and_the_os_for_folders():
    assert join("s3://bucket/prefix/", "local", "/eval-runs/") == "s3://bucket/prefix/local/eval-runs"
    assert join("s3://bucket", "a.json") == "s3://bucket/a.json"
    assert join("outputs", "local", "eval-runs") == os.path.join("outputs", "local", "eval-runs")


def test_read_bytes_reads_local_files_and_s3_objects_with_one_get(bucket, admin, server, tmp_path):
    local = tmp_path / "report.json"
    local.write_bytes(REPORT)
    assert read_bytes(local) == read_bytes(str(local)) == read_bytes(local.as_uri()) == REPORT

    admin.put_object(Bucket=bucket, Key="runs/report.json", Body=REPORT)
    mark = len(server.requests())
    assert read_bytes(f"s3://{bucket}/runs/report.json") == REPORT
    assert server.requests_since(mark) == [Request("GET", f"/{bucket}/runs/report.json", 200)]


def test_read_bytes_names_what_is_missing(bucket, tmp_path):
    with pytest.raises(StorageError, match=f"s3://{bucket}/runs/absent.json: there is no such object"):
        read_bytes(f"s3://{bucket}/runs/absent.json")
    with pytest.raises(StorageError, match="absent.json"):
        read_bytes(tmp_path / "absent.json")


def test_missing_credentials_are_named_and_nothing_is_sent(run, bucket, server, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    mark = len(server.requests())
    with pytest.raises(StorageError, match="no AWS credentials found.*AWS_ACCESS_KEY_ID"):
        publish_run(run.run_dir, run.report, run.root, f"s3://{bucket}/prefix")
    assert server.requests_since(mark) == []


def test_an_unreachable_endpoint_is_named_and_the_local_copy_kept(run, bucket, monkeypatch):
    endpoint = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    before = snapshot(run.root)
    started = time.monotonic()
    with pytest.raises(StorageError) as refused:
        publish_run(run.run_dir, run.report, run.root, f"s3://{bucket}/prefix")
    assert time.monotonic() - started < 10
    assert f"could not connect to the S3 endpoint {endpoint}" in str(refused.value)
    assert snapshot(run.root) == before


def test_the_generic_endpoint_variable_is_honoured(bucket, admin, server, monkeypatch, tmp_path):
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
    root, local = run_folder_for(tmp_path, "run.json")
    local.write_bytes(b"{}\n")
    publish_run(local.parent, None, root, f"s3://{bucket}")
    assert admin.get_object(Bucket=bucket, Key=f"{DAY}/{RUN_ID}/run.json")["Body"].read() == b"{}\n"


def test_a_file_above_the_single_put_limit_is_refused_before_sending(bucket, server, tmp_path):
    root, huge = run_folder_for(tmp_path, "huge.parquet")
    with huge.open("wb") as sparse:
        sparse.truncate(SINGLE_PUT_LIMIT + 1)
    mark = len(server.requests())
    with pytest.raises(StorageError, match="at most 5 GiB"):
        publish_run(huge.parent, None, root, f"s3://{bucket}/prefix")
    assert server.requests_since(mark) == []


def test_a_run_still_running_or_a_non_s3_root_is_refused_before_sending(run, bucket, server):
    mark = len(server.requests())
    with pytest.raises(StorageError, match="only s3:// URLs"):
        publish_run(run.run_dir, run.report, run.root, "gs://bucket/prefix")
    (run.run_dir / "RUNNING").touch()
    with pytest.raises(StorageError, match="still running"):
        publish_run(run.run_dir, run.report, run.root, f"s3://{bucket}/prefix")
    assert server.requests_since(mark) == []

"""End-to-end: `python -m evalbook run|compare` publishing to a real S3-compatible server.

The server is moto's standalone server on 127.0.0.1 (tests/s3server.py); its access log is the
witness of which requests the command sent and in which order. Each pipeline run is a subprocess
with test credentials and the loopback endpoint in its environment, and nothing else from the
developer's AWS set-up.
"""

import json
import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import boto3
import pytest

from evalbook.report.document import validate_report
from evalbook.publish.catalog import collect_calibrations, collect_runs
from evalbook.storage import read_bytes
from paths import DEFAULT_PROFILE, ROOT
from s3server import AWS_VARIABLES_REPLACED as AWS_TEST_VARIABLES_REPLACED
from s3server import MotoServer, Request, aws_test_variables

pytestmark = pytest.mark.slow  # real runs on moto's S3 server

TRUNCATED = str(ROOT / "data" / "sample" / "predictions-truncated.jsonl")
PREFIX = "team/evals"
# Distinctive, so that finding one in an output can only mean it leaked there.
ACCESS_KEY_ID = "AKIAEVALBOOKLEAKCHECK7Q"
SECRET_ACCESS_KEY = "evalbook-secret-must-never-be-written-5d1f9c3a7e"
REGION = "us-east-1"
AWS_VARIABLES_REPLACED = (*AWS_TEST_VARIABLES_REPLACED, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
RUN_KEY = re.compile(r"^local/eval-runs/(?P<day>\d{4}/\d{2}/\d{2})/(?P<run_id>[0-9a-f-]{36})\.json$")


@dataclass
class CliRun:
    completed: subprocess.CompletedProcess
    local_root: Path
    # what the server logged while the command ran, and the bucket's keys right after it
    requests: list[Request]
    keys: list[str]
    utc_days: set[str]

    @property
    def last_line(self) -> str:
        return self.completed.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with MotoServer(tmp_path_factory.mktemp("moto") / "access.log") as running:
        yield running


def other_day_time_zone() -> str:
    """A POSIX TZ (no tzdata needed) whose local date is not today's UTC date: UTC-12 before noon
    UTC, UTC+14 after. A run dated by local time instead of UTC then lands on another day."""
    return "EVB+12" if datetime.now(timezone.utc).hour < 12 else "EVB-14"


@pytest.fixture(scope="module")
def aws_environment(server, tmp_path_factory) -> dict[str, str]:
    """The environment of every command under test: the test credentials, the loopback endpoint,
    and a local time zone on another day than UTC."""
    home = tmp_path_factory.mktemp("aws")
    environment = {name: value for name, value in os.environ.items()
                   if name not in AWS_VARIABLES_REPLACED}
    environment.update(aws_test_variables(server.url, home), AWS_ACCESS_KEY_ID=ACCESS_KEY_ID,
                       AWS_SECRET_ACCESS_KEY=SECRET_ACCESS_KEY, TZ=other_day_time_zone())
    return environment


@pytest.fixture(scope="module")
def in_process_aws(aws_environment):
    """The same environment in this process, for evalbook.storage.read_bytes."""
    with pytest.MonkeyPatch.context() as patch:
        for name in AWS_VARIABLES_REPLACED:
            patch.delenv(name, raising=False)
        for name, value in aws_environment.items():
            if name.startswith("AWS_") or name.lower() == "no_proxy":
                patch.setenv(name, value)
        yield


@pytest.fixture(scope="module")
def admin(server):
    """A boto3 client for the tests' own set-up and checks, never used by the code under test."""
    return boto3.client("s3", endpoint_url=server.url, region_name=REGION,
                        aws_access_key_id="admin", aws_secret_access_key="admin")


@pytest.fixture(scope="module")
def bucket(admin):
    name = f"evalbook-runs-{uuid.uuid4().hex[:10]}"
    admin.create_bucket(Bucket=name)
    return name


def utc_day() -> str:
    return f"{datetime.now(timezone.utc):%Y/%m/%d}"


def list_keys(admin, bucket: str, prefix: str = "") -> list[str]:
    pages = admin.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(item["Key"] for page in pages for item in page.get("Contents", []))


def cli(server, admin, bucket, environment, local_root: Path, command: list[str], iam: bool = False) -> CliRun:
    """Run `python -m evalbook <command>` from the project root, noting what the server saw;
    with `iam`, the server enforces IAM policies while the command runs (not while the admin
    lists the keys after it)."""
    if iam:
        server.enforce_iam(True)
    mark = len(server.requests())
    before = utc_day()
    try:
        completed = subprocess.run([sys.executable, "-m", "evalbook", *command], capture_output=True,
                                   text=True, cwd=ROOT, env=environment, check=False, timeout=900)
    finally:
        if iam:
            server.enforce_iam(False)
    days = {before, utc_day()}
    requests = server.requests_since(mark)
    existing = [entry["Name"] for entry in admin.list_buckets()["Buckets"]]
    keys = list_keys(admin, bucket) if bucket in existing else []
    return CliRun(completed, local_root, requests, keys, days)


def run_to_s3(server, admin, bucket, environment, local_root: Path, remote_root: str,
              *overrides: str, iam: bool = False) -> CliRun:
    command = ["run", "--params", str(DEFAULT_PROFILE), "-p", "limit=3", "-p", f"outputs_root={remote_root}",
               "-p", f"local_outputs_root={local_root}", "-p", "judge.base_url=http://127.0.0.1:1/v1"]
    for override in overrides:
        command += ["-p", override]
    return cli(server, admin, bucket, environment, local_root, command, iam)


def local_report(run: CliRun) -> Path:
    """The report the run wrote locally, found from the CLI's report URL."""
    key = run.last_line.removeprefix("s3://")
    relative = key.split("/", 1)[1].removeprefix(PREFIX + "/")
    return run.local_root / relative


def files_under(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file())


def failure(run: CliRun) -> str:
    return f"exit {run.completed.returncode}\nstdout:\n{run.completed.stdout[-3000:]}\n" \
           f"stderr:\n{run.completed.stderr[-5000:]}"


@pytest.fixture(scope="module")
def published(server, admin, bucket, aws_environment, tmp_path_factory) -> CliRun:
    local_root = tmp_path_factory.mktemp("local-outputs")
    return run_to_s3(server, admin, bucket, aws_environment, local_root, f"s3://{bucket}/{PREFIX}")


def test_a_cli_run_is_published_to_s3_byte_for_byte_with_the_report_last(published, bucket, admin,
                                                                            in_process_aws):
    assert published.completed.returncode == 0, failure(published)
    url_prefix = f"s3://{bucket}/{PREFIX}/"
    assert published.last_line.startswith(url_prefix), published.completed.stdout
    found = RUN_KEY.match(published.last_line.removeprefix(url_prefix))
    assert found, f"{published.last_line} is not <root>/local/eval-runs/<yyyy>/<mm>/<dd>/<run_id>.json"
    report, run_id = local_report(published), found["run_id"]
    run_dir = report.parent / run_id
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["status"] == "succeeded" and summary["run_id"] == run_id
    # the day in the key is the day the run started, in UTC
    started = datetime.fromisoformat(summary["started_at"])
    assert started.utcoffset().total_seconds() == 0
    assert found["day"] == f"{started:%Y/%m/%d}" and found["day"] in published.utc_days

    local_files = files_under(run_dir) + [report]
    assert len(local_files) > 10 and (run_dir / "figures").is_dir()
    expected_keys = {f"{PREFIX}/{path.relative_to(published.local_root).as_posix()}": path
                     for path in local_files}
    # exactly the run folder and the report: no index, no judge cache, nothing else
    assert published.keys == sorted(expected_keys)
    for key, path in expected_keys.items():
        body = admin.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert body == path.read_bytes(), key
    assert read_bytes(published.last_line) == report.read_bytes()
    validate_report(json.loads(read_bytes(published.last_line)))

    # before anything is written, one listing of the root looks for the run id; then one PUT
    # per object and nothing else (no reading, no bucket creation), the report last
    listing, *sent = published.requests
    assert listing.method == "GET" and listing.status == 200, listing
    assert listing.path.startswith(f"/{bucket}") and "list-type=2" in listing.path, listing
    assert all((request.method, request.status) == ("PUT", 200) for request in sent), sent
    assert sorted(request.path for request in sent) == sorted(f"/{bucket}/{key}" for key in expected_keys)
    assert sent[-1].path == f"/{bucket}/{PREFIX}/local/eval-runs/{found['day']}/{run_id}.json"
    assert f"published {len(expected_keys)} objects" in published.completed.stdout


def assert_nothing_written(run: CliRun) -> None:
    """No local folder, and the server saw no request that writes (the test's own calls to
    moto's control API aside)."""
    assert not run.local_root.exists(), sorted(run.local_root.rglob("*"))
    sent = [request for request in run.requests if not request.path.startswith("/moto-api/")]
    assert [request for request in sent if request.method != "GET"] == [], sent


def test_a_missing_bucket_exits_2_before_anything_is_written(server, admin, aws_environment, tmp_path):
    missing = f"evalbook-missing-{uuid.uuid4().hex[:10]}"
    run = run_to_s3(server, admin, missing, aws_environment, tmp_path / "local-outputs",
                    f"s3://{missing}/{PREFIX}")

    assert run.completed.returncode == 2, failure(run)
    stderr = run.completed.stderr
    assert f"the bucket {missing!r} does not exist" in stderr and "outputs_root" in stderr, stderr[-3000:]
    assert "Traceback" not in stderr
    assert_nothing_written(run)
    assert missing not in [entry["Name"] for entry in admin.list_buckets()["Buckets"]]


def test_no_credentials_exit_2_before_anything_is_written(server, admin, bucket, aws_environment,
                                                          tmp_path):
    environment = {name: value for name, value in aws_environment.items()
                   if name not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    run = run_to_s3(server, admin, bucket, environment, tmp_path / "local-outputs",
                    f"s3://{bucket}/{PREFIX}")

    assert run.completed.returncode == 2, failure(run)
    assert "no AWS credentials found" in run.completed.stderr, failure(run)
    assert run.requests == []
    assert_nothing_written(run)


@pytest.mark.parametrize("where", ["local/eval-runs/2025/01/02/{run_id}.json",
                                   "staging/eval-runs/2024/12/31/{run_id}/run.json"])
def test_a_run_id_already_on_s3_on_another_day_exits_2(server, admin, bucket, aws_environment,
                                                       tmp_path, where):
    run_id = str(uuid.uuid4())
    earlier = f"{PREFIX}/{where.format(run_id=run_id)}"
    admin.put_object(Bucket=bucket, Key=earlier, Body=b"{}")
    run = run_to_s3(server, admin, bucket, aws_environment, tmp_path / "local-outputs",
                    f"s3://{bucket}/{PREFIX}", f"run_id={run_id}")

    assert run.completed.returncode == 2, failure(run)
    location = earlier.removesuffix("/run.json").removesuffix(".json")
    assert f"run {run_id} already exists at s3://{bucket}/{location}" in run.completed.stderr
    assert_nothing_written(run)
    assert [key for key in run.keys if run_id in key] == [earlier]


@pytest.fixture
def iam_user(server, bucket, aws_environment):
    """The command's environment with the keys of a new IAM user allowed only `actions`."""

    def make(*statements: tuple[str, str]) -> dict[str, str]:
        iam = boto3.client("iam", endpoint_url=server.url, region_name=REGION,
                           aws_access_key_id="admin", aws_secret_access_key="admin")
        user = f"runner-{uuid.uuid4().hex[:8]}"
        iam.create_user(UserName=user)
        policy = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": action, "Resource": resource} for action, resource in statements]}
        iam.put_user_policy(UserName=user, PolicyName="only", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        return {**aws_environment, "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
                "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}

    yield make
    server.enforce_iam(False)


def run_as(server, admin, bucket, environment, local_root, *overrides) -> CliRun:
    """A run to the test prefix with the server enforcing the IAM user's policy."""
    return run_to_s3(server, admin, bucket, environment, local_root, f"s3://{bucket}/{PREFIX}", *overrides,
                     iam=True)


def test_a_writer_allowed_only_put_object_refuses_a_given_run_id_it_cannot_check(
        server, admin, bucket, iam_user, tmp_path):
    environment = iam_user(("s3:PutObject", f"arn:aws:s3:::{bucket}/{PREFIX}/*"))
    run_id = str(uuid.uuid4())
    run = run_as(server, admin, bucket, environment, tmp_path / "local-outputs", f"run_id={run_id}")

    assert run.completed.returncode == 2, failure(run)
    stderr = run.completed.stderr
    assert f"whether run {run_id} already exists" in stderr and "s3:ListBucket" in stderr, stderr[-3000:]
    assert f"arn:aws:s3:::{bucket}" in stderr and "run_id was given" in stderr
    assert_nothing_written(run)


def test_a_writer_allowed_only_put_object_publishes_a_fresh_run_and_says_what_it_could_not_check(
        server, admin, bucket, iam_user, tmp_path):
    environment = iam_user(("s3:PutObject", f"arn:aws:s3:::{bucket}/{PREFIX}/*"))
    run = run_as(server, admin, bucket, environment, tmp_path / "local-outputs")

    assert run.completed.returncode == 0, failure(run)
    assert "could not be checked" in run.completed.stderr and "fresh uuid4" in run.completed.stderr
    assert run.last_line.startswith(f"s3://{bucket}/{PREFIX}/") and run.last_line.endswith(".json")
    assert run.last_line.removeprefix(f"s3://{bucket}/") in run.keys


def test_a_refused_upload_fails_the_command_and_keeps_the_run_locally(
        server, admin, bucket, iam_user, tmp_path):
    environment = iam_user(("s3:ListBucket", f"arn:aws:s3:::{bucket}"))
    local_root = tmp_path / "local-outputs"
    run = run_as(server, admin, bucket, environment, local_root)

    assert run.completed.returncode == 1, failure(run)
    (report,) = local_root.glob("local/eval-runs/*/*/*/*.json")
    run_dir = report.with_suffix("")
    stderr = run.completed.stderr
    assert "access denied" in stderr and "s3:PutObject" in stderr, stderr[-3000:]
    assert f"the run is complete locally and kept at {run_dir}" in stderr and str(report) in stderr
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["status"] == "succeeded" and summary["report"] == str(report)
    assert not (run_dir / "RUNNING").exists() and not (run_dir / "FAILED").exists()
    # the run says it is not on S3, and so does the local index beside its status
    not_uploaded = (run_dir / "NOT_UPLOADED").read_text()
    assert not_uploaded.startswith(f"not uploaded to s3://{bucket}/{PREFIX}: ") and "access denied" in not_uploaded
    (row,) = [row for row in collect_runs(local_root) if row["run_dir"] == run_dir]
    assert row["status"] == "succeeded" and row["reason"] == not_uploaded.strip()
    assert f"not uploaded to s3://{bucket}/{PREFIX}" in (local_root / "index.html").read_text()
    validate_report(json.loads(report.read_text()))
    # the first refused PUT stopped the publish
    puts = [request for request in run.requests if request.method == "PUT"]
    first_key = sorted(files_under(run_dir))[0].relative_to(local_root).as_posix()
    assert puts == [Request("PUT", f"/{bucket}/{PREFIX}/{first_key}", 403)]
    assert [key for key in run.keys if run_dir.name in key] == []


def test_credentials_are_never_written_to_a_run_or_an_uploaded_object(published, bucket, admin):
    assert published.completed.returncode == 0, failure(published)
    run_id = RUN_KEY.match(published.last_line.split(f"/{PREFIX}/", 1)[1])["run_id"]
    written = {str(path): path.read_bytes() for path in files_under(published.local_root)}
    written.update({f"s3://{bucket}/{key}": admin.get_object(Bucket=bucket, Key=key)["Body"].read()
                    for key in list_keys(admin, bucket)})
    written["stdout"] = published.completed.stdout.encode()
    written["stderr"] = published.completed.stderr.encode()
    kinds = {Path(name).suffix for name in written}
    assert {".ipynb", ".html", ".yaml", ".json", ".parquet"} <= kinds
    # the scan reads what it should: the run id is in the run's own records
    assert sum(run_id.encode() in data for data in written.values()) >= 5
    for secret in (SECRET_ACCESS_KEY, ACCESS_KEY_ID):
        leaked = [name for name, data in written.items() if secret.encode() in data]
        assert leaked == [], f"{secret} appears in {leaked}"


def test_two_s3_runs_are_compared_from_s3_and_the_comparison_published_beside_the_candidate(
        published, server, admin, bucket, aws_environment, in_process_aws, relocated_default_values,
        write_profile):
    # the baseline is the published run of the first test; the candidate has truncated answers
    assert published.completed.returncode == 0, failure(published)
    remote_root = f"s3://{bucket}/{PREFIX}"
    candidate = run_to_s3(server, admin, bucket, aws_environment, published.local_root, remote_root,
                          f"predictions_path={TRUNCATED}")
    assert candidate.completed.returncode == 0, failure(candidate)
    baseline_url, candidate_url = published.last_line, candidate.last_line
    assert candidate_url.startswith(remote_root + "/") and candidate_url != baseline_url

    relocated_default_values.update(outputs_root=remote_root, local_outputs_root=str(published.local_root))
    params = write_profile(relocated_default_values, "s3-profile.yaml")
    compared = cli(server, admin, bucket, aws_environment, published.local_root,
                   ["compare", "--params", str(params), "--baseline", baseline_url,
                    "--candidate", candidate_url, "--resamples", "500"])
    assert compared.completed.returncode == 0, failure(compared)

    # both reports were read from S3
    for url in (baseline_url, candidate_url):
        path = "/" + url.removeprefix("s3://")
        assert Request("GET", path, 200) in compared.requests, compared.requests

    candidate_dir = candidate_url.rsplit("/", 1)[0]
    comparison_url = compared.last_line
    baseline_id = RUN_KEY.match(baseline_url.split(f"/{PREFIX}/", 1)[1])["run_id"]
    candidate_id = RUN_KEY.match(candidate_url.split(f"/{PREFIX}/", 1)[1])["run_id"]
    name = re.fullmatch(re.escape(candidate_dir) + r"/comparisons/(?P<id>[^/]+)\.json", comparison_url)
    assert name, f"{comparison_url} is not beside the candidate {candidate_url}"
    assert name["id"].startswith(f"{baseline_id[:8]}-vs-{candidate_id[:8]}-")
    (folder_line,) = [line for line in compared.completed.stdout.splitlines()
                      if line.startswith("comparison folder: ")]
    output_dir = Path(folder_line.removeprefix("comparison folder: "))
    local_comparison = output_dir.parent / f"{name['id']}.json"

    body = read_bytes(comparison_url)
    assert body == local_comparison.read_bytes()
    comparison = json.loads(body)
    assert comparison["baseline"]["location"] == baseline_url
    assert comparison["candidate"]["location"] == candidate_url
    (f1,) = [row for row in comparison["metrics"] if row["metric"] == "bertscore_f1"]
    assert f1["mean_delta"] is not None and f1["mean_delta"] < 0, f1

    # the comparison folder went up beside it too, byte for byte, and its JSON last
    remote_folder = f"{candidate_dir}/comparisons/{name['id']}".removeprefix(f"s3://{bucket}/")
    local_files = files_under(output_dir)
    assert list_keys(admin, bucket, remote_folder + "/") == sorted(
        f"{remote_folder}/{path.relative_to(output_dir).as_posix()}" for path in local_files)
    for path in local_files:
        key = f"{remote_folder}/{path.relative_to(output_dir).as_posix()}"
        assert admin.get_object(Bucket=bucket, Key=key)["Body"].read() == path.read_bytes(), key
    puts = [request for request in compared.requests if request.method == "PUT"]
    assert puts[-1] == Request("PUT", "/" + comparison_url.removeprefix("s3://"), 200)


def test_the_trend_reads_the_runs_under_an_s3_root_from_their_headlines(
        published, server, admin, bucket, aws_environment, relocated_default_values, write_profile, tmp_path):
    assert published.completed.returncode == 0, failure(published)
    remote_root = f"s3://{bucket}/{PREFIX}"
    if sum(key.endswith("/headline.json") for key in list_keys(admin, bucket, PREFIX)) < 2:
        # run alone: the comparison test's truncated candidate is not there yet
        candidate = run_to_s3(server, admin, bucket, aws_environment, published.local_root, remote_root,
                              f"predictions_path={TRUNCATED}")
        assert candidate.completed.returncode == 0, failure(candidate)
    run_id = RUN_KEY.match(published.last_line.removeprefix(remote_root + "/"))["run_id"]
    headline_key = f"{published.last_line.removeprefix(f's3://{bucket}/').removesuffix('.json')}/headline.json"
    assert headline_key in published.keys
    # a run published before headlines existed: its report is counted, never read (other tests
    # plant such reports in the shared bucket too: those already there are counted from the listing)
    keys = list_keys(admin, bucket, PREFIX)
    already = sum(1 for key in keys if RUN_KEY.match(key.removeprefix(f"{PREFIX}/"))
                  and f"{key.removesuffix('.json')}/headline.json" not in keys)
    old_report = f"{PREFIX}/local/eval-runs/2020/01/01/{uuid.uuid4()}.json"
    admin.put_object(Bucket=bucket, Key=old_report, Body=b"{}")
    # a fresh local root: nothing of the runs is on this machine, so all is read from S3
    local_root = tmp_path / "local-outputs"
    relocated_default_values.update(outputs_root=remote_root, local_outputs_root=str(local_root))
    params = write_profile(relocated_default_values, "s3-trend.yaml")
    drawn = cli(server, admin, bucket, aws_environment, local_root,
                ["trend", "--params", str(params), "--min-paired", "3"])
    assert drawn.completed.returncode == 0, failure(drawn)
    assert Path(drawn.last_line) == local_root / "trend.html" and Path(drawn.last_line).is_file()
    assert Request("GET", f"/{bucket}/{headline_key}", 200) in drawn.requests
    assert not any(request.method == "PUT" for request in drawn.requests)  # the trend writes nothing there
    # no report is read: only listings, headlines and the values the steps pair
    gets = [request.path for request in drawn.requests if request.method == "GET" and "list-type" not in request.path]
    assert gets and all(path.endswith(("/headline.json", "/values.parquet")) for path in gets), gets
    document = json.loads((local_root / "trend.json").read_text())
    assert document["left_out"] == {"published without a headline": already + 1}, document["left_out"]
    [series] = [s for s in document["series"] if s["kind"] == "scoring"]
    ids = [point["run_id"] for point in series["points"]]
    assert run_id in ids and len(ids) >= 2, ids
    # each step paired the runs' 3 examples by id, from their values.parquet
    steps = [point["steps"]["bertscore_f1"] for point in series["points"][1:]]
    assert all(step["status"] != "not paired" and step["n"] == 3 for step in steps), steps


def test_a_run_on_s3_is_calibrated_from_s3_and_the_calibration_published_into_its_folder(
        published, server, admin, bucket, aws_environment, in_process_aws, relocated_default_values,
        write_profile):
    assert published.completed.returncode == 0, failure(published)
    remote_root = f"s3://{bucket}/{PREFIX}"
    relocated_default_values.update(outputs_root=remote_root, local_outputs_root=str(published.local_root))
    params = write_profile(relocated_default_values, "s3-calibrate.yaml")
    report_url = published.last_line
    calibrated = cli(server, admin, bucket, aws_environment, published.local_root,
                     ["calibrate", "--params", str(params), "--run", report_url,
                      "--labels", str(ROOT / "data" / "sample" / "labels.csv"), "--resamples", "200"])
    assert calibrated.completed.returncode == 0, failure(calibrated)
    assert Request("GET", "/" + report_url.removeprefix("s3://"), 200) in calibrated.requests

    url = calibrated.last_line
    name = re.fullmatch(re.escape(report_url.removesuffix(".json")) + r"/calibration/(?P<id>[^/]+)\.json", url)
    assert name, f"{url} is not in the calibration folder of the run {report_url}"
    (folder_line,) = [line for line in calibrated.completed.stdout.splitlines()
                      if line.startswith("calibration folder: ")]
    output_dir = Path(folder_line.removeprefix("calibration folder: "))
    body = read_bytes(url)
    assert body == (output_dir.parent / f"{name['id']}.json").read_bytes()
    doc = json.loads(body)
    assert doc["run"]["location"] == report_url and doc["matching"]["n_matched"] == 3
    remote_folder = f"{report_url.removesuffix('.json')}/calibration/{name['id']}".removeprefix(f"s3://{bucket}/")
    assert list_keys(admin, bucket, remote_folder + "/") == sorted(
        f"{remote_folder}/{path.relative_to(output_dir).as_posix()}" for path in files_under(output_dir))
    puts = [request for request in calibrated.requests if request.method == "PUT"]
    assert puts[-1] == Request("PUT", "/" + url.removeprefix("s3://"), 200)


def test_a_refused_calibration_upload_fails_the_command_and_keeps_it_locally_marked_not_uploaded(
        published, server, admin, bucket, iam_user, relocated_default_values, write_profile):
    assert published.completed.returncode == 0, failure(published)
    remote_root = f"s3://{bucket}/{PREFIX}"
    relocated_default_values.update(outputs_root=remote_root, local_outputs_root=str(published.local_root))
    params = write_profile(relocated_default_values, "s3-calibrate-refused.yaml")
    report_url = published.last_line
    # this user may read the run but not write beside it
    environment = iam_user(("s3:GetObject", f"arn:aws:s3:::{bucket}/*"), ("s3:ListBucket", f"arn:aws:s3:::{bucket}"))
    calibrated = cli(server, admin, bucket, environment, published.local_root,
                     ["calibrate", "--params", str(params), "--run", report_url,
                      "--labels", str(ROOT / "data" / "sample" / "labels.csv"), "--resamples", "200"], iam=True)
    assert calibrated.completed.returncode == 1, failure(calibrated)
    stderr = calibrated.completed.stderr
    kept = re.search(r"the calibration is kept locally at (\S+)", stderr)
    assert "access denied" in stderr and kept, stderr[-3000:]
    output_dir = Path(kept[1])
    assert output_dir.is_relative_to(published.local_root) and (output_dir / "06_calibrate.ipynb").is_file()
    not_uploaded = (output_dir / "NOT_UPLOADED").read_text()
    assert not_uploaded.startswith(f"not uploaded to {report_url.removesuffix('.json')}/calibration: ")
    (row,) = [row for row in collect_calibrations(published.local_root) if row["path"].with_suffix("") == output_dir]
    assert row["not_uploaded"] == not_uploaded.strip()
    assert "not uploaded" in (published.local_root / "index.html").read_text()
    assert [key for key in calibrated.keys if output_dir.name in key] == []

"""MLflow tracking against a real `mlflow server` on 127.0.0.1 (SQLite backend, local artifact
root, basic authentication), started inside the test from the server environment make test
installs (.venv/mlflow-server, tests/mlflow-server.txt). make run, the truncated run and
make compare log to it; MlflowClient reads everything back. A stopped server gives NOT_TRACKED
and exit 1; a wrong password fails with a clear message. A secret planted in the environment and
in an override reaches no param, tag or artifact."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from evalbook.processes import end_process
from local_servers import free_port
from paths import NO_JUDGE, ROOT, TRUNCATED, read_default_values

pytestmark = pytest.mark.slow
SERVER = ROOT / ".venv" / "mlflow-server" / "bin" / "mlflow"
USER = "evalbook-ci"
EXPERIMENT = "evalbook-tests"
PLANTED = "sk-planted-" + secrets.token_hex(8)  # in the environment and in an override



@dataclass
class Server:
    uri: str
    password: str
    folder: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    assert SERVER.exists(), f"{SERVER} is missing: make test installs the MLflow server (tests/mlflow-server.txt)"
    folder = tmp_path_factory.mktemp("mlflow")
    password = "pw-" + secrets.token_hex(12)
    (folder / "auth.ini").write_text(
        "[mlflow]\ndefault_permission = READ\n"
        f"database_uri = sqlite:///{folder / 'auth.db'}\n"
        f"admin_username = {USER}\nadmin_password = {password}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n")
    port = free_port()
    environment = {**os.environ, "MLFLOW_AUTH_CONFIG_PATH": str(folder / "auth.ini"),
                   "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16)}
    log = (folder / "server.log").open("w")
    process = subprocess.Popen(
        [str(SERVER), "server", "--host", "127.0.0.1", "--port", str(port), "--app-name", "basic-auth",
         "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}", "--artifacts-destination", str(folder / "artifacts"),
         "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, env=environment, cwd=folder)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        assert process.poll() is None, (folder / "server.log").read_text()
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, (folder / "server.log").read_text()
        time.sleep(0.5)
    try:
        yield Server(uri, password, folder)
    finally:
        end_process(process)
        log.close()


def environment(server: Server, password: str | None = None) -> dict[str, str]:
    return {**os.environ, "MLFLOW_TRACKING_USERNAME": USER, "MLFLOW_TRACKING_PASSWORD": password or server.password,
            "EVALBOOK_PLANTED_KEY": PLANTED, "HF_HUB_OFFLINE": "1"}


def make(target: str, profile: Path, env: dict[str, str], *variables: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-o", "setup", target, f"PY={sys.executable}", f"PARAMS={profile}", *variables],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def evalbook(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess:
    """The command make runs, for its exit code (make exits 2 on any failure)."""
    return subprocess.run([sys.executable, "-m", "evalbook", *arguments], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def tracked_profile(folder: Path, uri: str) -> Path:
    values = read_default_values(absolute_data_paths=True)
    values["outputs_root"] = str(folder / "outputs")
    values["judge"]["api_key_env"] = "EVALBOOK_PLANTED_KEY"  # a secret the profile reads from the environment
    values["tracking"] = {"mlflow": {"tracking_uri": uri, "experiment": EXPERIMENT}}
    profile = folder / "tracked.yaml"
    profile.write_text(yaml.safe_dump(values, sort_keys=False), "utf-8")
    return profile


def report_of(output: str) -> Path:
    """The report path the command prints last."""
    return Path(output.strip().splitlines()[-1])


@dataclass
class Tracked:
    profile: Path
    baseline: Path
    candidate: Path
    comparison: Path
    compare_output: str


@pytest.fixture(scope="module")
def tracked(server, tmp_path_factory) -> Tracked:
    folder = tmp_path_factory.mktemp("tracked")
    profile = tracked_profile(folder, server.uri)
    env = environment(server)
    baseline = make("run", profile, env, f"ARGS=-p {NO_JUDGE}")
    assert baseline.returncode == 0, baseline.stdout + baseline.stderr
    candidate = make("run", profile, env, f"ARGS=-p {NO_JUDGE} -p predictions_path={TRUNCATED} -p generator={PLANTED}")
    assert candidate.returncode == 0, candidate.stdout + candidate.stderr
    compared = make("compare", profile, env, "FAIL_ON=bertscore_f1<-0.5")
    assert compared.returncode == 0, compared.stdout + compared.stderr
    [comparison] = (folder / "outputs").rglob("comparisons/*.json")
    return Tracked(profile, report_of(baseline.stdout), report_of(candidate.stdout), comparison,
                   compared.stdout + compared.stderr)


@pytest.fixture(scope="module")
def client(server):
    from mlflow.tracking import MlflowClient

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_USERNAME", USER)
        patch.setenv("MLFLOW_TRACKING_PASSWORD", server.password)
        yield MlflowClient(tracking_uri=server.uri)


def mlflow_run(client, **tags):
    experiment = client.get_experiment_by_name(EXPERIMENT)
    query = " and ".join(f"tags.`evalbook.{key}` = '{value}'" for key, value in tags.items())
    [run] = client.search_runs([experiment.experiment_id], filter_string=query)
    return run


def artifact_bytes(client, run_id: str, path: str, folder: Path) -> bytes:
    from mlflow.artifacts import download_artifacts

    local = download_artifacts(run_id=run_id, artifact_path=path, dst_path=str(folder), tracking_uri=client.tracking_uri)
    return Path(local).read_bytes()


def every_artifact(client, run_id: str, path: str | None = None) -> list[str]:
    found = []
    for item in client.list_artifacts(run_id, path):
        found.extend(every_artifact(client, run_id, item.path) if item.is_dir else [item.path])
    return found


def test_a_run_is_logged_with_its_params_metrics_tags_dataset_and_artifacts(tracked, client, tmp_path):
    report = json.loads(tracked.baseline.read_text("utf-8"))
    run = mlflow_run(client, run_id=report["run_id"])
    assert run.info.status == "FINISHED"
    params, metrics, tags = run.data.params, run.data.metrics, run.data.tags
    profile = yaml.safe_load((tracked.baseline.with_suffix("") / "params.yaml").read_text("utf-8"))
    assert params["input_path"] == profile["input_path"] and params["models.bertscore.num_layers"] == "6"
    assert params["override.judge.base_url"] == "http://127.0.0.1:1/v1"
    assert params["tracking.mlflow.experiment"] == EXPERIMENT
    for name, summary in report["intervals"]["metrics"].items():
        assert metrics[name] == pytest.approx(summary["mean"], abs=1e-12)
        assert metrics[f"{name}.low"] == pytest.approx(summary["low"], abs=1e-12)
        assert metrics[f"{name}.high"] == pytest.approx(summary["high"], abs=1e-12)
        assert metrics[f"{name}.n"] == summary["n"]
    assert {"mrr_at_k", "ndcg_at_k", "precision_at_k", "recall_at_k", "top_k_match"} <= set(metrics)
    assert metrics["counts.n_examples"] == report["counts"]["n_examples"]
    sha = report["provenance"]["inputs_sha256"]["input_path"]
    assert tags["evalbook.dataset.name"] == report["dataset"]["name"] and tags["evalbook.dataset.split"] == "sample"
    assert tags["evalbook.inputs_sha256.input_path"] == sha
    assert tags["evalbook.generator"] == report["models"]["generator"]
    assert tags.get("evalbook.git_commit") == report["provenance"]["git_commit"]  # None: the profile is in no clone
    assert tags["evalbook.report.schema_version"] == report["schema_version"]
    assert "evalbook.judge.label" not in tags  # the judge did not run
    [dataset_input] = run.inputs.dataset_inputs
    assert dataset_input.dataset.digest == sha[:36] and json.loads(dataset_input.dataset.source)["sha256"] == sha
    run_dir = tracked.baseline.with_suffix("")
    assert artifact_bytes(client, run.info.run_id, tracked.baseline.name, tmp_path) == tracked.baseline.read_bytes()
    assert artifact_bytes(client, run.info.run_id, "summary.md", tmp_path) == (run_dir / "summary.md").read_bytes()
    assert (artifact_bytes(client, run.info.run_id, "pages/04_report.noinput.html", tmp_path)
            == (run_dir / "04_report.noinput.html").read_bytes())
    figures = sorted(f"figures/{path.name}" for path in (run_dir / "figures").iterdir())
    assert figures and sorted(p for p in every_artifact(client, run.info.run_id) if p.startswith("figures/")) == figures
    assert not (run_dir / "NOT_TRACKED").exists()


def test_no_secret_planted_in_the_environment_or_an_override_reaches_mlflow(tracked, client, server, tmp_path):
    report = json.loads(tracked.candidate.read_text("utf-8"))
    run = mlflow_run(client, run_id=report["run_id"])
    secrets_planted = (PLANTED, server.password)
    logged = [*run.data.params.items(), *run.data.tags.items(), *((key, "") for key in run.data.metrics)]
    assert not [pair for pair in logged if any(secret in f"{pair[0]} {pair[1]}" for secret in secrets_planted)]
    assert run.data.params["override.generator"] == "[redacted]"
    for path in every_artifact(client, run.info.run_id):
        content = artifact_bytes(client, run.info.run_id, path, tmp_path / "a")
        assert not any(secret.encode() in content for secret in secrets_planted), path
    # the report names the generator, so it is withheld, and the run's tags say so
    assert tracked.candidate.name not in every_artifact(client, run.info.run_id)
    assert tracked.candidate.name in run.data.tags["evalbook.artifacts_withheld"]


def test_a_comparison_is_logged_with_its_deltas_and_gate_and_both_run_ids(tracked, client):
    comparison = json.loads(tracked.comparison.read_text("utf-8"))
    run = mlflow_run(client, kind="comparison")
    tags, metrics = run.data.tags, run.data.metrics
    assert tags["evalbook.baseline.run_id"] == comparison["baseline"]["run_id"]
    assert tags["evalbook.candidate.run_id"] == comparison["candidate"]["run_id"]
    assert tags["evalbook.gate"] == "passed" and metrics["gate.failed"] == 0.0
    assert run.data.params["gate.rule.0"] == "bertscore_f1<-0.5"
    for row in comparison["metrics"]:
        if row["compared"]:
            assert metrics[f"delta.{row['metric']}"] == pytest.approx(row["mean_delta"], abs=1e-12)
            assert metrics[f"delta.{row['metric']}.low"] == pytest.approx(row["ci_low"], abs=1e-12)
    # the candidate's overrides carry the planted secret, and the comparison names them: withheld, and said
    artifacts = every_artifact(client, run.info.run_id)
    withheld = tags.get("evalbook.artifacts_withheld", "")
    for name in (tracked.comparison.name, "summary.md", "figures/deltas.png"):
        assert name in artifacts or name in withheld, name
    assert "figures/deltas.png" in artifacts


def test_a_stopped_server_leaves_not_tracked_and_exits_1_with_the_run_complete(server, tmp_path):
    stopped = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    profile = tracked_profile(tmp_path, stopped)
    result = evalbook(environment(server), "run", "--params", str(profile), "-p", NO_JUDGE, "-p", "limit=8")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "evalbook: tracking failed" in result.stderr and "could not be reached" in result.stderr
    [run_json] = (tmp_path / "outputs").rglob("run.json")
    assert json.loads(run_json.read_text())["status"] == "succeeded"
    marker = (run_json.parent / "NOT_TRACKED").read_text("utf-8")
    assert marker.startswith(f"not tracked in MLflow at {stopped} (experiment '{EXPERIMENT}'): ")
    assert (run_json.parent.parent / f"{run_json.parent.name}.json").exists()  # the report is there
    assert "not tracked in MLflow" in (tmp_path / "outputs" / "index.html").read_text("utf-8")
    assert server.password not in result.stderr + marker


def test_a_wrong_password_fails_with_a_clear_message_and_names_no_secret(tracked, server):
    wrong = "wrong-" + secrets.token_hex(6)
    result = evalbook(environment(server, password=wrong), "compare", "--params", str(tracked.profile))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"MLflow at {server.uri} refused the credentials" in result.stderr
    assert "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD" in result.stderr
    assert wrong not in result.stderr and server.password not in result.stderr
    markers = list((tracked.comparison.parents[1]).rglob("NOT_TRACKED"))
    assert markers and "refused the credentials" in markers[0].read_text("utf-8")

"""The CI recipe runs: examples/ci/run-like-ci.sh performs the steps of
examples/ci/github-actions.yml here, with the variables GitHub sets, on the sample: a degraded
candidate (the truncated answers) trips the gate (exit 3), and without the gate, or with an
unchanged candidate, the comparison passes (exit 0); the job summary holds the deltas."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from paths import NO_JUDGE, ROOT, TRUNCATED

pytestmark = pytest.mark.slow  # real runs through the runner: kernels, models

SCRIPT = ROOT / "examples" / "ci" / "run-like-ci.sh"
WORKFLOW = ROOT / "examples" / "ci" / "github-actions.yml"
GATE = "bertscore_f1<-0.02 sentence_cosine<-0.02"


def run_like_ci(work: Path, cache: Path, candidate: str = "", gate: str = GATE,
                baseline: Path | None = None) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("GITHUB_", "EVALBOOK_", "PYTEST_"))}
    # as under `make test`, whose sub-makes print "make[1]: Leaving directory" after their output
    environment.update(MAKELEVEL="1", BASELINE_ARGS=f"-p {NO_JUDGE}", CANDIDATE_ARGS=f"-p {NO_JUDGE} {candidate}",
                       EVALBOOK_FAIL_ON=gate, EMBEDDING_CACHE=str(cache))
    if baseline is not None:
        environment["BASELINE_ARTIFACT"] = str(baseline)
    return subprocess.run(["bash", str(SCRIPT), str(work)], env=environment, cwd=ROOT,
                          capture_output=True, text=True, timeout=1200)


def comparison_of(work: Path) -> dict:
    location = (work / "pr" / "runner-temp" / "evalbook-ci" / "comparison").read_text().strip()
    return json.loads(Path(location).read_text())


@pytest.fixture(scope="module")
def degraded(tmp_path_factory):
    work, cache = tmp_path_factory.mktemp("ci-degraded"), tmp_path_factory.mktemp("ci-cache")
    done = run_like_ci(work, cache, candidate=f"-p predictions_path={TRUNCATED}")
    return done, work, cache


def test_a_degraded_candidate_trips_the_gate(degraded):
    done, work, _ = degraded
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    assert "gate failed: 'bertscore_f1<-0.02'" in done.stdout
    gate = comparison_of(work)["gate"]
    assert gate["failed"] and {rule["rule"] for rule in gate["rules"] if rule["failed"]} == set(GATE.split())


def test_the_job_summary_holds_the_comparison_s_deltas(degraded):
    _, work, _ = degraded
    summary = (work / "pr" / "step-summary.md").read_text()
    comparison = comparison_of(work)
    rows = {row["metric"]: row for row in comparison["metrics"]}
    for name in ("bertscore_f1", "sentence_cosine"):
        entry = rows[name]
        cells = (f"| {entry['baseline_mean']:.3f} | {entry['candidate_mean']:.3f} | {entry['mean_delta']:+.3f} "
                 f"| [{entry['ci_low']:.3f}, {entry['ci_high']:.3f}] | {entry['n_better']} | {entry['n_worse']} |")
        assert cells in summary, (name, cells)
    assert "**Gate failed**" in summary
    assert summary.count("## evalbook run:") == 1 and summary.count("## evalbook comparison:") == 1


def test_the_pull_request_s_artifact_holds_the_run_and_the_comparison_pages(degraded):
    _, work, _ = degraded
    artifact = work / "pr" / "artifact"
    assert list(artifact.rglob("04_report.noinput.html")) and list(artifact.rglob("05_compare.noinput.html"))
    assert list(artifact.rglob("summary.md")) and (artifact / "index.html").exists()
    assert not list(artifact.rglob("*.sqlite*")) and not list(artifact.rglob("embedding-cache"))


def test_without_the_gate_the_degraded_candidate_passes(degraded, tmp_path):
    _, work, cache = degraded
    done = run_like_ci(tmp_path, cache, candidate=f"-p predictions_path={TRUNCATED}", gate="",
                       baseline=work / "main" / "artifact")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert comparison_of(tmp_path)["gate"] is None


def test_an_unchanged_candidate_passes_the_gate(degraded, tmp_path):
    _, work, cache = degraded
    done = run_like_ci(tmp_path, cache, baseline=work / "main" / "artifact")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    gate = comparison_of(tmp_path)["gate"]
    assert not gate["failed"] and len(gate["rules"]) == 2


def test_the_workflow_runs_the_steps_the_script_runs_in_the_same_order():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    steps = workflow["jobs"]["evaluate"]["steps"]
    run_steps = [step["run"].split()[-1] for step in steps if "run" in step]
    assert [step["run"].split()[0] for step in steps if "run" in step] == ["examples/ci/evalbook-ci.sh"] * 4
    script = SCRIPT.read_text()
    pr_job = script.split('echo "== the pull request\'s job"', 1)[1]
    assert re.findall(r'"\$step" ([a-z-]+)', pr_job) == run_steps == ["evaluate", "fetch-baseline", "compare", "collect"]
    used = [step.get("uses", "") for step in steps]
    assert {"actions/checkout@v4", "actions/setup-python@v5", "actions/cache@v4",
            "actions/upload-artifact@v4"} <= set(used)
    cached = [step["with"]["path"] for step in steps if step.get("uses") == "actions/cache@v4"]
    assert cached == [".venv", "outputs/embedding-cache", "outputs/onnx-graphs"]
    assert workflow[True] == {"pull_request": None, "push": {"branches": ["main"]}}  # YAML reads `on` as True


def test_no_secret_is_passed_as_a_parameter_in_the_workflow():
    text = WORKFLOW.read_text()
    for line in text.splitlines():
        if "secrets." in line:
            assert re.match(r"\s*#?\s*[A-Z_]+: \$\{\{ secrets\.[A-Z_]+ \}\}", line), line  # an env variable only
    assert "-p judge.api_key" not in text.replace("-p judge.api_key_env", "")


def test_collect_leaves_out_the_caches_and_the_exported_graphs(tmp_path):
    outputs, artifacts = tmp_path / "outputs", tmp_path / "artifacts"
    kept = ["index.html", "eval-runs/dataset=sample/2026-12-01/run/report.json"]
    cached = ["embedding-cache/ab/entry.npz", "onnx-graphs/key.onnx", "onnx-graphs/key.json",
              "interactive/run/01_load.ipynb", "judge-cache.sqlite", "judge-cache.sqlite-wal"]
    for name in kept + cached:
        (outputs / name).parent.mkdir(parents=True, exist_ok=True)
        (outputs / name).write_text(name)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("EVALBOOK_")}
    environment.update(EVALBOOK_OUTPUTS=str(outputs), EVALBOOK_ARTIFACTS=str(artifacts),
                       RUNNER_TEMP=str(tmp_path / "runner-temp"))
    done = subprocess.run(["bash", str(ROOT / "examples" / "ci" / "evalbook-ci.sh"), "collect"],
                          env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(str(p.relative_to(artifacts)) for p in artifacts.rglob("*") if p.is_file()) == sorted(kept)
    assert "collected 2 files" in done.stdout

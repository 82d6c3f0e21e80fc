"""A shared gateway that echoes every key it has seen, end to end (issue 47, item 1): the
simulated user, the system under test and the judge behind one OpenAI-compatible server on
127.0.0.1, each with its own key in its own variable, and every reply carrying the
Authorization headers the gateway has seen so far. A real run through the runner; then every
file under the test's folder (the run's files, both SQLite caches, the index) is read for each
key: none may hold one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from evalbook.runner import run_pipeline
from faultserver import FaultServer, valid_reply
from scenarioscript import scripted

pytestmark = pytest.mark.slow  # a real run of the pipeline: kernels, a model

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"EVALBOOK_GATEWAY_SIMULATOR_KEY": "sk-simulator-7d3e9a1c55",
        "EVALBOOK_GATEWAY_SYSTEM_KEY": "sk-system-2b8f4c6e01",
        "EVALBOOK_GATEWAY_JUDGE_KEY": "sk-judge-9e1a7b3d42"}
SCENARIOS = {"version": 1, "scenarios": [
    {"id": "glass", "goal": "end-at 2", "persona": "a resident", "first_speaker": "user", "max_turns": 3,
     "criteria": ["the assistant answers each question"],
     "assertions": [{"grounded": {"threshold": "1/1", "ground_truth": "Glass goes to a bottle bank."}}]},
]}


def gateway(server: FaultServer):
    """The scripted sides, each reply followed by every Authorization header seen so far."""
    def reply(body: dict) -> str:
        seen = "gateway saw: " + ", ".join(sorted(a for a in server.authorizations if a))
        if body["model"] == "sim":
            value = json.loads(scripted(body))
            value["message"] = f"{value['message']} ({seen})".strip()
            return json.dumps(value)
        if body["model"] == "system":
            return f"{scripted(body)} ({seen})"
        return valid_reply(body, text=f"Stated in the ground truth ({seen}).")
    return reply


@pytest.fixture(scope="module")
def gateway_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gateway")
    (folder / "scenarios.yaml").write_text(yaml.safe_dump(SCENARIOS), "utf-8")
    with pytest.MonkeyPatch.context() as patch, FaultServer() as server:
        for variable, key in KEYS.items():
            patch.setenv(variable, key)
        patch.setenv("HF_HUB_OFFLINE", "1")  # run_pipeline sets it for the offline profile; undone after
        server.reply = gateway(server)
        profile = {
            "extends": str(ROOT / "params" / "scenarios-local.yaml"), "version": 1, "name": "gateway",
            "outputs_root": str(folder / "outputs"), "limit": 2,
            "input_path": str(ROOT / "data" / "sample" / "examples.jsonl"),
            "predictions_path": str(ROOT / "data" / "sample" / "predictions.jsonl"),
            "judge": {"base_url": server.base_url, "model": "judge", "start_server": False, "sample_size": 1,
                      "max_retries": 0, "api_key_env": "EVALBOOK_GATEWAY_JUDGE_KEY",
                      "metrics": {"relevance": {"enabled": False}}},
            "simulate": {"base_url": server.base_url, "model": "sim", "start_server": False,
                         "api_key_env": "EVALBOOK_GATEWAY_SIMULATOR_KEY",
                         "structured_output": "json_instructions", "backoff_seconds": 0.0},
            "generate": {"kind": "openai", "start_server": False, "service": None, "backoff_seconds": 0.0,
                         "max_retries": 0,
                         "openai": {"base_url": server.base_url, "model": "system",
                                    "api_key_env": "EVALBOOK_GATEWAY_SYSTEM_KEY", "temperature": 0.0, "seed": 0,
                                    "max_tokens": 100, "template": "answer-v1", "context": "none"}},
            "scenarios": {"path": str(folder / "scenarios.yaml"), "repeats": 1},
        }
        path = folder / "gateway.yaml"
        path.write_text(yaml.safe_dump(profile), "utf-8")
        result = run_pipeline(str(path))
        seen = set(server.authorizations)
    return folder, result, seen


def test_each_side_sent_its_own_key_through_the_gateway(gateway_run):
    _, _, seen = gateway_run
    assert {f"Bearer {key}" for key in KEYS.values()} <= seen


def test_the_echoes_reached_the_transcripts_redacted(gateway_run):
    _, result, _ = gateway_run
    transcripts = (result.run_dir / "transcripts.jsonl").read_text("utf-8")
    assert "gateway saw: [redacted]" in transcripts


def test_no_file_the_run_or_its_caches_write_holds_any_key(gateway_run):
    folder, result, _ = gateway_run
    files = [path for path in folder.rglob("*") if path.is_file()]
    names = {path.name for path in files}
    assert {"transcripts.jsonl", "judge-cache.sqlite", "generate-cache.sqlite", "judge.json",
            "scenario-judgments.json", "04_report.noinput.html", "02a_converse.ipynb"} <= names
    leaking = sorted({f"{path.relative_to(folder)}: {variable}" for path in files
                      for variable, key in KEYS.items()
                      if key.encode() in path.read_bytes() or key.encode("utf-16-le") in path.read_bytes()})
    assert leaking == []

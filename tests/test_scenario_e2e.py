"""End to end: a profile that extends params/scenarios-local.yaml, run by the runner as a user
runs it, with one scripted OpenAI-compatible server on 127.0.0.1 (tests/scenarioscript.py)
playing the simulated user, the system under test and the judge.

Three runs share one module fixture: the first simulates and judges; the second is answered by
the caches (its transcripts byte-identical, no simulator or system call); the third replays the
first run's transcripts (scenarios.replay_from) without simulating. Then 02a_converse alone,
interrupted by Ctrl-C during its second conversation, keeps the first transcript, and a rerun
resumes it from the cache. The profile's checks file checks the replies (`turn`): the report
holds each outcome beside its transcript and each check rolled up over the repeats, and the page
names the failing ones."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import httpx
import pytest
import yaml

from evalbook.__main__ import main
from evalbook.pipeline import open_stage, run_converse
from evalbook.report.document import validate_report
from evalbook.runner import run_pipeline
from faultserver import FaultServer
from scenarioscript import scripted

pytestmark = pytest.mark.slow  # three runs of the pipeline

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = "<script>alert('persona')</script>"
SCENARIOS = {"version": 1, "scenarios": [
    {"id": "glass", "goal": "end-at 2", "persona": f"{HOSTILE} a resident", "first_speaker": "user",
     "max_turns": 3, "criteria": ["the assistant answers each question"],
     "assertions": [{"grounded": {"threshold": "1/1", "ground_truth": "Glass goes to a bottle bank."}}]},
    {"id": "loops", "goal": "goodbye 0", "persona": "a polite resident", "first_speaker": "user", "max_turns": 4,
     "criteria": ["the assistant says goodbye"]},
    {"id": "broken", "goal": "broken 0", "persona": "p", "first_speaker": "user", "max_turns": 2,
     "criteria": ["anything"]},
]}
CHECKS = {"version": 1, "checks": [
    {"name": "answers-each", "regex": "^Answer [0-9]+ to: ", "turn": "every"},
    {"name": "no-goodbye-echo", "not_contains": "goodbye", "ignore_case": True, "turn": "last", "ids": ["loops"]},
    {"name": "third-reply", "contains": "Answer 3", "turn": 3, "ids": ["glass"]},
]}


class Replayed:
    """The replay command's run, from the report path it prints last."""

    def __init__(self, report_path: Path):
        self.report_path, self.run_dir = report_path, report_path.with_suffix("")


def by_model(server: FaultServer) -> dict[str, int]:
    counts: dict[str, int] = {}
    for body in list(server.bodies):
        counts[body["model"]] = counts.get(body["model"], 0) + 1
    return counts


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scenarios")
    (folder / "scenarios.yaml").write_text(yaml.safe_dump(SCENARIOS), "utf-8")
    (folder / "checks.yaml").write_text(yaml.safe_dump(CHECKS), "utf-8")
    with FaultServer(reply=scripted) as server:
        profile = {
            "extends": str(ROOT / "params" / "scenarios-local.yaml"), "version": 1, "name": "scenarios-scripted",
            "outputs_root": str(folder / "outputs"), "limit": 2,
            "input_path": str(ROOT / "data" / "sample" / "examples.jsonl"),
            "predictions_path": str(ROOT / "data" / "sample" / "predictions.jsonl"),
            "judge": {"base_url": server.base_url, "model": "judge", "start_server": False, "sample_size": 1,
                      "max_retries": 0, "metrics": {"relevance": {"enabled": False}}},
            "simulate": {"base_url": server.base_url, "model": "sim", "start_server": False,
                         "structured_output": "json_instructions", "backoff_seconds": 0.0},
            "generate": {"kind": "openai", "start_server": False, "service": None, "backoff_seconds": 0.0,
                         "max_retries": 0,
                         "openai": {"base_url": server.base_url, "model": "system", "api_key_env": None,
                                    "temperature": 0.0, "seed": 0, "max_tokens": 100, "template": "answer-v1",
                                    "context": "none"}},
            "scenarios": {"path": str(folder / "scenarios.yaml"), "repeats": 2},
            "checks": {"path": str(folder / "checks.yaml")},
        }
        path = folder / "scenarios-scripted.yaml"
        path.write_text(yaml.safe_dump(profile), "utf-8")
        first = run_pipeline(str(path))
        after_first = by_model(server)
        second = run_pipeline(str(path))
        after_second = by_model(server)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):  # the replay command, by the first run's id prefix
            assert main(["replay", first.run_id[:8], "--params", str(path)]) == 0
        replayed = Replayed(Path(printed.getvalue().strip().splitlines()[-1]))
        after_replay = by_model(server)
        yield {"path": path, "server": server, "first": first, "second": second, "replayed": replayed,
               "calls": (after_first, after_second, after_replay)}


def report_of(result) -> dict:
    report = json.loads(result.report_path.read_text("utf-8"))
    validate_report(report)
    return report


def test_the_report_shows_every_scenario_with_its_endings_pass_rates_and_estimate(setup):
    section = report_of(setup["first"])["scenarios"]
    assert (section["status"], section["n_scenarios"], section["n_transcripts"]) == ("judged", 3, 6)
    ends = {reason: n for reason, n in section["end_reasons"].items() if n}
    assert ends == {"goal_met": 2, "loop_detected": 2, "simulator_error": 2}
    glass = next(s for s in section["scenarios"] if s["id"] == "glass")
    overall = glass["outcomes"]["overall"]
    assert (overall["n_judged"], overall["n_passed"], overall["pass_all"], overall["pass_any"]) == (2, 2, True, True)
    assert overall["interval"]["method"] == "wilson" and overall["interval"]["high"] == 1.0
    assert any("scenario 'broken', repeat 0: the criteria had nothing to score" in line
               for line in section["nothing_to_score"])
    # the server saw exactly the calls the summary counts, within the pre-flight bound
    calls = setup["calls"][0]
    assert calls["sim"] == section["simulator"]["calls"] and calls["system"] == section["system"]["calls"]
    estimate = section["estimate"]
    assert calls["system"] <= estimate["system_calls"] == 2 * (3 + 4 + 2)


def test_the_checks_file_checks_each_scenario_s_replies_over_its_repeats(setup):
    section = report_of(setup["first"])["scenarios"]
    by_id = {scenario["id"]: {c["check"]: c for c in scenario["checks"]} for scenario in section["scenarios"]}
    assert set(by_id["glass"]) == {"answers-each", "third-reply"} and set(by_id["broken"]) == {"answers-each"}
    assert by_id["glass"]["answers-each"]["status"] == "pass"
    echo = by_id["loops"]["no-goodbye-echo"]  # "Answer 1 to: Thanks, goodbye!", then a loop
    assert (echo["status"], echo["failed_repeats"]) == ("fail", [0, 1])
    assert echo["reason"].startswith("failed in 2 of 2 repeats; repeat 0, reply 1: the answer holds 'goodbye'")
    # glass ends after 2 replies, and broken's simulator fails before any: errors, not passes
    assert by_id["glass"]["third-reply"]["reason"].startswith("could not be checked in 2 of 2 repeats")
    assert by_id["broken"]["answers-each"]["status"] == "error"
    glass = next(s for s in section["scenarios"] if s["id"] == "glass")["transcripts"][0]
    assert [(o["check"], o["status"], o["details"]["reply"]) for o in glass["checks"]] == [
        ("answers-each", "pass", 1), ("answers-each", "pass", 2), ("third-reply", "error", 3)]
    replies = section["checks_summary"]["checks"]["answers-each"]["replies"]
    assert (replies["n_passed"], replies["n_failed"], replies["interval"]["method"]) == (6, 0, "wilson")
    assert report_of(setup["replayed"])["scenarios"]["checks_summary"] == section["checks_summary"]
    page = (setup["first"].run_dir / "04_report.noinput.html").read_text("utf-8")
    assert "failed in 2 of 2 repeats" in page and "no-goodbye-echo" in page


def test_a_rerun_writes_the_same_transcripts_and_makes_no_simulator_or_system_call(setup):
    first, second = setup["first"], setup["second"]
    assert (second.run_dir / "transcripts.jsonl").read_bytes() == (first.run_dir / "transcripts.jsonl").read_bytes()
    after_first, after_second, _ = setup["calls"]
    assert (after_second["sim"], after_second["system"]) == (after_first["sim"], after_first["system"])
    summary = json.loads((second.run_dir / "conversations.json").read_text())
    assert (summary["simulator"]["calls"], summary["system"]["calls"]) == (0, 0)
    assert summary["estimate"]["cached_conversations"] == 6
    assert report_of(second)["scenarios"]["scenarios"] == report_of(first)["scenarios"]["scenarios"]


def test_a_replay_judges_the_stored_transcripts_without_simulating(setup):
    report = report_of(setup["replayed"])["scenarios"]
    _, after_second, after_replay = setup["calls"]
    assert (after_replay["sim"], after_replay["system"]) == (after_second["sim"], after_second["system"])
    assert report["conversations"] == "replayed" and report["replayed_from"] == setup["first"].run_dir.name
    assert report["replay_source"] == {"run": setup["first"].run_dir.name, "status": "succeeded", "reason": None}
    assert report["missing"] == [] and report["n_scenarios"] == 3  # the replay command exited 0: nothing missing
    assert (setup["replayed"].run_dir / "transcripts.jsonl").read_bytes() == \
        (setup["first"].run_dir / "transcripts.jsonl").read_bytes()
    assert not (setup["replayed"].run_dir / "02a_converse.ipynb").read_text().count("before the first call")


def test_the_report_page_shows_each_transcript_with_hostile_text_inert(setup):
    page = (setup["first"].run_dir / "04_report.noinput.html").read_text("utf-8")
    assert "Answer 1 to: And question number 1?" in page and "Thanks, goodbye!" in page
    assert "pass^k" in page and "loop detected" in page
    assert HOSTILE not in page and "&lt;script&gt;alert(" in page
    assert "conversation-endings.png" in {p.name for p in (setup["first"].run_dir / "figures").iterdir()}


def test_an_interrupted_converse_keeps_its_finished_transcripts_and_resumes_from_the_cache(setup):
    server = setup["server"]
    reseeded = setup["path"].with_name("reseeded.yaml")  # another run seed: conversations no cache holds
    reseeded.write_text(yaml.safe_dump({"extends": str(setup["path"]), "version": 1, "simulate": {"seed": 1}}))
    ctx = open_stage(str(reseeded), limit=2)

    class InterruptedAt(httpx.AsyncHTTPTransport):
        """Ctrl-C as the system is asked for the second conversation's first reply."""

        async def handle_async_request(self, request):
            body = json.loads(request.content)
            if body.get("model") == "system" and body["messages"][0]["content"] == "Thanks, goodbye!":
                raise KeyboardInterrupt
            return await super().handle_async_request(request)

    with pytest.raises(KeyboardInterrupt):
        run_converse(ctx, http_transport=InterruptedAt())
    kept = (ctx.run_dir / "transcripts.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(line)["scenario_id"] for line in kept] == ["glass", "glass"]
    before = len(server.bodies)
    outcome = run_converse(ctx)
    assert len(outcome.transcripts) == 6
    asked = [json.dumps(body) for body in server.bodies[before:]]
    assert asked and not [body for body in asked if "end-at 2" in body]  # glass came from the cache

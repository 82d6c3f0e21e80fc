"""Conversations against a scripted OpenAI-compatible server on 127.0.0.1 (tests/faultserver.py),
through the real judge and generate clients over real HTTP: one server plays both the
simulated user (model "sim") and the system under test (model "system"), each scenario's goal
naming the script the simulator follows. The estimate, the cache (a rerun is byte-identical and
makes no call), every end reason, the seeds, the budget, and the http kind's session ids. The
scripts are tests/scenarioscript.py's."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import httpx
import pytest

from evalbook.judge.estimate import OverBudget
from evalbook.params import load_profile
from evalbook.replycache import ReplyCache
from evalbook.scenarios.run import (check_budget, conversations, judge_bound, plan, run_conversations,
                                    simulator_bound)
from evalbook.scenarios.sides import Simulator, System
from evalbook.scenarios.simulator import derived_seed
from evalbook.scenarios.spec import parse_scenarios
from faultserver import FaultServer
from scenarioscript import scripted

ROOT = Path(__file__).resolve().parents[1]
def scenario(sid: str, goal: str, max_turns: int = 3, **more) -> dict:
    return {"id": sid, "goal": goal, "persona": "a scripted user", "first_speaker": "user",
            "max_turns": max_turns, "criteria": ["the assistant answers"], **more}


def scenarios_of(*entries: dict):
    return parse_scenarios({"version": 1, "scenarios": list(entries)}, "scenarios.yaml")


@pytest.fixture
def server():
    with FaultServer(reply=scripted) as running:
        yield running


def simulate_config(base_url: str) -> dict:
    return {"base_url": base_url, "model": "sim", "api_key_env": None, "temperature": 0.7, "seed": 11,
            "max_tokens": 200, "structured_output": "json_instructions", "prompt": "simulator-v1",
            "timeout_seconds": 5.0, "max_retries": 1, "backoff_seconds": 0.0}


def system_config(base_url: str) -> dict:
    section = copy.deepcopy(load_profile(ROOT / "params" / "generate-local.yaml")["generate"])
    section.update(kind="openai", service=None, start_server=False, backoff_seconds=0.0, max_retries=1,
                   timeout_seconds=5.0)
    section["openai"] = {"base_url": base_url, "model": "system", "api_key_env": None, "temperature": 0.0,
                         "seed": 0, "max_tokens": 120, "template": "answer-v1", "context": "none"}
    return section


class Run:
    """The sides over one cache file, as 02a_converse builds them."""

    def __init__(self, tmp_path: Path, simulator_url: str, system_url: str, run_token: str = "run-1",
                 generate: dict | None = None, http_transport=None):
        self.cache = ReplyCache(tmp_path / "cache.sqlite")
        self.simulator = Simulator(simulate_config(simulator_url), self.cache)
        self.system = System(generate or system_config(system_url), run_token, self.cache, http_transport)

    def plan(self, planned, max_calls=None):
        return plan(planned, self.simulator, self.system, judge_repeats=1, judge_enabled=True, max_calls=max_calls)

    def run(self, planned):
        return run_conversations(planned, self.simulator, self.system, timeout_seconds=None)


def records(transcripts) -> str:
    return "\n".join(json.dumps(t.as_record(), sort_keys=True) for t in transcripts)


def test_the_estimate_equals_the_requests_and_the_transcripts_when_every_conversation_runs_to_max_turns(
        tmp_path, server):
    planned = conversations(scenarios_of(
        scenario("asks", "never 0", max_turns=3),
        scenario("opens", "never 0", max_turns=4, opening="Where does glass go?"),
        scenario("greets", "never 0", max_turns=2, first_speaker="assistant", opening="Hello, how can I help?"),
    ), repeats=2, run_seed=5)
    run = Run(tmp_path, server.base_url, server.base_url)
    estimate = run.plan(planned)
    assert server.chat_calls == 0
    assert (estimate["conversations"], estimate["cached_conversations"]) == (6, 0)
    assert (estimate["simulator_calls"], estimate["system_calls"]) == (2 * (3 + 3 + 2), 2 * (3 + 4 + 2))
    transcripts = run.run(planned)
    assert len(transcripts) == estimate["conversations"]
    assert server.chat_calls == estimate["simulator_calls"] + estimate["system_calls"]
    assert [t.end_reason for t in transcripts] == ["max_turns"] * 6
    assert sum(t.simulator_calls for t in transcripts) == estimate["simulator_calls"]
    assert [sum(turn["role"] == "assistant" for turn in t.turns) for t in transcripts] == [3, 3, 4, 4, 3, 3]
    # the judge's share: one criteria call per transcript; no assertion here
    assert estimate["judge_calls_at_most"] == 6 == sum(judge_bound(c.scenario, 1) for c in planned)


def test_a_rerun_is_byte_identical_and_makes_no_call(tmp_path, server):
    planned = conversations(scenarios_of(scenario("a", "end-at 2"), scenario("b", "goodbye 0"),
                                         scenario("c", "broken 0")), repeats=2, run_seed=5)
    first = Run(tmp_path, server.base_url, server.base_url).run(planned)
    made = server.chat_calls
    again = Run(tmp_path, server.base_url, server.base_url, run_token="run-2")
    estimate = again.plan(planned)
    assert (estimate["cached_conversations"], estimate["simulator_calls"], estimate["system_calls"]) == (6, 0, 0)
    second = again.run(planned)
    assert server.chat_calls == made
    assert records(second) == records(first)
    assert again.simulator.stats.calls == again.system.stats.calls == 0
    assert again.simulator.stats.cache_hits > 0


def test_a_simulator_that_never_ends_stops_at_max_turns(tmp_path, server):
    [transcript] = Run(tmp_path, server.base_url, server.base_url).run(
        conversations(scenarios_of(scenario("long", "never 0", max_turns=5)), 1, 0))
    assert (transcript.end_reason, transcript.end_detail) == ("max_turns", "5 assistant turns")
    assert [turn["role"] for turn in transcript.turns] == ["user", "assistant"] * 5
    assert transcript.turns[-1]["content"] == "Answer 5 to: And question number 5?"


def test_the_goodbye_loop_is_detected(tmp_path, server):
    [transcript] = Run(tmp_path, server.base_url, server.base_url).run(
        conversations(scenarios_of(scenario("bye", "goodbye 0", max_turns=6)), 1, 0))
    assert transcript.end_reason == "loop_detected"
    assert transcript.end_detail == "user turn 2 repeats an earlier one"
    assert [turn["role"] for turn in transcript.turns] == ["user", "assistant", "user"]


def test_goal_met_and_gave_up_end_the_conversation_with_their_reason(tmp_path, server):
    done, gave_up = Run(tmp_path, server.base_url, server.base_url).run(conversations(
        scenarios_of(scenario("met", "end-at 2", max_turns=6), scenario("quit", "give-up 0")), 1, 0))
    assert done.end_reason == "goal_met" and done.turns[-1] == {"role": "user", "content": "Thanks, that is all."}
    assert sum(turn["role"] == "assistant" for turn in done.turns) == 2
    assert (gave_up.end_reason, gave_up.turns, gave_up.system_calls) == ("gave_up", [], 0)


def test_broken_json_is_asked_once_more_then_ends_as_a_simulator_error_with_its_start(tmp_path, server):
    [transcript] = Run(tmp_path, server.base_url, server.base_url).run(
        conversations(scenarios_of(scenario("broken", "broken 0")), 1, 0))
    assert transcript.end_reason == "simulator_error"
    assert "not JSON" in transcript.end_detail and "twice" in transcript.end_detail
    assert "Sure! Here is my next message" in transcript.end_detail
    shown = re.search(r"began '(.*)'$", transcript.end_detail).group(1)
    assert len(shown) == 200
    assert transcript.simulator_calls == server.chat_calls == 2
    seeds = [body["seed"] for body in server.bodies]
    assert seeds[1] == seeds[0] + 1  # the retry is a sample of its own


def test_a_system_answering_500_ends_as_a_system_error_with_the_reason(tmp_path, server):
    with FaultServer("server_error") as failing:
        [transcript] = Run(tmp_path, server.base_url, failing.base_url).run(
            conversations(scenarios_of(scenario("down", "never 0")), 1, 0))
        assert failing.chat_calls == 2  # one retry (max_retries 1), then the reason
    assert transcript.end_reason == "system_error"
    assert transcript.end_detail.startswith("HTTP 500")
    assert [turn["role"] for turn in transcript.turns] == ["user"]


def test_a_simulator_answering_500_ends_as_a_simulator_error_with_the_reason(tmp_path, server):
    with FaultServer("server_error") as failing:
        [transcript] = Run(tmp_path, failing.base_url, server.base_url).run(
            conversations(scenarios_of(scenario("down", "never 0")), 1, 0))
    assert transcript.end_reason == "simulator_error"
    assert "the simulator call failed: HTTP 500" in transcript.end_detail
    assert server.chat_calls == 0 and transcript.turns == []


def test_a_timed_out_system_call_ends_as_timeout(tmp_path, server):
    with FaultServer("hang", hang_seconds=3.0) as slow:
        generate = system_config(slow.base_url)
        generate.update(timeout_seconds=0.5, max_retries=0)
        [transcript] = Run(tmp_path, server.base_url, slow.base_url, generate=generate).run(
            conversations(scenarios_of(scenario("slow", "never 0")), 1, 0))
    assert transcript.end_reason == "timeout"
    assert "0.5 s" in transcript.end_detail


def test_each_repeat_sends_its_derived_seed_and_the_repeats_differ_in_their_cache_keys(tmp_path, server):
    planned = conversations(scenarios_of(scenario("s", "end-at 1")), repeats=3, run_seed=42)
    Run(tmp_path, server.base_url, server.base_url).run(planned)
    sent = [body["seed"] for body in server.bodies if body["model"] == "sim"]
    expected = [derived_seed(42, "s", repeat) for repeat in range(3)]
    assert sorted(set(sent)) == sorted(expected) and len(set(expected)) == 3
    # the same conversation in each repeat, yet each repeat asked for itself: 3 x (2 simulator + 1 system)
    assert server.chat_calls == 9


def test_a_run_over_max_calls_is_refused_before_any_call(tmp_path, server):
    planned = conversations(scenarios_of(scenario("s", "never 0", max_turns=4)), repeats=2, run_seed=0)
    estimate = Run(tmp_path, server.base_url, server.base_url).plan(planned, max_calls=10)
    assert estimate["calls"] == 2 * (4 + 4 + 1)
    with pytest.raises(OverBudget, match=r"up to 18 calls .*scenarios\.max_calls = 10.*-p scenarios\.max_calls=18"):
        check_budget(estimate)
    assert server.chat_calls == 0


def test_a_conversation_cut_short_resumes_from_the_cache_with_its_finished_turns(tmp_path, server):
    planned = conversations(scenarios_of(scenario("s", "never 0", max_turns=4)), 1, 0)
    with FaultServer("server_error") as failing:  # the system is down: the user's first message is asked
        [broken] = Run(tmp_path, server.base_url, failing.base_url).run(planned)
    assert broken.end_reason == "system_error" and server.chat_calls == 1
    resumed = Run(tmp_path, server.base_url, server.base_url)
    estimate = resumed.plan(planned)
    assert (estimate["cached_conversations"], estimate["simulator_calls"], estimate["system_calls"]) == (0, 3, 4)
    [transcript] = resumed.run(planned)
    assert transcript.end_reason == "max_turns"
    assert resumed.simulator.stats.cache_hits == 1 and server.chat_calls == 1 + 3 + 4


def test_the_http_kind_sends_a_session_id_per_run_that_does_not_key_the_cache(tmp_path, server):
    bodies = []

    def service(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        return httpx.Response(200, json={"answer": f"about {body['question']}", "retrieved": [],
                                         "model": "rag", "usage": {}})

    generate = system_config(server.base_url)
    generate["kind"] = "http"
    generate["http"]["body"] = {"question": "{question}", "session_id": "{session_id}"}
    transport = httpx.MockTransport(service)
    planned = conversations(scenarios_of(scenario("s", "end-at 2")), repeats=2, run_seed=0)
    first = Run(tmp_path, server.base_url, "", run_token="tok1", generate=generate, http_transport=transport).run(planned)
    assert [b["session_id"] for b in bodies] == ["s-0-tok1", "s-0-tok1", "s-1-tok1", "s-1-tok1"]
    assert [b["question"] for b in bodies[:2]] == ["And question number 1?", "And question number 2?"]
    second = Run(tmp_path, server.base_url, "", run_token="tok2", generate=generate, http_transport=transport).run(planned)
    assert len(bodies) == 4 and records(second) == records(first)


def test_simulator_bound_counts_a_written_opening(tmp_path):
    asks, opens, greets = scenarios_of(
        scenario("a", "x", max_turns=3), scenario("b", "x", max_turns=3, opening="Hi"),
        scenario("c", "x", max_turns=3, first_speaker="assistant", opening="Hello"))
    assert [simulator_bound(s) for s in (asks, opens, greets)] == [3, 2, 3]


def test_a_broken_reply_that_echoes_the_simulator_s_key_is_shown_redacted(tmp_path, monkeypatch):
    secret = "sk-simulator-0123456789abcdef"
    monkeypatch.setenv("SIM_KEY", secret)
    with FaultServer(reply=lambda body: f"oops, my key is {secret}; no JSON here") as server:
        run = Run(tmp_path, server.base_url, server.base_url)
        run.simulator = Simulator({**simulate_config(server.base_url), "api_key_env": "SIM_KEY"}, run.cache)
        [transcript] = run.run(conversations(scenarios_of(scenario("s", "never 0")), 1, 0))
        assert server.authorizations == {f"Bearer {secret}"}
    assert transcript.end_reason == "simulator_error"
    assert secret not in transcript.end_detail and "[redacted]" in transcript.end_detail

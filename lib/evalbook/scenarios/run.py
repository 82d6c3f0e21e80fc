"""Every conversation of a scenario file: planned, budgeted, run, and summarized.

A run holds `repeats` conversations of each scenario, in file order, repeat 0 first, each with
its derived seed (evalbook.scenarios.simulator.derived_seed). Before the first call the plan
replays each conversation from the cache alone (evalbook.scenarios.sides, `cached_only`): one
that the cache answers to its end costs nothing; for the others, the plan counts at most the
calls still to make, from where the cache stops:
- the simulator: one per user message, `max_turns` of them (one fewer when the user's opening
  is written in the file); the one retry of an unusable reply is not counted;
- the system under test: one per assistant reply, `max_turns`;
- the judge (03_judge): `judge.repeats` calls per transcript for its criteria, and per
  assertion one call per turn it covers (`max_turns` for every turn, else one).
These are upper bounds: a conversation that ends early makes fewer. `scenarios.max_calls`
refuses a run whose bound is over it before any call (OverBudget, naming the override).

Transcripts are handed to `on_done` as each ends, so that the stage writes each one at once:
an interrupted run keeps every finished transcript, and a rerun resumes from the cache.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from evalbook.judge.estimate import OverBudget
from evalbook.scenarios.conversation import END_REASONS, Transcript, converse
from evalbook.scenarios.sides import NotCached, Simulator, System
from evalbook.scenarios.simulator import derived_seed
from evalbook.scenarios.spec import Scenario


@dataclass(frozen=True)
class Conversation:
    scenario: Scenario
    repeat: int
    seed: int


def conversations(scenarios: Sequence[Scenario], repeats: int, run_seed: int) -> list[Conversation]:
    return [Conversation(scenario, repeat, derived_seed(run_seed, scenario.id, repeat))
            for scenario in scenarios for repeat in range(repeats)]


def simulator_bound(scenario: Scenario) -> int:
    """The simulator calls of one conversation that runs to max_turns, retries aside."""
    written = scenario.first_speaker == "user" and scenario.opening is not None
    return scenario.max_turns - (1 if written else 0)


def judge_bound(scenario: Scenario, judge_repeats: int) -> int:
    """The judge calls of one transcript of `scenario` at most: its criteria, and each
    assertion on every turn it covers."""
    turns = sum(scenario.max_turns if a.turn == "every" else 1 for a in scenario.assertions)
    return judge_repeats * ((1 if scenario.criteria else 0) + turns)


def _talk(conversation: Conversation, simulator: Simulator, system: System, timeout_seconds: float | None,
          cached_only: bool, counted: Counter | None = None) -> Transcript:
    def simulate(scenario, turns, seed, attempt):
        text = simulator.reply(scenario, conversation.repeat, turns, seed, attempt, cached_only)
        if counted is not None:
            counted["simulator"] += 1
        return text

    def respond(scenario, turns, seed):
        answer = system.reply(scenario, conversation.repeat, turns, seed, cached_only)
        if counted is not None:
            counted["system"] += 1
        return answer

    return converse(conversation.scenario, conversation.repeat, conversation.seed, simulate, respond,
                    timeout_seconds)


def plan(planned: Sequence[Conversation], simulator: Simulator, system: System, judge_repeats: int,
         judge_enabled: bool, max_calls: int | None) -> dict[str, Any]:
    """The calls still to make, at most, from a replay of each conversation from the cache."""
    simulator_calls = system_calls = judge_calls = cached = 0
    for conversation in planned:
        scenario = conversation.scenario
        done: Counter = Counter()
        try:
            _talk(conversation, simulator, system, None, cached_only=True, counted=done)
        except NotCached:
            simulator_calls += max(0, simulator_bound(scenario) - done["simulator"])
            system_calls += max(0, scenario.max_turns - done["system"])
        else:
            cached += 1
        if judge_enabled:
            judge_calls += judge_bound(scenario, judge_repeats)
    for side in (simulator, system):  # the replay's cache reads are not the run's
        side.stats.__init__()
    return {"conversations": len(planned), "cached_conversations": cached,
            "simulator_calls": simulator_calls, "system_calls": system_calls,
            # the judge's cache is checked by 03_judge, which makes its own estimate
            "judge_calls_at_most": judge_calls,
            "calls": simulator_calls + system_calls + judge_calls, "max_calls": max_calls,
            "bound": "at most: a conversation that ends before max_turns makes fewer; retries are not counted"}


def check_budget(planned: dict[str, Any]) -> None:
    limit = planned["max_calls"]
    if limit is not None and planned["calls"] > limit:
        raise OverBudget(
            f"the scenarios could make up to {planned['calls']} calls ({planned['simulator_calls']} to the "
            f"simulator, {planned['system_calls']} to the system under test, {planned['judge_calls_at_most']} "
            f"to the judge; {planned['cached_conversations']} of {planned['conversations']} conversations are "
            f"cached), over scenarios.max_calls = {limit}: raise it (-p scenarios.max_calls={planned['calls']}) "
            "or run fewer (scenarios.repeats, max_turns in the scenario file)")


def describe_plan(planned: dict[str, Any]) -> str:
    return (f"{planned['conversations']} conversations ({planned['cached_conversations']} answered by the cache): "
            f"at most {planned['simulator_calls']} simulator, {planned['system_calls']} system and "
            f"{planned['judge_calls_at_most']} judge calls")


def run_conversations(planned: Sequence[Conversation], simulator: Simulator, system: System,
                      timeout_seconds: float | None,
                      on_done: Callable[[Transcript], None] | None = None) -> list[Transcript]:
    transcripts = []
    for conversation in planned:
        transcript = _talk(conversation, simulator, system, timeout_seconds, cached_only=False)
        transcripts.append(transcript)
        if on_done is not None:
            on_done(transcript)
    return transcripts


def end_reason_counts(transcripts: Sequence[Transcript]) -> dict[str, int]:
    """How many conversations ended each way, every reason listed (0 included), in END_REASONS' order."""
    ends = Counter(t.end_reason for t in transcripts)
    return {reason: ends.get(reason, 0) for reason in END_REASONS}


def summarize_conversations(transcripts: Sequence[Transcript], planned: dict[str, Any], simulator: Simulator,
                            system: System, scenario_file: dict[str, Any], repeats: int,
                            run_seed: int) -> dict[str, Any]:
    return {
        "status": "ran", "scenario_file": scenario_file, "repeats": repeats, "seed": run_seed,
        "n_scenarios": len({t.scenario_id for t in transcripts}), "n_transcripts": len(transcripts),
        "end_reasons": end_reason_counts(transcripts),
        "simulator": {**simulator.describe(), "calls": simulator.stats.calls,
                      "cache_hits": simulator.stats.cache_hits, "retries": simulator.stats.retries,
                      "prompt_tokens": simulator.stats.prompt_tokens,
                      "completion_tokens": simulator.stats.completion_tokens},
        "system": {**system.describe(), "calls": system.stats.calls, "cache_hits": system.stats.cache_hits,
                   "retries": system.stats.retries, "models": sorted(system.models)},
        "estimate": planned,
    }

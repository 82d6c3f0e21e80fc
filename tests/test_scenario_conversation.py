"""The conversation loop with scripted sides: how each conversation ends, with its reason, and
how many calls it makes of each side."""

from __future__ import annotations

import json

import pytest

from evalbook.scenarios.conversation import END_REASONS, CallFailed, converse
from evalbook.scenarios.spec import Scenario


def scenario(**changes) -> Scenario:
    values = dict(id="card", goal="learn the price of a new card", persona="terse", first_speaker="user",
                  max_turns=4, criteria=("states the price",))
    return Scenario(**{**values, **changes})


def says(message: str, done: bool = False, reason: str = "continuing") -> str:
    return json.dumps({"message": message, "done": done, "reason": reason})


class Script:
    """A simulator playing `replies` in turn (the last one again once they run out), and a system
    answering "answer <n>"; each records what it was given."""

    def __init__(self, *replies, system_fails_at: int | None = None, timed_out: bool = False):
        self.replies, self.system_fails_at, self.timed_out = list(replies), system_fails_at, timed_out
        self.simulator_seen, self.system_seen = [], []

    def simulate(self, scenario, turns, seed, attempt):
        self.simulator_seen.append((len(turns), seed, attempt))
        index = len(self.simulator_seen) - 1
        reply = self.replies[min(index, len(self.replies) - 1)]
        if isinstance(reply, Exception):
            raise reply
        return reply

    def respond(self, scenario, turns, seed):
        self.system_seen.append([dict(t) for t in turns])
        if self.system_fails_at == len(self.system_seen):
            raise CallFailed("HTTP 500: the service broke", timed_out=self.timed_out)
        return f"answer {len(self.system_seen)}"


def run(script: Script, **changes):
    return converse(scenario(**changes), repeat=2, seed=11, simulate=script.simulate, respond=script.respond)


def test_the_user_reaches_the_goal_at_turn_three():
    script = Script(says("price?"), says("and delivery?"), says("thanks!", True, "goal_met"))
    transcript = run(script)
    assert transcript.end_reason == "goal_met" and transcript.end_reason in END_REASONS
    assert [t["role"] for t in transcript.turns] == ["user", "assistant", "user", "assistant", "user"]
    assert transcript.turns[-1]["content"] == "thanks!"
    assert (transcript.simulator_calls, transcript.system_calls) == (3, 2)
    # the system is given the whole history each turn
    assert script.system_seen[1] == transcript.turns[:3]
    assert {seed for _, seed, _ in script.simulator_seen} == {11} and transcript.repeat == 2


def test_a_user_who_never_ends_stops_at_max_turns():
    script = Script(*(says(f"question {n}") for n in range(100)))
    transcript = run(script, max_turns=5)
    assert transcript.end_reason == "max_turns" and transcript.system_calls == 5
    assert transcript.simulator_calls == 5 and len(transcript.turns) == 10


def test_the_opening_is_sent_as_written_without_a_simulator_call():
    script = Script(*(says(f"question {n}") for n in range(100)))
    transcript = run(script, opening="how much is a new card?", max_turns=3)
    assert transcript.turns[0] == {"role": "user", "content": "how much is a new card?"}
    assert (transcript.simulator_calls, transcript.system_calls) == (2, 3)


def test_an_assistant_that_speaks_first_opens_and_its_opening_is_no_reply():
    script = Script(says("price?"), says("bye", True, "gave_up"))
    transcript = run(script, first_speaker="assistant", opening="Hello, how can I help?", max_turns=1)
    assert transcript.turns[0] == {"role": "assistant", "content": "Hello, how can I help?"}
    assert script.simulator_seen[0][0] == 1  # the simulator saw the opening
    assert transcript.end_reason == "max_turns" and transcript.system_calls == 1


def test_a_user_who_gives_up_ends_it_so():
    transcript = run(Script(says("price?"), says("", True, "gave_up")))
    assert transcript.end_reason == "gave_up" and transcript.turns[-1]["role"] == "assistant"


def test_goodbyes_in_a_loop_are_detected():
    script = Script(says("price?"), says("Thanks, goodbye!"), says("thanks goodbye"), says("Thanks, goodbye!!"))
    transcript = run(script, max_turns=10)
    assert transcript.end_reason == "loop_detected" and "user turn 3" in transcript.end_detail
    assert transcript.system_calls == 2  # the repeated message is kept, and not sent


def test_broken_json_is_asked_once_more_then_ends_as_a_simulator_error():
    script = Script(says("price?"), "I think I'd say: bye" + "!" * 400)
    transcript = run(script)
    assert transcript.end_reason == "simulator_error" and "not JSON" in transcript.end_detail
    assert "twice" in transcript.end_detail and "I think I'd say" in transcript.end_detail
    assert len(transcript.end_detail) < 400
    assert [attempt for _, _, attempt in script.simulator_seen] == [0, 0, 1]
    assert transcript.turns[-1]["role"] == "assistant"  # what was said before is kept


def test_one_broken_reply_is_retried_and_the_conversation_goes_on():
    script = Script("not json", says("price?"), says("bye", True, "goal_met"))
    transcript = run(script)
    assert transcript.end_reason == "goal_met" and transcript.simulator_calls == 3
    assert [attempt for _, _, attempt in script.simulator_seen] == [0, 1, 0]


def test_a_failed_simulator_call_ends_as_a_simulator_error_with_its_reason():
    transcript = run(Script(says("price?"), CallFailed("HTTP 500: simulator down")))
    assert transcript.end_reason == "simulator_error" and "HTTP 500: simulator down" in transcript.end_detail


@pytest.mark.parametrize(("timed_out", "reason"), [(False, "system_error"), (True, "timeout")])
def test_a_failed_system_call_is_recorded_with_its_reason(timed_out, reason):
    script = Script(*(says(f"question {n}") for n in range(10)), system_fails_at=2, timed_out=timed_out)
    transcript = run(script)
    assert transcript.end_reason == reason and transcript.end_detail == "HTTP 500: the service broke"
    assert transcript.system_calls == 2 and transcript.turns[-1] == {"role": "user", "content": "question 1"}
    assert transcript.as_record()["end_reason"] == reason


def test_a_conversation_past_its_time_limit_ends_as_a_timeout():
    ticks = iter(range(0, 1000, 10))
    script = Script(*(says(f"question {n}") for n in range(100)))
    transcript = converse(scenario(max_turns=50), 0, 1, script.simulate, script.respond,
                          timeout_seconds=25, clock=lambda: next(ticks))
    assert transcript.end_reason == "timeout" and "25 s" in transcript.end_detail and transcript.system_calls == 3

"""One simulated conversation: the simulated user and the system under test take turns until
one of the END_REASONS, which the transcript records with its detail.

The two sides come in as callables, so that this loop is the same whatever serves them:
`simulate(scenario, turns, seed, attempt)` returns the simulator's raw reply text (the loop
reads it, evalbook.scenarios.simulator), `respond(scenario, turns, seed)` the system's answer
to the conversation so far. Either raises CallFailed when its call failed after its own
retries; its reason must already be redacted.

- The user speaks first unless the scenario says the assistant does; then the assistant's
  `opening` is its first message. A user's `opening` is sent as written, with no simulator call.
- A simulator reply that is not the JSON asked for is asked for once more (`attempt` 1, which
  the caller keys its cache by); a second one ends the conversation as `simulator_error`, with
  the reason and the reply's first characters.
- `done` from the simulator ends it as `goal_met` or `gave_up` (its last message, if any, is
  kept); a user message that repeats an earlier one, nearly or exactly, as `loop_detected`.
- A failed system call ends it as `system_error` with the reason (`timeout` when the call
  timed out), never dropped; so does a failed simulator call, as `simulator_error`.
- `max_turns` counts the assistant's replies; past `timeout_seconds` for the whole conversation,
  it ends as `timeout` after the turn under way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from evalbook.errors import EvalbookError
from evalbook.scenarios.simulator import Unusable, read_user_turn, repeats_earlier
from evalbook.scenarios.spec import Scenario

END_REASONS = ("goal_met", "gave_up", "max_turns", "loop_detected", "timeout", "system_error", "simulator_error")


class CallFailed(EvalbookError, RuntimeError):
    """A simulator or system call that failed after its retries; `reason` is redacted."""

    def __init__(self, reason: str, timed_out: bool = False):
        super().__init__(reason)
        self.reason, self.timed_out = reason, timed_out


@dataclass
class Transcript:
    scenario_id: str
    repeat: int
    seed: int
    turns: list[dict[str, str]] = field(default_factory=list)  # {"role": user | assistant, "content": ...}
    end_reason: str | None = None  # one of END_REASONS
    end_detail: str | None = None
    simulator_calls: int = 0  # replies asked of the simulator, retries included
    system_calls: int = 0
    seconds: float = 0.0

    def as_record(self) -> dict[str, Any]:
        return {"scenario_id": self.scenario_id, "repeat": self.repeat, "seed": self.seed,
                "turns": [dict(turn) for turn in self.turns], "end_reason": self.end_reason,
                "end_detail": self.end_detail, "simulator_calls": self.simulator_calls,
                "system_calls": self.system_calls}


Simulate = Callable[[Scenario, list[dict[str, str]], int, int], str | None]
Respond = Callable[[Scenario, list[dict[str, str]], int], str]


def _ended(transcript: Transcript, reason: str, detail: str | None, started: float, clock) -> Transcript:
    transcript.end_reason, transcript.end_detail = reason, detail
    transcript.seconds = clock() - started
    return transcript


def converse(scenario: Scenario, repeat: int, seed: int, simulate: Simulate, respond: Respond,
             timeout_seconds: float | None = None, clock: Callable[[], float] = time.monotonic) -> Transcript:
    """One conversation of `scenario`, its `repeat`-th, with its derived `seed`."""
    started = clock()
    transcript = Transcript(scenario.id, repeat, seed)
    turns = transcript.turns
    if scenario.first_speaker == "assistant":
        turns.append({"role": "assistant", "content": scenario.opening})
    user_messages: list[str] = []
    while True:
        if scenario.first_speaker == "user" and scenario.opening is not None and not user_messages:
            message, done, reason = scenario.opening, False, "continuing"
        else:
            unusable: Unusable | None = None
            for attempt in (0, 1):
                transcript.simulator_calls += 1
                try:
                    user_turn = read_user_turn(simulate(scenario, list(turns), seed, attempt))
                except CallFailed as failure:
                    return _ended(transcript, "simulator_error", f"the simulator call failed: {failure.reason}",
                                  started, clock)
                except Unusable as error:
                    unusable = error
                    continue
                unusable = None
                break
            if unusable is not None:
                return _ended(transcript, "simulator_error",
                              f"{unusable.reason}, twice; the last reply began {unusable.shown!r}", started, clock)
            message, done, reason = user_turn.message, user_turn.done, user_turn.reason
        if done:
            if message.strip():
                turns.append({"role": "user", "content": message})
            return _ended(transcript, reason, None, started, clock)
        looped = repeats_earlier(message, user_messages)
        turns.append({"role": "user", "content": message})
        user_messages.append(message)
        if looped:
            return _ended(transcript, "loop_detected", f"user turn {len(user_messages)} repeats an earlier one",
                          started, clock)
        transcript.system_calls += 1
        try:
            answer = respond(scenario, list(turns), seed)
        except CallFailed as failure:
            return _ended(transcript, "timeout" if failure.timed_out else "system_error", failure.reason,
                          started, clock)
        turns.append({"role": "assistant", "content": answer})
        if transcript.system_calls >= scenario.max_turns:  # replies: an assistant's opening is not one
            return _ended(transcript, "max_turns", f"{scenario.max_turns} assistant turns", started, clock)
        if timeout_seconds is not None and clock() - started > timeout_seconds:
            return _ended(transcript, "timeout", f"the conversation ran past {timeout_seconds:g} s", started, clock)

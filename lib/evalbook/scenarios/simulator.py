"""The simulated user's side of a conversation: its reply format, its seeds, and the loop check.

The simulator answers each turn in strict JSON, `{"message": ..., "done": ..., "reason": ...}`
(REPLY_SCHEMA): `reason` is `continuing` while `done` is false, and `goal_met` or `gave_up`
when it ends the conversation. There is no stop string to match in the text. A reply that is
not that JSON, or whose `done` and `reason` disagree, is Unusable; the loop asks once more,
then ends the transcript as a simulator error with the reply's first characters.

Seeds: each (scenario, repeat) gets its own seed from the run's seed, the scenario's id and the
repeat index (`derived_seed`), so that a run is reproducible and its repeats differ.

Loops: a user message that repeats an earlier one of the same conversation, word for word or
nearly (`NEAR_SAME` similarity after case and punctuation are set aside, with the same numbers:
"order 1234" and "order 1235" are two questions), ends it as a loop.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any, Sequence

from evalbook.errors import EvalbookError
from evalbook.prompts import PromptTemplate, load_template
from evalbook.scenarios.spec import Scenario
from evalbook.validation import jsonschema

REASONS = ("continuing", "goal_met", "gave_up")
REPLY_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["message", "done", "reason"],
    "properties": {"message": {"type": "string"}, "done": {"type": "boolean"}, "reason": {"enum": list(REASONS)}},
}
SHOWN_REPLY_CHARACTERS = 200
NEAR_SAME = 0.9  # difflib's ratio between two normalised user messages at or above which they repeat
PROMPT = ("simulator", 1)  # scenarios/prompts/simulator-v1.txt; its sha256 keys every simulator call
SEED_SPACE = 2**31  # seeds stay within what every OpenAI-compatible server accepts


class Unusable(EvalbookError, ValueError):
    """A simulator reply that is not the JSON asked for; `reason` says why, `shown` is its start."""

    def __init__(self, reason: str, text: str | None):
        self.reason = reason
        self.shown = (text or "")[:SHOWN_REPLY_CHARACTERS]
        super().__init__(f"{reason}: {self.shown!r}")


@dataclass(frozen=True)
class UserTurn:
    message: str
    done: bool
    reason: str  # one of REASONS


def read_user_turn(text: str | None) -> UserTurn:
    """The simulator's reply as a UserTurn; Unusable when it is not the JSON asked for."""
    if text is None or not text.strip():
        raise Unusable("the simulator's reply is empty", text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise Unusable(f"the simulator's reply is not JSON ({error.msg})", text) from None
    problems = sorted(jsonschema.Draft202012Validator(REPLY_SCHEMA).iter_errors(value), key=str)
    if problems:
        raise Unusable(f"the simulator's reply does not match its schema ({problems[0].message})", text)
    if value["done"] != (value["reason"] != "continuing"):
        raise Unusable(f"the simulator's reply says done {str(value['done']).lower()} with reason "
                       f"{value['reason']!r}", text)
    if not value["done"] and not value["message"].strip():
        raise Unusable("the simulator's reply goes on with an empty message", text)
    return UserTurn(value["message"], value["done"], value["reason"])


def derived_seed(run_seed: int, scenario_id: str, repeat: int) -> int:
    """The seed of one repeat of one scenario: the same for the same three, different otherwise."""
    digest = hashlib.sha256(json.dumps([run_seed, scenario_id, repeat]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % SEED_SPACE


def _normalised(message: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", message.casefold()).split())


def repeats_earlier(message: str, earlier: Sequence[str], near_same: float = NEAR_SAME) -> bool:
    """True when `message` is the same, or nearly, as one of the `earlier` user messages."""
    new = _normalised(message)
    numbers = re.findall(r"\d+", new)
    return any(re.findall(r"\d+", old) == numbers and SequenceMatcher(None, new, old).ratio() >= near_same
               for old in map(_normalised, earlier))


def simulator_template() -> PromptTemplate:
    return load_template(*PROMPT, package="evalbook.scenarios")


def simulator_prompt(template: PromptTemplate, scenario: Scenario, turns: Sequence[dict[str, str]],
                     json_instructions: bool) -> str:
    """What the simulator is sent for the next user message: the goal, the persona and the
    conversation so far, each inside its data block (evalbook.prompts defuses the markers)."""
    return template.render(goal=scenario.goal, persona=scenario.persona,
                           turns=[{"role": t["role"], "content": t["content"]} for t in turns],
                           json_instructions=json_instructions, reply_schema=json.dumps(REPLY_SCHEMA))

"""The scripted sides of a conversation for tests/faultserver.py's FaultServer(reply=scripted):
one server on 127.0.0.1 plays the simulated user (model "sim"), the system under test (model
"system") and the judge (any other model).

The simulator follows the script its scenario's goal names, `<script> <n>`:
- `end-at N`: goes on until the assistant has replied N times, then ends with goal_met;
- `give-up 0`: ends at once with gave_up;
- `goodbye 0`: says "Thanks, goodbye!" every time, never done (a loop);
- `broken 0`: replies with text that is not JSON;
- anything else (`never 0`): asks a new numbered question every time, never done.
The system answers `Answer <k> to: <the latest user message>`. The judge writes a reply that
parses against the schema asked for, every criterion met and every statement supported.
"""

from __future__ import annotations

import json
import re

from faultserver import valid_reply

GOAL = re.compile(r"<<<GOAL\n(.*?)\nGOAL>>>", re.DOTALL)


def simulated_user(prompt: str) -> str:
    script, _, number = GOAL.search(prompt).group(1).strip().partition(" ")
    conversation = prompt.split("<<<CONVERSATION", 1)[1].split("CONVERSATION>>>", 1)[0]
    replies = conversation.count("\nASSISTANT: ")
    if script == "end-at" and replies >= int(number):
        return json.dumps({"message": "Thanks, that is all.", "done": True, "reason": "goal_met"})
    if script == "give-up":
        return json.dumps({"message": "", "done": True, "reason": "gave_up"})
    if script == "goodbye":
        return json.dumps({"message": "Thanks, goodbye!", "done": False, "reason": "continuing"})
    if script == "broken":
        return "Sure! Here is my next message: where does glass go?" + " padding" * 40
    return json.dumps({"message": f"And question number {replies + 1}?", "done": False, "reason": "continuing"})


def scripted(body: dict) -> str:
    if body["model"] == "sim":
        return simulated_user(body["messages"][-1]["content"])
    if body["model"] == "system":
        users = [m for m in body["messages"] if m["role"] == "user"]
        return f"Answer {len(users)} to: {users[-1]['content']}"
    return valid_reply(body)

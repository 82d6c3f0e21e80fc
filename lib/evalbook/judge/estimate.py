"""The judge's pre-flight estimate: before the first call, what the calls will be and cost, and
whether they fit the profile's budget (`judge.max_calls`, `judge.max_cost_usd`).

- **Calls**: the requests not answered by the cache (each repeat is a request of its own).
- **Prompt tokens**: counted by the judge server's own tokenizer where it offers one
  (llama.cpp's `POST /extras/tokenize/count`, asked only of a server on this machine, so that no
  prompt goes anywhere a call would not); otherwise not counted before the calls, and said so.
  The count is of the prompt text: the server's chat template adds a few tokens per call.
- **Cost**: with prices pinned (`judge.prices`, USD per million tokens), the prompt tokens' cost,
  and at most that plus every call's `max_tokens` at the output price.

A run over budget is refused before any call, naming the limit and the override that changes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from evalbook.judge.client import JudgeRequest, JudgeSettings

TOKENIZE_PATH = "/extras/tokenize/count"
COUNTER = "the judge server's tokenizer (llama.cpp /extras/tokenize/count)"


class OverBudget(RuntimeError):
    """The calls a judge run would make exceed the profile's budget; nothing was called."""


@dataclass(frozen=True)
class TokenCount:
    total: int | None  # None: not counted
    counter: str  # how, or why not


def server_root(base_url: str) -> str:
    """The server's root URL: its OpenAI base URL without the trailing `/v1`."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def count_prompt_tokens(settings: JudgeSettings, prompts: Sequence[str], http_transport=None,
                        timeout: float = 10.0) -> TokenCount:
    """The prompts' tokens by the judge server's tokenizer, or None with the reason."""
    import httpx

    if not prompts:
        return TokenCount(0, "no call to make")
    if not settings.loopback:
        return TokenCount(None, f"not counted before the calls: {settings.host} is not on this machine, "
                                "and its calls report their tokens")
    url = server_root(settings.base_url) + TOKENIZE_PATH
    headers = {"Authorization": f"Bearer {settings.api_key()}"} if settings.api_key_env else {}
    total = 0
    try:
        with httpx.Client(transport=http_transport, timeout=timeout, trust_env=False) as client:
            for prompt in prompts:
                response = client.post(url, json={"input": prompt}, headers=headers)
                if response.status_code != 200:
                    return TokenCount(None, f"not counted before the calls: the server at {settings.host} "
                                            f"answered HTTP {response.status_code} to POST {TOKENIZE_PATH}")
                total += int(response.json()["count"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
        return TokenCount(None, f"not counted before the calls: POST {TOKENIZE_PATH} failed "
                                f"({type(error).__name__})")
    return TokenCount(total, COUNTER)


def estimate(requests: Sequence[JudgeRequest], pending: Sequence[JudgeRequest], settings: JudgeSettings,
             config: dict[str, Any], http_transport=None) -> dict[str, Any]:
    """What judging `requests` will take, `pending` being those the cache does not answer."""
    tokens = count_prompt_tokens(settings, [request.prompt for request in pending], http_transport)
    prices = config.get("prices")
    cost = at_most = None
    if prices and tokens.total is not None:
        cost = tokens.total * prices["input_usd_per_million"] / 1e6
        at_most = cost + len(pending) * settings.max_tokens * prices["output_usd_per_million"] / 1e6
    return {"requests": len(requests), "cached": len(requests) - len(pending), "calls": len(pending),
            "prompt_tokens": tokens.total, "token_counter": tokens.counter,
            "cost_usd": cost, "cost_usd_at_most": at_most,
            "max_calls": config.get("max_calls"), "max_cost_usd": config.get("max_cost_usd")}


def check_budget(planned: dict[str, Any]) -> None:
    """Raise OverBudget when the planned calls exceed `max_calls`, or their cost (at most)
    exceeds `max_cost_usd` or cannot be told."""
    limit = planned["max_calls"]
    if limit is not None and planned["calls"] > limit:
        raise OverBudget(f"the judge would make {planned['calls']} calls ({planned['cached']} of "
                         f"{planned['requests']} requests are cached), over judge.max_calls = {limit}: "
                         f"raise it (-p judge.max_calls={planned['calls']}) or judge fewer answers "
                         "(judge.sample_size, judge.repeats)")
    ceiling = planned["max_cost_usd"]
    if ceiling is None or planned["calls"] == 0:
        return
    if planned["cost_usd_at_most"] is None:
        why = ("no prices are pinned (judge.prices)" if planned["prompt_tokens"] is not None
               else f"its prompt tokens are {planned['token_counter']}")
        raise OverBudget(f"judge.max_cost_usd = {ceiling} is set, but the cost of {planned['calls']} calls "
                         f"cannot be told before them: {why}")
    if planned["cost_usd_at_most"] > ceiling:
        raise OverBudget(f"the judge's {planned['calls']} calls could cost up to "
                         f"{planned['cost_usd_at_most']:.4f} USD ({planned['prompt_tokens']} prompt tokens, "
                         f"and up to judge.max_tokens each in reply), over judge.max_cost_usd = {ceiling}: "
                         "raise it, or judge fewer answers (judge.sample_size, judge.repeats)")


def describe(planned: dict[str, Any]) -> str:
    """The estimate in one sentence, for the stage's output and the pages."""
    text = (f"{planned['calls']} calls to make ({planned['cached']} of {planned['requests']} requests "
            "answered by the cache)")
    if planned["prompt_tokens"] is not None:
        text += f"; {planned['prompt_tokens']} prompt tokens, by {planned['token_counter']}"
    else:
        text += f"; prompt tokens {planned['token_counter']}"
    if planned["cost_usd"] is not None:
        text += (f"; cost {planned['cost_usd']:.4f} USD for the prompts, at most "
                 f"{planned['cost_usd_at_most']:.4f} USD with the replies")
    return text

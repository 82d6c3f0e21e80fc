"""The judge's pre-flight estimate: before the first call, what the calls will be and cost, and
whether they fit the profile's budget (`judge.max_calls`, `judge.max_cost_usd`).

- **Calls**: the requests not answered by the cache (each repeat is a request of its own).
- **Prompt tokens**: for a judge server on this machine, counted by its own tokenizer
  (llama.cpp's `POST /extras/tokenize/count`); for one elsewhere, by tiktoken on this machine
  when it knows the model's encoding (OpenAI's models), so that no prompt goes anywhere a call
  would not. tiktoken fetches an encoding's ranks file on first use and caches it in
  TIKTOKEN_CACHE_DIR; offline, without that file, or for a model tiktoken does not know, the
  tokens are not counted before the calls, and the reason says so. The count is of the prompt
  text: the chat template (the server's, or OpenAI's message format) adds a few tokens per call.
- **Cost**: with prices pinned (`judge.prices`, USD per million tokens), the prompt tokens' cost,
  and at most that plus every call's `max_tokens` at the output price.

A run over budget is refused before any call, naming the limit and the override that changes it.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from evalbook.errors import EvalbookError
from evalbook.judge.client import JudgeRequest, JudgeSettings

if TYPE_CHECKING:
    import tiktoken

TOKENIZE_PATH = "/extras/tokenize/count"
COUNTER = "the judge server's tokenizer (llama.cpp /extras/tokenize/count)"
# tiktoken fetches a ranks file with no timeout of its own: a blackholed network would hang the run
ENCODING_LOAD_TIMEOUT = 20.0  # seconds

_encoding_loads: dict[str, Future] = {}  # by encoding name, kept while running so a hung load is not restarted
_encoding_loads_lock = threading.Lock()


class OverBudget(EvalbookError, RuntimeError):
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
    """The prompts' tokens, by a server on this machine or else by tiktoken, or None with the reason."""
    if not prompts:
        return TokenCount(0, "no call to make")
    if settings.loopback:
        return count_by_server(settings, prompts, http_transport, timeout)
    return count_by_tiktoken(settings, prompts)


def count_by_server(settings: JudgeSettings, prompts: Sequence[str], http_transport,
                    timeout: float) -> TokenCount:
    """The prompts' tokens by the judge server's tokenizer, or None with the reason."""
    # slow to import: only a stage that calls a model pays it
    import httpx

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


def count_by_tiktoken(settings: JudgeSettings, prompts: Sequence[str]) -> TokenCount:
    """The prompts' tokens by tiktoken's encoding of the model, on this machine, or None with the reason."""
    # slow to import: only when prompt tokens are counted
    import tiktoken

    try:
        name = tiktoken.encoding_name_for_model(settings.model)
    except KeyError:
        return TokenCount(None, f"not counted before the calls: {settings.host} is not on this machine, "
                                f"and tiktoken knows no encoding for the model {settings.model!r}; "
                                "its calls report their tokens")
    try:
        encoding = load_encoding(name)
    except TimeoutError:
        return TokenCount(None, f"not counted before the calls: loading tiktoken's encoding {name} timed out "
                                f"after {ENCODING_LOAD_TIMEOUT:g} s (its ranks file is fetched on first use); "
                                + countable_offline(name))
    except (OSError, ValueError) as error:  # no network, no cache folder, a file that fails its sha256
        return TokenCount(None, f"not counted before the calls: tiktoken's encoding {name} could not be loaded "
                                f"({type(error).__name__}); " + countable_offline(name))
    # user text may hold a special token's text: the API reads it as text, and so does the count
    total = sum(len(encoding.encode_ordinary(prompt)) for prompt in prompts)
    return TokenCount(total, f"tiktoken {name} (the model {settings.model})")


def countable_offline(encoding_name: str) -> str:
    """How to give tiktoken the encoding without the network. tiktoken names its cached file after
    the sha1 of the file's URL, so the way that cannot go wrong is to let tiktoken fill the cache."""
    fill = f"import tiktoken; tiktoken.get_encoding('{encoding_name}')"
    return (f'to count them offline, fill a tiktoken cache where the network is (TIKTOKEN_CACHE_DIR=<folder> '
            f'python -c "{fill}"), then copy the folder here and set TIKTOKEN_CACHE_DIR to it; '
            "its calls report their tokens")


def load_encoding(name: str) -> tiktoken.Encoding:
    """tiktoken's encoding `name`, by tiktoken's own loader (which fetches its ranks file on first
    use, checks its sha256 and caches it), loaded once a process.

    The load runs in a daemon thread, waited on for ENCODING_LOAD_TIMEOUT seconds, after which
    TimeoutError; a load still running is waited on again by the next call, one that failed is
    tried again."""
    # slow to import: only when prompt tokens are counted
    import tiktoken

    with _encoding_loads_lock:
        load = _encoding_loads.get(name)
        if load is None or (load.done() and load.exception() is not None):
            load = _encoding_loads[name] = Future()
            threading.Thread(target=_settle, args=(load, tiktoken.get_encoding, name), daemon=True,
                             name=f"tiktoken {name}").start()
    return load.result(timeout=ENCODING_LOAD_TIMEOUT)


def _settle(future: Future, function, *args) -> None:
    try:
        future.set_result(function(*args))
    except Exception as error:  # raised again in the waiting caller
        future.set_exception(error)


def estimate(requests: Sequence[JudgeRequest], pending: Sequence[JudgeRequest], settings: JudgeSettings,
             config: dict[str, Any], http_transport=None) -> dict[str, Any]:
    """What judging `requests` will take, `pending` being those the cache does not answer."""
    tokens = count_prompt_tokens(settings, [request.prompt for request in pending], http_transport)
    prices = config.get("prices")
    cost = at_most = None
    if prices and tokens.total is not None:
        cost = tokens.total * prices["input_usd_per_million"] / 1e6
        at_most = cost + len(pending) * settings.max_tokens * prices["output_usd_per_million"] / 1e6
    by_metric: dict[str, int] = {}
    for request in requests:  # e.g. one chunk_relevance request per retrieved chunk and repeat
        by_metric[request.metric] = by_metric.get(request.metric, 0) + 1
    return {"requests": len(requests), "cached": len(requests) - len(pending), "calls": len(pending),
            "requests_by_metric": by_metric,
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

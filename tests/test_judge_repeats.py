"""Judge noise: `judge.repeats: n` judges each sampled example n times.

Each repeat is its own request (its own seed, seed + repeat, and its own cache entry), so a rerun
makes no call. An example's score is the mean of its scored repeats; its record keeps every
repeat and the spread (min, max, standard deviation); the summary gives the share of examples
whose pass/fail flips across repeats. The stand-in judge below answers by the request's seed, so
the spread and the flips are known in advance.
"""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from evalbook.judge.stage import judge_table
from test_judge_stage import cache, canonical, embed  # noqa: F401  (cache: a fixture)

REPEATS = 3
ANSWER = "Bins are collected on Tuesdays. Glass goes in the teal bin."


def groundedness_reply(seed: int, example: str) -> dict:
    """Two statements; the second is supported on even seeds only, for example 'flip'; for
    'steady' both are always supported."""
    second = 1 if example == "steady" or seed % 2 == 0 else 0
    return {"statements": [
        {"statement": "Bins are collected on Tuesdays.", "verdict": 1, "justification": "The reference says so."},
        {"statement": "Glass goes in the teal bin.", "verdict": second, "justification": "As read."}]}


class SeededJudge:
    """Answers groundedness by the request's seed; counts the calls."""

    def __init__(self):
        self.seeds: list[int] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.seeds.append(body["seed"])
        prompt = body["messages"][0]["content"]
        example = "flip" if "Reference flip:" in prompt else "steady"
        text = json.dumps(groundedness_reply(body["seed"], example))
        return httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


@pytest.fixture
def config(default_judge_config) -> dict:
    default_judge_config.update(sample_size=None, repeats=REPEATS, seed=0)
    for name in ("relevance", "criteria"):
        default_judge_config["metrics"][name]["enabled"] = False
    default_judge_config["metrics"]["groundedness"]["threshold"] = 0.75
    return default_judge_config


def judge(config, cache):
    server = SeededJudge()
    table = canonical([("flip", ANSWER, "EnterpriseSearchPolicy"), ("steady", ANSWER, "EnterpriseSearchPolicy")])
    outcome = judge_table(table, config, cache, embed, seed=0, http_transport=httpx.MockTransport(server))
    return outcome, server


def test_each_example_is_judged_once_per_repeat_with_its_own_seed(config, cache):
    _, server = judge(config, cache)
    assert sorted(server.seeds) == sorted([0, 1, 2] * 2)
    assert len(cache) == 2 * REPEATS


def test_an_example_s_score_is_the_mean_of_its_repeats_with_their_spread(config, cache):
    outcome, _ = judge(config, cache)
    flip = outcome.records["flip"]["groundedness"]
    scores = [1.0, 0.5, 1.0]  # seeds 0, 1, 2
    assert [r["score"] for r in flip["repeats"]] == scores
    assert [r["passed"] for r in flip["repeats"]] == [True, False, True]
    assert flip["score"] == pytest.approx(np.mean(scores))
    assert flip["passed"] is bool(np.mean(scores) >= 0.75)
    assert flip["spread"] == {"n_scored": 3, "min": 0.5, "max": 1.0,
                              "std": pytest.approx(float(np.std(scores, ddof=1)))}
    assert flip["flipped"] is True
    steady = outcome.records["steady"]["groundedness"]
    assert steady["spread"]["std"] == 0.0 and steady["flipped"] is False


def test_the_summary_gives_the_share_of_examples_that_flip(config, cache):
    outcome, _ = judge(config, cache)
    summary = outcome.summary["metrics"]["groundedness"]
    assert summary["repeats"] == {"n": REPEATS, "n_compared": 2, "n_flipped": 1, "flip_share": 0.5,
                                  "mean_std": pytest.approx(float(np.std([1.0, 0.5, 1.0], ddof=1)) / 2),
                                  "max_range": 0.5}
    assert summary["mean"] == pytest.approx(np.mean([np.mean([1.0, 0.5, 1.0]), 1.0]))
    assert summary["calls"] == 2 * REPEATS


def test_a_rerun_makes_no_call_and_gives_the_same_records(config, cache):
    first, _ = judge(config, cache)
    second, server = judge(config, cache)
    assert server.seeds == []
    assert second.records == first.records
    assert second.summary["metrics"]["groundedness"]["cache_hits"] == 2 * REPEATS


def test_one_repeat_keeps_today_s_records_and_cache_keys(config, cache):
    config["repeats"] = 1
    outcome, server = judge(config, cache)
    assert server.seeds == [0, 0]
    record = outcome.records["flip"]["groundedness"]
    assert "repeats" not in record and "spread" not in record and record["score"] == 1.0
    assert "repeats" not in outcome.summary["metrics"]["groundedness"]
    del config["repeats"]  # a profile written before the key: one repeat, the same cache entries
    _, again = judge(config, cache)
    assert again.seeds == []


def test_a_report_of_a_repeated_judge_matches_the_schema(config, cache):
    from datetime import datetime, timezone

    from evalbook.report.document import build_report, validate_report
    from test_judge_stage import LOAD_COUNTS, PROVENANCE, scored_for

    table = canonical([("flip", ANSWER, "EnterpriseSearchPolicy"), ("steady", ANSWER, "EnterpriseSearchPolicy")])
    outcome = judge_table(table, config, cache, embed, seed=0, http_transport=httpx.MockTransport(SeededJudge()))
    report = build_report(
        run_id="2d6b3516-cc7d-4cf4-ac99-07b0159bfb11", timestamp=datetime(2026, 1, 1, tzinfo=timezone.utc),
        dataset={"name": "t", "split": "sample"}, models={"generator": "g", "bertscore": "b", "sentence_transformer": "s"},
        canonical=table, scored=scored_for(table), load_counts=LOAD_COUNTS, k=5, provenance=PROVENANCE,
        judge={"summary": outcome.summary, "models_judge": outcome.models_judge, "records": outcome.records})
    validate_report(report)
    interval = report["intervals"]["metrics"]["groundedness"]  # the mean over repeats, with its interval
    assert interval["mean"] == pytest.approx(np.mean([np.mean([1.0, 0.5, 1.0]), 1.0]))
    broken = json.loads(json.dumps(report))
    broken["examples"][0]["judge"]["groundedness"]["spread"]["std"] = -1.0
    with pytest.raises(Exception, match="spread"):
        validate_report(broken)


def test_the_pages_show_the_noise_per_metric_and_each_example_s_spread(config, cache):
    from evalbook.escaping import cell_html
    from evalbook.judge.display import example_table, noise_table

    outcome, _ = judge(config, cache)
    noise = noise_table(outcome.summary)
    assert noise.loc["groundedness"].to_dict() == {
        "repeats": 3, "compared": 2, "flipped": 1, "flip share": 0.5,
        "mean std": pytest.approx(float(np.std([1.0, 0.5, 1.0], ddof=1)) / 2), "widest range": 0.5}
    table = example_table(outcome.records, "groundedness").set_index("id")
    assert table.loc["flip", "repeats"] == "1.000, 0.500, 1.000"
    assert (table.loc["flip", "min"], table.loc["flip", "max"], table.loc["flip", "flipped"]) == (0.5, 1.0, "yes")
    assert table.loc["steady", "flipped"] == "no"
    assert not any("None" in cell_html(v) for v in table.to_numpy().ravel())
    config["repeats"] = 1
    single, _ = judge(config, cache)
    assert noise_table(single.summary).empty
    assert "repeats" not in example_table(single.records, "groundedness").columns

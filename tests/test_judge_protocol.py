"""The judged-metric protocol is what the stage runs on: a metric defined only here, through
the protocol, is judged, recorded and summarized without a change to the stage."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import httpx
import pandas as pd
import pytest

from evalbook.judge import groundedness, protocol, stage
from evalbook.replycache import ReplyCache
from evalbook.judge.groundedness import SCHEMA as STATEMENTS_SCHEMA
from evalbook.judge.protocol import JUDGED_METRICS, JudgedMetric
from evalbook.judge.score import Score

VERDICTS = {"a": [1, 1], "b": [1, 0, 0], "c": []}


def all_supported_score(parsed, row, config, embed):
    verdicts = [s["verdict"] for s in parsed["statements"]]
    if not verdicts:
        return Score.unscored("no statement"), {}
    return Score(float(all(verdicts))), {"n_unsupported": verdicts.count(0)}


# All or nothing: 1 when the ground truth supports every statement. It asks the judge the
# groundedness question (the same shipped template) and scores the reply its own way.
ALL_SUPPORTED = SimpleNamespace(
    NAME="all_supported", METRIC_VERSION=7, PROMPT=groundedness.PROMPT,
    reply_schema=lambda config: STATEMENTS_SCHEMA,
    prompt_fields=lambda row, answer, config: {"answer": answer, "ground_truth": row.reference_answer},
    texts_to_embed=lambda parsed, row: [],
    score_reply=all_supported_score,
    record_fields=lambda detail, threshold: {"threshold_seen": threshold},
    summary_fields=lambda entries, config: {"n_all_supported": sum(e["score"] == 1.0 for e in entries)},
)


def judge(request: httpx.Request) -> httpx.Response:
    prompt = json.loads(request.content)["messages"][0]["content"]
    example = next(e for e in VERDICTS if f"answer {e}." in prompt)
    content = json.dumps({"statements": [{"statement": f"s{n}", "verdict": v, "justification": "j"}
                                         for n, v in enumerate(VERDICTS[example])]})
    return httpx.Response(200, json={
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})


def table() -> pd.DataFrame:
    ids = list(VERDICTS)
    return pd.DataFrame({
        "id": ids, "question": [f"Question {i}?" for i in ids],
        "reference_answer": [f"Reference {i}." for i in ids],
        "generated_answer": [f"The answer {i}." for i in ids],
        "source": ["EnterpriseSearchPolicy"] * len(ids)})


@pytest.fixture
def cache(tmp_path):
    cache = ReplyCache(tmp_path / "judge-cache.sqlite")
    yield cache
    cache.close()


def run(config: dict, cache: ReplyCache, metrics):
    return stage.judge_table(table(), config, cache, embed=None, seed=0,
                             http_transport=httpx.MockTransport(judge), metrics=metrics)


@pytest.fixture
def config(default_judge_config) -> dict:
    default_judge_config["sample_size"] = None
    default_judge_config["metrics"]["all_supported"] = {"enabled": True, "threshold": 1.0}
    return default_judge_config


def test_a_metric_defined_only_through_the_protocol_is_judged_by_the_stage(config, cache):
    assert isinstance(ALL_SUPPORTED, JudgedMetric)
    outcome = run(config, cache, (ALL_SUPPORTED,))
    records = outcome.records
    assert [k for k in records["a"] if k not in ("status", "label")] == ["all_supported"]
    assert records["a"]["all_supported"] == {"score": 1.0, "unscored_reason": None, "passed": True,
                                             "n_unsupported": 0, "threshold_seen": 1.0}
    assert records["b"]["all_supported"]["score"] == 0.0 and records["b"]["all_supported"]["n_unsupported"] == 2
    assert records["c"]["all_supported"]["score"] is None
    summary = outcome.summary["metrics"]
    assert list(summary) == ["all_supported"]
    assert summary["all_supported"]["n_all_supported"] == 1
    assert (summary["all_supported"]["n_scored"], summary["all_supported"]["pass_rate"]) == (2, 0.5)
    assert outcome.models_judge["metric_versions"] == {"all_supported": 7}
    assert outcome.models_judge["prompts"]["all_supported"]["id"] == f"groundedness-v{groundedness.PROMPT[1]}"


def test_the_metric_tuple_orders_the_records_and_the_summary(config, cache):
    outcome = run(config, cache, (ALL_SUPPORTED, groundedness))
    assert list(outcome.summary["metrics"]) == ["all_supported", "groundedness"]
    assert [k for k in outcome.records["b"] if k not in ("status", "label")] == ["all_supported", "groundedness"]
    assert outcome.records["b"]["groundedness"]["score"] == pytest.approx(1 / 3)


def test_the_shipped_metrics_implement_the_protocol_in_report_order():
    assert [m.NAME for m in JUDGED_METRICS] == ["groundedness", "relevance", "criteria"]
    assert all(isinstance(m, JudgedMetric) for m in JUDGED_METRICS)
    missing_one = SimpleNamespace(**{k: v for k, v in vars(ALL_SUPPORTED).items() if k != "summary_fields"})
    assert not isinstance(missing_one, JudgedMetric)


def metric_name_tests(source: str) -> list[str]:
    """Each comparison (`==`, `!=`, `in`, `not in`) in `source` that involves a metric's name."""
    names = {m.NAME for m in JUDGED_METRICS}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            constants = {c.value for operand in (node.left, *node.comparators) for c in ast.walk(operand)
                         if isinstance(c, ast.Constant)}
            if constants & names:
                found.append(ast.unparse(node))
    return found


def test_the_stage_never_tests_a_metric_name():
    assert metric_name_tests(Path(stage.__file__).read_text("utf-8")) == []
    assert metric_name_tests('if metric in ("groundedness", "criteria"):\n    pass') != []


def test_the_protocol_module_holds_the_one_tuple_of_judged_metrics():
    assert stage.JUDGED_METRICS is protocol.JUDGED_METRICS

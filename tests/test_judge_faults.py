"""The judge against a misbehaving server, over real HTTP: every mode of tests/faultserver.py.

The real JudgeClient talks through the real openai client to the fault server on 127.0.0.1. For
every mode, each judgment is scored or unscored with its reason, the cache holds only replies
that parsed, and a rerun against the healed server asks for exactly what was left unscored and
reuses the rest.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import papermill
import pytest
import yaml

from faultserver import NOT_JSON_TEXT, FaultServer, schema_of
from evalbook.judge import stage as stage_module
from evalbook.replycache import ReplyCache
from evalbook.judge.parsing import Unparsed, parse_reply
from evalbook.judge.stage import build_requests, judge_table, templates_for
from paths import ROOT, read_default_values
from evalbook.layout import JUDGE
from evalbook.pipeline import (assemble_report, canonical_table, open_stage, run_judge, run_load, run_score,
                               save_report)
from evalbook.report.document import validate_report

# The hang mode needs a short client timeout; every other call gets a generous one, so that a
# busy machine (CI's two cores under load) never turns a healthy reply into a timeout.
HANG_TIMEOUT_SECONDS = 0.5
TIMEOUT_SECONDS = 30.0
METRICS = ("groundedness", "relevance", "criteria")
METRIC_OF_FIELD = {"statements": "groundedness", "questions": "relevance", "criteria": "criteria"}
ANSWERS = {
    "a1": "The teal bin is emptied every second Tuesday.",
    "a2": "Claims are due within 30 days of returning.",
}
JUDGMENTS = {(example_id, metric) for example_id in ANSWERS for metric in METRICS}

# mode: (FaultServer options, the start of every unscored reason (None: every judgment is
# scored), the chat calls of the first run (None: it depends on the timing))
MODES = {
    "healthy": ({}, None, 6),
    "rate_limited": ({"retry_after": "0.01"}, "judge call failed: HTTP 429", 12),
    "server_error": ({}, "judge call failed: HTTP 500", 12),
    "unavailable_then_ok": ({"faults": 3}, None, 6 + 3),
    "hang": ({"hang_seconds": 30}, f"judge call failed: timed out after {HANG_TIMEOUT_SECONDS} s", 12),
    "die_after": ({"die_after": 2}, "judge call failed: connection failed", None),
    "not_json": ({}, "judge call failed: malformed reply (HTTP 200): the body is not JSON", 12),
    "no_choices": ({}, "judge call failed: malformed reply (HTTP 200): no choices in the body", 12),
    "text_not_json": ({}, "no JSON object in reply", 12),
}


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch):
    """Retries wait a few milliseconds, so the file runs in seconds; the backoff arithmetic
    has its own tests in test_judge_client.py."""
    settings_from = stage_module.settings_from
    monkeypatch.setattr(stage_module, "settings_from",
                        lambda config: dataclasses.replace(settings_from(config), backoff_seconds=0.005))


@pytest.fixture
def cache(tmp_path):
    cache = ReplyCache(tmp_path / "judge-cache.sqlite")
    yield cache
    cache.close()


def judge_config(default_judge_config: dict, base_url: str, timeout_seconds: float = TIMEOUT_SECONDS) -> dict:
    config = copy.deepcopy(default_judge_config)
    config.update(base_url=base_url, sample_size=None, timeout_seconds=timeout_seconds, max_retries=1,
                  concurrency=len(JUDGMENTS))
    return config


def embed(texts: list[str]) -> np.ndarray:
    """A deterministic bag of words, never zero: relevance needs vectors here, not a model."""
    vectors = np.zeros((len(texts), 33))
    vectors[:, 32] = 1.0
    for row, text in enumerate(texts):
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vectors[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 32] += 1.0
    return vectors


def canonical() -> pd.DataFrame:
    n = len(ANSWERS)
    return pd.DataFrame({
        "id": list(ANSWERS), "row": list(range(1, n + 1)),
        "question": [f"What does example {i} say?" for i in ANSWERS],
        "context": [f"Context of {i}." for i in ANSWERS],
        "reference_answer": list(ANSWERS.values()), "generated_answer": list(ANSWERS.values()),
        "has_prediction": [True] * n, "generated_empty": [False] * n, "reference_empty": [False] * n,
        "gold_id": [None] * n, "gold_ids": [None] * n, "retrieved_ids": [None] * n, "retrieved_contexts": [None] * n,
        "source": ["EnterpriseSearchPolicy"] * n, "metadata": ["{}"] * n,
    })


def unscored(records: dict) -> dict[tuple[str, str], str]:
    return {(example_id, metric): record[metric]["unscored_reason"]
            for example_id, record in records.items() if record["status"] == "judged"
            for metric in METRICS if record[metric]["score"] is None}


def asked(bodies: list[dict]) -> list[tuple[str, str]]:
    """The (example id, metric) of each chat call."""
    calls = []
    for body in bodies:
        prompt = body["messages"][0]["content"]
        example_id = next(i for i, answer in ANSWERS.items() if answer in prompt)
        [field] = schema_of(body)["required"]
        calls.append((example_id, METRIC_OF_FIELD[field]))
    return calls


def cached_judgments(cache: ReplyCache, config: dict) -> set[tuple[str, str]]:
    """The judgments the cache holds; fails when one of them does not parse."""
    held = set()
    requests = build_requests(canonical().set_index("id", drop=False), config, templates_for(config))
    for request in requests:
        entry = cache.get(request.key)
        if entry is None:
            continue
        try:
            parse_reply(entry["text"], request.schema, entry["finish_reason"])
        except Unparsed as failure:
            pytest.fail(f"the cache holds an unparsed reply to {request.example_id} "
                        f"{request.metric}: {failure.reason}")
        held.add((request.example_id, request.metric))
    return held


# ---------------------------------------------------------------- every mode, through judge_table

@pytest.mark.slow  # a notebook kernel
@pytest.mark.parametrize("mode", list(MODES))
def test_every_judgment_is_scored_or_unscored_and_a_rerun_completes_what_was_left(
        default_judge_config, cache, mode):
    options, reason, first_calls = MODES[mode]
    with FaultServer(mode, **options) as server:
        timeout = HANG_TIMEOUT_SECONDS if mode == "hang" else TIMEOUT_SECONDS
        first = judge_table(canonical(), judge_config(default_judge_config, server.base_url, timeout), cache,
                            embed, seed=0)
        config = judge_config(default_judge_config, server.base_url)
        left = unscored(first.records)
        if reason is None:
            assert left == {}
        else:
            assert left and all(r.startswith(reason) for r in left.values()), left
            assert len(left) == (len(JUDGMENTS) - 2 if mode == "die_after" else len(JUDGMENTS))
        assert cached_judgments(cache, config) == JUDGMENTS - set(left)
        if first_calls is None:
            assert server.chat_calls >= 3  # two answered, then at least the one that killed it
        else:
            assert server.chat_calls == first_calls
        errors = 0 if reason is None or mode == "text_not_json" else len(left)
        assert first.summary["totals"]["errors"] == errors
        assert first.summary["status"] == "ran"

        calls_before = server.chat_calls
        server.set_mode("healthy")
        second = judge_table(canonical(), config, cache, embed, seed=0)
        rerun_asked = asked(server.bodies[calls_before:])
    assert unscored(second.records) == {}
    assert sorted(rerun_asked) == sorted(left)  # exactly what was left, once each
    assert second.summary["totals"]["cache_hits"] == len(JUDGMENTS) - len(left)
    assert cached_judgments(cache, config) == JUDGMENTS


def test_reply_text_that_is_not_json_keeps_the_raw_reply(default_judge_config, cache):
    with FaultServer("text_not_json") as server:
        outcome = judge_table(canonical(), judge_config(default_judge_config, server.base_url), cache, embed, seed=0)
    for record in outcome.records.values():
        for metric in METRICS:
            assert record[metric]["raw_reply"] == NOT_JSON_TEXT
    assert len(cache) == 0


def test_a_server_that_recovers_within_the_retries_is_scored_on_the_first_run(default_judge_config, cache):
    with FaultServer("not_json", faults=2) as server:
        outcome = judge_table(canonical(), judge_config(default_judge_config, server.base_url), cache, embed, seed=0)
        assert server.chat_calls == len(JUDGMENTS) + 2
    assert unscored(outcome.records) == {}
    assert len(cache) == len(JUDGMENTS)


# ---------------------------------------------------------------- through the pipeline's stages

def write_judged_profile(tmp_path: Path, base_url: str, **changes) -> Path:
    values = read_default_values(absolute_data_paths=True)
    values.update(outputs_root=str(tmp_path / "outputs"), limit=2)
    values.update(changes)
    values["judge"].update(base_url=base_url, timeout_seconds=TIMEOUT_SECONDS, max_retries=1,
                           sample_size=None, cache_path=str(tmp_path / "judge-cache.sqlite"))
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


@pytest.mark.slow  # a notebook kernel
def test_a_malformed_200_still_writes_judge_json_and_the_report(tmp_path):
    with FaultServer("no_choices") as server:
        profile = write_judged_profile(tmp_path, server.base_url)
        ctx = open_stage(str(profile))
        canonical_rows = canonical_table(ctx)
        result = run_judge(ctx, canonical_rows)
        written = json.loads(ctx.artifact(JUDGE).read_text())
        first_calls = server.chat_calls
        server.set_mode("healthy")
        healed = run_judge(ctx, canonical_rows)
        rerun_calls = server.chat_calls - first_calls

    assert written == json.loads(json.dumps(result))
    assert result["summary"]["status"] == "ran"
    judged = [record for record in result["records"].values() if record["status"] == "judged"]
    n_judgments = len(judged) * len(METRICS)
    assert judged and first_calls == 2 * n_judgments  # each asked twice (max_retries 1)
    assert len(unscored(result["records"])) == n_judgments
    assert all(reason.startswith("judge call failed: malformed reply (HTTP 200)")
               for reason in unscored(result["records"]).values())
    assert result["summary"]["totals"]["errors"] == n_judgments
    assert rerun_calls == n_judgments and unscored(healed["records"]) == {}
    run_score(ctx)
    report = json.loads(save_report(ctx, assemble_report(ctx)).read_text())
    validate_report(report)
    assert report["judge_summary"]["status"] == "ran"
    assert report["judge_summary"]["metrics"]["groundedness"]["n_scored"] == len(judged)


@pytest.mark.slow  # a notebook kernel
def test_the_judge_notebook_runs_on_input_without_a_source_column(tmp_path):
    """Item 1 as a user meets it: answers kept in the input, no `source` column, a judge that
    answers. 01_load writes canonical.parquet; the 03_judge notebook reads it and judges all."""
    sample = ROOT / "data" / "sample" / "examples.jsonl"
    examples = [json.loads(line) for line in sample.read_text().splitlines()]
    rows = [{**example, "generated_answer": example["answer"]} for example in examples[:3]]
    assert all("source" not in row for row in rows)
    input_path = tmp_path / "answered.jsonl"
    input_path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    run_id = str(uuid.uuid4())
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with FaultServer() as server:
        profile = write_judged_profile(tmp_path, server.base_url, input_path=str(input_path), predictions_path=None,
                                limit=None)
        run_load(open_stage(str(profile), run_dir=str(run_dir), run_id=run_id))
        papermill.execute_notebook(str(ROOT / "notebooks" / "03_judge.ipynb"),
                                   str(tmp_path / "03_judge.ipynb"),
                                   parameters={"params_path": str(profile), "run_dir": str(run_dir),
                                               "run_id": run_id},
                                   cwd=str(ROOT / "notebooks"), kernel_name="python3", progress_bar=False)
        assert server.chat_calls == 3 * 3
    judged = json.loads((run_dir / JUDGE).read_text())
    summary = judged["summary"]
    assert summary["status"] == "ran", summary["reason"]
    assert summary["eligibility"]["no_source_column"] is True
    assert summary["eligibility"]["sources_seen"] == {"(missing)": 3}
    assert summary["sampling"]["n_judged"] == 3
    assert unscored(judged["records"]) == {}

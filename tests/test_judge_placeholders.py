"""A judge reply whose statements, justifications, questions or rationales are placeholders
(empty, punctuation, ellipsis, filler, or the template's example text) is never scored: the
example is unscored with the reason "placeholder output", and the reply is not cached.

Gemma 3 270M's recorded replies (tests/data/gemma-placeholder-replies.json, the `text` its
server returned per metric) copy the templates' example JSON; evalbook scored them 1.000."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from evalbook.judge import criteria, groundedness, parsing, relevance
from evalbook.replycache import ReplyCache
from evalbook.judge.display import unscored_table
from evalbook.judge.parsing import PLACEHOLDER_REASON, Unparsed, example_texts, parse_reply, unreadable
from evalbook.prompts import load_template
from evalbook.judge.protocol import JUDGED_METRICS
from evalbook.judge.stage import build_requests, judge_table, templates_for
from test_judge_stage import canonical, embed

GEMMA_REPLIES = json.loads((Path(__file__).parent / "data" / "gemma-placeholder-replies.json")
                           .read_text("utf-8"))
N_QUESTIONS, N_CRITERIA = 3, 2
SCHEMAS = {"groundedness": groundedness.SCHEMA, "relevance": relevance.schema(N_QUESTIONS),
           "criteria": criteria.schema(N_CRITERIA)}
REAL_REPLIES = {
    "groundedness": {"statements": [
        {"statement": "Bins are collected on Tuesdays.", "verdict": 1,
         "justification": "The ground truth says Tuesdays."},
        {"statement": "Glass goes in the teal bin.", "verdict": 0,
         "justification": "The ground truth names no bin."}]},
    "relevance": {"questions": ["When are the bins collected?", "Which day is bin day?",
                                "Are bins collected weekly?"]},
    "criteria": {"criteria": [{"criterion": 1, "met": True, "rationale": "It names the collection day."},
                              {"criterion": 2, "met": True, "rationale": "It asks no question."}]},
}
# Texts no reader can read as a statement, a justification, a question or a rationale.
PLACEHOLDERS = ["", "   ", "\n\t", "...", "…", ". . .", "-", "—", "?", "???", "N/A", "n/a", "NA", "None",
                "null", "TBD", "placeholder", "\u200b", "*", "[...]", "\"...\""]
# Short texts a judge may well mean: they keep a letter or a digit and are no filler.
READABLE = ["42", "No.", "Yes", "Stated.", "a?", "Nothing in the ground truth says so.", "Noneuclidean.",
            "Ça va ?", "東京"]


def gemma_replies() -> list[tuple[str, str]]:
    return [(metric, text) for metric, texts in GEMMA_REPLIES.items() for text in texts]


def reason_of(raw: str, metric: str) -> str:
    with pytest.raises(Unparsed) as info:
        parse_reply(raw, SCHEMAS[metric], "stop")
    assert info.value.raw == raw
    return info.value.reason


def with_text(metric: str, field: str, text: str) -> str:
    """The real reply to `metric` with its first `field` (a statement, justification, question or
    rationale) replaced by `text`."""
    reply = json.loads(json.dumps(REAL_REPLIES[metric]))
    if metric == "relevance":
        reply["questions"][0] = text
    else:
        reply[{"groundedness": "statements", "criteria": "criteria"}[metric]][0][field] = text
    return json.dumps(reply)


FIELDS = [("groundedness", "statement"), ("groundedness", "justification"), ("relevance", "question"),
          ("criteria", "rationale")]


# ---------------------------------------------------------------- parsing one reply

def test_the_fixture_holds_every_metric_of_gemmas_recorded_replies():
    assert sorted(GEMMA_REPLIES) == ["criteria", "groundedness", "relevance"]
    assert all(GEMMA_REPLIES[metric] for metric in GEMMA_REPLIES)


@pytest.mark.parametrize(("metric", "raw"), gemma_replies())
def test_each_of_gemmas_recorded_replies_is_placeholder_output(metric, raw):
    assert reason_of(raw, metric) == "placeholder output"


@pytest.mark.parametrize("metric", sorted(REAL_REPLIES))
def test_a_real_reply_still_parses(metric):
    assert parse_reply(json.dumps(REAL_REPLIES[metric]), SCHEMAS[metric], "stop") == REAL_REPLIES[metric]


@pytest.mark.parametrize(("metric", "field"), FIELDS)
@pytest.mark.parametrize("text", PLACEHOLDERS)
def test_each_kind_of_placeholder_field_is_placeholder_output(metric, field, text):
    assert reason_of(with_text(metric, field, text), metric) == PLACEHOLDER_REASON


@pytest.mark.parametrize(("metric", "field"), FIELDS)
@pytest.mark.parametrize("text", READABLE)
def test_short_readable_texts_are_not_placeholders(metric, field, text):
    assert not unreadable(text)
    parse_reply(with_text(metric, field, text), SCHEMAS[metric], "stop")


def test_a_reply_mixing_real_and_placeholder_statements_is_placeholder_output():
    reply = {"statements": [*REAL_REPLIES["groundedness"]["statements"],
                            {"statement": "...", "verdict": 1, "justification": "..."}]}
    assert reason_of(json.dumps(reply), "groundedness") == PLACEHOLDER_REASON


def test_placeholders_are_found_before_the_schema_is_checked():
    """relevance's schema refuses an empty question too; the reason is the placeholder's."""
    assert reason_of('{"questions": ["", "Which day?", "When?"]}', "relevance") == PLACEHOLDER_REASON
    assert "schema" in reason_of('{"questions": ["Which day?", "When?"]}', "relevance")


# ---------------------------------------------------------------- the templates' example text

@pytest.mark.parametrize("metric", JUDGED_METRICS, ids=lambda metric: metric.NAME)
def test_the_example_text_is_read_from_each_template(metric):
    assert example_texts(load_template(*metric.PROMPT).text) == {"..."}
    assert "..." in parsing.template_examples()


# A template whose example reply shows real words.
WORDED_TEMPLATE = ("Judge it.\n{% if json_instructions %}\nReply in this shape:\n"
                   '{"statements": [{"statement": "The sky is blue.", "verdict": 1, "justification": "Stated."}]}\n'
                   "{{ reply_schema }}\n{%- endif %}\n")


def test_example_texts_reads_every_string_value_of_a_templates_json_example():
    assert example_texts(WORDED_TEMPLATE) == {"The sky is blue.", "Stated."}


def test_a_copy_of_a_templates_example_text_is_placeholder_output(monkeypatch):
    """A template whose example shows real words: a reply that copies them, in any case and
    spacing, is a placeholder; other words still parse."""
    examples = frozenset(map(parsing.normalized, example_texts(WORDED_TEMPLATE)))
    monkeypatch.setattr(parsing, "template_examples", lambda: examples)
    copied = with_text("groundedness", "statement", "  The SKY is   blue. ")
    assert reason_of(copied, "groundedness") == PLACEHOLDER_REASON
    parse_reply(with_text("groundedness", "statement", "The sky is grey."), SCHEMAS["groundedness"])


# ---------------------------------------------------------------- the judge stage and its cache

REAL_ANSWER, COPIED_ANSWER = "Bins are collected on Tuesdays.", "Glass goes in the teal bin."


def metric_of(prompt: str) -> str:
    markers = {"groundedness": "strict fact checker", "relevance": "You do not see the question",
               "criteria": "<<<CRITERIA"}
    for metric, marker in markers.items():
        if marker in prompt:
            return metric
    raise AssertionError(f"a prompt of no known metric: {prompt[:200]}")


class GemmaOrRealJudge:
    """Gemma's recorded reply to every prompt about COPIED_ANSWER, a real reply to the others."""

    def __init__(self):
        self.prompts: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        prompt = json.loads(request.content)["messages"][0]["content"]
        self.prompts.append(prompt)
        metric = metric_of(prompt)
        text = GEMMA_REPLIES[metric][0] if COPIED_ANSWER in prompt else json.dumps(REAL_REPLIES[metric])
        return httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}})

    def calls_about(self, answer: str) -> int:
        return sum(answer in prompt for prompt in self.prompts)


@pytest.fixture
def config(default_judge_config) -> dict:
    default_judge_config["sample_size"] = None
    assert default_judge_config["metrics"]["relevance"]["n_questions"] == N_QUESTIONS
    assert len(default_judge_config["metrics"]["criteria"]["goals"]) == N_CRITERIA
    return default_judge_config


@pytest.fixture
def cache(tmp_path):
    cache = ReplyCache(tmp_path / "judge-cache.sqlite")
    yield cache
    cache.close()


def table():
    return canonical([("real", REAL_ANSWER, "EnterpriseSearchPolicy"),
                      ("copied", COPIED_ANSWER, "EnterpriseSearchPolicy")])


def judge(config, cache) -> tuple:
    judge_server = GemmaOrRealJudge()
    outcome = judge_table(table(), config, cache, embed, seed=0,
                          http_transport=httpx.MockTransport(judge_server))
    return outcome, judge_server


def test_the_stage_leaves_gemmas_replies_unscored_and_scores_the_real_ones(config, cache):
    outcome, _ = judge(config, cache)
    for metric in SCHEMAS:
        copied, real = outcome.records["copied"][metric], outcome.records["real"][metric]
        assert copied["score"] is None and copied["passed"] is None
        assert copied["unscored_reason"] == "placeholder output"
        assert copied["raw_reply"] == GEMMA_REPLIES[metric][0]
        assert real["score"] is not None and real["unscored_reason"] is None
        summary = outcome.summary["metrics"][metric]
        assert summary["n_scored"] == 1 and summary["n_unscored"] == 1
        assert summary["unscored_reasons"] == {"placeholder output": 1}
    assert outcome.records["real"]["groundedness"]["score"] == 0.5
    assert outcome.records["real"]["criteria"]["score"] == 1.0
    unscored = unscored_table(outcome.records)
    assert unscored[["id", "reason"]].drop_duplicates().values.tolist() == [["copied", "placeholder output"]]


def test_a_placeholder_reply_is_asked_once_cached_and_a_rerun_makes_no_call(config, cache):
    # A copy is well-formed: asked again at temperature 0 it comes back the same, so a retry
    # only costs a call (about 15 s on the local model) and the reply is kept as the answer.
    outcome, first = judge(config, cache)
    assert first.calls_about(COPIED_ANSWER) == len(SCHEMAS)
    assert len(cache) == 2 * len(SCHEMAS)
    rerun, second = judge(config, cache)
    assert second.prompts == []
    for metric in SCHEMAS:
        assert rerun.records["copied"][metric]["unscored_reason"] == PLACEHOLDER_REASON
        assert rerun.records["copied"][metric]["score"] is None
        assert rerun.records["real"][metric]["score"] == outcome.records["real"][metric]["score"]


def test_a_placeholder_reply_cached_by_an_older_version_is_still_unscored_without_a_call(config, cache):
    requests = build_requests(table(), config, templates_for(config))
    for request in requests:
        cache.put(request.key, {"text": GEMMA_REPLIES[request.metric][0], "finish_reason": "stop",
                                "prompt_tokens": 11, "completion_tokens": 7, "system_fingerprint": None})
    outcome, judge_server = judge(config, cache)
    assert judge_server.prompts == []
    assert all(outcome.records[example][metric]["unscored_reason"] == PLACEHOLDER_REASON
               for example in ("real", "copied") for metric in SCHEMAS)

"""The context metrics in the judge stage (evalbook.judge.context): one request per retrieved
chunk through the real client on a scripted judge at 127.0.0.1, the three scores in each
judged example's record, the summary's counts, the estimate, the cache and the report."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import pytrec_eval

from evalbook.judge.chunks import ALL_EMPTY, EMPTY_CHUNK
from evalbook.judge.context import exact_precision
from evalbook.judge.stage import judge_table
from evalbook.replycache import ReplyCache
from faultserver import FaultServer
from test_judge_stage import canonical

MARK = "RELEVANT-PASSAGE"
CHUNKS = {
    # verdicts by rank: irrelevant, irrelevant, relevant, relevant, irrelevant -> AP 5/12
    "c1": [f"Bins are blue {i}." if i not in (2, 3) else f"{MARK} bins go out on Tuesdays {i}." for i in range(5)],
    "c2": [f"{MARK} glass goes to the bank.", "Nothing of use here."],
}


def passage_of(body: dict) -> str:
    return body["messages"][-1]["content"].split("<<<PASSAGE\n", 1)[1].split("\nPASSAGE>>>", 1)[0]


def judge(body: dict) -> str:
    """Relevant, quoting the mark, when the passage carries it; recall: the first claim is
    supported by passage 1, the second by none; "yes." for the chunk that asks for it."""
    content = body["messages"][-1]["content"]
    if "<<<PASSAGE 1" in content:  # the recall prompt numbers the passages
        return json.dumps({"claims": [{"claim": "On Tuesdays.", "passages": [1]},
                                      {"claim": "Every fortnight.", "passages": []}]})
    passage = passage_of(body)
    if "ANSWER-YES" in passage:
        return "yes."
    if MARK in passage:
        return json.dumps({"verdict": "relevant", "reason": "it names the day", "quote": MARK})
    return json.dumps({"verdict": "irrelevant", "reason": "off topic", "quote": None})


def table(extra: dict | None = None) -> pd.DataFrame:
    rows = canonical([("c1", "Tuesdays.", "EnterpriseSearchPolicy"), ("c2", "The bank.", "EnterpriseSearchPolicy"),
                      ("ids", "Fridays.", "EnterpriseSearchPolicy"), ("none", "Mondays.", "EnterpriseSearchPolicy"),
                      ("empty", "Sundays.", "EnterpriseSearchPolicy")])
    rows["retrieved_contexts"] = pd.Series([CHUNKS["c1"], CHUNKS["c2"], None, None, []], dtype=object)
    rows["retrieved_ids"] = pd.Series([None, ["doc-a", "doc-b"], ["doc-x"], None, []], dtype=object)
    rows["gold_id"] = pd.Series([None, "doc-b", "doc-x", None, None], dtype=object)
    for column, values in (extra or {}).items():
        rows[column] = pd.Series(values, dtype=object)
    return rows


@pytest.fixture
def config(default_judge_config) -> dict:
    default_judge_config["sample_size"] = None
    for name in ("groundedness", "relevance", "criteria"):
        default_judge_config["metrics"][name]["enabled"] = False
    for name in ("context_relevance", "context_precision", "context_recall"):
        default_judge_config["metrics"][name] = {"enabled": True, "threshold": 0.5}
    return default_judge_config


def judged(config, tmp_path, server, rows=None):
    """(the outcome, the chat calls it made, its estimate) on the running scripted judge."""
    config.update(base_url=server.base_url)
    before, estimates = server.chat_calls, []
    outcome = judge_table(table() if rows is None else rows, config, ReplyCache(tmp_path / "judge.sqlite"),
                          None, seed=0, on_estimate=estimates.append)
    return outcome, server.chat_calls - before, estimates[0]


def run(config, tmp_path, rows=None):
    with FaultServer(reply=judge) as server:
        return judged(config, tmp_path, server, rows)


def test_chunk_verdicts_give_exact_precision_relevance_and_recall_per_example(config, tmp_path):
    outcome, calls, planned = run(config, tmp_path)
    c1 = outcome.records["c1"]
    assert abs(c1["context_precision"]["score"] - 0.4166666666666667) < 1e-12
    assert c1["context_precision"]["score"] == 5 / 12
    assert c1["context_relevance"]["score"] == 0.4 and c1["context_recall"]["score"] == 0.5
    assert [c["verdict"] for c in c1["chunks"]] == ["irrelevant", "irrelevant", "relevant", "relevant", "irrelevant"]
    assert c1["chunks"][2]["quote"] == MARK and c1["chunks"][2]["reason"] == "it names the day"
    assert c1["context_recall"]["claims"][0] == {"claim": "On Tuesdays.", "chunks": [0]}
    # 5 + 2 chunk calls and one recall call for each of c1 and c2: the estimate counted them all
    assert calls == planned["calls"] == 9
    assert planned["requests_by_metric"] == {"chunk_relevance": 7, "context_recall": 2}


def test_ids_only_is_not_scored_with_a_count_and_empty_retrieval_scores_zero(config, tmp_path):
    outcome, _, _ = run(config, tmp_path)
    for name in ("context_relevance", "context_precision", "context_recall"):
        assert outcome.records["ids"][name]["score"] is None
        assert outcome.records["ids"][name]["unscored_reason"] == "not scored: no chunk text"
        assert outcome.records["none"][name]["unscored_reason"] == "not scored: no retrieval results"
        summary = outcome.summary["metrics"][name]
        assert summary["n_no_chunk_text"] == 1 and summary["n_no_retrieval"] == 1
        assert summary["unscored_reasons"]["not scored: no chunk text"] == 1
    empty = outcome.records["empty"]
    assert empty["context_precision"]["score"] == 0.0 and empty["context_recall"]["score"] == 0.0
    assert empty["context_relevance"]["unscored_reason"] == "no chunk was retrieved"
    assert outcome.summary["metrics"]["context_precision"]["n_no_relevant"] == 1


def test_the_chunk_calls_are_counted_once_and_a_rerun_makes_none(config, tmp_path):
    with FaultServer(reply=judge) as server:
        outcome, _, _ = judged(config, tmp_path, server)
        again, calls, planned = judged(config, tmp_path, server)
    metrics = outcome.summary["metrics"]
    assert metrics["context_relevance"]["calls"] == 7
    assert metrics["context_precision"]["calls"] == 0
    assert metrics["context_precision"]["calls_counted_under"] == "context_relevance"
    assert outcome.summary["totals"]["calls"] == 9
    assert calls == 0 and planned["calls"] == 0 and planned["cached"] == 9
    assert again.records["c1"]["context_precision"] == outcome.records["c1"]["context_precision"]


def test_relevance_by_rank_and_the_judged_precision_beside_the_gold_one(config, tmp_path):
    outcome, _, _ = run(config, tmp_path)
    summary = outcome.summary["metrics"]
    by_rank = {row["rank"]: row for row in summary["context_relevance"]["by_rank"]}
    assert by_rank[1]["n"] == 2 and by_rank[1]["n_relevant"] == 1 and by_rank[5]["relevant_share"] == 0.0
    # c2: judged [relevant, irrelevant], gold (doc-b at rank 2) [no, yes]: AP 1.0 judged, 0.5 exact
    assert outcome.records["c2"]["context_precision"]["exact"] == 0.5
    gold = summary["context_precision"]["against_gold"]
    assert (gold["n"], gold["judged_mean"], gold["exact_mean"], gold["n_chunks"], gold["n_chunks_agreeing"]) == (
        1, 1.0, 0.5, 2, 0)
    assert outcome.records["c2"]["chunks"][1]["gold"] is True


def test_a_reply_that_is_not_json_is_invalid_counted_and_leaves_the_question_unscored(config, tmp_path):
    rows = table()
    rows.at[1, "retrieved_contexts"] = [f"{MARK} glass.", "ANSWER-YES please"]
    outcome, _, _ = run(config, tmp_path, rows)
    record = outcome.records["c2"]
    assert [c["verdict"] for c in record["chunks"]] == ["relevant", "invalid"]
    assert record["context_precision"]["score"] is None
    assert "1 of 2 chunk verdicts are invalid" in record["context_precision"]["unscored_reason"]
    assert outcome.summary["metrics"]["context_relevance"]["verdicts"]["invalid"] == 1


def test_an_empty_chunk_is_not_sent_and_is_counted_never_judged_irrelevant(config, tmp_path):
    rows = table()
    rows.at[1, "retrieved_contexts"] = ["", f"{MARK} glass goes to the bank.", "  \n\t "]
    rows.at[1, "retrieved_ids"] = ["doc-a", "doc-b", "doc-c"]
    outcome, calls, planned = run(config, tmp_path, rows)
    assert calls == planned["calls"] == 8  # c1: 5 chunks and its recall; c2: 1 chunk with text and its recall
    record = outcome.records["c2"]
    assert [c["verdict"] for c in record["chunks"]] == ["empty", "relevant", "empty"]
    assert record["chunks"][0]["reason"] == EMPTY_CHUNK.reason
    precision, relevance = record["context_precision"], record["context_relevance"]
    assert (precision["score"], relevance["score"]) == (1.0, 1.0)
    assert (precision["n_chunks"], precision["n_empty"], relevance["score_levels"]) == (3, 2, ["0", "1"])
    assert precision["exact"] == 1.0  # from the ids of the chunks the judge read
    assert record["context_recall"]["claims"][0]["chunks"] == [1] and record["context_recall"]["n_empty"] == 2
    summary = outcome.summary["metrics"]
    assert summary["context_relevance"]["verdicts"]["empty"] == 2
    gold = summary["context_precision"]["against_gold"]
    assert (gold["n_chunks"], gold["n_chunks_agreeing"]) == (1, 1)
    assert_matches_the_report_schema(outcome)


def assert_matches_the_report_schema(outcome) -> None:
    """The judge's records and summary as 04_report writes them: each against its part of report-v1.json."""
    from evalbook.validation import input_validator, report_schema

    schema = report_schema()
    judge_record = {"$defs": schema["$defs"], **schema["$defs"]["example"]["properties"]["judge"]}
    summary = {"$defs": schema["$defs"], **schema["properties"]["judge_summary"]}
    problems = [f"{e.json_path}: {e.message}" for record in outcome.records.values()
                for e in input_validator(judge_record).iter_errors(record)]
    problems += [f"summary {e.json_path}: {e.message}" for e in input_validator(summary).iter_errors(outcome.summary)]
    assert problems == []


def test_a_row_whose_chunks_are_all_empty_is_not_scored_with_the_reason_and_costs_no_call(config, tmp_path):
    rows = table()
    rows.at[1, "retrieved_contexts"] = ["", " \u200b "]
    outcome, calls, planned = run(config, tmp_path, rows)
    assert calls == planned["calls"] == 6  # c1's 5 chunks and its recall
    record = outcome.records["c2"]
    assert [c["verdict"] for c in record["chunks"]] == ["empty", "empty"]
    for name in ("context_relevance", "context_precision", "context_recall"):
        assert (record[name]["score"], record[name]["unscored_reason"]) == (None, ALL_EMPTY)
        summary = outcome.summary["metrics"][name]
        assert summary["n_all_chunks_empty"] == 1 and summary["unscored_reasons"][ALL_EMPTY] == 1
    assert_matches_the_report_schema(outcome)


def test_exact_precision_counts_a_gold_id_retrieved_twice_once_at_its_first_rank(config, tmp_path):
    # gold at rank 2 and its copy at rank 3: [0, 1, 0] gives 1/2, not (1/2 + 2/3) / 2 = 7/12
    assert exact_precision(["doc-x", "doc-b", "doc-b"], {"doc-b"}) == 0.5
    # two gold ids, one of them twice: [1, 0, 0, 1] gives (1/1 + 2/4) / 2 = 3/4, not (1 + 2/3 + 3/4) / 3
    assert exact_precision(["doc-b", "doc-x", "doc-b", "doc-c"], {"doc-b", "doc-c"}) == 0.75
    rows = table()
    rows.at[1, "retrieved_contexts"] = ["Nothing of use here.", f"{MARK} glass.", f"{MARK} glass."]
    rows.at[1, "retrieved_ids"] = ["doc-x", "doc-b", "doc-b"]
    outcome, _, _ = run(config, tmp_path, rows)
    assert outcome.records["c2"]["context_precision"]["exact"] == 0.5


def test_exact_precision_equals_trec_eval_s_average_precision_when_every_gold_id_was_retrieved():
    """trec_eval's map divides by the gold ids, the exact precision by those retrieved: the two
    agree when all were retrieved. A copy is a document that is not relevant at its rank, so the
    run given to trec_eval (which cannot hold a document twice) names each copy afresh."""
    rng = np.random.default_rng(47)
    n_copies = 0
    for _ in range(300):
        retrieved = [f"doc-{i}" for i in rng.integers(0, 6, size=int(rng.integers(1, 9)))]
        gold = set(rng.choice(sorted(set(retrieved)), size=int(rng.integers(1, len(set(retrieved)) + 1)),
                              replace=False))
        renamed = [doc if doc not in retrieved[:rank] else f"copy-{rank}" for rank, doc in enumerate(retrieved)]
        n_copies += len(retrieved) - len(set(retrieved))
        run = {"q": {doc: float(len(renamed) - rank) for rank, doc in enumerate(renamed)}}
        evaluator = pytrec_eval.RelevanceEvaluator({"q": dict.fromkeys(gold, 1)}, {"map"})
        expected = evaluator.evaluate(run)["q"]["map"]
        assert exact_precision(retrieved, gold) == pytest.approx(expected, abs=1e-12), (retrieved, gold)
    assert n_copies > 300  # the rankings do repeat ids


def test_repeats_judge_each_chunk_again_and_keep_the_spread(config, tmp_path):
    config["repeats"] = 2
    outcome, calls, planned = run(config, tmp_path)
    assert calls == planned["calls"] == 18
    record = outcome.records["c1"]["context_precision"]
    assert [r["score"] for r in record["repeats"]] == [5 / 12, 5 / 12] and record["flipped"] is False
    assert outcome.summary["metrics"]["context_precision"]["repeats"]["n_flipped"] == 0


def test_off_by_default_the_stage_makes_no_chunk_call_and_keeps_its_label(default_judge_config, tmp_path):
    from evalbook.judge.stage import describe_judge, templates_for

    assert not any(default_judge_config["metrics"][n]["enabled"]
                   for n in ("context_relevance", "context_precision", "context_recall"))
    without = {k: v for k, v in default_judge_config["metrics"].items() if not k.startswith("context_")}
    older = {**default_judge_config, "metrics": without}
    assert (describe_judge(default_judge_config, templates_for(default_judge_config))["label"]
            == describe_judge(older, templates_for(older))["label"])


def context_report(config, tmp_path, rows: pd.DataFrame, run_id: str = "2d6b3516-cc7d-4cf4-ac99-07b0159bfb11",
                   server: FaultServer | None = None):
    """A report of `rows` judged on the context metrics by the scripted judge (`server`, else a
    server of its own)."""
    from datetime import datetime, timezone

    from evalbook.report.document import build_report
    from test_judge_stage import LOAD_COUNTS, PROVENANCE, scored_for

    outcome, _, _ = run(config, tmp_path, rows) if server is None else judged(config, tmp_path, server, rows)
    judgment = {"summary": outcome.summary, "models_judge": outcome.models_judge, "records": outcome.records}
    return build_report(
        run_id=run_id, timestamp=datetime(2026, 1, 1, tzinfo=timezone.utc),
        dataset={"name": "t", "split": "sample"}, models={"generator": "g", "bertscore": "b", "sentence_transformer": "s"},
        canonical=rows, scored=scored_for(rows), load_counts=LOAD_COUNTS, k=5, provenance=PROVENANCE,
        judge=json.loads(json.dumps(judgment)))


def test_the_report_carries_the_three_metrics_and_validates(config, tmp_path):
    from evalbook.metrics import metric
    from evalbook.report.document import validate_report

    report = context_report(config, tmp_path, table())
    validate_report(report)
    c1 = next(e for e in report["examples"] if e["id"] == "c1")
    assert metric("context_precision").value(c1) == 5 / 12
    assert metric("context_recall").mean(report) == pytest.approx((0.5 + 0.5 + 0.0) / 3)
    assert [c["verdict"] for c in c1["judge"]["chunks"]][2] == "relevant"
    broken = json.loads(json.dumps(report))
    next(e for e in broken["examples"] if e["id"] == "c1")["judge"]["chunks"][0]["verdict"] = "maybe"
    with pytest.raises(Exception, match="maybe"):
        validate_report(broken)
    for name in ("context_relevance", "context_precision", "context_recall"):  # the registry's 0-1 range
        over = json.loads(json.dumps(report))
        next(e for e in over["examples"] if e["id"] == "c1")["judge"][name]["score"] = 1.01
        with pytest.raises(Exception, match=name):
            validate_report(over)


def test_the_page_shows_each_question_s_strip_with_reasons_and_relevance_by_rank(config, tmp_path):
    from evalbook.escaping import readable_table
    from evalbook.judge.display import against_gold_text, chunk_strip, relevance_by_rank_table

    outcome, _, _ = run(config, tmp_path)
    examples = [{"id": i, "question": f"<script>q {i}</script>", "judge": r} for i, r in outcome.records.items()]
    strip = chunk_strip({"examples": examples})
    assert list(strip["id"]) == ["c1", "c2"]
    c1 = strip.set_index("id").loc["c1"]
    assert c1["strip"] == "✗ ✗ ✓ ✓ ✗" and c1["precision"] == 5 / 12
    assert f"3. relevant: it names the day «{MARK}»" in c1["chunks"]
    html = readable_table(strip, "chunks").to_html()
    assert "<script>q c1" not in html and "&lt;script&gt;" in html
    by_rank = relevance_by_rank_table(outcome.summary)
    assert list(by_rank["rank"]) == [1, 2, 3, 4, 5] and by_rank["relevant share"].iloc[0] == 0.5
    assert "judged 1.000 against 0.500 from the gold ids on 1 questions" in against_gold_text(outcome.summary)
    assert chunk_strip({"examples": [{"id": "x", "judge": {"status": "judged"}}]}).empty


def test_a_comparison_compares_the_context_metrics_of_two_runs_under_one_judge(config, tmp_path):
    """Through the registry: a candidate whose retriever ranks c1's two relevant chunks first."""
    from datetime import datetime, timezone

    from evalbook.compare.document import build_comparison, validate_comparison

    reranked = table()
    chunks = CHUNKS["c1"]
    reranked.at[0, "retrieved_contexts"] = [chunks[2], chunks[3], chunks[0], chunks[1], chunks[4]]
    with FaultServer(reply=judge) as server:  # one judge, so one judge label
        baseline = context_report(config, tmp_path, table(), server=server)
        candidate = context_report(config, tmp_path, reranked, "7c1b3516-cc7d-4cf4-ac99-07b0159bfb11", server)
    doc = build_comparison(baseline, candidate, baseline_location="a.json", candidate_location="b.json",
                           created_at=datetime(2026, 1, 2, tzinfo=timezone.utc))
    validate_comparison(doc)
    assert doc["gates"]["judge"]["compared"], doc["gates"]["judge"]
    rows = {row["metric"]: row for row in doc["metrics"]}
    precision = rows["context_precision"]
    # c1, c2 and the empty retrieval (0 in both); the rows with ids only or no retrieval are not scored
    assert precision["compared"] and precision["n"] == 3
    assert precision["mean_delta"] == pytest.approx((1.0 - 5 / 12) / 3, abs=1e-12)
    assert rows["context_relevance"]["mean_delta"] == 0.0  # the same chunks, in another order

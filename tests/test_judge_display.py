"""The judge's banner in the judge and report notebooks: lib/evalbook/judge/display.py."""

import pandas as pd

import hostile
from evalbook.judge.display import SUMMARY_COLUMNS, banner, example_table, metric_table, unscored_table

HOSTILE = hostile.SCRIPT + hostile.MARKDOWN_LINK + hostile.CONTROLS


def ran_summary(note: str | None) -> dict:
    metric = {"threshold_is_placeholder": True}
    return {"status": "ran", "reason": None, "label": "judge-0123456789abcdef", "note": note,
            "eligibility": {"n_eligible": 4, "no_source_column": True},
            "sampling": {"n_judged": 2, "fraction_of_eligible_judged": 0.5},
            "metrics": {"groundedness": metric, "criteria": metric}}


def test_the_banner_of_a_judge_that_ran_says_what_was_judged():
    elements, text = hostile.read_markup(banner(ran_summary(None)))
    assert [tag for tag, _ in elements][0] == "blockquote"
    assert "Judge judge-0123456789abcdef judged 2 of 4 eligible answers (50%)." in text
    assert "The data has no source, so every answer counted as eligible." in text
    assert "Thresholds of groundedness, criteria are the 0.5 placeholder" in text


def test_the_banner_escapes_the_reason_and_the_note():
    shown = hostile.SCRIPT + hostile.MARKDOWN_LINK + hostile.VISIBLE_CONTROLS
    not_run = {"status": "not_run", "reason": HOSTILE, "note": HOSTILE}
    for summary in (not_run, ran_summary(HOSTILE)):
        page = banner(summary)
        assert hostile.payload_elements(page) == [] and hostile.CONTROLS[0] not in page
        assert f"Note: {shown}" in hostile.read_markup(page)[1]
    _, text = hostile.read_markup(banner(not_run))
    assert f"The judge did not run. {shown}. No judge score is reported for this run." in text


def test_the_banner_of_a_judge_with_set_thresholds_and_a_source_column_says_only_what_was_judged():
    summary = ran_summary(None)
    summary["eligibility"]["no_source_column"] = False
    summary["metrics"] = {"groundedness": {"threshold_is_placeholder": False}}
    elements, text = hostile.read_markup(banner(summary))
    assert [tag for tag, _ in elements].count("p") == 1
    assert "placeholder" not in text and "no source" not in text


def summary_with_two_metrics() -> dict:
    groundedness = {column: None for column in SUMMARY_COLUMNS}
    groundedness.update(mean=0.75, n_scored=2, threshold=0.5, threshold_is_placeholder=True,
                        unscored_reasons={"no statements": 1})
    return {"metrics": {"relevance": {"mean": -0.25, "n_scored": 1, "cost_usd": "unknown"},
                        "groundedness": groundedness}}


def test_the_metric_table_has_one_row_per_metric_and_the_summary_columns_in_order():
    table = metric_table(summary_with_two_metrics())
    assert list(table.index) == ["relevance", "groundedness"]
    assert list(table.columns) == list(SUMMARY_COLUMNS)  # unscored_reasons is not a column
    assert table.loc["relevance", "mean"] == -0.25 and table.loc["groundedness", "mean"] == 0.75
    assert table.loc["relevance", "cost_usd"] == "unknown"
    assert pd.isna(table.loc["relevance", "threshold"])  # a statistic the summary lacks stays empty


def entry(score, reason=None, **detail) -> dict:
    return {"score": score, "unscored_reason": reason, "passed": None if score is None else score >= 0.5,
            **detail}


RECORDS = {
    "a": {"status": "judged", "label": "judge-1",
          "groundedness": entry(0.5, score_levels=["0", "1/2", "1"],
                                threshold_reading="threshold 0.5 with 2 item(s) means at least 1 of 2 must hold"),
          "relevance": entry(0.9)},
    "b": {"status": "not_eligible"},
    "c": {"status": "not_sampled"},
    "d": {"status": "judged", "label": "judge-1",
          "groundedness": entry(None, "the reply is not JSON", raw_reply="x" * 250),
          "relevance": entry(None, "judge call failed: timeout")},
}


def test_the_example_table_lists_the_judged_examples_of_one_metric():
    table = example_table(RECORDS, "groundedness")
    assert table["id"].tolist() == ["a", "d"]
    first = table.iloc[0]
    assert (first["score"], first["passed"], first["score_levels"]) == (0.5, True, "0, 1/2, 1")
    assert first["threshold_reading"].startswith("threshold 0.5 with 2 item(s)")
    assert pd.isna(table.iloc[1]["score"]) and table.iloc[1]["unscored_reason"] == "the reply is not JSON"
    relevance = example_table(RECORDS, "relevance")  # no levels for a mean cosine
    assert relevance["score_levels"].tolist() == ["", ""]
    assert example_table(RECORDS, "criteria").empty  # a metric that was not enabled


def test_the_unscored_table_gives_every_unscored_judgment_with_its_reason_and_the_reply_start():
    table = unscored_table(RECORDS)
    assert table.to_dict("records") == [
        {"id": "d", "metric": "groundedness", "reason": "the reply is not JSON", "raw_reply": "x" * 200},
        {"id": "d", "metric": "relevance", "reason": "judge call failed: timeout", "raw_reply": ""}]
    assert list(unscored_table({"b": {"status": "not_eligible"}}).columns) == ["id", "metric", "reason",
                                                                               "raw_reply"]


def test_each_judged_answer_shows_its_ground_truth_and_what_the_judge_said():
    from evalbook.judge.display import answers_table

    canonical = pd.DataFrame({"id": list(RECORDS), "generated_answer": [f"answer {i}" for i in RECORDS],
                              "context": [f"context {i}" for i in RECORDS]})
    table = answers_table(RECORDS, canonical, "context")
    judged = [i for i, record in RECORDS.items() if record.get("status") == "judged"]
    assert table["id"].tolist() == judged
    first = table.iloc[0]
    assert first["answer"] == f"answer {judged[0]}" and first["ground truth"] == f"context {judged[0]}"
    entry = RECORDS[judged[0]]["groundedness"]
    expected_score = "unscored" if entry["score"] is None else f"{entry['score']:.3f}"
    assert first["groundedness"].splitlines()[0] == expected_score
    assert answers_table({}, canonical, "context").empty

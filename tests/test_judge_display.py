"""The judge's banner in the judge and report notebooks: lib/evalbook/judge/display.py."""

import pandas as pd

import hostile
from evalbook.judge.display import (banner, calls_table, eligibility_table, example_table, scores_table,
                                    unscored_table)

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
    not_run = {"status": "not_run", "reason": HOSTILE, "note": None}
    for summary in (not_run, ran_summary(HOSTILE)):
        page = banner(summary)
        assert hostile.payload_elements(page) == [] and hostile.CONTROLS[0] not in page
    assert f"Note: {shown}" in hostile.read_markup(banner(ran_summary(HOSTILE)))[1]
    _, text = hostile.read_markup(banner(not_run))
    assert f"The judge did not run. {shown}. No judge score is reported for this run." in text


def test_the_profile_s_note_on_the_judge_is_not_shown_when_the_judge_did_not_run():
    # the note qualifies the judge's results (say, that its model is a smoke test); with none,
    # it would only distract from why the judge did not run
    elements, text = hostile.read_markup(banner({"status": "not_run", "reason": "judge.enabled is false",
                                                 "note": "the local model is a smoke test"}))
    assert "smoke test" not in text and [tag for tag, _ in elements].count("p") == 1


def test_the_banner_says_how_many_replies_held_a_secret_and_how_many_cached_ones_were_dropped():
    summary = ran_summary(None)
    summary["totals"] = {"n_redacted": 3, "n_cache_dropped": 2}
    _, text = hostile.read_markup(banner(summary))
    assert "3 replies held the judge's key or another secret of the profile" in text
    assert "2 cached replies held a secret: they were dropped, never served, and asked again." in text
    summary["totals"] = {"n_redacted": 0, "n_cache_dropped": 0}
    assert "secret" not in hostile.read_markup(banner(summary))[1]


def test_the_banner_of_a_judge_with_set_thresholds_and_a_source_column_says_only_what_was_judged():
    summary = ran_summary(None)
    summary["eligibility"]["no_source_column"] = False
    summary["metrics"] = {"groundedness": {"threshold_is_placeholder": False}}
    elements, text = hostile.read_markup(banner(summary))
    assert [tag for tag, _ in elements].count("p") == 1
    assert "placeholder" not in text and "no source" not in text


def summary_with_two_metrics() -> dict:
    groundedness = {"mean": 0.75, "p10": 0.5, "p50": 0.75, "p90": 1.0, "n_scored": 2, "n_unscored": 1,
                    "n_extra_keys": 1,
                    "threshold": 0.5, "threshold_is_placeholder": True, "pass_rate": 0.5,
                    "unscored_reasons": {"no statements": 1}, "calls": 3, "cache_hits": 0, "errors": 1,
                    "prompt_tokens": 900, "completion_tokens": 120, "cost_usd": 0.0012}
    relevance = {"mean": -0.25, "p10": None, "p50": None, "p90": None, "n_scored": 1, "n_unscored": 0,
                 "threshold": 0.7, "threshold_is_placeholder": False, "pass_rate": 0.0, "calls": 0,
                 "cache_hits": 1, "errors": 0, "prompt_tokens": 0, "completion_tokens": 0,
                 "cost_usd": "unknown"}
    return {"metrics": {"relevance": relevance, "groundedness": groundedness}}


def shown_cells(frame: pd.DataFrame) -> list[str]:
    """Every cell as the page shows it (evalbook.escaping.cell_html)."""
    from evalbook.escaping import cell_html

    return [cell_html(value) for value in frame.to_numpy().ravel()]


def test_the_scores_table_has_one_row_per_metric_with_its_threshold_read_in_words():
    table = scores_table(summary_with_two_metrics())
    assert list(table.index) == ["relevance", "groundedness"]
    assert list(table.columns) == ["mean", "p10", "p50", "p90", "scored", "unscored", "extra keys ignored",
                                   "threshold", "pass rate"]
    assert table.loc["groundedness", "extra keys ignored"] == 1
    assert table.loc["groundedness", "threshold"] == "0.500 (placeholder)"
    assert table.loc["relevance", "threshold"] == "0.700"
    assert table.loc["relevance", "mean"] == -0.25 and table.loc["groundedness", "unscored"] == 1


def test_the_calls_table_says_why_a_cost_is_unknown():
    table = calls_table(summary_with_two_metrics())
    assert list(table.columns) == ["calls", "cache hits", "errors", "prompt tokens", "completion tokens", "cost (USD)"]
    assert table.loc["groundedness", "cost (USD)"] == "0.0012"
    assert table.loc["relevance", "cost (USD)"] == "unknown: no prices pinned"


def test_the_eligibility_table_reads_as_sentences_not_dicts():
    summary = {"eligibility": {"eligible_sources": ["EnterpriseSearchPolicy", "IntentlessPolicy"],
                               "no_source_column": False, "sources_seen": {"EnterpriseSearchPolicy": 2, "utter_x": 4},
                               "n_seen": 6, "n_eligible": 2, "n_without_prediction": 0},
               "sampling": {"sample_size": None, "seed": 0, "n_judged": 2, "fraction_of_eligible_judged": 1.0}}
    table = eligibility_table(summary)
    values = dict(zip(table.index, table["value"]))
    assert values["eligible sources"] == "EnterpriseSearchPolicy, IntentlessPolicy"
    assert values["sources seen"] == "EnterpriseSearchPolicy 2, utter_x 4"
    assert values["sampled"] == "every eligible answer"
    assert values["judged"] == "2 (100% of the eligible)"
    cells = shown_cells(table)
    assert not any(mark in cell for cell in cells for mark in ("{", "[", "None", "—")), cells
    summary["eligibility"]["no_source_column"] = True
    summary["sampling"].update(sample_size=5)
    values = dict(zip(eligibility_table(summary).index, eligibility_table(summary)["value"]))
    assert values["eligible sources"] == "every answer: the data has no source column"
    assert values["sampled"] == "a seeded sample of 5 (seed 0)"


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


def test_the_unscored_table_gives_every_unscored_judgment_with_its_reason_and_the_whole_reply():
    table = unscored_table(RECORDS)
    assert table.to_dict("records") == [
        {"id": "d", "metric": "groundedness", "reason": "the reply is not JSON", "raw_reply": "x" * 250},
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

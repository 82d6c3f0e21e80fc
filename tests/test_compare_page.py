"""05_compare's page leads with its verdict (issue 49): one coloured sentence, a contents list of
the sections present, the deltas, the examples that got worse; nothing empty, nothing raw.

These are the page's parts, built from comparisons of synthetic reports; tests/test_compare_e2e.py
opens the real page of the sample in Chromium (its height, its first screen)."""

from __future__ import annotations

import re

import pytest

from evalbook.compare.figures import delta_figure
from evalbook.compare.tables import (
    contents_html,
    deltas_frame,
    deltas_html,
    runs_frame,
    section_html,
    sections,
    slice_tables_html,
    verdict_html,
    worse_html,
)
from evalbook.compare.verdict import moved_metrics, not_compared, reading, verdict_parts, verdict_sentence
from evalbook.metrics import METRICS
from evalbook.publish.summary import comparison_summary_md
from test_compare import EMBEDDING, RETRIEVAL, compare, ids_of, judged, make_report, row, seeded_scores
from test_compare_slices import LEVELS, sliced

N = 12
# Raw internals a reader must never see: a metric's key, an exception's class, a status, None.
METRIC_KEYS = [m.name for m in METRICS if "_" in m.name]
RAW = re.compile(r"\b(?:\w+(?:Error|Exception)|None|not_run|judge label)\b")


def degraded(gate: dict | None = None, **candidate_options) -> dict:
    """Ten of twelve answers lose 0.1 on every embedding metric, two gain 0.05; retrieval is the same
    in both runs (every delta 0); no judge ran in either run."""
    scores = seeded_scores(N)
    retrieval = {i: n % 2 == 0 for n, i in enumerate(scores)}
    moved = {i: v - 0.1 if n < 10 else v + 0.05 for n, (i, v) in enumerate(scores.items())}
    doc = compare(make_report(scores, retrieval=retrieval),
                  make_report(moved, tag="cand", retrieval=retrieval, **candidate_options))
    doc["gate"] = gate
    return doc


def visible(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


def assert_nothing_raw(html: str) -> None:
    text = visible(html)
    assert not [key for key in METRIC_KEYS if key in text], text
    assert not RAW.search(text), RAW.search(text)


# ---------------------------------------------------------------- the verdict sentence

def test_the_verdict_counts_metrics_worse_and_unchanged_and_the_examples_worse():
    doc = degraded()
    assert [reading(doc, row(doc, name)) for name in EMBEDDING] == ["worse"] * 4
    assert [reading(doc, row(doc, name)) for name in RETRIEVAL] == ["unchanged"] * 5
    assert verdict_sentence(doc) == ("Candidate worse on 4 of 9 metrics, unchanged on 5; "
                                     "10 of 12 examples worse on BERTScore F1; gate off.")
    tones = dict(verdict_parts(doc))
    assert tones["Candidate worse on 4 of 9 metrics"] == "worse"
    assert tones[", unchanged on 5"] == "noise"
    assert tones["10 of 12 examples worse on BERTScore F1"] == "worse"
    assert tones["gate off"] == "plain"


def test_a_better_candidate_is_green_and_noise_is_grey():
    scores = seeded_scores(N)
    better = compare(make_report(scores), make_report({i: v + 0.1 for i, v in scores.items()}, tag="cand"))
    assert verdict_sentence(better) == ("Candidate better on 4 of 4 metrics; "
                                        "12 of 12 examples better on BERTScore F1; gate off.")
    assert {tone for _, tone in verdict_parts(better)} == {"better", "plain"}
    wobble = {i: v + (0.01 if n % 2 else -0.01) for n, (i, v) in enumerate(scores.items())}
    noisy = compare(make_report(scores), make_report(wobble, tag="cand"))
    assert reading(noisy, row(noisy, "bertscore_f1")) == "noise"
    assert verdict_sentence(noisy) == ("Candidate within noise on 4 of 4 metrics; 6 of 12 examples worse "
                                       "and 6 better on BERTScore F1; gate off.")
    assert {tone for _, tone in verdict_parts(noisy)} == {"noise", "plain"}


def test_one_metric_reads_in_the_singular():
    scores = seeded_scores(N)
    doc = compare(make_report(scores), make_report({i: v - 0.1 for i, v in scores.items()}, tag="cand"))
    doc["metrics"] = doc["metrics"][:1]
    assert verdict_sentence(doc).startswith("Candidate worse on 1 of 1 metric; 12 of 12 examples worse")


def test_the_verdict_names_the_gate_and_checks_that_newly_fail():
    failed = {"failed": True, "rules": [{"rule": "bertscore_f1<-0.02", "failed": True}]}
    assert verdict_sentence(degraded(failed)).endswith("; gate failed: compare exits 3.")
    assert ("gate failed: compare exits 3", "worse") in verdict_parts(degraded(failed))
    held = {"failed": False, "rules": [{"rule": "bertscore_f1<-0.5", "failed": False}]}
    assert ("gate held", "better") in verdict_parts(degraded(held))
    doc = degraded()
    doc["checks"] = {**doc["checks"], "compared": True, "n_newly_failing": 3, "n_examples_newly_failing": 2}
    assert "; 3 checks newly fail on 2 examples;" in verdict_sentence(doc)


def test_the_same_answers_are_unchanged_and_grey():
    scores = seeded_scores(N)
    doc = compare(make_report(scores), make_report(scores, tag="cand"))
    assert verdict_sentence(doc) == "Candidate unchanged on all 4 metrics; gate off."
    assert moved_metrics(doc) == []


def test_a_comparison_of_nothing_says_why_in_the_sentence():
    scores = seeded_scores(N)
    doc = compare(make_report(scores), make_report(scores, tag="cand", weights_sha="f" * 64))
    assert verdict_sentence(doc) == ("Nothing was compared: the embedding models differ, so their scores "
                                     "are shown side by side without deltas; gate off.")


def test_summary_md_leads_with_the_same_sentence():
    doc = degraded()
    summary = comparison_summary_md(doc, make_report(seeded_scores(N)), make_report(seeded_scores(N)), [])
    assert summary.split("\n")[2] == f"**{verdict_sentence(doc)}**"


# ---------------------------------------------------------------- the first screen and the contents

def test_the_first_screen_leads_with_the_coloured_sentence_then_the_contents():
    doc = degraded()
    html = verdict_html(doc)
    first = re.search(r"<p[^>]*>(.*?)</p>", html, re.S)
    assert "Candidate worse on 4 of 9 metrics" in first.group(1)
    assert "class='evalbook-verdict-worse'" in first.group(1) and "color" in html
    assert html.index("Candidate worse") < html.index("Contents") < html.index("What changed")
    assert_nothing_raw(html)


def test_the_contents_list_only_the_sections_present_each_with_its_heading():
    doc = degraded()
    keys = [key for key, _ in sections(doc)]
    assert keys == ["deltas", "worse", "per-example", "runs", "method"]  # these reports ran no check
    contents = contents_html(doc)
    for key, title in sections(doc):
        assert f"href='#compare-{key}'" in contents and title in contents
        assert f"id='compare-{key}'" in section_html(doc, key)
    for absent in ("checks", "pairwise", "gate", "slices"):
        assert f"#compare-{absent}" not in contents and section_html(doc, absent) == ""
    gated = degraded({"failed": False, "rules": [{"rule": "bertscore_f1<-0.5", "failed": False}]})
    assert "gate" in [key for key, _ in sections(gated)]


# ---------------------------------------------------------------- nothing empty, nothing raw

def test_the_deltas_show_the_metrics_that_moved_and_say_in_one_line_what_was_not_compared():
    doc = degraded()
    html = deltas_html(doc)
    assert html.count("<tr") == 1 + len(EMBEDDING)  # the header and the four that moved
    assert "BERTScore F1" in html and "top-5 match</td>" not in html
    lines = not_compared(doc)
    assert lines == ["top-5 match, MRR@5, precision@5, recall@5 and nDCG@5: unchanged, every delta within "
                     "the tolerance on the 12 pairs with retrieval",
                     "judge metrics: no judge ran for either run"]
    assert "Not compared: " + "; ".join(lines) + "." in visible(html).replace("  ", " ")
    assert "Checks: not compared: " in html  # one sentence where the section would be
    assert_nothing_raw(html)


@pytest.mark.parametrize("baseline_judge, candidate_judge, said", [
    (None, "a", "the baseline's judge did not run"),
    ("a", "b", "the runs were judged by different judges"),
])
def test_a_judge_that_did_not_run_or_differs_is_one_sentence(baseline_judge, candidate_judge, said):
    from test_compare import LABEL_A, LABEL_B

    labels = {"a": LABEL_A, "b": LABEL_B}
    scores = seeded_scores(N)
    judge = {name: judged(labels[name], {i: 0.5 for i in scores}) if name else None
             for name in (baseline_judge, candidate_judge)}
    doc = compare(make_report(scores, judge=judge[baseline_judge]),
                  make_report(scores, tag="cand", judge=judge[candidate_judge]))
    [line] = [line for line in not_compared(doc) if line.startswith("judge metrics")]
    assert said in line
    assert_nothing_raw(deltas_html(doc))


def test_the_examples_that_got_worse_have_no_empty_heading():
    doc = degraded()
    html = worse_html(doc)
    assert "largest regressions" not in html and not re.search(r"\b0 (?:largest|examples)", html)
    assert "BERTScore F1" in html  # the headline metric's table, open
    assert html.count("<details") == len(EMBEDDING) - 1  # the other metrics', collapsed
    assert html.count("<table") == len(EMBEDDING)
    assert_nothing_raw(html)
    better = compare(make_report(seeded_scores(N)),
                     make_report({i: v + 0.1 for i, v in seeded_scores(N).items()}, tag="cand"))
    assert "worse" not in [key for key, _ in sections(better)] and worse_html(better) == ""


def test_the_slice_tables_show_the_tested_levels_of_metrics_that_moved_and_fold_the_rest():
    scores = seeded_scores(60)
    sources = [LEVELS[i // 20] for i in range(60)]
    retrieval = dict.fromkeys(scores, True)
    baseline = make_report(scores, retrieval=retrieval)
    candidate = sliced(make_report({i: v - 0.1 * (n // 20) for n, (i, v) in enumerate(scores.items())},
                                   tag="cand", retrieval=retrieval),
                       {"source": sources, "rare": ["x"] * 3 + ["y"] * 57})
    doc = compare(baseline, candidate)
    html = slice_tables_html(doc)
    shown, rest = html.split("<details", 1)
    assert "top-5 match" not in html  # retrieval did not move: no level of it, and no row of zeros
    assert "BERTScore F1" in shown and "bertscore_f1" not in html and "too few to tell" not in shown
    assert "too few to tell" in rest
    assert "slices" in [key for key, _ in sections(doc)]
    assert_nothing_raw(html)


def test_the_runs_table_reads_without_keys_or_statuses():
    doc = degraded()
    table = runs_frame(doc)
    assert "judge" in table.index and table.loc["judge"].tolist() == ["did not run", "did not run"]
    assert not [field for field in table.index if "_" in field]


def test_the_per_example_figure_leaves_out_metrics_that_did_not_move():
    doc = degraded()
    figure = delta_figure(deltas_frame(doc, moved_metrics(doc)), k=5)
    assert len(figure.axes) == len(EMBEDDING)

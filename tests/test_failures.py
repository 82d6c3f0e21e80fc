"""Where a run fails, for reading: lib/evalbook/report/failures.py, its templates
(where_it_fails.html, summary_slices.md) and the forest plot (report/figures.slice_forest).

Every report here is made by hand in the shape of the report's `slices` section (report schema
1.9), so that each sentence, its order and each count is known before it is read."""

from __future__ import annotations

import copy
import functools
import io
import json
import re

import matplotlib.pyplot as plt
import matplotlib.text
import pytest

import hostile
from evalbook.publish.summary import run_summary_md
from evalbook.report import figures
from evalbook.report.failures import (FRAME_COLUMNS, flagged_levels, slices_frame, slices_method_html, slices_table,
                                      where_it_fails, where_it_fails_html)
from test_summary import assert_renders_as_text, inline_children, parse

METHOD = "Each level is tested against the rest of the run by permutation; q-values by Benjamini-Hochberg."


def entry(slice_name: str, level: str, metric: str = "bertscore_f1", verdict: str = "no clear difference", *,
          kind: str = "metadata", n: int = 20, mean: float = 0.6, low: float | None = None,
          high: float | None = None, rest_mean: float = 0.62, q: float | None = 0.5,
          set_aside: tuple[str, ...] = (), lowest: list[dict] | None = None) -> dict:
    """One level of the `levels` list; the difference, its interval and p follow from the rest."""
    low = mean - 0.06 if low is None else low
    high = mean + 0.06 if high is None else high
    difference = mean - rest_mean
    tested = verdict != "too few to tell"
    return {"slice": slice_name, "kind": kind, "level": level, "metric": metric, "n": n, "mean": mean,
            "low": low, "high": high, "rest_n": 100 - n, "rest_mean": rest_mean, "difference": difference,
            "difference_low": difference - 0.05, "difference_high": difference + 0.05,
            "p_value": q / 10 if tested else None, "q_value": q if tested else None, "verdict": verdict,
            "set_aside": list(set_aside), "lowest": lowest or []}


def lowest(*ids: str) -> list[dict]:
    return [{"id": example_id, "question": f"question of {example_id}?", "value": 0.1 * i}
            for i, example_id in enumerate(ids)]


def section(levels: list[dict], columns: list[dict] | None = None, metrics: list[str] | None = None,
            n_tests: int | None = None, notes: list[str] | None = None, topics: dict | None = None) -> dict:
    """A `slices` section of `levels`; columns and metrics follow from the levels unless given."""
    if columns is None:
        found: dict[tuple[str, str], list[str]] = {}
        for level in levels:
            found.setdefault((level["slice"], level["kind"]), [])
            if level["level"] not in found[level["slice"], level["kind"]]:
                found[level["slice"], level["kind"]].append(level["level"])
        columns = [{"name": name, "kind": kind, "levels": names} for (name, kind), names in found.items()]
    metrics = metrics or list(dict.fromkeys(level["metric"] for level in levels))
    tested = sum(level["q_value"] is not None for level in levels)
    return {"method": METHOD,
            "settings": {"by": "auto", "min_n": 10, "q_threshold": 0.05, "permutations": 1000,
                         "refined_permutations": 10000, "resamples": 2000, "confidence": 0.95, "seed": 0},
            "metrics": metrics, "columns": columns, "notes": notes or [], "topics": topics,
            "n_tests": tested if n_tests is None else n_tests,
            "n_flagged": sum(level["verdict"] in ("worse", "better") for level in levels), "levels": levels}


def report_with(slices: dict | None) -> dict:
    """The smallest report a first screen, summary.md and the figures read, with `slices`."""
    report = {
        "run_id": "00000000-0000-4000-8000-000000000001", "dataset": {"name": "sample", "split": "test",
                                                                       "n_examples": 100},
        "models": {"generator": "gen"}, "generation_summary": None,
        "judge_summary": {"status": "not_run", "reason": "judge.enabled is false"},
        "intervals": {"confidence": 0.95, "metrics": {"bertscore_f1": {"mean": 0.62, "low": 0.6, "high": 0.64,
                                                                       "n": 100}}},
        "answer_similarity_summary": {"bertscore_f1": {"mean": 0.62}, "sentence_cosine": {"mean": 0.7}},
        "retrieval_summary": {"top_k_match_rate": 0.5, "k": 5},
        "counts": {}, "examples": []}
    if slices is not None:
        report["slices"] = slices
    return report


def text_of(html: str) -> str:
    """The fragment's text as a reader sees it: entities decoded, whitespace runs as one space."""
    _, text = hostile.read_markup(html)
    return " ".join(text.split())


# Levels whose order is known: worse before better; within each, q first, then the distance.
TOPIC_REFUND = "refund · card · fee"
ORDERED = [
    entry("topic (by meaning)", TOPIC_REFUND, verdict="worse", kind="topic", n=23, mean=0.41, low=0.35, high=0.47,
          rest_mean=0.66, q=0.003, lowest=lowest("s07", "s12", "s31")),
    entry("domain", "bank", verdict="worse", n=30, mean=0.38, rest_mean=0.66, q=0.003,  # q ties; further out
          lowest=lowest("b1")),
    entry("domain", "council", verdict="worse", n=15, mean=0.55, rest_mean=0.63, q=0.0002),
    entry("domain", "retail", verdict="better", n=25, mean=0.80, rest_mean=0.60, q=0.01),
    entry("answer length", "[1, 5] words", verdict="better", kind="derived", n=40, mean=0.75, rest_mean=0.6,
          q=0.0001),
    entry("domain", "nature", n=12),
    entry("domain", "software", verdict="too few to tell", n=4),
]


def test_flagged_levels_come_worse_first_then_better_each_by_q_then_distance():
    order = [(level["verdict"], level["level"]) for level in flagged_levels(report_with(section(ORDERED)))]
    assert order == [("worse", "council"), ("worse", "bank"), ("worse", TOPIC_REFUND),
                     ("better", "[1, 5] words"), ("better", "retail")]


def test_each_flagged_level_reads_as_one_sentence_naming_its_slice_by_kind():
    text = text_of(where_it_fails_html(report_with(section(ORDERED))))
    assert ("Questions about topic refund · card · fee score BERTScore F1 0.410 [0.350, 0.470] against 0.660 "
            "elsewhere (n = 23, q = 0.003).") in text
    assert "Examples with domain = bank score BERTScore F1 0.380 [0.320, 0.440] against 0.660 elsewhere" in text
    assert "Examples with domain = council score BERTScore F1 0.550 [0.490, 0.610] against 0.630 elsewhere " \
           "(n = 15, q < 0.001)." in text
    assert "Examples with answer length = [1, 5] words score" in text
    worse, better = text.index("Worse than the rest of the run (3)"), text.index("Better than the rest of the run (2)")
    assert worse < text.index("domain = council") < text.index("topic refund") < better < text.index("domain = retail")
    assert "domain = nature" not in text and "software" not in text  # not flagged: only in the table
    assert "5 flagged in 6 tests (3 slices by 1 metric)" in text
    assert "1 of 7 levels had fewer than 10 examples on some metric: too few to tell" in text
    assert METHOD not in text  # under the table, not in the first screen
    assert text_of(slices_method_html(report_with(section(ORDERED)))) == f"How the levels were tested: {METHOD}"
    assert slices_method_html(report_with(None)) is None


def test_the_names_are_emphasised_and_a_slice_named_with_an_equals_sign_takes_a_colon():
    levels = [entry("retrieval at k = 5", "miss", verdict="worse", kind="derived", q=0.001)]
    html = where_it_fails_html(report_with(section(levels)))
    assert "<em>retrieval at k = 5: miss</em>" in html
    html = where_it_fails_html(report_with(section(ORDERED)))
    assert f"Questions about topic <em>{TOPIC_REFUND}</em>" in html


def test_a_level_flagged_on_several_metrics_is_one_sentence_its_most_certain_metric_first():
    levels = [entry("domain", "bank", "sentence_cosine", "worse", mean=0.5, rest_mean=0.7, q=0.02,
                    lowest=lowest("by-cosine")),
              entry("domain", "bank", "bertscore_f1", "worse", mean=0.4, rest_mean=0.66, q=0.004,
                    lowest=lowest("by-f1", "by-f1-2"))]
    (level,) = flagged_levels(report_with(section(levels)))
    assert [clause["label"] for clause in level["metrics"]] == ["BERTScore F1", "sentence cosine"]
    text = text_of(where_it_fails_html(report_with(section(levels))))
    assert ("Examples with domain = bank score BERTScore F1 0.400 [0.340, 0.460] against 0.660 elsewhere "
            "(n = 20, q = 0.004); sentence cosine 0.500 [0.440, 0.560] against 0.700 (n = 20, q = 0.020).") in text
    assert "Lowest BERTScore F1 here: by-f1 question of by-f1? by-f1-2 question of by-f1-2?" in text
    assert "by-cosine" not in text


def test_a_level_retested_without_some_levels_says_elsewhere_leaves_them_out():
    levels = [entry("domain", "bank", verdict="worse", mean=0.3, rest_mean=0.66, q=0.0001),
              entry("domain", "retail", verdict="better", mean=0.75, rest_mean=0.6, q=0.03,
                    set_aside=("bank", "council")),
              entry("topic (by meaning)", "a · b · c", verdict="better", kind="topic", mean=0.7, rest_mean=0.6,
                    q=0.04, set_aside=("x · y · z",))]
    text = text_of(where_it_fails_html(report_with(section(levels))))
    assert "against 0.600 elsewhere, leaving out domain = bank, domain = council (n = 20, q = 0.030)." in text
    assert "against 0.600 elsewhere, leaving out topic x · y · z (n = 20, q = 0.040)." in text
    assert "against 0.660 elsewhere (n = 20, q < 0.001)." in text


def test_the_lowest_examples_are_listed_under_their_level_at_most_three():
    levels = [entry("domain", "bank", verdict="worse", q=0.001, lowest=lowest("a1", "a2", "a3")),
              entry("domain", "retail", verdict="better", q=0.002, mean=0.8, lowest=lowest("r1"))]
    text = text_of(where_it_fails_html(report_with(section(levels))))
    assert "a1 question of a1? a2 question of a2? a3 question of a3?" in text
    assert text.index("a3") < text.index("domain = retail") < text.index("r1")
    long_question = [{"id": "long", "question": "why " * 1000, "value": 0.0}]
    levels = [entry("domain", "bank", verdict="worse", q=0.001, lowest=long_question)]
    (level,) = flagged_levels(report_with(section(levels)))
    assert level["lowest"][0]["question"].endswith("more characters; full text in the report JSON)")


def test_nothing_flagged_says_so_with_how_many_tests_slices_and_metrics():
    levels = [entry(name, level, metric, n=20 if level != "tiny" else 5,
                    verdict="too few to tell" if level == "tiny" else "no clear difference")
              for metric in ("bertscore_f1", "sentence_cosine")
              for name, level in (("domain", "bank"), ("domain", "council"), ("domain", "tiny"),
                                  ("truncated", "truncated"), ("truncated", "not truncated"))]
    report = report_with(section(levels))
    text = text_of(where_it_fails_html(report))
    assert ("Nothing is flagged: in 8 tests (2 slices by 2 metrics), no level differs from the rest of the run "
            "at a false discovery rate of 0.05 (Benjamini–Hochberg q).") in text
    assert "1 of 5 levels had fewer than 10 examples on some metric: too few to tell, not tested there." in text
    assert "Worse than" not in text and "Better than" not in text
    assert where_it_fails(report)["flagged"] == []


def test_one_test_and_one_slice_read_in_the_singular():
    text = text_of(where_it_fails_html(report_with(section([entry("domain", "bank")]))))
    assert "in 1 test (1 slice by 1 metric)" in text
    assert "too few" not in text


def test_no_slices_no_levels_tested_and_an_old_report_each_say_so_in_one_sentence():
    assert text_of(where_it_fails_html(report_with(None))) == \
        "Where it fails is not shown: the report was written before slices existed."
    assert text_of(where_it_fails_html({**report_with(None), "slices": None})) == \
        "Where it fails is not shown: the run was not sliced."
    empty = section([], columns=[], metrics=["bertscore_f1"], notes=["region: one value ('north') in every example, "
                                                                    "so it is not a slice"])
    text = text_of(where_it_fails_html(report_with(empty)))
    assert text.startswith("Nothing to test: the run is not cut into any slice.")
    assert "region: one value ('north') in every example, so it is not a slice" in text
    tiny = section([entry("domain", level, verdict="too few to tell", n=3) for level in ("a", "b")])
    assert text_of(where_it_fails_html(report_with(tiny))).startswith(
        "Nothing was tested: every level of the 1 slice has fewer than 10 examples, too few to tell.")


def test_the_notes_are_listed_with_why_there_are_no_topics_once():
    notes = ["region: one value ('north') in every example, so it is not a slice",
             "city: 41 distinct values, over 30: not sliced"]
    reason = "12 questions: topics need at least 30"
    topics = {"k": None, "silhouette": None, "tried": {}, "names": [], "reason": reason}
    context = where_it_fails(report_with(section([entry("domain", "bank")], notes=notes, topics=topics)))
    assert context["notes"] == [*notes, f"no topics by meaning: {reason}"]
    context = where_it_fails(report_with(section([entry("domain", "bank")], notes=[*notes, f"topics: {reason}"],
                                                 topics=topics)))
    assert context["notes"] == [*notes, f"topics: {reason}"]
    html = where_it_fails_html(report_with(section([entry("domain", "bank")], notes=notes, topics=topics)))
    assert html.count("<li>") == 3


HOSTILE = " ".join(hostile.PAYLOADS) + " " + hostile.CONTROLS


def hostile_section() -> dict:
    hostile_lowest = [{"id": f"id {HOSTILE}", "question": f"question {HOSTILE}", "value": 0.1}]
    levels = [entry(f"slice {HOSTILE}", f"level {HOSTILE}", verdict="worse", q=0.001, lowest=hostile_lowest,
                    set_aside=(f"aside {HOSTILE}",)),
              entry("topic (by meaning)", f"topic {HOSTILE}", verdict="better", kind="topic", mean=0.8, q=0.002),
              entry(f"slice {HOSTILE}", f"other {HOSTILE}", verdict="too few to tell", n=3)]
    return section(levels, notes=[f"note {HOSTILE}"], topics={"k": None, "silhouette": None, "tried": {},
                                                              "names": [], "reason": f"reason {HOSTILE}"})


def test_hostile_slice_names_levels_ids_and_questions_are_escaped_in_the_fragment():
    html = where_it_fails_html(report_with(hostile_section()))
    assert hostile.payload_elements(html) == []
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", html)
    text = text_of(html)
    shown = HOSTILE.replace(hostile.CONTROLS, hostile.VISIBLE_CONTROLS)
    # the slice's name holds "=" (onerror=...): a colon joins it to the level
    for expected in (f"slice {shown}: level {shown}", f"topic {shown}", f"id {shown}", f"question {shown}",
                     f"aside {shown}", f"note {shown}", f"reason {shown}"):
        assert expected in text, expected


def test_hostile_text_in_the_table_is_escaped():
    html = slices_table(report_with(hostile_section())).to_html()
    assert hostile.payload_elements(html) == []
    assert "\x00" not in html and hostile.VISIBLE_CONTROLS in html


# ---------------------------------------------------------------- the full table

def test_the_table_holds_every_level_and_metric_in_the_slices_order_formatted():
    levels = [entry("domain", "council", "sentence_cosine"), entry("domain", "bank", "sentence_cosine"),
              entry("domain", "bank", "bertscore_f1", "worse", mean=0.41, low=0.35, high=0.47, rest_mean=0.66,
                    q=0.0001),
              entry("domain", "tiny", "bertscore_f1", "too few to tell", n=4),
              entry("domain", "council", "bertscore_f1")]
    columns = [{"name": "domain", "kind": "metadata", "levels": ["bank", "council", "tiny"]}]
    frame = slices_frame(report_with(section(levels, columns=columns)))
    assert list(frame.columns) == list(FRAME_COLUMNS)
    assert [(row.level, row.metric) for row in frame.itertuples()] == [
        ("bank", "BERTScore F1"), ("bank", "sentence cosine"), ("council", "BERTScore F1"),
        ("council", "sentence cosine"), ("tiny", "BERTScore F1")]
    bank = frame.iloc[0].to_dict()
    assert bank == {"slice": "domain", "level": "bank", "metric": "BERTScore F1", "n": 20,
                    "mean [low, high]": "0.410 [0.350, 0.470]", "difference [low, high]": "-0.250 [-0.300, -0.200]",
                    "q": "< 0.001", "verdict": "worse"}
    assert frame.iloc[4]["q"] == "—" and frame.iloc[4]["verdict"] == "too few to tell"
    assert frame["n"].dtype == "int64"


def test_the_table_of_a_report_without_slices_is_empty_with_its_columns():
    frame = slices_frame(report_with(None))
    assert list(frame.columns) == list(FRAME_COLUMNS) and frame.empty
    assert "No slices in this report" in slices_table(report_with(None)).to_html()


# ---------------------------------------------------------------- the forest plot

def drawn(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=60)
    return buffer.getvalue()


def by_gid(fig, prefix: str) -> list:
    return [artist for artist in fig.findobj() if (artist.get_gid() or "").startswith(prefix)]


def row_names(fig) -> list:
    return by_gid(fig, "row-name")


def test_the_forest_plot_draws_each_level_with_its_interval_and_the_runs_mean():
    report = report_with(section(ORDERED))
    fig = figures.slice_forest(report, "bertscore_f1")
    assert drawn(fig).startswith(b"\x89PNG")
    (ax,) = fig.axes
    labels = [name.get_text() for name in row_names(fig)]
    assert labels == ["topic (by meaning)", TOPIC_REFUND, "domain", "bank", "council", "retail", "nature",
                      "software", "answer length", "[1, 5] words"]
    assert [name.get_fontweight() for name in row_names(fig)][:3] == ["bold", "normal", "bold"]
    assert not ax.get_yticks().size  # the names are drawn beside the axis, not as its ticks
    worse = by_gid(fig, "levels:worse")
    assert worse and by_gid(fig, "levels:better") and by_gid(fig, "levels:too few to tell")
    (mean_line,) = by_gid(fig, "mean:bertscore_f1")
    assert mean_line.get_xdata()[0] == pytest.approx(0.62)
    texts = [text.get_text() for text in ax.texts]
    assert "n = 23, worse, q = 0.003" in texts and "n = 40, better, q < 0.001" in texts and "n = 12" in texts
    assert plt.get_fignums() == []  # detached from pyplot, as every figure of the report


def test_the_forest_plot_of_forty_levels_stays_readable_and_hostile_names_draw_as_written():
    levels = [entry(f"column {c}", f"level {i} {hostile.MATHTEXT}", verdict="worse" if i == 0 else "no clear difference",
                    q=0.001 if i == 0 else 0.5) for c in range(5) for i in range(8)]
    fig = figures.slice_forest(report_with(section(levels)), "bertscore_f1")
    width, height = fig.get_size_inches()
    assert len(row_names(fig)) == 45 and 10 < height < 14 and width < 10
    assert drawn(fig)  # mathtext in a name would fail here if it were parsed
    assert f"level 0 {hostile.MATHTEXT}" in [name.get_text() for name in row_names(fig)]
    long_name = "x" * 100
    fig = figures.slice_forest(report_with(section([entry(long_name, long_name)])), "bertscore_f1")
    assert max(len(name.get_text()) for name in row_names(fig)) == figures.FOREST_LABEL_CHARACTERS


def test_saving_the_forest_plot_measures_each_level_name_a_few_times_not_once_per_placement(tmp_path, monkeypatch):
    """Placed automatically, the title and the empty y label had matplotlib measure every row's
    name again each time it placed them: 20 times per name for one saved PNG, a fifth of the time
    04 spent on these plots at 60 levels (issue 40, item 7). Fixed in place, a name is measured a
    few times."""
    levels = [entry(f"column {c}", f"level {i}") for c in range(5) for i in range(8)]
    fig = figures.slice_forest(report_with(section(levels)), "bertscore_f1")
    (ax,) = fig.axes
    measured: dict[int, int] = {}
    measure = matplotlib.text.Text.get_window_extent

    def counted(text, *args, **kwargs):
        measured[id(text)] = measured.get(id(text), 0) + 1
        return measure(text, *args, **kwargs)

    monkeypatch.setattr(matplotlib.text.Text, "get_window_extent", counted)
    figures.save_png(fig, tmp_path, "forest")
    names = row_names(fig)
    assert len(names) == 45 and max(measured.get(id(name), 0) for name in names) <= 6
    box = ax.get_window_extent()
    assert box.y1 <= ax.title.get_window_extent().y0  # above the plot, as placed before
    assert all(name.get_window_extent().x1 <= box.x0 for name in names)  # beside it, not over it


def test_the_forest_plot_says_why_it_is_not_drawn():
    reasons = [(report_with(None), "the report was written before slices existed"),
               ({**report_with(None), "slices": None}, "the run was not sliced"),
               (report_with(section([], columns=[], metrics=["bertscore_f1"])), "the run is not cut into any slice")]
    for report, reason in reasons:
        assert figures.slice_forest(report, "bertscore_f1") is None
        assert figures.no_data_reason(report, functools.partial(figures.slice_forest, metric="bertscore_f1")) == reason
    report = report_with(section(ORDERED))
    assert figures.slice_forest(report, "groundedness") is None
    assert figures.no_data_reason(report, functools.partial(figures.slice_forest, metric="groundedness")) == \
        "groundedness was not tested by slice"
    valueless = report_with(section([entry("domain", "bank", "sentence_cosine", "too few to tell", n=0)]))
    valueless["slices"]["levels"][0].update(mean=None, low=None, high=None)
    assert figures.no_data_reason(valueless, "slice_forest", metric="sentence_cosine") == \
        "no level has a sentence cosine value"
    assert figures.forest_metrics(report) == ["bertscore_f1"] and figures.forest_metrics(valueless) == []
    assert figures.forest_metrics(report_with(None)) == []


# ---------------------------------------------------------------- summary.md

def summary_lines(report: dict) -> list[str]:
    return [line for line in run_summary_md(report, []).splitlines() if line.strip()]


def test_summary_md_lists_the_flagged_levels_after_the_headline_one_line_each():
    report = report_with(section(ORDERED))
    source = run_summary_md(report, [])
    parsed = parse(source)
    assert [table.header[0] for table in parsed.tables] == ["metric", "count"]  # both tables still tables
    lines = summary_lines(report)
    start = next(i for i, line in enumerate(lines) if line.startswith("**Where it fails**"))
    assert lines[start - 1].startswith("| BERTScore F1")  # right after the headline table
    flagged = lines[start + 1:start + 6]
    assert all(line.startswith("- ") for line in flagged) and not lines[start + 6].startswith("- ")
    assert [line.split(":")[0] for line in flagged] == ["- worse"] * 3 + ["- better"] * 2
    items = [token for token in parsed.tokens if token.type == "inline" and token.content.startswith(("worse", "better"))]
    texts = ["".join(child.content for child in token.children if child.type == "text") for token in items]
    assert texts[2] == ("worse: Questions about topic refund · card · fee score BERTScore F1 0.410 [0.350, 0.470] "
                        "against 0.660 elsewhere (n = 23, q = 0.003).")
    assert texts[0].startswith("worse: Examples with domain = council score") and texts[0].endswith("q < 0.001).")
    assert "5 flagged in 6 tests" in parsed.text


def test_summary_md_says_nothing_was_flagged_in_how_many_tests_and_nothing_without_slices():
    levels = [entry("domain", level, metric) for metric in ("bertscore_f1", "sentence_cosine")
              for level in ("bank", "council")]
    assert "Where it fails: nothing flagged in 4 tests (1 slice by 2 metrics)." in parse(
        run_summary_md(report_with(section(levels)), [])).text
    old = run_summary_md(report_with(None), [])
    assert "Where it fails" not in old
    assert "\n\n\n" not in old  # the headline table still ends in one blank line


def test_hostile_text_in_the_summarys_flagged_levels_renders_as_text():
    parsed = parse(run_summary_md(report_with(hostile_section()), []))
    assert_renders_as_text(parsed, set())
    shown = " ".join(HOSTILE.replace(hostile.CONTROLS, hostile.VISIBLE_CONTROLS).split())
    assert f"slice {shown}: level {shown}" in parsed.text and f"aside {shown}" in parsed.text
    strong = [child for child in inline_children(parsed.tokens) if child.type == "strong_open"]
    assert len(strong) == 4  # the heading, the two levels and the one set aside: none from the payloads


def test_the_context_is_one_for_the_page_and_the_summary():
    report = report_with(section(ORDERED))
    context = where_it_fails(report)
    assert context["present"] and context["n_tests"] == 6 and context["slices"] == "3 slices"
    assert copy.deepcopy(context) == where_it_fails(report)  # plain values, rebuilt the same


# ---------------------------------------------------------------- a real run, in Chromium

def test_the_no_code_report_shows_the_checks_first_then_where_it_fails(sample_runs):
    """The sample's domain column and the derived slices reach 04_report's page. The first screen
    holds the headline, how many answers failed a check, the contents and the checks' section
    (issue 48: which answers are wrong comes first); the worst examples follow, then "Where it
    fails", its heading and first sentence, a forest plot of each headline metric's tested levels
    and, collapsed, the table of every level (issue 49)."""
    from browser import first_screen

    run = sample_runs.baseline
    report = json.loads(run.report_path.read_text("utf-8"))
    context = where_it_fails(report)
    assert context["present"], "the sample run's report has no slices section"
    assert "domain" in [column["name"] for column in report["slices"]["columns"]]
    page = run.run_dir / "04_report.noinput.html"
    seen = first_screen(page)
    if context["flagged"]:
        first = context["flagged"][0]
        expected = f"{first['subject']} {first['name']} score {first['metrics'][0]['label']}"
    else:
        expected = f"Nothing is flagged: in {context['tests']} ({context['slices']} by {context['metrics']})"
    above = seen["above"]
    assert "answers failed a check" in above and "Which answers fail a check" in above, above[-1500:]
    assert above.index("95% interval") < above.index("Contents") < above.index("Checks assert")  # after the headline
    text = seen["text"]
    body = text[text.index("Checks assert"):]  # past the contents, which name every section
    assert "Where it fails" in body and expected in body
    assert body.index("Worst examples") < body.index("Where it fails") < body.index(expected)
    # the explorer's table is hidden and filled by its script; any other table has rows
    assert not [table for table in seen["empty_tables"] if " hidden" not in table.split(">", 1)[0]]
    html = page.read_text("utf-8")
    collapsed = html[re.search("<details class=[\"']evalbook-details[\"']>", html).start():]
    collapsed = collapsed[:collapsed.index("</details>")]
    assert "mean [low, high]" in collapsed and "difference [low, high]" in collapsed  # the full table
    assert "How the levels were tested" in collapsed
    forests = sorted(path.name for path in (run.run_dir / "figures").glob("slices-*.png"))
    assert forests == sorted(f"slices-{name}.png" for name in figures.page_forest_metrics(report))
    assert len(forests) >= 2 and len(forests) < len(report["slices"]["metrics"])
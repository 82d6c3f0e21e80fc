"""Figures and tables of a report: what they draw sits where the report says, and gaps say so."""

from __future__ import annotations

import copy
import json
import io
from datetime import datetime, timezone

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.colors import to_hex, to_rgba  # noqa: E402
from PIL import Image  # noqa: E402

import hostile  # noqa: E402

from evalbook.report import figures  # noqa: E402
from evalbook.compare.figures import DELTA_COLUMNS, delta_figure  # noqa: E402
from evalbook.judge.display import verdict_text  # noqa: E402
from evalbook.metrics import metric  # noqa: E402
from evalbook.report.figures import (  # noqa: E402
    f1_vs_cosine,
    groundedness_vs_relevance,
    no_data_reason,
    pass_rate_by_threshold,
    pass_rates,
    retrieval_rank_histogram,
    save_png,
    similarity_distributions,
)
from evalbook.report.tables import (  # noqa: E402
    judged_answers,
    unscored_judgments,
    worst_example_metrics,
    worst_examples,
    worst_examples_frame,
)
from evalbook.report.document import build_report, validate_report  # noqa: E402
from evalbook.stats import summarize  # noqa: E402
from retrievalrows import with_retrieval_metrics  # noqa: E402

IDS = ["e1", "e2", "e3", "e4", "e5", "e6"]
F1 = [0.2, 0.4, 0.6, 0.8, 0.9, None]
COSINE = [0.3, 0.9, 0.5, 0.7, 0.95, None]
# e1 found at rank 1, e2 at 3, e3 not retrieved, e4 at 1, e5 at 7 (past k), e6 no retrieval data
RANKS = [1, 3, None, 1, 7, None]
TOP_K = [True, True, False, True, False, None]
K = 5
LABEL = "judge-0123456789abcdef"
THRESHOLDS = {"groundedness": (0.8, False), "relevance": (0.5, True), "criteria": (0.7, False)}


# ---------------------------------------------------------------- a small report

def canonical_frame() -> pd.DataFrame:
    generated = ["Bins go out on Mondays.", "Glass is collected < weekly.", "g3", "g4", "g5", None]
    return pd.DataFrame({
        "id": pd.Series(IDS, dtype=object),
        "row": list(range(1, 7)),
        "question": pd.Series([f"question {i}?" for i in IDS], dtype=object),
        "context": pd.Series([f"context {i}" for i in IDS], dtype=object),
        "reference_answer": pd.Series([f"reference {i}" for i in IDS], dtype=object),
        "generated_answer": pd.Series(generated, dtype=object),
        "has_prediction": [True] * 5 + [False],
        "generated_empty": [False] * 6,
        "reference_empty": [False] * 6,
        "gold_id": pd.Series([None] * 6, dtype=object), "gold_ids": pd.Series([None] * 6, dtype=object),
        "retrieved_ids": pd.Series([None] * 6, dtype=object),
        "retrieved_contexts": pd.Series([None] * 6, dtype=object),
        "source": pd.Series(["EnterpriseSearchPolicy"] * 6, dtype=object),
        "conversation": pd.Series([None] * 6, dtype=object),
        "metadata": ["{}"] * 6,
    })


def scored_frame(f1=F1, cosine=COSINE) -> pd.DataFrame:
    def floats(values):
        return pd.array([pd.NA if v is None else v for v in values], dtype="Float64")

    answered = [v is not None for v in f1]
    return pd.DataFrame({
        "id": IDS,
        "bertscore_precision": floats([None if v is None else v - 0.05 for v in f1]),
        "bertscore_recall": floats([None if v is None else v + 0.05 for v in f1]),
        "bertscore_f1": floats(f1),
        "sentence_cosine": floats(cosine),
        "generated_empty": pd.array([False if a else pd.NA for a in answered], dtype="boolean"),
        "reference_empty": [False] * 6,
        "truncated_bertscore": pd.array([False if a else pd.NA for a in answered], dtype="boolean"),
        "truncated_sentence": pd.array([False if a else pd.NA for a in answered], dtype="boolean"),
        "rank": pd.array([pd.NA if r is None else r for r in RANKS], dtype="Int64"),
        "top_k_match": pd.array([pd.NA if t is None else t for t in TOP_K], dtype="boolean"),
    }).pipe(with_retrieval_metrics, k=K)


def entry(score, reason=None, **detail) -> dict:
    return {"score": score, "unscored_reason": reason, "passed": None, **detail}


def statements(*verdicts) -> dict:
    return {"n_statements": len(verdicts),
            "statements": [{"statement": f"statement {i} of the answer", "verdict": v,
                            "justification": "the reference says so" if v else "not in the reference"}
                           for i, v in enumerate(verdicts, start=1)]}


def criteria(*met) -> dict:
    goals = ["Answers the question asked.", "Asks at most one clarifying question."]
    return {"criteria": [{"criterion": g, "met": m, "rationale": "as read"} for g, m in zip(goals, met)]}


def judge_records() -> dict:
    """e1 a confident lie, e2 an accurate dodge, e3 and e4 each missing one score."""
    return {
        "e1": {"status": "judged", "groundedness": entry(0.0, **statements(0, 0)),
               "relevance": entry(1.0, generated_questions=["When are bins collected?"]),
               "criteria": entry(1.0, **criteria(True, True))},
        "e2": {"status": "judged", "groundedness": entry(1.0, **statements(1, 1)),
               "relevance": entry(0.1, generated_questions=["What is glass?"]),
               "criteria": entry(0.5, **criteria(True, False))},
        "e3": {"status": "judged", "groundedness": entry(0.5, **statements(1, 0)),
               "relevance": entry(None, "judge call failed: ReadTimeout"),
               "criteria": entry(1.0, **criteria(True, True))},
        "e4": {"status": "judged", "groundedness": entry(None, "the judge found no statement in the answer"),
               "relevance": entry(0.8, generated_questions=["q"]),
               "criteria": entry(None, "the reply does not list every criterion once, in order",
                                 raw_reply='{"criteria": []}')},
        "e5": {"status": "not_sampled"},
        "e6": {"status": "not_eligible"},
    }


def metric_summary(records: dict, metric: str) -> dict:
    entries = [r[metric] for r in records.values() if r["status"] == "judged"]
    scores = [e["score"] for e in entries]
    summary = summarize(scores)
    threshold, placeholder = THRESHOLDS[metric]
    scored = [s for s in scores if s is not None]
    reasons = [e["unscored_reason"] for e in entries if e["score"] is None]
    return {"label": LABEL, "mean": summary["mean"], "p10": summary["p10"], "p50": summary["p50"],
            "p90": summary["p90"], "n_scored": summary["n"], "n_unscored": summary["n_missing"],
            "unscored_reasons": {r: reasons.count(r) for r in reasons},
            "threshold": threshold, "threshold_is_placeholder": placeholder,
            "pass_rate": sum(s >= threshold for s in scored) / len(scored),
            "calls": 4, "cache_hits": 0, "errors": 0, "prompt_tokens": 0, "completion_tokens": 0,
            "cost_usd": "unknown"}


def judge_outcome() -> dict:
    records = judge_records()
    for record in records.values():
        record["label"] = LABEL
    summary = {"status": "ran", "reason": None, "label": LABEL, "note": None,
               "eligibility": {"n_eligible": 6}, "sampling": {"n_judged": 4},
               "metrics": {m: metric_summary(records, m) for m in THRESHOLDS}, "totals": None}
    return {"summary": summary, "models_judge": None, "records": records}


def make_report(judge: dict | None = None, scored: pd.DataFrame | None = None) -> dict:
    counts = {"n_input_rows": 6, "n_examples": 6, "n_unmatched_predictions": 0, "unmatched_prediction_ids": [],
              "n_examples_without_prediction": 1, "examples_without_prediction": ["e6"],
              "n_empty_generated_answers": 0, "n_empty_reference_answers": 0, "n_left_out_by_limit": 0,
              "n_with_retrieval": 5, "n_skipped_incomplete_examples": 0, "skipped_incomplete_rows": []}
    provenance = {"git_commit": None, "params_hash": "sha256:" + "a" * 64, "params_profile": {},
                  "package_versions": {}, "bertscore_hash": "h"}
    report = build_report(
        run_id="2d6b3516-cc7d-4cf4-ac99-07b0159bfb11", timestamp=datetime(2026, 11, 30, tzinfo=timezone.utc),
        dataset={"name": "t", "split": "sample"},
        models={"generator": "g", "bertscore": "b", "sentence_transformer": "s"},
        canonical=canonical_frame(), scored=scored_frame() if scored is None else scored,
        load_counts=counts, k=K, provenance=provenance, judge=judge)
    validate_report(report)
    return report


@pytest.fixture
def report() -> dict:
    return make_report(judge_outcome())


@pytest.fixture
def unjudged() -> dict:
    return make_report()


def by_gid(fig, gid: str):
    found = [a for ax in fig.axes for a in [*ax.lines, *ax.collections, *ax.patches, *ax.texts]
             if getattr(a, "get_gid", lambda: None)() == gid]
    assert found, f"no artist with gid {gid!r}"
    return found[0]


def bars(fig, gid: str) -> list:
    """The bar rectangles drawn with `gid`, left to right."""
    found = [patch for ax in fig.axes for patch in ax.patches if patch.get_gid() == gid]
    assert found, f"no bar with gid {gid!r}"
    return sorted(found, key=lambda patch: patch.get_x())


def note_of(fig) -> str:
    return fig._supxlabel.get_text() if fig._supxlabel is not None else ""


# ---------------------------------------------------------------- answer similarity

def test_similarity_panels_mark_the_report_means_and_count_present_scores(report):
    fig = similarity_distributions(report)
    assert len(fig.axes) == 4
    for ax, name in zip(fig.axes, figures.SIMILARITY_METRICS):
        summary = report["answer_similarity_summary"][name]
        mean_line = by_gid(fig, f"mean:{name}")
        assert mean_line.axes is ax
        assert mean_line.get_xdata()[0] == pytest.approx(summary["mean"])
        assert f"n = {summary['n']}" in ax.get_title() and metric(name).label in ax.get_title()
        heights = sum(p.get_height() for p in ax.patches)
        assert heights == summary["n"] == 5
    assert "1 without a generated answer" in note_of(fig)


def test_f1_vs_cosine_plots_the_reports_pairs_and_labels_the_extremes(report):
    fig = f1_vs_cosine(report, n_label=1)
    points = by_gid(fig, "points").get_offsets()
    expected = [(e["answer_similarity"]["bertscore"]["f1"], e["answer_similarity"]["sentence_cosine"])
                for e in report["examples"] if e["generated_answer"] is not None]
    np.testing.assert_allclose(np.asarray(points), expected)
    labels = {t.get_text() for t in fig.axes[0].texts}
    # lowest F1 and cosine e1, highest both e5, largest |F1 - cosine| e2 (0.4 against 0.9)
    assert labels == {"e1", "e5", "e2"}
    assert "1 without a generated answer" in note_of(fig)


# ---------------------------------------------------------------- the judge

def test_threshold_lines_sit_at_the_reports_thresholds(report):
    fig = groundedness_vs_relevance(report)
    metrics = report["judge_summary"]["metrics"]
    assert set(by_gid(fig, "threshold:groundedness").get_xdata()) == {metrics["groundedness"]["threshold"]}
    assert set(by_gid(fig, "threshold:relevance").get_ydata()) == {metrics["relevance"]["threshold"]}
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert legend == {"groundedness threshold 0.8", "relevance threshold 0.5\n(placeholder, not tuned)"}


def test_a_confident_lie_lands_in_the_confident_lie_region(report):
    fig = groundedness_vs_relevance(report)
    ax = fig.axes[0]
    points = {tuple(p) for p in np.asarray(by_gid(fig, "points").get_offsets())}
    assert points == {(0.0, 1.0), (1.0, 0.1)}, "only examples with both scores are points"
    lie = by_gid(fig, "quadrant:confident lie").get_bbox()
    dodge = by_gid(fig, "quadrant:accurate dodge").get_bbox()
    assert lie.contains(0.0, 1.0) and not dodge.contains(0.0, 1.0)
    assert dodge.contains(1.0, 0.1) and not lie.contains(1.0, 0.1)
    caption = by_gid(fig, "caption:confident lie")
    assert "confident lie" in caption.get_text() and lie.contains(*caption.get_position())
    assert "accurate dodge" in by_gid(fig, "caption:accurate dodge").get_text()
    assert {t.get_text() for t in ax.texts if t.get_gid() is None} == {"e1", "e2"}


def test_examples_with_one_judge_score_are_counted_not_plotted(report):
    note = note_of(groundedness_vs_relevance(report))
    assert "1 example with a groundedness score only" in note
    assert "1 example with a relevance score only" in note


def test_pass_rates_by_hand():
    scores = [0.0, 0.5, 0.5, 1.0, None, float("nan"), pd.NA]
    np.testing.assert_allclose(pass_rates(scores, [0.0, 0.25, 0.5, 0.75, 1.0, 1.01]),
                               [1.0, 0.75, 0.75, 0.25, 0.25, 0.0])
    np.testing.assert_allclose(pass_rates([-0.5, 0.2], [-1.0, -0.5, 0.0, 0.2, 0.3]), [1.0, 1.0, 0.5, 0.5, 0.0])
    assert pass_rates([0.1, 0.9], [[0.0, 0.5], [0.9, 1.0]]).tolist() == [[1.0, 0.5], [0.5, 0.0]]
    assert np.isnan(pass_rates([None, float("nan")], [0.0, 0.5])).all()


def test_pass_rate_curves_follow_the_scores_and_mark_the_report_thresholds(report):
    fig = pass_rate_by_threshold(report)
    for metric, (threshold, _) in THRESHOLDS.items():
        curve = by_gid(fig, f"curve:{metric}")
        scores = [(e["judge"] or {}).get(metric, {}).get("score") for e in report["examples"]]
        np.testing.assert_allclose(curve.get_ydata(), pass_rates(scores, curve.get_xdata()))
        assert set(by_gid(fig, f"threshold:{metric}").get_xdata()) == {threshold}
        marker = by_gid(fig, f"pass:{metric}")
        summary = report["judge_summary"]["metrics"][metric]
        assert marker.get_xdata()[0] == threshold
        assert marker.get_ydata()[0] == pytest.approx(summary["pass_rate"])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[0] == "groundedness (n = 3, 1 unscored): 33% pass at 0.8"
    assert labels[1].endswith("67% pass at 0.5 (placeholder)")
    assert not any(line.get_gid() == "curve:bertscore_f1" for line in fig.axes[0].lines)
    with_similarity = pass_rate_by_threshold(report, similarity=True)
    f1 = by_gid(with_similarity, "curve:bertscore_f1")
    np.testing.assert_allclose(f1.get_ydata(), pass_rates(F1, f1.get_xdata()))


def test_the_pass_rate_grid_reaches_below_zero_only_for_negative_scores(report):
    assert by_gid(pass_rate_by_threshold(report), "curve:relevance").get_xdata()[0] == 0.0
    negative = copy.deepcopy(report)
    negative["examples"][1]["judge"]["relevance"]["score"] = -0.25
    xdata = by_gid(pass_rate_by_threshold(negative), "curve:relevance").get_xdata()
    assert xdata[0] == pytest.approx(-0.3) and xdata[-1] == 1.0


# ---------------------------------------------------------------- retrieval

def test_rank_bars_equal_the_counted_ranks(report):
    fig = retrieval_rank_histogram(report)
    ranks = bars(fig, "bars:rank")
    assert [bar.get_height() for bar in ranks] == [2, 0, 1, 0, 0, 0, 1]  # ranks 1..7
    assert [bar.get_x() + bar.get_width() / 2 for bar in ranks] == [1, 2, 3, 4, 5, 6, 7]
    assert [bar.get_facecolor()[3] for bar in ranks] == [1.0] * 5 + [0.4] * 2, "ranks past k are pale"
    assert [bar.get_height() for bar in bars(fig, "bars:not retrieved")] == [1]
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()][-1] == "not\nretrieved"
    k_line = [line for line in ax.lines if line.get_label() == f"k = {K}"]
    assert k_line and set(k_line[0].get_xdata()) == {K + 0.5}
    assert "1 without retrieval data" in note_of(fig)


def test_the_same_metric_has_the_same_colour_in_every_figure(report):
    grounded = metric("groundedness").colour
    assert to_hex(by_gid(pass_rate_by_threshold(report), "curve:groundedness").get_color()) == grounded
    assert to_hex(by_gid(groundedness_vs_relevance(report), "threshold:groundedness").get_color()) == grounded
    f1 = metric("bertscore_f1").colour
    histogram = similarity_distributions(report).axes[0]
    assert to_hex(histogram.patches[0].get_facecolor(), keep_alpha=False) == f1
    deltas = pd.DataFrame({"id": ["a", "b"], "metric": "bertscore_f1", "baseline": [0.5, 0.5],
                           "candidate": [0.4, 0.6], "delta": [-0.1, 0.1]})
    worse = bars(delta_figure(deltas), "deltas:bertscore_f1")[0]
    assert to_hex(worse.get_facecolor(), keep_alpha=False) == f1
    similarity_curve = by_gid(pass_rate_by_threshold(report, similarity=True), "curve:bertscore_f1")
    assert to_hex(similarity_curve.get_color()) == f1


# ---------------------------------------------------------------- comparing runs

def test_delta_panels_sort_the_changes_and_show_the_worse_ones_in_full_colour():
    deltas = pd.DataFrame({
        "id": ["a", "b", "c", "d", "a", "b", "c"],
        "metric": ["bertscore_f1"] * 4 + ["rank"] * 3,
        "baseline": [0.5, 0.5, 0.5, 0.5, 1, 2, 3], "candidate": [0.7, 0.2, 0.5, None, 2, 1, 3],
        "delta": [0.2, -0.3, 0.0, None, 1, -1, 0],
    })
    fig = delta_figure(deltas)
    f1_bars, rank_bars = bars(fig, "deltas:bertscore_f1"), bars(fig, "deltas:rank")
    assert [bar.get_height() for bar in f1_bars] == pytest.approx([-0.3, 0.0, 0.2])
    assert [bar.get_facecolor()[3] for bar in f1_bars] == [1.0, 0.35, 0.35]
    assert [bar.get_height() for bar in rank_bars] == [1, 0, -1], "a higher rank is the worse change"
    assert [bar.get_facecolor()[3] for bar in rank_bars] == [1.0, 0.35, 0.35]
    f1_title = fig.axes[0].get_title(loc="left")
    assert f1_title.startswith("BERTScore F1: 1 worse, 1 better, 1 unchanged of 3 (1 without a delta)")
    assert "worst: b -0.300" in f1_title
    for ax in fig.axes:
        assert [tuple(line.get_ydata()) for line in ax.lines] == [(0, 0)]


def test_delta_figure_refuses_bad_input_and_draws_nothing_without_deltas():
    with pytest.raises(ValueError, match="missing \\['delta'\\]"):
        delta_figure(pd.DataFrame(columns=["id", "metric", "baseline", "candidate"]))
    with pytest.raises(ValueError, match="'f1'"):
        delta_figure(pd.DataFrame({"id": ["a"], "metric": ["f1"], "baseline": [1.0], "candidate": [1.0],
                                   "delta": [0.0]}))
    assert delta_figure(pd.DataFrame(columns=list(DELTA_COLUMNS))) is None
    assert delta_figure(pd.DataFrame({"id": ["a"], "metric": ["bertscore_f1"], "baseline": [None],
                                      "candidate": [0.5], "delta": [None]})) is None


# ---------------------------------------------------------------- saving

def test_save_png_writes_a_png_once(report, tmp_path):
    fig = retrieval_rank_histogram(report)
    path = save_png(fig, tmp_path, "ranks", dpi=100)
    assert path == tmp_path / "figures" / "ranks.png"
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as small, Image.open(save_png(fig, tmp_path, "ranks-200", dpi=200)) as large:
        assert small.format == "PNG" and small.size[0] > 300
        assert abs(large.size[0] - 2 * small.size[0]) <= 4, "the size follows the dpi"
        assert small.info["dpi"] == pytest.approx((100, 100), abs=0.5)
    with pytest.raises(FileExistsError):
        save_png(similarity_distributions(report), tmp_path, "ranks")
    assert path.read_bytes() == data
    for bad in ("../ranks", "ranks.png", "sub/ranks", ""):
        with pytest.raises(ValueError, match="figure name"):
            save_png(fig, tmp_path, bad)


def test_save_png_replaces_only_when_asked(report, tmp_path):
    """The interactive scratch folder replaces its figures; a run folder never does."""
    path = save_png(retrieval_rank_histogram(report), tmp_path, "ranks", dpi=100)
    first = path.read_bytes()
    save_png(similarity_distributions(report), tmp_path, "ranks", dpi=100, overwrite=True)
    assert path.read_bytes() != first
    assert [p.name for p in (tmp_path / "figures").iterdir()] == ["ranks.png"], "no temporary file is left"


# ---------------------------------------------------------------- tables

def test_worst_examples_are_the_n_lowest_in_order(report):
    frame = worst_examples_frame(report, "bertscore_f1", n=3)
    assert frame["id"].tolist() == ["e1", "e2", "e3"]
    assert frame["bertscore_f1"].tolist() == pytest.approx([0.2, 0.4, 0.6])
    assert list(frame.columns) == ["id", "bertscore_f1", "question", "reference_answer", "generated_answer"]
    assert worst_examples_frame(report, "bertscore_f1", n=10)["id"].tolist() == ["e1", "e2", "e3", "e4", "e5"]
    grounded = worst_examples_frame(report, "groundedness", n=5)
    assert grounded["id"].tolist() == ["e1", "e3", "e2"], "unscored e4 and unjudged e5, e6 are left out"


def test_ties_are_broken_by_id(report):
    tied = copy.deepcopy(report)
    for example in tied["examples"][:3]:
        example["answer_similarity"]["sentence_cosine"] = 0.1
    assert worst_examples_frame(tied, "sentence_cosine", n=3)["id"].tolist() == ["e1", "e2", "e3"]


def test_worst_judged_examples_show_each_statement_with_its_verdict(report):
    frame = worst_examples_frame(report, "groundedness", n=2)
    assert frame.loc[0, "judgment"] == ("✗ statement 1 of the answer — not in the reference\n"
                                        "✗ statement 2 of the answer — not in the reference")
    assert frame.loc[1, "judgment"].splitlines() == ["✓ statement 1 of the answer — the reference says so",
                                                     "✗ statement 2 of the answer — not in the reference"]
    criteria_lines = worst_examples_frame(report, "criteria", n=1).loc[0, "judgment"].splitlines()
    assert criteria_lines == ["✓ Answers the question asked. — as read",
                              "✗ Asks at most one clarifying question. — as read"]
    assert worst_examples_frame(report, "relevance", n=1).loc[0, "judgment"] == "→ What is glass?"


def test_an_unreadable_verdict_is_shown_as_a_question_mark(report):
    odd = copy.deepcopy(report)
    odd["examples"][0]["judge"]["groundedness"]["statements"][0]["verdict"] = 7
    assert worst_examples_frame(odd, "groundedness", n=1).loc[0, "judgment"].startswith("? statement 1")


def test_the_worst_examples_html_is_wrapped_escaped_and_self_contained(report):
    html = worst_examples(report, "groundedness", n=3).to_html()
    assert "statement 1 of the answer" in html and "✗" in html and "✓" in html
    assert "white-space: pre-wrap" in html and "max-width" in html
    assert "background-color" in html, "the score cell is coloured"
    assert "Glass is collected &lt; weekly." in html
    assert "http" not in html.lower() and "@import" not in html and "url(" not in html
    assert "The 3 lowest groundedness scores of 3 scored examples" in html


def test_worst_examples_of_an_unjudged_report_is_an_empty_table(unjudged):
    frame = worst_examples_frame(unjudged, "groundedness")
    assert frame.empty and "judgment" in frame.columns
    html = worst_examples(unjudged, "groundedness").to_html()
    assert "The 0 lowest groundedness scores of 0 scored examples" in html
    with pytest.raises(ValueError, match="not a per-example score"):
        worst_examples_frame(unjudged, "rank")


ONE_MEGABYTE = "a sentence of a very long answer. " * 30_840  # 1,048,560 characters


def with_long_text(report: dict) -> dict:
    """The report with a 1 MB answer, a 1 MB judge justification and a 1 MB unscored raw reply."""
    long = copy.deepcopy(report)
    long["examples"][0]["generated_answer"] = ONE_MEGABYTE
    long["examples"][0]["judge"]["groundedness"]["statements"][0]["justification"] = ONE_MEGABYTE
    long["examples"][3]["judge"]["criteria"]["raw_reply"] = ONE_MEGABYTE
    return long


def test_pages_of_a_one_megabyte_answer_are_small_and_the_report_json_keeps_it_whole(report, tmp_path):
    from evalbook.escaping import SHOWN_CHARACTERS, readable_table
    from evalbook.report.document import write_report

    long = with_long_text(report)
    path = write_report(long, tmp_path / "report.json")
    written = json.loads(path.read_text("utf-8"))
    assert written["examples"][0]["generated_answer"] == ONE_MEGABYTE
    assert written["examples"][3]["judge"]["criteria"]["raw_reply"] == ONE_MEGABYTE
    note = f"… ({len(ONE_MEGABYTE) - SHOWN_CHARACTERS} more characters; full text in the report JSON)"
    pages = {f"worst {name}": worst_examples(long, name, n=5).to_html() for name in worst_example_metrics(long)}
    pages["judged answers"] = readable_table(judged_answers(long), "judged").to_html()
    pages["unscored"] = readable_table(unscored_judgments(long), "unscored").to_html()
    for what, page in pages.items():
        assert len(page.encode("utf-8")) < 200_000, what
    for what in ("worst bertscore_f1", "worst groundedness", "judged answers", "unscored"):
        assert note in pages[what] or "more characters; full text in the report JSON" in pages[what], what
    assert note in pages["worst bertscore_f1"] and note in pages["unscored"]


HOSTILE_IDS = [hostile.MATHTEXT, hostile.SCRIPT + hostile.CONTROLS, hostile.MARKDOWN_LINK, hostile.IMG,
               hostile.SVG, hostile.DETAILS]


def with_hostile_text(report: dict) -> dict:
    """The report with hostile ids, and hostile questions, answers and judge statements."""
    hostile_report = copy.deepcopy(report)
    for example, hostile_id in zip(hostile_report["examples"], HOSTILE_IDS):
        example["id"] = hostile_id
        example["question"] = example["generated_answer"] = hostile_id + " text"
        for statement in ((example.get("judge") or {}).get("groundedness") or {}).get("statements", []):
            statement["statement"] = statement["justification"] = hostile_id + " statement"
    return hostile_report


def drawn_text(fig) -> list[str]:
    fig.savefig(io.BytesIO(), format="png")  # mathtext is parsed, and fails, only when drawn
    return [t.get_text() for ax in fig.axes for t in [*ax.texts, ax.title, ax._left_title]]


def test_hostile_ids_label_the_figures_as_written(report):
    hostile_report = with_hostile_text(report)
    labels = " ".join(drawn_text(f1_vs_cosine(hostile_report))
                      + drawn_text(groundedness_vs_relevance(hostile_report)))
    assert hostile.MATHTEXT in labels and hostile.VISIBLE_CONTROLS in labels
    assert hostile.CONTROLS[0] not in labels
    deltas = pd.DataFrame({"id": HOSTILE_IDS[:3], "metric": ["bertscore_f1"] * 3, "baseline": [0.5] * 3,
                           "candidate": [0.1, 0.2, 0.3], "delta": [-0.4, -0.3, -0.2]})
    title = " ".join(drawn_text(delta_figure(deltas)))
    assert f"worst: {hostile.MATHTEXT} -0.400, {hostile.SCRIPT}{hostile.VISIBLE_CONTROLS} -0.300" in title


def test_the_worst_examples_escape_hostile_text(report):
    hostile_report = with_hostile_text(report)
    for metric in ("bertscore_f1", "groundedness"):
        page = worst_examples(hostile_report, metric, n=6).to_html()
        assert hostile.payload_elements(page) == []
        assert hostile.CONTROLS[0] not in page
        _, text = hostile.read_markup(page)
        assert f"{hostile.SCRIPT}{hostile.VISIBLE_CONTROLS} text" in text
        assert f"{hostile.MARKDOWN_LINK} text" in text
    assert f"{hostile.MARKDOWN_LINK} statement" in text
    _, text = hostile.read_markup(worst_examples(hostile_report, "bertscore_f1", n=6).to_html())
    assert f"{hostile.IMG} text" in text and f"{hostile.SVG} text" in text


def test_unscored_judgments_list_each_with_its_reason(report):
    frame = unscored_judgments(report)
    assert list(frame.columns) == ["id", "metric", "reason", "raw_reply"]
    assert frame[["id", "metric", "reason"]].values.tolist() == [
        ["e4", "criteria", "the reply does not list every criterion once, in order"],
        ["e4", "groundedness", "the judge found no statement in the answer"],
        ["e3", "relevance", "judge call failed: ReadTimeout"],
    ]
    assert frame["raw_reply"].tolist() == ['{"criteria": []}', "", ""]


def test_the_report_shows_each_judged_answer_with_its_reference_and_every_verdict(report, unjudged):
    table = judged_answers(report)
    assert table["id"].tolist() == ["e1", "e2", "e3", "e4"]
    e1 = table.set_index("id").loc["e1"]
    assert e1["ground truth"] == "reference e1" and e1["answer"] == "Bins go out on Mondays."
    assert e1["groundedness"].splitlines() == ["0.000", "✗ statement 1 of the answer — not in the reference",
                                               "✗ statement 2 of the answer — not in the reference"]
    assert table.set_index("id").loc["e3", "relevance"] == "unscored\nunscored: judge call failed: ReadTimeout"
    assert "None" not in table.to_string()
    assert judged_answers(unjudged).empty


def test_an_unscored_judgment_keeps_the_whole_raw_reply(report):
    long_reply = "x " * 300
    report["examples"][3]["judge"]["criteria"]["raw_reply"] = long_reply
    frame = unscored_judgments(report)
    assert frame.set_index("metric").loc["criteria", "raw_reply"] == long_reply


def test_no_unscored_judgment_is_an_empty_frame_with_the_columns(unjudged):
    frame = unscored_judgments(unjudged)
    assert frame.empty and list(frame.columns) == ["id", "metric", "reason", "raw_reply"]


# ---------------------------------------------------------------- no data

def test_judge_figures_are_none_when_the_judge_did_not_run(unjudged):
    assert groundedness_vs_relevance(unjudged) is None
    assert pass_rate_by_threshold(unjudged) is None
    for builder in (groundedness_vs_relevance, pass_rate_by_threshold):
        assert no_data_reason(unjudged, builder) == "the judge did not run: no judge stage in this report"
    assert by_gid(pass_rate_by_threshold(unjudged, similarity=True), "curve:sentence_cosine")
    assert no_data_reason(unjudged, "pass_rate_by_threshold", similarity=True) is None


def test_a_figure_not_drawn_gives_the_banners_plain_reason_without_the_exception(unjudged):
    from evalbook.judge.display import plain_reason

    refused = copy.deepcopy(unjudged)
    refused["judge_summary"]["reason"] = (
        "no judge server reachable at 127.0.0.1:8080; to judge with the local model, run: make run "
        "PARAMS=params/local-judge.yaml (ConnectError: [Errno 111] Connection refused)")
    for builder in (groundedness_vs_relevance, pass_rate_by_threshold):
        reason = no_data_reason(refused, builder)
        assert reason == f"the judge did not run: {plain_reason(refused['judge_summary']['reason'])}"
        assert reason.endswith("run: make run PARAMS=params/local-judge.yaml")
        assert "ConnectError" not in reason and "Errno" not in reason and "refused" not in reason


def test_the_quadrant_needs_both_metrics(report):
    no_relevance = copy.deepcopy(report)
    del no_relevance["judge_summary"]["metrics"]["relevance"]
    assert groundedness_vs_relevance(no_relevance) is None
    assert "did not score relevance" in no_data_reason(no_relevance, groundedness_vs_relevance)
    unpaired = copy.deepcopy(report)
    for example in unpaired["examples"][:2]:
        example["judge"]["relevance"] = entry(None, "judge call failed: boom")
    assert groundedness_vs_relevance(unpaired) is None
    assert "both a groundedness and a relevance score" in no_data_reason(unpaired, groundedness_vs_relevance)


def test_retrieval_histogram_is_none_without_retrieval_data(report):
    bare = copy.deepcopy(report)
    for example in bare["examples"]:
        example["retrieval"] = None
    assert retrieval_rank_histogram(bare) is None
    reason = no_data_reason(bare, retrieval_rank_histogram)
    assert reason == "no example has retrieval data (retrieved ids or contexts)"
    assert no_data_reason(report, retrieval_rank_histogram) is None


def test_similarity_figures_are_none_without_scores(report):
    bare = copy.deepcopy(report)
    for example in bare["examples"]:
        example["answer_similarity"] = {"bertscore": {"precision": None, "recall": None, "f1": None},
                                        "sentence_cosine": None}
    assert similarity_distributions(bare) is None and f1_vs_cosine(bare) is None
    assert no_data_reason(bare, similarity_distributions) == "no example has an answer-similarity score"
    assert "both a BERTScore F1 and a sentence cosine" in no_data_reason(bare, "f1_vs_cosine")
    with pytest.raises(ValueError, match="known"):
        no_data_reason(bare, delta_figure)


def test_figures_leave_pyplot_and_its_settings_as_they_were(report):
    before_figures, before_style = plt.get_fignums(), dict(matplotlib.rcParams)
    built = [similarity_distributions(report), f1_vs_cosine(report), groundedness_vs_relevance(report),
             pass_rate_by_threshold(report), retrieval_rank_histogram(report)]
    assert all(fig is not None for fig in built)
    assert plt.get_fignums() == before_figures
    assert dict(matplotlib.rcParams) == before_style
    assert to_rgba(built[0].axes[0].get_facecolor()) == to_rgba("white")


def test_worst_examples_are_listed_for_the_headline_similarity_and_each_scored_judge_metric():
    report = {"judge_summary": {"metrics": {"criteria": {"n_scored": 1}, "relevance": {"n_scored": 0},
                                            "groundedness": {"n_scored": 3}}}}
    assert worst_example_metrics(report) == ["bertscore_f1", "sentence_cosine", "groundedness", "criteria"]
    assert worst_example_metrics({"judge_summary": {"metrics": {}}}) == ["bertscore_f1", "sentence_cosine"]


def test_one_verdict_renderer_for_every_judge_record():
    record = {"statements": [{"statement": "s1", "verdict": 1, "justification": "why"},
                             {"statement": "s2", "verdict": "?!"}],
              "criteria": [{"criterion": "polite", "met": False, "rationale": "curt"}],
              "generated_questions": ["what?"], "unscored_reason": None}
    assert verdict_text(record).splitlines() == ["✓ s1 — why", "? s2", "✗ polite — curt", "→ what?"]
    assert verdict_text({"unscored_reason": "reply was not JSON"}) == "unscored: reply was not JSON"
    assert verdict_text(None) == ""

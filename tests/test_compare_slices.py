"""Which slices a comparison moved (issue 26, item 4): each slice level of the candidate gets the
paired deltas of its examples, tested against the rest's with the report's slice statistics."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from markdown_it import MarkdownIt

import hostile
from evalbook.compare import ComparisonError
from evalbook.compare.document import validate_comparison
from evalbook.compare.slices import moved_most
from evalbook.compare.tables import slices_html, slices_moved, slices_table
from evalbook.publish.summary import comparison_summary_md
from evalbook.templating import render
from test_compare import EMBEDDING, compare, ids_of, make_report

LEVELS = ("alpha", "bravo", "charlie")


def report_level(slice_name: str, level: str, metric: str) -> dict:
    """A level of the report's own slices section (its numbers do not matter to a comparison)."""
    return {"slice": slice_name, "kind": "metadata", "level": level, "metric": metric, "n": 1, "mean": 0.5,
            "low": 0.5, "high": 0.5, "rest_n": 0, "rest_mean": None, "difference": None, "difference_low": None,
            "difference_high": None, "p_value": None, "q_value": None, "verdict": "too few to tell",
            "set_aside": [], "lowest": []}


def sliced(report: dict, slices: dict[str, list[str]], kinds: dict[str, str] | None = None,
           min_n: int = 10, untested: tuple[tuple[str, str], ...] = ()) -> dict:
    """`report` with each example's `slices` and the report's `slices` section (report schema 1.9):
    `slices` maps a slice's name to each example's level. The report tested every slice on every
    embedding metric and on top-k match, but the (slice, metric) pairs `untested`."""
    report = copy.deepcopy(report)
    for position, example in enumerate(report["examples"]):
        example["slices"] = {name: levels[position] for name, levels in slices.items()}
    metrics = [*EMBEDDING, "top_k_match"]
    report["slices"] = {
        "method": "each level against the rest", "metrics": metrics, "notes": [], "topics": None,
        "settings": {"by": "auto", "min_n": min_n, "q_threshold": 0.05, "permutations": 1000,
                     "refined_permutations": 10000, "resamples": 2000, "confidence": 0.95, "seed": 0},
        "columns": [{"name": name, "kind": (kinds or {}).get(name, "metadata"), "levels": sorted(set(levels))}
                    for name, levels in slices.items()],
        "n_tests": 0, "n_flagged": 0,
        "levels": [report_level(name, level, metric) for metric in metrics for name, levels in slices.items()
                   if (name, metric) not in untested for level in sorted(set(levels))]}
    return report


def planted(shift: dict[str, float], n_per_level: int = 20, noise: float = 0.01, seed: int = 3,
            extra: dict[str, list[str]] | None = None, **options) -> dict:
    """The comparison of a baseline with a candidate whose scores moved by `shift[level]` (plus a
    little noise) in each level of the slice `source`."""
    ids = ids_of(n_per_level * len(LEVELS))
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.3, 0.8, len(ids))
    sources = [LEVELS[i // n_per_level] for i in range(len(ids))]
    moved = base + np.asarray([shift[level] for level in sources]) + rng.normal(0, noise, len(ids))
    baseline = make_report(dict(zip(ids, base.tolist())))
    candidate = make_report(dict(zip(ids, moved.tolist())), tag="cand")
    return compare(baseline, sliced(candidate, {"source": sources, **(extra or {})}, **options))


def flagged(doc: dict) -> set[tuple[str, str, str, str]]:
    return {(level["slice"], level["level"], level["metric"], level["verdict"])
            for level in doc["slices"]["levels"] if level["verdict"] in ("worse", "better")}


def markdown_of(doc: dict) -> str:
    return render("summary_slices.md", slices=slices_moved(doc))


def test_a_regression_planted_in_one_level_is_flagged_and_named_and_no_other():
    rng = np.random.default_rng(11)
    noise_column = rng.choice(["north", "south"], len(LEVELS) * 20).tolist()
    doc = planted({"alpha": 0.0, "bravo": -0.2, "charlie": 0.0}, extra={"region": noise_column})
    section = doc["slices"]
    assert section["compared"] and section["reason"] is None
    assert flagged(doc) == {("source", "bravo", metric, "worse") for metric in EMBEDDING}
    assert section["n_flagged"] == len(EMBEDDING)
    # every level of both slices is tested on each embedding metric
    assert section["n_tests"] == len(EMBEDDING) * (len(LEVELS) + 2)
    bravo = next(level for level in section["levels"]
                 if level["metric"] == "bertscore_f1" and level["level"] == "bravo")
    assert bravo["n"] == 20 and bravo["mean"] == pytest.approx(-0.2, abs=0.01)
    assert bravo["low"] < bravo["mean"] < bravo["high"] < -0.15
    assert bravo["rest_mean"] == pytest.approx(0.0, abs=0.01) and bravo["q_value"] < 0.05
    assert [(m["metric"], m["level"]) for m in section["moved_most"]] == [(m, "bravo") for m in EMBEDDING]

    html = slices_html(doc)
    assert "The regression is concentrated in <em>source = bravo</em> (Δ BERTScore F1 " in html
    assert f"{bravo['mean']:+.3f} [{bravo['low']:.3f}, {bravo['high']:.3f}] against {bravo['rest_mean']:+.3f} elsewhere" in html
    assert html.count("<li>") == 1  # one line for the level, naming the other metrics that flag it
    assert "; also on sentence cosine, BERTScore precision, BERTScore recall.</li>" in html
    assert "alpha" not in html and "charlie" not in html and "region" not in html
    text = markdown_of(doc)
    assert "The regression is concentrated in **source = bravo** (Δ BERTScore F1" in text
    assert "alpha" not in text and "region" not in text


def test_a_uniform_shift_flags_nothing_but_names_the_level_that_moved_most():
    doc = planted({level: -0.1 for level in LEVELS}, noise=0.02)
    section = doc["slices"]
    assert flagged(doc) == set() and section["n_flagged"] == 0
    assert section["n_tests"] == len(EMBEDDING) * len(LEVELS)
    for metric in EMBEDDING:
        levels = [level for level in section["levels"] if level["metric"] == metric]
        furthest = max(levels, key=lambda level: abs(level["mean"]))
        [most] = [m for m in section["moved_most"] if m["metric"] == metric]
        assert most == furthest and most["mean"] == pytest.approx(-0.1, abs=0.02)
    most = next(m for m in section["moved_most"] if m["metric"] == "bertscore_f1")
    html = slices_html(doc)
    assert f"no slice differs from the rest beyond chance ({section['n_tests']} tests" in html
    assert (f"BERTScore F1: <em>source = {most['level']}</em>, Δ {most['mean']:+.3f} "
            f"[{most['low']:.3f}, {most['high']:.3f}] (95% interval)") in html
    assert "regression is concentrated" not in html
    text = markdown_of(doc)
    assert f"No slice differs from the rest beyond chance ({section['n_tests']} tests" in text
    assert f"BERTScore F1: **source = {most['level']}**, Δ {most['mean']:+.3f}" in text


def test_the_candidates_min_n_decides_which_levels_are_tested():
    doc = planted({"alpha": 0.0, "bravo": -0.2, "charlie": 0.0}, min_n=25)
    section = doc["slices"]
    assert section["settings"]["min_n"] == 25
    assert section["n_tests"] == 0 and flagged(doc) == set() and section["moved_most"] == []
    assert {level["verdict"] for level in section["levels"]} == {"too few to tell"}
    assert "no slice level has 25 or more paired examples" in slices_html(doc)


def test_moved_most_leaves_out_small_levels_a_level_holding_every_pair_and_no_change():
    level = {"metric": "bertscore_f1", "n": 30, "mean": -0.05, "difference": -0.01}
    small = {**level, "n": 5, "mean": -0.9}
    whole = {**level, "n": 60, "mean": -0.5, "difference": None}
    larger = {**level, "mean": 0.07}
    assert moved_most([small, whole, level, larger], min_n=10, tolerance=1e-6) == [larger]
    assert moved_most([small], min_n=10, tolerance=1e-6) == []
    assert moved_most([{**level, "mean": 1e-7}], min_n=10, tolerance=1e-6) == []  # no change: nothing moved


def test_a_metric_on_which_the_runs_agree_has_no_level_that_moved_most():
    doc = planted({level: 0.0 for level in LEVELS}, noise=0.0)
    assert doc["slices"]["compared"] and doc["slices"]["moved_most"] == []
    html = slices_html(doc)
    assert "no slice differs from the rest beyond chance (12 tests" in html
    assert "No level's mean delta moved beyond the tolerance.</p></div>" in html
    assert "No level's mean delta moved beyond the tolerance." in markdown_of(doc)


def before_slices(report: dict) -> dict:
    """`report` as a report of schema 1.8 wrote it, without slices."""
    older = {key: value for key, value in report.items() if key != "slices"}
    older["examples"] = [{key: value for key, value in example.items() if key != "slices"}
                         for example in report["examples"]]
    return {**older, "schema_version": "1.8"}


def test_a_candidate_without_slices_gets_a_note_saying_why():
    ids = ids_of(12)
    baseline, candidate = make_report(dict.fromkeys(ids, 0.5)), make_report(dict.fromkeys(ids, 0.4), tag="cand")
    doc = compare(baseline, before_slices(candidate))
    section = doc["slices"]
    assert not section["compared"] and section["levels"] == [] and section["moved_most"] == []
    assert section["reason"] == ("the candidate report (schema 1.8) has no slices: reports carry them from "
                                 "schema 1.9 on, so run the candidate again to see which slices moved")
    html = slices_html(doc)
    assert f"<strong>By slice:</strong> not compared: {section['reason']}." in html
    assert "Not compared by slice: the candidate report (schema 1.8) has no slices" in markdown_of(doc)
    unsliced = compare(baseline, candidate)  # a report of 1.9 built without slicing: slices null
    assert unsliced["slices"]["reason"] == "the candidate run was reported without slicing"
    assert compare(before_slices(baseline), sliced(candidate, {"source": ["a", "b"] * 6}))["slices"]["compared"]
    assert slices_table(doc).empty
    older = {key: value for key, value in doc.items() if key != "slices"}
    older["schema_version"] = "1.3"
    assert slices_moved(older)["reason"] == "this comparison (schema 1.3) was made before comparisons had slices"


def test_hostile_slice_names_and_levels_are_escaped_in_the_fragment_and_the_summary():
    name = hostile.SCRIPT + hostile.MARKDOWN_EMPHASIS
    bad_level, calm_level = hostile.IMG + hostile.CONTROLS, hostile.MARKDOWN_LINK
    ids = ids_of(60)
    rng = np.random.default_rng(5)
    base = rng.uniform(0.3, 0.8, 60)
    levels = [bad_level] * 20 + [calm_level] * 20 + ["plain"] * 20
    moved = base + np.r_[np.full(20, -0.3), np.zeros(40)] + rng.normal(0, 0.01, 60)
    doc = compare(make_report(dict(zip(ids, base.tolist()))),
                  sliced(make_report(dict(zip(ids, moved.tolist())), tag="cand"), {name: levels}))
    assert {(s, level) for s, level, _, _ in flagged(doc)} == {(name, bad_level)}

    html = slices_html(doc)
    assert hostile.payload_elements(html) == []
    _, text = hostile.read_markup(html)
    assert f"The regression is concentrated in {name} = {hostile.IMG}{hostile.VISIBLE_CONTROLS} (Δ" in text
    assert hostile.CONTROLS not in text

    source = markdown_of(doc)
    rendered = MarkdownIt("commonmark").enable("table").render(source)
    assert hostile.payload_elements(rendered) == []
    _, shown = hostile.read_markup(rendered)
    assert f"{name} = {hostile.IMG}{hostile.VISIBLE_CONTROLS}" in shown
    assert hostile.MARKDOWN_EMPHASIS in shown  # written as it is, not made bold


def test_the_slices_section_validates_and_a_broken_one_is_refused():
    doc = planted({"alpha": 0.0, "bravo": -0.2, "charlie": 0.0})
    validate_comparison(doc)
    assert doc["schema_version"] == "1.6"
    assert doc["slices"]["columns"] == [{"name": "source", "kind": "metadata", "levels": list(LEVELS)}]
    for breakage, expected in (
            (lambda d: d["slices"]["levels"][0].update(verdict="maybe"), "slices/levels/0/verdict"),
            (lambda d: d["slices"].update(compared=False), "slices"),
            (lambda d: d.pop("slices"), "'slices' is a required property"),
            (lambda d: d["slices"]["moved_most"][0].update(extra=1), "Additional properties")):
        broken = copy.deepcopy(doc)
        breakage(broken)
        with pytest.raises(ComparisonError, match=expected):
            validate_comparison(broken)


def test_the_notebook_table_lists_every_level_with_its_verdict():
    doc = planted({"alpha": 0.0, "bravo": -0.2, "charlie": 0.0})
    table = slices_table(doc)
    assert len(table) == len(doc["slices"]["levels"]) == len(EMBEDDING) * len(LEVELS)
    worse = table[table["verdict"] == "worse"]
    assert set(worse["level"]) == {"bravo"} and set(worse["metric"]) == set(EMBEDDING)
    assert list(table.columns)[:5] == ["metric", "slice", "level", "n", "mean delta"]


def test_the_comparisons_summary_names_the_slice_after_the_deltas():
    ids = ids_of(60)
    rng = np.random.default_rng(7)
    base = rng.uniform(0.3, 0.8, 60)
    sources = [LEVELS[i // 20] for i in range(60)]
    moved = base + np.where(np.asarray(sources) == "charlie", -0.25, 0.0) + rng.normal(0, 0.01, 60)
    baseline = make_report(dict(zip(ids, base.tolist())))
    candidate = sliced(make_report(dict(zip(ids, moved.tolist())), tag="cand"), {"source": sources})
    summary = comparison_summary_md(compare(baseline, candidate), baseline, candidate, [])
    assert summary.index("### Deltas") < summary.index("### By slice") < summary.index("### Both runs")
    assert "- The regression is concentrated in **source = charlie** (Δ BERTScore F1 -0.2" in summary


def test_a_slice_the_candidate_did_not_test_on_a_metric_is_not_tested_on_its_deltas():
    ids = ids_of(40)
    rng = np.random.default_rng(9)
    hits = rng.random(40) < 0.5
    baseline = make_report(dict.fromkeys(ids, 0.5), retrieval={i: True for i in ids})
    candidate = make_report(dict(zip(ids, rng.uniform(0.4, 0.6, 40).tolist())), tag="cand",
                            retrieval=dict(zip(ids, hits.tolist())))
    retrieval = ["hit" if hit else "miss" for hit in hits]
    doc = compare(baseline, sliced(candidate, {"retrieval at k = 5": retrieval, "source": ["a", "b"] * 20},
                                   untested=(("retrieval at k = 5", "top_k_match"),)))
    tested = {(level["slice"], level["metric"]) for level in doc["slices"]["levels"]}
    assert ("retrieval at k = 5", "top_k_match") not in tested
    assert {("retrieval at k = 5", "bertscore_f1"), ("source", "top_k_match")} <= tested

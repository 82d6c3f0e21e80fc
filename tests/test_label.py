"""07_label's logic, driven through ipywidgets' Python API: the sample, the labels file each click
writes, resuming, back, a second rater, and what 06_calibrate reads of it
(lib/evalbook/calibrate/labelling.py, labeller.py)."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from evalbook.calibrate.labeller import LabellingUI
from evalbook.calibrate.labelling import (Labelling, LabellingError, LabelsFile, Session, stratified_sample,
                                          stratify_metric)
from evalbook.calibrate.labels import LabelError, match_labels, read_labels
from evalbook.report.reader import RunReport

HOSTILE = '<script>alert("q")</script><img src=x onerror=alert(1)>'


def make_report(n: int = 20, judged: bool = False, hostile: bool = False) -> RunReport:
    f1 = np.linspace(0.3, 0.9, n)
    examples = []
    for i, value in enumerate(f1):
        example = {"id": f"q{i:02d}", "question": f"question {i}" + (HOSTILE if hostile else ""),
                   "reference_answer": f"reference {i}", "generated_answer": f"answer {i}" + (HOSTILE if hostile else ""),
                   "answer_similarity": {"bertscore": {"f1": float(value), "precision": float(value),
                                                       "recall": float(value)}, "sentence_cosine": float(value)},
                   "retrieval": None, "judge": None}
        if judged:
            example["judge"] = {"status": "judged", "label": "judge-A",
                                "groundedness": {"score": float(1 - value), "passed": bool(value < 0.5),
                                                 "unscored_reason": None, "raw_reply": f"verdict {i}" + HOSTILE}}
        examples.append(example)
    judge = {"status": "ran", "label": "judge-A", "metrics": {"groundedness": {"mean": 0.4}}} if judged else {}
    return RunReport({"run_id": "run-1", "examples": examples, "judge_summary": judge}, "/tmp/run-1.json")


def labelling_of(report: RunReport, path, rater: str = "ana", kind: str = "scale", n: int = 5, seed: int = 0,
                 blind: bool = True) -> Labelling:
    name, why = stratify_metric(report, n)
    sample = stratified_sample([(e["id"], v) for e, v in zip(report.examples, report.values(name))], n, seed, name, why)
    labels = LabelsFile(path, rater)
    return Labelling(report=report, params_path="unused.yaml", sample=sample, labels=labels,
                     session=Session.start(sample, labels, kind), blind=blind, contexts={})


def rows(path) -> list[dict]:
    return pd.read_csv(path, dtype=str, keep_default_na=False)[["id", "label", "rater", "note"]].to_dict("records")


# ---------------------------------------------------------------- the sample

def test_the_stratified_sample_covers_the_range_and_is_deterministic_for_a_seed():
    values = [(f"q{i:03d}", float(v)) for i, v in enumerate(np.random.default_rng(3).uniform(0, 1, 200))]
    sample = stratified_sample(values, 10, seed=7, metric="bertscore_f1")
    assert sample == stratified_sample(values, 10, seed=7, metric="bertscore_f1")
    assert stratified_sample(values, 10, seed=8, metric="bertscore_f1").ids != sample.ids
    chosen = sorted(dict(values)[i] for i in sample.ids)
    ranks = sorted(sorted(v for _, v in values).index(v) for v in chosen)
    # one from each band of 20 ranks: the lowest tenth, the highest tenth and all between
    assert [rank // 20 for rank in ranks] == list(range(10))
    # shown in a random order, not sorted by score
    assert [dict(values)[i] for i in sample.ids] != chosen
    assert "cut into 10 bands" in sample.describe() and "seed 7" in sample.describe()


def test_examples_without_a_value_are_left_out_and_counted_and_a_small_run_is_taken_whole():
    values = [("a", 0.2), ("b", None), ("c", 0.9), ("d", float("nan"))]
    sample = stratified_sample(values, 60, seed=0, metric="bertscore_f1")
    assert sorted(sample.ids) == ["a", "c"] and sample.n_without_value == 2
    assert "all 2 of the run's 4 examples" in sample.describe() and "2 example(s) without" in sample.describe()
    with pytest.raises(LabellingError, match="n must be"):
        stratified_sample(values, 0, seed=0, metric="bertscore_f1")


def test_the_sample_is_stratified_on_the_judge_score_where_it_ran():
    assert stratify_metric(make_report(judged=True), 5)[0] == "groundedness"
    assert stratify_metric(make_report(), 5) == ("bertscore_f1", "the judge did not run on this run")


# ---------------------------------------------------------------- the labels file

def test_the_labels_file_is_exactly_what_was_clicked_and_typed(tmp_path):
    path = tmp_path / "labels.csv"
    ui = LabellingUI(labelling_of(make_report(), path))
    first = ui.session.current
    ui.label_buttons[3].click()  # 4, and on to the next answer
    assert rows(path) == [{"id": first, "label": "4", "rater": "ana", "note": ""}]
    second = ui.session.current
    assert second != first and f"saved 4 for {first}" in ui.status.value
    ui.keys.value = "b"
    ui.keys.value = "2"  # typed, back on the first: replaces the 4, and on again
    assert ui.keys.value == "" and ui.session.current == second
    ui.note.value = 'too long, "but" right,\nsays the rater'
    ui.keys.value = "5"
    assert rows(path) == [{"id": first, "label": "2", "rater": "ana", "note": ""},
                          {"id": second, "label": "5", "rater": "ana", "note": 'too long, "but" right,\nsays the rater'}]
    assert ui.progress.value == "2 of 5 labelled, 0 skipped"
    # 06_calibrate reads the file as it is (labelled_at is kept out and named)
    labels = read_labels(str(path), "ordinal")
    assert list(labels.table["label"]) == [2.0, 5.0] and labels.raters == ("ana",)
    assert labels.ignored_columns == ("labelled_at",)
    assert match_labels(labels, [e["id"] for e in ui.labelling.report.examples], "run-1").n_matched == 2


def test_opening_again_resumes_where_the_rater_stopped_and_never_shows_a_labelled_example(tmp_path):
    path = tmp_path / "labels.csv"
    ui = LabellingUI(labelling_of(make_report(), path))
    order = list(ui.session.sample.ids)
    for key in "3s4":  # the second is skipped
        ui.keys.value = key
    assert ui.progress.value == "2 of 5 labelled, 1 skipped"
    again = LabellingUI(labelling_of(make_report(), path))
    assert again.session.current == order[3]  # after the last one labelled
    assert again.progress.value == "2 of 5 labelled, 0 skipped"
    shown = []
    for _ in range(3):
        shown.append(again.session.current)
        again.keys.value = "1"
    assert shown == [order[3], order[4], order[1]]  # the skipped one comes round at the end
    assert again.session.current is None and "All 5 examples of the sample are labelled" in again.card.value
    assert all(button.disabled for button in again.label_buttons)
    assert sorted(row["id"] for row in rows(path)) == sorted(order)


def test_a_label_changed_with_back_replaces_the_earlier_row(tmp_path):
    path = tmp_path / "labels.csv"
    ui = LabellingUI(labelling_of(make_report(), path))
    first = ui.session.current
    ui.keys.value = "4"
    second = ui.session.current
    ui.keys.value = "3"
    ui.back_button.click()
    ui.back_button.click()
    assert ui.session.current == first and ui.label_buttons[3].button_style == "success"
    ui.note.value = "on second thought"
    ui.label_buttons[4].click()
    assert rows(path) == [{"id": first, "label": "5", "rater": "ana", "note": "on second thought"},
                          {"id": second, "label": "3", "rater": "ana", "note": ""}]
    # a note changed after the label is saved when the rater moves on
    ui.back_button.click()
    assert ui.session.current == second
    ui.note.value = "changed my mind about the note"
    ui.next_button.click()
    assert rows(path)[1]["note"] == "changed my mind about the note" and len(rows(path)) == 2


def test_a_second_rater_gets_their_own_rows_and_calibrate_reads_both(tmp_path):
    path = tmp_path / "labels.jsonl"
    ana = LabellingUI(labelling_of(make_report(), path, rater="ana"))
    for key in "42":
        ana.keys.value = key
    ben = LabellingUI(labelling_of(make_report(), path, rater="ben"))
    assert ben.session.current == ana.session.sample.ids[0]  # ana's labels are not ben's
    for key in "51":
        ben.keys.value = key
    ana.back_button.click()
    ana.keys.value = "3"  # ana changes hers: ben's row stays
    written = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["rater"], r["label"]) for r in written] == [("ana", "4"), ("ana", "3"), ("ben", "5"), ("ben", "1")]
    labels = read_labels(str(path), "ordinal")
    assert labels.raters == ("ana", "ben")
    assert list(labels.per_example()["n_raters"]) == [2, 2]


def test_binary_labels_are_pass_and_fail_by_button_and_key(tmp_path):
    path = tmp_path / "labels.csv"
    ui = LabellingUI(labelling_of(make_report(), path, kind="binary"))
    assert [b.description for b in ui.label_buttons] == ["pass", "fail"]
    ui.keys.value = "f"
    ui.label_buttons[0].click()
    assert [r["label"] for r in rows(path)] == ["fail", "pass"]
    assert read_labels(str(path), "binary").kind == "binary"


def test_calibrate_reads_a_07_file_whose_labels_use_only_part_of_its_scale(tmp_path):
    """A rater who gave mostly 2s and 3s and one 5 labelled on 1-5, as the file says: calibrate
    reads the labels as they are, without calling the 5 a slip, and still refuses an 8 written in."""
    path = tmp_path / "labels.csv"
    ui = LabellingUI(labelling_of(make_report(), path, n=12))
    for key in "232323232325":
        ui.keys.value = key
    assert set(pd.read_csv(path, dtype=str)["scale"]) == {"1-5"}
    labels = read_labels(str(path))
    assert sorted(labels.table["label"]) == [2.0] * 6 + [3.0] * 5 + [5.0] and labels.kind == "ordinal"
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    table.loc[3, "label"] = "8"
    table.to_csv(path, index=False)
    with pytest.raises(LabelError, match=r"row 4: 1 label lies outside 1-5, the scale the file's scale column declares"):
        read_labels(str(path))


@pytest.mark.parametrize(("scales", "said"), [
    (["1-5", "1-5", "one to five"], "row 3: a scale is written low-high (1-5) or pass/fail; found 'one to five'"),
    (["1-5", "", "1-7"], "row 3: every row's scale must be the same; the first says 1-5, these say '1-7'"),
], ids=["unreadable", "two scales"])
def test_a_scale_column_that_names_no_single_scale_is_refused_by_row(tmp_path, scales, said):
    path = tmp_path / "labels.csv"
    pd.DataFrame({"id": ["q00", "q01", "q02"], "label": ["1", "2", "3"], "scale": scales}).to_csv(path, index=False)
    with pytest.raises(LabelError, match=re.escape(f"column 'scale'; {said}")):
        read_labels(str(path))


def test_a_labels_file_that_is_not_one_is_refused_by_name(tmp_path):
    other = tmp_path / "other.csv"
    other.write_text("name,score\na,1\n")
    with pytest.raises(LabellingError, match=r"other\.csv: has no column id, label"):
        LabelsFile(other, "ana").read()
    with pytest.raises(LabellingError, match="labels_path"):
        LabelsFile(tmp_path / "labels.xlsx", "ana")
    with pytest.raises(LabellingError, match="rater"):
        LabelsFile(tmp_path / "labels.csv", " ")


# ---------------------------------------------------------------- what is shown

def test_hostile_text_is_shown_as_text_and_the_scores_only_when_not_blind(tmp_path):
    ui = LabellingUI(labelling_of(make_report(judged=True, hostile=True), tmp_path / "labels.csv"))
    card = ui.card.value
    assert "<script>" not in card and "<img" not in card
    assert "&lt;script&gt;alert(&quot;q&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in card
    assert "What the judge said" in card and "verdict" in card
    assert "Scores hidden (blind)" in card and "BERTScore F1" not in card
    seen = LabellingUI(labelling_of(make_report(judged=True), tmp_path / "labels.csv", blind=False)).card.value
    assert "BERTScore F1" in seen and "Scores hidden" not in seen


def test_a_label_moves_on_to_the_next_answer_and_the_last_one_ends_the_sample(tmp_path):
    ui = LabellingUI(labelling_of(make_report(), tmp_path / "labels.csv"))
    seen = []
    while ui.session.current is not None:
        seen.append(ui.session.current)
        ui.label_buttons[2].click()
    assert seen == list(ui.session.sample.ids) and "All 5 examples of the sample are labelled" in ui.card.value


def test_the_run_labelled_is_named_and_another_can_be_chosen(tmp_path):
    opened = []

    def open_run(run_id):
        opened.append(run_id)
        report = make_report(n=8)
        report.data["run_id"] = run_id
        return labelling_of(report, tmp_path / f"{run_id}.csv")

    runs = [("run-1 · 2026-12-07 10:00", "run-1"), ("run-2 · 2026-12-06 09:00", "run-2")]
    ui = LabellingUI(labelling_of(make_report(), tmp_path / "run-1.csv"), runs=runs, open_run=open_run)
    assert "run-1" in ui.run_line.value
    assert ui.run_choice.options == tuple(runs) and ui.run_choice.value == "run-1"
    ui.keys.value = "4"
    ui.run_choice.value = "run-2"
    assert opened == ["run-2"] and ui.labelling.report.run_id == "run-2" and "run-2" in ui.run_line.value
    assert ui.progress.value == "0 of 5 labelled, 0 skipped"
    ui.keys.value = "3"
    assert rows(tmp_path / "run-2.csv")[0]["label"] == "3" and len(rows(tmp_path / "run-1.csv")) == 1


def test_one_run_only_shows_no_choice(tmp_path):
    ui = LabellingUI(labelling_of(make_report(), tmp_path / "labels.csv"))
    assert "run-1" in ui.run_line.value and ui.run_choice.layout.display == "none"


def test_the_runs_offered_are_the_env_s_successful_runs_newest_first(tmp_path, relocated_default_values):
    import yaml

    from evalbook.calibrate.labelling import runs_to_label
    from test_index import _report, _run, at

    outputs = tmp_path / "outputs"
    _run(outputs, "local", "older-run-0001", at(8), "succeeded", _report("older-run-0001", "sample", 0.5, None))
    _run(outputs, "local", "newer-run-0002", at(9), "succeeded", _report("newer-run-0002", "sample", 0.5, None))
    _run(outputs, "local", "failed-run-003", at(10), "failed", failure="stage 02_score failed")
    _run(outputs, "ci", "other-env-0004", at(11), "succeeded", _report("other-env-0004", "sample", 0.5, None))
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump({**relocated_default_values, "outputs_root": str(outputs), "env": "local"}),
                       "utf-8")
    offered = runs_to_label(str(profile))
    assert [run_id for _, run_id in offered] == ["newer-run-0002", "older-run-0001"]
    assert offered[0][0].startswith("newer-ru · 2026-11-29 09:00 UTC")

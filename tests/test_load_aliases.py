"""Column names from RAGAS and DeepEval are read as evalbook's, said once (issue 49, item 4),
and a missing column is answered with the nearest present one."""

from __future__ import annotations

import json

import pytest

from evalbook.load import LoadError, load_evaluation_set, metadata_column_names
from test_check_columns import write_csv


def test_ragas_names_are_read_as_ours_and_said_once(tmp_path):
    path = write_csv(tmp_path / "ragas.csv", ["user_input", "context", "reference", "response", "topic"],
                     [["How many legs?", "Spiders have eight legs.", "Eight.", "Eight legs.", "animals"],
                      ["Boiling point?", "Water boils at 100 °C.", "100 °C.", "At 100 °C.", "physics"]])
    loaded = load_evaluation_set(str(path))
    assert loaded.table["question"].tolist() == ["How many legs?", "Boiling point?"]
    assert loaded.table["reference_answer"].tolist() == ["Eight.", "100 °C."]
    assert loaded.table["generated_answer"].tolist() == ["Eight legs.", "At 100 °C."]
    assert [column.name for column in loaded.metadata] == ["topic"]
    notes = [warning for warning in loaded.warnings if "RAGAS" in warning]
    assert len(notes) == 1
    assert "'user_input' as question" in notes[0] and "'response' as generated_answer" in notes[0]
    assert "'reference' as answer" in notes[0]
    assert metadata_column_names(str(path)) == ["topic"]


def test_deepeval_names_are_read_as_ours_in_both_files(tmp_path):
    examples = tmp_path / "cases.jsonl"
    examples.write_text(json.dumps({"id": "a", "input": "How many legs?", "context": "Spiders have eight legs.",
                                    "expected_output": "Eight."}) + "\n", "utf-8")
    predictions = tmp_path / "outputs.jsonl"
    predictions.write_text(json.dumps({"id": "a", "actual_output": "Eight legs.",
                                       "retrieval_context": ["Spiders have eight legs."]}) + "\n", "utf-8")
    loaded = load_evaluation_set(str(examples), str(predictions))
    assert loaded.table["generated_answer"].tolist() == ["Eight legs."]
    assert loaded.table["retrieved_contexts"].tolist()[0].tolist() == ["Spiders have eight legs."]
    notes = [warning for warning in loaded.warnings if "DeepEval" in warning]
    assert len(notes) == 2  # one per file, each naming its file
    assert str(examples) in notes[0] and str(predictions) in notes[1]


def test_a_peer_name_beside_our_own_column_stays_metadata(tmp_path):
    path = write_csv(tmp_path / "mine.csv", ["question", "context", "answer", "generated_answer", "reference"],
                     [["q", "c", "a", "g", "page 4"]])
    loaded = load_evaluation_set(str(path))
    assert [column.name for column in loaded.metadata] == ["reference"]
    assert not [warning for warning in loaded.warnings if "RAGAS" in warning]


def test_ragas_0_1_data_is_refused_with_the_renames_that_fix_it(tmp_path):
    # RAGAS 0.1: `answer` is the generated answer and `ground_truth` the reference
    path = write_csv(tmp_path / "old.csv", ["question", "contexts", "answer", "ground_truth"],
                     [["q", '["c"]', "generated", "reference"]])
    with pytest.raises(LoadError) as refused:
        load_evaluation_set(str(path))
    message = str(refused.value)
    assert "ground_truth" in message and "rename answer to generated_answer and ground_truth to answer" in message


def test_ground_truth_alone_is_the_reference(tmp_path):
    path = write_csv(tmp_path / "gt.csv", ["question", "context", "ground_truth", "response"], [["q", "c", "r", "g"]])
    assert load_evaluation_set(str(path)).table["reference_answer"].tolist() == ["r"]


def test_two_peer_names_for_one_column_are_refused(tmp_path):
    path = write_csv(tmp_path / "both.csv", ["question", "context", "reference", "expected_output", "response"],
                     [["q", "c", "r", "r2", "g"]])
    with pytest.raises(LoadError, match="'reference' and 'expected_output' both stand for answer"):
        load_evaluation_set(str(path))


def test_a_missing_column_names_the_nearest_present_one(tmp_path):
    path = write_csv(tmp_path / "typo.csv", ["questoin", "context", "answer", "generated_answer"],
                     [["q", "c", "a", "g"]])
    with pytest.raises(LoadError) as refused:
        load_evaluation_set(str(path))
    assert "column 'question'" in str(refused.value) and "did you mean 'questoin'?" in str(refused.value)

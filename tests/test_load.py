"""Tests for evalbook.load: reading, validating and joining inputs into the canonical table.

All inputs are small files written into tmp_path with invented text.
"""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.dirfs import DirFileSystem

from evalbook.__main__ import main
from evalbook.load import (
    CANONICAL_SCHEMA,
    LoadError,
    canonical_arrow,
    load_evaluation_set,
    read_canonical,
)
from paths import ROOT


# ---------------------------------------------------------------- helpers

def example(i: int, **extra) -> dict:
    """One invented example row; `extra` adds or overrides fields."""
    row = {
        "id": f"ex{i}",
        "question": f"What colour is the lantern on pier {i}?",
        "context": f"The lantern on pier {i} of Gullhaven harbour is painted ochre.",
        "answer": f"It is ochre (pier {i}).",
    }
    row.update(extra)
    return row


def write_jsonl(path: Path, records, raw_lines: dict[int, str] | None = None) -> Path:
    """Write records one per line; raw_lines maps a 1-based line number to literal text."""
    lines = [json.dumps(r) for r in records]
    for number, text in sorted((raw_lines or {}).items()):
        lines.insert(number - 1, text)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_parquet(path: Path, columns: dict, schema: pa.Schema | None = None) -> Path:
    pq.write_table(pa.table(columns, schema=schema), path)
    return path


def rows_text(rows: list[int]) -> str:
    return f"row{'s' if len(rows) > 1 else ''} {', '.join(str(r) for r in rows)}"


def assert_names(err: LoadError, path, column: str | None = None, rows: list[int] | None = None):
    """The message names the file, the column and the rows (and the attributes agree)."""
    message = str(err)
    assert f"file {path}" in message, message
    if column is not None:
        assert f"column {column!r}" in message, message
        assert err.column == column
    if rows is not None:
        assert rows_text(rows) + ":" in message, message
        assert err.rows == rows


def plain(value):
    """A table cell as a plain Python value (arrays -> lists, missing -> None)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return list(value)
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def records(table: pd.DataFrame) -> list[dict]:
    return [{k: plain(v) for k, v in row.items()} for row in table.to_dict("records")]


# ---------------------------------------------------------------- missing columns

@pytest.mark.parametrize("column", ["question", "context", "answer"])
def test_missing_required_example_column(tmp_path, column):
    rows = [example(i, generated_answer="ochre") for i in range(3)]
    for row in rows:
        del row[column]
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, column)
    assert "required column is missing" in str(info.value)


def test_missing_generated_answer_without_predictions_file(tmp_path):
    path = write_jsonl(tmp_path / "examples.jsonl", [example(1), example(2)])
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "generated_answer")
    assert "required column is missing" in str(info.value)


def test_missing_id_in_predictions_file(tmp_path):
    examples = write_jsonl(tmp_path / "examples.jsonl", [example(1)])
    predictions = write_jsonl(tmp_path / "predictions.jsonl", [{"generated_answer": "ochre"}])
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(examples), str(predictions))
    assert_names(info.value, predictions, "id")
    assert "required column is missing" in str(info.value)


# ---------------------------------------------------------------- duplicate ids

def test_duplicate_id_in_examples_names_both_rows(tmp_path):
    rows = [example(1, id="p"), example(2, id="q"), example(3, id="p"), example(4, id="r")]
    for row in rows:
        row["generated_answer"] = "ochre"
    # A blank line 3 shifts the later rows: the duplicates sit on lines 1 and 4.
    path = write_jsonl(tmp_path / "examples.jsonl", rows, raw_lines={3: ""})
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "id", [1, 4])
    assert "duplicate id(s) 'p'" in str(info.value) and "['" not in str(info.value)


def test_duplicate_id_int_and_string_are_the_same_id(tmp_path):
    rows = [example(1, id=7), example(2, id="8"), example(3, id="7")]
    for row in rows:
        row["generated_answer"] = "ochre"
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "id", [1, 3])
    assert "'7'" in str(info.value)


def test_duplicate_id_in_predictions_names_both_rows(tmp_path):
    examples = write_jsonl(tmp_path / "examples.jsonl", [example(1), example(2)])
    predictions = write_jsonl(tmp_path / "predictions.jsonl", [
        {"id": "ex1", "generated_answer": "ochre"},
        {"id": "ex2", "generated_answer": "ochre"},
        {"id": "ex9", "generated_answer": "ochre"},
        {"id": "ex2", "generated_answer": "teal"},
    ])
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(examples), str(predictions))
    assert_names(info.value, predictions, "id", [2, 4])
    assert "duplicate id(s) 'ex2'" in str(info.value)


def test_empty_id_is_rejected(tmp_path):
    rows = [example(1, id="a", generated_answer="x"), example(2, id="  ", generated_answer="y")]
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "id", [2])
    assert "ids must be non-empty strings or integers" in str(info.value)


def test_missing_id_among_integer_ids_names_only_that_row(tmp_path):
    # Integer ids on lines 1 and 2 are valid; only line 3 lacks an id. pandas turns the
    # whole column into floats (1.0, 2.0, NaN) when one value is missing; the error must
    # still name only the row that is actually wrong.
    rows = [example(1, id=1), example(2, id=2), example(3)]
    del rows[2]["id"]
    for row in rows:
        row["generated_answer"] = "ochre"
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "id", [3])


# ---------------------------------------------------------------- non-text and null values

def test_number_in_question_jsonl(tmp_path):
    rows = [example(1), example(2, question=42), example(3)]
    for row in rows:
        row["generated_answer"] = "ochre"
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "question", [2])
    assert "must hold text; found non-text values" in str(info.value)


def test_non_text_generated_answer_in_predictions(tmp_path):
    examples = write_jsonl(tmp_path / "examples.jsonl", [example(1), example(2)])
    predictions = write_jsonl(tmp_path / "predictions.jsonl", [
        {"id": "ex1", "generated_answer": "ochre"},
        {"id": "ex2", "generated_answer": ["ochre"]},
    ])
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(examples), str(predictions))
    assert_names(info.value, predictions, "generated_answer", [2])
    assert "non-text" in str(info.value)


def test_non_string_parquet_column(tmp_path):
    path = write_parquet(tmp_path / "examples.parquet", {
        "question": ["q1", "q2", "q3"],
        "context": pa.array([1, 2, 3], pa.int64()),
        "answer": ["a1", "a2", "a3"],
        "generated_answer": ["g1", "g2", "g3"],
    })
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "context", [1, 2, 3])
    assert "Parquet type is int64" in str(info.value)


@pytest.mark.parametrize("how", ["null", "absent"])
def test_null_in_required_text_column_jsonl(tmp_path, how):
    rows = [example(1), example(2), example(3)]
    if how == "null":
        rows[2]["answer"] = None
    else:
        del rows[2]["answer"]
    for row in rows:
        row["generated_answer"] = "ochre"
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "answer", [3])
    assert "found missing values" in str(info.value)


def test_null_in_required_text_column_parquet(tmp_path):
    path = write_parquet(tmp_path / "examples.parquet", {
        "question": ["q1", None, "q3", None],
        "context": ["c1", "c2", "c3", "c4"],
        "answer": ["a1", "a2", "a3", "a4"],
        "generated_answer": ["g1", "g2", "g3", "g4"],
    })
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "question", [2, 4])
    assert "found missing values" in str(info.value)
    assert "skip_incomplete_examples" in str(info.value)


def test_incomplete_examples_are_skipped_counted_and_listed_when_asked(tmp_path):
    path = write_parquet(tmp_path / "examples.parquet", {
        "question": ["q1", None, "q3", "q4"],
        "context": ["c1", "c2", "c3", None],
        "answer": ["a1", "a2", "a3", "a4"],
        "generated_answer": ["g1", "g2", "g3", "g4"],
    })
    result = load_evaluation_set(str(path), skip_incomplete=True)
    # ids are the original 0-based row numbers, so the kept rows keep theirs
    assert result.table["id"].tolist() == ["0", "2"]
    assert result.table["row"].tolist() == [1, 3]
    assert result.skipped_incomplete_rows == [2, 4]
    assert result.counts["n_skipped_incomplete_examples"] == 2
    assert result.counts["n_input_rows"] == 4 and result.counts["n_examples"] == 2


def test_skipping_incomplete_examples_still_rejects_non_text(tmp_path):
    rows = [example(1, generated_answer="g"), example(2, answer=None, generated_answer="g"),
            example(3, question=17, generated_answer="g")]
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path), skip_incomplete=True)
    assert_names(info.value, path, "question", [3])


def test_many_bad_rows_are_shortened(tmp_path):
    rows = [example(i, question=i, generated_answer="x") for i in range(1, 14)]
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert "rows 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 3 more:" in str(info.value)
    assert info.value.rows == list(range(1, 14))


# ---------------------------------------------------------------- unreadable files

def test_invalid_json_line_names_the_line(tmp_path):
    rows = [example(1, generated_answer="x"), example(2, generated_answer="y")]
    path = write_jsonl(tmp_path / "examples.jsonl", rows, raw_lines={3: '{"id": "ex3", "question": '})
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, rows=[3])
    assert "not valid JSON" in str(info.value)


def test_json_line_that_is_not_an_object(tmp_path):
    path = write_jsonl(tmp_path / "examples.jsonl", [example(1, generated_answer="x")],
                       raw_lines={2: '["a", "list"]'})
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, rows=[2])
    assert "must be a JSON object" in str(info.value)


def test_file_not_found(tmp_path):
    path = tmp_path / "nowhere.jsonl"
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path)
    assert "file not found" in str(info.value)


def test_predictions_file_not_found(tmp_path):
    examples = write_jsonl(tmp_path / "examples.jsonl", [example(1)])
    predictions = tmp_path / "missing_predictions.jsonl"
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(examples), str(predictions))
    assert_names(info.value, predictions)
    assert "file not found" in str(info.value)


@pytest.mark.parametrize("key", ["input_path", "predictions_path"])
def test_a_directory_is_reported_as_a_directory_not_as_missing(tmp_path, key):
    folder = tmp_path / "dir.jsonl"
    folder.mkdir()
    examples = write_jsonl(tmp_path / "examples.jsonl", [example(1)])
    paths = {"input_path": str(examples), "predictions_path": None, key: str(folder)}
    with pytest.raises(LoadError) as info:
        load_evaluation_set(**paths)
    assert_names(info.value, folder)
    assert "is a directory, not a file" in str(info.value) and "not found" not in str(info.value)


@pytest.mark.parametrize("key", ["input_path", "predictions_path"])
@pytest.mark.parametrize("problem", ["a directory", "missing"])
def test_a_run_whose_input_is_a_directory_or_missing_exits_2_before_writing(tmp_path, capsys, key, problem):
    given = tmp_path / "dir.jsonl"
    if problem == "a directory":
        given.mkdir()
    outputs = tmp_path / "outputs"
    code = main(["run", "--params", str(ROOT / "params" / "default.yaml"), "-p", f"outputs_root={outputs}",
                 "-p", f"{key}={given}", *(["-p", "predictions_path=null"] if key == "input_path" else [])])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("evalbook: "), err
    assert f"-p {key}" in err
    said = "is a directory, not a file" if problem == "a directory" else "does not exist"
    assert f"{key} {given} {said}" in err
    assert not outputs.exists()


def test_corrupt_parquet_file(tmp_path):
    path = tmp_path / "examples.parquet"
    path.write_bytes(b"this is not a parquet file at all, only some invented bytes")
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path)
    assert "cannot read the file" in str(info.value)


def test_unsupported_extension(tmp_path):
    path = tmp_path / "examples.txt"
    path.write_text("question,context,answer\n", encoding="utf-8")
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path)
    assert "unsupported file type '.txt'" in str(info.value)


# ---------------------------------------------------------------- retrieved_ids

def test_retrieved_ids_not_a_list_of_strings_jsonl(tmp_path):
    rows = [example(1, retrieved_ids=["d1", "d2"]), example(2, retrieved_ids="d1"),
            example(3, retrieved_ids=[1, 2]), example(4, retrieved_ids=None)]
    for row in rows:
        row["generated_answer"] = "ochre"
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "retrieved_ids", [2, 3])
    assert "must be a list of strings" in str(info.value)


def test_retrieved_ids_not_a_list_in_predictions(tmp_path):
    examples = write_jsonl(tmp_path / "examples.jsonl", [example(1), example(2)])
    predictions = write_jsonl(tmp_path / "predictions.jsonl", [
        {"id": "ex1", "generated_answer": "a", "retrieved_ids": {"first": "d1"}},
        {"id": "ex2", "generated_answer": "b", "retrieved_ids": ["d2"]},
    ])
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(examples), str(predictions))
    assert_names(info.value, predictions, "retrieved_ids", [1])
    assert "must be a list of strings" in str(info.value)


def _csv(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_retrieved_ids_invalid_json_in_csv(tmp_path):
    rows = [example(1, generated_answer="x", retrieved_ids='["d1"]'),
            example(2, generated_answer="y", retrieved_ids="[d1, d2")]
    path = _csv(tmp_path / "examples.csv", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "retrieved_ids", [2])
    assert "must be a JSON list of strings" in str(info.value)


def test_retrieved_ids_json_but_not_a_list_in_csv(tmp_path):
    rows = [example(1, generated_answer="x", retrieved_ids='"d1"'),
            example(2, generated_answer="y", retrieved_ids='["d1"]'),
            example(3, generated_answer="z", retrieved_ids='[1, "d2"]')]
    path = _csv(tmp_path / "examples.csv", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "retrieved_ids", [1, 3])
    assert "must be a list of strings" in str(info.value)


# ---------------------------------------------------------------- gold_ids

GOLD_IDS_ROWS = [
    example(1, generated_answer="a", gold_ids=["doc-1", "doc-7"], retrieved_ids=["doc-7", "doc-2"]),
    example(2, generated_answer="b", gold_id="doc-2", retrieved_ids=["doc-2"]),
    example(3, generated_answer="c"),
]


def _write_gold_formats(tmp_path: Path, rows: list[dict]) -> dict[str, Path]:
    """The rows as JSONL, CSV (lists as JSON text, a missing value as an empty cell) and Parquet."""
    columns = ["id", "question", "context", "answer", "generated_answer", "gold_id", "gold_ids", "retrieved_ids"]
    csv_rows = [{c: json.dumps(r[c]) if isinstance(r.get(c), list) else r.get(c, "") for c in columns} for r in rows]
    types = {c: pa.list_(pa.string()) if c in ("gold_ids", "retrieved_ids") else pa.string() for c in columns}
    return {"jsonl": write_jsonl(tmp_path / "gold.jsonl", rows),
            "csv": _csv(tmp_path / "gold.csv", csv_rows),
            "parquet": write_parquet(tmp_path / "gold.parquet", {c: [r.get(c) for r in rows] for c in columns},
                                     pa.schema([(c, types[c]) for c in columns]))}


def test_gold_ids_load_the_same_from_jsonl_csv_and_parquet(tmp_path):
    tables = {name: load_evaluation_set(str(p)) for name, p in _write_gold_formats(tmp_path, GOLD_IDS_ROWS).items()}
    for name, result in tables.items():
        got = records(result.table)
        assert [(r["gold_id"], r["gold_ids"]) for r in got] == [
            (None, ["doc-1", "doc-7"]), ("doc-2", None), (None, None)], name
        # gold_ids are gold ids: no warning that retrieved_ids lack one
        assert result.counts["n_retrieved_ids_without_gold_id"] == 0 and result.warnings == [], name
    pd.testing.assert_frame_equal(tables["jsonl"].table, tables["csv"].table)
    pd.testing.assert_frame_equal(tables["jsonl"].table, tables["parquet"].table)


@pytest.mark.parametrize("form", ["jsonl", "csv", "parquet"])
def test_a_row_with_both_gold_id_and_gold_ids_is_refused_by_its_row(tmp_path, form):
    rows = [*GOLD_IDS_ROWS, example(4, generated_answer="d", gold_id="doc-4", gold_ids=["doc-4", "doc-5"])]
    path = _write_gold_formats(tmp_path, rows)[form]
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "gold_ids", [4])
    assert "both gold_id and gold_ids" in str(info.value)


def test_gold_ids_not_a_list_of_strings_jsonl(tmp_path):
    rows = [example(1, gold_ids=["d1"]), example(2, gold_ids="d1"), example(3, gold_ids=[1, 2]),
            example(4, gold_ids=None)]
    for row in rows:
        row["generated_answer"] = "ochre"
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "gold_ids", [2, 3])
    assert "must be a list of strings: the ids of the relevant documents" in str(info.value)


def test_gold_ids_invalid_json_or_not_a_list_in_csv(tmp_path):
    rows = [example(1, generated_answer="x", gold_ids='["d1"]'), example(2, generated_answer="y", gold_ids="[d1"),
            example(3, generated_answer="z", gold_ids='"d1"')]
    path = _csv(tmp_path / "examples.csv", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "gold_ids", [2])
    assert "must be a JSON list of strings" in str(info.value)
    path = _csv(tmp_path / "examples.csv", [rows[0], rows[2]])
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "gold_ids", [2])


def test_empty_gold_ids_are_refused_since_recall_would_divide_by_zero(tmp_path):
    path = write_jsonl(tmp_path / "examples.jsonl", [example(1, generated_answer="a", gold_ids=["d1"]),
                                                      example(2, generated_answer="b", gold_ids=[])])
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "gold_ids", [2])
    assert "at least one relevant document" in str(info.value)


def test_generated_answers_in_both_files(tmp_path):
    examples = write_jsonl(tmp_path / "examples.jsonl",
                           [example(1, generated_answer="ochre"), example(2, generated_answer="teal")])
    predictions = write_jsonl(tmp_path / "predictions.jsonl",
                              [{"id": "ex1", "generated_answer": "ochre"}])
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(examples), str(predictions))
    assert_names(info.value, examples, "generated_answer")
    message = str(info.value)
    assert "both here and in the predictions file" in message
    assert str(predictions) in message


# ---------------------------------------------------------------- formats agree

FORMAT_ROWS = [
    example(1, generated_answer="Ochre, like the others.", gold_id="doc-1",
            retrieved_ids=["doc-1", "doc-7"], source="RephraserA"),
    example(2, context='A "quoted" line, with commas,\nand a second line.',
            generated_answer="", gold_id="doc-2", retrieved_ids=["doc-9"], source="RephraserA"),
    example(3, answer="", generated_answer="I cannot say.", gold_id="doc-3",
            retrieved_ids=["doc-4", "doc-5", "doc-3"], source="FallbackB"),
    # no retrieval: key absent in JSONL, empty cell in CSV, null in Parquet
    example(4, generated_answer="Ochre.", gold_id="doc-4", source="FallbackB"),
]


def _write_all_formats(tmp_path: Path, rows: list[dict]) -> dict[str, Path]:
    jsonl = write_jsonl(tmp_path / "set.jsonl", rows)
    frame = pd.DataFrame(rows)
    csv_frame = frame.copy()
    csv_frame["retrieved_ids"] = [json.dumps(v) if isinstance(v, list) else "" for v in frame["retrieved_ids"]]
    csv = tmp_path / "set.csv"
    csv_frame.to_csv(csv, index=False)
    parquet = tmp_path / "set.parquet"
    columns = {c: [r.get(c) for r in rows] for c in frame.columns}
    types = {c: pa.list_(pa.string()) if c == "retrieved_ids" else pa.string() for c in frame.columns}
    write_parquet(parquet, columns, pa.schema([(c, types[c]) for c in frame.columns]))
    return {"jsonl": jsonl, "csv": csv, "parquet": parquet}


def test_jsonl_csv_parquet_give_the_same_canonical_table(tmp_path):
    paths = _write_all_formats(tmp_path, FORMAT_ROWS)
    tables = {name: load_evaluation_set(str(p)).table for name, p in paths.items()}
    expected = [
        {"id": "ex1", "row": 1, "reference_answer": FORMAT_ROWS[0]["answer"],
         "generated_answer": "Ochre, like the others.", "has_prediction": True,
         "generated_empty": False, "reference_empty": False, "gold_id": "doc-1",
         "retrieved_ids": ["doc-1", "doc-7"], "retrieved_contexts": None, "source": "RephraserA"},
        {"id": "ex2", "row": 2, "reference_answer": FORMAT_ROWS[1]["answer"],
         "generated_answer": "", "has_prediction": True, "generated_empty": True,
         "reference_empty": False, "gold_id": "doc-2", "retrieved_ids": ["doc-9"],
         "retrieved_contexts": None, "source": "RephraserA"},
        {"id": "ex3", "row": 3, "reference_answer": "", "generated_answer": "I cannot say.",
         "has_prediction": True, "generated_empty": False, "reference_empty": True,
         "gold_id": "doc-3", "retrieved_ids": ["doc-4", "doc-5", "doc-3"],
         "retrieved_contexts": None, "source": "FallbackB"},
        {"id": "ex4", "row": 4, "reference_answer": FORMAT_ROWS[3]["answer"],
         "generated_answer": "Ochre.", "has_prediction": True, "generated_empty": False,
         "reference_empty": False, "gold_id": "doc-4", "retrieved_ids": None,
         "retrieved_contexts": None, "source": "FallbackB"},
    ]
    for name, table in tables.items():
        assert list(table.columns) == CANONICAL_SCHEMA.names, name
        got = records(table)
        for row, want, source_row in zip(got, expected, FORMAT_ROWS):
            assert row["question"] == source_row["question"], name
            assert row["context"] == source_row["context"], name
            assert {k: row[k] for k in want} == want, name
        assert len(got) == 4, name
    pd.testing.assert_frame_equal(tables["jsonl"], tables["csv"])
    pd.testing.assert_frame_equal(tables["jsonl"], tables["parquet"])


def test_formats_agree_when_optional_values_are_missing(tmp_path):
    # Row 2 has no gold_id and no source: absent in JSONL, an empty cell in CSV, null in
    # Parquet. All three are "no value" and must load as missing, not as the id "".
    rows = [dict(r) for r in FORMAT_ROWS]
    del rows[1]["gold_id"]
    del rows[1]["source"]
    paths = _write_all_formats(tmp_path, rows)
    tables = {name: load_evaluation_set(str(p)).table for name, p in paths.items()}
    for name, table in tables.items():
        assert pd.isna(table.loc[1, "gold_id"]), f"{name}: gold_id {table.loc[1, 'gold_id']!r}"
        assert pd.isna(table.loc[1, "source"]), f"{name}: source {table.loc[1, 'source']!r}"
        assert table.loc[0, "gold_id"] == "doc-1", name
    pd.testing.assert_frame_equal(tables["jsonl"], tables["parquet"])
    pd.testing.assert_frame_equal(tables["jsonl"], tables["csv"])


def test_csv_rows_are_records_not_lines(tmp_path):
    # The context of the first record spans two physical lines; rows still count records.
    rows = [example(1, context="line one\nline two", generated_answer="a"),
            example(2, generated_answer="b")]
    path = _csv(tmp_path / "examples.csv", rows)
    table = load_evaluation_set(str(path)).table
    assert table["row"].tolist() == [1, 2]
    assert table.loc[0, "context"] == "line one\nline two"


def test_ids_default_to_zero_based_row_numbers(tmp_path):
    rows = [example(i, generated_answer=f"g{i}") for i in range(4)]
    for row in rows:
        del row["id"]
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    table = load_evaluation_set(str(path)).table
    assert table["id"].tolist() == ["0", "1", "2", "3"]
    assert table["row"].tolist() == [1, 2, 3, 4]
    assert table["generated_answer"].tolist() == ["g0", "g1", "g2", "g3"]


# ---------------------------------------------------------------- joining predictions

@pytest.mark.parametrize("example_ids, prediction_ids", [
    ([1, 2, 3], ["3", "1", "2"]),
    (["1", "2", "3"], [3, 1, 2]),
])
def test_predictions_join_by_id_int_and_string(tmp_path, example_ids, prediction_ids):
    examples = write_jsonl(tmp_path / "examples.jsonl",
                           [example(n, id=i) for n, i in enumerate(example_ids, start=1)])
    predictions = write_jsonl(tmp_path / "predictions.jsonl",
                              [{"id": i, "generated_answer": f"answer for {i}"} for i in prediction_ids])
    result = load_evaluation_set(str(examples), str(predictions))
    table = result.table
    assert table["id"].tolist() == ["1", "2", "3"]
    assert table["generated_answer"].tolist() == ["answer for 1", "answer for 2", "answer for 3"]
    assert table["question"].tolist() == [example(n)["question"] for n in (1, 2, 3)]
    assert table["has_prediction"].tolist() == [True, True, True]
    assert result.counts["n_predictions"] == 3
    assert result.counts["n_unmatched_predictions"] == 0
    assert result.unmatched_prediction_ids == []


def test_unmatched_predictions_are_counted_and_listed(tmp_path):
    examples = write_jsonl(tmp_path / "examples.jsonl", [example(1), example(2)])
    predictions = write_jsonl(tmp_path / "predictions.jsonl", [
        {"id": "zz-late", "generated_answer": "stray"},
        {"id": "ex1", "generated_answer": "ochre"},
        {"id": "ex2", "generated_answer": "ochre too"},
        {"id": "aa-early", "generated_answer": "stray"},
    ])
    result = load_evaluation_set(str(examples), str(predictions))
    assert result.unmatched_prediction_ids == ["zz-late", "aa-early"]
    assert result.counts["n_unmatched_predictions"] == 2
    assert result.counts["n_predictions"] == 4
    assert result.table["id"].tolist() == ["ex1", "ex2"]
    assert result.examples_without_prediction == []


def test_examples_without_prediction_are_kept_and_listed(tmp_path):
    examples = write_jsonl(tmp_path / "examples.jsonl", [example(1), example(2), example(3)])
    predictions = write_jsonl(tmp_path / "predictions.jsonl",
                              [{"id": "ex2", "generated_answer": "ochre"}])
    result = load_evaluation_set(str(examples), str(predictions))
    table = result.table
    assert table["id"].tolist() == ["ex1", "ex2", "ex3"]
    assert table["has_prediction"].tolist() == [False, True, False]
    assert table["generated_empty"].tolist() == [False, False, False]
    assert pd.isna(table.loc[0, "generated_answer"]) and pd.isna(table.loc[2, "generated_answer"])
    assert table.loc[1, "generated_answer"] == "ochre"
    assert result.examples_without_prediction == ["ex1", "ex3"]
    assert result.counts["n_examples_without_prediction"] == 2
    assert result.counts["n_examples"] == 3


def test_predictions_carry_retrieval_and_source(tmp_path):
    examples = write_jsonl(tmp_path / "examples.jsonl", [example(1, gold_id="d1"), example(2, gold_id="d2")])
    predictions = write_jsonl(tmp_path / "predictions.jsonl", [
        {"id": "ex1", "generated_answer": "a", "retrieved_ids": ["d9", "d1"], "source": "S1"},
        {"id": "ex2", "generated_answer": "b", "retrieved_ids": None, "source": "S2"},
    ])
    result = load_evaluation_set(str(examples), str(predictions))
    rows = records(result.table)
    assert [r["retrieved_ids"] for r in rows] == [["d9", "d1"], None]
    assert [r["source"] for r in rows] == ["S1", "S2"]
    assert [r["gold_id"] for r in rows] == ["d1", "d2"]
    assert result.counts["n_with_retrieval"] == 1


def test_gold_ids_given_with_the_predictions_are_kept(tmp_path):
    """The gold ids may come with the system's retrieval; where the input gives them too they must agree."""
    examples = write_jsonl(tmp_path / "examples.jsonl", [example(1), example(2, gold_id="d2"), example(3)])
    predictions = write_jsonl(tmp_path / "predictions.jsonl", [
        {"id": "ex1", "generated_answer": "a", "retrieved_ids": ["d9", "d1"], "gold_id": "d1"},
        {"id": "ex2", "generated_answer": "b", "retrieved_ids": ["d2"], "gold_ids": ["d2"]},
        {"id": "ex3", "generated_answer": "c", "retrieved_ids": ["d3"], "gold_ids": ["d3", "d4"]},
    ])
    result = load_evaluation_set(str(examples), str(predictions))
    rows = records(result.table)
    assert [(r["gold_id"], r["gold_ids"]) for r in rows] == [("d1", None), ("d2", None), (None, ["d3", "d4"])]
    assert result.counts["n_retrieved_ids_without_gold_id"] == 0


def test_gold_ids_that_disagree_with_the_inputs_are_refused_naming_both_rows(tmp_path):
    examples = write_jsonl(tmp_path / "examples.jsonl", [example(1, gold_id="d1"), example(2, gold_ids=["d2", "d5"])])
    predictions = write_jsonl(tmp_path / "predictions.jsonl", [
        {"id": "ex2", "generated_answer": "b", "gold_ids": ["d2"]},
        {"id": "ex1", "generated_answer": "a", "gold_id": "d7"},
    ])
    with pytest.raises(LoadError) as caught:
        load_evaluation_set(str(examples), str(predictions))
    message = str(caught.value)
    assert_names(caught.value, predictions, rows=[1, 2])
    assert "ex1" in message and "'d7'" in message and "'d1'" in message and str(examples) in message
    assert "ex2" in message and "give the gold ids in one file" in message


def test_empty_answers_are_kept_and_flagged(tmp_path):
    rows = [example(1, generated_answer="ochre"), example(2, generated_answer=""),
            example(3, generated_answer="   \n"), example(4, answer=" ", generated_answer="x")]
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    result = load_evaluation_set(str(path))
    table = result.table
    assert table["id"].tolist() == ["ex1", "ex2", "ex3", "ex4"]
    assert table["generated_answer"].tolist() == ["ochre", "", "   \n", "x"]
    assert table["generated_empty"].tolist() == [False, True, True, False]
    assert table["has_prediction"].tolist() == [True, True, True, True]
    assert table["reference_empty"].tolist() == [False, False, False, True]
    assert result.counts["n_empty_generated_answers"] == 2
    assert result.counts["n_empty_reference_answers"] == 1
    assert result.counts["n_examples_without_prediction"] == 0


def test_counts_without_predictions_file(tmp_path):
    path = write_jsonl(tmp_path / "examples.jsonl",
                       [example(i, generated_answer="g") for i in range(5)])
    counts = load_evaluation_set(str(path)).counts
    assert counts == {
        "n_input_rows": 5, "n_skipped_incomplete_examples": 0, "n_predictions": None,
        "n_unmatched_predictions": 0, "n_left_out_by_limit": 0, "n_examples": 5, "n_examples_without_prediction": 0,
        "n_empty_generated_answers": 0, "n_empty_reference_answers": 0, "n_with_retrieval": 0,
        "n_unmatched_differing_only_in_case_or_space": 0, "n_retrieved_ids_without_gold_id": 0,
        "n_gold_id_without_retrieved_ids": 0, "n_examples_with_duplicate_retrieved_ids": 0,
    }


# ---------------------------------------------------------------- limit and seed

@pytest.fixture
def twenty_rows(tmp_path) -> Path:
    return write_jsonl(tmp_path / "examples.jsonl",
                       [example(i, generated_answer=f"g{i}") for i in range(20)])


def test_limit_sample_is_seeded_reproducible_and_in_file_order(twenty_rows):
    first = load_evaluation_set(str(twenty_rows), limit=5, seed=11)
    again = load_evaluation_set(str(twenty_rows), limit=5, seed=11)
    other = load_evaluation_set(str(twenty_rows), limit=5, seed=12)
    ids = first.table["id"].tolist()
    assert len(ids) == 5 and len(set(ids)) == 5
    assert set(ids) <= {f"ex{i}" for i in range(20)}
    assert ids == again.table["id"].tolist()
    assert ids != other.table["id"].tolist()
    for result in (first, other):
        rows = result.table["row"].tolist()
        assert rows == sorted(rows) and len(set(rows)) == 5
        # row numbers still point at the original lines
        assert result.table["id"].tolist() == [f"ex{r - 1}" for r in rows]
    assert first.counts["n_left_out_by_limit"] == 15
    assert first.counts["n_examples"] == 5
    assert first.counts["n_input_rows"] == 20


def test_limit_not_smaller_than_rows_keeps_all(twenty_rows):
    for limit in (20, 50):
        result = load_evaluation_set(str(twenty_rows), limit=limit, seed=3)
        assert result.table["id"].tolist() == [f"ex{i}" for i in range(20)]
        assert result.counts["n_left_out_by_limit"] == 0


def test_limit_counts_examples_without_prediction_among_kept_rows(tmp_path):
    examples = write_jsonl(tmp_path / "examples.jsonl", [example(i) for i in range(10)])
    predictions = write_jsonl(tmp_path / "predictions.jsonl",
                              [{"id": f"ex{i}", "generated_answer": "g"} for i in range(0, 10, 2)])
    result = load_evaluation_set(str(examples), str(predictions), limit=6, seed=5)
    table = result.table
    without = table.loc[~table["has_prediction"], "id"].tolist()
    assert result.examples_without_prediction == without
    assert result.counts["n_examples_without_prediction"] == len(without)
    assert all(int(i[2:]) % 2 == 1 for i in without)
    assert result.counts["n_left_out_by_limit"] == 4


# ---------------------------------------------------------------- canonical round trip

def test_write_and_read_canonical_round_trip(tmp_path):
    examples = write_jsonl(tmp_path / "examples.jsonl", [
        example(1, gold_id="d1"), example(2, retrieved_contexts=["one passage", "another"]),
        example(3)])
    predictions = write_jsonl(tmp_path / "predictions.jsonl", [
        {"id": "ex1", "generated_answer": "ochre", "retrieved_ids": ["d1", "d2"], "source": "S"},
        {"id": "ex2", "generated_answer": ""},
    ])
    table = load_evaluation_set(str(examples), str(predictions)).table
    path = tmp_path / "canonical.parquet"
    pq.write_table(canonical_arrow(table), path)  # as 01_load writes it
    assert pq.read_schema(path).equals(CANONICAL_SCHEMA, check_metadata=False)
    back = read_canonical(path)
    pd.testing.assert_frame_equal(back, table)
    assert records(back)[1]["retrieved_contexts"] == ["one passage", "another"]
    assert records(back)[2]["generated_answer"] is None


# ---------------------------------------------------------------- hf:// paths

HF_ROOT = "datasets/neural-bridge/rag-dataset-12000"
HF_URL = f"hf://{HF_ROOT}"


def _hf_columns(prefix: str, n: int) -> dict:
    return {
        "context": [f"{prefix} passage {i} about the tide tables of Saltmere." for i in range(n)],
        "question": [f"{prefix} question {i}?" for i in range(n)],
        "answer": [f"{prefix} answer {i}" for i in range(n)],
        "generated_answer": [f"{prefix} generated {i}" for i in range(n)],
    }


@pytest.fixture
def hf_fs(tmp_path):
    data = tmp_path / HF_ROOT / "data"
    data.mkdir(parents=True)
    write_parquet(data / "test-00000-of-00001-af2a9f454ad1b8a3.parquet", _hf_columns("test", 3))
    write_parquet(data / "train-00000-of-00001.parquet", _hf_columns("train", 4))
    return DirFileSystem(path=str(tmp_path), fs=fsspec.filesystem("file"))


def test_hf_dataset_root_reads_only_the_split(hf_fs):
    result = load_evaluation_set(HF_URL, split="test", hf_filesystem=hf_fs)
    table = result.table
    assert table["question"].tolist() == ["test question 0?", "test question 1?", "test question 2?"]
    assert table["generated_answer"].tolist() == ["test generated 0", "test generated 1", "test generated 2"]
    assert table["id"].tolist() == ["0", "1", "2"]
    assert table["row"].tolist() == [1, 2, 3]
    assert result.counts["n_input_rows"] == 3
    assert result.sources["input_path"] == HF_URL


def test_hf_dataset_root_other_split(hf_fs):
    table = load_evaluation_set(HF_URL, split="train", hf_filesystem=hf_fs).table
    assert table["question"].tolist() == [f"train question {i}?" for i in range(4)]


def test_hf_explicit_file(hf_fs):
    url = f"{HF_URL}/data/test-00000-of-00001-af2a9f454ad1b8a3.parquet"
    table = load_evaluation_set(url, hf_filesystem=hf_fs).table
    assert table["reference_answer"].tolist() == [
        "test answer 0", "test answer 1", "test answer 2"]


def test_hf_glob_concatenates_files_in_sorted_order(hf_fs):
    table = load_evaluation_set(f"{HF_URL}/data/*-00000-of-00001*.parquet", hf_filesystem=hf_fs).table
    assert table["question"].tolist() == (
        [f"test question {i}?" for i in range(3)] + [f"train question {i}?" for i in range(4)])
    assert table["row"].tolist() == list(range(1, 8))
    assert table["id"].tolist() == [str(i) for i in range(7)]


def test_hf_split_without_files_names_the_pattern(hf_fs):
    with pytest.raises(LoadError) as info:
        load_evaluation_set(HF_URL, split="validation", hf_filesystem=hf_fs)
    message = str(info.value)
    assert f"file {HF_URL}" in message
    assert f"'{HF_ROOT}/data/validation-*.parquet'" in message
    assert "split 'validation'" in message


# ---------------------------------------------------------------- bundled sample

@pytest.fixture
def sample_dir(monkeypatch) -> Path:
    """Run from the repository root so that the documented relative paths resolve."""
    monkeypatch.chdir(ROOT)
    return ROOT / "data" / "sample"


def test_bundled_sample_loads(sample_dir):
    result = load_evaluation_set("data/sample/examples.jsonl", "data/sample/predictions.jsonl")
    table = result.table
    assert len(table) >= 32
    assert int(table["generated_empty"].sum()) == 1
    assert result.counts["n_empty_generated_answers"] == 1
    assert result.unmatched_prediction_ids == []
    assert result.examples_without_prediction == []
    assert table["has_prediction"].all()
    assert table["id"].is_unique

    cases = json.loads((sample_dir / "cases.json").read_text(encoding="utf-8"))
    assert set(cases) == set(table["id"])
    assert set(cases.values()) == {"paraphrase", "wrong_fact", "partial", "evasive", "refusal", "empty"}
    empty_ids = table.loc[table["generated_empty"], "id"].tolist()
    assert [cases[i] for i in empty_ids] == ["empty"]


def test_hf_path_without_the_hub_fails_at_once_naming_the_hub(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(LoadError) as info:
        load_evaluation_set("hf://datasets/neural-bridge/rag-dataset-12000")
    assert "file hf://datasets/neural-bridge/rag-dataset-12000" in str(info.value)
    assert "Hugging Face hub" in str(info.value) and "not reachable" in str(info.value)


# ---------------------------------------------------------------- multi-turn conversations

CONVERSATION = [{"role": "user", "content": "Hello, a question about the pier."},
                {"role": "assistant", "content": "Which pier?"},
                {"role": "user", "content": "Pier 1. What colour is its lantern?"},
                {"role": "assistant", "content": "It is ochre."}]


def test_conversation_round_trips_through_the_canonical_table(tmp_path):
    rows = [example(1, generated_answer="It is ochre.", conversation=CONVERSATION),
            example(2, generated_answer="Ochre.")]
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    table = load_evaluation_set(str(path)).table
    written = tmp_path / "canonical.parquet"
    pq.write_table(canonical_arrow(table), written)
    back = read_canonical(written)
    assert [dict(turn) for turn in back["conversation"][0]] == CONVERSATION
    assert back["conversation"][1] is None


@pytest.mark.parametrize("bad", [[], [{"role": "user"}], [{"role": "user", "content": 3}], "hello"])
def test_a_malformed_conversation_names_file_column_and_row(tmp_path, bad):
    rows = [example(1, generated_answer="g"), example(2, generated_answer="g", conversation=bad)]
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "conversation", [2])

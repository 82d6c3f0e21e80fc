"""Tests for evalbook.calibrate.labels: reading a file of human labels and matching it to a run.

Every labels file is small, invented, and written into tmp_path. Row numbers are 1-based: a CSV
row excludes the header, a JSONL row is its line.
"""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalbook.calibrate.labels import LabelError, Labels, Matched, match_labels, read_labels
from evalbook.load import LoadError

LABEL_FORMATS = ["csv", "jsonl"]


# ---------------------------------------------------------------- helpers

def write_labels(tmp_path: Path, fmt: str, rows: list[dict], name: str = "labels") -> str:
    """Write `rows` as a labels file; in CSV every value is text, and None is an empty cell."""
    path = tmp_path / f"{name}.{fmt}"
    if fmt == "csv":
        header = list(dict.fromkeys(key for row in rows for key in row))
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            for row in rows:
                writer.writerow(["" if row.get(key) is None else str(row.get(key))
                                 for key in header])
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def write_parquet(tmp_path: Path, columns: dict, schema: pa.Schema | None = None) -> str:
    path = tmp_path / "labels.parquet"
    pq.write_table(pa.table(columns, schema=schema), path)
    return str(path)


def rows_text(rows: list[int]) -> str:
    return f"row{'s' if len(rows) > 1 else ''} {', '.join(str(r) for r in rows)}"


def assert_names(error: LoadError, path: str, column: str, rows: list[int] | None = None):
    """The message names the file, the column and the rows, and the attributes agree."""
    message = str(error)
    assert isinstance(error, LabelError)
    assert f"file {path}" in message, message
    assert f"column {column!r}" in message, message
    assert error.column == column
    if rows is not None:
        assert rows_text(rows) + ":" in message, message
        assert error.rows == rows


def labelled(*labels, **columns) -> list[dict]:
    """Rows with ids ex1, ex2, ... and the given labels; `columns` adds a list per column."""
    rows = [{"id": f"ex{i}", "label": label} for i, label in enumerate(labels, start=1)]
    for name, values in columns.items():
        for row, value in zip(rows, values):
            row[name] = value
    return rows


def read_rows(tmp_path: Path, fmt: str, rows: list[dict], kind: str | None = None) -> Labels:
    return read_labels(write_labels(tmp_path, fmt, rows), kind)


def raises_label_error(tmp_path, fmt, rows, kind=None) -> tuple[LabelError, str]:
    path = write_labels(tmp_path, fmt, rows)
    with pytest.raises(LabelError) as info:
        read_labels(path, kind)
    return info.value, path


# ---------------------------------------------------------------- reading the columns

@pytest.mark.parametrize("fmt", [*LABEL_FORMATS, "parquet"])
def test_reads_ids_labels_raters_notes_and_rows(tmp_path, fmt):
    rows = labelled("4", "2", "5", rater=["ana", "ben", "ana"], note=["terse", "", "fine"])
    if fmt != "csv":
        for row, number in zip(rows, (4, 2, 5)):
            row["label"] = number
    labels = read_rows(tmp_path, fmt, rows)
    table = labels.table
    assert list(table.columns) == ["id", "label", "rater", "note", "row"]
    assert table["id"].tolist() == ["ex1", "ex2", "ex3"]
    assert table["label"].dtype == np.float64
    assert table["label"].tolist() == [4.0, 2.0, 5.0]
    assert table["rater"].tolist() == ["ana", "ben", "ana"]
    assert table["note"].tolist() == ["terse", None, "fine"]
    assert table["row"].tolist() == [1, 2, 3]
    assert labels.raters == ("ana", "ben")
    assert labels.ignored_columns == ()


def test_without_rater_column_every_rater_is_none(tmp_path):
    labels = read_rows(tmp_path, "csv", labelled("1", "0"))
    assert labels.table["rater"].tolist() == [None, None]
    assert labels.table["note"].tolist() == [None, None]
    assert labels.raters == ()


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_other_columns_are_kept_out_and_named(tmp_path, fmt):
    labels = read_rows(tmp_path, fmt, labelled("3", "4", score=["0.1", "0.2"], who=["x", "y"]))
    assert labels.ignored_columns == ("score", "who")
    assert list(labels.table.columns) == ["id", "label", "rater", "note", "row"]


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
@pytest.mark.parametrize("column", ["id", "label"])
def test_missing_required_column(tmp_path, fmt, column):
    rows = labelled("3", "4", note=["a", "b"])
    for row in rows:
        del row[column]
    error, path = raises_label_error(tmp_path, fmt, rows)
    assert_names(error, path, column)
    assert "required column is missing (columns present: " in str(error)


@pytest.mark.parametrize(("fmt", "message"), [
    ("csv", "has a header but no data rows"),
    ("jsonl", "holds no JSON lines"),
    ("parquet", "has no rows"),
])
def test_file_with_no_rows_is_the_readers_error(tmp_path, fmt, message):
    path = tmp_path / f"labels.{fmt}"
    if fmt == "parquet":
        empty = {"id": pa.array([], pa.string()), "label": pa.array([], pa.int64())}
        pq.write_table(pa.table(empty), path)
    else:
        path.write_text("id,label\n" if fmt == "csv" else "\n\n", encoding="utf-8")
    with pytest.raises(LoadError, match=message):
        read_labels(str(path))


# ---------------------------------------------------------------- ids

@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_missing_or_empty_id_names_the_rows(tmp_path, fmt):
    rows = [{"id": "ex1", "label": 3}, {"id": "", "label": 4}, {"id": "ex3", "label": 5},
            {"id": "  ", "label": 2}]
    if fmt == "jsonl":
        rows[2] = {"id": None, "label": 5}
        rows.append({"label": 1})
    error, path = raises_label_error(tmp_path, fmt, rows)
    assert_names(error, path, "id", [2, 4] if fmt == "csv" else [2, 3, 4, 5])
    assert "every row needs the id of the example it labels" in str(error)


def test_id_that_is_not_a_string_or_integer_jsonl(tmp_path):
    rows = [{"id": 1, "label": 3}, {"id": 2.5, "label": 4}, {"id": True, "label": 5}]
    error, path = raises_label_error(tmp_path, "jsonl", rows)
    assert_names(error, path, "id", [2, 3])
    assert "ids must be strings or integers; found 2.5, True" in str(error)


def test_integer_ids_are_read_as_text(tmp_path):
    labels = read_labels(write_parquet(tmp_path, {"id": [7, 8], "label": [1, 0]}))
    assert labels.table["id"].tolist() == ["7", "8"]
    labels = read_rows(tmp_path, "jsonl", [{"id": 7, "label": 1}, {"id": "8", "label": 0}])
    assert labels.table["id"].tolist() == ["7", "8"]


# ---------------------------------------------------------------- label values

def missing_label_rows(fmt: str) -> list[dict]:
    rows = labelled("3", "", "4", " ")
    if fmt == "jsonl":
        rows[2] = {"id": "ex3", "label": None}
        rows[3] = {"id": "ex4"}
    return rows


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_missing_or_empty_label_names_the_rows(tmp_path, fmt):
    error, path = raises_label_error(tmp_path, fmt, missing_label_rows(fmt))
    assert_names(error, path, "label", [2, 4] if fmt == "csv" else [2, 3, 4])
    assert "every row needs a label" in str(error)


def test_null_label_in_parquet_names_the_row(tmp_path):
    path = write_parquet(tmp_path, {"id": ["a", "b", "c"], "label": [4.0, None, 2.0]})
    with pytest.raises(LabelError) as info:
        read_labels(path)
    assert_names(info.value, path, "label", [2])


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_nan_or_infinite_label_is_an_error(tmp_path, fmt):
    rows = labelled("3", "nan", "-Infinity", "4", " inf ", "1e999")
    error, path = raises_label_error(tmp_path, fmt, rows)
    assert_names(error, path, "label", [2, 3, 5, 6])
    assert "must be finite numbers; found 'nan', '-Infinity', ' inf ', ..." in str(error)


def test_infinite_number_in_jsonl_and_parquet(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text('{"id": "a", "label": 2}\n{"id": "b", "label": Infinity}\n', encoding="utf-8")
    with pytest.raises(LabelError) as info:
        read_labels(str(path))
    assert_names(info.value, str(path), "label", [2])
    assert "found inf" in str(info.value)
    parquet = write_parquet(tmp_path, {"id": ["a", "b"], "label": [float("-inf"), 3.0]})
    with pytest.raises(LabelError) as info:
        read_labels(parquet)
    assert_names(info.value, parquet, "label", [1])


def test_integer_too_large_for_a_float_jsonl(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text('{"id": "a", "label": 2}\n{"id": "b", "label": 1' + "0" * 400 + "}\n",
                    encoding="utf-8")
    with pytest.raises(LabelError) as info:
        read_labels(str(path))
    assert_names(info.value, str(path), "label", [2])
    assert "labels must be finite numbers" in str(info.value)


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_text_that_is_neither_a_word_nor_a_number(tmp_path, fmt):
    rows = labelled("good", "3", "4 stars", "\x1b[31mred", "1_0", "\u0664", "okay")
    error, path = raises_label_error(tmp_path, fmt, rows)
    # 1_0 and the Arabic-Indic digit four are numbers to Python's float(), but not as written.
    assert_names(error, path, "label", [1, 3, 4, 5, 6, 7])
    message = str(error)
    assert ("must be pass/fail, true/false, yes/no or a number; found 'good', '4 stars', "
            "'\\x1b[31mred', ...") in message
    assert "\x1b" not in message


def test_a_list_is_not_a_label_jsonl(tmp_path):
    error, path = raises_label_error(tmp_path, "jsonl", labelled(3, [4]))
    assert_names(error, path, "label", [2])
    assert "found [4]" in str(error)


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_binary_words_ignore_case_and_surrounding_spaces(tmp_path, fmt):
    labels = read_rows(tmp_path, fmt, labelled(" Pass ", "FAIL", "Yes", "no", "true", "False"))
    assert labels.table["label"].tolist() == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert labels.kind == "binary"


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_booleans_are_binary(tmp_path, fmt):
    labels = read_rows(tmp_path, fmt, labelled(True, False, True))
    assert labels.table["label"].tolist() == [1.0, 0.0, 1.0]
    assert labels.kind == "binary"


def test_booleans_with_a_null_in_parquet(tmp_path):
    path = write_parquet(tmp_path, {"id": ["a", "b", "c"], "label": [True, None, False]})
    with pytest.raises(LabelError) as info:
        read_labels(path)
    assert_names(info.value, path, "label", [2])


def test_typed_numbers_in_parquet(tmp_path):
    schema = pa.schema([("id", pa.string()), ("label", pa.int8())])
    labels = read_labels(write_parquet(tmp_path, {"id": ["a", "b", "c"], "label": [1, 5, 3]},
                                       schema))
    assert labels.table["label"].tolist() == [1.0, 5.0, 3.0]
    assert labels.kind == "ordinal"
    labels = read_labels(write_parquet(tmp_path, {"id": ["a", "b"], "label": [0.25, 0.5]}))
    assert labels.kind == "continuous"
    schema = pa.schema([("id", pa.string()), ("label", pa.decimal128(3, 1))])
    decimals = {"id": ["a", "b"], "label": [Decimal("4.0"), Decimal("2.5")]}
    labels = read_labels(write_parquet(tmp_path, decimals, schema))
    assert labels.table["label"].tolist() == [4.0, 2.5]


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_numeric_text_is_read_as_numbers(tmp_path, fmt):
    labels = read_rows(tmp_path, fmt, labelled("4", " 3.5", "-1", ".5", "2e0"))
    assert labels.table["label"].tolist() == [4.0, 3.5, -1.0, 0.5, 2.0]


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_binary_words_mixed_with_other_numbers(tmp_path, fmt):
    rows = labelled("1", "4", "pass", "2", "fail")
    error, path = raises_label_error(tmp_path, fmt, rows)
    assert_names(error, path, "label", [2, 3])
    assert ("mixes pass/fail, true/false or yes/no (first in row 3: 'pass') with numbers other "
            "than 0 and 1 (first in row 2: '4')") in str(error)


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_binary_words_with_0_and_1_are_binary(tmp_path, fmt):
    labels = read_rows(tmp_path, fmt, labelled("pass", "0", "1", "no"))
    assert labels.table["label"].tolist() == [1.0, 0.0, 1.0, 0.0]
    assert labels.kind == "binary"


# ---------------------------------------------------------------- the label kind

def test_unknown_kind_lists_the_three(tmp_path):
    path = write_labels(tmp_path, "csv", labelled("1", "2"))
    with pytest.raises(LabelError) as info:
        read_labels(path, "likert")
    assert_names(info.value, path, "label")
    assert ("label kind 'likert' is not one of 'ordinal', 'binary', 'continuous' "
            "(--label-kind)") in str(info.value)


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_declared_ordinal_needs_whole_numbers(tmp_path, fmt):
    error, path = raises_label_error(tmp_path, fmt, labelled("4", "3.5", "2", "4.25"), "ordinal")
    assert_names(error, path, "label", [2, 4])
    assert ("declared ordinal, so every label must be a whole number; found '3.5', '4.25'; "
            "declare --label-kind continuous for labels with fractions") in str(error)


def test_declared_ordinal_takes_whole_numbers_written_as_floats(tmp_path):
    labels = read_rows(tmp_path, "jsonl", labelled(4.0, 2, 1.0), "ordinal")
    assert labels.kind == "ordinal"
    assert labels.kind_reason == "declared"


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_declared_binary_needs_binary_values(tmp_path, fmt):
    error, path = raises_label_error(tmp_path, fmt, labelled("1", "0", "2", "0.5"), "binary")
    assert_names(error, path, "label", [3, 4])
    assert ("declared binary, so every label must be pass/fail, true/false, yes/no or 0/1; "
            "found '2', '0.5'; declare --label-kind ordinal or continuous for a scale"
            ) in str(error)


def test_declared_kind_overrides_inference(tmp_path):
    labels = read_rows(tmp_path, "csv", labelled("1", "0", "1"), "continuous")
    assert (labels.kind, labels.kind_reason) == ("continuous", "declared")
    labels = read_rows(tmp_path, "csv", labelled("1", "0", "1"), "ordinal")
    assert labels.kind == "ordinal"


def test_inferred_ordinal_states_the_scale(tmp_path):
    labels = read_rows(tmp_path, "csv", labelled("1", "5", "3", "2", "4", "4"))
    assert labels.kind == "ordinal"
    assert labels.kind_reason == ("inferred: whole numbers 1-5 (5 levels); "
                                  "declare another with --label-kind")


def test_inferred_ordinal_with_eleven_levels(tmp_path):
    labels = read_rows(tmp_path, "csv", labelled(*[str(n) for n in range(11)]))
    assert labels.kind == "ordinal"
    assert labels.kind_reason.startswith("inferred: whole numbers 0-10 (11 levels)")


def test_inferred_continuous_from_twelve_whole_levels(tmp_path):
    labels = read_rows(tmp_path, "csv", labelled(*[str(n) for n in range(12)]))
    assert labels.kind == "continuous"
    assert labels.kind_reason == ("inferred: whole numbers 0-11 (12 levels, more than the 11 of "
                                  "an ordinal scale); declare another with --label-kind")


def test_inferred_continuous_from_fractions(tmp_path):
    labels = read_rows(tmp_path, "csv", labelled("0.25", "1", "0.75"))
    assert labels.kind == "continuous"
    assert labels.kind_reason == ("inferred: numbers 0.25 to 1, not all whole; "
                                  "declare another with --label-kind")


@pytest.mark.parametrize(("values", "reason"), [
    (("0", "1", "1"), "inferred: only the values 0 and 1"),
    (("pass", "fail"), "inferred: only pass/fail, true/false or yes/no"),
    (("yes", "0"), "inferred: only pass/fail, true/false or yes/no, and 0/1"),
])
def test_inferred_binary_states_why(tmp_path, values, reason):
    labels = read_rows(tmp_path, "csv", labelled(*values))
    assert labels.kind == "binary"
    assert labels.kind_reason == f"{reason}; declare another with --label-kind"


# ---------------------------------------------------------------- raters, notes, duplicates

@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_empty_rater_names_the_rows(tmp_path, fmt):
    rows = labelled("3", "4", "5", rater=["ana", "", "ben"])
    if fmt == "jsonl":
        rows[2]["rater"] = None
    error, path = raises_label_error(tmp_path, fmt, rows)
    assert_names(error, path, "rater", [2] if fmt == "csv" else [2, 3])
    assert "leave the rater column out" in str(error)


def test_rater_that_is_not_text_jsonl(tmp_path):
    error, path = raises_label_error(tmp_path, "jsonl", labelled(3, 4, rater=["ana", 1.5]))
    assert_names(error, path, "rater", [2])
    assert "found 1.5" in str(error)


def test_note_that_is_not_text_jsonl(tmp_path):
    error, path = raises_label_error(tmp_path, "jsonl", labelled(3, 4, note=["ok", 7]))
    assert_names(error, path, "note", [2])
    assert "found 7" in str(error)


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_duplicate_id_and_rater_names_both_rows(tmp_path, fmt):
    rows = labelled("3", "4", "5", "2", rater=["ana", "ben", "ben", "ana"])
    rows[3]["id"] = "ex1"
    error, path = raises_label_error(tmp_path, fmt, rows)
    assert_names(error, path, "id", [1, 4])
    assert "rater 'ana' labels id 'ex1' more than once (rows 1 and 4)" in str(error)


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_duplicate_id_without_rater_column_says_to_add_one(tmp_path, fmt):
    rows = labelled("3", "4", "5")
    rows[2]["id"] = "ex2"
    error, path = raises_label_error(tmp_path, fmt, rows)
    assert_names(error, path, "id", [2, 3])
    assert "duplicate id(s) 'ex2'" in str(error)
    assert "add a 'rater' column" in str(error)


# ---------------------------------------------------------------- one row per example

def rated(tmp_path, rows: list[tuple[str, str, str, str]], kind: str | None = None) -> Labels:
    """Labels from (id, rater, label, note) rows."""
    records = [{"id": i, "rater": r, "label": label, "note": note} for i, r, label, note in rows]
    return read_labels(write_labels(tmp_path, "csv", records), kind)


def test_per_example_median_of_two_and_three_raters(tmp_path):
    labels = rated(tmp_path, [
        ("q2", "ana", "3", ""), ("q1", "ana", "2", "vague"), ("q2", "ben", "4", "good"),
        ("q1", "ben", "5", ""), ("q1", "cyd", "4", "ok"), ("q3", "cyd", "1", ""),
    ])
    summary = labels.per_example()
    assert list(summary.columns) == ["id", "label", "n_raters", "notes"]
    assert summary["id"].tolist() == ["q2", "q1", "q3"]
    assert summary["label"].tolist() == [3.5, 4.0, 1.0]
    assert summary["n_raters"].tolist() == [2, 3, 1]
    assert summary["notes"].tolist() == ["ben: good", "ana: vague | cyd: ok", None]


def test_per_example_binary_share_saying_pass(tmp_path):
    labels = rated(tmp_path, [
        ("q1", "ana", "pass", ""), ("q1", "ben", "fail", ""), ("q1", "cyd", "pass", ""),
        ("q2", "ana", "fail", ""), ("q2", "ben", "pass", ""),
    ])
    summary = labels.per_example()
    assert summary["label"].tolist() == pytest.approx([2 / 3, 0.5])


def test_per_example_notes_without_raters(tmp_path):
    labels = read_rows(tmp_path, "csv", labelled("3", "4", note=["too long", ""]))
    assert labels.per_example()["notes"].tolist() == ["too long", None]
    assert labels.per_example()["n_raters"].tolist() == [1, 1]


def test_passed_binary_share_and_tie(tmp_path):
    labels = rated(tmp_path, [
        ("q1", "ana", "pass", ""), ("q1", "ben", "pass", ""), ("q1", "cyd", "fail", ""),
        ("q2", "ana", "pass", ""), ("q2", "ben", "fail", ""),
        ("q3", "ana", "fail", ""), ("q3", "ben", "fail", ""), ("q3", "cyd", "pass", ""),
    ])
    passed = labels.passed(None)
    assert passed.dtype == "boolean"
    assert passed.index.tolist() == ["q1", "q2", "q3"]
    assert passed.tolist() == [True, pd.NA, False]
    assert labels.passed(4).tolist() == [True, pd.NA, False]  # the cut is for scales only


def test_passed_ordinal_cut_at_the_median(tmp_path):
    labels = rated(tmp_path, [
        ("q1", "ana", "4", ""), ("q1", "ben", "5", ""),
        ("q2", "ana", "3", ""), ("q2", "ben", "4", ""),
        ("q3", "ana", "4", ""),
    ])
    assert labels.passed(4).tolist() == [True, False, True]
    assert labels.passed(3.5).tolist() == [True, True, True]


def test_passed_needs_a_cut_for_ordinal_labels(tmp_path):
    labels = read_rows(tmp_path, "csv", labelled("1", "5", "3"))
    with pytest.raises(ValueError, match="ordinal labels need a cut .*: set --good-label-min"):
        labels.passed(None)


def test_ratings_matrix_places_nan_where_a_rater_gave_none(tmp_path):
    labels = rated(tmp_path, [
        ("q2", "ben", "3", ""), ("q1", "ana", "2", ""), ("q1", "ben", "5", ""),
        ("q3", "cyd", "1", ""), ("q2", "ana", "4", ""),
    ])
    raters, ids, matrix = labels.ratings_matrix()
    assert raters == ["ana", "ben", "cyd"]
    assert ids == ["q2", "q1", "q3"]
    assert matrix.shape == (3, 3)
    expected = np.array([[4, 2, np.nan], [3, 5, np.nan], [np.nan, np.nan, 1]])
    np.testing.assert_array_equal(matrix, expected)


def test_ratings_matrix_without_a_rater_column_has_no_rows(tmp_path):
    raters, ids, matrix = read_rows(tmp_path, "csv", labelled("3", "4")).ratings_matrix()
    assert (raters, ids, matrix.shape) == ([], ["ex1", "ex2"], (0, 2))


# ---------------------------------------------------------------- matching the run

def test_match_labels_counts_and_lists(tmp_path):
    labels = read_rows(tmp_path, "csv", labelled("3", "4", "5", "2"))  # ex1 .. ex4
    matched = match_labels(labels, ["ex3", "ex9", "ex1", "ex7", "ex2"], "run-a")
    assert isinstance(matched, Matched)
    assert matched.ids == ("ex3", "ex1", "ex2")
    assert matched.unknown_ids == ("ex4",)
    assert matched.unlabelled_ids == ("ex9", "ex7")
    assert (matched.n_matched, matched.n_unknown, matched.n_unlabelled) == (3, 1, 2)


def test_match_labels_counts_each_id_once_with_several_raters(tmp_path):
    labels = rated(tmp_path, [("q1", "ana", "3", ""), ("q1", "ben", "4", ""),
                              ("q2", "ana", "2", ""), ("q3", "ben", "5", "")])
    matched = match_labels(labels, ["q1", "q3"], "run-a")
    assert (matched.ids, matched.unknown_ids) == (("q1", "q3"), ("q2",))


def test_no_label_id_in_the_run(tmp_path):
    path = write_labels(tmp_path, "csv", labelled("3", "4", "5", "2"))
    with pytest.raises(LabelError) as info:
        match_labels(read_labels(path), ["a1", "a2"], "2026-12-01-run")
    assert_names(info.value, path, "id")
    assert (f"none of the 4 ids in {path} is an example of run 2026-12-01-run (label ids 'ex1', "
            "'ex2', 'ex3', ...; run ids 'a1', 'a2')") in str(info.value)


def test_no_label_id_in_the_run_says_when_ids_differ_only_by_case_or_spaces(tmp_path):
    path = write_labels(tmp_path, "csv", labelled("3", "4"))
    with pytest.raises(LabelError) as info:
        match_labels(read_labels(path), ["EX1", " ex2"], "run-b")
    message = str(info.value)
    assert f"none of the 2 ids in {path} is an example of run run-b" in message
    assert ("differ from the run's only in case and leading or trailing spaces (for example "
            "'ex1' vs 'EX1', 'ex2' vs ' ex2')") in message


@pytest.mark.parametrize(("label_ids", "run_ids", "shown"), [
    (["ex1"], ["ex1", "ex2", "ex3"], "only 1 of the 1 ids in"),  # one labelled example in all
    (["ex1", "ex8", "ex9"], ["ex1", "ex2"], "only 1 of the 3 ids in"),  # one of them in the run
])
def test_a_single_labelled_example_of_the_run_is_refused_with_the_minimum(tmp_path, label_ids, run_ids,
                                                                           shown):
    path = write_labels(tmp_path, "csv", [{"id": i, "label": "4"} for i in label_ids])
    with pytest.raises(LabelError) as info:
        match_labels(read_labels(path), run_ids, "run-c")
    assert_names(info.value, path, "id", [1])
    message = str(info.value)
    assert f"{shown} {path} ('ex1') is an example of run run-c" in message, message
    assert "at least 2 labelled examples" in message, message


# ---------------------------------------------------------------- files that are not labels files

def empty_file(tmp_path: Path) -> str:
    path = tmp_path / "labels.csv"
    path.write_bytes(b"")
    return str(path)


def header_only(tmp_path: Path) -> str:
    path = tmp_path / "labels.csv"
    path.write_text("id,label\n", encoding="utf-8")
    return str(path)


def missing(tmp_path: Path) -> str:
    return str(tmp_path / "missing.csv")


def latin1_labels(tmp_path: Path) -> str:
    path = tmp_path / "labels.csv"
    path.write_bytes("id,label,note\nex1,4,caf\u00e9\n".encode("latin-1"))
    return str(path)


def directory(tmp_path: Path) -> str:
    path = tmp_path / "labels.csv"
    path.mkdir()
    return str(path)


@pytest.mark.parametrize(("make", "said"), [
    (empty_file, "the file is empty (0 bytes): there are no labels to calibrate with"),
    (header_only, "has a header but no data rows: there are no labels to calibrate with"),
    (latin1_labels, "byte 0xe9 on line 2, character 10, is not UTF-8"),
    (directory, "is a folder, not a labels file"),
    (missing, "no such file"),
], ids=["empty", "header only", "latin-1", "a folder", "missing"])
def test_a_path_that_is_no_labels_file_is_a_label_error_in_the_labels_words(tmp_path, make, said):
    path = make(tmp_path)
    with pytest.raises(LabelError) as info:  # the command line turns a LabelError into one line
        read_labels(path)
    message = str(info.value)
    assert message.startswith(f"file {path}"), message
    assert said in message, message
    assert "nothing to score" not in message and "file not found" not in message, message


# ---------------------------------------------------------------- values off the scale most labels use

def one_to_five(*extra: str) -> list[dict]:
    """Two labels at each of 1-5 (ex1 .. ex10), then `extra` (ex11, ...)."""
    return labelled(*[str(n) for n in (1, 2, 3, 4, 5) * 2], *extra)


@pytest.mark.parametrize("fmt", LABEL_FORMATS)
def test_values_off_the_scale_most_labels_use_are_refused_by_row_and_id(tmp_path, fmt):
    error, path = raises_label_error(tmp_path, fmt, one_to_five("7", "-3", "99"))
    assert_names(error, path, "label", [11, 12, 13])
    message = str(error)
    assert ("3 labels lie outside 1-5, the range the other 10 labels use: 7 (row 11, id 'ex11'), "
            "-3 (row 12, id 'ex12'), 99 (row 13, id 'ex13')") in message, message
    assert "--label-kind continuous" in message, message


@pytest.mark.parametrize("value", ["7", "-3", "99", "12"])
def test_each_value_off_the_scale_is_refused_alone(tmp_path, value):
    error, path = raises_label_error(tmp_path, "csv", one_to_five(value))
    assert_names(error, path, "label", [11])
    assert f"1 label lies outside 1-5, the range the other 10 labels use: {value} (row 11, id 'ex11')" \
        in str(error), str(error)


def test_a_declared_ordinal_kind_is_checked_too(tmp_path):
    error, path = raises_label_error(tmp_path, "csv", one_to_five("7"), kind="ordinal")
    assert_names(error, path, "label", [11])


def test_declaring_the_labels_continuous_accepts_values_off_the_scale(tmp_path):
    labels = read_rows(tmp_path, "csv", one_to_five("7", "-3", "99"), "continuous")
    assert sorted(labels.table["label"])[:2] == [-3.0, 1.0] and labels.table["label"].max() == 99.0


@pytest.mark.parametrize("values", [
    ("1", "3", "4", "5", "5", "3") * 2,  # a 1-5 scale on which nobody gave a 2
    ("2", "3", "2", "3", "4", "3") * 2,  # a 1-5 scale whose labels cluster low: 4 is the next level
    ("1", "2", "3", "4", "5", "1", "2", "3", "4", "5", "6", "7"),  # a 1-7 scale, its top rarely used
    ("1", "1", "1", "1", "2", "3", "4", "5") * 2,  # mostly 1s on a 1-5 scale
    ("1", "3", "5") * 4,  # every other level of a 1-5 scale
    tuple(str(n) for n in range(12)),  # 0-11: twelve levels
    ("0.25", "1", "0.75", "0") * 3,  # fractions of 0-1
    ("4", "3.5", "-1", "0.5", "2") * 2,  # a measure spread evenly, with no common scale of its own
    ("-2", "-1", "0", "1", "2", "0") * 2,  # a scale around 0
    ("0", "1", "1", "0") * 3,
    ("1", "2", "3", "4", "5", "1", "2", "3", "4", "5", "0"),  # 0 beside 1-5: a 0-5 scale, perhaps
    ("1", "2", "3", "4", "5", "1", "2", "99", "4"),  # nine labels: too few to tell a scale by
])
def test_labels_on_one_scale_pass_the_check(tmp_path, values):
    assert len(read_rows(tmp_path, "csv", labelled(*values)).table) == len(values)

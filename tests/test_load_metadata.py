"""Input columns evalbook does not read are kept as metadata, typed, in every format (issue 26, item 1)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalbook.load import (METADATA, LoadError, canonical_arrow, load_evaluation_set, metadata_of,
                           read_canonical)
from evalbook.validation import validate_report
from paths import ROOT

ROWS = [{"id": f"e{i}", "question": f"q{i}", "context": "c", "answer": "a", "generated_answer": "g",
         "domain": ["bank", "council", "bank", None][i], "difficulty": [1, 2, None, 3][i],
         "score": [0.5, 1.5, 2.0, None][i], "hard": [True, False, None, True][i]} for i in range(4)]
EXPECTED = [{"domain": "bank", "difficulty": 1, "score": 0.5, "hard": True},
            {"domain": "council", "difficulty": 2, "score": 1.5, "hard": False},
            {"domain": "bank", "difficulty": None, "score": 2.0, "hard": None},
            {"domain": None, "difficulty": 3, "score": None, "hard": True}]
TYPES = {"domain": "string", "difficulty": "integer", "score": "float", "hard": "boolean"}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")
    return path


def write_csv(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({key: "" if value is None else str(value).lower() if isinstance(value, bool) else value
                             for key, value in row.items()})
    return path


def write_parquet(path: Path, rows: list[dict]) -> Path:
    schema = pa.schema([(name, pa.string()) for name in ("id", "question", "context", "answer", "generated_answer",
                                                         "domain")]
                       + [("difficulty", pa.int64()), ("score", pa.float64()), ("hard", pa.bool_())])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


@pytest.mark.parametrize("write", [write_jsonl, write_csv, write_parquet], ids=["jsonl", "csv", "parquet"])
def test_every_unread_column_is_kept_with_its_type_in_each_format(tmp_path, write):
    path = write(tmp_path / f"examples.{write.__name__.removeprefix('write_')}", ROWS)
    result = load_evaluation_set(str(path))
    assert metadata_of(result.table) == EXPECTED
    assert {column.name: column.type for column in result.metadata} == TYPES
    described = {column.name: (column.n_distinct, column.n_missing, column.file) for column in result.metadata}
    assert described == {"domain": (2, 1, "input_path"), "difficulty": (3, 1, "input_path"),
                         "score": (3, 1, "input_path"), "hard": (2, 1, "input_path")}


def test_metadata_survives_the_canonical_parquet(tmp_path):
    result = load_evaluation_set(str(write_jsonl(tmp_path / "x.jsonl", ROWS)))
    pq.write_table(canonical_arrow(result.table), tmp_path / "canonical.parquet")
    assert metadata_of(read_canonical(tmp_path / "canonical.parquet")) == EXPECTED


def test_a_csv_column_of_numbers_with_text_stays_text(tmp_path):
    rows = [{**row, "code": code} for row, code in zip(ROWS, ["7", "007", "x7", ""])]
    result = load_evaluation_set(str(write_csv(tmp_path / "x.csv", rows)))
    assert [meta["code"] for meta in metadata_of(result.table)] == ["7", "007", "x7", None]


def test_predictions_file_columns_are_kept_and_an_example_without_a_prediction_has_null(tmp_path):
    examples = [{key: row[key] for key in ("id", "question", "context", "answer")} for row in ROWS]
    predictions = [{"id": "e0", "generated_answer": "g", "latency_band": "fast"},
                   {"id": "e1", "generated_answer": "g", "latency_band": "slow"}]
    result = load_evaluation_set(str(write_jsonl(tmp_path / "x.jsonl", examples)),
                                 str(write_jsonl(tmp_path / "p.jsonl", predictions)))
    assert [meta["latency_band"] for meta in metadata_of(result.table)] == ["fast", "slow", None, None]
    assert [(column.name, column.file) for column in result.metadata] == [("latency_band", "predictions_path")]


def test_the_sample_carries_its_domain():
    result = load_evaluation_set(str(ROOT / "data/sample/examples.jsonl"),
                                 str(ROOT / "data/sample/predictions.jsonl"))
    (column,) = result.metadata
    assert (column.name, column.type, column.n_distinct, column.n_missing) == ("domain", "string", 9, 0)


def refusal(tmp_path, rows: list[dict]) -> LoadError:
    with pytest.raises(LoadError) as caught:
        load_evaluation_set(str(write_jsonl(tmp_path / "x.jsonl", rows)))
    return caught.value


@pytest.mark.parametrize("value", [["a", "b"], {"a": 1}])
def test_a_nested_value_is_refused_naming_the_file_the_column_and_the_row(tmp_path, value):
    rows = [dict(row) for row in ROWS]
    rows[2]["domain"] = value
    error = refusal(tmp_path, rows)
    assert (error.file, error.column, error.rows) == (str(tmp_path / "x.jsonl"), "domain", [3])
    assert "flatten it" in str(error)


def test_a_column_that_mixes_types_is_refused_with_the_rows_of_the_rarer_type(tmp_path):
    rows = [dict(row) for row in ROWS]
    rows[1]["difficulty"] = "two"
    error = refusal(tmp_path, rows)
    assert (error.column, error.rows) == ("difficulty", [2]) and "mixes integer and string" in str(error)


@pytest.mark.parametrize("name", ["", "  ", "metadata", "reference_answer", "bertscore_f1", "top_k_match", "flags"])
def test_an_empty_name_or_one_of_evalbooks_own_is_refused(tmp_path, name):
    error = refusal(tmp_path, [{**row, name: "x"} for row in ROWS])
    assert error.column == name and error.file == str(tmp_path / "x.jsonl")


def test_an_infinite_number_is_refused(tmp_path):
    path = tmp_path / "x.parquet"
    frame = pd.DataFrame(ROWS).assign(score=[1.0, float("inf"), 2.0, 3.0])
    frame[["id", "question", "context", "answer", "generated_answer", "score"]].to_parquet(path)
    with pytest.raises(LoadError) as caught:
        load_evaluation_set(str(path))
    assert (caught.value.column, caught.value.rows) == ("score", [2])


def test_the_same_metadata_column_in_both_files_is_refused(tmp_path):
    examples = [{key: row[key] for key in ("id", "question", "context", "answer", "domain")} for row in ROWS]
    predictions = [{"id": "e0", "generated_answer": "g", "domain": "bank"}]
    with pytest.raises(LoadError, match="also in the predictions file") as caught:
        load_evaluation_set(str(write_jsonl(tmp_path / "x.jsonl", examples)),
                            str(write_jsonl(tmp_path / "p.jsonl", predictions)))
    assert caught.value.column == "domain"


def test_no_metadata_is_an_empty_object_per_example(tmp_path):
    rows = [{key: row[key] for key in ("id", "question", "context", "answer", "generated_answer")} for row in ROWS]
    result = load_evaluation_set(str(write_jsonl(tmp_path / "x.jsonl", rows)))
    assert result.metadata == [] and set(result.table[METADATA]) == {"{}"}


def test_the_report_schema_takes_an_examples_metadata_and_refuses_a_nested_one():
    from test_report import make_report

    report = make_report()
    assert [example["metadata"] for example in report["examples"]][:3] == [
        {"domain": "bank"}, {"domain": "bank"}, {"domain": "council"}]
    validate_report(report)
    report["examples"][0]["metadata"] = {"domain": ["bank"]}
    with pytest.raises(Exception, match="domain"):
        validate_report(report)

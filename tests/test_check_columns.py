"""Check columns of the evaluation set (`check_<check>`): read by 01_load, never metadata,
carried to the canonical table, and applied by the run's checks to their own row."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from evalbook.__main__ import main
from evalbook.checks.checksfile import CheckColumnsError
from evalbook.checks.run import check_settings, run_checks
from evalbook.load import LoadError, load_evaluation_set, metadata_column_names, read_canonical
from paths import DEFAULT_PROFILE

FACTS_OFF = {"facts": {"enabled": False, "fail_beyond_reference": False, "fail_missing": False}, "path": None}
HEADER = ["id", "question", "context", "answer", "generated_answer", "topic",
          "check_contains_ignore_case", "check_max_words", "check_number"]
ROWS = [
    ["r1", "How long is the refund window?", "Refunds within 14 days.", "14 days.", "You have 14 Days.",
     "refunds", "14 days", "5", '{"value": 14, "unit": "days"}'],
    ["r2", "How long is the refund window?", "Refunds within 14 days.", "14 days.",
     "You have ten days to ask for your money back.", "refunds", "14 days", "5", "14"],
    ["r3", "What colour is the sky?", "The sky is blue.", "Blue.", "Blue.", "sky", "", " ", ""],
]


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def outcomes_by_id(table, settings=None):
    outcomes = run_checks(table, settings or check_settings(FACTS_OFF))
    return {identifier: [(o.check, o.status) for o in example] for identifier, example in zip(table["id"], outcomes)}


def test_check_columns_are_not_metadata_and_apply_to_their_own_row(tmp_path):
    path = write_csv(tmp_path / "mine.csv", HEADER, ROWS)
    loaded = load_evaluation_set(str(path))
    assert [column.name for column in loaded.metadata] == ["topic"]
    assert json.loads(loaded.table["metadata"][0]) == {"topic": "refunds"}
    assert metadata_column_names(str(path)) == ["topic"]
    assert outcomes_by_id(loaded.table) == {
        "r1": [("check_contains_ignore_case", "pass"), ("check_max_words", "pass"), ("check_number", "pass")],
        "r2": [("check_contains_ignore_case", "fail"), ("check_max_words", "fail"), ("check_number", "fail")],
        "r3": [],  # every check cell empty: no check on this row
    }


def test_the_column_checks_come_after_the_fact_check_and_the_file_s_checks(tmp_path):
    from evalbook.checks.checksfile import parse_checks

    loaded = load_evaluation_set(str(write_csv(tmp_path / "mine.csv", HEADER, ROWS)))
    assertions = parse_checks({"version": 1, "checks": [{"name": "short", "max_words": 20}]}, "c.yaml")
    facts_on = {**FACTS_OFF, "facts": {**FACTS_OFF["facts"], "enabled": True}}
    assert outcomes_by_id(loaded.table, check_settings(facts_on, assertions))["r1"] == [
        ("facts", "pass"), ("short", "pass"), ("check_contains_ignore_case", "pass"), ("check_max_words", "pass"),
        ("check_number", "pass")]


def test_the_canonical_table_keeps_the_checks_through_parquet(tmp_path):
    from evalbook.load import canonical_arrow
    import pyarrow.parquet as pq

    loaded = load_evaluation_set(str(write_csv(tmp_path / "mine.csv", HEADER, ROWS)))
    path = tmp_path / "canonical.parquet"
    pq.write_table(canonical_arrow(loaded.table), path)
    assert outcomes_by_id(read_canonical(path)) == outcomes_by_id(loaded.table)


def test_a_jsonl_cell_is_the_value_itself(tmp_path):
    path = tmp_path / "mine.jsonl"
    rows = [{"id": "a", "question": "q", "context": "c", "answer": "ok", "generated_answer": "yes, ok",
             "check_not_contains": ["sorry", "cannot"], "check_contains_all": ["yes", "ok"]}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")
    loaded = load_evaluation_set(str(path))
    assert outcomes_by_id(loaded.table) == {"a": [("check_not_contains", "pass"), ("check_contains_all", "pass")]}


def test_a_bad_cell_is_refused_at_load_naming_the_file_the_column_and_the_row(tmp_path):
    rows = [row[:] for row in ROWS]
    rows[1][7] = "fifty"
    path = write_csv(tmp_path / "mine.csv", HEADER, rows)
    with pytest.raises(CheckColumnsError) as refused:
        load_evaluation_set(str(path))
    message = str(refused.value)
    assert str(path) in message
    assert "column 'check_max_words', row 2 (id 'r2')" in message and "'fifty'" in message


def test_a_column_that_names_no_check_is_refused_not_kept_as_metadata(tmp_path):
    path = write_csv(tmp_path / "mine.csv", [*HEADER[:6], "check_contain"], [row[:7] for row in ROWS])
    with pytest.raises(CheckColumnsError, match="'check_contain': names no check"):
        load_evaluation_set(str(path))


def test_check_columns_in_the_predictions_file_are_refused(tmp_path):
    examples = write_csv(tmp_path / "examples.csv", ["id", "question", "context", "answer"],
                         [["r1", "q", "c", "a"]])
    predictions = write_csv(tmp_path / "predictions.csv", ["id", "generated_answer", "check_contains"],
                            [["r1", "a", "a"]])
    with pytest.raises(LoadError) as refused:
        load_evaluation_set(str(examples), str(predictions))
    message = str(refused.value)
    assert str(predictions) in message and "check_contains" in message and "input_path" in message


def test_a_bad_check_column_exits_2_before_the_run_folder_is_written(tmp_path, capsys):
    rows = [row[:] for row in ROWS]
    rows[0][8] = "{not json"
    path = write_csv(tmp_path / "mine.csv", HEADER, rows)
    outputs = tmp_path / "outputs"
    code = main(["run", "--params", str(DEFAULT_PROFILE), "-p", f"input_path={path}", "-p", "predictions_path=null",
                 "-p", f"outputs_root={outputs}"])
    error = capsys.readouterr().err
    assert code == 2, error
    assert "column 'check_number', row 1 (id 'r1')" in error and "Traceback" not in error
    assert not outputs.exists() or not list(outputs.rglob("params.yaml"))


def test_a_file_check_named_as_a_check_column_is_refused_before_the_run(tmp_path, capsys):
    path = write_csv(tmp_path / "mine.csv", HEADER, ROWS)
    checks = tmp_path / "checks.yaml"
    checks.write_text(yaml.safe_dump({"version": 1, "checks": [{"name": "check_max_words", "max_words": 9}]}),
                      "utf-8")
    outputs = tmp_path / "outputs"
    code = main(["run", "--params", str(DEFAULT_PROFILE), "-p", f"input_path={path}", "-p", "predictions_path=null",
                 "-p", f"outputs_root={outputs}", "-p", f"checks.path={checks}"])
    error = capsys.readouterr().err
    assert code == 2, error
    assert "is also a check column of the evaluation set" in error


class _Stage:
    """What pipeline.answer_checks reads of a stage: the profile's checks and an artifact path."""

    def __init__(self, tmp_path: Path, checks: dict):
        self.profile = type("Profile", (), {"root": tmp_path, "__getitem__": lambda self, key: {"checks": checks}[key]})()
        self._folder = tmp_path

    def artifact(self, name: str) -> Path:
        return self._folder / name


def test_04_report_runs_check_columns_when_the_profile_asks_for_no_other_check(tmp_path):
    from evalbook.pipeline import answer_checks
    from evalbook.resultcache import ResultCache

    loaded = load_evaluation_set(str(write_csv(tmp_path / "mine.csv", HEADER, ROWS)))
    records, summary = answer_checks(_Stage(tmp_path, FACTS_OFF), loaded.table, ResultCache(None))
    assert list(summary["checks"]) == ["check_contains_ignore_case", "check_max_words", "check_number"]
    assert [len(example) for example in records] == [3, 3, 0]


def test_a_run_where_every_check_errors_fails(tmp_path):
    from evalbook.checks.protocol import NothingChecked
    from evalbook.pipeline import answer_checks
    from evalbook.resultcache import ResultCache

    table = load_evaluation_set(str(write_csv(tmp_path / "mine.csv", HEADER, ROWS))).table
    table["has_prediction"] = False  # no answer: every check that reads the answer errors
    facts_on = {**FACTS_OFF, "facts": {**FACTS_OFF["facts"], "enabled": True}}
    with pytest.raises(NothingChecked, match="every check errored on every example"):
        answer_checks(_Stage(tmp_path, facts_on), table, ResultCache(None))

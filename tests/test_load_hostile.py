"""evalbook.load against degenerate and hostile inputs.

Runs that would score nothing, ids that almost match, retrieval data that cannot be used,
CSV quoting that would alter text, bytes that are not UTF-8, a byte order mark, and inputs
read from S3 (moto's server on 127.0.0.1). All text is invented.
"""

from __future__ import annotations

import html
import json
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalbook.__main__ import main
from evalbook.load import LoadError, load_evaluation_set
from paths import DEFAULT_PROFILE, ROOT
from s3server import MotoServer, new_bucket, use_test_credentials
from test_load import assert_names, example, write_jsonl

HEADER = "id,question,context,answer,generated_answer\n"


def write_text(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


def predictions(path: Path, ids, **extra) -> Path:
    return write_jsonl(path, [{"id": i, "generated_answer": f"answer for {i}", **extra} for i in ids])


def four_examples(tmp_path: Path, **extra) -> Path:
    return write_jsonl(tmp_path / "examples.jsonl", [example(i, **extra) for i in range(1, 5)])


# ---------------------------------------------------------------- nothing to score

@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_a_zero_byte_input_says_the_file_is_empty(tmp_path, suffix):
    path = tmp_path / f"examples{suffix}"
    path.write_bytes(b"")
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path)
    assert "the file is empty (0 bytes)" in str(info.value)


def test_a_header_only_csv_has_no_examples(tmp_path):
    path = write_text(tmp_path / "examples.csv", HEADER)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path)
    assert "has a header but no data rows: nothing to score" in str(info.value)


def test_a_jsonl_of_blank_lines_has_no_examples(tmp_path):
    path = write_text(tmp_path / "examples.jsonl", "\n  \n\n")
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path)
    assert "holds no JSON lines (3 blank lines): nothing to score" in str(info.value)


def test_a_parquet_file_without_rows_has_no_examples(tmp_path):
    path = tmp_path / "examples.parquet"
    pq.write_table(pa.table({c: pa.array([], pa.string())
                             for c in ("question", "context", "answer", "generated_answer")}), path)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path)
    assert "has no rows: nothing to score" in str(info.value)


def test_an_empty_predictions_file_is_named(tmp_path):
    examples = four_examples(tmp_path)
    empty = write_text(tmp_path / "predictions.jsonl", "")
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(examples), str(empty))
    assert_names(info.value, empty)
    assert "the file is empty (0 bytes)" in str(info.value)


def test_prediction_ids_that_differ_only_in_case_fail_and_say_so(tmp_path):
    examples = four_examples(tmp_path)
    upper = predictions(tmp_path / "predictions.jsonl", ["EX1", "EX2", "EX3", "EX4"])
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(examples), str(upper))
    assert_names(info.value, upper, "id")
    message = str(info.value)
    assert f"0 of 4 predictions matched an example id in {examples}" in message
    assert "ids differ only in case" in message
    assert "'EX1' vs 'ex1'" in message


def test_prediction_ids_that_differ_only_in_spaces_fail_and_say_so(tmp_path):
    examples = four_examples(tmp_path)
    spaced = predictions(tmp_path / "predictions.jsonl", [" ex1", "ex2 ", "ex3\t", " ex4 "])
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(examples), str(spaced))
    message = str(info.value)
    assert "0 of 4 predictions matched an example id" in message
    assert "ids differ only in leading or trailing spaces" in message
    assert "' ex1' vs 'ex1'" in message


def test_prediction_ids_that_share_nothing_fail_with_examples_of_both(tmp_path):
    examples = four_examples(tmp_path)
    other = predictions(tmp_path / "predictions.jsonl", ["q-7", "q-8"])
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(examples), str(other))
    message = str(info.value)
    assert "0 of 2 predictions matched an example id" in message
    assert "differ only" not in message
    assert "prediction ids 'q-7', 'q-8'" in message and "example ids 'ex1', 'ex2', 'ex3'" in message


def test_every_example_incomplete_and_skipped_is_a_failure(tmp_path):
    rows = [example(1, answer=None), example(2, context=None), example(3, answer=None)]
    for row in rows:
        row["generated_answer"] = "ochre"
    path = write_jsonl(tmp_path / "examples.jsonl", rows)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path), skip_incomplete=True)
    assert_names(info.value, path, rows=[1, 2, 3])
    message = str(info.value)
    assert "all 3 examples are incomplete and were skipped (skip_incomplete_examples is true)" in message
    assert "missing: 'context' in 1 row, 'answer' in 2 rows" in message


def test_no_generated_answer_in_any_row_is_a_failure(tmp_path):
    path = write_jsonl(tmp_path / "examples.jsonl",
                       [example(i, generated_answer=None) for i in range(1, 4)])
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "generated_answer", [1, 2, 3])
    assert "no row has a generated answer: nothing to score" in str(info.value)


def test_every_matching_prediction_without_an_answer_is_a_failure(tmp_path):
    examples = four_examples(tmp_path)
    empty = write_jsonl(tmp_path / "predictions.jsonl",
                        [{"id": "ex1", "generated_answer": None}, {"id": "ex3", "generated_answer": None}])
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(examples), str(empty))
    assert_names(info.value, empty, "generated_answer", [1, 2])
    assert "none of the 2 predictions that matched an example has a generated answer" in str(info.value)


def test_a_limit_that_keeps_only_examples_without_prediction_is_a_failure(tmp_path):
    examples = write_jsonl(tmp_path / "examples.jsonl", [example(1), example(2)])
    one = predictions(tmp_path / "predictions.jsonl", ["ex1"])
    outcomes = {}
    for seed in range(12):
        try:
            outcomes[seed] = load_evaluation_set(str(examples), str(one), limit=1, seed=seed)
        except LoadError as error:
            outcomes[seed] = error
    failures = [o for o in outcomes.values() if isinstance(o, LoadError)]
    assert failures and len(failures) < len(outcomes)
    for failure in failures:
        assert "none of the 1 example(s) kept by limit=1 (seed" in str(failure)
        assert "1 of 2 examples have a prediction" in str(failure)
        assert "raise limit or set -p limit=null" in str(failure)


# ---------------------------------------------------------------- hints and warnings

def test_some_ids_that_differ_in_case_or_spaces_get_a_hint_not_a_failure(tmp_path):
    examples = four_examples(tmp_path)
    mixed = predictions(tmp_path / "predictions.jsonl", ["ex1", "EX2", "ex3 ", "zz"])
    result = load_evaluation_set(str(examples), str(mixed))
    assert result.counts["n_unmatched_predictions"] == 3
    assert result.counts["n_unmatched_differing_only_in_case_or_space"] == 2
    hints = [w for w in result.warnings if "differ from an example id only" in w]
    assert len(hints) == 1, result.warnings
    assert "2 of the 3 unmatched prediction ids" in hints[0]
    assert "'EX2' vs 'ex2'" in hints[0] and "'ex3 ' vs 'ex3'" in hints[0]
    assert "ids are matched exactly" in hints[0]


def test_clean_input_has_no_warnings(tmp_path):
    examples = four_examples(tmp_path, gold_id="d1")
    clean = predictions(tmp_path / "predictions.jsonl", ["ex1", "ex2", "ex3", "ex4"],
                        retrieved_ids=["d1"])
    result = load_evaluation_set(str(examples), str(clean))
    assert result.warnings == []
    assert result.counts["n_unmatched_differing_only_in_case_or_space"] == 0
    assert result.counts["n_retrieved_ids_without_gold_id"] == 0
    assert result.counts["n_gold_id_without_retrieved_ids"] == 0


def test_retrieved_ids_without_gold_id_warn_that_retrieval_is_not_scored(tmp_path):
    examples = four_examples(tmp_path)
    with_ids = predictions(tmp_path / "predictions.jsonl", ["ex1", "ex2", "ex3", "ex4"],
                           retrieved_ids=["d1", "d2"])
    result = load_evaluation_set(str(examples), str(with_ids))
    assert result.counts["n_retrieved_ids_without_gold_id"] == 4
    [warning] = result.warnings
    assert "4 example(s) have retrieved_ids but no gold_id" in warning
    assert "their retrieval is not scored" in warning
    assert f"give each example its gold_id (or gold_ids) in {examples}" in warning


def test_retrieved_ids_without_gold_id_but_with_contexts_say_contexts_are_compared(tmp_path):
    examples = four_examples(tmp_path)
    both = predictions(tmp_path / "predictions.jsonl", ["ex1", "ex2", "ex3", "ex4"],
                       retrieved_ids=["d1"], retrieved_contexts=["some passage"])
    [warning] = load_evaluation_set(str(examples), str(both)).warnings
    assert "compared by retrieved_contexts instead" in warning


def test_gold_id_without_any_retrieved_ids_warns_that_it_is_unused(tmp_path):
    examples = four_examples(tmp_path, gold_id="d1")
    plain = predictions(tmp_path / "predictions.jsonl", ["ex1", "ex2", "ex3", "ex4"])
    result = load_evaluation_set(str(examples), str(plain))
    assert result.counts["n_gold_id_without_retrieved_ids"] == 4
    [warning] = result.warnings
    assert "gold_id or gold_ids is given for 4 example(s), but no example has retrieved_ids" in warning
    assert "the gold ids are unused" in warning


def test_gold_id_with_retrieved_ids_on_some_rows_is_only_counted(tmp_path):
    examples = four_examples(tmp_path, gold_id="d1")
    rows = [{"id": "ex1", "generated_answer": "a", "retrieved_ids": ["d1"]},
            {"id": "ex2", "generated_answer": "b"}]
    result = load_evaluation_set(str(examples), str(write_jsonl(tmp_path / "p.jsonl", rows)))
    assert result.counts["n_gold_id_without_retrieved_ids"] == 3
    assert result.warnings == []


def test_an_id_retrieved_twice_in_one_row_is_warned_and_counted(tmp_path):
    examples = four_examples(tmp_path, gold_id="d1")
    rows = [{"id": "ex1", "generated_answer": "a", "retrieved_ids": ["d1", "d2", "d1"]},
            {"id": "ex2", "generated_answer": "b", "retrieved_ids": ["d2", "d3"]}]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    result = load_evaluation_set(str(examples), str(path))
    assert result.counts["n_examples_with_duplicate_retrieved_ids"] == 1
    [warning] = result.warnings
    assert f"1 example(s) retrieved the same id more than once in {path} (ex1: d1 2 times)" in warning


# ---------------------------------------------------------------- CSV quoting

def test_a_stray_quote_mid_field_names_column_row_and_line(tmp_path):
    path = write_text(tmp_path / "examples.csv", HEADER
                      + 'ex1,Q1?,"Plain\ntwo-line context.",A1.,G1.\n'
                      + 'ex2,Q2?,"Other" context,A2.,G2.\n')
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "context", [2])
    message = str(info.value)
    assert "line 4" in message
    assert "a quoted field must end at its closing quote" in message


def test_a_quote_that_is_never_closed_names_where_it_opened(tmp_path):
    path = write_text(tmp_path / "examples.csv", HEADER
                      + "ex1,Q1?,Context one.,A1.,G1.\n"
                      + 'ex2,Q2?,"Never closed,A2.,G2.\n'
                      + "ex3,Q3?,Context three.,A3.,G3.\n")
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "context", [2])
    assert "the quote opened in the row that starts on line 3 is never closed" in str(info.value)


def test_a_quote_inside_an_unquoted_field_is_kept_as_written(tmp_path):
    path = write_text(tmp_path / "examples.csv", HEADER + 'ex1,Q1?,Other "context",A1.,G1.\n')
    table = load_evaluation_set(str(path)).table
    assert table.loc[0, "context"] == 'Other "context"'


@pytest.mark.parametrize("record, fields", [("ex2,Q2?,C2,A2.,G2.,extra\n", 6), ("ex2,Q2?,C2,A2.\n", 4)])
def test_a_row_with_the_wrong_number_of_fields_names_row_and_line(tmp_path, record, fields):
    path = write_text(tmp_path / "examples.csv", HEADER + "ex1,Q1?,C1,A1.,G1.\n\n" + record)
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, rows=[2])
    assert f"line 4 has {fields} fields, the header has 5" in str(info.value)


def test_a_header_naming_a_column_twice_is_an_error(tmp_path):
    path = write_text(tmp_path / "examples.csv",
                      "id,question,context,answer,context,generated_answer\nex1,Q,C,A,C2,G\n")
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "context")
    assert "the header names this column 2 times" in str(info.value)


# ---------------------------------------------------------------- encodings

def test_latin1_bytes_in_a_csv_name_row_line_and_column(tmp_path):
    path = write_text(tmp_path / "examples.csv", HEADER
                      + "ex1,Q1?,Plain context.,A1.,G1.\n"
                      + "ex2,Q2?,Caf\u00e9 context.,A2.,G2.\n", encoding="latin-1")
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "context", [2])
    message = str(info.value)
    assert "byte 0xe9 on line 3, character 12, is not UTF-8" in message
    assert "the file must be UTF-8" in message


def test_latin1_bytes_in_a_jsonl_name_line_and_key(tmp_path):
    lines = [json.dumps(example(1, generated_answer="g")),
             json.dumps(example(2, generated_answer="Caf\u00e9 au lait."), ensure_ascii=False)]
    path = write_text(tmp_path / "examples.jsonl", "\n".join(lines) + "\n", encoding="latin-1")
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(path))
    assert_names(info.value, path, "generated_answer", [2])
    assert "byte 0xe9 on line 2" in str(info.value) and "the file must be UTF-8" in str(info.value)


def test_latin1_bytes_in_the_predictions_file_are_named(tmp_path):
    examples = four_examples(tmp_path)
    bad = write_text(tmp_path / "predictions.csv",
                     "id,generated_answer\nex1,fine\nex2,na\u00efve\n", encoding="latin-1")
    with pytest.raises(LoadError) as info:
        load_evaluation_set(str(examples), str(bad))
    assert_names(info.value, bad, "generated_answer", [2])
    assert "on line 3" in str(info.value)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_utf8_byte_order_mark_is_accepted(tmp_path, suffix):
    rows = [example(i, generated_answer=f"g{i}") for i in (1, 2)]
    if suffix == ".jsonl":
        text = "".join(json.dumps(r) + "\n" for r in rows)
    else:
        text = pd.DataFrame(rows).to_csv(index=False)
    path = write_text(tmp_path / f"examples{suffix}", text, encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    table = load_evaluation_set(str(path)).table
    assert table["id"].tolist() == ["ex1", "ex2"]


def test_a_byte_order_mark_in_the_predictions_file_is_accepted(tmp_path):
    examples = four_examples(tmp_path)
    text = "".join(json.dumps({"id": f"ex{i}", "generated_answer": "g"}) + "\n" for i in (1, 2))
    bom = write_text(tmp_path / "predictions.jsonl", text, encoding="utf-8-sig")
    result = load_evaluation_set(str(examples), str(bom))
    assert result.counts["n_unmatched_predictions"] == 0
    assert result.table["has_prediction"].tolist() == [True, True, False, False]


# ---------------------------------------------------------------- s3:// inputs

@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    with MotoServer(tmp_path_factory.mktemp("moto") / "access.log") as running:
        yield running


@pytest.fixture
def bucket(s3_server, monkeypatch, tmp_path):
    use_test_credentials(monkeypatch, s3_server.url, tmp_path)
    return new_bucket(s3_server.url)


@pytest.mark.slow  # moto's S3 server
def test_s3_input_and_predictions_are_read(bucket, tmp_path):
    admin, name = bucket
    examples = pd.DataFrame([example(i) for i in (1, 2)]).to_csv(index=False).encode()
    answers = "".join(json.dumps({"id": f"ex{i}", "generated_answer": f"g{i}"}) + "\n" for i in (1, 2))
    admin.put_object(Bucket=name, Key="sets/examples.csv", Body=examples)
    admin.put_object(Bucket=name, Key="sets/predictions.jsonl", Body=answers.encode("utf-8-sig"))
    parquet = tmp_path / "examples.parquet"
    pq.write_table(pa.Table.from_pylist([example(i, generated_answer=f"g{i}") for i in (1, 2)]), parquet)
    admin.put_object(Bucket=name, Key="sets/examples.parquet", Body=parquet.read_bytes())

    result = load_evaluation_set(f"s3://{name}/sets/examples.csv", f"s3://{name}/sets/predictions.jsonl")
    assert result.table["generated_answer"].tolist() == ["g1", "g2"]
    assert result.sources["input_path"] == f"s3://{name}/sets/examples.csv"
    table = load_evaluation_set(f"s3://{name}/sets/examples.parquet").table
    assert table["generated_answer"].tolist() == ["g1", "g2"]


def test_a_missing_s3_object_is_a_load_error_naming_the_url(bucket):
    _, name = bucket
    url = f"s3://{name}/sets/nothing-here.jsonl"
    with pytest.raises(LoadError) as info:
        load_evaluation_set(url)
    assert_names(info.value, url)
    assert "there is no such object" in str(info.value)


def test_s3_input_without_credentials_is_a_load_error_naming_the_url(bucket, monkeypatch):
    _, name = bucket
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    url = f"s3://{name}/sets/examples.csv"
    with pytest.raises(LoadError) as info:
        load_evaluation_set(url)
    assert_names(info.value, url)
    assert "no AWS credentials found" in str(info.value)


def test_another_url_scheme_is_refused_clearly(tmp_path):
    with pytest.raises(LoadError) as info:
        load_evaluation_set("gs://bucket/examples.csv")
    assert_names(info.value, "gs://bucket/examples.csv")
    assert "only local files, hf:// and s3:// paths are read" in str(info.value)


# ---------------------------------------------------------------- the whole run

@pytest.mark.slow  # a real run
def test_a_header_only_csv_fails_the_run_with_exit_code_1(tmp_path, capsys):
    empty = write_text(tmp_path / "examples.csv", HEADER)
    outputs = tmp_path / "outputs"
    code = main(["run", "--params", str(DEFAULT_PROFILE), "-p", f"input_path={empty}",
                 "-p", "predictions_path=null", "-p", f"outputs_root={outputs}"])
    assert code == 1
    [run_json] = outputs.glob("local/eval-runs/*/*/*/*/run.json")
    run = json.loads(run_json.read_text())
    assert run["status"] == "failed"
    assert [s["stage"] for s in run["stages"]] == ["01_load"]
    assert "has a header but no data rows: nothing to score" in run["stages"][0]["error"]
    assert "has a header but no data rows" in capsys.readouterr().err


@pytest.mark.slow  # a real run
def test_01_load_shows_the_warnings_and_load_json_and_the_report_counts_keep_them(tmp_path,
                                                                                  write_extending_profile):
    import jsonschema
    import nbformat
    import papermill

    from evalbook.validation import report_schema

    examples = four_examples(tmp_path)
    answers = predictions(tmp_path / "predictions.jsonl", ["ex1", "ex2", "ex3", "EX4"],
                          retrieved_ids=["d1"])
    profile = write_extending_profile(input_path=str(examples), predictions_path=str(answers),
                                      outputs_root=str(tmp_path / "outputs"))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    executed = tmp_path / "01_load.ipynb"
    papermill.execute_notebook(str(ROOT / "notebooks" / "01_load.ipynb"), str(executed),
                               parameters={"params_path": str(profile), "run_dir": str(run_dir),
                                           "run_id": str(uuid.uuid4())},
                               kernel_name="python3", cwd=str(ROOT / "notebooks"), progress_bar=False)
    printed = "".join(output.get("text", "") for cell in nbformat.read(executed, as_version=4).cells
                      for output in cell.get("outputs", []))
    assert "warning: 1 of the 1 unmatched prediction ids differ from an example id only in case" in printed
    assert "warning: 3 example(s) have retrieved_ids but no gold_id" in printed
    loaded = json.loads((run_dir / "load.json").read_text())
    assert len(loaded["warnings"]) == 2
    counts = {**loaded["counts"], "unmatched_prediction_ids": loaded["unmatched_prediction_ids"],
              "examples_without_prediction": loaded["examples_without_prediction"],
              "skipped_incomplete_rows": loaded["skipped_incomplete_rows"],
              "warnings": loaded["warnings"], "n_truncated_bertscore": 0, "n_truncated_sentence": 0}
    jsonschema.validate(counts, report_schema()["properties"]["counts"])


@pytest.mark.slow  # a real run
def test_a_run_carries_the_load_warnings_into_the_report_and_its_page(tmp_path):
    examples = four_examples(tmp_path)
    answers = predictions(tmp_path / "predictions.jsonl", ["ex1", "ex2", "ex3", "EX4"])
    outputs = tmp_path / "outputs"
    code = main(["run", "--params", str(DEFAULT_PROFILE), "-p", f"input_path={examples}",
                 "-p", f"predictions_path={answers}", "-p", f"outputs_root={outputs}",
                 "-p", "judge.base_url=http://127.0.0.1:1/v1"])
    assert code == 0
    [report_path] = outputs.glob("local/eval-runs/*/*/*/*.json")
    [warning] = json.loads(report_path.read_text())["counts"]["warnings"]
    assert warning.startswith("1 of the 1 unmatched prediction ids differ from an example id only in case")
    page = html.unescape((report_path.with_suffix("") / "04_report.html").read_text())
    assert "Warnings from loading the examples" in page and "1 of the 1 unmatched prediction ids" in page
    assert "(for example 'EX4' vs 'ex4')" in page

"""The checks file and the check columns (evalbook.checks.checksfile): read into Assertions, or
refused before scoring with every problem named by its file, entry (or column and row) and
field (exit 2); then checked against the loaded data (ids, metadata, latency, cost) and the
scenario file."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from evalbook.checks.assertions import KINDS, applies_to, run_assertion
from evalbook.checks.checksfile import (CheckColumnsError, ChecksError, ChecksFileError, assertions_from_columns,
                                        check_against_data, check_against_scenarios, is_check_column,
                                        load_checks_file)
from evalbook.errors import UnusableInput
from evalbook.validation import shipped_schema

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"

GOOD = """\
version: 1
checks:
  - name: refund-mentions-14-days
    contains: "14 days"
    ignore_case: true
  - name: council-teal
    contains_any: [teal, Tuesday]
    where: {metadata: {domain: council}}
  - name: s01-bottle-banks
    number: {value: 11, unit: bottle banks}
    ids: [s01, 7]
  - name: short
    max_words: 80
  - name: structured
    json: {schema: {type: object, required: [refund_days]}}
  - name: plain-json
    json: true
  - name: fast
    latency_ms: 2000
  - name: fee
    number: 14
  - name: no-goodbye
    not_regex: "goodbye"
    ignore_case: true
    turn: last
"""


def write(tmp_path, text: str, name: str = "checks.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), "utf-8")
    return path


def refusal(tmp_path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ChecksFileError) as caught:
        load_checks_file(path)
    assert isinstance(caught.value, UnusableInput) and caught.value.exit_code == 2
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    return message


def entries(*lines: str) -> str:
    return "version: 1\nchecks:\n" + "\n".join(lines) + "\n"


# ---------------------------------------------------------------- a good file

def test_a_good_file_is_read_with_its_scopes_and_defaults(tmp_path):
    checks = load_checks_file(write(tmp_path, GOOD))
    by_name = {check.name: check for check in checks}
    assert [check.name for check in checks] == ["refund-mentions-14-days", "council-teal", "s01-bottle-banks", "short",
                                                "structured", "plain-json", "fast", "fee", "no-goodbye"]
    first = by_name["refund-mentions-14-days"]
    assert (first.kind, first.argument, first.ignore_case, first.ids, first.metadata, first.turn) == \
        ("contains", "14 days", True, None, (), None)
    assert by_name["council-teal"].metadata == (("domain", "council"),)
    assert by_name["s01-bottle-banks"].ids == frozenset({"s01", "7"})  # ids are text, as the loaded table's
    assert by_name["s01-bottle-banks"].argument == {"value": 11, "unit": "bottle banks"}
    assert by_name["short"].ignore_case is False
    assert by_name["no-goodbye"].turn == "last"
    assert by_name["fee"].argument == 14
    assert first.place == "entry 1 ('refund-mentions-14-days')" and first.column is None
    assert run_assertion(by_name["structured"], '{"refund_days": 14}').status == "pass"
    assert run_assertion(by_name["structured"], '{"days": 14}').status == "fail"


def test_the_schema_names_every_kind_and_no_other():
    check = shipped_schema("checks-v1.json")["$defs"]["check"]
    kinds = [next(iter(option["required"])) for option in check["oneOf"]]
    assert kinds == list(KINDS)
    assert set(check["properties"]) == {*KINDS, "name", "ignore_case", "where", "ids", "turn"}


# ---------------------------------------------------------------- refusals

def test_an_unknown_check_is_refused_with_the_names_it_could_be(tmp_path):
    message = refusal(tmp_path, entries("  - name: a", "    contain: 14 days"))
    assert "1 problem" in message
    assert "entry 1 ('a'): unknown field 'contain' (did you mean 'contains'?)" in message
    assert "the checks are contains, contains_any, contains_all, not_contains" in message
    assert "holds no check" not in message  # the unknown field says it


def test_an_entry_without_a_check_or_with_two(tmp_path):
    message = refusal(tmp_path, entries("  - name: a", "    ignore_case: true",
                                        "  - name: b", "    contains: x", "    regex: y"))
    assert "entry 1 ('a'): holds no check; give one of contains, contains_any" in message
    assert "entry 2 ('b'): holds 2 checks (contains, regex); an entry holds one, so give each its own entry" in message


def test_a_regex_that_does_not_compile_is_refused(tmp_path):
    message = refusal(tmp_path, entries("  - name: a", "    regex: '(unclosed'",
                                        "  - name: b", "    not_regex: '[z-a]'"))
    assert ("entry 1 ('a'): field 'regex' does not compile as a Python regular expression: "
            "missing ), unterminated subpattern at position 0") in message
    assert "entry 2 ('b'): field 'not_regex' does not compile as a Python regular expression: bad character range" \
        in message


def test_an_embedded_schema_that_is_not_json_schema_is_refused(tmp_path):
    message = refusal(tmp_path, entries("  - name: a", "    json: {schema: {type: strin}}",
                                        "  - name: b", "    json: {schema: {properties: {x: {pattern: '(['}}}}",
                                        "  - name: c", "    json: {schema: [1]}",
                                        "  - name: d", "    json: false"))
    assert "entry 1 ('a'): field 'json.schema' is not a JSON Schema (at type): 'strin' is not valid" in message
    assert "entry 2 ('b'): field 'json.schema' is not a JSON Schema (at properties/x/pattern): '([' is not a 'regex'" \
        in message
    assert ("entry 3 ('c'): field 'json.schema' is [1]; a schema is a JSON Schema: an object, or true or false"
            in message)
    assert "entry 4 ('d'): field 'json' is False; it is true (the answer parses as JSON) or {schema: ...}" in message


def test_a_name_used_twice_is_refused(tmp_path):
    message = refusal(tmp_path, entries("  - name: short", "    max_words: 50",
                                        "  - name: long", "    max_words: 500",
                                        "  - name: short", "    max_chars: 80"))
    assert "entry 3 ('short'): field 'name' repeats entry 1's name; each check needs its own" in message


def test_a_float_where_a_whole_number_is_meant_is_refused(tmp_path):
    message = refusal(tmp_path, entries("  - name: a", "    max_words: 50.0",
                                        "  - name: b", "    max_chars: true",
                                        "  - name: c", "    contains: x", "    turn: 2.0"))
    assert "entry 1 ('a'): field 'max_words' is 50.0; it must be a whole number from 0" in message
    assert "entry 2 ('b'): field 'max_chars' is True; it must be a whole number from 0" in message
    assert "entry 3 ('c'): field 'turn' is 2.0; a turn is every, last, or a whole number from 1" in message


def test_every_problem_is_listed_at_once_in_file_order(tmp_path):
    message = refusal(tmp_path, """\
        version: 2
        checks:
          - name: 'has space'
            contains: ''
          - contains: x
          - name: n1
            number: {value: 14, tolerance: -1, units: days}
          - name: n2
            number: {value: .inf, tolerance: .nan}
          - name: lat
            latency_ms: 0
          - name: m
            max_words: 10
            ignore_case: true
          - name: both
            contains: x
            where: {metadata: {domain: council}}
            ids: [s01]
          - name: turned
            latency_ms: 100
            where: {metadata: {domain: council}}
            turn: every
          - name: empty-ids
            contains: x
            ids: []
          - name: bad-where
            contains: x
            where: {metadata: {domain: null}}
    """)
    lines = message.splitlines()
    assert lines[0].endswith("15 problem(s) in the checks file; nothing was scored:")
    expected = [
        "the file: field 'version' is 2; it must be 1",
        "entry 1 ('has space'): field 'contains' is ''; it must hold some text",
        "entry 1 ('has space'): field 'name' is 'has space'; a name is 1 to 80 letters, digits, '.', '_' or '-', "
        "starting with a letter or a digit, on one line",
        "entry 2: field 'name' is missing",
        "entry 3 ('n1'): unknown field 'number.units' (did you mean 'unit'?); the fields are tolerance, unit, value",
        "entry 3 ('n1'): field 'number.tolerance' is -1; a tolerance is a number from 0",
        "entry 4 ('n2'): field 'number.tolerance' is nan; it must be a finite number",
        "entry 4 ('n2'): field 'number.value' is inf; it must be a finite number",
        "entry 5 ('lat'): field 'latency_ms' is 0; it must be a number of milliseconds above 0",
        "entry 6 ('m'): field 'ignore_case' is for the text checks (contains, contains_any, contains_all, "
        "not_contains, equals, regex, not_regex), not max_words",
        "entry 7 ('both'): field 'ids': give 'where' or 'ids', not both",
        "entry 8 ('turned'): field 'latency_ms': a scenario's replies record no latency or cost; latency_ms and "
        "cost_usd check the evaluation set's rows",
        "entry 8 ('turned'): field 'where': a scenario check (one with 'turn') has no metadata to select by; "
        "name its scenarios with 'ids'",
        "entry 9 ('empty-ids'): field 'ids' is []; it must be a list of example ids (text or whole numbers), "
        "each once",
        "entry 10 ('bad-where'): field 'where.metadata.domain' is None; a value is text, a number or true/false",
    ]
    for line in expected:
        assert f"  - {line}" in lines, line
    positions = [lines.index(f"  - {line}") for line in expected]
    assert positions == sorted(positions)  # by entry, then by field


def test_the_file_itself(tmp_path):
    assert "not valid YAML" in refusal(tmp_path, "checks: [unclosed\n")
    assert "the file: field 'checks' is missing" in refusal(tmp_path, "version: 1\n")
    assert "the file: field 'checks' is []; it must be a list of checks, at least one" in \
        refusal(tmp_path, "version: 1\nchecks: []\n")
    assert "the file: it must be a mapping with 'version' and 'checks'" in refusal(tmp_path, "- contains: x\n")
    assert "the file: it must be a mapping with 'version' and 'checks'" in refusal(tmp_path, "")
    assert "entry 1 ('a'): unknown field '1'; the checks are" in refusal(tmp_path, entries("  - {name: a, 1: x}"))
    with pytest.raises(ChecksFileError, match="cannot read the checks file"):
        load_checks_file(tmp_path / "missing.yaml")
    (tmp_path / "latin1.yaml").write_bytes("version: 1\nchecks: [{name: a, contains: caf\xe9}]\n".encode("latin-1"))
    with pytest.raises(ChecksFileError, match="cannot read the checks file"):
        load_checks_file(tmp_path / "latin1.yaml")


def test_a_key_given_twice_is_refused_with_its_lines(tmp_path):
    message = refusal(tmp_path, entries("  - name: a", "    contains: 14 days", "    contains: two weeks"))
    assert "line 5: key 'contains' is given twice in one mapping (first on line 4)" in message


def test_an_alias_bomb_and_deep_nesting_are_refused_as_a_profile_is(tmp_path):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(6))
    assert "alias bomb" in refusal(tmp_path, bomb)
    assert "nested more than" in refusal(tmp_path, "x: " + "[" * 200 + "]" * 200 + "\n")


# ---------------------------------------------------------------- against the data

def test_ids_and_metadata_are_checked_against_the_loaded_data(tmp_path):
    checks = load_checks_file(write(tmp_path, entries(
        "  - name: listed", "    contains: x", "    ids: [s01, s99, S02, ' s03']",
        "  - name: by-domain", "    contains: x", "    where: {metadata: {domian: council}}",
        "  - name: by-value", "    contains: x", "    where: {metadata: {domain: counsil, tier: 1}}",
        "  - name: fast", "    latency_ms: 2000",
        "  - name: cheap", "    cost_usd: 0.01",
        "  - name: in-a-scenario", "    contains: x", "    ids: [nowhere]", "    turn: last")))
    with pytest.raises(ChecksFileError) as caught:
        check_against_data(checks, ids=["s01", "s02", "s03"], metadata_columns=["domain", "tier"],
                           has_latency=False, has_cost=False, origin="checks.yaml",
                           metadata_values={"domain": ["council", "bank", None], "tier": [1, 2]})
    message = str(caught.value)
    assert caught.value.exit_code == 2
    assert message.startswith("checks.yaml: 5 problem(s) with the checks against the data; nothing was scored:")
    assert ("entry 1 ('listed'): field 'ids': ' s03', 'S02', 's99' are not ids of the evaluation set "
            "(' s03' differs from 's03' only in case or spaces; 'S02' from 's02')") in message
    assert ("entry 2 ('by-domain'): field 'where.metadata.domian': the evaluation set has no metadata column "
            "'domian' (did you mean 'domain'?); its metadata columns are domain, tier") in message
    assert "entry 3 ('by-value'): field 'where.metadata.domain': no row has domain 'counsil'; its values are " \
           "'bank', 'council'" in message
    assert "no row has tier" not in message  # tier 1 is there
    assert ("entry 4 ('fast'): field 'latency_ms': this run did not generate its answers (00_generate), so no "
            "latency was recorded to check") in message
    assert ("entry 5 ('cheap'): field 'cost_usd': this run recorded no cost for its answers, so a cost_usd limit "
            "cannot be checked") in message
    assert "in-a-scenario" not in message  # a scenario check is checked against the scenario file


def test_good_checks_pass_the_data_check(tmp_path):
    checks = load_checks_file(write(tmp_path, GOOD))
    check_against_data(checks, ids=["s01", "7", "8"], metadata_columns=["domain"], has_latency=True,
                       has_cost=False, origin="checks.yaml", metadata_values={"domain": ["council"]})


def test_a_metadata_value_of_another_type_matches_no_row(tmp_path):
    checks = load_checks_file(write(tmp_path, entries(
        "  - name: a", "    contains: x", "    where: {metadata: {tier: '1'}}")))
    with pytest.raises(ChecksFileError, match=r"no row has tier '1'; its values are 1, 2"):
        check_against_data(checks, ids=["s01"], metadata_columns=["tier"], has_latency=False, has_cost=False,
                           origin="checks.yaml", metadata_values={"tier": [1, 2]})


def test_a_file_check_is_not_named_as_a_column_or_one_of_evalbooks_checks(tmp_path):
    checks = load_checks_file(write(tmp_path, entries(
        "  - name: facts", "    contains: x", "  - name: check_contains", "    contains: y", "    turn: last",
        "  - name: mine", "    contains: z")))
    columns = assertions_from_columns(pd.DataFrame({"id": ["s01"], "check_contains": ["x"]}), origin="data.csv")
    with pytest.raises(ChecksFileError) as caught:
        check_against_data(checks + columns["s01"], ids=["s01"], metadata_columns=[], has_latency=False,
                           has_cost=False, origin="checks.yaml", builtin_names={"facts"})
    message = str(caught.value)
    assert "entry 1 ('facts'): field 'name': 'facts' names one of evalbook's own checks" in message
    assert ("entry 2 ('check_contains'): field 'name': 'check_contains' is also a check column of the evaluation "
            "set; give this check another name") in message
    assert "mine" not in message and message.count("  - ") == 2


def test_scenario_checks_are_checked_against_the_scenario_file(tmp_path):
    checks = load_checks_file(write(tmp_path, entries(
        "  - name: row-check", "    contains: x",
        "  - name: every-reply", "    max_words: 80", "    turn: every",
        "  - name: listed", "    contains: x", "    ids: [refund, nowhere]", "    turn: 2")))
    with pytest.raises(ChecksFileError) as caught:
        check_against_scenarios(checks, scenario_ids=["refund", "card"], origin="checks.yaml")
    assert "entry 3 ('listed'): field 'ids': 'nowhere' is not a scenario of the scenario file" in str(caught.value)
    assert "row-check" not in str(caught.value)
    with pytest.raises(ChecksFileError) as caught:
        check_against_scenarios(checks, scenario_ids=None, origin="checks.yaml")
    assert ("entry 2 ('every-reply'): field 'turn': this run simulates no scenarios, so a check on a "
            "scenario's replies would never run") in str(caught.value)
    check_against_scenarios(checks[:2], scenario_ids=["refund"], origin="checks.yaml")


# ---------------------------------------------------------------- the check columns

def test_check_columns_are_named_check_and_a_kind():
    assert is_check_column("check_contains") and is_check_column("check_contain")
    assert not is_check_column("domain") and not is_check_column("checked")


def test_a_rows_check_cells_become_its_assertions():
    table = pd.DataFrame(dtype=object, data={  # as load.py reads JSONL: each cell as written
        "id": ["s01", "s02", "s03"], "row": [1, 2, 3], "domain": ["council", "bank", "retail"],
        "check_contains": ["14 days", None, "  "],
        "check_max_words": [50, None, float("nan")],
        "check_contains_any": ['["teal", "Tuesday"]', None, None],  # a CSV cell: JSON text
        "check_number.refund": ['{"value": 14, "unit": "days"}', "14", None],
        "check_contains_ignore_case": [None, "Teal", None],
    })
    by_id = assertions_from_columns(table, origin="data.csv")
    assert set(by_id) == {"s01", "s02"}  # s03's cells are empty
    first = by_id["s01"]
    assert [(a.name, a.kind, a.argument) for a in first] == [
        ("check_contains", "contains", "14 days"), ("check_max_words", "max_words", 50),
        ("check_contains_any", "contains_any", ["teal", "Tuesday"]),
        ("check_number.refund", "number", {"value": 14, "unit": "days"})]
    assert first[0].column == "check_contains" and first[0].place == "column 'check_contains', row 1 (id 's01')"
    second = by_id["s02"]
    assert [(a.name, a.kind, a.argument, a.ignore_case) for a in second] == [
        ("check_number.refund", "number", 14, False), ("check_contains_ignore_case", "contains", "Teal", True)]
    assert all(applies_to(a, "s02", {}) and not applies_to(a, "s01", {}) for a in second)  # its own row only
    assert run_assertion(second[1], "The teal bin.").status == "pass"


def test_bad_check_cells_are_refused_naming_the_column_and_the_row():
    table = pd.DataFrame(dtype=object, data={
        "id": ["s01", "s02"], "row": [4, 7],
        "check_contain": ["x", None],
        "check_max_words": ["50.5", "5O"],
        "check_regex": ["(", "fine"],
        "check_contains": [14, "ok"],
        "check_max_chars_ignore_case": [None, None],
        "check_json": ['{"schema": {"type": "strin"}}', None],
    })
    with pytest.raises(CheckColumnsError) as caught:
        assertions_from_columns(table, origin="data.csv")
    error = caught.value
    assert isinstance(error, ChecksError) and error.exit_code == 2
    message = str(error)
    assert message.startswith("data.csv: 7 problem(s) in the check columns; nothing was scored:")
    assert ("column 'check_contain': names no check (did you mean 'check_contains'?); a check column is "
            "check_<check>, check_<check>_ignore_case, or either followed by .<label>") in message
    assert ("column 'check_max_chars_ignore_case': ignore_case is for the text checks (contains, contains_any, "
            "contains_all, not_contains, equals, regex, not_regex), not max_chars") in message
    assert "column 'check_max_words', row 4 (id 's01'): the cell is 50.5; it must be a whole number from 0" in message
    assert ("column 'check_max_words', row 7 (id 's02'): the cell is '5O', which is not JSON; "
            "it must be a whole number from 0") in message
    assert ("column 'check_regex', row 4 (id 's01'): the cell does not compile as a Python regular expression: "
            "missing ), unterminated subpattern at position 0") in message
    assert "column 'check_contains', row 4 (id 's01'): the cell is 14; it must hold some text" in message
    assert "column 'check_json', row 4 (id 's01'): the cell's 'schema' is not a JSON Schema (at type)" in message


def test_rows_are_numbered_from_one_without_a_row_column():
    table = pd.DataFrame({"id": ["a", "b"], "check_max_words": [None, -1]}, dtype=object)
    with pytest.raises(CheckColumnsError,
                       match=r"column 'check_max_words', row 2 \(id 'b'\): the cell is -1; it must be a whole number"):
        assertions_from_columns(table, origin="data.jsonl")


def test_a_latency_column_needs_a_generated_run():
    table = pd.DataFrame({"id": ["a", "b"], "check_latency_ms": [1000, 2000]})
    checks = [a for found in assertions_from_columns(table, origin="data.csv").values() for a in found]
    with pytest.raises(CheckColumnsError) as caught:
        check_against_data(checks, ids=["a", "b"], metadata_columns=[], has_latency=False, has_cost=False,
                           origin="data.csv")
    message = str(caught.value)
    assert message.count("column 'check_latency_ms': this run did not generate its answers") == 1  # once, not per row
    check_against_data(checks, ids=["a", "b"], metadata_columns=[], has_latency=True, has_cost=False,
                       origin="data.csv")


# ---------------------------------------------------------------- the example on the bundled sample

def sample_rows() -> list[dict]:
    examples = [json.loads(line) for line in (SAMPLE / "examples.jsonl").read_text("utf-8").splitlines()]
    answers = {row["id"]: row["generated_answer"]
               for row in map(json.loads, (SAMPLE / "predictions.jsonl").read_text("utf-8").splitlines())}
    return [{"id": row["id"], "metadata": {"domain": row["domain"]}, "answer": answers[row["id"]]} for row in examples]


def test_the_example_checks_file_runs_on_the_bundled_sample():
    checks = load_checks_file(ROOT / "examples" / "checks" / "sample.yaml")
    rows = sample_rows()
    check_against_data(checks, ids=[row["id"] for row in rows], metadata_columns=["domain"], has_latency=False,
                       has_cost=False, origin="sample.yaml",
                       metadata_values={"domain": [row["metadata"]["domain"] for row in rows]})
    outcomes = {(check.name, row["id"]): run_assertion(check, row["answer"])
                for check in checks for row in rows if applies_to(check, row["id"], row["metadata"])}
    statuses = {outcome.status for outcome in outcomes.values()}
    assert statuses == {"pass", "fail"}
    fee = outcomes[("overdraft-fee-is-14", "s02")]
    assert (fee.status, fee.reason) == ("fail", "no number £14 (±0) in the answer; it holds £24")
    assert outcomes[("no-refusal", "s12")].status == "fail" and outcomes[("no-refusal", "s01")].status == "pass"
    assert outcomes[("concise", "s29")].status == "fail"
    assert not any(name == "council-short" and example in ("s02", "s03") for name, example in outcomes)

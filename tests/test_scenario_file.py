"""The scenario file: read into Scenarios, or refused before any call with every problem named
by its scenario and field (exit 2)."""

from __future__ import annotations

import textwrap

import pytest

from evalbook.errors import UnusableInput
from evalbook.scenarios.spec import ScenarioFileError, load_scenarios, threshold_value

GOOD = """\
version: 1
scenarios:
  - id: card-replacement
    goal: find out what a replacement card costs
    persona: a hurried customer who writes short messages
    first_speaker: user
    opening: how much is a new card?
    max_turns: 4
    expected_outcome: the first one each year is free, later ones cost 12 dollars
    criteria: [the assistant states the price, the assistant asks at most one question]
    assertions:
      - grounded: {threshold: 4/5, ground_truth: The first replacement each year is free; more cost $12.}
      - relevant: {threshold: 0.7, turn: last}
  - id: unknown-policy
    goal: learn the overdraft policy, which the sources do not hold
    persona: a polite customer
    first_speaker: assistant
    opening: Hello, how can I help?
    max_turns: 3
    criteria: [the assistant says it does not know instead of guessing]
"""


def write(tmp_path, text: str):
    path = tmp_path / "scenarios.yaml"
    path.write_text(textwrap.dedent(text), "utf-8")
    return path


def refusal(tmp_path, text: str) -> str:
    with pytest.raises(ScenarioFileError) as caught:
        load_scenarios(write(tmp_path, text))
    assert isinstance(caught.value, UnusableInput) and caught.value.exit_code == 2
    return str(caught.value)


def test_a_good_file_is_read_with_its_fractions_and_defaults(tmp_path):
    first, second = load_scenarios(write(tmp_path, GOOD))
    assert first.id == "card-replacement" and first.max_turns == 4 and first.opening == "how much is a new card?"
    assert len(first.criteria) == 2
    grounded, relevant = first.assertions
    assert (grounded.kind, grounded.threshold, grounded.threshold_text, grounded.turn) == ("grounded", 0.8, "4/5", "every")
    assert grounded.ground_truth.startswith("The first replacement")
    assert (relevant.kind, relevant.threshold, relevant.turn, relevant.ground_truth) == ("relevant", 0.7, "last", None)
    assert second.first_speaker == "assistant" and second.assertions == () and second.expected_outcome is None


def test_threshold_fractions_read_exactly():
    assert threshold_value("2/3") == (2 / 3, "2/3")
    assert threshold_value(" 4 / 5 ") == (0.8, "4/5")
    assert threshold_value(1) == (1.0, "1")


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("    goal: find out what a replacement card costs\n", "",
     "scenario 1 ('card-replacement'): field 'goal' is missing"),
    ("    max_turns: 4\n", "    max_turns: 4\n    colour: blue\n",
     "scenario 1 ('card-replacement'): unknown field 'colour'"),
    ("    max_turns: 4\n", "    max_turns: 0\n",
     "scenario 1 ('card-replacement'): field 'max_turns' is 0; it must be a whole number from 1 to 50"),
    ("    max_turns: 3\n", "    max_turns: -2\n",
     "scenario 2 ('unknown-policy'): field 'max_turns' is -2"),
    ("  - id: unknown-policy\n", "  - id: card-replacement\n",
     "scenario 2 ('card-replacement'): field 'id' repeats scenario 1's id"),
    ("      - relevant: {threshold: 0.7, turn: last}\n", "      - relevant: {threshold: 0.7, turn: 9}\n",
     "scenario 1 ('card-replacement'): field 'assertions.1.relevant.turn' is 9, past max_turns 4"),
    ("threshold: 4/5", "threshold: 6/5", "field 'assertions.0.grounded.threshold' is '6/5'"),
    ("      - relevant: {threshold: 0.7, turn: last}\n", "      - relevant: {threshold: 70, turn: last}\n",
     "scenario 1 ('card-replacement'): field 'assertions.1.relevant.threshold'"),
    ("    opening: Hello, how can I help?\n", "",
     "scenario 2 ('unknown-policy'): field 'opening' is missing: an assistant that speaks first"),
    ("    first_speaker: user\n", "    first_speaker: bot\n", "scenario 1 ('card-replacement'): field 'first_speaker'"),
    ("      - relevant: {threshold: 0.7, turn: last}\n", "      - relevant: {threshold: 0.7, ground_truth: x}\n",
     "unknown field 'assertions.1.relevant.ground_truth'"),
])
def test_a_bad_scenario_is_refused_naming_the_scenario_and_the_field(tmp_path, old, new, expected):
    assert old in GOOD
    message = refusal(tmp_path, GOOD.replace(old, new, 1))
    assert expected in message and "nothing was simulated" in message and "scenarios.yaml" in message


def test_every_problem_is_listed_at_once(tmp_path):
    text = GOOD.replace("    goal: find out what a replacement card costs\n", "").replace("    max_turns: 3\n", "    max_turns: 0\n")
    message = refusal(tmp_path, text)
    assert "2 problem(s)" in message and "'goal' is missing" in message and "'max_turns' is 0" in message


@pytest.mark.parametrize(("text", "expected"), [
    ("scenarios: []\nversion: 1\n", "field 'scenarios'"),
    ("version: 1\nscenarios:\n  - [not, a, mapping]\n", "scenario 1"),
    ("version: 2\nscenarios: []\n", "version"),
    ("version: 1\nscenarios: [\n", "not valid YAML"),
])
def test_a_file_that_is_not_a_scenario_file_is_refused(tmp_path, text, expected):
    assert expected in refusal(tmp_path, text)


def test_a_missing_file_is_refused_with_its_path(tmp_path):
    with pytest.raises(ScenarioFileError, match="no-such.yaml: cannot read"):
        load_scenarios(tmp_path / "no-such.yaml")


def test_the_shipped_example_scenarios_are_valid_and_hold_a_refusal_case():
    from paths import ROOT

    scenarios = load_scenarios(ROOT / "examples" / "scenarios" / "sample.yaml")
    assert len(scenarios) == 3 and len({s.id for s in scenarios}) == 3
    refusal_case = next(s for s in scenarios if s.id.endswith("refused"))
    assert refusal_case.first_speaker == "assistant" and "no information" in refusal_case.assertions[0].ground_truth


def test_a_run_with_a_bad_scenario_file_exits_2_before_its_folder_is_written(tmp_path, capsys):
    from evalbook.__main__ import main
    from paths import ROOT

    (tmp_path / "scenarios.yaml").write_text(textwrap.dedent("""\
        version: 1
        scenarios:
          - {id: a, goal: g, persona: p, first_speaker: user, max_turns: 0, criteria: [c]}
          - {id: a, goal: g, persona: p, first_speaker: user, max_turns: 2, criteria: [c], colour: red}
        """), "utf-8")
    outputs = tmp_path / "outputs"
    code = main(["run", "--params", str(ROOT / "params" / "scenarios-local.yaml"), "-p", f"outputs_root={outputs}",
                 "-p", f"scenarios.path={tmp_path / 'scenarios.yaml'}", "-p", "judge.start_server=false",
                 "-p", "simulate.start_server=false", "-p", "generate.start_server=false"])
    error = capsys.readouterr().err
    assert code == 2
    assert "3 problem(s); nothing was sim" in error  # the repeated id beside the schema's two
    assert "scenario 1 ('a'): field 'max_turns'" in error and "scenario 2 ('a')" in error and "'colour'" in error
    assert "scenario 2 ('a'): field 'id' repeats scenario 1's id" in error
    assert not outputs.exists() or not list(outputs.rglob("params.yaml"))


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("      - relevant: {threshold: 0.7, turn: last}\n", "      - relevant: {threshold: 0.7, turn: 2.0}\n",
     "scenario 1 ('card-replacement'): field 'assertions.1.relevant.turn' is 2.0; a turn is every, last, "
     "or a whole number from 1"),
    ("    max_turns: 4\n", "    max_turns: 2.0\n",
     "scenario 1 ('card-replacement'): field 'max_turns' is 2.0; it must be a whole number from 1 to 50"),
    ("    max_turns: 4\n", "    max_turns: true\n", "scenario 1 ('card-replacement'): field 'max_turns' is True"),
])
def test_a_number_that_is_not_whole_is_refused_where_a_whole_number_is_meant(tmp_path, old, new, expected):
    assert old in GOOD
    assert expected in refusal(tmp_path, GOOD.replace(old, new, 1))


def test_an_id_with_a_trailing_newline_is_refused_not_a_second_glass(tmp_path):
    document = {"version": 1, "scenarios": [
        {"id": "glass", "goal": "g", "persona": "p", "first_speaker": "user", "max_turns": 2, "criteria": ["c"]},
        {"id": "glass\n", "goal": "g", "persona": "p", "first_speaker": "user", "max_turns": 2, "criteria": ["c"]}]}
    path = tmp_path / "scenarios.json"
    path.write_text(__import__("json").dumps(document), "utf-8")  # JSON is YAML, and says the newline plainly
    with pytest.raises(ScenarioFileError) as caught:
        load_scenarios(path)
    assert "scenario 2 ('glass\\n'): field 'id' is 'glass\\n'; an id is 1 to 80 letters" in str(caught.value)


def test_semantic_and_schema_problems_are_listed_together_in_numeric_order(tmp_path):
    entries = [{"id": f"s{n}", "goal": "g", "persona": "p", "first_speaker": "user", "max_turns": 2,
                "criteria": ["c"]} for n in range(1, 12)]
    entries[0]["assertions"] = [{"relevant": {"threshold": "3/2", "turn": 1}}]  # over 1: semantic
    entries[1]["max_turns"] = 0  # schema
    entries[10]["first_speaker"] = "assistant"  # no opening: semantic
    entries[9]["assertions"] = [{"grounded": {"threshold": 70, "ground_truth": "t", "turn": 5}}]  # both
    path = tmp_path / "scenarios.json"
    path.write_text(__import__("json").dumps({"version": 1, "scenarios": entries}), "utf-8")
    with pytest.raises(ScenarioFileError) as caught:
        load_scenarios(path)
    lines = str(caught.value).splitlines()[1:]
    assert [line.split(":")[0] for line in lines] == [
        "  - scenario 1 ('s1')", "  - scenario 2 ('s2')", "  - scenario 10 ('s10')", "  - scenario 10 ('s10')",
        "  - scenario 11 ('s11')"]
    assert "field 'assertions.0.relevant.threshold' is '3/2'; a threshold is a fraction from 0 to 1" in lines[0]
    assert "field 'assertions.0.grounded.threshold' is 70; a threshold is a fraction from 0 to 1: a number" in lines[2]
    assert "field 'assertions.0.grounded.turn' is 5, past max_turns 2" in lines[3]
    assert "field 'opening' is missing" in lines[4]
    assert not any("oneOf" in line or "'type'" in line for line in lines)


def test_a_scenario_file_nested_100000_levels_deep_is_refused_in_one_line(tmp_path):
    path = tmp_path / "scenarios.yaml"
    path.write_text("version: 1\nscenarios: " + "[" * 100_000 + "]" * 100_000 + "\n", "utf-8")
    with pytest.raises(ScenarioFileError) as caught:
        load_scenarios(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: not valid YAML: line 2, column ") and "nested more than" in message
    assert len(message.splitlines()) == 1

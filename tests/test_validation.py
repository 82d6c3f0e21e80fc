"""Schema checks: jsonschema without the grammar of the optional rfc3987_syntax."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import evalbook.params
profile = evalbook.params.load_profile("params/default.yaml")
import rfc3987_syntax  # still importable afterwards, for anything else that wants it
print("rfc3987_syntax" in sys.modules, profile["name"])
"""


def test_loading_and_validating_a_profile_does_not_import_rfc3987_syntax():
    from paths import ROOT

    probe = PROBE.replace('"rfc3987_syntax" in sys.modules', '"rfc3987_syntax" in loaded')
    probe = probe.replace("import rfc3987_syntax  #", "loaded = set(sys.modules)\nimport rfc3987_syntax  #")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "default"]


# ---------------------------------------------------------------- user input (issue 47, items 3 and 6)

import pytest  # noqa: E402

from evalbook.params import ParamsError, load_profile  # noqa: E402
from evalbook.validation import ecma_pattern, input_validator  # noqa: E402


@pytest.mark.parametrize(("pattern", "translated"), [
    ("^[a-z]+$", r"^[a-z]+\Z"),
    (r"^a\$b$", r"^a\$b\Z"),  # an escaped dollar is a dollar
    ("^[$a]+$", r"^[$a]+\Z"),  # so is one inside a class
    ("^(x|y$)", r"^(x|y\Z)"),
    (r"\S", r"\S"),
])
def test_an_ecma_end_anchor_is_the_end_of_the_text(pattern, translated):
    assert ecma_pattern(pattern) == translated


def test_user_input_refuses_a_final_newline_a_pattern_excludes_and_numbers_that_are_not_whole():
    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]+$"},
                                               "turns": {"type": "integer"}}}
    problems = lambda value: [e.message for e in input_validator(schema).iter_errors(value)]  # noqa: E731
    assert problems({"id": "glass", "turns": 2}) == []
    assert problems({"id": "glass\n"}) == ["'glass\\n' does not match '^[a-z]+$'"]
    assert len(problems({"turns": 2.0})) == len(problems({"turns": True})) == 1
    assert problems({"id": "glass", "turns": -3}) == []  # only the type is stricter


def test_a_profile_refuses_a_count_of_2_0_and_an_env_name_with_a_final_newline(tmp_path):
    from paths import DEFAULT_PROFILE

    for override, key in (({"limit": 2.0}, "limit"), ({"env": "ci\n"}, "env")):
        with pytest.raises(ParamsError) as caught:
            load_profile(DEFAULT_PROFILE, override)
        assert key in str(caught.value)
    assert load_profile(DEFAULT_PROFILE, {"limit": 2})["limit"] == 2


def test_names_checked_in_code_are_matched_whole():
    from evalbook.generate.settings import GenerateConfigError
    from evalbook.generate.settings import prompt_template as answer_template
    from evalbook.scenarios.sides import SidesConfigError
    from evalbook.scenarios.sides import prompt_template as simulator_template
    from evalbook.storage import TEMPORARY_FILE

    assert simulator_template("simulator-v1") and answer_template("answer-v1")
    with pytest.raises(SidesConfigError):
        simulator_template("simulator-v1\n")
    with pytest.raises(GenerateConfigError):
        answer_template("answer-v1\n")
    assert TEMPORARY_FILE.fullmatch(".report.json.tmp") and not TEMPORARY_FILE.fullmatch(".report.json.tmp\n")

"""A mistyped parameter is answered with the nearest known ones (issue 49, item 4), not with the
validator's own words."""

from __future__ import annotations

import pytest
import yaml

from evalbook.params import ParamsError, load_profile
from paths import DEFAULT_PROFILE


def refusal(overrides=None, path=DEFAULT_PROFILE) -> str:
    with pytest.raises(ParamsError) as refused:
        load_profile(path, overrides or {})
    return str(refused.value)


def test_a_mistyped_override_names_the_nearest_key():
    message = refusal({"input_pth": "x.csv"})
    assert "unknown key 'input_pth' (did you mean 'input_path'?)" in message
    assert "Additional properties" not in message and "was unexpected" not in message


def test_a_mistyped_nested_key_names_the_nearest_key_of_its_section():
    message = refusal({"judge.base_ulr": "http://127.0.0.1:1/v1"})
    assert "judge: unknown key 'base_ulr' (did you mean 'base_url'?)" in message


def test_a_key_like_none_lists_the_section_s_keys(tmp_path):
    profile = yaml.safe_load(DEFAULT_PROFILE.read_text("utf-8"))
    profile["checks"]["zzzzzz"] = 1
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({**profile, "input_path": "x.csv", "predictions_path": None}), "utf-8")
    message = refusal(path=path)
    assert "checks: unknown key 'zzzzzz'; the keys here are facts, path" in message


def test_two_mistyped_keys_are_each_answered(tmp_path):
    message = refusal({"input_pth": "x.csv", "limt": 3})
    assert "'input_pth' (did you mean 'input_path'?)" in message
    assert "'limt' (did you mean 'limit'?)" in message


def test_a_key_of_a_section_built_from_a_shared_definition_is_suggested_too():
    # models.bertscore's keys come partly from a $ref (unevaluatedProperties)
    assert "models.bertscore: unknown key 'num_layer' (did you mean 'num_layers'?)" in refusal(
        {"models.bertscore.num_layer": 3})

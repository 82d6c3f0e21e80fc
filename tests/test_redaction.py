"""The one redactor (evalbook.redaction): what it replaces, where, and which secrets a profile has."""

from __future__ import annotations

import pytest

from evalbook.redaction import EVERY, REDACTED, SECRET_FIELDS, Redactor, profile_redactor, profile_secrets
from evalbook.validation import shipped_schema

KEY = "sk-live-8c2e41f9"


def test_a_header_echoed_whole_leaves_one_mark_and_a_bare_value_is_replaced_too():
    redactor = Redactor([f"Bearer {KEY}", KEY])
    assert redactor.text(f"bad key Bearer {KEY}") == f"bad key {REDACTED}"
    assert redactor.text(f"{KEY}{KEY} and {KEY}") == f"{REDACTED}{REDACTED} and {REDACTED}"
    assert redactor.text("nothing secret") == "nothing secret"


def test_a_document_is_redacted_in_every_string_and_key_and_other_values_are_kept():
    redactor = Redactor([KEY])
    document = {"answer": f"the key {KEY}", KEY: [1, 2.5, None, True, {"id": f"doc-{KEY}"}]}
    assert redactor.document(document) == {"answer": f"the key {REDACTED}",
                                           REDACTED: [1, 2.5, None, True, {"id": f"doc-{REDACTED}"}]}
    assert redactor.holds_secret(document)
    assert not redactor.holds_secret(redactor.document(document))
    assert not Redactor().holds_secret(document)


def test_empty_and_very_short_values_are_not_secrets():
    redactor = Redactor(["", None, "ab", KEY])
    assert redactor.secrets == (KEY,)
    assert redactor.text("ab cd") == "ab cd"
    assert not Redactor(["", None])


def test_a_profile_s_secrets_are_every_variable_its_sections_read():
    values = {"judge": {"api_key_env": "JUDGE_KEY"},
              "generate": {"http": {"headers": {"Authorization": {"env": "RAG_TOKEN", "prefix": "Token "},
                                                "X-Team": {"env": "TEAM_ID"}}},
                           "openai": {"api_key_env": "GEN_KEY"}},
              "simulate": {"api_key_env": "SIMULATOR_KEY"}}
    environ = {"JUDGE_KEY": "judge-secret-1", "RAG_TOKEN": "rag-secret-2", "TEAM_ID": "team-secret-3",
               "GEN_KEY": "gen-secret-4", "SIMULATOR_KEY": "simulator-secret-6", "OTHER": "not-read-5"}
    assert profile_secrets(values, environ) == [
        "Bearer judge-secret-1", "judge-secret-1", "Token rag-secret-2", "rag-secret-2",
        "team-secret-3", "Bearer gen-secret-4", "gen-secret-4", "Bearer simulator-secret-6", "simulator-secret-6"]
    assert profile_secrets(values, {}) == []  # a variable that is not set holds nothing


def test_the_profile_redactor_reads_the_environment(monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", KEY)
    redactor = profile_redactor({"judge": {"api_key_env": "JUDGE_KEY"}, "generate": {}})
    assert redactor.text(f"x {KEY}") == f"x {REDACTED}"


def test_the_simulator_s_key_is_a_secret_of_the_profile(monkeypatch):
    monkeypatch.setenv("SIMULATOR_KEY", KEY)
    redactor = profile_redactor({"judge": {"api_key_env": None}, "generate": {},
                                 "simulate": {"api_key_env": "SIMULATOR_KEY"}})
    assert redactor.text(f"seen: Bearer {KEY}") == f"seen: {REDACTED}"
    assert profile_secrets({"simulate": None}, {"SIMULATOR_KEY": KEY}) == []  # no simulator, no secret


def variable_fields(schema, path=()):
    """The path of every field of a JSON Schema whose value names an environment variable: a
    property called `*_env`, or `env` inside a header (EVERY for a mapping's entries)."""
    if isinstance(schema, list):
        for item in schema:
            yield from variable_fields(item, path)
        return
    if not isinstance(schema, dict):
        return
    for name, sub in schema.get("properties", {}).items():
        if name.endswith("_env") or (name == "env" and "headers" in path):
            yield (*path, name)
        yield from variable_fields(sub, (*path, name))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from variable_fields(schema["additionalProperties"], (*path, EVERY))
    for keyword in ("oneOf", "anyOf", "allOf"):
        yield from variable_fields(schema.get(keyword, []), path)
    for keyword in ("items", "then", "else"):
        yield from variable_fields(schema.get(keyword), path)
    for sub in schema.get("$defs", {}).values():
        yield from variable_fields(sub, path)


def test_every_field_of_the_profile_schema_that_names_a_variable_is_a_secret_field():
    found = set(variable_fields(shipped_schema("profile-v1.json")))
    assert {("judge", "api_key_env"), ("simulate", "api_key_env")} <= found  # the walk sees them
    assert found == {field.path for field in SECRET_FIELDS}


@pytest.mark.parametrize("added", [
    {"properties": {"tracking": {"properties": {"token_env": {"type": "string"}}}}},
    {"properties": {"judge": {"properties": {"headers": {"additionalProperties": {
        "properties": {"env": {"type": "string"}}}}}}}},
])
def test_the_walk_finds_a_new_variable_field_the_list_lacks(added):
    schema = shipped_schema("profile-v1.json")
    found = set(variable_fields({"allOf": [schema, added]}))
    assert found - {field.path for field in SECRET_FIELDS}

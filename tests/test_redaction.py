"""The one redactor (evalbook.redaction): what it replaces, where, and which secrets a profile has."""

from __future__ import annotations

from evalbook.redaction import REDACTED, Redactor, profile_redactor, profile_secrets

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


def test_a_profile_s_secrets_are_every_variable_its_judge_and_generate_sections_read():
    values = {"judge": {"api_key_env": "JUDGE_KEY"},
              "generate": {"http": {"headers": {"Authorization": {"env": "RAG_TOKEN", "prefix": "Token "},
                                                "X-Team": {"env": "TEAM_ID"}}},
                           "openai": {"api_key_env": "GEN_KEY"}}}
    environ = {"JUDGE_KEY": "judge-secret-1", "RAG_TOKEN": "rag-secret-2", "TEAM_ID": "team-secret-3",
               "GEN_KEY": "gen-secret-4", "OTHER": "not-read-5"}
    assert profile_secrets(values, environ) == [
        "Bearer judge-secret-1", "judge-secret-1", "Token rag-secret-2", "rag-secret-2",
        "team-secret-3", "Bearer gen-secret-4", "gen-secret-4"]
    assert profile_secrets(values, {}) == []  # a variable that is not set holds nothing


def test_the_profile_redactor_reads_the_environment(monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", KEY)
    redactor = profile_redactor({"judge": {"api_key_env": "JUDGE_KEY"}, "generate": {}})
    assert redactor.text(f"x {KEY}") == f"x {REDACTED}"

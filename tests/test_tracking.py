"""MLflow tracking's pure parts: the profile's target, credentials kept out, the params, metrics
and tags a run logs, and the messages of a refusal (the real server: test_tracking_mlflow.py)."""

from __future__ import annotations

import io
import re

import pytest

from evalbook import execution
from evalbook.layout import NOT_TRACKED_MARKER
from evalbook.params import ParamsError, load_profile
from evalbook.publish import tracking
from evalbook.runs import not_published
from paths import ROOT

PROFILE = ROOT / "params" / "default.yaml"


def test_without_credentials_drops_the_user_and_password_only():
    assert tracking.without_credentials("https://ana:s3cret@mlflow.example:8443/x?y=1") == "https://mlflow.example:8443/x?y=1"
    assert tracking.without_credentials("http://127.0.0.1:5000") == "http://127.0.0.1:5000"


def test_no_tracking_section_or_mlflow_null_tracks_nothing():
    assert tracking.target({}) is None
    assert tracking.target({"tracking": {"mlflow": None}}) is None


def test_the_uri_comes_from_the_profile_or_the_environment_and_never_carries_credentials():
    asked = {"tracking": {"mlflow": {"tracking_uri": None, "experiment": "rag"}}}
    where = tracking.target(asked, {"MLFLOW_TRACKING_URI": "http://ana:pw@host:5000"})
    assert (where.uri, where.shown_uri, where.source) == ("http://ana:pw@host:5000", "http://host:5000", "MLFLOW_TRACKING_URI")
    with pytest.raises(ValueError, match="MLFLOW_TRACKING_URI, which is not set"):
        tracking.target(asked, {})
    in_profile = {"tracking": {"mlflow": {"tracking_uri": "http://ana:pw@host:5000", "experiment": "rag"}}}
    with pytest.raises(ValueError, match="carries credentials"):
        tracking.target(in_profile, {})


def test_a_profile_asking_for_tracking_without_the_client_exits_2_naming_the_extra(tmp_path, monkeypatch):
    profile = tmp_path / "tracked.yaml"
    profile.write_text(f"extends: {PROFILE}\ntracking:\n  mlflow: {{tracking_uri: 'http://127.0.0.1:9', experiment: x}}\n")
    monkeypatch.setattr(tracking.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ParamsError, match=r"evalbook\[mlflow\]") as info:
        tracking.profile_target(load_profile(str(profile), {}))
    assert info.value.exit_code == 2 and str(profile) in str(info.value)


def test_the_profile_schema_refuses_a_tracking_section_without_an_experiment(tmp_path):
    profile = tmp_path / "tracked.yaml"
    profile.write_text(f"extends: {PROFILE}\ntracking:\n  mlflow: {{tracking_uri: 'http://127.0.0.1:9'}}\n")
    with pytest.raises(ParamsError, match="experiment"):
        load_profile(str(profile), {})


def test_params_are_the_profile_flattened_and_the_overrides():
    params = tracking.run_params({"seed": 0, "models": {"bertscore": {"num_layers": 6, "idf": False}}, "limit": None,
                                  "slices": {"by": ["domain"]}}, {"limit": 8})
    assert params == {"seed": "0", "models.bertscore.num_layers": "6", "models.bertscore.idf": "false",
                      "limit": "null", "slices.by": '["domain"]', "override.limit": "8"}


def test_metrics_are_each_headline_mean_with_its_interval_and_n_the_pass_rates_and_the_counts():
    headline = {"metrics": {"bertscore_f1": {"mean": 0.61, "low": 0.54, "high": 0.67, "n": 32},
                            "mrr_at_k": {"mean": 0.74, "low": None, "high": None, "n": 20}},
                "pass_rates": {"groundedness": {"rate": 0.8, "threshold": 4, "n_scored": 5}}}
    metrics = tracking.run_metrics(headline, {"counts": {"n_examples": 32, "flag": True}})
    assert metrics == {"bertscore_f1": 0.61, "bertscore_f1.low": 0.54, "bertscore_f1.high": 0.67, "bertscore_f1.n": 32.0,
                       "mrr_at_k": 0.74, "mrr_at_k.n": 20.0, "groundedness_pass": 0.8, "groundedness_pass.n": 5.0,
                       "counts.n_examples": 32.0}


def test_tags_name_the_dataset_its_sha256_the_generator_the_judge_the_commit_and_the_run():
    headline = {"run_id": "r-1", "env": "local", "git_commit": "abc123",
                "run": {"models": {"generator": "rag-v2"}, "judge_label": "judge-A",
                        "inputs_sha256": {"input_path": "f" * 64, "predictions_path": "e" * 64}}}
    tags = tracking.run_tags(headline, {"dataset": {"name": "faq", "split": "test"}, "schema_version": "1.10"})
    assert tags == {"evalbook.dataset.name": "faq", "evalbook.dataset.split": "test", "evalbook.generator": "rag-v2",
                    "evalbook.judge.label": "judge-A", "evalbook.git_commit": "abc123", "evalbook.run_id": "r-1",
                    "evalbook.report.schema_version": "1.10", "evalbook.env": "local",
                    "evalbook.inputs_sha256.input_path": "f" * 64, "evalbook.inputs_sha256.predictions_path": "e" * 64}


def test_the_redactor_holds_mlflows_credentials_and_the_profiles_secrets():
    environ = {"MLFLOW_TRACKING_PASSWORD": "pw-123456", "MLFLOW_TRACKING_TOKEN": "tok-123456", "JUDGE_KEY": "sk-abcdef",
               "MLFLOW_TRACKING_URI": "http://ana:uri-pass-1@host"}
    clean = tracking.redactor({"judge": {"api_key_env": "JUDGE_KEY"}}, environ)
    text = clean.text("pw-123456 tok-123456 Bearer sk-abcdef uri-pass-1")
    assert "pw-123456" not in text and "tok-123456" not in text and "sk-abcdef" not in text and "uri-pass-1" not in text


@pytest.mark.parametrize(("error", "said"), [
    (RuntimeError("API request to http://ana:pw@h:5000/api failed with 401 Unauthorized"), "refused the credentials"),
    (RuntimeError("Max retries exceeded: Connection refused"), "could not be reached"),
    (RuntimeError("PERMISSION_DENIED: Permission denied for experiment"), "ask for EDIT permission"),
])
def test_a_refusal_says_what_went_wrong_without_credentials(error, said):
    where = tracking.Target("http://ana:pw@h:5000", "rag", "http://h:5000", "profile")
    message = tracking._explained(error, where, tracking.redactor({}, {}))
    assert said in message and "http://h:5000" in message and "ana:pw" not in message


def test_the_index_reason_of_a_run_names_both_markers(tmp_path):
    (tmp_path / "NOT_UPLOADED").write_text("not uploaded to s3://b/x: denied\n")
    (tmp_path / "NOT_TRACKED").write_text("not tracked in MLflow at http://h:5000 (experiment 'rag'): down\n")
    assert not_published(tmp_path) == ("not uploaded to s3://b/x: denied\n"
                                       "not tracked in MLflow at http://h:5000 (experiment 'rag'): down")


def test_not_tracked_is_written_by_one_helper_for_runs_and_comparisons(tmp_path):
    """NOT_TRACKED's text and write are `execution.mark_not_tracked`'s alone: the runner (a run)
    and sidedocs (a comparison) both call it; besides it, only evalbook.runs, which reads the
    markers, names the file."""
    where = tracking.target({"tracking": {"mlflow": {"tracking_uri": None, "experiment": "rag"}}},
                            {"MLFLOW_TRACKING_URI": "http://ana:pw@host:5000"})
    execution.mark_not_tracked(tmp_path, where, RuntimeError("refused"), io.StringIO())
    assert (tmp_path / NOT_TRACKED_MARKER).read_text("utf-8") == (
        "not tracked in MLflow at http://host:5000 (experiment 'rag'): refused\n")
    assert not_published(tmp_path) is not None
    package = ROOT / "lib" / "evalbook"
    naming = sorted(path.relative_to(package).as_posix() for path in package.rglob("*.py")
                    if path.name != "layout.py" and re.search(r"\bNOT_TRACKED_MARKER\b", path.read_text("utf-8")))
    assert naming == ["execution.py", "runs.py"]  # the one writer, and the reader of markers
    for caller in ("runner.py", "sidedocs.py"):
        assert "mark_not_tracked(" in (package / caller).read_text("utf-8")

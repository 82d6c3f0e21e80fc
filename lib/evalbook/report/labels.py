"""What the report's provenance fields mean in words, for the page's "How this run was made".

The report JSON keeps the keys (`weights_sha256.bertscore`); a reader sees "BERTScore weights
(sha256)". A key this table does not know yet reads as its words (underscores as spaces, dots as
colons), never as a dict. The counts' words are formatting.COUNT_LABELS, shared by every page.
"""

from __future__ import annotations

# Each provenance field by its dotted key; a key under one of PROVENANCE_GROUPS reads as the
# group's words with the key (`torch version`).
PROVENANCE: dict[str, str] = {
    "git_commit": "git commit",
    "params_hash": "parameters' hash",
    "params_profile.path": "parameters file",
    "params_profile.name": "parameters profile",
    "params_profile.version": "profile version",
    "bertscore_hash": "BERTScore's settings",
    "bertscore_num_layers": "BERTScore layer",
    "weights_sha256.bertscore": "BERTScore weights (sha256)",
    "weights_sha256.sentence_transformer": "sentence model weights (sha256)",
    "shared_forward_pass": "one forward pass for both models",
    "scoring_device": "scored on",
    "scoring_backend": "scored with",
    "percentile_method": "percentiles",
    "inputs_sha256.input_path": "input file (sha256)",
    "inputs_sha256.predictions_path": "predictions file (sha256)",
}
PROVENANCE_GROUPS: dict[str, str] = {
    "package_versions": "{} version",
    "scoring_backend_versions": "{} version (scoring)",
    "params_profile.overrides": "override {}",
    "embedding_cache": "embedding cache: {}",
}


def _words(key: str) -> str:
    return key.removeprefix("n_").replace("_", " ").replace(".", ": ")


def provenance_name(key: str) -> str:
    """The dotted provenance key `key` in words."""
    if key in PROVENANCE:
        return PROVENANCE[key]
    for group, pattern in PROVENANCE_GROUPS.items():
        if key.startswith(group + "."):
            return pattern.format(key.removeprefix(group + "."))
    return _words(key)

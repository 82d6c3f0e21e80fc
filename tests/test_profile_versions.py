"""Each profile's `version` is tied to a hash of the keys that change scores.

A change to one of those keys (in the profile, in a profile it extends, or in the default a
profile gets for a key added later) changes the hash, so this test fails until the version is
bumped, the change has its line in params/CHANGELOG.md, and the new hash is recorded below.
The judge's prompt templates are not profile keys: the judge label in a report covers them.
"""

from __future__ import annotations

import copy

from pathlib import Path
from typing import Any

import pytest
import yaml

from evalbook.params import ADDED_KEYS, Profile, load_profile, params_hash

ROOT = Path(__file__).resolve().parents[1]
PROFILES = sorted((ROOT / "params").glob("*.yaml"))

# Dotted keys (a section covers every key under it) whose values change a score, a flag or
# which examples are scored.
SCORE_KEYS = (
    "input_path", "predictions_path", "limit", "seed", "skip_incomplete_examples", "dataset.split",
    "models", "retrieval",
    # The judge label (judge/stage.py describe_judge) counts the server's host as part of the judge.
    "judge.enabled", "judge.base_url", "judge.model", "judge.temperature", "judge.seed", "judge.max_tokens",
    "judge.structured_output", "judge.sample_size", "judge.sample_seed", "judge.ground_truth_column",
    "judge.eligible_sources", "judge.metrics", "judge.embedding", "judge.repeats",
    # What generates the answers, and the source they are given (which the judge's eligibility reads).
    "generate.enabled", "generate.kind", "generate.source", "generate.system_version", "generate.http",
    "generate.openai",
    # What conversations are simulated and how: the simulator's pins (the whole section, which
    # may be null; its timeouts and retries with it, since a timeout ends a conversation) and
    # the scenarios run.
    "simulate",
    "scenarios.enabled", "scenarios.path", "scenarios.repeats", "scenarios.timeout_seconds",
    "scenarios.replay_from",
    # Which checks are asserted on the answers, and what fails them.
    "checks",
)
# Keys that change where or how a run executes, or what it is called, but no score.
NOT_SCORE_KEYS = (
    "version", "name", "description", "env", "outputs_root", "local_outputs_root", "run_id",
    "dataset.name", "generator",
    "engine", "ray_address", "ray_actors", "ray_num_gpus", "ray_shared_path",
    # Batching, threads, the device and the embedding cache move a score by float32 rounding at
    # most (params/CHANGELOG.md, default 1, keys added).
    "scoring",
    # How the judge is reached and how patiently, what it costs, where its cache lives.
    "judge.note", "judge.api_key_env", "judge.timeout_seconds", "judge.max_retries",
    "judge.concurrency", "judge.prices", "judge.cache_path", "judge.start_server",
    "judge.max_calls", "judge.max_cost_usd",  # refuse a run over budget; change no score
    # How the system under test is reached and how patiently, and what the runner starts for it.
    "generate.concurrency", "generate.timeout_seconds", "generate.max_retries", "generate.backoff_seconds",
    "generate.cache_path", "generate.start_server", "generate.service",
    # How 04_report cuts the scores into slices and tests them: no score moves.
    "slices",
    # Where a run is also logged (MLflow): no score moves.
    "tracking",
    # The scenarios' budget refuses a run, moves no score.
    "scenarios.max_calls",
)

# profile name -> version -> hash of its score-affecting keys. Keep the old versions' lines.
RECORDED_HASHES: dict[str, dict[int, str]] = {
    "scenarios-local": {1: "sha256:e64c463cbea69cc5dcb253959894ad5c0b1a5021a28dcb6493a8968ea3e2102d",
                        2: "sha256:887a97832a17e7da8ef19033b6e4a21ef91db333836316b5918b41daa2dd9d11"},
    "adr014": {1: "sha256:eada95f901b265b60788f769a8430f9f64bf52b7a54561f7146564b74da93f36",
               2: "sha256:494f01c4d2227945c2317a3896db236331ffbc1aaa950d4603ddc84c3e8e31c3",
               3: "sha256:f80e7d0f9483f0484fdca51854a27c8ba1ac9acbbf272cf45bd16593b2cc5f5d"},
    "context-local": {1: "sha256:d3a53b00b64e7bfdbb475d8d9aff59436a74cff75ff026f19d2eeb5816c218a8",
                      2: "sha256:692e1ec17c811662620d121df8531cf5964eeeb0e77bafc7b1f31f5910ea68f7"},
    "default": {1: "sha256:6f039804c21fd3f73b326c211b8e46d833e8e6878fdc4711fda65dc58d8ec5d6",
                2: "sha256:9904c2e64c1ef23d8ecb64bf1d570133067be7ad9c02695bc2457a529ba229bd",
                3: "sha256:93b2189f0efe31f5501650b56f86f8a217253474fd6ab312fab95017fa5808ed"},
    "generate-local": {1: "sha256:e86cb15a6ac46f71c9a3d23ab5e7a65a9c322d1e7e35989dac8384939981c3c7",
                       2: "sha256:b617b7f253e868550dc03121e809efd20fd3359bc7512474a38a62f42bc76e2c"},
    "local-judge": {1: "sha256:6f039804c21fd3f73b326c211b8e46d833e8e6878fdc4711fda65dc58d8ec5d6",
                    2: "sha256:9904c2e64c1ef23d8ecb64bf1d570133067be7ad9c02695bc2457a529ba229bd",
                    3: "sha256:93b2189f0efe31f5501650b56f86f8a217253474fd6ab312fab95017fa5808ed"},
    "openai": {1: "sha256:8cf32d7466f9815d4240db29b91968dd81393c4bb54b0c72cacac2bfd99d29ea",
               2: "sha256:201092a4a75b099cb578f291e1cef04eba9bf360503b3a7a0da347359f588ff4"},
}


def leaf_keys(values: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for key, value in values.items():
        dotted = f"{prefix}{key}"
        keys.extend(leaf_keys(value, f"{dotted}.") if isinstance(value, dict) else [dotted])
    return keys


def covering(dotted: str, prefixes: tuple[str, ...]) -> list[str]:
    return [prefix for prefix in prefixes if dotted == prefix or dotted.startswith(prefix + ".")]


def dotted(values: Any, key: str) -> tuple[bool, Any]:
    """(found, value) of a dotted key in nested mappings."""
    for part in key.split("."):
        if not isinstance(values, dict) or part not in values:
            return False, None
        values = values[part]
    return True, values


def at_added_default(key: str, value: Any) -> bool:
    """True when `key` is a key added later (params.ADDED_KEYS, or inside an added section) at
    the value that reproduces the behaviour before it."""
    for added, default in ADDED_KEYS.items():
        if key == added:
            return value == default
        if key.startswith(added + "."):
            found, before = dotted(default, key[len(added) + 1:])
            return found and value == before
    return False


def score_values(profile: Profile) -> dict[str, Any]:
    """The loaded profile's score-affecting keys, as dotted key -> value. A key added later at
    the default that reproduces the behaviour before it, or absent from its section, is left out:
    it changes no score, so it leaves the hash, and the version, as they were."""
    pruned = copy.deepcopy(profile.values)
    for added, default in ADDED_KEYS.items():  # an added key inside a score section (judge.metrics.<new>)
        *sections, name = added.split(".")
        node = pruned
        for section in sections:
            node = node.get(section) if isinstance(node, dict) else None
        if isinstance(node, dict) and name in node and node[name] == default and len(sections) > 1:
            del node[name]
    values = {key: dotted(pruned, key) for key in SCORE_KEYS}
    return {key: value for key, (found, value) in values.items() if found and not at_added_default(key, value)}


def version_problem(profile: Profile) -> str | None:
    """Why the profile's version does not match its score-affecting keys, or None."""
    name, version = profile["name"], profile["version"]
    actual = params_hash(score_values(profile))
    recorded = RECORDED_HASHES.get(name, {})
    file = profile.source_path.name
    if version not in recorded:
        return (f"{file}: version {version} has no recorded hash; once its line is in "
                f"params/CHANGELOG.md, record RECORDED_HASHES[{name!r}][{version}] = {actual!r} "
                "in tests/test_profile_versions.py")
    if recorded[version] != actual:
        return (f"{file}: a key that changes scores has changed but version is still {version}. "
                f"Bump `version:` in {file}, add a line for it to params/CHANGELOG.md, and record "
                f"RECORDED_HASHES[{name!r}][{version + 1}] = {actual!r} in "
                "tests/test_profile_versions.py. If the key truly changes no score, move it to "
                "NOT_SCORE_KEYS there, with the reason.")
    return None


@pytest.mark.parametrize("path", PROFILES, ids=lambda path: path.stem)
def test_the_version_matches_the_score_affecting_keys(path):
    assert version_problem(load_profile(path)) is None, version_problem(load_profile(path))


@pytest.mark.parametrize("path", PROFILES, ids=lambda path: path.stem)
def test_every_key_is_either_score_affecting_or_not(path):
    keys = leaf_keys(load_profile(path).values)
    unclassified = [key for key in keys if not covering(key, SCORE_KEYS + NOT_SCORE_KEYS)]
    assert unclassified == [], ("add each of these keys to SCORE_KEYS or NOT_SCORE_KEYS in "
                                f"tests/test_profile_versions.py: {unclassified}")
    twice = [key for key in keys if covering(key, SCORE_KEYS) and covering(key, NOT_SCORE_KEYS)]
    assert twice == []


def edited_default(tmp_path: Path, key: str, value: Any, version: int | None = None) -> Profile:
    values = yaml.safe_load((ROOT / "params" / "default.yaml").read_text("utf-8"))
    node = values
    *sections, name = key.split(".")
    for section in sections:
        node = node[section]
    node[name] = value
    if version is not None:  # None: default.yaml's own version
        values["version"] = version
    path = tmp_path / "default.yaml"
    path.write_text(yaml.safe_dump(values), "utf-8")
    return load_profile(path)


@pytest.mark.parametrize("key, value", [
    ("retrieval.k", 6), ("models.bertscore.num_layers", 5), ("judge.metrics.groundedness.threshold", 0.7),
    ("limit", 3), ("judge.embedding.sha256", None), ("judge.base_url", "http://127.0.0.1:8081/v1"),
    ("checks.facts.fail_missing", True),
])
def test_a_score_change_without_a_bump_is_refused(tmp_path, key, value):
    unbumped = version_problem(edited_default(tmp_path, key, value))
    assert unbumped is not None and "Bump `version:` in default.yaml" in unbumped
    bumped = version_problem(edited_default(tmp_path, key, value, version=4))
    assert bumped is not None and "version 4 has no recorded hash" in bumped


@pytest.mark.parametrize("key, value", [
    ("env", "ci"), ("run_id", "3b7e2f10-5c4d-4a8b-9e6f-0d1c2b3a4f5e"), ("engine", "ray"), ("scoring.device", "cpu"),
    ("judge.concurrency", 1), ("description", "another"), ("judge.cache_path", "elsewhere.sqlite"),
    ("judge.start_server", True),
])
def test_a_change_that_moves_no_score_keeps_the_version(tmp_path, key, value):
    assert version_problem(edited_default(tmp_path, key, value)) is None

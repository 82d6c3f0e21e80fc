"""Params profiles: load a reviewed YAML file, apply `-p key=value` overrides, validate.

A profile is validated against `schemas/profile-v1.json` when it is loaded, so an unknown key
or a wrong type fails before any model is touched. Every key is required, except those added
after profiles were first written (`ADDED_KEYS`): a profile without one gets the value that
behaves as evalbook did before the key existed. So an older run folder's `params.yaml` still
loads when one of its notebooks is run again. Relative paths in a profile resolve against
the project root (the nearest folder above the profile that holds `pyproject.toml`).
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from evalbook.errors import EvalbookError, UnusableInput
from evalbook.layout import EMBEDDING_CACHE_DIR, GENERATE_CACHE_FILE, JUDGE_CACHE_FILE
from evalbook.storage import is_remote
from evalbook.validation import input_validator, jsonschema

PATH_KEYS = ("input_path", "predictions_path", "outputs_root", "local_outputs_root")
# Path keys that an override may set; paths in overrides resolve against the working folder.
OVERRIDE_PATH_KEYS = (*PATH_KEYS, "models.bertscore.baseline_path", "judge.cache_path",
                      "scoring.embedding_cache.path", "generate.cache_path", "scenarios.path",
                      "scenarios.replay_from", "checks.path")
REQUIRED_PATH_KEYS = ("input_path", "outputs_root", "local_outputs_root")
DEFAULT_LOCAL_OUTPUTS_ROOT = "outputs"
# Keys whose values are text: `-p env=2026` or `-p generator=3.5` must stay strings.
TEXT_KEYS = frozenset((*PATH_KEYS, "run_id", "env", "name", "description", "generator", "ray_address",
                       "ray_shared_path", "dataset.name", "dataset.split", "scoring.embedding_cache.path",
                       "generate.system_version", "generate.source", "generate.cache_path", "scenarios.path",
                       "scenarios.replay_from", "simulate.model", "simulate.prompt", "checks.path"))
TEXT_KEY_SUFFIXES = (".name", ".source", ".sha256", ".baseline_path")
# Keys added after profile-v1 was first used, with the value that reproduces the behaviour
# before them; each has a line in params/CHANGELOG.md. The embedded profiles set them all.
ADDED_KEYS: dict[str, Any] = {
    "engine": "local",
    "ray_address": None,
    "ray_actors": None,
    "ray_num_gpus": 0,
    "ray_shared_path": None,
    "scoring.chunk_size": 2000,
    "scoring.threads": None,
    "scoring.embedding_cache": {"enabled": False, "path": None, "max_bytes": 2 * 2**30},
    "scoring.device": "cpu",
    "scoring.backend": "torch",
    "judge.repeats": 1,
    "judge.max_calls": None,
    "judge.max_cost_usd": None,
    "generate": {"enabled": False},
    "slices": {"by": "auto", "topics": {"k": None}, "min_n": 10},
    # before the checks, no answer was checked
    "checks": {"facts": {"enabled": False, "fail_beyond_reference": False, "fail_missing": False}, "path": None},
    "tracking": {"mlflow": None},
    "simulate": None,
    "scenarios": {"enabled": False},
    "judge.metrics.context_relevance": {"enabled": False, "threshold": None},
    "judge.metrics.context_precision": {"enabled": False, "threshold": None},
    "judge.metrics.context_recall": {"enabled": False, "threshold": None},
}
# What 02a_converse needs of `generate:` (the system under test) when 00_generate is off
SYSTEM_KEYS = ("kind", "system_version", "timeout_seconds", "max_retries", "backoff_seconds", "start_server",
               "service")


class ParamsError(UnusableInput, ValueError):
    """A profile or an override that cannot be used, with the file and key it concerns."""


# How many values YAML aliases may add to a profile beyond those written out. An alias may
# repeat a section, but an alias bomb (lists of aliases of lists of aliases) stands for billions
# of values in a few lines, and expanding them, as validation's messages and the params hash do,
# took minutes and gigabytes. So a profile's size is counted, aliases expanded, as it is read.
MAX_ALIASED_VALUES = 10_000


# How deep a profile or a scenario file may nest its lists and mappings. A profile needs 5
# levels; PyYAML composes each level by recursion, so a file nested 100,000 levels deep ended in
# a RecursionError of thousands of lines instead of a message.
MAX_NESTING = 64


class YAMLRefused(EvalbookError, yaml.YAMLError):
    """YAML that ProfileLoader refuses to read, with the line and column where it stopped."""

    def __init__(self, mark: yaml.Mark, problem: str):
        super().__init__(f"line {mark.line + 1}, column {mark.column + 1}: {problem}")


class AliasesRefused(YAMLRefused):
    """YAML aliases that multiply a document past MAX_ALIASED_VALUES values, or never end."""


class NestingRefused(YAMLRefused):
    """Lists and mappings nested more than MAX_NESTING levels deep."""


class ProfileLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, refusing (AliasesRefused) a document whose aliases expand it by more
    than MAX_ALIASED_VALUES values, or that holds an alias of a collection inside that collection,
    and (NestingRefused) one nested deeper than MAX_NESTING.

    Each node's expanded size (itself and everything under it, each alias counted as the values
    it stands for) is known once the node is composed, so a bomb is refused after a few hundred
    nodes, before anything is constructed."""

    def __init__(self, stream):
        super().__init__(stream)
        self._expanded: dict[int, int] = {}  # id(node) -> values it stands for
        self._written = 0  # nodes composed so far, aliases not counted
        self._depth = 0  # collections open around the node being composed

    def compose_node(self, parent, index):
        if not self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
            return self._compose_counted(parent, index)
        if self._depth >= MAX_NESTING:
            raise NestingRefused(self.peek_event().start_mark, f"lists and mappings nested more than "
                                 f"{MAX_NESTING} levels deep; no profile or scenario file needs that many")
        self._depth += 1
        try:
            return self._compose_counted(parent, index)
        finally:
            self._depth -= 1

    def _compose_counted(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None and id(target) not in self._expanded:
                raise AliasesRefused(event.start_mark, f"the YAML alias *{event.anchor} is inside the "
                                     "value it names, so that value would never end")
            return super().compose_node(parent, index)
        node = super().compose_node(parent, index)
        self._written += 1
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = []
        expanded = 1 + sum(self._expanded[id(child)] for child in children)
        self._expanded[id(node)] = expanded
        if expanded - self._written > MAX_ALIASED_VALUES:
            raise AliasesRefused(node.start_mark, f"YAML aliases expand this value to more than "
                                 f"{MAX_ALIASED_VALUES} values (an alias bomb?); an alias may repeat a "
                                 "value, not multiply it: write the values out")
        return node


def read_yaml(text: str) -> Any:
    """`text` as YAML, read with ProfileLoader (PyYAML's safe loader with aliases bounded)."""
    return yaml.load(text, Loader=ProfileLoader)  # noqa: S506 - ProfileLoader is a SafeLoader


def yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML error on one line: where it is and what is wrong."""
    if not isinstance(error, yaml.MarkedYAMLError):
        return " ".join(str(error).split())
    mark = error.problem_mark or error.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    what = "; ".join(part for part in (error.context, error.problem) if part)
    return where + what


def _read_profile_text(text: str, origin: str) -> Any:
    """A profile's YAML text as values; ParamsError, naming `origin`, when it cannot be read."""
    try:
        return read_yaml(text)
    except YAMLRefused as exc:
        raise ParamsError(f"{origin}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ParamsError(f"{origin}: not valid YAML ({yaml_problem(exc)})") from exc


@dataclass(frozen=True)
class Profile:
    """A validated profile: its values, where it came from, and the root its paths resolve against."""

    values: dict[str, Any]
    source_path: Path
    root: Path

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, dotted_key: str) -> Any:
        node: Any = self.values
        for part in dotted_key.split("."):
            node = node[part]
        return node

    def path(self, key: str) -> str | None:
        """The value of a path key, made absolute against the project root (`hf://` kept as is)."""
        return resolve_path(self.values.get(key), self.root)

    @property
    def content_hash(self) -> str:
        """sha256 of the profile's canonical JSON: equal values give equal hashes."""
        return params_hash(self.values)


def _schema() -> dict[str, Any]:
    text = resources.files("evalbook").joinpath("schemas/profile-v1.json").read_text("utf-8")
    return json.loads(text)


def params_hash(values: dict[str, Any]) -> str:
    canonical = json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# The notebooks' own folder: their default `params_path` is written relative to it.
NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"


def locate_notebook_file(given: str | Path, what: str = "params profile",
                         parameter: str = "params_path") -> Path:
    """Where a file named by a notebook parameter is: as given when absolute; a relative one is
    read from the working folder when it is there, else from the notebooks' folder (so that a
    notebook's default, such as `../params/default.yaml`, holds whichever folder Papermill is
    started from). `what` and `parameter` name the file and the parameter in the error."""
    path = Path(given)
    if path.is_absolute() or path.is_file():
        return path.resolve()
    beside_notebooks = NOTEBOOKS_DIR / path
    if beside_notebooks.is_file():
        return beside_notebooks.resolve()
    raise ParamsError(f"{what} {given} is neither in the working folder {Path.cwd()} "
                      f"nor in the notebooks' folder {NOTEBOOKS_DIR}; pass -p {parameter} <path>")


def locate_profile(params_path: str | Path) -> Path:
    """Where a notebook's `params_path` is (locate_notebook_file)."""
    return locate_notebook_file(params_path)


def find_root(start: Path) -> Path:
    """The nearest folder at or above `start` holding pyproject.toml, else `start` itself."""
    for folder in (start, *start.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
    return start


def resolve_path(value: str | None, root: Path) -> str | None:
    if value is None or "://" in value:
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (root / path).resolve())


def parse_override(text: str) -> tuple[str, Any]:
    """Split `key=value`; the value is read as YAML, so `limit=5` is an int and `limit=null` is None."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ParamsError(f"override {text!r} is not of the form key=value")
    try:
        value = read_yaml(raw) if raw.strip() else ""
    except AliasesRefused as exc:
        raise ParamsError(f"override -p {key}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ParamsError(f"override {text!r}: the value is not valid YAML ({yaml_problem(exc)})") from exc
    is_text_key = key in TEXT_KEYS or key.endswith(TEXT_KEY_SUFFIXES)
    if is_text_key and value is not None and not isinstance(value, str):
        value = raw.strip()
    return key, value


def parse_overrides(texts: list[str] | None) -> dict[str, Any]:
    """`-p KEY=VALUE` texts as a dict of dotted keys to values."""
    return dict(parse_override(text) for text in texts or [])


def dotted_items(values: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one mapping of dotted keys (`retrieval.k`), the keys `-p` takes."""
    if not isinstance(values, dict):
        return {prefix: values}
    flat: dict[str, Any] = {}
    for key, value in values.items():
        flat.update(dotted_items(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def apply_overrides(values: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Return a copy of `values` with dotted-key overrides set; unknown keys are left to validation."""
    merged = copy.deepcopy(values)
    for dotted_key, value in overrides.items():
        node = merged
        parts = dotted_key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                raise ParamsError(f"override {dotted_key!r}: {part!r} is not a section of the profile")
            node = child
        node[parts[-1]] = value
    return merged


def deep_merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`base` with `changes` applied: mappings merge key by key, anything else replaces."""
    merged = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


# What a profile says about its input beyond where it is: the bundled sample's predictions file,
# name, split and generator. A layer (an extending profile, or -p) that sets another input_path
# without them gets these, so that nothing of the sample's description carries over.
INPUT_DESCRIPTION = {"predictions_path": None, "dataset.name": None, "dataset.split": "test",
                     "generator": None}


def _dotted(values: dict[str, Any], dotted_key: str) -> tuple[bool, Any]:
    node: Any = values
    for part in dotted_key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def own_input(base: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    """`layer` (dotted keys) with INPUT_DESCRIPTION's values added for the keys it leaves out,
    when it sets an input_path other than `base`'s; else `layer` as it is."""
    if "input_path" not in layer or layer["input_path"] == base.get("input_path"):
        return layer
    return {**{key: value for key, value in INPUT_DESCRIPTION.items() if key not in layer}, **layer}


# Mappings that a profile extending another replaces whole, rather than merging key by key: a
# request body, its headers, a response mapping and a service's command describe one endpoint.
WHOLE_VALUES = ("generate.http.body", "generate.http.headers", "generate.http.response", "generate.service")


def _flat(values: dict[str, Any]) -> dict[str, Any]:
    """The top-level keys of a profile layer, and the INPUT_DESCRIPTION keys it sets, dotted."""
    flat = {key: value for key, value in values.items() if not isinstance(value, dict)}
    flat.update({key: _dotted(values, key)[1] for key in INPUT_DESCRIPTION if _dotted(values, key)[0]})
    return flat


def _resolve_extends(values: dict[str, Any], path: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    """A profile with `extends: other.yaml` is that profile with this one's keys merged over it."""
    parent_name = values.pop("extends", None)
    if parent_name is None:
        return values
    parent_path = (path.parent / str(parent_name)).resolve()
    if parent_path in seen:
        raise ParamsError(f"{path}: extends {parent_name} makes a cycle")
    try:
        parent_text = parent_path.read_text("utf-8")
    except OSError as exc:
        raise ParamsError(f"{path}: cannot read the profile it extends, {parent_path} ({exc})") from exc
    parent = _read_profile_text(parent_text, f"{parent_path} (extended by {path})")
    if not isinstance(parent, dict):
        raise ParamsError(f"{parent_path}: a params profile must be a mapping of keys to values")
    inherited = _resolve_extends(parent, parent_path, (*seen, parent_path))
    described = own_input(inherited, _flat(values))
    whole = {key: value for key in WHOLE_VALUES for found, value in [_dotted(values, key)] if found}
    return apply_overrides(deep_merge(inherited, values),
                           {**{key: described[key] for key in INPUT_DESCRIPTION if key in described}, **whole})


def with_added_keys(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with each missing `ADDED_KEYS` key set to its default (sections left to validation)."""
    completed = copy.deepcopy(values)
    for dotted_key, default in ADDED_KEYS.items():
        *sections, name = dotted_key.split(".")
        node = completed
        for section in sections:
            node = node.get(section) if isinstance(node, dict) else None
        if isinstance(node, dict) and name not in node:
            node[name] = copy.deepcopy(default)
    return completed


def _declared_keys(schema: Any, root: dict[str, Any], seen: frozenset[str] = frozenset()) -> tuple[set[str], set[str]]:
    """The property names and property patterns a schema declares, its local `$ref`s and its
    allOf/anyOf/oneOf branches included (what unevaluatedProperties counts as evaluated)."""
    if not isinstance(schema, dict):
        return set(), set()
    names, patterns = set(schema.get("properties") or {}), set(schema.get("patternProperties") or {})
    reference = schema.get("$ref")
    branches = [branch for key in ("allOf", "anyOf", "oneOf") for branch in schema.get(key) or []]
    if isinstance(reference, str) and reference.startswith("#/") and reference not in seen:
        target: Any = root
        for part in reference[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        branches.append(target)
        seen = seen | {reference}
    for branch in branches:
        more_names, more_patterns = _declared_keys(branch, root, seen)
        names |= more_names
        patterns |= more_patterns
    return names, patterns


def _unknown_keys(error: jsonschema.ValidationError) -> str:
    """Each key a section does not know, with the nearest known ones ("unknown key 'input_pth'
    (did you mean 'input_path'?)"), or the section's keys when none is near."""
    properties, pattern_texts = _declared_keys(error.schema, _schema())
    known = sorted(properties)
    patterns = [re.compile(pattern) for pattern in pattern_texts]
    unknown = [name for name in error.instance if name not in known
               and not any(pattern.search(str(name)) for pattern in patterns)]
    phrases = []
    for name in unknown:
        near = difflib.get_close_matches(str(name), known, n=3, cutoff=0.6)
        phrases.append(f"unknown key {name!r}" + (f" (did you mean {' or '.join(repr(k) for k in near)}?)" if near
                                                    else f"; the keys here are {', '.join(known)}"))
    return "; ".join(phrases) or error.message


def _violation(error: jsonschema.ValidationError) -> str:
    """The schema's message in words a person reads: an unknown key with the nearest known ones;
    for a value that breaks a pattern, also what the key allows."""
    if error.validator in ("additionalProperties", "unevaluatedProperties") and isinstance(error.instance, dict):
        return _unknown_keys(error)
    allowed = error.schema.get("description") if error.validator == "pattern" else None
    return f"{error.message}; allowed: {allowed}" if allowed else error.message


def override_text(key: str, value: Any) -> str:
    """`-p key=value` as it could have been typed, for messages."""
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"-p {key}={shown}"


def _override_at_fault(error: jsonschema.ValidationError, overrides: dict[str, Any]) -> str | None:
    """The override key whose value broke the schema: the error is at or under it, or it is the
    only unexpected key of a section; None when the profile's own values are at fault."""
    path = ".".join(str(p) for p in error.absolute_path)
    for key in overrides:
        if path == key or path.startswith(key + "."):
            return key
    unexpected_keys = error.validator in ("additionalProperties", "unevaluatedProperties")
    if unexpected_keys and isinstance(error.instance, dict):
        # jsonschema names the unexpected keys in its message, as in "('foo' was unexpected)"
        unexpected = [f"{path}.{name}" if path else str(name) for name in error.instance
                      if repr(name) in error.message]
        if unexpected and all(key in overrides for key in unexpected):
            return unexpected[0]
    return None


def validate(values: dict[str, Any], origin: str, overrides: dict[str, Any] | None = None) -> None:
    """Raise ParamsError listing every schema violation, each with its key path.

    When every violation is in a value that `overrides` (dotted keys, as given with -p) set, the
    message names those overrides on one line, and the profile `origin` only as what they were
    applied to."""
    validator = input_validator(_schema())
    errors = sorted(validator.iter_errors(values), key=lambda e: list(e.absolute_path))
    if errors:
        overrides = overrides or {}
        at_fault = [_override_at_fault(error, overrides) for error in errors]
        described = [(".".join(str(p) for p in error.absolute_path) or "(top level)", _violation(error))
                     for error in errors]
        if all(at_fault):
            raise ParamsError("; ".join(f"override {override_text(key, overrides[key])} is invalid: {where}: "
                                        f"{why}" for key, (where, why) in zip(at_fault, described))
                              + f" (applied to {origin})")
        lines = [f"  - {where}: {why}" + (f" (set by {override_text(key, overrides[key])})" if key else "")
                 for key, (where, why) in zip(at_fault, described)]
        raise ParamsError(f"{origin}: invalid params profile:\n" + "\n".join(lines))
    judge = values["judge"]
    if judge["metrics"]["criteria"]["enabled"] and not judge["metrics"]["criteria"]["goals"]:
        raise ParamsError(f"{origin}: judge.metrics.criteria is enabled but has no goals")
    if judge["embedding"]["kind"] == "local" and not judge["embedding"].get("source"):
        raise ParamsError(f"{origin}: judge.embedding of kind local needs a source (package:, path: or hub:)")
    if judge["embedding"]["kind"] == "openai" and judge["embedding"].get("source"):
        raise ParamsError(f"{origin}: judge.embedding of kind openai is reached through the judge's "
                          "client; set its source to null")
    if values["generate"]["enabled"] and values["predictions_path"] is not None:
        raise ParamsError(f"{origin}: generate.enabled is true, so 00_generate writes the answers, but "
                          f"predictions_path is also set ({values['predictions_path']}); keep one: "
                          "-p predictions_path=null")
    _check_scenarios(values, origin)
    shared = values["ray_shared_path"]
    if (shared is not None and not is_remote(shared)
            and not Path(shared.removeprefix("file://")).is_absolute()):
        raise ParamsError(f"{origin}: ray_shared_path {shared!r} must be an s3:// URL or an absolute "
                          "path, mounted at the same place on every Ray node")
    if values["engine"] == "ray" and values["ray_num_gpus"] > 0 and values["scoring"]["device"] == "cpu":
        raise ParamsError(f"{origin}: ray_num_gpus is {values['ray_num_gpus']} but scoring.device is "
                          "cpu, so the actors would hold GPUs and compute on the CPU; set "
                          "scoring.device to auto")
    baseline = values["models"]["bertscore"]
    if baseline["rescale_with_baseline"] and not baseline.get("baseline_path"):
        raise ParamsError(
            f"{origin}: models.bertscore.rescale_with_baseline is true but baseline_path is not set; "
            "bert-score would silently return unrescaled scores, so a baseline file is required"
        )


def check_input_files(profile: Profile, overrides: dict[str, Any]) -> None:
    """Refuse a local input_path or predictions_path that is a folder or is missing, naming the
    -p override or the profile that set it; before a run writes anything. URLs (hf://, s3://,
    file://) are left to the load stage, which reads them."""
    for key in ("input_path", "predictions_path"):
        path = profile.path(key)
        if path is None or "://" in path:
            continue
        if Path(path).is_dir():
            problem = "is a directory, not a file"
        elif not Path(path).exists():
            problem = "does not exist"
        else:
            continue
        origin = f"override -p {key}" if key in overrides else str(profile.source_path)
        raise ParamsError(f"{origin}: {key} {path} {problem}; "
                          f"pass -p {key}=<a .parquet, .csv or .jsonl file>")


def load_profile(path: str | Path, overrides: dict[str, Any] | None = None,
                 override_root: Path | None = None) -> Profile:
    """Load, override and validate a profile.

    Path-valued overrides are made absolute against `override_root` (the caller's working
    folder) so that `-p input_path=mine.csv` means the file the user sees.
    """
    source_path = Path(path).resolve()
    try:
        text = source_path.read_text("utf-8")
    except OSError as exc:
        raise ParamsError(f"{source_path}: cannot read params profile ({exc.strerror})") from exc
    values = _read_profile_text(text, str(source_path))
    if not isinstance(values, dict):
        raise ParamsError(f"{source_path}: a params profile must be a mapping of keys to values")
    values = _resolve_extends(values, source_path, seen=(source_path,))
    overrides = dict(overrides or {})
    for key in OVERRIDE_PATH_KEYS:
        if isinstance(overrides.get(key), str) and not overrides[key].strip():
            # An empty path would resolve to the working folder and be read or written there.
            raise ParamsError(f"{source_path}: override -p {key}= is empty; give {key} a path"
                              + ("" if key in REQUIRED_PATH_KEYS else ", or null for none"))
        if override_root is not None and isinstance(overrides.get(key), str):
            overrides[key] = resolve_path(overrides[key], override_root)
    values = apply_overrides(with_added_keys(values), own_input(values, overrides))
    validate(values, str(source_path), overrides)
    return Profile(values=values, source_path=source_path, root=find_root(source_path.parent))


def _check_scenarios(values: dict[str, Any], origin: str) -> None:
    """Enabled scenarios need a simulator and the system under test's endpoint in `generate:`."""
    if not values["scenarios"]["enabled"]:
        return
    if values["simulate"] is None:
        raise ParamsError(f"{origin}: scenarios.enabled is true but simulate is null: pin the simulated user "
                          "(simulate: base_url, model, temperature, seed, prompt; params/scenarios-local.yaml has one)")
    generate = values["generate"]
    missing = [key for key in SYSTEM_KEYS if key not in generate]
    if not missing and generate["kind"] not in generate:
        missing = [generate["kind"]]
    if missing:
        raise ParamsError(f"{origin}: scenarios.enabled is true, and the system under test is generate's endpoint, "
                          f"but generate has no {', '.join(missing)} (generate.enabled may stay false; "
                          "docs/generate.md describes the section)")


def resolved_values(profile: Profile) -> dict[str, Any]:
    """The profile with every path made absolute, as written into a run folder."""
    values = copy.deepcopy(profile.values)
    for key in PATH_KEYS:
        values[key] = profile.path(key)
    baseline = values["models"]["bertscore"].get("baseline_path")
    values["models"]["bertscore"]["baseline_path"] = resolve_path(baseline, profile.root)
    values["local_outputs_root"] = str(local_outputs_root(profile))
    values["judge"]["cache_path"] = judge_cache_path(profile)
    if values["generate"]["enabled"] or values["scenarios"]["enabled"]:
        values["generate"]["cache_path"] = generate_cache_path(profile)
    if values["scenarios"]["enabled"]:
        for key in ("path", "replay_from"):
            values["scenarios"][key] = resolve_path(values["scenarios"][key], profile.root)
    # null stays null: it means <local_outputs_root>/embedding-cache, made absolute just above
    embedding_cache = values["scoring"]["embedding_cache"]
    embedding_cache["path"] = resolve_path(embedding_cache["path"], profile.root)
    return values


def local_outputs_root(profile: Profile) -> Path:
    """Where runs execute and their local copies stay.

    `outputs_root` itself when it is a local folder; when it is remote (`s3://...`),
    `local_outputs_root` (default `outputs/`), from which finished runs are published.
    """
    if not is_remote(profile["outputs_root"]):
        return Path(profile.path("outputs_root"))
    configured = profile.values.get("local_outputs_root") or DEFAULT_LOCAL_OUTPUTS_ROOT
    return Path(resolve_path(configured, profile.root))


def judge_cache_path(profile: Profile) -> str:
    """The judge cache: the profile's `judge.cache_path`, else `judge-cache.sqlite` in the local
    outputs root (a SQLite file is never kept on remote storage)."""
    configured = profile["judge"]["cache_path"]
    if configured is None:
        return str(local_outputs_root(profile) / JUDGE_CACHE_FILE)
    return resolve_path(configured, profile.root)


def generate_cache_path(profile: Profile) -> str:
    """The generate stage's response cache: `generate.cache_path`, else `generate-cache.sqlite`
    in the local outputs root, shared by all runs."""
    configured = profile["generate"].get("cache_path")
    if configured is None:
        return str(local_outputs_root(profile) / GENERATE_CACHE_FILE)
    return resolve_path(configured, profile.root)


# One embedding cache for every outputs root of a machine (a CI runner's cached folder, or a test
# session's): the folder a profile whose scoring.embedding_cache.path is null uses instead of
# <local outputs root>/embedding-cache. Read by the process that scores: a Ray cluster's nodes
# need it set too. It moves no score (the cache never does), so the run's params keep null.
EMBEDDING_CACHE_VARIABLE = "EVALBOOK_EMBEDDING_CACHE"


def embedding_cache_path(profile: Profile) -> str:
    """The embedding cache folder: the profile's `scoring.embedding_cache.path`, else the
    EVALBOOK_EMBEDDING_CACHE folder when that is set (relative to the working folder), else
    `embedding-cache` in the local outputs root, shared by all runs there."""
    configured = profile["scoring"]["embedding_cache"]["path"]
    if configured is None:
        shared = os.environ.get(EMBEDDING_CACHE_VARIABLE)
        if shared:
            return str(Path(shared).absolute())
        return str(local_outputs_root(profile) / EMBEDDING_CACHE_DIR)
    return resolve_path(configured, profile.root)

"""Fixtures shared by the test files: the default profile, loaded or as values to edit, and profile
files written into tmp_path. Each test gets its own copy of everything it may edit."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from evalbook.params import Profile, load_profile
from paths import DEFAULT_PROFILE, read_default_values


@pytest.fixture
def default_profile() -> Profile:
    """params/default.yaml, loaded and validated, without overrides."""
    return load_profile(DEFAULT_PROFILE)


@pytest.fixture
def default_judge_config(default_profile: Profile) -> dict:
    """The default profile's `judge` section, a copy the test may edit."""
    return copy.deepcopy(default_profile["judge"])


@pytest.fixture
def default_values() -> dict:
    """default.yaml's values as written, relative paths and all."""
    return read_default_values()


@pytest.fixture
def relocated_default_values(tmp_path: Path) -> dict:
    """default.yaml's values for a run inside tmp_path: they read the shipped sample by its absolute
    path and write under tmp_path / "outputs"."""
    values = read_default_values(absolute_data_paths=True)
    values["outputs_root"] = str(tmp_path / "outputs")
    return values


@pytest.fixture
def write_profile(tmp_path: Path) -> Callable[..., Path]:
    """Write a profile (a dict of values, or raw text) into tmp_path and return its path."""

    def write(values: dict | str, name: str = "profile.yaml") -> Path:
        path = tmp_path / name
        text = values if isinstance(values, str) else yaml.safe_dump(values, sort_keys=False)
        path.write_text(text, "utf-8")
        return path

    return write


@pytest.fixture
def write_extending_profile(write_profile) -> Callable[..., Path]:
    """Write tmp_path/profile.yaml, which `extends:` default.yaml and sets the keys given."""

    def write(**values) -> Path:
        return write_profile({"extends": str(DEFAULT_PROFILE), **values})

    return write

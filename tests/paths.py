"""Where the checkout and its default profile are, for what a test module needs at import time.

Module constants, parametrize lists, helpers and module-scoped fixtures read these. A test function
takes the fixtures of conftest.py instead, which give it its own copy of what it edits.
"""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PROFILE = ROOT / "params" / "default.yaml"
DATA_PATH_KEYS = ("input_path", "predictions_path")
TRUNCATED = ROOT / "data" / "sample" / "predictions-truncated.jsonl"
# Port 1 has no judge server, whatever runs on this machine: the judge must record not_run.
NO_JUDGE = "judge.base_url=http://127.0.0.1:1/v1"


def read_default_values(*, absolute_data_paths: bool = False) -> dict:
    """A fresh dict of default.yaml's values, as written.

    With absolute_data_paths, input_path and predictions_path name the shipped sample by its
    absolute path, so that the values still read it when written as a profile outside the checkout
    (a relative path resolves against the project root of the profile's own folder).
    """
    values = yaml.safe_load(DEFAULT_PROFILE.read_text("utf-8"))
    if absolute_data_paths:
        for key in DATA_PATH_KEYS:
            values[key] = str(ROOT / values[key])
    return values

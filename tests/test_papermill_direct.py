"""The notebooks run with Papermill directly, from any folder, as CI users run them."""

from __future__ import annotations

import pandas as pd
import papermill
import pytest

from evalbook.params import ParamsError, locate_profile
from paths import ROOT

pytestmark = pytest.mark.slow  # notebook kernels

NOTEBOOKS = ROOT / "notebooks"


def test_a_relative_profile_is_read_from_the_working_folder_else_from_the_notebooks_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert locate_profile("../params/default.yaml") == ROOT / "params" / "default.yaml"  # 01-05's default
    (tmp_path / "mine.yaml").write_text("extends: x.yaml\n")
    assert locate_profile("mine.yaml") == tmp_path / "mine.yaml"
    with pytest.raises(ParamsError, match=r"nope\.yaml.*neither in .*" + str(tmp_path) + ".* nor in .*notebooks"):
        locate_profile("nope.yaml")


def test_01_load_runs_with_papermill_from_another_folder_with_limit_and_seed(tmp_path, monkeypatch):
    outputs = tmp_path / "outputs"
    sample = ROOT / "data" / "sample"
    (tmp_path / "mine.yaml").write_text(f"extends: {ROOT / 'params' / 'default.yaml'}\noutputs_root: {outputs}\n"
                                        f"input_path: {sample / 'examples.jsonl'}\n"
                                        f"predictions_path: {sample / 'predictions.jsonl'}\n")
    monkeypatch.chdir(tmp_path)
    papermill.execute_notebook(str(NOTEBOOKS / "01_load.ipynb"), str(tmp_path / "01.ipynb"),
                               parameters={"params_path": "mine.yaml", "limit": 3, "seed": 5},
                               kernel_name="python3", progress_bar=False)
    canonical = pd.read_parquet(outputs / "local" / "interactive" / "canonical.parquet")
    assert len(canonical) == 3

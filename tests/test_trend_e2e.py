"""Issue 27's "done when": after `make run`, the truncated run and a third run, `make trend` shows
both similarity metrics over the three runs, marks the step to the truncated run as real and
names the override that made it. Real runs of the sample, the real Makefile recipe."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evalbook.layout import EXAMPLE_VALUES, HEADLINE_FILE, TREND_PAGE
from evalbook.runner import run_pipeline
from paths import DEFAULT_PROFILE, NO_JUDGE, ROOT

pytestmark = pytest.mark.slow  # a real run of the sample


@pytest.fixture(scope="module")
def three_runs(sample_runs, tmp_path_factory):
    """The session's two sample runs copied into a root of their own, and a third run of the
    sample as it is."""
    root = tmp_path_factory.mktemp("trend") / "outputs"
    shutil.copytree(sample_runs.outputs, root, ignore=shutil.ignore_patterns("index.html", "trend.*"))
    profile = root.parent / "profile.yaml"
    values = yaml.safe_load(sample_runs.profile.read_text("utf-8"))
    values["outputs_root"] = str(root)
    profile.write_text(yaml.safe_dump(values, sort_keys=False), "utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        third = run_pipeline(str(DEFAULT_PROFILE), [f"outputs_root={root}", NO_JUDGE])
    return root, profile, [sample_runs.baseline, sample_runs.candidate, third]


def test_every_run_ends_with_its_headline_and_values(three_runs):
    _, _, runs = three_runs
    for run in runs:
        headline = json.loads((run.run_dir / HEADLINE_FILE).read_text("utf-8"))
        assert headline["run_id"] == run.run_id and headline["status"] == "succeeded"
        assert headline["metrics"]["bertscore_f1"]["low"] < headline["metrics"]["bertscore_f1"]["mean"]
        assert (run.run_dir / EXAMPLE_VALUES).is_file()


def test_make_trend_marks_the_step_to_the_truncated_run_real_and_names_its_override(three_runs):
    root, profile, runs = three_runs
    made = subprocess.run(["make", "-s", "-o", "setup", "trend", f"PARAMS={profile}", f"PY={sys.executable}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stdout + made.stderr
    assert Path(made.stdout.strip().splitlines()[-1]) == root / TREND_PAGE
    document = json.loads((root / "trend.json").read_text("utf-8"))
    [series] = [s for s in document["series"] if s["kind"] == "scoring"]
    assert [p["run_id"] for p in series["points"]] == [run.run_id for run in runs]
    assert {"bertscore_f1", "sentence_cosine"} <= set(series["metrics"])
    truncated, third = series["points"][1], series["points"][2]
    for name in ("bertscore_f1", "sentence_cosine"):
        assert truncated["steps"][name]["status"] == "real" and truncated["steps"][name]["delta"] < 0
        assert third["steps"][name]["status"] == "real" and third["steps"][name]["delta"] > 0
    assert any(line.startswith("-p predictions_path: predictions.jsonl (the profile's) → predictions-truncated.jsonl")
               for line in truncated["changed"]), truncated["changed"]
    page = (root / TREND_PAGE).read_text("utf-8")
    assert "BERTScore F1 worse: -0.09" in page and "predictions-truncated.jsonl" in page
    # make trend rebuilt the index, which links the trend at its top
    assert f'href="{TREND_PAGE}"' in (root / "index.html").read_text("utf-8")

"""End-to-end: a real run of the sample calibrated against data/sample/labels.csv with 06_calibrate.

`python -m evalbook calibrate`, as `make calibrate` calls it, must write the calibration JSON into
the run folder's `calibration/`, with its executed notebook, HTML, figures and an index entry; its
numbers must equal scipy, scikit-learn and krippendorff called directly on the run's report and
the labels file. A bad labels file stops the command before anything is written.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import krippendorff
import nbformat
import numpy as np
import pandas as pd
import papermill
import pytest
import yaml
from scipy import stats
from sklearn import metrics as sk

from browser import first_screen, inspect_offline
from evalbook.calibrate.document import validate_calibration
from evalbook.layout import CALIBRATION_DIR
from evalbook.metrics import metric as registered
from evalbook.publish.pages import external_references
from paths import ROOT

pytestmark = pytest.mark.slow  # real runs through the runner: kernels, models

LABELS = ROOT / "data" / "sample" / "labels.csv"
TOLERANCE = 1e-9
HOSTILE = "<script>alert(1)</script>\x00 **bold** [link](http://x.invalid)"


@dataclass
class Calibrated:
    outputs: Path
    profile: Path
    run_id: str
    report: dict
    path: Path
    doc: dict
    stdout: str


def calibrate_cli(profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalbook", "calibrate", "--params", str(profile), *args],
                          capture_output=True, text=True, cwd=ROOT, check=False)


@pytest.fixture(scope="module")
def outputs(sample_runs, tmp_path_factory):
    """A copy of the session's two runs, so that calibrations written here touch no other test's runs."""
    copy = tmp_path_factory.mktemp("calibrate") / "outputs"
    shutil.copytree(sample_runs.outputs, copy)
    values = yaml.safe_load(sample_runs.profile.read_text("utf-8"))
    values["outputs_root"] = str(copy)
    profile = copy.parent / "profile.yaml"
    profile.write_text(yaml.safe_dump(values, sort_keys=False), "utf-8")
    return copy, profile


@pytest.fixture(scope="module")
def calibrated(outputs, sample_runs) -> Calibrated:
    root, profile = outputs
    run_id = sample_runs.baseline.run_id  # the labels judge the sample's own answers
    done = calibrate_cli(profile, "--run", run_id[:8], "--labels", str(LABELS))
    assert done.returncode == 0, done.stderr[-3000:]
    path = Path(done.stdout.strip().splitlines()[-1])
    report = json.loads(next(root.rglob(f"{run_id}.json")).read_text("utf-8"))
    return Calibrated(root, profile, run_id, report, path, json.loads(path.read_text("utf-8")), done.stdout)


def entry(doc: dict, name: str) -> dict:
    (found,) = [m for m in doc["metrics"] if m["metric"] == name]
    return found


def labels_by_id() -> pd.Series:
    """Each example's label, computed here with pandas: the median of its raters' labels."""
    frame = pd.read_csv(LABELS, dtype={"id": str})
    return frame.groupby("id", sort=False)["label"].median()


# ---------------------------------------------------------------- 1. what the command writes

def test_the_calibration_goes_in_the_run_folder_with_its_pages_and_figures(calibrated):
    run_dir = next(calibrated.outputs.rglob(f"{calibrated.run_id}.json")).with_suffix("")
    assert calibrated.path.parent == run_dir / CALIBRATION_DIR
    folder = calibrated.path.with_suffix("")
    for name in ("06_calibrate.ipynb", "06_calibrate.html", "06_calibrate.noinput.html", "params.yaml",
                 "figures/metric-by-label.png", "figures/roc.png"):
        assert (folder / name).is_file(), name
    assert f"06_calibrate HTML without code: {folder / '06_calibrate.noinput.html'}" in calibrated.stdout
    validate_calibration(calibrated.doc)
    assert calibrated.doc["run"]["run_id"] == calibrated.run_id
    assert calibrated.doc["calibration_id"] == folder.name
    executed = nbformat.read(folder / "06_calibrate.ipynb", as_version=4)
    stderr = [output.get("text", "") for cell in executed.cells for output in cell.get("outputs", [])
              if output.get("name") == "stderr"]
    assert not stderr, stderr  # no warning reaches the page
    index = (calibrated.outputs / "index.html").read_text("utf-8")
    assert "<h2>Calibrations</h2>" in index and f"{CALIBRATION_DIR}/{folder.name}/06_calibrate.noinput.html" in index


def test_the_labels_are_matched_and_read_as_stated(calibrated):
    doc = calibrated.doc
    assert doc["matching"] == {"n_matched": 32, "n_unknown": 0, "n_unlabelled": 0,
                               "unknown_ids": [], "unlabelled_ids": []}
    assert doc["labels"]["kind"] == "ordinal" and "inferred" in doc["labels"]["kind_reason"]
    assert doc["labels"]["raters"] == ["reader-1", "reader-2"] and doc["labels"]["n_rows"] == 64
    medians = labels_by_id()
    assert {e["id"]: e["label"] for e in doc["examples"]} == medians.to_dict()
    assert doc["pass_fail"]["n_pass"] == int((medians >= 4).sum())
    valid_for = doc["valid_for"]
    assert valid_for["judge_label"] is None  # the session's runs have no judge
    assert valid_for["bertscore"]["sha256"] == calibrated.report["provenance"]["weights_sha256"]["bertscore"]


# ---------------------------------------------------------------- 2. every number, recomputed directly

def values_and_labels(report: dict, name: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    described, medians = registered(name), labels_by_id()
    pairs = [(described.value(e), medians[e["id"]], e["id"]) for e in report["examples"]]
    kept = [(v if described.higher_is_better else -v, label, i) for v, label, i in pairs if v is not None]
    return (np.array([k[0] for k in kept]), np.array([k[1] for k in kept]), [k[2] for k in kept])


@pytest.mark.parametrize("name", ["bertscore_f1", "bertscore_precision", "bertscore_recall",
                                  "sentence_cosine", "top_k_match", "mrr_at_k", "precision_at_k",
                                  "recall_at_k", "ndcg_at_k", "rank"])
def test_every_number_equals_the_libraries_called_directly(calibrated, name):
    found = entry(calibrated.doc, name)
    scores, labels, _ = values_and_labels(calibrated.report, name)
    assert found["n"] == len(scores)
    rank = found["rank_agreement"]
    assert rank["spearman"]["estimate"] == pytest.approx(stats.spearmanr(scores, labels).statistic, abs=TOLERANCE)
    assert rank["kendall_tau_b"]["estimate"] == pytest.approx(
        stats.kendalltau(scores, labels, variant="b").statistic, abs=TOLERANCE)
    passed = labels >= 4
    assert found["pass_fail"]["roc"]["auc"] == pytest.approx(sk.roc_auc_score(passed, scores), abs=TOLERANCE)
    for threshold in found["pass_fail"]["thresholds"]:
        if threshold["value"] is None:
            continue
        cut = threshold["value"] if threshold["operator"] == ">=" else -threshold["value"]
        predicted = scores >= cut
        confusion = threshold["confusion"]
        tn, fp, fn, tp = sk.confusion_matrix(passed, predicted, labels=[False, True]).ravel()
        assert (confusion["tp"], confusion["fp"], confusion["fn"], confusion["tn"]) == (tp, fp, fn, tn)
        assert confusion["accuracy"] == pytest.approx(sk.accuracy_score(passed, predicted), abs=TOLERANCE)
        kappa = sk.cohen_kappa_score(passed, predicted)
        assert confusion["cohen_kappa"] == (None if np.isnan(kappa) else pytest.approx(kappa, abs=TOLERANCE))
        if tp + fp:
            assert confusion["precision"] == pytest.approx(sk.precision_score(passed, predicted), abs=TOLERANCE)
        assert confusion["recall"] == pytest.approx(sk.recall_score(passed, predicted), abs=TOLERANCE)


def test_the_rank_interval_is_scipy_s_bootstrap_with_the_seed(calibrated):
    settings = calibrated.doc["settings"]
    scores, labels, _ = values_and_labels(calibrated.report, "bertscore_f1")
    direct = stats.bootstrap((scores, labels), lambda s, l: stats.spearmanr(s, l).statistic, paired=True,
                             vectorized=False, n_resamples=settings["resamples"], method="percentile",
                             confidence_level=settings["confidence"],
                             rng=np.random.default_rng(settings["seed"])).confidence_interval
    spearman = entry(calibrated.doc, "bertscore_f1")["rank_agreement"]["spearman"]
    assert (spearman["low"], spearman["high"]) == (pytest.approx(direct.low, abs=TOLERANCE),
                                                   pytest.approx(direct.high, abs=TOLERANCE))


def test_the_raters_alpha_is_the_krippendorff_package_s(calibrated):
    frame = pd.read_csv(LABELS, dtype={"id": str})
    table = frame.pivot(index="rater", columns="id", values="label")
    expected = krippendorff.alpha(reliability_data=table.to_numpy(dtype=float), level_of_measurement="ordinal")
    assert calibrated.doc["raters"]["alpha"] == pytest.approx(expected, abs=TOLERANCE)
    assert calibrated.doc["raters"]["n_raters"] == 2 and calibrated.doc["raters"]["n_units"] == 32


def test_the_retrieval_rank_is_read_lower_is_better(calibrated):
    rank = entry(calibrated.doc, "rank")
    assert rank["higher_is_better"] is False
    assert rank["n_missing"] == 32 - rank["n"]  # examples without retrieval, or the gold not retrieved
    configured = next(t for t in rank["pass_fail"]["thresholds"] if t["name"] == "configured")
    assert (configured["value"], configured["operator"]) == (calibrated.report["retrieval_summary"]["k"], "<=")


# ---------------------------------------------------------------- 3. the pages

def test_the_no_code_page_opens_offline_with_the_agreement_first(calibrated, browser):
    page = calibrated.path.with_suffix("") / "06_calibrate.noinput.html"
    text = page.read_text("utf-8")
    assert external_references(text) == []
    seen = inspect_offline(page, browser)
    assert seen["non_local_requests"] == [] and seen["console_errors"] == []
    assert len(seen["images"]) == 2 and all(image["naturalWidth"] > 0 for image in seen["images"])
    screen = first_screen(page, browser=browser)
    f1 = entry(calibrated.doc, "bertscore_f1")["rank_agreement"]["spearman"]
    assert f"BERTScore F1 (n 32): Spearman ρ {f1['estimate']:.3f} [{f1['low']:.3f}, {f1['high']:.3f}]" in screen["above"]
    assert "base rate" in screen["above"] and "Krippendorff" in screen["above"]
    assert "from evalbook" not in screen["text"]
    assert str(calibrated.outputs) not in screen["text"] and str(ROOT) not in screen["text"]  # no absolute path
    assert not screen["empty_tables"], screen["empty_tables"]
    assert "{'" not in screen["text"] and '{"' not in screen["text"]


# ---------------------------------------------------------------- 4. write-once, the latest run, bad labels

def test_a_second_calibration_is_new_and_takes_the_latest_run(calibrated, sample_runs):
    first = {path: path.read_bytes() for path in calibrated.path.parent.rglob("*") if path.is_file()}
    done = calibrate_cli(calibrated.profile, "--labels", str(LABELS))  # make calibrate: the latest run
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(Path(done.stdout.strip().splitlines()[-1]).read_text("utf-8"))
    assert doc["run"]["run_id"] == sample_runs.candidate.run_id
    assert doc["calibration_id"] != calibrated.doc["calibration_id"]
    assert {path: path.read_bytes() for path in first} == first  # the earlier calibration is untouched


def calibrations(root: Path) -> list[Path]:
    return sorted(root.rglob(f"{CALIBRATION_DIR}/*"))


@pytest.mark.parametrize("rows, expected", [
    ([{"id": "s01", "label": "5"}, {"id": "s02", "label": ""}], ["labels.csv", "column 'label'", "row 2"]),
    ([{"id": "s01", "label": "good"}], ["column 'label'", "row 1", "'good'"]),
    ([{"example": "s01", "label": "5"}], ["column 'id'", "required column is missing"]),
    ([{"id": "x1", "label": "5"}, {"id": "x2", "label": "4"}], ["none of the 2 ids", "--run"]),
])
def test_a_bad_labels_file_stops_before_anything_is_written(calibrated, tmp_path, rows, expected):
    bad = tmp_path / "labels.csv"
    with bad.open("w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    before = calibrations(calibrated.outputs)
    done = calibrate_cli(calibrated.profile, "--run", calibrated.run_id, "--labels", str(bad))
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stderr.startswith("evalbook: ") and "Traceback" not in done.stderr
    for text in expected:
        assert text in done.stderr, (text, done.stderr)
    assert calibrations(calibrated.outputs) == before


def test_hostile_label_text_reaches_the_page_escaped(calibrated, tmp_path):
    frame = pd.read_csv(LABELS, dtype={"id": str})
    frame["note"] = HOSTILE
    extra = pd.DataFrame([{"id": HOSTILE, "label": 3, "rater": "reader-1", "note": HOSTILE}])
    hostile = tmp_path / "hostile.csv"
    pd.concat([frame, extra]).to_csv(hostile, index=False)
    done = calibrate_cli(calibrated.profile, "--run", calibrated.run_id, "--labels", str(hostile))
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(Path(done.stdout.strip().splitlines()[-1]).read_text("utf-8"))
    assert doc["matching"]["unknown_ids"] == [HOSTILE]
    for name in ("06_calibrate.noinput.html", "06_calibrate.html"):
        text = (Path(done.stdout.strip().splitlines()[-1]).with_suffix("") / name).read_text("utf-8")
        assert "<script>alert(1)</script>" not in text and "\x00" not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;\\x00" in text


# ---------------------------------------------------------------- 5. 06_calibrate opened interactively

def test_the_notebook_runs_alone_with_its_defaults(calibrated, tmp_path):
    scratch = calibrated.outputs / "local" / "interactive" / "calibrate"
    before = calibrations(calibrated.outputs)
    papermill.execute_notebook(str(ROOT / "notebooks" / "06_calibrate.ipynb"), str(tmp_path / "06.ipynb"),
                               parameters={"params_path": str(calibrated.profile), "run": calibrated.run_id},
                               cwd=str(ROOT / "notebooks"), kernel_name="python3", progress_bar=False)
    doc = json.loads((scratch / "calibration.json").read_text("utf-8"))
    validate_calibration(doc)
    assert doc["metrics"] == calibrated.doc["metrics"]  # the default labels are the sample's
    assert (scratch / "figures" / "roc.png").is_file()
    assert calibrations(calibrated.outputs) == before  # exploring writes only to the scratch folder

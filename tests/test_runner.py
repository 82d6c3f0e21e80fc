"""End-to-end: the notebooks run through Papermill into a temporary outputs folder."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import papermill
import pytest

from evalbook.params import ParamsError
from evalbook.report.document import validate_report
from evalbook.runner import RunFailed, run_pipeline
from paths import DEFAULT_PROFILE, ROOT

pytestmark = pytest.mark.slow  # real runs through the runner: kernels, models

SHARED = ROOT.parent / "shared" / "data" / "rag-dataset-12000" / "train-first100.parquet"
STAGES = ("01_load", "02_score", "03_judge", "04_report")
RUN_ID = "0f4a3c2e-8d1b-4e6f-9a7c-5b2d1e0f3a4b"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    os.environ.pop("HF_HUB_OFFLINE", None)
    # Port 1 has no judge server, whatever runs on this machine: the judge must record not_run.
    result = run_pipeline(str(DEFAULT_PROFILE), ["limit=5", "seed=3", f"outputs_root={outputs}",
                                                 f"run_id={RUN_ID}", "judge.base_url=http://127.0.0.1:1/v1"])
    return result, outputs


def test_run_writes_a_valid_report_beside_its_run_folder(tiny_run):
    result, outputs = tiny_run
    day = result.run_dir.parent
    assert day.parent.parent.parent == outputs / "local" / "eval-runs"
    assert result.report_path == day / f"{RUN_ID}.json"
    report = json.loads(result.report_path.read_text())
    validate_report(report)
    assert report["run_id"] == RUN_ID
    assert report["dataset"] == {"name": "evalbook-sample", "split": "sample", "n_examples": 5}
    assert report["counts"]["n_left_out_by_limit"] == 27
    assert len(report["examples"]) == 5
    assert report["provenance"]["params_profile"]["overrides"]["limit"] == 5
    # No judge server runs during the tests: the judge is recorded as not run, with no score.
    assert report["judge_summary"]["status"] == "not_run"
    assert "no judge server reachable at 127.0.0.1:1" in report["judge_summary"]["reason"]
    assert all(example["judge"] is None for example in report["examples"])
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_run_folder_holds_tables_notebooks_and_html(tiny_run):
    result, _ = tiny_run
    names = {p.name for p in result.run_dir.iterdir()}
    for stage in STAGES:
        assert {f"{stage}.ipynb", f"{stage}.html"} <= names
        assert "<html" in (result.run_dir / f"{stage}.html").read_text()[:2000].lower()
    assert {"canonical.parquet", "scored.parquet", "run.json", "params.yaml", "provenance.json"} <= names
    assert "RUNNING" not in names and "FAILED" not in names
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["status"] == "succeeded"
    assert [s["stage"] for s in run["stages"]] == ["01_load", "02_score", "03_judge", "04_report"]
    assert run["stages"][2]["status"] == "succeeded"
    scored = pd.read_parquet(result.run_dir / "scored.parquet")
    assert len(scored) == 5 and scored["bertscore_f1"].notna().all()


def test_the_samples_domain_is_carried_from_load_to_the_report_as_metadata(tiny_run):
    """issue 26, item 1: an input column evalbook does not read reaches every stage's output."""
    result, _ = tiny_run
    canonical = pd.read_parquet(result.run_dir / "canonical.parquet")
    scored = pd.read_parquet(result.run_dir / "scored.parquet")
    assert scored["metadata"].tolist() == canonical["metadata"].tolist()
    domains = {json.loads(text)["domain"] for text in scored["metadata"]}
    assert domains and domains <= {"council", "bank", "employer", "nature", "software", "travel", "retail",
                                   "education", "community"}
    report = json.loads(result.report_path.read_text())
    assert [example["metadata"] for example in report["examples"]] == [json.loads(t) for t in canonical["metadata"]]
    (column,) = json.loads((result.run_dir / "load.json").read_text())["metadata"]
    assert (column["name"], column["type"], column["file"]) == ("domain", "string", "input_path")
    page = (result.run_dir / "01_load.html").read_text()
    assert "columns kept as metadata" in page and "domain" in page


def test_run_json_carries_the_report_s_provenance(tiny_run):
    """One provenance record: run.json holds the same models' hash and weights as the report."""
    result, _ = tiny_run
    run = json.loads((result.run_dir / "run.json").read_text())
    provenance = json.loads(result.report_path.read_text())["provenance"]
    for key in ("bertscore_hash", "bertscore_num_layers", "weights_sha256", "git_commit",
                "params_hash", "params_profile", "package_versions"):
        assert run[key] == provenance[key], key
    assert set(run["weights_sha256"]) == {"bertscore", "sentence_transformer"}


def test_executed_notebooks_carry_the_injected_parameters(tiny_run):
    result, _ = tiny_run
    notebook = json.loads((result.run_dir / "02_score.ipynb").read_text())
    injected = [c for c in notebook["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert len(injected) == 1
    assert RUN_ID in "".join(injected[0]["source"])


def test_cli_prints_the_report_path_last(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "evalbook", "run", "--params", str(DEFAULT_PROFILE), "-p", "limit=3",
         "-p", f"outputs_root={tmp_path}"],
        capture_output=True, text=True, cwd=ROOT, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    last = completed.stdout.strip().splitlines()[-1]
    assert Path(last).is_absolute() and last.endswith(".json") and Path(last).is_file()
    assert "02_score HTML:" in completed.stdout


def test_cli_rejects_a_bad_override_before_running(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "evalbook", "run", "--params", str(DEFAULT_PROFILE), "-p", "limit=many",
         "-p", f"outputs_root={tmp_path}"],
        capture_output=True, text=True, cwd=ROOT, check=False)
    assert completed.returncode == 2
    assert "limit" in completed.stderr and "default.yaml" in completed.stderr
    assert not any(tmp_path.iterdir())


def test_failed_stage_names_its_notebook_and_leaves_earlier_runs_alone(tiny_run, tmp_path):
    result, outputs = tiny_run
    before = {p: p.stat().st_mtime_ns for p in result.run_dir.parent.rglob("*")}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "Q?", "context": "C.", "answer": 42, "generated_answer": "A."}\n')
    with pytest.raises(RunFailed) as failure:
        run_pipeline(str(DEFAULT_PROFILE),
                     [f"input_path={bad}", "predictions_path=null", f"outputs_root={outputs}"])
    message = str(failure.value)
    assert "stage 01_load failed" in message and "01_load.ipynb" in message
    assert "run_load(ctx)" in message  # the failing cell is quoted
    assert "LoadError" in message and "'answer'" in message and "row 1" in message
    failed_dirs = [p for p in result.run_dir.parent.iterdir() if p.is_dir() and p != result.run_dir]
    assert len(failed_dirs) == 1
    failed = failed_dirs[0]
    assert (failed / "FAILED").is_file() and (failed / "01_load.html").is_file()
    assert json.loads((failed / "run.json").read_text())["status"] == "failed"
    assert not (failed.parent / f"{failed.name}.json").exists()
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_a_run_id_cannot_be_reused(tiny_run):
    result, outputs = tiny_run
    with pytest.raises(ParamsError, match="write-once"):
        run_pipeline(str(DEFAULT_PROFILE), [f"outputs_root={outputs}", f"run_id={RUN_ID}"])
    assert json.loads(result.report_path.read_text())["run_id"] == RUN_ID


def cli_run(*overrides: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "evalbook", "run", "--params", str(DEFAULT_PROFILE)]
    for override in overrides:
        command += ["-p", override]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False, timeout=300)


@pytest.mark.parametrize("where", ["an earlier day", "another env"])
def test_a_run_id_used_on_an_earlier_day_or_in_another_env_is_refused(tmp_path, where):
    outputs = tmp_path / "outputs"
    env = "local" if where == "an earlier day" else "staging"
    earlier = outputs / env / "eval-runs" / "2025" / "01" / "02" / RUN_ID
    earlier.mkdir(parents=True)
    before = sorted(outputs.rglob("*"))
    completed = cli_run(f"outputs_root={outputs}", f"run_id={RUN_ID}")
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert f"run {RUN_ID} already exists at {earlier}" in completed.stderr
    assert "write-once across every date and env" in completed.stderr
    assert sorted(outputs.rglob("*")) == before


def test_a_report_alone_from_an_earlier_day_also_holds_its_run_id(tmp_path):
    outputs = tmp_path / "outputs"
    day = outputs / "local" / "eval-runs" / "2025" / "01" / "02"
    day.mkdir(parents=True)
    (day / f"{RUN_ID}.json").write_text("{}")
    with pytest.raises(ParamsError, match="already exists"):
        run_pipeline(str(DEFAULT_PROFILE), [f"outputs_root={outputs}", f"run_id={RUN_ID}"])


@pytest.mark.parametrize("override, expected", [
    ("env=..", "env: '..' does not match"),
    ("env=.", "env: '.' does not match"),
    ("run_id=../x", "run_id: '../x' does not match"),
    ("models.bertscore.num_layers=99", "models.bertscore.num_layers is 99"),
    ("input_path=", "-p input_path= is empty"),
    ("slices.by=[domain,nope]", "override -p slices.by names 'nope', not a column of"),
])
def test_unusable_values_exit_2_before_anything_is_written(tmp_path, override, expected):
    outputs = tmp_path / "outputs"
    completed = cli_run(f"outputs_root={outputs}", override)
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert expected in completed.stderr and "Traceback" not in completed.stderr
    assert not outputs.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("problem", ["a file", "under a file", "unwritable"])
def test_an_unusable_outputs_root_exits_2_naming_the_key_and_the_folder(tmp_path, problem):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    # /proc/1 is a folder that nobody, root included, may create files in
    outputs = {"a file": blocker, "under a file": blocker / "outputs", "unwritable": Path("/proc/1")}[problem]
    completed = cli_run(f"outputs_root={outputs}")
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert f"outputs_root {outputs}" in completed.stderr and "Traceback" not in completed.stderr
    assert {"a file": "is a file, not a folder", "under a file": "cannot be created",
            "unwritable": "is not writable"}[problem] in completed.stderr
    assert sorted(tmp_path.iterdir()) == [blocker] and blocker.read_text() == "not a folder\n"


def test_a_missing_outputs_root_is_created(tmp_path):
    from evalbook.runner import ensure_outputs_root

    ensure_outputs_root(tmp_path / "new" / "outputs", "outputs_root", DEFAULT_PROFILE)
    assert (tmp_path / "new" / "outputs").is_dir() and list((tmp_path / "new" / "outputs").iterdir()) == []


def test_report_notebook_runs_alone_with_its_defaults(tmp_path, relocated_default_values, write_profile):
    # Opened in JupyterLab with only its defaults, 04_report computes what it needs in the
    # interactive scratch folder. The profile is a copy whose outputs go to tmp_path.
    relocated_default_values["limit"] = 3
    params = write_profile(relocated_default_values)
    papermill.execute_notebook(str(ROOT / "notebooks" / "04_report.ipynb"), str(tmp_path / "out.ipynb"),
                               parameters={"params_path": str(params)}, cwd=str(ROOT / "notebooks"),
                               kernel_name="python3", progress_bar=False)
    report = json.loads((tmp_path / "outputs" / "local" / "interactive" / "report.json").read_text())
    validate_report(report)
    assert report["dataset"]["n_examples"] == 3


@pytest.mark.skipif(not SHARED.exists(), reason=f"../shared is absent: no {SHARED}")
def test_shared_rows_scored_against_themselves_score_one(tmp_path):
    rows = pd.read_parquet(SHARED)
    rows["generated_answer"] = rows["answer"]
    data = tmp_path / "self.parquet"
    rows.to_parquet(data, index=False)
    result = run_pipeline(str(DEFAULT_PROFILE), [f"input_path={data}", "predictions_path=null",
                                                 f"outputs_root={tmp_path / 'outputs'}", "dataset.name=null",
                                                 "dataset.split=train"])
    report = json.loads(result.report_path.read_text())
    summary = report["answer_similarity_summary"]
    assert report["dataset"] == {"name": "self", "split": "train", "n_examples": 100}  # the file's stem
    for metric in ("bertscore_f1", "bertscore_precision", "bertscore_recall", "sentence_cosine"):
        assert summary[metric]["n"] == 100 and summary[metric]["n_missing"] == 0
        assert summary[metric]["p10"] > 0.9999, metric
        assert summary[metric]["mean"] == pytest.approx(1.0, abs=1e-5)


def test_hub_profile_without_the_hub_stops_at_once_with_a_clear_message(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           "HF_HUB_CACHE": str(tmp_path / "hf" / "hub")}
    completed = subprocess.run(
        [sys.executable, "-m", "evalbook", "run", "--params", str(ROOT / "params" / "adr014.yaml"),
         "-p", f"outputs_root={tmp_path / 'outputs'}"],
        capture_output=True, text=True, cwd=ROOT, env=env, check=False, timeout=120)
    assert completed.returncode == 2
    assert "Hugging Face hub" in completed.stderr and "not reachable" in completed.stderr
    assert "Traceback" not in completed.stderr and "Retrying" not in completed.stderr
    assert not (tmp_path / "outputs").exists()


def test_only_profiles_that_read_nothing_from_the_hub_run_offline(default_profile):
    from evalbook.params import load_profile
    from evalbook.runner import needs_hub

    assert not needs_hub(default_profile)
    hub_input = {"input_path": "hf://datasets/neural-bridge/rag-dataset-12000"}
    assert needs_hub(load_profile(DEFAULT_PROFILE, hub_input))
    assert needs_hub(load_profile(ROOT / "params" / "adr014.yaml"))


def test_rescaling_with_a_missing_baseline_file_stops_before_the_run(tmp_path):
    with pytest.raises(ParamsError, match="does not exist"):
        run_pipeline(str(DEFAULT_PROFILE), ["models.bertscore.rescale_with_baseline=true",
                                            f"models.bertscore.baseline_path={tmp_path / 'none.tsv'}",
                                            f"outputs_root={tmp_path / 'outputs'}"])
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("notebook_fails", [False, True])
def test_a_page_that_cannot_be_rendered_fails_its_stage_instead_of_escaping_the_run(
        tmp_path, monkeypatch, notebook_fails):
    """The run must still end with run.json: a render error is the stage's failure, and it never
    hides the notebook's own error."""
    from evalbook import execution
    from evalbook.publish import pages

    def execute(source, output, **_):
        Path(output).write_bytes(Path(source).read_bytes())
        if notebook_fails:
            raise RuntimeError("the notebook's own error")

    def render(notebook, output=None, **_):
        raise ValueError(f"{notebook} refers to files it does not embed: x")

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    monkeypatch.setattr(pages, "render_html", render)
    record = execution.execute_stage("01_load", {}, tmp_path)
    assert record["status"] == "failed" and "html" not in record
    assert "its HTML could not be rendered: ValueError: " in record["error"]
    assert "refers to files it does not embed: x" in record["error"]
    assert ("the notebook's own error" in record["error"]) is notebook_fails

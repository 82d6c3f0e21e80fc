"""Where a run's files live under an outputs root: every name of a run folder.

Under an outputs root (local, or `s3://bucket/prefix` mirrored by evalbook.storage):
- `<env>/eval-runs/<yyyy>/<mm>/<dd>/<run_id>/`: the run folder, dated by the run's UTC start;
- `<env>/eval-runs/<yyyy>/<mm>/<dd>/<run_id>.json`: its report, beside the folder;
- `<env>/eval-runs/<yyyy>/<mm>/<dd>/comparisons/`: the comparisons whose candidate is a run of
  that day (05_compare); comparisons are not runs;
- `<env>/comparisons/`: the local copy of a comparison whose candidate report is on S3;
- `<env>/eval-runs/<yyyy>/<mm>/<dd>/<run_id>/calibration/`: the run's calibrations against human
  labels (06_calibrate), each a JSON beside its folder; `<env>/calibrations/` holds the local copy
  of a calibration of a run on S3;
- `<env>/interactive/`: the scratch folder of a notebook opened with its defaults.

This module only names places and lists what is there; what a run folder's files say, and finding
a run by its id, prefix or report, are evalbook.runs'. No other module spells a file name of a
run folder.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path


RUNS_DIR = "eval-runs"
COMPARISONS_DIR = "comparisons"
CALIBRATION_DIR = "calibration"  # inside a run folder: its calibrations against human labels
REMOTE_CALIBRATIONS_DIR = "calibrations"  # under an env: the local copies for runs on S3
INTERACTIVE_DIR = "interactive"
LABELS_DIR = "labels"  # 07_label's labels files, one per run: <env>/labels/<run id>.csv
# what a notebook opened with its defaults writes in its interactive folder
INTERACTIVE_COMPARISON = "comparison.json"
INTERACTIVE_CALIBRATION = "calibration.json"
# shared by every run under the local outputs root (params: the profile's paths, when null)
JUDGE_CACHE_FILE = "judge-cache.sqlite"
GENERATE_CACHE_FILE = "generate-cache.sqlite"
EMBEDDING_CACHE_DIR = "embedding-cache"
RESULTS_FILE = "results.sqlite"  # in the embedding cache's folder: seeded results (evalbook.resultcache)
# comparison ids carry the first 8 characters of each run id; a shorter prefix is too easily shared
MIN_PREFIX = 8
# the day folders of every env, `<env>/eval-runs/<yyyy>/<mm>/<dd>`, under an outputs root
RUN_DAY_GLOB = f"*/{RUNS_DIR}/[0-9][0-9][0-9][0-9]/[0-9][0-9]/[0-9][0-9]"

# The stages, each a notebook of notebooks/ executed into the run folder as `<stage>.ipynb`, with
# its pages `<stage>.html` and `<stage>.noinput.html`.
GENERATE_STAGE = "00_generate"  # first, only when the profile's generate section is enabled
CONVERSE_STAGE = "02a_converse"  # before the judge, only when the profile's scenarios are enabled
REPORT_STAGE = "04_report"
STAGES = ("01_load", "02_score", "03_judge", REPORT_STAGE)
ALL_STAGES = (GENERATE_STAGE, "01_load", "02_score", CONVERSE_STAGE, "03_judge", REPORT_STAGE)
OPTIONAL_STAGES = (GENERATE_STAGE, CONVERSE_STAGE)
COMPARE_STAGE = "05_compare"  # a comparison's notebook, in its own folder
CALIBRATE_STAGE = "06_calibrate"  # a calibration's notebook, in its own folder
NOINPUT_SUFFIX = ".noinput.html"  # a page without its code cells: `<stage>.noinput.html`
# What the stages write into the run folder (evalbook.pipeline), in order.
GENERATED = "generated.parquet"  # 00_generate: the answers asked of the system under test
GENERATION = "generation.json"  # 00_generate: its summary
CANONICAL = "canonical.parquet"  # 01_load: the evaluation set joined to the answers
LOAD_SUMMARY = "load.json"
SCORED = "scored.parquet"  # 02_score
SCORING_SUMMARY = "scoring.json"
TOPICS = "topics.json"  # 02_score: the questions grouped by meaning (evalbook.report.topics)
TRANSCRIPTS = "transcripts.jsonl"  # 02a_converse: one conversation a line, each written as it ends
CONVERSATIONS = "conversations.json"  # 02a_converse: its summary
SCENARIO_JUDGMENTS = "scenario-judgments.json"  # 03_judge: the transcripts judged, per scenario
PROVENANCE = "provenance.json"  # written by the runner before the stages
JUDGE = "judge.json"  # 03_judge
INTERACTIVE_REPORT = "report.json"  # 04_report run without a run folder writes its report here
# the logs of what a run starts beside its stages (evalbook.services)
JUDGE_SERVER_LOG = "judge-server.log"
MODEL_SERVER_LOG = "model-server.log"
SIMULATOR_SERVER_LOG = "simulator-server.log"
SERVICE_LOG = "service.log"
# The other files of a run folder that evalbook itself names.
PARAMS_FILE = "params.yaml"  # the resolved profile the stages read
RUN_JSON = "run.json"  # how the run ended (evalbook.runs.RunJson), written last
RUNNING_MARKER = "RUNNING"  # while the runner works on the folder (evalbook.runs.running_marker)
FAILED_MARKER = "FAILED"  # the error, when a stage failed
# what a run whose stages all ran left out (a replay of an interrupted run's transcripts): its
# report says what it holds, and its status is "incomplete", never "succeeded"
INCOMPLETE_MARKER = "INCOMPLETE"
# when a finished run's upload to a remote outputs root was refused (also in a comparison's or
# calibration's folder)
NOT_UPLOADED_MARKER = "NOT_UPLOADED"
# when a finished run or comparison could not be logged to the profile's MLflow server
# (evalbook.publish.tracking): where to, without credentials, and why
NOT_TRACKED_MARKER = "NOT_TRACKED"
# a run's headline in a few KB, written as it ends (evalbook.trend.headline): what the index and the
# trend read instead of the report, and each example's metric values, which the trend pairs
HEADLINE_FILE = "headline.json"
EXAMPLE_VALUES = "values.parquet"
SUMMARY_FILE = "summary.md"  # a run's or a comparison's first screen in Markdown (publish.summary)
INDEX_FILE = "index.html"  # the runs index, at the local outputs root (publish.index)
TREND_PAGE = "trend.html"  # every headline metric across runs, at the local outputs root (publish.trend)
TREND_FILE = "trend.json"


def run_folder(outputs_root: Path, env: str, run_id: str, started: datetime) -> Path:
    """The folder of the run `run_id` of `env` started at `started` (UTC)."""
    return outputs_root / env / RUNS_DIR / f"{started:%Y}" / f"{started:%m}" / f"{started:%d}" / run_id


def report_path(run_dir: Path, run_id: str | None = None) -> Path:
    """The report of the run whose folder is `run_dir`: `<run_id>.json` beside it (the run id
    is the folder's name unless a stage was given a folder of another name)."""
    return run_dir.parent / f"{run_id or run_dir.name}.json"


def stage_pages(stage: str) -> tuple[str, str]:
    """The page names of a stage that also has one without code: that one first (the readers'),
    then the full one."""
    return f"{stage}{NOINPUT_SUFFIX}", f"{stage}.html"


def params_file(folder: Path) -> Path:
    """The resolved profile of a run's (or a comparison's or calibration's) folder."""
    return folder / PARAMS_FILE


def run_json(run_dir: Path) -> Path:
    """The run.json of the run folder `run_dir`."""
    return run_dir / RUN_JSON


def run_env(run_dir: Path) -> str:
    """The env whose runs hold the run folder `run_dir`."""
    return run_dir.parents[4].name


def comparisons_folder(report: Path) -> Path:
    """The folder for comparisons whose candidate report is `report` (a local path)."""
    return report.parent / COMPARISONS_DIR


def comparisons_url(report_url: str) -> str:
    """The s3:// prefix for comparisons whose candidate report is at `report_url`."""
    return report_url.rsplit("/", 1)[0] + "/" + COMPARISONS_DIR


def remote_comparisons_folder(outputs_root: Path, env: str) -> Path:
    """The local folder for comparisons whose candidate report is on S3."""
    return outputs_root / env / COMPARISONS_DIR


def calibration_folder(report: Path) -> Path:
    """The folder for calibrations of the run whose report is `report` (a local path): the run
    folder's `calibration/`."""
    return report.with_suffix("") / CALIBRATION_DIR


def calibration_url(report_url: str) -> str:
    """The s3:// prefix for calibrations of the run whose report is at `report_url`."""
    return report_url.removesuffix(".json") + "/" + CALIBRATION_DIR


def remote_calibration_folder(outputs_root: Path, env: str) -> Path:
    """The local folder for calibrations of runs whose report is on S3."""
    return outputs_root / env / REMOTE_CALIBRATIONS_DIR


def labels_file(outputs_root: Path, env: str, run_id: str) -> Path:
    """Where 07_label writes a run's human labels unless told otherwise."""
    return outputs_root / env / LABELS_DIR / f"{run_id}.csv"


def interactive_folder(outputs_root: Path, env: str) -> Path:
    """The scratch folder of `env`'s notebooks run without a run folder."""
    return outputs_root / env / INTERACTIVE_DIR


def run_of_key(key: str, run_id: str) -> str | None:
    """`<env>/eval-runs/<yyyy>/<mm>/<dd>/<run_id>` when `key` (a path relative to an outputs root,
    such as an S3 key under its prefix) lies in run `run_id`'s folder or is its report; else None."""
    parts = key.split("/")
    if len(parts) < 6 or parts[1] != RUNS_DIR:
        return None
    if not all(len(part) == width and part.isdigit() for part, width in zip(parts[2:5], (4, 2, 2))):
        return None
    in_folder = len(parts) > 6 and parts[5] == run_id
    is_report = len(parts) == 6 and parts[5] == f"{run_id}.json"
    return "/".join([*parts[:5], run_id]) if in_folder or is_report else None


def run_pattern(outputs_root: Path, env: str | None, name: str) -> str:
    """Where a run called `name` is looked for, as a glob for messages (`*` for any env)."""
    return str(Path(outputs_root) / (env or "*") / RUNS_DIR / "*" / "*" / "*" / name)


def _day_folders(outputs_root: Path, env: str | None) -> list[Path]:
    days = Path(outputs_root).glob(RUN_DAY_GLOB)
    return sorted(day for day in days if env is None or day.parents[3].name == env)


def run_folders(outputs_root: Path, env: str | None = None) -> list[Path]:
    """Every run folder under `outputs_root` (of `env`, else of every env), by path."""
    return [child for day in _day_folders(outputs_root, env) for child in sorted(day.iterdir())
            if child.is_dir() and child.name != COMPARISONS_DIR]


def run_paths(outputs_root: Path, env: str | None = None) -> list[Path]:
    """`<day>/<run_id>` of every run that has a folder or a report, by path."""
    found = set(run_folders(outputs_root, env))
    for day in _day_folders(outputs_root, env):
        found.update(report.with_suffix("") for report in day.glob("*.json") if report.is_file())
    return sorted(found)


def existing_run(outputs_root: Path, run_id: str) -> Path | None:
    """A run folder or report named `run_id` under `outputs_root`, on any date and in any env."""
    named = [path for path in run_paths(outputs_root) if path.name == run_id]
    return min((candidate for path in named for candidate in (path, report_path(path))
                if candidate.exists()), default=None)

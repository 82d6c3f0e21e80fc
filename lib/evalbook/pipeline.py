"""What each pipeline notebook does, as library calls: the stage context and the stage steps.

A stage runs in one of two modes:
- **run mode** (the runner passes `run_dir` and `run_id`): artifacts go into the write-once run
  folder; an upstream artifact that is missing is an error.
- **interactive mode** (a notebook opened in JupyterLab with its defaults): artifacts go into
  `<outputs_root>/<env>/interactive/`, a scratch folder that is overwritten freely, and a
  missing upstream artifact is computed on the spot so every notebook runs top to bottom alone.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm as text_tqdm
from tqdm.auto import tqdm

from evalbook.checks.cache import run_checks_cached
from evalbook.checks.checksfile import load_checks_file
from evalbook.checks.protocol import checks_summary
from evalbook.checks.run import check_settings, has_check_columns
from evalbook.errors import EvalbookError
from evalbook import load as load_module
from evalbook.files import write_atomically
from evalbook.generate.stage import TABLE_SCHEMA as GENERATED_TABLE_SCHEMA
from evalbook.generate.stage import check_something_generated, generate_answers
from evalbook.judge.estimate import describe
from evalbook.judge.stage import (judge_table, local_embedder, not_run, openai_embedder, server_reachable,
                                  settings_from)
from evalbook.layout import (CANONICAL, CONVERSATIONS, GENERATED, GENERATION, INTERACTIVE_REPORT, JUDGE, LOAD_SUMMARY,
                             PROVENANCE, SCENARIO_JUDGMENTS, TRANSCRIPTS,
                             SCORED, SCORING_SUMMARY, TOPICS, interactive_folder, report_path)
from evalbook.escaping import shown_text
from evalbook.formatting import MISSING, counted, is_missing, number
from evalbook.metrics import METRICS, QUESTION_EMBEDDING, metric, names
from evalbook.params import (Profile, embedding_cache_path, generate_cache_path, judge_cache_path, load_profile,
                             local_outputs_root,
                             resolve_path,
                             locate_profile)
from evalbook.provenance import run_provenance
from evalbook.redaction import profile_redactor
from evalbook.replycache import ReplyCache
from evalbook.report.document import build_report, write_report
from evalbook.report import topics as topics_module
from evalbook.report.topics import Topics, find_topics
from evalbook.resultcache import ResultCache, code_identity
from evalbook.scenarios.judging import judge_scenarios
from evalbook.scenarios.report import reply_checks, scenarios_section
from evalbook.scenarios.run import (check_budget as check_scenario_budget, conversations, describe_plan,
                                    end_reason_counts, plan,
                                    run_conversations, summarize_conversations)
from evalbook.scenarios.sides import Simulator, System
from evalbook.scenarios.spec import Scenario, load_scenarios
from evalbook.scenarios.transcripts import TranscriptWriter, line_of, read_replay_source, read_transcripts, replay_path
from evalbook.score.models import resolve_model, resolve_profile_models
from evalbook.stats import BOOTSTRAP, summarize
from evalbook.templating import render

class StageError(EvalbookError, RuntimeError):
    """A stage that cannot run, for example because its upstream artifact is missing."""


@dataclass(frozen=True)
class StageContext:
    profile: Profile
    run_dir: Path
    run_id: str
    interactive: bool

    def artifact(self, name: str) -> Path:
        return self.run_dir / name

    def write_bytes(self, name: str, data: bytes) -> Path:
        """Write an artifact: write-once in a run folder, replaced freely in the scratch folder."""
        path = self.artifact(name)
        write_atomically(path, data, overwrite=self.interactive)
        return path

    def write_table(self, name: str, table: pa.Table) -> Path:
        """Write an Arrow table as Parquet, with write_bytes' rules."""
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        return self.write_bytes(name, sink.getvalue().to_pybytes())

    def write_json(self, name: str, value: Any) -> Path:
        text = json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        return self.write_bytes(name, text.encode("utf-8"))

    def read_json(self, name: str) -> Any:
        return json.loads(self.artifact(name).read_text("utf-8"))

    @property
    def params_hash(self) -> str:
        """The run's params hash (from the runner's provenance), else the loaded profile's."""
        if not self.interactive and self.artifact(PROVENANCE).exists():
            return self.read_json(PROVENANCE)["params_hash"]
        return self.profile.content_hash

    @property
    def report_path(self) -> Path:
        if self.interactive:
            return self.run_dir / INTERACTIVE_REPORT
        return report_path(self.run_dir, self.run_id)


def open_stage(params_path: str, run_dir: str | None = None, run_id: str | None = None,
               limit: int | None = None, seed: int | None = None) -> StageContext:
    """Load and validate the profile and settle where this stage reads and writes.

    `params_path` is found by evalbook.params.locate_profile. `limit` and `seed`, when given,
    override the profile's: 01_load samples with them, and later stages opened alone pass them
    on to the 01_load they run first.
    """
    chosen = {key: value for key, value in (("limit", limit), ("seed", seed)) if value is not None}
    profile = load_profile(locate_profile(params_path), chosen)
    if run_dir is None:
        folder = interactive_folder(local_outputs_root(profile), profile["env"])
        folder.mkdir(parents=True, exist_ok=True)
        return StageContext(profile, folder, run_id or profile["run_id"] or str(uuid.uuid4()), True)
    folder = Path(run_dir)
    if not folder.is_dir():
        raise StageError(f"run folder {folder} does not exist; the runner creates it")
    if run_id is None:
        raise StageError("run_id is required when run_dir is given")
    return StageContext(profile, folder, run_id, False)


def _require(ctx: StageContext, name: str, producer: str) -> Path:
    path = ctx.artifact(name)
    if not path.exists():
        raise StageError(f"{path} is missing: stage {producer} must run first in this run folder")
    return path


# ---------------------------------------------------------------- 00_generate

def run_generate(ctx: StageContext, http_transport=None):
    """00_generate: ask the profile's endpoint for the answers of the examples 01_load will keep;
    writes generated.parquet (the predictions 01_load joins) and generation.json (its summary).

    Every row is written, failed ones with their reason; when every row failed, GenerateFailed
    is raised after the files are written, so that the run fails and its folder shows why.
    """
    profile, config = ctx.profile, ctx.profile["generate"]
    if not config["enabled"]:
        raise StageError("generate.enabled is false in the profile: 01_load reads predictions_path "
                         "(-p generate.enabled=true, with a generate section, asks the system under test)")
    examples = load_module.sampled_examples(
        profile.path("input_path"), limit=profile["limit"], seed=profile["seed"],
        split=profile["dataset"]["split"], skip_incomplete=profile["skip_incomplete_examples"])
    _check_retrieved_contexts(examples, config, profile.path("input_path"))
    cache = ReplyCache(Path(generate_cache_path(profile)))
    bar = _progress_bar(ctx, "generating", "answer")

    def planned(calls: int, cached: int) -> None:
        print(f"before the first call: {calls} calls to make ({cached} of {calls + cached} answers "
              "from the cache)", flush=True)
        bar.reset(total=calls)

    def done(generation, client) -> None:
        stats = client.stats
        bar.set_postfix(calls=stats.calls, retries=stats.retries, refresh=False)
        bar.update(0 if generation.cached else 1)

    try:
        outcome = generate_answers(examples, config, cache, http_transport, on_done=done, on_plan=planned,
                                   redactor=profile_redactor(profile.values))
    finally:
        bar.close()
        cache.close()
    ctx.write_table(GENERATED, outcome.table)
    ctx.write_json(GENERATION, outcome.summary)
    check_something_generated(outcome.summary, outcome.table)
    return outcome


def _check_retrieved_contexts(examples: pd.DataFrame, config: dict[str, Any], input_path: str) -> None:
    """The openai kind with `context: retrieved` needs every example's retrieved_contexts."""
    if config["kind"] != "openai" or config["openai"]["context"] != "retrieved":
        return
    column = examples["retrieved_contexts"] if "retrieved_contexts" in examples.columns else None
    missing = examples.index if column is None else examples.index[column.isna()]
    if len(missing):
        rows = [int(r) for r in examples.loc[missing, "__row"]]
        raise load_module.LoadError(input_path, "generate.openai.context is retrieved, but these examples "
                                    "have no retrieved_contexts to give the model; set "
                                    "-p generate.openai.context=gold or none", column="retrieved_contexts",
                                    rows=rows)


def generation_summary(ctx: StageContext) -> dict[str, Any] | None:
    """generation.json of this folder, or None when 00_generate did not run here."""
    return ctx.read_json(GENERATION) if ctx.artifact(GENERATION).exists() else None


def _progress_bar(ctx: StageContext, description: str, unit: str):
    """A progress bar over calls. Run by Papermill, it goes to the kernel process's own stderr
    (the run's terminal or CI log), not into the executed notebook, and redraws at most every 15 s."""
    if ctx.interactive:
        return tqdm(desc=description, unit=unit)
    return text_tqdm(desc=description, unit=unit, mininterval=15, file=sys.__stderr__)


# ---------------------------------------------------------------- 01_load

def predictions_source(ctx: StageContext) -> str | None:
    """Where 01_load reads the answers: 00_generate's table when the profile generates them
    (computed on the spot in the scratch folder), else `predictions_path`."""
    if not ctx.profile["generate"]["enabled"]:
        return ctx.profile.path("predictions_path")
    if ctx.interactive and not ctx.artifact(GENERATED).exists():
        run_generate(ctx)
    return str(_require(ctx, GENERATED, "00_generate"))


def run_load(ctx: StageContext) -> load_module.LoadResult:
    profile = ctx.profile
    result = load_module.load_evaluation_set(
        profile.path("input_path"), predictions_source(ctx),
        limit=profile["limit"], seed=profile["seed"], split=profile["dataset"]["split"],
        skip_incomplete=profile["skip_incomplete_examples"],
        ignored_prediction_columns=tuple(GENERATED_TABLE_SCHEMA.names) if profile["generate"]["enabled"] else ())
    ctx.write_table(CANONICAL, load_module.canonical_arrow(result.table))
    ctx.write_json(LOAD_SUMMARY, {
        "counts": result.counts,
        "unmatched_prediction_ids": result.unmatched_prediction_ids,
        "examples_without_prediction": result.examples_without_prediction,
        "skipped_incomplete_rows": result.skipped_incomplete_rows,
        "warnings": result.warnings,
        "sources": result.sources,
        "generators": result.generators,
        "inputs_sha256": result.inputs_sha256,
        "metadata": [column.as_dict() for column in result.metadata],
    })
    return result


def canonical_table(ctx: StageContext) -> pd.DataFrame:
    if ctx.interactive and not ctx.artifact(CANONICAL).exists():
        run_load(ctx)
    return load_module.read_canonical(_require(ctx, CANONICAL, "01_load"))


# ---------------------------------------------------------------- 02_score

def scoring_models(ctx: StageContext) -> pd.DataFrame:
    """The profile's models, resolved and their weights' sha256 verified (no model is loaded):
    one row per role, with its name, source and sha256."""
    models = resolve_profile_models(ctx.profile)
    return pd.DataFrame.from_dict(
        {role: {"name": model.name, "source": model.source, "weights_sha256": model.weights_sha256}
         for role, model in models.items()}, orient="index")


def run_score(ctx: StageContext) -> pd.DataFrame:
    """02_score: the canonical table scored with the profile's `engine`, written by write_scores.

    `local` resolves and verifies the models, loads them once in this process, with the
    profile's embedding cache (`scoring.embedding_cache`) when it is enabled, and scores.
    `ray` scores on Ray's actors with the profile's `ray_*` settings; this process loads no
    model (`evalbook.score.engines`).
    """
    canonical = canonical_table(ctx)
    if ctx.profile["engine"] == "ray":
        # ray: only the Ray engine pays it
        from evalbook.score.engines import score_on_ray

        scored, provenance = score_on_ray(canonical, ctx.profile, ctx.run_id)
        return write_scores(ctx, scored, provenance, canonical)
    from evalbook.score.scoring import AnswerScorer, score_answers  # torch: only a stage that scores

    scorer = AnswerScorer.from_profile(ctx.profile, resolve_profile_models(ctx.profile))
    scored = score_answers(canonical, scorer, ctx.profile["retrieval"]["k"],
                           text_progress=not ctx.interactive,
                           question_embeddings=ctx.profile["slices"]["topics"] is not False)
    return write_scores(ctx, scored, scorer.provenance.as_dict(), canonical)


def write_scores(ctx: StageContext, scored: pd.DataFrame, provenance: dict[str, Any],
                 canonical: pd.DataFrame) -> pd.DataFrame:
    """02_score's outputs, whichever engine scored: `scored.parquet`, which also carries each
    example's metadata, and `scoring.json`."""
    if scored["id"].tolist() != canonical["id"].tolist():
        raise StageError("the scores' ids do not match the canonical table's, row for row")
    embeddings = scored.pop(QUESTION_EMBEDDING) if QUESTION_EMBEDDING in scored.columns else None
    ctx.write_json(TOPICS, question_topics(ctx.profile, canonical, embeddings))
    scored = scored.assign(**{load_module.METADATA: canonical[load_module.METADATA].to_numpy()})
    ctx.write_table(SCORED, pa.Table.from_pandas(scored, preserve_index=False))
    ctx.write_json(SCORING_SUMMARY, provenance)
    return scored


def question_topics(profile: Profile, canonical: pd.DataFrame, embeddings: pd.Series | None) -> dict[str, Any]:
    """02_score's topics record (evalbook.report.topics): the questions grouped by meaning from
    their embeddings, seeded with the bootstrap's seed; when the profile turns topics off,
    a record that says so."""
    setting = profile["slices"]["topics"]
    ids = canonical["id"].tolist()
    if setting is False:
        return Topics(None, None, None, {}, reason="slices.topics is false").as_record(ids, BOOTSTRAP.seed, None)
    if embeddings is None:
        raise StageError("the scores came without the questions' embeddings, which the topics need")
    points = np.stack([np.asarray(row, dtype=np.float32) for row in embeddings])
    questions = canonical["question"].tolist()

    def compute() -> dict[str, Any]:
        found = find_topics(points, questions, k=setting["k"], seed=BOOTSTRAP.seed,
                            min_size=profile["slices"]["min_n"])
        return found.as_record(ids, BOOTSTRAP.seed, setting["k"])

    # seeded: the same questions and embeddings give the same topics, so a warm rerun reads them
    key = [points, questions, ids, setting["k"], BOOTSTRAP.seed, profile["slices"]["min_n"],
           code_identity([topics_module], ["numpy", "scipy", "scikit-learn"])]
    with closing(results_cache(profile)) as cache:
        return cache.result("topics", key, compute)


def scored_table(ctx: StageContext) -> pd.DataFrame:
    if ctx.interactive and not ctx.artifact(SCORED).exists():
        run_score(ctx)
    return pd.read_parquet(_require(ctx, SCORED, "02_score"))


# ---------------------------------------------------------------- 03_judge

def run_judge(ctx: StageContext, canonical: pd.DataFrame, http_transport=None) -> dict[str, Any]:
    """Judge the eligible answers, or record why the judge did not run; writes judge.json. With
    scenarios enabled, the transcripts of 02a_converse are judged too (scenario-judgments.json).

    A judge that is disabled or unreachable gives `not_run` with the reason and no scores. A
    judge with nothing eligible raises NothingEligible: the stage fails rather than pass.
    """
    config = ctx.profile["judge"]
    scenarios_on = ctx.profile["scenarios"]["enabled"]
    if not config["enabled"]:
        reason = "judge.enabled is false in the profile"
    else:
        reason = server_reachable(settings_from(config), http_transport=http_transport)
    if reason is not None:
        result = {"summary": not_run(reason, config), "models_judge": None, "records": {}}
        ctx.write_json(JUDGE, result)
        if scenarios_on:
            ctx.write_json(SCENARIO_JUDGMENTS, {"status": "not_run", "reason": reason})
        return result
    cache = ReplyCache(Path(judge_cache_path(ctx.profile)))
    bar, progress = judge_progress(ctx)
    embedders: list = []

    def embed():
        if not embedders:
            embedders.append(relevance_embedder(ctx, cache))
        return embedders[0]

    try:
        outcome = judge_table(canonical, config, cache, embed() if config["metrics"]["relevance"]["enabled"] else None,
                              seed=config["sample_seed"], http_transport=http_transport,
                              progress=progress, on_estimate=lambda planned: announce(bar, planned),
                              redactor=profile_redactor(ctx.profile.values))
        result = {"summary": outcome.summary, "models_judge": outcome.models_judge, "records": outcome.records}
        ctx.write_json(JUDGE, result)
        if scenarios_on:
            scenarios, transcripts = conversation_results(ctx, http_transport)
            relevant = any(a.kind == "relevant" for s in scenarios for a in s.assertions)
            judged = judge_scenarios(scenarios, transcripts, config, cache, embed() if relevant else None,
                                     http_transport, profile_redactor(ctx.profile.values), progress)
            ctx.write_json(SCENARIO_JUDGMENTS, judged)
            for line in judged["nothing_to_score"]:
                print(f"nothing to score: {line}", flush=True)
    finally:
        bar.close()
        cache.close()
    return result


# ---------------------------------------------------------------- 02a_converse

@dataclass
class ConverseOutcome:
    scenarios: list[Scenario]
    transcripts: list
    summary: dict[str, Any]


def scenario_file_of(ctx: StageContext) -> tuple[Path, dict[str, Any]]:
    """The scenario file's path, and how the report names it: relative to the project when
    inside it (no machine's folders in a shared page), with its sha256."""
    path = Path(resolve_path(ctx.profile["scenarios"]["path"], ctx.profile.root))
    shown = path.relative_to(ctx.profile.root) if path.is_relative_to(ctx.profile.root) else Path(path.name)
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    return path, {"path": str(PurePosixPath(shown)), "sha256": digest}


def run_converse(ctx: StageContext, http_transport=None) -> ConverseOutcome:
    """02a_converse: every scenario's conversations with the system under test, simulated (or,
    with scenarios.replay_from, read back from an earlier run); writes transcripts.jsonl, each
    line as its conversation ends, and conversations.json (the summary, with the estimate)."""
    profile, config = ctx.profile, ctx.profile["scenarios"]
    if not config["enabled"]:
        raise StageError("scenarios.enabled is false in the profile: there is nothing to converse about "
                         "(make run PARAMS=params/scenarios-local.yaml runs the example scenarios)")
    path, scenario_file = scenario_file_of(ctx)
    scenarios = load_scenarios(path)
    print(f"{len(scenarios)} scenarios from {scenario_file['path']}, {config['repeats']} repeats each", flush=True)
    if config["replay_from"] is not None:
        source = read_replay_source(replay_path(resolve_path(config["replay_from"], profile.root)), scenarios,
                                    config["repeats"])
        transcripts = source.transcripts
        ctx.write_bytes(TRANSCRIPTS, "".join(line_of(t) for t in transcripts).encode("utf-8"))
        summary = {"status": "replayed", "replayed_from": source.path.parent.name, "replay_source": source.run,
                   "scenario_file": scenario_file, "n_scenarios": len(scenarios), "n_transcripts": len(transcripts),
                   "missing": source.missing, "end_reasons": end_reason_counts(transcripts),
                   "repeats": config["repeats"]}
        print(f"replaying {len(transcripts)} transcripts from {source.path}: no conversation is simulated", flush=True)
        lacking = source.incomplete()
        if lacking:
            print(f"incomplete, listed in the report: {lacking}", flush=True)
        ctx.write_json(CONVERSATIONS, summary)
        return ConverseOutcome(scenarios, transcripts, summary)
    redactor = profile_redactor(profile.values)
    simulator_cache = ReplyCache(Path(judge_cache_path(profile)))
    system_cache = ReplyCache(Path(generate_cache_path(profile)))
    bar = _progress_bar(ctx, "conversing", "conversation")
    try:
        simulator = Simulator(profile["simulate"], simulator_cache, http_transport, redactor)
        system = System(profile["generate"], ctx.run_id[:8], system_cache, http_transport, redactor)
        planned = conversations(scenarios, config["repeats"], profile["simulate"]["seed"])
        estimate = plan(planned, simulator, system, int(profile["judge"].get("repeats", 1)),
                        profile["judge"]["enabled"], config["max_calls"])
        print(f"before the first call: {describe_plan(estimate)}", flush=True)
        check_scenario_budget(estimate)
        bar.reset(total=len(planned))
        with TranscriptWriter(ctx.artifact(TRANSCRIPTS), overwrite=ctx.interactive) as writer:
            def done(transcript) -> None:
                writer.write(transcript)
                bar.set_postfix(simulator_calls=simulator.stats.calls, system_calls=system.stats.calls, refresh=False)
                bar.update(1)

            transcripts = run_conversations(planned, simulator, system, config["timeout_seconds"], done)
    finally:
        bar.close()
        simulator_cache.close()
        system_cache.close()
    summary = summarize_conversations(transcripts, estimate, simulator, system, scenario_file, config["repeats"],
                                      profile["simulate"]["seed"])
    ctx.write_json(CONVERSATIONS, summary)
    return ConverseOutcome(scenarios, transcripts, summary)


def conversation_results(ctx: StageContext, http_transport=None):
    """The scenarios and 02a_converse's transcripts of this folder (run on the spot in the scratch folder)."""
    if ctx.interactive and not ctx.artifact(TRANSCRIPTS).exists():
        outcome = run_converse(ctx, http_transport)
        return outcome.scenarios, outcome.transcripts
    _require(ctx, TRANSCRIPTS, "02a_converse")
    scenarios = load_scenarios(scenario_file_of(ctx)[0])
    return scenarios, read_transcripts(ctx.artifact(TRANSCRIPTS), scenarios, ctx.profile["scenarios"]["repeats"])


def scenario_results(ctx: StageContext) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """conversations.json and scenario-judgments.json of this folder; None without scenarios."""
    if not ctx.profile["scenarios"]["enabled"] or not ctx.artifact(CONVERSATIONS).exists():
        return None
    judged = (ctx.read_json(SCENARIO_JUDGMENTS) if ctx.artifact(SCENARIO_JUDGMENTS).exists()
              else {"status": "not_run", "reason": "03_judge has not run in this run folder"})
    return ctx.read_json(CONVERSATIONS), judged


def relevance_embedder(ctx: StageContext, cache):
    config = ctx.profile["judge"]
    embedding = config["embedding"]
    if embedding["kind"] == "openai":
        return openai_embedder(settings_from(config), embedding["name"], cache,
                               redactor=profile_redactor(ctx.profile.values))
    model = resolve_model(embedding["name"], embedding["source"], ctx.profile.root,
                          embedding.get("sha256"), "judge embedding")
    return local_embedder(model.folder)


def announce(bar, planned: dict[str, Any]) -> None:
    """Print the judge's pre-flight estimate, and size the progress bar to the calls it plans,
    so that the bar gives the time left at the rate measured from the first calls."""
    print(f"before the first call: {describe(planned)}", flush=True)
    bar.reset(total=planned["calls"])


def judge_progress(ctx: StageContext):
    """A progress bar over the calls to make and its callback, showing calls, cache hits and
    errors; a reply from the cache moves no bar (it takes no time)."""
    bar = _progress_bar(ctx, "judging", "reply")

    def update(reply, stats) -> None:
        totals = stats.per_metric.values()
        bar.set_postfix(calls=sum(m.calls for m in totals), cache_hits=sum(m.cache_hits for m in totals),
                        errors=sum(m.errors for m in totals), refresh=False)
        bar.update(0 if reply.cached else 1)

    return bar, update


def judge_results(ctx: StageContext) -> dict[str, Any]:
    """judge.json of this folder, or a not_run record when 03_judge has not run here."""
    if ctx.artifact(JUDGE).exists():
        return ctx.read_json(JUDGE)
    return {"summary": not_run("03_judge has not run in this run folder", ctx.profile["judge"]),
            "models_judge": None, "records": {}}


# ---------------------------------------------------------------- 04_report

HUB_DATASETS = "hf://datasets/"
UNKNOWN_GENERATOR = "unknown"


def generator_of(profile: Profile, loaded: dict[str, Any], generation: dict[str, Any] | None = None) -> str:
    """The system whose answers are scored: when 00_generate asked for them, the model ids the
    endpoint reported (else the openai kind's model); otherwise the profile's `generator`, else
    the values of the data's `generator` column (joined when several), else "unknown"."""
    if generation is not None:
        reported = generation["models"] or ([generation["model"]] if generation["model"] else [])
        if reported:
            return ", ".join(reported)
    return profile["generator"] or ", ".join(loaded.get("generators") or []) or UNKNOWN_GENERATOR


def dataset_label(profile: Profile) -> dict[str, str]:
    """The dataset's name and split for the report: the profile's name, else the hub id
    (`owner/name`) of an hf:// input, else the input file's stem."""
    name = profile["dataset"]["name"]
    if name is None:
        source = profile["input_path"]
        if source.startswith(HUB_DATASETS):
            name = "/".join(source[len(HUB_DATASETS):].split("/")[:2])
        else:
            name = PurePosixPath(source.split("://", 1)[-1]).stem
    return {"name": name, "split": profile["dataset"]["split"]}


def _scored_models(ctx: StageContext, provenance: dict[str, Any],
                   scoring: dict[str, Any]) -> dict[str, Any]:
    """The models as 02_score recorded them, which must be those the provenance names: a
    weights file replaced while the run went on would otherwise go unnoticed."""
    stale = ("run 02_score again: its scores come from other models" if ctx.interactive
             else "the models changed during the run, so it cannot be reported")
    models = {}
    for key in ("bertscore_hash", "bertscore_num_layers", "weights_sha256"):
        # provenance.json of runs made before it named the models: scoring.json alone does
        recorded = provenance.get(key, scoring[key])
        if recorded != scoring[key]:
            raise StageError(f"{ctx.artifact(SCORING_SUMMARY)}: {key} is {scoring[key]!r}, but "
                             f"{ctx.artifact(PROVENANCE)} records {recorded!r}; " + stale)
        models[key] = scoring[key]
    return models


def assemble_report(ctx: StageContext) -> dict[str, Any]:
    canonical, scored = canonical_table(ctx), scored_table(ctx)
    loaded = ctx.read_json(LOAD_SUMMARY)
    scoring = ctx.read_json(SCORING_SUMMARY)
    if ctx.interactive or not ctx.artifact(PROVENANCE).exists():
        if not ctx.interactive:
            raise StageError(f"{ctx.artifact(PROVENANCE)} is missing: the runner writes it first")
        provenance = run_provenance(ctx.profile, resolve_profile_models(ctx.profile))
    else:
        provenance = ctx.read_json(PROVENANCE)
    provenance = {**provenance, **_scored_models(ctx, provenance, scoring),
                  "shared_forward_pass": scoring["shared_forward_pass"],
                  # scoring.json of runs made before the device option: the CPU
                  "scoring_device": scoring.get("device", "cpu"),
                  # and through torch, with its version in package_versions
                  "scoring_backend": scoring.get("backend", "torch"),
                  "scoring_backend_versions": scoring.get("backend_versions", {}),
                  "inputs_sha256": loaded.get("inputs_sha256")}
    judged = judge_results(ctx)
    generation = generation_summary(ctx)
    counts = {**loaded["counts"],
              "unmatched_prediction_ids": loaded["unmatched_prediction_ids"],
              "examples_without_prediction": loaded["examples_without_prediction"],
              "skipped_incomplete_rows": loaded["skipped_incomplete_rows"],
              # a load.json written before warnings were recorded has none
              "warnings": loaded.get("warnings", [])}
    with closing(results_cache(ctx.profile)) as cache:
        checks = answer_checks(ctx, canonical, cache)
        return build_report(
            run_id=ctx.run_id, timestamp=datetime.now(timezone.utc),
            dataset=dataset_label(ctx.profile),
            models={"generator": generator_of(ctx.profile, loaded, generation),
                    "bertscore": scoring["bertscore_model"],
                    "sentence_transformer": scoring["sentence_transformer_model"]},
            canonical=canonical, scored=scored, load_counts=counts,
            k=ctx.profile["retrieval"]["k"], provenance=provenance, judge=judged, generation=generation,
            slicing=slicing(ctx, loaded), scenarios=scenarios_report(ctx), checks=checks, results_cache=cache)


def answer_checks(ctx: StageContext, canonical: pd.DataFrame,
                  results: ResultCache) -> tuple[list[list[dict[str, Any]]], dict[str, Any]] | None:
    """Every check's outcome on each example, as report records, and the run's checks summary
    (evalbook.checks); None when the profile asks for no check. Outcomes computed before on the
    same texts, settings and code are read from the results store (evalbook.checks.cache). A
    run where every check errors fails (NothingChecked)."""
    config = ctx.profile["checks"]
    assertions = load_checks_file(resolve_path(config["path"], ctx.profile.root)) if config["path"] else ()
    settings = check_settings(config, assertions)
    if not settings.any and not has_check_columns(canonical):
        return None
    latency = None
    if ctx.artifact(GENERATED).exists():  # a latency_ms check of the file or of a column reads it
        generated = pq.read_table(ctx.artifact(GENERATED), columns=["id", "latency_ms"]).to_pandas()
        latency = dict(zip(generated["id"], generated["latency_ms"]))
    outcomes = run_checks_cached(canonical, settings, latency, results)
    return [[outcome.as_record() for outcome in example] for example in outcomes], checks_summary(outcomes)


def results_cache(profile: Profile) -> ResultCache:
    """The store of seeded results (the topics, the slices' tests) kept in the embedding
    cache's folder; none when the profile turns the embedding cache off."""
    enabled = profile["scoring"]["embedding_cache"]["enabled"]
    return ResultCache(Path(embedding_cache_path(profile)) if enabled else None)


def scenarios_report(ctx: StageContext) -> dict[str, Any] | None:
    """The report's scenarios section, None when this run simulated no conversation."""
    found = scenario_results(ctx)
    if found is None:
        return None
    summary, judgments = found
    scenarios, transcripts = conversation_results(ctx)
    return scenarios_section(scenarios, transcripts, summary, judgments, reply_checks(ctx.profile))


def slicing(ctx: StageContext, loaded: dict[str, Any]) -> dict[str, Any]:
    """How 04_report slices the run: the profile's `slices`, 01_load's metadata types, and
    02_score's topics (None when the profile turns them off)."""
    settings = ctx.profile["slices"]
    topics = None
    if settings["topics"] is not False:
        topics = ctx.read_json(TOPICS) if ctx.artifact(TOPICS).exists() else {
            # a run scored before 02_score grouped the questions
            "labels": None, "reason": "02_score did not group the questions (run it again)"}
    return {"metadata_types": {column["name"]: column["type"] for column in loaded.get("metadata", [])},
            "by": settings["by"], "min_n": settings["min_n"], "topics": topics}


def save_report(ctx: StageContext, report: dict[str, Any]) -> Path:
    return write_report(report, ctx.report_path, overwrite=ctx.interactive)


def show_figure(ctx: StageContext, report: dict[str, Any], builder: Callable[..., Any], name: str):
    """Draw `builder(report)`, save it as `figures/<name>.png` in the run folder and return that
    PNG for display (figures.shown_png: drawn once); when there is nothing to draw, print why and
    return None."""
    # matplotlib: only the report stage pays it
    from evalbook.report.figures import no_data_reason, save_png, shown_png

    figure = builder(report)
    if figure is None:
        print(f"{name}: not drawn, {no_data_reason(report, builder)}")
        return None
    return shown_png(save_png(figure, ctx.run_dir, name, overwrite=ctx.interactive))


def summary_frame(summaries: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Per-metric summaries as a metric-by-statistic table, with integer counts."""
    table = pd.DataFrame(summaries).T
    return table.astype({"mean": "Float64", "p10": "Float64", "p50": "Float64", "p90": "Float64",
                         "n": "int64", "n_missing": "int64"})


def score_summary(scored: pd.DataFrame) -> pd.DataFrame:
    """The summary the report will carry, computed from a scored table."""
    return summary_frame({column: summarize(scored[column].tolist()) for column in names("similarity")})


def summary_table(report: dict[str, Any]) -> pd.DataFrame:
    """The report's answer-similarity summary as a metric-by-statistic table."""
    return summary_frame(report["answer_similarity_summary"])


# ---------------------------------------------------------------- what the pages of 01-03 show
# Plain values for readers: no dict or list as Python prints it, no absolute path, counts as
# integers with their labels (formatting.COUNT_LABELS), means to 3 decimals.

# scoring.json's keys (evalbook.score's provenance) as a reader reads them; a key missing here
# reads as itself with spaces (an engine that records more, such as ray's, still shows them)
SCORING_LABELS = {
    "bertscore_hash": "BERTScore's hash string", "bertscore_model": "BERTScore model",
    "bertscore_num_layers": "BERTScore layer", "sentence_transformer_model": "sentence model",
    "bertscore_max_tokens": "BERTScore's input limit (tokens)",
    "sentence_max_tokens": "sentence model's input limit (tokens)",
    "shared_forward_pass": "one forward pass serves both metrics", "weights_sha256": "weights' sha256",
    "rescale_baseline": "rescaling baseline", "chunk_size": "texts per batch", "torch_threads": "torch threads",
    "backend_versions": "version", "backend_fallback": "backend fallback", "sequences_encoded": "texts encoded",
    "embedding_cache": "embedding cache",
}
MODEL_ROLES = {"sentence_transformer": "sentence model", "bertscore": "BERTScore"}


def shown_path(value: str | Path, outputs_root: Path) -> str:
    """A path as a page shows it: relative to the outputs root when it lies inside it, else its
    file name; a remote location (s3://, hf://) as written."""
    text = str(value)
    if "://" in text or not Path(text).is_absolute():
        return text
    path = Path(text)
    try:
        return path.relative_to(outputs_root).as_posix()
    except ValueError:
        return path.name


def readable_value(value: Any, outputs_root: Path) -> str:
    """One value of a "How this run was made" table as text: yes/no, whole numbers, 3 decimals,
    an absolute path shortened (shown_path), a list joined with commas, a mapping as `key value`
    pairs; the em dash when missing."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None or is_missing(value):
        return MISSING
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return number(value)
    if isinstance(value, dict):
        return "; ".join(f"{MODEL_ROLES.get(key, key)} {readable_value(item, outputs_root)}"
                         for key, item in value.items()) or MISSING
    if isinstance(value, (list, tuple)):
        return ", ".join(readable_value(item, outputs_root) for item in value) or MISSING
    return shown_path(value, outputs_root) if str(value).startswith("/") else str(value)


def _megabytes(n_bytes: Any) -> str:
    return f"{n_bytes / 1e6:.1f} MB" if isinstance(n_bytes, (int, float)) else "unknown size"


def _embedding_cache(cache: dict[str, Any], outputs_root: Path) -> str:
    if not cache.get("enabled"):
        return "off"
    return (f"on, at {shown_path(cache.get('path') or '', outputs_root)}: {cache.get('hits', 0)} hits, "
            f"{cache.get('misses', 0)} misses, {cache.get('writes', 0)} written; "
            f"{_megabytes(cache.get('size_bytes'))} on disk")


def run_made_rows(ctx: StageContext) -> list[tuple[str, str]]:
    """The rows every stage's "How this run was made" table starts with: the run, the profile,
    the params hash and the input files (by name)."""
    root = local_outputs_root(ctx.profile)
    profile = ctx.profile
    rows = [("run", ctx.run_id + (" (interactive scratch folder)" if ctx.interactive else "")),
            ("params profile", f"{profile['name']} version {profile['version']}"),
            ("params hash", ctx.params_hash),
            ("input file", readable_value(profile["input_path"], root)),
            ("predictions file", readable_value(profile["predictions_path"], root))]
    return rows


def scoring_made_rows(ctx: StageContext) -> list[tuple[str, str]]:
    """02_score's "How this run was made": the run's rows, then scoring.json, one row per value,
    a mapping (the weights' sha256 by model) one row per entry."""
    root = local_outputs_root(ctx.profile)
    rows = run_made_rows(ctx) + [("engine", ctx.profile["engine"])]
    for key, value in ctx.read_json(SCORING_SUMMARY).items():
        label = SCORING_LABELS.get(key, key.replace("_", " "))
        if key == "embedding_cache" and isinstance(value, dict):
            rows.append((label, _embedding_cache(value, root)))
        elif key == "backend_versions" and isinstance(value, dict):
            rows.append(("backend versions", ", ".join(f"{name} {version}" for name, version in value.items())))
        elif isinstance(value, dict):
            rows += [(f"{label}, {MODEL_ROLES.get(name, name)}", readable_value(item, root))
                     for name, item in value.items()]
        else:
            rows.append((label, readable_value(value, root)))
    return rows


def judge_made_rows(ctx: StageContext, summary: dict[str, Any]) -> list[tuple[str, str]]:
    """03_judge's "How this run was made": the run's rows, then the judge's pins from the profile
    and, when it ran, its label."""
    root = local_outputs_root(ctx.profile)
    config = ctx.profile["judge"]
    rows = run_made_rows(ctx) + [
        ("judge model", config["model"]), ("judge server", config["base_url"]),
        ("temperature", readable_value(config["temperature"], root)), ("seed", readable_value(config["seed"], root)),
        ("answers sampled", readable_value(config["sample_size"], root) if config["sample_size"] else "all eligible"),
        ("relevance's embedding model", config["embedding"]["name"]),
        ("judge label", summary.get("label") or "none: the judge did not run")]
    return rows


def how_made_html(rows: list[tuple[str, str]]) -> str:
    """The collapsed "How this run was made" table of a stage's page (how_made.html)."""
    return render("how_made.html", rows=rows)


def models_table(ctx: StageContext) -> pd.DataFrame:
    """The profile's scoring models, resolved and their weights verified (no model is loaded):
    one row per model, with its name and where it is read from; their sha256 are in the page's
    "How this run was made"."""
    frame = scoring_models(ctx)
    frame.index = [MODEL_ROLES.get(role, role) for role in frame.index]
    return frame[["name", "source"]].rename(columns={"name": "model", "source": "read from"})


def scores_preview(scored: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The first `n` scored examples, one column per metric under its label, the retrieval rank
    as an integer and the top-k match as yes/no; the flags are counted apart (score_flags)."""
    shown = [m for m in METRICS if m.kind in ("similarity", "retrieval") and m.name in scored.columns]
    preview = scored.head(n).set_index("id")[[m.name for m in shown]].copy()
    if "rank" in preview.columns:
        preview["rank"] = preview["rank"].astype("Int64")
    if "top_k_match" in preview.columns:
        preview["top_k_match"] = preview["top_k_match"].map(
            lambda match: None if match is None or pd.isna(match) else ("yes" if match else "no"))
    preview.columns = [m.label for m in shown]
    preview.index.name = "id"
    return preview


def similarity_summary_table(scored: pd.DataFrame) -> pd.DataFrame:
    """score_summary with each metric under its label and readable column names."""
    table = score_summary(scored)
    table.index = [metric(name).label for name in table.index]
    return table.rename(columns={"n": "scored", "n_missing": "missing"})


SCORE_FLAGS = ("generated_empty", "reference_empty", "truncated_bertscore", "truncated_sentence")


def score_flags(scored: pd.DataFrame) -> dict[str, int]:
    """How many examples carry each of 02_score's flags (empty answers, truncated texts)."""
    return {flag: int(scored[flag].fillna(False).astype(bool).sum()) for flag in SCORE_FLAGS if flag in scored.columns}


def flags_sentence(flags: dict[str, int]) -> str:
    """The flags in one sentence: `1 empty answer scored 0; 1 answer cut to the sentence model's input limit.`"""
    nouns = {"generated_empty": ("empty answer", "empty answers", " scored 0"),
             "reference_empty": ("empty reference answer", "empty reference answers", ""),
             "truncated_bertscore": ("answer cut to BERTScore's input limit", "answers cut to BERTScore's input limit", ""),
             "truncated_sentence": ("answer cut to the sentence model's input limit",
                                    "answers cut to the sentence model's input limit", "")}
    parts = [counted(n, nouns[flag][0], nouns[flag][1]) + nouns[flag][2] for flag, n in flags.items() if n]
    return ("; ".join(parts) if parts else "No empty answer and no text cut to a model's limit") + "."


def metadata_table(columns: list[Any]) -> pd.DataFrame:
    """01_load's metadata columns (load.MetadataColumn) under readable names."""
    files = {"input_path": "input file", "predictions_path": "predictions file"}
    frame = pd.DataFrame([column.as_dict() for column in columns])
    if "file" in frame.columns:
        frame["file"] = frame["file"].map(lambda name: files.get(name, name))
    return frame.set_index("name").rename(columns={"type": "type", "file": "from", "n_distinct": "distinct values",
                                                   "n_missing": "missing"})


def ids_sentence(ids: list[Any], what: str, plural: str, none: str, shown: int = 20) -> str:
    """`2 predictions with no matching example: a, b`, the first `shown` ids; `none` when there are none."""
    if not ids:
        return none
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return f"{counted(len(ids), what, plural)}: {', '.join(str(i) for i in ids[:shown])}{more}."


PREVIEW_COLUMNS = {"id": "id", "question": "question", "reference_answer": "reference answer",
                   "generated_answer": "generated answer", "source": "source", "retrieved_ids": "retrieved ids"}
PREVIEW_CHARACTERS = 300


def canonical_preview(table: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The canonical table's first `n` rows as a reader reads them: the id, the texts (each cut to
    PREVIEW_CHARACTERS), the source and the retrieved ids joined with commas; the whole table is
    canonical.parquet."""
    preview = table.head(n)[[column for column in PREVIEW_COLUMNS if column in table.columns]].copy()
    for column in ("question", "reference_answer", "generated_answer"):
        if column in preview.columns:
            preview[column] = preview[column].map(lambda text: None if text is None else shown_text(text, PREVIEW_CHARACTERS))
    if "retrieved_ids" in preview.columns:
        preview["retrieved_ids"] = preview["retrieved_ids"].map(
            lambda ids: None if ids is None or (not hasattr(ids, "__len__") and pd.isna(ids)) else ", ".join(map(str, ids)))
    return preview.rename(columns=PREVIEW_COLUMNS)


def flagged_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows 01_load flags (an empty answer or reference, no prediction), each with why."""
    reasons = {"generated_empty": "empty answer", "reference_empty": "empty reference answer"}
    flagged = table.loc[table["generated_empty"] | table["reference_empty"] | ~table["has_prediction"]]
    why = flagged.apply(lambda row: ", ".join([text for flag, text in reasons.items() if row[flag]]
                                               + ([] if row["has_prediction"] else ["no prediction"])), axis=1)
    return pd.DataFrame({"row": flagged["row"].astype("Int64"), "question": flagged["question"],
                         "generated answer": flagged["generated_answer"], "flagged as": why}).set_index(flagged["id"])

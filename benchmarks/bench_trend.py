"""Benchmark: the trend page and the runs index over 500 runs (issue 27, "Scale").

Targets: with 500 runs in the outputs root, the trend renders in under 5 s, and rebuilding the
index reads no report.

The runs are synthetic, generated here into a temporary outputs root, each written the way the
runner leaves it: the run folder with `params.yaml` (the default profile, resolved, with the
run's values), `run.json` (evalbook.runs.RunJson), placeholder stage pages, and the report beside
the folder, built by `build_report` and written by `write_report` (schema-checked); then, as the
runner ends a run, `headline.json` and `values.parquet` from `read_run` and `write_headline`.
- Two datasets (3 runs in 5 are `support-faq`, the others `policy-qa`), one run every 6 hours
  from 2026-06-01, each up to 3 hours late, so 500 runs span 125 days.
- Each run scores N examples (default 32, the sample's size) on every metric. Between two runs
  of the same generator, 15% of the answers change (their values move by about 0.04, with mean
  0); the other answers, and so their values, stay the same, as on a rerun.
- Planted steps: at a quarter, a half and three quarters of each dataset's runs a new generator
  (`-p generator=...`) moves every answer, by +0.05, -0.04 and +0.06 on the similarity metrics
  and half as much again on the judge metrics; retrieval stays as it was, except that from 90%
  of `support-faq`'s runs on it runs at k = 10 instead of 5.
- The judge runs on 5 runs in 6, with one model for the first half of the runs and another after
  it: a new judge label, so each dataset has a scoring series and two judge series.
- Every 37th run fails in 02_score: run.json, FAILED and a headline, no report.

In one process, each part timed with the same clock:
1. the headline migration, for context: `build_index` over a copy of the outputs root without
   headline.json and values.parquet, which makes them from the reports (as for runs made before
   headlines existed); the migrated headlines must equal the runner's;
2. `build_trend_page` cold (no trend.json yet), with its parts (reading the headlines, reading
   values.parquet, pairing the examples, the bootstrap, "what changed", the figures, the page's
   template, writing trend.json);
3. `build_trend_page` warm (trend.json present), which should draw no step (reported as
   `warm_draws_no_step`, not failing the benchmark);
4. warm after one more run is added, which should draw only that run's steps;
5. `build_index` with the headlines present;
6. both again after every report has been overwritten with invalid JSON: the index must still
   show every successful run's means, equal to its headline's.
Every file opened during 2-6 is seen through an audit hook (sys.addaudithook); a report opened
there fails the benchmark (exit 1), as does a run shown without its means. The 5 s target is
reported, met or not, and does not fail it.

    make bench-trend                                  # 500 runs -> outputs/bench/trend.json
    .venv/bin/python benchmarks/bench_trend.py --runs 100 --examples 200 --output /tmp/trend.json
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import BENCH_OUTPUTS, DEFAULT_PROFILE, perturb, provenance, synthetic_texts, write_json  # noqa: E402

TARGET_SECONDS = 5.0
SEED = 0
ENV = "local"
DATASETS = ("support-faq", "policy-qa")
SPLIT = "test"
START = datetime(2026, 6, 1, 8, 0, tzinfo=timezone.utc)
SPACING = timedelta(hours=6)
FAILED_EVERY = 37  # this run of every FAILED_EVERY fails in 02_score
UNJUDGED_EVERY = 6  # this run of every UNJUDGED_EVERY of a dataset runs without the judge
JUDGE_MODELS = ("qwen2.5-7b-instruct", "llama-3.1-8b-instruct")  # the second from halfway on
SHIFTS = ((0.25, 0.05), (0.5, -0.04), (0.75, 0.06))  # (share of a dataset's runs, move of every answer)
K, K_LATER, K_CHANGE = 5, 10, 0.9  # support-faq's k from 90% of its runs on
CHANGED_SHARE = 0.15  # answers that change between two runs of one generator
CHANGE_SD = 0.04
COMMIT_EVERY = 8  # a new git commit every this many runs
EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
JUDGED = ("groundedness", "relevance", "criteria")
THRESHOLDS = {"groundedness": 0.8, "relevance": 0.5, "criteria": 0.5}
VOCABULARY = ["account", "address", "balance", "branch", "card", "charge", "claim", "contract", "delivery",
              "deposit", "invoice", "limit", "loan", "order", "password", "payment", "policy", "refund",
              "renewal", "statement", "subscription", "transfer", "warranty", "withdrawal", "the", "a", "of",
              "to", "and", "in", "for", "is", "on", "with", "when", "your", "can", "after", "before", "must"]
STAGES = ("01_load", "02_score", "03_judge", "04_report")
FAILURE = "RuntimeError: the scoring model ran out of memory"  # what a failed run's 02_score raised


# ---------------------------------------------------------------- the runs

@dataclass(frozen=True)
class PlannedRun:
    """One synthetic run: where it sits in its dataset's sequence and what it ran with."""

    index: int
    run_id: str
    dataset: str
    started: datetime
    failed: bool
    generator: int  # how many planted shifts came before it in its dataset
    k: int
    judge_model: str | None
    git_commit: str


def plan_runs(n_runs: int, seed: int = SEED) -> list[PlannedRun]:
    """`n_runs` seeded runs, oldest first (module docstring)."""
    rng = random.Random(seed)
    datasets = [DATASETS[1] if index % 5 in (1, 3) else DATASETS[0] for index in range(n_runs)]
    planned = []
    for index, dataset in enumerate(datasets):
        order = datasets[:index].count(dataset)
        share = order / datasets.count(dataset)
        generator = sum(share >= at for at, _ in SHIFTS)
        judged = order % UNJUDGED_EVERY != UNJUDGED_EVERY - 1
        planned.append(PlannedRun(
            index=index, run_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)), dataset=dataset,
            started=START + index * SPACING + timedelta(minutes=rng.randrange(0, 180), seconds=rng.randrange(60)),
            failed=index % FAILED_EVERY == FAILED_EVERY - 1, generator=generator,
            k=K_LATER if dataset == DATASETS[0] and share >= K_CHANGE else K,
            judge_model=(JUDGE_MODELS[index >= n_runs // 2] if judged else None),
            git_commit=hashlib.sha1(f"commit {index // COMMIT_EVERY}".encode()).hexdigest()))
    return planned


def judge_label(model: str) -> str:
    return "judge-" + hashlib.sha256(model.encode()).hexdigest()[:16]


class DatasetState:
    """A dataset's fixed examples and each example's current answer and values, which a run
    changes for some examples (or, at a planted shift, for all)."""

    def __init__(self, name: str, n_examples: int, seed: int):
        self.name = name
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.ids = [f"{name}-{i:04d}" for i in range(n_examples)]
        self.questions = [q.rstrip(".") + "?" for q in synthetic_texts(n_examples, VOCABULARY, seed, 6, 16)]
        self.references = synthetic_texts(n_examples, VOCABULARY, seed + 1, 15, 60)
        self.contexts = [f"{reference} {extra}" for reference, extra in
                         zip(self.references, synthetic_texts(n_examples, VOCABULARY, seed + 2, 30, 60))]
        self.base = {"bertscore_f1": rng.uniform(0.45, 0.9, n_examples),
                     "sentence_cosine": rng.uniform(0.35, 0.95, n_examples),
                     "groundedness": rng.uniform(0.4, 1.0, n_examples),
                     "relevance": rng.uniform(0.2, 0.95, n_examples),
                     "criteria": rng.choice([0.0, 0.5, 1.0], n_examples, p=[0.15, 0.35, 0.5])}
        self.spread = rng.uniform(0.0, 0.06, n_examples)  # precision above recall
        self.gold_rank = [int(r) if r <= 10 else None for r in rng.geometric(0.45, n_examples)]
        self.own = np.zeros(n_examples)  # each answer's own move, which a changed answer redraws
        self.answers = [perturb(reference, (seed, i)) for i, reference in enumerate(self.references)]
        self.generator = 0

    def advance(self, run: PlannedRun) -> None:
        """The answers of `run`: a new generator changes every answer, else some change."""
        n = len(self.ids)
        changed = (np.ones(n, dtype=bool) if run.generator != self.generator
                   else self.rng.random(n) < CHANGED_SHARE)
        self.own[changed] = self.rng.normal(0.0, CHANGE_SD if run.generator == self.generator else 0.01,
                                            int(changed.sum()))
        for i in np.flatnonzero(changed):
            self.answers[i] = perturb(self.references[i], (run.index, int(i)), 0.1 + 0.1 * self.rng.random())
        self.generator = run.generator

    def level(self) -> float:
        return sum(move for _, move in SHIFTS[:self.generator])

    def values(self, name: str, lowest: float = 0.0) -> np.ndarray:
        scale = 1.5 if name in JUDGED else 1.0
        return np.clip(self.base[name] + scale * (self.level() + self.own), lowest, 1.0)


def canonical_table(state: DatasetState, k: int) -> pd.DataFrame:
    """The run's canonical table, in 01_load's columns."""
    n = len(state.ids)
    retrieved = []
    for i, rank in enumerate(state.gold_rank):
        documents = [f"doc-{i}-{j}" for j in range(k)]
        if rank is not None and rank <= k:
            documents[rank - 1] = f"gold-{i}"
        retrieved.append(documents)
    text = lambda values: pd.Series(values, dtype=object)  # noqa: E731 - object keeps None as None
    return pd.DataFrame({
        "id": text(state.ids), "row": list(range(1, n + 1)), "question": text(state.questions),
        "context": text(state.contexts), "reference_answer": text(state.references),
        "generated_answer": text(list(state.answers)), "has_prediction": [True] * n,
        "generated_empty": [False] * n, "reference_empty": [False] * n,
        "gold_id": text([f"gold-{i}" for i in range(n)]), "gold_ids": text([None] * n),
        "retrieved_ids": text(retrieved), "retrieved_contexts": text([None] * n),
        "source": text(["EnterpriseSearchPolicy"] * n), "conversation": text([None] * n),
        "metadata": [json.dumps({"domain": state.name}) for _ in range(n)]})


def scored_table(state: DatasetState, canonical: pd.DataFrame, k: int) -> pd.DataFrame:
    """The run's scored table, in score_answers' columns, with the retrieval metrics at k."""
    from evalbook.score.retrieval import retrieval_columns

    n = len(state.ids)
    f1 = state.values("bertscore_f1", -1.0)
    flags = pd.array([False] * n, dtype="boolean")
    scored = pd.DataFrame({
        "id": state.ids,
        "bertscore_precision": pd.array(np.clip(f1 + state.spread / 2, -1, 1), dtype="Float64"),
        "bertscore_recall": pd.array(np.clip(f1 - state.spread / 2, -1, 1), dtype="Float64"),
        "bertscore_f1": pd.array(f1, dtype="Float64"),
        "sentence_cosine": pd.array(state.values("sentence_cosine", -1.0), dtype="Float64"),
        "generated_empty": flags, "reference_empty": [False] * n,
        "truncated_bertscore": flags.copy(), "truncated_sentence": flags.copy()})
    return pd.concat([scored, retrieval_columns(canonical, k)], axis=1)


def judge_result(state: DatasetState, model: str) -> dict[str, Any]:
    """03_judge's result in the report's shape: every example judged on the three metrics."""
    label = judge_label(model)
    scores = {name: state.values(name, -1.0 if name == "relevance" else 0.0) for name in JUDGED}
    records = {example_id: {"status": "judged", "label": label,
                            **{name: {"score": float(scores[name][i]), "unscored_reason": None,
                                      "passed": bool(scores[name][i] >= THRESHOLDS[name])} for name in JUDGED}}
               for i, example_id in enumerate(state.ids)}
    n = len(state.ids)
    metrics = {name: {"label": name, "mean": float(values.mean()),
                      **{f"p{q}": float(np.percentile(values, q)) for q in (10, 50, 90)},
                      "n_scored": n, "n_unscored": 0, "unscored_reasons": {}, "threshold": THRESHOLDS[name],
                      "threshold_is_placeholder": False, "pass_rate": float((values >= THRESHOLDS[name]).mean()),
                      "calls": n, "cache_hits": 0, "errors": 0, "prompt_tokens": 700 * n,
                      "completion_tokens": 120 * n, "cost_usd": "unknown"}
               for name, values in scores.items()}
    summary = {"status": "ran", "reason": None, "label": label, "note": None, "eligibility": None,
               "sampling": None, "metrics": metrics, "totals": {"calls": 3 * n, "errors": 0}}
    models_judge = {"model": model, "base_url_host": "127.0.0.1", "temperature": 0.0, "seed": 0, "max_tokens": 600,
                    "structured_output": "json_object_schema",
                    "prompts": {name: {"id": f"{name}-v1", "sha256": hashlib.sha256(name.encode()).hexdigest()}
                                for name in JUDGED},
                    "metric_versions": {name: 1 for name in JUDGED}, "relevance_embedding": EMBEDDING_MODEL,
                    "label": label, "note": None, "system_fingerprint": None}
    return {"summary": summary, "models_judge": models_judge, "records": records}


def _params(base: dict[str, Any], run: PlannedRun, predictions: str) -> dict[str, Any]:
    values = json.loads(json.dumps(base))
    values.update(run_id=run.run_id, generator=f"{run.dataset}-generator-v{run.generator + 1}",
                  predictions_path=predictions)
    values["dataset"] = {"name": run.dataset, "split": SPLIT}
    values["retrieval"]["k"] = run.k
    values["judge"]["enabled"] = run.judge_model is not None
    values["judge"]["model"] = run.judge_model or JUDGE_MODELS[0]
    return values


def _provenance(run: PlannedRun, overrides: dict[str, Any]) -> dict[str, Any]:
    return {"git_commit": run.git_commit, "params_hash": "sha256:" + hashlib.sha256(
                json.dumps(overrides, sort_keys=True).encode()).hexdigest(),
            "params_profile": {"path": str(DEFAULT_PROFILE), "name": "default", "version": 2, "overrides": overrides},
            "package_versions": {"evalbook": "0.1.0", "torch": "2.13.0+cpu"},
            "bertscore_hash": f"{EMBEDDING_MODEL}_L6_no-idf_version=0.3.13(hug_trans=5.24.0)",
            "bertscore_num_layers": 6,
            "weights_sha256": {"sentence_transformer": WEIGHTS_SHA256, "bertscore": WEIGHTS_SHA256}}


class OutputsRoot:
    """Writes planned runs into an outputs root as the runner leaves them."""

    def __init__(self, root: Path, n_examples: int):
        from evalbook.params import load_profile, resolved_values

        self.root = root
        self.states = {name: DatasetState(name, n_examples, SEED + 10 * position)
                       for position, name in enumerate(DATASETS)}
        self.base_params = resolved_values(load_profile(DEFAULT_PROFILE, {"outputs_root": str(root)}))

    def write(self, run: PlannedRun) -> Path:
        """The run's folder, with its report beside it unless it failed, and its headline."""
        import yaml

        from evalbook.files import write_new
        from evalbook.layout import FAILED_MARKER, PARAMS_FILE, report_path, run_folder, run_json
        from evalbook.report.document import write_report
        from evalbook.runs import RunJson, read_run
        from evalbook.trend.headline import write_headline

        state = self.states[run.dataset]
        state.advance(run)
        run_dir = run_folder(self.root, ENV, run.run_id, run.started)
        run_dir.mkdir(parents=True)
        predictions = f"/data/{run.dataset}/predictions-v{run.generator + 1}.jsonl"
        overrides = {"generator": f"{run.dataset}-generator-v{run.generator + 1}", "predictions_path": predictions}
        provenance = _provenance(run, overrides)
        (run_dir / PARAMS_FILE).write_text(
            yaml.safe_dump(_params(self.base_params, run, predictions), sort_keys=False), "utf-8")
        finished = run.started + timedelta(seconds=95)
        stages = []
        for stage in STAGES[:2] if run.failed else STAGES:
            failed = run.failed and stage == "02_score"
            stages.append({"stage": stage, "notebook": str(run_dir / f"{stage}.ipynb"),
                           "status": "failed" if failed else "succeeded", "html": str(run_dir / f"{stage}.html"),
                           **({"error": FAILURE} if failed else {})})
            (run_dir / f"{stage}.html").write_text(f"<p>{stage}</p>", "utf-8")
        if run.failed:
            write_new(run_dir / FAILED_MARKER, f"stage 02_score failed\n{FAILURE}\n".encode("utf-8"))
        else:
            (run_dir / "04_report.noinput.html").write_text("<p>04_report</p>", "utf-8")
            write_report(run_report(state, run, overrides, provenance, finished), report_path(run_dir))
        summary = RunJson(run_id=run.run_id, status="failed" if run.failed else "succeeded", started_at=run.started,
                          finished_at=finished, report=None if run.failed else str(report_path(run_dir)),
                          stages=stages, provenance=provenance)
        write_new(run_json(run_dir), summary.to_json())
        record = read_run(run_dir)  # as the runner's _write_headline does
        write_headline(record, record.report_data)
        return run_dir


def run_report(state: DatasetState, run: PlannedRun, overrides: dict[str, Any], provenance: dict[str, Any],
               finished: datetime) -> dict[str, Any]:
    """The run's report, as 04_report builds it from its tables and 03_judge's result."""
    from evalbook.report.document import build_report

    canonical = canonical_table(state, run.k)
    predictions_sha256 = hashlib.sha256(overrides["predictions_path"].encode()).hexdigest()
    return build_report(
        run_id=run.run_id, timestamp=finished, dataset={"name": run.dataset, "split": SPLIT},
        models={"generator": overrides["generator"], "bertscore": EMBEDDING_MODEL,
                "sentence_transformer": EMBEDDING_MODEL},
        canonical=canonical, scored=scored_table(state, canonical, run.k),
        load_counts=_load_counts(len(canonical)), k=run.k,
        provenance={**provenance, "shared_forward_pass": True, "scoring_device": "cpu", "scoring_backend": "torch",
                    "scoring_backend_versions": {"torch": "2.13.0+cpu"},
                    "inputs_sha256": {"input_path": "0" * 64, "predictions_path": predictions_sha256}},
        judge=judge_result(state, run.judge_model) if run.judge_model else None)


def _load_counts(n: int) -> dict[str, Any]:
    return {"n_input_rows": n, "n_skipped_incomplete_examples": 0, "skipped_incomplete_rows": [],
            "n_predictions": n, "n_unmatched_predictions": 0, "unmatched_prediction_ids": [],
            "n_left_out_by_limit": 0, "n_examples": n, "n_examples_without_prediction": 0,
            "examples_without_prediction": [], "n_empty_generated_answers": 0, "n_empty_reference_answers": 0,
            "n_with_retrieval": n}


# ---------------------------------------------------------------- seeing what is read

class FileOpens:
    """Every file this process opens while `watching`, seen through an audit hook (which cannot
    be removed: it records only inside `watching`)."""

    def __init__(self) -> None:
        self.opened: list[str] | None = None
        sys.addaudithook(self._hook)

    def _hook(self, event: str, arguments: tuple) -> None:
        if self.opened is not None and event == "open" and isinstance(arguments[0], (str, bytes, os.PathLike)):
            self.opened.append(os.fsdecode(arguments[0]))

    @contextlib.contextmanager
    def watching(self) -> Iterator[list[str]]:
        self.opened = []
        try:
            yield self.opened
        finally:
            self.opened = None


@dataclass
class Parts:
    """Seconds spent in each named part of a call, and how often it was called."""

    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    arrays_drawn: int = 0

    def wrap(self, name: str, function: Callable) -> Callable:
        def timed_call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
                self.calls[name] = self.calls.get(name, 0) + 1
        return timed_call


@contextlib.contextmanager
def measured_parts() -> Iterator[Parts]:
    """Time the trend's parts by wrapping the functions it looks up at call time."""
    import evalbook.publish.trend as page
    import evalbook.trend.document as document
    import evalbook.trend.series as series

    parts = Parts()
    draw = series.bootstrap_mean_cis

    def counted_draw(deltas, **settings):
        parts.arrays_drawn += len(deltas)
        return draw(deltas, **settings)

    wrapped = [(document, "local_headlines", "headlines"), (document, "read_values", "values.parquet"),
               (series, "paired_metric_deltas", "pairing"), (series, "bootstrap_mean_cis", "bootstrap"),
               (document, "what_changed", "what changed"), (page, "trend_figure", "figures"),
               (page, "png_bytes", "figures"), (page, "render", "page"), (page, "write_trend", "trend.json")]
    originals = [(module, attribute, getattr(module, attribute)) for module, attribute, _ in wrapped]
    series.bootstrap_mean_cis = counted_draw
    for module, attribute, name in wrapped:
        setattr(module, attribute, parts.wrap(name, getattr(module, attribute)))
    try:
        yield parts
    finally:
        for module, attribute, function in originals:
            setattr(module, attribute, function)


def timed(function: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


class _IndexRows(HTMLParser):
    """The cell texts of the index's runs table (its first table)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._tables = 0
        self._in_body = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._tables += 1
        elif tag == "tbody" and self._tables == 1:
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.rows.append([])
        elif tag == "td" and self._in_body:
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._in_body = False

    def handle_data(self, data):
        if self._in_body and self.rows and self.rows[-1]:
            self.rows[-1][-1] += data


def runs_shown(index: Path, headlines: dict[str, dict[str, Any]]) -> tuple[int, list[str]]:
    """How many of the successful runs' rows in `index` show every headline mean the index has a
    column for, as their headline gives it, to 3 decimals; the run ids of those that do not."""
    from evalbook.formatting import number
    from evalbook.publish.catalog import RUN_COLUMNS
    from evalbook.publish.index import RUN_ID_SHOWN

    parser = _IndexRows()
    parser.feed(index.read_text("utf-8"))
    text = {run_id: "" for run_id in headlines}
    for row in parser.rows:
        joined = " ".join(row)
        for run_id in text:
            if run_id[:RUN_ID_SHOWN] in joined:  # the index shows a run id's start, whole on hover
                text[run_id] = joined
    missing = [run_id for run_id, headline in headlines.items()
               if any(number(headline["metrics"][name]["mean"]) not in text[run_id] for name in RUN_COLUMNS)]
    return len(headlines) - len(missing), missing


# ---------------------------------------------------------------- the measurements

def real_steps(document: dict[str, Any]) -> dict[str, int]:
    """The real steps of a trend document, split into those at a planted shift (the generator
    differs from the run before) and the others, with how many metric steps were judged. A
    planted shift is found when every metric it moves (all but retrieval's) has a real step."""
    from evalbook.metrics import metric

    counts = {"planted_steps": 0, "planted_found": 0, "at_planted": 0, "elsewhere": 0, "metric_steps": 0}
    for series in document["series"]:
        for before, after in zip(series["points"], series["points"][1:]):
            planted = before["generator"] != after["generator"]
            real = {name for name, step in after["steps"].items() if step.get("status") == "real"}
            moved = {name for name in after["steps"] if metric(name).kind != "retrieval"}
            counts["metric_steps"] += len(after["steps"])
            counts["planted_steps"] += planted
            counts["planted_found"] += planted and moved <= real
            counts["at_planted" if planted else "elsewhere"] += len(real)
    return counts


def measure_trend(root: Path, opens: FileOpens, reports: set[str]) -> dict[str, Any]:
    """One build_trend_page, timed with its parts, and the reports it opened."""
    from evalbook.layout import TREND_FILE, TREND_PAGE
    from evalbook.publish.trend import build_trend_page

    with opens.watching() as opened, measured_parts() as parts:
        _, seconds = timed(lambda: build_trend_page(root, root))
    document = json.loads((root / TREND_FILE).read_text("utf-8"))
    named = {name: round(value, 3) for name, value in parts.seconds.items()}
    named["other"] = round(seconds - sum(parts.seconds.values()), 3)
    return {"seconds": round(seconds, 3), "parts": named,
            "values_read": parts.calls.get("values.parquet", 0), "arrays_drawn": parts.arrays_drawn,
            "reports_opened": sum(path in reports for path in opened), "files_opened": len(opened),
            "series": len(document["series"]), "runs_read": document["n_runs_read"],
            "points": sum(s["n_runs"] for s in document["series"]), "real_steps": real_steps(document),
            "trend_json_kb": round((root / TREND_FILE).stat().st_size / 1024),
            "trend_html_kb": round((root / TREND_PAGE).stat().st_size / 1024)}


def measure_index(root: Path, opens: FileOpens, reports: set[str],
                  headlines: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from evalbook.publish.index import build_index

    with opens.watching() as opened:
        index, seconds = timed(lambda: build_index(root))
    shown, missing = runs_shown(index, headlines)
    return {"seconds": round(seconds, 3), "reports_opened": sum(path in reports for path in opened),
            "files_opened": len(opened), "runs_with_means_shown": shown, "runs_without_means": missing[:5]}


def successful_headlines(root: Path) -> dict[str, dict[str, Any]]:
    """Every successful run's headline.json under `root`, by run id."""
    from evalbook.layout import HEADLINE_FILE, run_folders

    found = {}
    for folder in run_folders(root):
        headline = json.loads((folder / HEADLINE_FILE).read_text("utf-8"))
        if headline["status"] == "succeeded":
            found[headline["run_id"]] = headline
    return found


def measure_migration(root: Path, work: Path, runner_headlines: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """build_index over a copy of `root` without headlines, which makes them from the reports."""
    from evalbook.layout import EXAMPLE_VALUES, HEADLINE_FILE
    from evalbook.publish.index import build_index

    legacy = work / "legacy"
    shutil.copytree(root, legacy, ignore=shutil.ignore_patterns(HEADLINE_FILE, EXAMPLE_VALUES))
    _, seconds = timed(lambda: build_index(legacy))
    migrated = successful_headlines(legacy)
    same = sum(migrated.get(run_id) == headline for run_id, headline in runner_headlines.items())
    _, again = timed(lambda: build_index(legacy))
    shutil.rmtree(legacy)
    return {"seconds": round(seconds, 3), "index_after_seconds": round(again, 3),
            "headlines_made": len(migrated), "equal_to_the_runners": same}


def summarize(results: dict[str, Any], n_runs: int) -> dict[str, Any]:
    """The ratios and the targets: the cold trend under TARGET_SECONDS, and no report read by
    the index or the trend once headlines exist, with every run's means shown."""
    cold, warm, added = results["trend_cold"], results["trend_warm"], results["trend_warm_one_more"]
    index, unreadable = results["index"], results["index_reports_unreadable"]
    with_headlines = index["seconds"]
    ratios = {"warm_vs_cold": round(warm["seconds"] / cold["seconds"], 3),
              "warm_one_more_vs_cold": round(added["seconds"] / cold["seconds"], 3),
              "migration_vs_index": (round(results["migration"]["seconds"] / with_headlines, 1)
                                     if "migration" in results else None)}
    read = sum(part["reports_opened"] for part in (cold, warm, added, index, unreadable,
                                                   results["trend_reports_unreadable"]))
    return {"ratios": ratios, "targets": {
        "trend_cold_seconds": {"target": TARGET_SECONDS, "value": cold["seconds"],
                               "met": cold["seconds"] < TARGET_SECONDS, "runs": n_runs},
        "index_reads_no_report": {"value": read, "met": read == 0
                                  and unreadable["runs_with_means_shown"] == results["successful_runs"]},
        # trend.document: "a rebuild after one more run draws one step per series"
        "warm_draws_no_step": {"value": warm["arrays_drawn"], "met": warm["arrays_drawn"] == 0}}}


def run(n_runs: int, n_examples: int, work: Path, migration: bool = True) -> dict[str, Any]:
    """Write the runs into `work`, measure every part (module docstring); the results."""
    from evalbook.layout import report_path, run_folders

    root = work / "outputs"
    planned = plan_runs(n_runs + 1)
    writer = OutputsRoot(root, n_examples)
    _, setup_seconds = timed(lambda: [writer.write(one) for one in planned[:n_runs]])
    reports = {str(report_path(folder)) for folder in run_folders(root) if report_path(folder).is_file()}
    sizes = [os.path.getsize(path) for path in reports]
    headlines = successful_headlines(root)
    results: dict[str, Any] = {
        "runs": n_runs, "examples_per_run": n_examples, "successful_runs": len(headlines),
        "failed_runs": sum(one.failed for one in planned[:n_runs]), "setup_seconds": round(setup_seconds, 1),
        "report_kb_mean": round(sum(sizes) / len(sizes) / 1024, 1) if sizes else None,
        "planted_shifts": len(SHIFTS) * len(DATASETS)}
    if migration:
        print(f"headline migration over {n_runs} runs ...", file=sys.stderr, flush=True)
        results["migration"] = measure_migration(root, work, headlines)
    opens = FileOpens()
    import evalbook.publish.trend  # noqa: F401 - imports are not the render's: timed apart below
    print("trend cold, warm, one more run ...", file=sys.stderr, flush=True)
    results["trend_cold"] = measure_trend(root, opens, reports)
    results["trend_warm"] = measure_trend(root, opens, reports)
    writer.write(planned[n_runs])
    results["trend_warm_one_more"] = measure_trend(root, opens, reports)
    headlines = successful_headlines(root)
    results["successful_runs"] = len(headlines)
    results["index"] = measure_index(root, opens, reports, headlines)
    for path in reports:
        Path(path).write_text("{not json", "utf-8")
    results["index_reports_unreadable"] = measure_index(root, opens, reports, headlines)
    results["trend_reports_unreadable"] = measure_trend(root, opens, reports)
    results.update(summarize(results, n_runs))
    return results


def report_lines(results: dict[str, Any]) -> list[str]:
    def trend(label: str, part: dict[str, Any]) -> str:
        parts = ", ".join(f"{name} {seconds:.2f}" for name, seconds in part["parts"].items())
        return (f"{label}: {part['seconds']:.2f} s ({parts}); {part['values_read']} values.parquet read, "
                f"{part['arrays_drawn']} step arrays drawn, {part['reports_opened']} reports opened")

    cold, target = results["trend_cold"], results["targets"]["trend_cold_seconds"]
    ratios, index, unreadable = results["ratios"], results["index"], results["index_reports_unreadable"]
    steps, warm_drawn = cold["real_steps"], results["targets"]["warm_draws_no_step"]
    lines = [f"{results['runs']} runs ({results['failed_runs']} failed), {results['examples_per_run']} examples each, "
             f"reports {results['report_kb_mean']} KB on average; written in {results['setup_seconds']} s (not timed)",
             f"trend: {cold['series']} series, {cold['points']} points; planted steps found {steps['planted_found']} "
             f"of {steps['planted_steps']} ({steps['at_planted']} real metric steps there); {steps['elsewhere']} "
             f"real metric steps elsewhere, of {steps['metric_steps']} metric steps; trend.json "
             f"{cold['trend_json_kb']} KB, trend.html {cold['trend_html_kb']} KB",
             trend("trend cold", cold) + f"; target < {TARGET_SECONDS:g} s: {'met' if target['met'] else 'NOT met'}",
             trend("trend warm", results["trend_warm"]) + f"; {ratios['warm_vs_cold']:.2f}x cold; "
             f"every step reused (0 drawn): {'yes' if warm_drawn['met'] else 'NO'}",
             trend("trend warm, one more run", results["trend_warm_one_more"])
             + f"; {ratios['warm_one_more_vs_cold']:.2f}x cold",
             f"index with headlines: {index['seconds']:.2f} s, {index['reports_opened']} reports opened, "
             f"{index['runs_with_means_shown']} of {results['successful_runs']} successful runs show their means",
             f"index, every report overwritten with invalid JSON: {unreadable['seconds']:.2f} s, "
             f"{unreadable['reports_opened']} reports opened, {unreadable['runs_with_means_shown']} of "
             f"{results['successful_runs']} show their means",
             trend("trend, reports invalid", results["trend_reports_unreadable"])]
    if "migration" in results:
        migration = results["migration"]
        lines.append(f"headline migration (index over {results['runs']} runs without headlines): "
                     f"{migration['seconds']:.2f} s, {ratios['migration_vs_index']}x the index with headlines; "
                     f"{migration['headlines_made']} made, {migration['equal_to_the_runners']} equal to the runner's; "
                     f"the index after it {migration['index_after_seconds']:.2f} s")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--examples", type=int, default=32, help="examples per run")
    parser.add_argument("--no-migration", action="store_true", help="leave out the headline migration")
    parser.add_argument("--output", type=Path, default=BENCH_OUTPUTS / "trend.json")
    args = parser.parse_args(argv)
    record: dict[str, Any] = provenance()
    start = time.perf_counter()
    import evalbook.publish.index  # noqa: F401
    import evalbook.publish.trend  # noqa: F401
    import_seconds = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="evalbook-bench-trend-") as work:
        results = run(args.runs, args.examples, Path(work), migration=not args.no_migration)
    record.update({**results, "import_seconds": round(import_seconds, 2), "load_average_at_end": os.getloadavg()})
    write_json(args.output, record)
    for line in report_lines(results):
        print(line)
    load = record["machine"]["load_average_at_start"][0], record["load_average_at_end"][0]
    print(f"imports of the index and the trend: {import_seconds:.2f} s; load average {load[0]:.2f} at start, "
          f"{load[1]:.2f} at end")
    read = results["targets"]["index_reads_no_report"]
    if not read["met"]:
        print(f"FAILED: {read['value']} reports opened with headlines present, or a run shown without its means",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

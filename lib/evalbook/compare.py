"""Compare a baseline run with a candidate run, example by example.

Examples are paired by `id`. For every metric both runs can be compared on, the comparison gives
each run's mean over the pairs where both values are present, the paired mean delta
(candidate - baseline, so a positive delta means the candidate scored higher) with a percentile
bootstrap confidence interval, and the shares of examples that got better, worse or stayed the
same. Pairs with a value missing in either run are counted and skipped, never averaged.

Three gates keep unlike scores apart:
- judge metrics only when both judges ran under the same judge label;
- embedding metrics (BERTScore, sentence cosine) get deltas only when every model pin matches;
  otherwise the two means are shown side by side, without deltas;
- retrieval `top_k_match` gets deltas only when both runs used the same k.

A comparison is a report for people to read; it never fails a pipeline.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from evalbook.escaping import escape_html
from evalbook.files import write_atomically, write_new
from evalbook.layout import RunNotFound, find_report
from evalbook.params import is_remote
from evalbook.report import SCHEMA_VERSION as REPORT_SCHEMA_VERSION
from evalbook.stats import PERCENTILE_METHOD
from evalbook.validation import COMPARISON_SCHEMA, ReportError, mismatch, validate_report

KIND = "compare"
SCHEMA_VERSION = "1.1"
REPORT_MAJOR = "1"
EMBEDDING_METRICS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "bertscore_f1": lambda similarity: similarity["bertscore"]["f1"],
    "bertscore_precision": lambda similarity: similarity["bertscore"]["precision"],
    "bertscore_recall": lambda similarity: similarity["bertscore"]["recall"],
    "sentence_cosine": lambda similarity: similarity["sentence_cosine"],
}
RETRIEVAL_METRIC = "top_k_match"
# Below this a delta counts as unchanged. Two runs of the same model on the same text agree to
# about 1e-7, not bit for bit (float32 sums in a different order), so a tighter tolerance would
# call float noise "better" or "worse".
DEFAULT_TOLERANCE = 1e-6
EMBEDDING_ROLES = ("sentence_transformer", "bertscore")
# Profile model keys that change a score; `source` and paths say where weights came from, not what they are.
PROFILE_PIN_KEYS = ("name", "revision", "sha256", "num_layers", "idf", "rescale_with_baseline")
# Parts of a judge metric record that are not its verdicts.
JUDGE_RECORD_BOOKKEEPING = ("score", "score_levels", "threshold_reading")
REQUIRED_REPORT_KEYS = ("run_id", "timestamp", "dataset", "models", "retrieval_summary",
                        "examples", "provenance")
CI_METHOD = (
    "percentile bootstrap of the mean paired delta: a fresh numpy.random.default_rng(seed) per "
    "metric draws, for each of `resamples` resamples in turn, n indices with replacement "
    "(rng.integers(0, n, size=n)) from the n paired deltas; the interval is the "
    "(1 - confidence) / 2 and (1 + confidence) / 2 quantiles of the resample means, by linear "
    "interpolation (numpy's default quantile method)")


class ComparisonError(ValueError):
    """Reports that cannot be located, read or paired, or a comparison that breaks its schema."""


# ---------------------------------------------------------------- locating and loading reports

def locate_report(ref: str, outputs_root: Path | str, env: str | None = None) -> str:
    """The report a run id, an id prefix of at least 8 characters or a report location names.

    A ref ending in `.json` is a report location used as is (a local file must exist). Anything
    else is a run id or prefix, looked up under `<outputs_root>/<env or any env>/eval-runs/`
    (evalbook.layout.find_report).
    """
    try:
        return find_report(outputs_root, ref, env)
    except RunNotFound as error:
        raise ComparisonError(str(error)) from None


def load_report(location: str) -> dict[str, Any]:
    """Read a run's JSON report (a local path or an s3:// URL) and check it is a report-v1 1.x."""
    if location.startswith("s3://"):
        from evalbook.storage import read_bytes

        data = read_bytes(location)
    elif is_remote(location):
        raise ComparisonError(f"{location}: only local paths and s3:// URLs can be read")
    else:
        try:
            data = Path(location).read_bytes()
        except OSError as error:
            raise ComparisonError(f"cannot read report {location}: {error}") from None
    try:
        report = json.loads(data)
    except ValueError as error:
        raise ComparisonError(f"{location} is not JSON: {error}") from None
    check_report(report, location)
    return report


def check_report(report: Any, location: str) -> None:
    """Raise ComparisonError unless `report` is a run report of schema major version 1."""
    if not isinstance(report, dict):
        raise ComparisonError(f"{location}: a report is a JSON object, got {type(report).__name__}")
    if report.get("kind") == KIND:
        raise ComparisonError(f"{location} is a comparison, not a run report")
    version = report.get("schema_version")
    if not isinstance(version, str) or version.split(".")[0] != REPORT_MAJOR:
        raise ComparisonError(f"{location}: schema_version {version!r} is not a report-v1 version "
                              f"(major {REPORT_MAJOR}); this comparison reads reports 1.x only")
    missing = [key for key in REQUIRED_REPORT_KEYS if key not in report]
    if missing:
        raise ComparisonError(f"{location}: the report lacks {', '.join(missing)}")
    if version == REPORT_SCHEMA_VERSION:
        try:
            validate_report(report)
        except ReportError as error:
            raise ComparisonError(f"{location}: {error}") from None


# ---------------------------------------------------------------- the math

@dataclass(frozen=True)
class Pairing:
    """Examples paired by id: paired ids in baseline order, and the ids found in one run only."""

    paired_ids: list[str]
    only_baseline: list[str]
    only_candidate: list[str]
    baseline: dict[str, dict[str, Any]]
    candidate: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class PairedValues:
    """One metric over the paired examples: the pairs with both values, and the skipped counts."""

    ids: list[str]
    baseline: np.ndarray
    candidate: np.ndarray
    deltas: np.ndarray
    n_null_baseline_only: int
    n_null_candidate_only: int
    n_null_both: int

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def n_skipped(self) -> int:
        return self.n_null_baseline_only + self.n_null_candidate_only + self.n_null_both


def _by_id(examples: Sequence[dict[str, Any]], side: str) -> dict[str, dict[str, Any]]:
    by_id: dict[str, dict[str, Any]] = {}
    duplicates: dict[str, int] = {}
    for position, example in enumerate(examples):
        example_id = example.get("id")
        if not isinstance(example_id, str):
            raise ComparisonError(f"the {side} report's example {position} has no string id: {example_id!r}")
        if example_id in by_id:
            duplicates[example_id] = duplicates.get(example_id, 1) + 1
        by_id[example_id] = example
    if duplicates:
        listed = ", ".join(f"{i} ({count} times)" for i, count in duplicates.items())
        raise ComparisonError(f"the {side} report holds duplicate example ids, so examples cannot "
                              f"be paired by id: {listed}")
    return by_id


def pair_examples(baseline_examples: Sequence[dict[str, Any]],
                  candidate_examples: Sequence[dict[str, Any]]) -> Pairing:
    """Pair examples by `id`; raises ComparisonError naming any id repeated within one report."""
    baseline = _by_id(baseline_examples, "baseline")
    candidate = _by_id(candidate_examples, "candidate")
    return Pairing(paired_ids=[i for i in baseline if i in candidate],
                   only_baseline=[i for i in baseline if i not in candidate],
                   only_candidate=[i for i in candidate if i not in baseline],
                   baseline=baseline, candidate=candidate)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def paired_deltas(ids: Sequence[str], baseline_values: Sequence[Any],
                  candidate_values: Sequence[Any]) -> PairedValues:
    """Per-pair deltas candidate - baseline over the pairs where both values are present.

    A value that is None or NaN skips its pair; the skipped pairs are counted by which side
    lacked the value. Deltas keep the sign: positive means the candidate scored higher.
    """
    if not len(ids) == len(baseline_values) == len(candidate_values):
        raise ValueError(f"ids, baseline and candidate values differ in length: "
                         f"{len(ids)}, {len(baseline_values)}, {len(candidate_values)}")
    kept, base, cand = [], [], []
    null_baseline = null_candidate = null_both = 0
    for example_id, b, c in zip(ids, baseline_values, candidate_values):
        b_missing, c_missing = _missing(b), _missing(c)
        if b_missing and c_missing:
            null_both += 1
        elif b_missing:
            null_baseline += 1
        elif c_missing:
            null_candidate += 1
        else:
            kept.append(example_id)
            base.append(float(b))
            cand.append(float(c))
    baseline = np.asarray(base, dtype=np.float64)
    candidate = np.asarray(cand, dtype=np.float64)
    return PairedValues(ids=kept, baseline=baseline, candidate=candidate, deltas=candidate - baseline,
                        n_null_baseline_only=null_baseline, n_null_candidate_only=null_candidate,
                        n_null_both=null_both)


def bootstrap_mean_ci(deltas: Sequence[float] | np.ndarray, resamples: int = 2000, seed: int = 0,
                      confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of `deltas`.

    With n deltas and B = `resamples`, a generator numpy.random.default_rng(seed) draws, for
    resample b = 1..B in turn, n indices uniformly with replacement (rng.integers(0, n, size=n));
    the resample mean is the mean of the deltas at those indices. The interval is the
    (1 - confidence) / 2 and (1 + confidence) / 2 quantiles of the B resample means, by linear
    interpolation (numpy's default method, as in evalbook.stats). With n = 1, or when every delta
    is equal, every resample mean is that delta and the interval is degenerate: [delta, delta].
    No deltas is an error (ValueError): there is no interval to give.
    """
    values = np.asarray(deltas, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"bootstrap_mean_ci needs a non-empty 1-d array of deltas, got shape {values.shape}")
    if not np.isfinite(values).all():
        raise ValueError("bootstrap_mean_ci: deltas must be finite; drop missing pairs first")
    if int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    rng = np.random.default_rng(seed)
    n = values.size
    means = np.empty(int(resamples), dtype=np.float64)
    for b in range(int(resamples)):
        means[b] = values[rng.integers(0, n, size=n)].mean()
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2], method=PERCENTILE_METHOD)
    return float(low), float(high)


def direction_fractions(deltas: Sequence[float] | np.ndarray, tol: float = 1e-9) -> dict[str, Any]:
    """How many deltas are better (> tol), worse (< -tol) or unchanged (|delta| <= tol).

    Counts and fractions of n; the three fractions sum to 1. With no delta the fractions are
    None (JSON null), never NaN.
    """
    if tol < 0:
        raise ValueError(f"the tolerance must be at least 0, got {tol}")
    values = np.asarray(deltas, dtype=np.float64)
    n = int(values.size)
    better, worse = int((values > tol).sum()), int((values < -tol).sum())
    unchanged = n - better - worse
    counts = {"n_better": better, "n_worse": worse, "n_unchanged": unchanged}
    fractions = {f"fraction_{k[2:]}": (v / n if n else None) for k, v in counts.items()}
    return {**counts, **fractions}


# ---------------------------------------------------------------- per-example values

def embedding_value(example: dict[str, Any], metric: str) -> Any:
    return EMBEDDING_METRICS[metric](example["answer_similarity"])


def retrieval_value(example: dict[str, Any]) -> float | None:
    """top_k_match as 1.0 / 0.0; None for an example without retrieval results."""
    retrieval = example.get("retrieval")
    return None if retrieval is None else float(bool(retrieval["top_k_match"]))


def judge_entry(example: dict[str, Any], metric: str) -> dict[str, Any] | None:
    """The example's judge record for `metric`, or None when the example was not judged on it."""
    record = example.get("judge")
    if not isinstance(record, dict) or record.get("status") != "judged":
        return None
    entry = record.get(metric)
    return entry if isinstance(entry, dict) else None


def judge_value(example: dict[str, Any], metric: str) -> float | None:
    entry = judge_entry(example, metric)
    return None if entry is None else entry.get("score")


def judge_verdicts(example: dict[str, Any], metric: str) -> dict[str, Any] | None:
    """What the judge said on `metric` (statements, questions or criteria, pass, unscored reason)."""
    entry = judge_entry(example, metric)
    if entry is None:
        return None
    return {key: value for key, value in entry.items() if key not in JUDGE_RECORD_BOOKKEEPING}


# ---------------------------------------------------------------- the gates

def _judge_side(report: dict[str, Any]) -> tuple[str | None, str, str | None]:
    """(label, status, reason) of a report's judge; status `absent` for a report without one."""
    summary = report.get("judge_summary")
    if summary is None:
        return None, "absent", f"report schema {report['schema_version']} has no judge section"
    return summary.get("label"), summary["status"], summary.get("reason")


def judge_gate(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """Judge metrics are compared only when both judges ran under the same label."""
    b_label, b_status, b_reason = _judge_side(baseline)
    c_label, c_status, c_reason = _judge_side(candidate)
    gate = {"compared": False, "reason": None, "baseline_label": b_label, "candidate_label": c_label,
            "baseline_status": b_status, "candidate_status": c_status, "metrics": []}
    labels = f"baseline judge label {b_label!r}, candidate judge label {c_label!r}"
    not_ran = [(side, status, reason) for side, status, reason in
               (("baseline", b_status, b_reason), ("candidate", c_status, c_reason)) if status != "ran"]
    if not_ran:
        said = "; ".join(f"the {side} judge did not run ({status}: {reason})"
                         for side, status, reason in not_ran)
        gate["reason"] = f"judge metrics not compared: {said}; {labels}"
    elif b_label is None or c_label is None:
        gate["reason"] = f"judge metrics not compared: a judge without a label cannot be matched; {labels}"
    elif b_label != c_label:
        gate["reason"] = (f"judge metrics not compared: baseline judge label {b_label!r} differs from "
                          f"candidate judge label {c_label!r}")
    else:
        candidate_metrics = candidate["judge_summary"]["metrics"]
        shared = [m for m in baseline["judge_summary"]["metrics"] if m in candidate_metrics]
        gate["metrics"] = shared
        gate["compared"] = bool(shared)
        if not shared:
            gate["reason"] = f"judge metrics not compared: no judge metric was scored in both runs ({labels})"
    return gate


def embedding_pins(report: dict[str, Any]) -> dict[str, Any]:
    """Everything the report records that fixes the embedding scores, by dotted name."""
    provenance = report["provenance"]
    pins: dict[str, Any] = {f"models.{role}": report["models"].get(role) for role in EMBEDDING_ROLES}
    pins["provenance.bertscore_hash"] = provenance.get("bertscore_hash")
    pins["provenance.bertscore_num_layers"] = provenance.get("bertscore_num_layers")
    for role, digest in (provenance.get("weights_sha256") or {}).items():
        pins[f"provenance.weights_sha256.{role}"] = digest
    profile_models = (provenance.get("params_profile") or {}).get("models") or {}
    for role in EMBEDDING_ROLES:
        spec = profile_models.get(role) or {}
        for key in PROFILE_PIN_KEYS:
            if key in spec:
                pins[f"provenance.params_profile.models.{role}.{key}"] = spec[key]
    return {name: value for name, value in pins.items() if value is not None}


def embedding_gate(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """Embedding deltas only when every pin recorded in either report is equal in both.

    A pin recorded in one report only counts as differing: its equality cannot be shown.
    """
    b_pins, c_pins = embedding_pins(baseline), embedding_pins(candidate)
    checked = list(dict.fromkeys([*b_pins, *c_pins]))
    differing = [{"pin": name, "baseline": b_pins.get(name), "candidate": c_pins.get(name)}
                 for name in checked if b_pins.get(name) != c_pins.get(name)]
    reason = None
    if differing:
        described = "; ".join(
            f"{d['pin']}: baseline {_shown(d['baseline'])}, candidate {_shown(d['candidate'])}"
            for d in differing)
        reason = f"embedding metrics shown side by side without deltas: model pins differ ({described})"
    return {"compared": not differing, "reason": reason, "checked_pins": checked, "differing_pins": differing}


def _shown(value: Any) -> str:
    return "not recorded" if value is None else repr(value)


def _has_retrieval(report: dict[str, Any]) -> bool:
    return any(example.get("retrieval") is not None for example in report["examples"])


def retrieval_gate(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """top_k_match is compared when both runs have retrieval results and used the same k."""
    b_k, c_k = baseline["retrieval_summary"]["k"], candidate["retrieval_summary"]["k"]
    present = {"baseline": _has_retrieval(baseline), "candidate": _has_retrieval(candidate)}
    gate = {"compared": False, "shown": False, "reason": None, "baseline_k": b_k, "candidate_k": c_k}
    if not any(present.values()):
        gate["reason"] = "top_k_match not compared: neither run has retrieval results"
    elif not all(present.values()):
        side = "baseline" if present["baseline"] else "candidate"
        gate["reason"] = f"top_k_match not compared: only the {side} run has retrieval results"
    elif b_k != c_k:
        gate["shown"] = True
        gate["reason"] = (f"top_k_match shown side by side without deltas: baseline k={b_k} differs "
                          f"from candidate k={c_k}")
    else:
        gate["compared"] = gate["shown"] = True
    return gate


# ---------------------------------------------------------------- rows, regressions, document

@dataclass(frozen=True)
class Settings:
    resamples: int
    seed: int
    confidence: float
    tolerance: float
    n_regressions: int


def metric_row(metric: str, family: str, paired: PairedValues, n_pairs: int, *,
               with_deltas: bool, gate_reason: str | None, settings: Settings) -> dict[str, Any]:
    """One row of the metric table; deltas, CI and fractions stay null without `with_deltas`."""
    row: dict[str, Any] = {
        "metric": metric, "family": family, "compared": False, "reason": gate_reason, "note": None,
        "n_paired": n_pairs, "n": paired.n, "n_skipped": paired.n_skipped,
        "n_null_baseline_only": paired.n_null_baseline_only,
        "n_null_candidate_only": paired.n_null_candidate_only, "n_null_both": paired.n_null_both,
        "baseline_mean": float(paired.baseline.mean()) if paired.n else None,
        "candidate_mean": float(paired.candidate.mean()) if paired.n else None,
        "mean_delta": None, "ci_low": None, "ci_high": None,
        "n_better": None, "n_worse": None, "n_unchanged": None,
        "fraction_better": None, "fraction_worse": None, "fraction_unchanged": None,
    }
    if paired.n == 0:
        row["reason"] = gate_reason or "no paired example has a value in both runs"
        return row
    if not with_deltas:
        return row
    low, high = bootstrap_mean_ci(paired.deltas, settings.resamples, settings.seed, settings.confidence)
    row.update(compared=True, mean_delta=float(paired.deltas.mean()), ci_low=low, ci_high=high,
               **direction_fractions(paired.deltas, settings.tolerance))
    if paired.n == 1:
        row["note"] = "n=1: the confidence interval is degenerate, equal to the single delta"
    elif np.all(paired.deltas == paired.deltas[0]):
        row["note"] = "every delta is equal: the confidence interval is degenerate, equal to the delta"
    return row


def regressions(metric: str, family: str, paired: PairedValues, pairing: Pairing,
                settings: Settings) -> list[dict[str, Any]]:
    """The most negative deltas below -tolerance, worst first (ties in pairing order)."""
    order = np.argsort(paired.deltas, kind="stable")
    worst = [i for i in order if paired.deltas[i] < -settings.tolerance][:settings.n_regressions]
    rows = []
    for index in worst:
        example_id = paired.ids[index]
        base, cand = pairing.baseline[example_id], pairing.candidate[example_id]
        is_judge = family == "judge"
        rows.append({
            "id": example_id, "question": base["question"], "reference_answer": base["reference_answer"],
            "baseline_answer": base["generated_answer"], "candidate_answer": cand["generated_answer"],
            "baseline_score": float(paired.baseline[index]),
            "candidate_score": float(paired.candidate[index]),
            "delta": float(paired.deltas[index]),
            "baseline_judge": judge_verdicts(base, metric) if is_judge else None,
            "candidate_judge": judge_verdicts(cand, metric) if is_judge else None,
        })
    return rows


def run_summary(report: dict[str, Any], location: str) -> dict[str, Any]:
    provenance = report["provenance"]
    profile = provenance.get("params_profile") or {}
    label, status, _ = _judge_side(report)
    return {
        "run_id": report["run_id"], "location": location, "schema_version": report["schema_version"],
        "timestamp": report["timestamp"], "dataset": report["dataset"],
        "models": {key: report["models"].get(key) for key in ("generator", *EMBEDDING_ROLES)},
        "judge_label": label, "judge_status": status, "k": report["retrieval_summary"]["k"],
        "git_commit": provenance.get("git_commit"), "params_hash": provenance.get("params_hash"),
        "params_profile": {"name": profile.get("name"), "version": profile.get("version")},
        "scoring_device": scoring_device(report),
    }


def scoring_device(report: dict[str, Any]) -> str:
    """Where a report's embedding models ran; reports made before the device option: the CPU."""
    return report["provenance"].get("scoring_device", "cpu")


def _notes(baseline: dict[str, Any], candidate: dict[str, Any], pairing: Pairing,
           questions_differ: list[str], judge: dict[str, Any]) -> list[str]:
    notes = []
    if baseline["run_id"] == candidate["run_id"]:
        notes.append(f"the baseline and the candidate are the same run ({baseline['run_id']})")
    b_data, c_data = baseline["dataset"], candidate["dataset"]
    if (b_data.get("name"), b_data.get("split")) != (c_data.get("name"), c_data.get("split")):
        notes.append(f"the datasets differ: baseline {b_data.get('name')}/{b_data.get('split')}, "
                     f"candidate {c_data.get('name')}/{c_data.get('split')}")
    if pairing.only_baseline or pairing.only_candidate:
        notes.append(f"{len(pairing.only_baseline)} example(s) only in the baseline and "
                     f"{len(pairing.only_candidate)} only in the candidate are left out of every metric")
    devices = [scoring_device(baseline), scoring_device(candidate)]
    if devices[0] != devices[1]:
        notes.append(f"the embedding models ran on different devices (baseline {devices[0]}, candidate "
                     f"{devices[1]}); their rounding differs, so deltas of about 1e-6 are noise")
    if questions_differ:
        notes.append(f"{len(questions_differ)} paired id(s) carry a different question in the two runs: "
                     + ", ".join(questions_differ))
    if judge["compared"]:
        notes.append("judge scores exist only for the examples each judge sampled and scored; "
                     "pairs without a score in both runs are counted in n_skipped")
    return notes


def _settings(resamples: int, seed: int, confidence: float, tolerance: float, n_regressions: int) -> Settings:
    if isinstance(resamples, bool) or int(resamples) != resamples or resamples < 1:
        raise ComparisonError(f"resamples must be a positive integer, got {resamples}")
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise ComparisonError(f"seed must be a non-negative integer, got {seed}")
    if not 0 < confidence < 1:
        raise ComparisonError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    if not tolerance >= 0:
        raise ComparisonError(f"tolerance must be at least 0, got {tolerance}")
    if isinstance(n_regressions, bool) or int(n_regressions) != n_regressions or n_regressions < 0:
        raise ComparisonError(f"n_regressions must be a non-negative integer, got {n_regressions}")
    return Settings(int(resamples), int(seed), float(confidence), float(tolerance), int(n_regressions))


def build_comparison(baseline: dict[str, Any], candidate: dict[str, Any], *, baseline_location: str,
                     candidate_location: str, resamples: int = 2000, seed: int = 0,
                     confidence: float = 0.95, tolerance: float = DEFAULT_TOLERANCE, n_regressions: int = 10,
                     created_at: datetime) -> dict[str, Any]:
    """The compare-v1 document for two loaded reports; `created_at` must be timezone-aware UTC."""
    if created_at.utcoffset() is None or created_at.utcoffset().total_seconds() != 0:
        raise ComparisonError("created_at must be timezone-aware UTC")
    settings = _settings(resamples, seed, confidence, tolerance, n_regressions)
    check_report(baseline, baseline_location)
    check_report(candidate, candidate_location)
    pairing = pair_examples(baseline["examples"], candidate["examples"])
    ids = pairing.paired_ids
    gates = {"judge": judge_gate(baseline, candidate), "embedding": embedding_gate(baseline, candidate),
             "retrieval": retrieval_gate(baseline, candidate)}

    candidates: list[tuple[str, str, Callable[[dict[str, Any]], Any], bool, str | None]] = []
    for metric in EMBEDDING_METRICS:
        candidates.append((metric, "embedding", lambda e, m=metric: embedding_value(e, m),
                           gates["embedding"]["compared"], gates["embedding"]["reason"]))
    if gates["retrieval"]["shown"]:
        candidates.append((RETRIEVAL_METRIC, "retrieval", retrieval_value,
                           gates["retrieval"]["compared"], gates["retrieval"]["reason"]))
    for metric in gates["judge"]["metrics"]:
        candidates.append((metric, "judge", lambda e, m=metric: judge_value(e, m), True, None))

    rows, regressed, long_deltas = [], {}, []
    for metric, family, value_of, with_deltas, gate_reason in candidates:
        paired = paired_deltas(ids, [value_of(pairing.baseline[i]) for i in ids],
                               [value_of(pairing.candidate[i]) for i in ids])
        row = metric_row(metric, family, paired, len(ids), with_deltas=with_deltas,
                         gate_reason=gate_reason, settings=settings)
        rows.append(row)
        if not row["compared"]:
            continue
        regressed[metric] = regressions(metric, family, paired, pairing, settings)
        long_deltas.extend(
            {"id": i, "metric": metric, "baseline": float(b), "candidate": float(c), "delta": float(d)}
            for i, b, c, d in zip(paired.ids, paired.baseline, paired.candidate, paired.deltas))

    questions_differ = [i for i in ids if pairing.baseline[i]["question"] != pairing.candidate[i]["question"]]
    return {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "created_at": created_at.isoformat().replace("+00:00", "Z"),
        "baseline": run_summary(baseline, baseline_location),
        "candidate": run_summary(candidate, candidate_location),
        "pairing": {"n_paired": len(ids), "n_only_baseline": len(pairing.only_baseline),
                    "n_only_candidate": len(pairing.only_candidate),
                    "only_baseline_ids": pairing.only_baseline, "only_candidate_ids": pairing.only_candidate,
                    "n_question_differs": len(questions_differ), "question_differs_ids": questions_differ},
        "gates": gates,
        "metrics": rows,
        "regressions": regressed,
        "deltas": long_deltas,
        "notes": _notes(baseline, candidate, pairing, questions_differ, gates["judge"]),
        "parameters": {"resamples": settings.resamples, "seed": settings.seed,
                       "confidence": settings.confidence, "tolerance": settings.tolerance,
                       "n_regressions": settings.n_regressions, "ci_method": CI_METHOD,
                       "quantile_method": PERCENTILE_METHOD},
    }


# ---------------------------------------------------------------- schema, storage, tables

def validate_comparison(doc: dict[str, Any]) -> None:
    """Raise ComparisonError listing every violation of schemas/compare-v1.json (and any NaN)."""
    problem = mismatch(doc, COMPARISON_SCHEMA, "comparison")
    if problem:
        raise ComparisonError(problem)


def write_comparison(doc: dict[str, Any], path: Path, overwrite: bool = False) -> Path:
    """Validate, then write the comparison atomically; an invalid comparison is not written.

    Write-once unless `overwrite` (for a scratch folder): an existing file is then replaced only
    once the new one is complete.
    """
    validate_comparison(doc)
    data = (json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    path = Path(path)
    try:
        if overwrite:
            write_atomically(path, data, overwrite=True)
        else:
            write_new(path, data)
    except FileExistsError:
        raise FileExistsError(f"{path} exists; a comparison is written once, never replaced") from None
    return path


# ---------------------------------------------------------------- tables for the notebook

RUN_FIELDS = ("run_id", "location", "timestamp", "dataset", "generator", "sentence_transformer",
              "bertscore", "judge", "k", "params_profile", "git_commit")


def runs_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """The two runs side by side: one row per field, columns baseline and candidate."""
    def column(run: dict[str, Any]) -> list[Any]:
        dataset, profile = run["dataset"], run["params_profile"]
        judge = run["judge_label"] if run["judge_status"] == "ran" else f"({run['judge_status']})"
        return [run["run_id"], run["location"], run["timestamp"], f"{dataset['name']}/{dataset['split']}",
                run["models"]["generator"], run["models"]["sentence_transformer"], run["models"]["bertscore"],
                judge, run["k"], f"{profile['name']} v{profile['version']}", run["git_commit"]]

    return pd.DataFrame({"baseline": column(doc["baseline"]), "candidate": column(doc["candidate"])},
                        index=pd.Index(RUN_FIELDS, name="field"))


def comparability_notes(doc: dict[str, Any]) -> str:
    """HTML: how the examples paired, what each gate allowed and why, and the notes.

    Ids, reasons and notes are user text, escaped by evalbook.escaping; show the result as HTML,
    not Markdown, so that Markdown in an id stays as written."""
    pairing, gates = doc["pairing"], doc["gates"]
    pairing_item = (f"<strong>Pairing</strong>: {pairing['n_paired']} paired by id, "
                    f"{pairing['n_only_baseline']} only in the baseline, {pairing['n_only_candidate']} "
                    "only in the candidate.")
    unpaired = [f"<li>only in the {side}: "
                + ", ".join(f"<code>{escape_html(i)}</code>" for i in pairing[f"only_{side}_ids"]) + "</li>"
                for side in ("baseline", "candidate") if pairing[f"only_{side}_ids"]]
    if unpaired:
        pairing_item += "<ul>" + "".join(unpaired) + "</ul>"
    items = [pairing_item]
    for name, gate in (("Embedding metrics", gates["embedding"]),
                       ("Retrieval top_k_match", gates["retrieval"]), ("Judge metrics", gates["judge"])):
        items.append(f"<strong>{name}</strong>: "
                     + ("compared." if gate["compared"] else escape_html(gate["reason"]) + "."))
    items.extend(escape_html(note) + "." for note in doc["notes"])
    return "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>"


def metric_table(doc: dict[str, Any]) -> pd.DataFrame:
    """The metric table for reading: means, delta with its interval, direction shares, why not compared."""
    confidence = f"{doc['parameters']['confidence']:.0%}"
    rows = [{"metric": r["metric"], "n": r["n"], "n_skipped": r["n_skipped"],
             "baseline": r["baseline_mean"], "candidate": r["candidate_mean"], "delta": r["mean_delta"],
             f"{confidence} CI low": r["ci_low"], f"{confidence} CI high": r["ci_high"],
             "better": r["fraction_better"], "worse": r["fraction_worse"],
             "unchanged": r["fraction_unchanged"],
             "note": r["reason"] or r["note"] or ""}
            for r in doc["metrics"]]
    return pd.DataFrame(rows).set_index("metric") if rows else pd.DataFrame(rows)


def deltas_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """The long per-example table (id, metric, baseline, candidate, delta) of compared metrics."""
    return pd.DataFrame(doc["deltas"], columns=["id", "metric", "baseline", "candidate", "delta"])


def verdict_text(verdicts: dict[str, Any] | None) -> str:
    """A judge's verdicts on one metric as short lines: statements, questions or criteria."""
    if verdicts is None:
        return ""
    mark = {True: "✓", False: "✗", 1: "✓", 0: "✗"}
    lines = [f"{mark[s['verdict']]} {s['statement']}" for s in verdicts.get("statements", [])]
    lines += [f"? {q}" for q in verdicts.get("generated_questions", [])]
    lines += [f"{mark[c['met']]} {c['criterion']}: {c['rationale']}" for c in verdicts.get("criteria", [])]
    if verdicts.get("unscored_reason"):
        lines.append(f"unscored: {verdicts['unscored_reason']}")
    return "\n".join(lines)


def regressions_table(doc: dict[str, Any], metric: str) -> pd.DataFrame:
    """The largest regressions on one compared metric, worst first, judge verdicts as text."""
    if metric not in doc["regressions"]:
        compared = ", ".join(doc["regressions"]) or "none"
        raise ComparisonError(f"no regressions for {metric!r}: it was not compared (compared: {compared})")
    rows = []
    for entry in doc["regressions"][metric]:
        row = {key: value for key, value in entry.items() if key not in ("baseline_judge", "candidate_judge")}
        if entry["baseline_judge"] is not None or entry["candidate_judge"] is not None:
            row["baseline_judge"] = verdict_text(entry["baseline_judge"])
            row["candidate_judge"] = verdict_text(entry["candidate_judge"])
        rows.append(row)
    return pd.DataFrame(rows)


def regressions_heading(doc: dict[str, Any], metric: str) -> str:
    """HTML: the heading over one metric's regressions, its name escaped."""
    n = len(doc["regressions"][metric])
    return f"<h3>{escape_html(metric)}: {n} largest regression{'s' if n != 1 else ''}</h3>"


def regressions_styled(doc: dict[str, Any], metric: str):
    """regressions_table for reading: full answers side by side, wrapped, the delta shaded red."""
    from evalbook.figures import readable_table

    frame = regressions_table(doc, metric)
    caption = (f"{metric}: the {len(frame)} largest regressions (delta = candidate - baseline; "
               f"tolerance {doc['parameters']['tolerance']:g})")
    styler = readable_table(frame, caption)
    if len(frame):
        styler = styler.background_gradient(cmap="Reds_r", subset=["delta"], vmin=-1.0, vmax=0.0)
    return styler

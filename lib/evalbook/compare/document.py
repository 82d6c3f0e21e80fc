"""Compare a baseline run with a candidate run, example by example: the compare-v1 document.

Examples are paired by `id`. For every metric both runs can be compared on (the gates in
evalbook.compare.gates decide), the comparison gives each run's mean over the pairs where both
values are present, the paired mean delta (candidate - baseline, so a positive delta means the
candidate scored higher) with a percentile bootstrap confidence interval, and the shares of
examples that got better, worse or stayed the same (evalbook.stats). Pairs with a value missing in
either run are counted and skipped, never averaged. Its `slices` section gives the same paired
deltas within each slice level of the candidate, against the rest (evalbook.compare.slices);
its `checks` section the checks that newly fail in the candidate, example by example
(evalbook.compare.checks).

A comparison is a report for people to read; it never fails a pipeline. Its `gate` is null
here: only rules the user gives (`compare --fail-on`, evalbook.compare.gate) fill it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from evalbook.compare import ComparisonError
from evalbook.compare.checks import check_changes
from evalbook.compare.gates import EMBEDDING_ROLES, embedding_gate, judge_gate, judge_side, retrieval_gate
from evalbook.compare.settings import DEFAULTS, Settings
from evalbook.compare.slices import slice_deltas, unavailable
from evalbook.files import write_atomically, write_new
from evalbook.metrics import Metric, of_kind
from evalbook.metrics import metric as registered
from evalbook.report.reader import ReportUnreadable, RunReport, check_report, judge_entry, read_report
from evalbook.runs import latest_reports
from evalbook.stats import (PERCENTILE_METHOD, Bootstrap, PairedValues, bootstrap_mean_ci, direction_fractions,
                            paired_deltas)
from evalbook.validation import COMPARISON_SCHEMA, mismatch

KIND = "compare"
SCHEMA_VERSION = "1.6"
# The comparison's name for each kind of metric (its `family`).
FAMILIES = {"similarity": "embedding", "retrieval": "retrieval", "judge": "judge"}
# Parts of a judge metric record that are not its verdicts.
LOOK_BACK = 20  # earlier runs searched for one on the same data with the same models (earlier_comparison)
JUDGE_RECORD_BOOKKEEPING = ("score", "score_levels", "threshold_reading")
CI_METHOD = (
    "percentile bootstrap of the mean paired delta: a fresh numpy.random.default_rng(seed) per "
    "metric draws, for each of `resamples` resamples in turn, n indices with replacement "
    "(rng.integers(0, n, size=n)) from the n paired deltas; the interval is the "
    "(1 - confidence) / 2 and (1 + confidence) / 2 quantiles of the resample means, by linear "
    "interpolation (numpy's default quantile method)")




# ---------------------------------------------------------------- pairing

@dataclass(frozen=True)
class Pairing:
    """Examples paired by id: paired ids in baseline order, and the ids found in one run only."""

    paired_ids: list[str]
    only_baseline: list[str]
    only_candidate: list[str]
    baseline: dict[str, dict[str, Any]]
    candidate: dict[str, dict[str, Any]]


# At most this many repeated ids are named in an error; the rest are counted.
SHOWN_DUPLICATES = 10
SHOWN_IDS = 5  # ids of each run named when two runs share none


def _by_id(examples: Sequence[dict[str, Any]], side: str, location: str | None = None) -> dict[str, dict[str, Any]]:
    report = f"the {side} report {location}" if location else f"the {side} report"
    by_id: dict[str, dict[str, Any]] = {}
    duplicates: dict[str, int] = {}
    for position, example in enumerate(examples):
        example_id = example.get("id")
        if not isinstance(example_id, str):
            raise ComparisonError(f"{report}: its example {position} has no string id: {example_id!r}")
        if example_id in by_id:
            duplicates[example_id] = duplicates.get(example_id, 1) + 1
        by_id[example_id] = example
    if duplicates:
        listed = ", ".join(f"{i} ({count} times)" for i, count in list(duplicates.items())[:SHOWN_DUPLICATES])
        more = len(duplicates) - SHOWN_DUPLICATES
        listed += f" and {more} more" if more > 0 else ""
        raise ComparisonError(f"{report} holds duplicate example ids, so examples cannot "
                              f"be paired by id: {listed}")
    return by_id


def check_pairable(baseline: RunReport, candidate: RunReport) -> None:
    """Raise ComparisonError, naming the report, the ids and the option that picks another run,
    when either report's examples cannot be paired by id (an id missing or repeated). The
    command line calls it before a comparison writes anything."""
    ids = {}
    for side, report in (("baseline", baseline), ("candidate", candidate)):
        try:
            ids[side] = list(_by_id(report.examples, side, report.location))
        except ComparisonError as error:
            raise ComparisonError(f"{error}; correct the report, or compare another run (--{side})") from None
    if ids["baseline"] and ids["candidate"] and not set(ids["baseline"]) & set(ids["candidate"]):
        shown = "; ".join(f"{side}: {', '.join(repr(i) for i in found[:SHOWN_IDS])}"
                          + (f" and {len(found) - SHOWN_IDS} more" if len(found) > SHOWN_IDS else "")
                          for side, found in ids.items())
        raise ComparisonError(f"{baseline.location} and {candidate.location} share no example id, so there is "
                              f"nothing to compare ({shown}); compare two runs of the same evaluation set "
                              "(--baseline, --candidate)")


def pair_examples(baseline_examples: Sequence[dict[str, Any]],
                  candidate_examples: Sequence[dict[str, Any]]) -> Pairing:
    """Pair examples by `id`; raises ComparisonError naming any id repeated within one report."""
    baseline = _by_id(baseline_examples, "baseline")
    candidate = _by_id(candidate_examples, "candidate")
    return Pairing(paired_ids=[i for i in baseline if i in candidate],
                   only_baseline=[i for i in baseline if i not in candidate],
                   only_candidate=[i for i in candidate if i not in baseline],
                   baseline=baseline, candidate=candidate)


def judge_verdicts(example: dict[str, Any], metric: str) -> dict[str, Any] | None:
    """What the judge said on `metric` (statements, questions or criteria, pass, unscored reason)."""
    entry = judge_entry(example, metric)
    if entry is None:
        return None
    return {key: value for key, value in entry.items() if key not in JUDGE_RECORD_BOOKKEEPING}


# ---------------------------------------------------------------- rows, regressions, document

def metric_row(metric: Metric, paired: PairedValues, n_pairs: int, *,
               with_deltas: bool, gate_reason: str | None, settings: Settings) -> dict[str, Any]:
    """One row of the metric table; deltas, CI and fractions stay null without `with_deltas`."""
    row: dict[str, Any] = {
        "metric": metric.name, "family": FAMILIES[metric.kind], "compared": False, "reason": gate_reason, "note": None,
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
    low, high = bootstrap_mean_ci(paired.deltas, resamples=settings.resamples, seed=settings.seed,
                                  confidence=settings.confidence)
    row.update(compared=True, mean_delta=float(paired.deltas.mean()), ci_low=low, ci_high=high,
               **direction_fractions(paired.deltas, settings.tolerance))
    if paired.n == 1:
        row["note"] = "n=1: the confidence interval is degenerate, equal to the single delta"
    elif np.all(paired.deltas == paired.deltas[0]):
        row["note"] = "every delta is equal: the confidence interval is degenerate, equal to the delta"
    return row


def regressions(metric: Metric, paired: PairedValues, pairing: Pairing, settings: Settings) -> list[dict[str, Any]]:
    """The most negative deltas below -tolerance, worst first (ties in pairing order)."""
    order = np.argsort(paired.deltas, kind="stable")
    worst = [i for i in order if paired.deltas[i] < -settings.tolerance][:settings.n_regressions]
    rows = []
    for index in worst:
        example_id = paired.ids[index]
        base, cand = pairing.baseline[example_id], pairing.candidate[example_id]
        is_judge = metric.kind == "judge"
        rows.append({
            "id": example_id, "question": base["question"], "reference_answer": base["reference_answer"],
            "baseline_answer": base["generated_answer"], "candidate_answer": cand["generated_answer"],
            "baseline_score": float(paired.baseline[index]),
            "candidate_score": float(paired.candidate[index]),
            "delta": float(paired.deltas[index]),
            "baseline_judge": judge_verdicts(base, metric.name) if is_judge else None,
            "candidate_judge": judge_verdicts(cand, metric.name) if is_judge else None,
        })
    return rows


def run_summary(report: dict[str, Any], location: str) -> dict[str, Any]:
    """What a comparison records of each run, and what "what changed" reads (tables.changes).
    A field an old or partial report lacks is None (the trend reads such reports too)."""
    provenance = report.get("provenance") or {}
    profile = provenance.get("params_profile") or {}
    models = report.get("models") or {}
    label, status, _ = judge_side(report)
    return {
        "run_id": report.get("run_id"), "location": location, "schema_version": report.get("schema_version"),
        "timestamp": report.get("timestamp"), "dataset": report.get("dataset"),
        "models": {key: models.get(key) for key in ("generator", *EMBEDDING_ROLES)},
        "judge_label": label, "judge_status": status, "k": (report.get("retrieval_summary") or {}).get("k"),
        "git_commit": provenance.get("git_commit"), "params_hash": provenance.get("params_hash"),
        "params_profile": {"name": profile.get("name"), "version": profile.get("version"),
                           "overrides": profile.get("overrides")},
        "scoring_device": scoring_device(report),
        "inputs_sha256": provenance.get("inputs_sha256"),
    }


def scoring_device(report: dict[str, Any]) -> str:
    """Where a report's embedding models ran; reports made before the device option: the CPU."""
    return (report.get("provenance") or {}).get("scoring_device", "cpu")


def scoring_backend(report: dict[str, Any]) -> str:
    """What ran a report's embedding models; reports made before the backend option: torch."""
    return (report.get("provenance") or {}).get("scoring_backend", "torch")


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
    backends = [scoring_backend(baseline), scoring_backend(candidate)]
    if backends[0] != backends[1]:
        notes.append(f"the embedding models ran through different backends (baseline {backends[0]}, "
                     f"candidate {backends[1]}); their rounding differs, so deltas of about 1e-6 are noise")
    if questions_differ:
        notes.append(f"{len(questions_differ)} paired id(s) carry a different question in the two runs: "
                     + ", ".join(questions_differ))
    if judge["compared"]:
        notes.append("judge scores exist only for the examples each judge sampled and scored; "
                     "pairs without a score in both runs are counted in n_skipped")
    return notes


def _compared_metrics(gates: dict[str, Any]) -> list[tuple[Metric, bool, str | None]]:
    """Each metric the comparison shows, whether it gets deltas, and why not."""
    similarity, retrieval = gates["embedding"], gates["retrieval"]
    chosen = [(m, similarity["compared"], similarity["reason"]) for m in of_kind("similarity")]
    if retrieval["shown"]:
        chosen += [(m, retrieval["compared"], retrieval["reason"])
                   for m in of_kind("retrieval") if m.in_comparison]
    return chosen + [(registered(name), True, None) for name in gates["judge"]["metrics"]]


def build_comparison(baseline: RunReport | dict[str, Any], candidate: RunReport | dict[str, Any], *,
                     baseline_location: str, candidate_location: str, created_at: datetime,
                     settings: Settings = DEFAULTS, slices: bool = True) -> dict[str, Any]:
    """The compare-v1 document for two loaded reports; `created_at` must be timezone-aware UTC.
    Without `slices`, its `slices` section says they were not computed (a report's headline,
    which shows only the overall deltas, need not pay for them)."""
    if created_at.utcoffset() is None or created_at.utcoffset().total_seconds() != 0:
        raise ComparisonError("created_at must be timezone-aware UTC")
    baseline, candidate = RunReport.of(baseline).data, RunReport.of(candidate).data
    for report, location in ((baseline, baseline_location), (candidate, candidate_location)):
        try:
            check_report(report, location)
        except ReportUnreadable as error:
            raise ComparisonError(str(error)) from None
    pairing = pair_examples(baseline["examples"], candidate["examples"])
    ids = pairing.paired_ids
    gates = {"judge": judge_gate(baseline, candidate), "embedding": embedding_gate(baseline, candidate),
             "retrieval": retrieval_gate(baseline, candidate)}

    rows, regressed, long_deltas, deltas_by_id = [], {}, [], {}
    for metric, with_deltas, gate_reason in _compared_metrics(gates):
        paired = paired_deltas(ids, [metric.value(pairing.baseline[i]) for i in ids],
                               [metric.value(pairing.candidate[i]) for i in ids])
        row = metric_row(metric, paired, len(ids), with_deltas=with_deltas,
                         gate_reason=gate_reason, settings=settings)
        rows.append(row)
        if not row["compared"]:
            continue
        regressed[metric.name] = regressions(metric, paired, pairing, settings)
        deltas_by_id[metric.name] = dict(zip(paired.ids, paired.deltas.tolist()))
        long_deltas.extend(
            {"id": i, "metric": metric.name, "baseline": float(b), "candidate": float(c), "delta": float(d)}
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
        "gate": None,
        "pairwise": None,  # filled only by compare --pairwise (evalbook.compare.pairwise)
        "checks": check_changes(baseline, candidate, ids),
        "slices": (slice_deltas(candidate, deltas_by_id, ids,
                                Bootstrap(settings.resamples, settings.seed, settings.confidence), settings.tolerance)
                   if slices else unavailable("slices are not computed for a report's headline comparison")),
        "notes": _notes(baseline, candidate, pairing, questions_differ, gates["judge"]),
        "parameters": {"resamples": settings.resamples, "seed": settings.seed,
                       "confidence": settings.confidence, "tolerance": settings.tolerance,
                       "n_regressions": settings.n_regressions, "ci_method": CI_METHOD,
                       "quantile_method": PERCENTILE_METHOD},
    }


def compared_k(doc: dict[str, Any]) -> int | None:
    """The k both runs measured retrieval at, which names their retrieval metrics (MRR@5); None
    when either has none or they differ (the names then keep @k, and the gate says why)."""
    k = doc["baseline"].get("k")
    return k if k is not None and k == doc["candidate"].get("k") else None


def metric_label(doc: dict[str, Any], name: str) -> str:
    """How a comparison names a metric: its label, a retrieval metric's with the runs' k."""
    return registered(name).label_at(compared_k(doc))


# ---------------------------------------------------------------- schema and storage

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


def earlier_comparison(report: dict[str, Any], outputs_root: Path, env: str,
                       look_back: int = LOOK_BACK) -> dict[str, Any] | None:
    """The comparison of `report` with the latest earlier successful run of `env` on the same
    data (name and split) with the same model pins, or None when there is none among the last
    `look_back` runs. Its deltas are what the headline shows against that run."""
    data = (report["dataset"]["name"], report["dataset"]["split"])
    for path in reversed(latest_reports(outputs_root, env, look_back)):
        try:
            earlier = read_report(str(path))
        except ReportUnreadable:
            continue
        same_data = (earlier.data["dataset"].get("name"), earlier.data["dataset"].get("split")) == data
        if earlier.run_id == report["run_id"] or not same_data:
            continue
        if embedding_gate(earlier.data, report)["compared"]:
            return build_comparison(earlier, report, baseline_location=str(path), candidate_location="this run",
                                    created_at=datetime.now(timezone.utc), slices=False)
    return None

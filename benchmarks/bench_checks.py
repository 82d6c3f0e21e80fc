"""Benchmark: what the checks add to a warm 02_score and 04_report on a 12,000-row run (issue 48, Speed).

Target: the fact check (the default profile's checks) adds at most 10% to the time of a warm 02
and 04 together, its outcomes read from the results store (evalbook.checks.cache).

The rows are built here from the bundled sample (data/sample/, the project's own invented
texts), read at run time: each of its 32 examples, 375 times over, with one seeded fact sentence
added to its reference and its answer, so that every row's texts differ as a real set's do. The
sentence holds a number, an amount, a percentage, a weight, a time, a weekday, a date or a person's
name (invented from lists below), said one way in the reference and another in the answer
("£14" and "14 pounds", "9 a.m." and "09:00", "3 March 2021" and "March 3, 2021"). One answer in
eight changes one of its facts, so that some fail. The context is the example's own passage, the
reference's sentence, the same sentence with other values (what a retriever also brings back),
and the passages of three other examples: about 3.5 KB, as rag-dataset-12000's are. Answers are
about 250 characters. They are written as JSONL and read back with `load_evaluation_set`, as
01_load reads them (not timed).

In one process, with the models loaded once (timed apart) and the embedding cache (its cap
raised to 4 GiB, CACHE_MAX_BYTES) filled by a first scoring of every row (timed apart), each of
these runs against that warm cache, and a warm round that encodes a text fails the benchmark:

- plain: 02's work, `score_answers`, and 04's report without checks, `build_report(checks=None)`
  then `write_report` (the schema check and the JSON);
- checks: the same, with 04's checks: `pipeline.answer_checks` (the fact check on every row and
  the summary, through the results store), `build_report(checks=...)`, `write_report`, and what
  04 shows only for checks (the pass-rate table and the failing answers, rendered);

first the checks with no outcome kept (cold: every fact check computed, then kept), then plain,
checks, checks, plain (warm: the outcomes read back; ABBA cancels a steady drift), each variant's
fastest warm round kept. Library calls, not papermill runs, for the reason bench_slices gives:
a real stage adds the same fixed costs to both sides, so the share here is the upper bound.

    make bench-checks                         # 12,000 rows -> outputs/bench/checks.json
    .venv/bin/python benchmarks/bench_checks.py --rows 2000 --output /tmp/checks.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import types
from contextlib import closing
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_slices import Inputs as SliceInputs, fastest_rounds, timed, use_cache, write_jsonl  # noqa: E402
from benchlib import BENCH_OUTPUTS, DEFAULT_PROFILE, ROOT, provenance, write_json  # noqa: E402

TARGET_SHARE = 0.10
WARM_ORDER = ("plain", "checks", "checks", "plain")
SEED = 48
K = 5
SAMPLE = ROOT / "data" / "sample"
PLANTED_SHARE = 1 / 8  # answers with one fact changed
# 12,000 rows hold about 23,800 distinct answers and references: over the default 2 GiB cap at
# about 90 KB a text, so a warm round would encode again what the fill evicted (5,500 texts a
# round, when first measured) and time that, not the checks (docs/performance.md: raise the cap)
CACHE_MAX_BYTES = 4 * 2**30
FIRST_NAMES = ("Maren", "Tobias", "Ilse", "Corin", "Agnes", "Rafe", "Oona", "Lucan", "Petra", "Emrys",
               "Sabine", "Hollis", "Verity", "Anselm", "Delphine", "Caspian")
SURNAMES = ("Quillfeather", "Ashdown", "Marlowe", "Penhallow", "Thistlewood", "Okonkwo", "Varga",
            "Lindqvist", "Carrow", "Fenwick", "Holloway", "Strand", "Achterberg", "Moreau", "Tanaka")
PLACES = ("Brindlemoor", "Cassock Hill", "Dunmere", "Eddleston", "Farrowgate", "Gullhaven", "Hartsmere",
          "Ivybridge Row", "Kestlewick", "Larkspur Quay", "Millbeck", "Northwold", "Otterburn Cross")
THINGS = ("library card", "parking permit", "plot key", "replacement badge", "guest pass",
          "locker", "bike tag", "season ticket")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                "eleven", "twelve")


# ---------------------------------------------------------------- the rows

def _values(rng: np.random.Generator) -> dict[str, Any]:
    pick = lambda options: options[int(rng.integers(len(options)))]  # noqa: E731
    return {"person": f"{pick(FIRST_NAMES)} {pick(SURNAMES)}", "place": pick(PLACES), "thing": pick(THINGS),
            "price": int(rng.integers(3, 95)), "count": int(rng.integers(2, 13)), "percent": int(rng.integers(5, 96)),
            "kilograms": round(float(rng.uniform(1.5, 40)), 1), "hour": int(rng.integers(7, 11)),
            "closing": int(rng.integers(4, 9)), "weekday": int(rng.integers(7)), "day": int(rng.integers(1, 29)),
            "month": int(rng.integers(1, 13)), "year": int(rng.integers(1995, 2025))}


def fact_sentences(kind: int, v: dict[str, Any]) -> tuple[str, str]:
    """(the answer's sentence, the reference's) for one kind of fact: the same facts, said two ways."""
    weekday, month = WEEKDAYS[v["weekday"]], MONTHS[v["month"] - 1]
    return [
        (f"A {v['thing']} at {v['place']} costs £{v['price']}, and you may hold {v['count']} at once.",
         f"{v['place']} charges {v['price']} pounds for a {v['thing']}; {NUMBER_WORDS[v['count']]} can be held at a time."),
        (f"On {weekday}s the {v['place']} office opens at {v['hour']} a.m. and closes at {v['closing']} p.m.",
         f"The {v['place']} office is open {v['hour']:02d}:00-{v['closing'] + 12}:00 every {weekday}."),
        (f"{v['person']} has run the {v['place']} branch since {v['day']} {month} {v['year']}.",
         f"Since {month} {v['day']}, {v['year']}, the {v['place']} branch has been run by {v['person']}."),
        (f"About {v['percent']}% of {v['thing']}s come back within {v['count']} days, and each weighs "
         f"{v['kilograms']} kg.",
         f"{v['percent']} per cent of {v['thing']}s are returned within {NUMBER_WORDS[v['count']]} days; one weighs "
         f"{v['kilograms']} kilograms."),
    ][kind]


PLANTED_KEYS = (("price", "count"), ("weekday", "hour", "closing"), ("person", "day", "year"),
                ("percent", "count", "kilograms"))  # the values each kind of fact sentence says


def _planted(kind: int, v: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """`v` with one fact of a `kind` sentence changed, as a wrong answer changes it."""
    changed = dict(v)
    key = PLANTED_KEYS[kind][int(rng.integers(len(PLANTED_KEYS[kind])))]
    if key == "person":
        changed[key] = f"{FIRST_NAMES[(FIRST_NAMES.index(v['person'].split()[0]) + 1) % len(FIRST_NAMES)]} " \
                       f"{v['person'].split()[1]}"
    elif key == "weekday":
        changed[key] = (v[key] + 1) % 7
    else:
        changed[key] = v[key] + (1 if key != "count" or v[key] < 12 else -1)
    return changed


def synthetic_rows(n: int, seed: int = SEED) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(examples, predictions): `n` seeded rows in evalbook's input shape, from the bundled sample
    (module docstring)."""
    rng = np.random.default_rng(seed)
    sample = [json.loads(line) for line in (SAMPLE / "examples.jsonl").read_text("utf-8").splitlines()]
    answers = {row["id"]: row["generated_answer"] for row in
               map(json.loads, (SAMPLE / "predictions.jsonl").read_text("utf-8").splitlines())}
    examples, predictions = [], []
    for i in range(n):
        base = sample[i % len(sample)]
        kind = int(rng.integers(4))
        values = _values(rng)
        answer_sentence, reference_sentence = fact_sentences(kind, values)
        if rng.random() < PLANTED_SHARE:
            answer_sentence = fact_sentences(kind, _planted(kind, values, rng))[0]
        distractor = fact_sentences(kind, _values(rng))[1]
        others = [sample[int(j)]["context"] for j in rng.choice(len(sample), 3, replace=False)]
        passages = [f"{base['context']} {reference_sentence}", distractor, *others]
        examples.append({"id": f"c{i:05d}", "question": base["question"],
                         "answer": f"{base['answer']} {reference_sentence}",
                         "context": "\n\n".join(passages[j] for j in rng.permutation(len(passages))),
                         "gold_id": f"{base['gold_id']}-{i}"})
        retrieved = [f"{base['gold_id']}-{i}", *(f"doc-x{int(j)}" for j in rng.integers(100, 200, K - 1))]
        predictions.append({"id": f"c{i:05d}", "generated_answer": f"{answers[base['id']]} {answer_sentence}".strip(),
                            "retrieved_ids": [retrieved[j] for j in rng.permutation(K)]})
    return examples, predictions


class Inputs(SliceInputs):
    """bench_slices' shared, untimed inputs (profile, canonical table, the report's fixed
    arguments) over this benchmark's rows, with the default profile's checks."""

    def __init__(self, folder: Path, rows: int):
        from evalbook.load import load_evaluation_set
        from evalbook.params import load_profile
        from evalbook.provenance import run_provenance
        from evalbook.score.models import resolve_profile_models

        examples, predictions = synthetic_rows(rows)
        paths = {"input_path": str(write_jsonl(folder / "examples.jsonl", examples)),
                 "predictions_path": str(write_jsonl(folder / "predictions.jsonl", predictions))}
        self.overrides = {**paths, "dataset.name": "bench-checks", "generator": "synthetic",
                          "scoring.embedding_cache.max_bytes": CACHE_MAX_BYTES}
        self.profile = load_profile(DEFAULT_PROFILE, self.overrides)
        self.models = resolve_profile_models(self.profile)
        loaded = load_evaluation_set(paths["input_path"], paths["predictions_path"])
        self.canonical = loaded.table
        self.metadata_types = {}
        self.counts = {**loaded.counts, "unmatched_prediction_ids": loaded.unmatched_prediction_ids,
                       "examples_without_prediction": loaded.examples_without_prediction,
                       "skipped_incomplete_rows": loaded.skipped_incomplete_rows, "warnings": loaded.warnings}
        self.provenance_base = {**run_provenance(self.profile, self.models), "inputs_sha256": loaded.inputs_sha256}
        self.folder = folder


# ---------------------------------------------------------------- the measured work

def checks_section(report: dict[str, Any]) -> None:
    """What 04 shows only for checks: the pass rates and the failing answers with their records,
    rendered as the page renders them."""
    from evalbook.escaping import escaped_table
    from evalbook.report.checks import checks_table, failing_answers_html

    escaped_table(checks_table(report).set_index("check")).to_html()
    failing_answers_html(report)


def run_variant(scorer, inputs: Inputs, checked: bool, report_path: Path) -> dict[str, Any]:
    """One variant's 02 and 04 work, each part timed; the scorer's cache is set by the caller."""
    from evalbook.pipeline import answer_checks, results_cache
    from evalbook.report.document import build_report, write_report
    from evalbook.score.scoring import score_answers

    encoded_before = scorer.sequences_encoded
    seconds: dict[str, float] = {}
    scored, seconds["score_answers"] = timed(partial(score_answers, inputs.canonical, scorer, K, show_progress=False))
    checks, counts = None, None
    with closing(results_cache(inputs.profile)) as cache:
        if checked:
            # answer_checks reads the profile and, for latency checks, a run folder's file: none here
            stage = types.SimpleNamespace(profile=inputs.profile, artifact=lambda name: inputs.folder / "no-run" / name)
            checks, seconds["answer_checks"] = timed(partial(answer_checks, stage, inputs.canonical, cache))
            counts = {"hits": cache.hits, "misses": cache.misses}
        report, seconds["build_report"] = timed(partial(
            build_report, timestamp=datetime.now(timezone.utc), scored=scored, checks=checks,
            results_cache=cache, **inputs.report_arguments(scorer)))
    _, seconds["write_report"] = timed(partial(write_report, report, report_path, overwrite=True))
    if checked:
        _, seconds["checks_section"] = timed(partial(checks_section, report))
    result: dict[str, Any] = {"seconds": {key: round(value, 2) for key, value in seconds.items()},
                              "total_seconds": round(sum(seconds.values()), 2),
                              "new_encodings": scorer.sequences_encoded - encoded_before}
    if checked:
        summary = report["checks_summary"]
        result.update(outcome_entries=counts, n_failing=summary["n_examples_failing"],
                      pass_rate=round(summary["checks"]["facts"]["pass_rate"], 4),
                      report_bytes=report_path.stat().st_size)
    else:
        result["report_bytes"] = report_path.stat().st_size
    return result


def share(plain: dict[str, Any], checked: dict[str, Any]) -> dict[str, Any]:
    """What the checks add: in all, and without scoring (which the checks do not change: the
    difference there is the machine's noise between two rounds of the same cached reads)."""
    added = checked["total_seconds"] - plain["total_seconds"]
    outside_scoring = added - (checked["seconds"]["score_answers"] - plain["seconds"]["score_answers"])
    return {"added_seconds": round(added, 2), "added_share": round(added / plain["total_seconds"], 3),
            "added_seconds_outside_scoring": round(outside_scoring, 2),
            "added_share_outside_scoring": round(outside_scoring / plain["total_seconds"], 3),
            "target_share": TARGET_SHARE,
            "meets_target": max(added, outside_scoring) / plain["total_seconds"] <= TARGET_SHARE}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=12_000)
    parser.add_argument("--output", type=Path, default=BENCH_OUTPUTS / "checks.json")
    args = parser.parse_args()
    record: dict[str, Any] = provenance()
    from evalbook.score.scoring import AnswerScorer

    with tempfile.TemporaryDirectory(prefix="evalbook-bench-checks-") as work:
        work = Path(work)
        inputs = Inputs(work, args.rows)
        scorer, load_seconds = timed(lambda: AnswerScorer.from_profile(inputs.profile, inputs.models))
        max_bytes = inputs.profile["scoring"]["embedding_cache"]["max_bytes"]
        cache_folder = work / "cache"
        print(f"filling the embedding cache: {args.rows} rows ...", file=sys.stderr, flush=True)
        use_cache(scorer, inputs, cache_folder, max_bytes)
        fill = run_variant(scorer, inputs, False, work / "fill" / "report.json")
        rounds: dict[str, list[dict[str, Any]]] = {"plain": [], "checks": []}
        print("checks, no outcome kept ...", file=sys.stderr, flush=True)
        use_cache(scorer, inputs, cache_folder, max_bytes)
        cold = run_variant(scorer, inputs, True, work / "cold" / "report.json")
        for number, variant in enumerate(WARM_ORDER):
            print(f"warm {variant} ...", file=sys.stderr, flush=True)
            use_cache(scorer, inputs, cache_folder, max_bytes)
            rounds[variant].append(run_variant(scorer, inputs, variant == "checks", work / f"warm-{number}" / "report.json"))
    warm = fastest_rounds(rounds)
    results = {"warm": {**warm, **share(warm["plain"], warm["checks"])},
               "cold_outcomes": {**cold, **share(warm["plain"], cold)}}
    texts = inputs.canonical
    record.update({"rows": args.rows, "distinct_answers": int(texts["generated_answer"].nunique()),
                   "distinct_contexts": int(texts["context"].nunique()),
                   "mean_answer_chars": round(float(texts["generated_answer"].str.len().mean()), 1),
                   "mean_context_chars": round(float(texts["context"].str.len().mean()), 1),
                   "model_load_seconds": round(load_seconds, 2), "cache_fill": fill,
                   "torch_threads": scorer.provenance.torch_threads, "target_share": TARGET_SHARE, **results,
                   "meets_target": results["warm"]["meets_target"], "load_average_at_end": os.getloadavg()})
    write_json(args.output, record)
    for variant in ("plain", "checks"):
        print(f"warm {variant}: {warm[variant]['total_seconds']} s {warm[variant]['seconds']} "
              f"(rounds {warm[variant]['round_totals']})")
    print(f"checks with no outcome kept: {cold['total_seconds']} s {cold['seconds']}")
    for name, result in results.items():
        print(f"{name}: the checks add {result['added_seconds']} s, {result['added_share']:.1%}; outside scoring "
              f"{result['added_seconds_outside_scoring']} s, {result['added_share_outside_scoring']:.1%} "
              f"(target <= {TARGET_SHARE:.0%})")
    print(f"warm outcome entries: {warm['checks']['outcome_entries']}; load average "
          f"{record['machine']['load_average_at_start'][0]:.2f} at start, {record['load_average_at_end'][0]:.2f} at end")
    warm_misses = max(result["outcome_entries"]["misses"] for result in rounds["checks"])
    warm_encodings = max(result["new_encodings"] for variant in rounds.values() for result in variant)
    assert warm_misses == 0, f"a warm round computed {warm_misses} check outcomes; they should all be kept"
    assert warm_encodings == 0, f"a warm round encoded {warm_encodings} texts; the cache should hold them all"
    return 0


if __name__ == "__main__":
    sys.exit(main())

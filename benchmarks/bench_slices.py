"""Benchmark: what slicing adds to 02_score and 04_report on a 12,000-row run (issue 26, item 7).

Targets: slicing a 12,000-row run with 6 metadata columns and topics adds at most 10% to the time
of a cold 02 and 04 together (issue 26; as revised, the question encodings it requires excluded)
and at most 40% to a warm one (issue 40, item 7); a warm run makes 0 new encodings for the topics'
question embeddings; and the sliced run's embedding cache fits well under its cap (its size on
disk is recorded beside the cap).

The rows are synthetic, generated here, with nothing copied from a dataset: questions (6-25
words, about 14), references (3-150 words, median about 30, the lengths of rag-dataset-12000)
and answers drawn from 8 topical vocabularies plus common words, each answer its reference
perturbed (benchlib.perturb) more for hard questions, and cut short for one product, so that
some levels really are worse. Each example has a gold id and 5 retrieved ids, and 6 metadata
columns: `product` (12 values), `difficulty` (3), `language` (5), `escalated` (boolean),
`latency_ms` (float) and `turns` (integer). They are written as JSONL and read back with
`load_evaluation_set`, as 01_load reads them (not timed).

In one process, with the models loaded once (timed apart), each of these runs twice, cold
(an empty embedding cache, in a folder of its own) and warm (the same cache, reopened, with an
empty in-memory cache, as a new stage's kernel has; twice, the fastest round kept, WARM_ORDER):

- plain: 02's work without slicing, `score_answers(question_embeddings=False)`, and 04's report
  without slices, `build_report(slicing=None)` then `write_report` (the schema check and the
  JSON);
- sliced: `score_answers(question_embeddings=True)` and `pipeline.question_topics` (the topics
  as 02_score finds them), then `build_report` with the slicing 04_report passes (`by: auto`,
  min_n 10, the topics record) and `write_report`, then the section 04 draws only for slices:
  `where_it_fails_html`, one forest plot per tested metric saved as PNG, and the table.

Why library calls and not papermill runs: the ratio should measure the computation slicing
adds. A real stage adds the same fixed costs to both sides (a kernel, imports, loading the
models, reading and writing Parquet, 04's other figures and the HTML export), so the share a
real run shows is smaller than the share here: this benchmark is the pessimistic bound.

    make bench-slices                         # 12,000 rows -> outputs/bench/slices.json
    .venv/bin/python benchmarks/bench_slices.py --rows 2000 --output /tmp/slices.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
import uuid
from contextlib import closing
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import BENCH_OUTPUTS, DEFAULT_PROFILE, perturb, provenance, write_json  # noqa: E402

TARGET_SHARE = 0.10  # cold
WARM_TARGET_SHARE = 0.40
# Warm runs take seconds, and the first after the cold runs was 5-7 s slower in its scoring than
# the next for the same cached reads: each variant runs twice, in the order ABBA (which cancels a
# steady drift), and each keeps its fastest round.
WARM_ORDER = ("plain", "sliced", "sliced", "plain")
SEED = 0
K = 5  # retrieval k, the default profile's
TOPICS = {
    "billing": "invoice refund card payment charge fee statement balance subscription discount receipt "
               "overdraft transfer credit debit account",
    "travel": "flight luggage passport visa boarding gate hotel reservation itinerary delay airport "
              "ticket seat baggage connection",
    "health": "appointment prescription doctor clinic symptom vaccine insurance pharmacy referral dosage "
              "allergy therapy nurse diagnosis recovery",
    "software": "install update password login server error crash backup sync plugin browser firewall "
                "database license version",
    "cooking": "recipe oven flour butter simmer roast garlic onion sauce dough bake spice marinade "
               "skillet broth",
    "garden": "soil compost seedling prune mulch fertiliser hedge lawn irrigation pest bloom bulb "
              "greenhouse weed harvest",
    "housing": "tenant landlord lease deposit rent repair heating inspection mortgage contract "
               "neighbour noise eviction utility plumbing",
    "employment": "salary contract overtime holiday pension payroll manager interview promotion "
                  "resignation shift benefits training appraisal notice",
}
COMMON = ("the a of to and in for is on with when how what can my your it this that be do does "
          "should after before about which from if will there need our any during without").split()
QUESTION_STARTS = ("How do I", "What happens if", "Can I", "Why does", "When should I", "Where can I find",
                   "What is the", "Is it possible to", "Who handles", "How long does")
PRODUCTS = ("atlas", "beacon", "cedar", "delta", "ember", "fjord", "granite", "harbor", "iris",
            "juniper", "kestrel", "legacy")
DIFFICULTIES = ("easy", "medium", "hard")
LANGUAGES = ("en", "de", "fr", "es", "nl")
PERTURBATION = {"easy": 0.05, "medium": 0.12, "hard": 0.25}  # share of words dropped and swapped
HIT_RATE = {"easy": 0.9, "medium": 0.75, "hard": 0.5}
TRUNCATED_PRODUCT = "legacy"  # its answers are cut to their first third


# ---------------------------------------------------------------- the rows

def _words(rng: np.random.Generator, topic: str, n: int, topical_share: float) -> list[str]:
    vocabulary = TOPICS[topic].split()
    return [vocabulary[rng.integers(len(vocabulary))] if rng.random() < topical_share
            else COMMON[rng.integers(len(COMMON))] for _ in range(n)]


def _sentences(words: list[str], rng: np.random.Generator) -> str:
    sentences, start = [], 0
    while start < len(words):
        stop = min(len(words), start + int(rng.integers(6, 16)))
        sentence = " ".join(words[start:stop])
        sentences.append(sentence[0].upper() + sentence[1:] + ".")
        start = stop
    return " ".join(sentences)


def synthetic_rows(n: int, seed: int = SEED) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(examples, predictions): `n` seeded rows in evalbook's input shape, with 6 metadata
    columns split between the two files as a user's would be (module docstring)."""
    rng = np.random.default_rng(seed)
    topics = list(TOPICS)
    examples, predictions = [], []
    for i in range(n):
        topic = topics[rng.integers(len(topics))]
        difficulty = DIFFICULTIES[rng.integers(3)]
        product = PRODUCTS[rng.integers(len(PRODUCTS))]
        start = QUESTION_STARTS[rng.integers(len(QUESTION_STARTS))]
        question_words = int(np.clip(rng.normal(14, 4), 6, 25)) - len(start.split())
        question = f"{start} {' '.join(_words(rng, topic, max(question_words, 3), 0.6))}?"
        reference_words = int(np.clip(rng.lognormal(np.log(30), 0.7), 3, 150))
        reference = _sentences(_words(rng, topic, reference_words, 0.6), rng)
        answer = perturb(reference, (seed, i), PERTURBATION[difficulty])
        if product == TRUNCATED_PRODUCT:
            kept = answer.split()
            answer = " ".join(kept[:max(1, len(kept) // 3)])
        gold = f"doc-{topic}-{i}"
        retrieved = [f"doc-{topic}-{i}-{j}" for j in range(K)]
        if rng.random() < HIT_RATE[difficulty]:
            retrieved[int(rng.integers(K))] = gold
        examples.append({"id": f"q{i:05d}", "question": question, "answer": reference,
                         "context": f"{reference} {_sentences(_words(rng, topic, 40, 0.4), rng)}",
                         "gold_id": gold, "product": product, "difficulty": difficulty,
                         "language": LANGUAGES[rng.integers(len(LANGUAGES))]})
        predictions.append({"id": f"q{i:05d}", "generated_answer": answer, "retrieved_ids": retrieved,
                            "escalated": bool(rng.random() < 0.15),
                            "latency_ms": round(float(rng.lognormal(np.log(900), 0.5)), 1),
                            "turns": int(rng.integers(1, 9))})
    return examples, predictions


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")
    return path


# ---------------------------------------------------------------- the measured work

def timed(function: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


def use_cache(scorer, inputs: "Inputs", folder: Path, max_bytes: int) -> None:
    """Point the loaded scorer at the disk cache in `folder` with an empty memory cache, as a
    new 02_score kernel would start: models stay loaded, nothing computed before is kept. The
    topics and the slices' tests use the results store in the same folder, as a run's do
    (evalbook.resultcache)."""
    from evalbook.params import load_profile
    from evalbook.score.embcache import EmbeddingCache, MemoryLRU
    from evalbook.score.scoring import MEMORY_CACHE_BYTES

    scorer.cache = EmbeddingCache(folder, max_bytes)
    scorer.memory = MemoryLRU(MEMORY_CACHE_BYTES)
    inputs.profile = load_profile(DEFAULT_PROFILE, {**inputs.overrides, "scoring.embedding_cache.path": str(folder)})


class Inputs:
    """What both variants share and what is not timed: the profiles, the canonical table, 01's
    metadata types, and the report's fixed arguments."""

    def __init__(self, folder: Path, rows: int):
        from evalbook.load import load_evaluation_set
        from evalbook.params import load_profile
        from evalbook.provenance import run_provenance
        from evalbook.score.models import resolve_profile_models

        examples, predictions = synthetic_rows(rows)
        paths = {"input_path": str(write_jsonl(folder / "examples.jsonl", examples)),
                 "predictions_path": str(write_jsonl(folder / "predictions.jsonl", predictions))}
        overrides = {**paths, "dataset.name": "bench-slices", "generator": "synthetic",
                     "scoring.embedding_cache.path": str(folder / "unused-cache")}
        self.overrides = overrides
        self.profile = load_profile(DEFAULT_PROFILE, overrides)
        self.models = resolve_profile_models(self.profile)
        loaded = load_evaluation_set(paths["input_path"], paths["predictions_path"])
        self.canonical = loaded.table
        self.metadata_types = {column.name: column.type for column in loaded.metadata}
        self.counts = {**loaded.counts, "unmatched_prediction_ids": loaded.unmatched_prediction_ids,
                       "examples_without_prediction": loaded.examples_without_prediction,
                       "skipped_incomplete_rows": loaded.skipped_incomplete_rows, "warnings": loaded.warnings}
        self.provenance_base = {**run_provenance(self.profile, self.models),
                                "inputs_sha256": loaded.inputs_sha256}

    def report_arguments(self, scorer) -> dict[str, Any]:
        """build_report's arguments other than scored and slicing, as assemble_report makes them."""
        scoring = scorer.provenance.as_dict()
        provenance = {**self.provenance_base,
                      **{key: scoring[key] for key in ("bertscore_hash", "bertscore_num_layers", "weights_sha256")},
                      "shared_forward_pass": scoring["shared_forward_pass"], "scoring_device": scoring["device"],
                      "scoring_backend": scoring["backend"], "scoring_backend_versions": scoring["backend_versions"]}
        return {"run_id": str(uuid.uuid4()), "dataset": {"name": "bench-slices", "split": "test"},
                "models": {"generator": "synthetic", "bertscore": scoring["bertscore_model"],
                           "sentence_transformer": scoring["sentence_transformer_model"]},
                "canonical": self.canonical, "load_counts": self.counts, "k": K, "provenance": provenance}


def slice_section(report: dict[str, Any], figures_dir: Path) -> None:
    """What 04_report draws only for slices: the sentences, a forest plot per metric, the table."""
    import matplotlib.pyplot as plt

    from evalbook.report import figures
    from evalbook.report.failures import slices_method_html, slices_table, where_it_fails_html

    where_it_fails_html(report)
    for name in figures.forest_metrics(report):
        figure = figures.slice_forest(report, metric=name)
        figures.save_png(figure, figures_dir, f"slices-{name}", overwrite=True)
        plt.close(figure)
    slices_table(report).to_html()
    slices_method_html(report)


def run_variant(scorer, inputs: Inputs, sliced: bool, report_path: Path) -> dict[str, Any]:
    """One variant's 02 and 04 work, each part timed; the scorer's cache is set by the caller."""
    from evalbook.metrics import QUESTION_EMBEDDING
    from evalbook.pipeline import question_topics, results_cache
    from evalbook.report.document import build_report, write_report
    from evalbook.score.scoring import score_answers

    encoded_before = scorer.sequences_encoded
    seconds: dict[str, float] = {}
    scored, seconds["score_answers"] = timed(partial(
        score_answers, inputs.canonical, scorer, K, show_progress=False, question_embeddings=sliced))
    encoded = scorer.sequences_encoded - encoded_before
    slicing, topics = None, None
    if sliced:
        embeddings = scored.pop(QUESTION_EMBEDDING)
        topics, seconds["question_topics"] = timed(partial(question_topics, inputs.profile, inputs.canonical,
                                                           embeddings))
        settings = inputs.profile["slices"]
        slicing = {"metadata_types": inputs.metadata_types, "by": settings["by"], "min_n": settings["min_n"],
                   "topics": topics}
    with closing(results_cache(inputs.profile)) as cache:
        report, seconds["build_report"] = timed(partial(
            build_report, timestamp=datetime.now(timezone.utc), scored=scored, slicing=slicing,
            results_cache=cache, **inputs.report_arguments(scorer)))
    _, seconds["write_report"] = timed(partial(write_report, report, report_path, overwrite=True))
    if sliced:
        _, seconds["slice_section"] = timed(partial(slice_section, report, report_path.parent / "figures"))
    result: dict[str, Any] = {"seconds": {key: round(value, 2) for key, value in seconds.items()},
                              "total_seconds": round(sum(seconds.values()), 2), "new_encodings": encoded,
                              "cache": scorer.provenance.embedding_cache}
    if sliced:
        section = report["slices"]
        result["topics"] = {"k": topics["k"], "silhouette": topics["silhouette"], "tried": topics["tried"]}
        result["slices"] = {"columns": [column["name"] for column in section["columns"]],
                            "tests": section["n_tests"],
                            "flagged": sum(1 for level in section["levels"] if level["verdict"] in ("worse", "better"))}
    return result


def share(plain: dict[str, Any], sliced: dict[str, Any], target: float) -> dict[str, Any]:
    added = sliced["total_seconds"] - plain["total_seconds"]
    ratio = added / plain["total_seconds"]
    return {"added_seconds": round(added, 2), "added_share": round(ratio, 3), "target_share": target,
            "meets_target": ratio <= target}


def fastest_rounds(rounds: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each variant's fastest round, with every round's total beside it (`round_totals`)."""
    return {variant: {**min(results, key=lambda result: result["total_seconds"]),
                      "round_totals": [result["total_seconds"] for result in results]}
            for variant, results in rounds.items()}


def bytes_on_disk(folder: Path) -> int:
    """The size of the files under `folder` (an embedding cache), as its cap counts them."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def warm_up(scorer, inputs: Inputs, folder: Path) -> None:
    """Score and slice 300 other rows once, so that no measured part pays a first call's costs."""
    from evalbook.load import load_evaluation_set

    examples, predictions = synthetic_rows(300, seed=SEED + 1)
    loaded = load_evaluation_set(str(write_jsonl(folder / "warm-up-examples.jsonl", examples)),
                                 str(write_jsonl(folder / "warm-up-predictions.jsonl", predictions)))
    warm = copy.copy(inputs)
    warm.canonical = loaded.table
    use_cache(scorer, warm, folder / "warm-up-cache", inputs.profile["scoring"]["embedding_cache"]["max_bytes"])
    run_variant(scorer, warm, True, folder / "warm-up" / "report.json")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=12_000)
    parser.add_argument("--output", type=Path, default=BENCH_OUTPUTS / "slices.json")
    args = parser.parse_args()
    record: dict[str, Any] = provenance()
    from evalbook.score.scoring import AnswerScorer

    with tempfile.TemporaryDirectory(prefix="evalbook-bench-slices-") as work:
        work = Path(work)
        inputs = Inputs(work, args.rows)
        scorer, load_seconds = timed(lambda: AnswerScorer.from_profile(inputs.profile, inputs.models))
        max_bytes = inputs.profile["scoring"]["embedding_cache"]["max_bytes"]
        warm_up(scorer, inputs, work)
        results: dict[str, dict[str, Any]] = {}
        warm_rounds: dict[str, list[dict[str, Any]]] = {"plain": [], "sliced": []}
        for run, order in (("cold", ("plain", "sliced")), ("warm", WARM_ORDER)):
            results[run] = {}
            for number, variant in enumerate(order):
                use_cache(scorer, inputs, work / f"cache-{variant}", max_bytes)
                print(f"{run} {variant}: {args.rows} rows ...", file=sys.stderr, flush=True)
                result = run_variant(scorer, inputs, variant == "sliced", work / f"{run}-{number}-{variant}" / "report.json")
                if run == "cold":
                    results[run][variant] = result
                else:
                    warm_rounds[variant].append(result)
            if run == "warm":
                results[run].update(fastest_rounds(warm_rounds))
            results[run].update(share(results[run]["plain"], results[run]["sliced"],
                                      TARGET_SHARE if run == "cold" else WARM_TARGET_SHARE))
        cache_bytes = {variant: bytes_on_disk(work / f"cache-{variant}") for variant in ("plain", "sliced")}
    warm_new = max(result["new_encodings"] for result in warm_rounds["sliced"])
    record.update({"rows": args.rows, "metadata_columns": inputs.metadata_types,
                   "distinct_questions": int(inputs.canonical["question"].nunique()),
                   "model_load_seconds": round(load_seconds, 2), "torch_threads": scorer.provenance.torch_threads,
                   "target_share": TARGET_SHARE, "warm_target_share": WARM_TARGET_SHARE, **results,
                   "warm_new_encodings": warm_new, "cache_bytes": cache_bytes, "cache_max_bytes": max_bytes,
                   "meets_targets": bool(results["cold"]["meets_target"] and results["warm"]["meets_target"]
                                         and warm_new == 0),
                   "load_average_at_end": os.getloadavg()})
    write_json(args.output, record)
    for run in ("cold", "warm"):
        plain, sliced = results[run]["plain"], results[run]["sliced"]
        print(f"{run}: plain {plain['total_seconds']} s {plain['seconds']}")
        print(f"{run}: sliced {sliced['total_seconds']} s {sliced['seconds']}")
        print(f"{run}: slicing adds {results[run]['added_seconds']} s, {results[run]['added_share']:.1%} "
              f"(target <= {results[run]['target_share']:.0%})")
    print(f"embedding cache on disk: {cache_bytes['sliced'] / 1e9:.3f} GB sliced, {cache_bytes['plain'] / 1e9:.3f} GB "
          f"plain, against a cap of {max_bytes / 1e9:.3f} GB")
    print(f"warm sliced run: {warm_new} new encodings (target 0); load average "
          f"{record['machine']['load_average_at_start'][0]:.2f} at start, {record['load_average_at_end'][0]:.2f} at end")
    assert warm_new == 0, f"the warm sliced run encoded {warm_new} sequences; its embeddings should all be cached"
    return 0


if __name__ == "__main__":
    sys.exit(main())

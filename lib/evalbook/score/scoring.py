"""Score generated answers against reference answers: BERTScore P/R/F1 and sentence cosine.

`AnswerScorer` loads each model once and reproduces `bert_score.score(..., idf=False)` and
`SentenceTransformer.encode` + cosine (mean pooling) to float precision, while running each
distinct token sequence through the model only once. When both metrics use the same model and
BERTScore reads its last layer, one forward pass serves both metrics. Truncation is respected
separately: bert-score cuts at the tokenizer's maximum (512 for BERT), SentenceTransformers at
the model's `max_seq_length` (256 for all-MiniLM-L6-v2), so a text longer than the smaller
limit gets a pass of its own for each.

Pairs are scored in chunks of `chunk_size`. For each chunk the distinct texts are tokenized
and their hidden states are fetched, in this order, from a memory LRU, from the disk embedding
cache (`evalbook.score.embcache`) or from the model. Then the pairs are scored and the chunk's states
are dropped, so peak memory depends on the chunk size, not on the number of pairs.

Exactness across runs. The last bits of a forward pass depend on which texts share its batch:
the padding width and the matrix shapes change the order of float32 sums. On the sample this
moves hidden states by up to 6e-6 and scores by up to 1.2e-7. Scores are therefore always
computed from the float32 arrays exactly as they are stored. A text encoded once is reused for
every pair in the run (memory LRU, disk cache) and, with the disk cache, in later runs. So an
example whose texts are unchanged gets identical (==) scores in a warm run. A text encoded
again (cache disabled, or evicted) may differ in those last bits. Either way, the scores stay
within 1e-6 of the separate library calls.

The models run through torch or, with `backend="onnxruntime"` (`scoring.backend`), through
onnxruntime from a graph exported from the same weights (`evalbook.score.onnxgraph`); both
agree with the separate library calls to 1e-6, and each backend has its own cache entries.

`score_answers(frame, scorer, k)` is the batch function: DataFrame in, DataFrame out.
"""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm as text_tqdm
from tqdm.auto import tqdm

from evalbook.errors import EvalbookError
from evalbook.metrics import QUESTION_EMBEDDING, SCORE_FLAGS, names
from evalbook.score.embcache import (CacheStats, EmbeddingCache, MemoryLRU, entry_key, model_identity,
                                     pooled_key)
from evalbook.score.models import ResolvedModel, quiet_weight_loading
from evalbook.score.onnxgraph import BACKENDS, OnnxForward, OnnxGraphCache, backend_versions
from evalbook.params import embedding_cache_path
from evalbook.provenance import bertscore_hash
from evalbook.score.retrieval import retrieval_columns
from evalbook.score.similarity import greedy_match, mean_pool, pairwise_cosine, rescale

DEFAULT_CHUNK_SIZE = 2000
# Hidden states kept in memory across chunks, so that a text repeated in later chunks is not
# encoded again even without the disk cache.
MEMORY_CACHE_BYTES = 256 * 2**20
# The scored table's metric columns, from the registry.
METRIC_COLUMNS = names("similarity")


class ScoringError(EvalbookError, RuntimeError):
    """A scoring configuration that would give wrong or silently altered scores."""


class BackendFallbackWarning(UserWarning):
    """scoring.backend asked for onnxruntime on a device its build cannot use: torch scores instead."""


def cpu_threads() -> int:
    """The number of CPUs this process may use, which AnswerScorer gives torch as its thread count.

    This is the smallest of three counts: the process's CPU affinity (what `taskset` or a
    container's cpuset allows), the cgroup v2 CPU quota (`/sys/fs/cgroup/cpu.max`, which
    `docker --cpus` sets), and OMP_NUM_THREADS when it is set (Ray sets it to an actor's CPUs).
    torch's own default can count CPUs the process may not use. On a 2-CPU container that would
    oversubscribe the cores and slow every forward pass.
    """
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text("ascii").split()
        if quota != "max":
            count = min(count, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    requested = os.environ.get("OMP_NUM_THREADS", "").strip()
    if requested.isdigit() and int(requested) > 0:
        count = min(count, int(requested))
    return count


def resolve_device(name: str) -> torch.device:
    """The torch device that `scoring.device` names: `cpu`, `cuda`, `cuda:<n>`, `mps`, or `auto`.

    `auto` is the first CUDA device when torch sees one, else the CPU. Inside a Ray actor, Ray
    sets CUDA_VISIBLE_DEVICES to the GPUs it reserved for that actor (none when `ray_num_gpus`
    is 0), so `auto` there means the actor's own GPU, or the CPU. A device that torch cannot
    use is an error, never a silent fall back to the CPU.
    """
    if name == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ScoringError(f"scoring.device {name!r} is not a torch device ({exc})") from exc
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            build = ("this torch is a CPU build" if torch.version.cuda is None
                     else f"torch {torch.__version__} (CUDA {torch.version.cuda}) finds no GPU")
            raise ScoringError(f"scoring.device is {name!r} but {build}; set scoring.device to "
                               "cpu or auto, or install a CUDA build of torch")
        index = 0 if device.index is None else device.index
        if index >= torch.cuda.device_count():
            raise ScoringError(f"scoring.device is {name!r} but torch sees "
                               f"{torch.cuda.device_count()} CUDA device(s)")
        return torch.device("cuda", index)
    if device.type == "mps":
        if not torch.backends.mps.is_available():
            raise ScoringError(f"scoring.device is {name!r} but torch finds no MPS device")
        return device
    raise ScoringError(f"scoring.device {name!r}: expected auto, cpu, cuda, cuda:<n> or mps")


def onnx_graph_folder(embedding_cache_folder: Path) -> Path:
    """Where onnxruntime's graphs are cached: `onnx-graphs` beside the embedding cache folder,
    used whether or not the embedding cache is enabled."""
    return embedding_cache_folder.parent / "onnx-graphs"


@dataclass(frozen=True)
class OnnxSettings:
    """How a TokenEncoder runs its model through onnxruntime: where the graphs are cached, with
    how many threads, and on which execution providers (in order of preference)."""

    graphs: OnnxGraphCache
    threads: int
    providers: tuple = ("CPUExecutionProvider",)


def onnx_providers(device: torch.device) -> tuple | None:
    """onnxruntime's execution providers for `device`, or None when this onnxruntime build has
    none for it (then scoring falls back to torch)."""
    import onnxruntime  # here, not at the top: only the onnxruntime backend pays its import

    if device.type == "cpu":
        return ("CPUExecutionProvider",)
    if device.type == "cuda" and "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        return (("CUDAExecutionProvider", {"device_id": device.index or 0}), "CPUExecutionProvider")
    return None


def resolve_backend(name: str, device: torch.device) -> tuple[str, tuple | None, str | None]:
    """(backend, onnxruntime providers, why torch is used instead) for `scoring.backend` `name`.

    onnxruntime runs on the CPU, and on a CUDA device only when its build has the CUDA
    execution provider. For any other device the models run through torch, with a warning
    that says so, and the reason is recorded in scoring.json.
    """
    if name not in BACKENDS:
        raise ScoringError(f"scoring.backend {name!r}: expected one of {', '.join(BACKENDS)}")
    if name == "torch":
        return "torch", None, None
    try:
        providers = onnx_providers(device)
    except ImportError as exc:
        raise ScoringError(f"scoring.backend is onnxruntime but onnxruntime cannot be imported "
                           f"({exc}); install the version pinned in pyproject.toml, or set "
                           "scoring.backend to torch") from exc
    if providers is not None:
        return "onnxruntime", providers, None
    note = (f"scoring.backend onnxruntime: this onnxruntime build has no execution provider for "
            f"{device}, so the models run on {device} through torch")
    warnings.warn(note, BackendFallbackWarning, stacklevel=3)
    return "torch", None, note


def _sentence_transformer_config(folder: Path) -> int:
    """Check the folder is a mean-pooling SentenceTransformer and return its max_seq_length."""
    pooling_file = folder / "1_Pooling" / "config.json"
    config_file = folder / "sentence_bert_config.json"
    if not pooling_file.is_file() or not config_file.is_file():
        raise ScoringError(f"{folder} is not a SentenceTransformers model folder "
                           f"(needs 1_Pooling/config.json and sentence_bert_config.json)")
    pooling = json.loads(pooling_file.read_text("utf-8"))
    active = [key for key, value in pooling.items() if key.startswith("pooling_mode_") and value]
    if active != ["pooling_mode_mean_tokens"]:
        raise ScoringError(f"{pooling_file}: only mean pooling is supported, found {active}")
    config = json.loads(config_file.read_text("utf-8"))
    if config.get("do_lower_case"):
        raise ScoringError(f"{config_file}: do_lower_case is not supported")
    return int(config["max_seq_length"])


def read_baseline(path: str, num_layers: int) -> tuple[float, float, float]:
    """The (P, R, F) rescaling baseline of `num_layers` from a bert-score baseline TSV/CSV file."""
    baseline_file = Path(path)
    if not baseline_file.is_file():
        raise ScoringError(
            f"rescale_with_baseline is set but the baseline file {baseline_file} does not exist; "
            "bert-score would silently return unrescaled scores"
        )
    table = pd.read_csv(baseline_file)
    missing = {"LAYER", "P", "R", "F"} - set(table.columns)
    if missing:
        raise ScoringError(f"{baseline_file}: missing column(s) {sorted(missing)}")
    row = table[table["LAYER"] == num_layers]
    if len(row) != 1:
        raise ScoringError(f"{baseline_file}: no single row for LAYER {num_layers}")
    return tuple(float(row.iloc[0][c]) for c in ("P", "R", "F"))  # type: ignore[return-value]


class TorchForward:
    """A forward pass through torch on `device`: token ids in, float32 hidden states of chosen
    layers out, in main memory."""

    def __init__(self, model: torch.nn.Module, device: torch.device):
        self.model = model.to(device)
        self.device = device

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray,
                 layers: Sequence[int]) -> dict[int, np.ndarray]:
        with torch.inference_mode():
            output = self.model(input_ids=torch.from_numpy(input_ids).to(self.device),
                                attention_mask=torch.from_numpy(attention_mask).to(self.device),
                                output_hidden_states=True)
            # One transfer per layer and batch (none on the CPU).
            return {layer: output.hidden_states[layer].float().cpu().numpy() for layer in layers}


class TokenEncoder:
    """One transformer, loaded once, returning per-token hidden states of chosen layers.

    `model_id` names the model in embedding cache keys (see `embcache.model_identity`); with
    the onnxruntime backend it gains `:onnxruntime`, so that each backend's cache entries are
    its own. `sequences_encoded` counts the token sequences run through the model. The model
    runs on `device`, through torch or through `onnx` (the backend's execution providers and
    its graph cache); hidden states always come back as float32 arrays in main memory.
    """

    def __init__(self, folder: Path, keep_layers: int | None = None, *, model_id: str,
                 device: torch.device = torch.device("cpu"), onnx: OnnxSettings | None = None):
        from transformers import AutoConfig, AutoModel, AutoTokenizer  # slow to import: only when encoding

        self.folder = folder
        self.sequences_encoded = 0
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.config = AutoConfig.from_pretrained(str(folder))
        total = self.config.num_hidden_layers
        keep_layers = total if keep_layers is None else keep_layers
        if not 1 <= keep_layers <= total:
            raise ScoringError(f"{folder}: num_layers must be between 1 and {total}, got {keep_layers}")
        self.device = device
        self.n_layers_total = total
        self.special_ids = {self.tokenizer.cls_token_id, self.tokenizer.sep_token_id}
        if onnx is None:
            self.model_id = model_id
            with quiet_weight_loading():
                model = AutoModel.from_pretrained(str(folder))
            model.eval()
            # Layers above the deepest one read are never computed.
            model.encoder.layer = torch.nn.ModuleList(model.encoder.layer[:keep_layers])
            self.forward = TorchForward(model, device)
        else:
            self.model_id = f"{model_id}:onnxruntime"
            graph = onnx.graphs.graph(folder, model_id, keep_layers)
            self.forward = OnnxForward(graph, onnx.threads, onnx.providers)

    def token_ids(self, texts: Sequence[str], max_length: int) -> list[list[int]]:
        encoded = self.tokenizer(list(texts), add_special_tokens=True, truncation=True,
                                 max_length=max_length, verbose=False)
        return encoded["input_ids"]

    def full_lengths(self, texts: Sequence[str]) -> list[int]:
        encoded = self.tokenizer(list(texts), add_special_tokens=True, truncation=False, verbose=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def hidden_states(self, sequences: Sequence[tuple[int, ...]], layers: Sequence[int],
                      batch_size: int, progress=None) -> dict[tuple[int, ...], dict[int, np.ndarray]]:
        """Run each distinct sequence once, in batches of similar length.

        Returns {sequence: {layer: (n_tokens, dim) float32 array}}; `progress.update(n)` is
        called after each batch of n sequences.
        """
        ordered = sorted(set(sequences), key=len)
        pad_id = self.tokenizer.pad_token_id
        states: dict[tuple[int, ...], dict[int, np.ndarray]] = {}
        for start in range(0, len(ordered), batch_size):
            batch = ordered[start:start + batch_size]
            width = max(len(seq) for seq in batch)
            input_ids = np.full((len(batch), width), pad_id, dtype=np.int64)
            attention = np.zeros((len(batch), width), dtype=np.int64)
            for row, seq in enumerate(batch):
                input_ids[row, :len(seq)] = seq
                attention[row, :len(seq)] = 1
            arrays = self.forward(input_ids, attention, layers)
            # Copies, so that no row keeps its whole padded batch alive.
            for row, seq in enumerate(batch):
                states[seq] = {layer: arrays[layer][row, :len(seq)].copy() for layer in layers}
            self.sequences_encoded += len(batch)
            if progress is not None:
                progress.update(len(batch))
        return states


@dataclass
class ScoreProvenance:
    bertscore_hash: str
    bertscore_model: str
    bertscore_num_layers: int
    sentence_transformer_model: str
    bertscore_max_tokens: int
    sentence_max_tokens: int
    shared_forward_pass: bool
    weights_sha256: dict[str, str] = field(default_factory=dict)
    rescale_baseline: tuple[float, float, float] | None = None
    chunk_size: int = DEFAULT_CHUNK_SIZE
    torch_threads: int | None = None
    device: str = "cpu"
    # torch or onnxruntime, the versions the backend's results depend on, and why torch ran
    # when onnxruntime was asked for (None: it was not).
    backend: str = "torch"
    backend_versions: dict = field(default_factory=dict)
    backend_fallback: str | None = None
    # What the scorer has done so far: sequences run through a model, and the caches' counts.
    sequences_encoded: int = 0
    embedding_cache: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


class _PairProgress:
    """Moves a bar counted in pairs while a chunk's missing sequences are encoded."""

    def __init__(self, bar, n_pairs: int):
        self.bar, self.n_pairs = bar, n_pairs
        self.to_encode = self.encoded = self.shown = 0

    def update(self, n_sequences: int) -> None:
        self.encoded += n_sequences
        self._show(self.n_pairs * self.encoded // max(self.to_encode, 1))

    def finish(self) -> None:
        self._show(self.n_pairs)

    def _show(self, position: int) -> None:
        position = min(position, self.n_pairs)
        self.bar.update(position - self.shown)
        self.shown = position


class AnswerScorer:
    """BERTScore and sentence cosine with models loaded once; see the module docstring.

    `cache` is the disk embedding cache (None: none). `threads` is torch's thread count, set
    process-wide, and onnxruntime's (None: `cpu_threads()`). `device` is where the models run
    (`resolve_device`); the matching and pooling always run on the CPU, on the float32 states
    as stored. `backend` runs the models through torch or onnxruntime (`resolve_backend`);
    onnxruntime's graphs are cached in `graph_folder` (`onnxgraph.OnnxGraphCache`).
    """

    def __init__(self, bertscore: ResolvedModel, sentence_transformer: ResolvedModel,
                 num_layers: int, batch_size: int = 64, baseline_path: str | None = None,
                 rescale_with_baseline: bool = False, cache: EmbeddingCache | None = None,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, threads: int | None = None,
                 memory_cache_bytes: int = MEMORY_CACHE_BYTES, device: str = "cpu",
                 backend: str = "torch", graph_folder: Path | None = None):
        if batch_size < 1 or chunk_size < 1:
            raise ScoringError(f"batch_size and chunk_size must be at least 1, got {batch_size} and {chunk_size}")
        torch.set_num_threads(threads or cpu_threads())
        self.device = resolve_device(device)
        self.backend, providers, fallback = resolve_backend(backend, self.device)
        onnx = None
        if self.backend == "onnxruntime":
            if graph_folder is None:
                raise ScoringError("scoring.backend onnxruntime needs a graph_folder to cache its graphs in")
            onnx = OnnxSettings(OnnxGraphCache(graph_folder), torch.get_num_threads(), providers)
        self.batch_size = batch_size
        self.chunk_size = chunk_size
        self.cache = cache
        self.memory = MemoryLRU(memory_cache_bytes)
        self.num_layers = num_layers
        self.sentence_max = _sentence_transformer_config(sentence_transformer.folder)
        self.shared = bertscore.folder.resolve() == sentence_transformer.folder.resolve()
        bert_id = model_identity(bertscore.weights_sha256, bertscore.folder)
        if self.shared:
            encoder = TokenEncoder(bertscore.folder, model_id=bert_id, device=self.device, onnx=onnx)
            if num_layers > encoder.n_layers_total:
                raise ScoringError(f"{bertscore.folder}: num_layers must be at most "
                                   f"{encoder.n_layers_total}, got {num_layers}")
            self.bert_encoder = self.sentence_encoder = encoder
        else:
            self.bert_encoder = TokenEncoder(bertscore.folder, num_layers, model_id=bert_id,
                                             device=self.device, onnx=onnx)
            self.sentence_encoder = TokenEncoder(
                sentence_transformer.folder,
                model_id=model_identity(sentence_transformer.weights_sha256, sentence_transformer.folder),
                device=self.device, onnx=onnx)
        self.sentence_layer = self.sentence_encoder.n_layers_total
        tokenizer = self.bert_encoder.tokenizer
        # bert-score truncates at the tokenizer's model_max_length; cap it at the position table.
        self.bert_max = min(int(tokenizer.model_max_length),
                            int(self.bert_encoder.config.max_position_embeddings))
        self.baseline = None
        if rescale_with_baseline:
            if baseline_path is None:
                raise ScoringError("rescale_with_baseline needs a baseline_path that exists")
            self.baseline = read_baseline(baseline_path, num_layers)
        self.provenance = ScoreProvenance(
            bertscore_hash=bertscore_hash(bertscore.name, num_layers, rescale_with_baseline,
                                          baseline_path),
            bertscore_model=bertscore.name,
            bertscore_num_layers=num_layers,
            sentence_transformer_model=sentence_transformer.name,
            bertscore_max_tokens=self.bert_max,
            sentence_max_tokens=self.sentence_max,
            shared_forward_pass=self.shared,
            weights_sha256={"sentence_transformer": sentence_transformer.weights_sha256,
                            "bertscore": bertscore.weights_sha256},
            rescale_baseline=self.baseline,
            chunk_size=chunk_size,
            torch_threads=torch.get_num_threads(),
            device=str(self.device),
            backend=self.backend,
            backend_versions=(backend_versions() if self.backend == "onnxruntime"
                              else {"torch": torch.__version__}),
            backend_fallback=fallback,
        )
        self._record_counts()

    @classmethod
    def from_profile(cls, profile, resolved: dict[str, ResolvedModel]) -> "AnswerScorer":
        """The scorer a profile describes, with its embedding cache when that is enabled."""
        spec = profile["models"]["bertscore"]
        scoring = profile["scoring"]
        baseline = spec.get("baseline_path")
        if baseline is not None:
            baseline = str(Path(baseline) if Path(baseline).is_absolute() else profile.root / baseline)
        cache_settings = scoring["embedding_cache"]
        cache_folder = Path(embedding_cache_path(profile))
        cache = EmbeddingCache(cache_folder, cache_settings["max_bytes"]) if cache_settings["enabled"] else None
        return cls(resolved["bertscore"], resolved["sentence_transformer"],
                   num_layers=spec["num_layers"], batch_size=scoring["batch_size"],
                   baseline_path=baseline, rescale_with_baseline=spec["rescale_with_baseline"],
                   cache=cache, chunk_size=scoring["chunk_size"], threads=scoring["threads"],
                   device=scoring["device"], backend=scoring["backend"],
                   graph_folder=onnx_graph_folder(cache_folder))

    @property
    def sequences_encoded(self) -> int:
        """Token sequences run through the model(s) by this scorer so far."""
        encoders = {id(e): e for e in (self.bert_encoder, self.sentence_encoder)}.values()
        return sum(encoder.sequences_encoded for encoder in encoders)

    def _record_counts(self) -> None:
        stats = self.cache.stats if self.cache is not None else CacheStats(enabled=False)
        self.provenance.sequences_encoded = self.sequences_encoded
        self.provenance.embedding_cache = {**stats.as_dict(), "memory_hits": self.memory.hits}

    def _sequences(self, encoder: TokenEncoder, texts: list[str], max_length: int):
        if not texts:  # a chunk of empty pairs: the tokenizer fails on an empty batch
            return {}, set()
        ids = [tuple(seq) for seq in encoder.token_ids(texts, max_length)]
        at_limit = [t for t, seq in zip(texts, ids) if len(seq) >= max_length]
        full = dict(zip(at_limit, encoder.full_lengths(at_limit))) if at_limit else {}
        truncated = {t for t in at_limit if full[t] > max_length}
        return dict(zip(texts, ids)), truncated

    def score_pairs(self, candidates: Sequence[str], references: Sequence[str],
                    show_progress: bool = True, text_progress: bool = False,
                    chunk_size: int | None = None) -> pd.DataFrame:
        """Score aligned lists of non-missing strings; one row per pair, in input order.

        Texts are stripped as both libraries do. An empty candidate or reference scores 0 on
        every metric and is flagged (bert-score 0.3.13 crashes on it under transformers 5).
        Pairs go `chunk_size` at a time (None: the scorer's). After each chunk the disk cache
        is trimmed to its cap. `text_progress` draws a plain-text bar, redrawn at most every 15 s,
        on the process's own stderr (`sys.__stderr__`): in a kernel that Papermill runs, that is
        the terminal or CI log of the run, so the executed notebook stores no progress lines as
        stderr. Without it the bar is tqdm.auto's, a widget in JupyterLab.
        """
        if len(candidates) != len(references):
            raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
        candidates, references = list(candidates), list(references)
        chunk_size = chunk_size or self.chunk_size
        bar_class = partial(text_tqdm, mininterval=15, file=sys.__stderr__) if text_progress else tqdm
        bar = bar_class(total=len(candidates), desc="scoring", unit="pair", disable=not show_progress)
        chunks = []
        with bar:
            for start in range(0, len(candidates), chunk_size) or [0]:
                chunk = slice(start, start + chunk_size)
                chunks.append(self._score_chunk(candidates[chunk], references[chunk], bar))
                if self.cache is not None:
                    self.cache.enforce_cap()
                self._record_counts()
                bar.set_postfix(encoded=self.provenance.sequences_encoded,
                                cache_hits=self.provenance.embedding_cache["hits"], refresh=False)
        return pd.concat(chunks, ignore_index=True)

    def _score_chunk(self, candidates: list[str], references: list[str], bar) -> pd.DataFrame:
        candidates = [c.strip() for c in candidates]
        references = [r.strip() for r in references]
        texts = sorted({t for t in (*candidates, *references) if t})
        bert_ids, bert_truncated = self._sequences(self.bert_encoder, texts, self.bert_max)
        sentence_ids, sentence_truncated = self._sequences(self.sentence_encoder, texts,
                                                           self.sentence_max)
        bert_key = {t: entry_key(self.bert_encoder.model_id, self.num_layers, bert_ids[t]) for t in texts}
        sentence_key = {t: entry_key(self.sentence_encoder.model_id, self.sentence_layer, sentence_ids[t])
                        for t in texts}
        needs = {bert_key[t]: (self.bert_encoder, self.num_layers, bert_ids[t]) for t in texts}
        needs.update({sentence_key[t]: (self.sentence_encoder, self.sentence_layer, sentence_ids[t])
                      for t in texts})
        progress = _PairProgress(bar, len(candidates))
        states = self._hidden_states(needs, progress)
        progress.finish()

        special = self.bert_encoder.special_ids
        pooled = {text: mean_pool(states[sentence_key[text]]) for text in texts}
        rows = []
        for candidate, reference in zip(candidates, references):
            row = {"generated_empty": not candidate, "reference_empty": not reference,
                   "truncated_bertscore": candidate in bert_truncated or reference in bert_truncated,
                   "truncated_sentence": candidate in sentence_truncated or reference in sentence_truncated}
            if not candidate or not reference:
                row.update(dict.fromkeys(METRIC_COLUMNS, 0.0))
            else:
                cand_seq, ref_seq = bert_ids[candidate], bert_ids[reference]
                score = greedy_match(
                    states[bert_key[candidate]], states[bert_key[reference]],
                    np.array([0.0 if t in special else 1.0 for t in cand_seq]),
                    np.array([0.0 if t in special else 1.0 for t in ref_seq]))
                precision, recall, f1 = score
                if self.baseline is not None:
                    precision, recall, f1 = (rescale(v, b) for v, b in zip(score, self.baseline))
                row.update(bertscore_precision=precision, bertscore_recall=recall, bertscore_f1=f1,
                           sentence_cosine=float(pairwise_cosine(pooled[candidate][None, :],
                                                                 pooled[reference][None, :])[0]))
            rows.append(row)
        return pd.DataFrame(rows, columns=[*METRIC_COLUMNS, *SCORE_FLAGS])

    def sentence_embeddings(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32: each text's sentence embedding, the mean-pooled states the
        sentence cosine compares, rounded to float32. Texts are stripped; an empty one is a row
        of zeros.

        Only the vector is kept, never the text's token states (`embcache`, pooled entries). With
        the disk cache, the distinct texts' vectors are read as one bundle when this set of texts
        was embedded before; otherwise each text's vector comes from the memory LRU or the disk
        cache, or is pooled from token states already there (a question that is also an answer),
        or is encoded; and the set's bundle is written for the next run."""
        stripped = [str(text).strip() for text in texts]
        distinct = sorted({text for text in stripped if text})
        dim = int(self.sentence_encoder.config.hidden_size)
        if not distinct:
            return np.zeros((len(stripped), dim), dtype=np.float32)
        ids, _ = self._sequences(self.sentence_encoder, distinct, self.sentence_max)
        states_keys = [entry_key(self.sentence_encoder.model_id, self.sentence_layer, ids[text]) for text in distinct]
        keys = [pooled_key(key) for key in states_keys]
        vectors = self.cache.get_bundle(keys) if self.cache is not None else None
        if vectors is None:
            vectors = self._pooled_vectors(keys, states_keys, [ids[text] for text in distinct])
            if self.cache is not None:
                self.cache.put_bundle(keys, vectors)
        if self.cache is not None:
            self.cache.enforce_cap()
        self._record_counts()
        row = {text: position for position, text in enumerate(distinct)}
        result = np.zeros((len(stripped), vectors.shape[1]), dtype=np.float32)
        present = [position for position, text in enumerate(stripped) if text]
        result[present] = vectors[[row[stripped[position]] for position in present]]
        return result

    def _pooled_vectors(self, keys: list[str], states_keys: list[str],
                        sequences: list[tuple[int, ...]]) -> np.ndarray:
        """(len(keys), dim) float32 pooled vectors, row i that of keys[i] (see sentence_embeddings).
        A vector computed here is stored under its pooled key; the token states are not stored."""
        found: dict[int, np.ndarray] = {}
        for position, key in enumerate(keys):
            vector = self.memory.get(key)
            if vector is None and self.cache is not None:
                vector = self.cache.get(key)
            if vector is None:
                states = self.memory.get(states_keys[position])
                if states is None and self.cache is not None and self.cache.path(states_keys[position]).exists():
                    states = self.cache.get(states_keys[position])
                if states is not None:
                    vector = self._store_pooled(key, states)
            if vector is not None:
                found[position] = vector
        missing = [position for position in range(len(keys)) if position not in found]
        if missing:
            encoder = self.sentence_encoder
            states = encoder.hidden_states([sequences[position] for position in missing], [self.sentence_layer],
                                           self.batch_size)
            for position in missing:
                found[position] = self._store_pooled(keys[position], states[sequences[position]][self.sentence_layer])
        return np.concatenate([found[position] for position in range(len(keys))])

    def _store_pooled(self, key: str, states: np.ndarray) -> np.ndarray:
        """The (1, dim) float32 mean of `states`, stored under `key` in the disk cache and memory."""
        vector = mean_pool(states).astype(np.float32)[None, :]
        if self.cache is not None:
            vector = self.cache.put(key, vector)
        self.memory.put(key, vector)
        return vector

    def _hidden_states(self, needs: dict[str, tuple[TokenEncoder, int, tuple[int, ...]]],
                       progress: _PairProgress | None) -> dict[str, np.ndarray]:
        """{entry key: float32 hidden states} for each need (encoder, layer, token sequence).

        Each entry comes from the memory LRU or the disk cache when it is there. Otherwise it
        comes from one forward pass per missing sequence, and what is stored is what is returned.
        """
        found: dict[str, np.ndarray] = {}
        missing: dict[TokenEncoder, dict[tuple[int, ...], list[tuple[int, str]]]] = {}
        for key, (encoder, layer, sequence) in needs.items():
            array = self.memory.get(key)
            if array is None and self.cache is not None:
                array = self.cache.get(key)
                if array is not None:
                    self.memory.put(key, array)
            if array is None:
                missing.setdefault(encoder, {}).setdefault(sequence, []).append((layer, key))
            else:
                found[key] = array
        if progress is not None:
            progress.to_encode = sum(len(wanted) for wanted in missing.values())
        for encoder, wanted in missing.items():
            layers = sorted({layer for entries in wanted.values() for layer, _ in entries})
            states = encoder.hidden_states(list(wanted), layers, self.batch_size, progress)
            for sequence, entries in wanted.items():
                for layer, key in entries:
                    array = states[sequence][layer]
                    if self.cache is not None:
                        array = self.cache.put(key, array)
                    found[key] = array
                    self.memory.put(key, array)
        return found


def score_answers(frame: pd.DataFrame, scorer: AnswerScorer, k: int,
                  show_progress: bool = True, text_progress: bool = False,
                  chunk_size: int | None = None, question_embeddings: bool = False) -> pd.DataFrame:
    """The scoring stage as one batch function: canonical table in, scored table out.

    Rows without a generated answer (no prediction) get missing metrics, never 0. Retrieval
    columns (`rank` and the metrics of evalbook.score.retrieval) are filled where the row has
    retrieval results. Pairs are scored `chunk_size` at a time (None: the scorer's), so memory
    stays bounded. With
    `question_embeddings`, the column QUESTION_EMBEDDING holds each question's sentence
    embedding (a list of float32) for the topics by meaning (evalbook.report.topics).
    """
    has_answer = frame["generated_answer"].notna().to_numpy()
    answered = frame[has_answer]
    scored = scorer.score_pairs(answered["generated_answer"].tolist(),
                                answered["reference_answer"].tolist(), show_progress, text_progress,
                                chunk_size)
    result = pd.DataFrame({"id": frame["id"].to_numpy()})
    for column in METRIC_COLUMNS:
        values = pd.array([pd.NA] * len(frame), dtype="Float64")
        values[has_answer] = scored[column].to_numpy()
        result[column] = values
    for column in ("generated_empty", "truncated_bertscore", "truncated_sentence"):
        values = pd.array([pd.NA] * len(frame), dtype="boolean")
        values[has_answer] = scored[column].to_numpy()
        result[column] = values
    result["reference_empty"] = frame["reference_answer"].str.strip().eq("").to_numpy()
    retrieval = retrieval_columns(frame, k)
    for column in retrieval.columns:
        result[column] = retrieval[column].to_numpy()
    if question_embeddings:
        result[QUESTION_EMBEDDING] = list(scorer.sentence_embeddings(frame["question"].tolist()))
    return result

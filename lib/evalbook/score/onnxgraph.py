"""The ONNX Runtime backend of the scoring encoder: a graph exported from the pinned weights, cached.

`scoring.backend: onnxruntime` runs the same transformer through onnxruntime instead of torch.
The graph is exported with `torch.onnx.export` (opset OPSET) from the weights the profile pins,
the first time a scorer needs it, and kept in `onnx-graphs`, the folder beside the embedding
cache's (`evalbook.score.scoring.onnx_graph_folder`):

    <key>.onnx   the graph, weights included
    <key>.json   its sidecar: the key, what the key was made of, and the graph's own sha256

The key is the sha256 of the model's identity (weights sha256 and config.json sha256), the
number of layers kept, the opset, and the versions of torch (the exporter), onnx and onnxruntime.
A graph whose sidecar is missing, unreadable, of another key, or whose bytes do not have the
sha256 it records is reported with an `OnnxGraphWarning` and exported again; it is never run.
Both files are written through a temporary file and moved into place, so concurrent scorers
(Ray actors) never read half a file. The graph is checked and loaded from the same bytes.

The graph takes `input_ids` and `attention_mask` and returns every hidden state up to the
deepest layer kept (`hidden_0`, the embeddings, to `hidden_<n>`); a run asks only for the
layers it needs. Its hidden states on real tokens agree with torch's to a few 1e-6, the same
size as the rounding between two torch batches, which is why the embedding cache keys the
backend: a warm run reads what its own backend computed.
"""

from __future__ import annotations

import hashlib
import io
import json
import warnings
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from evalbook.files import write_atomically
from evalbook.score.models import quiet_weight_loading

BACKENDS = ("torch", "onnxruntime")
OPSET = 17
LAYOUT = "evalbook-onnx-v1"
GRAPH_SUFFIX = ".onnx"
SIDECAR_SUFFIX = ".json"
EXPORTER = "torch.onnx.export (TorchScript)"


class OnnxGraphWarning(UserWarning):
    """A cached ONNX graph that could not be trusted (damaged or stale) and is exported again."""


def backend_versions() -> dict[str, str | int]:
    """What the graph depends on besides the weights: the exporter's, onnx's and onnxruntime's
    versions and the opset. Part of the graph's key, and recorded in scoring.json."""
    return {"exporter": EXPORTER, "torch": torch.__version__, "onnx": metadata.version("onnx"),
            "onnxruntime": metadata.version("onnxruntime"), "opset": OPSET}


def graph_key(model_id: str, keep_layers: int, versions: dict[str, str | int]) -> str:
    """The hex sha256 naming one graph: model identity, layers kept and the versions it depends on."""
    parts = {"layout": LAYOUT, "model": model_id, "keep_layers": keep_layers, **versions}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def output_name(layer: int) -> str:
    return f"hidden_{layer}"


def export_graph(folder: Path, keep_layers: int) -> bytes:
    """The ONNX graph of the model in `folder` cut at `keep_layers`, as bytes.

    Eager attention, because the TorchScript tracer records its masking as plain tensor ops;
    batch and sequence axes are dynamic.
    """
    from transformers import AutoModel  # slow to import: only when a graph is exported

    with quiet_weight_loading():
        model = AutoModel.from_pretrained(str(folder), attn_implementation="eager")
    model.eval()
    model.encoder.layer = torch.nn.ModuleList(model.encoder.layer[:keep_layers])
    names = [output_name(layer) for layer in range(keep_layers + 1)]
    axes = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"},
            **{name: {0: "batch", 1: "tokens"} for name in names}}
    # The example batch is padded: the tracer records the branches this input takes, and a
    # batch without padding would let transformers skip the attention mask in the graph.
    example = (torch.tensor([[101, 7592, 102], [101, 102, 0]]), torch.tensor([[1, 1, 1], [1, 1, 0]]))
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # Notes for whoever exports, not for the user: the TorchScript exporter's deprecation,
        # the tracer's on Python-level branches (fixed by the padded example above), and how
        # opset 17 expresses advanced indexing.
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="Exporting aten::index", category=UserWarning)
        torch.onnx.export(HiddenStates(model), example, buffer, dynamo=False,
                          input_names=["input_ids", "attention_mask"], output_names=names,
                          dynamic_axes=axes, opset_version=OPSET)
    return buffer.getvalue()


class HiddenStates(torch.nn.Module):
    """The model as a module whose outputs are its hidden states, embeddings first."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        output = self.model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return tuple(output.hidden_states)


@dataclass(frozen=True)
class CachedGraph:
    """A graph's bytes, checked against their sidecar, and where they are."""

    path: Path
    data: bytes
    sha256: str
    exported: bool  # exported by this call rather than read from the cache


class OnnxGraphCache:
    """The graphs under `root`; see the module docstring for the layout and the rules."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def paths(self, key: str) -> tuple[Path, Path]:
        return self.root / f"{key}{GRAPH_SUFFIX}", self.root / f"{key}{SIDECAR_SUFFIX}"

    def graph(self, folder: Path, model_id: str, keep_layers: int) -> CachedGraph:
        """The graph of this model and these layers: from the cache when it is sound, else
        exported and stored."""
        versions = backend_versions()
        key = graph_key(model_id, keep_layers, versions)
        graph_path, sidecar_path = self.paths(key)
        data, problem = self._read(key, graph_path, sidecar_path)
        if data is not None:
            return CachedGraph(graph_path, data, hashlib.sha256(data).hexdigest(), exported=False)
        if problem is not None:
            warnings.warn(f"ONNX graph {graph_path} is unusable ({problem}); it is not run, "
                          "and is exported again", OnnxGraphWarning, stacklevel=2)
        data = export_graph(folder, keep_layers)
        digest = hashlib.sha256(data).hexdigest()
        sidecar = {"key": key, "graph_sha256": digest, "model": model_id,
                   "keep_layers": keep_layers, **versions}
        write_atomically(graph_path, data, overwrite=True)
        write_atomically(sidecar_path, json.dumps(sidecar, indent=2).encode(), overwrite=True)
        return CachedGraph(graph_path, data, digest, exported=True)

    @staticmethod
    def _read(key: str, graph_path: Path, sidecar_path: Path) -> tuple[bytes | None, str | None]:
        """(graph bytes, None) when both files are sound; (None, None) when neither exists;
        else (None, what is wrong)."""
        if not graph_path.exists() and not sidecar_path.exists():
            return None, None
        try:
            sidecar = json.loads(sidecar_path.read_text("utf-8"))
            data = graph_path.read_bytes()
        except (OSError, ValueError) as error:
            return None, f"{type(error).__name__}: {error}"
        if not isinstance(sidecar, dict) or sidecar.get("key") != key:
            return None, "its sidecar belongs to another key"
        if hashlib.sha256(data).hexdigest() != sidecar.get("graph_sha256"):
            return None, "its sha256 differs from the one its sidecar records"
        return data, None


class OnnxForward:
    """A forward pass through onnxruntime: token ids in, float32 hidden states of chosen layers out."""

    def __init__(self, graph: CachedGraph, threads: int, providers: Sequence[str]):
        import onnxruntime  # here, not at the top: only the onnxruntime backend pays its import

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.graph = graph
        self.session = onnxruntime.InferenceSession(graph.data, options, providers=list(providers))

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray,
                 layers: Sequence[int]) -> dict[int, np.ndarray]:
        outputs = self.session.run([output_name(layer) for layer in layers],
                                   {"input_ids": input_ids, "attention_mask": attention_mask})
        return {layer: np.asarray(array, dtype=np.float32) for layer, array in zip(layers, outputs)}

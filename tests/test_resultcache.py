"""The store of seeded results (lib/evalbook/resultcache.py): keys, what is stored, and the
slices' tests and the topics read back equal to what they compute."""

from __future__ import annotations

import json
import sqlite3
import types

import numpy as np
import pandas as pd
import pytest

from evalbook.report import slices as slices_module
from evalbook.report.slices import SliceColumn, SliceSettings, _slice_results, slice_run
from evalbook.layout import RESULTS_FILE
from evalbook.resultcache import ResultCache, ResultCacheWarning, code_identity, fingerprint
from evalbook.stats import Bootstrap


def test_the_fingerprint_tells_apart_what_differs_and_only_that():
    base = fingerprint("slices", np.arange(3, dtype=np.float64), ["a", "b"], {"x": 1.0}, None)
    assert base == fingerprint("slices", np.arange(3, dtype=np.float64), ["a", "b"], {"x": 1.0}, None)
    different = [
        fingerprint("topics", np.arange(3, dtype=np.float64), ["a", "b"], {"x": 1.0}, None),
        fingerprint("slices", np.arange(3, dtype=np.float32), ["a", "b"], {"x": 1.0}, None),  # dtype
        fingerprint("slices", np.arange(3, dtype=np.float64).reshape(3, 1), ["a", "b"], {"x": 1.0}, None),
        fingerprint("slices", np.array([0.0, 1.0, 2.0 + 1e-15]), ["a", "b"], {"x": 1.0}, None),
        fingerprint("slices", np.arange(3, dtype=np.float64), ["ab", ""], {"x": 1.0}, None),  # where a string ends
        fingerprint("slices", np.arange(3, dtype=np.float64), ["a", "b"], {"x": 1}, None),  # 1 is not 1.0
        fingerprint("slices", np.arange(3, dtype=np.float64), ["a", "b"], {"x": 1.0}, False),
        fingerprint("slices", np.arange(3, dtype=np.float64), ["a", "b\x00"], {"x": 1.0}, None),
    ]
    assert len({base, *different}) == len(different) + 1
    with pytest.raises(TypeError, match="cannot be keyed"):
        fingerprint(object())


def test_the_code_identity_follows_the_module_source_and_the_library_version(tmp_path):
    source = tmp_path / "computing.py"
    source.write_text("X = 1\n")
    module = types.ModuleType("computing")
    module.__file__ = str(source)
    before = code_identity([module], ["numpy"])
    assert before[1] == f"numpy=={np.__version__}"
    source.write_text("X = 2\n")
    assert code_identity([module], ["numpy"])[0] != before[0]


def test_a_result_is_computed_once_then_read_and_a_new_store_object_reads_it_too(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"mean": 0.1 + 0.2, "levels": ["a", "b"], "q": float("nan"), "n": 3}

    cache = ResultCache(tmp_path)
    first = cache.result("kind", [1, 2], compute)
    again = cache.result("kind", [1, 2], compute)
    cache.close()
    reopened = ResultCache(tmp_path)
    third = reopened.result("kind", [1, 2], compute)
    assert calls == [1] and (cache.hits, cache.misses, reopened.hits) == (1, 1, 1)
    assert again["mean"] == third["mean"] == 0.1 + 0.2 and np.isnan(third["q"])
    assert again["levels"] == ["a", "b"] and again["n"] == first["n"] == 3
    reopened.result("kind", [1, 3], compute)
    assert len(calls) == 2  # other inputs: computed


def test_a_result_that_does_not_read_back_equal_is_returned_and_not_stored(tmp_path):
    cache = ResultCache(tmp_path)
    value = {"n": np.int64(3)}  # not JSON
    assert cache.result("kind", [1], lambda: value) is value
    assert cache.result("kind", [1], lambda: {"n": 4}) == {"n": 4}
    assert cache.misses == 2 and cache.hits == 0


def test_no_folder_is_no_store_and_an_unreadable_store_is_warned_and_bypassed(tmp_path):
    nothing = ResultCache(None)
    assert nothing.result("kind", [1], lambda: {"a": 1}) == {"a": 1} and nothing.misses == 1
    (tmp_path / RESULTS_FILE).write_bytes(b"this is not a database" * 100)
    broken = ResultCache(tmp_path)
    with pytest.warns(ResultCacheWarning):
        assert broken.result("kind", [1], lambda: {"a": 2}) == {"a": 2}


# ---------------------------------------------------------------- the slices' tests

def slice_inputs(n: int = 240, seed: int = 3):
    rng = np.random.default_rng(seed)
    product = np.asarray(rng.choice(["alpha", "beta", "gamma", "delta"], size=n), dtype=object)
    f1 = rng.uniform(0.4, 0.9, n) - 0.15 * (product == "gamma")
    values = {"bertscore_f1": [float(v) for v in f1],
              "sentence_cosine": [None if i % 17 == 0 else float(v) for i, v in enumerate(f1 * 0.9)]}
    columns = [SliceColumn("product", "metadata", product),
               SliceColumn("odd", "derived", np.asarray(["odd" if i % 2 else "even" for i in range(n)], dtype=object))]
    return values, columns, {"bertscore_f1": True, "sentence_cosine": True}


def test_the_slices_tests_read_back_equal_to_slice_run_s(tmp_path):
    values, columns, directions = slice_inputs()
    settings = SliceSettings(min_n=10, permutations=200, bootstrap=Bootstrap(resamples=200, seed=7))
    direct = slice_run(values, {c.name: c.levels for c in columns}, directions, settings)
    cache = ResultCache(tmp_path)
    computed = _slice_results(values, columns, directions, settings, frozenset(), cache)
    read = _slice_results(values, columns, directions, settings, frozenset(), cache)
    assert (cache.misses, cache.hits) == (1, 1)
    assert computed == direct and read == direct  # LevelResult equality: every field, set_aside a tuple
    assert any(r.verdict == "worse" for r in read)


def test_the_slices_tests_are_computed_again_when_a_value_a_level_or_a_setting_changes(tmp_path):
    values, columns, directions = slice_inputs()
    settings = SliceSettings(min_n=10, permutations=200, bootstrap=Bootstrap(resamples=200, seed=7))
    cache = ResultCache(tmp_path)
    _slice_results(values, columns, directions, settings, frozenset(), cache)
    changed = {**values, "bertscore_f1": [values["bertscore_f1"][0] + 1e-12, *values["bertscore_f1"][1:]]}
    relabelled = [columns[0], SliceColumn("odd", "derived", np.roll(columns[1].levels, 1))]
    for args in ((changed, columns, directions, settings, frozenset()),
                 (values, relabelled, directions, settings, frozenset()),
                 (values, columns, directions, SliceSettings(min_n=11, permutations=200,
                                                              bootstrap=Bootstrap(resamples=200, seed=7)), frozenset()),
                 (values, columns, directions, settings, frozenset({("odd", "bertscore_f1")}))):
        assert _slice_results(*args, cache) == slice_run(args[0], {c.name: c.levels for c in args[1]},
                                                         args[2], args[3], args[4])
    assert (cache.misses, cache.hits) == (5, 0)


def test_the_slices_code_is_part_of_the_key(tmp_path, monkeypatch):
    values, columns, directions = slice_inputs()
    settings = SliceSettings(min_n=10, permutations=200, bootstrap=Bootstrap(resamples=200, seed=7))
    cache = ResultCache(tmp_path)
    _slice_results(values, columns, directions, settings, frozenset(), cache)
    monkeypatch.setattr(slices_module, "code_identity", lambda modules, libraries: ["another version of the code"])
    _slice_results(values, columns, directions, settings, frozenset(), cache)
    assert (cache.misses, cache.hits) == (2, 0)


# ---------------------------------------------------------------- the topics

def test_the_topics_are_read_back_equal_to_what_they_compute(tmp_path, monkeypatch):
    from evalbook import pipeline
    from evalbook.params import load_profile
    from paths import DEFAULT_PROFILE

    profile = load_profile(DEFAULT_PROFILE, {"scoring.embedding_cache.path": str(tmp_path / "cache")})
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(3, 16))
    points = np.vstack([centre + 0.05 * rng.normal(size=(20, 16)) for centre in centres]).astype(np.float32)
    words = ["refund invoice", "password login", "parcel delivery"]
    canonical = pd.DataFrame({"id": [f"q{i}" for i in range(60)],
                              "question": [f"{words[i // 20]} question {i}" for i in range(60)]})
    embeddings = pd.Series(list(points))
    found = []
    original = pipeline.find_topics
    monkeypatch.setattr(pipeline, "find_topics", lambda *a, **k: found.append(1) or original(*a, **k))
    first = pipeline.question_topics(profile, canonical, embeddings)
    second = pipeline.question_topics(profile, canonical, embeddings)
    assert found == [1] and second == first and first["k"] == 3
    assert json.loads(json.dumps(first)) == first
    moved = pd.Series(list(points + np.float32(1e-3)))
    pipeline.question_topics(profile, canonical, moved)
    assert found == [1, 1]  # other embeddings: grouped again
    off = load_profile(DEFAULT_PROFILE, {"scoring.embedding_cache.path": str(tmp_path / "cache"),
                                         "scoring.embedding_cache.enabled": False})
    pipeline.question_topics(off, canonical, embeddings)
    assert found == [1, 1, 1]  # no embedding cache, no results store
    assert sqlite3.connect(tmp_path / "cache" / RESULTS_FILE).execute("SELECT COUNT(*) FROM replies").fetchone()[0] == 2


def test_a_run_keeps_its_results_beside_its_embedding_cache_and_none_without_one(tmp_path):
    from evalbook.params import load_profile
    from evalbook.pipeline import results_cache
    from paths import DEFAULT_PROFILE

    kept = results_cache(load_profile(DEFAULT_PROFILE, {"scoring.embedding_cache.path": str(tmp_path / "cache")}))
    assert kept.folder == tmp_path / "cache"
    off = results_cache(load_profile(DEFAULT_PROFILE, {"scoring.embedding_cache.path": str(tmp_path / "cache"),
                                                       "scoring.embedding_cache.enabled": False}))
    assert off.folder is None

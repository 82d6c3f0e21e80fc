"""Check outcomes kept between runs (evalbook.checks.cache): a hit is what a miss computes, every
input an outcome is computed from is in its key, an unusable store computes with a warning, and
a warm run computes no check (issue 48, Speed)."""

from __future__ import annotations

import types
from contextlib import closing

import pandas as pd
import pytest

from evalbook import pipeline
from evalbook.checks import cache, facts, run
from evalbook.checks.checksfile import column_entries, parse_checks
from evalbook.checks.run import check_settings, run_checks
from evalbook.layout import RESULTS_FILE
from evalbook.params import load_profile
from evalbook.resultcache import ResultCache, ResultCacheWarning
from paths import DEFAULT_PROFILE
from test_report import canonical_frame

FACTS = {"enabled": True, "fail_beyond_reference": False, "fail_missing": False}
CHECKS_FILE = {"version": 1, "checks": [
    {"name": "short", "max_words": 12},
    {"name": "fast", "latency_ms": 1500},
    {"name": "e2-says-pounds", "contains": "£", "ids": ["e2"]},
]}


def frame() -> pd.DataFrame:
    """Five examples that give the fact check every part of its details (changed, unsupported,
    beyond the reference, missing), a check column on e3, and no prediction on e5."""
    table = canonical_frame()
    table["reference_answer"] = pd.Series([
        "The museum opens at 10:00 on Tuesday and tickets cost £12.", "Spiders have eight legs.",
        "Dr Ada Lovelace wrote it in 1843.", "Water boils at 100 °C.", "x"], dtype=object)
    table["generated_answer"] = pd.Series([
        "It opens at 11:00 on Tuesday, and tickets cost £12 for 3 rooms.", "Spiders have six legs, £2 each.",
        "Ada Lovelace wrote it in 1843 in London.", "Water boils at 100 degrees Celsius.", None], dtype=object)
    table["context"] = pd.Series(["The museum has 3 rooms.", "", "She lived in London.", None, None], dtype=object)
    table["retrieved_contexts"] = pd.Series([["Tickets cost £12."], None, [], None, None], dtype=object)
    table["checks"] = pd.Series([None, None, column_entries(parse_checks(
        {"version": 1, "checks": [{"name": "names-london", "contains": "London"}]}, "c.yaml")), None, None],
        dtype=object)
    return table


LATENCY = {"e1": 900.0, "e2": 2100.0, "e3": 1200.0, "e4": float("nan")}


def settings(facts_config=FACTS, checks_file=CHECKS_FILE):
    return check_settings({"facts": facts_config, "path": None}, parse_checks(checks_file, "checks.yaml"))


@pytest.fixture
def counted(monkeypatch):
    """How many times the fact check and an assertion are computed."""
    calls = {"facts": 0, "assertions": 0}
    check_facts, run_assertion = facts.check_facts, run.run_assertion

    def counting_facts(*args, **kwargs):
        calls["facts"] += 1
        return check_facts(*args, **kwargs)

    def counting_assertion(*args, **kwargs):
        calls["assertions"] += 1
        return run_assertion(*args, **kwargs)

    monkeypatch.setattr(facts, "check_facts", counting_facts)
    monkeypatch.setattr(run, "run_assertion", counting_assertion)
    return calls


def cached(table, folder, check_settings_=None, latency=LATENCY):
    with closing(ResultCache(folder)) as results:
        outcomes = cache.run_checks_cached(table, check_settings_ or settings(), latency, results)
    return outcomes, results


def test_a_hit_equals_a_miss_exactly_with_its_details(tmp_path, counted):
    table = frame()
    direct = run_checks(table, settings(), LATENCY)
    counted.update(facts=0, assertions=0)
    cold, cold_results = cached(table, tmp_path)
    computed = dict(counted)
    warm, warm_results = cached(table, tmp_path)
    assert cold == direct and warm == direct  # CheckOutcome equality: check, status, reason, details
    assert [[o.as_record() for o in example] for example in warm] == [[o.as_record() for o in example]
                                                                      for example in direct]
    details = direct[0][0].details
    assert direct[0][0].status == "fail" and details["changed"] and details["beyond_reference"]
    assert direct[1][0].details["unsupported"] and any(o.details for o in direct[0][1:])  # latency's
    assert [o.check for o in direct[2]] == ["facts", "short", "fast", "names-london"]
    assert direct[3][2].status == "error" and direct[4][0].reason == run.NO_ANSWER
    assert cold_results.misses == warm_results.hits == 10 and warm_results.misses == 0  # 5 facts, 5 assertions
    assert computed == {"facts": 4, "assertions": 12}  # e5 has no answer to check facts in
    assert counted == computed  # the warm run computed nothing


def changed(column: str, row: int, value):
    table = frame()
    table.at[row, column] = value
    return table


@pytest.mark.parametrize("table, facts_computed, assertions_computed", [
    (changed("generated_answer", 1, "Spiders have seven legs, £2 each."), 1, 3),  # the answer
    (changed("reference_answer", 1, "Spiders have 8 legs."), 1, 0),
    (changed("context", 0, "The museum has 4 rooms."), 1, 0),
    (changed("retrieved_contexts", 0, ["Tickets cost £13."]), 1, 0),  # the context holds the chunks
    (changed("checks", 0, column_entries(parse_checks(
        {"version": 1, "checks": [{"name": "says-12", "contains": "12"}]}, "c.yaml"))), 0, 3),
], ids=["answer", "reference", "context", "retrieved-chunks", "check-column"])
def test_a_change_of_a_row_s_inputs_computes_that_row_again(tmp_path, counted, table, facts_computed,
                                                           assertions_computed):
    expected = run_checks(table, settings(), LATENCY)
    cached(frame(), tmp_path)
    counted.update(facts=0, assertions=0)
    outcomes, results = cached(table, tmp_path)
    assert outcomes == expected
    assert counted == {"facts": facts_computed, "assertions": assertions_computed}
    assert results.misses == (facts_computed > 0) + (assertions_computed > 0)


def test_a_change_of_the_settings_an_assertion_or_a_latency_is_a_miss(tmp_path, counted):
    fail_missing = settings({**FACTS, "fail_missing": True})
    longer = {**CHECKS_FILE, "checks": [{"name": "short", "max_words": 13}, *CHECKS_FILE["checks"][1:]]}
    slower = {**LATENCY, "e1": 1600.0}
    expected = [run_checks(frame(), fail_missing, LATENCY), run_checks(frame(), settings(checks_file=longer), LATENCY),
                run_checks(frame(), settings(), slower)]
    cached(frame(), tmp_path)

    counted.update(facts=0, assertions=0)
    outcomes, results = cached(frame(), tmp_path, fail_missing)
    assert outcomes == expected[0]
    assert counted == {"facts": 4, "assertions": 0} and results.misses == 5  # e5's "no answer" too

    counted.update(facts=0, assertions=0)
    outcomes, results = cached(frame(), tmp_path, settings(checks_file=longer))
    assert outcomes == expected[1]
    assert counted == {"facts": 0, "assertions": 12} and results.misses == 5

    counted.update(facts=0, assertions=0)
    outcomes, results = cached(frame(), tmp_path, latency=slower)
    assert outcomes == expected[2] and outcomes[0][2].status == "fail"
    assert counted == {"facts": 0, "assertions": 2} and results.misses == 1  # e1's checks only


def test_a_latency_that_no_check_reads_is_no_part_of_the_key(tmp_path, counted):
    no_latency_check = settings(checks_file={"version": 1, "checks": [{"name": "short", "max_words": 12}]})
    cached(frame(), tmp_path, no_latency_check)
    counted.update(facts=0, assertions=0)
    cached(frame(), tmp_path, no_latency_check, latency={**LATENCY, "e1": 1600.0})
    assert counted == {"facts": 0, "assertions": 0}


def test_a_change_of_the_checks_code_is_a_miss(tmp_path, counted, monkeypatch):
    assert {facts, run, cache.assertions, cache.numbers, cache.dates, cache.names, cache.found,
            cache.protocol} <= set(cache.CODE_MODULES)
    cached(frame(), tmp_path)
    counted.update(facts=0, assertions=0)
    identity = cache.code_identity
    monkeypatch.setattr(cache, "code_identity",
                        lambda modules, libraries: [*identity(modules, libraries), "facts.py edited"])
    cached(frame(), tmp_path)
    assert counted == {"facts": 4, "assertions": 12}


def test_an_unusable_store_computes_with_a_warning_and_no_folder_computes_without_one(tmp_path, counted):
    expected = run_checks(frame(), settings(), LATENCY)
    (tmp_path / RESULTS_FILE).write_bytes(b"this is not a database" * 100)
    for _ in range(2):
        counted.update(facts=0, assertions=0)
        with pytest.warns(ResultCacheWarning, match="could not"):
            outcomes, _ = cached(frame(), tmp_path)
        assert outcomes == expected and counted == {"facts": 4, "assertions": 12}
    counted.update(facts=0, assertions=0)
    outcomes, results = cached(frame(), None)
    assert outcomes == expected and counted == {"facts": 4, "assertions": 12}
    assert (results.hits, results.misses) == (0, 10)


def test_no_check_at_all_reads_no_store(tmp_path):
    off = check_settings({"facts": {**FACTS, "enabled": False}, "path": None})
    outcomes, results = cached(canonical_frame(), tmp_path, off)
    assert outcomes == [[]] * 5 and (results.hits, results.misses) == (0, 0)
    assert not (tmp_path / RESULTS_FILE).exists()


def test_a_warm_report_computes_no_fact_check(tmp_path, counted):
    """answer_checks, as 04_report calls it, with the run's results store."""
    profile = load_profile(DEFAULT_PROFILE, {"scoring.embedding_cache.path": str(tmp_path / "cache")})
    context = types.SimpleNamespace(profile=profile, artifact=lambda name: tmp_path / "run" / name)
    with closing(pipeline.results_cache(profile)) as results:
        cold = pipeline.answer_checks(context, frame(), results)
    assert counted["facts"] == 4
    with closing(pipeline.results_cache(profile)) as results:
        warm = pipeline.answer_checks(context, frame(), results)
    assert warm == cold and counted["facts"] == 4 and results.hits == 6  # 5 fact checks, e3's column


def test_an_outcome_that_does_not_read_back_equal_is_returned_and_not_kept(tmp_path, monkeypatch):
    calls = []

    def tuple_details(answer, reference, context, settings):
        calls.append(answer)
        return facts.CheckOutcome(facts.CHECK, "pass", "ok", {"held": ("£12",)})  # JSON reads back a list

    monkeypatch.setattr(facts, "check_facts", tuple_details)
    cached(frame(), tmp_path)
    outcomes, results = cached(frame(), tmp_path)
    assert outcomes[0][0].details == {"held": ("£12",)}
    assert len(calls) == 8 and results.misses == 4  # computed again; the other entries read

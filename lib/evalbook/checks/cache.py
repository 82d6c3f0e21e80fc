"""Check outcomes kept between runs, so that a run over the same texts computes no check again:
a table of `results.sqlite`, the results store in the embedding cache's folder
(evalbook.resultcache).

The fact check reads an answer, its reference and its context, at 0.2-3 ms an example: 18-36 s
at 12,000 examples with contexts (docs/checks.md, Speed), far more than the 10% of a warm
02_score and 04_report that the checks may add. Its outcome is a pure function of those texts,
so each example keeps two entries, each under the sha256 of what it is computed from and nothing
else:

- the fact check's outcome: the answer (none: no prediction), the reference, the context with
  the retrieved chunks' texts (run.example_context) and the fact check's settings;
- the assertions' outcomes, in their order: the answer, each check that applies to the example
  (its name, kind, argument and ignore_case; the checks file's and the example's own check
  columns') and its latency where one of them limits it;

and both also under the source of the modules that compute them and the versions of the
libraries they call (CODE_MODULES, CODE_LIBRARIES). A change to any of these is a miss, never a
stale outcome; a changed checks file computes only the assertions again, not the fact check.

A run reads every example's entries in one pass and writes its misses in one transaction: at
12,000 examples, keying their texts and reading them back takes a fraction of a second where
the fact check takes seconds (docs/performance.md, Checks). An outcome is kept only when it
reads back equal to what was computed, so a hit is exactly the outcome a miss computes, details
included. A store that cannot be opened, read or written is no cache: the outcomes are
computed, with a warning (ResultCacheWarning).
"""

from __future__ import annotations

import json
import sqlite3
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from evalbook import escaping, validation
from evalbook.checks import assertions, checksfile, dates, facts, found, names, numbers, protocol, run
from evalbook.checks.protocol import CheckOutcome
from evalbook.checks.run import CheckSettings, ExampleInputs
from evalbook.layout import RESULTS_FILE
from evalbook.resultcache import ResultCache, ResultCacheWarning, code_identity, fingerprint

# what computes an outcome from its inputs: the checks, and the quoting and the JSON Schema check
# that the assertions' reasons and `json` check use
CODE_MODULES = (run, protocol, facts, found, numbers, dates, names, assertions, checksfile, escaping, validation)
CODE_LIBRARIES = ("text2num", "jsonschema")
TABLE = "check_outcomes"
KEYS_PER_QUERY = 900  # under SQLite's oldest limit of 999 parameters a statement


def _records(outcomes: Sequence[CheckOutcome]) -> list[dict[str, Any]]:
    return [outcome.as_record() for outcome in outcomes]


def _outcomes(records: Iterable[Mapping[str, Any]]) -> list[CheckOutcome]:
    return [CheckOutcome(record["check"], record["status"], record["reason"], record.get("details", {}))
            for record in records]


def _exact_text(outcomes: list[CheckOutcome]) -> str | None:
    """The outcomes as the JSON an entry holds, when it reads back equal to them (a tuple
    would read back a list); None when it does not."""
    try:
        text = json.dumps(_records(outcomes), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return text if _outcomes(json.loads(text)) == outcomes else None


def _assertion_key(assertion: assertions.Assertion) -> list[Any]:
    return [assertion.name, assertion.kind, assertion.argument, assertion.ignore_case]


def _keys(inputs: ExampleInputs, facts_scope: str | None, assertions_scope: str) -> tuple[str | None, str | None]:
    """The keys of an example's fact check and of its assertions; None for what does not run or
    cannot be keyed (an argument that is no JSON value), which is computed and not kept. A scope
    is what all examples share (the code, the fact check's settings), hashed once a run."""
    fact_key = assertions_key = None
    if facts_scope is not None:
        fact_key = fingerprint(facts_scope, inputs.answer, inputs.reference, inputs.context)
    if inputs.assertions:
        try:
            assertions_key = fingerprint(assertions_scope, inputs.answer,
                                         [_assertion_key(assertion) for assertion in inputs.assertions],
                                         inputs.latency_ms)
        except TypeError:
            pass
    return fact_key, assertions_key


class _Store:
    """The outcomes table of results.sqlite in `folder`; every failure a warning, never an error."""

    def __init__(self, folder: Path | None):
        self.path = None if folder is None else Path(folder) / RESULTS_FILE
        self._connection: sqlite3.Connection | None = None
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._connection = sqlite3.connect(self.path, timeout=30)
            self._connection.execute("PRAGMA journal_mode=WAL")  # as the results store opens it
            with self._connection:
                self._connection.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} "
                                         "(key TEXT PRIMARY KEY, outcomes TEXT NOT NULL)")
        except (sqlite3.Error, OSError) as error:
            self._give_up(f"could not be opened: {error}; the checks are computed")

    def _give_up(self, problem: str) -> None:
        warnings.warn(f"the results store {self.path} {problem}", ResultCacheWarning, stacklevel=4)
        self.close()

    def read(self, keys: Sequence[str]) -> dict[str, str]:
        """The entries held under `keys`, as their JSON text."""
        if self._connection is None or not keys:
            return {}
        held: dict[str, str] = {}
        try:
            for start in range(0, len(keys), KEYS_PER_QUERY):
                chunk = keys[start:start + KEYS_PER_QUERY]
                held.update(self._connection.execute(
                    f"SELECT key, outcomes FROM {TABLE} WHERE key IN ({','.join('?' * len(chunk))})", chunk))
        except sqlite3.Error as error:
            self._give_up(f"could not be read: {error}; the checks are computed")
            return {}
        return held

    def write(self, entries: Mapping[str, str]) -> None:
        if self._connection is None or not entries:
            return
        try:
            with self._connection:
                self._connection.executemany(f"INSERT OR REPLACE INTO {TABLE} (key, outcomes) VALUES (?, ?)",
                                             entries.items())
        except sqlite3.Error as error:
            self._give_up(f"could not be written: {error}; the outcomes computed are not kept")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def run_checks_cached(canonical: pd.DataFrame, settings: CheckSettings, latency_ms: Mapping[str, float] | None,
                      results: ResultCache) -> list[list[CheckOutcome]]:
    """run.run_checks' outcomes, each example's read from the results store when it holds them
    and computed and kept when it does not; `results.hits` and `results.misses` count the
    entries read and computed (two an example at most: the fact check's, the assertions')."""
    examples = run.examples_inputs(canonical, settings, latency_ms)
    if examples is None:
        return [[] for _ in range(len(canonical))]
    code = code_identity(CODE_MODULES, CODE_LIBRARIES)
    facts_scope = None if settings.facts is None else fingerprint(
        "check-facts", code, settings.facts.fail_beyond_reference, settings.facts.fail_missing)
    assertions_scope = fingerprint("check-assertions", code)
    keys = [_keys(inputs, facts_scope, assertions_scope) for inputs in examples]
    store = _Store(results.folder)
    try:
        held = store.read([key for pair in keys for key in pair if key is not None])
        computed: dict[str, str] = {}
        by_example = []
        for inputs, (fact_key, assertions_key) in zip(examples, keys):
            outcomes = []
            if settings.facts is not None:
                outcomes += _entry(fact_key, held, computed, results,
                                   lambda: [run.fact_outcome(inputs, settings.facts)])
            if inputs.assertions:
                outcomes += _entry(assertions_key, held, computed, results, lambda: run.assertion_outcomes(inputs))
            by_example.append(outcomes)
        store.write(computed)
    finally:
        store.close()
    return by_example


def _entry(key: str | None, held: Mapping[str, str], computed: dict[str, str], results: ResultCache,
           compute) -> list[CheckOutcome]:
    """One entry's outcomes: read when `held` has them, else computed, and added to `computed`
    when they read back exact."""
    if key is not None and key in held:
        results.hits += 1
        return _outcomes(json.loads(held[key]))
    results.misses += 1
    outcomes = compute()
    text = None if key is None else _exact_text(outcomes)
    if text is not None:
        computed[key] = text
    return outcomes

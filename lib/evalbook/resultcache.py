"""Results that are pure functions of their inputs, kept between runs: `results.sqlite` in the
embedding cache's folder.

The questions' topics (k-means over their embeddings) and the slices' tests (permutations and
bootstraps over every level of every slice) take seconds at 12,000 rows and, being seeded, come
out the same for the same inputs. A run that scores the same examples again (a warm rerun, a
report made again) reads them here instead of computing them.

A result is stored under the sha256 of its kind, of every input, of the versions of the
libraries it computes with, and of the source of the evalbook modules that compute it: a change
to any of these is a miss, never a stale result. A result is stored as JSON only when it reads
back equal to what was computed; one that does not is returned and not stored. A store that
cannot be opened or read is no cache: the result is computed, with a warning. Nothing here ever
changes a number: a hit is the value a miss would compute.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
import math
import sqlite3
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Sequence

import numpy as np

from evalbook.layout import RESULTS_FILE
from evalbook.replycache import ReplyCache


class ResultCacheWarning(UserWarning):
    """The results store could not be used; results are computed as if it were absent."""


def _feed(digest: "hashlib._Hash", value: Any) -> None:
    """Add `value` to `digest`, each kind tagged and sized, so that no two values collide."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            _feed(digest, ["ndarray[object]", value.shape, value.tolist()])
            return
        array = np.ascontiguousarray(value)
        digest.update(f"ndarray:{array.dtype.str}:{array.shape}:".encode())
        digest.update(array.tobytes())
    elif isinstance(value, (list, tuple)):
        digest.update(f"seq:{len(value)}:".encode())
        for item in value:
            _feed(digest, item)
    elif isinstance(value, dict):
        digest.update(f"map:{len(value)}:".encode())
        for key in sorted(value, key=repr):
            _feed(digest, key)
            _feed(digest, value[key])
    elif value is None or isinstance(value, (bool, np.bool_)):
        digest.update(f"{type(value).__name__}:{value!r};".encode())
    elif isinstance(value, (int, np.integer)):
        digest.update(f"int:{int(value)};".encode())
    elif isinstance(value, (float, np.floating)):
        digest.update(f"float:{float(value).hex()};".encode())
    elif isinstance(value, str):
        encoded = value.encode("utf-8", "surrogatepass")
        digest.update(f"str:{len(encoded)}:".encode())
        digest.update(encoded)
    else:
        raise TypeError(f"a result's input of type {type(value).__name__} cannot be keyed")


def fingerprint(*parts: Any) -> str:
    """The hex sha256 of `parts`: arrays by dtype, shape and bytes; sequences, mappings, strings
    and numbers by value (floats exactly, by their hex form)."""
    digest = hashlib.sha256(b"evalbook-results-v1\n")
    _feed(digest, list(parts))
    return digest.hexdigest()


def code_identity(modules: Sequence[ModuleType], libraries: Sequence[str]) -> list[str]:
    """The sha256 of each module's source file and each library's installed version: what a
    result computed by them depends on besides its inputs."""
    sources = [hashlib.sha256(Path(inspect.getfile(module)).read_bytes()).hexdigest() for module in modules]
    return [*sources, *(f"{name}=={importlib.metadata.version(name)}" for name in libraries)]


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON reads it back: NaN equals NaN, a tuple its list."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    return type(a) is type(b) and a == b


@dataclass
class ResultCache:
    """The results store in `folder` (None: no store, every result computed), with counts."""

    folder: Path | None
    hits: int = 0
    misses: int = 0
    _store: ReplyCache | None = field(default=None, repr=False)

    def result(self, kind: str, key_parts: Sequence[Any], compute: Callable[[], Any]) -> Any:
        """The result of `compute()` for these key parts (which must include the code's
        identity, `code_identity`): read from the store when it holds one, else computed and
        stored when it reads back equal."""
        store = self._open()
        key = fingerprint(kind, *key_parts)
        if store is not None:
            try:
                found = store.get(key)
            except (sqlite3.Error, ValueError) as error:
                warnings.warn(f"the results store {self.folder / RESULTS_FILE} could not be read: {error}; "
                              "the result is computed", ResultCacheWarning, stacklevel=2)
                found = None
            if found is not None and found.get("kind") == kind:
                self.hits += 1
                return found["value"]
        self.misses += 1
        value = compute()
        if store is not None:
            self._store_if_exact(store, key, kind, value)
        return value

    def _store_if_exact(self, store: ReplyCache, key: str, kind: str, value: Any) -> None:
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            return
        if not _same(json.loads(text), value):
            return
        try:
            store.put(key, {"kind": kind, "value": value})
        except sqlite3.Error as error:
            warnings.warn(f"the results store {self.folder / RESULTS_FILE} could not be written: {error}",
                          ResultCacheWarning, stacklevel=3)

    def _open(self) -> ReplyCache | None:
        if self._store is None and self.folder is not None:
            try:
                self._store = ReplyCache(Path(self.folder) / RESULTS_FILE)
            except (sqlite3.Error, OSError) as error:
                warnings.warn(f"the results store in {self.folder} could not be opened: {error}; results are "
                              "computed", ResultCacheWarning, stacklevel=3)
                self.folder = None
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

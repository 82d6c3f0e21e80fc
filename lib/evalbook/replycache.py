"""A persistent SQLite cache of model replies, shared by all runs: the judge's (judge-cache.sqlite)
and the system under test's in 00_generate (generate-cache.sqlite).

The key is the sha256 of everything that changes a reply: the model, the base URL, the prompt
template's content hash, the sampling settings, the structured-output mode, the metric version
and the exact request text. The client stores only replies that parsed against the request's
schema; a transport error, a malformed reply and an unparseable reply are never stored, so a
rerun asks again for exactly those and reuses the rest. Each entry is committed as soon as it
arrives, so a run that dies halfway keeps every finished judgment and a rerun resumes from there.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any


def cache_key(parts: dict[str, Any]) -> str:
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ReplyCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        # Write-ahead logging with NORMAL sync: a commit no longer waits for an fsync (2-10 ms
        # here), which held up the client's event loop on every reply; a committed entry still
        # survives a crash of the process (only a power loss can drop the last few).
        self._connection.execute("PRAGMA journal_mode=WAL")
        self._connection.execute("PRAGMA synchronous=NORMAL")
        # A deleted entry's bytes are overwritten, not left in a free page: an entry dropped
        # because it held a secret (evalbook.redaction) must leave no copy in the file.
        self._connection.execute("PRAGMA secure_delete=ON")
        with self._connection:
            self._connection.execute(
                "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL, "
                "created_at TEXT DEFAULT CURRENT_TIMESTAMP)")

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._connection.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, reply: dict[str, Any]) -> None:
        with self._lock, self._connection:
            self._connection.execute("INSERT OR REPLACE INTO replies (key, reply) VALUES (?, ?)",
                                     (key, json.dumps(reply, ensure_ascii=False)))

    def delete(self, key: str) -> None:
        """Remove an entry, leaving no copy of it in the file or in its write-ahead log."""
        with self._lock:
            with self._connection:
                self._connection.execute("DELETE FROM replies WHERE key = ?", (key,))
            # the log's older frames still hold the entry until a checkpoint empties it
            self._connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def __len__(self) -> int:
        with self._lock:
            return self._connection.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def close(self) -> None:
        self._connection.close()

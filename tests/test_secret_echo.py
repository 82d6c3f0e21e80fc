"""A judge server that echoes the API key, end to end: two real runs through the runner, one
against each echo mode of the fault server (the key in a 500's error message; the key in every
string of a valid reply and in the fingerprint), and a comparison of the two. Every file written
under the outputs root, the judge's cache included, is read for the key: none may hold it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from evalbook.runner import run_pipeline
from evalbook.sidedocs import run_comparison
from faultserver import FaultServer
from paths import read_default_values

pytestmark = pytest.mark.slow  # real runs through the runner: kernels, models

KEY_VARIABLE = "EVALBOOK_ECHO_TEST_KEY"
SECRET = "sk-echo-4f1a9c7e2b6d"
EXAMPLES = 4


def profile_for(folder: Path, outputs: Path, base_url: str) -> Path:
    values = read_default_values(absolute_data_paths=True)
    values.update(outputs_root=str(outputs), limit=EXAMPLES)
    values["judge"].update(base_url=base_url, api_key_env=KEY_VARIABLE, sample_size=None, max_retries=0,
                           timeout_seconds=30, concurrency=2)
    values["judge"]["metrics"]["relevance"]["n_questions"] = 2
    path = folder / f"echo-{base_url.rsplit(':', 1)[-1].split('/')[0]}.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False), "utf-8")
    return path


@pytest.fixture(scope="module")
def echoed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("echo")
    outputs = folder / "outputs"
    runs = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_VARIABLE, SECRET)
        # run_pipeline sets HF_HUB_OFFLINE=1 for the offline profile; this undoes it after.
        patch.setenv("HF_HUB_OFFLINE", "1")
        # the first calls get the 500 echo (not retried), the rest are answered
        for mode, faults in (("echo_key_error", 2 * EXAMPLES), ("echo_key_content", None)):
            with FaultServer(mode, faults=faults) as server:
                profile = profile_for(folder, outputs, server.base_url)
                runs[mode] = run_pipeline(str(profile))
                assert server.chat_calls > 0
                assert server.authorizations == {f"Bearer {SECRET}"}  # the key was really sent
        comparison = run_comparison(str(profile), runs["echo_key_error"].run_id,
                                    runs["echo_key_content"].run_id)
    return outputs, runs, comparison


def test_the_key_was_echoed_and_redacted_in_each_run(echoed):
    _, runs, _ = echoed
    error_judge = (runs["echo_key_error"].run_dir / "judge.json").read_text("utf-8")
    content_judge = (runs["echo_key_content"].run_dir / "judge.json").read_text("utf-8")
    # the header is echoed whole ("Bearer sk-..."), so it is one secret, replaced whole
    assert "bad key [redacted]" in error_judge
    assert "the key is [redacted]" in content_judge


def test_no_file_a_run_a_comparison_or_a_cache_writes_holds_the_key(echoed):
    outputs, runs, comparison = echoed
    files = [path for path in outputs.rglob("*") if path.is_file()]
    names = {path.name for path in files}
    assert {"judge-cache.sqlite", "judge.json", "04_report.noinput.html", "03_judge.ipynb",
            "index.html"} <= names
    assert Path(comparison.path).exists()
    bare = SECRET.encode("utf-8")
    leaking = [str(path) for path in files
               if bare in path.read_bytes() or SECRET.encode("utf-16-le") in path.read_bytes()]
    assert leaking == []

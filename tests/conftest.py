"""Fixtures shared by the test files: the default profile, loaded or as values to edit, profile
files written into tmp_path, and two real runs of the sample. Each test gets its own copy of
everything it may edit, except the runs, which are made once for the whole session (a test that
writes beside them copies their outputs root first)."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml
from xdist.scheduler import LoadScopeScheduling

from evalbook.params import Profile, load_profile
from paths import DEFAULT_PROFILE, NO_JUDGE, TRUNCATED, read_default_values

if TYPE_CHECKING:
    from evalbook.runner import RunResult


# Fixtures that make real runs: a test that uses one is slow (make test-fast leaves it out), marked
# here so that it cannot be forgotten. Other slow tests carry the mark themselves.
SLOW_FIXTURES = frozenset({"sample_runs"})
# The module's headless Chromium (`browser`): a test that opens a page in it is slow too.
BROWSER_FIXTURE = "browser"

# make test runs the suite on two pytest-xdist workers (`--dist loadscope`), handing out units of
# work with `UnitScheduling` below. A unit is one test module, so that its module fixtures are made
# once, on one worker, except for two groups of modules that are one unit each:
# - the modules that use the session's sample runs: the runs are made once, and a test that writes
#   a comparison beside them never races one that lists what is there (a collected module that
#   uses them and is not listed here fails the collection); the session's own-CSV run (`own_run`)
#   is made once too, for the modules that read it;
SAMPLE_RUNS_GROUP = "sample_runs"
SAMPLE_RUNS_MODULES = frozenset({
    "test_calibrate_e2e", "test_calibrate_refusals", "test_compare_e2e", "test_compare_gate", "test_compare_pairwise",
    "test_compare_refusals", "test_failures", "test_label_e2e", "test_own_data", "test_page_lint", "test_pages",
    "test_report_page", "test_summary", "test_trend_e2e", "test_trend_page"})
# - the modules that start the real llama.cpp server, so that two servers never run at once:
#   llama.cpp's threads wait for each other, and two servers on two cores judged 3 answers in more
#   than 9 minutes, where one took under 3 (evalbook.judge.server.default_threads).
LOCAL_LLM_GROUP = "local_llm"
LOCAL_LLM_MODULES = frozenset({"test_judge_integration", "test_generate_integration", "test_runner_signals"})
# The most expensive units, in the order measured on a clean clone (docs/development.md), are
# handed out first, so that the two workers finish together; the rest follow in file order.
SLOWEST_FIRST = (LOCAL_LLM_GROUP, "test_engines", "test_tracking_mlflow", "test_runner_s3", SAMPLE_RUNS_GROUP,
                 "test_ci_recipe", "test_generate_run", "test_runner", "test_hostile_text", "test_secret_echo",
                 "test_onnxgraph")

if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    # One thread for torch and BLAS in each worker and in the kernels and servers it starts, which
    # inherit it: two workers on two cores, each with two threads, would fight over them.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its module's name, or the group its module is in."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    if module in SAMPLE_RUNS_MODULES:
        return SAMPLE_RUNS_GROUP
    return LOCAL_LLM_GROUP if module in LOCAL_LLM_MODULES else module


class UnitScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with `unit_of` as the scope. (xdist's own `loadgroup` cannot be
    used: it renames each test's `_nodeid`, which pytest 9 no longer reads.)"""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadscope":
        return UnitScheduling(config, log)
    return None


def pytest_collection_modifyitems(items):
    unlisted = set()
    for item in items:
        if BROWSER_FIXTURE in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
            if unit_of(item.nodeid) != SAMPLE_RUNS_GROUP:
                unlisted.add(item.nodeid.split("::", 1)[0])
    if unlisted:
        raise pytest.UsageError(f"{', '.join(sorted(unlisted))} use the sample runs: add them to "
                                "SAMPLE_RUNS_MODULES in tests/conftest.py")
    rank = {unit: position for position, unit in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(unit_of(item.nodeid), len(rank)))


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (a Playwright Browser, tests/browser.py) shared by a module's page
    tests, closed at the module's end; each test opens its pages in a context it closes.

    Not one for the session: while a Playwright sync browser is open, its event loop counts as
    running in the thread, so a later module's `asyncio.run` (the judge client's and evalbook.calls'
    tests of running inside and outside a loop) and another module's own launch (the labelling
    test's) fail. A module that holds such a test launches its browser inside the test."""
    from browser import offline_browser

    with offline_browser() as launched:
        yield launched


@pytest.fixture(scope="session", autouse=True)
def no_job_summary():
    """The suite run by GitHub Actions must not append its test runs to the job's summary page:
    tests that check the step summary set GITHUB_STEP_SUMMARY to a file of their own."""
    patch = pytest.MonkeyPatch()
    patch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    yield
    patch.undo()


@pytest.fixture(scope="session", autouse=True)
def one_embedding_cache(tmp_path_factory):
    """Every run of the session shares one embedding cache (EVALBOOK_EMBEDDING_CACHE), as a CI
    runner's runs do: the sample's texts are encoded once, not in each test's outputs root (a cold
    02_score took 20 s of the sample's 32 examples, a warm one 3.4 s). Scores do not depend on the
    cache. A test of the cache itself, or of where it lives, takes the default back with the
    `own_embedding_cache` fixture."""
    from evalbook.params import EMBEDDING_CACHE_VARIABLE

    # Under xdist, the workers' temporary folders share a parent: one cache for both workers (its
    # writers may run concurrently).
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    patch = pytest.MonkeyPatch()
    patch.setenv(EMBEDDING_CACHE_VARIABLE, str(shared / "shared" / "embedding-cache"))
    yield
    patch.undo()


@pytest.fixture
def own_embedding_cache(monkeypatch):
    """The default embedding cache back, <local outputs root>/embedding-cache: for a test of what
    the cache does or where it lives."""
    from evalbook.params import EMBEDDING_CACHE_VARIABLE

    monkeypatch.delenv(EMBEDDING_CACHE_VARIABLE, raising=False)


@dataclass
class SampleRuns:
    outputs: Path
    profile: Path  # a copy of default.yaml whose outputs_root is `outputs`, as a user would point it
    baseline: RunResult  # the sample as it is
    candidate: RunResult  # the sample with its answers truncated (predictions-truncated.jsonl)


@pytest.fixture(scope="session")
def sample_runs(tmp_path_factory) -> SampleRuns:
    """Two real runs of the sample without a judge, made once: the baseline scores
    data/sample/predictions.jsonl, the candidate changes one parameter, predictions_path, to the
    truncated answers."""
    from evalbook.runner import run_pipeline

    outputs = tmp_path_factory.mktemp("outputs")
    common = [f"outputs_root={outputs}", NO_JUDGE]
    with pytest.MonkeyPatch.context() as patch:
        # run_pipeline sets HF_HUB_OFFLINE=1 for the offline default profile; this undoes it after.
        patch.setenv("HF_HUB_OFFLINE", "1")
        baseline = run_pipeline(str(DEFAULT_PROFILE), common)
        candidate = run_pipeline(str(DEFAULT_PROFILE), [*common, f"predictions_path={TRUNCATED}"])
    values = read_default_values(absolute_data_paths=True)
    values["outputs_root"] = str(outputs)
    profile = tmp_path_factory.mktemp("params") / "profile.yaml"
    profile.write_text(yaml.safe_dump(values, sort_keys=False), "utf-8")
    return SampleRuns(outputs, profile, baseline, candidate)


# A user's own evaluation set, four rows (tests/test_own_data.py reads what its run makes). The last
# column is a check column (docs/checks-assertions.md): the answer must hold its text.
OWN_ROWS = [("What colour is the sky on a clear day?", "On a clear day the sky looks blue.", "Blue.", "It is blue.",
             "blue"),
            ("How many legs does a spider have?", "Spiders have eight legs.", "Eight.", "A spider has eight legs.",
             "eight"),
            ("Which gas do plants take in?", "Plants take in carbon dioxide.", "Carbon dioxide.", "Oxygen.",
             "carbon dioxide"),
            ("What is frozen water called?", "Frozen water is ice.", "Ice.", "", "")]


@pytest.fixture(scope="session")
def own_run(tmp_path_factory):
    """One run of the default profile on a CSV of the user's own, with one override (the
    outputs root and an unreachable judge only keep the test apart from the checkout), made once
    per session: (its folder, its report's path, the command's stderr). Read it; do not write
    beside it."""
    import csv
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("own")
    mine = folder / "helpdesk-eval.csv"
    with mine.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["question", "context", "answer", "generated_answer", "check_contains_ignore_case"])
        writer.writerows(OWN_ROWS)
    outputs = folder / "outputs"
    command = [sys.executable, "-m", "evalbook", "run", "--params", str(DEFAULT_PROFILE),
               "-p", f"input_path={mine.name}", "-p", f"outputs_root={outputs}",
               "-p", "judge.base_url=http://127.0.0.1:1/v1"]
    result = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    [report_path] = outputs.glob("local/eval-runs/*/*/*/*.json")
    return folder, report_path, result.stderr


@pytest.fixture
def default_profile() -> Profile:
    """params/default.yaml, loaded and validated, without overrides."""
    return load_profile(DEFAULT_PROFILE)


@pytest.fixture
def default_judge_config(default_profile: Profile) -> dict:
    """The default profile's `judge` section, a copy the test may edit."""
    return copy.deepcopy(default_profile["judge"])


@pytest.fixture
def default_values() -> dict:
    """default.yaml's values as written, relative paths and all."""
    return read_default_values()


@pytest.fixture
def relocated_default_values(tmp_path: Path) -> dict:
    """default.yaml's values for a run inside tmp_path: they read the shipped sample by its absolute
    path and write under tmp_path / "outputs"."""
    values = read_default_values(absolute_data_paths=True)
    values["outputs_root"] = str(tmp_path / "outputs")
    return values


@pytest.fixture
def write_profile(tmp_path: Path) -> Callable[..., Path]:
    """Write a profile (a dict of values, or raw text) into tmp_path and return its path."""

    def write(values: dict | str, name: str = "profile.yaml") -> Path:
        path = tmp_path / name
        text = values if isinstance(values, str) else yaml.safe_dump(values, sort_keys=False)
        path.write_text(text, "utf-8")
        return path

    return write


@pytest.fixture
def write_extending_profile(write_profile) -> Callable[..., Path]:
    """Write tmp_path/profile.yaml, which `extends:` default.yaml and sets the keys given."""

    def write(**values) -> Path:
        return write_profile({"extends": str(DEFAULT_PROFILE), **values})

    return write

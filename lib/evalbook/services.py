"""What a run asks to be started beside its stages, and stopped after them: the local model
server for 00_generate (and 02a_converse's system), the simulated user's, the service under
test, and the local judge server. One server at an address serves every role that names it.

`serving` starts them in order and stops them all on leaving, last started first; the runner
wraps a run's stages in it, and 00_generate's notebook when it runs on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from evalbook.errors import EvalbookError
from evalbook.generate.service import Service
from evalbook.judge.install import ensure_local_stack
from evalbook.judge.server import LocalServer
from evalbook.layout import JUDGE_SERVER_LOG, MODEL_SERVER_LOG, SERVICE_LOG, SIMULATOR_SERVER_LOG
from evalbook.params import Profile
from evalbook.processes import is_serving


def asks_system(profile: Profile) -> bool:
    """True when a stage of the run calls the system under test: 00_generate, or 02a_converse
    (unless it replays earlier transcripts)."""
    scenarios = profile["scenarios"]
    return profile["generate"]["enabled"] or (scenarios["enabled"] and scenarios["replay_from"] is None)


def simulates(profile: Profile) -> bool:
    scenarios = profile["scenarios"]
    return scenarios["enabled"] and scenarios["replay_from"] is None and profile["simulate"]["start_server"]


def local_model_needed(profile: Profile) -> str | None:
    """Why this profile needs the local llama.cpp server started (and so the local LLM stack);
    None when it does not, or when a server already answers where it would start one."""
    judge, generate = profile["judge"], profile["generate"]
    if judge["enabled"] and judge["start_server"] and not is_serving(judge["base_url"]):
        return f"{profile.source_path.name}'s judge starts the local judge server (judge.start_server)"
    if simulates(profile) and not is_serving(profile["simulate"]["base_url"]):
        return f"{profile.source_path.name}'s simulator starts the local model server (simulate.start_server)"
    if asks_system(profile) and generate["start_server"]:
        served = generate["openai"] if generate["kind"] == "openai" else judge
        if not is_serving(served["base_url"]):
            return f"{profile.source_path.name}'s generate section starts the local model server (generate.start_server)"
    return None


def ensure_local_model(profile: Profile, log: TextIO) -> None:
    """Install the local LLM stack first when the profile starts the local server and it is not
    installed yet (evalbook.judge.install; InstallFailed, exit 2, leaves the environment as it was)."""
    why = local_model_needed(profile)
    if why is not None:
        ensure_local_stack(log, why)


def start_judge_server(profile, run_dir: Path, log: TextIO):
    """Start the local judge server when the profile asks for it; None when not needed.

    A server already answering at the profile's base URL is used as it is and left running.
    """
    judge = profile["judge"]
    if not (judge["enabled"] and judge["start_server"]):
        return None
    return start_local_model(judge["base_url"], judge["model"], run_dir / JUDGE_SERVER_LOG, "judge", log)


def start_generation_server(profile, run_dir: Path, log: TextIO):
    """Start the local llama.cpp server for 00_generate when `generate.start_server` asks for it:
    at the openai kind's base URL, serving its model; for an http service (which calls the model
    itself, as the example service does), where the local judge is served, `judge.base_url` and
    `judge.model`, so that one server answers both. None when not needed or already running."""
    generate = profile["generate"]
    if not (asks_system(profile) and generate["start_server"]):
        return None
    served = generate["openai"] if generate["kind"] == "openai" else profile["judge"]
    return start_local_model(served["base_url"], served["model"], run_dir / MODEL_SERVER_LOG, "model", log)


def start_simulator_server(profile, run_dir: Path, log: TextIO):
    """Start the local llama.cpp server for the simulated user when `simulate.start_server` asks
    for it; None when not needed or when a server already answers there (the model server
    started for the system, say, at the same address)."""
    if not simulates(profile):
        return None
    simulate = profile["simulate"]
    return start_local_model(simulate["base_url"], simulate["model"], run_dir / SIMULATOR_SERVER_LOG, "simulator", log)


def start_local_model(base_url: str, alias: str, log_path: Path, role: str, log: TextIO):
    """The local llama.cpp server at `base_url`, serving the model as `alias`, started and ready;
    None when one already answers there (it is used as it is and left running)."""
    if is_serving(base_url):
        print(f"[evalbook] {role} server already running at {base_url}", file=log, flush=True)
        return None
    address = urlsplit(base_url)
    server = LocalServer(host=address.hostname or "127.0.0.1", port=address.port or 80, model_alias=alias)
    print(f"[evalbook] starting the local {role} server at {server.base_url}", file=log, flush=True)
    try:
        server.start(log_path=log_path)
        server.wait_ready(timeout=300)
    except BaseException:
        server.stop()  # also when a signal interrupts the start: never leave the server behind
        raise
    return server


def start_service(profile: Profile, run_dir: Path, log: TextIO):
    """Start `generate.service`, the system under test, and wait until it is ready; None when
    the profile names none."""
    generate = profile["generate"]
    if not (asks_system(profile) and generate["service"]):
        return None
    service = Service(generate["service"], profile.root, run_dir / SERVICE_LOG)
    print(f"[evalbook] starting the service under test at {service.address}", file=log, flush=True)
    try:
        service.start()
    except BaseException:
        service.stop()
        raise
    return service


class StartFailed(EvalbookError, RuntimeError):
    """A server or service the profile asks for did not start; the message says which and why."""


STARTS = (("model server start", "the local model server did not start", start_generation_server),
          ("simulator server start", "the local simulator server did not start", start_simulator_server),
          ("service start", "the service under test did not start", start_service),
          ("judge server start", "the local judge server did not start", start_judge_server))


@contextmanager
def judge_serving(profile: Profile, folder: Path, log: TextIO) -> Iterator[None]:
    """The local judge server alone, for a document that asks the judge (compare --pairwise):
    installed first when needed, started when `judge.start_server` asks for it (whatever
    `judge.enabled` says, which is about 03_judge), logging into `folder`, stopped on leaving."""
    judge = profile["judge"]
    if not judge["start_server"] or is_serving(judge["base_url"]):
        yield
        return
    ensure_local_stack(log, f"{profile.source_path.name}'s judge starts the local judge server (judge.start_server)")
    try:
        server = start_local_model(judge["base_url"], judge["model"], folder / JUDGE_SERVER_LOG, "judge", log)
    except RuntimeError as error:
        raise StartFailed(f"the local judge server did not start: {error}") from error
    try:
        yield
    finally:
        if server is not None:
            server.stop()


@contextmanager
def serving(profile: Profile, folder: Path, log: TextIO, judge: bool = True,
            on_start: Any = None) -> Iterator[None]:
    """Start what the profile asks for (the model server for generation, the service under test,
    and with `judge` the judge server), logging into `folder`; stop them all on leaving, last
    started first. `on_start(name)` is told each start before it begins. A start that fails
    raises StartFailed after stopping what had started."""
    with ExitStack() as started:
        for name, failure, start in STARTS if judge else STARTS[:3]:
            if on_start is not None:
                on_start(name)
            try:
                process = start(profile, folder, log)
            except RuntimeError as error:
                raise StartFailed(f"{failure}: {error}") from error
            if process is not None:
                started.callback(process.stop)
        yield

"""Benchmark: generate throughput against a local stand-in RAG service that answers after a fixed delay.

N synthetic examples (default 320: distinct seeded questions of words from a small built-in
list, nothing copied from a dataset) are sent through evalbook's generate stage,
`generate_answers`, with params/generate-local.yaml's `generate:` section pointed at the
stand-in: the real request template, client, concurrency limit, retries, cache and response
mapping. The service is `standin_server.py`, in its own process, answering `POST /answer` in
the example service's shape after a fixed delay. There is one cold run per concurrency (1, 8,
32 by default), each with a fresh temporary cache, then a warm rerun on the last cold run's
cache, which must make no call (checked on the client's count and on the server's): if it makes
any, the benchmark exits with code 1. Concurrency 1 asks only the first 40 examples
(--serial-examples), since one call at a time takes N x delay.

Throughput is calls per second over the call phase (from the start of the stage to its last
answer), against the ideal, concurrency / delay.

    make bench-generate                                      # 320 examples -> outputs/bench/generate.json
    .venv/bin/python benchmarks/bench_generate.py --examples 80 --concurrency 1,8,32
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The judge benchmark's ideal and targets are this one's too: one definition of both.
from bench_judge import targets, with_ideal  # noqa: E402
from benchlib import BENCH_OUTPUTS, ROOT, provenance, synthetic_texts, write_json  # noqa: E402
from standin_server import spawn_standin  # noqa: E402

SEED = 0
GENERATE_PROFILE = ROOT / "params" / "generate-local.yaml"
VOCABULARY = ["account", "address", "balance", "branch", "card", "charge", "claim", "contract",
              "delivery", "deposit", "invoice", "limit", "loan", "order", "password", "payment",
              "policy", "refund", "renewal", "statement", "subscription", "transfer", "warranty",
              "withdrawal"]


def synthetic_examples(n: int) -> pd.DataFrame:
    """`n` rows for the generate stage: an id, a distinct seeded question and a gold context."""
    questions = synthetic_texts(n, VOCABULARY, seed=SEED + 1, min_words=6, max_words=12)
    contexts = synthetic_texts(n, VOCABULARY, seed=SEED, min_words=20, max_words=50)
    return pd.DataFrame({"id": [f"generate-{i}" for i in range(n)],
                         "question": [q.rstrip(".") + "?" for q in questions],
                         "context": contexts})


def answer_url(base_url: str) -> str:
    """The stand-in's `POST /answer`, which sits at its root, beside the judge's `/v1`."""
    return base_url.removesuffix("/v1") + "/answer"


def generate_config(base_url: str, concurrency: int) -> dict[str, Any]:
    """generate-local.yaml's `generate:` section, pointed at the stand-in, with nothing to start."""
    from evalbook.params import load_profile

    return load_profile(GENERATE_PROFILE, {"generate.http.url": answer_url(base_url),
                                           "generate.concurrency": concurrency,
                                           "generate.service": None, "generate.start_server": False})["generate"]


def generate_once(table: pd.DataFrame, config: dict[str, Any], cache_path: Path, server) -> dict[str, Any]:
    """One generate stage over `table`, timed; the counts from the summary and the server."""
    from evalbook.generate.stage import generate_answers
    from evalbook.replycache import ReplyCache

    cache = ReplyCache(cache_path)
    served_before = server.stats().get("answers", 0)
    done_times: list[float] = []
    started = time.perf_counter()
    try:
        outcome = generate_answers(table, config, cache,
                                   on_done=lambda generation, client: done_times.append(time.perf_counter()))
    finally:
        cache.close()
    total = time.perf_counter() - started
    served = server.stats().get("answers", 0) - served_before
    summary = outcome.summary
    call_phase = max(done_times) - started
    return {"examples": len(table), "requests": len(done_times), "calls": summary["calls"],
            "cache_hits": summary["cache_hits"], "retries": summary["retries"], "n_ok": summary["n_ok"],
            "failures": summary["failures"], "server_requests": served,
            "latency_ms_p50": summary["latency_ms"]["p50"], "latency_ms_p90": summary["latency_ms"]["p90"],
            "call_phase_seconds": call_phase, "calls_per_s": summary["calls"] / call_phase,
            "total_seconds": total}


def problems(run: dict[str, Any]) -> list[str]:
    """What makes a run's numbers unsound: failed rows, retries, calls the server did not see."""
    found = []
    if run["n_ok"] != run["examples"]:
        found.append(f"{run['examples'] - run['n_ok']} rows failed {run['failures']}")
    if run["retries"]:
        found.append(f"{run['retries']} retries")
    if run["calls"] != run["server_requests"]:
        found.append(f"client counted {run['calls']} calls, the server {run['server_requests']}")
    return found


def exit_code(checks: dict[str, Any]) -> int:
    """1 when the warm rerun made a call (by either count), else 0; a throughput target is only reported."""
    return 0 if checks["warm_rerun_zero_calls"]["met"] is True else 1


def format_table(cold: list[dict[str, Any]], warm: dict[str, Any], checks: dict[str, Any]) -> str:
    lines = [f"{'run':<6}{'conc.':>6}{'examples':>10}{'calls':>7}{'served':>8}{'call s':>9}{'calls/s':>9}"
             f"{'ideal':>8}{'of ideal':>10}{'p50 ms':>8}"]
    for run in cold:
        lines.append(f"{'cold':<6}{run['concurrency']:>6}{run['examples']:>10}{run['calls']:>7}"
                     f"{run['server_requests']:>8}{run['call_phase_seconds']:>9.2f}{run['calls_per_s']:>9.1f}"
                     f"{run['ideal_calls_per_s']:>8.1f}{run['fraction_of_ideal']:>10.2f}"
                     f"{run['latency_ms_p50']:>8.0f}")
    lines.append(f"{'warm':<6}{warm['concurrency']:>6}{warm['examples']:>10}{warm['calls']:>7}"
                 f"{warm['server_requests']:>8}{warm['call_phase_seconds']:>9.2f}")
    lines.append("targets:")
    for check in checks.values():
        verdict = "not measured" if check["met"] is None else ("met" if check["met"] else "NOT met")
        value = check["value"]
        shown = f"{value:.2f}, " if isinstance(value, float) else (f"{value}, " if value is not None else "")
        lines.append(f"  {check['target']}: {shown}{verdict}")
    return "\n".join(lines)


def measure(table: pd.DataFrame, levels: list[int], serial_examples: int,
            delay: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The cold runs, one per concurrency with a fresh cache, and the warm rerun of the last."""
    with tempfile.TemporaryDirectory(prefix="evalbook-bench-generate-") as work, \
            spawn_standin(delay) as server:
        # Imports, the profile's validation and the first connection, outside any timing.
        generate_once(table.head(2), generate_config(server.base_url, 1), Path(work) / "warm-up.sqlite", server)

        cold, asked = [], table
        for concurrency in levels:
            asked = table.head(serial_examples) if concurrency == 1 else table
            print(f"cold run, concurrency {concurrency}, {len(asked)} examples ...", file=sys.stderr, flush=True)
            run = generate_once(asked, generate_config(server.base_url, concurrency),
                                Path(work) / f"cache-c{concurrency}.sqlite", server)
            cold.append(with_ideal(run, concurrency, delay))
        last = levels[-1]
        print(f"warm rerun on the concurrency {last} cache ...", file=sys.stderr, flush=True)
        warm = {**generate_once(asked, generate_config(server.base_url, last),
                                Path(work) / f"cache-c{last}.sqlite", server), "concurrency": last}
    return cold, warm


def shown_load(load: list[float] | None) -> str:
    return "unknown" if load is None else " ".join(f"{value:.2f}" for value in load)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=320)
    parser.add_argument("--serial-examples", type=int, default=40,
                        help="examples asked at concurrency 1, one call at a time (the first of --examples)")
    parser.add_argument("--delay-ms", type=float, default=200.0, help="the stand-in's delay per answer")
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated generate.concurrency values")
    parser.add_argument("--output", type=Path, default=BENCH_OUTPUTS / "generate.json")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",") if c]
    if not levels or min(levels) < 1:
        parser.error(f"--concurrency {args.concurrency!r}: give one or more whole numbers of 1 or more")
    if args.examples < 2 or args.serial_examples < 1:
        parser.error("--examples needs 2 or more and --serial-examples 1 or more")
    delay = args.delay_ms / 1000

    record = provenance()
    table = synthetic_examples(args.examples)
    cold, warm = measure(table, levels, args.serial_examples, delay)

    checks = targets(cold, warm)
    machine = record["machine"]
    load_at_start, load_at_end = machine["load_average_at_start"], list(os.getloadavg())
    serial = f" ({min(args.serial_examples, args.examples)} at concurrency 1)" if 1 in levels else ""
    print(f"{args.examples} examples{serial}, stand-in delay {args.delay_ms:.0f} ms, "
          f"{machine['logical_cpus']} CPUs, load average {shown_load(load_at_start)} at start, "
          f"{shown_load(load_at_end)} at end")
    print(format_table(cold, warm, checks))
    unsound = {f"cold c={r['concurrency']}": problems(r) for r in cold}
    unsound["warm"] = problems(warm)
    unsound = {name: found for name, found in unsound.items() if found}
    for name, found in unsound.items():
        print(f"warning: {name}: {'; '.join(found)}")
    output = {"examples": args.examples, "serial_examples": min(args.serial_examples, args.examples),
              "delay_seconds": delay, "cold": cold, "warm": warm, "targets": checks, "problems": unsound,
              "load_average_at_end": load_at_end,
              "server": "benchmarks/standin_server.py (POST /answer) in its own process",
              "profile": "params/generate-local.yaml, generate.http.url pointed at the stand-in",
              "throughput_definition": "generate calls / call phase (stage start to last answer); "
                                       "ideal = concurrency / delay", **record}
    print(f"wrote {write_json(args.output, output)}")
    code = exit_code(checks)
    if code:
        print(f"FAILED: the warm rerun made {warm['calls']} calls (the server saw {warm['server_requests']}); "
              f"it must make none", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: judge throughput against a local stand-in server that answers after a fixed delay.

N synthetic examples (default 500: seeded texts of words from the relevance embedding model's
vocabulary, nothing copied from a dataset) are judged on the default profile's three metrics
through evalbook's judge stage, `judge_table`: the real prompts, client, concurrency limit,
cache, parsing and score math. The server is `standin_server.py`, in its own process, replying
valid JSON for each metric after a fixed delay. There is one cold run per concurrency (1, 8,
32 by default), each with a fresh temporary cache, then a warm rerun on the last cold run's
cache, which must make no call (checked on the client's counts and on the server's).

Throughput is judge calls per second over the call phase (from the start of the stage to its
last reply), against the ideal, concurrency / delay. The end-to-end rate (judged examples per
second) also counts what follows the calls: relevance's embeddings and the score math.

    make bench-judge                                         # 500 examples -> outputs/bench/judge.json
    .venv/bin/python benchmarks/bench_judge.py --examples 50 --concurrency 1,8,32
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (BENCH_OUTPUTS, DEFAULT_PROFILE, model_vocabulary, perturb, provenance,  # noqa: E402
                      synthetic_texts, write_json)
from standin_server import spawn_standin  # noqa: E402

SEED = 0
ELIGIBLE_SOURCE = "EnterpriseSearchPolicy"
TARGET_CONCURRENCY = 8
TARGET_FRACTION = 0.8


def synthetic_examples(n: int, vocabulary: list[str]) -> pd.DataFrame:
    """`n` canonical rows for the judge: a question, a reference, an answer that perturbs it."""
    questions = synthetic_texts(n, vocabulary, seed=SEED + 1, min_words=6, max_words=12)
    references = synthetic_texts(n, vocabulary, seed=SEED, min_words=20, max_words=50)
    return pd.DataFrame({
        "id": [f"judge-{i}" for i in range(n)],
        "question": [q.rstrip(".") + "?" for q in questions],
        "context": references,
        "reference_answer": references,
        "generated_answer": [perturb(r, (SEED, i)) for i, r in enumerate(references)],
        "source": ELIGIBLE_SOURCE,
    })


def judge_config(base_url: str, concurrency: int) -> dict[str, Any]:
    """The default profile's judge section, pointed at the stand-in, judging every example."""
    from evalbook.params import load_profile

    return load_profile(DEFAULT_PROFILE, {"judge.base_url": base_url, "judge.concurrency": concurrency,
                                          "judge.sample_size": None})["judge"]


def judge_once(table: pd.DataFrame, config: dict[str, Any], cache_path: Path,
               embed: Callable, server) -> dict[str, Any]:
    """One judge stage over `table`, timed; the counts from the client, the summary and the server."""
    from evalbook.replycache import ReplyCache
    from evalbook.judge.stage import judge_table

    cache = ReplyCache(cache_path)
    served_before = server.stats().get("chat_completions", 0)
    reply_times: list[float] = []
    started = time.perf_counter()
    try:
        outcome = judge_table(table, config, cache, embed, seed=config["sample_seed"],
                              progress=lambda reply, stats: reply_times.append(time.perf_counter()))
    finally:
        cache.close()
    total = time.perf_counter() - started
    served = server.stats().get("chat_completions", 0) - served_before
    totals = outcome.summary["totals"]
    call_phase = max(reply_times) - started
    metrics = outcome.summary["metrics"]
    return {"examples": len(table), "requests": len(reply_times), "calls": totals["calls"],
            "cache_hits": totals["cache_hits"], "errors": totals["errors"], "server_requests": served,
            "unscored": {m: s["n_unscored"] for m, s in metrics.items()},
            "call_phase_seconds": call_phase, "calls_per_s": totals["calls"] / call_phase,
            "total_seconds": total, "examples_per_s_end_to_end": len(table) / total}


def with_ideal(run: dict[str, Any], concurrency: int, delay_seconds: float) -> dict[str, Any]:
    """The run with its ideal rate (each of `concurrency` slots busy all the time) and its share."""
    ideal = min(concurrency, max(run["requests"], 1)) / delay_seconds
    return {**run, "concurrency": concurrency, "ideal_calls_per_s": ideal,
            "fraction_of_ideal": run["calls_per_s"] / ideal}


def targets(cold: list[dict[str, Any]], warm: dict[str, Any] | None) -> dict[str, Any]:
    """Whether concurrency 8 reaches 0.8 of ideal and the warm rerun made no call (None: not run)."""
    at_target = next((r for r in cold if r["concurrency"] == TARGET_CONCURRENCY), None)
    fraction = None if at_target is None else at_target["fraction_of_ideal"]
    return {
        "concurrency_8_fraction_of_ideal": {
            "target": f">= {TARGET_FRACTION} of ideal at concurrency {TARGET_CONCURRENCY}",
            "value": fraction, "met": None if fraction is None else fraction >= TARGET_FRACTION},
        "warm_rerun_zero_calls": {
            "target": "a warm rerun makes 0 calls (client count and server count)",
            "value": None if warm is None else {"calls": warm["calls"], "server_requests": warm["server_requests"]},
            "met": None if warm is None else warm["calls"] == 0 and warm["server_requests"] == 0},
    }


def problems(run: dict[str, Any]) -> list[str]:
    """What makes a run's numbers unsound: errors, unscored examples, calls the server did not see."""
    found = []
    if run["errors"]:
        found.append(f"{run['errors']} errors")
    if any(run["unscored"].values()):
        found.append(f"unscored {run['unscored']}")
    if run["calls"] != run["server_requests"]:
        found.append(f"client counted {run['calls']} calls, the server {run['server_requests']}")
    return found


def format_table(cold: list[dict[str, Any]], warm: dict[str, Any] | None, checks: dict[str, Any]) -> str:
    lines = [f"{'run':<6}{'conc.':>6}{'calls':>7}{'served':>8}{'call s':>9}{'calls/s':>9}{'ideal':>8}"
             f"{'of ideal':>10}{'examples/s e2e':>16}"]
    for run in cold:
        lines.append(f"{'cold':<6}{run['concurrency']:>6}{run['calls']:>7}{run['server_requests']:>8}"
                     f"{run['call_phase_seconds']:>9.2f}{run['calls_per_s']:>9.1f}{run['ideal_calls_per_s']:>8.1f}"
                     f"{run['fraction_of_ideal']:>10.2f}{run['examples_per_s_end_to_end']:>16.1f}")
    if warm is not None:
        lines.append(f"{'warm':<6}{warm['concurrency']:>6}{warm['calls']:>7}{warm['server_requests']:>8}"
                     f"{warm['call_phase_seconds']:>9.2f}{'':>9}{'':>8}{'':>10}"
                     f"{warm['examples_per_s_end_to_end']:>16.1f}")
    lines.append("targets:")
    for check in checks.values():
        verdict = "not measured" if check["met"] is None else ("met" if check["met"] else "NOT met")
        value = check["value"]
        shown = f"{value:.2f}, " if isinstance(value, float) else (f"{value}, " if value is not None else "")
        lines.append(f"  {check['target']}: {shown}{verdict}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("--delay-ms", type=float, default=200.0, help="the stand-in's delay per reply")
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated judge.concurrency values")
    parser.add_argument("--output", type=Path, default=BENCH_OUTPUTS / "judge.json")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",") if c]
    delay = args.delay_ms / 1000

    from evalbook.judge.stage import enabled_metrics
    from evalbook.score.models import resolve_model
    from evalbook.params import load_profile
    from evalbook.pipeline import StageContext, relevance_embedder

    record = provenance()
    profile = load_profile(DEFAULT_PROFILE)
    metrics = enabled_metrics(profile["judge"])
    embedding = profile["judge"]["embedding"]
    folder = resolve_model(embedding["name"], embedding["source"], profile.root,
                           embedding.get("sha256"), "judge embedding").folder
    table = synthetic_examples(args.examples, model_vocabulary(folder))
    with tempfile.TemporaryDirectory(prefix="evalbook-bench-judge-") as work, \
            spawn_standin(delay) as server:
        embed = relevance_embedder(StageContext(profile, Path(work), "bench-judge", interactive=True))
        # Imports, the first connection and the embedding model's first call, outside any timing.
        judge_once(table.head(2), judge_config(server.base_url, 1), Path(work) / "warm-up.sqlite",
                   embed, server)

        cold = []
        for concurrency in levels:
            print(f"cold run, concurrency {concurrency} ...", file=sys.stderr, flush=True)
            run = judge_once(table, judge_config(server.base_url, concurrency),
                             Path(work) / f"cache-c{concurrency}.sqlite", embed, server)
            cold.append(with_ideal(run, concurrency, delay))
        warm = None
        if cold:
            last = cold[-1]["concurrency"]
            print(f"warm rerun on the concurrency {last} cache ...", file=sys.stderr, flush=True)
            warm = {**judge_once(table, judge_config(server.base_url, last),
                                 Path(work) / f"cache-c{last}.sqlite", embed, server), "concurrency": last}

    checks = targets(cold, warm)
    print(f"{args.examples} examples x {len(metrics)} metrics ({', '.join(metrics)}), "
          f"stand-in delay {args.delay_ms:.0f} ms, "
          f"load average at start {record['machine']['load_average_at_start']}")
    print(format_table(cold, warm, checks))
    unsound = {f"cold c={r['concurrency']}": problems(r) for r in cold}
    if warm is not None:
        unsound["warm"] = problems(warm)
    unsound = {name: found for name, found in unsound.items() if found}
    for name, found in unsound.items():
        print(f"warning: {name}: {'; '.join(found)}")
    output = {"examples": args.examples, "metrics": metrics,
              "delay_seconds": delay, "cold": cold, "warm": warm, "targets": checks,
              "problems": unsound, "server": "benchmarks/standin_server.py in its own process",
              "throughput_definition": "judge calls / call phase (stage start to last reply); "
                                       "ideal = concurrency / delay", **record}
    print(f"wrote {write_json(args.output, output)}")


if __name__ == "__main__":
    main()

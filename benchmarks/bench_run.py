"""Benchmark: a warm `make run` on the bundled sample against the floor of scoring it.

The floor is one bare Python process that loads the same two models (the default profile's,
sha256-verified) and scores the same 32 pairs with `score_answers`: the work a run cannot skip.
The run is `python -m evalbook run --params params/default.yaml`, the second of two into one
temporary outputs root, so that its embedding cache is warm, as in a user's second `make run`.
Both are timed as whole processes, wall clock, in this one benchmark run; the result is their
ratio. Target: the run at most 2.5 times the floor.

    make bench-run                                   -> outputs/bench/run.json
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import BENCH_OUTPUTS, DEFAULT_PROFILE, ROOT, provenance, write_json  # noqa: E402

TARGET_RATIO = 2.5
FLOOR = """
from evalbook.load import load_evaluation_set
from evalbook.params import load_profile
from evalbook.score.models import resolve_profile_models
from evalbook.score.scoring import AnswerScorer, score_answers

profile = load_profile({profile!r}, {{"scoring.embedding_cache.enabled": False}})
table = load_evaluation_set(profile.path("input_path"), profile.path("predictions_path")).table
scorer = AnswerScorer.from_profile(profile, resolve_profile_models(profile))
scored = score_answers(table, scorer, profile["retrieval"]["k"], show_progress=False)
assert len(scored) == len(table) == 32, len(scored)
"""


def timed(command: list[str], env: dict[str, str]) -> float:
    """Wall-clock seconds of one process, start to exit; a failure stops the benchmark."""
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def summarize(floor_seconds: float, run_seconds: float) -> dict[str, float | bool]:
    ratio = run_seconds / floor_seconds
    return {"floor_seconds": round(floor_seconds, 2), "warm_run_seconds": round(run_seconds, 2),
            "ratio": round(ratio, 2), "target_ratio": TARGET_RATIO, "meets_target": ratio <= TARGET_RATIO}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=BENCH_OUTPUTS / "run.json")
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory(prefix="evalbook-bench-run-") as outputs:
        run = [sys.executable, "-m", "evalbook", "run", "--params", str(DEFAULT_PROFILE),
               "-p", f"outputs_root={outputs}"]
        timed(run, env)  # the first run fills the embedding cache
        run_seconds = timed(run, env)
    floor_seconds = timed([sys.executable, "-c", FLOOR.format(profile=str(DEFAULT_PROFILE))], env)
    result = {**summarize(floor_seconds, run_seconds), "load_average": os.getloadavg(), **provenance()}
    write_json(args.output, result)
    print(f"warm run {result['warm_run_seconds']} s, floor {result['floor_seconds']} s: "
          f"{result['ratio']}x (target <= {TARGET_RATIO}x); load average {result['load_average'][0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Command line: `python -m evalbook run|replay|compare|calibrate|diff|trend ...`.

- `run --params <file> [-p key=value ...]`: the last line on stdout is the report's location
  (its absolute path, or its s3:// URL when the outputs root is on S3); the line before it,
  `summary: <path>`, names the run's summary.md (as does compare's, for the comparison's).
- `replay <run id|folder> --params <file> [-p key=value ...]`: a new run whose 02a_converse judges
  that run's transcripts again (scenarios.replay_from) instead of simulating; output as `run`'s.
  A run whose transcripts lack some conversations (interrupted) is judged on the rest, its report
  lists what is missing, and the command exits 1.
- `compare [--baseline <run id|report>] [--candidate <...>] [--fail-on '<metric><<tolerance>'|checks ...]
  [--pairwise]`: runs 05_compare (with --pairwise, the judge compares the answers too); the last
  line on stdout is the comparison JSON's location. Without runs, the two latest successful runs. Each --fail-on rule's outcome is printed before it (`gate failed: ...`).
- `calibrate --labels <file> [--run <run id|report>]`: runs 06_calibrate; the last line on stdout
  is the calibration JSON's location. Without a run, the latest successful run.
- `diff <run id> <run id>`: the params diff and the nbdime diff of the executed notebooks.
- `trend [--dataset NAME] [--since YYYY-MM-DD] [--min-paired N]`: writes trend.json and
  trend.html at the local outputs root, from the runs under the profile's outputs root (local or
  s3://), and rebuilds the index there, which links it; the last line on stdout is trend.html's path.

A run id may be shortened to its first 8 or more characters when no other run's id starts so;
a prefix that several runs share is refused, listing them.

Exit codes: 0 on success, 1 when a stage or an upload fails, 2 when the profile, an override, a
model, the outputs root, a named run or report (missing, unreadable on disk or on S3, or with a
repeated example id) or a labels file is unusable (found before anything is written), 130 when
SIGINT (Ctrl-C) and 143 when SIGTERM stopped the command (128 + the signal, as a shell reports a
process the signal ended); an interrupted run is marked "interrupted" in its run.json. A
comparison never fails on what it finds: it is a report. Only with `--fail-on` rules (the opt-in
regression gate) does compare exit 3, when a rule failed; a rule that cannot be applied exits 2.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

# evalbook is imported inside the commands, so that a Ctrl-C during the seconds its imports take
# also ends in one line rather than a traceback.

GATE_FAILED = 3  # compare's exit code when a --fail-on rule failed


def _run(args: argparse.Namespace) -> int:
    """A run of the profile. One whose report lists what it left out (a replay of an
    interrupted run) ends "incomplete": its folder and report are named, then the command
    exits 1 (IncompleteReplay)."""
    # here, not at the top: a Ctrl-C during evalbook's imports then ends in one line
    from evalbook.runner import run_pipeline
    from evalbook.scenarios.transcripts import IncompleteReplay

    try:
        result = run_pipeline(args.params, args.overrides)
    except IncompleteReplay as incomplete:
        _print_run(incomplete.result)
        raise
    _print_run(result)
    return 0


def _print_run(result) -> None:
    """A run's folder and pages, its summary.md, then its report's location last."""
    print(f"run folder: {result.run_dir}")
    for stage in result.stages:
        for key in ("html", "html_noinput"):
            if stage.get(key):
                print(f"{stage['stage']} {'HTML' if key == 'html' else 'HTML without code'}: {stage[key]}")
    if result.published:
        print(f"published {len(result.published)} objects")
    print(f"summary: {result.summary}")
    print(result.report_location)


def _replay(args: argparse.Namespace) -> int:
    """A new run of the profile whose 02a_converse reads the named run's transcripts instead of
    simulating: the same conversations judged again (by the profile's judge, which may differ).
    When the transcripts lack some of the scenario file's conversations (the run was interrupted),
    the run ends "incomplete", as `run` does (exit 1, after naming the report)."""
    # here, not at the top: a Ctrl-C during evalbook's imports then ends in one line
    from evalbook.params import load_profile, local_outputs_root, parse_overrides
    from evalbook.runs import find_run_folder

    profile = load_profile(args.params, parse_overrides(args.overrides), override_root=Path.cwd())
    folder = find_run_folder(local_outputs_root(profile), args.run)
    args.overrides = [*args.overrides, "scenarios.enabled=true", f"scenarios.replay_from={folder}"]
    return _run(args)


def _compare(args: argparse.Namespace) -> int:
    # here, not at the top: a Ctrl-C during evalbook's imports then ends in one line
    from evalbook.sidedocs import run_comparison

    given = {"resamples": args.resamples, "bootstrap_seed": args.bootstrap_seed,
             "confidence": args.confidence, "tolerance": args.tolerance, "n_regressions": args.regressions}
    parameters = {name: value for name, value in given.items() if value is not None}
    result = run_comparison(args.params, args.baseline, args.candidate, parameters, overrides=args.overrides,
                            fail_on=args.fail_on, pairwise=args.pairwise)
    gate = json.loads(result.path.read_text("utf-8"))["gate"]
    for rule in (gate or {}).get("rules", []):
        print(f"gate {'failed' if rule['failed'] else 'held'}: {rule['rule']!r}: {rule['why']}")
    _print_document(result, "comparison", "05_compare")
    return GATE_FAILED if gate and gate["failed"] else 0


def _print_document(result, what: str, stage: str) -> int:
    """A comparison's or calibration's folder and pages, then its JSON's location last."""
    print(f"{what} folder: {result.output_dir}")
    if result.html:
        print(f"{stage} HTML: {result.html}")
    if result.html_noinput:
        print(f"{stage} HTML without code: {result.html_noinput}")
    if getattr(result, "summary", None):  # a comparison's summary.md; a calibration writes none
        print(f"summary: {result.summary}")
    print(result.location)
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    # here, not at the top: a Ctrl-C during evalbook's imports then ends in one line
    from evalbook.sidedocs import run_calibration

    given = {"label_kind": args.label_kind, "good_label_min": args.good_label_min,
             "target_precision": args.target_precision, "n_disagreements": args.disagreements,
             "resamples": args.resamples, "bootstrap_seed": args.bootstrap_seed, "confidence": args.confidence}
    parameters = {name: value for name, value in given.items() if value is not None}
    result = run_calibration(args.params, args.run, args.labels, parameters, overrides=args.overrides)
    return _print_document(result, "calibration", "06_calibrate")


def _diff(args: argparse.Namespace) -> int:
    # here, not at the top: a Ctrl-C during evalbook's imports then ends in one line
    from evalbook.runs import find_run_folder
    from evalbook.params import load_profile, local_outputs_root, parse_overrides
    from evalbook.publish.rundiff import diff_runs

    profile = load_profile(args.params, parse_overrides(args.overrides), override_root=Path.cwd())
    root = local_outputs_root(profile)
    a, b = (find_run_folder(root, ref) for ref in (args.a, args.b))
    diff_runs(a, b, color=sys.stdout.isatty())
    return 0


def _trend(args: argparse.Namespace) -> int:
    # here, not at the top: a Ctrl-C during evalbook's imports then ends in one line
    from evalbook.params import is_remote, load_profile, local_outputs_root, parse_overrides
    from evalbook.publish.index import build_index
    from evalbook.publish.trend import build_trend_page
    from evalbook.trend.series import StepSettings

    profile = load_profile(args.params, parse_overrides(args.overrides), override_root=Path.cwd())
    root = profile["outputs_root"] if is_remote(profile["outputs_root"]) else local_outputs_root(profile)
    html, document = build_trend_page(root, local_outputs_root(profile), dataset=args.dataset, since=args.since,
                                      settings=StepSettings(min_paired=args.min_paired))
    print(f"trend JSON: {document}")
    print(f"run index: {build_index(local_outputs_root(profile))}")
    print(html)
    return 0


def _add_overrides(command: argparse.ArgumentParser) -> None:
    command.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                         help="override a profile value (dotted keys reach sections); repeatable")


def build_parser() -> argparse.ArgumentParser:
    """The command line: `run`, `compare`, `calibrate` and `diff`, each with `--params` and `-p`."""
    # here, not at the top: a Ctrl-C during evalbook's imports then ends in one line
    from evalbook.calibrate.settings import DEFAULTS as CALIBRATION, LABEL_KINDS
    from evalbook.compare.settings import DEFAULTS
    from evalbook.trend.series import MIN_PAIRED

    parser = argparse.ArgumentParser(prog="python -m evalbook", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run load, score, judge and report with Papermill")
    run.add_argument("--params", required=True, help="params profile, e.g. params/default.yaml")
    _add_overrides(run)
    run.set_defaults(handler=_run)

    replay = commands.add_parser("replay", help="judge an earlier run's scenario transcripts again, without simulating")
    replay.add_argument("run", help="the run whose transcripts.jsonl to judge: its id, its first 8+ characters, or its folder")
    replay.add_argument("--params", required=True, help="the profile to run with, e.g. params/scenarios-local.yaml")
    _add_overrides(replay)
    replay.set_defaults(handler=_replay)

    compare = commands.add_parser("compare", help="compare two runs with 05_compare (a report; a gate only with --fail-on)")
    compare.add_argument("--params", default="params/default.yaml",
                         help="profile giving the outputs root and env to look runs up in")
    _add_overrides(compare)
    compare.add_argument("--baseline",
                         help="baseline run id (or its first 8+ characters), or report path / s3:// URL")
    compare.add_argument("--candidate",
                         help="candidate run id (or its first 8+ characters), or report path / s3:// URL")
    compare.add_argument("--resamples", type=int, help=f"bootstrap resamples (default {DEFAULTS.resamples})")
    compare.add_argument("--bootstrap-seed", "--seed", dest="bootstrap_seed", type=int,
                         help=f"bootstrap seed (default {DEFAULTS.seed})")
    compare.add_argument("--confidence", type=float, help=f"CI level (default {DEFAULTS.confidence})")
    compare.add_argument("--tolerance", type=float,
                         help=f"a |delta| at or below this counts as unchanged (default {DEFAULTS.tolerance:g})")
    compare.add_argument("--regressions", type=int,
                         help=f"largest per-example regressions to list per metric (default {DEFAULTS.n_regressions})")
    compare.add_argument("--fail-on", dest="fail_on", action="append", metavar="RULE",
                         help="opt-in regression gate, one rule per metric, repeatable: '<metric><<tolerance>' "
                              "with a tolerance <= 0, e.g. 'bertscore_f1<-0.02' or 'groundedness_pass<-0.05', "
                              "or 'checks' alone (fails when any check newly fails on a shared example); "
                              f"exit {GATE_FAILED} when a rule fails (docs/compare.md)")
    compare.add_argument("--pairwise", action="store_true",
                         help="also ask the profile's judge which run answered each shared question better, "
                              "in both orders (2 calls per question and repeat, cached; docs/compare.md)")
    compare.set_defaults(handler=_compare)

    calibrate = commands.add_parser("calibrate", help="measure a run's metrics against human labels with 06_calibrate")
    calibrate.add_argument("--params", default="params/default.yaml",
                           help="profile giving the outputs root and env to look the run up in")
    _add_overrides(calibrate)
    calibrate.add_argument("--run", help="run id (or its first 8+ characters), or report path / s3:// URL; "
                                         "default: the latest successful run")
    calibrate.add_argument("--labels", required=True,
                           help="labels file (.csv, .jsonl or .parquet) with columns id, label and optionally rater, note")
    calibrate.add_argument("--label-kind", choices=LABEL_KINDS, help="the labels' kind (default: inferred and stated)")
    calibrate.add_argument("--good-label-min", type=float,
                           help=f"an ordinal or continuous label at or above this passes (default {CALIBRATION.good_label_min:g})")
    calibrate.add_argument("--target-precision", type=float,
                           help=f"precision the second threshold must reach (default {CALIBRATION.target_precision:g})")
    calibrate.add_argument("--disagreements", type=int,
                           help=f"examples listed per metric where it and the labels disagree most (default {CALIBRATION.n_disagreements})")
    calibrate.add_argument("--resamples", type=int, help=f"bootstrap resamples (default {CALIBRATION.resamples})")
    calibrate.add_argument("--bootstrap-seed", "--seed", dest="bootstrap_seed", type=int,
                           help=f"bootstrap seed (default {CALIBRATION.seed})")
    calibrate.add_argument("--confidence", type=float, help=f"CI level (default {CALIBRATION.confidence})")
    calibrate.set_defaults(handler=_calibrate)

    diff = commands.add_parser("diff", help="params and notebook-source diff of two runs (nbdime)")
    diff.add_argument("--params", default="params/default.yaml", help="profile giving the outputs root")
    _add_overrides(diff)
    diff.add_argument("a", help="run id, its first 8+ characters, or run folder A")
    diff.add_argument("b", help="run id, its first 8+ characters, or run folder B")
    diff.set_defaults(handler=_diff)

    trend = commands.add_parser("trend", help="every headline metric across runs, with intervals and real steps")
    trend.add_argument("--params", default="params/default.yaml",
                       help="profile giving the outputs root (local or s3://) to read runs from")
    _add_overrides(trend)
    trend.add_argument("--dataset", help="only the runs of this dataset name")
    trend.add_argument("--since", metavar="YYYY-MM-DD", help="only the points of runs started on or after this day (UTC)")
    trend.add_argument("--min-paired", type=int, default=MIN_PAIRED,
                       help=f"fewer shared examples than this and a step is 'not paired' (default {MIN_PAIRED})")
    trend.set_defaults(handler=_trend)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _handle(args)
    except KeyboardInterrupt:
        print(f"evalbook: {args.command} interrupted by SIGINT", file=sys.stderr)
        return 128 + signal.SIGINT


def _handle(args: argparse.Namespace) -> int:
    """Run the command; each failure evalbook names (evalbook.errors) becomes its message, after
    its heading line when it has one, and the exit code its class carries."""
    # here, not at the top: a Ctrl-C during evalbook's imports then ends in one line
    from evalbook.errors import EvalbookError
    from evalbook.interrupts import RunInterrupted

    try:
        return args.handler(args)
    except EvalbookError as error:
        heading = error.heading(args.command)
        print(f"evalbook: {heading}\n{error}" if heading else f"evalbook: {error}", file=sys.stderr)
        return error.exit_code
    except RunInterrupted as interrupted:
        print(f"evalbook: {interrupted}", file=sys.stderr)
        return interrupted.exit_code


if __name__ == "__main__":
    sys.exit(main())

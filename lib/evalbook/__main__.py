"""Command line: `python -m evalbook run --params <file> [-p key=value ...]`.

The last line printed on stdout is the absolute path of the report JSON. Exit codes: 0 on
success, 1 when a stage fails, 2 when the profile, an override or a model is unusable.
"""

from __future__ import annotations

import argparse
import sys

from evalbook.models import ModelUnavailableError
from evalbook.params import ParamsError
from evalbook.runner import RunFailed, run_pipeline


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evalbook", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run load, score, (judge) and report with Papermill")
    run.add_argument("--params", required=True, help="params profile, e.g. params/default.yaml")
    run.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a profile value (dotted keys reach sections); repeatable")
    args = parser.parse_args(argv)

    try:
        result = run_pipeline(args.params, args.overrides)
    except (ParamsError, ModelUnavailableError) as error:
        print(f"evalbook: {error}", file=sys.stderr)
        return 2
    except RunFailed as error:
        print(f"evalbook: run failed\n{error}", file=sys.stderr)
        return 1
    print(f"run folder: {result.run_dir}")
    for stage in result.stages:
        if stage.get("html"):
            print(f"{stage['stage']} HTML: {stage['html']}")
    print(result.report_path.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`open_calibration`: where the 06_calibrate notebook reads its run and labels, and writes to.

The counterpart of `evalbook.compare.context.open_comparison`: it loads the profile, finds and
reads the run's report, reads and checks the labels, matches them to the run's examples, and
settles the output folder (the runner's, or the interactive scratch folder) and the settings
(evalbook's defaults, overridden where a value is given).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evalbook.calibrate.labels import Labels, Matched, match_labels, read_labels
from evalbook.calibrate.settings import DEFAULTS, Settings
from evalbook.errors import RunFailed
from evalbook.layout import INTERACTIVE_CALIBRATION, interactive_folder
from evalbook.load import input_sha256
from evalbook.params import (find_root, is_remote, load_profile, local_outputs_root, locate_notebook_file,
                             locate_profile)
from evalbook.report.reader import RunReport, read_report
from evalbook.runs import find_report, latest_reports

# how a run without a report (one that failed or was stopped before 04_report) is refused
UNREPORTED = ("it has no scores to calibrate against the labels: name a run that succeeded with --run, "
              "or leave --run out to calibrate the latest successful one")


@dataclass(frozen=True)
class CalibrationContext:
    profile: Any
    report: RunReport
    labels: Labels
    matched: Matched
    output_dir: Path
    output_path: Path
    run_id: str
    interactive: bool
    settings: Settings

    def describe(self) -> str:
        scratch = " (interactive scratch folder)" if self.interactive else ""
        return (f"run:    {self.report.location}\nlabels: {self.labels.path} ({self.labels.kind_reason})\n"
                f"calibration {self.run_id} -> {self.output_path}{scratch}")

    def build(self) -> dict[str, Any]:
        """The calibrate-v1 document, stamped now, with the git commit of the code computing it."""
        # here, not at the top: it imports scipy and scikit-learn, which take most of a second
        from evalbook.calibrate.document import build_calibration

        return build_calibration(self.report, self.labels, self.matched, report_location=self.report.location,
                                 labels_sha256=input_sha256(self.labels.path),
                                 created_at=datetime.now(timezone.utc), calibration_id=self.run_id,
                                 settings=self.settings, root=find_root(Path(__file__).resolve().parent))


def latest_run(local_root: Path, env: str) -> str:
    """The report of the latest successful run of `env`."""
    runs = latest_reports(local_root, env, 1)
    if not runs:
        raise RunFailed(f"calibrating the latest run needs a successful run of env {env!r} under "
                        f"{local_root}; found none. Run `make run` first, or name one: --run")
    return str(runs[-1])


def run_to_calibrate(local_root: Path, run: str | None, env: str) -> str:
    """The report of the run `run` names (id, prefix, report path or URL), or of the latest
    successful run of `env` when it is None."""
    return find_report(local_root, run, env, unreported=UNREPORTED) if run else latest_run(local_root, env)


def open_calibration(params_path: str, run: str | None, labels_path: str, *, run_dir: str | None = None,
                     run_id: str | None = None, calibration_path: str | None = None,
                     **settings: Any) -> CalibrationContext:
    """Read the run and its labels, and settle where the calibration goes.

    `run` is a run id, an id prefix of 8+ characters, or a report path or s3:// URL; None: the
    latest successful run of the profile's env. `settings` are Settings fields; a None keeps
    evalbook's default.
    """
    profile = load_profile(locate_profile(params_path))
    local_root = local_outputs_root(profile)
    chosen = replace(DEFAULTS, **{key: value for key, value in settings.items() if value is not None})
    location = run_to_calibrate(local_root, run, profile["env"])
    report = read_report(location)
    if not is_remote(labels_path):
        labels_path = str(locate_notebook_file(labels_path, "labels file", "labels_path"))
    labels = read_labels(labels_path, chosen.label_kind)
    matched = match_labels(labels, [example["id"] for example in report.examples], report.run_id)
    interactive = run_dir is None
    output_dir = interactive_folder(local_root, profile["env"]) / "calibrate" if interactive else Path(run_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    return CalibrationContext(
        profile=profile, report=report, labels=labels, matched=matched, output_dir=output_dir,
        output_path=Path(calibration_path) if calibration_path else output_dir / INTERACTIVE_CALIBRATION,
        run_id=run_id or "interactive", interactive=interactive, settings=chosen)

"""`open_comparison`: where the 05_compare notebook reads its two runs and writes its comparison.

The counterpart of `evalbook.pipeline.open_stage` for stages 01-04: it loads the profile, finds
and reads both reports, settles the output folder (the runner's, or the interactive scratch
folder) and the comparison settings (evalbook's defaults, overridden where a value is given).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from evalbook.compare.settings import DEFAULTS, Settings
from evalbook.compare.document import build_comparison
from evalbook.layout import INTERACTIVE_COMPARISON, interactive_folder, params_file
from evalbook.runs import find_report, latest_pair
from evalbook.params import dotted_items, is_remote, load_profile, local_outputs_root, locate_profile
from evalbook.report.reader import RunReport, read_report


@dataclass(frozen=True)
class ComparisonContext:
    profile: Any
    baseline: RunReport
    candidate: RunReport
    output_dir: Path
    output_path: Path
    run_id: str
    interactive: bool
    settings: Settings

    def describe(self) -> str:
        scratch = " (interactive scratch folder)" if self.interactive else ""
        return (f"baseline:  {self.baseline.location}\ncandidate: {self.candidate.location}\n"
                f"comparison {self.run_id} -> {self.output_path}{scratch}")

    def params_differences(self) -> list[tuple[str, Any, Any]] | None:
        """Each resolved parameter whose value differs between the two runs' `params.yaml`
        (params_differences); None when either run folder is not on this machine (an s3:// report)."""
        folders = [Path(run.location).with_suffix("") for run in (self.baseline, self.candidate)]
        if any(is_remote(run.location) or not params_file(folder).is_file()
               for run, folder in zip((self.baseline, self.candidate), folders)):
            return None
        base, cand = (yaml.safe_load(params_file(folder).read_text("utf-8")) for folder in folders)
        return params_differences(base, cand)

    def build(self) -> dict[str, Any]:
        """The compare-v1 document of the two runs, stamped now."""
        return build_comparison(self.baseline, self.candidate, baseline_location=self.baseline.location,
                                candidate_location=self.candidate.location,
                                created_at=datetime.now(timezone.utc), settings=self.settings)


def params_differences(baseline: dict[str, Any] | None,
                       candidate: dict[str, Any] | None) -> list[tuple[str, Any, Any]] | None:
    """Each resolved parameter (dotted key) whose value differs between two runs' params, as
    (key, baseline value, candidate value), `run_id` left out; None when either is None."""
    if baseline is None or candidate is None:
        return None
    base, cand = dotted_items(baseline), dotted_items(candidate)
    keys = [key for key in dict.fromkeys([*base, *cand]) if key != "run_id"]
    return [(key, base.get(key), cand.get(key)) for key in keys if base.get(key) != cand.get(key)]


def open_comparison(params_path: str, baseline: str | None = None, candidate: str | None = None, *,
                    run_dir: str | None = None, run_id: str | None = None,
                    comparison_path: str | None = None, **settings: Any) -> ComparisonContext:
    """Find and read both runs, and settle where the comparison goes.

    `baseline` and `candidate` are run ids, id prefixes of 8+ characters, or report paths or
    s3:// URLs; with neither, the two latest successful runs of the profile's env. `settings`
    are Settings fields (resamples, seed, confidence, tolerance, n_regressions); a None keeps
    evalbook's default.
    """
    profile = load_profile(locate_profile(params_path))
    local_root = local_outputs_root(profile)
    if baseline is None and candidate is None:
        baseline, candidate = latest_pair(local_root, profile["env"])
    reports = [read_report(find_report(local_root, ref, profile["env"])) for ref in (baseline, candidate)]
    interactive = run_dir is None
    output_dir = interactive_folder(local_root, profile["env"]) / "compare" if interactive else Path(run_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    chosen = replace(DEFAULTS, **{key: value for key, value in settings.items() if value is not None})
    return ComparisonContext(
        profile=profile, baseline=reports[0], candidate=reports[1], output_dir=output_dir,
        output_path=Path(comparison_path) if comparison_path else output_dir / INTERACTIVE_COMPARISON,
        run_id=run_id or "interactive", interactive=interactive, settings=chosen)

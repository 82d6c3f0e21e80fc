"""One reader of a run report: where it is read from, what it must be, and a typed view of it.

`read_report` reads a report from a local path or an s3:// URL and checks it is a report-v1 1.x.
`RunReport` is a read-only view over the JSON: per-example values and judge records come through
the metric registry (`evalbook.metrics`), so figures, tables, the comparison and the index read a
report the same way and never branch on a metric's name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from evalbook.errors import UnusableInput
from evalbook.metrics import METRICS, Metric, metric, of_kind
from evalbook.params import is_remote
from evalbook.validation import ReportError, validate_report

REPORT_MAJOR = "1"
COMPARISON_KIND = "compare"
REQUIRED_KEYS = ("run_id", "timestamp", "dataset", "models", "retrieval_summary", "examples", "provenance")


class ReportUnreadable(UnusableInput, ValueError):
    """A report that cannot be read, is not JSON, or is not a report-v1 1.x."""


def read_report(location: str) -> RunReport:
    """Read a run's JSON report (a local path or an s3:// URL) and check it is a report-v1 1.x."""
    if location.startswith("s3://"):
        # here, not at the top: s3fs and botocore take a quarter of a second to import
        from evalbook.storage import read_bytes

        data = read_bytes(location)
    elif is_remote(location):
        raise ReportUnreadable(f"{location}: only local paths and s3:// URLs can be read")
    else:
        try:
            data = Path(location).read_bytes()
        except OSError as error:
            raise ReportUnreadable(f"cannot read report {location}: {error}") from None
    try:
        document = json.loads(data)
    except ValueError as error:
        raise ReportUnreadable(f"{location} is not JSON: {error}") from None
    check_report(document, location)
    return RunReport(document, location)


def check_report(document: Any, location: str) -> None:
    """Raise ReportUnreadable unless `document` is a run report of schema major version 1.

    A report of the current minor version is validated against the schema; an older 1.x is
    checked for the keys every reader needs.
    """
    from evalbook.report.document import SCHEMA_VERSION  # here, not at the top: it imports pandas

    if not isinstance(document, dict):
        raise ReportUnreadable(f"{location}: a report is a JSON object, got {type(document).__name__}")
    if document.get("kind") == COMPARISON_KIND:
        raise ReportUnreadable(f"{location} is a comparison, not a run report")
    version = document.get("schema_version")
    if not isinstance(version, str) or version.split(".")[0] != REPORT_MAJOR:
        raise ReportUnreadable(f"{location}: schema_version {version!r} is not a report-v1 version "
                               f"(major {REPORT_MAJOR}); this comparison reads reports 1.x only")
    missing = [key for key in REQUIRED_KEYS if key not in document]
    if missing:
        raise ReportUnreadable(f"{location}: the report lacks {', '.join(missing)}")
    if version == SCHEMA_VERSION:
        try:
            validate_report(document)
        except ReportError as error:
            raise ReportUnreadable(f"{location}: {error}") from None


def judge_entry(example: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The example's judge record for metric `name`; None when it was not judged on it."""
    record = example.get("judge")
    if not isinstance(record, dict) or record.get("status") != "judged":
        return None
    entry = record.get(name)
    return entry if isinstance(entry, dict) else None


@dataclass(frozen=True)
class RunReport:
    """A read-only view over a run report's JSON (`data`), read from `location` when known."""

    data: dict[str, Any]
    location: str | None = None

    @classmethod
    def of(cls, report: RunReport | dict[str, Any]) -> RunReport:
        return report if isinstance(report, RunReport) else cls(report)

    @property
    def run_id(self) -> str:
        return self.data["run_id"]

    @property
    def examples(self) -> list[dict[str, Any]]:
        return self.data["examples"]

    @property
    def judge_summary(self) -> dict[str, Any]:
        return self.data.get("judge_summary") or {}

    @property
    def judge_ran(self) -> bool:
        return self.judge_summary.get("status") == "ran"

    def judged_metrics(self) -> tuple[Metric, ...]:
        """The judge metrics this report has a summary for, in the registry's order."""
        summaries = self.judge_summary.get("metrics") or {}
        return tuple(m for m in of_kind("judge") if m.name in summaries)

    def summary(self, name: str) -> dict[str, Any] | None:
        return metric(name).summary(self.data)

    def headline_means(self) -> dict[str, Any]:
        """The registry's headline metrics and the run's mean of each (a rate for top-k match),
        by name; a judge metric only when the report has its summary."""
        return {m.name: m.mean(self.data) for m in METRICS
                if m.headline and (m.kind != "judge" or m.summary(self.data) is not None)}

    def values(self, name: str) -> list[float | None]:
        """Each example's value of metric `name`, None where it has none."""
        described = metric(name)
        return [described.value(example) for example in self.examples]

    def score_rows(self, names: Iterable[str]) -> list[dict[str, Any]]:
        """One row per example: its id and its value of each metric (None when absent)."""
        described = [metric(name) for name in names]
        return [{"id": e["id"], **{m.name: m.value(e) for m in described}} for e in self.examples]

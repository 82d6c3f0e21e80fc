"""Every example of a run in one table to explore: searched, filtered column by column, sorted,
and each row opened on its whole record (issue 49).

`explorer_frame` is the table as data: one row per example with its texts, every metric it has
a value for (the registry's order and labels), each check's outcome, and its slice levels and
metadata. `explorer_html` is the same table for a page: DataTables, from the bundle the pinned
`itables` package ships, embedded whole (base64, imported from a blob: URL) so that the page works
offline, in JupyterLab and in the exported HTML alike.

Every cell is escaped by evalbook.escaping (cell_html) before DataTables gets it, and the rows
reach the page as JSON, gzipped and base64 (12,000 rows of rag-dataset-12000's texts: 9.6 MB of
JSON, 3.7 MB so packed), unpacked by the page's script into DataTables' data. So no user text
stands in the page where a browser could read it as markup or script, and DataTables draws only
the rows on screen: 12,000 rows read from the page's HTML took 17 s to start in Chromium, as data
1-3 s (docs/performance.md). A row's record (each check's outcome with its reason, each judge
metric's statements or criteria with their verdicts and reasons) is a hidden column: searched
with the rest, and listed under the row when its id is clicked.
"""

from __future__ import annotations

import base64
import gzip
import json
from functools import lru_cache
from pathlib import Path
from typing import Any
from uuid import uuid4

import pandas as pd
from itables import options as itables_options

from evalbook.escaping import cell_html, escape_html, shown_text
from evalbook.formatting import number
from evalbook.judge.display import verdict_text
from evalbook.metrics import METRICS, Metric
from evalbook.report.reader import RunReport, judge_entry
from evalbook.templating import render

TEXTS = (("id", "id"), ("question", "question"), ("answer", "generated_answer"), ("reference", "reference_answer"))
FAILED_CHECKS = "failed checks"
CHECK_COLUMN = "{name} check"
SOURCE = "source"
WIDE = ("question", "answer", "reference")  # columns of long text, given room to wrap in
MATCH_WORDS = {1.0: "yes", 0.0: "no"}  # a top-k match, read as a word
NOTHING_MORE = "no check ran on this example, and the judge did not score it"


def _metric_value(described: Metric, example: dict[str, Any]) -> Any:
    value = described.value(example)
    if value is None:
        return None
    if described.name == "top_k_match":
        return MATCH_WORDS[value]
    return int(value) if described.name == "rank" else value


def _metrics(report: RunReport) -> list[tuple[str, Metric]]:
    """(label, metric) of each metric some example has a value for, in the registry's order; a
    check is left out, as its own column shows its status (error too, which has no value)."""
    k = (report.data.get("retrieval_summary") or {}).get("k")
    return [(described.label_at(k), described) for described in METRICS if described.kind != "check"
            and any(described.value(example) is not None for example in report.examples)]


def _first_seen(names: list[list[str]]) -> list[str]:
    return list(dict.fromkeys(name for group in names for name in group))


class _Columns:
    """Column titles in order, each title once: a later one that repeats an earlier title is
    told apart by what it is ("domain (metadata)")."""

    def __init__(self) -> None:
        self.titles: list[str] = []

    def add(self, title: str, what: str) -> str:
        if title in self.titles:
            title = f"{title} ({what})"
        self.titles.append(title)
        return title


def _layout(report: RunReport) -> dict[str, Any]:
    """Which columns the explorer has, and where each one's value comes from."""
    examples = report.examples
    columns = _Columns()
    for title, _ in TEXTS:
        columns.add(title, "text")
    metrics = [(columns.add(label, "metric"), described) for label, described in _metrics(report)]
    checks = _first_seen([[o["check"] for o in example.get("checks") or []] for example in examples])
    failed = columns.add(FAILED_CHECKS, "checks") if checks else None
    check_columns = [(columns.add(CHECK_COLUMN.format(name=name), "check"), name) for name in checks]
    slices = _first_seen([list(example.get("slices") or {}) for example in examples])
    slice_columns = [(columns.add(name, "slice"), name) for name in slices]
    metadata = [name for name in _first_seen([list(example.get("metadata") or {}) for example in examples])
                if name not in slices]
    metadata_columns = [(columns.add(name, "metadata"), name) for name in metadata]
    source = (columns.add(SOURCE, "source") if SOURCE not in slices
              and any(example.get("source") is not None for example in examples) else None)
    return {"titles": columns.titles, "metrics": metrics, "failed": failed, "checks": check_columns,
            "slices": slice_columns, "metadata": metadata_columns, "source": source}


def _row(example: dict[str, Any], layout: dict[str, Any]) -> dict[str, Any]:
    row = {title: example.get(key) for title, key in TEXTS}
    row.update({title: _metric_value(described, example) for title, described in layout["metrics"]})
    outcomes = {outcome["check"]: outcome["status"] for outcome in example.get("checks") or []}
    if layout["failed"] is not None:
        failed = [name for name, status in outcomes.items() if status == "fail"]
        row[layout["failed"]] = ", ".join(failed) if failed else None
    row.update({title: outcomes.get(name) for title, name in layout["checks"]})
    row.update({title: (example.get("slices") or {}).get(name) for title, name in layout["slices"]})
    row.update({title: (example.get("metadata") or {}).get(name) for title, name in layout["metadata"]})
    if layout["source"] is not None:
        row[layout["source"]] = example.get("source")
    return row


def explorer_frame(report: RunReport | dict[str, Any]) -> pd.DataFrame:
    """One row per example, in the report's order: id, question, answer, reference; each metric
    some example has a value for, labelled as the registry labels it at the run's k (a top-k
    match as yes or no, a rank as an integer); `failed checks` (the names of the checks the
    answer failed) and one `<name> check` column per check with its status (pass, fail, error);
    then each slice's level, each metadata column that is not a slice, and the source. A missing
    value is None; a column no example has a value for is left out."""
    view = RunReport.of(report)
    return _frame(view, _layout(view))


def _frame(report: RunReport, layout: dict[str, Any]) -> pd.DataFrame:
    rows = [_row(example, layout) for example in report.examples]
    return pd.DataFrame(rows, columns=layout["titles"], dtype=object)


# ---------------------------------------------------------------- the page

def _record(example: dict[str, Any]) -> list[str]:
    """What a row's record adds to the row, as lines of escaped text: each check's outcome with
    its reason, and each judge metric's score with what the judge said (its statements or
    criteria with their verdicts and reasons, its questions, why it is unscored)."""
    lines = [f"{o['check']}: {o['status']}, {shown_text(o['reason'])}" for o in example.get("checks") or []]
    for described in METRICS:
        entry = judge_entry(example, described.name) if described.kind == "judge" else None
        if entry is not None:
            lines.append(f"{described.label} {number(entry.get('score'))}\n{shown_text(verdict_text(entry))}")
    return [escape_html(line) for line in lines or [NOTHING_MORE]]


@lru_cache(maxsize=1)
def _bundle() -> tuple[str, str]:
    """DataTables as itables ships it, (script, style sheet), each base64: text a page holds
    without escaping, decoded in the browser."""
    script = Path(itables_options.dt_bundle)
    return (base64.b64encode(script.read_bytes()).decode("ascii"),
            base64.b64encode(script.with_suffix(".css").read_bytes()).decode("ascii"))


def _packed(value: Any) -> str:
    """`value` as JSON, gzipped, base64: no text of it can be read, or run, where it stands."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)).decode("ascii")


def explorer_html(report: RunReport | dict[str, Any]) -> str:
    """The explorer for a page: explorer_frame as a DataTables table that works offline (search
    box, a filter box under each column, sort by a column's name, a click on an id opens the
    row's record). Each cell is escaped by escaping.cell_html (numbers to 3 decimals, texts cut
    to the page's length). A report without examples gives one sentence."""
    view = RunReport.of(report)
    layout = _layout(view)
    frame = _frame(view, layout)
    numeric = {title for title, described in layout["metrics"] if described.name != "top_k_match"}
    rows = [[cell_html(value) for value in values] for values in frame.itertuples(index=False, name=None)]
    if any(example.get("checks") or example.get("judge") for example in view.examples):
        rows = [[*row, _record(example)] for row, example in zip(rows, view.examples)]
        with_records = True
    else:
        with_records = False
    script, style = _bundle()
    return render("explorer.html", explorer_id=f"evalbook-explorer-{uuid4().hex}",
                  columns=[{"title": title, "numeric": title in numeric, "wide": title in WIDE} for title in frame.columns],
                  n_rows=len(rows), rows=_packed(rows), records=with_records, script=script, style=style)

"""Where a run fails: the report's `slices` section (issue 26) for reading.

The report's `slices` section (evalbook.report.slices) holds, for every level of every slice and
every tested metric, n, the mean with its interval, the difference from the rest of the run with
its interval, a Benjamini-Hochberg q-value and a verdict. This module says it in words:

- `flagged_levels(report)`: the levels flagged worse or better, one entry per level, worse first
  and then better, each group ordered by q (smallest first) and then by how far the level lies
  from the rest. A level flagged on several metrics is one entry that names each metric, its
  most certain first; its lowest examples are those of that first metric.
- `where_it_fails(report)`: the context that `where_it_fails.html` (04_report) and summary.md
  (evalbook.publish.summary) render: the flagged levels, or what was tested when nothing was;
  how many levels were too few to tell; the notes (columns skipped, why there are no topics).
- `slices_frame(report)` and `slices_table(report)`: every level and metric as a table, and
  `slices_method_html(report)`, how they were tested, for under it.

A level is named by its slice's kind: a topic as "Questions about topic *refund · card · fee*",
any other slice as "Examples with *domain = bank*". A level re-tested against a rest without
some levels (`set_aside`) says which: its "elsewhere" leaves them out.

Slice names, levels, ids and questions are user text: the templates escape them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from pandas.io.formats.style import Styler

from evalbook.escaping import readable_table, shown_text
from evalbook.formatting import interval, number, p_value, signed
from evalbook.metrics import BY_NAME
from evalbook.metrics import metric as registered
from evalbook.report.slices import BETTER, TOO_FEW, TOPIC, WORSE
from evalbook.templating import render

QUESTION_CHARACTERS = 300  # of a lowest example's question shown under its level
FRAME_COLUMNS = ("slice", "level", "metric", "n", "mean [low, high]", "difference [low, high]", "q", "verdict")
SUBJECTS = {True: "Questions about topic", False: "Examples with"}  # by whether the slice is the topics
VERDICT_COLOURS = {WORSE: "background-color: #f8d7d3", BETTER: "background-color: #d6e6f5"}


def slices_of(report: dict[str, Any]) -> dict[str, Any] | None:
    """The report's `slices` section; None for a run that was not sliced or a report written
    before slices existed."""
    return report.get("slices")


def level_name(kind: str, slice_name: str, level: str) -> tuple[str, str]:
    """(the words before it, the level as emphasised): ("topic", "refund · card · fee") for a
    topic, ("", "domain = bank") for any other slice; a slice whose name holds "=" already
    (`retrieval at k = 5`) takes a colon instead."""
    if kind == TOPIC:
        return "topic", level
    joiner = ": " if "=" in slice_name else " = "
    return "", f"{slice_name}{joiner}{level}"


def q_phrase(q: float | None) -> str:
    """`q = 0.003`, or `q < 0.001` where three decimals would read 0 (formatting.p_value)."""
    shown = p_value(q)
    return f"q {shown}" if shown.startswith("<") else f"q = {shown}"


def _rank(entry: dict[str, Any]) -> tuple[float, float]:
    """Most certain first, then furthest from the rest."""
    return (entry["q_value"], -abs(entry["difference"] or 0.0))


def _metric_clause(entry: dict[str, Any]) -> dict[str, Any]:
    return {"label": registered(entry["metric"]).label, "mean": entry["mean"], "low": entry["low"],
            "high": entry["high"], "rest_mean": entry["rest_mean"], "n": entry["n"], "q": entry["q_value"],
            # p_value writes a q too small for 3 decimals as "< 0.001": no "=" before it
            "q_below": p_value(entry["q_value"]).startswith("<"),
            "set_aside": [level_name(entry["kind"], entry["slice"], value) for value in entry.get("set_aside") or ()]}


def flagged_levels(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The flagged levels (module docstring), each with: verdict, kind, slice, level, `name`
    (level_name), `metrics` (label, mean, low, high, rest_mean, n and q of each
    flagged metric, most certain first, with `q_below` when q reads "< 0.001" and `set_aside`,
    the levels its "elsewhere" leaves out, each as (before, name)), `subject` (the words before
    the name: "Questions about topic" or "Examples with"), `lowest` (up to 3: id and question,
    shortened) and `lowest_label` (the metric the lowest are lowest on)."""
    section = slices_of(report)
    if not section:
        return []
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for entry in section["levels"]:
        if entry["verdict"] in (WORSE, BETTER):
            groups.setdefault((entry["verdict"], entry["slice"], entry["level"]), []).append(entry)
    flagged = []
    for (verdict, slice_name, level), entries in groups.items():
        entries = sorted(entries, key=_rank)
        first = entries[0]
        flagged.append({
            "verdict": verdict, "kind": first["kind"], "slice": slice_name, "level": level,
            "subject": SUBJECTS[first["kind"] == TOPIC], "name": level_name(first["kind"], slice_name, level)[1],
            "metrics": [_metric_clause(entry) for entry in entries],
            "lowest": [{"id": example["id"], "question": shown_text(example["question"], QUESTION_CHARACTERS)}
                       for example in first.get("lowest") or []],
            "lowest_label": registered(first["metric"]).label, "rank": _rank(first)})
    flagged.sort(key=lambda entry: (entry["verdict"] != WORSE, *entry["rank"]))
    for entry in flagged:
        del entry["rank"]
    return flagged


def counted(n: int, noun: str) -> str:
    """`1 test`, `123 tests`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _too_few(section: dict[str, Any]) -> int:
    """How many levels are too few to tell for at least one metric."""
    return len({(entry["slice"], entry["level"]) for entry in section["levels"] if entry["verdict"] == TOO_FEW})


def _notes(section: dict[str, Any]) -> list[str]:
    """The section's notes, and why there are no topics when it says so and the notes do not."""
    notes = list(section.get("notes") or [])
    reason = (section.get("topics") or {}).get("reason")
    if reason and not any(reason in note for note in notes):
        notes.append(f"no topics by meaning: {reason}")
    return notes


def where_it_fails(report: dict[str, Any]) -> dict[str, Any]:
    """The "Where it fails" section as plain values: `present` (False for a report without a
    slices section, when nothing else is set but `reason`), `flagged` (flagged_levels),
    `n_tests`, `n_slices`; `tests`, `slices`, `metrics` and `levels` (the levels of all slices)
    counted in words ("9 slices"); `too_few` (levels too few to tell on some metric), `min_n`,
    `q_threshold` and `notes`."""
    section = slices_of(report)
    if not section:
        reason = "the run was not sliced" if "slices" in report else "the report was written before slices existed"
        return {"present": False, "reason": reason, "flagged": []}
    settings = section["settings"]
    n_levels = sum(len(column["levels"]) for column in section["columns"])
    return {"present": True, "reason": None, "flagged": flagged_levels(report),
            "n_tests": section["n_tests"], "n_slices": len(section["columns"]),
            "tests": counted(section["n_tests"], "test"), "slices": counted(len(section["columns"]), "slice"),
            "metrics": counted(len(section["metrics"]), "metric"), "levels": counted(n_levels, "level"),
            "too_few": _too_few(section), "min_n": settings["min_n"], "q_threshold": settings["q_threshold"],
            "notes": _notes(section)}


def where_it_fails_html(report: dict[str, Any]) -> str:
    """The section's sentences, lowest examples and notes as an HTML fragment."""
    return render("where_it_fails.html", **where_it_fails(report))


def slices_method_html(report: dict[str, Any]) -> str | None:
    """How the levels were tested (the section's `method`) as a small paragraph, for under the
    table; None without slices."""
    method = (slices_of(report) or {}).get("method")
    return None if method is None else render("where_it_fails_method.html", method=method)


# ---------------------------------------------------------------- every level as a table

def _metric_order(name: str) -> int:
    return list(BY_NAME).index(name) if name in BY_NAME else len(BY_NAME)


def slices_frame(report: dict[str, Any]) -> pd.DataFrame:
    """Every level of every slice for every tested metric, one row each, in the order of the
    slices, their levels and the registry's metrics: slice, level, metric (its label), n, the
    mean with its interval, the difference from the rest with its interval (signed), q and the
    verdict; numbers as evalbook.formatting writes them. Empty, with the columns, without slices."""
    section = slices_of(report) or {"columns": [], "levels": []}
    order = {(column["name"], level): (i, j) for i, column in enumerate(section["columns"])
             for j, level in enumerate(column["levels"])}
    entries = sorted(section["levels"], key=lambda entry: (
        order.get((entry["slice"], entry["level"]), (len(order), 0)), _metric_order(entry["metric"])))
    rows = [{"slice": entry["slice"], "level": entry["level"], "metric": registered(entry["metric"]).label,
             "n": entry["n"], "mean [low, high]": f"{number(entry['mean'])} {interval(entry['low'], entry['high'])}",
             "difference [low, high]": (f"{signed(entry['difference'])} "
                                        f"{interval(entry['difference_low'], entry['difference_high'])}"),
             "q": p_value(entry["q_value"]), "verdict": entry["verdict"]}
            for entry in entries]
    return pd.DataFrame(rows, columns=list(FRAME_COLUMNS)).astype({"n": "int64"})


def slices_table(report: dict[str, Any]) -> Styler:
    """slices_frame for reading (escaped, wrapped), the flagged verdicts shaded."""
    frame = slices_frame(report)
    context = where_it_fails(report)
    caption = (f"{len(frame)} levels and metrics; {len(context['flagged'])} levels flagged"
               if context["present"] else "No slices in this report")
    styler = readable_table(frame, caption)
    if len(frame):
        styler = styler.map(lambda verdict: VERDICT_COLOURS.get(verdict, ""), subset=["verdict"])
    return styler

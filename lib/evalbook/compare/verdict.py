"""The verdict of a comparison: the one sentence 05_compare's page leads with, and what it left out.

Each compared metric reads one of four ways (`reading`): *worse* or *better* when the whole
bootstrap interval of its paired mean delta lies on one side of 0 (by the metric's direction),
*noise* when the interval holds 0, *unchanged* when every pair's delta is within the tolerance.
The sentence counts them ("Candidate worse on 4 of 9 metrics, unchanged on 5"), then how many
examples got worse on the first headline metric that moved, any checks that newly fail, and the
gate ("gate off" without rules). Its parts carry a tone (worse, better, noise, plain) that the
page colours: red, green, grey.

`not_compared` says, one phrase per group, which metrics have no deltas to show and why, in a
reader's words: no status, no exception, no judge label None.
"""

from __future__ import annotations

from typing import Any

from evalbook.compare.document import metric_label
from evalbook.formatting import counted
from evalbook.metrics import METRICS
from evalbook.metrics import metric as registered

Part = tuple[str, str]  # (text, tone): tone is worse, better, noise or plain


def reading(doc: dict[str, Any], row: dict[str, Any]) -> str | None:
    """How a metric row reads: worse, better, noise or unchanged; None when it has no deltas."""
    if not row["compared"]:
        return None
    if row["n_unchanged"] == row["n"]:
        return "unchanged"
    sign = 1 if registered(row["metric"]).higher_is_better else -1
    low, high = sorted((sign * row["ci_low"], sign * row["ci_high"]))
    return "worse" if high < 0 else "better" if low > 0 else "noise"


def _ranked(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with headline metrics first, each group in the registry's order."""
    order = [m.name for m in METRICS if m.headline] + [m.name for m in METRICS if not m.headline]
    return sorted(rows, key=lambda row: order.index(row["metric"]))


def moved_metrics(doc: dict[str, Any]) -> list[str]:
    """The metrics whose deltas moved beyond the tolerance on some pair, in the document's order."""
    return [row["metric"] for row in doc["metrics"] if reading(doc, row) not in (None, "unchanged")]


# How each reading is said in the sentence, and its tone.
READINGS = (("worse", "worse", "worse"), ("better", "better", "better"), ("noise", "within noise", "noise"),
            ("unchanged", "unchanged", "noise"))


def _metric_parts(readings: list[str]) -> list[Part]:
    """'Candidate worse on 4 of 9 metrics', ', unchanged on 5': one part per reading present."""
    total = len(readings)
    parts: list[Part] = []
    for said, word, tone in READINGS:
        n = readings.count(said)
        if not n:
            continue
        if parts:
            parts.append((f", {word} on {n}", tone))
        else:
            whole = f"all {counted(total, 'metric')}" if n == total and said == "unchanged" else \
                f"{n} of {counted(total, 'metric')}"
            parts.append((f"Candidate {word} on {whole}", tone))
    return parts


def _examples_part(doc: dict[str, Any]) -> Part | None:
    """How many examples got worse (or better) on the first headline metric that moved."""
    moved = [row for row in _ranked(doc["metrics"]) if reading(doc, row) not in (None, "unchanged")]
    if not moved:
        return None
    row = moved[0]
    label, said = metric_label(doc, row["metric"]), reading(doc, row)
    if said == "better":
        return f"{row['n_better']} of {row['n']} examples better on {label}", "better"
    if said == "worse":
        return f"{row['n_worse']} of {row['n']} examples worse on {label}", "worse"
    return f"{row['n_worse']} of {row['n']} examples worse and {row['n_better']} better on {label}", "noise"


def _checks_part(doc: dict[str, Any]) -> Part | None:
    section = doc.get("checks") or {}
    failing = section.get("n_newly_failing") or 0
    if not section.get("compared") or not failing:
        return None
    verb = "fails" if failing == 1 else "fail"
    return (f"{counted(failing, 'check')} newly {verb} on {counted(section['n_examples_newly_failing'], 'example')}",
            "worse")


def _gate_part(doc: dict[str, Any]) -> Part:
    gate = doc.get("gate")
    if not gate:
        return "gate off", "plain"
    return ("gate failed: compare exits 3", "worse") if gate["failed"] else ("gate held", "better")


def verdict_parts(doc: dict[str, Any]) -> list[Part]:
    """The verdict sentence in parts, each with its tone; joined, they are `verdict_sentence`."""
    readings = [reading(doc, row) for row in doc["metrics"]]
    readings = [said for said in readings if said is not None]
    if readings:
        parts = _metric_parts(readings)
    else:
        why = "the two runs share no example" if not doc["pairing"]["n_paired"] else \
            next(iter(not_compared(doc)), "no metric has a value in both runs")
        parts = [(f"Nothing was compared: {why}", "noise")]
    for part in (_examples_part(doc), _checks_part(doc), _gate_part(doc)):
        if part is not None:
            parts += [("; ", "plain"), part]
    return [*parts, (".", "plain")]


def verdict_sentence(doc: dict[str, Any]) -> str:
    """The comparison's verdict as plain text: 'Candidate worse on 4 of 9 metrics, unchanged on 5;
    26 of 32 examples worse on BERTScore F1; gate off.'"""
    return "".join(text for text, _ in verdict_parts(doc))


# ---------------------------------------------------------------- what was not compared

def _listed(labels: list[str]) -> str:
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def judge_said(doc: dict[str, Any]) -> str | None:
    """Why the judge metrics have no deltas, in one phrase; None when they were compared."""
    gate = doc["gates"]["judge"]
    if gate["compared"]:
        return None
    ran = {side: gate[f"{side}_status"] == "ran" for side in ("baseline", "candidate")}
    if not any(ran.values()):
        return "no judge ran for either run"
    if not all(ran.values()):
        side = "baseline" if not ran["baseline"] else "candidate"
        return f"the {side}'s judge did not run, so there is nothing to pair"
    labels = (gate["baseline_label"], gate["candidate_label"])
    if None in labels:
        return "a judge without a label cannot be matched with the other run's"
    if labels[0] != labels[1]:
        return (f"the runs were judged by different judges ({labels[0]} and {labels[1]}), whose scores "
                "are not comparable")
    return "no judge metric was scored in both runs"


def _retrieval_said(doc: dict[str, Any]) -> str | None:
    gate = doc["gates"]["retrieval"]
    if gate["compared"]:
        return None
    if gate["shown"]:
        return (f"the runs retrieved different numbers of chunks (k = {gate['baseline_k']} and "
                f"{gate['candidate_k']}), so their means are shown side by side without deltas")
    return gate["reason"].removeprefix("retrieval metrics not compared: ")  # the gate's own words


def not_compared(doc: dict[str, Any]) -> list[str]:
    """One phrase per group of metrics without deltas to show: those unchanged on every pair, the
    embedding metrics under other models, the retrieval metrics, the judge metrics, and any
    metric with no value in both runs."""
    lines = []
    unchanged = [row for row in doc["metrics"] if reading(doc, row) == "unchanged"]
    if unchanged:
        sizes = {row["n"] for row in unchanged}
        pairs = f"the {sizes.pop()} pairs" if len(sizes) == 1 else "every pair"
        with_retrieval = all(row["family"] == "retrieval" for row in unchanged)
        lines.append(f"{_listed([metric_label(doc, row['metric']) for row in unchanged])}: unchanged, every delta "
                     f"within the tolerance on {pairs}{' with retrieval' if with_retrieval else ''}")
    if not doc["gates"]["embedding"]["compared"]:
        lines.append("the embedding models differ, so their scores are shown side by side without deltas")
    retrieval = _retrieval_said(doc)
    if retrieval:
        lines.append(f"retrieval metrics: {retrieval}")
    judge = judge_said(doc)
    if judge:
        lines.append(f"judge metrics: {judge}")
    empty = [row for row in doc["metrics"]
             if not row["compared"] and row["n"] == 0 and doc["gates"][row["family"]]["compared"]]
    if empty:
        lines.append(f"{_listed([metric_label(doc, row['metric']) for row in empty])}: no example has a value "
                     "in both runs")
    return lines

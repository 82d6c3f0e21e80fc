"""Tables of a run's report for reading.

Text cells are escaped by evalbook.escaping; the HTML holds no external resource.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pandas as pd
from pandas.io.formats.style import Styler

from evalbook.escaping import escaped_table, readable_table
from evalbook.formatting import MISSING, counts_frame
from evalbook.judge.display import answers_table, unscored_table, verdict_text
from evalbook.metrics import metric as registered
from evalbook.metrics import METRICS
from evalbook.params import dotted_items
from evalbook.report.labels import provenance_name
from evalbook.report.reader import RunReport, judge_entry

TEXT_COLUMNS = ("question", "reference_answer", "generated_answer")
# How a table of examples names its columns for a reader (the frames keep the report's names).
SHOWN_COLUMNS = {"reference_answer": "reference", "generated_answer": "answer"}


def worst_example_metrics(report: RunReport | dict[str, Any]) -> list[str]:
    """The metrics whose worst examples a reader looks at: the headline similarity metrics, and
    each judge metric with at least one scored answer, in the registry's order."""
    view = RunReport.of(report)
    judged = [m for m in view.judged_metrics() if (m.summary(view.data).get("n_scored") or 0) > 0]
    return [m.name for m in METRICS if m.headline and m.kind == "similarity"] + [m.name for m in judged]


def worst_examples_frame(report: dict[str, Any], metric: str, n: int = 5) -> pd.DataFrame:
    """The n scored examples with the lowest `metric`, lowest first (ties by id), with their texts.

    Judge metrics add a `judgment` column: the statements with their verdicts (✓ supported,
    ✗ not, ? unreadable), the criteria met or not, or relevance's generated questions.
    Examples without a score are left out; an empty frame keeps the columns.
    """
    kind = registered(metric).kind
    if kind == "retrieval":
        raise ValueError(f"{metric!r} is not a per-example score; worst examples are listed for the "
                         "similarity and judge metrics")
    judged = kind == "judge"
    columns = ["id", metric, *TEXT_COLUMNS, *(["judgment"] if judged else [])]
    rows = []
    for example in RunReport.of(report).examples:
        score = registered(metric).value(example)
        if score is None:
            continue
        row = {"id": example["id"], metric: score, **{c: example[c] for c in TEXT_COLUMNS}}
        if judged:
            row["judgment"] = verdict_text(judge_entry(example, metric))
        rows.append(row)
    frame = pd.DataFrame(rows, columns=columns).astype({metric: "float64"})
    return frame.sort_values([metric, "id"], kind="mergesort").head(n).reset_index(drop=True)


def worst_examples(report: dict[str, Any], metric: str, n: int = 5) -> Styler:
    """worst_examples_frame styled for reading: wrapped text, the score (under the metric's label)
    on a red-to-blue gradient, the texts as "question", "reference" and "answer".

    The gradient spans the metric's range in the registry (-1 to 1 for BERTScore, the cosine
    and relevance; 0 to 1 for groundedness and criteria). Text is HTML escaped and the HTML holds no external resource (no font, no URL of its own).
    """
    frame = worst_examples_frame(report, metric, n)
    described = registered(metric)
    low = described.value_range[0]
    n_scored = sum(value is not None for value in RunReport.of(report).values(metric))
    noun = "scored example" if n_scored == 1 else "scored examples"
    shown = frame.rename(columns={metric: described.label, **SHOWN_COLUMNS})
    styler = readable_table(shown, f"The {len(frame)} lowest {described.label} scores of {n_scored} {noun}")
    if len(frame):
        styler = styler.background_gradient(cmap="RdBu", subset=[described.label], vmin=low, vmax=1.0)
    return styler


def unscored_judgments(report: dict[str, Any]) -> pd.DataFrame:
    """Every judged example and metric without a score, with the reason and the whole raw reply
    (evalbook.judge.display.unscored_table, as 03_judge shows it).

    Sorted by metric, reason and id; an empty frame with the same columns when every judgment
    was scored or the judge did not run.
    """
    records = {e["id"]: e["judge"] for e in RunReport.of(report).examples if isinstance(e.get("judge"), dict)}
    frame = unscored_table(records)
    return frame.sort_values(["metric", "reason", "id"], kind="mergesort").reset_index(drop=True)


def judged_answers(report: RunReport | dict[str, Any]) -> pd.DataFrame:
    """Each judged answer of the report with the ground truth it was judged against and, per
    judge metric, its score and every statement or criterion with its verdict and reason
    (evalbook.judge.display.answers_table, as 03_judge shows it). Empty when nothing was judged.

    The report keeps the reference answer; a judge set to check against another column (the
    context) is shown with the reference, and the column named."""
    view = RunReport.of(report)
    records = {e["id"]: e["judge"] for e in view.examples if isinstance(e.get("judge"), dict)}
    judge = view.data["models"].get("judge") or {}
    column = judge.get("ground_truth_column") or "reference_answer"
    frame = pd.DataFrame([{"id": e["id"], "generated_answer": e["generated_answer"],
                           "reference_answer": e["reference_answer"]} for e in view.examples],
                         columns=["id", "generated_answer", "reference_answer"])
    table = answers_table(records, frame, "reference_answer")
    if column != "reference_answer" and len(table):
        table = table.rename(columns={"ground truth": f"reference (the judge checked {column})"})
    return table


def provenance_table(report: RunReport | dict[str, Any]) -> pd.DataFrame:
    """How the run was made: the report's provenance as one row per field (nested fields
    dotted), each named in words (report.labels), for reading.

    A path is shown by its file name: where the run's files lie on one machine says nothing to
    a reader of the shared page, and the report JSON keeps the whole path. A list reads as its
    items joined by commas."""
    rows = []
    for key, value in dotted_items(RunReport.of(report).data["provenance"]).items():
        if isinstance(value, (list, tuple)):
            value = ", ".join(str(item) for item in value)
        if isinstance(value, bool):
            value = "yes" if value else "no"
        if isinstance(value, str) and PurePosixPath(value).is_absolute():
            value = PurePosixPath(value).name
        rows.append({"field": provenance_name(key), "value": MISSING if value is None else str(value)})
    return pd.DataFrame(rows, columns=["field", "value"]).set_index("field")


def counts_table(report: RunReport | dict[str, Any]) -> pd.DataFrame:
    """The report's counts as a table (formatting.counts_frame): one row per count, named in words,
    with its whole number; the lists of ids behind some counts stay in the report JSON."""
    given = RunReport.of(report).data["counts"]
    return counts_frame({key: value for key, value in given.items()
                         if isinstance(value, int) and not isinstance(value, bool)})


# How the similarity summary's statistics read on the page.
SUMMARY_COLUMNS = {"mean": "mean", "p10": "10th percentile", "p50": "median", "p90": "90th percentile",
                   "n": "n", "n_missing": "without a score"}


def similarity_table(report: RunReport | dict[str, Any]) -> pd.DataFrame:
    """The answer-similarity summary, one row per metric named by its label: mean, percentiles,
    n and how many examples have no score; the numbers as the report holds them."""
    summaries = RunReport.of(report).data["answer_similarity_summary"]
    rows = [{"metric": registered(name).label,
             **{shown: summary.get(key) for key, shown in SUMMARY_COLUMNS.items()}}
            for name, summary in summaries.items()]
    frame = pd.DataFrame(rows, columns=["metric", *SUMMARY_COLUMNS.values()]).set_index("metric")
    return frame.astype({"n": "int64", "without a score": "int64"})

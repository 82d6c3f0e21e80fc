"""The checks for readers: each check's pass rate with its interval, and every answer that
failed a check, worst first (the most checks failed, then the highest BERTScore F1: the wrong
answers similarity would have ranked among the best), each linked to its full record.

Every text (ids, questions, answers, references, reasons) is user text: the tables go through
evalbook.escaping's readable_table, the sentences through the templates.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalbook.escaping import shown_text
from evalbook.formatting import interval
from evalbook.templating import render

# Said once, under the headline, whenever a report has checks: what each kind of number can see.
SIMILARITY_IS_NOT_CORRECTNESS = (
    "BERTScore and the sentence cosine measure how similar an answer is to its reference, not "
    "whether it is right: an answer that changes one number or name scores as high as a correct "
    "one. The checks catch changed facts; a judge catches the rest "
    "(make run PARAMS=params/local-judge.yaml).")


def checks_view(report: dict[str, Any]) -> dict[str, Any] | None:
    """What the headline says of the checks: how many answers failed one, of how many, and
    each check's failing count; None when no check ran."""
    summary = report.get("checks_summary")
    if not summary:
        return None
    return {"n_failing": summary["n_examples_failing"], "n_examples": summary["n_examples"],
            "n_with_errors": summary["n_examples_with_errors"],
            "checks": [{"name": name, "n_failed": entry["n_failed"], "n": entry["n"]}
                       for name, entry in summary["checks"].items()],
            "note": SIMILARITY_IS_NOT_CORRECTNESS}


def checks_table(report: dict[str, Any]) -> pd.DataFrame:
    """One row per check: passed, failed, errors, and the pass rate over passes and fails with
    its Wilson interval."""
    summary = report.get("checks_summary") or {"checks": {}}
    rows = []
    for name, entry in summary["checks"].items():
        bounds = entry["interval"] or {}
        rows.append({"check": name, "passed": entry["n_passed"], "failed": entry["n_failed"],
                     "errors": entry["n_errors"],
                     "pass rate": entry["pass_rate"],
                     "95% interval": interval(bounds.get("low"), bounds.get("high"))})
    return pd.DataFrame(rows, columns=["check", "passed", "failed", "errors", "pass rate", "95% interval"])


def failing_answers(report: dict[str, Any]) -> pd.DataFrame:
    """Every answer that failed a check, worst first: the most checks failed, then the highest
    BERTScore F1 (where similarity misleads most), then the id."""
    rows = []
    for example in report["examples"]:
        failed = [outcome for outcome in example.get("checks") or [] if outcome["status"] == "fail"]
        if not failed:
            continue
        f1 = ((example.get("answer_similarity") or {}).get("bertscore") or {}).get("f1")
        rows.append({"id": example["id"], "question": example["question"], "answer": example["generated_answer"],
                     "reference": example["reference_answer"],
                     "failed checks": "\n".join(f"{o['check']}: {o['reason']}" for o in failed),
                     "BERTScore F1": f1, "_failed": len(failed)})
    frame = pd.DataFrame(rows, columns=["id", "question", "answer", "reference", "failed checks", "BERTScore F1",
                                        "_failed"])
    frame = frame.sort_values(["_failed", "BERTScore F1", "id"], ascending=[False, False, True], kind="stable")
    return frame.drop(columns="_failed").reset_index(drop=True)


# Characters of each text the table of failing answers shows, so that it reads as a list; the
# record it links to shows each text as the rest of the page does (escaping.SHOWN_CHARACTERS).
TABLE_CHARACTERS = 240
RECORD_ANCHOR = "failing-answer-{n}"  # numbered, so that no anchor carries the user's id
# Failing answers whose full record the page holds, worst first; the others' ids link to the
# explorer (Every example), which opens every example's record. 4,000 records took 1.3 s and
# 7.8 MB of a 12,000-example report's page (docs/performance.md).
RECORDS_SHOWN = 200
EXPLORER_ANCHOR = "Every-example"  # the explorer's heading, as nbconvert and JupyterLab name it


def _facts_found(details: dict[str, Any]) -> list[dict[str, Any]]:
    """The fact check's details as rows a record lists: each kind of finding with its facts."""
    rows = []
    for key, label in (("changed", "changed"), ("unsupported", "unsupported"),
                       ("beyond_reference", "beyond the reference"), ("missing", "missing")):
        for fact in details.get(key) or []:
            if isinstance(fact, dict):
                rows.append({"finding": label, "kind": fact.get("kind"), "answer": fact.get("answer"),
                             "reference": fact.get("reference")})
    return rows


def _record(example: dict[str, Any], n: int) -> dict[str, Any]:
    similarity = example.get("answer_similarity") or {}
    retrieval = example.get("retrieval") or {}
    judge = example.get("judge") or {}
    return {
        "anchor": RECORD_ANCHOR.format(n=n), "id": example["id"],
        "n_failed": sum(o["status"] == "fail" for o in example.get("checks") or []),
        "question": shown_text(example["question"]),
        "answer": None if example.get("generated_answer") is None else shown_text(example["generated_answer"]),
        "reference": shown_text(example["reference_answer"]),
        "outcomes": [{"check": o["check"], "status": o["status"], "reason": o["reason"],
                      "facts": _facts_found(o.get("details") or {})} for o in example.get("checks") or []],
        "scores": [(label, value) for label, value in (
            ("BERTScore F1", (similarity.get("bertscore") or {}).get("f1")),
            ("sentence cosine", similarity.get("sentence_cosine")),
            ("rank of the first relevant document", retrieval.get("rank")),
            *((f"judge {name}", (entry or {}).get("score")) for name, entry in (judge.get("metrics") or {}).items()
              if isinstance(entry, dict)),
        ) if value is not None],
        "metadata": [(name, value) for name, value in (example.get("metadata") or {}).items() if value is not None],
        "source": example.get("source"),
    }


def failing_answers_html(report: dict[str, Any]) -> str:
    """Every answer that failed a check, worst first (failing_answers' order), as a table whose
    ids link to each answer's full record below it: every text (up to the page's length), every
    check's outcome with the facts it found, the scores, the source and the metadata. Past the
    first RECORDS_SHOWN, an id links to the explorer, which opens every example's record."""
    by_id = {example["id"]: example for example in report["examples"]}
    rows, records = [], []
    for n, row in enumerate(failing_answers(report).to_dict("records"), start=1):
        example = by_id[row["id"]]
        if n <= RECORDS_SHOWN:
            records.append(_record(example, n))
        rows.append({"anchor": RECORD_ANCHOR.format(n=n) if n <= RECORDS_SHOWN else None, "id": row["id"],
                     "question": shown_text(row["question"], TABLE_CHARACTERS),
                     "answer": None if row["answer"] is None else shown_text(row["answer"], TABLE_CHARACTERS),
                     "reference": shown_text(row["reference"], TABLE_CHARACTERS),
                     "failed": [(o["check"], shown_text(o["reason"], TABLE_CHARACTERS))
                                for o in example.get("checks") or [] if o["status"] == "fail"],
                     "f1": row["BERTScore F1"]})
    return render("checks_failing.html", rows=rows, records=records, explorer=EXPLORER_ANCHOR)

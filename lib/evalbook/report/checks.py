"""The checks for readers: each check's pass rate with its interval, and every answer that
failed a check, worst first (the most checks failed, then the highest BERTScore F1: the wrong
answers similarity would have ranked among the best).

Every text (ids, questions, answers, references, reasons) is user text: the tables go through
evalbook.escaping's readable_table, the sentences through the templates.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalbook.formatting import interval

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

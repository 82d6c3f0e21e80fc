"""Measurement: the fact check, BERTScore and the sentence cosine on the planted-error set.

The set (tests/data/checks/planted.jsonl, described in its README) holds answers with one planted
error each (a changed number, number word, unit, amount of money, percentage, time, date, weekday,
month or name, or a contradiction that changes no fact) and correct answers that say the same
facts another way. It was written blind to the fact checker's code, so it measures the checker.

- BERTScore F1 and the sentence cosine of each answer against its reference, from evalbook's own
  AnswerScorer with the pinned models of params/default.yaml (PyPI packages; the hub stays
  offline), and each one's ROC AUC for telling right answers from wrong ones (right scoring
  higher), with a 95% bootstrap interval, over the whole set and without the contradictions;
- when `evalbook.checks.facts.check_facts` can be imported: the fact check's precision and recall
  for "wrong" (a `fail` flags the answer), with Wilson intervals, per error kind, and every miss,
  false flag and error by id.

    .venv/bin/python benchmarks/checks_planted.py
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import DEFAULT_PROFILE, ROOT  # noqa: E402

PLANTED = ROOT / "tests" / "data" / "checks" / "planted.jsonl"
FIELDS = ("id", "question", "context", "reference", "answer", "label", "error_kind", "note")
LABELS = ("wrong", "right")
CONTRADICTION = "contradiction"
# The planted changes of a fact, which a fact check is expected to catch.
FACT_KINDS = ("number", "number_word", "unit", "money", "percent", "time", "date", "weekday",
              "month", "name")
KINDS = {
    "wrong": (*FACT_KINDS, CONTRADICTION),
    "right": ("paraphrase_digits_words", "paraphrase_money", "paraphrase_date_format",
              "paraphrase_time_format", "paraphrase_abbreviation", "paraphrase_unit",
              "paraphrase_wording", "beyond_reference"),
}
SIMILARITY_METRICS = {"bertscore_f1": "BERTScore F1", "sentence_cosine": "sentence cosine"}
RESAMPLES = 2000
CONFIDENCE = 0.95


class PlantedSetError(ValueError):
    """A line of the planted set that is not a well-formed row."""


# ---------------------------------------------------------------- the set

def check_row(row: Any, where: str) -> dict[str, str]:
    """`row` if it has exactly FIELDS, each a string, a known label and a kind of that label;
    otherwise PlantedSetError naming `where` and the field."""
    if not isinstance(row, dict):
        raise PlantedSetError(f"{where}: a row is a JSON object, got {type(row).__name__}")
    if set(row) != set(FIELDS):
        missing, extra = set(FIELDS) - set(row), set(row) - set(FIELDS)
        raise PlantedSetError(f"{where}: fields missing {sorted(missing)}, unexpected {sorted(extra)}")
    for field in FIELDS:
        if not isinstance(row[field], str):
            raise PlantedSetError(f"{where}: {field} is a string, got {type(row[field]).__name__}")
        if field != "context" and not row[field].strip():
            raise PlantedSetError(f"{where}: {field} is empty")
    if row["label"] not in LABELS:
        raise PlantedSetError(f"{where}: label is one of {', '.join(LABELS)}, not {row['label']!r}")
    if row["error_kind"] not in KINDS[row["label"]]:
        raise PlantedSetError(f"{where}: error_kind {row['error_kind']!r} is not a kind of "
                              f"{row['label']!r} answers ({', '.join(KINDS[row['label']])})")
    return row


def load_planted(path: Path = PLANTED) -> list[dict[str, str]]:
    """The set's rows in file order, each checked by check_row; ids must be unique."""
    rows, seen = [], {}
    for number, line in enumerate(Path(path).read_text("utf-8").splitlines(), 1):
        where = f"{path}, line {number}"
        try:
            row = check_row(json.loads(line), where)
        except json.JSONDecodeError as error:
            raise PlantedSetError(f"{where}: not JSON ({error.msg})") from error
        if row["id"] in seen:
            raise PlantedSetError(f"{where}: id {row['id']!r} is already on line {seen[row['id']]}")
        seen[row["id"]] = number
        rows.append(row)
    return rows


# ---------------------------------------------------------------- similarity

def similarity_scores(rows: list[dict[str, str]]) -> dict[str, list[float]]:
    """BERTScore F1 and sentence cosine of each answer against its reference, scored as the
    02_score stage scores them (default profile, no embedding cache, hub offline)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    # Here: torch takes seconds to import, and the set's checks need none of it.
    from evalbook.params import load_profile
    from evalbook.score.models import resolve_profile_models
    from evalbook.score.scoring import AnswerScorer

    with tempfile.TemporaryDirectory() as cache_dir:
        profile = load_profile(DEFAULT_PROFILE, {"scoring.embedding_cache.enabled": False,
                                                 "scoring.embedding_cache.path": cache_dir})
        scorer = AnswerScorer.from_profile(profile, resolve_profile_models(profile))
        scored = scorer.score_pairs([row["answer"] for row in rows],
                                    [row["reference"] for row in rows], show_progress=False)
    return {metric: scored[metric].astype(float).tolist() for metric in SIMILARITY_METRICS}


def separation(rows: list[dict[str, str]], scores: list[float]) -> dict[str, Any]:
    """ROC AUC of `scores` for right (positive) against wrong answers, with its bootstrap
    interval: evalbook.calibrate.agreement.roc, which is sklearn.metrics.roc_auc_score."""
    from evalbook.calibrate.agreement import roc

    return roc(scores, [row["label"] == "right" for row in rows], resamples=RESAMPLES, seed=0,
               confidence=CONFIDENCE)


# ---------------------------------------------------------------- the fact check

def fact_checker() -> tuple[Callable | None, str]:
    """(evalbook.checks.facts.check_facts, its name), or (None, why it cannot be used)."""
    try:
        facts = importlib.import_module("evalbook.checks.facts")
    except ModuleNotFoundError as error:
        if error.name in ("evalbook.checks", "evalbook.checks.facts"):
            return None, "evalbook.checks.facts does not exist yet"
        raise
    if not hasattr(facts, "check_facts"):
        return None, "evalbook.checks.facts has no check_facts yet"
    return facts.check_facts, "evalbook.checks.facts.check_facts"


def rate(hits: int, n: int) -> dict[str, Any]:
    """hits / n with its Wilson interval (evalbook.stats); all None when n is 0."""
    from evalbook.stats import wilson_interval

    interval = wilson_interval(hits, n, CONFIDENCE)
    return {"hits": hits, "n": n, "rate": hits / n if n else None,
            "low": interval[0] if interval else None, "high": interval[1] if interval else None}


def fact_check_measures(rows: list[dict[str, str]], outcomes: list[Any]) -> dict[str, Any]:
    """Precision and recall for "wrong", a `fail` flagging the answer, over the whole set and
    without the contradictions; flags per kind; the ids of every miss, false flag and error.
    An `error` outcome flags nothing, so a wrong answer it meets counts as a miss."""
    flagged = [outcome.status == "fail" for outcome in outcomes]

    def measures(keep: Callable[[dict[str, str]], bool]) -> dict[str, Any]:
        kept = [(row, flag) for row, flag in zip(rows, flagged) if keep(row)]
        true_flags = sum(flag and row["label"] == "wrong" for row, flag in kept)
        return {"precision": rate(true_flags, sum(flag for _, flag in kept)),
                "recall": rate(true_flags, sum(row["label"] == "wrong" for row, _ in kept))}

    by_kind = Counter((row["error_kind"], flag) for row, flag in zip(rows, flagged))
    kinds = {kind: {"label": label, "n": by_kind[kind, True] + by_kind[kind, False],
                    "flagged": by_kind[kind, True]}
             for label in LABELS for kind in KINDS[label]}
    listed = {"missed": [], "false_flags": [], "errors": []}
    for row, outcome, flag in zip(rows, outcomes, flagged):
        entry = {"id": row["id"], "kind": row["error_kind"], "note": row["note"],
                 "status": outcome.status, "reason": outcome.reason}
        if outcome.status == "error":
            listed["errors"].append(entry)
        if row["label"] == "wrong" and not flag:
            listed["missed"].append(entry)
        if row["label"] == "right" and flag:
            listed["false_flags"].append(entry)
    return {"all": measures(lambda row: True),
            "facts_only": measures(lambda row: row["error_kind"] != CONTRADICTION),
            "kinds": kinds, **listed}


# ---------------------------------------------------------------- the tables

def _with_interval(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def _rate_cell(measure: dict[str, Any]) -> str:
    interval = _with_interval(measure["rate"], measure["low"], measure["high"])
    return f"{interval} ({measure['hits']}/{measure['n']})"


def summary_table(rows: list[dict[str, str]], aucs: dict[str, dict[str, dict]],
                  facts: dict[str, Any] | None) -> str:
    """The Markdown table docs/checks.md quotes: each measure over the whole set and without
    the contradictions, with 95% intervals."""
    def counts(keep):
        kept = [row for row in rows if keep(row)]
        wrong = sum(row["label"] == "wrong" for row in kept)
        return f"{wrong} wrong, {len(kept) - wrong} right"

    lines = [f"| measure (95% interval) | all ({counts(lambda r: True)}) | "
             f"without contradictions ({counts(lambda r: r['error_kind'] != CONTRADICTION)}) |",
             "|---|---|---|"]
    if facts is not None:
        for measure in ("precision", "recall"):
            cells = [_rate_cell(facts[part][measure]) for part in ("all", "facts_only")]
            lines.append(f"| fact check {measure} for wrong (fail = flagged) | {cells[0]} | {cells[1]} |")
    for metric, name in SIMILARITY_METRICS.items():
        cells = [_with_interval(aucs[part][metric]["auc"], aucs[part][metric]["low"],
                                aucs[part][metric]["high"]) for part in ("all", "facts_only")]
        lines.append(f"| {name} ROC AUC, right vs wrong | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def kinds_table(facts: dict[str, Any]) -> str:
    """Markdown: per kind, how many answers the fact check flagged; recall for wrong kinds,
    the false-flag rate for right ones."""
    lines = ["| kind | label | n | flagged | share flagged |", "|---|---|---|---|---|"]
    for kind, count in facts["kinds"].items():
        share = f"{count['flagged'] / count['n']:.3f}" if count["n"] else "–"
        lines.append(f"| {kind} | {count['label']} | {count['n']} | {count['flagged']} | {share} |")
    return "\n".join(lines)


def listing(title: str, entries: list[dict[str, Any]]) -> str:
    if not entries:
        return f"{title}: none"
    return "\n".join([f"{title} ({len(entries)}):",
                      *(f"- {e['id']} [{e['kind']}] {e['note']} -> {e['status']}: {e['reason']}"
                        for e in entries)])


def composition(rows: list[dict[str, str]]) -> str:
    kinds = Counter(row["error_kind"] for row in rows)
    parts = []
    for label in LABELS:
        n = sum(row["label"] == label for row in rows)
        parts.append(f"{n} {label}: " + ", ".join(f"{kind} {kinds[kind]}" for kind in KINDS[label]))
    return f"{len(rows)} answers; " + "; ".join(parts)


# ---------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--planted", type=Path, default=PLANTED, help="the planted-error set")
    parser.add_argument("--json", type=Path, help="also write the measures to this JSON file")
    args = parser.parse_args(argv)

    rows = load_planted(args.planted)
    planted = args.planted.resolve()
    shown = planted.relative_to(ROOT) if planted.is_relative_to(ROOT) else planted
    print(f"planted set: {shown}")
    print(composition(rows))

    scores = similarity_scores(rows)
    without = [i for i, row in enumerate(rows) if row["error_kind"] != CONTRADICTION]
    aucs = {"all": {m: separation(rows, s) for m, s in scores.items()},
            "facts_only": {m: separation([rows[i] for i in without], [s[i] for i in without])
                           for m, s in scores.items()}}

    check_facts, checker = fact_checker()
    facts = None
    if check_facts is None:
        print(f"\nfact check: not measured, {checker}")
    else:
        outcomes = [check_facts(row["answer"], row["reference"], row["context"]) for row in rows]
        facts = fact_check_measures(rows, outcomes)
        print(f"\nfact check: {checker}")

    print("\n" + summary_table(rows, aucs, facts))
    print("ROC AUC: the chance that a right answer scores above a wrong one; 0.5 is chance, "
          "below it the metric prefers the wrong answers.")
    if facts is not None:
        print("\n" + kinds_table(facts))
        for title, key in (("missed wrong answers", "missed"),
                           ("false flags on right answers", "false_flags"), ("errors", "errors")):
            print("\n" + listing(title, facts[key]))

    if args.json:
        strip = {part: {m: {k: v for k, v in auc.items() if k != "curve"} for m, auc in by_metric.items()}
                 for part, by_metric in aucs.items()}
        record = {"planted": str(args.planted), "n": len(rows), "checker": checker, "roc_auc": strip,
                  "fact_check": facts,
                  "scores": [{"id": row["id"], **{m: scores[m][i] for m in scores}}
                             for i, row in enumerate(rows)]}
        args.json.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

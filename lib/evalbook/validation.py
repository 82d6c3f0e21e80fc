"""Checks of documents against the JSON Schemas shipped beside this module in schemas/."""

from __future__ import annotations

import importlib
import json
import sys
from importlib import resources
from types import ModuleType
from typing import Any

from evalbook.errors import EvalbookError


def _import_jsonschema() -> ModuleType:
    """jsonschema, imported without the optional `rfc3987_syntax` it would load for the `iri`
    formats. Importing that module builds its grammar, 1.5 s on a quiet machine here and 5 s on
    a busy one, in every process and notebook kernel that validates a profile or a report;
    evalbook checks no format. jsonschema expects the optional library to be missing
    (ImportError) and goes on without it; the block is lifted at once for anything else."""
    if "jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules:
        return importlib.import_module("jsonschema")
    sys.modules["rfc3987_syntax"] = None  # an `import` of it now raises ImportError
    try:
        return importlib.import_module("jsonschema")
    finally:
        del sys.modules["rfc3987_syntax"]


jsonschema = _import_jsonschema()

REPORT_SCHEMA = "report-v1.json"
COMPARISON_SCHEMA = "compare-v1.json"
CALIBRATION_SCHEMA = "calibrate-v1.json"
HEADLINE_SCHEMA = "headline-v1.json"
TREND_SCHEMA = "trend-v1.json"


class ReportError(EvalbookError, ValueError):
    """A report that does not match the shipped schema; it is never written."""


def shipped_schema(file_name: str) -> dict[str, Any]:
    """A JSON Schema shipped in evalbook/schemas/."""
    return json.loads(resources.files("evalbook").joinpath(f"schemas/{file_name}").read_text("utf-8"))


def report_schema() -> dict[str, Any]:
    return shipped_schema(REPORT_SCHEMA)


def comparison_schema() -> dict[str, Any]:
    return shipped_schema(COMPARISON_SCHEMA)


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


def mismatch(document: Any, file_name: str, what: str) -> str | None:
    """Why `document` (named `what`) does not match the shipped schema `file_name`; None when it does."""
    problems = schema_problems(document, shipped_schema(file_name), what)
    if not problems:
        return None
    return f"{what} does not match schema {file_name}:\n" + "\n".join(problems)


def validate_report(report: dict[str, Any]) -> None:
    """Raise ReportError listing every violation of schemas/report-v1.json (and any NaN)."""
    problem = mismatch(report, REPORT_SCHEMA, "report")
    if problem:
        raise ReportError(problem)

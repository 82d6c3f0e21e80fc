"""Checks of documents against the JSON Schemas shipped beside this module in schemas/."""

from __future__ import annotations

import importlib
import json
import re
import sys
from functools import lru_cache
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

def ecma_pattern(pattern: str) -> str:
    r"""A JSON Schema `pattern` (ECMA-262) as a Python regular expression with the same anchors.

    ECMA's `$` matches at the end of the text only; Python's also matches before a final
    newline, so "glass\n" would pass `^[a-z]+$`. Each `$` outside a character class becomes
    `\Z`; escaped characters and classes are copied as they are."""
    translated, in_class, index = [], False, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            translated.append(pattern[index:index + 2])
            index += 2
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        translated.append("\\Z" if char == "$" and not in_class else char)
        index += 1
    return "".join(translated)


@lru_cache(maxsize=None)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(ecma_pattern(pattern))


def _pattern(validator, pattern: str, instance: Any, schema: dict[str, Any]):
    if validator.is_type(instance, "string") and not _compiled(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _whole_number(checker, instance: Any) -> bool:
    # JSON Schema counts 2.0 as an integer; a YAML or JSON input that writes 2.0 for a count of
    # turns or repeats means something else, or nothing, and is refused before any call.
    return isinstance(instance, int) and not isinstance(instance, bool)


# The validator of what users write (profiles, scenario files, replayed transcripts): Draft
# 2020-12 with an integer that is an int (not 2.0, not true) and patterns anchored as ECMA-262
# anchors them.
InputValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, validators={"pattern": _pattern},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _whole_number))


def input_validator(schema: dict[str, Any]):
    """A validator of user input against `schema` (InputValidator)."""
    return InputValidator(schema)


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


# How deep a definition is written in place of its local $ref (_inlined); deeper, the $ref stays.
INLINED_DEPTH = 6


def _inlined(node: Any, definitions: dict[str, Any], depth: int = 0) -> Any:
    """`node` with each bare local `{"$ref": "#/$defs/<name>"}` replaced by that definition, to
    INLINED_DEPTH levels (a recursive definition keeps its $ref there). The same constraints,
    checked faster: jsonschema resolves a $ref on every instance it validates, which took a
    quarter of a 12,000-example report's validation."""
    if isinstance(node, dict):
        reference = node.get("$ref")
        if (len(node) == 1 and isinstance(reference, str) and reference.startswith("#/$defs/")
                and depth < INLINED_DEPTH and reference[len("#/$defs/"):] in definitions):
            return _inlined(definitions[reference[len("#/$defs/"):]], definitions, depth + 1)
        return {key: _inlined(value, definitions, depth) for key, value in node.items()}
    if isinstance(node, list):
        return [_inlined(value, definitions, depth) for value in node]
    return node


@lru_cache(maxsize=8)
def _shipped_validator(file_name: str):
    """A validator of a shipped schema, its local definitions written in place (_inlined); the
    schema keeps its $defs, so a $ref left in place still resolves."""
    schema = shipped_schema(file_name)
    inlined = _inlined({key: value for key, value in schema.items() if key != "$defs"}, schema.get("$defs", {}))
    return jsonschema.Draft202012Validator({**inlined, "$defs": schema.get("$defs", {})})


def schema_problems(document: Any, schema: dict[str, Any] | str, what: str, limit: int = 20) -> list[str]:
    """Every violation of `schema` (or of the shipped schema of that file name) in `document`
    (the first `limit`, by path), and any NaN or infinity, each as a `  - path: message` line;
    `what` names the document in messages."""
    validator = (_shipped_validator(schema) if isinstance(schema, str)
                 else jsonschema.Draft202012Validator(schema))
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
    problems = schema_problems(document, file_name, what)
    if not problems:
        return None
    return f"{what} does not match schema {file_name}:\n" + "\n".join(problems)


def validate_report(report: dict[str, Any]) -> None:
    """Raise ReportError listing every violation of schemas/report-v1.json (and any NaN)."""
    problem = mismatch(report, REPORT_SCHEMA, "report")
    if problem:
        raise ReportError(problem)

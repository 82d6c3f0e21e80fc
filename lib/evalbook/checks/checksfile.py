"""The user's assertions as written: a checks file, or `check_*` columns of the evaluation set,
read into Assertions and checked before anything is scored (docs/checks-assertions.md).

A checks file is YAML: `version: 1` and a list of `checks`, each with a `name`, exactly one
assertion kind with its argument, and its scope (`where`, `ids`, `turn`). It is checked against
`schemas/checks-v1.json` with the input validator (an integer is an int, `$` anchors at the very
end), then for what a schema cannot say: a key given twice (YAML keeps the last without a word),
a regex that Python's `re` does not compile (the schema's patterns are ECMA-262; a check's
regex is Python's), an embedded `json` schema that is not JSON Schema, a name used twice, a
number that is not finite, `ignore_case` on a check that reads no text, and scopes that do not
fit together. Every problem is reported at once, each naming the entry (its position and
name) and the field, and the file is refused (ChecksFileError, exit 2).

A check column is named `check_<kind>`, optionally `_ignore_case` after the kind and `.<label>`
after that; a row's non-empty cell is that row's argument, and the check's name is the column's.
`assertions_from_columns` checks each cell as an entry of a file is checked, naming the column
and the row (CheckColumnsError, exit 2).

What depends on the data is checked apart, once the data is loaded: `check_against_data` (ids
listed, metadata columns and values selected, a latency or cost limit where the run recorded
none) and `check_against_scenarios` (scenario ids, a turn check in a run without scenarios).
"""

from __future__ import annotations

import difflib
import json
import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence

import numpy as np
import yaml

from evalbook.checks.assertions import KINDS, TEXT_KINDS, Assertion, same_value
from evalbook.errors import UnusableInput
from evalbook.formatting import is_missing
from evalbook.params import ProfileLoader, YAMLRefused, read_yaml, yaml_problem
from evalbook.validation import input_validator, jsonschema, shipped_schema

SCHEMA = "checks-v1.json"
SHOWN_PROBLEMS = 20
SHOWN_VALUES = 10
SCOPE_FIELDS = ("name", "ignore_case", "where", "ids", "turn")
LIMIT_KINDS = ("latency_ms", "cost_usd")
CHECK_COLUMN_PREFIX = "check_"
# A cell of these kinds is its text as written; a text cell of any other kind is JSON (CSV cells are text).
WRITTEN_KINDS = ("contains", "not_contains", "equals", "regex", "not_regex")
_CHECK_COLUMN = re.compile(rf"{CHECK_COLUMN_PREFIX}(?P<kind>{'|'.join(sorted(KINDS, key=len, reverse=True))})"
                           r"(?P<ignore_case>_ignore_case)?(?:\.[A-Za-z0-9][A-Za-z0-9._-]*)?")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
_MERGE_TAG = "tag:yaml.org,2002:merge"


class ChecksError(UnusableInput, ValueError):
    """Checks that cannot be used, found before anything is scored (exit 2)."""


class ChecksFileError(ChecksError):
    """A checks file that cannot be used; the message names each problem's entry and field."""


class CheckColumnsError(ChecksError):
    """Check columns of the evaluation set that cannot be used; the message names each column and row."""


# What a field must hold, said to a person, for the errors whose schema message would print the
# schema itself (a oneOf, a pattern) or say less than this.
TEXT_RULE = "it must hold some text"
NAME_RULE = ("a name is 1 to 80 letters, digits, '.', '_' or '-', starting with a letter or a digit, "
             "on one line")
METADATA_VALUE_RULE = "a value is text, a number or true/false"
FIELD_RULES = {
    "version": "it must be 1",
    "checks": "it must be a list of checks, at least one",
    "name": NAME_RULE,
    **{kind: TEXT_RULE for kind in ("contains", "equals", "regex", "not_regex", "unit")},
    "contains_any": "it must be a list of texts, at least one",
    "contains_all": "it must be a list of texts, at least one",
    "not_contains": "it must be text, or a list of texts",
    "number": "it is a number, or {value, tolerance, unit}: a number, a number from 0 and text",
    "value": "it must be a number",
    "tolerance": "a tolerance is a number from 0",
    "json": "it is true (the answer parses as JSON) or {schema: ...}",
    "schema": "a schema is a JSON Schema: an object, or true or false",
    "max_words": "it must be a whole number from 0",
    "max_chars": "it must be a whole number from 0",
    "latency_ms": "it must be a number of milliseconds above 0",
    "cost_usd": "it must be a number of US dollars above 0",
    "ignore_case": "it must be true or false",
    "where": "it must be {metadata: {<column>: <value>, ...}}",
    "metadata": "it must map metadata columns to values, at least one",
    "ids": "it must be a list of example ids (text or whole numbers), each once",
    "turn": "a turn is every, last, or a whole number from 1",
}
# The rule for one item of a list field, where it differs from the list's.
ITEM_RULES = {"contains_any": TEXT_RULE, "contains_all": TEXT_RULE, "not_contains": TEXT_RULE,
              "ids": "an id is text or a whole number"}


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _listed(values: Sequence[str]) -> str:
    shown = ", ".join(values[:SHOWN_VALUES])
    return shown + (f" and {len(values) - SHOWN_VALUES} more" if len(values) > SHOWN_VALUES else "")


def _close(word: str, choices: Iterable[str]) -> str:
    match = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _text_checks(kind: str) -> str:
    return f"is for the text checks ({', '.join(TEXT_KINDS)}), not {kind}"


def _kinds_of(entry: Mapping[str, Any]) -> list[str]:
    return [kind for kind in KINDS if kind in entry]


class _Entry:
    """How problems of one entry are named: its place, and each field's subject ("field
    'number.unit'" in a file; "the cell's 'unit'" in a column, whose cell is the kind's argument)."""

    def __init__(self, place: str, column_kind: str | None = None):
        self.place, self.column_kind = place, column_kind

    def subject(self, field: str) -> str:
        kind = self.column_kind
        if kind is None or not (field == kind or field.startswith(kind + ".")):
            return f"field {field!r}"
        if field == kind:
            return "the cell"
        inner = field[len(kind) + 1:]
        return f"item {int(inner) + 1} of the cell" if inner.isdigit() else f"the cell's {inner!r}"

    def unknown(self, field: str) -> str:
        kind = self.column_kind
        if kind is not None and field.startswith(kind + "."):
            return f"unknown field {field[len(kind) + 1:]!r} in the cell"
        return f"unknown field {field!r}"


# ---------------------------------------------------------------- the schema's problems

def _leaves(error) -> Iterable[Any]:
    """The errors a person should read for `error`. A oneOf is split into its branches; when the
    value is of the kind only one branch takes (an object for {value, tolerance, unit}), that
    branch's errors are the ones to read, else the oneOf itself, which FIELD_RULES says in words."""
    if error.validator != "oneOf" or not error.context:
        yield error
        return
    by_branch: dict[int, list[Any]] = {}
    for sub in error.context:
        by_branch.setdefault(sub.relative_schema_path[0], []).append(sub)
    fitting = [branch for branch, subs in by_branch.items()
               if not any(sub.validator in ("type", "const", "enum") and not sub.relative_path for sub in subs)]
    if len(fitting) != 1 or len(by_branch) != len(error.validator_value):
        yield error
        return
    for sub in by_branch[fitting[0]]:
        yield from _leaves(sub)


def _rule(path: list[Any]) -> str | None:
    if len(path) == 5 and path[0] == "checks" and path[2:4] == ["where", "metadata"]:
        return METADATA_VALUE_RULE  # a column's name is the user's: never look it up as a field
    names = [part for part in path if isinstance(part, str)]
    if not names:
        return None
    if isinstance(path[-1], int) and names[-1] in ITEM_RULES:
        return ITEM_RULES[names[-1]]
    return FIELD_RULES.get(names[-1])


def _schema_problem(error, path: list[Any], entry_of: Callable[[int], _Entry]) -> str | None:
    """One schema error, at `path` in the document, in words naming its entry and field; None
    when another problem says it."""
    in_entry = len(path) >= 2 and path[0] == "checks" and isinstance(path[1], int)
    where = entry_of(path[1]) if in_entry else _Entry("the file")
    field_path = path[2:] if in_entry else path
    field = ".".join(map(str, field_path))
    instance = error.instance
    if error.validator == "required":
        missing = [key for key in error.validator_value if key not in instance]
        return f"{where.place}: {where.subject('.'.join(filter(None, [field, missing[0]])))} is missing"
    if error.validator == "additionalProperties":
        allowed = list(error.schema.get("properties", {}))
        unknown = sorted(str(key) for key in instance if key not in allowed)  # YAML keys may be numbers
        prefix = f"{field}." if field else ""
        more = f" (and {unknown[1:]})" if unknown[1:] else ""
        if in_entry and not field:
            others = ", ".join(SCOPE_FIELDS)
            return (f"{where.place}: {where.unknown(unknown[0])}{_close(unknown[0], allowed)}{more}; the checks are "
                    f"{', '.join(KINDS)}, and the other fields {others}")
        return (f"{where.place}: {where.unknown(prefix + unknown[0])}{_close(unknown[0], allowed)}{more}; "
                f"the fields are {', '.join(sorted(allowed))}")
    if in_entry and not field and error.validator == "oneOf":
        if not isinstance(instance, dict):
            return None  # the entry's type error says what is wrong
        kinds = _kinds_of(instance)
        if not kinds:
            if any(key not in (*KINDS, *SCOPE_FIELDS) for key in instance):
                return None  # the unknown field's problem says what is wrong
            return f"{where.place}: holds no check; give one of {', '.join(KINDS)}"
        return (f"{where.place}: holds {len(kinds)} checks ({', '.join(kinds)}); an entry holds one, so give "
                "each its own entry")
    if not path and error.validator == "type":
        return "the file: it must be a mapping with 'version' and 'checks'"
    if in_entry and not field:
        return f"{where.place} is {_shown(instance)}; an entry is a mapping of a name, one check and its scope"
    rule = _rule(path)
    if rule is None:
        return f"{where.place}: {where.subject(field)} is {_shown(instance)}: {error.message[:160]}"
    return f"{where.place}: {where.subject(field)} is {_shown(instance)}; {rule}"


# ---------------------------------------------------------------- what a schema cannot say

def _finite_problems(entry: Mapping[str, Any], kind: str | None) -> list[tuple[str, str]]:
    numbers: list[tuple[str, Any]] = []
    if kind == "number":
        spec = entry["number"]
        numbers += [(f"number.{key}", spec.get(key)) for key in ("value", "tolerance")] if isinstance(spec, dict) \
            else [("number", spec)]
    if kind in LIMIT_KINDS:
        numbers.append((kind, entry[kind]))
    where = entry.get("where")
    metadata = where.get("metadata") if isinstance(where, dict) else None
    if isinstance(metadata, dict):
        numbers += [(f"where.metadata.{column}", value) for column, value in metadata.items()]
    return [(field, f" is {value!r}; it must be a finite number") for field, value in numbers
            if isinstance(value, float) and not math.isfinite(value)]


def _schema_error(schema: Any) -> str | None:
    """Why an embedded schema is not JSON Schema (under its own $schema, else Draft 2020-12); None when it is."""
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator) \
        if isinstance(schema, dict) else jsonschema.Draft202012Validator
    try:
        validator_class.check_schema(schema)
    except jsonschema.exceptions.SchemaError as error:
        at = f" (at {'/'.join(map(str, error.absolute_path))})" if error.absolute_path else ""
        return f" is not a JSON Schema{at}: {error.message[:160]}"
    return None


def _entry_problems(entry: Any) -> list[tuple[str, str]]:
    """(field, text after the field's subject) for what the schema cannot say of one entry."""
    if not isinstance(entry, dict):
        return []
    kinds = _kinds_of(entry)
    kind = kinds[0] if len(kinds) == 1 else None
    problems = _finite_problems(entry, kind)
    argument = entry.get(kind)
    if kind in ("regex", "not_regex") and isinstance(argument, str):
        try:
            re.compile(argument, re.IGNORECASE if entry.get("ignore_case") is True else 0)
        except re.error as error:
            problems.append((kind, f" does not compile as a Python regular expression: {error}"))
    if kind == "json" and isinstance(argument, dict) and isinstance(argument.get("schema"), (dict, bool)):
        problem = _schema_error(argument["schema"])
        if problem:
            problems.append(("json.schema", problem))
    if kind is not None and kind not in TEXT_KINDS and "ignore_case" in entry:
        problems.append(("ignore_case", f" {_text_checks(kind)}"))
    if "where" in entry and "ids" in entry:
        problems.append(("ids", ": give 'where' or 'ids', not both"))
    if "turn" in entry:
        if kind in LIMIT_KINDS:
            problems.append((kind, ": a scenario's replies record no latency or cost; latency_ms and cost_usd "
                                   "check the evaluation set's rows"))
        if "where" in entry:
            problems.append(("where", ": a scenario check (one with 'turn') has no metadata to select by; name "
                                      "its scenarios with 'ids'"))
    return problems


def _order(path: Sequence[Any]) -> tuple:
    """A problem's place in the list: the file's own fields first, then by entry number (2
    before 11), then by field."""
    in_entry = len(path) >= 2 and path[0] == "checks" and isinstance(path[1], int)
    return (int(in_entry), *((0, item, "") if isinstance(item, int) else (1, 0, str(item)) for item in path))


@lru_cache(maxsize=1)
def _validator():
    return input_validator(shipped_schema(SCHEMA))


def _problems(document: Any, entry_of: Callable[[int], _Entry]) -> list[tuple[tuple, str]]:
    """Every problem of a parsed checks document, each with its place in the list."""
    validator = _validator()
    problems = []
    for error in validator.iter_errors(document):
        for leaf in _leaves(error):
            text = _schema_problem(leaf, list(leaf.absolute_path), entry_of)
            if text is not None:
                problems.append((_order(list(leaf.absolute_path)), text))
    entries = document.get("checks") if isinstance(document, dict) else None
    first_of: dict[str, int] = {}
    for position, entry in enumerate(entries if isinstance(entries, list) else []):
        where = entry_of(position)
        for field, text in _entry_problems(entry):
            problems.append((_order(["checks", position, *field.split(".")]),
                             f"{where.place}: {where.subject(field)}{text}"))
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str):
            if name in first_of:
                problems.append((_order(["checks", position, "name"]), f"{where.place}: field 'name' repeats entry "
                                 f"{first_of[name] + 1}'s name; each check needs its own"))
            first_of.setdefault(name, position)
    return problems


def _refusal(origin: str, what: str, problems: list[tuple[tuple, str]]) -> str:
    lines = list(dict.fromkeys(text for _, text in sorted(problems, key=lambda problem: problem[0])))
    shown = lines[:SHOWN_PROBLEMS]
    more = len(lines) - len(shown)
    return (f"{origin}: {len(lines)} problem(s) {what}; nothing was scored:\n"
            + "\n".join(f"  - {line}" for line in shown) + (f"\n  - ... and {more} more" if more else ""))


def _assertion(entry: Mapping[str, Any], place: str, column: str | None = None,
               ids: frozenset[str] | None = None) -> Assertion:
    (kind,) = _kinds_of(entry)
    where = entry.get("where")
    return Assertion(
        name=entry["name"], kind=kind, argument=entry[kind], ignore_case=entry.get("ignore_case", False),
        metadata=tuple(where["metadata"].items()) if where else (),
        ids=ids if ids is not None else (frozenset(str(i) for i in entry["ids"]) if "ids" in entry else None),
        turn=entry.get("turn"), place=place, column=column)


# ---------------------------------------------------------------- the checks file

def _entry_place(document: Any, position: int) -> _Entry:
    entry = document["checks"][position]
    name = entry.get("name") if isinstance(entry, dict) else None
    return _Entry(f"entry {position + 1}" + (f" ({name!r})" if isinstance(name, str) else ""))


def parse_checks(document: Any, origin: str) -> list[Assertion]:
    """The assertions of a parsed checks file; ChecksFileError listing every problem, `origin`
    naming the file."""
    problems = _problems(document, lambda position: _entry_place(document, position))
    if problems:
        raise ChecksFileError(_refusal(origin, "in the checks file", problems))
    return [_assertion(entry, _entry_place(document, position).place)
            for position, entry in enumerate(document["checks"])]


def _repeated_keys(text: str) -> list[str]:
    """Each key given twice in one mapping, with its lines. PyYAML keeps the last value of a
    repeated key without a word, so `contains: a` then `contains: b` would check b alone."""
    root = yaml.compose(text, Loader=ProfileLoader)
    found, pending, seen = [], [root] if root is not None else [], set()
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first_line: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                pending += [key, value]
                if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE_TAG:
                    continue
                line = key.start_mark.line + 1
                if (key.tag, key.value) in first_line:
                    found.append((line, f"line {line}: key {key.value!r} is given twice in one mapping "
                                        f"(first on line {first_line[key.tag, key.value]})"))
                first_line.setdefault((key.tag, key.value), line)
        elif isinstance(node, yaml.SequenceNode):
            pending += node.value
    return [text for _, text in sorted(found)]


def load_checks_file(path: str | Path) -> list[Assertion]:
    """The assertions of a checks file (YAML, read as a profile is: aliases and nesting bounded);
    ChecksFileError (exit 2) for a file that cannot be used, with every problem named."""
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ChecksFileError(f"{path}: cannot read the checks file: {error}") from None
    try:
        document = read_yaml(text)
    except YAMLRefused as error:
        raise ChecksFileError(f"{path}: {error}") from None
    except yaml.YAMLError as error:
        raise ChecksFileError(f"{path}: not valid YAML ({yaml_problem(error)})") from None
    repeated = _repeated_keys(text)
    if repeated:
        raise ChecksFileError(_refusal(str(path), "in the checks file", [((), line) for line in repeated]))
    return parse_checks(document, str(path))


# ---------------------------------------------------------------- against the loaded data

def _fold(identifier: str) -> str:
    return "".join(identifier.split()).casefold()


def _missing_ids(listed: Collection[str], known: Collection[str], what: tuple[str, str]) -> str | None:
    """': 's99' is not an id of the evaluation set' for the listed ids not known, with the ones that
    differ from a known id only in case or spaces; None when every one is known."""
    missing = sorted(identifier for identifier in listed if identifier not in known)
    if not missing:
        return None
    singular, plural = what
    verb = f"is not {singular}" if len(missing) == 1 else f"are not {plural}"
    folded = {_fold(identifier): identifier for identifier in known}
    near = [(identifier, folded[_fold(identifier)]) for identifier in missing if _fold(identifier) in folded]
    hint = ""
    if near:
        (first, first_known), *rest = near
        hint = (f" ({first!r} differs from {first_known!r} only in case or spaces"
                + "".join(f"; {identifier!r} from {known_id!r}" for identifier, known_id in rest) + ")")
    return f": {_listed([repr(identifier) for identifier in missing])} {verb}{hint}"


def _values_text(values: Iterable[Any]) -> str:
    distinct = list({(type(value), value) for value in values if not is_missing(value)})
    try:
        ordered = sorted(value for _, value in distinct)
    except TypeError:
        ordered = sorted((value for _, value in distinct), key=repr)
    return _listed([repr(value) for value in ordered]) if ordered else "all missing"


def _raise(origin: str, problems: dict[str, bool]) -> None:
    """Raise for the problems (text -> whether it came from a checks file), if there are any."""
    if not problems:
        return
    error = ChecksFileError if any(problems.values()) else CheckColumnsError
    raise error(_refusal(origin, "with the checks against the data", [((), text) for text in problems]))


def check_against_data(assertions: Sequence[Assertion], ids: Iterable[Any], metadata_columns: Iterable[str],
                       has_latency: bool, has_cost: bool, origin: str, *,
                       metadata_values: Mapping[str, Iterable[Any]] | None = None,
                       builtin_names: Collection[str] = ()) -> None:
    """Refuse (ChecksFileError, or CheckColumnsError for checks from columns) every row check that
    the loaded data cannot serve: an id listed that is not an example's (matched exactly, as
    predictions are), a metadata column it has not, a metadata value no row holds (when
    `metadata_values`, each column's values over the rows, are given), a latency limit in a run
    that did not generate its answers, a cost limit in one that recorded no cost. `ids` are the
    ids of the whole evaluation set, before `limit`. Scenario checks are check_against_scenarios'.

    Given the file's and the columns' assertions together, a file check named as a check column
    is refused, and one named as one of evalbook's own checks (`builtin_names`, such as the fact
    check's), since a run's summary holds one entry per name."""
    known_ids = {str(identifier) for identifier in ids}
    columns = list(metadata_columns)
    column_checks = {assertion.name for assertion in assertions if assertion.column is not None}
    problems: dict[str, bool] = {}
    for assertion in assertions:
        in_file = assertion.column is None

        def add(field: str, text: str) -> None:
            head = f"{assertion.place}: field {field!r}" if in_file else f"column {assertion.column!r}"
            problems.setdefault(head + text, in_file)

        if in_file and assertion.name in builtin_names:
            add("name", f": {assertion.name!r} names one of evalbook's own checks; give this check another name")
        if in_file and assertion.name in column_checks:
            add("name", f": {assertion.name!r} is also a check column of the evaluation set; give this check "
                        "another name")
        if assertion.turn is not None:
            continue
        if in_file and assertion.ids is not None:
            missing = _missing_ids(assertion.ids, known_ids,
                                   ("an id of the evaluation set", "ids of the evaluation set"))
            if missing:
                add("ids", missing)
        for column, value in assertion.metadata:
            field = f"where.metadata.{column}"
            if column not in columns:
                have = f"its metadata columns are {', '.join(columns)}" if columns else "it has no metadata columns"
                add(field, f": the evaluation set has no metadata column {column!r}{_close(column, columns)}; {have}")
            elif metadata_values is not None:
                values = list(metadata_values.get(column, []))
                if not any(same_value(found, value) for found in values):
                    add(field, f": no row has {column} {value!r}; its values are {_values_text(values)}")
        if assertion.kind == "latency_ms" and not has_latency:
            add("latency_ms", ": this run did not generate its answers (00_generate), so no latency was recorded "
                              "to check")
        if assertion.kind == "cost_usd" and not has_cost:
            add("cost_usd", ": this run recorded no cost for its answers, so a cost_usd limit cannot be checked")
    _raise(origin, problems)


def check_against_scenarios(assertions: Sequence[Assertion], scenario_ids: Iterable[str] | None,
                            origin: str) -> None:
    """Refuse (ChecksFileError) every scenario check (one with `turn`) that the run's scenarios
    cannot serve: ids that are not scenarios of the scenario file, or any turn check at all when
    the run simulates no scenarios (`scenario_ids` None), where it would never run."""
    known = None if scenario_ids is None else set(scenario_ids)
    problems: dict[str, bool] = {}
    for assertion in assertions:
        if assertion.turn is None:
            continue
        if known is None:
            problems.setdefault(f"{assertion.place}: field 'turn': this run simulates no scenarios, so a check on a "
                                "scenario's replies would never run", True)
        elif assertion.ids is not None:
            missing = _missing_ids(assertion.ids, known, ("a scenario of the scenario file",
                                                          "scenarios of the scenario file"))
            if missing:
                problems.setdefault(f"{assertion.place}: field 'ids'{missing}", True)
    _raise(origin, problems)


# ---------------------------------------------------------------- check columns

def is_check_column(name: Any) -> bool:
    """Whether an evaluation set's column holds checks (its name starts with check_): it is read
    by assertions_from_columns, not kept as metadata."""
    return isinstance(name, str) and name.startswith(CHECK_COLUMN_PREFIX)


def _column_problem(column: str) -> str | None:
    match = _CHECK_COLUMN.fullmatch(column)
    if match is None:
        names = [CHECK_COLUMN_PREFIX + kind for kind in KINDS]
        return (f"column {column!r}: names no check{_close(column, names)}; a check column is check_<check>, "
                f"check_<check>_ignore_case, or either followed by .<label>; the checks are {', '.join(KINDS)}")
    if not _NAME.fullmatch(column):
        return f"column {column!r}: is not a check's name: {NAME_RULE}"
    if match["ignore_case"] and match["kind"] not in TEXT_KINDS:
        return f"column {column!r}: ignore_case {_text_checks(match['kind'])}"
    return None


def _cell_value(cell: Any) -> Any:
    """A cell as a Python value: numpy's scalars and arrays (from Parquet) as Python's."""
    if isinstance(cell, np.generic):
        return cell.item()
    if isinstance(cell, np.ndarray):
        return cell.tolist()
    return cell


def _empty(cell: Any) -> bool:
    return (not isinstance(cell, (list, dict)) and is_missing(cell)) or (isinstance(cell, str) and not cell.strip())


@lru_cache(maxsize=None)
def _kind_validator(kind: str):
    """A validator of one kind's argument alone: a cell is checked in a few microseconds, where
    the whole file's schema, oneOf of every kind included, took a millisecond."""
    schema = shipped_schema(SCHEMA)
    return input_validator({"$defs": schema["$defs"], "$ref": f"#/$defs/check/properties/{kind}"})


# Stands for a cell's place in the problems worked out once for every cell of the same value.
_PLACE = "\x00place\x00"


def _cell_problems(column: str, kind: str, entry: dict[str, Any]) -> list[str]:
    """The problems of one column's cell, as an entry of a file would have them, each naming the
    cell's place as _PLACE."""
    where = _Entry(_PLACE, column_kind=kind)
    problems = []
    for error in _kind_validator(kind).iter_errors(entry[kind]):
        for leaf in _leaves(error):
            text = _schema_problem(leaf, ["checks", 0, kind, *leaf.absolute_path], lambda _: where)
            if text is not None:
                problems.append(text)
    problems += [f"{_PLACE}: {where.subject(field)}{text}" for field, text in _entry_problems(entry)]
    return list(dict.fromkeys(problems))


def assertions_from_columns(table, origin: str) -> dict[str, list[Assertion]]:
    """Each row's assertions from its check columns (is_check_column), by example id, in column
    order; a row whose check cells are all empty (missing, or only whitespace) has none and is
    left out. A cell of contains, not_contains, equals, regex or not_regex is its text; any other
    cell that is text (as every CSV cell is) is read as JSON: 50, true, ["a", "b"],
    {"value": 14, "unit": "days"}. Each assertion is named after its column and applies to its
    own row only. Rows are named by the table's `row` column (the file's row number) when it has
    one, else by position from 1. CheckColumnsError lists every problem, naming column and row."""
    columns = [column for column in table.columns if is_check_column(column)]
    problems: list[tuple[tuple, str]] = []
    usable = []
    for position, column in enumerate(columns):
        problem = _column_problem(column)
        if problem is None:
            usable.append((position, column, _CHECK_COLUMN.fullmatch(column)))
        else:
            problems.append(((0, position), problem))
    identifiers = [str(identifier) for identifier in table["id"].tolist()]
    rows = table["row"].tolist() if "row" in table.columns else list(range(1, len(table) + 1))
    cells = {column: [_cell_value(cell) for cell in table[column].tolist()] for _, column, _ in usable}
    known: dict[tuple[str, str], list[str]] = {}  # (column, the cell as JSON) -> its problems
    found: dict[str, list[Assertion]] = {}
    for index, (identifier, row) in enumerate(zip(identifiers, rows)):
        for position, column, match in usable:
            cell = cells[column][index]
            if _empty(cell):
                continue
            kind, place = match["kind"], f"column {column!r}, row {row} (id {identifier!r})"
            if isinstance(cell, str) and kind not in WRITTEN_KINDS:
                try:
                    cell = json.loads(cell)
                except ValueError:
                    problems.append(((1, index, position), f"{place}: the cell is {_shown(cell)}, which is not JSON; "
                                     f"{FIELD_RULES[kind]}"))
                    continue
            entry = {"name": column, kind: cell, **({"ignore_case": True} if match["ignore_case"] else {})}
            key = (column, json.dumps(cell, sort_keys=True))
            if key not in known:
                known[key] = _cell_problems(column, kind, entry)
            if known[key]:
                problems += [((1, index, position), text.replace(_PLACE, place)) for text in known[key]]
                continue
            found.setdefault(identifier, []).append(_assertion(entry, place, column=column,
                                                               ids=frozenset({identifier})))
    if problems:
        raise CheckColumnsError(_refusal(origin, "in the check columns", problems))
    return found


def column_entries(assertions: Sequence[Assertion]) -> str:
    """One row's check-column assertions as the JSON list that the canonical table's `checks`
    column holds: each as the entry it was read from (name, check and argument, ignore_case)."""
    return json.dumps([{"name": assertion.name, assertion.kind: assertion.argument,
                        **({"ignore_case": True} if assertion.ignore_case else {})} for assertion in assertions],
                      ensure_ascii=False, allow_nan=False)


def assertions_from_entries(text: str | None, identifier: str, row: int) -> list[Assertion]:
    """The assertions a canonical row's `checks` column holds (column_entries), again as the
    check columns of row `row` gave them, each applying to example `identifier` only; none for a
    row without check cells (null or [])."""
    if not isinstance(text, str):
        return []  # null: a row without check cells
    return [_assertion(entry, f"column {entry['name']!r}, row {row} (id {identifier!r})", column=entry["name"],
                       ids=frozenset({identifier})) for entry in json.loads(text)]

"""Load an evaluation set and its generated answers into one canonical, typed table.

Sources: the Hugging Face dataset through an `hf://` path (huggingface_hub's HfFileSystem +
pyarrow), or a Parquet, CSV or JSONL file, local or an `s3://` object (read with one GetObject,
credentials from the standard AWS chain). CSV and JSONL are UTF-8, with or without a byte order
mark. Generated answers come from a column of the same file or from a predictions file joined
by `id`.

Every problem with the input is a `LoadError` naming the file, the column and the rows.
Rows are numbered from 1 in file order (a JSONL row is its line; a CSV row excludes the header).
Nothing is dropped silently or altered: a CSV is read strictly, so a stray quote is an error
rather than repaired; unmatched predictions, examples without a prediction, empty answers and
rows left out by `limit` are all counted in `LoadResult.counts`, and input that loads but is
partly unusable gets a sentence in `LoadResult.warnings`. Input that leaves nothing to score
is a LoadError, so the run fails instead of reporting empty means.
"""

from __future__ import annotations

import codecs
import difflib
import hashlib
import csv
import io
import json
import re
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Collection

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from evalbook.checks.assertions import Assertion
from evalbook.checks.checksfile import (assertions_from_columns, assertions_from_entries, column_entries,
                                        is_check_column)
from evalbook.errors import EvalbookError
from evalbook import storage
from evalbook.formatting import is_missing
from evalbook.metrics import METRICS, SCORE_FLAGS
from evalbook.score.models import hub_reachable
from evalbook.score.retrieval import duplicate_id_warnings, duplicate_retrieved_ids

EXAMPLE_TEXT_COLUMNS = ("question", "context", "answer")
RETRIEVED_COLUMNS = ("retrieved_ids", "retrieved_contexts")  # the system's results, in rank order
GOLD_IDS = "gold_ids"  # optional: the ids of every document relevant to the question, instead of gold_id
LIST_COLUMNS = (*RETRIEVED_COLUMNS, GOLD_IDS)
OPTIONAL_TEXT_COLUMNS = ("gold_id", "source")
GOLD_COLUMNS = ("gold_id", GOLD_IDS)  # the relevant documents' ids, from the input or the predictions
CONVERSATION = "conversation"  # optional multi-turn transcript: [{"role": ..., "content": ...}, ...]
METADATA = "metadata"  # the canonical column that carries every input column evalbook does not read
CHECKS = "checks"  # the canonical column that carries a row's check columns (check_<check>), as JSON
GENERATOR = "generator"  # optional: the system that wrote the row's answer, for the report
PREDICTION_COLUMNS = (*RETRIEVED_COLUMNS, "source", CONVERSATION, GENERATOR)
SHOWN_ROWS = 10
# surrogateescape decodes each byte that is not UTF-8 to one of these lone surrogates
UNDECODABLE = re.compile("[\udc80-\udcff]")

CANONICAL_SCHEMA = pa.schema([
    pa.field("id", pa.string(), nullable=False),
    pa.field("row", pa.int64(), nullable=False),
    pa.field("question", pa.string(), nullable=False),
    pa.field("context", pa.string(), nullable=False),
    pa.field("reference_answer", pa.string(), nullable=False),
    pa.field("generated_answer", pa.string()),
    pa.field("has_prediction", pa.bool_(), nullable=False),
    pa.field("generated_empty", pa.bool_(), nullable=False),
    pa.field("reference_empty", pa.bool_(), nullable=False),
    pa.field("gold_id", pa.string()),
    pa.field(GOLD_IDS, pa.list_(pa.string())),
    pa.field("retrieved_ids", pa.list_(pa.string())),
    pa.field("retrieved_contexts", pa.list_(pa.string())),
    pa.field("source", pa.string()),
    pa.field(CONVERSATION, pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    # every input column evalbook does not read, as one JSON object per row: {name: value}
    pa.field(METADATA, pa.string(), nullable=False),
    # the row's check columns (docs/checks-assertions.md) as a JSON list of entries; null for none
    pa.field(CHECKS, pa.string()),
])
# The input columns evalbook reads; every other column of either file is kept as metadata.
READ_COLUMNS = frozenset({"id", *EXAMPLE_TEXT_COLUMNS, "generated_answer", *PREDICTION_COLUMNS,
                          *OPTIONAL_TEXT_COLUMNS, GOLD_IDS})
# Names a metadata column cannot take: the canonical and scored tables' columns, a report
# example's fields and the metrics' names, which slices and pages already use.
RESERVED_NAMES = frozenset({*CANONICAL_SCHEMA.names, *SCORE_FLAGS, *(m.name for m in METRICS), "rank",
                            "retrieval", "answer_similarity", "flags", "judge", "row", "__row"})
METADATA_TYPES = ("string", "integer", "float", "boolean")
_CSV_INTEGER = re.compile(r"[+-]?\d+")
_CSV_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|nan)", re.IGNORECASE)
_CSV_BOOLEAN = {"true": True, "false": False}


# Column names of the peers' datasets, read as evalbook's when the file lacks evalbook's own
# (a peer's name beside ours stays metadata): the peer's name -> (ours, the peer).
PEER_NAMES = {
    "user_input": ("question", "RAGAS"), "reference": ("answer", "RAGAS"), "ground_truth": ("answer", "RAGAS"),
    "response": ("generated_answer", "RAGAS"), "contexts": ("retrieved_contexts", "RAGAS"),
    "input": ("question", "DeepEval"), "expected_output": ("answer", "DeepEval"),
    "actual_output": ("generated_answer", "DeepEval"), "retrieval_context": ("retrieved_contexts", "DeepEval"),
}
# What a predictions file may hold under a peer's name: the answers and what was retrieved.
PREDICTION_PEER_NAMES = frozenset(name for name, (ours, _) in PEER_NAMES.items()
                                  if ours in ("generated_answer", "retrieved_contexts"))


def _rows_text(rows: list[int]) -> str:
    shown = ", ".join(str(r) for r in rows[:SHOWN_ROWS])
    more = f" and {len(rows) - SHOWN_ROWS} more" if len(rows) > SHOWN_ROWS else ""
    return f"row{'s' if len(rows) > 1 else ''} {shown}{more}"


class LoadError(EvalbookError, ValueError):
    """Input that cannot be loaded; the message names the file, the column and the rows."""

    def __init__(self, file: str, message: str, column: str | None = None,
                 rows: list[int] | None = None):
        self.file, self.column, self.rows = file, column, rows or []
        where = [f"file {file}"]
        if column is not None:
            where.append(f"column {column!r}")
        if rows:
            where.append(_rows_text(rows))
        super().__init__(f"{'; '.join(where)}: {message}")


@dataclass
class LoadResult:
    table: pd.DataFrame
    counts: dict[str, int]
    unmatched_prediction_ids: list[str] = field(default_factory=list)
    examples_without_prediction: list[str] = field(default_factory=list)
    skipped_incomplete_rows: list[int] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    # hints and warnings about input that loaded but is partly unusable, in plain sentences
    warnings: list[str] = field(default_factory=list)
    # the distinct values of a `generator` column of the scored rows, if the data has one
    generators: list[str] = field(default_factory=list)
    # the sha256 of each input file, by its key (input_path, predictions_path); None for hf://
    inputs_sha256: dict[str, str | None] = field(default_factory=dict)
    # the input columns kept as metadata, in file order (the examples file's first)
    metadata: list[MetadataColumn] = field(default_factory=list)


@dataclass(frozen=True)
class MetadataColumn:
    """An input column evalbook does not read, kept as metadata: its name, its type (one of
    METADATA_TYPES), the file it came from (`input_path` or `predictions_path`, the profile's
    key), and over the loaded examples the number of distinct values and of missing ones."""

    name: str
    type: str
    file: str
    n_distinct: int
    n_missing: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- reading files

def _hf_filesystem():
    # slow to import: only for hf:// inputs
    from huggingface_hub import HfFileSystem

    return HfFileSystem()


def hf_parquet_files(path: str, split: str, filesystem) -> list[str]:
    """The Parquet files an `hf://` path names: a file, a glob, or a dataset root + split.

    A dataset root (`hf://datasets/<owner>/<name>`) resolves to `data/<split>-*.parquet`, the
    layout the hub's Parquet datasets use.
    """
    inner = path[len("hf://"):]
    if inner.endswith(".parquet") and not any(c in inner for c in "*?["):
        return [inner]
    pattern = inner if any(c in inner for c in "*?[") else f"{inner.rstrip('/')}/data/{split}-*.parquet"
    files = sorted(filesystem.glob(pattern))
    if not files:
        raise LoadError(path, f"no Parquet files match {pattern!r} (split {split!r})")
    return files


def _read_parquet(path: str, source, filesystem=None) -> pd.DataFrame:
    """Read a Parquet file from `source` (a path, or a file object); `path` names it in errors."""
    if filesystem is None:
        table = pq.read_table(source)
    else:
        with filesystem.open(source, "rb") as handle:
            table = pq.read_table(handle)
    for column in table.schema:
        if pa.types.is_large_string(column.type) or pa.types.is_string(column.type):
            continue
        if column.name in (*LIST_COLUMNS, CONVERSATION) or column.name == "id":
            continue
        if column.name in (*EXAMPLE_TEXT_COLUMNS, "generated_answer", *OPTIONAL_TEXT_COLUMNS) \
                and not pa.types.is_null(column.type):
            raise LoadError(path, f"must hold text, but its Parquet type is {column.type}",
                            column=column.name, rows=list(range(1, table.num_rows + 1)))
    # integer_object_nulls keeps an integer id column with nulls as ints and None, not floats.
    return table.to_pandas(integer_object_nulls=True)


def _byte_position(body: bytes, offset: int) -> tuple[int, int]:
    """The 1-based line and character of byte `offset`, whose preceding bytes are valid UTF-8."""
    line_start = body.rfind(b"\n", 0, offset) + 1
    return body.count(b"\n", 0, offset) + 1, len(body[line_start:offset].decode("utf-8")) + 1


def _utf8_text(path: str, data: bytes, locate) -> str:
    """The file's text, without a UTF-8 byte order mark. Bytes that are not UTF-8 are a LoadError
    naming their line and character, and the column and rows that `locate(text, line)` finds in
    the text decoded with each bad byte kept as a lone surrogate."""
    body = data.removeprefix(codecs.BOM_UTF8)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, character = _byte_position(body, exc.start)
        column, rows = locate(body.decode("utf-8", errors="surrogateescape"), line)
        raise LoadError(path, f"byte 0x{body[exc.start]:02x} on line {line}, character {character}, "
                        "is not UTF-8; the file must be UTF-8 (convert it, for example with "
                        "`iconv -f latin1 -t utf-8`)", column=column, rows=rows) from None


def _holds_undecodable(value: Any) -> bool:
    if isinstance(value, str):
        return UNDECODABLE.search(value) is not None
    if isinstance(value, list):
        return any(_holds_undecodable(item) for item in value)
    if isinstance(value, dict):
        return any(_holds_undecodable(item) for item in value.values())
    return False


def _jsonl_undecodable(text: str, line: int) -> tuple[str | None, list[int]]:
    """The key of line `line` whose value holds the bad bytes (None when it cannot be told)."""
    try:
        record = json.loads(text.split("\n")[line - 1])
    except ValueError:
        return None, [line]
    if not isinstance(record, dict):
        return None, [line]
    keys = [key for key, value in record.items() if _holds_undecodable(value)]
    return (keys[0] if keys else None), [line]


def _read_jsonl(path: str, data: bytes) -> pd.DataFrame:
    records, blank_lines = [], 0
    text = _utf8_text(path, data, _jsonl_undecodable)
    for line_number, line in enumerate(io.StringIO(text, newline=None), start=1):
        if not line.strip():
            blank_lines += 1
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LoadError(path, f"not valid JSON ({exc.msg} at column {exc.colno})",
                            rows=[line_number]) from exc
        if not isinstance(record, dict):
            raise LoadError(path, "each line must be a JSON object", rows=[line_number])
        record["__row"] = line_number
        records.append(record)
    if not records:
        raise LoadError(path, f"holds no JSON lines ({blank_lines} blank lines): nothing to score")
    # dtype=object keeps each value as written: an int id stays an int beside a missing one.
    return pd.DataFrame(records, dtype=object)


def _rejected_by_strict_reader(text: str) -> bool:
    """True when the strict CSV reader fails inside `text`, not merely at its end."""
    try:
        for _ in csv.reader(io.StringIO(text, newline=""), strict=True):
            pass
    except csv.Error as exc:
        return not str(exc).startswith("unexpected end of data")
    return False


def _quoting_error(path: str, text: str, header: list[str] | None, row: int,
                   lines: tuple[int, int], error: csv.Error) -> LoadError:
    """A LoadError naming the column and line where the strict CSV reader stopped.

    The csv module does not say where in a record it failed, so the shortest failing prefix of
    the record is found by bisection, and a lenient read of what precedes it counts the fields.
    `lines` are the first and last line the strict reader read of the record.
    """
    start_line, end_line = lines
    record = "".join(io.StringIO(text, newline="").readlines()[start_line - 1:end_line])
    where = {"rows": [row] if header else None}
    if str(error).startswith("unexpected end of data"):
        fields = next(csv.reader(io.StringIO(record, newline="")))
        message = f"the quote opened in the row that starts on line {start_line} is never closed"
    else:
        low, high = 0, len(record)
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if _rejected_by_strict_reader(record[:middle]) else (middle + 1, high)
        before = record[:low - 1]
        fields = next(csv.reader(io.StringIO(before, newline="")))
        line = start_line + len(io.StringIO(before, newline="").readlines()) - 1
        message = (f"line {line}: a quoted field must end at its closing quote, but {record[low - 1]!r} "
                   'follows it; quote the whole field and double the quotes inside it '
                   '("""Other"" context"), so that no text is altered')
    if header and len(fields) <= len(header):
        where["column"] = header[len(fields) - 1]
    elif header is None:
        message = f"in the header: {message}"
    return LoadError(path, message, **where)


def _csv_records(path: str, text: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and each data record with the line it starts on, read strictly: a stray quote
    or an unclosed one is an error, never repaired. Blank lines are skipped."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header, records = None, []
    while True:
        start_line = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            raise _quoting_error(path, text, header, len(records) + 1,
                                 (start_line, reader.line_num), error) from None
        if not fields:
            continue
        if header is None:
            header = fields
        else:
            records.append((start_line, fields))
    if header is None:
        raise LoadError(path, "holds only blank lines: nothing to score")
    return header, records


def _csv_undecodable(text: str, line: int) -> tuple[str | None, list[int] | None]:
    """The column and rows of a CSV whose cells hold the bad bytes (None when it cannot be told)."""
    try:
        header, records = _csv_records("", text)
    except LoadError:
        return None, None
    if _holds_undecodable(header):
        return None, None
    bad = [(row, position) for row, (_, fields) in enumerate(records, start=1)
           for position, cell in enumerate(fields) if _holds_undecodable(cell)]
    if not bad or bad[0][1] >= len(header):
        return None, None
    position = bad[0][1]
    return header[position], [row for row, p in bad if p == position]


def _check_csv_shape(path: str, header: list[str], records: list[tuple[int, list[str]]]) -> None:
    for name in header:
        if header.count(name) > 1:
            raise LoadError(path, f"the header names this column {header.count(name)} times",
                            column=name)
    if not records:
        raise LoadError(path, "has a header but no data rows: nothing to score")
    wrong = [(row, line, len(fields)) for row, (line, fields) in enumerate(records, start=1)
             if len(fields) != len(header)]
    if wrong:
        _, line, n_fields = wrong[0]
        raise LoadError(path, f"line {line} has {n_fields} fields, the header has {len(header)}",
                        rows=[row for row, _, _ in wrong])


def _read_csv(path: str, data: bytes) -> pd.DataFrame:
    header, records = _csv_records(path, _utf8_text(path, data, _csv_undecodable))
    _check_csv_shape(path, header, records)
    frame = pd.DataFrame([fields for _, fields in records], columns=header, dtype=object)
    frame["__row"] = np.arange(1, len(frame) + 1)
    frame.attrs["csv"] = True  # every cell is text: metadata columns get their type from their cells
    # A CSV cell cannot tell an empty string from a missing value. An empty generated_answer
    # stays "" (an empty answer, flagged); an empty optional id or label is missing.
    for column in OPTIONAL_TEXT_COLUMNS:
        if column in frame.columns:
            frame[column] = [None if text.strip() == "" else text for text in frame[column]]
    for column in (*LIST_COLUMNS, CONVERSATION):
        if column in frame.columns:
            frame[column] = [_parse_csv_list(path, column, i + 1, text)
                             for i, text in enumerate(frame[column])]
    return frame


def _parse_csv_list(path: str, column: str, row: int, text: str):
    if text.strip() == "":
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        items = "strings" if column in LIST_COLUMNS else '{"role", "content"} turns'
        raise LoadError(path, f"must be a JSON list of {items}", column=column, rows=[row]) from exc
    return value


def _read_hf(path: str, split: str, hf_filesystem) -> pd.DataFrame:
    if hf_filesystem is None and not hub_reachable():
        raise LoadError(path, "reading an hf:// path needs the Hugging Face hub, which is not "
                        "reachable from this machine (or HF_HUB_OFFLINE is set); use a local "
                        "copy of the file instead")
    filesystem = hf_filesystem if hf_filesystem is not None else _hf_filesystem()
    files = hf_parquet_files(path, split, filesystem)
    frame = pd.concat([_read_parquet(f, f, filesystem) for f in files], ignore_index=True)
    if frame.empty:
        raise LoadError(path, f"the Parquet files of split {split!r} have no rows: nothing to score")
    return frame


def input_sha256(path: str | None) -> str | None:
    """The sha256 of an input file's bytes, for the provenance that tells two runs' data apart;
    None without a file, and for an hf:// path (a dataset of Parquet files, named by the hub).
    An s3:// object is read once more for it."""
    if path is None or path.startswith("hf://"):
        return None
    return hashlib.sha256(_file_bytes(path)).hexdigest()


def _file_bytes(path: str) -> bytes:
    """The bytes of a local file or of an s3:// object (one GetObject)."""
    if storage.is_remote(path):
        try:
            return storage.read_bytes(path)
        except storage.StorageError as error:
            raise LoadError(path, str(error)) from None
    if not Path(storage.local_path(path)).is_file():
        raise LoadError(path, "file not found")
    return Path(storage.local_path(path)).read_bytes()


def _read_file(path: str) -> pd.DataFrame:
    scheme = path.partition("://")[0].lower() if "://" in path else "file"
    if scheme not in ("file", *storage.S3_SCHEMES):
        raise LoadError(path, f"{scheme}:// is not supported: only local files, hf:// and s3:// "
                        "paths are read")
    if scheme == "file" and Path(storage.local_path(path)).is_dir():
        raise LoadError(path, "is a directory, not a file; give a .parquet, .csv or .jsonl file")
    suffix = PurePosixPath(path).suffix.lower()
    if suffix not in (".parquet", ".jsonl", ".ndjson", ".csv"):
        raise LoadError(path, f"unsupported file type {suffix!r}; use .parquet, .csv or .jsonl")
    data = _file_bytes(path)
    if not data:
        raise LoadError(path, "the file is empty (0 bytes): nothing to score")
    if suffix == ".csv":
        return _read_csv(path, data)
    if suffix != ".parquet":
        return _read_jsonl(path, data)
    frame = _read_parquet(path, pa.BufferReader(data))
    if frame.empty:
        raise LoadError(path, "has no rows: nothing to score")
    return frame


def read_records(path: str, split: str = "test", hf_filesystem=None) -> pd.DataFrame:
    """Read one input file into a DataFrame with a `__row` column (1-based file order).

    A local file, an `s3://` object or an `hf://` path. CSV and JSONL must be UTF-8 (a byte
    order mark is allowed); a file with no rows is a LoadError, since it leaves nothing to score.
    """
    try:
        frame = _read_hf(path, split, hf_filesystem) if path.startswith("hf://") else _read_file(path)
    except LoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure becomes a named, readable error
        raise LoadError(path, f"cannot read the file ({type(exc).__name__}: {exc})") from exc
    if "__row" not in frame.columns:
        frame["__row"] = np.arange(1, len(frame) + 1)
    return frame


# ---------------------------------------------------------------- validating columns

def _peer_renames(columns: list[Any], path: str, names: Collection[str]) -> dict[str, str]:
    """The file's columns named as a peer names them (PEER_NAMES, those of `names`), each to
    evalbook's name, where the file lacks evalbook's own. RAGAS 0.1's pair (`answer` the
    generated answer, `ground_truth` the reference) and two peer names for one column are a
    LoadError naming the renames that fix it."""
    present = [column for column in columns if isinstance(column, str)]
    if "ground_truth" in present and "answer" in present and "ground_truth" in names:
        raise LoadError(path, "holds both 'answer' and 'ground_truth', as RAGAS 0.1 data does, where answer is the "
                        "generated answer and ground_truth the reference; evalbook's answer is the reference: "
                        "rename answer to generated_answer and ground_truth to answer", column="ground_truth")
    renames: dict[str, str] = {}
    for column in present:
        if column not in names:
            continue
        ours = PEER_NAMES[column][0]
        if ours in present:
            continue
        earlier = next((peer for peer, target in renames.items() if target == ours), None)
        if earlier is not None:
            raise LoadError(path, f"{earlier!r} and {column!r} both stand for {ours}; keep one, or name one {ours}",
                            column=column)
        renames[column] = ours
    return renames


def _with_our_names(frame: pd.DataFrame, path: str, names: Collection[str]) -> pd.DataFrame:
    """`frame` with its peer-named columns renamed to evalbook's (_peer_renames); the sentence
    that says so, once per file, in its attrs' `renamed`."""
    renames = _peer_renames(list(frame.columns), path, names)
    if not renames:
        return frame
    peers = sorted({PEER_NAMES[column][1] for column in renames})
    renamed = frame.rename(columns=renames)
    renamed.attrs.update(frame.attrs)
    renamed.attrs["renamed"] = (f"file {path}: the columns named as {' and '.join(peers)} name them are read as "
                                "evalbook's: " + ", ".join(f"{peer!r} as {ours}" for peer, ours in renames.items()))
    return renamed


def _require_columns(frame: pd.DataFrame, path: str, columns) -> None:
    for column in columns:
        if column not in frame.columns:
            present = sorted(c for c in frame.columns if c != "__row")
            near = difflib.get_close_matches(column, [str(c) for c in present], n=1, cutoff=0.6)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise LoadError(path, f"required column is missing{hint} (columns present: {present})",
                            column=column)


def _check_text(frame: pd.DataFrame, path: str, column: str, allow_null: bool,
                null_hint: str = "") -> None:
    rows = frame["__row"].tolist()
    bad, null = [], []
    for row, value in zip(rows, frame[column].tolist()):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            null.append(row)
        elif not isinstance(value, str):
            bad.append(row)
    if bad:
        raise LoadError(path, "must hold text; found non-text values", column=column, rows=bad)
    if null and not allow_null:
        raise LoadError(path, f"must hold text; found missing values{null_hint}", column=column, rows=null)


def _check_list(frame: pd.DataFrame, path: str, column: str) -> None:
    """Each value of a list column is a list of strings; gold_ids also names at least one, since
    recall and nDCG divide by the number of relevant documents."""
    bad, empty = [], []
    for row, value in zip(frame["__row"].tolist(), frame[column].tolist()):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue
        items = list(value) if isinstance(value, (list, tuple, np.ndarray)) else None
        if items is None or not all(isinstance(item, str) for item in items):
            bad.append(row)
        elif column == GOLD_IDS and not items:
            empty.append(row)
    if bad:
        what = ": the ids of the relevant documents" if column == GOLD_IDS else " in rank order"
        raise LoadError(path, f"must be a list of strings{what}", column=column, rows=bad)
    if empty:
        raise LoadError(path, "must name at least one relevant document; leave the value out (null, or "
                        "an empty cell) for a question without one", column=column, rows=empty)


def _check_one_gold(frame: pd.DataFrame, path: str) -> None:
    """A row gives its relevant documents once: gold_id or gold_ids, never both."""
    if "gold_id" not in frame.columns or GOLD_IDS not in frame.columns:
        return
    both = [row for row, single, several in zip(frame["__row"], frame["gold_id"], frame[GOLD_IDS])
            if not is_missing(single) and not is_missing(several)]
    if both:
        raise LoadError(path, "gives both gold_id and gold_ids; give one (gold_ids may hold a single id)",
                        column=GOLD_IDS, rows=both)


def _normalise_ids(frame: pd.DataFrame, path: str, generated: bool) -> pd.Series:
    if generated:
        return pd.Series([str(r - 1) for r in frame["__row"]], index=frame.index)
    bad = [row for row, value in zip(frame["__row"], frame["id"])
           if isinstance(value, bool) or not isinstance(value, (str, int, np.integer))
           or str(value).strip() == ""]
    if bad:
        raise LoadError(path, "ids must be non-empty strings or integers", column="id", rows=bad)
    ids = frame["id"].map(str)
    duplicated = ids[ids.duplicated(keep=False)]
    if not duplicated.empty:
        rows = frame.loc[duplicated.index, "__row"].tolist()
        values = sorted(set(duplicated))
        raise LoadError(path, f"duplicate id(s) {_shown(values, SHOWN_ROWS)}", column="id", rows=rows)
    return ids


def _check_conversation(frame: pd.DataFrame, path: str) -> None:
    bad = []
    for row, value in zip(frame["__row"].tolist(), frame[CONVERSATION].tolist()):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue
        turns = list(value) if isinstance(value, (list, tuple, np.ndarray)) else None
        if not turns or not all(isinstance(t, dict) and set(t) == {"role", "content"}
                                and isinstance(t["role"], str) and isinstance(t["content"], str)
                                for t in turns):
            bad.append(row)
    if bad:
        raise LoadError(path, 'must be a non-empty list of {"role": text, "content": text} turns',
                        column=CONVERSATION, rows=bad)


def _validate_optional(frame: pd.DataFrame, path: str) -> None:
    if CONVERSATION in frame.columns:
        _check_conversation(frame, path)
    for column in LIST_COLUMNS:
        if column in frame.columns:
            _check_list(frame, path, column)
    for column in OPTIONAL_TEXT_COLUMNS:
        if column in frame.columns:
            _check_text(frame, path, column, allow_null=True)
    _check_one_gold(frame, path)


# ---------------------------------------------------------------- metadata


def _cell_kind(value: Any) -> str | None:
    """The metadata type of one cell, None when it is missing, "nested" for anything else."""
    if is_missing(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return "boolean"
    if isinstance(value, (int, np.integer)):
        return "integer"
    if isinstance(value, (float, np.floating)):
        return "float"
    return "string" if isinstance(value, str) else "nested"


def _csv_metadata(cells: list[str]) -> tuple[str, list[Any]]:
    """A CSV column's type and values: integers when every non-empty cell is one, else floats,
    else true/false (any case), else text; an empty cell is missing."""
    present = [cell.strip() for cell in cells if cell.strip() != ""]
    if present and all(_CSV_INTEGER.fullmatch(cell) for cell in present):
        kind, convert = "integer", int
    elif present and all(_CSV_FLOAT.fullmatch(cell) for cell in present):
        kind, convert = "float", float
    elif present and all(cell.lower() in _CSV_BOOLEAN for cell in present):
        kind, convert = "boolean", lambda cell: _CSV_BOOLEAN[cell.lower()]
    else:
        return "string", [None if cell.strip() == "" else cell for cell in cells]
    return kind, [None if cell.strip() == "" else convert(cell.strip()) for cell in cells]


def _typed_metadata(frame: pd.DataFrame, path: str, column: str) -> tuple[str, list[Any]]:
    """A JSONL or Parquet column's type and values as Python scalars; LoadError (file, column,
    rows) for a list, an object or another type, for a column that mixes types, and for an
    infinite number."""
    rows, values = frame["__row"].tolist(), frame[column].tolist()
    kinds = [_cell_kind(value) for value in values]
    nested = [row for row, kind in zip(rows, kinds) if kind == "nested"]
    if nested:
        raise LoadError(path, "holds a value that is not text, a number or true/false (a list, an object, a "
                        "date ...), which a metadata column cannot hold: flatten it into columns, or drop it",
                        column=column, rows=nested)
    present = {kind for kind in kinds if kind is not None}
    if present == {"integer", "float"}:
        present = {"float"}
    if len(present) > 1:
        counts = {kind: kinds.count(kind) for kind in present}
        rarest = min(counts, key=lambda kind: (counts[kind], kind))
        raise LoadError(path, f"mixes {' and '.join(sorted(present))} values; a metadata column holds one type "
                        f"(the rows listed hold {rarest})", column=column,
                        rows=[row for row, kind in zip(rows, kinds) if kind == rarest])
    kind = present.pop() if present else "string"
    convert = {"string": str, "integer": int, "float": float, "boolean": bool}[kind]
    converted = [None if cell is None else convert(value) for value, cell in zip(values, kinds)]
    infinite = [row for row, value in zip(rows, converted) if isinstance(value, float) and not math.isfinite(value)]
    if infinite:
        raise LoadError(path, "holds an infinite number, which a report (JSON) cannot hold", column=column,
                        rows=infinite)
    return kind, converted


def _keep_metadata(frame: pd.DataFrame, path: str) -> dict[str, str]:
    """Type and convert, in place, every column of `frame` that evalbook does not read; their
    types by name, in file order. An empty name, or one of evalbook's own (RESERVED_NAMES), is a
    LoadError naming the file and the column."""
    types = {}
    for column in frame.columns:
        if column in READ_COLUMNS or column == "__row" or is_check_column(column):
            continue
        if not isinstance(column, str) or column.strip() == "":
            raise LoadError(path, "a column has no name: name it to keep it as metadata, or drop it",
                            column=str(column))
        if column in RESERVED_NAMES:
            raise LoadError(path, f"{column!r} is a name evalbook gives its own columns; rename the column "
                            "to keep it as metadata", column=column)
        if frame.attrs.get("csv"):
            types[column], values = _csv_metadata(frame[column].tolist())
        else:
            types[column], values = _typed_metadata(frame, path, column)
        frame[column] = pd.Series(values, index=frame.index, dtype=object)
    return types


def _described(kept: pd.DataFrame, types: dict[str, str], files: dict[str, str]) -> list[MetadataColumn]:
    described = []
    for name, kind in types.items():
        values = [value for value in kept[name].tolist() if not is_missing(value)]
        described.append(MetadataColumn(name=name, type=kind, file=files[name], n_distinct=len(set(values)),
                                        n_missing=len(kept) - len(values)))
    return described


def metadata_of(table: pd.DataFrame) -> list[dict[str, Any]]:
    """Each canonical row's metadata, as the object it was written from."""
    return [json.loads(text) for text in table[METADATA]]


def metadata_column_names(input_path: str, predictions_path: str | None = None, split: str = "test") -> list[str]:
    """The names of the columns that load_evaluation_set keeps as metadata from these files, in
    file order (the examples file's first), without checking their values: what `slices.by`
    may name. Reads the files whole, as 01_load does; a file that cannot be read is 01_load's
    to report (LoadError)."""
    names: list[str] = []
    for path in (input_path, predictions_path):
        if path is None:
            continue
        columns = list(read_records(path, split).columns)
        renames = _peer_renames(columns, path, PEER_NAMES if path == input_path else PREDICTION_PEER_NAMES)
        for column in [renames.get(column, column) for column in columns]:
            if (isinstance(column, str) and column not in READ_COLUMNS and column != "__row"
                    and not is_check_column(column) and column not in names):
                names.append(column)
    return names


# ---------------------------------------------------------------- building the table

def _sample_positions(n_rows: int, limit: int | None, seed: int) -> np.ndarray:
    """Row positions kept by `limit`: a seeded sample without replacement, in file order."""
    if limit is None or limit >= n_rows:
        return np.arange(n_rows)
    chosen = np.random.default_rng(seed).choice(n_rows, size=limit, replace=False)
    return np.sort(chosen)


def _shown(values: list[Any], n: int = 3) -> str:
    return ", ".join(repr(v) for v in values[:n]) + (", ..." if len(values) > n else "")


_ROW_CHECKS = "__checks"


def _row_checks(examples: pd.DataFrame, input_path: str) -> list[str | None]:
    """Each row's check columns (check_<check>) as the JSON its canonical row carries, None for a
    row without a check cell; CheckColumnsError naming the file, each column and row that cannot
    be used (evalbook.checks.checksfile.assertions_from_columns)."""
    columns = [column for column in examples.columns if is_check_column(column)]
    if not columns:
        return [None] * len(examples)
    table = pd.DataFrame({"id": examples["id"], "row": examples["__row"], **{c: examples[c] for c in columns}})
    found = assertions_from_columns(table, input_path)
    return [column_entries(found[identifier]) if identifier in found else None
            for identifier in examples["id"].astype(str)]


def _read_examples(input_path: str, split: str, hf_filesystem,
                   skip_incomplete: bool) -> tuple[pd.DataFrame, int, list[int], dict[str, str]]:
    """The complete examples, the number of input rows, the rows skipped as incomplete, and the
    types of the columns kept as metadata."""
    examples = _with_our_names(read_records(input_path, split, hf_filesystem), input_path, PEER_NAMES)
    _require_columns(examples, input_path, EXAMPLE_TEXT_COLUMNS)
    for column in EXAMPLE_TEXT_COLUMNS:
        _check_text(examples, input_path, column, allow_null=skip_incomplete,
                    null_hint=" (-p skip_incomplete_examples=true skips and counts them)")
    examples["id"] = _normalise_ids(examples, input_path, generated="id" not in examples.columns)
    incomplete = examples[list(EXAMPLE_TEXT_COLUMNS)].isna().any(axis=1)
    skipped_rows = [int(r) for r in examples.loc[incomplete, "__row"]]
    if incomplete.all():
        missing = [(c, int(examples[c].isna().sum())) for c in EXAMPLE_TEXT_COLUMNS]
        summary = ", ".join(f"{c!r} in {n} row{'s' if n > 1 else ''}" for c, n in missing if n)
        raise LoadError(input_path, f"all {len(examples)} examples are incomplete and were skipped "
                        f"(skip_incomplete_examples is true): nothing is left to score; missing: "
                        f"{summary}", rows=skipped_rows)
    complete = examples[~incomplete].reset_index(drop=True)
    complete.attrs.update(examples.attrs)
    _validate_optional(complete, input_path)
    row_checks = _row_checks(complete, input_path)
    types = _keep_metadata(complete, input_path)
    complete[_ROW_CHECKS] = row_checks
    return complete, len(examples), skipped_rows, types


def _read_predictions(predictions_path: str, split: str, hf_filesystem,
                      ignored: tuple[str, ...] = ()) -> tuple[pd.DataFrame, dict[str, str]]:
    """The predictions, and the types of the columns kept as metadata (`ignored` columns are
    neither read nor kept: 00_generate's own bookkeeping)."""
    predictions = _with_our_names(read_records(predictions_path, split, hf_filesystem), predictions_path,
                                  PREDICTION_PEER_NAMES)
    predictions = predictions.drop(columns=[c for c in ignored if c in predictions.columns and c not in READ_COLUMNS])
    _require_columns(predictions, predictions_path, ["id", "generated_answer"])
    predictions["id"] = _normalise_ids(predictions, predictions_path, generated=False)
    _check_text(predictions, predictions_path, "generated_answer", allow_null=True)
    _validate_optional(predictions, predictions_path)
    checks = [column for column in predictions.columns if is_check_column(column)]
    if checks:
        raise LoadError(predictions_path, "a check column belongs in the evaluation set (input_path), beside the "
                        "reference it checks against, not in the predictions file; move it there",
                        column=checks[0])
    return predictions, _keep_metadata(predictions, predictions_path)


def _fold(identifier: str) -> str:
    return identifier.strip().casefold()


def _near_misses(unmatched: list[str], known: list[str]) -> list[tuple[str, str]]:
    """(prediction id, example id) pairs that differ only in case or surrounding whitespace."""
    by_folded: dict[str, str] = {}
    for identifier in known:
        by_folded.setdefault(_fold(identifier), identifier)
    return [(i, by_folded[_fold(i)]) for i in unmatched if _fold(i) in by_folded]


def _near_miss_kind(pairs: list[tuple[str, str]]) -> str:
    case = any(p.strip() != e.strip() for p, e in pairs)
    space = any(p.casefold() != e.casefold() for p, e in pairs)
    return " and ".join(kind for kind, present in
                        (("case", case), ("leading or trailing spaces", space)) if present)


def _shown_pairs(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{p!r} vs {e!r}" for p, e in pairs[:3]) + (", ..." if len(pairs) > 3 else "")


def _no_match_error(predictions_path: str, input_path: str, prediction_ids: list[str],
                    example_ids: list[str]) -> LoadError:
    message = (f"0 of {len(prediction_ids)} predictions matched an example id in {input_path}, "
               "so nothing is scored")
    pairs = _near_misses(prediction_ids, example_ids)
    if pairs:
        detail = (f"; ids differ only in {_near_miss_kind(pairs)} (for example {_shown_pairs(pairs)}): "
                  "ids are matched exactly, so correct them in one of the files")
    else:
        detail = f" (prediction ids {_shown(prediction_ids)}; example ids {_shown(example_ids)})"
    return LoadError(predictions_path, message + detail, column="id")


def _join(examples: pd.DataFrame, predictions: pd.DataFrame, input_path: str,
          predictions_path: str, metadata: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """Examples left-joined with their predictions by id (with the predictions' `metadata`
    columns), and the ids of unmatched predictions."""
    if "generated_answer" in examples.columns:
        raise LoadError(input_path, "generated answers are given both here and in the predictions "
                        f"file {predictions_path}; keep one: -p predictions_path=null scores this "
                        "file's generated_answer column", column="generated_answer")
    for column in PREDICTION_COLUMNS:
        if column in predictions.columns and column in examples.columns:
            raise LoadError(input_path, f"{column!r} is given both here and in the predictions "
                            f"file {predictions_path}; keep one", column=column)
    for column in metadata:
        if column in examples.columns:
            raise LoadError(input_path, f"the metadata column {column!r} is also in the predictions file "
                            f"{predictions_path}; keep one, or rename one", column=column)
    known = set(examples["id"])
    matched = predictions["id"].isin(known)
    if not matched.any():
        raise _no_match_error(predictions_path, input_path, predictions["id"].tolist(),
                              examples["id"].tolist())
    if predictions.loc[matched, "generated_answer"].isna().all():
        raise LoadError(predictions_path, f"none of the {int(matched.sum())} predictions that matched "
                        "an example has a generated answer: nothing to score",
                        column="generated_answer", rows=predictions.loc[matched, "__row"].tolist())
    carried = [c for c in ("generated_answer", *PREDICTION_COLUMNS, *metadata) if c in predictions.columns]
    gold = [c for c in GOLD_COLUMNS if c in predictions.columns]
    given = predictions[["id", *carried]].assign(
        __prediction_row=predictions["__row"], **{f"__predicted_{c}": predictions[c] for c in gold})
    joined = examples.merge(given, on="id", how="left")
    if gold:
        joined = _gold_from_predictions(joined, gold, input_path, predictions_path)
    return joined.drop(columns="__prediction_row"), predictions.loc[~matched, "id"].tolist()


def _relevant(single: Any, several: Any) -> frozenset[str] | None:
    """A row's relevant document ids, from its gold_id or gold_ids; None when it gives neither."""
    if isinstance(single, str):
        return frozenset([single])
    if several is not None and not is_missing(several):
        return frozenset(several)
    return None


def _gold_from_predictions(joined: pd.DataFrame, gold: list[str], input_path: str,
                           predictions_path: str) -> pd.DataFrame:
    """The gold ids a predictions file gives, kept: a row of the input without its own takes
    them; a row whose own disagree is an error naming both files' rows (LoadError)."""
    def column(name: str) -> list[Any]:
        return joined[name].tolist() if name in joined.columns else [None] * len(joined)

    own = [_relevant(a, b) for a, b in zip(column("gold_id"), column(GOLD_IDS))]
    predicted = [_relevant(a, b) for a, b in zip(column("__predicted_gold_id"), column(f"__predicted_{GOLD_IDS}"))]
    disagree = [i for i, (mine, theirs) in enumerate(zip(own, predicted))
                if mine is not None and theirs is not None and mine != theirs]
    if disagree:
        shown = "; ".join(f"{joined['id'].iat[i]}: {sorted(predicted[i])} here, {sorted(own[i])} in {input_path} "
                          f"(row {joined['__row'].iat[i]})" for i in disagree[:SHOWN_ROWS])
        more = f" and {len(disagree) - SHOWN_ROWS} more" if len(disagree) > SHOWN_ROWS else ""
        raise LoadError(predictions_path, f"the gold ids of {len(disagree)} example(s) disagree with the "
                        f"input's: {shown}{more}; give the gold ids in one file, or make them agree",
                        rows=sorted(int(joined["__prediction_row"].iat[i]) for i in disagree))
    take = [mine is None and theirs is not None for mine, theirs in zip(own, predicted)]
    for name in GOLD_COLUMNS:
        values = column(name)
        if f"__predicted_{name}" in joined.columns:
            values = [theirs if taken else mine
                      for mine, theirs, taken in zip(values, joined[f"__predicted_{name}"].tolist(), take)]
        joined[name] = pd.Series(values, index=joined.index, dtype=object)
    return joined.drop(columns=[f"__predicted_{name}" for name in gold])


def _answers_in_input(examples: pd.DataFrame, input_path: str) -> pd.DataFrame:
    _require_columns(examples, input_path, ["generated_answer"])
    _check_text(examples, input_path, "generated_answer", allow_null=True)
    if examples["generated_answer"].isna().all():
        raise LoadError(input_path, "no row has a generated answer: nothing to score",
                        column="generated_answer", rows=examples["__row"].tolist())
    return examples


def _sample(joined: pd.DataFrame, input_path: str, limit: int | None, seed: int) -> pd.DataFrame:
    """The rows `limit` keeps; a sample in which no example has a prediction is a LoadError."""
    kept = joined.iloc[_sample_positions(len(joined), limit, seed)].reset_index(drop=True)
    if kept["generated_answer"].isna().all():
        answered = int(joined["generated_answer"].notna().sum())
        raise LoadError(input_path, f"none of the {len(kept)} example(s) kept by limit={limit} (seed "
                        f"{seed}) has a prediction, while {answered} of {len(joined)} examples have "
                        "a prediction: nothing to score; raise limit or set -p limit=null")
    return kept


def _has_gold(table: pd.DataFrame) -> pd.Series:
    """Rows with relevant document ids: a gold_id or gold_ids."""
    return table["gold_id"].notna() | table[GOLD_IDS].notna()


def _retrieval_warnings(table: pd.DataFrame, input_path: str) -> list[str]:
    """Retrieval data that cannot be used: retrieved_ids without a gold_id or gold_ids, or gold
    ids with no retrieved_ids anywhere (retrieved ids are compared only with the gold ids)."""
    has_ids, has_gold = table["retrieved_ids"].notna(), _has_gold(table)
    has_contexts = table["retrieved_contexts"].notna()
    warnings = []
    ids_without_gold = has_ids & ~has_gold
    if ids_without_gold.any():
        unscored = int((ids_without_gold & ~has_contexts).sum())
        n = int(ids_without_gold.sum())
        if unscored == n:
            outcome = "so their retrieval is not scored"
        elif unscored == 0:
            outcome = "so their retrieval is compared by retrieved_contexts instead"
        else:
            outcome = (f"so the retrieval of the {unscored} without retrieved_contexts is not scored "
                       "and the others are compared by retrieved_contexts instead")
        rows = table.loc[ids_without_gold, "row"].tolist()
        warnings.append(f"{n} example(s) have retrieved_ids but no gold_id or gold_ids ({_rows_text(rows)} "
                        f"of {input_path}): retrieved_ids are compared only with the gold ids, {outcome}; "
                        f"give each example its gold_id (or gold_ids) in {input_path}")
    if has_gold.any() and not has_ids.any():
        outcome = ("retrieval is compared by retrieved_contexts" if has_contexts.any()
                   else "retrieval is not scored")
        warnings.append(f"gold_id or gold_ids is given for {int(has_gold.sum())} example(s), but no example "
                        f"has retrieved_ids: the gold ids are unused and {outcome}; add retrieved_ids to the "
                        "predictions to measure retrieval by id")
    return warnings


def _near_miss_warning(unmatched: list[str], pairs: list[tuple[str, str]]) -> list[str]:
    if not pairs:
        return []
    return [f"{len(pairs)} of the {len(unmatched)} unmatched prediction ids differ from an example id "
            f"only in {_near_miss_kind(pairs)} (for example {_shown_pairs(pairs)}): ids are matched "
            "exactly, so these predictions were not joined"]


def load_evaluation_set(input_path: str, predictions_path: str | None = None,
                        limit: int | None = None, seed: int = 0, split: str = "test",
                        hf_filesystem=None, skip_incomplete: bool = False,
                        ignored_prediction_columns: tuple[str, ...] = ()) -> LoadResult:
    """Read, validate and join the inputs into the canonical table (see CANONICAL_SCHEMA).

    A missing question, context or answer is an error, unless `skip_incomplete` is set: then
    those examples are left out and counted, and their rows listed (the hub's
    rag-dataset-12000 has such rows). Inputs that leave nothing to score (no rows, no
    prediction that matches an example, no generated answer) are a LoadError naming the cause.
    Every other column of either file is kept as metadata (MetadataColumn): typed, checked, and
    carried in the table's `metadata` column.
    """
    examples, n_input_rows, skipped_rows, types = _read_examples(input_path, split, hf_filesystem,
                                                                 skip_incomplete)
    files = dict.fromkeys(types, "input_path")
    renamed = [examples.attrs["renamed"]] if "renamed" in examples.attrs else []
    n_predictions, unmatched = None, []
    if predictions_path is None:
        joined = _answers_in_input(examples, input_path)
    else:
        predictions, prediction_types = _read_predictions(predictions_path, split, hf_filesystem,
                                                          ignored_prediction_columns)
        n_predictions = len(predictions)
        renamed += [predictions.attrs["renamed"]] if "renamed" in predictions.attrs else []
        joined, unmatched = _join(examples, predictions, input_path, predictions_path, list(prediction_types))
        types.update(prediction_types)
        files.update(dict.fromkeys(prediction_types, "predictions_path"))
    kept = _sample(joined, input_path, limit, seed)
    table = _canonical(kept, list(types))
    generators = sorted({str(g) for g in _column_or_null(kept, GENERATOR) if g is not None})
    without = table.loc[~table["has_prediction"], "id"].tolist()
    near_misses = _near_misses(unmatched, examples["id"].tolist())
    has_ids, has_gold = table["retrieved_ids"].notna(), _has_gold(table)
    counts = {
        "n_input_rows": int(n_input_rows),
        "n_skipped_incomplete_examples": len(skipped_rows),
        "n_predictions": n_predictions,
        "n_unmatched_predictions": len(unmatched),
        "n_unmatched_differing_only_in_case_or_space": len(near_misses),
        "n_left_out_by_limit": int(len(joined) - len(kept)),
        "n_examples": int(len(table)),
        "n_examples_without_prediction": len(without),
        "n_empty_generated_answers": int(table["generated_empty"].sum()),
        "n_empty_reference_answers": int(table["reference_empty"].sum()),
        "n_with_retrieval": int((has_ids | table["retrieved_contexts"].notna()).sum()),
        "n_retrieved_ids_without_gold_id": int((has_ids & ~has_gold).sum()),
        "n_gold_id_without_retrieved_ids": int((has_gold & ~has_ids).sum()),
        "n_examples_with_duplicate_retrieved_ids": len(duplicate_retrieved_ids(table)),
    }
    return LoadResult(table=table, counts=counts, unmatched_prediction_ids=unmatched,
                      examples_without_prediction=without, skipped_incomplete_rows=skipped_rows,
                      sources={"input_path": input_path, "predictions_path": predictions_path},
                      warnings=renamed + _near_miss_warning(unmatched, near_misses)
                      + _retrieval_warnings(table, input_path)
                      + duplicate_id_warnings(table, predictions_path or input_path), generators=generators,
                      inputs_sha256={"input_path": input_sha256(input_path),
                                     "predictions_path": input_sha256(predictions_path)},
                      metadata=_described(kept, types, files))


def sampled_examples(input_path: str, limit: int | None = None, seed: int = 0, split: str = "test",
                     hf_filesystem=None, skip_incomplete: bool = False) -> pd.DataFrame:
    """The examples that load_evaluation_set keeps with the same arguments, before any answer
    is joined: what 00_generate asks the system under test about."""
    examples, _, _, _ = _read_examples(input_path, split, hf_filesystem, skip_incomplete)
    if "generated_answer" in examples.columns:
        raise LoadError(input_path, "this file holds generated answers, and generate.enabled asks the system "
                        "under test for new ones; keep one: -p generate.enabled=false scores these",
                        column="generated_answer")
    return examples.iloc[_sample_positions(len(examples), limit, seed)].reset_index(drop=True)


def check_column_assertions(input_path: str, split: str = "test", skip_incomplete: bool = False) -> list[Assertion]:
    """The assertions of the evaluation set's check columns, over the rows load_evaluation_set
    keeps before `limit` (the runner's pre-flight holds a checks file against them); a LoadError
    for what 01_load would refuse, a CheckColumnsError for a column or a cell that cannot be used."""
    examples, _, _, _ = _read_examples(input_path, split, None, skip_incomplete)
    return [assertion for identifier, row, text in zip(examples["id"], examples["__row"], examples[_ROW_CHECKS])
            for assertion in assertions_from_entries(text, str(identifier), int(row))]


def _column_or_null(frame: pd.DataFrame, column: str) -> list[Any]:
    if column not in frame.columns:
        return [None] * len(frame)
    values = []
    for value in frame[column].tolist():
        if value is None or (isinstance(value, float) and np.isnan(value)):
            values.append(None)
        elif isinstance(value, np.ndarray):
            values.append(value.tolist())
        else:
            values.append(value)
    return values


def _metadata_json(frame: pd.DataFrame, names: list[str]) -> list[str]:
    """Each row's metadata as a JSON object, its keys in `names` order; a missing value is null."""
    columns = [[None if is_missing(value) else value for value in frame[name].tolist()] for name in names]
    return [json.dumps(dict(zip(names, values)), ensure_ascii=False, allow_nan=False)
            for values in zip(*columns)] if names else ["{}"] * len(frame)


def _canonical(frame: pd.DataFrame, metadata: list[str]) -> pd.DataFrame:
    generated = _column_or_null(frame, "generated_answer")
    references = frame["answer"].tolist()
    columns = {
        "id": frame["id"].tolist(),
        "row": [int(r) for r in frame["__row"]],
        "question": frame["question"].tolist(),
        "context": frame["context"].tolist(),
        "reference_answer": references,
        "generated_answer": generated,
        "has_prediction": [g is not None for g in generated],
        "generated_empty": [g is not None and g.strip() == "" for g in generated],
        "reference_empty": [r.strip() == "" for r in references],
        "gold_id": _column_or_null(frame, "gold_id"),
        GOLD_IDS: _column_or_null(frame, GOLD_IDS),
        "retrieved_ids": _column_or_null(frame, "retrieved_ids"),
        "retrieved_contexts": _column_or_null(frame, "retrieved_contexts"),
        "source": _column_or_null(frame, "source"),
        CONVERSATION: _column_or_null(frame, CONVERSATION),
        METADATA: _metadata_json(frame, metadata),
        CHECKS: _column_or_null(frame, _ROW_CHECKS),
    }
    arrow = pa.Table.from_pydict(columns, schema=CANONICAL_SCHEMA)
    return arrow.to_pandas()


def canonical_arrow(table: pd.DataFrame) -> pa.Table:
    """The canonical table as Arrow, with its fixed schema; a table without `checks` (built
    before check columns) has no check columns: null."""
    if CHECKS not in table.columns:
        table = table.assign(**{CHECKS: None})
    return pa.Table.from_pandas(table, schema=CANONICAL_SCHEMA, preserve_index=False)


def read_canonical(path: Path) -> pd.DataFrame:
    return pq.read_table(path, schema=CANONICAL_SCHEMA).to_pandas()

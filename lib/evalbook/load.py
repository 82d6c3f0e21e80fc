"""Load an evaluation set and its generated answers into one canonical, typed table.

Sources: the Hugging Face dataset through an `hf://` path (huggingface_hub's HfFileSystem +
pyarrow), or a local Parquet, CSV or JSONL file. Generated answers come from a column of the
same file or from a predictions file joined by `id`.

Every problem with the input is a `LoadError` naming the file, the column and the rows.
Rows are numbered from 1 in file order (a JSONL row is its line; a CSV row excludes the header).
Nothing is dropped silently: unmatched predictions, examples without a prediction, empty
answers and rows left out by `limit` are all counted in `LoadResult.counts`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from evalbook.models import hub_reachable

EXAMPLE_TEXT_COLUMNS = ("question", "context", "answer")
LIST_COLUMNS = ("retrieved_ids", "retrieved_contexts")
OPTIONAL_TEXT_COLUMNS = ("gold_id", "source")
CONVERSATION = "conversation"  # optional multi-turn transcript: [{"role": ..., "content": ...}, ...]
PREDICTION_COLUMNS = (*LIST_COLUMNS, "source", CONVERSATION)
SHOWN_ROWS = 10

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
    pa.field("retrieved_ids", pa.list_(pa.string())),
    pa.field("retrieved_contexts", pa.list_(pa.string())),
    pa.field("source", pa.string()),
    pa.field(CONVERSATION, pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
])


class LoadError(ValueError):
    """Input that cannot be loaded; the message names the file, the column and the rows."""

    def __init__(self, file: str, message: str, column: str | None = None,
                 rows: list[int] | None = None):
        self.file, self.column, self.rows = file, column, rows or []
        where = [f"file {file}"]
        if column is not None:
            where.append(f"column {column!r}")
        if rows:
            shown = ", ".join(str(r) for r in rows[:SHOWN_ROWS])
            more = f" and {len(rows) - SHOWN_ROWS} more" if len(rows) > SHOWN_ROWS else ""
            where.append(f"row{'s' if len(rows) > 1 else ''} {shown}{more}")
        super().__init__(f"{'; '.join(where)}: {message}")


@dataclass
class LoadResult:
    table: pd.DataFrame
    counts: dict[str, int]
    unmatched_prediction_ids: list[str] = field(default_factory=list)
    examples_without_prediction: list[str] = field(default_factory=list)
    skipped_incomplete_rows: list[int] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------- reading files

def _hf_filesystem():
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


def _read_parquet(path: str, filesystem=None) -> pd.DataFrame:
    if filesystem is None:
        table = pq.read_table(path)
    else:
        with filesystem.open(path, "rb") as handle:
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


def _read_jsonl(path: str) -> pd.DataFrame:
    records = []
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
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
    # dtype=object keeps each value as written: an int id stays an int beside a missing one.
    return pd.DataFrame(records, dtype=object)


def _read_csv(path: str) -> pd.DataFrame:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[]).astype(object)
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


def read_records(path: str, split: str = "test", hf_filesystem=None) -> pd.DataFrame:
    """Read one input file into a DataFrame with a `__row` column (1-based file order)."""
    try:
        if path.startswith("hf://"):
            if hf_filesystem is None and not hub_reachable():
                raise LoadError(path, "reading an hf:// path needs the Hugging Face hub, which is not "
                                "reachable from this machine (or HF_HUB_OFFLINE is set); use a local "
                                "copy of the file instead")
            filesystem = hf_filesystem if hf_filesystem is not None else _hf_filesystem()
            files = hf_parquet_files(path, split, filesystem)
            frame = pd.concat([_read_parquet(f, filesystem) for f in files], ignore_index=True)
        else:
            suffix = PurePosixPath(path).suffix.lower()
            if not Path(path).is_file():
                raise LoadError(path, "file not found")
            if suffix == ".parquet":
                frame = _read_parquet(path)
            elif suffix in (".jsonl", ".ndjson"):
                frame = _read_jsonl(path)
            elif suffix == ".csv":
                frame = _read_csv(path)
            else:
                raise LoadError(path, f"unsupported file type {suffix!r}; use .parquet, .csv or .jsonl")
    except LoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure becomes a named, readable error
        raise LoadError(path, f"cannot read the file ({type(exc).__name__}: {exc})") from exc
    if "__row" not in frame.columns:
        frame["__row"] = np.arange(1, len(frame) + 1)
    return frame


# ---------------------------------------------------------------- validating columns

def _require_columns(frame: pd.DataFrame, path: str, columns) -> None:
    for column in columns:
        if column not in frame.columns:
            present = sorted(c for c in frame.columns if c != "__row")
            raise LoadError(path, f"required column is missing (columns present: {present})",
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
    bad = []
    for row, value in zip(frame["__row"].tolist(), frame[column].tolist()):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue
        items = list(value) if isinstance(value, (list, tuple, np.ndarray)) else None
        if items is None or not all(isinstance(item, str) for item in items):
            bad.append(row)
    if bad:
        raise LoadError(path, "must be a list of strings in rank order", column=column, rows=bad)


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
        raise LoadError(path, f"duplicate id(s) {values[:SHOWN_ROWS]}", column="id", rows=rows)
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


# ---------------------------------------------------------------- building the table

def _sample_positions(n_rows: int, limit: int | None, seed: int) -> np.ndarray:
    """Row positions kept by `limit`: a seeded sample without replacement, in file order."""
    if limit is None or limit >= n_rows:
        return np.arange(n_rows)
    chosen = np.random.default_rng(seed).choice(n_rows, size=limit, replace=False)
    return np.sort(chosen)


def load_evaluation_set(input_path: str, predictions_path: str | None = None,
                        limit: int | None = None, seed: int = 0, split: str = "test",
                        hf_filesystem=None, skip_incomplete: bool = False) -> LoadResult:
    """Read, validate and join the inputs into the canonical table (see CANONICAL_SCHEMA).

    A missing question, context or answer is an error, unless `skip_incomplete` is set: then
    those examples are left out and counted, and their rows listed (the hub's
    rag-dataset-12000 has such rows).
    """
    examples = read_records(input_path, split, hf_filesystem)
    _require_columns(examples, input_path, EXAMPLE_TEXT_COLUMNS)
    for column in EXAMPLE_TEXT_COLUMNS:
        _check_text(examples, input_path, column, allow_null=skip_incomplete,
                    null_hint=" (set skip_incomplete_examples: true in the profile to skip and count them)")
    examples["id"] = _normalise_ids(examples, input_path, generated="id" not in examples.columns)
    incomplete = examples[list(EXAMPLE_TEXT_COLUMNS)].isna().any(axis=1)
    skipped_rows = [int(r) for r in examples.loc[incomplete, "__row"]]
    n_input_rows = len(examples)
    examples = examples[~incomplete].reset_index(drop=True)
    _validate_optional(examples, input_path)
    n_predictions = None
    unmatched: list[str] = []

    if predictions_path is None:
        _require_columns(examples, input_path, ["generated_answer"])
        _check_text(examples, input_path, "generated_answer", allow_null=True)
        joined = examples
    else:
        if "generated_answer" in examples.columns:
            raise LoadError(input_path, "generated answers are given both here and in the predictions "
                            f"file {predictions_path}; keep one", column="generated_answer")
        predictions = read_records(predictions_path, split, hf_filesystem)
        _require_columns(predictions, predictions_path, ["id", "generated_answer"])
        predictions["id"] = _normalise_ids(predictions, predictions_path, generated=False)
        _check_text(predictions, predictions_path, "generated_answer", allow_null=True)
        _validate_optional(predictions, predictions_path)
        for column in PREDICTION_COLUMNS:
            if column in predictions.columns and column in examples.columns:
                raise LoadError(input_path, f"{column!r} is given both here and in the predictions "
                                f"file {predictions_path}; keep one", column=column)
        n_predictions = len(predictions)
        known = set(examples["id"])
        unmatched = [i for i in predictions["id"] if i not in known]
        carried = [c for c in ("generated_answer", *PREDICTION_COLUMNS) if c in predictions.columns]
        joined = examples.merge(predictions[["id", *carried]], on="id", how="left")

    positions = _sample_positions(len(joined), limit, seed)
    kept = joined.iloc[positions].reset_index(drop=True)
    table = _canonical(kept)
    without = table.loc[~table["has_prediction"], "id"].tolist()
    counts = {
        "n_input_rows": int(n_input_rows),
        "n_skipped_incomplete_examples": len(skipped_rows),
        "n_predictions": n_predictions,
        "n_unmatched_predictions": len(unmatched),
        "n_left_out_by_limit": int(len(joined) - len(kept)),
        "n_examples": int(len(table)),
        "n_examples_without_prediction": len(without),
        "n_empty_generated_answers": int(table["generated_empty"].sum()),
        "n_empty_reference_answers": int(table["reference_empty"].sum()),
        "n_with_retrieval": int((table["retrieved_ids"].notna() | table["retrieved_contexts"].notna()).sum()),
    }
    return LoadResult(table=table, counts=counts, unmatched_prediction_ids=unmatched,
                      examples_without_prediction=without, skipped_incomplete_rows=skipped_rows,
                      sources={"input_path": input_path, "predictions_path": predictions_path})


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


def _canonical(frame: pd.DataFrame) -> pd.DataFrame:
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
        "retrieved_ids": _column_or_null(frame, "retrieved_ids"),
        "retrieved_contexts": _column_or_null(frame, "retrieved_contexts"),
        "source": _column_or_null(frame, "source"),
        CONVERSATION: _column_or_null(frame, CONVERSATION),
    }
    arrow = pa.Table.from_pydict(columns, schema=CANONICAL_SCHEMA)
    return arrow.to_pandas()


def canonical_arrow(table: pd.DataFrame) -> pa.Table:
    """The canonical table as Arrow, with its fixed schema."""
    return pa.Table.from_pandas(table, schema=CANONICAL_SCHEMA, preserve_index=False)


def write_canonical(table: pd.DataFrame, path: Path) -> None:
    """Write the canonical table as Parquet with its fixed schema."""
    pq.write_table(canonical_arrow(table), path)


def read_canonical(path: Path) -> pd.DataFrame:
    return pq.read_table(path, schema=CANONICAL_SCHEMA).to_pandas()

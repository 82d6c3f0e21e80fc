"""Human labels for 06_calibrate: read a labels file, check it, and match it to a run's examples.

A labels file (CSV, JSONL or Parquet; local or s3://, read by `evalbook.load.read_records`) has
the columns `id` and `label`, and optionally `rater`, `note` and `scale` (the scale the labels
were given on, "1-5" or "pass/fail", as 07_label writes it); any other column is kept out and
named in `Labels.ignored_columns`. A label is a binary word (pass/fail, true/false, yes/no,
any case, surrounding spaces allowed), a boolean, or a finite number, written as a number or as
numeric text. Every problem is a `LabelError` naming the file, the column and the rows, including
a path that is no labels file, labels off the scale the file declares or, without one, far off
the scale most of them use (unless the kind is declared continuous), and a file with fewer than two examples of the run.

The label kind is declared (`--label-kind`) or inferred, and `Labels.kind_reason` says which.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalbook.errors import UnusableInput
from evalbook.formatting import is_missing
from evalbook.calibrate.settings import LABEL_KINDS, MIN_EXAMPLES
from evalbook.load import (
    LoadError,
    _near_miss_kind,
    _near_misses,
    _shown,
    _shown_pairs,
    read_records,
)
from evalbook.storage import is_remote, local_path

KIND_FLAG = "--label-kind"
COLUMNS = ("id", "label", "rater", "note", "scale")
# `scale`, optional: the scale the labels were given on, as 07_label writes it ("1-5", "pass/fail");
# labels outside it are refused, and the scale is not guessed from the labels
SCALE_TEXT = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*-\s*([0-9]+(?:\.[0-9]+)?)\s*")
BINARY_SCALE = "pass/fail"
BINARY_WORDS = {"pass": 1.0, "fail": 0.0, "true": 1.0, "false": 0.0, "yes": 1.0, "no": 0.0}
BINARY_WORDS_TEXT = "pass/fail, true/false or yes/no"
BINARY_WORDS_LIST = "pass/fail, true/false, yes/no"
# a 0-10 scale is the widest read as ordinal; more whole-number levels are read as continuous
MAX_ORDINAL_LEVELS = 11
# ASCII digits only: Python's float() also takes "1_0" and other scripts' digits, which no one
# means as a label
NUMBER_TEXT = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
NOT_FINITE_TEXT = re.compile(r"[+-]?(nan|inf|infinity)", re.IGNORECASE)
# The rating scales people label on, narrowest first; the one most labels fall on is where a
# label far outside it (a 7 or a 99 among 1-5s) is caught as a slip.
COMMON_SCALES = ((0, 1), (1, 3), (1, 4), (0, 4), (1, 5), (0, 5), (1, 7), (1, 10), (0, 10), (0, 100))
ACCEPT_OFF_SCALE = f"{KIND_FLAG} continuous"
SHOWN_OFF_SCALE = 5  # labels off the scale named in a message, each with its row and id
# Below this many labels, a level nobody used says little about the scale: no label is refused.
MIN_LABELS_FOR_SCALE = 10

# How a label cell reads: one of these sorts, and its value when it has one.
MISSING, WORD, NUMBER = "missing", "word", "number"
NOT_FINITE, UNREADABLE = "not finite", "unreadable"


class LabelError(UnusableInput, LoadError):
    """A labels file that cannot be used; the message names the file, the column and the rows."""


@dataclass(frozen=True)
class Labels:
    """A checked labels file: one row per (example, rater) label, in file order."""

    path: str
    table: pd.DataFrame  # id (str), label (float), rater (str or None), note (str or None), row
    kind: str
    kind_reason: str
    ignored_columns: tuple[str, ...]

    @property
    def raters(self) -> tuple[str, ...]:
        """The distinct raters, sorted; empty without a rater column."""
        return tuple(sorted({r for r in self.table["rater"] if r is not None}))

    def per_example(self) -> pd.DataFrame:
        """One row per id, in first-appearance order: id, label, n_raters, notes.

        The label is the median of the raters' labels; for binary labels it is the share of
        raters saying pass (0-1). Notes are joined with " | ", each as "rater: note" when the
        file names raters; None when no rater left a note.
        """
        combine = np.mean if self.kind == "binary" else np.median
        groups = [group for _, group in self.table.groupby("id", sort=False)]
        # object columns keep a missing note None (pandas would infer a string dtype with NaN)
        return pd.DataFrame({
            "id": pd.Series([group["id"].iloc[0] for group in groups], dtype=object),
            "label": pd.Series([float(combine(group["label"])) for group in groups],
                               dtype=np.float64),
            "n_raters": pd.Series([len(group) for group in groups], dtype=np.int64),
            "notes": pd.Series([_joined_notes(group) for group in groups], dtype=object),
        })

    def ratings_matrix(self) -> tuple[list[str], list[str], np.ndarray]:
        """The raters, the ids (first-appearance order) and a raters x ids array of labels, NaN
        where a rater gave none: the input of Krippendorff's alpha, meaningful with >= 2 raters."""
        raters = list(self.raters)
        ids = list(dict.fromkeys(self.table["id"]))
        rater_index = {rater: i for i, rater in enumerate(raters)}
        id_index = {identifier: i for i, identifier in enumerate(ids)}
        matrix = np.full((len(raters), len(ids)), np.nan)
        cells = self.table[["id", "rater", "label"]].itertuples(index=False)
        for identifier, rater, label in cells:
            if rater is not None:
                matrix[rater_index[rater], id_index[identifier]] = label
        return raters, ids, matrix

    def passed(self, good_label_min: float | None) -> pd.Series:
        """Each example's human pass/fail (index id; nullable boolean).

        Binary: a share of raters saying pass above 0.5 passes, below fails, and exactly 0.5 (a
        tie) is NA; `good_label_min` is not used. Ordinal or continuous: the median label passes
        when it is at least `good_label_min`, which must then be given.
        """
        summary = self.per_example().set_index("id")["label"]
        if self.kind == "binary":
            verdicts = [pd.NA if share == 0.5 else bool(share > 0.5) for share in summary]
        elif good_label_min is None:
            raise ValueError(f"{self.kind} labels need a cut to say which examples pass: set "
                             "--good-label-min (for example 4 on a 1-5 scale)")
        else:
            verdicts = [bool(label >= good_label_min) for label in summary]
        return pd.Series(verdicts, index=summary.index, dtype="boolean", name="passed")


def _joined_notes(group: pd.DataFrame) -> str | None:
    notes = [note if rater is None else f"{rater}: {note}"
             for rater, note in zip(group["rater"], group["note"]) if isinstance(note, str)]
    return " | ".join(notes) if notes else None


@dataclass(frozen=True)
class Matched:
    """How a labels file's ids meet a run's examples."""

    ids: tuple[str, ...]  # labelled ids, in the run's order
    unknown_ids: tuple[str, ...]  # label ids that are not in the run, in file order
    unlabelled_ids: tuple[str, ...]  # run ids with no label, in the run's order
    n_matched: int = field(init=False)
    n_unknown: int = field(init=False)
    n_unlabelled: int = field(init=False)

    def __post_init__(self):
        # frozen: the counts are set once here, so they always agree with the lists
        object.__setattr__(self, "n_matched", len(self.ids))
        object.__setattr__(self, "n_unknown", len(self.unknown_ids))
        object.__setattr__(self, "n_unlabelled", len(self.unlabelled_ids))


def _is_blank(value: Any) -> bool:
    """A missing label cell: missing (evalbook.formatting.is_missing) or blank text."""
    return is_missing(value) or (isinstance(value, str) and value.strip() == "")


def _read_label(value: Any) -> tuple[str, float | None]:
    """The sort of one label cell and its value (1.0/0.0 for a binary word or boolean)."""
    if _is_blank(value):
        return MISSING, None
    if isinstance(value, (bool, np.bool_)):
        return WORD, float(value)
    # numbers.Real takes Python's and numpy's ints and floats; Parquet decimals come as Decimal
    if isinstance(value, (numbers.Real, Decimal)):
        return _read_number(value)
    if isinstance(value, str):
        text = value.strip()
        if text.casefold() in BINARY_WORDS:
            return WORD, BINARY_WORDS[text.casefold()]
        if NUMBER_TEXT.fullmatch(text):
            return _read_number(text)
        if NOT_FINITE_TEXT.fullmatch(text):
            return NOT_FINITE, None
    return UNREADABLE, None


def _read_number(value: numbers.Real | Decimal | str) -> tuple[str, float | None]:
    try:
        number = float(value)
    except OverflowError:  # a JSON integer beyond the range of a float
        return NOT_FINITE, None
    return (NUMBER if math.isfinite(number) else NOT_FINITE), number


def _raise_for(path: str, column: str, rows: list[int], raw: list[Any], bad: list[bool],
               message: str) -> None:
    """Raise a LabelError for the rows flagged `bad`; `{values}` in `message` shows their values."""
    bad_rows = [row for row, flagged in zip(rows, bad) if flagged]
    if bad_rows:
        values = _shown([value for value, flagged in zip(raw, bad) if flagged])
        raise LabelError(path, message.format(values=values), column=column, rows=bad_rows)


def _check_not_mixed(path: str, rows: list[int], raw: list[Any], sorts: list[str],
                     values: list[float | None]) -> None:
    words = [i for i, sort in enumerate(sorts) if sort == WORD]
    scale = [i for i, (sort, value) in enumerate(zip(sorts, values))
             if sort == NUMBER and value not in (0.0, 1.0)]
    if words and scale:
        word, number = words[0], scale[0]
        raise LabelError(path, f"mixes {BINARY_WORDS_TEXT} (first in row {rows[word]}: "
                         f"{raw[word]!r}) with numbers other than 0 and 1 (first in row "
                         f"{rows[number]}: {raw[number]!r}); write every label on one scale",
                         column="label", rows=sorted([rows[word], rows[number]]))


def _label_values(frame: pd.DataFrame, path: str) -> tuple[list[float], list[str]]:
    """Each row's label as a float, and its sort; every unusable label is a LabelError."""
    rows, raw = frame["__row"].tolist(), frame["label"].tolist()
    sorts, values = zip(*(_read_label(value) for value in raw))
    sorts, values = list(sorts), list(values)
    _raise_for(path, "label", rows, raw, [s == MISSING for s in sorts],
               "every row needs a label; these have none (empty, null or NaN): label them, "
               "or remove the rows")
    _raise_for(path, "label", rows, raw, [s == NOT_FINITE for s in sorts],
               "labels must be finite numbers; found {values}")
    _raise_for(path, "label", rows, raw, [s == UNREADABLE for s in sorts],
               f"labels must be {BINARY_WORDS_LIST} or a number; found {{values}}")
    _check_not_mixed(path, rows, raw, sorts, values)
    return values, sorts


def _check_declared(path: str, kind: str, frame: pd.DataFrame, values: list[float],
                    sorts: list[str]) -> None:
    rows, raw = frame["__row"].tolist(), frame["label"].tolist()
    if kind == "ordinal":
        _raise_for(path, "label", rows, raw, [not v.is_integer() for v in values],
                   "declared ordinal, so every label must be a whole number; found {values}; "
                   f"declare {KIND_FLAG} continuous for labels with fractions")
    elif kind == "binary":
        _raise_for(path, "label", rows, raw,
                   [s == NUMBER and v not in (0.0, 1.0) for s, v in zip(sorts, values)],
                   f"declared binary, so every label must be {BINARY_WORDS_LIST} or 0/1; found "
                   f"{{values}}; declare {KIND_FLAG} ordinal or continuous for a scale")


def _number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:g}"


def _span_text(low: float, high: float) -> str:
    """"1-5", or "-2 to 2" when a minus sign would make the dash ambiguous."""
    low_text, high_text = _number_text(low), _number_text(high)
    if low_text == high_text:
        return low_text
    return f"{low_text}-{high_text}" if low >= 0 else f"{low_text} to {high_text}"


def _inferred_kind(values: list[float], sorts: list[str]) -> tuple[str, str]:
    """The kind the labels read as, and a sentence saying why."""
    levels = sorted(set(values))
    if set(levels) <= {0.0, 1.0}:
        has_words, has_numbers = WORD in sorts, NUMBER in sorts
        what = (f"only {BINARY_WORDS_TEXT}" + (", and 0/1" if has_numbers else "")
                if has_words else "only the values 0 and 1")
        return "binary", f"inferred: {what}; declare another with {KIND_FLAG}"
    low, high = _number_text(levels[0]), _number_text(levels[-1])
    span = _span_text(levels[0], levels[-1])
    plural = "s" if len(levels) > 1 else ""
    if all(level.is_integer() for level in levels):
        if len(levels) <= MAX_ORDINAL_LEVELS:
            return "ordinal", (f"inferred: whole numbers {span} ({len(levels)} level{plural}); "
                               f"declare another with {KIND_FLAG}")
        return "continuous", (f"inferred: whole numbers {span} ({len(levels)} levels, more than "
                               f"the {MAX_ORDINAL_LEVELS} of an ordinal scale); declare another "
                               f"with {KIND_FLAG}")
    return "continuous", (f"inferred: numbers {low} to {high}, not all whole; declare another "
                          f"with {KIND_FLAG}")


def _scale_most_use(values: list[float]) -> tuple[float, float] | None:
    """The span of the labels on the scale most of them use; None when no common scale holds most.

    That scale is the narrowest of COMMON_SCALES holding more than half of the labels, widened, as
    long as a label lies within one step of either end, to that label. A step is the widest gap
    between two neighbouring levels on the scale (1 when it holds one level): the next level as
    the labels space them (1, 3 take in 5; 0.5, 2, 3.5 take in -1), not a label past a level
    nobody used (1-5 do not take in 7).
    """
    most = [(low, high) for low, high in COMMON_SCALES
            if sum(low <= value <= high for value in values) * 2 > len(values)]
    if not most:
        return None
    low, high = min(most, key=lambda scale: scale[1] - scale[0])  # the first of the narrowest
    inside = sorted({value for value in values if low <= value <= high})
    step = float(max(np.diff(inside))) if len(inside) > 1 else 1.0
    bottom, top = inside[0], inside[-1]
    levels = sorted(set(values))
    for level in levels:  # upwards
        if top < level <= top + step:
            top = level
    for level in reversed(levels):  # downwards
        if bottom - step <= level < bottom:
            bottom = level
    return bottom, top


def _declared_scale(frame: pd.DataFrame, path: str) -> tuple[float, float] | None:
    """The span of the `scale` column ("1-5", or "pass/fail" for 0-1); None without one. Blank
    cells are allowed (rows added by hand); the others must all name one scale."""
    if "scale" not in frame.columns:
        return None
    rows, raw = frame["__row"].tolist(), frame["scale"].tolist()
    given = [(row, value.strip() if isinstance(value, str) else value)
             for row, value in zip(rows, raw) if not _is_blank(value)]
    if not given:
        return None
    spans = []
    for _, value in given:
        match = SCALE_TEXT.fullmatch(value) if isinstance(value, str) else None
        if value == BINARY_SCALE:
            spans.append((0.0, 1.0))
        elif match and float(match[1]) < float(match[2]):
            spans.append((float(match[1]), float(match[2])))
        else:
            spans.append(None)
    _raise_for(path, "scale", [row for row, _ in given], [value for _, value in given],
               [span is None for span in spans],
               f"a scale is written low-high (1-5) or {BINARY_SCALE}; found {{values}}")
    if len(set(spans)) > 1:
        first = spans[0]
        _raise_for(path, "scale", [row for row, _ in given], [value for _, value in given],
                   [span != first for span in spans],
                   f"every row's scale must be the same; the first says {given[0][1]}, these say {{values}}")
    return spans[0]


def _check_on_one_scale(path: str, ids: list[str], values: list[float], rows: list[int],
                        declared: tuple[float, float] | None = None) -> None:
    """Labels outside the scale the file declares, or, without one, far outside the scale most
    labels use, are a LabelError naming each one's row and id: they are most likely slips, and
    would move every median and pass/fail silently."""
    if declared is not None:
        span, where = declared, "the scale the file's scale column declares"
    else:
        span = _scale_most_use(values) if len(values) >= MIN_LABELS_FOR_SCALE else None
        where = None
    if span is None:
        return
    bottom, top = span
    off = [(row, identifier, value) for row, identifier, value in zip(rows, ids, values)
           if not bottom <= value <= top]
    if not off:
        return
    shown = ", ".join(f"{_number_text(value)} (row {row}, id {identifier!r})"
                      for row, identifier, value in off[:SHOWN_OFF_SCALE])
    more = f", and {len(off) - SHOWN_OFF_SCALE} more" if len(off) > SHOWN_OFF_SCALE else ""
    n_on, several = len(values) - len(off), len(off) > 1
    where = where or f"the range the other {n_on} labels use"
    raise LabelError(path, f"{len(off)} {'labels lie' if several else 'label lies'} outside "
                     f"{_span_text(bottom, top)}, {where}: {shown}{more}; "
                     f"correct {'them' if several else 'it'}, or, if {'they are' if several else 'it is'} "
                     f"meant, declare {ACCEPT_OFF_SCALE} to accept labels off that scale",
                     column="label", rows=[row for row, _, _ in off])


def _names(frame: pd.DataFrame, path: str, column: str, what: str,
           missing_message: str) -> list[str]:
    """A column of ids or raters as text: strings or integers, none missing."""
    rows, raw = frame["__row"].tolist(), frame[column].tolist()
    _raise_for(path, column, rows, raw, [_is_blank(v) for v in raw], missing_message)
    _raise_for(path, column, rows, raw,
               [isinstance(v, (bool, np.bool_)) or not isinstance(v, (str, int, np.integer))
                for v in raw], f"{what} must be strings or integers; found {{values}}")
    return [str(value) for value in raw]


def _raters(frame: pd.DataFrame, path: str) -> list[str | None]:
    if "rater" not in frame.columns:
        return [None] * len(frame)
    return _names(frame, path, "rater", "raters",
                  "every row needs its rater when the file has a rater column; these are empty "
                  "(name who gave each label, or leave the rater column out when one person "
                  "labelled every example)")


def _notes(frame: pd.DataFrame, path: str) -> list[str | None]:
    if "note" not in frame.columns:
        return [None] * len(frame)
    rows, raw = frame["__row"].tolist(), frame["note"].tolist()
    not_text = [not _is_blank(v) and not isinstance(v, str) for v in raw]
    _raise_for(path, "note", rows, raw, not_text, "notes must be text; found {values}")
    return [None if _is_blank(value) else value for value in raw]


def _check_unique(path: str, ids: list[str], raters: list[str | None], rows: list[int]) -> None:
    """One label per example and rater: a repeated pair is a LabelError naming all its rows."""
    rows_by_pair: dict[tuple[str, str | None], list[int]] = {}
    for pair, row in zip(zip(ids, raters), rows):
        rows_by_pair.setdefault(pair, []).append(row)
    repeated = {pair: pair_rows for pair, pair_rows in rows_by_pair.items() if len(pair_rows) > 1}
    if not repeated:
        return
    all_rows = sorted(row for pair_rows in repeated.values() for row in pair_rows)
    if raters[0] is None:
        message = (f"duplicate id(s) {_shown([identifier for identifier, _ in repeated])}: a file "
                   "without a rater column gives each example one label; when several people "
                   "labelled the same example, add a 'rater' column naming who gave each label")
    else:
        (identifier, rater), pair_rows = next(iter(repeated.items()))
        more = f", and {len(repeated) - 1} more such pair(s)" if len(repeated) > 1 else ""
        message = (f"rater {rater!r} labels id {identifier!r} more than once (rows "
                   f"{', '.join(str(r) for r in pair_rows[:-1])} and {pair_rows[-1]}){more}; "
                   "keep one label per rater and example")
    raise LabelError(path, message, column="id", rows=all_rows)


def _check_columns(frame: pd.DataFrame, path: str) -> tuple[str, ...]:
    """The columns that are not read, in file order; a missing id or label is a LabelError."""
    present = [str(c) for c in frame.columns if c != "__row"]
    for column in ("id", "label"):
        if column not in frame.columns:
            raise LabelError(path, f"required column is missing (columns present: {present})",
                             column=column)
    return tuple(c for c in present if c not in COLUMNS)


def _label_error(error: LoadError) -> LabelError:
    """The reader's LoadError as a LabelError, which the command line reports in one line, in the
    words of a labels file (the reader's "nothing to score" is about examples)."""
    where = str(LoadError(error.file, "", error.column, error.rows))  # "file ...; column ...: "
    message = str(error)[len(where):].replace("nothing to score", "there are no labels to calibrate with")
    return LabelError(error.file, message, column=error.column, rows=error.rows)


def _read_frame(path: str) -> pd.DataFrame:
    """The labels file's records; a path that is no readable labels file is a LabelError."""
    if not is_remote(path):
        local = Path(local_path(path))
        if local.is_dir():
            raise LabelError(path, "is a folder, not a labels file: give the path of a .csv, .jsonl or "
                             ".parquet file (--labels)")
        if not local.exists():
            raise LabelError(path, "no such file: check the path given to --labels")
    try:
        return read_records(path)
    except LabelError:
        raise
    except LoadError as error:
        raise _label_error(error) from error


def read_labels(path: str, kind: str | None = None) -> Labels:
    """Read and check a labels file; `kind` is "ordinal", "binary" or "continuous", or None to
    infer it (only binary words or 0/1: binary; whole numbers with at most 11 levels: ordinal;
    else continuous)."""
    if kind is not None and kind not in LABEL_KINDS:
        raise LabelError(path, f"label kind {kind!r} is not one of "
                         f"{', '.join(repr(k) for k in LABEL_KINDS)} ({KIND_FLAG})", column="label")
    frame = _read_frame(path)
    ignored = _check_columns(frame, path)
    ids = _names(frame, path, "id", "ids", "every row needs the id of the example it labels; "
                 "these are missing or empty")
    values, sorts = _label_values(frame, path)
    raters, notes, declared = _raters(frame, path), _notes(frame, path), _declared_scale(frame, path)
    rows = frame["__row"].astype(int).tolist()
    _check_unique(path, ids, raters, rows)
    if kind is not None:
        _check_declared(path, kind, frame, values, sorts)
    if kind != "continuous":  # a declared continuous measure has no scale to be off
        _check_on_one_scale(path, ids, values, rows, declared)
    if kind is None:
        kind, kind_reason = _inferred_kind(values, sorts)
    else:
        kind_reason = "declared"
    table = pd.DataFrame({
        "id": pd.Series(ids, dtype=object),
        "label": pd.Series(values, dtype=np.float64),
        "rater": pd.Series(raters, dtype=object),
        "note": pd.Series(notes, dtype=object),
        "row": pd.Series(rows, dtype=np.int64),
    })
    return Labels(path=path, table=table, kind=kind, kind_reason=kind_reason,
                  ignored_columns=ignored)


def _no_match_error(path: str, label_ids: list[str], run_ids: list[str],
                    run_name: str) -> LabelError:
    message = f"none of the {len(label_ids)} ids in {path} is an example of run {run_name}"
    pairs = _near_misses(label_ids, run_ids)
    if pairs:
        detail = (f"; they differ from the run's only in {_near_miss_kind(pairs)} (for example "
                  f"{_shown_pairs(pairs)}): ids are matched exactly, so correct them in {path}")
    else:
        detail = (f" (label ids {_shown(label_ids)}; run ids {_shown(run_ids)}); check that the "
                  "labels are for this run (--run)")
    return LabelError(path, message + detail, column="id")


def _too_few_error(labels: Labels, label_ids: list[str], matched: tuple[str, ...],
                   run_name: str) -> LabelError:
    rows = labels.table.loc[labels.table["id"].isin(matched), "row"].tolist()
    return LabelError(labels.path, f"only {len(matched)} of the {len(label_ids)} ids in {labels.path} "
                      f"({_shown(list(matched))}) is an example of run {run_name}; a calibration needs "
                      f"at least {MIN_EXAMPLES} labelled examples of the run: label more of its examples, "
                      "or check that the labels are for this run (--run)", column="id", rows=rows)


def match_labels(labels: Labels, run_ids: list[str], run_name: str) -> Matched:
    """The labelled examples of a run, the label ids it does not have, and its unlabelled
    examples. No label id in the run at all is a LabelError; so are fewer labelled examples than
    a calibration needs (MIN_EXAMPLES), since no statistic could be computed."""
    label_ids = list(dict.fromkeys(labels.table["id"]))
    labelled, in_run = set(label_ids), set(run_ids)
    matched = tuple(identifier for identifier in run_ids if identifier in labelled)
    if not matched:
        raise _no_match_error(labels.path, label_ids, list(run_ids), run_name)
    if len(matched) < MIN_EXAMPLES:
        raise _too_few_error(labels, label_ids, matched, run_name)
    return Matched(ids=matched,
                   unknown_ids=tuple(i for i in label_ids if i not in in_run),
                   unlabelled_ids=tuple(i for i in run_ids if i not in labelled))

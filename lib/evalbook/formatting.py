"""How a number reads on every page and in every summary, and what counts as missing.

The pages' templates use these as filters (evalbook.templating registers them), and the
Markdown summary and the notebooks' tables call them directly, so a value reads the same
everywhere: three decimals, a sign where a change is shown, an interval in brackets, and an em
dash where there is no value.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

MISSING = "\u2014"  # an em dash: how a page and a summary show a missing value
DECIMALS = 3


def is_missing(value: Any) -> bool:
    """None, a float NaN (Python's or numpy's), pandas' NA or NaT. A container, even an empty one,
    and an empty string are values: a column that means "blank is missing" says so itself."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, (float, np.floating)):  # numpy.float64 is a float; float32 is not
        return math.isnan(value)
    return isinstance(value, np.datetime64) and bool(np.isnat(value))


def number(value: Any, decimals: int = DECIMALS) -> str:
    """`0.812`, or the em dash when missing."""
    return MISSING if is_missing(value) else f"{value:.{decimals}f}"


def signed(value: Any, decimals: int = DECIMALS) -> str:
    """`+0.012` / `-0.034`, or the em dash when missing."""
    return MISSING if is_missing(value) else f"{value:+.{decimals}f}"


def interval(low: Any, high: Any, decimals: int = DECIMALS) -> str:
    """`[0.781, 0.842]`, or the em dash when either end is missing."""
    if is_missing(low) or is_missing(high):
        return MISSING
    return f"[{low:.{decimals}f}, {high:.{decimals}f}]"


def p_value(value: Any) -> str:
    """A p-value to 3 decimals; one that would read 0.000 reads `< 0.001`, since it is not 0."""
    if is_missing(value):
        return MISSING
    return "< 0.001" if value < 0.0005 else f"{value:.3f}"


def percent(value: Any) -> str:
    """`95%`: a share or a confidence level in whole percents, or the em dash when missing."""
    return MISSING if is_missing(value) else f"{value:.0%}"


def as_written(value: Any) -> str:
    """`0.5`, `-0.02`: a threshold or a tolerance in its shortest form (Python's `g`), or the em dash."""
    return MISSING if is_missing(value) else f"{value:g}"


def count(value: Any) -> str:
    """A whole number as written (`12`), or the em dash when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int):
        return MISSING
    return str(value)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`1 empty answer`, `3 empty answers`: a count with its noun, plural unless `n` is 1
    (`plural` for a noun whose plural is not noun + "s": `counted(2, "match", "matches")`)."""
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


# How each count of a run reads on a page: load.json's counts (evalbook.load), the report's
# counts (those plus the truncation counts of 02_score) and 02_score's per-example flags. One
# table, read by every page that shows a count (01_load, 02_score, 04_report), so that a count
# reads the same everywhere and a variable name never reaches a reader. `count_label` falls back
# to the key with its underscores as spaces for a count added without a label here.
COUNT_LABELS = {
    "n_input_rows": "rows in the input file",
    "n_skipped_incomplete_examples": "examples skipped for a missing text",
    "n_predictions": "predictions read",
    "n_unmatched_predictions": "predictions whose id matches no example",
    "n_unmatched_differing_only_in_case_or_space": "examples whose id differs only in case or spaces",
    "n_left_out_by_limit": "examples left out by the limit",
    "n_examples": "examples evaluated",
    "n_examples_without_prediction": "examples without a prediction",
    "n_empty_generated_answers": "empty answers",
    "n_empty_reference_answers": "empty reference answers",
    "n_with_retrieval": "examples with retrieval results",
    "n_retrieved_ids_without_gold_id": "examples with retrieved ids but no gold id",
    "n_gold_id_without_retrieved_ids": "examples with a gold id but no retrieved ids",
    "n_examples_with_duplicate_retrieved_ids": "examples whose retrieved ids repeat",
    "n_truncated_bertscore": "answers cut to BERTScore's input limit",
    "n_truncated_sentence": "answers cut to the sentence model's input limit",
    # 02_score's flags, one per example
    "generated_empty": "empty answers",
    "reference_empty": "empty reference answers",
    "truncated_bertscore": "answers cut to BERTScore's input limit",
    "truncated_sentence": "answers cut to the sentence model's input limit",
}


def count_label(key: str) -> str:
    """How the count `key` reads on a page (COUNT_LABELS), else the key without `n_` and underscores."""
    return COUNT_LABELS.get(key) or key.removeprefix("n_").replace("_", " ")


def counts_frame(counts: dict[str, Any]) -> pd.DataFrame:
    """`counts` ({key: n}) as a page's table: one row per count, its label as the index, the
    count (an integer) in the column `count`; a count that does not apply (None, such as the
    predictions read when there is no predictions file) is missing."""
    values = [None if is_missing(n) else int(n) for n in counts.values()]
    return pd.DataFrame({"count": pd.array(values, dtype="Int64")},
                        index=pd.Index([count_label(key) for key in counts], name="what"))



# What one of each count is, for a sentence that says a count of 1 ("1 empty answer"):
# COUNT_LABELS names several. A count without a singular here reads with its label.
COUNT_SINGULARS = {
    "n_examples_without_prediction": "example without a prediction",
    "n_empty_generated_answers": "empty answer",
    "n_empty_reference_answers": "empty reference answer",
    "n_truncated_bertscore": "answer cut to BERTScore's input limit",
    "n_truncated_sentence": "answer cut to the sentence model's input limit",
    "n_unmatched_differing_only_in_case_or_space": "example whose id differs only in case or spaces",
    "n_unmatched_predictions": "prediction whose id matches no example",
    "n_left_out_by_limit": "example left out by the limit",
    "n_skipped_incomplete_examples": "example skipped for a missing text",
}


def count_said(key: str, n: int) -> str:
    """The count `key` of `n` as a sentence says it: `1 empty answer`, `3 empty answers`."""
    return counted(n, COUNT_SINGULARS.get(key, count_label(key)), count_label(key))

"""Each metric's range in the report schema, written from the metric registry (evalbook.metrics).

schemas/report-v1.json is also read by tools outside evalbook, so the ranges are written into it
rather than added when evalbook loads it. `with_metric_ranges(schema)` is the schema with
`$defs/metric_ranges` made from the registry and referenced from the top; a test checks that the
shipped file equals it. After changing a range in the registry, rewrite the file with
`python -m evalbook.report.schema`.

Every number on a metric's scale is bounded by its `value_range`: each example's value (for a
judge metric also each repeat's score and their min and max; a check's value is its status, a
word), each of its summary's statistics (`summary_statistics`) and each interval's mean and
bounds. A metric with a `rescaled_range` is
bounded by that instead when the report's bert-score hash says its baseline rescaling was on.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

from evalbook.metrics import METRICS, Metric

# A bound is widened by this much for float error at a range's end: in float64 the cosine of a
# text with itself can be 1.0000000000000002, and float32 embeddings round at about 1e-7. A
# value off by more than this is wrong, not rounded.
FLOAT_SLACK = 1e-6
# bert_score's hash string (provenance.bertscore_hash) ends so when its baseline rescaling is on:
# `-rescaled`, or `-custom-rescaled` with a baseline file, before any `_fast-tokenizer`.
RESCALED_HASH = "-rescaled(_|$)"
ITEMS = "[]"  # a path step into each item of an array
REFERENCE = {"$ref": "#/$defs/metric_ranges"}
SHIPPED = Path(__file__).resolve().parent.parent / "schemas" / "report-v1.json"


def _bounds(value_range: tuple[float | None, float | None]) -> dict[str, float]:
    low, high = value_range
    bounds = {}
    if low is not None:
        bounds["minimum"] = low - FLOAT_SLACK
    if high is not None:
        bounds["maximum"] = high + FLOAT_SLACK
    return bounds


def locations(metric: Metric) -> list[tuple[str, ...]]:
    """Paths from the report to every number on `metric`'s scale (ITEMS steps into an array)."""
    value = ("examples", ITEMS, *metric.example_path)
    paths = [] if metric.check_name is not None else [value]  # a check's value is a status, not a number
    if metric.kind == "judge":  # an example judged several times keeps each repeat and their spread
        entry = value[:-1]
        paths += [(*entry, "repeats", ITEMS, "score"), (*entry, "spread", "min"), (*entry, "spread", "max")]
    paths += [(*metric.summary_path, key) for key in metric.summary_statistics]
    if metric.in_comparison:
        paths += [("intervals", "metrics", metric.name, key) for key in ("mean", "low", "high")]
    return paths


def _at(path: tuple[str, ...], leaf: dict[str, Any]) -> dict[str, Any]:
    """A schema that applies `leaf` to the value at `path` and nothing else."""
    node = leaf
    for key in reversed(path):
        node = {"items": node} if key == ITEMS else {"properties": {key: node}}
    return node


def _merge(into: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)
    return into


def _ranges(metrics: list[Metric], rescaled: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    for metric in metrics:
        bounds = _bounds(metric.rescaled_range if rescaled else metric.value_range)
        for path in locations(metric):
            _merge(schema, _at(path, bounds))
    return schema


def metric_ranges() -> dict[str, Any]:
    """The schema that bounds every number on a metric's scale by the registry's range."""
    plain = [m for m in METRICS if m.rescaled_range is None]
    rescalable = [m for m in METRICS if m.rescaled_range is not None]
    rescaled_report = {"properties": {"provenance": {"properties": {"bertscore_hash": {"pattern": RESCALED_HASH}}}}}
    return {"description": "each metric's range from evalbook.metrics, widened by "
                           f"{FLOAT_SLACK:g} for float error; written by evalbook.report.schema, not by hand",
            "allOf": [_ranges(plain),
                      {"if": rescaled_report, "then": _ranges(rescalable, rescaled=True),
                       "else": _ranges(rescalable)}]}


def with_metric_ranges(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (report-v1) with `$defs/metric_ranges` from the registry, referenced from the top."""
    ranged = copy.deepcopy(schema)
    ranged["$defs"]["metric_ranges"] = metric_ranges()
    if REFERENCE not in ranged.setdefault("allOf", []):
        ranged["allOf"].append(REFERENCE)
    return ranged


def main(argv: list[str] | None = None) -> None:
    """`python -m evalbook.report.schema`: write the registry's metric ranges into report-v1.json.
    It takes no arguments; `--help` prints what it does and writes nothing."""
    parser = argparse.ArgumentParser(
        prog="python -m evalbook.report.schema",
        description="Write each metric's range from the registry (evalbook.metrics) into the shipped "
                    f"report schema, {SHIPPED.name}, as $defs/metric_ranges. Run it after changing a "
                    "range in the registry; a test checks that the shipped file holds them.")
    parser.parse_args(argv)
    schema = json.loads(SHIPPED.read_text("utf-8"))
    SHIPPED.write_text(json.dumps(with_metric_ranges(schema), indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote the registry's metric ranges into {SHIPPED}")


if __name__ == "__main__":
    main()

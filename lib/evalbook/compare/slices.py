"""Which slices a change moved: each slice level's paired deltas against the rest's (issue 26).

The candidate's report cuts its examples into slices (each example's `slices` maps a slice's name
to its level; report schema 1.9). Within each level, the examples paired by id with a value of a
metric in both runs give paired deltas, candidate - baseline. The statistics are the report's
(evalbook.report.slices.slice_run) applied to those deltas instead of the scores: each level's
mean delta with a stratified bootstrap interval, its difference from the rest of the comparison's
mean delta with its interval, a seeded permutation p-value, and one Benjamini-Hochberg adjustment
over every level and metric tested. A level is flagged "worse" (the candidate lost more there, or
gained less, than elsewhere) or "better" only when q is under the threshold and n is at least
min_n, the candidate report's own (`slices.settings`).

`moved_most` names, for each metric, the level whose mean delta is furthest from 0 among the
levels with at least min_n pairs and a rest to compare with: what a reader looks at first when
nothing is flagged. A metric whose every such level moved no further than the comparison's
tolerance has none (the runs agree on it).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from evalbook.metrics import metric as registered
from evalbook.report.slices import MISSING_LEVEL, METADATA, SliceSettings, slice_run
from evalbook.stats import Bootstrap

DEFAULT_SETTINGS = SliceSettings()
METHOD = (
    "Each slice of the candidate run cuts the paired examples into levels. For each metric, a level's "
    "paired deltas (candidate - baseline, over the pairs with a value in both runs) give its mean delta "
    "with a stratified percentile bootstrap interval, the difference from the rest of the pairs' mean "
    "delta with its interval, and a two-sided permutation p-value for that difference (seeded). Every "
    "p-value of the comparison is adjusted together with Benjamini-Hochberg; a level is flagged worse "
    "or better, by the metric's direction, only when its q is under the threshold and it has at least "
    "min_n pairs (the candidate report's settings). Fewer pairs are 'too few to tell' and never tested.")


def unavailable(reason: str) -> dict[str, Any]:
    """The `slices` section of a comparison that has none, saying why."""
    return {"compared": False, "reason": reason, "method": METHOD, "settings": None, "metrics": [],
            "columns": [], "n_tests": 0, "n_flagged": 0, "levels": [], "moved_most": []}


def _settings(candidate_slices: Mapping[str, Any], bootstrap: Bootstrap) -> SliceSettings:
    """The candidate report's min_n, q threshold and first-pass permutations (evalbook's defaults
    where it has none), with the comparison's own bootstrap."""
    chosen = candidate_slices.get("settings") or {}
    return SliceSettings(min_n=int(chosen.get("min_n", DEFAULT_SETTINGS.min_n)),
                         q_threshold=float(chosen.get("q_threshold", DEFAULT_SETTINGS.q_threshold)),
                         permutations=int(chosen.get("permutations", DEFAULT_SETTINGS.permutations)),
                         bootstrap=bootstrap)


def _why_not(candidate: Mapping[str, Any], deltas: Mapping[str, Any]) -> str | None:
    """Why the comparison has no slices, or None when it has."""
    if "slices" not in candidate or not all("slices" in example for example in candidate["examples"]):
        return (f"the candidate report (schema {candidate.get('schema_version')}) has no slices: reports carry "
                "them from schema 1.9 on, so run the candidate again to see which slices moved")
    section = candidate["slices"]
    if section is None:
        return "the candidate run was reported without slicing"
    if not section.get("columns"):
        return "the candidate run is cut by no slice"
    if not deltas:
        return "no metric was compared, so no slice has deltas"
    return None


def moved_most(levels: Sequence[dict[str, Any]], min_n: int, tolerance: float) -> list[dict[str, Any]]:
    """For each metric, in the order of `levels`, the level whose mean delta is furthest from 0
    among those with at least `min_n` pairs and a rest (a level holding every pair is the whole
    comparison, not a slice of it) and a mean delta beyond `tolerance`; ties go to the first."""
    chosen: dict[str, dict[str, Any]] = {}
    for level in levels:
        if level["n"] < min_n or level["difference"] is None or abs(level["mean"]) <= tolerance:
            continue
        best = chosen.get(level["metric"])
        if best is None or abs(level["mean"]) > abs(best["mean"]):
            chosen[level["metric"]] = level
    return list(chosen.values())


def slice_deltas(candidate: Mapping[str, Any], deltas: Mapping[str, Mapping[str, float]],
                 paired_ids: Sequence[str], bootstrap: Bootstrap, tolerance: float) -> dict[str, Any]:
    """The comparison's `slices` section (compare-v1 1.4).

    `candidate` is the candidate's report; `deltas` maps each compared metric to its paired
    deltas by example id (a pair without a value in both runs is absent); `paired_ids` are the
    paired examples; `tolerance` the comparison's, below which a delta is no change. Without
    slices in the candidate, the section says why (`unavailable`)."""
    reason = _why_not(candidate, deltas)
    if reason:
        return unavailable(reason)
    section = candidate["slices"]
    settings = _settings(section, bootstrap)
    columns = [{"name": column["name"], "kind": column.get("kind", METADATA)} for column in section["columns"]]
    kinds = {column["name"]: column["kind"] for column in columns}
    by_id = {example["id"]: example["slices"] for example in candidate["examples"]}
    slices = {name: [by_id[i].get(name, MISSING_LEVEL) for i in paired_ids] for name in kinds}
    values = {name: [per_pair.get(i) for i in paired_ids] for name, per_pair in deltas.items()}
    directions = {name: registered(name).higher_is_better for name in values}
    results = slice_run(values, slices, directions, settings, untested=_untested(section, values))
    levels = [{"kind": kinds[result.slice], **result.as_dict(), "set_aside": list(result.set_aside)}
              for result in results]
    present = {name: list(dict.fromkeys(level_names)) for name, level_names in slices.items()}
    return {
        "compared": True, "reason": None, "method": METHOD,
        "settings": {"min_n": settings.min_n, "q_threshold": settings.q_threshold,
                     "permutations": settings.permutations, "resamples": bootstrap.resamples,
                     "confidence": bootstrap.confidence, "seed": bootstrap.seed},
        "metrics": list(values),
        "columns": [{**column, "levels": sorted(present[column["name"]], key=_display_order(section, column))}
                    for column in columns],
        "n_tests": sum(1 for level in levels if level["p_value"] is not None),
        "n_flagged": sum(1 for level in levels if level["verdict"] in ("worse", "better")),
        "levels": levels,
        "moved_most": moved_most(levels, settings.min_n, tolerance),
    }


def _untested(section: Mapping[str, Any], metrics: Sequence[str]) -> frozenset[tuple[str, str]]:
    """The (slice, metric) pairs the candidate report did not test: a slice defined by the metric
    itself (retrieval hit or miss cuts top-k match into all 1s and all 0s, so its deltas too would
    differ by construction). Read from the report: a metric it tested, and no level of that slice
    for it."""
    tested = {(level["slice"], level["metric"]) for level in section.get("levels") or []}
    return frozenset((column["name"], name) for column in section["columns"] for name in metrics
                     if name in (section.get("metrics") or []) and (column["name"], name) not in tested)


def _display_order(section: Mapping[str, Any], column: Mapping[str, Any]):
    """A sort key putting levels in the candidate report's display order (unknown ones last)."""
    listed = next((c.get("levels") or [] for c in section["columns"] if c["name"] == column["name"]), [])
    place = {level: i for i, level in enumerate(listed)}
    return lambda level: (place.get(level, len(place)), level)

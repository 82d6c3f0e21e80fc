"""Tables and HTML of a comparison document for the 05_compare notebook.

The HTML comes from templates (compare_*.html), which escape user text (ids, reasons, notes);
the tables of answers are escaped by evalbook.escaping. Show these as HTML, never as Markdown.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pandas as pd

from evalbook.compare.checks import fixed_said, newly_failing_said, section_of
from evalbook.compare.document import ComparisonError, metric_label
from evalbook.compare.pairwise import left_out_sentence, preferred_counts
from evalbook.compare.verdict import moved_metrics, not_compared, reading, verdict_parts
from evalbook.escaping import escaped_table, readable_table
from evalbook.formatting import as_written, interval, p_value, percent
from evalbook.judge.display import verdict_text
from evalbook.judge.estimate import describe
from evalbook.metrics import METRICS
from evalbook.metrics import metric as registered
from evalbook.templating import render
from markupsafe import Markup

# The runs table's rows, as a reader names them.
RUN_FIELDS = ("run", "report", "made", "dataset", "generator", "sentence model", "BERTScore model", "judge",
              "chunks retrieved (k)", "profile", "git commit")


# Below this share of either run's examples paired, the comparison warns that it speaks for few.
FEW_PAIRED = 0.5


def _shown_location(location: str) -> str:
    """A report's location for a reader: an s3:// URL whole, a local path by its file name (where
    it lies on one machine says nothing to a reader of the shared page)."""
    return location if "://" in location else PurePosixPath(location).name


def pairing_warnings(doc: dict[str, Any]) -> list[str]:
    """What a reader must know before any delta: one run compared with itself, no or few shared
    examples, another dataset."""
    pairing = doc["pairing"]
    paired = pairing["n_paired"]
    sizes = {side: paired + pairing[f"n_only_{side}"] for side in ("baseline", "candidate")}
    warnings = []
    if doc["baseline"]["run_id"] == doc["candidate"]["run_id"]:
        warnings.append(f"the baseline and the candidate are the same run ({doc['baseline']['run_id']}): "
                        "every delta is 0, so nothing is compared")
    if paired == 0:
        warnings.append(f"the two runs share no example id (baseline {sizes['baseline']}, candidate "
                        f"{sizes['candidate']} examples): nothing is compared")
    elif any(paired < FEW_PAIRED * size for size in sizes.values()):
        warnings.append(f"only {paired} examples are paired, of the baseline's {sizes['baseline']} and the "
                        f"candidate's {sizes['candidate']}: every delta speaks for those {paired} only")
    base, cand = doc["baseline"]["dataset"], doc["candidate"]["dataset"]
    if (base.get("name"), base.get("split")) != (cand.get("name"), cand.get("split")):
        warnings.append(f"the runs come from different datasets: baseline {base.get('name')}/{base.get('split')}, "
                        f"candidate {cand.get('name')}/{cand.get('split')}")
    return warnings


def _shown_value(value: Any) -> str:
    if value is None:
        return "not set"
    if isinstance(value, str) and PurePosixPath(value).is_absolute():
        return PurePosixPath(value).name
    return str(value)


def _shown_pair(before: Any, after: Any) -> str:
    """`before → after`, paths by file name, or by their last folders too where the names agree."""
    shown = [_shown_value(before), _shown_value(after)]
    if shown[0] == shown[1] and before != after and all(isinstance(v, str) for v in (before, after)):
        parts = [PurePosixPath(v).parts for v in (before, after)]
        depth = next((n for n in range(2, min(map(len, parts)) + 1) if parts[0][-n:] != parts[1][-n:]), None)
        shown = [str(PurePosixPath(*p[-depth:])) if depth else v for p, v in zip(parts, (before, after))]
    return f"{shown[0]} → {shown[1]}"


def _override_pair(key: str, b_over: dict[str, Any], c_over: dict[str, Any],
                   resolved: dict[str, tuple[Any, Any]]) -> str:
    """An override's two sides; a side without it shows the value its profile gave, when the
    runs' params are known, else "not set"."""
    text = _shown_pair(b_over.get(key), c_over.get(key))
    if key not in resolved or (key in b_over and key in c_over) or text.count(" → ") != 1:
        return text
    sides = text.split(" → ")
    for side, (over, value) in enumerate(((b_over, resolved[key][0]), (c_over, resolved[key][1]))):
        if key not in over and value is not None:
            sides[side] = f"{_shown_value(value)} (the profile's)"
    return " → ".join(sides)


def changes(doc: dict[str, Any], params: list[tuple[str, Any, Any]] | None = None) -> list[str]:
    """What differs between the two runs, as plain lines: each override set to another value
    (paths by file name; where one run has no override, the value its profile gave, from `params`), another profile, each other resolved parameter that differs (`params`,
    from the runs' params.yaml when both are on this machine; without them, a line when the
    params hashes differ all the same), each input file whose sha256 differs (its first 12 hex
    digits), each model pin that differs, and the generator and the judge."""
    base, cand = doc["baseline"], doc["candidate"]
    lines = []
    b_over = base["params_profile"].get("overrides") or {}
    c_over = cand["params_profile"].get("overrides") or {}
    resolved = {key: (before, after) for key, before, after in params or []}
    for key in dict.fromkeys([*b_over, *c_over]):
        if b_over.get(key) != c_over.get(key):
            lines.append(f"-p {key}: {_override_pair(key, b_over, c_over, resolved)}")
    b_profile, c_profile = base["params_profile"], cand["params_profile"]
    if (b_profile.get("name"), b_profile.get("version")) != (c_profile.get("name"), c_profile.get("version")):
        lines.append(f"profile: {b_profile.get('name')} v{b_profile.get('version')} → "
                     f"{c_profile.get('name')} v{c_profile.get('version')}")
    named = {*b_over, *c_over}
    for key, before, after in params or []:
        if key not in named:
            lines.append(f"{key}: {_shown_pair(before, after)}")
    if params is None and base.get("params_hash") != cand.get("params_hash") and not lines:
        lines.append("the resolved parameters differ (params hash), beyond any override: "
                     "`make diff` shows how")
    b_inputs, c_inputs = base.get("inputs_sha256") or {}, cand.get("inputs_sha256") or {}
    for key in dict.fromkeys([*b_inputs, *c_inputs]):
        if b_inputs.get(key) != c_inputs.get(key):
            lines.append(f"{key} file sha256: {(b_inputs.get(key) or 'none')[:12]} → "
                         f"{(c_inputs.get(key) or 'none')[:12]}")
    for pin in doc["gates"]["embedding"]["differing_pins"]:
        lines.append(f"{pin['pin']}: {_shown_value(pin['baseline'])} → {_shown_value(pin['candidate'])}")
    if base["models"].get("generator") != cand["models"].get("generator"):
        lines.append(f"generator: {base['models'].get('generator')} → {cand['models'].get('generator')}")
    if base["judge_label"] != cand["judge_label"]:
        lines.append(f"judge: {base['judge_label'] or base['judge_status']} → "
                     f"{cand['judge_label'] or cand['judge_status']}")
    return lines


# The sections of 05's page, in its order: (key, title). The key is the heading's id (compare-<key>).
SECTIONS = (("deltas", "What moved"), ("checks", "Checks that newly fail"), ("worse", "Examples that got worse"),
            ("slices", "By slice"), ("per-example", "Change per example"),
            ("pairwise", "Which answer the judge prefers"), ("gate", "The regression gate"),
            ("runs", "The two runs"), ("method", "How it compares"))


def _present(doc: dict[str, Any], key: str) -> bool:
    """Whether 05's page has the section `key`: a feature that is off, or a section with nothing
    to show, has none."""
    shown = {"checks": lambda: section_of(doc)["compared"],
             "worse": lambda: any(doc["regressions"].values()),
             "slices": lambda: bool((doc.get("slices") or {}).get("compared")),
             "per-example": lambda: bool(moved_metrics(doc)),
             "pairwise": lambda: bool(doc.get("pairwise")),
             "gate": lambda: bool(doc.get("gate"))}
    return shown[key]() if key in shown else True


def sections(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """The sections 05's page shows for this comparison, in order, as (key, title)."""
    return [(key, title) for key, title in SECTIONS if _present(doc, key)]


def section_html(doc: dict[str, Any], key: str) -> str:
    """HTML: the heading of section `key` with its id and what it shows; empty when the page has
    no such section."""
    titles = dict(sections(doc))
    if key not in titles:
        return ""
    parameters = doc["parameters"]
    return render("compare_section.html", key=key, title=titles[key], confidence=parameters["confidence"],
                  tolerance=parameters["tolerance"], resamples=parameters["resamples"])


def contents_html(doc: dict[str, Any]) -> str:
    """HTML: the contents list, a link to each section present."""
    return render("compare_contents.html", sections=sections(doc))


def verdict_html(doc: dict[str, Any], params: list[tuple[str, Any, Any]] | None = None) -> str:
    """The comparison's first screen, as HTML: the verdict sentence coloured by its parts
    (evalbook.compare.verdict), any pairing warning, the contents, what changed between the runs
    (`changes`) and how the examples paired."""
    return render("compare_verdict.html", parts=verdict_parts(doc), warnings=pairing_warnings(doc),
                  sections=sections(doc), changed=changes(doc, params), pairing=doc["pairing"])


def _delta_row(doc: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    return {"label": metric_label(doc, row["metric"]), "n": row["n"], "baseline": row["baseline_mean"],
            "candidate": row["candidate_mean"], "delta": row["mean_delta"], "low": row["ci_low"],
            "high": row["ci_high"], "n_worse": row["n_worse"], "n_better": row["n_better"],
            "n_unchanged": row["n_unchanged"], "reading": reading(doc, row)}


def deltas_html(doc: dict[str, Any]) -> str:
    """HTML for 05's deltas: a row for each metric that moved (or whose means are shown side by
    side without deltas), then in one line the metrics not compared and why, the checks or slices
    when they were not compared, and any degenerate interval."""
    rows = [row for row in doc["metrics"]
            if reading(doc, row) in ("worse", "better", "noise") or (not row["compared"] and row["n"])]
    notes = [f"{metric_label(doc, row['metric'])}: {row['note']}" for row in rows if row["note"]]
    for name, section in (("Checks", section_of(doc)), ("By slice", slices_moved(doc))):
        if not section["compared"]:
            notes.append(f"{name}: not compared: {section['reason']}")
    return render("compare_deltas.html", rows=[_delta_row(doc, row) for row in rows],
                  confidence=doc["parameters"]["confidence"], not_compared=not_compared(doc), notes=notes)


def runs_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """The two runs side by side: one row per field, columns baseline and candidate."""
    def column(run: dict[str, Any]) -> list[Any]:
        dataset, profile = run["dataset"], run["params_profile"]
        judge = run["judge_label"] if run["judge_status"] == "ran" else "did not run"
        return [run["run_id"], _shown_location(run["location"]), run["timestamp"], f"{dataset['name']}/{dataset['split']}",
                run["models"]["generator"], run["models"]["sentence_transformer"], run["models"]["bertscore"],
                judge, run["k"], f"{profile['name']} v{profile['version']}", run["git_commit"]]

    return pd.DataFrame({"baseline": column(doc["baseline"]), "candidate": column(doc["candidate"])},
                        index=pd.Index(RUN_FIELDS))


def comparability_notes(doc: dict[str, Any]) -> str:
    """HTML: how the examples paired, the notes, and both runs folded in one table (runs_frame).

    Ids and notes are user text, escaped by the template; show the result as HTML, not
    Markdown, so that Markdown in an id stays as written."""
    pairing = doc["pairing"]
    unpaired = [(side, pairing[f"only_{side}_ids"]) for side in ("baseline", "candidate")
                if pairing[f"only_{side}_ids"]]
    runs = Markup(escaped_table(runs_frame(doc)).to_html())
    return render("compare_notes.html", pairing=pairing, unpaired=unpaired, notes=doc["notes"], runs=runs)


def deltas_frame(doc: dict[str, Any], metrics: list[str] | None = None) -> pd.DataFrame:
    """The long per-example table (id, metric, baseline, candidate, delta) of compared metrics,
    or of `metrics` only (moved_metrics: those a figure draws)."""
    rows = [d for d in doc["deltas"] if metrics is None or d["metric"] in metrics]
    return pd.DataFrame(rows, columns=["id", "metric", "baseline", "candidate", "delta"])


# A regression's fields as the page names them, in its column order.
REGRESSION_COLUMNS = {"id": "id", "question": "question", "reference_answer": "reference",
                      "baseline_answer": "baseline answer", "candidate_answer": "candidate answer",
                      "baseline_score": "baseline", "candidate_score": "candidate", "delta": "delta"}


def regressions_table(doc: dict[str, Any], metric: str) -> pd.DataFrame:
    """The largest regressions on one compared metric, worst first, judge verdicts as text."""
    if metric not in doc["regressions"]:
        compared = ", ".join(doc["regressions"]) or "none"
        raise ComparisonError(f"no regressions for {metric!r}: it was not compared (compared: {compared})")
    rows = []
    for entry in doc["regressions"][metric]:
        row = {shown: entry[key] for key, shown in REGRESSION_COLUMNS.items()}
        if entry["baseline_judge"] is not None or entry["candidate_judge"] is not None:
            row["baseline judge"] = verdict_text(entry["baseline_judge"])
            row["candidate judge"] = verdict_text(entry["candidate_judge"])
        rows.append(row)
    return pd.DataFrame(rows)


def regressions_styled(doc: dict[str, Any], metric: str):
    """regressions_table for reading: full answers side by side, wrapped, the delta shaded red."""
    frame = regressions_table(doc, metric)
    caption = (f"the {len(frame)} examples that lost most on {metric_label(doc, metric)}, worst first "
               f"(delta = candidate − baseline; a change within {as_written(doc['parameters']['tolerance'])} "
               "is none)")
    styler = readable_table(frame, caption)
    if len(frame):
        styler = styler.background_gradient(cmap="Reds_r", subset=["delta"], vmin=-1.0, vmax=0.0)
    return styler


def worse_html(doc: dict[str, Any]) -> str:
    """HTML for 05's examples that got worse: the first headline metric's largest regressions open,
    each other metric's folded under one line, and in one sentence the metrics that moved without
    any example getting worse; empty when no example got worse on any metric."""
    place = _headline_first(list(doc["regressions"]))
    regressed = sorted((name for name, rows in doc["regressions"].items() if rows), key=place.get)
    if not regressed:
        return ""
    tables = [{"label": metric_label(doc, name), "n": len(doc["regressions"][name]),
               "table": Markup(regressions_styled(doc, name).to_html())} for name in regressed]
    quiet = [metric_label(doc, name) for name in moved_metrics(doc) if not doc["regressions"].get(name)]
    none_worse = ", ".join(quiet[:-1]) + " or " + quiet[-1] if len(quiet) > 1 else "".join(quiet)
    return render("compare_worse.html", first=tables[0], folded=tables[1:], none_worse=none_worse)


# ---------------------------------------------------------------- which slices moved

FLAGGED_SHOWN = 5  # flagged levels a first screen names; the table lists every one


def _lead(level: dict[str, Any]) -> str:
    """How a flagged level's sentence begins: a level flagged worse whose mean delta went the
    metric's wrong way holds the regression; one that went the right way only gained less."""
    harmed = level["mean"] < 0 if registered(level["metric"]).higher_is_better else level["mean"] > 0
    if level["verdict"] == "worse":
        return "The regression is concentrated in" if harmed else "The candidate gained less in"
    return "The candidate lost less in" if harmed else "The improvement is concentrated in"


def _q_text(q: Any) -> str:
    shown = p_value(q)
    return f"q {shown}" if shown.startswith("<") else f"q = {shown}"


def _slice_line(doc: dict[str, Any], level: dict[str, Any]) -> dict[str, Any]:
    """One level as the first screen and summary.md name it (plain values; the templates word it)."""
    return {"topic": level["kind"] == "topic", "slice": level["slice"], "level": level["level"],
            "label": metric_label(doc, level["metric"]), "delta": level["mean"], "low": level["low"],
            "high": level["high"], "rest": level["rest_mean"], "n": level["n"], "q": _q_text(level["q_value"]),
            "set_aside": level["set_aside"], "lead": _lead(level) if level["verdict"] in ("worse", "better") else None}


def _headline_first(names: list[str]) -> dict[str, int]:
    """Each metric's place: headline metrics first, in the registry's order."""
    order = [m.name for m in METRICS if m.headline] + [m.name for m in METRICS if not m.headline]
    return {name: order.index(name) if name in order else len(order) for name in names}


def slices_moved(doc: dict[str, Any]) -> dict[str, Any]:
    """Which slices the change moved, for the first screen and summary.md: the flagged levels,
    one line each with the other metrics that flag it (headline metrics first, then by q; at
    most FLAGGED_SHOWN lines, `more` counts the rest); when
    none is flagged, each compared headline metric's level that moved most (every metric's when
    no headline metric was compared); or, without slices, why not."""
    section = doc.get("slices")
    if section is None:
        return {"compared": False, "reason": f"this comparison (schema {doc['schema_version']}) was made before "
                                             "comparisons had slices"}
    if not section["compared"]:
        return {"compared": False, "reason": section["reason"]}
    place = _headline_first(section["metrics"])
    flagged = sorted((level for level in section["levels"] if level["verdict"] in ("worse", "better")),
                     key=lambda level: (place[level["metric"]], level["q_value"], -abs(level["difference"])))
    # one line per flagged level and direction, with its first metric's numbers; the other
    # metrics that flag it the same way are named after them
    grouped: dict[tuple[str, str, str], dict[str, Any]] = {}
    for level in flagged:
        key = (level["slice"], level["level"], level["verdict"])
        if key in grouped:
            grouped[key]["also"].append(metric_label(doc, level["metric"]))
        else:
            grouped[key] = {**_slice_line(doc, level), "also": []}
    lines = list(grouped.values())
    headline = {m.name for m in METRICS if m.headline}
    moved = [level for level in section["moved_most"] if level["metric"] in headline] or section["moved_most"]
    return {"compared": True, "reason": None, "n_tests": section["n_tests"], "n_flagged": section["n_flagged"],
            "q_threshold": section["settings"]["q_threshold"], "min_n": section["settings"]["min_n"],
            "confidence": section["settings"]["confidence"],
            "flagged": lines[:FLAGGED_SHOWN], "more": max(len(lines) - FLAGGED_SHOWN, 0),
            "moved_most": [_slice_line(doc, level) for level in moved]}


def slices_html(doc: dict[str, Any]) -> str:
    """HTML for 05's first screen: the slices the change moved (slices_moved). Slice names and
    levels are user text, escaped by the template."""
    return render("compare_slices.html", **slices_moved(doc))


def slices_table(doc: dict[str, Any]) -> pd.DataFrame:
    """Every slice level of every compared metric: n, mean delta with its interval, the rest's
    mean delta, the difference with its interval, q and the verdict. Empty without slices."""
    section = doc.get("slices") or {"levels": [], "settings": None}
    confidence = percent((section["settings"] or {}).get("confidence", doc["parameters"]["confidence"]))
    rows = [{"metric": level["metric"], "slice": level["slice"], "level": level["level"], "n": level["n"],
             "mean delta": level["mean"], f"{confidence} interval": interval(level["low"], level["high"]),
             "rest": level["rest_mean"], "difference": level["difference"],
             "difference interval": interval(level["difference_low"], level["difference_high"]),
             "q": p_value(level["q_value"]), "verdict": level["verdict"]}
            for level in section["levels"]]
    return pd.DataFrame(rows, columns=["metric", "slice", "level", "n", "mean delta", f"{confidence} interval",
                                       "rest", "difference", "difference interval", "q", "verdict"])


def slice_tables_html(doc: dict[str, Any]) -> str:
    """HTML for 05's slices: the levels tested of the headline metrics that moved (of every metric
    that moved when no headline metric did) and every flagged level, flagged first, then by q;
    the other levels of the metrics that moved folded in one table (of another metric, or too few
    pairs to test); a metric that did not move has no level to show (its deltas are all within
    the tolerance, and the deltas section says so). Metrics by their labels."""
    levels = (doc.get("slices") or {}).get("levels") or []
    table = slices_table(doc).assign(metric=[metric_label(doc, level["metric"]) for level in levels])
    moved = moved_metrics(doc)
    headline = {m.name for m in METRICS if m.headline}
    leading = {name for name in moved if name in headline} or set(moved)
    flagged = pd.Series([level["verdict"] in ("worse", "better") for level in levels], index=table.index,
                        dtype=bool)
    tested = pd.Series([level["p_value"] is not None and level["metric"] in leading for level in levels],
                       index=table.index, dtype=bool) | flagged
    q = pd.Series([level["q_value"] for level in levels], index=table.index, dtype=float)
    order = sorted(table.index[tested], key=lambda i: (not flagged[i], q[i]))
    of_moved = pd.Series([level["metric"] in moved for level in levels], index=table.index, dtype=bool)
    shown, rest = table.loc[order], table[~tested & of_moved]

    def html(frame: pd.DataFrame) -> Markup | None:
        return Markup(escaped_table(frame.set_index(["metric", "slice", "level"])).to_html()) if len(frame) else None

    return render("compare_slice_tables.html", shown=html(shown), rest=html(rest), n_rest=len(rest))


# ---------------------------------------------------------------- the checks that newly fail

def checks_html(doc: dict[str, Any]) -> str:
    """HTML for 05, right after the first screen: how many checks newly fail in the candidate on
    how many shared examples and how many were fixed; or, in one sentence, why the checks are
    not compared (a report without checks)."""
    section = section_of(doc)
    if not section["compared"]:
        return render("compare_checks.html", compared=False, reason=section["reason"])
    return render("compare_checks.html", compared=True, failing=newly_failing_said(section),
                  fixed=fixed_said(section))


def check_rates_table(doc: dict[str, Any]) -> pd.DataFrame:
    """One row per check either run ran: its pass rate in both runs over the shared examples it
    passed or failed in both (`pairs`), the change, and how many newly fail and were fixed; a
    check with no such pair says why in `note`."""
    rows = [{"check": row["check"], "pairs": row["n"], "baseline": row["baseline_pass_rate"],
             "candidate": row["candidate_pass_rate"], "change": row["delta"],
             "newly failing": row["n_newly_failing"], "fixed": row["n_fixed"], "note": row["reason"] or ""}
            for row in section_of(doc)["checks"]]
    return pd.DataFrame(rows, columns=["check", "pairs", "baseline", "candidate", "change", "newly failing",
                                       "fixed", "note"])


def newly_failing_table(doc: dict[str, Any]) -> pd.DataFrame:
    """Every shared example with a check that passed in the baseline and fails in the candidate,
    worst first: its question, reference, both answers and each such check with its reason."""
    rows = [{"id": entry["id"], "question": entry["question"], "reference": entry["reference_answer"],
             "baseline answer": entry["baseline_answer"], "candidate answer": entry["candidate_answer"],
             "newly failing": "\n".join(f"{outcome['check']}: {outcome['reason']}" for outcome in entry["checks"])}
            for entry in section_of(doc)["newly_failing"]]
    return pd.DataFrame(rows, columns=["id", "question", "reference", "baseline answer", "candidate answer",
                                       "newly failing"])


def newly_failing_styled(doc: dict[str, Any]):
    """newly_failing_table for reading: full texts side by side, wrapped, every cell escaped."""
    frame = newly_failing_table(doc)
    section = section_of(doc)
    caption = (f"the {len(frame)} shared examples with a check that passed in the baseline and fails in the "
               f"candidate, the most such checks first ({section['n_newly_failing']} checks in all)")
    return readable_table(frame, caption)


# ---------------------------------------------------------------- pairwise judging

PAIRWISE_SIDES = {"A": "baseline", "B": "candidate", "neither": "neither"}


def pairwise_html(doc: dict[str, Any]) -> str:
    """compare --pairwise's numbers for 05's pages, or one sentence when it was not asked for."""
    section = doc.get("pairwise")
    if not section:
        return render("compare_pairwise.html", pairwise=None)
    return render("compare_pairwise.html", pairwise=section, preferred=preferred_counts(section),
                  estimate=describe(section["estimate"]),
                  confidence=doc["parameters"]["confidence"], left_out=left_out_sentence(section))


def _order_text(judgment: dict[str, Any], order: str) -> str:
    verdict = judgment[order]
    if verdict["verdict"] == "invalid":
        return f"{order}: invalid ({verdict['problem']})"
    side = "tie" if verdict["verdict"] == "tie" else PAIRWISE_SIDES[
        ("A" if verdict["verdict"] == "1" else "B") if order == "ab" else ("B" if verdict["verdict"] == "1" else "A")]
    return f"{order}: {side}. {verdict['reasoning']}"


def pairwise_table(doc: dict[str, Any], baseline: list[dict[str, Any]], candidate: list[dict[str, Any]],
                   limit: int) -> pd.DataFrame:
    """The questions where the candidate did not win (the baseline preferred first, then neither,
    then the invalid ones), at most `limit`: the question, both answers, the outcome of each repeat
    and the judge's reasoning in each order (ab: the baseline's answer shown first)."""
    section = doc["pairwise"]
    base, cand = ({e["id"]: e for e in examples} for examples in (baseline, candidate))
    rank = {"A": 0, "neither": 1, None: 2}
    shown = sorted((p for p in section["pairs"] if p["preferred"] != "B"), key=lambda p: rank[p["preferred"]])[:limit]
    rows = [{"id": p["id"], "question": p["question"], "baseline answer": base[p["id"]]["generated_answer"],
             "candidate answer": cand[p["id"]]["generated_answer"],
             "preferred": PAIRWISE_SIDES.get(p["preferred"], "invalid"),
             "outcomes": ", ".join(j["outcome"] for j in p["judgments"]),
             "judge (first repeat)": "\n".join(_order_text(p["judgments"][0], order) for order in ("ab", "ba"))}
            for p in shown]
    return pd.DataFrame(rows, columns=["id", "question", "baseline answer", "candidate answer", "preferred",
                                       "outcomes", "judge (first repeat)"])


def pairwise_styled(doc: dict[str, Any], baseline: list[dict[str, Any]], candidate: list[dict[str, Any]],
                    limit: int):
    frame = pairwise_table(doc, baseline, candidate, limit)
    not_won = sum(p["preferred"] != "B" for p in doc["pairwise"]["pairs"])
    caption = (f"the {len(frame)} of {not_won} questions the candidate did not win, the baseline's wins first "
               "(ab: the baseline's answer shown first; ba: the candidate's)")
    return readable_table(frame, caption)

"""summary.md: a run's or a comparison's first screen as GitHub-flavoured Markdown, for a pull request.

`run_summary_md(report, links)` gives the dataset, the generator (and where 00_generate asked
for the answers), the judge; each headline metric's mean with its interval, n and, for a judged
metric, its pass rate; the counts of what was missing, empty, cut or unscored; and links to the
run's pages. `comparison_summary_md(comparison, baseline, candidate, links)` gives any pairing
warning (few examples paired, other datasets: evalbook.compare.tables), the gate (or
that none was applied), each compared metric's paired delta with its interval and how many
examples got better, worse or stayed, the pass rates and counts of both runs, the three largest
regressions with their question and both answers shortened (`shortened`), and links to the
comparison's pages.

Numbers carry 3 decimals. Every text that comes from a report or a comparison goes through
`escape_markdown`, so nothing in it renders as markup, a link, an image or a table break. Links
are relative to the summary's folder, so that they also work in an uploaded artifact.
`write_summary` writes `summary.md` once and appends it to `$GITHUB_STEP_SUMMARY` when set.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from evalbook.compare.gate import PASS_SUFFIX
from evalbook.compare.tables import pairing_warnings
from evalbook.escaping import escape_markdown, shown_text
from evalbook.files import write_new
from evalbook.report.headline import counts
from evalbook.judge.display import plain_reason
from evalbook.metrics import METRICS
from evalbook.metrics import metric as registered

SUMMARY_NAME = "summary.md"
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"  # the file GitHub Actions shows as the job's summary
# of a question or an answer in a regression: three rows of three texts side by side stay a
# table a pull request's reader takes in at a glance (a run's pages show 2,000)
SHOWN_CHARACTERS = 200
REGRESSIONS_SHOWN = 3
MISSING = "—"

# (the report's count, how a reader says it), in the order the report's headline shows them
Link = tuple[str, str]  # (what the page is, its path relative to the summary's folder)


def number(value: Any) -> str:
    return MISSING if value is None else f"{value:.3f}"


def signed(value: Any) -> str:
    return MISSING if value is None else f"{value:+.3f}"


def p_value(value: Any) -> str:
    """A p-value to 3 decimals; one that would show as 0.000 as `< 0.001`, since it is not 0."""
    if value is None:
        return MISSING
    return "< 0.001" if value < 0.0005 else f"{value:.3f}"


def interval(low: Any, high: Any) -> str:
    return MISSING if low is None or high is None else f"[{low:.3f}, {high:.3f}]"


def shortened(text: Any, limit: int = SHOWN_CHARACTERS) -> str:
    """`text` cut to `limit` characters by evalbook.escaping.shown_text (which says how many
    more the report JSON holds), on one line: each whitespace run is one space."""
    return " ".join(shown_text(text, limit).split())


def table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[bool]) -> str:
    """A GitHub table; its cells must already be Markdown (numbers, or escaped text)."""
    align = ["---:" if right else "---" for right in numeric]
    lines = [header, align, *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines) + "\n"


def links_line(links: Sequence[Link]) -> str:
    if not links:
        return "No pages were rendered.\n"
    shown = [f"[{escape_markdown(label)}]({quote(path)})" for label, path in links]
    return "Pages: " + " · ".join(shown) + "\n"


def page_links(folder: Path, pages: Iterable[tuple[str, str | Path | None]]) -> list[Link]:
    """(label, path relative to `folder`) of each page that exists inside `folder`."""
    folder = Path(folder).resolve()
    found = []
    for label, page in pages:
        if page is None:
            continue
        path = Path(page).resolve()
        if path.is_file() and path.is_relative_to(folder):
            found.append((label, path.relative_to(folder).as_posix()))
    return found


# ---------------------------------------------------------------- a run

def pass_rates(report: dict[str, Any]) -> dict[str, tuple[float | None, float]]:
    """Each judged metric's (pass rate, threshold), by metric name."""
    judged = (report.get("judge_summary") or {}).get("metrics") or {}
    return {name: (summary.get("pass_rate"), summary["threshold"])
            for name, summary in judged.items() if summary.get("threshold") is not None}


def pass_rate_text(report: dict[str, Any], name: str) -> str:
    """A judged metric's pass rate at its threshold, `0.600 at ≥ 0.5`; a dash without one."""
    rate, threshold = pass_rates(report).get(name, (None, None))
    return MISSING if rate is None else f"{number(rate)} at ≥ {threshold:g}"


def judge_text(report: dict[str, Any]) -> str:
    judge = report.get("judge_summary") or {}
    if judge.get("status") == "ran":
        return f"judged by {escape_markdown(judge.get('label'))}"
    return f"no judge ran: {escape_markdown(plain_reason(judge.get('reason')))}"


def generation_text(report: dict[str, Any]) -> str:
    """Where the answers came from, when 00_generate asked the system under test for them."""
    generation = report.get("generation_summary")
    if not generation:
        return ""
    failed = f", {generation['n_failed']} failed" if generation["n_failed"] else ""
    return (f" (asked of {escape_markdown(generation['endpoint'])}: {generation['n_ok']} of "
            f"{generation['n']} answered{failed})")


def headline_rows(report: dict[str, Any]) -> list[list[str]]:
    """metric, mean, interval, n, pass rate of each headline metric the report has an interval for."""
    intervals = (report.get("intervals") or {}).get("metrics") or {}
    return [[escape_markdown(metric.label), number(shown["mean"]), interval(shown.get("low"), shown.get("high")),
             str(shown["n"]), pass_rate_text(report, metric.name)]
            for metric in METRICS if metric.headline and (shown := intervals.get(metric.name)) is not None]


def run_summary_md(report: dict[str, Any], links: Sequence[Link]) -> str:
    """The run's summary (module docstring) as GitHub-flavoured Markdown."""
    dataset = report["dataset"]
    confidence = (report.get("intervals") or {}).get("confidence", 0.95)
    rows = headline_rows(report)
    metrics = (table(["metric", "mean", f"{confidence:.0%} interval", "n", "pass rate"], rows,
                     [False, True, False, True, False]) if rows else "No metric has a value.\n")
    counted = table(["count", "n"], [[escape_markdown(text), str(n)] for text, n in counts(report)],
                    [False, True])
    return (f"## evalbook run: {escape_markdown(dataset['name'])} ({escape_markdown(dataset['split'])}), "
            f"{dataset['n_examples']} examples\n\n"
            f"Run {escape_markdown(report['run_id'])} · generator "
            f"{escape_markdown(report['models'].get('generator'))}{generation_text(report)} · "
            f"{judge_text(report)}\n\n{metrics}\n{counted}\n{links_line(links)}")


# ---------------------------------------------------------------- a comparison

def gate_md(comparison: dict[str, Any]) -> str:
    """The gate applied (`compare --fail-on`), each rule with its test and why it held or failed;
    or that none was applied, also for a comparison made before gates existed."""
    gate = comparison.get("gate")
    if gate is None:
        return ("No gate was applied (compare without --fail-on): this comparison is a report "
                "and fails nothing.\n")
    rules = gate["rules"]
    n_failed = sum(1 for rule in rules if rule["failed"])
    verdict = (f"**Gate failed**: {n_failed} of {len(rules)} rules failed." if gate["failed"]
               else f"**Gate held**: none of its {len(rules)} rules failed.")
    rows = [[escape_markdown(rule["rule"]), escape_markdown(rule["test"]), signed(rule["delta"]),
             interval(rule.get("low"), rule.get("high")), p_value(rule.get("p_value")), str(rule["n"]),
             MISSING if rule.get("discordant") is None else " / ".join(map(str, rule["discordant"])),
             "failed" if rule["failed"] else "held", escape_markdown(rule["why"])]
            for rule in rules]
    header = ["rule", "test", "delta", "interval", "p-value", "n", "discordant (baseline / candidate only)",
              "result", "why"]
    return f"{verdict}\n\n" + table(header, rows, [False, False, True, False, True, True, True, False, False])


def deltas_md(comparison: dict[str, Any]) -> str:
    """Each compared metric's means, paired delta with its interval and direction counts; then
    the metrics not compared, with why."""
    confidence = comparison["parameters"]["confidence"]
    compared = [row for row in comparison["metrics"] if row["compared"]]
    rows = [[escape_markdown(registered(row["metric"]).label), str(row["n"]), number(row["baseline_mean"]),
             number(row["candidate_mean"]), signed(row["mean_delta"]), interval(row["ci_low"], row["ci_high"]),
             str(row["n_better"]), str(row["n_worse"]), str(row["n_unchanged"])] for row in compared]
    header = ["metric", "n", "baseline", "candidate", "delta", f"{confidence:.0%} interval",
              "better", "worse", "unchanged"]
    shown = (table(header, rows, [False, True, True, True, True, False, True, True, True])
             if rows else "No metric could be compared.\n")
    others = [f"{escape_markdown(registered(row['metric']).label)} "
              f"({escape_markdown(row['reason'] or 'no delta')})"
              for row in comparison["metrics"] if not row["compared"]]
    return shown + (f"\nNot compared: {'; '.join(others)}.\n" if others else "")


def both_runs_md(baseline: dict[str, Any], candidate: dict[str, Any]) -> str:
    """The two runs side by side: id, generator, judge, each judged metric's pass rate, the counts."""
    runs = (baseline, candidate)
    rows = [["run", *(escape_markdown(report["run_id"]) for report in runs)],
            ["generator", *(escape_markdown(report["models"].get("generator")) for report in runs)],
            ["judge", *(judge_text(report) for report in runs)]]
    for name in dict.fromkeys([*pass_rates(baseline), *pass_rates(candidate)]):
        rows.append([f"{escape_markdown(registered(name).label)} pass rate",
                     *(pass_rate_text(report, name) for report in runs)])
    counted = [dict(counts(report)) for report in runs]
    for text in dict.fromkeys([*counted[0], *counted[1]]):
        rows.append([escape_markdown(text), *(str(side[text]) if text in side else MISSING for side in counted)])
    return table(["", "baseline", "candidate"], rows, [False, True, True])


def regressions_md(comparison: dict[str, Any]) -> str:
    """The REGRESSIONS_SHOWN largest regressions of the first compared headline metric, and of
    each metric a gate rule failed on: id, delta, the question and both answers, shortened."""
    regressed = comparison["regressions"]
    headline = [m.name for m in METRICS if m.headline and m.name in regressed]
    # a rule on a judge metric's pass outcome (`groundedness_pass`) lists its score's regressions
    failed = [rule["metric"] if rule["metric"] in regressed else rule["metric"].removesuffix(PASS_SUFFIX)
              for rule in (comparison.get("gate") or {}).get("rules", []) if rule["failed"]]
    chosen = [name for name in dict.fromkeys([*headline[:1], *failed]) if name in regressed]
    if not chosen:
        return "No metric was compared, so no example is listed.\n"
    tolerance = comparison["parameters"]["tolerance"]
    parts = []
    for name in chosen:
        label = escape_markdown(registered(name).label)
        worst = regressed[name][:REGRESSIONS_SHOWN]
        if not worst:
            parts.append(f"No example got worse on {label} beyond the tolerance ({tolerance:g}).\n")
            continue
        rows = [[escape_markdown(entry["id"]), signed(entry["delta"]), escape_markdown(shortened(entry["question"])),
                 escape_markdown(shortened(entry["baseline_answer"])),
                 escape_markdown(shortened(entry["candidate_answer"]))] for entry in worst]
        parts.append(f"The {len(worst)} largest regressions on {label}:\n\n"
                     + table(["id", "delta", "question", "baseline answer", "candidate answer"], rows,
                             [False, True, False, False, False]))
    return "\n".join(parts)


def comparison_summary_md(comparison: dict[str, Any], baseline: dict[str, Any], candidate: dict[str, Any],
                          links: Sequence[Link]) -> str:
    """The comparison's summary (module docstring) as GitHub-flavoured Markdown; `baseline` and
    `candidate` are the two runs' reports, for their pass rates and counts."""
    base, cand, pairing = comparison["baseline"], comparison["candidate"], comparison["pairing"]
    warnings = "".join(f"**Warning**: {escape_markdown(text)}.\n\n" for text in pairing_warnings(comparison))
    short, full = ([escape_markdown(run["run_id"][:width]) for run in (base, cand)] for width in (8, None))
    return (f"## evalbook comparison: {short[0]} → {short[1]}\n\n"
            f"Baseline {full[0]}, candidate {full[1]}; "
            f"{pairing['n_paired']} examples paired by id ({pairing['n_only_baseline']} only in the baseline, "
            f"{pairing['n_only_candidate']} only in the candidate). Delta = candidate − baseline.\n\n"
            f"{warnings}### Gate\n\n{gate_md(comparison)}\n### Deltas\n\n{deltas_md(comparison)}\n"
            f"### Both runs\n\n{both_runs_md(baseline, candidate)}\n"
            f"### Largest regressions\n\n{regressions_md(comparison)}\n{links_line(links)}")


# ---------------------------------------------------------------- writing

def append_step_summary(text: str, log: TextIO | None = None) -> None:
    """Append `text` to the file `$GITHUB_STEP_SUMMARY` names, when it is set; a failure is
    reported on `log` (stderr), never raised: the run's own outputs are complete."""
    target = os.environ.get(STEP_SUMMARY_ENV)
    if not target:
        return
    try:
        with open(target, "a", encoding="utf-8") as stream:
            stream.write(text + "\n")
    except OSError as error:
        print(f"[evalbook] warning: the summary was not appended to {STEP_SUMMARY_ENV} ({target}): "
              f"{error.strerror or error}", file=log or sys.stderr, flush=True)


def write_summary(folder: Path, text: str, log: TextIO | None = None) -> Path:
    """Write `text` as `folder/summary.md` (once), then append it to $GITHUB_STEP_SUMMARY."""
    path = Path(folder) / SUMMARY_NAME
    write_new(path, text.encode("utf-8"))
    append_step_summary(text, log)
    return path

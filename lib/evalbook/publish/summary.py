"""summary.md: a run's or a comparison's first screen as GitHub-flavoured Markdown, for a pull request.

`run_summary_md(report, links)` gives the dataset, the generator (and where 00_generate asked
for the answers), the judge; each headline metric's mean with its interval, n and, for a judged
metric, its pass rate; the slice levels flagged worse or better than the rest of the run, one
line each, or how many tests flagged nothing (evalbook.report.failures); the counts of what was
missing, empty, cut or unscored; and links to the run's pages.
`comparison_summary_md(comparison, baseline, candidate, links)` gives the verdict sentence the
comparison's page leads with (evalbook.compare.verdict), any pairing warning (few
examples paired, other datasets: evalbook.compare.tables), the gate (or that none was applied),
the checks that newly fail in the candidate (each check's pass rate in both runs with its change,
and the first five examples with a check newly failing; or why the checks are not compared),
each compared metric's paired delta with its interval and how many examples got better, worse
or stayed, the slices the change moved (the flagged levels, or else the level that moved most:
evalbook.compare.tables.slices_moved), the pass rates and counts of both runs, the three
largest regressions with their question and both answers shortened (`shortened`), and links to
the comparison's pages.

Both render through templates (`summary_run.md`, `summary_comparison.md`); a run's from the
same context as the report's first screen (evalbook.report.headline.first_screen). Numbers carry
3 decimals. Every text that comes from a report or a comparison is escaped by `escape_markdown`
(the Markdown templates' default), so nothing in it renders as markup, a link, an image or a table
break. Links are relative to the summary's folder, so that they also work in an uploaded artifact.
`write_summary` writes `summary.md` once and appends it to `$GITHUB_STEP_SUMMARY` when set.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from markupsafe import Markup

from evalbook.compare.checks import fixed_said, newly_failing_said, section_of
from evalbook.compare.document import metric_label
from evalbook.compare.gate import PASS_SUFFIX
from evalbook.compare.pairwise import left_out_sentence, preferred_counts
from evalbook.compare.tables import pairing_warnings, slices_moved
from evalbook.compare.verdict import verdict_sentence
from evalbook.escaping import shown_text
from evalbook.files import write_new
from evalbook.layout import SUMMARY_FILE
from evalbook.metrics import METRICS
from evalbook.metrics import metric as registered
from evalbook.report.checks import failing_answers
from evalbook.report.failures import where_it_fails
from evalbook.report.headline import first_screen
from evalbook.templating import render

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"  # the file GitHub Actions shows as the job's summary
# of a question or an answer in a regression: three rows of three texts side by side stay a
# table a pull request's reader takes in at a glance (a run's pages show 2,000)
SHOWN_CHARACTERS = 200
REGRESSIONS_SHOWN = 3
OPTIONAL_RULE_FIELDS = ("low", "high", "p_value", "discordant")  # a rule's test may leave these out

Link = tuple[str, str]  # (what the page is, its path relative to the summary's folder)


def shortened(text: Any, limit: int = SHOWN_CHARACTERS) -> str:
    """`text` cut to `limit` characters by evalbook.escaping.shown_text (which says how many
    more the report JSON holds), on one line: each whitespace run is one space."""
    return " ".join(shown_text(text, limit).split())


def _quoted(links: Sequence[Link]) -> list[tuple[str, Markup]]:
    """The links with each path quoted for a URL: no longer user text, so the template prints it
    as it is, while it escapes the label."""
    return [(label, Markup(quote(path))) for label, path in links]


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


def run_summary_md(report: dict[str, Any], links: Sequence[Link]) -> str:
    """The run's summary (module docstring) as GitHub-flavoured Markdown."""
    return render("summary_run.md", **first_screen(report), where_it_fails=where_it_fails(report),
                  failures=_first_failures(report), links=_quoted(links))


SHOWN_FAILURES = 5  # failing answers named in a run's summary.md, worst first


def _first_failures(report: dict[str, Any]) -> list[dict[str, str]]:
    """The first SHOWN_FAILURES answers that failed a check (report.checks.failing_answers'
    order), each with its id and its failed checks' reasons on one shortened line."""
    frame = failing_answers(report).head(SHOWN_FAILURES)
    return [{"id": shortened(row["id"], 80), "reasons": shortened(row["failed checks"].replace("\n", "; "))}
            for _, row in frame.iterrows()]


# ---------------------------------------------------------------- a comparison

def _gate(comparison: dict[str, Any]) -> dict[str, Any] | None:
    """The gate applied (`compare --fail-on`) with its rules and how many failed; None when none
    was, also for a comparison made before gates existed."""
    gate = comparison.get("gate")
    if gate is None:
        return None
    rules = [{**dict.fromkeys(OPTIONAL_RULE_FIELDS), **rule} for rule in gate["rules"]]
    return {"failed": gate["failed"], "rules": rules, "n_failed": sum(1 for rule in rules if rule["failed"])}


def _deltas(comparison: dict[str, Any]) -> dict[str, Any]:
    """Each compared metric's row with its label; the metrics not compared, with why."""
    labelled = [{**row, "label": metric_label(comparison, row["metric"])} for row in comparison["metrics"]]
    return {"compared": [row for row in labelled if row["compared"]],
            "not_compared": [{"label": row["label"], "reason": row["reason"] or "no delta"}
                             for row in labelled if not row["compared"]]}


def _both_runs(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """The two runs' first screens, and their pass rates and counts as rows of (baseline,
    candidate), each None where that run has none."""
    runs = [first_screen(baseline), first_screen(candidate)]
    judged = dict.fromkeys(name for run in runs for name in run["pass_rates"])
    counted = [dict(run["counts"]) for run in runs]
    return {"runs": runs,
            "pass_rows": [{"label": registered(name).label, "sides": [run["pass_rates"].get(name) for run in runs]}
                          for name in judged],
            "count_rows": [{"text": text, "sides": [side.get(text) for side in counted]}
                           for text in dict.fromkeys(text for side in counted for text in side)]}


def _regressions(comparison: dict[str, Any]) -> list[dict[str, Any]]:
    """The REGRESSIONS_SHOWN largest regressions of the first compared headline metric, and of
    each metric a gate rule failed on: id, delta, the question and both answers, shortened."""
    regressed = comparison["regressions"]
    headline = [m.name for m in METRICS if m.headline and m.name in regressed]
    # a rule on a judge metric's pass outcome (`groundedness_pass`) lists its score's regressions
    failed = [rule["metric"] if rule["metric"] in regressed else rule["metric"].removesuffix(PASS_SUFFIX)
              for rule in (comparison.get("gate") or {}).get("rules", []) if rule["failed"]]
    chosen = [name for name in dict.fromkeys([*headline[:1], *failed]) if name in regressed]
    return [{"label": metric_label(comparison, name),
             "worst": [{"id": entry["id"], "delta": entry["delta"],
                        **{key: shortened(entry[key]) for key in ("question", "baseline_answer", "candidate_answer")}}
                       for entry in regressed[name][:REGRESSIONS_SHOWN]]}
            for name in chosen]


def comparison_summary_md(comparison: dict[str, Any], baseline: dict[str, Any], candidate: dict[str, Any],
                          links: Sequence[Link]) -> str:
    """The comparison's summary (module docstring) as GitHub-flavoured Markdown; `baseline` and
    `candidate` are the two runs' reports, for their pass rates and counts."""
    return render("summary_comparison.md", baseline_id=comparison["baseline"]["run_id"],
                  candidate_id=comparison["candidate"]["run_id"], pairing=comparison["pairing"],
                  verdict=verdict_sentence(comparison),
                  warnings=pairing_warnings(comparison), gate=_gate(comparison), checks=_checks(comparison),
                  confidence=comparison["parameters"]["confidence"], **_deltas(comparison),
                  slices=slices_moved(comparison), **_both_runs(baseline, candidate),
                  regressions=_regressions(comparison), **_pairwise(comparison),
                  tolerance=comparison["parameters"]["tolerance"], links=_quoted(links))


def _checks(comparison: dict[str, Any]) -> dict[str, Any]:
    """The checks that newly fail (evalbook.compare.checks): the two sentences, each check's row,
    and the first SHOWN_FAILURES examples with a check newly failing, shortened; or why not."""
    section = section_of(comparison)
    if not section["compared"]:
        return {"compared": False, "reason": section["reason"]}
    shown = [{"id": shortened(entry["id"], 80),
              "reasons": shortened("; ".join(f"{o['check']}: {o['reason']}" for o in entry["checks"])),
              "question": shortened(entry["question"]), "candidate_answer": shortened(entry["candidate_answer"])}
             for entry in section["newly_failing"][:SHOWN_FAILURES]]
    return {"compared": True, "failing": newly_failing_said(section), "fixed": fixed_said(section),
            "rows": section["checks"], "shown": shown, "more": section["n_examples_newly_failing"] - len(shown)}


def _pairwise(comparison: dict[str, Any]) -> dict[str, Any]:
    section = comparison.get("pairwise")
    if not section:
        return {"pairwise": None}
    return {"pairwise": section, "preferred": preferred_counts(section), "left_out": left_out_sentence(section)}


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
    path = Path(folder) / SUMMARY_FILE
    write_new(path, text.encode("utf-8"))
    append_step_summary(text, log)
    return path

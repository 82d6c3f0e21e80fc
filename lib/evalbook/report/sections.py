"""The sections of a run's report page (04_report), in the order a reader needs them, and which
of them a run shows.

The page leads with its verdict: the headline, then the contents list (`contents_html`), the
answers that fail a check, every example, the worst examples; then the rest. A section whose
feature is off in the run (no checks, no judge, no scenarios, answers read from a file) is not
shown at all: 04_report asks `shows(report, key)` before it displays the section's heading
(`heading_html`, rendered from report_heading.html, with what the section holds) and its
content, so an off section leaves no empty heading behind, and the contents list names exactly
the sections shown.

A heading's anchor is the id nbconvert and JupyterLab give a markdown heading (its text with
each space a hyphen), so that the sections whose heading is a markdown cell of their own (the
explorer's, `rendered=False`) are linked the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from markupsafe import Markup

from evalbook.report.reader import RunReport
from evalbook.report.tables import worst_example_metrics
from evalbook.templating import render


def _always(_: RunReport) -> bool:
    return True


def _judge_ran(view: RunReport) -> bool:
    return view.judge_ran


def _chunks_judged(view: RunReport) -> bool:
    """Whether the judge read some example's retrieved chunks one by one."""
    return any((example.get("judge") or {}).get("chunks") for example in view.examples)


def _conversations(view: RunReport) -> bool:
    return any(scenario.get("transcripts") for scenario in (view.data.get("scenarios") or {}).get("scenarios", []))


@dataclass(frozen=True)
class Section:
    """One section of the page: `key` (what 04_report names it by), its `title`, its heading's
    `level` (2 a section, 3 a part of one, which the contents list leaves out), whether the run
    `shown` it, and whether its heading is `rendered` from report_heading.html (False: a
    markdown cell of the notebook holds it)."""

    key: str
    title: str
    level: int
    shown: Callable[[RunReport], bool]
    rendered: bool = True

    @property
    def anchor(self) -> str:
        """The heading's id, as nbconvert and JupyterLab write it for a markdown heading."""
        return self.title.replace(" ", "-")


SECTIONS: tuple[Section, ...] = (
    Section("checks", "Which answers fail a check", 2, lambda view: view.data.get("checks_summary") is not None),
    Section("explorer", "Every example", 2, _always, rendered=False),
    Section("worst", "Worst examples", 2, lambda view: bool(worst_example_metrics(view))),
    Section("where", "Where it fails", 2, lambda view: bool(view.data.get("slices"))),
    Section("judge", "Judge", 2, _judge_ran),
    Section("judged", "Each judged answer", 3, _judge_ran),
    Section("chunks", "Each retrieved chunk", 3, _chunks_judged),
    Section("scenarios", "Scenarios", 2, lambda view: view.data.get("scenarios") is not None),
    Section("conversations", "Each conversation", 3, _conversations),
    Section("similarity", "Answer similarity summary", 2, _always),
    Section("counts", "Counts", 2, _always),
    Section("generation", "How the answers were obtained", 2,
            lambda view: view.data.get("generation_summary") is not None),
    Section("figures", "Figures", 2, _always),
    Section("unscored", "Unscored judgments", 2, _judge_ran),
    Section("provenance", "How this run was made", 2, _always),
)
BY_KEY = {section.key: section for section in SECTIONS}


def section(key: str) -> Section:
    """The section named `key`; a KeyError naming the known ones otherwise."""
    if key not in BY_KEY:
        raise KeyError(f"no section {key!r}; the report page's sections are {', '.join(BY_KEY)}")
    return BY_KEY[key]


def shows(report: RunReport | dict[str, Any], key: str) -> bool:
    """Whether the page of `report` shows the section `key`."""
    return section(key).shown(RunReport.of(report))


def shown(report: RunReport | dict[str, Any]) -> list[Section]:
    """The sections the page of `report` shows, in the page's order."""
    view = RunReport.of(report)
    return [entry for entry in SECTIONS if entry.shown(view)]


def contents_html(report: RunReport | dict[str, Any]) -> str:
    """The page's contents list: a link to each section (level 2) the page of `report` shows."""
    return render("contents.html", sections=[entry for entry in shown(report) if entry.level == 2])


def heading_html(key: str, **context: Any) -> str:
    """The heading of the section `key` with its anchor, and the sentences that say what the
    section holds (report_heading.html); `context` fills the few that name a number."""
    return render("report_heading.html", section=section(key), **context)


def note_html(text: str, items: list[str] | tuple[str, ...] = ()) -> str:
    """One sentence for a section with nothing else to show, or before the `items` it lists."""
    return render("report_note.html", text=text, items=list(items))


def details_html(summary: str, *parts: Any) -> str:
    """`parts` (HTML fragments the library made: a Styler, a rendered template) collapsed under
    the line `summary`, which opens them."""
    body = Markup("".join(part.to_html() if hasattr(part, "to_html") else str(part) for part in parts if part))
    return render("report_details.html", summary=summary, body=body)


def figure_html(name: str) -> str:
    """What the figure `name` (figures.PAGE_FIGURES, or "forests") shows, for above it."""
    return render("report_figure.html", name=name)


def not_drawn_html(figures: list[tuple[str, str]]) -> str | None:
    """The figures with nothing to draw, (title, why) each, as one line; None when every one was drawn."""
    return render("report_not_drawn.html", figures=figures) if figures else None

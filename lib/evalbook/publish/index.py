"""The index of every run under an outputs root: one static page, `<outputs_root>/index.html`.

A run is a folder `<outputs_root>/<env>/eval-runs/<yyyy>/<mm>/<dd>/<run_id>/` (evalbook.layout);
its report, when the run succeeded, is `<run_id>.json` beside the folder. The page needs no
script and fetches nothing: inline CSS, links relative to the page, every value from the data
escaped by evalbook.escaping. What state each run is in (its status, from run.json and the
RUNNING, FAILED and NOT_UPLOADED markers) is read by evalbook.runs; this module shows it.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

from evalbook.escaping import escape_html
from evalbook.files import write_atomically
from evalbook.metrics import METRICS, of_kind
from evalbook.metrics import metric as registered
from evalbook.publish.pages import noinput_path
from evalbook.report.reader import RunReport
from evalbook.layout import (CALIBRATION_DIR, COMPARISONS_DIR, REMOTE_CALIBRATIONS_DIR, RUN_DAY_GLOB, RUN_JSON,
                             report_path, run_json)
from evalbook.runs import RunJson, RunRecord, collect_run_records, json_field, not_uploaded, read_json, utc

INDEX_NAME = "index.html"
REPORT_NOTEBOOK = "04_report.ipynb"
MISSING = "\u2014"


def _bertscore_layer(report: dict[str, Any]) -> int | None:
    layer = json_field(report, "provenance", "bertscore_num_layers")
    return layer if isinstance(layer, int) and not isinstance(layer, bool) else None


# The headline metrics every run has a column for; judge metrics get one when a run has them.
RUN_COLUMNS = tuple(m.name for m in METRICS if m.headline and m.kind != "judge")


def _report_fields(report: dict[str, Any]) -> dict[str, Any]:
    judge = report.get("judge_summary")
    return {
        "dataset": {key: json_field(report, "dataset", key) for key in ("name", "split", "n_examples")},
        "models": {"sentence_transformer": json_field(report, "models", "sentence_transformer"),
                   "bertscore": json_field(report, "models", "bertscore"),
                   "bertscore_layer": _bertscore_layer(report),
                   "generator": json_field(report, "models", "generator")},
        "judge_label": json_field(judge, "label") or json_field(judge, "status"),
        "k": json_field(report, "retrieval_summary", "k"),
        "metrics": RunReport(report).headline_means(),
    }


def _links(run_dir: Path, report_file: Path, summary: RunJson | None) -> dict[str, Path]:
    """The run's files worth opening, by label; only files that exist."""
    report_notebook = run_dir / REPORT_NOTEBOOK
    candidates = {"report": noinput_path(report_notebook),
                  "report with code": report_notebook.with_suffix(".html"),
                  "JSON": report_file,
                  RUN_JSON: run_json(run_dir)}
    for stage in summary.stages if summary else []:
        if stage.get("status") == "failed" and stage.get("html"):
            label = f"{stage.get('stage', 'failed stage')} (failed)"
            candidates[label] = run_dir / Path(stage["html"]).name
    return {label: path for label, path in candidates.items() if path.is_file()}


def _run_row(run: RunRecord) -> dict[str, Any]:
    row: dict[str, Any] = {"run_id": run.run_id, "env": run.env, "run_dir": run.run_dir,
                           "started_at": run.started_at, "status": run.status, "reason": run.reason,
                           "report": run.report, "dataset": {}, "models": {}, "judge_label": None,
                           "k": None, "metrics": {}, "overrides": run.overrides}
    if run.report_data is not None:
        row.update(_report_fields(run.report_data))
    row["links"] = _links(run.run_dir, report_path(run.run_dir), run.summary)
    return row


def collect_runs(outputs_root: Path) -> list[dict[str, Any]]:
    """One row per run folder under `outputs_root`, newest first: its RunRecord (evalbook.runs)
    and what the index shows of its report.

    Each row holds the record's run_id, env, run_dir, started_at, status, reason, report and
    overrides, then dataset, models, judge_label, k, metrics (the registry's headline means, by
    metric name) and links (label -> existing file).
    """
    return [_run_row(run) for run in collect_run_records(Path(outputs_root))]


def _number(value: Any, places: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return MISSING
    return f"{value:.{places}f}"


def _text(value: Any) -> str:
    """Escaped text of a data value; missing, empty or NaN becomes an em dash."""
    if value is None or value == "" or (isinstance(value, float) and not math.isfinite(value)):
        return MISSING
    return escape_html(value)


def _href(page_dir: Path, target: Path) -> str:
    relative = target.relative_to(page_dir)
    return escape_html("/".join(quote(part) for part in relative.parts))


def _status_cell(row: dict[str, Any]) -> str:
    status = row["status"]
    badge = f'<span class="status {escape_html(status.replace(" ", "-"))}">{_text(status)}</span>'
    if not row["reason"]:
        return badge
    first_line = row["reason"].strip().splitlines()[0]
    return (f'{badge}<div class="reason" title="{escape_html(row["reason"])}">'
            f"{escape_html(first_line)}</div>")


def _dataset_cell(dataset: dict[str, Any]) -> str:
    if not dataset:
        return MISSING
    n = dataset.get("n_examples")
    count = f"n={n}" if isinstance(n, int) and not isinstance(n, bool) else f"n={MISSING}"
    return (f'{_text(dataset.get("name"))}<div class="sub">{_text(dataset.get("split"))} · '
            f"{count}</div>")


def _models_cell(models: dict[str, Any]) -> str:
    if not models:
        return MISSING
    layer = models.get("bertscore_layer")
    layer_text = f" (layer {layer})" if layer is not None else f" (layer {MISSING})"
    return (f'<div><span class="key">sentence</span> {_text(models.get("sentence_transformer"))}</div>'
            f'<div><span class="key">BERTScore</span> {_text(models.get("bertscore"))}'
            f"{layer_text}</div>"
            f'<div><span class="key">generator</span> {_text(models.get("generator"))}</div>')


def _overrides_cell(overrides: dict[str, Any] | None) -> str:
    """What the run changed from its profile, one `key=value` a line: what tells runs apart. A
    local path is shown by its file name (an absolute path says nothing to the page's reader)."""
    if overrides is None:
        return MISSING
    if not overrides:
        return '<span class="sub">no overrides</span>'
    lines = []
    for key, value in overrides.items():
        shown = Path(value).name if isinstance(value, str) and Path(value).is_absolute() else value
        lines.append(f"<div>{escape_html(key)}={_text(shown)}</div>")
    return "".join(lines)


def _judge_cell(label: Any) -> str:
    text = _text(label)
    return text if text == MISSING else f'<span class="mono">{text}</span>'


def _judge_metric_names(rows: list[dict[str, Any]]) -> list[str]:
    """The judge metrics any row has a mean for, in the registry's order."""
    return [m.name for m in of_kind("judge") if any(m.name in row["metrics"] for row in rows)]


def _row_html(row: dict[str, Any], judge_metrics: list[str], page_dir: Path) -> str:
    metrics, k = row["metrics"], row["k"]
    numbers = []
    for name in [*RUN_COLUMNS, *judge_metrics]:
        number = _number(metrics.get(name))
        if registered(name).kind == "retrieval" and number != MISSING and isinstance(k, int):
            number += f'<div class="sub">k={k}</div>'
        numbers.append(number)
    links = " ".join(f'<a href="{_href(page_dir, path)}">{escape_html(label)}</a>'
                     for label, path in row["links"].items()) or MISSING
    cells = [
        f'<td class="when">{row["started_at"]:%Y-%m-%d %H:%M:%S}'
        f'<div class="sub mono">{_text(row["run_id"])}</div></td>',
        f"<td>{_text(row['env'])}</td>",
        f'<td class="state">{_status_cell(row)}</td>',
        f'<td class="dataset">{_dataset_cell(row["dataset"])}</td>',
        f'<td class="models">{_models_cell(row["models"])}</td>',
        f'<td class="judge">{_judge_cell(row["judge_label"])}</td>',
        f'<td class="overrides mono">{_overrides_cell(row["overrides"])}</td>',
        *(f'<td class="num">{value}</td>' for value in numbers),
        f'<td class="links">{links}</td>',
    ]
    return "<tr>" + "".join(cells) + "</tr>"


_CSS = """
:root { color-scheme: light dark; --fg: #1f2328; --muted: #656d76; --line: #d0d7de;
  --head: #f6f8fa; --stripe: #fbfcfd; --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #8d96a0; --line: #30363d;
  --head: #161b22; --stripe: #0d1117; --ok: #3fb950; --bad: #f85149; --warn: #d29922; } }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
  margin: 1rem; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
p.summary { color: var(--muted); margin: 0 0 1.25rem; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid var(--line); padding: .5rem .6rem; text-align: left;
  vertical-align: top; }
th { background: var(--head); position: sticky; top: 0; font-weight: 600; }
tbody tr:nth-child(even) { background: var(--stripe); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
td.when { font-variant-numeric: tabular-nums; max-width: 10rem; }
td.when .sub { overflow-wrap: anywhere; }
.mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .85em; }
.sub, .reason, .key { color: var(--muted); font-size: .85em; }
.reason { max-width: 12rem; overflow-wrap: anywhere; }
td.models, td.dataset, td.judge, td.overrides { max-width: 15rem; overflow-wrap: anywhere; }
.status { font-weight: 600; white-space: nowrap; }
td.state { min-width: 8rem; }
.status.succeeded { color: var(--ok); }
.status.failed, .status.unreadable, .status.interrupted, .status.crashed { color: var(--bad); }
.status.running-or-crashed, .status.running { color: var(--warn); }
td.links a { display: inline-block; margin-right: .6rem; white-space: nowrap; }
h2 { font-size: 1.2rem; margin: 2rem 0 .25rem; }
.ci { color: var(--muted); font-size: .85em; }
td.worse { color: var(--bad); }
td.better { color: var(--ok); }
"""


_COMPARISON_GLOBS = (f"{RUN_DAY_GLOB}/{COMPARISONS_DIR}/*.json",
                     f"*/{COMPARISONS_DIR}/*.json")
# a comparison's page: the one without code when it was made, else the full one
COMPARE_PAGES = ("05_compare.noinput.html", "05_compare.html")
HEADLINE_DELTAS = tuple(m.name for m in METRICS if m.headline and m.kind == "similarity")


def collect_comparisons(outputs_root: Path) -> list[dict[str, Any]]:
    """One row per comparison JSON under `outputs_root` (05_compare's output), newest first.

    Each row holds path, created_at (aware UTC, None when unreadable), baseline and candidate
    run ids, n_paired, the headline deltas {metric: (mean_delta, ci_low, ci_high) or None when
    not compared}, the judge gate's outcome, reason (why the file is unreadable, else None),
    html (the comparison page, when it exists) and not_uploaded (`not_uploaded`).
    """
    outputs_root = Path(outputs_root)
    rows = []
    for path in sorted({p for pattern in _COMPARISON_GLOBS for p in outputs_root.glob(pattern)}):
        doc, error = read_json(path, "comparison JSON")
        page = next((path.with_suffix("") / name for name in COMPARE_PAGES
                     if (path.with_suffix("") / name).is_file()), None)
        row: dict[str, Any] = {"path": path, "html": page, "not_uploaded": not_uploaded(path.with_suffix("")),
                               "reason": error, "created_at": None, "baseline": None,
                               "candidate": None, "n_paired": None, "deltas": {}, "judge": None}
        if doc is not None and doc.get("kind") == "compare":
            metrics = {m["metric"]: m for m in doc.get("metrics", []) if isinstance(m, dict)}
            row.update(created_at=utc(doc.get("created_at")),
                       baseline=json_field(doc, "baseline", "run_id"),
                       candidate=json_field(doc, "candidate", "run_id"),
                       n_paired=json_field(doc, "pairing", "n_paired"),
                       judge="compared" if json_field(doc, "gates", "judge", "compared") else "not compared",
                       deltas={m: ((metrics[m]["mean_delta"], metrics[m]["ci_low"], metrics[m]["ci_high"])
                                   if m in metrics and metrics[m].get("compared") else None)
                               for m in HEADLINE_DELTAS})
        elif doc is not None:
            row["reason"] = "not a comparison document (kind is not 'compare')"
        rows.append(row)
    oldest = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(rows, key=lambda row: (row["created_at"] or oldest, str(row["path"])), reverse=True)


def _delta_cell(delta: tuple[float, float, float] | None) -> str:
    if delta is None:
        return f'<td class="num">{MISSING}</td>'
    mean, low, high = delta
    worse = high is not None and high < 0
    better = low is not None and low > 0
    css = " worse" if worse else (" better" if better else "")
    return (f'<td class="num{css}">{mean:+.3f}<br><span class="ci">[{_number(low)}, '
            f'{_number(high)}]</span></td>')


def _links_cell(links: list[str], row: dict[str, Any]) -> str:
    """A comparison's or calibration's links, and under them that it is not uploaded, when so."""
    cell = " · ".join(links)
    if row.get("not_uploaded"):
        cell += f'<div class="reason" title="{escape_html(row["not_uploaded"])}">not uploaded</div>'
    return cell


def _comparison_row_html(row: dict[str, Any], page_dir: Path) -> str:
    created = row["created_at"].strftime("%Y-%m-%d %H:%M") if row["created_at"] else MISSING
    links = [f'<a href="{_href(page_dir, row["path"])}">JSON</a>']
    if row["html"] is not None:
        links.insert(0, f'<a href="{_href(page_dir, row["html"])}">comparison</a>')
    if row["reason"]:
        return (f"<tr><td>{created}</td><td colspan=\"5\">unreadable: {escape_html(row['reason'])}</td>"
                f"<td>{_links_cell(links, row)}</td></tr>")
    return (f"<tr><td>{created}</td><td>{_text(row['baseline'])}</td><td>{_text(row['candidate'])}</td>"
            f'<td class="num">{_text(row["n_paired"])}</td>'
            + "".join(_delta_cell(row["deltas"].get(m)) for m in HEADLINE_DELTAS)
            + f"<td>{_links_cell(links, row)}</td></tr>")


def _comparisons_html(comparisons: list[dict[str, Any]], page_dir: Path) -> str:
    if not comparisons:
        return ""
    body = "\n".join(_comparison_row_html(row, page_dir) for row in comparisons)
    return f"""<h2>Comparisons</h2>
<p class="summary">{len(comparisons)} comparison{"" if len(comparisons) == 1 else "s"}, newest first.
Deltas are candidate &minus; baseline, paired by example, with the 95% bootstrap interval; shaded
when the whole interval lies below (worse) or above (better) zero.</p>
<table>
<thead><tr><th>Created (UTC)</th><th>Baseline</th><th>Candidate</th><th class="num">Paired</th>
<th class="num">&Delta; BERTScore F1</th><th class="num">&Delta; Sentence cosine</th><th>Files</th></tr></thead>
<tbody>
{body}
</tbody>
</table>"""


_CALIBRATION_GLOBS = (f"{RUN_DAY_GLOB}/*/{CALIBRATION_DIR}/*.json", f"*/{REMOTE_CALIBRATIONS_DIR}/*.json")
CALIBRATE_PAGES = ("06_calibrate.noinput.html", "06_calibrate.html")
# the metrics whose agreement with the labels the index shows: the headline similarity metrics
CALIBRATION_COLUMNS = HEADLINE_DELTAS


def _spearman(doc: dict[str, Any], name: str) -> tuple[float, float | None, float | None] | None:
    entry = next((m for m in doc.get("metrics", []) if isinstance(m, dict) and m.get("metric") == name), None)
    spearman = json_field(entry, "rank_agreement", "spearman")
    if not isinstance(spearman, dict) or spearman.get("estimate") is None:
        return None
    return spearman["estimate"], spearman.get("low"), spearman.get("high")


def collect_calibrations(outputs_root: Path) -> list[dict[str, Any]]:
    """One row per calibration JSON under `outputs_root` (06_calibrate's output), newest first.

    Each row holds path, html (the calibration page, when it exists), not_uploaded
    (`not_uploaded`), reason (why the file is unreadable, else None), created_at, run_id, labels
    (the labels file's name), kind, n_matched, alpha (the raters' Krippendorff's alpha) and rho
    {metric: (estimate, low, high) or None} for the headline similarity metrics.
    """
    outputs_root = Path(outputs_root)
    rows = []
    for path in sorted({p for pattern in _CALIBRATION_GLOBS for p in outputs_root.glob(pattern)}):
        doc, error = read_json(path, "calibration JSON")
        page = next((path.with_suffix("") / name for name in CALIBRATE_PAGES
                     if (path.with_suffix("") / name).is_file()), None)
        row: dict[str, Any] = {"path": path, "html": page, "not_uploaded": not_uploaded(path.with_suffix("")),
                               "reason": error, "created_at": None, "run_id": None,
                               "labels": None, "kind": None, "n_matched": None, "alpha": None, "rho": {}}
        if doc is not None and doc.get("kind") == "calibration":
            labels_path = json_field(doc, "labels", "path")
            row.update(created_at=utc(doc.get("created_at")), run_id=json_field(doc, "run", "run_id"),
                       labels=Path(labels_path).name if isinstance(labels_path, str) else None,
                       kind=json_field(doc, "labels", "kind"), n_matched=json_field(doc, "matching", "n_matched"),
                       alpha=json_field(doc, "raters", "alpha"),
                       rho={name: _spearman(doc, name) for name in CALIBRATION_COLUMNS})
        elif doc is not None:
            row["reason"] = "not a calibration document (kind is not 'calibration')"
        rows.append(row)
    oldest = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(rows, key=lambda row: (row["created_at"] or oldest, str(row["path"])), reverse=True)


def _rho_cell(rho: tuple[float, float | None, float | None] | None) -> str:
    if rho is None:
        return f'<td class="num">{MISSING}</td>'
    estimate, low, high = rho
    interval = f'<br><span class="ci">[{_number(low)}, {_number(high)}]</span>' if low is not None else ""
    return f'<td class="num">{_number(estimate)}{interval}</td>'


def _calibration_row_html(row: dict[str, Any], page_dir: Path) -> str:
    created = row["created_at"].strftime("%Y-%m-%d %H:%M") if row["created_at"] else MISSING
    links = [f'<a href="{_href(page_dir, row["path"])}">JSON</a>']
    if row["html"] is not None:
        links.insert(0, f'<a href="{_href(page_dir, row["html"])}">calibration</a>')
    if row["reason"]:
        return (f"<tr><td>{created}</td><td colspan=\"{4 + len(CALIBRATION_COLUMNS)}\">unreadable: "
                f"{escape_html(row['reason'])}</td><td>{_links_cell(links, row)}</td></tr>")
    return (f"<tr><td>{created}</td><td>{_text(row['run_id'])}</td><td>{_text(row['labels'])}</td>"
            f'<td class="num">{_text(row["n_matched"])}</td><td class="num">{_number(row["alpha"])}</td>'
            + "".join(_rho_cell(row["rho"].get(name)) for name in CALIBRATION_COLUMNS)
            + f"<td>{_links_cell(links, row)}</td></tr>")


def _calibrations_html(calibrations: list[dict[str, Any]], page_dir: Path) -> str:
    if not calibrations:
        return ""
    body = "\n".join(_calibration_row_html(row, page_dir) for row in calibrations)
    heads = "".join(f'<th class="num">&rho; {escape_html(registered(name).label)}</th>' for name in CALIBRATION_COLUMNS)
    return f"""<h2>Calibrations</h2>
<p class="summary">{len(calibrations)} calibration{"" if len(calibrations) == 1 else "s"} against human labels,
newest first: Spearman's &rho; of each metric with the labels, with its 95% bootstrap interval,
beside the raters' own agreement (Krippendorff's &alpha;), the ceiling a metric can reach.</p>
<table>
<thead><tr><th>Created (UTC)</th><th>Run</th><th>Labels</th><th class="num">Labelled</th>
<th class="num">Raters' &alpha;</th>{heads}<th>Files</th></tr></thead>
<tbody>
{body}
</tbody>
</table>"""


def render_index(rows: list[dict[str, Any]], page_dir: Path,
                 comparisons: list[dict[str, Any]] | None = None,
                 calibrations: list[dict[str, Any]] | None = None) -> str:
    """The index page for `rows` (from collect_runs), `comparisons` (from collect_comparisons) and
    `calibrations` (from collect_calibrations), with links relative to `page_dir`."""
    judge_metrics = _judge_metric_names(rows)
    headers = ["Started (UTC)", "Env", "Status", "Dataset", "Models", "Judge", "Overrides"]
    labels = [*(registered(name).label for name in RUN_COLUMNS),
              *(f"judge {registered(name).label}" for name in judge_metrics)]
    numeric = [label[:1].upper() + label[1:] for label in labels]
    head = ("".join(f"<th>{h}</th>" for h in headers)
            + "".join(f'<th class="num">{escape_html(h)}</th>' for h in numeric) + "<th>Files</th>")
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    summary = ", ".join(f"{n} {escape_html(status)}" for status, n in sorted(counts.items()))
    body = "\n".join(_row_html(row, judge_metrics, page_dir) for row in rows)
    empty = f'<tr><td colspan="{len(headers) + len(numeric) + 1}">No runs yet.</td></tr>'
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>evalbook runs</title>
<style>{_CSS}</style>
</head>
<body>
<h1>evalbook runs</h1>
<p class="summary">{len(rows)} run{"" if len(rows) == 1 else "s"}{": " + summary if rows else ""}.
Newest first. Scores are means over each run's examples (judge metrics: over its judged sample);
{MISSING} marks a missing value.</p>
<table>
<thead><tr>{head}</tr></thead>
<tbody>
{body or empty}
</tbody>
</table>
{_comparisons_html(comparisons or [], page_dir)}
{_calibrations_html(calibrations or [], page_dir)}
</body>
</html>
"""


def build_index(outputs_root: Path) -> Path:
    """Write `<outputs_root>/index.html` listing every run, comparison and calibration, replacing
    the previous index atomically."""
    outputs_root = Path(outputs_root)
    page = render_index(collect_runs(outputs_root), outputs_root, collect_comparisons(outputs_root),
                        collect_calibrations(outputs_root))
    index = outputs_root / INDEX_NAME
    write_atomically(index, page.encode("utf-8"), overwrite=True)
    return index

"""summary.md for people in a pull request: lib/evalbook/publish/summary.py, and the Markdown
escaping of user text in lib/evalbook/escaping.py. Every check reads the Markdown as a parser
does (markdown-it-py with GitHub's table rule), never by eye."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt

import hostile
from evalbook.compare.document import build_comparison
from evalbook.escaping import escape_markdown
from evalbook.metrics import METRICS
from evalbook.metrics import metric as registered
from evalbook.layout import SUMMARY_FILE
from evalbook.publish.summary import (SHOWN_CHARACTERS, STEP_SUMMARY_ENV, comparison_summary_md,
                                      run_summary_md, shortened, write_summary)
from paths import ROOT

# Inline tokens user text must never become: markup, a link, an image, code, emphasis.
MARKUP_TOKENS = {"html_inline", "html_block", "link_open", "image", "code_inline", "em_open",
                 "strong_open", "s_open"}
# Block tokens a line of user text must never start.
BLOCK_TOKENS = {"heading_open", "bullet_list_open", "ordered_list_open", "blockquote_open",
                "code_block", "fence", "hr", "html_block", "table_open"}
MARKDOWN_HOSTILE = (
    *hostile.PAYLOADS, hostile.CONTROLS, "# heading", "a | b | c", "`code` and ```fence```",
    "![img](http://x/y.png)", "<http://example.com>", "https://example.com www.example.com",
    "a & b &amp; &lt;", "line one\nline two\r\n\r\n# after a blank line", "- item\n1. item\n> quote",
    "    indented code", "[ref]: http://example.com", "x\\", "~~gone~~", "a\n---", "\t\ttabs",
)


def markdown() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def inline_children(tokens) -> list:
    return [child for token in tokens if token.type == "inline" for child in token.children or []]


def test_hostile_text_renders_as_its_text_in_a_paragraph_and_a_table_cell():
    for payload in MARKDOWN_HOSTILE:
        escaped = escape_markdown(payload)
        expected = hostile.VISIBLE_CONTROLS if payload == hostile.CONTROLS else re.sub(r"[ \t\r\n]+", " ", payload).strip()
        for source in (f"Question: {escaped}\n", f"| a | b |\n|---|---|\n| {escaped} | x |\n"):
            tokens = markdown().parse(source)
            kinds = {token.type for token in tokens} | {child.type for child in inline_children(tokens)}
            in_table = source.startswith("|")
            assert not kinds & MARKUP_TOKENS, (payload, kinds)
            assert not kinds & (BLOCK_TOKENS - ({"table_open"} if in_table else set())), (payload, kinds)
            cells = [token for token in tokens if token.type == "inline"]
            text = "".join(child.content for child in inline_children(cells[2:3] if in_table else cells))
            assert text.removeprefix("Question:").strip() == expected, payload


def test_escaped_text_is_also_safe_as_html():
    for payload in hostile.MARKUP:
        escaped = escape_markdown(payload)
        assert "<" not in escaped and ">" not in escaped
        assert hostile.payload_elements(markdown().render(escaped)) == []


@pytest.mark.parametrize("text", [
    "evalbook-sample", "68c3330c-0892-4f1e-9d3a-1b2c3d4e5f60", "127.0.0.1:8080; then retried",
    "BERTScore's token limit", 'the "note" field', "judge.sample_size (the default profile's 5)",
    "50% of 12, 3 + 4 = 7?", "MRR@k (k = 5)", "groundedness_pass<-0.05", "s3://bucket/key.json", "C:/data/file.csv"])
def test_plain_text_reads_as_written_in_the_raw_markdown(text):
    """Only what GitHub's Markdown acts on is escaped, so that summary.md reads naturally raw."""
    assert escape_markdown(text) == text.replace("<", "&lt;")  # an entity: safe as HTML too


@pytest.mark.parametrize("text, escaped", [
    ("see https://example.com", r"see https\://example.com"), ("www.example.com", r"www\.example.com"),
    ("mail me@example.com", r"mail me\@example.com"), ("a_b and _c_", r"a_b and \_c\_"),
    ("# title", r"\# title"), ("- item", r"\- item"), ("1. first", r"1\. first"), ("2) second", r"2\) second"),
    ("+ plus", r"\+ plus"), ("===", r"\==="), ("---", r"\---"), ("#tag and = sign", "#tag and = sign"), ("&amp; &#39; & alone", r"&amp;amp; &amp;#39; & alone"),
    ("$x^2$", r"\$x^2\$"), ("[a](b)", r"\[a\](b)"), ("a | b", r"a \| b"), ("~~x~~", r"\~\~x\~\~"),
    ("`code`", r"\`code\`"), ("*bold*", r"\*bold\*"), (r"back\slash", r"back\\slash"), ("<b>", "&lt;b&gt;")])
def test_what_markdown_acts_on_is_escaped(text, escaped):
    assert escape_markdown(text) == escaped


# ---------------------------------------------------------------- reading a summary as a parser does

@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]

    def column(self, name: str) -> list[str]:
        index = self.header.index(name)
        return [row[index] for row in self.rows]

    def row(self, first: str) -> dict[str, str]:
        (found,) = [row for row in self.rows if row[0] == first]
        return dict(zip(self.header, found))


@dataclass
class Parsed:
    tokens: list
    tables: list[Table]
    links: list[str]  # every link's href

    @property
    def inline_types(self) -> set[str]:
        return {token.type for token in self.tokens} | {child.type for child in inline_children(self.tokens)}

    @property
    def text(self) -> str:
        return "".join(child.content for child in inline_children(self.tokens) if child.type == "text")


def parse(source: str) -> Parsed:
    tokens = markdown().parse(source)
    tables, current, row, in_head = [], None, None, False
    for token in tokens:
        if token.type == "table_open":
            current = Table([], [])
        elif token.type == "thead_open":
            in_head = True
        elif token.type == "thead_close":
            in_head = False
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close":
            if in_head:
                current.header = row
            else:
                current.rows.append(row)
        elif token.type == "inline" and row is not None and current is not None:
            row.append("".join(child.content for child in token.children or []))
        elif token.type == "table_close":
            tables.append(current)
            current, row = None, None
    links = [child.attrs["href"] for child in inline_children(tokens) if child.type == "link_open"]
    return Parsed(tokens, tables, links)


def close_to(cell: str, value: float | None) -> bool:
    """The cell shows `value` to 3 decimals."""
    return cell == "—" if value is None else abs(float(cell) - value) <= 0.0005 + 1e-12


def interval_close_to(cell: str, low: float | None, high: float | None) -> bool:
    if low is None:
        return cell == "—"
    shown = [float(part) for part in cell.strip("[]").split(",")]
    return close_to(str(shown[0]), low) and close_to(str(shown[1]), high)


def assert_links_exist(parsed: Parsed, folder: Path) -> None:
    assert parsed.links, "the summary links no page"
    for href in parsed.links:
        assert "://" not in href and not href.startswith("/"), href
        assert (folder / unquote(href)).is_file(), href


# ---------------------------------------------------------------- shortening

def test_long_text_is_cut_to_its_stated_length_saying_how_much_is_left():
    assert shortened("short\nanswer") == "short answer"
    assert shortened("x" * SHOWN_CHARACTERS) == "x" * SHOWN_CHARACTERS
    assert shortened("x" * 300) == "x" * SHOWN_CHARACTERS + "… (100 more characters; full text in the report JSON)"
    # N counts the text the report JSON holds, its line breaks too; the one line shows them as spaces
    lines = "line\n" * 100
    assert shortened(lines) == " ".join(["line"] * 40) + " … (300 more characters; full text in the report JSON)"
    megabyte = "a" * 1_000_000
    shown = escape_markdown(shortened(megabyte))
    assert len(shown) < 300 and "999800 more characters" in shown


# ---------------------------------------------------------------- a run

def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text("utf-8"))


def test_a_run_writes_its_summary_with_the_reports_numbers(sample_runs):
    run = sample_runs.baseline
    report = read_json(run.report_path)
    summary = run.run_dir / SUMMARY_FILE
    parsed = parse(summary.read_text("utf-8"))
    metrics, counted = parsed.tables
    assert metrics.header == ["metric", "mean", "95% interval", "n", "pass rate"]
    intervals = report["intervals"]["metrics"]
    expected = [m for m in METRICS if m.headline and m.name in intervals]
    k = report["retrieval_summary"]["k"]
    labels = {m.name: f"{m.label} (k = {k})" if m.kind == "retrieval" else m.label for m in expected}
    assert metrics.column("metric") == list(labels.values()) and expected
    for metric in expected:
        row, shown = metrics.row(labels[metric.name]), intervals[metric.name]
        assert close_to(row["mean"], shown["mean"]), metric.name
        assert interval_close_to(row["95% interval"], shown["low"], shown["high"]), metric.name
        assert row["n"] == str(shown["n"])
    assert counted.header == ["count", "n"]
    given = report["counts"]
    assert counted.row("empty answers")["n"] == str(given["n_empty_generated_answers"])
    assert counted.row("examples without an answer")["n"] == str(given["n_examples_without_prediction"])
    assert counted.row("unscored judgments")["n"] == "0"
    assert "no judge ran" in parsed.text
    assert_links_exist(parsed, run.run_dir)
    assert "04_report.noinput.html" in parsed.links


def test_a_runs_summary_reads_naturally_in_the_raw_file(sample_runs):
    """Ids, names and notes as written: no backslash before a hyphen or a dot, no HTML entity for
    an apostrophe (what the raw file read like before only Markdown's own syntax was escaped)."""
    run = sample_runs.baseline
    raw = (run.run_dir / SUMMARY_FILE).read_text("utf-8")
    assert "evalbook run: evalbook-sample (sample)" in raw and f"Run {run.run_id} " in raw
    assert "| cut at BERTScore's token limit |" in raw and "MRR@k (k = " in raw
    assert not re.search(r"\\[-.:;()']|&#x27;", raw), re.findall(r".{20}(?:\\[-.:;()']|&#x27;).{20}", raw)


def test_a_judged_runs_summary_gives_each_pass_rate_at_its_threshold(sample_runs):
    report = read_json(sample_runs.baseline.report_path)
    report["judge_summary"] = {"status": "ran", "label": "judge-x", "metrics": {
        "groundedness": {"mean": 0.55, "pass_rate": 0.6, "threshold": 0.5, "n_unscored": 2, "n_extra_keys": 3}}}
    report["intervals"]["metrics"]["groundedness"] = {"mean": 0.55, "low": 0.15, "high": 0.95, "n": 5,
                                                      "n_missing": 27}
    parsed = parse(run_summary_md(report, []))
    assert parsed.tables[0].row("groundedness")["pass rate"] == "0.600 at ≥ 0.5"
    assert parsed.tables[0].row("BERTScore F1")["pass rate"] == "—"
    assert parsed.tables[1].row("unscored judgments")["n"] == "2"
    # beside the unscored: replies whose verdicts counted although the judge added keys
    assert parsed.tables[1].row("judged replies whose extra keys were ignored")["n"] == "3"
    assert "judged by judge-x" in parsed.text


def test_a_generated_runs_summary_says_where_the_answers_came_from(sample_runs):
    report = read_json(sample_runs.baseline.report_path)
    report["generation_summary"] = {"endpoint": "http://127.0.0.1:9/answer", "n": 32, "n_ok": 30, "n_failed": 2}
    assert "asked of http://127.0.0.1:9/answer: 30 of 32 answered, 2 failed" in parse(run_summary_md(report, [])).text


ALL_PAYLOADS = " ".join(hostile.PAYLOADS)  # 160 characters: a shortened question keeps them all


def hostile_report(report: dict) -> dict:
    """`report` with its user text (ids, questions, answers, dataset, generator) made hostile."""
    hostile_report = json.loads(json.dumps(report))
    hostile_report["dataset"]["name"] = hostile.SCRIPT + "# x | y"
    hostile_report["models"]["generator"] = hostile.MARKDOWN_LINK
    for position, example in enumerate(hostile_report["examples"]):
        example["id"] = f"{MARKDOWN_HOSTILE[position % len(MARKDOWN_HOSTILE)]} {position}"
        example["question"] = f"{ALL_PAYLOADS} {example['question']}"
        example["generated_answer"] = f"{ALL_PAYLOADS} {example['generated_answer']}"
    return hostile_report


def assert_renders_as_text(parsed: Parsed, own_links: set[str]) -> None:
    assert not parsed.inline_types & (MARKUP_TOKENS - {"link_open", "strong_open"}), parsed.inline_types
    assert set(parsed.links) <= own_links
    rendered = markdown().renderer.render(parsed.tokens, markdown().options, {})
    assert hostile.payload_elements(rendered) == []


def test_hostile_text_in_a_runs_summary_renders_as_text(sample_runs):
    report = hostile_report(read_json(sample_runs.baseline.report_path))
    parsed = parse(run_summary_md(report, [("report", "04_report.noinput.html")]))
    assert_renders_as_text(parsed, {"04_report.noinput.html"})
    assert hostile.SCRIPT + "# x | y" in parsed.text and hostile.MARKDOWN_LINK in parsed.text


# ---------------------------------------------------------------- a comparison

def compared(sample_runs, change=lambda report: report, gate: Any = "absent") -> tuple[dict, dict, dict]:
    """(comparison, baseline, candidate) of the two sample runs, built in this process, each
    report first passed through `change`; `gate` is put into the comparison unless "absent"."""
    baseline, candidate = (change(read_json(run.report_path)) for run in (sample_runs.baseline, sample_runs.candidate))
    comparison = build_comparison(baseline, candidate, baseline_location="baseline.json",
                                  candidate_location="candidate.json", created_at=datetime.now(timezone.utc))
    if gate == "absent":
        comparison.pop("gate", None)  # as in a comparison made before gates existed
    else:
        comparison["gate"] = gate
    return comparison, baseline, candidate


def gate_rule(**fields) -> dict:
    rule = {"rule": "bertscore_f1<-0.02", "metric": "bertscore_f1", "tolerance": -0.02, "test": "bootstrap",
            "delta": -0.1234, "low": -0.2, "high": -0.05, "p_value": None, "n": 32, "discordant": None,
            "failed": True, "why": "the interval lies wholly below -0.02"}
    return {**rule, **fields}


@pytest.fixture(scope="module")
def cli_comparison(sample_runs, tmp_path_factory):
    """`python -m evalbook compare` of the two sample runs, with GITHUB_STEP_SUMMARY naming a file
    that already holds a line: (stdout lines, the comparison JSON's path, the step summary file)."""
    step_summary = tmp_path_factory.mktemp("github") / "step_summary.md"
    step_summary.write_text("earlier step\n", "utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "evalbook", "compare", "--params", str(sample_runs.profile),
         "--baseline", sample_runs.baseline.run_id, "--candidate", sample_runs.candidate.run_id],
        capture_output=True, text=True, cwd=ROOT, check=False,
        env={**os.environ, STEP_SUMMARY_ENV: str(step_summary)})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    return lines, Path(lines[-1]), step_summary


def test_a_comparison_writes_its_summary_with_the_comparisons_numbers(cli_comparison, sample_runs):
    lines, path, _ = cli_comparison
    comparison = read_json(path)
    summary = path.with_suffix("") / SUMMARY_FILE
    assert lines[-2] == f"summary: {summary}"
    parsed = parse(summary.read_text("utf-8"))
    gate_said = "No gate was applied" in parsed.text
    assert gate_said if comparison.get("gate") is None else not gate_said
    deltas = next(t for t in parsed.tables if t.header[:5] == ["metric", "n", "baseline", "candidate", "delta"])
    assert deltas.header[5:] == ["95% interval", "better", "worse", "unchanged"]
    rows = [row for row in comparison["metrics"] if row["compared"]]
    k = comparison["baseline"]["k"]
    assert k == comparison["candidate"]["k"] == 5  # the sample's retrieval is at k 5: MRR@5, top-5 match
    assert deltas.column("metric") == [registered(row["metric"]).label_at(k) for row in rows] and rows
    assert "MRR@5" in deltas.column("metric") and "top-5 match" in deltas.column("metric")
    for row in rows:
        shown = deltas.row(registered(row["metric"]).label_at(k))
        assert shown["n"] == str(row["n"])
        for column, key in (("baseline", "baseline_mean"), ("candidate", "candidate_mean"), ("delta", "mean_delta")):
            assert close_to(shown[column], row[key]), (row["metric"], column)
        assert interval_close_to(shown["95% interval"], row["ci_low"], row["ci_high"])
        assert [shown[c] for c in ("better", "worse", "unchanged")] == [
            str(row["n_better"]), str(row["n_worse"]), str(row["n_unchanged"])]
    regressions = next(t for t in parsed.tables if t.header[0] == "id")
    assert regressions.header == ["id", "delta", "question", "baseline answer", "candidate answer"]
    worst = comparison["regressions"]["bertscore_f1"][:3]
    assert regressions.column("id") == [entry["id"] for entry in worst] and len(worst) == 3
    for shown, entry in zip(regressions.rows, worst):
        assert close_to(shown[1], entry["delta"])
        assert shown[2:] == [shortened(entry[key]) for key in ("question", "baseline_answer", "candidate_answer")]
    both = next(t for t in parsed.tables if t.header == ["", "baseline", "candidate"])
    assert list(both.row("run").values())[1:] == [sample_runs.baseline.run_id, sample_runs.candidate.run_id]
    assert list(both.row("empty answers").values())[1:] == [str(read_json(run.report_path)["counts"]["n_empty_generated_answers"])
                                             for run in (sample_runs.baseline, sample_runs.candidate)]
    assert_links_exist(parsed, summary.parent)
    assert "05_compare.noinput.html" in parsed.links


def test_the_comparison_summary_is_appended_to_the_github_step_summary(cli_comparison):
    _, path, step_summary = cli_comparison
    written = step_summary.read_text("utf-8")
    summary = (path.with_suffix("") / SUMMARY_FILE).read_text("utf-8")
    assert written == "earlier step\n" + summary + "\n"


def test_appending_twice_keeps_both_and_a_failure_is_only_reported(tmp_path, monkeypatch, capsys):
    step_summary = tmp_path / "step_summary.md"
    monkeypatch.setenv(STEP_SUMMARY_ENV, str(step_summary))
    first = write_summary(tmp_path / "one", "# first\n")
    write_summary(tmp_path / "two", "# second\n")
    assert step_summary.read_text("utf-8") == "# first\n\n# second\n\n"
    with pytest.raises(FileExistsError):
        write_summary(first.parent, "# again\n")  # summary.md is written once
    monkeypatch.setenv(STEP_SUMMARY_ENV, str(tmp_path))  # a folder: appending fails
    write_summary(tmp_path / "three", "# third\n")
    assert (tmp_path / "three" / SUMMARY_FILE).read_text("utf-8") == "# third\n"
    assert f"not appended to {STEP_SUMMARY_ENV}" in capsys.readouterr().err


def test_a_failed_gate_is_shown_rule_by_rule_with_why(sample_runs):
    rules = [gate_rule(why="**not** <b>bold</b>"),
             gate_rule(rule="groundedness_pass<-0.1", metric="groundedness_pass", test="mcnemar", delta=0.0,
                       low=None, high=None, p_value=0.5, n=5, discordant=[1, 1], failed=False,
                       why="p 0.5: not significant"),
             gate_rule(rule="sentence_cosine<-0.01", metric="sentence_cosine", p_value=0.0001, failed=True)]
    comparison, baseline, candidate = compared(sample_runs, gate={"rules": rules, "failed": True})
    parsed = parse(comparison_summary_md(comparison, baseline, candidate, []))
    assert "Gate failed: 2 of 3 rules failed." in parsed.text
    gate = next(t for t in parsed.tables if t.header[0] == "rule")
    assert gate.header == ["rule", "test", "delta", "interval", "p-value", "n",
                           "discordant (baseline / candidate only)", "result", "why"]
    failed, held, tiny_p = gate.rows
    assert failed[:4] == ["bertscore_f1<-0.02", "bootstrap", "-0.123", "[-0.200, -0.050]"]
    assert failed[4:] == ["—", "32", "—", "failed", "**not** <b>bold</b>"]
    assert held == ["groundedness_pass<-0.1", "mcnemar", "+0.000", "—", "0.500", "5", "1 / 1", "held",
                    "p 0.5: not significant"]
    assert tiny_p[4] == "< 0.001"
    listed = [token.content for token in inline_children(parsed.tokens) if token.type == "text"]
    assert [line for line in listed if line.startswith("The 3 largest regressions on")] == [
        "The 3 largest regressions on BERTScore F1:", "The 3 largest regressions on sentence cosine:"]


def test_a_gate_that_held_and_no_gate_say_so(sample_runs):
    comparison, baseline, candidate = compared(sample_runs, gate={"rules": [gate_rule(failed=False)], "failed": False})
    assert "Gate held: none of its 1 rules failed." in parse(
        comparison_summary_md(comparison, baseline, candidate, [])).text
    for gate in (None, "absent"):
        comparison, baseline, candidate = compared(sample_runs, gate=gate)
        assert ("gate" in comparison) == (gate is None)
        text = parse(comparison_summary_md(comparison, baseline, candidate, [])).text
        assert "No gate was applied" in text


def test_hostile_text_in_a_comparisons_summary_renders_as_text(sample_runs):
    gate = {"rules": [gate_rule(rule=hostile.SCRIPT, why=hostile.MARKDOWN_LINK + hostile.IMG)], "failed": True}
    comparison, baseline, candidate = compared(sample_runs, hostile_report, gate)
    parsed = parse(comparison_summary_md(comparison, baseline, candidate, [("comparison", "05_compare.noinput.html")]))
    assert_renders_as_text(parsed, {"05_compare.noinput.html"})
    regressions = next(t for t in parsed.tables if t.header[0] == "id")
    assert len(regressions.rows) == 3
    worst = comparison["regressions"]["bertscore_f1"][:3]
    assert regressions.column("id") == [" ".join(entry["id"].split()) for entry in worst]
    for row in regressions.rows:
        assert all(cell.startswith(ALL_PAYLOADS) for cell in row[2:]), row
    assert hostile.SCRIPT in parsed.text and hostile.MARKDOWN_LINK + hostile.IMG in parsed.text


def test_a_comparison_of_few_paired_examples_warns_first(sample_runs):
    def first_ten(report: dict) -> dict:
        return {**report, "examples": report["examples"][:10]} if report["run_id"] == sample_runs.candidate.run_id else report

    comparison, baseline, candidate = compared(sample_runs, first_ten)
    parsed = parse(comparison_summary_md(comparison, baseline, candidate, []))
    assert "Warning: only 10 examples are paired, of the baseline's 32 and the candidate's 10" in parsed.text
    assert parsed.text.index("Warning") < parsed.text.index("Gate")


def test_a_summary_that_cannot_be_written_fails_the_run_or_the_comparison_saying_so(tmp_path):
    from evalbook.errors import RunFailed
    from evalbook.runner import RunResult, _write_run_summary
    from evalbook.sidedocs import DocumentRun, _write_comparison_summary

    run = RunResult("r", tmp_path / "r", tmp_path / "r.json")  # a report that is not there
    assert _write_run_summary(run, sys.stderr).startswith(
        "every stage ran but summary.md could not be written: FileNotFoundError")
    comparison = DocumentRun("c", tmp_path / "c", tmp_path / "c.json", None, None)
    with pytest.raises(RunFailed, match=r"the comparison is written at .*c\.json, but its summary\.md could not be"):
        _write_comparison_summary(comparison, "baseline.json", "candidate.json", sys.stderr)
    assert not (tmp_path / "r" / SUMMARY_FILE).exists() and not (tmp_path / "c").exists()


def test_a_real_gate_that_failed_is_in_the_summary_with_the_comparisons_numbers(sample_runs):
    done = subprocess.run(
        [sys.executable, "-m", "evalbook", "compare", "--params", str(sample_runs.profile),
         "--baseline", sample_runs.baseline.run_id, "--candidate", sample_runs.candidate.run_id,
         "--fail-on", "bertscore_f1<-0.02", "--fail-on", "sentence_cosine<-0.5"],
        capture_output=True, text=True, cwd=ROOT, check=False, env={**os.environ, STEP_SUMMARY_ENV: ""})
    assert done.returncode == 3, done.stderr[-3000:]
    path = Path(done.stdout.strip().splitlines()[-1])
    gate = read_json(path)["gate"]
    parsed = parse((path.with_suffix("") / SUMMARY_FILE).read_text("utf-8"))
    assert "Gate failed: 1 of 2 rules failed." in parsed.text
    shown = next(t for t in parsed.tables if t.header[0] == "rule")
    assert shown.column("rule") == [rule["rule"] for rule in gate["rules"]] == ["bertscore_f1<-0.02", "sentence_cosine<-0.5"]
    for row, rule in zip(shown.rows, gate["rules"]):
        cells = dict(zip(shown.header, row))
        assert close_to(cells["delta"], rule["delta"]) and interval_close_to(cells["interval"], rule["low"], rule["high"])
        assert cells["result"] == ("failed" if rule["failed"] else "held") and cells["n"] == str(rule["n"])
        assert cells["test"] == rule["test"] and cells["why"] == " ".join(rule["why"].split())
    assert [rule["failed"] for rule in gate["rules"]] == [True, False]

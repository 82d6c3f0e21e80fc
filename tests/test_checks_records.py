"""The report's failing answers, each linked to its full record (issue 48, item 4): the table's id
opens the record, which holds every text whole and every check's outcome, all escaped."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from evalbook.checks.protocol import checks_summary
from evalbook.checks.run import check_settings, run_checks
from evalbook.report.checks import failing_answers_html
from test_checks_run import FACTS_ON, HOSTILE, canonical
from test_report import make_report

LONG = "The museum opens at 10:00 on weekdays. " * 20  # longer than a table cell shows


def report_with_failures() -> dict:
    frame = canonical(reference_answer=["Spiders have eight legs.", "It costs £14.", "ok", LONG, "x"],
                      generated_answer=[f"Spiders have six legs. {HOSTILE}", "It costs £14.", "ok",
                                        LONG.replace("10:00", "11:00"), None],
                      question=[f"How many legs? {HOSTILE}", "q2", "q3", "When does it open?", "q5"])
    outcomes = run_checks(frame, check_settings(FACTS_ON))
    records = [[outcome.as_record() for outcome in example] for example in outcomes]
    report = make_report(canonical=frame, checks=(records, checks_summary(outcomes)))
    report["examples"][0]["id"], report["examples"][3]["id"] = "<b>e1</b>", "e 4"  # hostile ids
    return report


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "a" and "href" in attributes:
            self.hrefs.append(attributes["href"])
        if "id" in attributes:
            self.ids.append(attributes["id"])
        self.scripts += tag == "script"


def test_each_failing_answer_links_to_its_record_and_the_record_exists():
    html = failing_answers_html(report_with_failures())
    page = Links()
    page.feed(html)
    record_links = [href for href in page.hrefs if href.startswith("#")]
    assert len(record_links) == 2  # e1 and e 4 failed; e5's error is no failure
    assert all(href[1:] in page.ids for href in record_links)
    assert len(set(record_links)) == 2


def test_the_record_holds_every_text_whole_and_every_outcome():
    html = failing_answers_html(report_with_failures())
    assert LONG.replace("10:00", "11:00").strip() in html  # whole, where the table cuts it
    assert "11:00: the reference says 10:00" in html
    assert "six: the reference says eight" in html


def test_hostile_ids_questions_answers_and_reasons_are_escaped():
    html = failing_answers_html(report_with_failures())
    page = Links()
    page.feed(html)
    assert page.scripts == 1  # the one that opens a record, from checks_open_record.js; none from the text
    assert "<script>alert" not in html and "<b>e1</b>" not in html
    assert "&lt;b&gt;e1&lt;/b&gt;" in html
    assert not re.search(r'id="[^"]*[<>& ][^"]*"', html)  # an anchor never carries the user's id


def test_no_failing_answer_says_so_in_one_sentence():
    frame = canonical(reference_answer=["ok"] * 5, generated_answer=["ok"] * 4 + [None])
    outcomes = run_checks(frame, check_settings(FACTS_ON))
    report = make_report(canonical=frame, checks=([[o.as_record() for o in e] for e in outcomes],
                                                  checks_summary(outcomes)))
    assert "No answer failed a check." in failing_answers_html(report)
    assert "<table" not in failing_answers_html(report)


def test_following_a_link_in_a_browser_opens_the_record_with_no_handler_attribute(tmp_path):
    from browser import offline_browser

    page_file = tmp_path / "failing.html"
    page_file.write_text("<!doctype html><meta charset='utf-8'><body style='height: 4000px'>"
                         + failing_answers_html(report_with_failures()) + "</body>", "utf-8")
    with offline_browser() as browser:
        page = browser.new_context(offline=True).new_page()
        page.goto(page_file.resolve().as_uri(), wait_until="load")
        assert page.evaluate("() => Array.from(document.querySelectorAll('*')).filter((e) => Array.from("
                             "e.attributes).some((a) => a.name.startsWith('on'))).length") == 0
        link = page.locator("table.evalbook-failing a").first
        target = link.get_attribute("href")
        assert page.locator(target).get_attribute("open") is None
        link.click()
        assert page.locator(target).get_attribute("open") is not None
        assert ": the reference says" in page.locator(target).inner_text()


def test_past_the_first_records_an_id_links_to_the_explorer(monkeypatch):
    import evalbook.report.checks as checks

    monkeypatch.setattr(checks, "RECORDS_SHOWN", 1)
    html = failing_answers_html(report_with_failures())
    page = Links()
    page.feed(html)
    assert [href for href in page.hrefs if href.startswith("#failing-answer-")] == ["#failing-answer-1"]
    assert "#failing-answer-1" in [f"#{anchor}" for anchor in page.ids]
    assert page.hrefs.count(f"#{checks.EXPLORER_ANCHOR}") == 2  # the second answer's id, and the sentence
    assert "The first 1 of the 2 failing answers are here in full" in html

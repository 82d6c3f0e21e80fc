"""User text into HTML: lib/evalbook/escaping.py."""

import math

import numpy as np
import pandas as pd
import pytest

import hostile
from evalbook.escaping import (MISSING, SHOWN_CHARACTERS, cell_html, escape_html, escaped_table, readable_table,
                               shown_text, visible_controls)


def test_markup_is_escaped_to_text():
    for payload in hostile.MARKUP:
        escaped = escape_html(payload)
        assert "<" not in escaped and ">" not in escaped
        elements, text = hostile.read_markup(escaped)
        assert elements == [] and text == payload


def test_quotes_are_escaped_so_text_is_safe_in_an_attribute():
    assert escape_html("\"onmouseover='x'") == "&quot;onmouseover=&#x27;x&#x27;"


def test_control_characters_become_visible_escapes():
    assert visible_controls("a\x00b\x07\x1b\x7f\x85") == r"a\x00b\x07\x1b\x7f\x85"
    assert escape_html(hostile.CONTROLS) == hostile.VISIBLE_CONTROLS
    # tab, newline and carriage return are whitespace in HTML, not controls to hide
    assert visible_controls("line\tone\r\nline two") == "line\tone\r\nline two"


def test_a_lone_surrogate_becomes_visible_and_the_text_encodes():
    escaped = escape_html("a\ud800b")
    assert escaped == r"a\ud800b"
    escaped.encode("utf-8")


def test_markdown_and_tex_stay_as_written():
    for payload in (hostile.MARKDOWN_LINK, hostile.MARKDOWN_EMPHASIS, hostile.MATHTEXT):
        assert escape_html(payload) == payload


def test_any_value_is_escaped_as_its_text():
    assert escape_html(["<b>", 1]) == "[&#x27;&lt;b&gt;&#x27;, 1]"
    assert escape_html(None) == "None"


def test_cells_show_numbers_to_three_places_and_missing_values_as_a_dash():
    assert cell_html(0.123456) == "0.123"
    assert cell_html(np.float32(0.5)) == "0.500"
    assert cell_html(7) == "7" and cell_html(np.int64(7)) == "7"
    assert cell_html(True) == "True"
    assert cell_html(None) == MISSING and cell_html(math.nan) == MISSING and cell_html(pd.NA) == MISSING
    assert cell_html(hostile.SCRIPT + "\x00") == "&lt;script&gt;alert(1)&lt;/script&gt;\\x00"


def test_an_escaped_table_escapes_cells_labels_and_caption():
    frame = pd.DataFrame({hostile.SVG: [hostile.IMG, None], "score": [0.12345, math.nan]},
                         index=[hostile.DETAILS, "plain"])
    page = escaped_table(frame, caption=hostile.SCRIPT + hostile.CONTROLS).to_html()
    assert hostile.payload_elements(page) == []
    _, text = hostile.read_markup(page)
    for shown in (hostile.SVG, hostile.IMG, hostile.DETAILS, hostile.SCRIPT + hostile.VISIBLE_CONTROLS,
                  "0.123", MISSING):
        assert shown in text, shown
    assert hostile.CONTROLS[0] not in page


@pytest.mark.parametrize("frame", [pd.DataFrame(), pd.DataFrame(columns=["id", "score"])])
def test_an_empty_table_renders(frame):
    assert "<table" in escaped_table(frame).to_html()


# ---------------------------------------------------------------- long text on a page

def test_shown_text_cuts_to_the_stated_length_and_says_how_much_is_left():
    assert shown_text("abcdef", limit=6) == "abcdef"
    assert shown_text("abcdef", limit=5) == "abcde… (1 more character; full text in the report JSON)"
    assert shown_text("abcdef", limit=2) == "ab… (4 more characters; full text in the report JSON)"
    long = "é" * (SHOWN_CHARACTERS + 1234)  # characters, not UTF-8 bytes
    assert shown_text(long) == "é" * SHOWN_CHARACTERS + "… (1234 more characters; full text in the report JSON)"
    assert shown_text(12345, limit=3) == "123… (2 more characters; full text in the report JSON)"


def test_a_long_cell_is_cut_before_it_is_escaped_never_inside_an_escape():
    cell = cell_html("<" * (SHOWN_CHARACTERS + 10) + "\x00")
    assert cell == "&lt;" * SHOWN_CHARACTERS + "… (11 more characters; full text in the report JSON)"
    assert cell_html("\x00" * (SHOWN_CHARACTERS + 1)).startswith("\\x00" * SHOWN_CHARACTERS + "…")


def test_a_table_of_a_one_megabyte_answer_is_small_and_says_where_the_rest_is():
    answer = "an answer that goes on " * 45_000 + "the end"  # 1,035,007 characters
    frame = pd.DataFrame({"id": ["e1"], "answer": [answer], "score": [0.5]})
    page = readable_table(frame, "answers").to_html()
    assert len(page.encode("utf-8")) < 20_000
    assert f"… ({len(answer) - SHOWN_CHARACTERS} more characters; full text in the report JSON)" in page
    assert "the end" not in page and frame.at[0, "answer"] == answer  # the frame keeps the whole text

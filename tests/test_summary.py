"""summary.md for people in a pull request: lib/evalbook/publish/summary.py, and the Markdown
escaping of user text in lib/evalbook/escaping.py. Every check reads the Markdown as a parser
does (markdown-it-py with GitHub's table rule), never by eye."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

import hostile
from evalbook.escaping import escape_markdown

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

"""User text into HTML: the one function that escapes it, and the tables built on it.

User text is hostile. Ids, questions, answers, contexts, the judge's replies, notes and
parameter values may hold markup, Markdown, TeX, NUL bytes and other control characters.
Everything evalbook builds for a page from such text (the notebooks' tables, banners and notes,
the run index) goes through `escape_html`: `&`, `<`, `>` and both quotes become entities, and
every control character except tab, newline and carriage return (which are whitespace in HTML)
becomes a visible escape such as `\\x00`, as do lone surrogates, which UTF-8 cannot encode.
The notebooks show such text as HTML, never as Markdown, so Markdown links, emphasis and TeX in
it stay as written. Where user text does go into Markdown (summary.md, read in a pull request),
`escape_markdown` makes it plain text for a Markdown reader and an HTML reader alike.

A page shows at most SHOWN_CHARACTERS of any one text (`shown_text`): a 10 MB answer is kept
whole in the report JSON, and scored whole, but a page holding it whole grows to tens of MB and
takes a browser minutes to draw. Every table cell is cut so (cell_html), before it is escaped,
so that a cut never falls inside an escape.
"""

from __future__ import annotations

import html
import numbers
import re
from typing import Any

import pandas as pd
from pandas.io.formats.style import Styler

from evalbook.formatting import MISSING, is_missing

# Characters of one text a page shows: a long answer or a judge's reply read whole (most are a
# paragraph or two, well under 2,000), while a table of 5 examples by 5 texts stays about 50 KB.
SHOWN_CHARACTERS = 2_000
CUT_NOTE = "\u2026 ({n} more {characters}; full text in the report JSON)"
# C0 controls but tab, newline and carriage return; DEL and the C1 controls; lone surrogates.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible_controls(text: str) -> str:
    """`text` with each control character (and lone surrogate) written as its escape, `\\x00`."""
    return _CONTROL.sub(_visible, text)


def shown_text(value: Any, limit: int = SHOWN_CHARACTERS) -> str:
    """The text of `value` (str() of it) as a page shows it: its first `limit` characters, and
    when it is longer, `… (N more characters; full text in the report JSON)` with the N left out.

    It cuts characters (code points) of the text itself: escape the result, never cut an
    escaped text."""
    text = str(value)
    left_out = len(text) - limit
    if left_out <= 0:
        return text
    return text[:limit] + CUT_NOTE.format(n=left_out, characters="character" if left_out == 1 else "characters")


def escape_html(value: Any) -> str:
    """The text of `value` (str() of it), safe as HTML text and in a quoted attribute value."""
    return html.escape(visible_controls(str(value)), quote=True)


# What GitHub's Markdown acts on inside a line, and only that (so that an id, a host:port or a
# dotted name reads in the raw file as written):
# - always: the backslash, code (`), emphasis (*), links and footnotes ([ ]), table cells (|),
#   strikethrough (~) and math ($);
# - `_` where it could open or close emphasis, that is unless a letter or digit is on both sides;
# - `&` where it starts an entity reference, and `<` `>` (raw HTML, autolinks, quotes), written
#   as entities, so that the text is also inert as HTML;
# - the bare links GitHub makes: the `:` of `scheme://`, `mailto:` and `xmpp:`, the `.` of `www.`
#   and the `@` of an e-mail address (a dotted domain after it);
# - at the start of the text, what starts a block there: a heading (# and a space), a list item
#   (- or + and a space, a number and . or ) and a space), a thematic break or setext underline
#   (a text of only - or =).
_MARKDOWN_INLINE = re.compile(
    r"[\\`*\[\]|~$<>]"
    r"|&(?=#[0-9]{1,7};|#[xX][0-9a-fA-F]{1,6};|[A-Za-z][A-Za-z0-9]{0,31};)"
    r"|(?<![^\W_])_|_(?![^\W_])"
    r"|(?i:(?<=http)|(?<=https)|(?<=ftp)):(?=//)|(?i:(?<=mailto)|(?<=xmpp)):"
    r"|(?i:(?<=www))\."
    r"|(?<=[\w.+-])@(?=[\w-]+\.[\w-])"
    r"|^ ?#(?=#{0,5}(?: |$))|^ ?[+-](?= |$)|^ ?-(?=[- ]*$)|^ ?=(?=[= ]*$)"
    r"|^ ?[0-9]{1,9}[.)](?= |$)")
_HTML_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_WHITESPACE_RUN = re.compile(r"[ \t\r\n]+")


def _markdown_escape(match: re.Match[str]) -> str:
    found = match.group()
    prefix, character = found[:-1], found[-1]  # a block marker may follow a space or a number
    return prefix + _HTML_ENTITIES.get(character, "\\" + character)


def escape_markdown(value: Any) -> str:
    """The text of `value` (str() of it) as one line of GitHub-flavoured Markdown that renders as
    that text and nothing else: no markup, link, image, code, emphasis, heading, list or table
    break. Control characters become visible escapes as in escape_html; each run of whitespace,
    line breaks included, is one space, as HTML shows it. Only what Markdown would act on is
    escaped (see _MARKDOWN_INLINE), so that `127.0.0.1:8080` or `evalbook-sample` reads as
    written in the raw file; `&`, `<` and `>` become entities, so the line is also inert as HTML.
    GitHub still links @mentions and #numbers in rendered text: no escape reaches those."""
    text = _WHITESPACE_RUN.sub(" ", visible_controls(str(value)))
    return _MARKDOWN_INLINE.sub(_markdown_escape, text)


def cell_html(value: Any, precision: int = 3) -> str:
    """A table cell: a number to `precision` decimals (integers whole), a missing value as an em
    dash, anything else cut to SHOWN_CHARACTERS by shown_text, then escaped by escape_html."""
    if is_missing(value):
        return MISSING
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, numbers.Integral)):
        return f"{float(value):.{precision}f}"
    return escape_html(shown_text(value))


def escaped_table(frame: pd.DataFrame, caption: str | None = None, precision: int = 3) -> Styler:
    """`frame` as a pandas Styler: cells and row and column labels through cell_html, the caption
    through escape_html. Show user-text tables this way, never as a bare DataFrame."""
    def cell(value: Any) -> str:
        return cell_html(value, precision)

    styler = (frame.style.format(cell, na_rep=MISSING)
              .format_index(cell, axis="index", na_rep=MISSING)
              .format_index(cell, axis="columns", na_rep=MISSING))
    return styler if caption is None else styler.set_caption(escape_html(caption))


def readable_table(frame: pd.DataFrame, caption: str) -> Styler:
    """A table of examples styled for reading: text wrapped, each cell cut to SHOWN_CHARACTERS
    and escaped (cell_html), numbers to 3 decimals, missing values as an em dash."""
    return (escaped_table(frame, caption).hide(axis="index")
            .set_table_styles([
                {"selector": "td", "props": "white-space: pre-wrap; max-width: 32em; "
                                            "vertical-align: top; text-align: left;"},
                {"selector": "th", "props": "text-align: left;"}]))

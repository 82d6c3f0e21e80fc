"""Hostile text for the tests, and a reading of markup that says which elements it would create.

Each payload would run script, or become markup, if it reached a page unescaped: a script
element, event handlers that fire without a click (onerror, onload, ontoggle), a Markdown link
to javascript:, Markdown emphasis, and TeX that matplotlib's mathtext cannot parse. CONTROLS are
raw control characters; a page shows them as VISIBLE_CONTROLS.
"""

from __future__ import annotations

from html.parser import HTMLParser

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
SVG = "<svg onload=alert(3)>"
DETAILS = "<details open ontoggle=alert(4)>"
MARKDOWN_LINK = "[x](javascript:alert(5))"
MARKDOWN_EMPHASIS = "**bold** _em_"
MATHTEXT = r"$\notacommand$"
CONTROLS = "\x00\x07\x1b\x7f"
VISIBLE_CONTROLS = r"\x00\x07\x1b\x7f"
MARKUP = (SCRIPT, IMG, SVG, DETAILS)
PAYLOADS = (*MARKUP, MARKDOWN_LINK, MARKDOWN_EMPHASIS, MATHTEXT)
# The tags the markup payloads would create. Markdown that became markup shows as the payload's
# literal text missing from the page.
PAYLOAD_TAGS = {"script", "img", "svg", "details"}


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def read_markup(markup: str) -> tuple[list[tuple[str, dict[str, str | None]]], str]:
    """(every element the markup creates, as (tag, attributes)), and its text with entities decoded."""
    parser = _Elements()
    parser.feed(markup)
    parser.close()
    return parser.elements, "".join(parser.text)


def payload_elements(markup: str) -> list[tuple[str, dict[str, str | None]]]:
    """The elements of `markup` that a payload could have made: a payload tag, an event handler
    attribute, or an attribute whose value is a javascript: URL."""
    elements, _ = read_markup(markup)
    return [(tag, attrs) for tag, attrs in elements
            if tag in PAYLOAD_TAGS or any(name.startswith("on") for name in attrs)
            or any((value or "").strip().lower().startswith("javascript:") for value in attrs.values())]

"""Pages come from templates: no module of lib/evalbook builds an HTML tag in a string (issue 25).

Every string constant and f-string part in the package's code (docstrings aside) is searched for
an HTML tag. A page that needs one writes it in lib/evalbook/templates/ and renders it through
evalbook.templating, where autoescape and the control-character rule apply to every value.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from markupsafe import Markup

from evalbook.templating import environment, render

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "evalbook"
TAGS = ("a|abbr|b|body|br|caption|code|col|colgroup|details|div|em|figure|footer|h[1-6]|head|header|hr|html|"
        "i|img|kbd|li|link|main|meta|nav|ol|p|pre|script|section|small|span|strong|style|sub|summary|sup|"
        "table|tbody|td|tfoot|th|thead|title|tr|u|ul")
ATTRIBUTE = r"""\s+[a-zA-Z_:][-a-zA-Z0-9_:.]*(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?"""
TAG = re.compile(rf"</?(?:{TAGS})(?:{ATTRIBUTE})*\s*/?>", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings (not code that builds anything)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def tags_built(source: str) -> list[tuple[int, str]]:
    """(line, tag) of each HTML tag written in a string constant or f-string of `source`."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    for node in ast.walk(tree):  # an f-string's literal parts are read with the f-string
        if isinstance(node, ast.JoinedStr):
            skip.update(id(part) for part in node.values)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            found += [(node.lineno, match) for match in TAG.findall(node.value)]
        elif isinstance(node, ast.JoinedStr):
            # the f-string's literal parts joined with a placeholder, so "<td" + "{x}" + ">" is seen
            text = "".join(part.value if isinstance(part, ast.Constant) else "x" for part in node.values)
            found += [(node.lineno, match) for match in TAG.findall(text)]
    return found


def test_the_search_finds_tags_built_by_string():
    assert tags_built('x = f"<td class=\\"num\\">{value}</td>"') == [(1, '<td class="num">'), (1, "</td>")]
    assert tags_built('x = "<span>" + text') == [(1, "<span>")]
    assert tags_built('"""A docstring may name <code>."""') == []
    assert tags_built('help = "<metric><<tolerance>"') == []
    assert tags_built('error = "expected <a .csv or .jsonl file>"') == []
    assert tags_built("x = f\"<a href='{link}'>\"") == [(1, "<a href='x'>")]


def test_no_module_outside_the_templates_builds_a_tag():
    offenders = [f"{path.relative_to(PACKAGE)}:{line}: {tag}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 for line, tag in tags_built(path.read_text("utf-8"))]
    assert not offenders, "HTML built by string outside lib/evalbook/templates:\n" + "\n".join(offenders)


@pytest.mark.parametrize("hostile", ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "a\x00b\u202e"])
def test_every_template_value_is_escaped_and_its_controls_shown(hostile):
    env = environment()
    page = env.from_string("<p title=\"{{ text }}\">{{ text }}</p>").render(text=hostile)
    assert "<script" not in page and "<img" not in page
    assert "\x00" not in page
    assert render.__module__ == "evalbook.templating"


def test_a_markdown_template_escapes_by_default_and_numbers_stay_plain(tmp_path):
    from jinja2 import DictLoader

    env = environment().overlay(loader=DictLoader({"t.md": "{{ text }} {{ delta|signed }} {{ p|p_value }}"}))
    assert env.get_template("t.md").render(text="*bold* [x](y)", delta=0.0125, p=0.0001) == \
        "\\*bold\\* \\[x\\](y) +0.013 < 0.001"  # the ( ) of a link need no escape once [ ] have one


def test_an_undefined_name_is_an_error_not_an_empty_string():
    from jinja2 import UndefinedError
    with pytest.raises(UndefinedError):
        environment().from_string("{{ missing }}").render()


def test_markup_passes_once_and_is_not_escaped_twice():
    assert environment().from_string("{{ x }}").render(x=Markup("<b>ok</b>")) == "<b>ok</b>"

"""The one Jinja2 environment that every page and summary evalbook writes itself renders through.

- Templates live in `evalbook/templates/`: `*.html` for pages and fragments, `*.md` for the
  Markdown summaries, and `evalbook.css`, the one style sheet, which pages include.
- HTML templates autoescape. Markdown templates do not; instead every value they print goes
  through escape_markdown, unless it is already Markup (the number filters below, whose output is
  digits and signs, or text the code quoted itself, such as a link's path).
- Every value printed into HTML goes through escaping.escape_html (control characters made
  visible, then escaped) in the `finalize` hook, so that no template can forget it and every
  page escapes as the notebooks' tables do.
- StrictUndefined: a name a template uses and the context lacks is an error, not an empty string.

A page's code builds a context of plain values (text, numbers, lists of rows) and calls render();
it never writes a tag itself (tests/test_templates.py checks that no module does).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, pass_eval_context, select_autoescape
from markupsafe import Markup, escape

from evalbook import formatting
from evalbook.escaping import escape_html, escape_markdown


@pass_eval_context
def _finalize(eval_ctx: Any, value: Any) -> Any:
    if isinstance(value, Markup):
        return value
    if eval_ctx.autoescape:
        return Markup(escape_html(value))  # the one escaper: controls made visible, then escaped
    return Markup(escape_markdown(value))


def _trusted(function):
    """A filter whose output is made of digits, signs, brackets and the em dash: escaped for HTML,
    as it is for Markdown (where escaping would write `\\+0\\.012`)."""
    @pass_eval_context
    def filter_(eval_ctx: Any, *args: Any, **kwargs: Any) -> Markup:
        text = function(*args, **kwargs)
        return escape(text) if eval_ctx.autoescape else Markup(text)
    filter_.__name__ = function.__name__
    filter_.__doc__ = function.__doc__
    return filter_


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The environment (built once): autoescape for .html, StrictUndefined, the finalize hook and
    the formatting filters: number, signed, interval, p_value, count, percent, as_written."""
    env = Environment(loader=PackageLoader("evalbook", "templates"),
                      autoescape=select_autoescape(enabled_extensions=("html",), disabled_extensions=("md", "css"),
                                                   default_for_string=True, default=True),
                      undefined=StrictUndefined, finalize=_finalize, trim_blocks=True, lstrip_blocks=True,
                      keep_trailing_newline=True)
    for name in ("number", "signed", "interval", "p_value", "count", "percent", "as_written"):
        env.filters[name] = _trusted(getattr(formatting, name))
    env.globals["MISSING"] = formatting.MISSING
    return env


def render(template: str, **context: Any) -> str:
    """`template` (a name under evalbook/templates) rendered with `context`."""
    return environment().get_template(template).render(**context)

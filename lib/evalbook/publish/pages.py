"""Self-contained HTML for executed notebooks: pages that open, complete, with no network.

nbconvert's lab template loads require.js, MathJax and mermaid from cdnjs, and the Jupyter widgets
manager from unpkg when a notebook holds widget state. `render_html` renders through a template
that extends lab and empties those blocks, and embeds the images that markdown cells reference.
What is lost: TeX in markdown stays as raw `$...$` text, mermaid diagrams stay as their source,
widgets render as their text fallback. Output images are already base64 in the notebook; the lab
template's CSS holds only `data:` URLs. Before writing, `external_references` checks the page, so
a page that would still fetch something (say a plotly output loading its CDN script) is refused.

User text in a page is escaped where it is put in (evalbook.escaping); nbconvert escapes plain
text and printed output. Neither removes control characters from a DataFrame's own HTML or from
printed text, so every control character left in a rendered page is written as the visible
escape `escape_html` uses (`\x00`): no page holds one raw.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from evalbook.escaping import visible_controls
from evalbook.files import write_new
from evalbook.layout import NOINPUT_SUFFIX
from evalbook.templating import render


# Each block emptied here loaded a script from a CDN in nbconvert 7.17.2's lab template.
OFFLINE_TEMPLATE = """\
{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""

_NETWORK_URL = re.compile(r"^\s*(?:([a-z][a-z0-9+.\-]*):)?//", re.IGNORECASE)
_LOCAL_SCHEMES = {"file"}
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_CSS_REFERENCE = re.compile(
    r"""@import\s+(?:"([^"]*)"|'([^']*)')"""
    r"""|url\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s]*))\s*\)""", re.IGNORECASE)
# Tags whose `href` makes the browser fetch (an <a> or <area> href only navigates on a click).
_FETCHING_HREF_TAGS = {"link", "image", "use", "feimage", "script"}


def noinput_path(notebook: Path) -> Path:
    """Where the no-input HTML of `notebook` goes: `04_report.ipynb` -> `04_report.noinput.html`."""
    return notebook.with_suffix(NOINPUT_SUFFIX)


def _is_network_url(url: str) -> bool:
    match = _NETWORK_URL.match(url)
    return bool(match) and (match.group(1) or "").lower() not in _LOCAL_SCHEMES


def _css_urls(css: str) -> list[str]:
    """The url(...) and @import targets of a stylesheet, in order, outside comments."""
    matches = _CSS_REFERENCE.finditer(_CSS_COMMENT.sub("", css))
    return [next(group for group in match.groups() if group is not None) for match in matches]


def _srcset_urls(srcset: str) -> list[str]:
    return [candidate.split()[0] for candidate in srcset.split(",") if candidate.split()]


class _ReferenceCollector(HTMLParser):
    """Collects every URL a tag attribute or a stylesheet asks the browser to load."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("src", "poster", "background") or (name == "data" and tag == "object"):
                self.urls.append(value)
            elif name in ("srcset", "imagesrcset"):
                self.urls.extend(_srcset_urls(value))
            elif name in ("href", "xlink:href") and tag in _FETCHING_HREF_TAGS:
                self.urls.append(value)
            elif name == "style":
                self.urls.extend(_css_urls(value))
        self._in_style = tag == "style"

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self._in_style = False

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.urls.extend(_css_urls(data))


def _references(html: str) -> list[str]:
    collector = _ReferenceCollector()
    collector.feed(html)
    collector.close()
    return [url.strip() for url in collector.urls]


def external_references(html: str) -> list[str]:
    """Every network URL the page would fetch, in document order.

    Looks at src/srcset/poster attributes, the href of <link> (and of SVG <image>/<use>), and at
    url(...) and @import in <style> blocks and style attributes. A URL counts when it is absolute
    with a scheme other than file: (http:, https:, ftp:, ...) or protocol-relative (`//host/...`);
    data:, blob: and relative URLs stay on the machine. <a href> only navigates and is ignored.
    The text of inline scripts is not analysed: a script building URLs at run time is not seen
    (the offline browser test in tests/browser.py is the check for that).
    """
    return [url for url in _references(html) if _is_network_url(url)]


def _file_references(html: str) -> list[str]:
    """References to files beside the page (e.g. a markdown image nbconvert could not embed)."""
    inline = ("data:", "blob:", "about:", "#")
    return [url for url in _references(html)
            if url and not url.lower().startswith(inline) and not _is_network_url(url)]


def _exporter(exclude_input: bool):
    # slow to import: only when notebooks are rendered or read
    from nbconvert import HTMLExporter

    return HTMLExporter(
        raw_template=OFFLINE_TEMPLATE,
        embed_images=True,
        exclude_input=exclude_input,
        exclude_input_prompt=exclude_input,
        exclude_output_prompt=exclude_input,
    )


def render_html(notebook: Path, output: Path | None = None, *, exclude_input: bool = False,
                title: str | None = None, image_dir: Path | None = None,
                failure: dict[str, Any] | None = None) -> Path:
    """Render an executed notebook to one self-contained HTML page; return its path.

    `output` defaults to `<notebook>.html`, or to `noinput_path(notebook)` with `exclude_input`,
    which hides code cells' input and prompts and keeps markdown and outputs. `title` (default:
    the notebook's `title` metadata, else its file stem) becomes the page <title>. Markdown
    images are read relative to `image_dir` (default: the notebook's folder; pass the source
    notebooks' folder for a copy that Papermill executed elsewhere); nbconvert embeds only
    images inside that folder. With `failure` ({"stage", "sentence", "inputs"}: the page of a
    stage that failed), the page opens with the sentence and the inputs, and each traceback is
    folded (`as_failed_page`); the notebook file is not changed. The page is written once,
    atomically: an existing file is never
    replaced (FileExistsError). A page that would fetch anything, from the network or from a
    file beside it, raises ValueError and is not written. Control characters in the page are
    written as visible escapes (`\x00`).
    """
    # slow to import: only when notebooks are rendered or read
    import nbformat

    notebook = Path(notebook)
    if output is None:
        output = noinput_path(notebook) if exclude_input else notebook.with_suffix(".html")
    output = Path(output)
    if output.exists():
        raise FileExistsError(f"{output} already exists; rendered pages are write-once")
    node = nbformat.read(notebook, as_version=4)
    if title is not None:
        node.metadata["title"] = title
    if failure is not None:
        as_failed_page(node, failure)
    image_dir = Path(image_dir) if image_dir is not None else notebook.parent
    resources = {"metadata": {"name": notebook.stem, "path": str(image_dir.resolve())}}
    page, _ = _exporter(exclude_input).from_notebook_node(node, resources=resources)
    page = visible_controls(page)
    network = external_references(page)
    if network:
        raise ValueError(f"{notebook}: the rendered page would fetch from the network: "
                         + _listing(network))
    files = _file_references(page)
    if files:
        raise ValueError(f"{notebook}: the rendered page refers to files it does not embed "
                         f"(markdown images must exist inside {image_dir}): " + _listing(files))
    write_new(output, page.encode("utf-8"))
    return output


def _listing(urls: list[str]) -> str:
    shown = [url if len(url) <= 120 else url[:117] + "..." for url in urls[:10]]
    return ", ".join(shown) + (f" and {len(urls) - 10} more" if len(urls) > 10 else "")


# ---------------------------------------------------------------- a failed stage's page and sentence

# An absolute path inside a text (two segments at least, so `GET /models` is no path), not part of a
# URL (`http://host/v1/...`): what `plain_paths` shortens.
_ABSOLUTE_PATH = re.compile(r"(?<![\w:/.~-])/[^/\s'\"`,;:()\[\]{}<>]+(?:/[^/\s'\"`,;:()\[\]{}<>]+)+")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# papermill's own markdown cells on a failed notebook ("An Exception was encountered at ...")
PAPERMILL_ERROR_TAG = "papermill-error-cell-tag"


def plain_paths(text: str, root: Path | None = None) -> str:
    """`text` with each absolute path in it written as a reader reads it: relative to `root` when
    it lies inside, else its file name (`file /tmp/x/mine.jsonl; ...` -> `file mine.jsonl; ...`)."""
    def shown(match: re.Match[str]) -> str:
        path = Path(match.group())
        if root is not None:
            try:
                return path.relative_to(root).as_posix()
            except ValueError:
                pass
        return path.name
    return _ABSOLUTE_PATH.sub(shown, text)


def _traceback_text(output: dict[str, Any], root: Path | None) -> str:
    """An error output's traceback as plain text, paths shortened: papermill's separator and the
    'Traceback (most recent call last)' header left out, so that the cell's own frame comes first."""
    lines = [_ANSI.sub("", entry) for entry in output.get("traceback", [])]
    kept = [line for line in lines if not set(line.strip()) <= {"-"} and "Traceback (most recent call last)" not in line]
    return plain_paths("\n".join(kept), root)


def as_failed_page(node: Any, failure: dict[str, Any]) -> None:
    """Make `node` (an executed notebook, in memory) read as a failed stage's page: papermill's red
    notes removed, a block on top with the failure's sentence and the stage's inputs
    (failed_stage.html), each error output replaced by its traceback, folded
    (failed_traceback.html), and the cells that never ran after the failing one replaced by a line
    that says so."""
    import nbformat  # slow to import: only when notebooks are rendered

    root = failure.get("root")
    node.cells = [cell for cell in node.cells if PAPERMILL_ERROR_TAG not in cell.get("metadata", {}).get("tags", [])]
    failing = None
    for index, cell in enumerate(node.cells):
        for position, output in enumerate(cell.get("outputs", [])):
            if output.get("output_type") == "error":
                folded = render("failed_traceback.html", ename=output.get("ename") or "error",
                                text=_traceback_text(output, root))
                cell.outputs[position] = nbformat.v4.new_output("display_data", data={"text/html": folded})
                failing = index if failing is None else failing
    if failing is not None and failing + 1 < len(node.cells):
        # the cells after the failing one never ran: their headings would stand over nothing
        left = len(node.cells) - failing - 1
        node.cells[failing + 1:] = [nbformat.v4.new_markdown_cell(
            f"The stage stopped at the cell above: the {left} cell{'s' if left != 1 else ''} after it did not run.")]
    top = render("failed_stage.html", stage=failure["stage"], sentence=failure["sentence"],
                 inputs=failure.get("inputs") or [])
    node.cells.insert(0, nbformat.v4.new_markdown_cell("\n".join(line for line in top.splitlines() if line.strip())))

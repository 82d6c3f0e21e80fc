"""The README is a newcomer's first screen: what evalbook is, the two commands, a picture of the
report, one line per capability with its link, in at most 120 lines; every link it gives
resolves (a file of the repository, and a heading of it where one is named)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from paths import ROOT

README = ROOT / "README.md"
MAX_LINES = 120
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but hyphens dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in path.read_text("utf-8").splitlines() if line.startswith("#")}


def test_the_readme_fits_its_first_screen_budget():
    lines = README.read_text("utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/ (at most {MAX_LINES})"


def test_the_readme_gives_the_two_commands_and_a_picture_of_the_report():
    text = README.read_text("utf-8")
    assert "make run " in text and "make test " in text
    (image,) = re.findall(r"!\[[^\]]+\]\(([^)]+\.png)\)", text)
    assert (ROOT / image).is_file() and (ROOT / image).stat().st_size > 10_000


@pytest.mark.parametrize("link", sorted(set(LINK.findall(README.read_text("utf-8")))))
def test_every_link_in_the_readme_resolves(link):
    if link.startswith(("http://", "https://")):
        pytest.fail(f"the README links outside the repository: {link}")
    target, _, anchor = link.partition("#")
    path = ROOT / target
    assert path.exists(), link
    if anchor:
        assert anchor in anchors(path), f"{link}: no heading {anchor!r} in {target}"

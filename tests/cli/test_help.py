"""--help and command names: every command listed with its summary, a misspelt command gets a
suggestion, a missing scenario file is not taken for a command."""

from __future__ import annotations

import pytest

from disagg_simpy.cli import main


def test_help_lists_the_commands_and_a_misspelt_command_gets_a_suggestion(capsys):
    from disagg_simpy.cli import COMMANDS

    assert main(["--help"]) == 0
    listed = capsys.readouterr().out.split("other commands")[1]
    for name in COMMANDS:  # each with its summary line
        assert any(line.split()[:1] == [name] and len(line.split()) > 2 for line in listed.split("\n")), name
    assert main(["descibe", "trace.csv"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'describe'?" in err


@pytest.mark.parametrize("word", ["scenario.yaml", "runs/x.yaml"])
def test_a_missing_scenario_is_not_taken_for_a_command(word, capsys):
    assert main([word]) == 2
    assert "did you mean" not in capsys.readouterr().err


def test_every_flag_of_every_command_is_in_its_help_and_in_the_docs(capsys):
    """Each command's --help lists every one of its flags, and docs/commands.md names each."""
    import re

    from helpers import ROOT

    from disagg_simpy.cli import COMMANDS

    docs = (ROOT / "docs" / "commands.md").read_text()
    for command in ["", *COMMANDS]:
        argv = [command, "--help"] if command else ["--help"]
        assert main(argv) == 0
        shown = capsys.readouterr().out
        parser = _parser(command)
        flags = [o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
        assert flags or command in ("traces",)
        for flag in flags:
            assert re.search(re.escape(flag) + r"(?![\w-])", shown), (command, flag)
            assert re.search(re.escape(flag) + r"(?![\w-])", docs), f"docs/commands.md: no {flag} of {command or 'run'}"


def _parser(command: str):
    import importlib

    builders = {"": ("run", "build_parser"), "describe": ("describe", "build_describe_parser"),
                "explain": ("explain", "build_explain_parser"), "fit": ("fit", "build_fit_parser"),
                "presets": ("presets", "build_presets_parser"), "traces": ("traces", "build_traces_parser"),
                "sweep": ("sweep", "build_sweep_parser"), "goodput": ("goodput", "build_goodput_parser"),
                "plan": ("plan", "build_plan_parser"), "map": ("map", "build_map_parser"),
                "validate": ("validate", "build_validate_parser")}
    module, name = builders[command]
    return getattr(importlib.import_module(f"disagg_simpy.cli.{module}"), name)()

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

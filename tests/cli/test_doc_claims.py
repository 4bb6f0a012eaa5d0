"""Small claims the help and docs make, held to what the commands do (review F27)."""

from __future__ import annotations

import pytest

from disagg_simpy.cli import main


@pytest.mark.parametrize(("command", "flags"), [("sweep", []), ("map", ["--gpus", "2"])])
def test_commands_that_show_no_costs_take_no_price(tmp_path, capsys, command, flags):
    """sweep and map show no cost column: --price there was accepted and changed nothing shown."""
    path = tmp_path / "s.yaml"
    path.write_text("name: s\n")
    assert main([command, str(path), *flags, "--price", "a100-80gb=3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unrecognized arguments: --price" in err, err


@pytest.mark.parametrize("command", ["goodput", "plan"])
def test_commands_that_show_costs_take_price(capsys, command):
    assert main([command, "--help"]) == 0
    assert "--price KIND=USD" in capsys.readouterr().out


def test_validate_help_names_every_way_the_gate_fails(capsys):
    """The gate also fails when a figure's error moves more than 5 points either way
    (validation.gate; tests/validation/test_validate.py), which the help left out."""
    assert main(["validate", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "leaves it, a figure's error moves by more than 5 points either way, or a metric's median" in out

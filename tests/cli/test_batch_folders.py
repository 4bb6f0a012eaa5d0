"""Each batch command's own folder and its run.json (issue 24): `runs/NAME-<command>/` by
default, refusing another command's folder, and a recorded command line (with the subcommand)
that, run again in a fresh folder, writes the same bytes. Tiny runs (2 s windows, one seed)."""

from __future__ import annotations

import json

import pytest
from helpers import tiny_batch_scenario as tiny_scenario

from disagg_simpy.cli import main

#: Tiny but real flags per command (each a handful of runs).
COMMANDS = {
    "sweep": ["--rate", "9,14", "--seeds", "2"],
    "goodput": ["--tolerance", "2"],
    "plan": ["--gpus", "2", "--chunks", "512", "--tolerance", "2"],
    "map": ["--gpus", "2", "--rate", "6,12", "--y", "workload.reply_words=[50,100],[100,400]", "--seeds", "1"],
}


def _files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_batch_command_has_its_own_folder_and_a_command_line_that_reproduces_it(command, tmp_path, monkeypatch):
    first, again = tmp_path / "first", tmp_path / "again"
    for cwd in (first, again):
        cwd.mkdir()
        tiny_scenario(cwd)
    monkeypatch.chdir(first)
    assert main([command, "tiny.yaml", *COMMANDS[command], "--workers", "1"]) == 0
    out = first / "runs" / f"tiny-{command}"
    info = json.loads((out / "run.json").read_text())
    assert info["subcommand"] == command
    assert info["command"] == ["python", "-m", "disagg_simpy", command, "tiny.yaml", *COMMANDS[command], "--workers", "1"]
    assert sorted(p.name for p in (first / "runs").iterdir()) == [f"tiny-{command}"]
    monkeypatch.chdir(again)
    assert info["command"][:3] == ["python", "-m", "disagg_simpy"]
    assert main(info["command"][3:]) == 0  # the recorded line, run again from a fresh folder
    assert _files(again / "runs") == _files(first / "runs")


def test_a_batch_command_refuses_another_commands_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    tiny_scenario(tmp_path)
    assert main(["tiny.yaml", "--seeds", "1", "--no-plots", "--out", "shared"]) == 0
    before = _files(tmp_path / "shared")
    capsys.readouterr()
    assert main(["sweep", "tiny.yaml", "--rate", "9", "--out", "shared", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out shared: holds the results of a run (its run.json)") and err.count("\n") == 1
    assert _files(tmp_path / "shared") == before
    assert main(["sweep", "tiny.yaml", "--rate", "9", "--out", "mine", "--workers", "1", "--no-plots"]) == 0
    assert main(["plan", "tiny.yaml", "--gpus", "2", "--out", "mine", "--workers", "1"]) == 2
    assert "holds the results of `sweep`" in capsys.readouterr().err


def test_no_plots_removes_the_earlier_picture_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    tiny_scenario(tmp_path)
    flags = ["sweep", "tiny.yaml", "--rate", "9", "--workers", "1"]
    assert main(flags) == 0
    picture = tmp_path / "runs" / "tiny-sweep" / "sweep.png"
    assert picture.is_file()
    capsys.readouterr()
    assert main([*flags, "--no-plots"]) == 0
    assert not picture.exists()
    assert f"note: removed {picture.relative_to(tmp_path)}, an earlier run's picture" in capsys.readouterr().err

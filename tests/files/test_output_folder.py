"""A run owns the files it wrote into its folder (run.json lists them): the next run into the folder
removes those it no longer writes and nothing else, never a path outside the folder."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import small_traffic_scenario, write_scenario

from disagg_simpy.cli import main


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_a_run_owns_its_output_folder_and_nothing_else(tmp_path, capsys, quick_plots):
    out = tmp_path / "out"
    two = [{"name": "a", "kind": "colocated", "gpus": 1}, {"name": "b", "kind": "colocated", "gpus": 2}]
    assert main([str(small_traffic_scenario(tmp_path, two, measure_s=1)), "--out", str(out), "--replies", "3"]) == 0
    assert {"plots/timeline-a.png", "plots/timeline-b.png", "plots/summary.png"} <= _files(out)
    (out / "notes.txt").write_text("mine")
    (out / "plots" / "mine.png").write_bytes(b"mine")
    owned = json.loads((out / "run.json").read_text())["files"]
    assert "plots/timeline-b.png" in owned and "notes.txt" not in owned
    # another scenario into the same folder: the timeline of the arrangement it lacks goes
    assert main([str(small_traffic_scenario(tmp_path, two[:1], measure_s=1)), "--out", str(out), "--replies", "3"]) == 0
    assert "plots/timeline-b.png" not in _files(out) and "plots/timeline-a.png" in _files(out)
    # no pictures this time: the old ones go, the user's files stay
    assert main([str(small_traffic_scenario(tmp_path, two[:1], measure_s=1)), "--out", str(out), "--no-plots"]) == 0
    assert _files(out) == {"summary.csv", "requests.csv", "iterations.csv", "reads.csv", "freezes.csv", "run.json",
                           "notes.txt", "plots/mine.png"}


def test_a_stale_list_never_reaches_outside_the_folder(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "precious.csv").write_text("keep")
    (out / "run.json").write_text(json.dumps({"files": ["../precious.csv", str(tmp_path / "precious.csv")]}))
    assert main([str(write_scenario(tmp_path, [(0.0, 100, 3)])), "--out", str(out), "--no-plots"]) == 0
    assert (tmp_path / "precious.csv").read_text() == "keep"

"""A run's results folder (issue 24): removing an earlier run's pictures is said."""

from __future__ import annotations

import yaml
from helpers import DEFAULT

from disagg_simpy.cli import main


def _tiny(tmp_path):
    raw = yaml.safe_load(DEFAULT.read_text())
    raw.update(name="tiny", seeds=1, max_sim_s=30, arrangements=raw["arrangements"][1:3])
    raw.pop("reference")
    raw["workload"]["measure_s"] = 2
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_removing_an_earlier_runs_pictures_is_said(tmp_path, capsys, quick_plots):
    """(Placeholder pictures under the real names: this is about the folder, not the drawing.)"""
    path = _tiny(tmp_path)
    out = tmp_path / "o"
    assert main([str(path), "--out", str(out), "--window", "0:1"]) == 0
    assert (out / "plots" / "summary.png").exists()
    capsys.readouterr()
    assert main([str(path), "--out", str(out), "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert not (out / "plots").exists()
    assert "note: removed" in err and "(--no-plots: no pictures this time)" in err and "plots/summary.png" in err

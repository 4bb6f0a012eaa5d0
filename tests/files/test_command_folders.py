"""Each command's results folder and record (issue 24): its own default folder, no command
writing into another's, run.json's command line that reproduces the results, and removed
pictures said."""

from __future__ import annotations

import json

import pandas as pd
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


def test_each_command_has_its_own_default_folder(tmp_path, monkeypatch, capsys):
    path = _tiny(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main([str(path), "--no-plots"]) == 0
    assert main(["sweep", str(path), "--rate", "9", "--no-plots", "--workers", "1"]) == 0
    assert (tmp_path / "runs" / "tiny" / "summary.csv").exists()
    assert (tmp_path / "runs" / "tiny-sweep" / "sweep.csv").exists()
    assert not (tmp_path / "runs" / "tiny" / "sweep.csv").exists()
    assert json.loads((tmp_path / "runs" / "tiny" / "run.json").read_text())["subcommand"] == "run"


def test_a_command_refuses_another_commands_folder(tmp_path, capsys):
    path = _tiny(tmp_path)
    out = tmp_path / "o"
    assert main(["sweep", str(path), "--rate", "9", "--no-plots", "--workers", "1", "--out", str(out)]) == 0
    before = (out / "run.json").read_text()
    capsys.readouterr()
    assert main([str(path), "--no-plots", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out {out}: holds the results of `sweep`" in err
    assert main(["goodput", str(path), "--no-plots", "--out", str(out)]) == 2
    assert "holds the results of `sweep`" in capsys.readouterr().err
    assert (out / "run.json").read_text() == before and not (out / "summary.csv").exists()


def test_run_json_of_a_batch_command_reruns_it(tmp_path, capsys):
    path = _tiny(tmp_path)
    out = tmp_path / "o"
    assert main(["sweep", str(path), "--rate", "9,12", "--no-plots", "--workers", "1", "--out", str(out)]) == 0
    info = json.loads((out / "run.json").read_text())
    assert info["command"][:4] == ["python", "-m", "disagg_simpy", "sweep"] and info["subcommand"] == "sweep"
    first = pd.read_csv(out / "sweep.csv")
    (out / "sweep.csv").unlink()
    assert main(info["command"][3:]) == 0  # the recorded command line, as is
    pd.testing.assert_frame_equal(pd.read_csv(out / "sweep.csv"), first)


def test_removing_an_earlier_runs_pictures_is_said(tmp_path, capsys):
    path = _tiny(tmp_path)
    out = tmp_path / "o"
    assert main([str(path), "--out", str(out), "--window", "0:1"]) == 0
    assert (out / "plots" / "summary.png").exists()
    capsys.readouterr()
    assert main([str(path), "--out", str(out), "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert not (out / "plots").exists()
    assert "note: removed" in err and "(--no-plots: no pictures this time)" in err and "plots/summary.png" in err

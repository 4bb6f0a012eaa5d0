"""Bit-for-bit reproducibility: the same scenario and seed give byte-identical CSVs across runs
and across processes (other hash seeds, other working folders), with no dependence on dict
order or wall time."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest
from helpers import DEFAULT, ROOT, write_scenario

from disagg_simpy.cli import main

CSVS = ("summary.csv", "requests.csv", "iterations.csv", "reads.csv", "freezes.csv")
ARGS = ["--measure-s", "6", "--seeds", "2", "--no-plots"]


def hashes(folder) -> dict[str, str]:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in CSVS}


def cli_in_a_new_process(out, scenario, hash_seed: str, cwd) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": hash_seed}
    done = subprocess.run([sys.executable, "-m", "disagg_simpy", str(scenario), "--out", str(out), *ARGS],
                          capture_output=True, text=True, env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return hashes(out)


def test_two_processes_with_different_hash_seeds_write_identical_csvs(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    first = cli_in_a_new_process(tmp_path / "a" / "out", DEFAULT, "0", tmp_path / "a")
    second = cli_in_a_new_process(tmp_path / "b", DEFAULT, "4242", ROOT)
    assert first == second
    assert main([str(DEFAULT), "--out", str(tmp_path / "c"), *ARGS]) == 0  # and in this process
    assert hashes(tmp_path / "c") == first


@pytest.mark.parametrize("arrangements", [
    [{"name": "same", "kind": "colocated", "gpus": 3},
     {"name": "split", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 2, "chunk_tokens": 64}],
])
def test_ties_everywhere_are_broken_the_same_way_every_run(tmp_path, capsys, arrangements):
    rows = [(0.0, 100, 4)] * 12 + [(0.01, 100, 4)] * 12 + [(0.02, 40, 1)] * 6
    path = write_scenario(tmp_path, rows, arrangements, name="ties")
    outs = []
    for i in range(3):
        assert main([str(path), "--out", str(tmp_path / f"o{i}"), "--no-plots"]) == 0
        outs.append({name: (tmp_path / f"o{i}" / name).read_bytes() for name in CSVS})
    assert outs[0] == outs[1] == outs[2]

"""The run command's tables: `--format parquet` (the CSV tables, typed), all or nothing, and seeds
run and written one at a time (no earlier arrangement's run is kept while the next one runs)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pandas as pd
import pytest
from helpers import ROOT, write_scenario

from disagg_simpy.cli import main

DEFAULT = ROOT / "scenarios" / "default.yaml"
TABLES = ("summary", "requests", "iterations", "reads", "freezes")


def short_run(out, *more) -> list[str]:
    return [str(DEFAULT), "--measure-s", "2", "--seeds", "2", "--no-plots", "--out", str(out), *more]


def test_parquet_tables_hold_the_csv_tables(tmp_path, capsys):
    assert main(short_run(tmp_path / "csv")) == 0
    assert main(short_run(tmp_path / "pq", "--format", "parquet")) == 0
    capsys.readouterr()
    assert sorted(p.name for p in (tmp_path / "pq").iterdir()) == sorted([*(f"{t}.parquet" for t in TABLES), "run.json"])
    for table in TABLES:
        csv = pd.read_csv(tmp_path / "csv" / f"{table}.csv")
        pq = pd.read_parquet(tmp_path / "pq" / f"{table}.parquet")
        assert list(pq.columns) == list(csv.columns), table
        assert len(pq) == len(csv) and len(csv), table
        for column in csv.columns:
            a, b = csv[column], pq[column]
            if a.dtype.kind == "f" or b.dtype.kind == "f":
                np.testing.assert_array_equal(a.to_numpy(float), b.to_numpy(float, na_value=np.nan), err_msg=f"{table}.{column}")
            else:
                assert a.astype(str).tolist() == b.astype(str).tolist(), (table, column)
    assert pd.read_parquet(tmp_path / "pq" / "iterations.parquet")["arrangement"].dtype == "category"


def test_a_failed_parquet_write_leaves_the_earlier_results(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    assert main(short_run(out, "--format", "parquet")) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    import disagg_simpy.cli.run_tables as run_tables

    real, calls = run_tables._append_parquet, []

    def fail_on_the_third_table(target, writer, frame):
        calls.append(target)
        if len(set(calls)) >= 3:  # (one temporary file per table)
            raise OSError(28, "No space left on device")
        return real(target, writer, frame)

    monkeypatch.setattr(run_tables, "_append_parquet", fail_on_the_third_table)
    capsys.readouterr()
    assert main(short_run(out, "--format", "parquet", "--seed", "7")) == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err and "earlier results were left as they were" in err and err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temporary file left either


def test_seeds_are_run_and_written_one_arrangement_at_a_time(tmp_path, capsys, monkeypatch):
    """While an arrangement runs, no earlier arrangement's run (of this seed or another) is alive."""
    import disagg_simpy.api as api

    real, alive = api.run_each, []

    def watched(scenario, seed=None):
        for one in real(scenario, seed):
            gc.collect()
            assert not [r for r in alive if r() is not None], "an earlier run is still kept"
            alive.append(weakref.ref(one))
            yield one
            del one

    monkeypatch.setattr(api, "run_each", watched)
    # Each gc.collect() above scans only what was made after this freeze (the runs among it):
    # under xdist a worker holds every test module, and 15 full scans of that cost seconds.
    gc.collect()
    gc.freeze()
    try:
        assert main(short_run(tmp_path / "out", "--seeds", "3")) == 0
    finally:
        gc.unfreeze()
    assert len(alive) == 3 * 5
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert summary.seed.tolist() == [s for s in (1, 2, 3) for _ in range(5)]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_run_with_no_freeze_writes_an_empty_freezes_table(tmp_path, capsys, fmt):
    path = write_scenario(tmp_path, [(0.0, 100, 3), (0.5, 200, 4)])
    assert main([str(path), "--no-plots", "--out", str(tmp_path / "out"), "--format", fmt]) == 0
    read = pd.read_csv if fmt == "csv" else pd.read_parquet
    f = read(tmp_path / "out" / f"freezes.{fmt}")
    assert len(f) == 0 and "n_replies_frozen" in f.columns


def test_a_parquet_run_over_csv_tables_says_it_removed_them_for_the_format(tmp_path, capsys):
    """Issue 37 item 18: the note gave '--no-plots: no pictures this time' as the reason."""
    assert main(short_run(tmp_path / "out")) == 0
    capsys.readouterr()
    assert main(short_run(tmp_path / "out", "--format", "parquet")) == 0
    err = capsys.readouterr().err
    assert "that this run does not write (--format parquet: the tables are .parquet files this time): freezes.csv" in err
    assert "no pictures" not in err

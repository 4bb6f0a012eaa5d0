"""Plans of many GPUs: limits that protect memory count what a command keeps (a batch task keeps
one arrangement's rows at a time), --splits narrows the search, and a plan that would run for
hours is refused up front with its estimate (the refusal itself: test_plan's one-line errors)."""

from __future__ import annotations

import pytest
from helpers import DEFAULT

from disagg_simpy import load_scenario
from disagg_simpy.errors import InputError
from disagg_simpy.scenario.limits import one_arrangement_at_a_time
from disagg_simpy.sweep.plan import candidates, with_candidates
from disagg_simpy.sweep.plan_cost import plan_cost_problem
from disagg_simpy.sweep.runner import Task, run_task


def test_sixteen_gpus_of_the_default_traffic_are_planned_one_arrangement_at_a_time():
    """80 arrangements could run 67 million iterations in all, over the limit of rows one run
    keeps; a plan's tasks keep one arrangement's rows at a time, so only each one is checked."""
    scenario = load_scenario(DEFAULT)
    with pytest.raises(InputError, match="iterations in all before the cap"):
        with_candidates(scenario, candidates(16), "--gpus")
    with one_arrangement_at_a_time():
        planned = with_candidates(scenario, candidates(16), "--gpus")
        short = planned.with_overrides(**{"workload.measure_s": 2.0})
    assert len(planned.arrangements) == 80
    with pytest.raises(InputError, match="iterations in all before the cap"):  # outside a batch command, still
        short.with_overrides(**{"workload.measure_s": 2.0})
    rows = run_task(Task(short, 1, only="split-8-8", verdicts_only=True))  # (a worker process checks it alike)
    assert [r["arrangement"] for r in rows] == ["split-8-8"] and rows[0]["on_time_pct"] > 0


def test_the_arrangement_limit_counts_what_a_command_keeps():
    """A 64-GPU plan has 320 candidates: over the 100 arrangements a run keeps at once, but a
    batch command keeps one arrangement's rows at a time, so there the limit is 10,000."""
    scenario = load_scenario(DEFAULT)
    with pytest.raises(InputError, match="got 320 arrangements to compare, expected at most 100"):
        with_candidates(scenario, candidates(64), "--gpus")
    with one_arrangement_at_a_time():
        assert len(with_candidates(scenario, candidates(64), "--gpus").arrangements) == 320


def test_splits_narrow_the_candidates_and_the_estimate():
    names = [a["name"] for a in candidates(6, chunks=(512,), splits=(2, 4))]
    assert names == ["same-gpu", "chunked-512", "split-2-4", "split-2-4-chunked-512", "split-4-2", "split-4-2-chunked-512"]
    scenario = load_scenario(DEFAULT)
    wide, _ = plan_cost_problem(scenario, candidates(64), 5, 2, "NARROW")
    narrow, note = plan_cost_problem(scenario, candidates(64, chunks=(512,), splits=(36, 40, 44, 48)), 5, 2, "NARROW")
    assert wide.endswith("expected a narrower search: NARROW") and narrow is None
    assert note.startswith("plan: 10 arrangements of 64 GPUs x about 10 probes x 5 seeds: about ")
    dask, _ = plan_cost_problem(scenario, candidates(64), 5, None, "NARROW")
    assert dask is None  # a cluster of unknown size: noted, not refused


def test_format_parquet_writes_the_batch_table_as_parquet_instead_of_csv(tmp_path):
    """--format parquet on a batch command (the one writer of sweep, goodput, plan and map):
    `<name>.parquet`, the same rows as the CSV, and no CSV."""
    import pandas as pd

    from disagg_simpy.cli import main

    command, extra = "plan", ["--gpus", "1", "--chunks", "none"]
    tiny = ["--seeds", "2", "--measure-s", "1", "--tolerance", "2", "--workers", "1", "--no-plots"]
    for fmt in ("csv", "parquet"):
        assert main([command, str(DEFAULT), *extra, *tiny, "--format", fmt, "--out", str(tmp_path / fmt)]) == 0
    assert not (tmp_path / "parquet" / f"{command}.csv").exists()
    assert not (tmp_path / "csv" / f"{command}.parquet").exists()
    table = pd.read_parquet(tmp_path / "parquet" / f"{command}.parquet")
    pd.testing.assert_frame_equal(table, pd.read_csv(tmp_path / "csv" / f"{command}.csv"), check_dtype=False)

"""Fixtures only: tiny hand-written runs, and the default scenario over 30 seeds. Plain helpers
(paths, scenario text, traces) live in helpers.py."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import CLAIM_SEEDS, DEFAULT, write_scenario

from disagg_simpy import load_scenario, run


@pytest.fixture
def micro(tmp_path):
    """Run a tiny trace through `arrangements`; returns the RunResult."""

    def _run(rows, arrangements, **extra):
        return run(load_scenario(write_scenario(tmp_path, rows, arrangements, **extra)))

    return _run


@pytest.fixture(scope="session")
def default_runs():
    """The default scenario over 30 seeds, simulated once for every claims test."""
    scenario = load_scenario(DEFAULT)
    return [run(scenario, seed=s) for s in CLAIM_SEEDS]


@pytest.fixture(scope="session")
def default_summary(default_runs) -> pd.DataFrame:
    """Mean of each summary figure over the 30 seeds, indexed by arrangement."""
    frames = [r.summary for r in default_runs]
    return pd.concat(frames).groupby("arrangement", sort=False).mean(numeric_only=True)

"""Fixtures only: tiny hand-written runs, the default scenario over 30 seeds, placeholder pictures;
and the hooks that skip the tests of the public traces when they are not at hand. Plain helpers
(paths, scenario text, traces) live in helpers.py, importable from every folder of tests/
(pyproject's `pythonpath`). The folders mirror the package: see docs/development.md."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from helpers import CLAIM_SEEDS, DEFAULT, real_traces_missing, write_scenario
from hypothesis import settings

from disagg_simpy import load_scenario, run

# Every property test is reproducible: hypothesis draws its examples from a seed fixed per test
# (derandomize), so a run fails or passes the same way on every machine, and no example database
# carries one run's failures into the next. Loaded here, before any test module builds its
# @settings (which inherit from it). To search new draws while working:
# DISAGG_SIMPY_HYPOTHESIS=explore python -m pytest tests/model/test_reference.py
settings.register_profile("reproducible", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, database=None, print_blob=True)
settings.load_profile(os.environ.get("DISAGG_SIMPY_HYPOTHESIS", "reproducible"))


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


@pytest.fixture
def quick_plots(monkeypatch):
    """write_plots writing placeholder PNGs under the real names (the pictures cost seconds)."""
    from disagg_simpy.files import atomic_write_text
    from disagg_simpy.files import make_folder as make

    def fake(result, folder, window=None, n_replies=25, follow=None, by_seed=None, pooled=None, over_time=None):
        folder = make(Path(folder), "plots folder")
        names = ["summary.png", *(f"timeline-{a.name}.png" for a in result.scenario.arrangements)]
        names += ["over_time.png"] if over_time is not None else []
        for name in names:
            atomic_write_text(folder / name, "png")
        return [folder / name for name in names]

    monkeypatch.setattr("disagg_simpy.plots.write_plots", fake)


# -- tests marked real_traces need the public traces: they run when $DISAGG_SIMPY_TRACES holds them
_SKIP_PREFIX = "needs the public traces: "


# -- tests marked aiconfigurator need AIConfigurator's tables: they run when costs/operators.py finds them
_TABLES_PREFIX = "needs AIConfigurator's tables: "


def pytest_collection_modifyitems(config, items):
    reason = real_traces_missing()
    if reason:
        for item in items:
            if item.get_closest_marker("real_traces"):
                item.add_marker(pytest.mark.skip(reason=_SKIP_PREFIX + reason))
    from disagg_simpy.costs import operators

    if operators.data_folder() is None:
        for item in items:
            if item.get_closest_marker("aiconfigurator"):
                item.add_marker(pytest.mark.skip(reason=_TABLES_PREFIX + f"${operators.ENV_FOLDER} is not set"))


def pytest_terminal_summary(terminalreporter, config):
    """One line for the skipped tests of the public traces, counted from the reports (under xdist the
    workers collect, so only the reports reach the process that prints)."""
    def skipped(prefix: str) -> list[str]:
        return [str(r.longrepr[2]).split(prefix, 1)[1] for r in terminalreporter.stats.get("skipped", [])
                if isinstance(r.longrepr, tuple) and prefix in str(r.longrepr[2])]

    reasons = skipped(_SKIP_PREFIX)
    if reasons:
        terminalreporter.write_line(
            f"{len(reasons)} tests of the public traces skipped: {reasons[0]} (python -m disagg_simpy traces fetch, "
            "then set it to the folder `traces list` names)")
    reasons = skipped(_TABLES_PREFIX)
    if reasons:
        terminalreporter.write_line(
            f"{len(reasons)} tests of AIConfigurator's tables skipped: {reasons[0]} (set it to a folder holding "
            "systems/data/: docs/composed-presets.md says where to get them)")

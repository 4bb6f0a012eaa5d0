"""Shared helpers: tiny hand-written scenarios, and the default scenario over 30 seeds."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

from disagg_simpy import load_scenario, run

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "scenarios" / "default.yaml"
CLAIM_SEEDS = range(1, 31)  # 30 seeds: fewer swing too much to test a claim honestly


def write_scenario(folder: Path, rows, arrangements, name="micro", **extra) -> Path:
    """A scenario replaying `rows` (arrived_at_s, n_prompt_tokens, n_reply_words) as a CSV trace."""
    trace = folder / f"{name}.csv"
    lines = ["arrived_at_s,n_prompt_tokens,n_reply_words"] + [f"{t!r},{p},{w}" for t, p, w in rows]
    trace.write_text("\n".join(lines) + "\n")
    spec = {"name": name, "workload": {"trace": trace.name}, "arrangements": arrangements, **extra}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture
def micro(tmp_path):
    """Run a tiny trace through `arrangements`; returns the RunResult."""

    def _run(rows, arrangements, **extra):
        return run(load_scenario(write_scenario(tmp_path, rows, arrangements, **extra)))

    return _run


COLOCATED_1 = [{"name": "same", "kind": "colocated", "gpus": 1}]
SPLIT_1_1 = [{"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1}]


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


# -- tests marked real_traces need the public traces: they run when $DISAGG_SIMPY_TRACES holds them
_REAL_SKIPPED = pytest.StashKey[tuple]()


def real_traces_missing() -> str | None:
    """Why the public traces are not at hand (None if they are)."""
    from disagg_simpy.workload.catalog import CATALOG, ENV_FOLDER

    folder = os.environ.get(ENV_FOLDER)
    if not folder:
        return f"{ENV_FOLDER} is not set"
    missing = [t.file for t in CATALOG.values() if not (Path(folder) / t.file).is_file()]
    return f"{ENV_FOLDER}={folder} lacks {', '.join(missing)}" if missing else None


def pytest_collection_modifyitems(config, items):
    reason = real_traces_missing()
    marked = [item for item in items if item.get_closest_marker("real_traces")]
    if reason and marked:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=f"needs the public traces: {reason}"))
        config.stash[_REAL_SKIPPED] = (len(marked), reason)


def pytest_terminal_summary(terminalreporter, config):
    n, reason = config.stash.get(_REAL_SKIPPED, (0, ""))
    if n:
        terminalreporter.write_line(
            f"{n} tests of the public traces skipped: {reason} (python -m disagg_simpy traces fetch, then set it "
            "to the folder `traces list` names)")

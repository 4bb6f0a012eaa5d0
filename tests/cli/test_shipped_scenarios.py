"""Every scenario file shipped in scenarios/ and benchmarks/ (found recursively, so a new one is run
without a change here; the docs quote commands on both) runs as a user would run it: exit 0 and a table, on a short window, one seed,
no pictures. A scenario on a public trace is skipped (one summary line) without the traces."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import ROOT

from disagg_simpy.cli import main
from disagg_simpy.workload.catalog import CATALOG

#: the measured window a scenario is cut to (s): long enough for some requests of every kind of
#: traffic shipped to finish, short enough that every file runs in about a second
WINDOW_S = 3.0
#: a scenario counting its requests (n_requests) keeps at most this many
FEW_REQUESTS = 40
#: ... and one counting them per GPU (n_requests_per_gpu) at most this many a GPU
FEW_PER_GPU = 10

SHIPPED = sorted(
    path
    for folder in ("scenarios", "benchmarks")
    for pattern in ("*.yaml", "*.yml")
    for path in (ROOT / folder).rglob(pattern)
)


def _on_trace(raw: dict) -> bool:
    return isinstance(raw.get("workload"), dict) and "trace" in raw["workload"]


def shortened(path: Path, folder: Path) -> Path:
    """A copy of the scenario file in `folder` cut to a short window and one seed; a trace named
    by a relative path is pointed back at the original's folder."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    raw["seeds"] = 1
    w = raw["workload"]
    if w.get("n_requests") is not None:
        w["n_requests"] = min(int(w["n_requests"]), FEW_REQUESTS)
    elif w.get("n_requests_per_gpu") is not None:
        w["n_requests_per_gpu"] = min(int(w["n_requests_per_gpu"]), FEW_PER_GPU)
    else:
        w["measure_s"] = min(float(w.get("measure_s") or WINDOW_S), WINDOW_S)
        w["warmup_s"] = min(float(w.get("warmup_s") or 0.0), w["measure_s"] / 2)
        if w.get("duration_s") is not None:
            w["duration_s"] = max(float(w["duration_s"]), w["measure_s"])
    if raw.get("max_sim_s") is not None and w.get("measure_s") is not None:
        raw["max_sim_s"] = max(float(raw["max_sim_s"]), w["measure_s"])
    trace = w.get("trace")
    if trace is not None and trace not in CATALOG and not Path(trace).is_absolute():
        w["trace"] = str(path.parent / trace)
    out = folder / path.name
    out.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return out


def _cases():
    for path in SHIPPED:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        marks = [pytest.mark.real_traces] if _on_trace(raw) else []
        yield pytest.param(path, marks=marks, id=str(path.relative_to(ROOT)))


def test_scenarios_are_shipped():
    assert len(SHIPPED) >= 10, SHIPPED


@pytest.mark.parametrize("path", list(_cases()))
def test_every_shipped_scenario_runs_and_prints_a_table(path, tmp_path, capsys):
    short = shortened(path, tmp_path)
    code = main([str(short), "--out", str(tmp_path / "out"), "--no-plots"])
    out, err = capsys.readouterr()
    assert code == 0, f"{path.name}: exit {code}: {err.strip()[-300:]}"
    # an error line, not a warning naming a preset's fitted error
    assert not any(line.lower().startswith("error") for line in err.splitlines()), err
    lines = out.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("arrangement")), None)
    assert header is not None, f"{path.name}: no table in {out!r}"
    names = [a["name"] for a in yaml.safe_load(path.read_text(encoding="utf-8"))["arrangements"]]
    shown = [line.split()[0] for line in lines[header + 1:] if line.split()]
    assert [n for n in names if n in shown] == names, f"{path.name}: rows {shown}, expected {names}"
    assert (tmp_path / "out" / "summary.csv").is_file()

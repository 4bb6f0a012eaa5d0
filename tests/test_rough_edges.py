"""Rough edges a new user hit (issue 15): a saved trace replays its run, a run owns its output
folder, seeds on a fixed trace, an empty timeline window, the table's width, commands in --help,
extra trace columns."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import SPLIT_1_1, scenario_text, write_scenario

from disagg_simpy.cli import main
from disagg_simpy.results.report import format_table
from disagg_simpy.workload.traces import read_trace

ARRANGEMENTS = [
    {"name": "same", "kind": "colocated", "gpus": 1},
    {"name": "chunked", "kind": "colocated", "gpus": 1, "chunk_tokens": 128},
    *SPLIT_1_1,
]
SYNTHETIC = {
    "rate_per_s": 6, "measure_s": 3,
    "prompt_mix": [{"share": 1.0, "tokens": [50, 400]}], "reply_words": [3, 12],
}


def _synthetic_scenario(folder: Path, arrangements=ARRANGEMENTS, **workload) -> Path:
    path = folder / "synthetic.yaml"
    path.write_text(scenario_text("synthetic", {**SYNTHETIC, **workload}, arrangements=arrangements, max_sim_s=20))
    return path


def test_a_saved_trace_replays_the_run_exactly(tmp_path, capsys):
    """csv times are taken as written: a trace saved by --save-trace measures the same requests
    (its first arrival is not at 0, so counting from the first row would shift the window)."""
    first = tmp_path / "first"
    assert main([str(_synthetic_scenario(tmp_path)), "--out", str(first), "--no-plots",
                 "--save-trace", str(tmp_path / "t.csv")]) == 0
    assert pd.read_csv(tmp_path / "t.csv").arrived_at_s.iloc[0] > 0
    replay = tmp_path / "replay.yaml"
    replay.write_text(scenario_text("replay", {"trace": "t.csv", "measure_s": 3}, arrangements=ARRANGEMENTS,
                                    max_sim_s=20))
    assert main([str(replay), "--out", str(tmp_path / "again"), "--no-plots"]) == 0
    for name in ("summary.csv", "requests.csv"):
        assert (tmp_path / "again" / name).read_bytes() == (first / name).read_bytes(), name


def test_csv_arrivals_are_as_written_and_other_formats_count_from_the_first_row(tmp_path):
    (tmp_path / "t.csv").write_text("arrived_at_s,n_prompt_tokens,n_reply_words\n2.5,10,3\n4,10,3\n")
    assert read_trace(tmp_path / "t.csv")["arrived_at_ns"].tolist() == [2_500_000_000, 4_000_000_000]
    (tmp_path / "m.jsonl").write_text('{"timestamp": 2500, "input_length": 1, "output_length": 1}\n'
                                      '{"timestamp": 4000, "input_length": 1, "output_length": 1}\n')
    assert read_trace(tmp_path / "m.jsonl", "mooncake")["arrived_at_ns"].tolist() == [0, 1_500_000_000]


def test_unknown_columns_are_ignored_in_every_format_and_named_on_stderr(tmp_path, capsys):
    (tmp_path / "a.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens,extra\n"
                                    "2023-11-16 18:17:03.9799600,10,3,x\n")
    assert read_trace(tmp_path / "a.csv", "azure").attrs["ignored_columns"] == ["extra"]
    (tmp_path / "m.jsonl").write_text('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n')
    assert read_trace(tmp_path / "m.jsonl", "mooncake").attrs["ignored_columns"] == ["hash_ids"]
    path = write_scenario(tmp_path, [(0.0, 100, 3), (0.5, 50, 2)])
    (tmp_path / "micro.csv").write_text("user,arrived_at_s,n_prompt_tokens,n_reply_words\n"
                                        "alice,0.0,100,3\nbob,0.5,50,2\n")
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ignored column(s) 'user'" in err
    assert json.loads((tmp_path / "out" / "run.json").read_text())["workload"]["ignored_columns"] == ["user"]
    assert main(["describe", str(tmp_path / "micro.csv")]) == 0
    assert "ignored column(s) 'user'" in capsys.readouterr().err


def test_seeds_on_a_fixed_trace_warn_and_run_once(tmp_path, capsys):
    path = write_scenario(tmp_path, [(0.0, 100, 3), (0.5, 50, 2)])
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots", "--seeds", "3"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("warning: --seeds 3:") and err.count("\n") == 1 and "same figures" in err
    assert "±" not in out and "seed 1;" in out
    assert "seed" not in pd.read_csv(tmp_path / "out" / "summary.csv").columns


@pytest.fixture
def quick_plots(monkeypatch):
    """write_plots writing placeholder PNGs under the real names (the pictures cost seconds)."""
    from disagg_simpy.files import atomic_write_text
    from disagg_simpy.files import make_folder as make

    def fake(result, folder, window=None, n_replies=25, follow=None, by_seed=None):
        folder = make(Path(folder), "plots folder")
        names = ["summary.png", *(f"timeline-{a.name}.png" for a in result.scenario.arrangements)]
        for name in names:
            atomic_write_text(folder / name, "png")
        return [folder / name for name in names]

    monkeypatch.setattr("disagg_simpy.plots.write_plots", fake)


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_a_run_owns_its_output_folder_and_nothing_else(tmp_path, capsys, quick_plots):
    out = tmp_path / "out"
    two = [{"name": "a", "kind": "colocated", "gpus": 1}, {"name": "b", "kind": "colocated", "gpus": 2}]
    assert main([str(_synthetic_scenario(tmp_path, two, measure_s=1)), "--out", str(out), "--replies", "3"]) == 0
    assert {"plots/timeline-a.png", "plots/timeline-b.png", "plots/summary.png"} <= _files(out)
    (out / "notes.txt").write_text("mine")
    (out / "plots" / "mine.png").write_bytes(b"mine")
    owned = json.loads((out / "run.json").read_text())["files"]
    assert "plots/timeline-b.png" in owned and "notes.txt" not in owned
    # another scenario into the same folder: the timeline of the arrangement it lacks goes
    assert main([str(_synthetic_scenario(tmp_path, two[:1], measure_s=1)), "--out", str(out), "--replies", "3"]) == 0
    assert "plots/timeline-b.png" not in _files(out) and "plots/timeline-a.png" in _files(out)
    # no pictures this time: the old ones go, the user's files stay
    assert main([str(_synthetic_scenario(tmp_path, two[:1], measure_s=1)), "--out", str(out), "--no-plots"]) == 0
    assert _files(out) == {"summary.csv", "requests.csv", "iterations.csv", "reads.csv", "freezes.csv", "run.json",
                           "notes.txt", "plots/mine.png"}


def test_a_stale_list_never_reaches_outside_the_folder(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "precious.csv").write_text("keep")
    (out / "run.json").write_text(json.dumps({"files": ["../precious.csv", str(tmp_path / "precious.csv")]}))
    assert main([str(write_scenario(tmp_path, [(0.0, 100, 3)])), "--out", str(out), "--no-plots"]) == 0
    assert (tmp_path / "precious.csv").read_text() == "keep"


def test_an_empty_timeline_window_warns_naming_when_replies_were_written(tmp_path, capsys, quick_plots):
    path = _synthetic_scenario(tmp_path, ARRANGEMENTS[:1], warmup_s=2)
    assert main([str(path), "--out", str(tmp_path / "out"), "--window", "0:1", "--replies", "2"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: --window 0:1: no measured reply is in progress") and err.count("\n") == 1
    assert "measured replies were written from 2." in err


def _wide_summary(n_seeds: int) -> pd.DataFrame:
    """A summary with the widest cells a run gives (three-digit figures, two-digit half-widths)."""
    rng = np.random.default_rng(0)
    names = ["same-gpu", "chunked-512", "split-2-2", "split-1-3", "split-3-1"]
    from disagg_simpy.results.metrics import SUMMARY_COLUMNS

    rows = []
    for seed in range(n_seeds):
        for name in names:
            row = {c: float(rng.uniform(0, 500)) for c in SUMMARY_COLUMNS[1:]}
            rows.append({"arrangement": name, **row, "seed": seed})
    return pd.DataFrame(rows)


def test_the_table_fits_120_columns_and_wide_prints_every_column():
    summary = _wide_summary(30)
    table = format_table(summary)
    assert max(map(len, table.split("\n"))) <= 120
    header = "".join(table.split("\n")[:2])
    for column in ("on_time", "late_first", "late_mean", "froze", "p50_s", "p90_s", "median_mean", "longest"):
        assert column in header
    assert "words_per_s" not in table and "p99_gap_ms" not in table
    wide = format_table(summary, wide=True)
    assert all(c in wide.split("\n")[0] for c in summary.columns if c != "seed")


def test_help_lists_the_commands_and_a_misspelt_command_gets_a_suggestion(capsys):
    from disagg_simpy.cli import COMMANDS

    assert main(["--help"]) == 0
    listed = capsys.readouterr().out.split("other commands")[1]
    for name in COMMANDS:  # each with its summary line
        assert any(line.split()[:1] == [name] and len(line.split()) > 2 for line in listed.split("\n")), name
    assert main(["descibe", "trace.csv"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'describe'?" in err


@pytest.mark.parametrize("word", ["scenario.yaml", "runs/x.yaml"])
def test_a_missing_scenario_is_not_taken_for_a_command(word, capsys):
    assert main([word]) == 2
    assert "did you mean" not in capsys.readouterr().err


def test_the_reference_figures_are_shares(tmp_path, capsys):
    path = write_scenario(tmp_path, [(0.0, 100, 3)], reference={"source": "a paper", "on_time_pct": {"same": 300}})
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "reference.on_time_pct.same: got 300" in err and "from 0 to 100" in err


def test_help_shows_the_frames_and_the_pictures_and_building_a_scenario_in_code(tmp_path):
    import pydoc

    import yaml

    import disagg_simpy
    from disagg_simpy import RunResult, Scenario, run

    text = pydoc.render_doc(RunResult, renderer=pydoc.plaintext)
    properties = text.split("Readonly properties defined here:")[1]
    for name, words in (("summary", "summary.csv"), ("requests", "requests.csv"), ("iterations", "iterations.csv"),
                        ("reads", "reads.csv")):
        assert f" |  {name}\n |      " in properties and words in properties
    package = pydoc.render_doc(disagg_simpy, renderer=pydoc.plaintext)
    assert "plots.write_plots(result, folder)" in package and "Scenario.model_validate" in package
    raw = yaml.safe_load(scenario_text("inline", {**SYNTHETIC, "measure_s": 1}, arrangements=ARRANGEMENTS[:1]))
    result = run(Scenario.model_validate(raw).with_overrides(**{"cost.iteration_ms": 8}))
    assert result.scenario.cost.iteration_ms == 8 and len(result.summary) == 1


def test_the_profile_script_without_pyinstrument_says_how_to_install_it():
    import subprocess
    import sys

    from helpers import ROOT

    script = ROOT / "benchmarks" / "where_time_goes.py"
    code = f"import runpy, sys; sys.modules['pyinstrument'] = None; runpy.run_path({str(script)!r}, run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and 'pip install -e ".[dev]"' in done.stderr


def test_the_documented_examples_write_under_runs():
    import re

    from helpers import ROOT

    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    plots = [p for doc in docs for p in re.findall(r"--plot (\S+)", doc.read_text())]
    assert plots and all(p.startswith(("runs/", "FILE")) for p in plots), plots
    assert "/runs/" in (ROOT / ".gitignore").read_text().split()

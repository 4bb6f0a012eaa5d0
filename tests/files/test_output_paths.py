"""Never lose a user's file: every output path of every command
is checked before any work; no output overwrites an input or another output; a symlink is
written through, a special file or folder refused; all or nothing holds even when a rename
fails; SIGTERM is cleaned up like Ctrl-C, and our stale temporary files are cleared."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, write_scenario

from disagg_simpy import files
from disagg_simpy.cli import OUTPUT_FILES, main

ROWS = [(0.0, 100, 3), (0.01, 200, 2), (0.02, 50, 4)]


def tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder`: file bytes, a link's target, '<dir>' or '<special>' (never
    opened: reading a FIFO would block)."""
    out: dict[str, bytes | str] = {}
    for p in sorted(folder.rglob("*")):
        key = str(p.relative_to(folder))
        if p.is_symlink():
            out[key] = f"-> {os.readlink(p)}"
        else:
            out[key] = "<dir>" if p.is_dir() else p.read_bytes() if p.is_file() else "<special>"
    return out


def run_cli(tmp_path, *flags, capsys=None) -> tuple[int, str]:
    scenario = write_scenario(tmp_path, ROWS)
    code = main([str(scenario), *flags])
    err = capsys.readouterr().err if capsys else ""
    return code, err


def refused(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    for f in fragments:
        assert f in err, err


# -- describe --plot ----------------------------------------------------------------------


def trace(tmp_path) -> Path:
    path = tmp_path / "t.csv"
    path.write_text("arrived_at_s,n_prompt_tokens,n_reply_words\n0,10,5\n3,10,5\n")
    return path


@pytest.mark.parametrize("plot", ["trace", "folder", "", "fifo", "hardlink"])
def test_describe_plot_never_replaces_the_trace_a_folder_or_a_special_file(tmp_path, capsys, plot):
    t = trace(tmp_path)
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    os.link(t, tmp_path / "hardlink")
    before = tree(tmp_path)
    target = {"trace": str(t), "folder": str(tmp_path / "folder"), "": "", "fifo": str(tmp_path / "fifo"),
              "hardlink": str(tmp_path / "hardlink")}[plot]
    code = main(["describe", str(t), "--plot", target])
    out, err = capsys.readouterr()
    refused(code, err, "--plot")
    assert out == ""  # refused before the trace is even read
    assert tree(tmp_path) == before


def test_describe_plot_writes_through_a_symlink_and_creates_its_folder(tmp_path, capsys):
    t = trace(tmp_path)
    (tmp_path / "link.png").symlink_to("real.png")
    assert main(["describe", str(t), "--plot", str(tmp_path / "link.png")]) == 0
    assert os.readlink(tmp_path / "link.png") == "real.png"
    assert (tmp_path / "real.png").read_bytes().startswith(b"\x89PNG")
    assert main(["describe", str(t), "--plot", str(tmp_path / "new" / "deeper" / "p.png")]) == 0
    assert (tmp_path / "new" / "deeper" / "p.png").is_file()


# -- the run's outputs ----------------------------------------------------------------


@pytest.mark.parametrize("flags, fragment", [
    (["--save-trace", "{o}/summary.csv"], "--out"),
    (["--save-trace", "{o}/plots/summary.png"], "--plots"),
    (["--save-trace", "{o}/plots/timeline-same.png"], "--plots"),
    (["--plots", "{o}", "--save-trace", "{o}/summary.png"], "--plots"),
    (["--save-trace", "{t}/micro.yaml"], "scenario file"),
    (["--save-trace", "{t}/fifo"], "special file"),
    (["--save-trace", "{t}/to-fifo"], "special file"),
    (["--save-trace", "{t}/to-null"], "special file"),  # never a real /dev path: a bug would replace it
    (["--save-trace", "{t}/folder"], "folder"),
    (["--save-trace", "{t}/" + "n" * 256], "file name of 256 bytes"),
    (["--save-trace", "{t}/micro.yaml/x.csv"], "is a file"),
])
def test_an_output_that_would_replace_another_an_input_or_a_special_file_is_refused_before_the_run(
        tmp_path, capsys, flags, fragment):
    o = tmp_path / "o"
    o.mkdir()
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "to-fifo").symlink_to("fifo")
    (tmp_path / "to-null").symlink_to(os.devnull)
    write_scenario(tmp_path, ROWS)
    before = tree(tmp_path)
    code, err = run_cli(tmp_path, "--out", str(o), *(f.format(o=o, t=tmp_path) for f in flags), capsys=capsys)
    refused(code, err, fragment)
    assert tree(tmp_path) == before


def test_a_folder_where_an_output_goes_is_refused_before_the_run(tmp_path, capsys):
    """A folder where one picture (or CSV) should go."""
    for blocked in ("plots/summary.png", "plots/timeline-same.png", "requests.csv"):
        o = tmp_path / blocked.replace("/", "_")
        (o / blocked).mkdir(parents=True)
        (o / "summary.csv").write_text("earlier")
        before = tree(o)
        code, err = run_cli(tmp_path, "--out", str(o), capsys=capsys)
        refused(code, err, f"{o / blocked}", "folder")
        assert tree(o) == before


def test_save_trace_writes_through_a_symlink_into_a_new_folder_and_keeps_long_names(tmp_path, capsys):
    (tmp_path / "link.csv").symlink_to("real.csv")
    (tmp_path / "real.csv").write_text("earlier")
    assert run_cli(tmp_path, "--out", str(tmp_path / "o"), "--no-plots", "--save-trace", str(tmp_path / "link.csv"))[0] == 0
    assert (tmp_path / "link.csv").is_symlink() and (tmp_path / "real.csv").read_text().startswith("arrived_at_s")
    long_name = "n" * (files.name_max(tmp_path) - 4) + ".csv"  # legal; our temporary name must still fit
    target = tmp_path / "new" / long_name
    assert run_cli(tmp_path, "--out", str(tmp_path / "o"), "--no-plots", "--save-trace", str(target))[0] == 0
    assert target.read_text().startswith("arrived_at_s")
    capsys.readouterr()


# -- all or nothing when a rename fails ------------------------------------------------------


def test_every_target_is_checked_before_the_first_rename(tmp_path):
    for name in "abc":
        (tmp_path / name).write_text("earlier")
    with pytest.raises(IsADirectoryError):
        with files.all_or_nothing():
            for name in "abc":
                files.atomic_write_text(tmp_path / name, "new")
            (tmp_path / "c").unlink()
            (tmp_path / "c").mkdir()  # the folder changes under the run
    assert [(tmp_path / n).read_text() for n in "ab"] == ["earlier", "earlier"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c"]


def test_a_rename_failing_part_way_says_which_files_were_replaced(tmp_path, capsys, monkeypatch):
    real_replace = os.replace
    calls = []

    def flaky(src, dst):
        calls.append(dst)
        if len(calls) == 3:
            raise OSError(5, "Input/output error", str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", flaky)
    o = tmp_path / "o"
    code, err = run_cli(tmp_path, "--out", str(o), "--no-plots", capsys=capsys)
    assert code == 1 and err.count("\n") == 1
    n_files = len(OUTPUT_FILES) + 1  # and over_time.csv: a trace's own arrival times change over time
    assert f"2 of {n_files} files were already replaced" in err and "left as they were" in err
    assert not [p for p in o.iterdir() if p.name.endswith(".tmp")]


def test_a_failed_rename_leaves_the_previous_runs_files_and_its_stale_ones_in_place(tmp_path, capsys, monkeypatch):
    """The previous run also wrote trace.csv into the folder; this run does not, so it is stale
    and goes, but only after every rename: when the first rename fails, nothing is lost."""
    o = tmp_path / "o"
    assert run_cli(tmp_path, "--out", str(o), "--no-plots", "--save-trace", str(o / "trace.csv"))[0] == 0
    before = tree(o)
    assert "trace.csv" in before

    def failing(src, dst):
        raise OSError(28, "No space left on device", str(dst))

    monkeypatch.setattr(files.os, "replace", failing)
    code, err = run_cli(tmp_path, "--out", str(o), "--no-plots", capsys=capsys)
    assert code == 1 and "earlier results were left as they were" in err, err
    assert tree(o) == before


# -- SIGTERM, and stale temporaries ----------------------------------------------------------

_SIGNAL_WHILE_WRITING = """
import os, signal, sys
import disagg_simpy.results.csv_text as c
from disagg_simpy.cli import main
real, n = c.csv_chunks, []
def csv_chunks(frame, header=True):
    n.append(1)
    if len(n) == 3:  # two CSVs wait as temporary files: a signal now
        os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    return real(frame, header)
c.csv_chunks = csv_chunks
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("name, code", [("SIGTERM", 143)])  # SIGHUP (129) takes the same path
def test_sigterm_while_writing_is_handled_like_ctrl_c_in_a_real_process(tmp_path, name, code):
    o = tmp_path / "o"
    o.mkdir()
    for out in OUTPUT_FILES:
        (o / out).write_text("earlier")
    scenario = write_scenario(tmp_path, ROWS)
    before = tree(tmp_path)
    proc = subprocess.run([sys.executable, "-c", _SIGNAL_WHILE_WRITING, name, str(scenario), "--out", str(o), "--no-plots"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == code, proc.stderr
    assert proc.stderr == f"terminated ({name}): earlier results were left as they were\n"
    assert tree(tmp_path) == before  # no temporary file left


def test_stale_temporaries_of_dead_processes_are_cleared_and_nothing_else(tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    o = tmp_path / "o"
    o.mkdir()
    stale = o / f".summary.csv.disagg_simpy-{dead.pid}-abcd_123.tmp"
    alive = o / f".summary.csv.disagg_simpy-{os.getppid()}-abcd_123.tmp"  # a run still writing
    user = [o / ".notes.tmp", o / f".x.disagg_simpy-{dead.pid}-abc.tmp", o / "keep.csv"]
    for p in (stale, alive, *user):
        p.write_text("x")
    assert run_cli(tmp_path, "--out", str(o), "--no-plots", capsys=capsys)[0] == 0
    assert not stale.exists()
    assert alive.exists() and all(p.exists() for p in user)


def test_temporary_names_fit_the_file_system_limit(tmp_path):
    limit = files.name_max(tmp_path)
    target = tmp_path / ("é" * ((limit - 4) // 2) + ".csv")  # multi-byte characters near the limit
    with files.atomic_path(target) as tmp:
        assert len(os.fsencode(tmp.name)) <= limit
        tmp.write_text("x")
    assert target.read_text() == "x"


def test_ctrl_c_after_the_results_were_written_does_not_claim_they_were_left(tmp_path, capsys, monkeypatch):
    """The message is true in every case: Ctrl-C while the table is printed comes after the
    new results are all in place."""
    run_module = sys.modules["disagg_simpy.cli.run"]  # (the package's `run` is the function)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "report", interrupted)
    code, err = run_cli(tmp_path, "--out", str(tmp_path / "o"), "--no-plots", capsys=capsys)
    assert code == 130 and err == "interrupted: the new results had all been written\n"
    assert (tmp_path / "o" / "run.json").is_file()


@pytest.mark.parametrize("command, blocked", [("sweep", "sweep.csv"), ("goodput", "goodput.csv"), ("sweep", "store.sqlite")])
def test_sweep_and_goodput_follow_the_same_output_rules_before_any_run(tmp_path, capsys, command, blocked):
    o = tmp_path / "o"
    (o / blocked).mkdir(parents=True)
    scenario = write_scenario(tmp_path, ROWS)
    before = tree(tmp_path)
    code = main([command, str(scenario), "--out", str(o), *(["--rate", "1,2"] if command == "sweep" else [])])
    refused(code, capsys.readouterr().err, f"{o / blocked}", "folder")
    assert tree(tmp_path) == before

"""Input files are read in one place (`inputs.read_input`): a path that is not a regular file (a
named pipe, a device) is refused at once in one line, exit 2, by every command that reads a
user's file (a scenario, a trace, a `fit` table, an earlier run's run.json); a file over its
size limit is refused with the limit stated, and never read whole.

Each case runs under an alarm: a reader that waited on a pipe would hang, and the alarm turns
that into a failure instead."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager

import pytest
from helpers import ROOT, write_scenario

from disagg_simpy.cli import main
from disagg_simpy.errors import InputError


class _Hung(Exception):
    pass


@contextmanager
def at_most(seconds: int):
    """Fail (not hang) if the block takes longer than `seconds`: a read waiting on a pipe."""

    def ring(signum, frame):
        raise _Hung(f"still reading after {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _refused(capsys, argv, fragment):
    try:
        with at_most(60):
            code = main([str(a) for a in argv])
    except _Hung as hung:
        pytest.fail(f"{' '.join(map(str, argv))}: {hung}")
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and fragment in err, err
    return err


def test_a_fit_table_that_is_a_named_pipe_is_refused_at_once(tmp_path, capsys):
    os.mkfifo(tmp_path / "t.csv")
    _refused(capsys, ["fit", tmp_path / "t.csv", "--out", tmp_path / "out"],
             f"{tmp_path}/t.csv: got a named pipe (not a regular file), expected a CSV table of measured iterations")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_sweep_with_a_trace_that_is_a_named_pipe_is_refused_at_once(tmp_path, capsys, monkeypatch):
    """The sweep's store hashes the trace before any run reads it: that read must not wait either.
    The file is refused before any run starts (no worker process is forked for bad input)."""
    path = write_scenario(tmp_path, [(0.0, 100, 3)])
    (tmp_path / "micro.csv").unlink()
    os.mkfifo(tmp_path / "micro.csv")

    def no_runs(*args, **kwargs):
        raise AssertionError("a run started before the trace was checked")

    monkeypatch.setattr("disagg_simpy.sweep.runner.LocalPool.run", no_runs)
    _refused(capsys, ["sweep", path, "--rate", "1,2", "--out", tmp_path / "out"],
             "micro.csv: file: got a named pipe (not a regular file), expected a trace file")


@pytest.mark.parametrize("command", ["run", "describe"])
def test_a_trace_or_scenario_that_is_a_named_pipe_is_refused_at_once(tmp_path, capsys, command):
    os.mkfifo(tmp_path / "pipe")
    argv = [tmp_path / "pipe", "--out", tmp_path / "out"] if command == "run" else ["describe", tmp_path / "pipe"]
    what = "a scenario YAML file" if command == "run" else "a trace file"
    _refused(capsys, argv, f"got a named pipe (not a regular file), expected {what}")


def test_an_earlier_run_json_that_is_a_named_pipe_is_refused_at_once(tmp_path, capsys):
    """Who wrote a results folder is read from its run.json: a pipe there is not waited on; the
    run refuses to write over it."""
    path = write_scenario(tmp_path, [(0.0, 100, 3)])
    (tmp_path / "out").mkdir()
    os.mkfifo(tmp_path / "out" / "run.json")
    _refused(capsys, [path, "--out", tmp_path / "out", "--no-plots"], "run.json, which is a special file")


_LIMITED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from disagg_simpy.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_fit_on_dev_zero_is_refused_at_once_without_reading_it(tmp_path):
    """A device never ends: read to its end it would take all memory (capped here at 2 GB)."""
    done = subprocess.run([sys.executable, "-c", _LIMITED, "fit", "/dev/zero", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and done.stderr == (
        "error: /dev/zero: got a device (not a regular file), expected a CSV table of measured iterations\n")
    assert not (tmp_path / "out").exists()


def test_a_file_over_the_limit_is_refused_naming_the_limit_and_is_never_read_whole(tmp_path, monkeypatch):
    from disagg_simpy.inputs import read_input

    path = tmp_path / "t.csv"
    path.write_bytes(b"x" * 100)
    with pytest.raises(InputError, match=r"t.csv: got 100 bytes, expected a table of at most 99 bytes$"):
        read_input(path, "a table", 99)
    assert read_input(path, "a table", 100) == b"x" * 100
    monkeypatch.setattr("disagg_simpy.costs.table.MAX_TABLE_BYTES", 50)
    with pytest.raises(InputError, match="expected a CSV table of measured iterations of at most 50 bytes"):
        from disagg_simpy.costs.table import read_table

        read_table(path)


def test_a_file_that_grows_while_read_is_cut_at_the_limit(tmp_path, monkeypatch):
    """The size is checked on the open file, then at most limit + 1 bytes are read: a file
    growing between the two is refused, not read to its new end."""
    from disagg_simpy.inputs import read_input

    path = tmp_path / "t.csv"
    path.write_bytes(b"x" * 10)
    real_fstat = os.fstat

    def fstat_then_grow(fd):
        st = real_fstat(fd)
        path.write_bytes(b"x" * 1000)
        return st

    monkeypatch.setattr("disagg_simpy.inputs.os.fstat", fstat_then_grow)
    with pytest.raises(InputError, match="got more than 20 bytes, expected a table of at most 20 bytes"):
        read_input(path, "a table", 20)

"""Hostile environments: memory limits, an ASCII terminal, a full
stdout or disk, a file size limit, a broken MPLBACKEND, a run capped before any iteration. Each
is one line and the right exit code, never a traceback or "internal error"."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest
from helpers import ROOT, write_scenario

from disagg_simpy.cli import main

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
TRACE = "arrived_at_s,n_prompt_tokens,n_reply_words\n0,10,5\n3,10,5\n"


def cli(tmp_path, *args, env=None, stdout=subprocess.PIPE, preexec_fn=None):
    return subprocess.run([sys.executable, "-m", "disagg_simpy", *map(str, args)], cwd=tmp_path, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=120, env={**ENV, **(env or {})},
                          preexec_fn=preexec_fn)


# -- out of memory -----------------------------------------------------------------------------

_UNDER_A_MEMORY_LIMIT = """
import resource, sys
import disagg_simpy.api, disagg_simpy.plots, pandas  # everything a run imports, then the limit
from disagg_simpy.cli import main
with open("/proc/self/statm") as f:
    used = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + (96 << 20), used + (96 << 20)))
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc to set a memory limit")
def test_out_of_memory_in_a_real_process_is_one_line_exit_1(tmp_path):
    """A run needing far more than 96 MB past its imports (about 1.7 million requests are drawn
    up front) under an address-space limit, like `ulimit -v`."""
    proc = subprocess.run([sys.executable, "-c", _UNDER_A_MEMORY_LIMIT, str(ROOT / "scenarios" / "default.yaml"),
                           "--out", "o", "--rate", "4000", "--measure-s", "420", "--seeds", "1", "--no-plots"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=ENV)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: out of memory;") and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("failure", [
    ImportError("/x/pandas/_libs/index.so: failed to map segment from shared object"),  # ulimit -v at import
    OSError(12, "Cannot allocate memory"),
    None,
], ids=["import", "enomem", "chained"])
def test_memory_failures_that_are_not_memory_errors_say_out_of_memory(tmp_path, capsys, monkeypatch, failure):
    import disagg_simpy.api

    def fails(*args, **kwargs):
        if failure is None:  # a library wraps the MemoryError in its own error
            try:
                raise MemoryError
            except MemoryError as err:
                raise RuntimeError("could not convert") from err
        raise failure

    monkeypatch.setattr(disagg_simpy.api, "run_each", fails)
    scenario = write_scenario(tmp_path, [(0.0, 10, 2)])
    assert main([str(scenario), "--out", str(tmp_path / "o")]) == 1
    assert capsys.readouterr().err.startswith("error: out of memory;")


# -- --follow when nothing ran ---------------------------------------------------------------


def test_follow_a_request_of_a_run_capped_before_any_iteration_ended(tmp_path):
    """docs/guarantees.md says such a prompt is no error: the picture shows the request waiting."""
    from helpers import run_rows

    from disagg_simpy.plots import save_follow

    result = run_rows(tmp_path, [(0.0, 10**8, 5)], max_sim_s=1, arrangements=[
        {"name": "same", "kind": "colocated", "gpus": 1},
        {"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1}])
    assert len(result.iterations) == 0 and result.capped
    save_follow(result, 0, tmp_path / "follow-0.png")
    assert (tmp_path / "follow-0.png").read_bytes().startswith(b"\x89PNG")


# -- an ASCII terminal -----------------------------------------------------------------------


def test_an_ascii_terminal_gets_plus_minus_not_a_crash(tmp_path):
    proc = cli(tmp_path, ROOT / "scenarios" / "default.yaml", "--out", "o", "--seeds", "2", "--measure-s", "1",
               "--no-plots", env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0, proc.stderr
    assert "+/-" in proc.stdout and "mean and 95% interval" in proc.stdout


# -- the environment fails -----------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_stdout_on_a_full_device_is_one_line_exit_1(tmp_path):
    (tmp_path / "t.csv").write_text(TRACE)
    with open("/dev/full", "w") as full:
        proc = cli(tmp_path, "describe", "t.csv", stdout=full)
    assert proc.returncode == 1
    assert proc.stderr == "error: cannot write to standard output: No space left on device\n"


def _small_files():
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # like `ulimit -f 4`: a full disk for a PNG


def test_a_picture_that_cannot_be_written_says_so_and_leaves_nothing(tmp_path):
    (tmp_path / "t.csv").write_text(TRACE)
    proc = cli(tmp_path, "describe", "t.csv", "--plot", "p.png", preexec_fn=_small_files)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == "error: cannot write --plot p.png: File too large; nothing was replaced\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_a_run_whose_files_cannot_be_written_says_so_and_leaves_earlier_results(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "summary.csv").write_text("earlier")
    scenario = write_scenario(tmp_path, [(0.0, 10, 2)])
    proc = cli(tmp_path, scenario, "--out", out, preexec_fn=_small_files)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: cannot write the results: File too large") and proc.stderr.count("\n") == 1
    assert (out / "summary.csv").read_text() == "earlier" and sorted(p.name for p in out.iterdir()) == ["summary.csv"]


def test_a_backend_matplotlib_does_not_know_does_not_stop_our_pictures(tmp_path):
    (tmp_path / "t.csv").write_text(TRACE)
    proc = cli(tmp_path, "describe", "t.csv", "--plot", "p.png", env={"MPLBACKEND": "nonsense"})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")

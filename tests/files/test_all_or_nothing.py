"""Nothing half written: outputs are renamed into place together once every one is complete; an
interrupted or failed run (Ctrl-C, an error while writing) leaves earlier results byte for byte,
and leaves no temporary file behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import DEFAULT, ROOT

from disagg_simpy.cli import OUTPUT_FILES, main

SHORT = ["--measure-s", "4", "--seeds", "1"]  # one seed (the scenario declares 30)


def earlier_results(out):
    """An earlier run's results, to be left exactly as they were."""
    out.mkdir(parents=True, exist_ok=True)
    for name in OUTPUT_FILES:
        (out / name).write_bytes(f"earlier {name}\n".encode())
    (out / "plots").mkdir(exist_ok=True)
    (out / "plots" / "summary.png").write_bytes(b"earlier picture")


def files_under(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_ctrl_c_during_the_run_exits_130_and_leaves_earlier_results(tmp_path, capsys, monkeypatch):
    import disagg_simpy.api

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    out = tmp_path / "out"
    earlier_results(out)
    before = files_under(tmp_path)
    monkeypatch.setattr(disagg_simpy.api, "run_each", interrupted)
    assert main([str(DEFAULT), "--out", str(out), *SHORT]) == 130
    assert capsys.readouterr().err == "interrupted: earlier results were left as they were\n"
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError(28, "No space left on device")])
def test_a_failure_while_writing_renames_nothing(tmp_path, capsys, monkeypatch, failure):
    """The CSVs are complete temporary files when the pictures fail: none replaces its target."""
    import disagg_simpy.plots

    def broken(*args, **kwargs):
        raise failure

    out = tmp_path / "out"
    earlier_results(out)
    before = files_under(tmp_path)
    monkeypatch.setattr(disagg_simpy.plots, "write_plots", broken)
    code = main([str(DEFAULT), "--out", str(out), *SHORT])
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    if failure is KeyboardInterrupt:
        assert code == 130 and err == "interrupted: earlier results were left as they were\n"
    else:
        assert code == 1 and err.startswith("error: cannot write the results: No space left on device")
    assert files_under(tmp_path) == before  # no new file, no temporary file left


def test_a_complete_run_replaces_every_output_with_normal_permissions(tmp_path, capsys):
    out = tmp_path / "out"
    earlier_results(out)
    assert main([str(DEFAULT), "--out", str(out), *SHORT, "--no-plots"]) == 0
    for name in OUTPUT_FILES:
        data = (out / name).read_bytes()
        assert not data.startswith(b"earlier")
        assert (out / name).stat().st_mode & 0o777 == 0o666 & ~_umask()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_ctrl_c_to_a_real_process_exits_130_with_one_line_and_earlier_results_intact(tmp_path):
    out = tmp_path / "out"
    earlier_results(out)
    before = files_under(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # 200 seeds of the default scenario take far longer than the wait below
    proc = subprocess.Popen([sys.executable, "-m", "disagg_simpy", str(DEFAULT), "--out", str(out), "--seeds", "200"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            preexec_fn=_ctrl_c_as_on_a_terminal)
    try:
        _wait_until_busy(proc.pid, cpu_s=2.0)  # past the imports (about 1 s of CPU): simulating
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert stderr == "interrupted: earlier results were left as they were\n" and stdout == ""
    assert files_under(tmp_path) == before


def _ctrl_c_as_on_a_terminal() -> None:
    """A pytest started in the background (`cmd &`) ignores SIGINT and its children inherit that
    (Python then installs no Ctrl-C handler): give the command the default, as a terminal does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_until_busy(pid: int, cpu_s: float, timeout_s: float = 60.0) -> None:
    """Wait until process `pid` has used `cpu_s` of CPU (Linux /proc), however loaded the machine."""
    stat = f"/proc/{pid}/stat"
    if not os.path.exists(stat):
        time.sleep(3 * cpu_s)
        return
    tick = os.sysconf("SC_CLK_TCK")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        fields = open(stat).read().rsplit(")", 1)[1].split()
        if (int(fields[11]) + int(fields[12])) / tick >= cpu_s:
            return
        time.sleep(0.05)

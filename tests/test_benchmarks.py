"""The benchmark scripts' own behaviour (never their timings): a missing optional tool is one line."""

from __future__ import annotations


def test_the_profile_script_without_pyinstrument_says_how_to_install_it():
    import subprocess
    import sys

    from helpers import ROOT

    script = ROOT / "benchmarks" / "where_time_goes.py"
    code = f"import runpy, sys; sys.modules['pyinstrument'] = None; runpy.run_path({str(script)!r}, run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and 'pip install -e ".[dev]"' in done.stderr

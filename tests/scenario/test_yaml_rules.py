"""Scenario files mean what a person reads (YAML 1.2 core rules: numbers, names, no 1.1 surprises),
and what loading may build is bounded (aliases and merge keys)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT

from disagg_simpy import load_scenario
from disagg_simpy.cli import main

SCENARIO = """\
name: {name}
seed: {seed}
workload: {{rate_per_s: 5, measure_s: {measure_s}, prompt_mix: [{{share: 1, tokens: [10, 20]}}], reply_words: [2, 3]}}
arrangements:
  - {{name: {arrangement}, kind: colocated, gpus: 1}}
"""


def scenario(tmp_path, **values):
    fields = {"name": "s", "seed": 1, "measure_s": 5, "arrangement": "same"} | values
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(**fields))
    return path


def refused(tmp_path, capsys, argv) -> str:
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


# -- YAML 1.2 core rules ---------------------------------------------------------------------


@pytest.mark.parametrize("written, read", [("0042", 42), ("42", 42), ("0x2A", 42), ("0o52", 42), ("4_2", 42)])
def test_whole_numbers_mean_what_a_person_reads(tmp_path, written, read):
    assert load_scenario(scenario(tmp_path, seed=written)).seed == read


@pytest.mark.parametrize("written", ["off", "on", "yes", "no", "0042", "1.0", "1e3", "2024-01-01", "true"])
def test_names_are_the_text_as_written(tmp_path, written):
    s = load_scenario(scenario(tmp_path, name=written, arrangement=written))
    assert s.name == written and s.arrangements[0].name == written


@pytest.mark.parametrize("key, written, fragment", [
    ("measure_s", "10:00", "workload.measure_s: got '10:00', expected a number of seconds"),  # not 600
    ("measure_s", "0b11", "got '0b11'"),  # YAML 1.1 binary is text in 1.2
    ("seed", "yes", "seed: got 'yes', expected a whole number"),  # not true
])
def test_yaml_1_1_surprises_are_text_and_refused(tmp_path, capsys, key, written, fragment):
    err = refused(tmp_path, capsys, [scenario(tmp_path, **{key: written})])
    assert fragment in err


def test_a_key_that_is_not_text_is_reported_on_its_own_line(tmp_path, capsys):
    path = scenario(tmp_path)
    path.write_text(path.read_text() + "~: 1\n")
    err = refused(tmp_path, capsys, [path])
    assert f"s.yaml:{path.read_text().count(chr(10))}: got the key ~ (an empty value), expected keys that are text" in err
    path.write_text(scenario(tmp_path).read_text().replace("seed: 1", "? [a, b]\n: 1"))
    assert "s.yaml:2: got the key a list or mapping" in refused(tmp_path, capsys, [path])


# -- what loading may build ------------------------------------------------------------------

_MERGES = "m0: &m0 {a: 1, b: 2}\n" + "".join(
    f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 9)}]}}\n" for i in range(1, 9)) + "name: bomb\n"
_LAUGHS = "name: laughs\nworkload:\n  prompt_mix: &a8 [" + ", ".join(["*a7"] * 9) + "]\n"
_LAUGHS = "".join(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 8)) + _LAUGHS
_LAUGHS = "x0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9]\n" + _LAUGHS


def test_merge_keys_that_would_build_billions_of_values_are_refused_in_a_real_process(tmp_path):
    """20 lines of nested merges kept the loader busy for minutes."""
    (tmp_path / "s.yaml").write_text(_MERGES)
    proc = subprocess.run([sys.executable, "-m", "disagg_simpy", "s.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})  # a hang guard
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "s.yaml:6: got YAML aliases or merge keys (<<) that expand to more than 100,000 values" in proc.stderr


@pytest.mark.parametrize("text, fragment", [
    (_LAUGHS, "s.yaml:6: got YAML aliases or merge keys (<<) that expand to more than 100,000 values"),
    ("name: &x [a, *x]\n", "s.yaml:1: got a value that contains itself"),
], ids=["aliases", "self"])
def test_aliases_that_would_build_billions_of_values_are_refused(tmp_path, capsys, text, fragment):
    (tmp_path / "s.yaml").write_text(text)
    assert fragment in refused(tmp_path, capsys, [tmp_path / "s.yaml"])

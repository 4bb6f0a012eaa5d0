"""Property-based tests: random small valid scenarios and traces (many arrivals at one instant,
short caps) always run and satisfy every invariant; random invalid ones always get the clean
one-line error (exit 2), never a traceback, and write nothing."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from invariants import check_run, check_words_frame

from disagg_simpy import load_scenario, run
from disagg_simpy.cli import main

#: PROPERTY_EXAMPLES_SCALE=50 runs 50 times as many examples (a deeper hunt, outside the suite).
SCALE = int(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))


def examples(n: int) -> settings:
    return settings(max_examples=n * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HEADER = "arrived_at_s,n_prompt_tokens,n_reply_words"


def ms(us: int) -> float:
    """A whole number of microseconds as ms: a cost of whole nanoseconds, written as a decimal."""
    return us / 1000


# -- valid scenarios -----------------------------------------------------------------------

chunk = st.one_of(st.none(), st.integers(1, 600))
colocated = st.builds(lambda g, c: {"kind": "colocated", "gpus": g, **({"chunk_tokens": c} if c else {})},
                      st.integers(1, 3), chunk)
disaggregated = st.builds(
    lambda r, w, c: {"kind": "disaggregated", "reading_gpus": r, "writing_gpus": w, **({"chunk_tokens": c} if c else {})},
    st.integers(1, 2), st.integers(1, 2), chunk)
arrangements = st.lists(st.one_of(colocated, disaggregated), min_size=1, max_size=3).map(
    lambda items: [{"name": f"a{i}", **a} for i, a in enumerate(items)])
# arrival instants from a few ticks, so that many requests share one instant
rows = st.lists(
    st.tuples(st.integers(0, 12), st.integers(1, 3000), st.integers(1, 25)), min_size=1, max_size=25
).map(lambda rs: sorted(((t * 0.025, p, w) for t, p, w in rs), key=lambda r: r[0]))
costs = st.fixed_dictionaries({
    "iteration_ms": st.integers(500, 20_000).map(ms),  # >= 0.5 ms: within the iteration limit
    "per_reply_ms": st.integers(0, 1_000).map(ms),
    "per_prompt_token_ms": st.integers(0, 100).map(ms),
    "kv_ship_ms_per_token": st.integers(0, 100).map(ms),
})
caps = st.one_of(st.none(), st.sampled_from([0.05, 0.2, 1.0, 5.0]))


def write(folder: Path, trace_rows, spec: dict) -> Path:
    (folder / "t.csv").write_text(HEADER + "\n" + "".join(f"{t!r},{p},{w}\n" for t, p, w in trace_rows))
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@examples(40)
@given(trace_rows=rows, arrangement_list=arrangements, cost=costs, cap=caps, chunked_slo=st.booleans())
def test_random_valid_scenarios_run_and_keep_every_invariant(trace_rows, arrangement_list, cost, cap, chunked_slo):
    spec = {"name": "prop", "workload": {"trace": "t.csv"}, "cost": cost, "arrangements": arrangement_list}
    if cap is not None:  # from the first row (a csv trace's times are as written)
        spec["max_sim_s"] = trace_rows[0][0] + cap
        spec["workload"]["measure_s"] = trace_rows[0][0] + cap  # rows after the cap are never seen
    if chunked_slo:
        spec["slo"] = {"first_word_s": 0.5, "mean_gap_ms": 20, "freeze_ms": 40}
    with tempfile.TemporaryDirectory() as tmp:
        result = run(load_scenario(write(Path(tmp), trace_rows, spec)))
    check_run(result)
    for name in result.records:
        check_words_frame(result, name)


@examples(25)
@given(rate=st.floats(0.5, 40), measure=st.floats(0.2, 3), mix_low=st.integers(1, 4000), span=st.integers(0, 4000),
       words=st.tuples(st.integers(1, 50), st.integers(0, 50)), arrangement_list=arrangements, seed=st.integers(0, 2**63 - 1))
def test_random_synthetic_traffic_keeps_every_invariant(rate, measure, mix_low, span, words, arrangement_list, seed):
    spec = {
        "name": "synth", "seed": seed,
        "workload": {"rate_per_s": rate, "measure_s": measure,
                     "prompt_mix": [{"share": 0.25, "tokens": [mix_low, mix_low + span]}, {"share": 0.75, "tokens": [1, 300]}],
                     "reply_words": [words[0], words[0] + words[1]]},
        "max_sim_s": measure + 5, "arrangements": arrangement_list,
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.yaml"
        path.write_text(yaml.safe_dump(spec))
        result = run(load_scenario(path))
    check_run(result)


# -- invalid scenarios -----------------------------------------------------------------------

VALID = {
    "name": "prop",
    "workload": {"trace": "t.csv"},
    "max_sim_s": 5,
    "cost": {"iteration_ms": 12, "per_reply_ms": 0.4, "per_prompt_token_ms": 0.05, "kv_ship_ms_per_token": 0.01},
    "slo": {"first_word_s": 2, "mean_gap_ms": 50, "freeze_ms": 250},
    "arrangements": [
        {"name": "same", "kind": "colocated", "gpus": 2, "chunk_tokens": 256},
        {"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1},
    ],
}
GOOD_TRACE = [(0.0, 100, 3), (0.0, 200, 4), (0.1, 50, 1)]
# values that no scenario key accepts
JUNK = st.sampled_from([[[1]], {"zz": [1]}, "??", float("nan"), -1, -0.5, 10**30, []])


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


PATHS = sorted(set(_paths(VALID)), key=str)
REQUIRED = [p for p in PATHS if p[-1] in ("name", "workload", "arrangements", "trace", "kind", "gpus", "reading_gpus", "writing_gpus")]


def _at(spec, path):
    for p in path[:-1]:
        spec = spec[p]
    return spec


def _mutated(draw_kind, path, junk, key):
    spec = yaml.safe_load(yaml.safe_dump(VALID))
    if draw_kind == "junk":
        _at(spec, path)[path[-1]] = junk
    elif draw_kind == "delete":
        del _at(spec, path)[path[-1]]
    else:  # an unknown key in a mapping
        where = _at(spec, path) if isinstance(_at(spec, path), dict) else spec
        where[f"{key}_zz"] = 1  # no key of any model ends so
    return spec


def _run_cli(folder: Path, argv_extra=()) -> tuple[int, str, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main([str(folder / "s.yaml"), "--out", str(folder / "out"), "--no-plots", *argv_extra])
    return code, out.getvalue(), err.getvalue()


def _assert_clean_error(folder: Path, code: int, out: str, err: str) -> None:
    assert code == 2, (code, err)
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err and out == ""
    assert not (folder / "out").exists()


@examples(60)
@given(kind=st.sampled_from(["junk", "delete", "unknown"]), path=st.sampled_from(PATHS), junk=JUNK,
       key=st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12))
def test_random_invalid_scenarios_get_the_clean_error(kind, path, junk, key):
    if kind == "delete":
        assume(path in REQUIRED)
    # a name is the text as written (YAML 1.2 rules): a number there, like `.nan` or
    # `-1`, is a valid name
    assume(not (kind == "junk" and path[-1] == "name" and isinstance(junk, (int, float))))
    spec = _mutated(kind, path, junk, key)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write(folder, GOOD_TRACE, spec)
        code, out, err = _run_cli(folder)
        _assert_clean_error(folder, code, out, err)
    assert str(folder / "s.yaml") in err or "t.csv" in err


@examples(40)
@given(text=st.text(max_size=200))
def test_random_text_as_a_scenario_gets_the_clean_error(text):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "s.yaml").write_text(text, encoding="utf-8")
        code, out, err = _run_cli(folder)
        _assert_clean_error(folder, code, out, err)


BAD_CELLS = {
    0: ["-1", "abc", "", "nan", "inf", "1e300", "--3"],
    1: ["-5", "abc", "", "1.5", "0", "nan", "1e20", "2**8"],
    2: ["-5", "abc", "", "2.5", "0", "inf", "1e20"],
}


@examples(40)
@given(trace_rows=rows, data=st.data(), how=st.sampled_from(["cell", "header", "ragged", "backwards"]))
def test_random_broken_traces_get_the_clean_error_naming_the_row(trace_rows, data, how):
    lines = [HEADER] + [f"{t!r},{p},{w}" for t, p, w in trace_rows]
    row = data.draw(st.integers(1, len(lines) - 1))
    cells = lines[row].split(",")
    if how == "cell":
        column = data.draw(st.integers(0, 2))
        cells[column] = data.draw(st.sampled_from(BAD_CELLS[column]))
        if column == 0 and cells[0] == "1e300" and row == 1:
            cells[0] = "-1"  # a huge first arrival is only bad after a smaller one
        lines[row] = ",".join(cells)
    elif how == "header":
        lines[0] = data.draw(st.sampled_from(["arrived_at_s,n_prompt_tokens", "t,n_prompt_tokens,n_reply_words",
                                              HEADER + ",extra", "arrived_at_s,arrived_at_s,n_reply_words"]))
    elif how == "ragged":
        lines[row] += ",7"
    else:
        assume(len(lines) > 2)
        row = max(row, 2)
        lines[row] = ",".join([repr(float(lines[row - 1].split(",")[0]) - 0.5)] + cells[1:])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "t.csv").write_text("\n".join(lines) + "\n")
        (folder / "s.yaml").write_text(yaml.safe_dump(VALID))
        code, out, err = _run_cli(folder)
        _assert_clean_error(folder, code, out, err)
    assert "t.csv:" in err  # the file and the line

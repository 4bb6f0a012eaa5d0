"""`presets` filters (--engine, --gpu, --model, --tp) and engine/version columns, and `presets
compare A B`: the two presets' iteration times side by side, as the model charges them."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from disagg_simpy.cli import main
from disagg_simpy.costs.presets import PRESETS

DS, VLLM = "a100-80gb/opt-13b/tp1/distserve", "a100-80gb/opt-13b/tp1/vllm-0.2"


def listed(capsys, *flags) -> list[str]:
    assert main(["presets", *flags, "--json"]) == 0
    return [p["name"] for p in json.loads(capsys.readouterr().out)]


def test_the_table_has_engine_and_version_columns(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert header[:7] == ["name", "GPU", "model", "TP", "engine", "version", "replies"]
    row = next(line for line in out.splitlines() if line.startswith(VLLM + " "))
    assert row.split()[4:6] == ["vLLM", "0.2.3"]


@pytest.mark.parametrize(("flags", "expected"), [
    (["--engine", "vllm-0.2"], lambda n, p: n.endswith("/vllm-0.2")),
    (["--engine", "vllm"], lambda n, p: p["engine"] == "vLLM"),
    (["--gpu", "h100"], lambda n, p: p["gpu"] == "H100-80GB"),
    (["--model", "opt-66b"], lambda n, p: p["model"] == "OPT-66B"),
    (["--model", "llama-2"], lambda n, p: p["model"].startswith("Llama-2")),
    (["--tp", "4"], lambda n, p: p["tp"] == 4),
    (["--model", "opt-66b", "--engine", "distserve", "--tp", "8"], lambda n, p: n == "a100-80gb/opt-66b/tp8/distserve"),
])
def test_each_filter_keeps_exactly_the_presets_it_names(capsys, flags, expected):
    got = listed(capsys, *flags)
    assert got == [n for n, p in PRESETS.items() if expected(n, p)] and got
    assert main(["presets", *flags]) == 0  # the table too
    shown = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:len(got) + 1]]
    assert shown == got


@pytest.mark.parametrize(("flags", "needle"), [
    (["--engine", "trtllm"], "presets --engine: got 'trtllm', no preset has it; expected one of distserve,"),
    (["--gpu", "h100", "--model", "opt-13b"], "presets: no preset matches --gpu h100 --model opt-13b"),
    (["--tp", "0"], "--tp: got '0', expected a whole number from 1"),
])
def test_a_filter_matching_nothing_is_one_line_and_exit_2(capsys, flags, needle):
    assert main(["presets", *flags]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_compare_prints_both_presets_times_as_the_model_charges_them(capsys, tmp_path):
    from disagg_simpy.cli.presets_compare import CONTEXT, GRID
    from disagg_simpy.costs.presets import cost_fields
    from disagg_simpy.scenario.schema import has_attention_term

    assert main(["presets", "compare", DS, VLLM, "--json", "--out", str(tmp_path)]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == len(GRID) and {r["kind"] for r in rows} == {"writing", "prompt read", "mixed"}
    attention = has_attention_term()
    for r in rows:  # each time by hand: M1 + E3 (context) + E7 (c(c+1)/2 pairs), no E14/E15 in these presets
        for key, name in (("a_ms", DS), ("b_ms", VLLM)):
            f = cost_fields(name, attention)
            c, o = r["prompt_tokens"], r["earlier_tokens"]
            pairs = c * o + c * (c + 1) / 2 if attention else 0
            hand = (f["iteration_ms"] + f["per_reply_ms"] * r["replies"] + f["per_prompt_token_ms"] * c
                    + f["per_context_token_ms"] * r["replies"] * CONTEXT + f.get("per_attention_pair_ms", 0) * pairs
                    + f.get("per_reread_token_ms", 0) * (o if c else 0))
            assert r[key] == pytest.approx(hand, abs=1e-3), (r, key)
        assert r["b_over_a"] == pytest.approx(r["b_ms"] / r["a_ms"], abs=2e-3)
    one = next(r for r in rows if r["kind"] == "writing" and r["replies"] == 1)
    assert one["b_ms"] > one["a_ms"]  # vLLM 0.2's decode intercept (23.5 ms) above DistServe's (19.9 ms)
    assert all(not r["a_in_range"] for r in rows if r["kind"] == "mixed")  # no chunked rows in DistServe's fit
    assert pd.read_csv(tmp_path / "compare.csv").to_dict("records") == pd.DataFrame(rows).to_dict("records")


def test_compare_table_lines_up_and_marks_cells_beyond_the_range(capsys):
    assert main(["presets", "compare", DS, "h100-80gb/llama-2-70b/tp4/vllm-splitwise"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"A: {DS}" and lines[1] == "B: h100-80gb/llama-2-70b/tp4/vllm-splitwise"
    table = lines[3:3 + 17]
    assert len({len(line) for line in table}) == 1  # aligned: every row as wide as the header
    big = next(line for line in table if line.split()[:2] == ["writing", "256"])
    assert big.split()[-2].endswith("*")  # SplitwiseSim's fit holds up to 64 replies
    assert lines[-1].startswith("*: beyond the preset's fitted range")


def test_compare_refuses_an_unknown_or_old_name_in_one_line(capsys):
    assert main(["presets", "compare", DS, "a100-80gb/opt-13b/tp1"]) == 2
    err = capsys.readouterr().err
    assert "presets compare: B: got 'a100-80gb/opt-13b/tp1', a name from before presets named their engine; " \
           f"did you mean '{DS}'?" in err and err.count("\n") == 1


@pytest.mark.parametrize(("flags", "fragment"), [
    (["--out", "{file}"], "--out: {file} is a file, expected a folder"),
    (["--out", "{file}/sub"], "--out: cannot create {file}/sub"),
    (["--format", "parquet"], "--format: got parquet without --out, expected --out DIR"),
])
def test_compare_refuses_a_bad_out_or_format_in_one_line(capsys, tmp_path, flags, fragment):
    """`presets compare --out` is checked as every command's: one line, exit 2 (a file in the way
    was exit 1 with the raw 'File exists'; --format without --out was silently ignored)."""
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["presets", "compare", DS, VLLM, *(f.format(file=afile) for f in flags)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment.format(file=afile) in err, err

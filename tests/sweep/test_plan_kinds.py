"""Plans over GPU kinds (docs/cost.md): ranked by goodput per dollar with plan's pruning, whose
top two equal the exhaustive search's; the cheapest that carries a rate; the best of each pool at
equal cost; a budget nothing fits refused naming the cheapest. Small traffic (Llama-2-7B on A100
and H100, 10 s windows, two seeds, up to 2 GPUs, whole prompts)."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from helpers import preset_scenario

from disagg_simpy import load_scenario
from disagg_simpy.cli import main
from disagg_simpy.costs import presets as shipped
from disagg_simpy.scenario import gpu_kinds
from disagg_simpy.sweep.plan import plan
from disagg_simpy.sweep.plan_kinds import Budget, candidates, cheapest_for_rate, iso, side_presets, with_kinds, within
from disagg_simpy.sweep.runner import LocalPool, Runner
from disagg_simpy.sweep.store import Store

KINDS = ("a100-80gb", "h100-80gb")
SEEDS = (1, 2)


def scenario_file(tmp_path, **top):
    return preset_scenario(tmp_path, "kinds", {"rate_per_s": 4.0, "measure_s": 10, "prompt_mix": [{"share": 1, "tokens": [
        100, 1000]}], "reply_words": [50, 200]}, [{"name": "a", "kind": "colocated", "gpus": 1}], seeds=2, **top)


@pytest.fixture
def runner(tmp_path):
    r = Runner(Store(tmp_path / "store.sqlite", "test"), LocalPool(1), progress=False)
    yield r
    r.close()


def test_the_candidates_name_their_kinds_and_price_each_side(tmp_path):
    s = load_scenario(scenario_file(tmp_path))
    presets = side_presets(s, KINDS)
    every = candidates(presets, 2, ())
    assert [a["name"] for a in every] == ["a100-same-1", "a100-same-2", "h100-same-1", "h100-same-2", "split-1-1-a100",
                                          "split-1-1-a100-h100", "split-1-1-h100-a100", "split-1-1-h100"]
    planned = with_kinds(s, every, "--gpu-kinds")
    usd = {a.name: gpu_kinds.dollars_per_hour(planned, a) for a in planned.arrangements}
    assert usd["split-1-1-h100-a100"] == pytest.approx(2.90 + 1.64) and usd["a100-same-2"] == pytest.approx(3.28)
    paths = {a.name: a.kv_path for a in planned.arrangements if a.is_split}  # two kinds: between nodes
    assert paths == {"split-1-1-a100": None, "split-1-1-a100-h100": "inter_node", "split-1-1-h100-a100": "inter_node",
                     "split-1-1-h100": None}
    fit, per = within(s, every, Budget(4.0, None, 2), "--budget-per-hour")
    assert sorted(per) == ["a100-same-1", "a100-same-2", "h100-same-1", "split-1-1-a100"] and per["h100-same-1"] == 2.90


def test_ranked_per_dollar_the_top_two_equal_the_exhaustive_search(tmp_path, runner):
    s = load_scenario(scenario_file(tmp_path))
    planned, per = within(s, candidates(side_presets(s, KINDS), 2, ()), Budget(6.0, None, 2), "--budget-per-hour")
    pruned = plan(planned, runner, SEEDS, 90.0, 0.5, per=per)
    full = plan(planned, runner, SEEDS, 90.0, 0.5, per=per, exhaustive=True)
    columns = ["arrangement", "goodput_per_s", "goodput_low_per_s", "goodput_high_per_s", "dollars_per_million"]
    pd.testing.assert_frame_equal(pruned[columns].head(2), full[columns].head(2))
    assert pruned["goodput_below_per_s"].notna().any()  # the pruning left some (else the test shows nothing)
    # the ranking is by goodput per dollar, the same as by dollars per million requests at the goodput
    searched = full.dropna(subset=["goodput_per_s"])
    assert list(searched["arrangement"]) == list(searched.sort_values("dollars_per_million", kind="stable")["arrangement"])
    assert (full.goodput_per_s / full.arrangement.map(per)).is_monotonic_decreasing


def test_the_cheapest_that_carries_a_rate_is_the_exhaustive_searchs(tmp_path, runner):
    s = load_scenario(scenario_file(tmp_path))
    every = candidates(side_presets(s, KINDS), 2, ())
    planned = with_kinds(s, every, "--gpu-kinds")
    rate = 20.0
    table, chosen = cheapest_for_rate(s, every, runner, SEEDS, 90.0, 0.5, rate)
    full = plan(planned, runner, SEEDS, 90.0, 0.5, exhaustive=True)  # every goodput and interval
    carries = full[full.goodput_low_per_s > rate]
    assert chosen == carries.sort_values(["dollars_per_hour", "arrangement"]).arrangement.iloc[0]
    assert table.arrangement.iloc[-1] == chosen


def test_equal_cost_pools_side_by_side_with_paired_differences(tmp_path, runner):
    s = load_scenario(scenario_file(tmp_path))
    table = iso(s, runner, SEEDS, 90.0, 0.5, side_presets(s, KINDS), Budget(4.6, None, 2), (), "--iso-cost")
    assert list(table.pool) == ["all a100-80gb", "all h100-80gb", "a100-80gb reading, h100-80gb writing",
                                "h100-80gb reading, a100-80gb writing"]
    assert (table.dollars_per_hour <= 4.6).all()
    mixed = table[table.pool.str.contains("reading")]
    assert mixed.vs_best_single_per_million.notna().all()
    assert (mixed.vs_best_single_low <= mixed.vs_best_single_per_million).all()
    assert table[~table.pool.str.contains("reading")].vs_best_single_per_million.isna().all()


@pytest.mark.parametrize(("extra", "fragment"), [
    (["--gpu-kinds", "a100-80gb,h100-80gb", "--budget-per-hour", "1"],
     "--budget-per-hour: got 1 $/h, which no arrangement of up to 16 GPUs fits: the cheapest, a100-same-1, costs 1.64 $/h"),
    (["--gpu-kinds", "a100-80gb", "--power-budget-kw", "0.2"],
     "--power-budget-kw: got 0.2 kW, which no arrangement of up to 16 GPUs fits: the cheapest, a100-same-1, costs 1.64 "
     "$/h and draws 0.40 kW; expected a budget of at least 0.40 kW"),
    (["--gpu-kinds", "a100-80gb", "--iso-cost", "1"], "--iso-cost: got 1 $/h, which no arrangement"),
    (["--budget-per-hour", "5"], "--budget-per-hour: got it without --gpu-kinds"),
    (["--gpu-kinds", "a100-80gb,v100", "--budget-per-hour", "5"], "--gpu-kinds: got 'v100', no such GPU kind"),
    (["--gpu-kinds", "a100-80gb,a100-80gb", "--budget-per-hour", "5"], "expected distinct GPU kinds"),
    (["--gpu-kinds", "a100-80gb,b200", "--budget-per-hour", "5"],
     "--gpu-kinds: got b200, but no preset of the model, TP and engine of a100-80gb/llama-2-7b/tp1/vidur-sarathi exists on b200"),
    (["--gpu-kinds", "a100-80gb", "--budget-per-hour", "-5"], "--budget-per-hour: got '-5'"),
    (["--gpu-kinds", "a100-80gb", "--gpus", "4"], "--gpu-kinds: got it with --gpus, expected a budget instead"),
    (["--gpu-kinds", "a100-80gb", "--budget-per-hour", "5", "--tp", "2,4"],
     "--tp: got 2,4, but a100-80gb has no preset of a100-80gb/llama-2-7b/tp1/vidur-sarathi's model and engine at those "
     "degrees"),
    (["--gpu-kinds", "a100-80gb", "--budget-per-hour", "5", "--splits", "16"],
     "--splits: got 16, expected reading GPU counts below --max-gpus 16"),
    (["--gpu-kinds", "a100-80gb", "--rate", "5", "--cost-error", "10"],
     "--cost-error: got it with --gpu-kinds and --rate, expected it with --budget-per-hour or --power-budget-kw"),
    (["--gpu-kinds", "a100-80gb", "--budget-per-hour", "5", "--over-time"],
     "--over-time: got it with --gpu-kinds, expected one at a time (a plan over the day moves GPUs of one pool between "
     "reading and writing): plan --gpu-kinds at the busiest period's --rate picks the pool, then plan --over-time"),
])
def test_every_bad_kind_or_budget_is_one_line(tmp_path, capsys, extra, fragment):
    out = tmp_path / "out"
    assert main(["plan", str(scenario_file(tmp_path)), *extra, "--out", str(out), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and fragment in err, err
    assert not out.exists()


def test_the_command_writes_the_table_the_block_and_the_picture(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["plan", str(scenario_file(tmp_path)), "--gpu-kinds", "a100-80gb,h100-80gb", "--budget-per-hour", "3",
                 "--max-gpus", "2", "--chunks", "none", "--out", str(out), "--workers", "1",
                 "--html", str(tmp_path / "p.html")]) == 0
    text = capsys.readouterr().out
    assert "carries the most per dollar" in text and "as a scenario arrangement: {name: " in text
    table = pd.read_csv(out / "plan.csv")
    assert set(table.arrangement) == {"a100-same-1", "h100-same-1"} and (out / "plan.png").stat().st_size > 0
    assert "$/M at goodput" in (tmp_path / "p.html").read_text()
    # the two best per dollar checked against the presets' stated errors (the larger of the two kinds'), per dollar
    line = next(x for x in text.splitlines() if x.startswith("cost error"))
    assert line.startswith("cost error (the largest stated errors of a100-80gb/llama-2-7b/tp1/vidur-sarathi, "
                           "h100-80gb/llama-2-7b/tp1/vidur-sarathi): ")
    assert ("holds for cost errors up to" in line and "next: " in line) or "overtakes" in line
    best = table.iloc[0].arrangement
    assert f"the winner {best} holds" in line or f"overtakes {best}" in line  # the winner per dollar, not by goodput
    assert (table.cost_error_low_per_s <= table.goodput_per_s).all() and \
        (table.goodput_per_s <= table.cost_error_high_per_s).all()
    assert "goodput/s with the costs off (the top two)" in (tmp_path / "p.html").read_text()


def test_under_another_rule_the_costs_are_per_request_at_the_goodput_never_on_time(tmp_path, capsys):
    """A per-request rule of the field's kind (TTFT and end-to-end), or the percentiles criterion
    (which judges runs, not requests): the table's header, the recommendation and the page count
    the requests at the goodput (under any rule), never "on time"."""
    rules = {"per request": {"first_word_s": 2.0, "mean_gap_ms": None, "freeze_ms": None, "e2e_s": 20.0},
             "served": {"first_word_s": 2.0, "mean_gap_ms": 100.0, "freeze_ms": None, "criterion": "percentiles",
                        "percentile": 90}}
    for kind, slo in rules.items():
        out, html = tmp_path / kind, tmp_path / f"{kind}.html"
        assert main(["plan", str(scenario_file(tmp_path, slo=slo)), "--gpu-kinds", "a100-80gb,h100-80gb",
                     "--budget-per-hour", "3", "--max-gpus", "2", "--chunks", "none", "--out", str(out), "--workers", "1",
                     "--no-plots", "--html", str(html)]) == 0
        text = capsys.readouterr().out
        assert "$/M at goodput (95% interval)" in text and "requests/GPU-h" in text, text
        assert "$ per million requests at its goodput" in text and "on time" not in text.replace("on_time", ""), text
        page = html.read_text()
        assert "$/M at goodput (95% interval)" in page and "$/M on time" not in page


def test_tp_degrees_and_splits_narrow_or_widen_the_kinds_candidates(tmp_path, capsys):
    """--tp with --gpu-kinds: each kind's preset at each degree (names carry the TP where a kind
    has several; a degree without a preset is said on stderr); --splits: only those reading GPU
    counts among the splits."""
    path = scenario_file(tmp_path)
    path.write_text(path.read_text().replace("a100-80gb/llama-2-7b/tp1/vidur-sarathi", "h100-80gb/llama-3.1-8b/tp1/vllm-0.24"))
    s = load_scenario(path)
    presets = side_presets(s, ("h100-80gb", "h200"))
    every = candidates(presets, 3, (), splits=(2,))
    assert [a["name"] for a in every if a["kind"] == "disaggregated"] == [
        "split-2-1-h100", "split-2-1-h100-h200", "split-2-1-h200-h100", "split-2-1-h200"]
    out = tmp_path / "out"
    assert main(["plan", str(path), "--gpu-kinds", "h100-80gb,h200", "--tp", "1,2,8", "--splits", "1",
                 "--budget-per-hour", "10", "--max-gpus", "2", "--chunks", "none", "--out", str(out), "--workers", "1",
                 "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert "--tp: no preset h100-80gb/llama-3.1-8b/tp8/vllm-0.24, h200/llama-3.1-8b/tp8/vllm-0.24" in err
    table = pd.read_csv(out / "plan.csv")
    assert {"h100-tp2-same-2", "h200-tp2-same-2", "split-1-1-h100-tp1-h200-tp1"} <= set(table.arrangement)
    assert not any(n.startswith("split-") and not n.startswith("split-1-") for n in table.arrangement)


def test_each_kind_takes_its_own_presets_kv_capacity_not_the_scenarios(tmp_path, capsys):
    """A KV capacity the scenario writes is its own GPU's memory: a candidate of another kind (or
    of the same kind) takes each side's capacity from its side's preset, and the plan says on
    stderr that the written one is not carried (review F8: B200 planned with the H100's 50,000)."""
    path = preset_scenario(tmp_path, "kv", {"rate_per_s": 2.0, "measure_s": 20, "prompt_mix": [
        {"share": 1, "tokens": [100, 2000]}], "reply_words": [10, 300]},  # (a window: 40 counted requests at
        [{"name": "same", "kind": "colocated", "gpus": 2, "kv_capacity_tokens": 50000}],  # once bound no goodput)
        preset="h100-80gb/llama-3.1-8b/tp1/vllm-0.24")
    s = load_scenario(path)
    presets = side_presets(s, ("h100-80gb", "b200"))
    planned = {a.name: a for a in with_kinds(s, candidates(presets, 2, ()), "--gpu-kinds").arrangements}
    h100, b200 = (shipped.kv_capacity_tokens(presets[k]) for k in ("h100-80gb", "b200"))
    assert b200 > h100 > 50000
    assert planned["b200-same-2"].kv_capacities == (b200, b200) and planned["h100-same-1"].kv_capacities == (h100, h100)
    assert planned["split-1-1-h100-b200"].kv_capacities == (h100, b200)
    assert planned["split-1-1-b200"].kv_capacities == (b200, b200)
    assert main(["plan", str(path), "--gpu-kinds", "h100-80gb,b200", "--rate", "2", "--max-gpus", "1", "--chunks",
                 "none", "--out", str(tmp_path / "out"), "--workers", "1", "--no-plots"]) == 0
    assert ("warning: --gpu-kinds: arrangements.same.kv_capacity_tokens: 50000 is the scenario's GPU's memory, not "
            "carried: each candidate takes each side's KV capacity from its kind's preset") in capsys.readouterr().err


def test_the_block_to_paste_is_what_was_simulated_and_reproduces_the_figure(tmp_path, capsys):
    """The "as a scenario arrangement" block is the candidate as simulated, the keys carried from
    the scenario's engine included (review F34: a batch limit was left out, so the pasted block
    ran another engine): pasted into the scenario, `goodput` gives the plan's goodput."""
    path = scenario_file(tmp_path)
    spec = yaml.safe_load(path.read_text())
    spec["arrangements"][0]["max_batch_replies"] = 2  # (carried: it lowers the goodput)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    assert main(["plan", str(path), "--gpu-kinds", "a100-80gb,h100-80gb", "--budget-per-hour", "3", "--max-gpus", "1",
                 "--chunks", "none", "--out", str(out), "--workers", "1", "--no-plots"]) == 0
    text = capsys.readouterr().out
    block = yaml.safe_load(next(x for x in text.splitlines() if x.startswith("as a scenario arrangement: "))
                           .removeprefix("as a scenario arrangement: "))
    assert block["max_batch_replies"] == 2, block
    row = pd.read_csv(out / "plan.csv").iloc[0]
    assert block["name"] == row.arrangement
    pasted = tmp_path / "pasted.yaml"
    pasted.write_text(yaml.safe_dump({**spec, "arrangements": [block]}, sort_keys=False))
    assert main(["goodput", str(pasted), "--out", str(tmp_path / "g"), "--workers", "1", "--no-plots"]) == 0
    again = pd.read_csv(tmp_path / "g" / "goodput.csv").iloc[0]
    assert (again.goodput_per_s, again.goodput_low_per_s, again.goodput_high_per_s) == \
        (row.goodput_per_s, row.goodput_low_per_s, row.goodput_high_per_s)


def test_the_equal_cost_table_leads_with_the_pool_and_ranks_by_goodput(tmp_path, capsys):
    """G11 (review2): `plan --iso-cost` prints one row per pool led by the pool (as docs/cost.md
    shows), not a "rank" that was the pools' order; plan.csv's rank means what plan's does (1 = the
    most goodput)."""
    out = tmp_path / "out"
    assert main(["plan", str(scenario_file(tmp_path)), "--gpu-kinds", "a100-80gb,h100-80gb", "--iso-cost", "4.6",
                 "--max-gpus", "2", "--chunks", "none", "--out", str(out), "--workers", "1", "--no-plots"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("pool "))
    assert lines[at].split()[:4] == ["pool", "arrangement", "gpus", "goodput/s"] and "rank" not in lines[at]
    assert "GPU kinds" not in lines[at] and "$/M at goodput (95% interval)" in lines[at]
    table = pd.read_csv(out / "plan.csv")
    assert [x.split("  ")[0] for x in lines[at + 1:at + 1 + len(table)]] == list(table.pool)
    by_goodput = table.sort_values("goodput_per_s", ascending=False, kind="stable")
    assert list(by_goodput["rank"]) == list(range(1, len(table) + 1)), table[["pool", "rank", "goodput_per_s"]]
    assert list(table["rank"]) != list(range(1, len(table) + 1))  # (here the pools' order is not the goodput's)


def test_one_tp_degree_other_than_1_is_in_every_name_and_in_plan_csv(tmp_path, capsys):
    """G12 (review2): `plan --gpu-kinds --tp 2` (one degree left) names its candidates `-tp2`, as plain
    `plan --tp 2` does, and plan.csv says each side's TP (`tp`, `reading_tp`, `writing_tp`); without
    --tp the names stay plain."""
    path = scenario_file(tmp_path)
    path.write_text(path.read_text().replace("a100-80gb/llama-2-7b/tp1/vidur-sarathi", "h100-80gb/llama-3.1-8b/tp1/vllm-0.24"))
    s = load_scenario(path)
    names = [a["name"] for a in candidates(side_presets(s, ("h100-80gb", "h200")), 4, ())]
    assert "h100-same-2" in names and not any("-tp" in n for n in names)
    out = tmp_path / "out"
    assert main(["plan", str(path), "--gpu-kinds", "h100-80gb,h200", "--tp", "2", "--budget-per-hour", "12",
                 "--max-gpus", "4", "--chunks", "none", "--out", str(out), "--workers", "1", "--no-plots"]) == 0
    table = pd.read_csv(out / "plan.csv")
    same, split = table[table.kind == "colocated"], table[table.kind == "disaggregated"]
    assert not same.empty and not split.empty
    assert same.arrangement.str.contains(r"^(h100|h200)-tp2-same-").all(), list(same.arrangement)
    assert split.arrangement.str.contains("-tp2").all() and (same.tp == 2).all() and same.reading_tp.isna().all()
    assert (split.reading_tp == 2).all() and (split.writing_tp == 2).all() and split.tp.isna().all()

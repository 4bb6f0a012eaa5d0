"""GPU kinds, prices and mixed pools (docs/cost.md): the table, a scenario's kind keys and
`prices:`, `--price`, each bad kind or price refused in one line, and the costs of a hand-computed case."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml

from disagg_simpy.cli import main
from disagg_simpy.costs import gpus
from disagg_simpy.results.columns import COST_COLUMNS
from disagg_simpy.results.costs import per_million, with_costs
from disagg_simpy.scenario import gpu_kinds, load_scenario

WORKLOAD = {"rate_per_s": 1.0, "measure_s": 20, "prompt_mix": [{"share": 1, "tokens": [100, 400]}],
            "reply_words": [20, 60]}


def write(tmp_path, arrangements, **top) -> str:
    spec = {"name": "kinds", "workload": WORKLOAD, **top, "arrangements": arrangements}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def test_every_kind_has_memory_power_price_and_their_sources():
    assert set(gpus.NAMES) >= {"a100-80gb", "h100-80gb"}
    for k in gpus.KINDS.values():
        assert k.memory_gib > 0 and k.power_w > 0 and 0 < k.price_per_hour <= gpus.MAX_PRICE
        assert "as of 2026-" in k.price_source and "systems/" in k.spec_source
    # AIConfigurator's system files state these (systems/<gpu>_sxm.yaml: power, mem_capacity)
    assert [(gpus.KINDS[n].power_w, gpus.KINDS[n].memory_gib) for n in ("a100-80gb", "h100-80gb", "h200", "b200")] == \
        [(400, 80), (700, 80), (700, 141), (1000, 180)]


def test_presets_gpus_prints_the_table(capsys):
    assert main(["presets", "gpus"]) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in gpus.NAMES) and "Spheron" in out and "--price" in out


def test_hand_computed_costs_and_the_cheapest_choice(tmp_path):
    """Two kinds at given prices and known goodputs: 2 A100s at 2.00 carrying 1.0/s on time, 1
    H100 at 3.00 carrying 2.0/s. By hand: A100s 4.00 $/h / 3,600 requests an hour = 1,111.11 $/M,
    H100 3.00 / 7,200 = 416.67 $/M: the H100 is cheaper per request at the goodput though dearer per GPU."""
    path = write(tmp_path, [{"name": "a100s", "kind": "colocated", "gpus": 2, "gpu": "a100-80gb"},
                            {"name": "h100", "kind": "colocated", "gpus": 1, "gpu": "h100-80gb"}],
                 prices={"a100-80gb": 2.0, "h100-80gb": 3.0})
    s = load_scenario(path)
    table = pd.DataFrame({"arrangement": ["a100s", "h100"], "goodput_per_s": [1.0, 2.0],
                          "goodput_low_per_s": [0.5, 1.5], "goodput_high_per_s": [1.25, 2.5]})
    costs = with_costs(table, s).set_index("arrangement")
    assert costs.loc["a100s", "dollars_per_hour"] == 4.0 and costs.loc["h100", "dollars_per_hour"] == 3.0
    assert costs.loc["a100s", "dollars_per_million"] == pytest.approx(4.0 / 3600 * 1e6, rel=1e-12)
    assert costs.loc["h100", "dollars_per_million"] == pytest.approx(3.0 / 7200 * 1e6, rel=1e-12)
    assert costs["dollars_per_million"].idxmin() == "h100"
    # the interval's ends swap: the goodput's high end gives the low dollars
    assert costs.loc["h100", "dollars_per_million_low"] == pytest.approx(3.0 / (2.5 * 3600) * 1e6)
    assert costs.loc["h100", "dollars_per_million_high"] == pytest.approx(3.0 / (1.5 * 3600) * 1e6)
    assert costs.loc["a100s", "requests_per_gpu_hour"] == 1800 and costs.loc["h100", "requests_per_gpu_hour"] == 7200
    assert costs.loc["a100s", "power_kw"] == pytest.approx(0.8) and costs.loc["h100", "requests_per_kwh"] == \
        pytest.approx(7200 / 0.7)
    assert per_million(3.0, 0.0) == math.inf and math.isnan(per_million(math.nan, 1.0))


def test_no_kind_and_no_price_shows_no_costs(tmp_path):
    s = load_scenario(write(tmp_path, [{"name": "a", "kind": "colocated", "gpus": 1}]))
    table = pd.DataFrame({"arrangement": ["a"], "goodput_per_s": [1.0]})
    assert not gpu_kinds.shows_costs(s) and list(with_costs(table, s).columns) == list(table.columns)
    assert "prices" not in s.model_dump(mode="json")  # files (run.json, store keys) as before


def test_a_mixed_pool_takes_each_sides_preset_and_the_slower_ship(tmp_path):
    s = load_scenario(write(tmp_path, [
        {"name": "mix", "kind": "disaggregated", "reading_gpus": 4, "writing_gpus": 4, "reading_tp": 4, "writing_tp": 4,
         "reading_gpu": "h100-80gb", "writing_gpu": "a100-80gb", "kv_path": "inter_node"}],
        cost={"preset": "a100-80gb/llama-2-70b/tp4/vllm-splitwise"}))
    a = s.arrangements[0]
    assert a.reading_cost.preset == "h100-80gb/llama-2-70b/tp4/vllm-splitwise"
    assert a.writing_cost is None  # the scenario's own preset, on a100-80gb
    assert gpu_kinds.side_kinds(s, a) == ("h100-80gb", "a100-80gb")
    from disagg_simpy.costs.presets import kv_ship_ms_per_token as ship

    assert a.kv_ship_ms(s.cost) == max(ship("h100-80gb/llama-2-70b/tp4/vllm-splitwise", "inter_node"),
                                       ship("a100-80gb/llama-2-70b/tp4/vllm-splitwise", "inter_node")) == 0.01045
    assert gpu_kinds.dollars_per_hour(s, a) == pytest.approx(4 * 2.90 + 4 * 1.64)
    assert gpu_kinds.power_kw(s, a) == pytest.approx(4 * 0.7 + 4 * 0.4)
    again = s.with_overrides(seed=2)  # a re-validated copy keeps the pool as it was
    assert again.arrangements[0].reading_cost == a.reading_cost and again.arrangements[0].kv_ship_ms(again.cost) == 0.01045


A100_31 = "a100-80gb/llama-3.1-70b/tp4/vllm-0.14"
H100_31 = "h100-80gb/llama-3.1-70b/tp4/vllm-0.24"


def test_a_kind_without_the_engine_version_runs_its_newest_of_that_engine_and_says_so(tmp_path):
    """The composed Llama-3.1-70B presets have vLLM 0.14 on A100s and 0.24 on H100s (and no vLLM
    0.14 on H100s): an H100 side of a scenario on the A100 preset runs vLLM 0.24, the newest vLLM
    there, and the run warns that the figures compare engine versions; the same engine is kept
    (SGLang stays SGLang), and a preset whose version is no number (vllm-splitwise) only moves to
    the same name."""
    assert gpu_kinds.preset_on(A100_31, "h100-80gb") == H100_31
    assert gpu_kinds.preset_on(H100_31, "a100-80gb") == A100_31  # the newest vLLM on A100s: 0.14
    assert gpu_kinds.preset_on("h100-80gb/llama-3.1-70b/tp4/sglang-0.5.14", "a100-80gb") == \
        "a100-80gb/llama-3.1-70b/tp4/sglang-0.5.10"
    assert gpu_kinds.preset_on(A100_31, "a100-80gb") == A100_31 and gpu_kinds.version_note(A100_31, "a100-80gb") is None
    assert gpu_kinds.preset_on("a100-80gb/llama-2-70b/tp4/vllm-splitwise", "h200") is None
    assert "no vLLM 0.14.0 preset of Llama-3.1-70B TP4: it runs " + H100_31 in gpu_kinds.version_note(A100_31, "h100-80gb")
    s = load_scenario(write(tmp_path, [
        {"name": "h100s", "kind": "colocated", "gpus": 4, "tp": 4, "gpu": "h100-80gb"},
        {"name": "a100s", "kind": "colocated", "gpus": 4, "tp": 4, "gpu": "a100-80gb"},
        {"name": "mix", "kind": "disaggregated", "reading_gpus": 4, "writing_gpus": 4, "reading_tp": 4, "writing_tp": 4,
         "reading_gpu": "h100-80gb", "writing_gpu": "a100-80gb", "kv_path": "inter_node"}], cost={"preset": A100_31}))
    h100s, a100s, mix = s.arrangements
    assert h100s.cost.preset == H100_31 and mix.reading_cost.preset == H100_31 and mix.writing_cost is None
    warned = [w for w in s.preset_info()["preset_warnings"] if "engine versions" in w]
    assert len(warned) == 2, warned  # the H100s against the scenario's preset, and the mixed pool; not the A100s
    assert warned[0].startswith("arrangements[0]: h100s runs vLLM 0.24.0") and "not the 0.14.0" in warned[0]
    assert warned[1].startswith("arrangements[2]: mix runs vLLM 0.24.0 reading (" + H100_31 + ") and 0.14.0 writing")


def test_sides_with_different_kv_layouts_are_warned(tmp_path):
    s = load_scenario(write(tmp_path, [
        {"name": "mix", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2, "writing_tp": 2,
         "reading_cost": {"preset": "a100-80gb/opt-13b/tp1/distserve"}, "writing_cost": {"preset": "a100-80gb/opt-13b/tp2/distserve"}}]))
    warned = [w for w in s.preset_info()["preset_warnings"] if "lay the KV cache out differently" in w]
    assert len(warned) == 1 and "TP1 reading and TP2 writing" in warned[0]


def run_bad(tmp_path, capsys, argv) -> str:
    assert main([*argv, "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()
    return err


COLO = {"name": "a", "kind": "colocated", "gpus": 4, "tp": 4}
BAD = [
    ("unknown-kind-in-prices", [COLO], {"prices": {"h100": 2.0}}, [],
     ["prices: got 'h100', no such GPU kind; did you mean 'h100-80gb'?"]),
    ("negative-price", [COLO], {"prices": {"h100-80gb": -1}}, [], ["prices.h100-80gb: got -1, expected a price in USD"]),
    ("zero-price", [COLO], {"prices": {"h100-80gb": 0}}, [], ["prices.h100-80gb: got 0"]),
    ("text-price", [COLO], {"prices": {"h100-80gb": "cheap"}}, [], ["prices.h100-80gb: got 'cheap'"]),
    ("prices-not-a-mapping", [COLO], {"prices": [2.0]}, [], ["prices: got [2.0], expected a mapping of GPU kind"]),
    ("unknown-gpu-key", [{**COLO, "gpu": "v100"}], {}, [], ["arrangements[0].gpu: got 'v100', no such GPU kind"]),
    ("unknown-reading-gpu", [{"name": "s", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1,
                              "reading_gpu": "x100"}], {}, [], ["arrangements[0].reading_gpu: got 'x100'"]),
    ("kind-without-that-preset", [{**COLO, "gpu": "b200"}], {"cost": {"preset": "a100-80gb/llama-2-70b/tp4/vllm-splitwise"}}, [],
     ["arrangements[0].gpu: got 'b200', but no preset b200/llama-2-70b/tp4/vllm-splitwise exists", "expected one of a100-80gb, h100-80gb"]),
    ("flag-bad-kind", [COLO], {}, ["--price", "h300=2"], ["--price h300=2: got 'h300', no such GPU kind"]),
    ("flag-bad-price", [COLO], {}, ["--price", "h100-80gb=nan"], ["--price h100-80gb=nan: got nan"]),
    ("flag-no-equals", [COLO], {}, ["--price", "h100-80gb"], ["--price: got 'h100-80gb', expected KIND=USD"]),
]


@pytest.mark.parametrize(("arrangements", "top", "extra", "fragments"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_every_bad_kind_or_price_is_one_line(tmp_path, capsys, arrangements, top, extra, fragments):
    err = run_bad(tmp_path, capsys, [write(tmp_path, arrangements, **top), *extra])
    for fragment in fragments:
        assert fragment in err, err


def test_a_run_with_a_price_shows_its_costs_per_request_on_time_under_their_own_names(tmp_path, capsys):
    """summary.csv's costs count the requests on time in the run; goodput.csv's and plan.csv's
    (columns.COST) the requests at the goodput, of which only the target share is on time: two
    quantities, two names (review F12: both were `dollars_per_million`, "per million on-time
    requests"); only the dollars and kW an hour are shared."""
    path = write(tmp_path, [{"name": "a", "kind": "colocated", "gpus": 1}], cost={"preset": "a100-80gb/llama-2-7b/tp1/vidur-sarathi"})
    assert main([path, "--out", str(tmp_path / "out"), "--no-plots", "--price", "a100-80gb=2"]) == 0
    out = capsys.readouterr().out
    assert "dollars_" in out
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    on_time = summary.n_requests[0] * summary.on_time_pct[0] / 100 / 20  # measured on time per second
    assert summary.dollars_per_hour[0] == 2.0
    assert summary.dollars_per_million_on_time[0] == pytest.approx(2.0 / (on_time * 3600) * 1e6)
    assert summary.on_time_per_gpu_hour[0] == pytest.approx(on_time * 3600)
    assert set(summary.columns) & set(COST_COLUMNS) == {"dollars_per_hour", "power_kw"}
    assert main([path, "--out", str(tmp_path / "plain"), "--no-plots"]) == 0  # no kind named, no price: no costs
    assert "dollars_per_hour" not in pd.read_csv(tmp_path / "plain" / "summary.csv").columns


def test_the_recommendation_names_the_cheapest_per_on_time_request(tmp_path):
    """The hand-computed case through plan's recommendation: the H100 (416.67 $/M, interval
    400.00-444.44) beats the A100s (1,111.11 $/M, 1,000.00-1,234.57): the intervals do not overlap."""
    from disagg_simpy.cli.plan_kinds import recommendation

    path = write(tmp_path, [{"name": "a100s", "kind": "colocated", "gpus": 2, "gpu": "a100-80gb"},
                            {"name": "h100", "kind": "colocated", "gpus": 1, "gpu": "h100-80gb"}],
                 prices={"a100-80gb": 2.0, "h100-80gb": 3.0})
    s = load_scenario(path)
    table = with_costs(pd.DataFrame({"arrangement": ["h100", "a100s"], "goodput_per_s": [2.0, 1.0],
                                     "goodput_low_per_s": [1.875, 0.9], "goodput_high_per_s": [2.0833333333333335, 1.1111111111111112]}), s)
    assert table.dollars_per_million_low[0] == pytest.approx(400.0) and table.dollars_per_million_high[1] == \
        pytest.approx(4.0 / (0.9 * 3600) * 1e6)
    line = recommendation(table, 90.0, "dollar")
    assert line.startswith("h100 (h100-80gb) carries the most per dollar: 2.00 requests/s")
    assert "416.67 $ per million requests at its goodput" in line
    assert "it beats a100s: 400.00-444.44 against 1,000.00-1,234.57" in line


def test_per_kw_the_recommendation_compares_goodput_per_kw_intervals(tmp_path):
    """Ranked per kW (--power-budget-kw), the best beats the runner-up when their 95% intervals
    of goodput per kW do not overlap, whatever their dollars per million (review F3: the $/M
    intervals were compared, and disjoint ones called "overlap"); overlapping ones are too close."""
    from disagg_simpy.cli.plan_kinds import recommendation

    path = write(tmp_path, [{"name": "h100s", "kind": "colocated", "gpus": 2, "gpu": "h100-80gb"},
                            {"name": "a100", "kind": "colocated", "gpus": 1, "gpu": "a100-80gb"}],
                 prices={"a100-80gb": 1.0, "h100-80gb": 10.0})
    s = load_scenario(path)

    def table(a100_low, a100_high):
        return with_costs(pd.DataFrame({"arrangement": ["h100s", "a100"], "goodput_per_s": [10.0, 2.0],
                                        "goodput_low_per_s": [9.5, a100_low], "goodput_high_per_s": [10.5, a100_high]}), s)

    t = table(1.9, 2.1)
    kw = t.set_index("arrangement").power_kw
    per_kw = {n: (low / kw[n], high / kw[n]) for n, low, high in
              zip(t.arrangement, t.goodput_low_per_s, t.goodput_high_per_s, strict=True)}
    assert per_kw["h100s"][0] > per_kw["a100"][1]  # disjoint per kW ...
    assert t.dollars_per_million_low[0] > t.dollars_per_million_high[1]  # ... while the best costs more per request
    line = recommendation(t, 90.0, "kW")
    assert line.startswith("h100s (h100-80gb) carries the most per kW"), line
    ranges = (f"{per_kw['h100s'][0]:.2f}-{per_kw['h100s'][1]:.2f} against {per_kw['a100'][0]:.2f}-"
              f"{per_kw['a100'][1]:.2f} requests/s per kW, 95% intervals")
    assert f"it beats a100: {ranges}" in line and "overlap" not in line, line
    wide = table(1.0, 10.0 * kw["a100"] / kw["h100s"])  # the runner-up's interval reaches the best's low end per kW
    assert "too close to call against a100: " in recommendation(wide, 90.0, "kW") and \
        "requests/s per kW, 95% intervals overlap" in recommendation(wide, 90.0, "kW")

"""The field's SLO rules (`slo: {preset: ...}`), each on a hand-built trace with hand-computed
pass/fail, and goodput under each agreeing with a direct scan of rates.

The trace: one GPU (12 ms per iteration, 0.4 ms per reply written, 0.05 ms per prompt token).
Request 0 arrives at 0 with 8,000 prompt tokens and 3 words; request 1 at 0.1 s with 200 tokens
and 4 words. Request 0's prompt is read alone, 0 to 0.412 s (its word 1). Request 1 waits for
that iteration (delay 0.312 s) and is read in the next, with request 0's word 2: 12 + 0.4 + 10 =
22.4 ms, word 1 at 0.4344 s (TTFT 0.3344 s). Then two replies: 12.8 ms, 0.4472 s (request 0's
last word); request 1 alone: 12.4 ms twice, last word at 0.472 s. So:
request 0: TTFT 0.412 s, gaps 22.4 and 12.8 ms (TPOT 17.6 ms), end-to-end 0.4472 s;
request 1: TTFT 0.3344 s, gaps 12.8, 12.4, 12.4 ms (TPOT 12.5333 ms), end-to-end 0.372 s.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml
from helpers import run_rows

from disagg_simpy import load_scenario, run
from disagg_simpy.cli import main
from disagg_simpy.scenario.schema import Slo

TRACE = [(0.0, 8000, 3), (0.1, 200, 4)]
TTFT = (0.412, 0.3344)
TPOT_MS = (17.6, (12.8 + 12.4 + 12.4) / 3)
E2E = (0.4472, 0.372)
DELAY = (0.0, 0.312)
GAPS_MS = sorted([22.4, 12.8, 12.8, 12.4, 12.4])


def lin(values, q):
    """numpy's linear percentile, by hand."""
    v = sorted(values)
    h = (len(v) - 1) * q / 100
    lo = math.floor(h)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (h - lo)


def summary(tmp_path, slo, rows=TRACE):
    return run_rows(tmp_path, rows, slo=slo).summary.iloc[0]


def test_the_trace_is_timed_as_the_docstring_says(tmp_path):
    r = run_rows(tmp_path, TRACE, slo={"preset": "vllm-bench", "e2e_s": 10}).requests
    assert r["first_word_s"].tolist() == pytest.approx(TTFT)
    assert r["mean_gap_ms"].tolist() == pytest.approx(TPOT_MS)
    assert (r["finished_at_s"] - r["arrived_at_s"]).tolist() == pytest.approx(E2E)
    assert r["queued_s"].tolist() == pytest.approx(DELAY)


@pytest.mark.parametrize(("ttft", "tpot", "on_time"), [
    (0.25, 100, 0.0),  # the preset's chatbot limits: both first words are later than 0.25 s
    (0.4, 100, 50.0),  # request 0's 0.412 s is late, request 1's 0.3344 s is not
    (0.5, 15, 50.0),  # request 0's TPOT 17.6 ms is over 15 ms
    (0.5, 17.6, 100.0),  # a limit met exactly (within D8's 1 ns) passes
])
def test_distserve_judges_ttft_and_tpot_per_request(tmp_path, ttft, tpot, on_time):
    overrides = {} if ttft == 0.25 else {"first_word_s": ttft, "mean_gap_ms": tpot}
    row = summary(tmp_path, {"preset": "distserve", **overrides})
    assert row["on_time_pct"] == on_time
    assert pd.isna(row["froze_pct"])  # DistServe judges no freezes


@pytest.mark.parametrize(("slo", "on_time", "late_e2e"), [
    ({"first_word_s": 0.5, "mean_gap_ms": 15}, 50.0, None),  # TPOT 17.6 ms (excl. word 1) over 15
    ({"first_word_s": 0.5, "mean_gap_ms": 20, "e2e_s": 0.45}, 100.0, 0.0),
    ({"first_word_s": 0.5, "mean_gap_ms": 20, "e2e_s": 0.4}, 50.0, 50.0),  # request 0's 0.4472 s
    ({"e2e_s": 0.37}, 0.0, 100.0),  # request 1's 0.372 s too
    # TPOT with word 1 counted (end-to-end / words): 149.07 and 93 ms
    ({"mean_gap_ms": 100, "tpot": "inclusive"}, 50.0, None),
    ({"mean_gap_ms": 150, "tpot": "inclusive"}, 100.0, None),
])
def test_vllm_bench_judges_ttft_tpot_and_e2el_per_request(tmp_path, slo, on_time, late_e2e):
    row = summary(tmp_path, {"preset": "vllm-bench", **slo})
    assert row["on_time_pct"] == on_time
    if late_e2e is not None:
        assert row["late_e2e_pct"] == late_e2e
    else:
        assert "late_e2e_pct" not in row.index


def test_sarathi_serve_judges_p99_of_every_gap_and_the_median_delay(tmp_path):
    p99_tbt, median_delay = lin(GAPS_MS, 99), lin(DELAY, 50)  # 22.016 ms, 0.156 s
    row = summary(tmp_path, {"preset": "sarathi-serve"})
    assert row["slo_gap_ms"] == pytest.approx(p99_tbt) and row["slo_delay_s"] == pytest.approx(median_delay)
    assert bool(row["slo_met"])  # the preset's 0.2 s and 2 s
    assert bool(summary(tmp_path, {"preset": "sarathi-serve", "gap_ms": 22.016, "delay_s": 0.156})["slo_met"])
    assert not bool(summary(tmp_path, {"preset": "sarathi-serve", "gap_ms": 22.0})["slo_met"])
    assert not bool(summary(tmp_path, {"preset": "sarathi-serve", "delay_s": 0.155})["slo_met"])
    # P99 of the delays (0.30888 s) would fail 0.2 s where the median passes
    assert not bool(summary(tmp_path, {"preset": "sarathi-serve", "delay_s": 0.2, "percentile_of": {}})["slo_met"])


def test_turning_off_a_preset_limit_drops_its_percentile_too():
    """`slo: {preset: sarathi-serve, delay_s: null}` judges P99 TBT alone (review F6: it was
    refused about the preset's own `percentile_of: {delay_s: 50}`, a key the file never wrote);
    a `percentile_of` written beside the preset is kept as written."""
    slo = Slo.model_validate({"preset": "sarathi-serve", "delay_s": None})
    assert list(slo.on) == ["gap_ms"] and not slo.percentile_of
    with pytest.raises(ValueError, match="percentile_of: got delay_s whose limit is off"):
        Slo.model_validate({"preset": "sarathi-serve", "delay_s": None, "percentile_of": {"delay_s": 50}})


def test_mlperf_server_and_interactive_judge_p99_ttft_and_tpot(tmp_path):
    for preset in ("mlperf-llama2-70b-server", "mlperf-llama2-70b-interactive"):
        row = summary(tmp_path, {"preset": preset})
        assert row["slo_first_word_s"] == pytest.approx(lin(TTFT, 99))  # 0.411224 s
        assert row["slo_mean_gap_ms"] == pytest.approx(lin(TPOT_MS, 99))  # 17.549 ms
        assert bool(row["slo_met"])  # within 2 s / 200 ms and 0.45 s / 40 ms
    # 9,000 prompt tokens: request 0's word 1 at 0.462 s, request 1's at 0.4844 s (TTFT 0.3844 s)
    longer = [(0.0, 9000, 3), (0.1, 200, 4)]
    p99 = lin([0.462, 0.3844], 99)  # 0.461224 s: over the interactive 450 ms, within the server's 2 s
    interactive = summary(tmp_path, {"preset": "mlperf-llama2-70b-interactive"}, longer)
    assert interactive["slo_first_word_s"] == pytest.approx(p99) and not bool(interactive["slo_met"])
    assert bool(summary(tmp_path, {"preset": "mlperf-llama2-70b-server"}, longer)["slo_met"])


def test_each_rule_is_worded_after_itself():
    words = {p: Slo.model_validate({"preset": p, **({"first_word_s": 1} if p == "vllm-bench" else {})}).verdict()
             for p in ("distserve", "vllm-bench", "sarathi-serve", "mlperf-llama2-70b-server",
                       "mlperf-llama2-70b-interactive")}
    assert words == {
        "distserve": "meets TTFT <= 0.25 s and TPOT <= 100 ms per request",
        "vllm-bench": "meets TTFT <= 1 s per request",
        "sarathi-serve": "meets P99 TBT <= 0.2 s and median delay <= 2 s",
        "mlperf-llama2-70b-server": "meets P99 TTFT <= 2 s and P99 TPOT <= 200 ms",
        "mlperf-llama2-70b-interactive": "meets P99 TTFT <= 0.45 s and P99 TPOT <= 40 ms",
    }
    assert Slo().verdict() == "on time"  # the explainer's rule keeps its words


#: Limits for the scan's small workload (760-token prompts, 4-word replies, one GPU): each rule
#: binds somewhere between 5 and 40 requests/s.
SCAN_RULES = {
    "distserve": {"first_word_s": 0.1, "mean_gap_ms": 30},
    "vllm-bench": {"first_word_s": 0.1, "mean_gap_ms": 30, "e2e_s": 0.2},
    "sarathi-serve": {"gap_ms": 60, "delay_s": 0.02},
    "mlperf-llama2-70b-server": {"first_word_s": 0.12, "mean_gap_ms": 40},
    "mlperf-llama2-70b-interactive": {"first_word_s": 0.1},
}


def scan_scenario(folder, preset):
    spec = {"name": f"scan-{preset}", "seed": 3,
            "workload": {"rate_per_s": 10, "n_requests": 60, "arrivals": "poisson",
                         "prompt_mix": [{"share": 1, "tokens": {"fixed": 760}}], "reply_words": {"fixed": 4}},
            "slo": {"preset": preset, **SCAN_RULES[preset]},
            "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}]}
    path = folder / f"{preset}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def passes(scenario, rate: float) -> bool:
    row = run(scenario.with_overrides(**{"workload.rate_per_s": rate})).summary.iloc[0]
    if scenario.slo.criterion == "percentiles":
        return bool(row["slo_met"])
    return bool(row["on_time_pct"] >= 90 - 1e-9)


@pytest.mark.parametrize("preset", list(SCAN_RULES))
def test_goodput_under_each_rule_agrees_with_a_direct_scan(tmp_path, capsys, preset):
    path = scan_scenario(tmp_path, preset)
    assert main(["goodput", str(path), "--out", str(tmp_path / "g"), "--no-plots", "--workers", "1",
                 "--tolerance", "0.5"]) == 0
    out = capsys.readouterr().out
    scenario = load_scenario(path)
    assert scenario.slo.at_text(90) in out  # the title words the rule
    assert "on time" not in out.split("\n")[0]
    g = pd.read_csv(tmp_path / "g" / "goodput.csv").iloc[0]
    lo, hi = g["passing_rate_per_s"], g["failing_rate_per_s"]
    assert passes(scenario, lo) and not passes(scenario, hi)
    # a direct scan: every rate on a grid below the passing rate passes, and none at or above the failing one
    verdicts = {r: passes(scenario, r) for r in (2.0, 4.0, 8.0, 16.0, 32.0, 64.0)}
    assert all(v for r, v in verdicts.items() if r <= lo), verdicts
    assert not any(v for r, v in verdicts.items() if r >= hi), verdicts

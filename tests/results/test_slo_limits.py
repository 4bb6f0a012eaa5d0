"""On-time limits that can be off (null), and the `percentiles` criterion.

A limit that is off judges nothing: no reply is late on it, its columns are empty, tables and
pictures leave it out. With `criterion: percentiles` a run (or a rate, over seeds) meets the
limits when the P-th percentile of each judged quantity is within its limit, as simdistserve's
search does; the figures here are computed by hand from a constructed trace.
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from helpers import run_rows

from disagg_simpy import load_scenario, run
from disagg_simpy.cli import main
from disagg_simpy.results.report import format_table
from disagg_simpy.results.why_late import why_late_text

#: a trace that freezes replies on one colocated GPU: a long prompt read while replies are in progress
FREEZING = [(0.0, 200, 60), (0.05, 200, 60), (0.3, 8000, 5), (0.31, 8000, 5), (0.6, 200, 40)]


def test_freeze_off_never_calls_a_reply_frozen(tmp_path):
    on = run_rows(tmp_path, FREEZING, name="on")
    assert on.summary["froze_pct"].iloc[0] > 0 and (on.requests["n_freezes"] > 0).any()  # (the trace does freeze)
    off = run_rows(tmp_path, FREEZING, name="off", slo={"freeze_ms": None})
    req, summary = off.requests, off.summary
    assert req["n_freezes"].isna().all() and req["frozen_s"].isna().all()
    assert len(off.freezes) == 0
    for column in ("froze_pct", "late_froze_only_pct", "n_freezes", "freezes_by_long_prompt_pct"):
        assert summary[column].isna().all(), column
    # on time = finished, first word and mean gap within their limits: the freezes no longer count
    ok = req["finished_at_s"].notna() & (req["first_word_s"] <= 2 + 1e-9) & (req["mean_gap_ms"].fillna(0) <= 50 + 1e-6)
    assert (req["on_time"] == ok).all() and req["on_time"].sum() > on.requests["on_time"].sum()
    table = format_table(summary)
    assert "froze_" not in table and "late_mean_" in table
    assert "freezes only" not in why_late_text([off]) and "freezes only" in why_late_text([on])


def test_first_word_and_mean_gap_off(tmp_path):
    rows = [(0.0, 8000, 3), (0.001, 8000, 3)]  # first words after 0.412 and 0.823 s; gaps up to 0.4 s
    slo = {"first_word_s": 0.5, "mean_gap_ms": 5, "freeze_ms": None}
    strict = run_rows(tmp_path, rows, name="strict", slo=slo)
    assert not strict.requests["on_time"].any()
    assert strict.summary["late_first_word_pct"].iloc[0] == 50 and strict.summary["late_mean_gap_pct"].iloc[0] == 100
    loose = run_rows(tmp_path, rows, name="loose", slo={**slo, "first_word_s": None, "mean_gap_ms": None, "freeze_ms": 1000})
    assert loose.summary["late_first_word_pct"].isna().all() and loose.summary["late_mean_gap_pct"].isna().all()
    assert loose.requests["on_time"].all()  # no gap over 1 s: nothing else is judged
    text = format_table(loose.summary)
    assert "late_first_" not in text and "late_mean_" not in text and "froze_" in text


#: ten requests far apart, prompts 100..1000 tokens, replies of 3 words: each runs alone, so its
#: first-word wait is 12 + 0.05 x prompt ms = 17, 22, ..., 62 ms and each gap 12 + 0.4 = 12.4 ms
ALONE = [(10.0 * i, 100 * i, 3) for i in range(1, 11)]
P90_WAIT_S = 0.0575  # numpy's linear P90 of 17..62 ms: h = 9 x 0.9 = 8.1, 57 + 0.1 x 5 = 57.5 ms


def test_percentile_figures_are_the_hand_computed_ones(tmp_path):
    slo = {"criterion": "percentiles", "percentile": 90, "first_word_s": P90_WAIT_S, "mean_gap_ms": 12.4, "freeze_ms": None}
    result = run_rows(tmp_path, ALONE, name="alone", slo=slo)
    row = result.summary.iloc[0]
    assert sorted(result.requests["first_word_s"].round(6)) == pytest.approx([0.012 + 0.005 * i for i in range(1, 11)])
    assert row["slo_first_word_s"] == pytest.approx(P90_WAIT_S) and row["slo_mean_gap_ms"] == pytest.approx(12.4)
    assert pd.isna(row["slo_longest_gap_ms"]) and bool(row["slo_met"])
    tighter = run_rows(tmp_path, ALONE, name="tighter", slo={**slo, "first_word_s": P90_WAIT_S - 1e-4})
    assert not bool(tighter.summary["slo_met"].iloc[0])
    # per request at the tighter limit, 9 of 10 are in time: 90% on time, where the P90 fails
    assert tighter.summary["on_time_pct"].iloc[0] == 90.0


def one_word_scenario(folder, criterion):
    """Prompts of 760 tokens and one-word replies on one GPU, evenly spaced: a prompt read alone
    takes 12 + 0.05 x 760 = 50 ms, so up to 20 requests/s every first word waits exactly 50 ms,
    and above 20/s each arrives while the one before is still read, and waits longer."""
    spec = {"name": f"one-word-{criterion}", "seed": 1,
            "workload": {"rate_per_s": 10, "n_requests": 40, "arrivals": "constant",
                         "prompt_mix": [{"share": 1, "tokens": {"fixed": 760}}], "reply_words": {"fixed": 1}},
            "slo": {"first_word_s": 0.05, "mean_gap_ms": None, "freeze_ms": None, "criterion": criterion},
            "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}]}
    path = folder / f"{criterion}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_goodput_with_percentiles_brackets_the_hand_computed_rate(tmp_path, capsys):
    path = one_word_scenario(tmp_path, "percentiles")
    at = {r: run(load_scenario(path).with_overrides(**{"workload.rate_per_s": r})).summary.iloc[0] for r in (20.0, 20.5)}
    assert bool(at[20.0]["slo_met"]) and at[20.0]["slo_first_word_s"] == pytest.approx(0.05)
    assert not bool(at[20.5]["slo_met"])
    assert main(["goodput", str(path), "--out", str(tmp_path / "g"), "--no-plots", "--workers", "1", "--tolerance", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "criterion: P90 TTFT <= 0.05 s (percentiles of each run, mean over seeds)" in out
    g = pd.read_csv(tmp_path / "g" / "goodput.csv").iloc[0]
    assert g["passing_rate_per_s"] <= 20.0 < g["failing_rate_per_s"] and g["failing_rate_per_s"] - g["passing_rate_per_s"] <= 0.05
    assert g["binding_limit"] == "first_word"


def test_sweep_with_percentiles_reports_the_criterion(tmp_path, capsys):
    path = one_word_scenario(tmp_path, "percentiles")
    assert main(["sweep", str(path), "--rate", "10,25", "--out", str(tmp_path / "s"), "--no-plots", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "criterion percentiles (P90 TTFT <= 0.05 s): the worst figure / its limit (at most 1 meets)" in out
    table = pd.read_csv(tmp_path / "s" / "sweep.csv")
    assert table["slo_met"].tolist() == [True, False]
    assert table["slo_ratio"].iloc[0] == pytest.approx(1.0)


@pytest.mark.parametrize(("slo", "fragment"), [
    ({"first_word_s": None, "mean_gap_ms": None, "freeze_ms": None},
     "slo: got every limit null (first_word_s, mean_gap_ms, freeze_ms, gap_ms, e2e_s, delay_s), expected at least one limit"),
    ({"criterion": "percentiles", "percentile": 100}, "slo.percentile: got 100, expected a number above 0 and below 100"),
    ({"criterion": "percentiles", "percentile": 0}, "slo.percentile: got 0, expected a number above 0 and below 100"),
    ({"percentile": 95}, "slo.percentile: got 95 with criterion 'per_request', expected criterion: percentiles"),
    ({"criterion": "p90"}, "slo.criterion: got 'p90', expected per_request or percentiles"),
    # the named rules and the limits they brought (tests/results/test_slo_rules.py)
    ({"preset": "vllm-bench"}, "expected at least one limit (preset vllm-bench sets none: write the ones to judge)"),
    ({"gap_ms": 100}, "slo.gap_ms: got 100 with criterion 'per_request', expected criterion: percentiles"),
    ({"preset": "sarathi-serve", "percentile_of": {"e2e_s": 50}}, "slo.percentile_of: got e2e_s whose limit is off"),
    ({"preset": "sarathi"}, "slo.preset: got 'sarathi', expected a named SLO rule: distserve, vllm-bench, sarathi-serve"),
    ({"tpot": "both"}, "slo.tpot: got 'both', expected exclusive"),
    ({"criterion": "percentiles", "gap_ms": -5}, "slo.gap_ms: got -5, expected a number of ms > 0"),
])
def test_bad_limits_are_one_line_exit_2(tmp_path, capsys, slo, fragment):
    spec = {"name": "bad", "workload": {"rate_per_s": 5, "measure_s": 2, "prompt_mix": [{"share": 1, "tokens": [10, 50]}],
                                        "reply_words": [2, 6]},
            "slo": slo, "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}]}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert main([str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_a_probe_under_percentiles_is_judged_by_the_mean_figures_not_the_on_time_share():
    from disagg_simpy.scenario.schema import Slo
    from disagg_simpy.sweep.goodput import Probe, decide

    slo = Slo(first_word_s=1.0, mean_gap_ms=50.0, freeze_ms=None, criterion="percentiles", percentile=90)
    rows = [{"seed": 1, "below_target": False, "on_time_pct": 50.0, "slo_first_word_s": 0.8, "slo_mean_gap_ms": 45.0},
            {"seed": 2, "below_target": False, "on_time_pct": 60.0, "slo_first_word_s": 1.2, "slo_mean_gap_ms": 40.0}]
    assert decide(Probe(10.0, rows), 90.0, slo) is True  # means 1.0 s and 42.5 ms: within
    assert decide(Probe(10.0, rows), 90.0) is False  # per request: 55% on time
    rows[1]["slo_mean_gap_ms"] = 56.0  # mean 50.5 ms
    assert decide(Probe(10.0, rows), 90.0, slo) is False
    rows[1]["slo_mean_gap_ms"] = float("inf")  # a seed whose P90 reply never finished
    assert decide(Probe(10.0, rows), 90.0, slo) is False


def test_under_percentiles_unfinished_replies_count_as_infinite_gaps(tmp_path):
    """docs/compare.md: an unfinished reply counts as +inf in the gap percentiles. ALONE's last two
    replies get 100,000 words and the run stops at 105 s: of the 10 replies' mean gaps, 8 are
    12.4 ms and 2 infinite, so the P90 (between the 9th and 10th) is inf and the 12.4 ms limit
    fails, where leaving the two out (or taking their gaps so far, 12.4 ms) would pass it. The
    first-word P90 is finite: every request got its first word."""
    rows = [*ALONE[:8], *((t, p, 100_000) for t, p, _ in ALONE[8:])]
    slo = {"criterion": "percentiles", "percentile": 90, "first_word_s": 1, "mean_gap_ms": 12.4, "freeze_ms": 12.4}
    result = run_rows(tmp_path, rows, name="unfinished", slo=slo, max_sim_s=105)
    row = result.summary.iloc[0]
    assert result.requests["finished_at_s"].isna().sum() == 2 and row["n_unfinished"] == 2
    assert row["slo_mean_gap_ms"] == float("inf") and row["slo_longest_gap_ms"] == float("inf")
    assert row["slo_first_word_s"] < 1 and not bool(row["slo_met"])
    finished = run_rows(tmp_path, ALONE, name="finished", slo=slo)  # the same limits, every reply finished
    assert finished.summary["slo_mean_gap_ms"].iloc[0] == pytest.approx(12.4) and bool(finished.summary["slo_met"].iloc[0])

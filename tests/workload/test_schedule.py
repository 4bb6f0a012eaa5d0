"""Traffic that changes over time (E11): a schedule of periods and a rate curve.

The arrival counts are checked statistically on fixed seeds (so nothing flickers); each check
states its false-alarm rate, and `test_the_count_checks_catch_a_rate_off_by_10_pct` shows it
catches a period whose rate is 10% off.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
import yaml
from helpers import assert_scenario_refused
from stats import chi2_critical

from disagg_simpy.cli import main
from disagg_simpy.scenario.loading import validate
from disagg_simpy.units import NS_PER_S
from disagg_simpy.workload.periods import period_of, periods, rate_at, thinned_arrivals
from disagg_simpy.workload.stream import make_requests

SHORT, LONG = [{"share": 1, "tokens": [100, 200]}], [{"share": 1, "tokens": [1000, 2000]}]
BASE = {"measure_s": 60, "prompt_mix": SHORT, "reply_words": [10, 20]}
SCHEDULE = [{"until_s": 10, "rate_per_s": 5}, {"until_s": 30, "rate_per_s": 2, "prompt_mix": LONG, "reply_words": [1, 3]},
            {"until_s": 60, "rate_per_s": 8}]
ONE_GPU = [{"name": "same", "kind": "colocated", "gpus": 1}]


def scenario(workload: dict, **top):
    return validate({"name": "day", "workload": workload, "arrangements": ONE_GPU, **top}, "day.yaml")


def counts_per_period(w, seeds, edges_s) -> np.ndarray:
    """Arrivals in each [edges_s[i], edges_s[i+1]) for each seed: (seeds, windows)."""
    s = scenario(w, max_sim_s=edges_s[-1])
    return np.array([np.histogram(make_requests(s, seed).arrived_at_ns, np.asarray(edges_s) * NS_PER_S)[0]
                     for seed in seeds])


#: Every check below fails a correct implementation on a fresh seed with probability at most
#: ALPHA (two-sided, Bonferroni over the periods and the two checks).
ALPHA = 1e-6


def count_problems(counts: np.ndarray, means: np.ndarray, alpha: float = ALPHA) -> list[str]:
    """What is wrong with per-seed arrival counts (seeds x periods) of periods expecting `means`
    each: (1) each period's total over the seeds is Poisson with mean seeds x mean (normal
    approximation, exact enough at totals in the thousands); (2) the counts' dispersion,
    sum (c - mean)^2 / mean over seeds, is chi-square with as many degrees of freedom as seeds
    (a Poisson count's variance equals its mean: too regular or too bursty counts fail)."""
    n_seeds, n_periods = counts.shape
    each = alpha / (2 * n_periods)
    z = NormalDist().inv_cdf(1 - each / 2)
    problems = []
    for k in range(n_periods):
        total, expected = counts[:, k].sum(), n_seeds * means[k]
        if abs(total - expected) > z * math.sqrt(expected):
            problems.append(f"period {k}: {total} arrivals over {n_seeds} seeds, expected {expected:g}")
        dispersion = float(((counts[:, k] - means[k]) ** 2 / means[k]).sum())
        if not chi2_critical(n_seeds, 1 - each / 2) <= dispersion <= chi2_critical(n_seeds, each / 2):
            problems.append(f"period {k}: dispersion {dispersion:.1f} over {n_seeds} seeds")
    return problems


def test_arrival_counts_per_period_match_each_periods_rate():
    counts = counts_per_period({**BASE, "schedule": SCHEDULE}, range(1, 201), [0, 10, 30, 60])
    assert count_problems(counts, np.array([5 * 10, 2 * 20, 8 * 30])) == []


def test_arrival_counts_follow_a_diurnal_curve():
    curve = {"diurnal": {"mean_per_s": 6, "amplitude": 0.8, "period_s": 40, "phase_s": 10}}
    s = scenario({**BASE, "rate_curve": curve})
    edges = np.arange(0, 61, 10.0)
    means = np.array([s.workload.rate_curve.integral(a, b) for a, b in zip(edges[:-1], edges[1:])])
    assert means.max() > 2 * means.min()  # the curve really swings over these windows
    assert count_problems(counts_per_period({**BASE, "rate_curve": curve}, range(1, 201), edges), means) == []


def test_the_count_checks_catch_a_rate_off_by_10_pct():
    """The planted bug: period 1 drawn at 1.1 x its rate, checked against the rate as written."""
    wrong = [dict(p) for p in SCHEDULE]
    wrong[1]["rate_per_s"] *= 1.1
    counts = counts_per_period({**BASE, "schedule": wrong}, range(1, 201), [0, 10, 30, 60])
    problems = count_problems(counts, np.array([5 * 10, 2 * 20, 8 * 30]))
    assert problems and all(p.startswith("period 1") for p in problems), problems


def test_the_dispersion_check_catches_counts_too_regular():
    """Evenly spaced arrivals (no randomness) have the right totals and far too little spread."""
    regular = np.tile([50, 40, 240], (200, 1))
    problems = count_problems(regular, np.array([50, 40, 240]))
    assert len(problems) == 3 and all("dispersion" in p for p in problems)


def test_a_request_belongs_to_the_period_it_arrives_in():
    """Lengths come from the mix of the arrival's period, decided on the whole-ns clock."""
    s = scenario({**BASE, "schedule": SCHEDULE})
    r = make_requests(s, 3)
    t = r.arrived_at_ns
    middle = (t >= 10 * NS_PER_S) & (t < 30 * NS_PER_S)
    assert middle.any() and (~middle).any()
    assert (r.n_prompt_tokens[middle] >= 1000).all() and (r.n_reply_words[middle] <= 3).all()
    assert (r.n_prompt_tokens[~middle] <= 200).all() and (r.n_reply_words[~middle] >= 10).all()
    b = 10 * NS_PER_S
    assert period_of(s.workload, np.array([0, b - 1, b, b + 1, 30 * NS_PER_S, 10**15])).tolist() == [0, 0, 1, 1, 2, 2]
    assert rate_at(s.workload, np.array([b - 1, b])).tolist() == [5.0, 2.0]


def test_a_draw_builds_the_period_boundaries_once_however_many_periods(monkeypatch):
    """Issue 37 item 8: thinning looks up the rate of every block of candidates of every period;
    rebuilt from the schedule at each lookup, a 10,000-period schedule took ~47 s for a 3 s
    window (quadratic in periods). The boundaries are built once per draw (then each lookup is
    a binary search), and the draw is the same. (benchmarks/schedule_periods.py times it.)"""
    import disagg_simpy.workload.periods as P

    n = 2000
    w = {**BASE, "measure_s": 3, "schedule": [{"until_s": 3 * (k + 1) / n, "rate_per_s": 20 + k % 7} for k in range(n)]}
    s = scenario(w, max_sim_s=4)
    builds = []
    real = P.boundaries_ns
    monkeypatch.setattr(P, "boundaries_ns", lambda w: builds.append(1) or real(w))
    r = make_requests(s, 1)
    assert len(builds) <= 2  # (once for thinning, once for each arrival's period)
    edges = np.array([round(3 * (k + 1) / n * NS_PER_S) for k in range(n - 1)], dtype=np.int64)
    rates = np.array([20 + k % 7 for k in range(n)], dtype=np.float64)
    t = np.concatenate((r.arrived_at_ns, edges - 1, edges, edges + 1))
    assert (period_of(s.workload, t) == np.searchsorted(edges, t, side="right")).all()  # [start, end), by bisection
    assert (rate_at(s.workload, t) == rates[np.searchsorted(edges, t, side="right")]).all()


class _Uniforms:
    """A stand-in generator: period k's stream hands out `pairs[k]` (then 0.999..., far away)."""

    def __init__(self, pairs):
        self.pairs = pairs

    def spawn(self, n):
        return [_Stream(self.pairs[k]) for k in range(n)]


class _Stream:
    def __init__(self, pairs):
        self.pairs = np.array(pairs, dtype=float).reshape(-1, 2)

    def random(self, shape):
        out = np.full(shape, 0.999999)
        m = min(len(self.pairs), shape[0])
        out[:m] = self.pairs[:m]
        self.pairs = self.pairs[m:]
        return out


def _gap(seconds: float, rate: float) -> float:
    """The uniform g whose gap -ln(1 - g) / rate is `seconds`."""
    return -math.expm1(-seconds * rate)


def test_thinning_by_hand_in_exact_ns():
    """Period 0 [0, 1 s) at 2/s: candidates at 0.25, 0.75 and 1.25 s; the last is past the
    period's end, so it is dropped and period 1 [1, 2 s) at 4/s starts afresh at 1 s: candidates
    at 1.5 and 2.0 s; the cap at 2 s keeps 2.0 (up to the cap, inclusive); nothing later."""
    w = scenario({**BASE, "schedule": [{"until_s": 1, "rate_per_s": 2}, {"until_s": 2, "rate_per_s": 4}]}).workload
    first = [_gap(0.25, 2), 0.5, _gap(0.5, 2), 0.5, _gap(0.5, 2), 0.5]
    second = [_gap(0.5, 4), 0.9, _gap(0.5, 4), 0.1]
    got = thinned_arrivals(w, _Uniforms([first, second]), 2.0)  # type: ignore[arg-type]
    assert got.tolist() == [250_000_000, 750_000_000, 1_500_000_000, 2_000_000_000]


def test_thinning_a_curve_keeps_a_candidate_with_probability_rate_over_peak():
    """Rate 2 x (1 + cos(2 pi t / 4)): peak 4/s (the envelope) at 0, 2/s at 1 s, 0 at 2 s.
    Candidates at 1 s (kept: 0.49 x 4 < 2), 1.5 s (dropped: 0.5 x 4 > 2 x (1 + cos(3 pi / 4)) =
    0.59), 1.75 s (kept: 0.01 x 4 < 2 x (1 + cos(7 pi / 8)) = 0.15); the cap at 1.8 s ends it."""
    w = scenario({**BASE, "rate_curve": {"diurnal": {"mean_per_s": 2, "amplitude": 1, "period_s": 4}}}).workload
    pairs = [_gap(1.0, 4), 0.49, _gap(0.5, 4), 0.5, _gap(0.25, 4), 0.01]
    got = thinned_arrivals(w, _Uniforms([pairs]), 1.8)  # type: ignore[arg-type]
    assert got.tolist() == [1_000_000_000, 1_750_000_000]


def test_same_requests_every_time_and_a_longer_run_sees_them_first():
    w = {**BASE, "schedule": SCHEDULE}
    short, long = make_requests(scenario(w, max_sim_s=100), 7), make_requests(scenario(w, max_sim_s=400), 7)
    again = make_requests(scenario(w, max_sim_s=100), 7)
    n = len(short)
    assert np.array_equal(short.arrived_at_ns, again.arrived_at_ns)
    for field in ("arrived_at_ns", "n_prompt_tokens", "n_reply_words"):
        assert np.array_equal(getattr(short, field), getattr(long, field)[:n])
    assert len(long) > n


def test_n_requests_with_a_schedule_sends_exactly_that_many():
    r = make_requests(scenario({**{k: v for k, v in BASE.items() if k != "measure_s"}, "n_requests": 120,
                                "schedule": SCHEDULE}), 2)
    assert len(r) == 120 and r.measured.all()
    assert (r.arrived_at_ns[:50] < 30 * NS_PER_S).any()


def test_periods_accessor():
    s = scenario({**BASE, "schedule": SCHEDULE})
    got = periods(s.workload)
    assert [(p.start_s, p.end_s, p.rate_per_s) for p in got] == [(0, 10, 5), (10, 30, 2), (30, 60, 8)]
    assert got[1].workload.prompt_mix[0].tokens == (1000, 2000) and got[1].workload.reply_words == (1, 3)
    assert got[2].workload.prompt_mix == s.workload.prompt_mix and got[2].workload.measure_s == 30
    assert got[0].workload.schedule is None and got[0].workload.rate_per_s == 5
    curve = scenario({**BASE, "rate_curve": {"diurnal": {"mean_per_s": 4, "amplitude": 0.5, "period_s": 20}}})
    windows = periods(curve.workload, window_s=5, end_s=20)
    assert [(p.start_s, p.end_s) for p in windows] == [(0, 5), (5, 10), (10, 15), (15, 20)]
    # the mean over [0, 5): 4 + (2 / (pi / 10)) x (sin(pi / 2) - sin 0) / 5, by hand; the peak is at 0
    high, low = 4 + 4 / math.pi, 4 - 4 / math.pi
    assert [p.rate_per_s for p in windows] == pytest.approx([high, low, low, high])


def test_expected_requests_integrate_the_rate():
    s = scenario({**BASE, "schedule": SCHEDULE}, max_sim_s=100)
    assert s.expected_requests() == pytest.approx(5 * 10 + 2 * 20 + 8 * 70)  # the last period goes on


CASES = [  # (id, workload changes, fragment of the one line)
    ("periods-out-of-order", {"schedule": [{"until_s": 20, "rate_per_s": 1}, {"until_s": 10, "rate_per_s": 1}]},
     "workload.schedule[1].until_s: got 10, expected more than schedule[0].until_s (20): periods in order"),
    ("periods-overlapping", {"schedule": [{"until_s": 20, "rate_per_s": 1}, {"until_s": 20, "rate_per_s": 2}]},
     "workload.schedule[1].until_s: got 20, expected more than schedule[0].until_s (20)"),
    ("rate-negative", {"schedule": [{"until_s": 20, "rate_per_s": -1}]},
     "workload.schedule[0].rate_per_s: got -1, expected a number of requests per second > 0"),
    ("rate-missing", {"schedule": [{"until_s": 20}]}, "workload.schedule[0].rate_per_s: required key is missing"),
    ("unknown-key", {"schedule": [{"until_s": 20, "rate_per_s": 1, "burstiness": 2}]},
     "workload.schedule[0].burstiness: unknown key, expected one of until_s, rate_per_s, prompt_mix, reply_words"),
    ("until-zero", {"schedule": [{"until_s": 0, "rate_per_s": 1}]}, "workload.schedule[0].until_s: got 0, expected"),
    ("empty-schedule", {"schedule": []}, "workload.schedule: got [], expected a list of 1 to 10,000 periods"),
    ("shares-in-a-period", {"schedule": [{"until_s": 20, "rate_per_s": 1, "prompt_mix": [{"share": 0.5, "tokens": [1, 2]}]}]},
     "workload.schedule[0].prompt_mix: got shares 0.5 = 0.5, expected shares summing to 1"),
    ("rate-beside-schedule", {"rate_per_s": 3, "schedule": [{"until_s": 20, "rate_per_s": 1}]},
     "workload.rate_per_s: got 3 with a schedule (each period sets its rate), expected no workload.rate_per_s"),
    ("gamma-with-schedule", {"arrivals": "gamma", "schedule": [{"until_s": 20, "rate_per_s": 1}]},
     "workload.arrivals: got 'gamma' with a schedule, expected poisson"),
    ("amplitude-makes-rate-negative", {"rate_curve": {"diurnal": {"mean_per_s": 2, "amplitude": 1.5, "period_s": 60}}},
     "workload.rate_curve.diurnal.amplitude: got 1.5, which makes the rate negative (mean_per_s x (1 - amplitude) = -1"),
    ("amplitude-negative", {"rate_curve": {"diurnal": {"mean_per_s": 2, "amplitude": -0.5, "period_s": 60}}},
     "workload.rate_curve.diurnal.amplitude: got -0.5, expected a number from 0 to 1"),
    ("curve-unknown-key", {"rate_curve": {"diurnal": {"mean_per_s": 2, "amplitude": 0.5, "period": 60}}},
     "workload.rate_curve.diurnal.period: unknown key (did you mean 'period_s'?)"),
    ("curve-and-period-rate", {"rate_curve": {"diurnal": {"mean_per_s": 2, "amplitude": 0.5, "period_s": 60}},
                               "schedule": [{"until_s": 20, "rate_per_s": 1}]},
     "workload.schedule[0].rate_per_s: got 1 with rate_curve, expected none"),
    ("no-rate-at-all", {}, "workload.rate_per_s: required key is missing, expected a number of requests per second > 0"),
]


@pytest.mark.parametrize(("changes", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_schedule_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, changes, fragment):
    spec = {"name": "bad", "workload": {**BASE, **changes}, "arrangements": ONE_GPU}
    assert_scenario_refused(tmp_path, capsys, spec, fragment)


def test_a_rate_search_refuses_a_schedule_in_one_line(tmp_path, capsys):
    spec = {"name": "bad", "workload": {**BASE, "schedule": SCHEDULE}, "arrangements": ONE_GPU}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert main([str(tmp_path / "s.yaml"), "--rate", "3", "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--rate 3: got 3 with a schedule" in err, err


def _two_rate_trace(tmp_path):
    """100 s of a trace: 10 arrivals of 4,000-token prompts in [0, 50), 40 of 200 tokens in [50, 100]."""
    times = np.concatenate([np.linspace(0, 49, 10), np.linspace(50, 100, 40)])
    lines = ["arrived_at_s,n_prompt_tokens,n_reply_words"]
    lines += [f"{t:.6f},{4000 if t < 50 else 200},{20 if t < 50 else 300}" for t in times]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    return tmp_path / "t.csv"


def test_describe_fits_a_traces_periods_as_a_schedule(tmp_path, capsys):
    trace = _two_rate_trace(tmp_path)
    assert main(["describe", str(trace), "--fit", "--period-s", "50", "--time-scale", "2"]) == 0
    fitted = yaml.safe_load(capsys.readouterr().out)
    first, second = fitted["schedule"]
    assert (first["until_s"], first["rate_per_s"]) == (25, 10 / 25) and (second["until_s"], second["rate_per_s"]) == (50, 40 / 25)
    assert first["prompt_mix"][0]["tokens"] == {"histogram": {"edges": [4000, 4001], "weights": [10]}}
    assert second["reply_words"] == {"histogram": {"edges": [300, 301], "weights": [40]}}
    s = scenario({"measure_s": 50, **fitted})
    r = make_requests(s, 1)
    early = r.arrived_at_ns < 25 * NS_PER_S
    assert (r.n_prompt_tokens[early] == 4000).all() and (r.n_prompt_tokens[~early] == 200).all()


@pytest.mark.parametrize(("flags", "fragment"), [
    (["--period-s", "50"], "--period-s: got 50 without --fit, expected --fit --period-s SECONDS"),
    (["--fit", "--time-scale", "2"], "--time-scale: got 2 without --period-s"),
    (["--fit", "--period-s", "0"], "--period-s: got '0', expected a number > 0"),
    (["--fit", "--period-s", "20"], "--period-s: got 20, but [40, 60) s of the trace has no arrivals"),
])
def test_describe_refuses_a_bad_schedule_fit_in_one_line(tmp_path, capsys, flags, fragment):
    trace = _two_rate_trace(tmp_path)
    if "20" in flags:  # a trace with a quiet stretch from 40 to 60 s
        lines = trace.read_text().splitlines()
        trace.write_text("\n".join(line for line in lines if not line[:1].isdigit() or not 40 <= float(line.split(",")[0]) < 60) + "\n")
    assert main(["describe", str(trace), *flags]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and fragment in captured.err and captured.out == "", captured.err

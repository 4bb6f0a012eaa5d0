"""Length distributions of prompts and replies (`fixed`, `histogram`, `lognormal`, and the page's
`[low, high]`): each draw tested against its written definition, and `describe --fit` round trips.

The chi-square tests run at a false-alarm rate of 0.1% each (on a fresh seed a correct sampler
fails one that often); their seeds are fixed, so they never flicker.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
import yaml
from stats import chi2_critical, chi2_of

from disagg_simpy.cli import main
from disagg_simpy.scenario.loading import validate
from disagg_simpy.workload.lengths import draw_lengths, fit_histogram
from disagg_simpy.workload.stream import make_requests

ALPHA = 1e-3
N = 20_000


def scenario(prompt_tokens, reply_words, **workload):
    raw = {"name": "lengths", "workload": {"rate_per_s": 50, "n_requests": N, **workload,
                                           "prompt_mix": [{"share": 1, "tokens": prompt_tokens}], "reply_words": reply_words},
           "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}]}
    return validate(raw, "lengths.yaml")


def assert_fits(values, support, probs):
    stat, df = chi2_of(np.asarray(values), np.asarray(support), np.asarray(probs))
    assert stat < chi2_critical(df, ALPHA), (stat, df)


def test_fixed_is_exactly_n():
    stream = make_requests(scenario({"fixed": 123}, {"fixed": 7}))
    assert len(stream) == N
    assert (stream.n_prompt_tokens == 123).all() and (stream.n_reply_words == 7).all()


def test_a_range_draws_as_the_page_always_did():
    u = np.random.default_rng(5).random(1000)
    assert (draw_lengths((10, 40), u) == 10 + np.floor(u * 31).astype(np.int64)).all()


def histogram_pmf(edges, weights):
    """P(n) by the definition: bin i (edges[i] <= n < edges[i+1]) with weight share, uniform inside."""
    total = sum(weights)
    support, probs = [], []
    for lo, hi, w in zip(edges, edges[1:], weights):
        for n in range(lo, hi):
            support.append(n)
            probs.append(w / total / (hi - lo))
    return support, probs


@pytest.mark.parametrize(("edges", "weights"), [
    ([1, 2, 10, 11, 50], [3, 0, 1, 6]),  # a one-value bin, an empty bin, a wide bin
    ([100, 150, 300, 1000], [0.2, 0.5, 0.3]),
])
def test_histogram_draws_its_definition(edges, weights):
    hist = {"histogram": {"edges": edges, "weights": weights}}
    stream = make_requests(scenario(hist, hist), seed=3)
    support, probs = histogram_pmf(edges, weights)
    for values in (stream.n_prompt_tokens, stream.n_reply_words):
        assert values.min() >= edges[0] and values.max() < edges[-1]  # the last edge is excluded
        assert_fits(values, support, probs)


def lognormal_pmf(mean, sd, lo, hi):
    """P(n) by the definition: round(X) conditioned on [lo, hi], X log-normal with this mean and sd."""
    sigma = math.sqrt(math.log(1 + (sd / mean) ** 2))
    mu = math.log(mean) - sigma**2 / 2
    cdf = lambda x: NormalDist(mu, sigma).cdf(math.log(x))  # noqa: E731
    mass = cdf(hi + 0.5) - cdf(lo - 0.5)
    support = np.arange(lo, hi + 1)
    return support, np.array([(cdf(n + 0.5) - cdf(n - 0.5)) / mass for n in support])


@pytest.mark.parametrize(("mean", "sd", "lo", "hi"), [(300, 250, 1, 2000), (50, 10, 45, 80), (8, 20, 1, 60)])
def test_lognormal_draws_its_definition(mean, sd, lo, hi):
    spec = {"lognormal": {"mean": mean, "sd": sd, "min": lo, "max": hi}}
    stream = make_requests(scenario([1, 2], spec), seed=11)
    values = stream.n_reply_words
    assert values.min() >= lo and values.max() <= hi
    assert_fits(values, *lognormal_pmf(mean, sd, lo, hi))


def test_lognormal_mean_and_sd_are_those_of_the_lengths():
    """With bounds far out in the tails the lengths' mean and sd are the ones written (rounding
    adds 1/12 to the variance), within 4 standard errors."""
    spec = {"lognormal": {"mean": 400, "sd": 100, "min": 1, "max": 100_000}}
    values = make_requests(scenario([1, 2], spec), seed=2).n_reply_words.astype(float)
    assert abs(values.mean() - 400) < 4 * 100 / math.sqrt(N)
    assert abs(values.std() - math.sqrt(100**2 + 1 / 12)) < 4 * 100 * 1.2 / math.sqrt(2 * N)


def test_mixed_classes_keep_their_own_distributions():
    raw = {"name": "mix", "workload": {"rate_per_s": 50, "n_requests": 4000,
           "prompt_mix": [{"share": 0.5, "tokens": {"fixed": 5}}, {"share": 0.5, "tokens": [1000, 2000]}],
           "reply_words": [1, 2]}, "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}]}
    p = make_requests(validate(raw, "mix.yaml")).n_prompt_tokens
    assert set(np.unique(p[p < 1000])) == {5} and p[p >= 1000].max() <= 2000
    assert 0.45 < (p == 5).mean() < 0.55


def test_the_same_seed_draws_the_same_lengths_and_a_longer_run_the_same_prefix():
    spec = {"lognormal": {"mean": 300, "sd": 250, "max": 4000}}
    a = make_requests(scenario(spec, {"histogram": {"edges": [1, 10, 100], "weights": [1, 2]}}), seed=4)
    raw = {"name": "w", "workload": {"rate_per_s": 50, "measure_s": 600,
                                     "prompt_mix": [{"share": 1, "tokens": spec}],
                                     "reply_words": {"histogram": {"edges": [1, 10, 100], "weights": [1, 2]}}},
           "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}]}
    b = make_requests(validate(raw, "w.yaml"), seed=4)
    assert len(b) > N
    assert (a.n_prompt_tokens == b.n_prompt_tokens[:N]).all() and (a.n_reply_words == b.n_reply_words[:N]).all()


def fit_of(tmp_path, capsys, rows, bins):
    trace = tmp_path / "t.csv"
    trace.write_text("arrived_at_s,n_prompt_tokens,n_reply_words\n" + "".join(f"{i * 0.1},{p},{r}\n" for i, (p, r) in enumerate(rows)))
    assert main(["describe", str(trace), "--fit", "--bins", str(bins)]) == 0
    return yaml.safe_load(capsys.readouterr().out)


def test_describe_fit_with_few_lengths_is_the_trace_exactly(tmp_path, capsys):
    rows = [(100, 3)] * 5 + [(102, 3)] * 2 + [(7000, 40)] * 3
    fit = fit_of(tmp_path, capsys, rows, 20)
    workload = {"rate_per_s": 1, "n_requests": 10, **fit}
    sc = validate({"name": "fit", "workload": workload, "arrangements": [{"name": "a", "kind": "colocated", "gpus": 1}]}, "f.yaml")
    hist = fit["prompt_mix"][0]["tokens"]["histogram"]
    support, probs = histogram_pmf(hist["edges"], hist["weights"])
    assert {s: p for s, p in zip(support, probs) if p > 0} == pytest.approx({100: 0.5, 102: 0.2, 7000: 0.3})
    hist = fit["reply_words"]["histogram"]
    support, probs = histogram_pmf(hist["edges"], hist["weights"])
    assert {s: p for s, p in zip(support, probs) if p > 0} == pytest.approx({3: 0.7, 40: 0.3})
    assert set(make_requests(sc).n_prompt_tokens) <= {100, 102, 7000}


def test_describe_fit_with_many_lengths_counts_each_bin_and_draws_its_shares(tmp_path, capsys):
    rng = np.random.default_rng(8)
    prompts = np.floor(rng.lognormal(6, 1, 3000)).astype(int) + 1
    replies = rng.integers(1, 500, 3000)
    fit = fit_of(tmp_path, capsys, list(zip(prompts, replies)), 12)
    for values, hist in ((prompts, fit["prompt_mix"][0]["tokens"]["histogram"]), (replies, fit["reply_words"]["histogram"])):
        edges, weights = hist["edges"], hist["weights"]
        assert (edges, weights) == fit_histogram(values, 12)
        assert len(weights) <= 12 and edges[0] == values.min() and edges[-1] == values.max() + 1
        counts = [int(((values >= lo) & (values < hi)).sum()) for lo, hi in zip(edges, edges[1:])]
        assert weights == counts
    sc = validate({"name": "fit", "workload": {"rate_per_s": 1, "n_requests": N, **fit},
                   "arrangements": [{"name": "a", "kind": "colocated", "gpus": 1}]}, "f.yaml")
    drawn = make_requests(sc, seed=9).n_prompt_tokens
    hist = fit["prompt_mix"][0]["tokens"]["histogram"]
    bins = np.searchsorted(hist["edges"], drawn, side="right") - 1
    shares = np.array(hist["weights"]) / sum(hist["weights"])
    assert_fits(bins, np.arange(len(shares)), shares)

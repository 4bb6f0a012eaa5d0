"""Benchmark-client traffic: `n_requests` (exactly N arrivals, all measured) and
`arrivals: poisson | gamma | constant` with `burstiness` (the Gamma shape, as vLLM's benchmark
`--burstiness`).

The statistical checks are z-tests at a false-alarm rate of 0.1% each (two-sided, |z| < 3.29),
on fixed seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from disagg_simpy import run
from disagg_simpy.scenario.loading import validate
from disagg_simpy.workload.stream import make_requests

Z = 3.29  # two-sided 0.1%


def scenario(**workload):
    w = {"rate_per_s": 4, "prompt_mix": [{"share": 1, "tokens": [10, 50]}], "reply_words": [2, 6], **workload}
    return validate({"name": "arr", "workload": w, "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}]}, "arr.yaml")


def test_n_requests_sends_exactly_n_all_measured_and_all_finish():
    sc = scenario(n_requests=37, rate_per_s=20)
    result = run(sc)
    req = result.requests
    assert len(result.stream) == 37 and result.stream.measured.all()
    assert len(req) == 37 and req["finished_at_s"].notna().all()  # (requests: the measured ones)


def test_constant_arrivals_are_k_over_rate():
    stream = make_requests(scenario(n_requests=10, rate_per_s=4, arrivals="constant"))
    assert stream.arrived_at_ns.tolist() == [k * 250_000_000 for k in range(1, 11)]


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_gaps_have_the_stated_mean_and_cv_over_many_seeds(burstiness):
    """Gaps pooled over 40 seeds of 2,500 requests: their mean is 1/rate and their variance
    cv^2/rate^2 with cv = 1/sqrt(burstiness); z-tests with the Gamma's exact standard errors
    (the variance's from its fourth central moment, 3k(k+2) theta^4)."""
    rate, k = 4.0, burstiness
    sc = scenario(n_requests=2500, rate_per_s=rate, arrivals="gamma", burstiness=k)
    gaps = np.concatenate([np.diff(make_requests(sc, seed=s).arrived_at_ns, prepend=0) / 1e9 for s in range(1, 41)])
    n, theta = len(gaps), 1 / (rate * k)
    mean, var = k * theta, k * theta**2
    assert abs(gaps.mean() - mean) < Z * math.sqrt(var / n)
    fourth = 3 * k * (k + 2) * theta**4
    assert abs(gaps.var() - var) < Z * math.sqrt((fourth - var**2) / n)
    cv = gaps.std() / gaps.mean()
    assert cv == pytest.approx(1 / math.sqrt(k), rel=0.1)


def test_a_longer_window_sees_the_same_gamma_arrivals_first():
    short = make_requests(scenario(measure_s=20, arrivals="gamma", burstiness=0.3), seed=2)
    long = make_requests(scenario(measure_s=200, arrivals="gamma", burstiness=0.3), seed=2)
    assert (long.arrived_at_ns[:len(short)] == short.arrived_at_ns).all()


def test_poisson_by_name_is_the_default():
    a = make_requests(scenario(measure_s=30), seed=5)
    b = make_requests(scenario(measure_s=30, arrivals="poisson"), seed=5)
    assert (a.arrived_at_ns == b.arrived_at_ns).all() and "arrivals" not in a.info


def test_n_requests_refuses_a_cap_before_its_last_arrival():
    from disagg_simpy.errors import InputError

    sc = validate({"name": "c", "max_sim_s": 1.0, "workload": {"rate_per_s": 4, "n_requests": 50, "arrivals": "constant",
                   "prompt_mix": [{"share": 1, "tokens": [10, 50]}], "reply_words": [2, 6]},
                   "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}]}, "c.yaml")
    with pytest.raises(InputError, match=r"c.yaml: max_sim_s: got 1, but request 50 of n_requests arrives at 12.5 s"):
        make_requests(sc)

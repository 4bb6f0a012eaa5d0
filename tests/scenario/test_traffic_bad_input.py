"""Bad traffic settings (length distributions, n_requests, arrivals): one line, exit 2, nothing written."""

from __future__ import annotations

import pytest
from helpers import assert_scenario_refused

from disagg_simpy.cli import main

WORKLOAD = {"rate_per_s": 5, "measure_s": 2, "prompt_mix": [{"share": 1, "tokens": [10, 50]}], "reply_words": [2, 6]}
HIST = {"edges": [1, 10, 20], "weights": [1, 1]}

CASES = [  # (id, workload changes, fragment of the one line)
    ("edges-not-increasing", {"reply_words": {"histogram": {"edges": [1, 10, 10], "weights": [1, 1]}}},
     "workload.reply_words.histogram.edges[2]: got 10 after 10, expected edges that increase"),
    ("edges-going-back", {"prompt_mix": [{"share": 1, "tokens": {"histogram": {"edges": [5, 3], "weights": [1]}}}]},
     "workload.prompt_mix[0].tokens.histogram.edges[1]: got 3 after 5, expected edges that increase"),
    ("weight-negative", {"reply_words": {"histogram": {**HIST, "weights": [1, -2]}}},
     "workload.reply_words.histogram.weights[1]: got -2, expected a number >= 0"),
    ("weights-all-zero", {"reply_words": {"histogram": {**HIST, "weights": [0, 0]}}},
     "workload.reply_words.histogram.weights: got [0.0, 0.0], expected weights >= 0, not all zero"),
    ("weights-miscounted", {"reply_words": {"histogram": {**HIST, "weights": [1]}}},
     "histogram.weights: got 1 weights for 3 edges, expected one weight per bin (2)"),
    ("lognormal-min-above-max", {"reply_words": {"lognormal": {"mean": 100, "sd": 50, "min": 90, "max": 80}}},
     "workload.reply_words.lognormal.min: got 90 above max 80, expected min <= max"),
    ("lognormal-bounds-in-the-tail", {"reply_words": {"lognormal": {"mean": 100, "sd": 5, "min": 5000, "max": 6000}}},
     "workload.reply_words.lognormal.max: got [min, max] = [5000, 6000], which holds 0 of a lognormal"),
    ("lognormal-no-max", {"reply_words": {"lognormal": {"mean": 100, "sd": 5}}},
     "workload.reply_words.lognormal.max: required key is missing"),
    ("fixed-zero", {"reply_words": {"fixed": 0}}, "workload.reply_words.fixed: got 0, expected a whole number from 1"),
    ("unknown-form", {"reply_words": {"uniform": [1, 2]}}, "workload.reply_words: got {uniform: [1, 2]}, expected a range"),
    ("n-requests-with-measure-s", {"n_requests": 100},
     "workload.n_requests: got 100 together with measure_s 2, expected one of them"),
    ("neither-n-requests-nor-measure-s", {"measure_s": None}, "workload.measure_s: missing, expected"),
    ("burstiness-zero", {"arrivals": "gamma", "burstiness": 0}, "workload.burstiness: got 0, expected a number from 0.0001"),
    ("burstiness-negative", {"arrivals": "gamma", "burstiness": -1}, "workload.burstiness: got -1, expected a number from"),
    ("burstiness-without-gamma", {"burstiness": 2}, "workload.burstiness: got 2 with arrivals 'poisson', expected arrivals: gamma"),
    ("unknown-arrivals", {"arrivals": "bursty"}, "workload.arrivals: got 'bursty', expected one of poisson, gamma, constant"),
]


@pytest.mark.parametrize(("changes", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_traffic_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, changes, fragment):
    workload = {k: v for k, v in {**WORKLOAD, **changes}.items() if v is not None}
    spec = {"name": "bad", "workload": workload, "arrangements": [{"name": "same", "kind": "colocated", "gpus": 1}]}
    assert_scenario_refused(tmp_path, capsys, spec, fragment)


def test_describe_refuses_bins_below_one(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("arrived_at_s,n_prompt_tokens,n_reply_words\n0,5,5\n")
    assert main(["describe", str(tmp_path / "t.csv"), "--fit", "--bins", "0"]) == 2
    assert "--bins: got '0', expected a whole number from 1 to 10000" in capsys.readouterr().err

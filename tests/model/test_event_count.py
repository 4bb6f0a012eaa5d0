"""Structure, not speed: a run schedules a bounded number of SimPy events per iteration and per
request, whatever the reply length. Words are not events (records.word_times derives them), and
this keeps a per-word event from ever creeping back in.

The design's count: each GPU iteration is at most one event (a repeat of unchanged iterations,
model/repeats.py, is one for all of them), plus at most one more when it starts (a wake-up from
idle, or a start put off to the end of its instant, D5); each request is at most four: its
arrival, for a split its ship's one timeout, and for each of those the timeout that replaces a
repeat it cuts short. Requests are not processes. Add one process start per GPU and a few for
the source and the stop: events <= 2 x iterations + 4 x requests + GPUs + 4 (it was 2 x
iterations + 8 x requests before requests stopped being processes). The scenario is loaded
enough that one event per word would break that bound several times over, for replies of 100
words and of 1,000 words alike.
"""

from __future__ import annotations

import pytest
from helpers import PAGE_ARRANGEMENTS, PAGE_MIX, scenario_text

from disagg_simpy import load_scenario, run


@pytest.mark.parametrize("words", [100, 1000])
def test_events_grow_with_iterations_and_requests_not_words(tmp_path, words):
    path = tmp_path / "structure.yaml"
    workload = {"rate_per_s": 30, "measure_s": 10, **PAGE_MIX, "reply_words": [words, words]}
    path.write_text(scenario_text("structure", workload, arrangements=PAGE_ARRANGEMENTS, seed=3, max_sim_s=40))
    result = run(load_scenario(path))
    total_bound = total_words = 0
    for name, rec in result.records.items():
        n_iterations = len(rec.iterations["gpu"])
        n_requests = len(rec.requests["request_id"])
        bound = 2 * n_iterations + 4 * n_requests + len(rec.gpu_roles) + 4
        assert rec.n_events <= bound, (name, rec.n_events, n_iterations, n_requests)
        total_bound += bound
        total_words += int(rec.iterations["n_replies_written"].sum())
    # the test has teeth: an event per word would be well over the bound
    assert total_words > 2 * total_bound

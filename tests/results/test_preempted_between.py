"""metrics.preempted_between (E9): whether each reply was preempted within [since, until], taken rank by
rank over the replies' preemptions, against the plain definition."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from disagg_simpy.results.metrics import preempted_between


@st.composite
def cases(draw):
    log = draw(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 60)), max_size=30))
    queries = draw(st.lists(st.tuples(st.integers(0, 12), st.integers(-1, 60), st.integers(0, 30)), max_size=20))
    return log, queries


@settings(max_examples=300, deadline=None)
@given(cases())
def test_preempted_between_is_any_preemption_of_the_reply_in_the_window(case):
    log, queries = case
    rec = SimpleNamespace(preemptions={"request_id": np.array([r for r, _ in log], np.int64),
                                       "at_ns": np.array([t for _, t in log], np.int64)})
    request = np.array([r for r, _, _ in queries], np.int64)
    since = np.array([s for _, s, _ in queries], np.int64)
    until = since + np.array([d for _, _, d in queries], np.int64)
    want = [any(r == pr and s <= t <= u for pr, t in log) for r, s, u in zip(request, since, until)]
    assert preempted_between(rec, request, since, until).tolist() == want

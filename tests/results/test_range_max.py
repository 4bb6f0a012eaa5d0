"""metrics._range_max: the longest gap of every reply, in time linear in the words."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from disagg_simpy.results.metrics import _range_max


@st.composite
def ranges(draw):
    values = np.array(draw(st.lists(st.integers(-10**12, 10**12), min_size=2, max_size=60)), dtype=np.int64)
    pairs = draw(st.lists(st.tuples(st.integers(0, len(values) - 1), st.integers(1, len(values))), max_size=40))
    pairs = [(min(a, b), max(a, b)) for a, b in pairs if min(a, b) < max(a, b) <= len(values) - 1]
    lo = np.array([a for a, _ in pairs], dtype=np.int64)
    hi = np.array([b for _, b in pairs], dtype=np.int64)
    return values, lo, hi


@settings(max_examples=300, deadline=None)
@given(ranges())
def test_range_max_is_max_of_each_range(case):
    values, lo, hi = case
    want = [values[a:b].max() for a, b in zip(lo, hi)]
    assert _range_max(values, lo, hi).tolist() == want

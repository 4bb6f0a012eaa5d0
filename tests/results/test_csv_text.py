"""csv_text writes exactly what pandas' to_csv(index=False) writes, for every column type the
output frames use (and falls back to pandas for the rest)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from disagg_simpy.results import csv_text as module
from disagg_simpy.results.csv_text import csv_text

LABELS = st.text(alphabet=st.sampled_from(list('ab ,"\n\r-_.')), min_size=1, max_size=6)


@st.composite
def frames(draw) -> pd.DataFrame:
    n = draw(st.integers(0, 40))
    columns = {}
    names = ["arrangement", "n_small", "n_wide", "gpu", "on_time", "at_s"]
    labels = draw(st.lists(LABELS, min_size=1, max_size=3, unique=True))
    codes = draw(st.lists(st.integers(-1, len(labels) - 1), min_size=n, max_size=n))
    columns["arrangement"] = pd.Categorical.from_codes(codes, categories=labels)
    columns["n_small"] = np.array(draw(st.lists(st.integers(-5, 50), min_size=n, max_size=n)), dtype=np.int64)
    columns["n_wide"] = np.array(draw(st.lists(st.integers(-(2**62), 2**62), min_size=n, max_size=n)), dtype=np.int64)
    gpus = draw(st.lists(st.one_of(st.none(), st.integers(0, 7)), min_size=n, max_size=n))
    columns["gpu"] = pd.array(gpus, dtype="Int64")
    columns["on_time"] = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    floats = st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(0, 10**13).map(lambda ns: ns / 1e9),  # times as the frames make them
        st.sampled_from([0.0, -0.0, 1e-5, 5e-324, 1e16, 123456789012345680.0, math.nan]),
    )
    columns["at_s"] = np.array(draw(st.lists(floats, min_size=n, max_size=n)), dtype=np.float64)
    order = draw(st.permutations(names))
    return pd.DataFrame({k: columns[k] for k in order})


@settings(max_examples=300, deadline=None)
@given(frame=frames(), chunk=st.integers(1, 7))
def test_same_text_as_pandas(frame, chunk):
    old = module.ROWS_PER_CHUNK
    module.ROWS_PER_CHUNK = chunk  # several chunks, and chunks that end mid-frame
    try:
        assert csv_text(frame) == frame.to_csv(index=False)
    finally:
        module.ROWS_PER_CHUNK = old


@pytest.mark.parametrize(
    "frame",
    [
        pd.DataFrame({"only": [1.5, np.nan]}),  # one column: pandas quotes an empty row
        pd.DataFrame({"name": pd.Series(["a", "b,c"], dtype=object), "x": [1, 2]}),
        pd.DataFrame({"x": np.array([0.1, 0.25], dtype=np.float32), "y": [1, 2]}),
        pd.DataFrame({"x": pd.array([1, None], dtype="Int32"), "y": [1, 2]}),
        pd.DataFrame({"x": np.array([1, 2], dtype=np.uint8), "y": [1, 2]}),
    ],
)
def test_other_frames_fall_back_to_pandas(frame):
    assert csv_text(frame) == frame.to_csv(index=False)

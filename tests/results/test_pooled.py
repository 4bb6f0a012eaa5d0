"""The pooled distributions' grid edge (results/pooled.py, D8): a gap or first-word wait equal to
a grid point + 1 ns counts as within that point, + 2 ns does not; in exact ns, through a run."""

from __future__ import annotations

import numpy as np
from helpers import run_rows

from disagg_simpy.results.pooled import FIRST_WORD_GRID_S, GAP_GRID_MS, Pooled, first_word_counts, gap_counts

TEN_MS = int(np.flatnonzero(GAP_GRID_MS == 10.0)[0])  # the gap grid's 10 ms point
FIFTY_MS = int(np.flatnonzero(FIRST_WORD_GRID_S == 0.0524807)[0])  # a first-word grid point (52.4807 ms)


def test_a_value_one_ns_past_a_grid_point_counts_within_it_and_two_do_not():
    at = 10_000_000  # ns
    counts = gap_counts(np.array([at, at + 1, at + 2]), np.array([1, 2, 4]))
    assert counts[TEN_MS] == 3 and counts[TEN_MS + 1] == 7 and counts[TEN_MS - 1] == 0
    wait_ns = round(FIRST_WORD_GRID_S[FIFTY_MS] * 1e9)
    first = first_word_counts(np.array([wait_ns, wait_ns + 1, wait_ns + 2]) / 1e9)
    assert first[FIFTY_MS] == 2 and first[FIFTY_MS + 1] == 3 and first[FIFTY_MS - 1] == 0


def test_a_run_whose_gaps_are_10_ms_and_1_ns_pools_them_within_10_ms():
    """One GPU writing one 4-word reply at a time: each gap is iteration_ms + per_reply_ms,
    9.6 + 0.400001 ms = 10 ms + 1 ns (in the 10 ms share: 100%), and with 0.400002 ms, 10 ms + 2 ns
    (0% at 10 ms, 100% at the next point)."""
    import tempfile
    from pathlib import Path

    for per_reply_ms, share in ((0.400001, 100.0), (0.400002, 0.0)):
        with tempfile.TemporaryDirectory() as folder:
            result = run_rows(Path(folder), [(0.0, 10, 4), (1.0, 10, 4)],
                              cost={"iteration_ms": 9.6, "per_reply_ms": per_reply_ms, "per_prompt_token_ms": 0.05})
        gaps = result.gaps["same"]
        assert gaps.gap_values_ns.tolist() == [10_000_000 + round((per_reply_ms - 0.4) * 1e6)]
        pooled = Pooled()
        pooled.add(result, seed=1)
        assert pooled.gap_shares("same")[TEN_MS] == share and pooled.gap_shares("same")[TEN_MS + 1] == 100.0

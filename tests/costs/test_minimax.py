"""The presets' worst-case fit (`costs/minimax.py`): on a table whose whole prompts are flat
below a knee (which no line follows), it lowers the worst whole-prompt error of 64-4,096 tokens
below least squares' while no other kind of iteration gets worse than least squares leaves it;
with no such whole prompts it is least squares. E14's fields join one by one, each where it earns
a point (a field not kept is exactly 0); the loosened limit (other groups within max(least
squares, 10%)) is taken where it earns a point, and never lets a group past both."""

from __future__ import annotations

import numpy as np
import pandas as pd
from test_fitting import table

from disagg_simpy.costs.fitting import fit
from disagg_simpy.costs.minimax import LOOSE_CAP, MIN_GAIN, fit_worst, fit_worst_with, whole_range_error


def knee_table() -> pd.DataFrame:
    """table()'s rows, with whole prompts timed flat up to 400 tokens and linear beyond (as
    SplitwiseSim's H100 rows are), and more writing rows than whole prompts."""
    t = table(n=300, noise=0.05, seed=3)
    whole = (t.replies == 0) & (t.earlier_tokens == 0) & (t.prompt_tokens > 0)
    p = t.prompt_tokens.to_numpy(float)
    t.loc[whole, "ms"] = 20.0 + 0.05 * np.maximum(0.0, p[whole] - 400)
    return t


def test_worst_case_fit_lowers_the_whole_prompt_error_and_no_other_kind_gets_worse():
    t = knee_table()
    least, worst = fit(t), fit_worst(t)
    assert abs(whole_range_error(t, worst.fitted)) < abs(whole_range_error(t, least.fitted)) - 2
    for kind in ("writing only", "chunked"):
        assert abs(worst.errors_pct[kind]) <= abs(least.errors_pct[kind])
    assert all(v >= 0 for v in worst.coefficients.values())


def test_without_whole_prompts_of_64_to_4096_tokens_it_is_least_squares():
    t = knee_table()
    t = t[~((t.replies == 0) & (t.earlier_tokens == 0))].reset_index(drop=True)
    assert fit_worst(t).coefficients == fit(t).coefficients


def test_e14_joins_where_the_rows_separate_it_and_stays_off_where_they_do_not():
    t = knee_table()  # flat at 20 ms to 400 tokens, on the line beyond: a fixed cost of its own
    plain, e14 = fit_worst(t), fit_worst(t, unsaturated=True)
    assert e14.coefficients["prompt_iteration_ms"] > 0
    assert abs(whole_range_error(t, e14.fitted)) <= abs(whole_range_error(t, plain.fitted)) - 100 * MIN_GAIN
    for kind in ("writing only", "chunked"):
        assert abs(e14.errors_pct[kind]) <= abs(fit(t).errors_pct[kind])
    line = table(n=300, noise=0.05, seed=3)  # whole prompts on the straight line: nothing to separate
    assert "free_prompt_tokens" not in fit_worst(line, unsaturated=True).coefficients


def test_free_tokens_alone_leave_the_fixed_cost_exactly_zero():
    """Whole prompts flat at the writing side's iteration_ms up to 256 tokens: free tokens alone
    fit them, so prompt_iteration_ms is 0, not what a solver leaves near it (1.8e-6 ms shipped once)."""
    t = table(n=300, noise=0.05, seed=3)
    whole = ((t.replies == 0) & (t.earlier_tokens == 0) & (t.prompt_tokens > 0)).to_numpy()
    t.loc[whole, "ms"] = 8.0 + 0.05 * np.maximum(0.0, t.prompt_tokens.to_numpy(float)[whole] - 256)
    c = fit_worst(t, unsaturated=True).coefficients
    assert c["prompt_iteration_ms"] == 0.0 and c["free_prompt_tokens"] == 256


def loose_table() -> pd.DataFrame:
    """table()'s rows without noise (chunked exact), writing rows off by up to 20% both ways (least
    squares leaves them far above 10%) and whole prompts under 512 tokens 30% slower."""
    t = table(n=300, noise=0.0, seed=5)
    writing = (t.prompt_tokens == 0).to_numpy()
    t.loc[writing, "ms"] *= 1 + np.random.default_rng(7).uniform(-0.2, 0.2, writing.sum())
    short = ((t.replies == 0) & (t.earlier_tokens == 0) & (t.prompt_tokens.between(1, 511))).to_numpy()
    t.loc[short, "ms"] *= 1.3
    return t


def test_loosened_limit_is_taken_where_it_earns_a_point_and_no_group_passes_both_limits():
    t = loose_table()
    least = fit(t)
    strict, not_loose = fit_worst_with(t, loosen=False)
    loose, taken = fit_worst_with(t)
    assert taken and not not_loose
    assert abs(whole_range_error(t, loose.fitted)) <= abs(whole_range_error(t, strict.fitted)) - 100 * MIN_GAIN
    for kind in ("writing only", "chunked"):
        assert abs(loose.errors_pct[kind]) <= max(abs(least.errors_pct[kind]), 100 * LOOSE_CAP)
    assert abs(loose.errors_pct["chunked"]) > abs(least.errors_pct["chunked"])  # it did use the room
    assert abs(loose.errors_pct["writing only"]) <= abs(least.errors_pct["writing only"])

"""The presets' worst-case fit (`costs/minimax.py`): on a table whose whole prompts are flat
below a knee (which no line follows), it lowers the worst whole-prompt error of 64-4,096 tokens
below least squares' while no other kind of iteration gets worse than least squares leaves it;
with no such whole prompts it is least squares."""

from __future__ import annotations

import numpy as np
import pandas as pd
from test_fitting import table

from disagg_simpy.costs.fitting import fit
from disagg_simpy.costs.minimax import FREE_GRID, MIN_GAIN, fit_worst, whole_range_error


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
    t = knee_table()
    plain, e14 = fit_worst(t), fit_worst(t, unsaturated=True)
    assert e14.coefficients["free_prompt_tokens"] in FREE_GRID and e14.coefficients["free_prompt_tokens"] > 0
    assert abs(whole_range_error(t, e14.fitted)) <= abs(whole_range_error(t, plain.fitted)) - 100 * MIN_GAIN
    for kind in ("writing only", "chunked"):
        assert abs(e14.errors_pct[kind]) <= abs(fit(t).errors_pct[kind])
    line = table(n=300, noise=0.05, seed=3)  # whole prompts on the straight line: nothing to separate
    assert "free_prompt_tokens" not in fit_worst(line, unsaturated=True).coefficients

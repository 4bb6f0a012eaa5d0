"""Model-free floors (`costs/floors.py`): the closed form of the monotone floor equals the linear
program it stands for on random rows; merging prompts orders a batch below one long prompt; the
convex floor is 0 on convex rows and above the monotone floor on a staircase."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import linprog

from disagg_simpy.costs.floors import convex_floor, monotone_floor


def rows(tokens, ms, prompts=None) -> pd.DataFrame:
    t = pd.DataFrame({"prompt_tokens": tokens, "ms": ms})
    return t if prompts is None else t.assign(prompts=prompts)


def isotonic_lp(y: np.ndarray) -> float:
    """The smallest s with v nondecreasing and |v / y - 1| <= s, as a linear program."""
    n = len(y)
    a, b = [], []
    for i in range(n):
        a += [np.r_[np.eye(n)[i], -y[i]], np.r_[-np.eye(n)[i], -y[i]]]
        b += [y[i], -y[i]]
    for i in range(n - 1):
        a.append(np.r_[np.eye(n)[i] - np.eye(n)[i + 1], 0.0])
        b.append(0.0)
    res = linprog(np.r_[np.zeros(n), 1.0], A_ub=np.array(a), b_ub=np.array(b), bounds=[(0, None)] * (n + 1),
                  method="highs")
    return float(res.x[n])


@pytest.mark.parametrize("seed", range(5))
def test_monotone_floor_is_the_linear_programs_optimum(seed):
    y = np.random.default_rng(seed).uniform(10, 20, 12)
    t = rows(np.arange(1, 13) * 64, y)
    assert monotone_floor(t, merging=False)[0] == pytest.approx(isotonic_lp(y), abs=1e-7)


def test_a_batch_is_ordered_below_one_prompt_of_its_tokens_only_with_merging():
    t = rows([2048, 2048, 512], [571.0, 403.0, 127.0], prompts=[4, 1, 1])
    assert monotone_floor(t, merging=False) == (0.0, None)
    s, pair = monotone_floor(t)
    assert pair == (0, 1) and s == pytest.approx(168 / 974)


def test_convex_floor_zero_on_convex_rows_and_above_the_monotone_floor_on_steps():
    tokens = np.arange(1, 17) * 64
    assert convex_floor(rows(tokens, 10 + 0.01 * tokens + 1e-5 * tokens**2)) == pytest.approx(0, abs=1e-9)
    steps = 10.0 * (1 + tokens // 256)  # flat, then a step every 256 tokens: monotone, not convex
    assert monotone_floor(rows(tokens, steps))[0] == 0.0
    assert convex_floor(rows(tokens, steps)) > 0.05
    batch = rows([512, 1024], [50.0, 40.0], prompts=[1, 2])  # one single prompt: nothing to order
    assert convex_floor(batch) == 0.0

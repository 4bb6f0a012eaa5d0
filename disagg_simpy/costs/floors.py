"""Model-free floors on whole prompts (issue 22): the smallest worst relative error ANY cost of a
given shape can reach on a table's whole-prompt rows, whatever its terms. A floor above 10% says
the rows themselves rule out "within about 10%" for every cost of that shape, not only ours.

Three shapes, each wider than the one after it:

- **monotone**: nondecreasing in each prompt's tokens and in the number of prompts of the same
  length an iteration reads (`monotone_floor`, `merging=False`);
- **engine-shaped**: also, tokens read as one prompt cost at least as much as the same tokens read
  as several (`merging=True`): merging prompts adds attention pairs and nothing else. Every cost
  the model has is of this shape (fixed costs, a cost per token beyond E14's free tokens, E7's
  c(c+1)/2 pairs of each prompt);
- **convex** (`convex_floor`, single prompts only): nondecreasing and convex in the prompt's
  tokens, as every sum of those terms is for one prompt read whole.

For an order (row i below row j: i's cost <= j's), the smallest worst |fitted / measured - 1| is
the largest (y_i - y_j) / (y_i + y_j) over pairs i below j with y_i > y_j: weighted L-infinity
isotonic regression with weights 1/y, whose optimum is that closed form (both rows at their
common value 2 y_i y_j / (y_i + y_j) meet it, and no order-respecting fit does better on that
pair). The convex floor is one linear program (scipy's HiGHS).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _shape(t: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(prompts, tokens a prompt, measured ms) of whole-prompt rows (equal prompts in a row)."""
    k = (t["prompts"].fillna(1) if "prompts" in t else pd.Series(1, index=t.index)).to_numpy(int)
    return k, t.prompt_tokens.to_numpy(int) // k, t.ms.to_numpy(float)


def monotone_floor(t: pd.DataFrame, merging: bool = True) -> tuple[float, tuple[int, int] | None]:
    """(the floor, the binding pair of row positions or None) of the rows of `t`, all whole prompts.
    Row i is below row j when j's prompts can hold i's: more or longer prompts (and, with `merging`,
    several of i's prompts merged into one of j's: k_i <= k_j * floor(l_j / l_i))."""
    k, length, y = _shape(t)
    if merging:
        below = k[:, None] <= k[None, :] * (length[None, :] // length[:, None])
    else:
        below = (k[:, None] <= k[None, :]) & (length[:, None] <= length[None, :])
    gap = np.where(below & (y[:, None] > y[None, :]), (y[:, None] - y[None, :]) / (y[:, None] + y[None, :]), 0.0)
    if not gap.any():
        return 0.0, None
    i, j = np.unravel_index(np.argmax(gap), gap.shape)
    return float(gap[i, j]), (int(i), int(j))


def convex_floor(t: pd.DataFrame) -> float:
    """The floor over the single-prompt rows of `t` for costs nondecreasing and convex in tokens
    (0 with fewer than two such rows). One linear program: a value per distinct prompt length,
    slopes nondecreasing, the first >= 0, and |value / measured - 1| <= s on every row."""
    from scipy.optimize import linprog

    k, length, y = _shape(t)
    length, y = length[k == 1], y[k == 1]
    x, at = np.unique(length, return_inverse=True)
    n = len(x)
    if n < 2:
        return 0.0
    rows, bounds = [], []

    def add(coef: dict[int, float], s: float, b: float) -> None:
        r = np.zeros(n + 1)
        for i, c in coef.items():
            r[i] += c
        r[n] = s
        rows.append(r)
        bounds.append(b)

    for i, yi in zip(at, y, strict=True):  # v - y <= s y and y - v <= s y
        add({i: 1.0}, -yi, yi)
        add({i: -1.0}, -yi, -yi)
    for i in range(n - 1):  # nondecreasing
        add({i: 1.0, i + 1: -1.0}, 0.0, 0.0)
    for i in range(1, n - 1):  # slope before <= slope after
        d1, d2 = x[i] - x[i - 1], x[i + 1] - x[i]
        add({i - 1: -1 / d1, i: 1 / d1 + 1 / d2, i + 1: -1 / d2}, 0.0, 0.0)
    res = linprog(np.r_[np.zeros(n), 1.0], A_ub=np.array(rows), b_ub=np.array(bounds),
                  bounds=[(0, None)] * (n + 1), method="highs")
    if res.status != 0:  # (always feasible: s large enough admits any nondecreasing convex line)
        raise RuntimeError(f"the convex floor failed: {res.message}")
    return float(res.x[n])

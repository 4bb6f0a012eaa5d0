"""Statistical yardsticks for tests of random draws: chi-square critical values and pooled cells.

Every test that uses them runs on fixed seeds (so it never flickers); the false-alarm rate each
states is how often a correct implementation would fail it on a fresh seed.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np


def chi2_critical(df: int, alpha: float) -> float:
    """The (1 - alpha) quantile of chi-square with df degrees of freedom (Wilson-Hilferty; within
    about 1% for df >= 3, which moves the false-alarm rate by far less than alpha itself)."""
    z = NormalDist().inv_cdf(1 - alpha)
    return df * (1 - 2 / (9 * df) + z * (2 / (9 * df)) ** 0.5) ** 3


def chi2_of(values: np.ndarray, support: np.ndarray, probs: np.ndarray, min_expected: float = 5.0) -> tuple[float, int]:
    """(statistic, degrees of freedom) of `values` against the discrete distribution P(support[i])
    = probs[i] (support sorted; probs sum to 1), adjacent values pooled until each cell expects
    at least `min_expected`. A value outside the support fails the test outright (inf)."""
    n = len(values)
    if not np.isin(values, support).all():
        return float("inf"), 1
    counts = np.searchsorted(support, values)
    observed = np.bincount(counts, minlength=len(support)).astype(float)
    cells_o, cells_e, o, e = [], [], 0.0, 0.0
    for oi, pi in zip(observed, probs):
        o, e = o + oi, e + pi * n
        if e >= min_expected:
            cells_o.append(o)
            cells_e.append(e)
            o = e = 0.0
    if e > 0 or o > 0:  # the tail: into the last cell
        cells_o[-1] += o
        cells_e[-1] += e
    co, ce = np.array(cells_o), np.array(cells_e)
    return float(((co - ce) ** 2 / ce).sum()), len(co) - 1

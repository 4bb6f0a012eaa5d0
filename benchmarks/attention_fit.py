"""The presets' error per kind of iteration with the attention term (issue 22): least squares of
relative error (`fit`, the fit `python -m disagg_simpy fit` gives) against the worst-case fit
(`costs/minimax.py`: the smallest worst error on whole prompts of 64-4,096 tokens, no other
iteration worse than least squares leaves it), without E14 and with it where the rows separate
it (the shipped fit), and the floor: the smallest largest error any non-negative choice of the
cost fields could reach (a minimax fit of relative error, a linear program) on all the preset's
iterations and on its whole prompts of 64-4,096 tokens alone, without E14 and with it.

    DISAGG_SIMPY_PROFILES=/work/shared/data/cost-profiles python benchmarks/attention_fit.py

A floor above 10% means no refit of these terms reaches 10% on those rows: the data has a shape
the terms cannot take (steps between neighbouring prompt sizes in the composed Vidur profiles;
SplitwiseSim's A100 batches of prompts costing more per token than one prompt of the same total).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from disagg_simpy.costs import catalog, profiles
from disagg_simpy.costs.fitting import ATTENTION, FREE, PROMPT_ITERATION, columns, fit
from disagg_simpy.costs.minimax import FREE_GRID, fit_worst, targeted, whole_range_error


def minimax(t, terms, free=0) -> np.ndarray:
    """The fields (>= 0) with the smallest largest relative error on the rows of `t`, and the fit."""
    r = columns(t, terms, free) / t.ms.to_numpy(float)[:, None]
    n, m = r.shape
    bound = np.c_[r, -np.ones(n)], np.c_[-r, -np.ones(n)]  # r x - 1 <= s and 1 - r x <= s
    res = linprog(np.r_[np.zeros(m), 1.0], A_ub=np.vstack(bound), b_ub=np.r_[np.ones(n), -np.ones(n)],
                  bounds=[(0, None)] * (m + 1), method="highs")
    return columns(t, terms, free) @ res.x[:m]


def worst(t, fitted) -> float:
    rel = fitted / t.ms.to_numpy(float) - 1
    return 100 * float(rel[np.argmax(np.abs(rel))])


def kinds_text(f, t) -> str:
    """writing / chunked / whole 64-4,096 errors of a fit."""
    e = f.errors_pct
    return " / ".join([f"{e['writing only']:+.1f}%", f"{e['chunked']:+.1f}%" if "chunked" in e else "n/a",
                       f"{whole_range_error(t, f.fitted):+.1f}%"])


def floor(t, terms) -> tuple[float, float]:
    """(without E14, with E14 at its best free tokens of the grid): the smallest largest error."""
    plain = abs(worst(t, minimax(t, terms)))
    more = terms + (PROMPT_ITERATION,)
    return plain, min(abs(worst(t, minimax(t, more, f))) for f in FREE_GRID)


def main() -> int:
    root = profiles.profiles_folder()
    if root is None:
        raise SystemExit(f"no public profiles: set ${profiles.ENV_FOLDER}")
    print("largest error, with the attention term: writing only / chunked / whole prompts of 64-4,096 tokens;")
    print("floors without E14 -> with E14")
    print(f"{'preset':<28}{'least squares':>26}{'worst-case fit, no E14':>26}{'shipped (E14 where it helps)':>30}"
          f"{'E14':>14}{'floor all':>16}{'floor whole':>16}")
    for spec in catalog.SPECS:
        t = catalog.iterations(spec, root)
        least, plain = fit(t, attention=True), fit_worst(t, attention=True)
        shipped = fit_worst(t, attention=True, unsaturated=True)
        c = shipped.coefficients
        e14 = f"{c[PROMPT_ITERATION]:.3g} ms, {c[FREE]}" if PROMPT_ITERATION in c else "off"
        terms = tuple(k for k in plain.coefficients)
        whole = t[targeted(t)].reset_index(drop=True)
        all_ = floor(t, terms)
        alone = floor(whole, ("iteration_ms", "per_prompt_token_ms", ATTENTION))
        print(f"{spec.name:<28}{kinds_text(least, t):>26}{kinds_text(plain, t):>26}{kinds_text(shipped, t):>30}"
              f"{e14:>14}{all_[0]:>8.1f}->{all_[1]:.1f}%{alone[0]:>8.1f}->{alone[1]:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

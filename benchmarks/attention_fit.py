"""Why the presets' whole-prompt error stays above 10% with the attention term (issue 22): for
each preset, the shipped fit's largest error per kind of iteration, and the smallest largest
error any choice of the cost fields could reach (a minimax fit of relative error, a linear
program), on all its iterations and on its whole prompts of 64-4,096 tokens alone.

    DISAGG_SIMPY_PROFILES=/work/shared/data/cost-profiles python benchmarks/attention_fit.py

A floor above 10% means no refit of these terms reaches 10% on those rows: the data has a shape
the terms cannot take (steps between neighbouring prompt sizes in the composed Vidur profiles;
SplitwiseSim's batches of prompts costing more per token than one prompt of the same total).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from disagg_simpy.costs import catalog, profiles
from disagg_simpy.costs.fitting import ATTENTION, BASE_TERMS, REREAD, columns, fit, kinds

WHOLE = "whole prompt"


def minimax(t, terms) -> np.ndarray:
    """The fields (>= 0) with the smallest largest relative error on the rows of `t`, and the fit."""
    r = columns(t, terms) / t.ms.to_numpy(float)[:, None]
    n, m = r.shape
    bound = np.c_[r, -np.ones(n)], np.c_[-r, -np.ones(n)]  # r x - 1 <= s and 1 - r x <= s
    res = linprog(np.r_[np.zeros(m), 1.0], A_ub=np.vstack(bound), b_ub=np.r_[np.ones(n), -np.ones(n)],
                  bounds=[(0, None)] * (m + 1), method="highs")
    return columns(t, terms) @ res.x[:m]


def worst(t, fitted) -> float:
    rel = fitted / t.ms.to_numpy(float) - 1
    return 100 * float(rel[np.argmax(np.abs(rel))])


def main() -> int:
    root = profiles.profiles_folder()
    if root is None:
        raise SystemExit(f"no public profiles: set ${profiles.ENV_FOLDER}")
    print(f"{'preset':<28}{'shipped (attention): writing / chunked / whole':>48}{'whole 64-4096':>15}"
          f"{'floor all':>11}{'floor whole':>13}")
    for spec in catalog.SPECS:
        t = catalog.iterations(spec, root)
        terms = BASE_TERMS + ((REREAD,) if "earlier_tokens" in t and (t.earlier_tokens > 0).any() else ()) + (
            ATTENTION,)
        shipped = fit(t, attention=True)
        kind = kinds(t)
        in_range = (kind == WHOLE) & (t.prompt_tokens >= 64) & (t.prompt_tokens <= 4096)
        errors = " / ".join(f"{shipped.errors_pct[k]:+.1f}%" if k in shipped.errors_pct else "n/a"
                            for k in ("writing only", "chunked", WHOLE))
        whole = t[in_range].reset_index(drop=True)
        floor_all = abs(worst(t, minimax(t, terms)))
        floor_whole = abs(worst(whole, minimax(whole, ("iteration_ms", "per_prompt_token_ms", ATTENTION))))
        print(f"{spec.name:<28}{errors:>48}{worst(t[in_range], shipped.fitted[in_range]):>+14.1f}%"
              f"{floor_all:>10.1f}%{floor_whole:>12.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

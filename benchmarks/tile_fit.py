"""Would a token-tile term bring the Vidur presets within about 10% on whole prompts? (issue 22)

Vidur's matrix products step every 128 tokens (GEMM tile/wave quantisation), so its whole-prompt
rows are a staircase no convex cost follows (costs/floors.py). This refits every preset with one
more term, `per_token_tile_ms * ceil(T / token_tile)`, T = prompt tokens read + replies written in
the iteration (every token of the batch is a row of the matrix products), for token_tile in
TILES, by the shipped fit (costs/minimax.py: attention term, E14 where it earns a point, other
groups within least squares' error (least squares over the same terms, tile included), loosened
to 10% where that earns a point). The term is linear in per_token_tile_ms for a given tile, so the
fit is the shipped one with one more column. Prints a Markdown table: today's shipped errors,
then for each tile, and the best tile (smallest worst whole-prompt error).

    DISAGG_SIMPY_PROFILES=/work/shared/data/cost-profiles python benchmarks/tile_fit.py
"""

from __future__ import annotations

import numpy as np

from disagg_simpy.costs import catalog, fitting, minimax, profiles
from disagg_simpy.costs.minimax import fit_worst, whole_range_error

TILE = "per_token_tile_ms"
TILES = (16, 32, 64, 128, 256)
_columns, _fit = fitting.columns, fitting.fit


def _with_tile(tile: int) -> None:
    """Make the fitting code know the tile term (a column ceil((prompt tokens + replies) / tile))
    and add it to every fit's terms."""
    def columns(t, terms, free=0):
        base = tuple(k for k in terms if k != TILE)
        a = _columns(t, base, free)
        if TILE not in terms:
            return a
        tiles = np.ceil((t.prompt_tokens.to_numpy(float) + t.replies.to_numpy(float)) / tile)
        return np.insert(a, list(terms).index(TILE), tiles, axis=1)

    def fit(t, attention=False, unsaturated=False):
        terms = fitting.BASE_TERMS
        if "earlier_tokens" in t and (t.earlier_tokens > 0).any():
            terms += (fitting.REREAD,)
        if attention:
            terms += (fitting.ATTENTION,)
        terms += (TILE,)
        if unsaturated:
            return fitting.fit_unsaturated(t, terms)
        return fitting._least_squares(t, terms)[0]

    fitting.columns = minimax.columns = columns
    fitting.fit = minimax.fit = fit
    fitting._COUNTS[TILE] = "token tiles"


def _restore() -> None:
    fitting.columns = minimax.columns = _columns
    fitting.fit = minimax.fit = _fit


def pct(x: float) -> str:
    return f"{round(x, 1) + 0.0:+.1f}%"


def errors(f, t) -> tuple[str, float]:
    e = f.errors_pct
    chunked = pct(e[fitting.KINDS[1]]) if fitting.KINDS[1] in e else "n/a"
    whole = whole_range_error(t, f.fitted)
    return f"{pct(e[fitting.KINDS[0]])} / {chunked} / **{pct(whole)}**", abs(whole)


def main() -> int:
    root = profiles.profiles_folder()
    if root is None:
        raise SystemExit(f"no public profiles: set ${profiles.ENV_FOLDER}")
    print("Largest error, writing only / chunked / **whole prompts of 64-4,096 tokens**: shipped "
          "(attention, E14 where it helps), then with a token-tile term of each size.\n")
    print("| preset | shipped | " + " | ".join(f"tile {k}" for k in TILES) + " | best tile: ms a tile |")
    print("|---|---|" + "---|" * len(TILES) + "---|")
    for spec in catalog.SPECS:
        t = catalog.iterations(spec, root)
        _restore()
        today = errors(fit_worst(t, attention=True, unsaturated=True), t)[0]
        cells, best = [], None
        for tile in TILES:
            _with_tile(tile)
            f = fit_worst(t, attention=True, unsaturated=True)
            text, whole = errors(f, t)
            cells.append(text)
            if best is None or whole < best[0] - 1e-9:
                best = (whole, tile, f.coefficients.get(TILE, 0.0))
        _restore()
        print(f"| `{spec.name}` | {today} | " + " | ".join(cells) + f" | {best[1]}: {best[2]:.4g} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

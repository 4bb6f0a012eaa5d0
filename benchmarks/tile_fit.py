"""What E15's token tiles give each preset on whole prompts (issue 22), tile size by tile size.

Vidur's matrix products step every 128 tokens (GEMM tile/wave quantisation), so its whole-prompt
rows are a staircase no convex cost follows (costs/floors.py). The presets' fit
(costs/minimax.py) offers one more term, `per_token_tile_ms * ceil(T / token_tile)`, T = prompt
tokens read + replies written in the iteration (every token of the batch is a row of the matrix
products), for each token_tile of `minimax.TILES`, and keeps the best where it lowers the worst
whole-prompt error by a point. This prints, per preset, the fit without a tile, the fit offered
each tile alone (the same rule: other groups within least squares' error over the same terms,
tile included, loosened to 10% where that earns a point; E14 where it earns a point), marked
"not kept" where the tile earns no point, and the shipped choice. A Markdown table.

    DISAGG_SIMPY_PROFILES=/work/shared/data/cost-profiles python benchmarks/tile_fit.py
"""

from __future__ import annotations

from disagg_simpy.costs import catalog, fitting, profiles
from disagg_simpy.costs.minimax import TILES, fit_worst, whole_range_error
from disagg_simpy.costs.presets import PRESETS


def pct(x: float) -> str:
    return f"{round(x, 1) + 0.0:+.1f}%"


def errors(f, t) -> str:
    e = f.errors_pct
    chunked = pct(e[fitting.KINDS[1]]) if fitting.KINDS[1] in e else "n/a"
    return f"{pct(e[fitting.KINDS[0]])} / {chunked} / **{pct(whole_range_error(t, f.fitted))}**"


def main() -> int:
    root = profiles.profiles_folder()
    if root is None:
        raise SystemExit(f"no public profiles: set ${profiles.ENV_FOLDER}")
    print("Largest error, writing only / chunked / **whole prompts of 64-4,096 tokens**: without a tile, "
          "offered each tile size alone (not kept: it earns no point), and the shipped choice.\n")
    print("| preset | no tile | " + " | ".join(f"tile {k}" for k in TILES) + " | shipped: tile, ms a tile |")
    print("|---|---|" + "---|" * len(TILES) + "---|")
    for spec in catalog.SPECS:
        t = catalog.iterations(spec, root)
        cells = [errors(fit_worst(t, attention=True, unsaturated=True), t)]
        for tile in TILES:
            f = fit_worst(t, attention=True, unsaturated=True, tiles=(tile,))
            cells.append(errors(f, t) if f.coefficients.get(fitting.TILE_SIZE) else "not kept")
        c = PRESETS[spec.name]["attention_cost"]
        kept = f"{c[fitting.TILE_SIZE]}, {c[fitting.TILE]:.4g}" if fitting.TILE_SIZE in c else "none"
        print(f"| `{spec.name}` | " + " | ".join(cells) + f" | {kept} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The MoE presets' writing-iteration fit, against the composed times, three ways (issue 38):

- **before**: the fit every preset takes (costs/minimax.py) on every composed row, as the MoE
  presets were fitted until the range below;
- **shipped (saturated range)**: the same fit on the rows where every expert is busy, the writing
  rows of at least S = ceil(experts / top-k) replies (all prompt rows have more tokens than that),
  the preset's range starting at S replies so a run below it is warned (costs/composed.py,
  `saturated_replies`); the rows below S are reported apart;
- **experts-touched term** (not in the model: the cost term it would take, see docs/composed-presets.md):
  least squares of relative error over the attention fit's terms plus one column,
  min(experts, top-k x tokens of the iteration), the distinct experts a batch touches under the
  tables' balanced routing.

    DISAGG_SIMPY_AICONFIGURATOR=.../aiconfigurator python benchmarks/moe_fit.py

Prints, per preset, the largest signed error on writing-only rows by replies (1-8 / 16-64 / 128-256)
and on chunked and whole-prompt rows, and the median over presets of the largest writing error.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from disagg_simpy.costs import composed as C  # noqa: E402
from disagg_simpy.costs import operators as O  # noqa: E402
from disagg_simpy.costs.fitting import ATTENTION, BASE_TERMS, KINDS, REREAD, columns, kinds  # noqa: E402
from disagg_simpy.costs.minimax import fit_worst  # noqa: E402


def experts_column(rows, model) -> np.ndarray:
    n = rows.replies.to_numpy(float) + rows.prompt_tokens.to_numpy(float)
    return np.minimum(model.experts, model.topk * n)


def with_experts_term(rows, model) -> np.ndarray:
    """Least squares of relative error (nnls) with the experts-touched column: the fitted times."""
    from scipy.optimize import nnls

    a = np.column_stack([columns(rows, BASE_TERMS + (REREAD, ATTENTION)), experts_column(rows, model)])
    y = rows.ms.to_numpy(float)
    w = a / y[:, None]
    norms = np.linalg.norm(w, axis=0)
    x = nnls(w / norms, np.ones(len(y)), maxiter=500)[0] / norms
    return a @ x


def bands(rows, fitted) -> str:
    e = C.errors_by_size(rows, fitted)
    w = e.get(KINDS[0], {})
    return (" / ".join(f"{v:+.1f}%" for v in w.values()) + " | " + " / ".join(f"{v:+.1f}%" for v in e.get(KINDS[1], {}).values())
            + " | " + " / ".join(f"{v:+.1f}%" for v in e.get(KINDS[2], {}).values()))


def worst_writing(rows, fitted, keep=None) -> float:
    rel = fitted / rows.ms.to_numpy(float) - 1
    sel = kinds(rows) == KINDS[0]
    if keep is not None:
        sel &= keep
    return float(100 * np.abs(rel[sel]).max()) if sel.any() else float("nan")


def main() -> None:
    folder = O.data_folder()
    if folder is None:
        raise SystemExit(f"no AIConfigurator tables: set ${O.ENV_FOLDER}")
    shipped = json.loads(C.SHIPPED.read_text())
    lines = ["| preset | S | before: writing 1-8 / 16-64 / 128-256 | shipped: writing (>= S) / below S | "
             "experts-touched term: writing 1-8 / 16-64 / 128-256 \\| chunked \\| whole |", "|---|---|---|---|---|"]
    medians: dict[str, list[float]] = {"before": [], "shipped (>= S)": [], "shipped below S": [], "term": []}
    for spec in C.specs():
        if spec.name not in shipped or not C.config_of(folder, spec.model).experts:
            continue
        model = C.config_of(folder, spec.model)
        every = C.grid(O.tables(folder, spec.gpu, spec.engine), model, spec.tp)
        before = fit_worst(every, attention=True, unsaturated=True, tiles=C.TILES)
        medians["before"].append(worst_writing(every, before.fitted))
        p = shipped[spec.name]
        rows, under = C.split_rows(every, model)
        inside = max(abs(v) for v in p["errors_by_size_pct"][KINDS[0]].values())
        below = max(abs(v) for v in p["below_range_pct"].values())
        medians["shipped (>= S)"].append(inside)
        medians["shipped below S"].append(below)
        fitted = with_experts_term(every, model)
        medians["term"].append(worst_writing(every, fitted))
        w = C.errors_by_size(every, before.fitted)[KINDS[0]]
        lines.append(f"| `{spec.name}` | {C.saturated_replies(model)} | " + " / ".join(f"{v:+.1f}%" for v in w.values())
                     + f" | {inside:.1f}% / {below:.1f}% | {bands(every, fitted)} |")
        print(lines[-1], file=sys.stderr)
    print("\n".join(lines))
    print("\nmedian over presets of the largest writing-only error (range): " + ", ".join(
        f"{k} {statistics.median(v):.1f}% ({min(v):.1f}-{max(v):.1f}%)" for k, v in medians.items()))


if __name__ == "__main__":
    main()

"""The MoE presets' fit against the composed times, before and with E17's expert term (issue 38):

- **before** (as shipped until E17): the attention fit (costs/minimax.py) on the rows where every
  expert is busy, writing rows of at least S = ceil(experts / top-k) replies (every prompt row has
  more tokens than that), its error then taken on every row, the writing rows below S included
  (those runs were warned);
- **E17** (as shipped now, costs/composed.py): the same fit with `per_expert_ms` x min(experts,
  experts_per_token x tokens) beside the other terms, over every row.

    DISAGG_SIMPY_AICONFIGURATOR=.../aiconfigurator python benchmarks/moe_fit.py [--silicon]

Prints, per MoE preset, the largest signed error on writing-only rows by replies (1-8 / 16-64 /
128-256) and on chunked and whole-prompt rows, and the median (range) over presets of the largest
error per kind. `--silicon` adds the MoE configs of the validation catalog's measured deployments
(MiniMax-M2.5, Qwen3-235B-A22B-FP8, as benchmarks/silicon_accuracy.py expresses them; not shipped).
Only AIConfigurator's per-operator timings are fitted; the measured deployments are not.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from disagg_simpy.costs import composed as C  # noqa: E402
from disagg_simpy.costs import operators as O  # noqa: E402
from disagg_simpy.costs.fitting import COUNTS, KINDS, columns, kinds  # noqa: E402
from disagg_simpy.costs.minimax import TILES, fit_worst  # noqa: E402


def before(rows, model) -> np.ndarray:
    """The attention fit without E17 on the rows from S replies, evaluated on every row."""
    dense = rows.assign(experts=0, experts_per_token=0)
    keep = ~((kinds(dense) == KINDS[0]) & (dense.replies.to_numpy() < C.saturated_replies(model)))
    f = fit_worst(dense[keep].reset_index(drop=True), attention=True, unsaturated=True, tiles=TILES)
    return evaluate(dense, f.coefficients)


def evaluate(rows, c: dict) -> np.ndarray:
    """A fit's fields on `rows`, by the fitting's own columns."""
    terms = tuple(k for k in c if k not in COUNTS)
    return columns(rows, terms, int(c.get("free_prompt_tokens", 0)), int(c.get("token_tile", 0))) @ np.array(
        [c[k] for k in terms])


def cells(rows, fitted) -> tuple[str, dict[str, float]]:
    e = C.errors_by_size(rows, fitted)
    text = " | ".join(" / ".join(f"{v:+.1f}%" for v in e.get(k, {}).values()) or "n/a" for k in KINDS)
    return text, {k: max(abs(v) for v in e[k].values()) for k in e}


def main() -> None:
    folder = O.data_folder()
    if folder is None:
        raise SystemExit(f"no AIConfigurator tables: set ${O.ENV_FOLDER}")
    cases = []
    for spec in C.specs():
        model = C.config_of(folder, spec.model)
        if model.experts:
            cases.append((spec.name, model, spec.gpu, spec.engine, spec.tp, 1))
    if "--silicon" in sys.argv:  # (the rows' own expression: benchmarks/silicon_accuracy.py)
        import pandas as pd
        import silicon_accuracy as S

        refs = pd.read_csv(folder / "accuracy_tracking" / "silicon_refs.csv")
        for i, r in refs.iterrows():
            if S.reasons(r, folder) or not (model := S.model_of(r, folder)).experts:
                continue
            gpu = S.SYSTEMS[r.system]
            for side, tp, ep in S.sides(r):
                cases.append((f"row {i + 1}: {S.slug(r)}, {side} TP{tp}" + (f" EP{ep}" if ep > 1 else ""), model, gpu,
                              S.ENGINE_OF[(r.backend, gpu)], tp, ep))
    lines = ["| preset | S | before: writing 1-8 / 16-64 / 128-256 \\| chunked \\| whole | E17: writing 1-8 / 16-64 / "
             "128-256 \\| chunked \\| whole | per_expert_ms |", "|---|---|---|---|---|"]
    worst: dict[str, dict[str, list[float]]] = {"before": {}, "E17": {}}
    for name, model, gpu, engine, tp, ep in cases:
        try:
            p = C.compose(model, O.tables(folder, gpu, engine), tp, name, ep=ep)
        except O.InputError as e:
            print(f"{name}: not composed: {e}", file=sys.stderr)
            continue
        rows = C.grid(O.tables(folder, gpu, engine), model, tp, ep)
        old_text, old = cells(rows, before(rows, model))
        c = p["attention_cost"]
        new_text, new = cells(rows, evaluate(rows, c))
        for label, e in (("before", old), ("E17", new)):
            for k, v in e.items():
                worst[label].setdefault(k, []).append(v)
        lines.append(f"| `{name}` | {C.saturated_replies(model)} | {old_text} | {new_text} | {c.get('per_expert_ms', 0):g} |")
        print(lines[-1], file=sys.stderr)
    print("\n".join(lines))
    for label, e in worst.items():
        print(f"\n{label}: largest error per kind, median (range) over presets: " + ", ".join(
            f"{k} {statistics.median(v):.1f}% ({min(v):.1f}-{max(v):.1f}%)" for k, v in e.items()))


if __name__ == "__main__":
    main()

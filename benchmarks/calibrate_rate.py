"""Sweep the arrival rate of the default traffic to choose the default load.

The explainer never states its load. This runs every arrangement at each rate over several
seeds and prints a markdown table of mean on-time % (and the figures behind the claims), so the
rate where the claims hold together can be read off.

    python benchmarks/calibrate_rate.py --rates 12:16:0.5 --seeds 10
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from disagg_simpy import load_scenario, run


def parse_rates(text: str) -> list[float]:
    if ":" in text:
        lo, hi, step = (float(x) for x in text.split(":"))
        return [round(x, 6) for x in np.arange(lo, hi + step / 2, step)]
    return [float(x) for x in text.split(",")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="scenarios/default.yaml")
    p.add_argument("--rates", default="12:16:0.5", help="LOW:HIGH:STEP or a comma list")
    p.add_argument("--seeds", type=int, default=10)
    args = p.parse_args()
    base = load_scenario(args.scenario)
    if base.reference is None:
        sys.exit(f"{args.scenario}: no reference: on_time_pct to calibrate against")
    on_time, details = [], []
    for rate in parse_rates(args.rates):
        scenario = base.with_overrides(**{"workload.rate_per_s": rate})
        runs = pd.concat([run(scenario, seed=s).summary for s in range(1, args.seeds + 1)])
        mean = runs.groupby("arrangement", sort=False).mean(numeric_only=True)
        on_time.append(mean["on_time_pct"].rename(rate))
        details.append(
            {
                "rate": rate,
                "same-gpu longest gap (s)": mean.loc["same-gpu", "longest_gap_ms"] / 1000,
                "same-gpu median gap (ms)": mean.loc["same-gpu", "median_mean_gap_ms"],
                "chunked longest gap (ms)": mean.loc["chunked-512", "longest_gap_ms"],
                "chunked p90 first word (s)": mean.loc["chunked-512", "first_word_p90_s"],
            }
        )
    table = pd.DataFrame(on_time)
    explainer = pd.Series(base.reference.on_time_pct)[table.columns]
    table["off by"] = (table[explainer.index] - explainer).abs().sum(axis=1)
    print(f"Mean on-time % over seeds 1..{args.seeds} ({args.scenario}); 'off by' sums |mean - explainer|:\n")
    print(markdown(pd.concat([table, explainer.to_frame("explainer").T]), "rate (req/s)"))
    print("\nFigures behind C1, C3, C4, C5 (means):\n")
    print(markdown(pd.DataFrame(details).set_index("rate"), "rate (req/s)"))


def markdown(frame: pd.DataFrame, index_name: str) -> str:
    """A markdown table with one decimal (two for seconds), no extra dependency."""
    cells = [[index_name, *frame.columns]]
    for idx, row in frame.iterrows():
        cells.append([f"{idx:g}" if isinstance(idx, float) else str(idx)]
                     + ["" if pd.isna(v) else f"{v:.2f}" if "(s)" in c else f"{v:.1f}" for c, v in row.items()])
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    lines = ["| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|")
    return "\n".join(lines)


if __name__ == "__main__":
    main()

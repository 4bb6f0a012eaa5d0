"""Print the README's claims table: each of the explainer's figures beside this model's, for one seed and
for the mean over many seeds (with the 95% half-width).

    python benchmarks/claims_table.py --seeds 30
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from disagg_simpy import load_scenario, run
from disagg_simpy.results.intervals import mean_half_width


def first_gap_figures(result) -> tuple[float, float]:
    """C8: median first gap (s) of long-prompt split-2-2 replies; share whose longest gap is the first."""
    words = result.words("split-2-2").set_index(["word", "request_id"]).at_s
    first_gap = (words.loc[2] - words.loc[1]).dropna()
    req = result.requests[result.requests.arrangement == "split-2-2"].set_index("request_id").loc[first_gap.index]
    median_long = float(np.median(first_gap[req.n_prompt_tokens >= 3000]))
    share = float((first_gap * 1000 >= req.max_gap_ms - 1e-6).mean()) * 100
    return median_long, share


CLAIMS = [
    ("C1", "same-gpu longest gap (s)", "about 0.4", lambda s, f: s.loc["same-gpu", "longest_gap_ms"] / 1000, "0.35-0.6"),
    ("C2", "same-gpu on time (%)", "1", lambda s, f: s.loc["same-gpu", "on_time_pct"], "<= 5"),
    ("C3", "same-gpu median of mean gaps (ms)", "41", lambda s, f: s.loc["same-gpu", "median_mean_gap_ms"], "30-50"),
    ("C4", "chunked-512 longest gap (ms)", "about 60", lambda s, f: s.loc["chunked-512", "longest_gap_ms"], "<= 70"),
    ("C5", "chunked-512 p90 first word (s)", "over 1", lambda s, f: s.loc["chunked-512", "first_word_p90_s"], ">= 0.6, > same-gpu"),
    ("C6", "chunked-512 on time (%)", "89", lambda s, f: s.loc["chunked-512", "on_time_pct"], "80-97"),
    ("C7", "split-2-2 on time (%)", "100", lambda s, f: s.loc["split-2-2", "on_time_pct"], ">= 96"),
    ("C8", "split-2-2 long-prompt first gap, median (s)", "about 0.1", lambda s, f: f[0], "0.06-0.15"),
    ("C8", "split-2-2 replies whose longest gap is the first (%)", "(the one pause)", lambda s, f: f[1], ">= 90"),
    ("C9", "split-1-3 on time (%)", "about 10", lambda s, f: s.loc["split-1-3", "on_time_pct"], "3-20"),
    ("C10", "split-3-1 on time (%)", "about 10", lambda s, f: s.loc["split-3-1", "on_time_pct"], "3-20"),
]


#: C11 compares the on-time rows of CLAIMS (index -> arrangement)
C11_ROWS = {1: "same-gpu", 6: "split-2-2", 9: "split-1-3", 10: "split-3-1"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="scenarios/default.yaml")
    p.add_argument("--seeds", type=int, default=30)
    args = p.parse_args()
    scenario = load_scenario(args.scenario)
    values = {i: [] for i in range(len(CLAIMS))}
    for seed in range(scenario.seed, scenario.seed + args.seeds):
        result = run(scenario, seed=seed)
        summary = result.summary.set_index("arrangement")
        figures = first_gap_figures(result)
        for i, claim in enumerate(CLAIMS):
            values[i].append(claim[3](summary, figures))
    print(f"| id | figure | explainer | seed {scenario.seed} | mean of {args.seeds} seeds | test band |")
    print("|---|---|---:|---:|---:|---|")
    for i, (cid, what, explainer, _, band) in enumerate(CLAIMS):
        mean, hw = mean_half_width(pd.Series(values[i]))
        d = 2 if "(s)" in what else 1
        print(f"| {cid} | {what} | {explainer} | {values[i][0]:.{d}f} | {mean:.{d}f} ± {hw:.{d}f} | {band} |")
    # C11: split-2-2 on time beats split-1-3, split-3-1 and same-gpu, for seed 1 and on the mean
    on_time = {name: values[i] for i, name in C11_ROWS.items()}
    first = all(on_time["split-2-2"][0] > v[0] for k, v in on_time.items() if k != "split-2-2")
    mean = all(np.mean(on_time["split-2-2"]) > np.mean(v) for k, v in on_time.items() if k != "split-2-2")
    yes = {True: "yes", False: "no"}
    print(f"| C11 | split-2-2 beats split-1-3, split-3-1 and same-gpu on time | yes | {yes[first]} | {yes[mean]} | all three |")


if __name__ == "__main__":
    main()

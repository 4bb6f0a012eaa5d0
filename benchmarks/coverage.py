"""The large-sample on-time share of tests/results/test_intervals.py's cheap scenario, and how often
the 95% intervals over disjoint seed sets hold it (the test pins the value this prints).

    PYTHONPATH=. python benchmarks/coverage.py --seeds 4000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "results"))
from test_intervals import CHEAP, shares  # noqa: E402

from disagg_simpy.results.intervals import interval, mean_half_width  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=4000)
    p.add_argument("--first", type=int, default=100_001, help="first seed (away from the test's own)")
    args = p.parse_args()
    v = shares(range(args.first, args.first + args.seeds))
    truth = float(v.mean())
    print(f"{CHEAP['name']}: mean on-time share over {args.seeds} seeds from {args.first}: {truth:.4f} "
          f"(standard error {v.std(ddof=1) / np.sqrt(len(v)):.4f})")
    for n in (5, 8, 10, 20, 30):
        sets = [v[i:i + n] for i in range(0, len(v) - n + 1, n)]
        held = np.mean([interval(s).holds(truth) for s in sets])
        t_held = np.mean([abs(mean_half_width(s)[0] - truth) <= mean_half_width(s)[1] for s in sets])
        print(f"  {n:2d} seeds, {len(sets)} disjoint sets: interval holds it {held:.3f}, Student-t alone {t_held:.3f}")


if __name__ == "__main__":
    main()

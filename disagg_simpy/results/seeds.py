"""Which seed the pictures of one run and the page's player show when a run has several.

Tables and on-time charts show every seed (means, intervals, dots); a timeline or a player can
show one run only. It shows the **representative seed**: the seed whose on-time shares, one per
arrangement, are closest to the means over the seeds (least sum of squared differences; the
lowest seed on a tie). The first seed is no better than any other and may be unusually good or
bad; the representative one looks like the table.
"""

from __future__ import annotations

import pandas as pd


def representative_seed(summary: pd.DataFrame) -> tuple[int, str]:
    """The representative seed of a summary with a `seed` column (one row per arrangement x
    seed), and the reason, said in words."""
    pivot = summary.pivot_table(index="seed", columns="arrangement", values="on_time_pct", observed=True)
    pivot = pivot.reindex(sorted(summary["seed"].unique()))
    distance = ((pivot - pivot.mean()) ** 2).sum(axis=1, skipna=True)
    seed = int(distance.idxmin())
    return seed, f"on-time shares closest to the means of {len(pivot)} seeds"

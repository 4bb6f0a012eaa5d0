"""The "why late" block printed under the run's table: which limit late requests broke, and what
caused the freezes (the top offending prompts for one seed)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..texts import aligned
from .blame import CAUSES, cause_counts, top_prompts
from .breakdown import LATE_COLUMNS
from .rules import RULE_COLUMNS

#: the block's columns after "late": the one limit a request broke (the explainer's three, then the
#: rule's end-to-end and delay limits when on: rules.RULE_COLUMNS), or several
_HEADERS = {"late_first_word_only_pct": "first word only", "late_mean_gap_only_pct": "mean gap only",
            "late_froze_only_pct": "freezes only", "late_e2e_only_pct": "end-to-end only",
            "late_delay_only_pct": "delay only", "late_several_pct": "several"}


def why_late_text(results: list) -> str:
    """The block for one or several seeds (RunResults of one scenario); several: means per seed."""
    first = results[0]
    summary = pd.concat([r.summary for r in results], ignore_index=True)
    freezes = {name: FreezeFacts.of(first, name) for name in first.records}
    for r in results[1:]:
        for name in r.records:
            freezes[name].add(r.blame[name])
    return why_late_block(summary, freezes, len(results))


@dataclass
class FreezeFacts:
    """What the block says of one arrangement's freezes: counts by cause, summed over seeds, and
    the first seed's most-blamed prompts and long-prompt size (kept without the seed's rows)."""

    counts: np.ndarray
    top: list
    n_long: int | None

    @classmethod
    def of(cls, result, name: str) -> FreezeFacts:
        blame = result.blame[name]
        top = top_prompts(blame, result.records[name].requests["n_prompt_tokens"])
        return cls(cause_counts(blame), top, result.long_prompt_tokens[name])

    def add(self, blame) -> None:
        self.counts = self.counts + cause_counts(blame)


def why_late_block(summary: pd.DataFrame, freezes: dict[str, FreezeFacts], n_seeds: int) -> str:
    """The block from every seed's summary rows and each arrangement's `FreezeFacts`."""
    means = summary.groupby("arrangement", sort=False, observed=True).mean(numeric_only=True)
    many = n_seeds > 1
    several = "late_several_pct"
    only = [*(c for c in LATE_COLUMNS if c != several), *(only for _, only in RULE_COLUMNS.values()), several]
    shown = [c for c in only if c in summary and not summary[c].isna().all()]  # a limit that is off: no column
    rows = [["arrangement", "late", *(_HEADERS[c] for c in shown)]]
    for name, row in means.iterrows():
        rows.append([str(name), _pct(100.0 - row["on_time_pct"]), *(_pct(row[c]) for c in shown)])
    per = " (mean of seeds)" if many else ""
    lines = [f"why late: % of measured requests late, by the one limit they broke, or several{per}"]
    lines += aligned(rows)

    for name, facts in freezes.items():
        n_long = facts.n_long
        over = f"prompts over {n_long:,} tokens" if n_long is not None else "long prompts"
        counts = facts.counts
        total = int(counts.sum())
        if total == 0:
            continue
        per_seed = counts / n_seeds
        causes = ", ".join(f"{CAUSES[c]} {per_seed[c]:,.0f}" for c in np.argsort(-counts, kind="stable") if counts[c])
        n_text = f"{total / n_seeds:,.0f}" + (" per seed" if many else "")
        line = f"freezes in {name}: {n_text} ({causes}); {_pct(means.loc[name, 'freezes_by_long_prompt_pct'])}% caused by {over}"
        lines.append(line)
        top = [t for t in facts.top if t[2] > 1]
        if top and not many:  # (a prompt blamed once each is no pattern: no line)
            (i, t, k), rest = top[0], top[1:]
            lines.append(f"  blamed most: request {i} ({t:,} tokens, {k} freezes)"
                         + "".join(f", {i} ({t:,}, {k})" for i, t, k in rest))
    if len(lines) > len(rows) + 1:
        lines.append("  (a prompt over that many tokens, read whole, takes over the freeze limit by itself; freezes.csv has each freeze)")
    return "\n".join(lines)


def _pct(value: float) -> str:
    return "-" if value is None or np.isnan(value) else f"{value:.1f}"

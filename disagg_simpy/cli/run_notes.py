"""What the run command shows and says beyond its tables: which seed its pictures and page
show, why a table is empty, which earlier files it removed, and the requests E9 dropped."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .plot_flags import plot_flag_error


def shown_run(args: argparse.Namespace, plots: bool, scenario, summary, first):
    """The run the timelines, late.png and the page's player show: with several seeds the
    representative one (results/seeds.py), run again when it is not the first (the first is
    the only whole run kept; a seed's run is the same every time), named with the reason."""
    if "seed" not in summary.columns or summary["seed"].nunique() < 2:
        return first
    from ..api import run as run_scenario
    from ..results.seeds import representative_seed

    seed, why = representative_seed(summary)
    shown = first if seed == first.seed else run_scenario(scenario, seed=seed)
    shown.chosen = why
    if shown is not first and plots:  # the picture options against the run shown
        from ..plots import PlotOptionError, check_plot_options

        try:
            check_plot_options(shown, args.window, args.follow)
        except PlotOptionError as err:
            raise plot_flag_error(err) from None
    return shown


def no_measured_request(scenario) -> str:
    """Why every figure is empty: no request arrived in the measured window."""
    w = scenario.workload
    rate, start, end = getattr(w, "rate_per_s", None), getattr(w, "warmup_s", 0.0), getattr(w, "measure_s", None)
    window = f"[{start:g}, {end:g}) s" if end is not None else "of the trace"
    text = f"no request arrived in the measured window {window}, so every figure is empty"
    if rate is not None and end is not None:
        expected = rate * (end - start)
        text += (f" (at {rate:g} requests/s the window expects {expected:.2g} requests); raise --rate or "
                 "--measure-s")
    return text


def removed_note(out: Path, removed: list[Path], no_plots: bool, fmt: str = "csv") -> str:
    """One line naming the files an earlier run wrote in `out` that this run removed, and why
    (for the kinds of file removed: pictures under --no-plots, tables of the other --format)."""
    names = [os.path.relpath(p, out) for p in removed]
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    reasons = []
    if no_plots and any(p.suffix == ".png" for p in removed):
        reasons.append("--no-plots: no pictures this time")
    if any(p.suffix in (".csv", ".parquet") and p.suffix != f".{fmt}" for p in removed):
        reasons.append(f"--format {fmt}: the tables are .{fmt} files this time")
    why = f" ({'; '.join(reasons)})" if reasons else ""
    return (f"note: removed {len(names)} file{'s' * (len(names) > 1)} an earlier run wrote in {out}/ that this run "
            f"does not write{why}: {shown}")


def dropped_text(summary, many: bool) -> str:
    """The caption's words on E9's dropped requests ('' when none was dropped): each arrangement's
    count (the mean per seed with several seeds)."""
    if "n_dropped" not in summary.columns or not (summary["n_dropped"].fillna(0) > 0).any():
        return ""
    means = summary.groupby("arrangement", sort=False, observed=True)["n_dropped"].mean()
    shown = ", ".join(f"{name} {n:.3g}" for name, n in means.items() if n > 0)
    return f"; dropped past max_preemptions (E9, not on time){' per seed on average' if many else ''}: {shown}"


def dropped_warnings(summary, scenario, seeds) -> list[str]:
    """A warning for every run that dropped measured requests (E9), as the safety cap's for
    unfinished replies."""
    if "n_dropped" not in summary.columns:
        return []
    most = {a.name: a.paged[3] for a in scenario.arrangements if getattr(a, "paged", None)}
    rows = summary.assign(seed=summary["seed"] if "seed" in summary.columns else seeds[0])
    return [f"warning: {r.arrangement} (seed {r.seed}): {r.n_dropped:.0f} measured "
            f"{'request' if r.n_dropped == 1 else 'requests'} dropped, preempted past max_preemptions "
            f"({most.get(str(r.arrangement), 0)}; E9); they count as not on time"
            for r in rows.itertuples() if r.n_dropped == r.n_dropped and r.n_dropped > 0]


"""What a trace looks like: arrival-process and length statistics, as a dict, a text block and a PNG.

Read by people choosing a trace and stored in run.json, so every number is a plain int/float/None.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..texts import aligned
from ..units import NS_PER_S as _NS_PER_S

_PERCENTILES = (50, 90, 99)
_LENGTHS = (  # (statistics prefix, column, plot name, unit)
    ("prompt_tokens", "n_prompt_tokens", "prompt", "tokens"),
    ("reply_words", "n_reply_words", "reply", "words, i.e. generated tokens"),
)


def _arrival_stats(t_ns: np.ndarray) -> dict:
    t_ns = t_ns - t_ns[0]
    duration_ns = int(t_ns[-1])
    gaps_ns = np.diff(t_ns).astype(np.float64)
    mean_gap_ns = gaps_ns.mean() if gaps_ns.size else 0.0
    _, n_same = np.unique(t_ns, return_counts=True)
    n_full_minutes = duration_ns // (60 * _NS_PER_S)
    minutes, per_minute = np.unique(t_ns // (60 * _NS_PER_S), return_counts=True)  # only bins with arrivals:
    per_minute = per_minute[minutes < n_full_minutes]  # memory bounded by the rows, not the span
    return {
        "duration_s": duration_ns / _NS_PER_S,
        "mean_rate_per_s": t_ns.size / (duration_ns / _NS_PER_S) if duration_ns else None,
        "interarrival_cv": float(gaps_ns.std() / mean_gap_ns) if mean_gap_ns > 0 else None,
        "tied_arrivals_pct": 100.0 * int(n_same[n_same > 1].sum()) / t_ns.size,
        "busiest_second_per_s": int(np.unique(t_ns // _NS_PER_S, return_counts=True)[1].max()),
        "busiest_minute_per_s": float(per_minute.max() / 60) if per_minute.size else (0.0 if n_full_minutes else None),
        "n_full_minutes": int(n_full_minutes),
    }


def describe_trace(df: pd.DataFrame) -> dict:
    """Statistics of a trace read by `read_trace`: size, duration, rate, burstiness (CV of the gaps,
    share of tied arrivals, busiest 1-s bin and full minute counted from the first arrival) and
    prompt/reply length percentiles (numpy's default linear interpolation), mean, min and max."""
    stats: dict = {"n_requests": len(df)}
    arrival_keys = ("duration_s", "mean_rate_per_s", "interarrival_cv", "tied_arrivals_pct",
                    "busiest_second_per_s", "busiest_minute_per_s", "n_full_minutes")
    if "arrived_at_ns" in df and len(df):
        stats.update(_arrival_stats(df["arrived_at_ns"].to_numpy(dtype=np.int64)))
    else:
        stats.update(dict.fromkeys(arrival_keys))
    for name, column, _, _ in _LENGTHS:
        values = df[column].to_numpy(dtype=np.int64)
        if values.size:
            for p, v in zip(_PERCENTILES, np.percentile(values, _PERCENTILES)):
                stats[f"{name}_p{p}"] = float(v)
            stats.update({f"{name}_mean": float(values.mean()), f"{name}_min": int(values.min()),
                          f"{name}_max": int(values.max())})
        else:
            stats.update(dict.fromkeys(f"{name}_{s}" for s in ("p50", "p90", "p99", "mean", "min", "max")))
    return stats


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_description(stats: dict) -> str:
    """`describe_trace`'s statistics as an aligned, human-readable text block."""
    rows = [
        ("requests", _fmt(stats["n_requests"], ","), ""),
        ("duration", _fmt(stats["duration_s"], ",.1f"), "s"),
        ("mean rate", _fmt(stats["mean_rate_per_s"], ".3f"), "req/s"),
        ("CV of inter-arrival gaps", _fmt(stats["interarrival_cv"], ".2f"), ""),
        ("arrivals sharing a timestamp", _fmt(stats["tied_arrivals_pct"], ".1f"), "%"),
        ("busiest 1-s bin", _fmt(stats["busiest_second_per_s"], "d"), "req/s"),
        ("busiest full minute", _fmt(stats["busiest_minute_per_s"], ".2f"),
         f"req/s (of {_fmt(stats['n_full_minutes'], 'd')} full minutes)"),
    ]
    width = max(len(label) for label, _, _ in rows)
    value_width = max(len(v) for _, v, _ in rows)
    lines = [f"{label:<{width}}  {v:>{value_width}} {unit if v != '-' else ''}".rstrip() for label, v, unit in rows]
    columns = ("p50", "p90", "p99", "mean", "min", "max")
    table = [["lengths", *columns]]
    for name, *_ in _LENGTHS:
        table.append([name.replace("_", " ")] + [_fmt(stats[f"{name}_{c}"], ",.1f" if c in ("p90", "p99", "mean")
                                                      else ",.0f") for c in columns])
    lines.append("")
    lines += aligned(table)
    return "\n".join(lines)


def fit_text(df: pd.DataFrame, bins: int, name: str) -> str:
    """The lengths of a trace as YAML a synthetic workload takes: `prompt_mix` (one class) and
    `reply_words`, each a histogram (`lengths.fit_histogram`). Prompt and reply lengths are
    drawn independently from it: their correlation in the trace is not kept."""
    from .lengths import fit_histogram

    lines = [f"# lengths of {name} ({len(df):,} requests) as histograms (describe --fit --bins {bins});",
             "# paste under a synthetic workload (prompt and reply lengths are drawn independently)"]
    for key, column in (("prompt_mix", "n_prompt_tokens"), ("reply_words", "n_reply_words")):
        edges, weights = fit_histogram(df[column].to_numpy(dtype=np.int64), bins)
        block = f"histogram: {{edges: [{', '.join(map(str, edges))}], weights: [{', '.join(map(str, weights))}]}}"
        lines.append(f"prompt_mix:\n  - share: 1\n    tokens: {{{block}}}" if key == "prompt_mix" else f"reply_words: {{{block}}}")
    return "\n".join(lines) + "\n"


def rate_over_time(df: pd.DataFrame, max_windows: int = 24) -> pd.DataFrame | None:
    """A trace's rate window by window (None without arrival times): `window_start_s`,
    `window_end_s` (counted from the first arrival; windows as `periods.window_edges_ns`),
    `n_arrived`, `rate_per_s` and the median prompt and reply of the requests arriving in it."""
    from .periods import window_edges_ns

    if "arrived_at_ns" not in df or not len(df):
        return None
    t_ns = df["arrived_at_ns"].to_numpy(dtype=np.int64)
    t_ns = t_ns - t_ns[0]
    span_s = max(float(t_ns[-1]) / _NS_PER_S, 1e-9)
    edges = window_edges_ns(span_s, max_windows=max_windows)
    k = np.minimum(np.searchsorted(edges, t_ns, side="right") - 1, len(edges) - 2)  # the last arrival: last window
    n = np.bincount(k, minlength=len(edges) - 1)
    medians = {c: pd.Series(df[c].to_numpy()).groupby(k).median().reindex(range(len(n))).to_numpy()
               for c in ("n_prompt_tokens", "n_reply_words")}
    return pd.DataFrame({"window_start_s": edges[:-1] / _NS_PER_S, "window_end_s": edges[1:] / _NS_PER_S,
                         "n_arrived": n, "rate_per_s": n / (np.diff(edges) / _NS_PER_S),
                         "prompt_tokens_p50": medians["n_prompt_tokens"], "reply_words_p50": medians["n_reply_words"]})


def format_rate_over_time(frame: pd.DataFrame) -> str:
    """`rate_over_time` as an aligned text table, times in s, min or h by the span."""
    span = float(frame["window_end_s"].iloc[-1])
    per, unit = (3600.0, "h") if span >= 7200 else (60.0, "min") if span >= 600 else (1.0, "s")
    rows = [[f"window ({unit})", "requests", "req/s", "prompt p50", "reply p50"]]
    for r in frame.itertuples():
        rows.append([f"{r.window_start_s / per:.4g}-{r.window_end_s / per:.4g}", f"{r.n_arrived:,}", f"{r.rate_per_s:.3f}",
                     "-" if np.isnan(r.prompt_tokens_p50) else f"{r.prompt_tokens_p50:,.0f}",
                     "-" if np.isnan(r.reply_words_p50) else f"{r.reply_words_p50:,.0f}"])
    return "rate over time (from the first arrival)\n" + "\n".join(aligned(rows))


def fit_schedule_text(df: pd.DataFrame, bins: int, name: str, period_s: float, time_scale: float = 1.0) -> str:
    """A trace's arrivals and lengths as a synthetic workload whose rate and mix change period by
    period (E11): periods of `period_s` of the trace's clock from its first arrival (the last one
    ends at its last arrival), replayed `time_scale` times faster; each period's `rate_per_s` is
    its requests over its (scaled) length, its `prompt_mix` and `reply_words` histograms of its
    own requests' lengths (`lengths.fit_histogram`), and the workload's own are the whole trace's."""
    from ..errors import InputError
    from .lengths import fit_histogram

    def histogram(values) -> str:
        edges, weights = fit_histogram(np.asarray(values, dtype=np.int64), bins)
        return f"{{histogram: {{edges: [{', '.join(map(str, edges))}], weights: [{', '.join(map(str, weights))}]}}}}"

    if "arrived_at_ns" not in df or len(df) < 2:
        raise InputError(f"describe {name}: --period-s: got a trace without arrival times (or with one row), "
                         "expected a trace whose arrivals span a time")
    t_s = (df["arrived_at_ns"].to_numpy(dtype=np.int64) - int(df["arrived_at_ns"].iloc[0])) / _NS_PER_S
    span_s = float(t_s[-1])
    n = max(1, int(np.ceil(span_s / period_s - 1e-9)))
    k = np.minimum((t_s // period_s).astype(np.int64), n - 1)
    prompts, replies = df["n_prompt_tokens"].to_numpy(), df["n_reply_words"].to_numpy()
    ends = [min((i + 1) * period_s, span_s) for i in range(n)]
    if span_s <= 0 or ends[-1] <= (n - 1) * period_s:
        raise InputError(f"describe {name}: --period-s: got {period_s:g}, but the last period would be empty "
                         f"(the trace spans {span_s:g} s); expected a period that divides its span otherwise")
    lines = [f"# {name} ({len(df):,} requests over {span_s:,.1f} s) as {n} periods of {period_s:g} s of its clock, "
             f"replayed {time_scale:g}x (describe --fit --period-s {period_s:g} --time-scale {time_scale:g});",
             "# paste under a synthetic workload (prompt and reply lengths are drawn independently), with its own",
             f"# warmup_s and measure_s (the schedule ends at {span_s / time_scale:g} s; its last period goes on after)",
             f"prompt_mix:\n  - share: 1\n    tokens: {histogram(prompts)}", f"reply_words: {histogram(replies)}",
             "schedule:"]
    for i in range(n):
        rows = k == i
        if not rows.any():
            raise InputError(f"describe {name}: --period-s: got {period_s:g}, but [{i * period_s:g}, {ends[i]:g}) s "
                             "of the trace has no arrivals; expected longer periods (a period's rate must be above 0)")
        rate = int(rows.sum()) / ((ends[i] - i * period_s) / time_scale)
        lines += [f"  - until_s: {ends[i] / time_scale:.10g}", f"    rate_per_s: {rate:.6g}",
                  f"    prompt_mix: [{{share: 1, tokens: {histogram(prompts[rows])}}}]",
                  f"    reply_words: {histogram(replies[rows])}"]
    return "\n".join(lines) + "\n"

"""The page's data: a compact JSON-ready dict built from a RunResult's frames only.

Times are whole nanoseconds (the model's clock, so every number is exact) and delta-encoded:
arrivals from the previous arrival, a request's other times from its arrival or first word,
an iteration's start from the previous iteration's end on its GPU. "Never" is -1.

Word times are not stored: word 1 is the first word, words 2..n of a reply are the ends of the
writing iterations `jw .. jw + n - 2` of its writing GPU (`jw`: the reply's word 2 among the
GPU's iterations that write words, counted from 0; `wfirst` per GPU: how many such iterations
precede the first one held; with E16, several words share an iteration: `wn` of them), so the page derives them from the iterations it holds
(model/words.py: an iteration that only reads prompts writes no word). Iterations are
kept only inside `span` (by default the measured window, at most MAX_SPAN_S long), and so are
the requests: those that arrive before its end and are still in progress at its start in some
arrangement (for the default scenario, every measured request). The table and the charts cover
every measured request: the summary rows, and the shares of first-word waits and of gaps at
fixed grids, pooled over every seed of the run (results/pooled.py). `seed_runs` holds the
other seeds' runs the player can switch to, each over a shorter span (page/seed_runs.py).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..errors import InputError
from ..results.columns import PAGE_COLUMNS, SHARE
from ..results.pooled import FIRST_WORD_GRID_S, GAP_GRID_MS, Pooled
from ..results.report import json_figure
from ..units import NS_PER_S

FORMAT_VERSION = 1
#: Longest stretch of iterations the page embeds by default (a one-hour run stays small).
MAX_SPAN_S = 60.0
#: Late-reason bits: which limit a reply broke.
LATE_FIRST_WORD, LATE_MEAN_GAP, FROZE, UNFINISHED, LATE_E2E, LATE_DELAY = 1, 2, 4, 8, 16, 32


def _ns(seconds) -> np.ndarray:
    """Frame seconds back to the model's whole nanoseconds; -1 where empty."""
    s = np.asarray(seconds, dtype=float)
    return np.where(np.isnan(s), -1, np.round(np.nan_to_num(s) * NS_PER_S)).astype(np.int64)


def _nullable(column: pd.Series) -> list[int]:
    """An Int64 / float column as ints with -1 for empty."""
    v = column.to_numpy(dtype=float, na_value=np.nan)
    return np.where(np.isnan(v), -1, v).astype(np.int64).tolist()


def _since(later: np.ndarray, earlier: np.ndarray) -> list[int]:
    return np.where((later >= 0) & (earlier >= 0), later - earlier, -1).tolist()


def _clean(value):
    """A summary value for JSON (`json_figure`: NaN null, infinity "inf"), rounded."""
    value = json_figure(value)
    return round(value, 6) if isinstance(value, float) else value


def default_span_s(result) -> tuple[float, float]:
    """The measured window, at most MAX_SPAN_S long; for a trace measured whole (no measure_s),
    until the last iteration of any arrangement (also at most MAX_SPAN_S)."""
    lo, hi = result.measured_span_s
    if result.scenario.workload.measure_s is None:
        ended = result.iterations["ended_at_s"]
        hi = max(hi, float(ended.max()) if len(ended) else hi)
    return lo, min(max(hi, lo + 1e-9), lo + MAX_SPAN_S)


def in_span(requests: pd.DataFrame, lo_ns: int, hi_ns: int) -> np.ndarray:
    """Rows of one arrangement's requests that arrive before `hi_ns` and are unfinished at `lo_ns`."""
    fin = _ns(requests["finished_at_s"])
    return (_ns(requests["arrived_at_s"]) < hi_ns) & ((fin < 0) | (fin >= lo_ns))


def late_bits(gaps) -> np.ndarray:
    """Which limits each measured reply broke (LATE_* bits; 0 for on time), from the run's own
    verdicts (`RunResult.gaps`): an unfinished reply is UNFINISHED, not also slow or frozen."""
    finished = gaps.finished
    bits = np.where(gaps.late_first_word, LATE_FIRST_WORD, 0)
    bits |= np.where(gaps.late_mean_gap & finished, LATE_MEAN_GAP, 0)
    bits |= np.where(gaps.froze & finished, FROZE, 0)
    bits |= np.where(~finished, UNFINISHED, 0)
    for late, bit in ((gaps.late_e2e, LATE_E2E), (gaps.late_delay, LATE_DELAY)):  # (limits of a named rule)
        if late is not None:
            bits |= np.where(late & finished, bit, 0)
    return bits


def _iterations_in(iterations: pd.DataFrame, n_gpus: int, lo_ns: int, hi_ns: int) -> list[dict]:
    """Per GPU, the iterations overlapping [lo_ns, hi_ns): the first one's number, then each
    one's start after the previous end (the first: after lo_ns), duration, prompt tokens read
    and replies written."""
    out = []
    for g in range(n_gpus):
        rows = iterations[iterations["gpu"] == g]
        start, end = _ns(rows["started_at_s"]), _ns(rows["ended_at_s"])
        keep = (start < hi_ns) & (end > lo_ns)
        start, end = start[keep], end[keep]
        prev = np.concatenate([[lo_ns], end[:-1]])
        writes = rows["n_replies_written"].to_numpy() > 0
        out.append({
            "first": int(rows["iteration"].to_numpy()[keep][0]) if keep.any() else 0,
            "wfirst": int(writes[:int(np.argmax(keep))].sum()) if keep.any() else 0,
            "wait": (start - prev).tolist(),
            "dur": (end - start).tolist(),
            "tok": rows["n_prompt_tokens_read"].to_numpy()[keep].tolist(),
            "rep": rows["n_replies_written"].to_numpy()[keep].tolist(),
        })
    return out


def _word2_positions(rec, rows: np.ndarray) -> np.ndarray:
    """Per request of `rows`: its word 2 among its writing GPU's writing iterations (from 0),
    -1 if none ran (its first stretch of words, model/words.py)."""
    st, w = rec.stretches, rec.writes
    s = np.minimum(st.by_request[rows], max(len(st.n) - 1, 0))
    has = (st.by_request[rows + 1] > st.by_request[rows]) & (st.gpu[s] >= 0) & (st.n[s] > 0)
    return np.where(has, st.first[s] - w.offsets[np.maximum(st.gpu[s], 0)], -1)


def _speculative(rec, rows: np.ndarray) -> dict:
    """E16 only: per request of `rows`, how many writing iterations wrote its words 2.. before the
    run stopped (`wn`; several words of one share its end), so its words are at the ends of the
    GPU's writing iterations `jw .. jw + wn - 1` (without E16, `n - 1` of them); with E9's stretches,
    each stretch's own (`_paged`)."""
    return {} if rec.speculative is None or rec.stretch_log is not None else {"wn": rec.stretches.n[rows]}


def _paged(rec, rows: np.ndarray, arrived: np.ndarray) -> dict:
    """Replies in several stretches (E9's preempted replies: `rec.stretch_log`), only for an
    arrangement that logs them: per request, its stretches of words `st` ([GPU; write position of
    its first word among that GPU's writing iterations, or -1; that word's number; words written
    by those iterations; the word before them, ns from arrival, or -1; 1 if the stretch wrote that
    word itself: word 1, or a re-read's word; E16: the words each of those iterations wrote]), its
    preemptions `pre` (ns from arrival) and its re-reads `rr` (`_rereads`)."""
    if rec.stretch_log is None:
        return {}
    st, w = rec.stretches, rec.writes
    lo, hi = st.by_request[rows], st.by_request[rows + 1]
    gpu = np.maximum(st.gpu, 0)
    pos = np.where((st.gpu >= 0) & (st.n > 0), st.first - w.offsets[gpu], -1)
    lead = st.lead_at
    per = rec.iteration_words  # E16: several words an iteration (else one each: the stretch's `n`)
    at = None if per is None else np.concatenate([[0], np.cumsum(st.n)])
    stretches, pre = np.empty(len(rows), object), np.empty(len(rows), object)  # (ragged: one list per request)
    for i, (a_lo, a_hi, a) in enumerate(zip(lo.tolist(), hi.tolist(), arrived.tolist())):
        stretches[i] = [[int(st.gpu[k]), int(pos[k]), int(st.first_word[k]), int(st.n[k]),
                         int(lead[k] - a) if lead[k] >= 0 else -1, int(st.lead_written[k])] for k in range(a_lo, a_hi)]
        if at is not None:  # E16: words written, then each iteration's words
            for s, k in zip(stretches[i], range(a_lo, a_hi)):
                words = per[at[k]:at[k + 1]].tolist()  # type: ignore[index]
                s[3] = sum(words)
                s.append(words)
    log = rec.preemptions
    if log is None:
        log = {"request_id": np.zeros(0, np.int64), "at_ns": np.zeros(0, np.int64)}
    order = np.argsort(log["request_id"], kind="stable")
    ids, at = log["request_id"][order], log["at_ns"][order]
    start, stop = np.searchsorted(ids, rows), np.searchsorted(ids, rows, side="right")
    for i, (a, b, t) in enumerate(zip(start.tolist(), stop.tolist(), arrived.tolist())):
        pre[i] = (at[a:b] - t).tolist()
    return {"st": stretches, "pre": pre, "rr": _rereads(rec, rows, arrived, pre)}


def _rereads(rec, rows: np.ndarray, arrived: np.ndarray, pre: np.ndarray) -> np.ndarray:
    """E9 `recompute`: per request, each re-read of its prompt and words so far after a
    preemption, from the run's reads (R65): [GPU, start of the first iteration reading it and end
    of the last, ns from arrival, tokens, first and last iteration number, iterations]; the reads
    after preemption k (and before k + 1) are re-read k. A swap reads nothing: none."""
    out = np.empty(len(rows), object)
    for i in range(len(rows)):
        out[i] = []
    reads = rec.reads
    pick = np.flatnonzero(np.isin(reads["request_id"], rows[[bool(p) for p in pre]]))
    if not len(pick):
        return out
    at = rec.gpu_offsets[reads["gpu"][pick]] + reads["iteration"][pick]
    started, ended = rec.iterations["started_at_ns"][at], rec.iterations["ended_at_ns"][at]
    where = {r: i for i, r in enumerate(rows.tolist())}
    times = {}  # request row -> its preemptions in time order (the log is by GPU), sorted once
    for k in np.lexsort((started, reads["request_id"][pick])).tolist():
        i = where[int(reads["request_id"][pick[k]])]
        since = int(started[k] - arrived[i])
        if i not in times:
            times[i] = np.sort(pre[i])
        n = int(np.searchsorted(times[i], since, side="right"))  # preemptions before this read
        if n == 0:
            continue  # (the prompt's first read)
        mine = out[i]
        it, g = int(reads["iteration"][pick[k]]), int(reads["gpu"][pick[k]])
        if len(mine) < n:
            mine.extend([None] * (n - len(mine)))
        if mine[n - 1] is None:
            mine[n - 1] = [g, since, 0, 0, it, it, 0]
        rr = mine[n - 1]
        rr[2], rr[3], rr[5], rr[6] = int(ended[k] - arrived[i]), rr[3] + int(reads["n_tokens"][pick[k]]), it, rr[6] + 1
    for i in range(len(rows)):
        out[i] = [rr for rr in out[i] if rr is not None]
    return out


def over_seeds(by_seed: pd.DataFrame, name: str) -> dict:
    """An arrangement's summary over several seeds (`by_seed`: summary rows with `seed`): each
    figure's mean, its 95% interval (results/intervals.py) and the seeds' own figures, as the
    table shows them."""
    from ..results.costs import over_seeds as figure_over_seeds

    rows = by_seed[by_seed["arrangement"] == name]
    means, spans, each = {}, {}, {}
    for column in rows.columns:
        if column in ("arrangement", "seed") or not pd.api.types.is_numeric_dtype(rows[column]):
            continue
        i = figure_over_seeds(rows, column)
        means[column] = _clean(i.mean)
        spans[column] = None if math.isnan(i.low) else [_clean(i.low), _clean(i.high)]
        each[column] = [_clean(v) for v in rows[column]]
    return {"means": means, "interval": spans, "by_seed": each}


def page_columns() -> list[dict]:
    """The table's columns, from the registry (`results/columns.py`): key, label, meaning, and
    digits ("share": one decimal below 10, none above)."""
    return [{"key": c.name, "label": c.label, "meaning": c.meaning,
             "digits": "share" if c.page_digits == SHARE else c.page_digits} for c in PAGE_COLUMNS]


def arrangement_rows(result, name: str, lo_ns: int, hi_ns: int) -> dict:
    """One arrangement's part of the player: its measured requests' times and verdicts (every
    measured row, with `in_span`: those the span shows) and its iterations in the span. Works
    on a run of that arrangement alone (the run command's seeds come one at a time)."""
    everyone = result.requests[result.requests["arrangement"] == name].reset_index(drop=True)
    gaps = result.gaps[name]
    arrived = _ns(everyone["arrived_at_s"])
    first_at = _ns(everyone["first_word_at_s"])
    it = result.iterations[result.iterations["arrangement"] == name].reset_index(drop=True)
    return {
        "in_span": in_span(everyone, lo_ns, hi_ns),
        "id": everyone["request_id"].to_numpy(),
        "arrived": arrived,
        "prompt": everyone["n_prompt_tokens"].to_numpy(),
        "words": everyone["n_reply_words"].to_numpy(),
        "requests": {
            "rg": np.asarray(_nullable(everyone["reading_gpu"])),
            "read": np.asarray(_since(_ns(everyone["read_started_at_s"]), arrived)),
            "first": np.asarray(_since(first_at, arrived)),
            "wg": np.asarray(_nullable(everyone["writing_gpu"])),
            "join": np.asarray(_since(_ns(everyone["joined_at_s"]), first_at)),
            "fin": np.asarray(_since(_ns(everyone["finished_at_s"]), arrived)),
            "maxgap": np.asarray(_nullable(np.round(everyone["max_gap_ms"] * 1e6))),
            "nfz": np.asarray(_nullable(everyone["n_freezes"])),
            "late": late_bits(gaps),
            "jw": _word2_positions(result.records[name], gaps.rows),
            **_speculative(result.records[name], gaps.rows),
            **_paged(result.records[name], gaps.rows, arrived),
        },
        "iterations": _iterations_in(it, len(result.records[name].gpu_roles), lo_ns, hi_ns),
    }


def player_run(parts: dict[str, dict], lo_ns: int, hi_ns: int) -> dict:
    """What the player shows of one seed's run, from each arrangement's `arrangement_rows`: the
    requests in progress during [lo_ns, hi_ns) in any arrangement (those of the arrangement sent
    the most, which every other one that got a request got alike), and each arrangement's times
    for them and iterations. With `n_requests_per_gpu` a smaller arrangement gets only the first
    of them: its part then says which it was `sent` (1) and which not (0; their times -1)."""
    names = list(parts)
    empty = np.zeros(0, dtype=np.int64)
    base = max(parts.values(), key=lambda p: len(p["id"])) if names else {
        "id": empty, "arrived": empty, "prompt": empty, "words": empty}
    alike = np.ones(len(base["id"]), dtype=bool)
    rows = {}
    for name, part in parts.items():
        at = pd.Index(part["id"]).get_indexer(base["id"])
        found = at >= 0
        for key in ("arrived", "prompt", "words"):
            alike[found] &= np.asarray(part[key])[at[found]] == np.asarray(base[key])[found]
        rows[name] = at
    keep = np.zeros(len(base["id"]), dtype=bool)
    for name, part in parts.items():
        sent = alike & (rows[name] >= 0)
        keep[sent] |= np.asarray(part["in_span"])[rows[name][sent]]
    return {
        "span_ns": [lo_ns, hi_ns],
        "requests": {
            "id": np.diff(base["id"][keep], prepend=0).tolist(),
            "arrived": np.diff(base["arrived"][keep], prepend=0).tolist(),
            "prompt": base["prompt"][keep].tolist(),
            "words": base["words"][keep].tolist(),
        },
        "arrangements": [{"requests": _sent_rows(parts[n]["requests"], rows[n][keep]),
                          "iterations": parts[n]["iterations"]} for n in names],
    }


def _sent_rows(requests: dict, at: np.ndarray) -> dict:
    """An arrangement's request fields at rows `at`; where it was not sent a request (-1), each
    field is -1 (a list field: empty) and `sent` says which (only when some were not sent)."""
    if (at >= 0).all():
        return {k: np.asarray(v)[at].tolist() for k, v in requests.items()}
    sent = at >= 0
    out: dict = {}
    for k, v in requests.items():
        listed = isinstance(v, list) and any(isinstance(x, list) for x in v)  # a list per request (E9's pieces)
        got = iter([v[j] for j in at[sent]] if listed else np.asarray(v)[at[sent]].tolist())
        filler: list | int = [] if listed else -1
        out[k] = [next(got) if s else filler for s in sent]
    out["sent"] = sent.astype(int).tolist()
    return out


def page_data(result, reference=None, span_s: tuple[float, float] | None = None,
              by_seed: pd.DataFrame | None = None, pooled=None, seed_runs: list[dict] | None = None,
              over_time: pd.DataFrame | None = None) -> dict:
    """Everything the page shows, as a JSON-ready dict (see the module docstring). With `by_seed`
    (every seed's summary rows, `result` being the run the player shows), the table has each
    figure's mean over seeds with its interval and each seed's figure; with `pooled`
    (results/pooled.Pooled of every seed), the distributions pool every seed; `seed_runs`, the
    other seeds' `player_run`s the player can switch to; `over_time`, the `over_time.csv` frame
    (every seed's rows; by default `result`'s own, when its traffic changes over time)."""
    names = [str(n) for n in result.summary["arrangement"]]
    lo_s, hi_s = default_span_s(result) if span_s is None else span_s
    if not hi_s > lo_s:
        raise InputError(f"page span: got {lo_s:g} to {hi_s:g} s, expected an end after the start")
    lo_ns, hi_ns = round(lo_s * NS_PER_S), round(hi_s * NS_PER_S)
    shown = player_run({n: arrangement_rows(result, n, lo_ns, hi_ns) for n in names}, lo_ns, hi_ns)
    slo = result.scenario.slo
    described = {a.name: a for a in result.scenario.arrangements}
    own = pooled if pooled is not None else Pooled()
    if pooled is None:
        own.add(result)
    arrangements = []
    for name, player in zip(names, shown["arrangements"]):
        roles = list(result.records[name].gpu_roles)
        summary = result.summary[result.summary["arrangement"] == name].iloc[0]
        moves = _moves(result.records[name].switches)  # E12 (the key only when roles change)
        lanes = [described[name].instance_name(g) for g in range(len(roles))]
        arrangements.append({
            "name": name,
            "kind": result.records[name].kind,
            "description": described[name].description,
            "is_split": described[name].is_split,
            "lanes": [f"{n} (moves)" if moves and g in {m["gpu"] for m in moves} else n for g, n in enumerate(lanes)],
            "unit": described[name].unit,
            "roles": roles,
            **({"moves": moves} if moves is not None else {}),
            "summary": {k: _clean(v) for k, v in summary.items() if k != "arrangement"},
            **player,
            "gaps": own.gap_shares(name),
            "first_words": own.first_word_shares(name),
            **(over_seeds(by_seed, name) if by_seed is not None else {}),
        })
    w = result.scenario.workload
    return {
        "version": FORMAT_VERSION,
        "scenario": {
            "name": result.scenario.name,
            "seed": int(result.seed),
            "seed_why": result.chosen,
            "seeds": sorted(int(s) for s in by_seed["seed"].unique()) if by_seed is not None else [int(result.seed)],
            "rate_per_s": getattr(w, "rate_per_s", None),
            "measured_s": list(result.measured_span_s),
            "slo": {"first_word_s": slo.first_word_s, "mean_gap_ms": slo.mean_gap_ms, "freeze_ms": slo.freeze_ms,
                    "e2e_s": slo.e2e_s, "delay_s": slo.delay_s, "tpot": slo.tpot},
        },
        "span_ns": shown["span_ns"],
        "reference": {str(k): float(v) for k, v in reference.items()} if reference else None,
        "columns": page_columns(),
        "gap_grid_ms": GAP_GRID_MS.tolist(),
        "first_word_grid_s": FIRST_WORD_GRID_S.tolist(),
        "pooled_seeds": sorted(own.seeds),
        "requests": shown["requests"],
        "arrangements": arrangements,
        "seed_runs": seed_runs or [],
        "over_time": over_time_part(result, names, over_time),
    }


def over_time_part(result, names: list[str], frame: pd.DataFrame | None) -> dict | None:
    """E11: the offered rate and each arrangement's on-time share per window, read from the
    `over_time.csv` frame (with several seeds, their mean, as `over_time.png` draws it); None
    when the run's traffic does not change over time."""
    from ..results.over_time import boundaries_s, changes_over_time, mean_over_seeds

    if frame is None:
        if not changes_over_time(result.scenario):
            return None
        frame = result.over_time
    mean = mean_over_seeds(frame)
    by_name = {name: rows for name, rows in mean.groupby("arrangement", observed=True, sort=False)}
    first = by_name[names[0]]
    return {
        "start_s": first["window_start_s"].tolist(),
        "end_s": first["window_end_s"].tolist(),
        "rate_per_s": [_clean(v) for v in first["offered_rate_per_s"]],
        "on_time_pct": [[_clean(v) for v in by_name[n]["on_time_pct"]] for n in names],
        "n_seeds": int(frame["seed"].nunique()) if "seed" in frame else 1,
        "boundaries_s": boundaries_s(result.scenario),
    }


def _moves(switches: dict | None) -> list[dict] | None:
    """E12: each move of a GPU (ns; -1: not reached), for the player's lanes; None when static."""
    if switches is None:
        return None
    keys = {"gpu": "gpu", "to": "to_role", "why": "why", "asked": "requested_at_ns", "drained": "drained_at_ns",
            "serving": "serving_at_ns"}
    return [{k: (v if isinstance(v, str) else int(v)) for k, v in zip(keys, values)}
            for values in zip(*(switches[f] for f in keys.values()))]

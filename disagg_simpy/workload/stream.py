"""The request stream: one seeded stream of requests that every arrangement sees (M6).

Synthetic traffic is drawn with one generator per quantity, spawned from the scenario's seed.
Each request's draws are uniform floats mapped to its values, so request k is the same whatever
the cap or block size: a longer run sees the same prefix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..files import atomic_write_text
from ..scenario.counts import for_gpus
from ..scenario.limits import blocks_problem, iterations_problem, requests_problem, ship_problem
from ..scenario.options import capacity_problem, sizes_text
from ..scenario.prefixes import MOONCAKE_BLOCK_TOKENS
from ..scenario.schedule import length_variants, rate_key
from ..scenario.schema import Scenario, SyntheticWorkload, TraceWorkload
from ..units import NS_PER_S, seconds_to_ns
from .catalog import CATALOG, resolve_trace, sha256_of
from .counted import counted_cap, last_arrival_s, origin_in, picked_rows
from .lengths import draw_lengths
from .periods import period_of, thinned_arrivals
from .prefixes import BlockIds, draw_prefixes, read_hash_ids, session_turns, synthetic_blocks
from .shaping import clip_lengths, lengths_arrivals, sample_lengths, shape_arrivals
from .traces import TIME_RULES, read_trace

#: Named random streams, one per drawn quantity (append only: order fixes the streams).
STREAMS = ("arrivals", "prompt_class", "prompt_tokens", "reply_words", "router", "prefixes", "sessions", "trace_pick", "speculative")


@dataclass(frozen=True)
class Requests:
    """The whole request stream of a run, in arrival order (request id = position)."""

    arrived_at_ns: np.ndarray  # int64, whole nanoseconds (D10)
    n_prompt_tokens: np.ndarray  # int64
    n_reply_words: np.ndarray  # int64
    measured: np.ndarray  # bool: arrived in [warmup_s, measure_s) (D6)
    cap_ns: int  # safety cap on simulated time
    info: dict = field(default_factory=dict)  # how the stream was made, for run.json
    blocks: BlockIds | None = None  # E13: prompt block ids (a trace's hash_ids, drawn prefixes)
    router_draws: np.ndarray | None = None  # E13: one uniform per request for power_of_two
    draft_keys: np.ndarray | None = None  # E16: one uint64 key per request (workload/speculative.py)
    ident: np.ndarray | None = None  # what names a request in every size's stream (a trace row, a session's turn); None: its position
    origin: np.ndarray | None = None  # n_requests_per_gpu: each request's id in the largest arrangement's stream; None: the same id

    def __len__(self) -> int:
        return len(self.arrived_at_ns)

    def frame(self) -> pd.DataFrame:
        """The stream as a trace (`arrived_at_s, n_prompt_tokens, n_reply_words`)."""
        return pd.DataFrame(
            {
                "arrived_at_s": self.arrived_at_ns / NS_PER_S,
                "n_prompt_tokens": self.n_prompt_tokens,
                "n_reply_words": self.n_reply_words,
            }
        )


def make_streams(seed: int) -> dict[str, np.random.Generator]:
    children = np.random.SeedSequence(seed).spawn(len(STREAMS))
    return {name: np.random.default_rng(ss) for name, ss in zip(STREAMS, children)}


def stream_seed(seed: int, name: str) -> np.random.SeedSequence:
    """The seed sequence of one named stream (for a quantity drawn from several generators)."""
    return np.random.SeedSequence(seed).spawn(len(STREAMS))[STREAMS.index(name)]


def make_requests(scenario: Scenario, seed: int | None = None, n_gpus: int | None = None) -> Requests:
    """The request stream of `scenario` (with `seed` instead of the scenario's, if given). With
    `n_requests_per_gpu`, the stream of an arrangement of `n_gpus` GPUs (default: the largest
    arrangement's, `counts.for_gpus`); a smaller one's is a prefix or subset of it (docs/traffic.md)."""
    key = "n_requests"
    if scenario.workload.n_requests_per_gpu is not None:
        key = "n_requests_per_gpu"
        scenario = for_gpus(scenario, n_gpus if n_gpus is not None else max(a.n_gpus for a in scenario.arrangements))
    w = scenario.workload
    seed = scenario.seed if seed is None else seed
    if isinstance(w, SyntheticWorkload):
        stream = _synthetic(w, scenario, seed, key)
    else:
        stream = _from_trace(w, scenario, seed, key)
    if scenario.router == "power_of_two":  # E13: its own stream, so no other draw moves
        stream = replace(stream, router_draws=make_streams(seed)["router"].random(len(stream)))
    if scenario.speculative is not None:  # E16: its own stream too (one key per request: workload/speculative.py)
        stream = replace(stream, draft_keys=make_streams(seed)["speculative"].integers(2**64, size=len(stream),
                                                                                     dtype=np.uint64))
    check_stream(scenario, stream)
    return stream


def streams_by_gpus(scenario: Scenario, seed: int) -> dict[int, Requests]:
    """With `n_requests_per_gpu`, each arrangement size's stream (per GPU x its GPUs requests:
    the first that many of the seed's stream, or with `pick: sampled` the first that many of
    one seeded order of the trace); else one stream for every size."""
    sizes = sorted({a.n_gpus for a in scenario.arrangements})
    if scenario.workload.n_requests_per_gpu is None:
        stream = make_requests(scenario, seed)
        return dict.fromkeys(sizes, stream)
    largest = make_requests(scenario, seed, n_gpus=sizes[-1])
    return {n: _within(make_requests(scenario, seed, n_gpus=n), largest) if n != sizes[-1] else largest for n in sizes}


def _within(stream: Requests, largest: Requests) -> Requests:
    """A smaller arrangement's stream with each request's place in the largest stream and that
    stream's per-request draws (E13's router, E16's keys: `counted.origin_in`)."""
    origin = origin_in(stream.ident, len(stream), largest.ident, len(largest))
    taken = {name: getattr(largest, name)[origin] for name in ("router_draws", "draft_keys")
             if getattr(largest, name) is not None}
    return replace(stream, origin=origin, **taken)


def check_stream(scenario: Scenario, stream: Requests) -> None:
    """Refuse a stream past the documented limits (docs/guarantees.md)."""
    problem = requests_problem(len(stream), len(scenario.arrangements))
    if problem:
        raise InputError(
            f"{scenario.source}: workload: got, up to the cap at {stream.cap_ns / NS_PER_S:g} s, {problem}; "
            "expected a shorter window or a lower max_sim_s"
        )
    cost = scenario.cost
    for key, ms in scenario.ship_costs() if len(stream) else ():
        problem = ship_problem(ms, int(stream.n_prompt_tokens.max()))
        if problem:
            raise InputError(f"{scenario.source}: {key}: {problem}")
    problem = iterations_problem(scenario.arrangements, stream.cap_ns / NS_PER_S, cost)
    if problem:
        raise InputError(f"{scenario.source}: cost.iteration_ms: {problem}")


def _synthetic(w: SyntheticWorkload, scenario: Scenario, seed: int, key: str = "n_requests") -> Requests:
    """Arrivals until past the cap (or exactly n_requests), then each request's class and lengths
    from one uniform each, in arrival order (`lengths.py`)."""
    rng = make_streams(seed)
    if w.varies:
        return _changing(w, scenario, seed, rng)
    assert w.rate_per_s is not None  # (schema: a constant rate without a schedule or curve)
    if w.n_requests is not None:
        arrived = _arrival_times(w, rng["arrivals"], 0, 0.0, w.n_requests)
        cap_s = counted_cap(scenario, float(arrived[-1]), w.n_requests, key)
        n = w.n_requests
    else:
        cap_s = scenario.cap_s(None)
        block = int(w.rate_per_s * cap_s * 1.02) + 64
        blocks = [_arrival_times(w, rng["arrivals"], 0, 0.0, block)]
        while blocks[-1][-1] <= cap_s:
            blocks.append(_arrival_times(w, rng["arrivals"], block * len(blocks), float(blocks[-1][-1]), block))
        arrived = np.concatenate(blocks)
        n = int(np.searchsorted(arrived, cap_s, side="right"))
    arrived = arrived[:n]
    turns = None
    if w.sessions is not None:  # E13: arrivals start sessions; n counts their turns from here
        session, turn, at = session_turns(w.sessions, arrived, stream_seed(seed, "sessions"))
        turns, arrived, n = (session, turn), at, len(turn)
    shares = np.cumsum([c.share for c in w.prompt_mix])
    shares[-1] = 1.0
    cls = np.searchsorted(shares, rng["prompt_class"].random(n), side="right")
    prompts = _class_lengths(w.prompt_mix, cls, rng["prompt_tokens"].random(n))
    replies = draw_lengths(w.reply_words, rng["reply_words"].random(n))
    parent = None
    if turns is not None:  # a turn's prompt: the earlier turns' new tokens and replies, then its own
        prompts, replies, arrived, parent, turns = _session_order(turns, prompts, replies, arrived, cap_s)
        n = len(prompts)
    block_ids = _drawn_blocks(w, scenario, seed, prompts, turns, parent)
    ident = None if turns is None else turns[2]  # a turn's place in session order
    arrived_ns = seconds_to_ns(arrived)
    measured = np.ones(n, dtype=bool) if w.n_requests is not None else _window(arrived_ns, w.warmup_s, w.measure_s)
    info = {"kind": "synthetic", "seed": seed, "n_generated": n}
    if w.arrivals != "poisson":  # (run.json unchanged for the page's traffic)
        info.update(arrivals=w.arrivals, burstiness=w.burstiness)
    return Requests(
        arrived_at_ns=arrived_ns,
        n_prompt_tokens=prompts,
        n_reply_words=replies,
        measured=measured,
        cap_ns=int(seconds_to_ns(cap_s)),
        info=info,
        blocks=block_ids,
        ident=ident,
    )


def _drawn_blocks(w: SyntheticWorkload, scenario: Scenario, seed: int, prompts: np.ndarray, turns=None,
                  parent: np.ndarray | None = None) -> BlockIds | None:
    """E13: with caching on, the block ids of drawn prefixes (a session's first turn only) and
    sessions (a turn holds its previous turn's blocks); None with caching off."""
    if scenario.prefix_cache_tokens is None:
        return None
    n = len(prompts)
    group, prefix = (draw_prefixes(w.prefixes, n, stream_seed(seed, "prefixes")) if w.prefixes is not None
                     else (np.full(n, -1), np.zeros(n, np.int64)))
    if turns is not None:
        group, prefix = np.where(turns[1] == 0, group, -1), np.where(turns[1] == 0, prefix, 0)
    _check_blocks(scenario, prompts, scenario.prefix_block_tokens, scenario.prefix_block_tokens)
    return synthetic_blocks(prompts, group, prefix, scenario.prefix_block_tokens, parent)


def _check_blocks(scenario: Scenario, prompts: np.ndarray, unit: int, block: int) -> None:
    """Refuse, before any is built, more prompt blocks than the limit: each request's ids in
    blocks of `unit` tokens (a trace's 512, or the cache's), each cut into unit // block cache
    blocks. Sessions make them grow with the square of the turns (each turn resends the earlier)."""
    n_blocks = int((-(-prompts.astype(np.int64) // unit)).sum()) * (unit // block)
    problem = blocks_problem(n_blocks, block)
    if problem is None:
        return
    w = scenario.workload
    if isinstance(w, SyntheticWorkload) and w.sessions is not None:
        raise InputError(
            f"{scenario.source}: workload.sessions: got {len(prompts):,} turns up to the cap at {scenario.cap_s(None):g} s "
            f"whose prompts (each resending the earlier turns) hold {problem}; expected fewer turns (sessions.turns "
            "up to " f"{w.sessions.turns[1]:,}), a lower rate, a lower max_sim_s or a larger prefix_block_tokens")
    raise InputError(f"{scenario.source}: prefix_cache_tokens: got requests whose prompts hold {problem}; expected a "
                     "larger prefix_block_tokens or fewer requests (a shorter window or max_sim_s)")


def _session_order(turns, new, replies, at, cap_s):
    """E13 sessions: each turn's prompt (the session's earlier new tokens and replies, then its
    own new tokens), then every turn in arrival order (stable: a session's turns keep their
    order), those arriving after the cap left out; each turn's previous turn's index (-1: none);
    with the turns, each one's place in session order (the same in every size's stream)."""
    session, turn = turns
    first = np.flatnonzero(turn == 0)
    k = np.diff(np.append(first, len(turn)))
    total = np.cumsum(new + replies)
    before = np.repeat(total[first] - (new + replies)[first], k)
    prompts = total - before - replies
    order = np.argsort(at, kind="stable")
    order = order[at[order] <= cap_s]
    where = np.full(len(turn), -1)
    where[order] = np.arange(len(order))
    previous = np.where(turn > 0, np.arange(len(turn)) - 1, -1)
    parent = np.where(previous[order] >= 0, where[np.maximum(previous[order], 0)], -1)
    return prompts[order], replies[order], at[order], parent, (session[order], turn[order], order)


def _changing(w: SyntheticWorkload, scenario: Scenario, seed: int, rng: dict[str, np.random.Generator]) -> Requests:
    """E11: arrivals by thinning (`periods.py`), then each request's class and lengths from one
    uniform each of the same streams as `_synthetic`, mapped by the mix of its arrival's period."""
    if w.n_requests is not None:
        arrived_ns = thinned_arrivals(w, rng["arrivals"], math.inf, w.n_requests)
        cap_s = scenario.cap_s(float(arrived_ns[-1]) / NS_PER_S)
        if arrived_ns[-1] > seconds_to_ns(cap_s):
            raise InputError(
                f"{scenario.source}: max_sim_s: got {cap_s:g}, but request {w.n_requests:,} of n_requests arrives at "
                f"{arrived_ns[-1] / NS_PER_S:.6g} s; expected at least that (n_requests sends every request)")
    else:
        cap_s = scenario.cap_s(None)
        arrived_ns = thinned_arrivals(w, rng["arrivals"], cap_s)
    n = len(arrived_ns)
    u_class, u_prompt = rng["prompt_class"].random(n), rng["prompt_tokens"].random(n)
    u_reply = rng["reply_words"].random(n)
    prompts, replies = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    part = period_of(w, arrived_ns)
    for k, (mix, reply) in enumerate(length_variants(w)):
        rows = np.flatnonzero(part == k)
        shares = np.cumsum([c.share for c in mix])
        shares[-1] = 1.0
        cls = np.searchsorted(shares, u_class[rows], side="right")
        prompts[rows] = _class_lengths(mix, cls, u_prompt[rows])
        replies[rows] = draw_lengths(reply, u_reply[rows])
    measured = np.ones(n, dtype=bool) if w.n_requests is not None else _window(arrived_ns, w.warmup_s, w.measure_s)
    info = {"kind": "synthetic", "seed": seed, "n_generated": n, "rate": rate_key(w),
            "n_periods": len(w.schedule) if w.schedule is not None else None}
    return Requests(arrived_at_ns=arrived_ns, n_prompt_tokens=prompts, n_reply_words=replies, measured=measured,
                    cap_ns=int(seconds_to_ns(cap_s)), info=info, blocks=_drawn_blocks(w, scenario, seed, prompts))


def _arrival_times(w: SyntheticWorkload, rng: np.random.Generator, done: int, last_s: float, n: int) -> np.ndarray:
    """The next n arrival times (s) after `done` arrivals, the last at `last_s`: gaps
    -ln(1 - u) / rate (Poisson), Gamma(shape burstiness, scale 1 / (rate x burstiness)) as vLLM's
    benchmark draws them, or the k-th arrival (from 1) at exactly k / rate (constant)."""
    assert w.rate_per_s is not None  # (a constant rate: _synthetic)
    if w.arrivals == "constant":
        return np.arange(done + 1, done + n + 1, dtype=np.float64) / w.rate_per_s
    if w.arrivals == "gamma":
        shape = 1.0 if w.burstiness is None else w.burstiness
        gaps = rng.gamma(shape, 1.0 / (w.rate_per_s * shape), n)
    else:
        gaps = -np.log1p(-rng.random(n)) / w.rate_per_s
    return last_s + np.cumsum(gaps)


def _class_lengths(prompt_mix, cls: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Prompt tokens of requests of classes `cls` of `prompt_mix`, from their uniforms `u`, each
    by its class's distribution (all-range mixes at once, as the page's traffic always was)."""
    ranges = [c.tokens for c in prompt_mix]
    if all(isinstance(r, tuple) for r in ranges):
        bounds = [r for r in ranges if isinstance(r, tuple)]
        lows = np.array([r[0] for r in bounds], dtype=np.int64)
        highs = np.array([r[1] for r in bounds], dtype=np.int64)
        return lows[cls] + np.floor(u * (highs[cls] - lows[cls] + 1)).astype(np.int64)
    out = np.empty(len(cls), dtype=np.int64)
    order = np.argsort(cls, kind="stable")
    starts = np.searchsorted(cls[order], np.arange(len(ranges) + 1))
    for k, spec in enumerate(ranges):
        rows = order[starts[k]:starts[k + 1]]
        out[rows] = draw_lengths(spec, u[rows])
    return out


def _window(arrived_ns: np.ndarray, warmup_s: float, measure_s: float | None) -> np.ndarray:
    measured = arrived_ns >= seconds_to_ns(warmup_s)
    if measure_s is not None:
        measured &= arrived_ns < seconds_to_ns(measure_s)
    return measured


def _from_trace(w: TraceWorkload, scenario: Scenario, seed: int, key: str = "n_requests") -> Requests:
    path = resolve_trace(w.trace, w.format, scenario.folder, f"{scenario.source}: workload")
    problem = "no such file" if not path.exists() else "a directory" if path.is_dir() else None
    if problem:
        raise InputError(
            f"{scenario.source}: workload.trace: got {w.trace!r} ({problem}: {path}), expected a trace file"
        )
    table = read_trace(path, w.format)
    blocks = None
    if scenario.prefix_cache_tokens is not None and w.format == "mooncake":  # E13: its hash_ids
        _check_blocks(scenario, table["n_prompt_tokens"].to_numpy(), MOONCAKE_BLOCK_TOKENS, scenario.prefix_block_tokens)
        blocks = read_hash_ids(path, table["n_prompt_tokens"].to_numpy(), MOONCAKE_BLOCK_TOKENS)
    info = {"kind": "trace", "path": str(path), "sha256": sha256_of(path), "format": w.format, "n_rows": len(table),
            "times": TIME_RULES[w.format], "ignored_columns": table.attrs.get("ignored_columns", [])}
    if w.trace in CATALOG:
        info["public_trace"] = w.trace
    if w.format == "lengths":
        cap_s = scenario.cap_s(None)
        assert w.rate_per_s is not None  # (a lengths trace needs it: schema.TraceWorkload)
        n = _expected_arrivals(w.rate_per_s, cap_s) if w.n_requests is None else w.n_requests
        rng = make_streams(seed)
        arrived_ns = lengths_arrivals(n, w.rate_per_s, w.burstiness_cv, rng["arrivals"], source=scenario.source)
        if w.n_requests is not None:  # exactly n, every one sent: the cap must pass the last
            cap_s = counted_cap(scenario, last_arrival_s(arrived_ns), w.n_requests, key)
        # E4f: any row of the table may be drawn
        check_capacity(scenario, path, np.arange(1, len(table) + 1),
                       clip_lengths(table, w.reply_words_max, w.prompt_tokens_max)[0])
        prompt, reply = sample_lengths(table, n, rng["prompt_tokens"])
        table = pd.DataFrame({"n_prompt_tokens": prompt, "n_reply_words": reply})
        info.update(seed=seed, rate_per_s=w.rate_per_s, burstiness_cv=w.burstiness_cv)
    else:
        keep, arrived_ns, shaping = shape_arrivals(
            table["arrived_at_ns"].to_numpy(),
            start_s=w.start_s,
            duration_s=w.duration_s,
            spread_ties=w.spread_ties,
            time_scale=w.time_scale,
            rate_per_s=w.rate_per_s,
            source=f"{scenario.source}: workload",
        )
        table = table[keep].reset_index(drop=True)
        blocks = blocks.take(np.asarray(keep)) if blocks is not None else None
        info.update(shaping)
        keep = np.flatnonzero(keep)
        if w.n_requests is not None:  # a benchmark client's count: the first n, or n drawn with the seed
            picked = picked_rows(w, len(keep), make_streams(seed)["trace_pick"], scenario.source)
            keep, arrived_ns, table = keep[picked], arrived_ns[picked], table.iloc[picked].reset_index(drop=True)
            blocks = blocks.take(picked) if blocks is not None else None
            info.update(n_requests=w.n_requests, pick=w.pick)
        cap_s = (scenario.cap_s(float(arrived_ns[-1]) / NS_PER_S) if w.n_requests is None
                 else counted_cap(scenario, last_arrival_s(arrived_ns), w.n_requests, key))
    rows = keep + 1 if w.format != "lengths" else None  # data rows kept, from 1
    table, clips = clip_lengths(table, w.reply_words_max, w.prompt_tokens_max)
    info.update(clips)
    measured = _window(arrived_ns, w.warmup_s, w.measure_s)
    if not measured.any():
        raise InputError(
            f"{scenario.source}: workload: no trace request arrives in the measured window "
            f"[{w.warmup_s:g}, {w.measure_s if w.measure_s is not None else 'end'}) s"
        )
    cap_ns = int(seconds_to_ns(cap_s))
    keep = arrived_ns <= cap_ns
    if rows is not None:
        check_capacity(scenario, path, rows[keep], table[keep])
    return Requests(
        arrived_at_ns=arrived_ns[keep],
        n_prompt_tokens=table["n_prompt_tokens"].to_numpy(np.int64)[keep],
        n_reply_words=table["n_reply_words"].to_numpy(np.int64)[keep],
        measured=measured[keep],
        cap_ns=cap_ns,
        info=info,
        blocks=blocks.take(keep) if blocks is not None else None,
        ident=rows[keep] if rows is not None else None,
    )


def check_capacity(scenario: Scenario, path: Path, rows: np.ndarray, lengths: pd.DataFrame) -> None:
    """E4f: refuse a trace with a request whose KV reservation could never fit a GPU, naming the
    first such row (its number among the trace's data rows) and its sizes."""
    if not any(a.kv_limited for a in scenario.arrangements):
        return
    prompt, reply = (lengths[c].to_numpy(np.int64) for c in ("n_prompt_tokens", "n_reply_words"))
    drafts = scenario.draft_tokens  # (E16 with E9: docs/rules.md#r106)
    for i, a in enumerate(scenario.arrangements):
        problem = capacity_problem(a, prompt, reply, drafts)
        if problem is not None:
            first, key, cap, need = problem
            p, r = int(prompt[first]), int(reply[first])
            raise InputError(
                f"{scenario.source}: arrangements[{i}].{key}: got {cap:,}, but row "
                f"{int(rows[first]):,} of {path.name} reserves {sizes_text(p, r, need, drafts)} on one {a.unit}; expected at "
                f"least {need:,} (or a shorter request)"
            )


def _expected_arrivals(rate_per_s: float, cap_s: float) -> int:
    """Enough arrivals to pass the cap: the mean plus ten standard deviations (and some)."""
    mean = rate_per_s * cap_s
    return int(mean + 10 * math.sqrt(mean) + 100)


def write_trace(requests: Requests, path: Path) -> None:
    """Write the stream as a CSV trace, atomically (a temporary file renamed into place)."""
    atomic_write_text(path, requests.frame().to_csv(index=False, float_format="%.9f"))

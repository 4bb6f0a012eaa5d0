"""Invariants of the optional rules (docs/rules.md) that have state of their own: KV memory (E4) and
links (E5). Rebuilt from the request records alone, independently of the model's counters.

- memory: what a GPU holds at each iteration start (reading R10) equals the reservations made and
  not yet freed by then, never above its capacity; the model's peak and what it still holds when
  the run stops agree; every reservation of a request that finished is freed;
- taking (E4d): on each GPU prompts begin to be read in arrival order (none overtakes);
- handoff (E4e): writing GPUs are granted in the queue's order (time, GPU, arrival);
- links (E5): at most one ship per link at a time, in the order they were requested, and a ship
  that waited starts the instant the one before it on its link ends.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

NEVER = np.iinfo(np.int64).max


def reservations(rec, arrangement, local: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every KV reservation as (gpu, tokens, from, to) arrays; `to` is NEVER if not freed."""
    q = rec.requests
    prompt, words = q["n_prompt_tokens"], q["n_reply_words"]
    begun = q["read_started_at_ns"] >= 0
    finished = np.where(q["finished_at_ns"] >= 0, q["finished_at_ns"], NEVER)
    parts = []
    if arrangement.kind == "colocated":
        parts.append((q["reading_gpu"], prompt + words, q["read_started_at_ns"], finished, begun))
    else:
        on_reader = begun & ~local
        # reading GPU: until the ship ends (the reply joins), or the end of the read for one word
        freed = np.where(words == 1, finished, np.where(q["joined_at_ns"] >= 0, q["joined_at_ns"], NEVER))
        parts.append((q["reading_gpu"], prompt, q["read_started_at_ns"], freed, on_reader))
        granted = q["handoff_at_ns"] >= 0
        parts.append((q["writing_gpu"], prompt + words, q["handoff_at_ns"], finished, granted))
        parts.append((q["reading_gpu"], prompt + words, q["read_started_at_ns"], finished, begun & local))
    return tuple(np.concatenate([p[k][p[4]] for p in parts]) for k in range(4))


def held_at(gpu, tokens, since, until, g: int, times: np.ndarray) -> np.ndarray:
    """Tokens GPU `g` holds in D5 step 3 of each of `times`: made at or before, freed after."""
    mine = gpu == g
    s_order = np.argsort(since[mine], kind="stable")
    u_order = np.argsort(until[mine], kind="stable")
    s_sorted, s_tok = since[mine][s_order], np.r_[0, np.cumsum(tokens[mine][s_order])]
    u_sorted, u_tok = until[mine][u_order], np.r_[0, np.cumsum(tokens[mine][u_order])]
    return s_tok[np.searchsorted(s_sorted, times, side="right")] - u_tok[np.searchsorted(u_sorted, times, side="right")]


def check_memory(result, arrangement, local: np.ndarray) -> None:
    rec = result.records[arrangement.name]
    name, cap, stop = arrangement.name, arrangement.kv_capacity_tokens, rec.stopped_at_ns
    it = rec.iterations
    assert rec.kv_capacity_tokens == cap
    gpu, tokens, since, until = reservations(rec, arrangement, local)
    assert (until > since).all() or not len(since), f"{name}: a reservation freed the instant it was made"
    for g in range(arrangement.n_gpus):
        rows = slice(rec.gpu_offsets[g], rec.gpu_offsets[g + 1])
        at_start = held_at(gpu, tokens, since, until, g, it["started_at_ns"][rows])
        assert (it["kv_used_tokens"][rows] == at_start).all(), f"{name}: GPU {g} holds other tokens than it reserved"
        made = np.unique(since[gpu == g])
        assert (held_at(gpu, tokens, since, until, g, made) <= cap).all(), f"{name}: GPU {g} over its memory"
        assert rec.kv_peak_tokens[g] <= cap, f"{name}: GPU {g} peaked over its memory"
        assert rec.kv_peak_tokens[g] >= max(at_start.max(initial=0), 0)
        held = held_at(gpu, tokens, since, until, g, np.array([stop]))[0]
        assert rec.kv_held_at_stop[g] == held, f"{name}: GPU {g} holds {rec.kv_held_at_stop[g]} at the end, not {held}"
    q = rec.requests
    if (q["finished_at_ns"] >= 0).all():
        assert (rec.kv_held_at_stop == 0).all(), f"{name}: a reservation outlived every request"
    # E4d: no prompt begins before one that arrived earlier on the same GPU
    for g in np.unique(q["reading_gpu"]):
        mine = q["reading_gpu"] == g
        begun = q["read_started_at_ns"][mine]
        started = begun[begun >= 0]
        assert (np.diff(started) >= 0).all(), f"{name}: a prompt overtook another on GPU {g}"
        assert not len(started) or (begun[len(started):] < 0).all(), f"{name}: a prompt overtook one never read"
    if arrangement.kind != "colocated":
        check_handoff_order(rec, name, local)


def check_handoff_order(rec, name: str, local: np.ndarray) -> None:
    """E4e: the queue is served from its head, in D5 step 1 order: read end, GPU, arrival."""
    q = rec.requests
    queued = (q["first_word_at_ns"] >= 0) & (q["n_reply_words"] > 1) & ~local
    ids = np.flatnonzero(queued)
    order = ids[np.lexsort((ids, q["reading_gpu"][ids], q["first_word_at_ns"][ids]))]
    granted = q["handoff_at_ns"][order]
    done = granted >= 0
    n_done = int(done.sum())
    assert done[:n_done].all(), f"{name}: a request was handed over before one ahead of it in the queue"
    assert (np.diff(granted[:n_done]) >= 0).all(), f"{name}: the handoff queue was not served in order"


def check_links(result, arrangement, local: np.ndarray) -> None:
    rec = result.records[arrangement.name]
    q = rec.requests
    name = arrangement.name
    shipped = (q["ship_started_at_ns"] >= 0) & ~local
    key = {"shared": np.zeros(len(q["request_id"]), np.int64), "per_reading_gpu": q["reading_gpu"],
           "per_writing_gpu": q["writing_gpu"]}[arrangement.kv_link]
    ms = Fraction(repr(float(arrangement.kv_ship_ms(result.scenario.cost)))) * 1_000_000
    for k in np.unique(key[shipped]):
        ids = np.flatnonzero(shipped & (key == k))
        ids = ids[np.lexsort((ids, q["ship_started_at_ns"][ids]))]
        start = q["ship_started_at_ns"][ids]
        end = np.array([start[i] + int(ms * int(q["n_prompt_tokens"][r]) + Fraction(1, 2)) for i, r in enumerate(ids)],
                       dtype=np.int64)
        assert (start[1:] >= end[:-1]).all(), f"{name}: two ships on link {k} at once"
        waited = start[1:] > q["handoff_at_ns"][ids[1:]]
        assert (start[1:][waited] == end[:-1][waited]).all(), f"{name}: a ship waited on link {k} while it was free"
        assert (np.diff(q["handoff_at_ns"][ids]) >= 0).all(), f"{name}: ships on link {k} left out of request order"
        waiting = np.flatnonzero((key == k) & (q["handoff_at_ns"] >= 0) & (q["ship_started_at_ns"] < 0) & ~local)
        if len(waiting):  # still queued at the stop: the link was busy to the end
            assert end.max(initial=0) > rec.stopped_at_ns or q["handoff_at_ns"][waiting].min() >= rec.stopped_at_ns


def check_options(result, arrangement) -> None:
    """E4 and E5 invariants of one arrangement (nothing to check when both are off)."""
    rec = result.records[arrangement.name]
    n = len(rec.requests["request_id"])
    local_max = getattr(arrangement, "local_prompt_max_tokens", None)
    local = np.zeros(n, bool) if local_max is None else rec.requests["n_prompt_tokens"] <= local_max
    if arrangement.kv_capacity_tokens is not None:
        check_memory(result, arrangement, local)
    else:
        assert "kv_used_tokens" not in rec.iterations and rec.kv_peak_tokens is None
    if getattr(arrangement, "kv_link", "independent") != "independent":
        check_links(result, arrangement, local)

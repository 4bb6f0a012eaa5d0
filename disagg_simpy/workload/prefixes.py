"""Prompt block ids for prefix caching (E13): read from a Mooncake trace's `hash_ids`, or drawn
for synthetic traffic (`workload.prefixes`).

A request's block ids are stored ragged, all requests' ids in one int64 array and each request's
slice by `starts` (request i: ids[starts[i]:starts[i + 1]]), in blocks of `unit` tokens: block j
holds tokens j*unit .. (j+1)*unit - 1 and its id stands for the whole prompt up to there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .traces import _lines, _shown

_MAX_ID = 2**40  # ids times a block's sub-blocks stay far inside int64


@dataclass(frozen=True)
class BlockIds:
    """Every request's prompt block ids (ragged), in blocks of `unit` tokens."""

    ids: np.ndarray  # int64
    starts: np.ndarray  # int64, one more than there are requests
    unit: int

    def take(self, rows: np.ndarray) -> BlockIds:
        """The ids of requests `rows` (a boolean mask or indices), in that order."""
        rows = np.flatnonzero(rows) if rows.dtype == bool else rows
        lo, hi = self.starts[rows], self.starts[rows + 1]
        n = hi - lo
        starts = np.concatenate(([0], np.cumsum(n))).astype(np.int64)
        index = np.repeat(lo - starts[:-1], n) + np.arange(int(starts[-1]), dtype=np.int64)
        return BlockIds(self.ids[index], starts, self.unit)

    def of(self, i: int) -> np.ndarray:
        return self.ids[self.starts[i]:self.starts[i + 1]]


def read_hash_ids(path, prompt_tokens: np.ndarray, unit: int) -> BlockIds:
    """The `hash_ids` of every row of a Mooncake trace already read by `read_trace` (so each
    non-blank line is a JSON object): a list of whole numbers >= 0, one per `unit` prompt tokens
    (the last block may be partial). A bad row is one line naming it."""
    ids: list[int] = []
    starts = [0]
    row = 0
    for line_no, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        value = json.loads(line).get("hash_ids")
        need = -(-int(prompt_tokens[row]) // unit)
        if not isinstance(value, list):
            got = "a line without it" if value is None else _shown(json.dumps(value))
            raise InputError(f"{path}:{line_no}: hash_ids: got {got}, expected a list of block ids "
                             f"(one per {unit} prompt tokens) on every line for prefix caching")
        if not all(type(v) is int and 0 <= v < _MAX_ID for v in value) or len(value) != need:
            text = json.dumps(value)
            text = text if len(text) <= 60 else text[:60] + "..."
            entries = f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}"
            raise InputError(f"{path}:{line_no}: hash_ids: got {text} ({entries}), "
                             f"expected {need} whole numbers from 0 to 2**40 (one per {unit} of its "
                             f"{int(prompt_tokens[row]):,} prompt tokens)")
        ids.extend(value)
        starts.append(len(ids))
        row += 1
    return BlockIds(np.array(ids, dtype=np.int64), np.array(starts, dtype=np.int64), unit)


def draw_prefixes(prefixes, n: int, seeds: np.random.SeedSequence) -> tuple[np.ndarray, np.ndarray]:
    """Per request: its prefix group (-1: none) and the prefix's tokens (0: none). Each group's
    length is drawn once (uniform in `tokens`); request k's two uniforms decide whether it has a
    prefix (below `share`) and which (Zipf weights 1 / (g + 1) ** zipf), whatever n is."""
    lengths_rng, requests_rng = (np.random.default_rng(s) for s in seeds.spawn(2))
    lo, hi = prefixes.tokens
    lengths = lo + np.floor(lengths_rng.random(prefixes.groups) * (hi - lo + 1)).astype(np.int64)
    u = requests_rng.random((n, 2))
    weights = 1.0 / np.arange(1, prefixes.groups + 1, dtype=np.float64) ** prefixes.zipf
    cdf = np.cumsum(weights) / weights.sum()
    group = np.minimum(np.searchsorted(cdf, u[:, 1], side="right"), prefixes.groups - 1)
    has = u[:, 0] < prefixes.share
    return np.where(has, group, -1), np.where(has, lengths[group], 0)


def synthetic_blocks(prompts: np.ndarray, group: np.ndarray, prefix_tokens: np.ndarray, block: int,
                     parent: np.ndarray | None = None) -> BlockIds:
    """Block ids of synthetic prompts (blocks of `block` tokens): a prompt's blocks wholly inside
    its group's prefix are the group's (the same for every request of the group); with sessions
    (`parent`: the index of the previous turn, -1 for a first turn, always earlier), the blocks
    wholly inside the previous turn's prompt are that turn's; every other block is its own."""
    n_blocks = -(-prompts // block)
    starts = np.concatenate(([0], np.cumsum(n_blocks))).astype(np.int64)
    j = np.arange(int(starts[-1]), dtype=np.int64) - np.repeat(starts[:-1], n_blocks)
    stride = int(prefix_tokens.max(initial=0)) // block + 1
    n_groups = int(group.max(initial=-1)) + 1
    shared = np.repeat(np.where(group >= 0, prefix_tokens // block, 0), n_blocks)
    ids = np.where(j < shared, np.repeat(np.maximum(group, 0) * stride, n_blocks) + j,
                   n_groups * stride + np.arange(len(j), dtype=np.int64))
    if parent is not None:
        for i in np.flatnonzero(parent >= 0).tolist():  # turn order: a parent's ids are final first
            p = int(parent[i])
            keep = min(int(prompts[p]) // block, int(n_blocks[i]))
            ids[starts[i]:starts[i] + keep] = ids[starts[p]:starts[p] + keep]
    return BlockIds(ids, starts, block)


def session_turns(sessions, starts_s: np.ndarray, seeds: np.random.SeedSequence
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every turn of sessions starting at `starts_s`, in session then turn order: (session,
    turn from 0, arrival s). Session s draws its turns (uniform in `turns`) and each later turn
    its think time (uniform in `think_s`) after the previous turn's arrival (open loop)."""
    turns_rng, think_rng = (np.random.default_rng(s) for s in seeds.spawn(2))
    lo, hi = sessions.turns
    k = lo + np.floor(turns_rng.random(len(starts_s)) * (hi - lo + 1)).astype(np.int64)
    session = np.repeat(np.arange(len(starts_s)), k)
    first = np.concatenate(([0], np.cumsum(k)[:-1]))
    turn = np.arange(int(k.sum())) - np.repeat(first, k)
    t_lo, t_hi = sessions.think_s
    think = np.where(turn > 0, t_lo + think_rng.random(len(turn)) * (t_hi - t_lo), 0.0)
    at = np.repeat(starts_s, k) + (np.cumsum(think) - np.repeat(np.cumsum(think)[first] - think[first], k))
    return session, turn, at

"""Small generated files in each public trace's real format (a plain module, not a conftest).

Each returns the file's text and what the reader must make of it, worked out here with integer
arithmetic, so the readers are tested without any copy of the public traces:

- Azure 2023: `TIMESTAMP,ContextTokens,GeneratedTokens`, naive wall clock with seven fractional
  digits (100 ns ticks), crossing midnight, with ties and 100 ns gaps;
- Mooncake: JSON Lines `timestamp` (ms, in about 3 s steps with many ties), `input_length`,
  `output_length`, `hash_ids` (512-token blocks);
- ShareGPT lengths: `num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio`.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass

import numpy as np


@dataclass
class Generated:
    text: str
    arrived_at_ns: list[int] | None
    n_prompt_tokens: list[int]
    n_reply_words: list[int]


def _lengths(rng, n, prompt_max=8000, reply_max=1000):
    return rng.integers(1, prompt_max, n).tolist(), rng.integers(1, reply_max, n).tolist()


def azure(n=300, seed=1) -> Generated:
    """Arrivals from 2023-11-16 23:59:00 on, so they cross midnight; gaps in 100 ns ticks."""
    rng = np.random.default_rng(seed)
    gaps = rng.choice([0, 1, 7, 520_000, 3_899_999, 12_345_678], size=n - 1)  # ticks of 100 ns
    ticks = [0, *np.cumsum(gaps).tolist()]
    start = datetime.datetime(2023, 11, 16, 23, 59, 0)
    stamps = []
    for t in ticks:
        whole, frac = divmod(t, 10**7)
        stamps.append(f"{start + datetime.timedelta(seconds=whole):%Y-%m-%d %H:%M:%S}.{frac:07d}")
    prompt, reply = _lengths(rng, n)
    rows = "".join(f"{s},{p},{r}\n" for s, p, r in zip(stamps, prompt, reply))
    return Generated("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows, [t * 100 for t in ticks], prompt, reply)


def mooncake(n=200, seed=2) -> Generated:
    """Millisecond stamps that move in steps of 2,997-3,003 ms, about ten requests per step."""
    rng = np.random.default_rng(seed)
    steps = np.where(rng.random(n - 1) < 0.1, rng.integers(2997, 3004, n - 1), 0)
    ms = [0, *np.cumsum(steps).tolist()]
    prompt, reply = _lengths(rng, n, prompt_max=130_000, reply_max=2000)
    lines = [json.dumps({"timestamp": t, "input_length": p, "output_length": r, "hash_ids": list(range(-(-p // 512)))})
             for t, p, r in zip(ms, prompt, reply)]
    return Generated("\n".join(lines) + "\n", [t * 1_000_000 for t in ms], prompt, reply)


def lengths(n=200, seed=3) -> Generated:
    """A length table: the two counts, their total and their ratio as Python prints it."""
    rng = np.random.default_rng(seed)
    prompt, reply = _lengths(rng, n, reply_max=1025)
    rows = "".join(f"{p},{r},{p + r},{p / r!r}\n" for p, r in zip(prompt, reply))
    return Generated("num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n" + rows, None, prompt, reply)

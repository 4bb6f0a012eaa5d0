"""The one cost object (model/costs.py, issue 36): every term of an iteration's cost is written
there once, and each duration the model chooses once per run (for speed) equals the one general
duration on every branch: whole ns and fractions of a ns (D10), E2, E3, E7 alone or beside
E14/E15/E17, E13; a repeat's ends equal its iterations' durations, each rounded once."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from disagg_simpy.model.costs import CostNs

MODEL = Path(__file__).resolve().parents[2] / "disagg_simpy" / "model"
TERM = re.compile(r"\.(per_reply|per_prompt_token|per_attention_pair|per_context_token|per_reread_token|per_cached_token"
                  r"|prompt_iteration|free_prompt_tokens|per_token_tile|token_tile|per_expert|experts|experts_per_token"
                  r"|kv_ship_per_token|denominator)\b"
                  r"|\(n \+ 1\) // 2|// \(2 \*")

COSTS = {
    "m1 whole ns": CostNs.from_ms(12, 0.4, 0.05, 0.01),
    "m1 fractions": CostNs.from_ms(1.0000005, 0.0000005, 0.0000005, 0.0625),
    "e2": CostNs.from_ms(10, 1, 0.01, 0, per_reread_token_ms=0.0000013),
    "e3": CostNs.from_ms(10, 1, 0.01, 0, per_context_token_ms=0.0000007),
    "e7 alone": CostNs.from_ms(10, 1, 0.01, 0, per_attention_pair_ms=0.000001),
    "e7 fractions": CostNs.from_ms(10, 1, 0.01, 0, per_attention_pair_ms=0.0000000003),
    "e7 e14": CostNs.from_ms(10, 1, 0.01, 0, per_attention_pair_ms=0.000001, prompt_iteration_ms=3,
                             free_prompt_tokens=64),
    "e13 e15": CostNs.from_ms(10, 1, 0.01, 0, per_cached_token_ms=0.0005, per_token_tile_ms=2, token_tile=16),
    "e2 e3 e7 e14 e15": CostNs.from_ms(10.0000003, 1, 0.01, 0, per_reread_token_ms=0.0000013,
                                       per_context_token_ms=0.0000007, per_attention_pair_ms=0.0000000011,
                                       prompt_iteration_ms=2, free_prompt_tokens=100, per_token_tile_ms=0.5,
                                       token_tile=128),
    "e7 e17": CostNs.from_ms(10, 1, 0.01, 0, per_attention_pair_ms=0.000001, per_expert_ms=0.25, experts=8,
                             experts_per_token=2),
    "e2 e3 e7 e15 e17 fractions": CostNs.from_ms(10, 1, 0.01, 0, per_reread_token_ms=0.0000013,
                                                 per_context_token_ms=0.0000007, per_attention_pair_ms=0.0000000011,
                                                 per_token_tile_ms=0.5, token_tile=16, per_expert_ms=0.0000003,
                                                 experts=128, experts_per_token=8),
}


@dataclass
class Prompt:
    read_size: int
    unread_tokens: int
    cached_tokens: int = 0
    read_started_at_ns: int = -1


@dataclass
class Gpu:
    context_base: int
    track_context: bool


def test_no_model_module_but_costs_py_writes_a_cost_term():
    """A term (a cost figure read, E7's pairs, D10's rounding) outside model/costs.py is a second
    copy of a formula (the issue counted M1's sum in about 10 lines and E7's pairs 6 times)."""
    found = [f"{path.name}:{i}: {line.strip()}" for path in sorted(MODEL.glob("*.py")) if path.name != "costs.py"
             for i, line in enumerate(path.read_text().splitlines(), 1) if TERM.search(line)]
    assert not found, "cost terms outside model/costs.py:\n" + "\n".join(found)


def reads(now: int) -> list[list[tuple[Prompt, int]]]:
    """Reads as a GPU takes them (after the take): whole prompts, first chunks, later chunks, a
    cached prefix, several prompts."""
    return [
        [(Prompt(700, 0, read_started_at_ns=now), 700)],
        [(Prompt(2000, 1488, read_started_at_ns=now), 512)],
        [(Prompt(2000, 464, read_started_at_ns=now - 5), 512)],
        [(Prompt(1800, 0, 256, read_started_at_ns=now), 1544)],
        [(Prompt(1000, 0, read_started_at_ns=now - 9), 300), (Prompt(400, 188, read_started_at_ns=now), 212)],
        [(Prompt(3, 0, read_started_at_ns=now), 3)],
    ]


def test_the_durations_chosen_once_per_run_equal_the_general_duration():
    now = 1_000_000
    for (name, cost), base in itertools.product(COSTS.items(), (0, 5_000, 123_457)):
        gpu = Gpu(base, cost.writing_grows)
        reading, writing = cost.reading_fn(gpu), cost.writing_fn(gpu)
        for n_replies, index in itertools.product((0, 1, 7, 64), (0, 3, 1000)):
            assert writing(n_replies, index) == cost.duration(base, now, index, n_replies, 0, ()), (name, n_replies)
            for taken in reads(now):
                n_tokens = sum(n for _, n in taken)
                want = cost.duration(base, now, index, n_replies, n_tokens, taken)
                assert reading(now, index, n_replies, n_tokens, taken) == want, (name, n_replies, index, taken)
        m1 = cost.iteration_fn()
        for n_replies, n_tokens in itertools.product((0, 1, 17), (0, 1, 15, 16, 4000)):
            assert m1(n_replies, n_tokens) == cost.iteration_ns(n_replies, n_tokens) == cost.iteration_ns_full(
                n_replies, n_tokens), (name, n_replies, n_tokens)


def test_a_repeats_ends_are_its_iterations_durations_each_rounded_once():
    """`CostNs.ends` from `step`: iteration j of a repeat reads chunk c after `before + j c` tokens
    of its prompt and writes replies whose context is j tokens longer each: the running sum of the
    durations `iteration_ns_full` gives each iteration alone."""
    for name, cost in COSTS.items():
        for n_replies, chunk, before, n_context in [(0, 512, 0, 0), (3, 512, 1024, 900), (5, 0, 0, 4000),
                                                    (1, 100, 7, 33)]:
            n = 40
            step = cost.step(n_replies, chunk)
            durations = [cost.iteration_ns_full(n_replies, chunk, before + j * chunk, n_context + j * n_replies,
                                                cost.pairs(chunk, before + j * chunk) if chunk else 0) for j in range(n)]
            if not step:
                assert len(set(durations)) == 1, name
                continue
            ends = cost.ends(durations[0], step, n, n_replies, chunk, before, n_context)
            assert ends == list(itertools.accumulate(durations)), (name, n_replies, chunk)


def test_ship_and_switch_times_round_half_up():
    assert CostNs.from_ms(1, 0, 0, 0.0000003).ship_ns(5) == 2  # 1.5 ns rounds half up
    assert CostNs.from_ms(1, 0, 0, 0.0000003).ship_ns(3) == 1  # 0.9 ns

"""E9's bulk paths (the fast forms) against their plain, row-by-row definitions: the stretch
log (model/paged_kv.py `stretch_log`) and the block schedule's running sums (model/kv_blocks.py
`run_free`, `grow`)."""

from __future__ import annotations

import random
from types import SimpleNamespace

from disagg_simpy.model.kv_blocks import BlockSchedule
from disagg_simpy.model.memory import Memory
from disagg_simpy.model.paged_away import stretch_log
from disagg_simpy.model.records import GpuLog
from disagg_simpy.model.request import Request


def plain_stretch_log(arrived):
    rows = []
    for r in arrived:
        if r.stretches is None:
            lead = r.first_word_at_ns
            rows.append([r.request_id, r.writing_gpu, r.join_iteration, 2, r.n_reply_words - 1, lead, int(lead >= 0)])
            continue
        for at, first, n, lead, written in r.stretches:
            rows.append([r.request_id, r.writing_gpu, at, first, r.n_reply_words - first + 1 if n < 0 else n, lead,
                         written])
    return rows


def test_the_stretch_log_is_every_request_s_stretches_in_arrival_order():
    rng = random.Random(7)
    for n in (0, 1, 5, 40):
        arrived = []
        for i in range(n):
            r = Request(i, i * 10, rng.randint(1, 50), rng.randint(1, 30), True)
            r.writing_gpu, r.join_iteration = rng.randint(-1, 3), rng.randint(-1, 100)
            r.first_word_at_ns = rng.choice((-1, rng.randint(0, 10**9)))
            r.stretches = None
            if rng.random() < 0.3:  # preempted: stretches logged, the last maybe open
                r.n_preemptions = rng.randint(1, 3)
                r.stretches = [[rng.randint(-1, 99), w, rng.choice((-1, 2)), rng.randint(0, 10**9), rng.randint(0, 1)]
                               for w in range(2, 2 + rng.randint(1, 3))]
            arrived.append(r)
        assert stretch_log(arrived).tolist() == plain_stretch_log(arrived)


def schedule(rng, block):
    s = BlockSchedule(block)
    for phase in s.phases:
        for _ in range(rng.choice((0, 0, 1, 3, 9))):
            phase[object()] = None  # (a reply due a block at that phase)
    return s


def test_run_free_and_grow_equal_a_key_by_key_count():
    rng = random.Random(3)
    for _ in range(300):
        block = rng.choice((1, 2, 4, 16))
        s = schedule(rng, block)
        key, n, free = rng.randint(0, 50), rng.randint(1, 80), rng.randint(0, 400)
        plain, left = n, free
        for k in range(key + 1, key + n):
            left -= len(s.phases[k % block]) * block
            if left < 0:
                plain = k - key
                break
        assert s.run_free(free, key, n) == plain, (block, key, n, free)
        memory = Memory(None, True)
        memory.hold(free)
        gpu = SimpleNamespace(memory=memory)
        log = GpuLog()
        s.grow(gpu, key, n, log)
        used, want = free, []
        for k in range(key, key + n):
            used += len(s.phases[k % block]) * block
            want.append(used)
        assert log.kv_used_tokens.tolist() == want and memory.used == used and memory.peak == used

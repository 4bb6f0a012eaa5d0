"""A plain reference implementation of the model's rules, written only from the spec
(docs/rules.md: M1-M7, D1-D10, E1-E8, E10, E13-E17 and their readings; E9 in reference_paged.py), to check the
simulator's records for exact equality (tests/model/test_reference.py).

No SimPy, no numpy in the rules: integer nanoseconds, exact costs (Fractions of the decimal
figures, one rounding per iteration or ship, halves up: D10), and a loop over instants that
applies D5's three steps literally:

  (1) every iteration ending now, by GPU number: words, first words, then (split) the handoff
      queue is served (E4e; with no memory limit this is D3's choice of writing GPU);
  (2) ship ends and arrivals, by request id;
  (3) every idle GPU with work it can do starts an iteration, by GPU number.

Written for clarity, not speed: use it on tiny scenarios only.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from disagg_simpy.workload.speculative import uniforms

NONE = -1
COST_KEYS = ("iteration_ms", "per_reply_ms", "per_prompt_token_ms", "per_reread_token_ms", "per_context_token_ms",
             "per_attention_pair_ms", "per_cached_token_ms", "prompt_iteration_ms", "free_prompt_tokens",
             "per_token_tile_ms", "token_tile", "per_expert_ms", "experts", "experts_per_token")


def tiles(c, n_rows: int):
    """E15: per_token_tile_ms for each started tile of token_tile rows (prompt tokens read + replies written)."""
    size = int(c["token_tile"]) or 1
    return c["per_token_tile_ms"] * ((n_rows + size - 1) // size)


def experts_touched(c, n_tokens: int):
    """E17: per_expert_ms for each distinct expert the iteration's tokens reach, at most all of
    them: each token (a prompt token read, a reply written, a draft token verified) routed to
    experts_per_token of them."""
    return c["per_expert_ms"] * min(c["experts"], c["experts_per_token"] * n_tokens)


def exact(ms) -> Fraction:
    """A figure as the decimal the user wrote (its shortest repr), exactly."""
    return Fraction(repr(float(ms)))


def to_ns(ms: Fraction) -> int:
    """Milliseconds to the nearest whole nanosecond, halves up (D10)."""
    ns = ms * 1_000_000
    return (ns + Fraction(1, 2)).__floor__()


class Req:
    def __init__(self, rid, arrived, prompt, words, measured):
        self.id, self.arrived, self.prompt, self.words, self.measured = rid, arrived, prompt, words, measured
        self.pending = prompt  # tokens no iteration has taken yet (D1 counts these)
        self.read = 0  # tokens read by iterations that ended (E2's k)
        self.written = 0  # words given so far
        self.local = False  # E6: read on its writing GPU
        self.reading_gpu = self.writing_gpu = NONE
        self.read_started = self.first_word = self.joined = self.join_iteration = NONE
        self.finished = self.handoff_at = self.ship_started = NONE
        self.seated = NONE  # E8: start of the iteration that writes its word 2 (joined, without E8)
        self.word_times: list[int] = []
        self.blocks: list[int] = []  # E13: its prompt's cache block ids
        self.cached = 0  # E13: tokens found cached when its reading began
        self.hit = 0  # E13: what the taking in progress found cached


class Cache:
    """E13: one instance's prefix cache, straight from the rule: a stamp of last use per block."""

    def __init__(self, capacity_tokens, block):
        self.block, self.capacity = block, capacity_tokens // block
        self.stamp: dict[int, int] = {}  # block id -> last use (higher: more recent)
        self.pins: dict[int, int] = {}
        self.clock = 0

    def hit(self, r) -> int:
        """Tokens of r's longest cached prefix, in whole blocks, leaving its last token to read."""
        n = 0
        for b in r.blocks[: (r.prompt - 1) // self.block]:
            if b not in self.stamp:
                break
            n += 1
        return n * self.block

    def begin(self, r):
        for b in r.blocks[: r.cached // self.block]:
            self.pins[b] = self.pins.get(b, 0) + 1

    def end(self, r):
        for b in r.blocks[: r.cached // self.block]:
            self.pins[b] -= 1
        full = r.blocks[: r.prompt // self.block]
        kept = []
        for b in full:
            if b not in self.stamp:
                if len(self.stamp) >= self.capacity:
                    victims = [x for x in self.stamp if not self.pins.get(x) and x not in full]
                    if not victims:
                        break
                    del self.stamp[min(victims, key=self.stamp.__getitem__)]
                self.stamp[b] = -1
            kept.append(b)
        for b in reversed(kept):  # the tail least recent of its blocks
            self.clock += 1
            self.stamp[b] = self.clock


class Gpu:
    def __init__(self, number, side, cost, chunk, capacity, seats=None, budget=None, mixed=True, prompts=None):
        self.number, self.side, self.cost, self.chunk, self.capacity = number, side, cost, chunk, capacity
        self.seats, self.budget = seats, budget  # E8: replies written, and replies + tokens, per iteration
        self.prompts = prompts  # E8 per side (R90): prompts read per iteration (a split's reading GPU)
        self.mixed = mixed  # E10 when False: an iteration reads prompts (first) or writes words
        self.queue: list[Req] = []  # prompts with tokens not yet taken, in arrival order
        self.replies: list[Req] = []  # replies in progress (get a word each iteration)
        self.shipping = 0  # replies shipping to it, or waiting for their link (E5)
        self.local_unread = 0  # E6: local prompts routed here whose reading has not finished
        self.away = 0  # E9: replies preempted here, being read again or swapped out
        self.held = 0  # KV tokens reserved (E4)
        self.peak = 0  # the most it ever held
        self.busy = None  # (end_ns, writes, reads) of the iteration in progress
        self.cache = None  # E13
        self.iterations: list[dict] = []
        self.reads: list[tuple[int, int, int]] = []  # (iteration, request id, tokens)

    def work_queued(self) -> int:
        """D1: prompt tokens not yet read, leaving out those the iteration in progress reads."""
        return sum(r.pending for r in self.queue)

    def n_replies(self) -> int:
        """Writing side's count (D3, E6, reading R5)."""
        return len(self.replies) + self.shipping + self.local_unread + self.away

    def free(self) -> float | int:
        return float("inf") if self.capacity is None else self.capacity - self.held


class Reference:
    """One arrangement run on one request stream, by the spec's rules."""

    def __init__(self, scenario, arrangement, stream):
        a, base = arrangement, scenario.cost
        self.split = a.kind == "disaggregated"
        figures = {k: exact(getattr(base, k) or 0) for k in COST_KEYS}

        def side(over):
            own = dict(figures)
            for k in COST_KEYS:
                v = getattr(over, k, None) if over is not None else None
                if v is not None:
                    own[k] = exact(v)
            return own

        cap, chunk = a.kv_capacity_tokens, a.chunk_tokens
        budget = a.max_batch_tokens  # E8
        self.e8 = a.max_batch_replies is not None or budget is not None
        spec = scenario.speculative  # E16: (draft tokens, acceptance, drafting's ms per token, each request's key)
        self.per_reply = 1 if spec is None else 1 + spec.tokens  # E8 with E16 (R84): a written reply's budget tokens
        seats = min(x for x in (a.max_batch_replies, budget and budget // self.per_reply, 2**63) if x is not None)
        e8 = {"seats": seats, "budget": budget}
        e8_side = {"reading": dict(e8), "writing": dict(e8)}  # E8 per side (R89): a side's own key, else the general
        if self.split:
            r_budget = budget if a.reading_max_batch_tokens is None else a.reading_max_batch_tokens
            w_budget = budget if a.writing_max_batch_tokens is None else a.writing_max_batch_tokens
            w_replies = a.max_batch_replies if a.writing_max_batch_replies is None else a.writing_max_batch_replies
            e8_side = {"reading": {"seats": seats, "budget": r_budget, "prompts": a.reading_max_batch_requests},
                       "writing": {"seats": min(x for x in (w_replies, w_budget and w_budget // self.per_reply, 2**63)
                                                if x is not None),
                                   "budget": w_budget}}
            self.e8 = self.e8 or w_replies is not None or w_budget is not None
        # TP: an instance of `tp` GPUs is one GPU of the rules, with the instance's costs and KV
        # capacity (a side's own capacity, else kv_capacity_tokens); GPUs / TP instances per side
        if self.split:
            rc, wc = side(a.reading_cost), side(a.writing_cost)
            self.side_costs = {"reading": rc, "writing": wc}  # E12: a GPU that moves takes its new side's
            n_r, n_w = a.reading_gpus // (a.reading_tp or 1), a.writing_gpus // (a.writing_tp or 1)
            r_cap = cap if a.reading_kv_capacity_tokens is None else a.reading_kv_capacity_tokens
            w_cap = cap if a.writing_kv_capacity_tokens is None else a.writing_kv_capacity_tokens
            self.reading = [Gpu(i, "reading", rc, chunk, r_cap, **e8_side["reading"]) for i in range(n_r)]
            self.writing = [Gpu(n_r + i, "writing", wc, chunk, w_cap, **e8_side["writing"]) for i in range(n_w)]
            ship = base.kv_ship_ms_per_token if a.kv_ship_ms_per_token is None else a.kv_ship_ms_per_token
            self.ship_ms = exact(ship)
            self.link = a.kv_link
            self.local_max = a.local_prompt_max_tokens
        else:
            c = side(a.cost)
            mixed = a.mixed_iterations is not False  # E10
            self.reading = [Gpu(i, "colocated", c, chunk, cap, mixed=mixed, **e8) for i in range(a.gpus // (a.tp or 1))]
            self.writing, self.link, self.local_max = [], "independent", None
        self.gpus = self.reading + self.writing
        self.kv_on = any(g.capacity is not None for g in self.gpus)
        self.speculative = None if spec is None else (spec.tokens, spec.acceptance, exact(spec.per_draft_token_ms),
                                               stream.draft_keys)
        self.reqs = [Req(i, int(t), int(p), int(w), bool(m)) for i, (t, p, w, m) in enumerate(
            zip(stream.arrived_at_ns, stream.n_prompt_tokens, stream.n_reply_words, stream.measured))]
        # E13: caches on the instances that read (not a split's writing ones), and the router
        self.router = scenario.router
        self.load_cap = scenario.router_load_cap_tokens or 16_384
        self.draws = stream.router_draws
        self.n_routed = 0
        self.cache_on = scenario.prefix_cache_tokens is not None
        if self.cache_on:
            block = scenario.prefix_block_tokens
            for g in self.reading:
                g.cache = Cache(scenario.prefix_cache_tokens, block)
            if stream.blocks is not None:
                per = stream.blocks.unit // block  # sub-block s of a trace block h: h * per + s
                for r in self.reqs:
                    units = stream.blocks.ids[stream.blocks.starts[r.id]:stream.blocks.starts[r.id + 1]]
                    r.blocks = [int(h) * per + s for h in units for s in range(per)]
        self.last_assigned = {"reading": {}, "writing": {}}  # D2: gpu number -> assignment number
        self.n_assignments = 0
        self.handoff: list[Req] = []  # E4e
        self.ships: list[tuple[int, Req]] = []  # (end_ns, request) of ships under way
        self.link_busy: dict = {}  # E5: link -> request shipping on it
        self.link_queue: dict = {}  # E5: link -> requests waiting, in request order

    # -- choices (M3, D1, D2, D3, E6) ----------------------------------------------------------
    def pick(self, candidates, score, record):
        """The candidate with the lowest score; ties: oldest most recent assignment (D2)."""
        last = self.last_assigned[record]
        best = min(candidates, key=lambda g: (score(g), last.get(g.number, -1), g.number))
        last[best.number] = self.n_assignments
        self.n_assignments += 1
        return best

    def arrive(self, r: Req):
        if self.local_max is not None and r.prompt <= self.local_max:  # E6
            g = self.pick(self.writing, Gpu.n_replies, "writing")
            r.local = True
            g.local_unread += 1
        else:
            g = self.route(r)
        r.reading_gpu = g.number
        g.queue.append(r)

    def route(self, r: Req):
        """The reading instance by the scenario's router (E13; least_loaded is M3, D1, D2)."""
        if self.router == "round_robin":
            g = self.reading[self.n_routed % len(self.reading)]
            self.n_routed += 1
            self.last_assigned["reading"][g.number] = self.n_assignments
            self.n_assignments += 1
            return g
        if self.router == "power_of_two":
            n = len(self.reading)
            pairs = [(i, j) for i in range(n) for j in range(i + 1, n)] or [(0, 0)]
            i, j = pairs[int(float(self.draws[r.id]) * len(pairs)) if n > 1 else 0]
            return self.pick(sorted({self.reading[i], self.reading[j]}, key=lambda g: g.number), Gpu.work_queued,
                             "reading")
        if self.router == "prefix_aware":
            least = min(g.work_queued() for g in self.reading)
            near = [g for g in self.reading if g.work_queued() <= least + self.load_cap]
            return self.pick(near, lambda g: (-g.cache.hit(r), g.work_queued()), "reading")
        return self.pick(self.reading, Gpu.work_queued, "reading")

    # -- iterations (M1, M2, M5, D4, D9, E2-E4, E7) -------------------------------------------------
    def reservation(self, g: Gpu, r: Req) -> int:
        """E4: what a prompt reserves on `g` when its reading begins."""
        return r.prompt if g.side == "reading" else r.prompt + r.words

    def take(self, g: Gpu, n_writes: int):
        """The prompts (request, tokens) an iteration starting now reads (D4, E4d, E8)."""
        reads, budget, free = [], g.chunk, g.free()
        room = None if g.budget is None else g.budget - n_writes  # E8: tokens left after the replies
        if budget is not None and room is not None:
            budget = min(budget, room)  # chunked: min(chunk_tokens, budget - replies)
        for r in g.queue:
            if budget is not None and budget == 0 or len(reads) == g.prompts:  # (R90: at most g.prompts prompts)
                break
            r.hit = g.cache.hit(r) if g.cache is not None and r.pending == r.prompt else 0  # E13
            pending = r.pending - r.hit
            n = pending if budget is None else min(budget, pending)
            if budget is None and room is not None and n > room:  # E8, whole prompts: it must fit ...
                if room == 0 or (r.pending == r.prompt and pending <= g.budget):
                    break
                n = room  # ... unless larger than the whole budget (or begun so): pieces of the room
            if r.pending == r.prompt:  # reading not begun: it must fit (E4d)
                need = self.reservation(g, r)
                if need > free:
                    break
                free -= need
            if budget is not None:
                budget -= n
            elif room is not None:
                room -= n
            reads.append((r, n))
        return reads

    def start(self, g: Gpu, now: int):
        if g.mixed:
            writes = g.replies[:g.seats]  # E8: the first replies that joined; all of them without E8
            reads = self.take(g, len(writes) * self.per_reply)  # (E16: each reply and its drafts, R84)
        else:  # E10: prompts first, if it can take any (as an iteration writing no word); else words only
            reads = self.take(g, 0)
            writes = [] if reads else g.replies[:g.seats]
        for r in writes:
            if r.seated == NONE:
                r.seated, r.join_iteration = now, len(g.iterations)
        if not writes and not reads:
            return
        n_cached = 0
        for r, _ in reads:  # E13: a read begins after its cached prefix, which counts as read (E2, E7)
            if r.pending == r.prompt and g.cache is not None:
                r.cached = r.hit
                g.cache.begin(r)
                r.read += r.hit
                n_cached += r.hit
        c = g.cost
        ms = c["iteration_ms"] + c["per_reply_ms"] * len(writes)
        read = sum(n for _, n in reads)  # E14: the first free_prompt_tokens at no per-token cost, one
        ms += c["per_prompt_token_ms"] * max(0, read - c["free_prompt_tokens"])  # prompt_iteration_ms if any
        ms += c["prompt_iteration_ms"] if read else 0
        ms += c["per_reread_token_ms"] * sum(r.read for r, _ in reads)  # E2
        ms += c["per_context_token_ms"] * sum(r.prompt + r.written for r in writes)  # E3: word w has w-1
        ms += c["per_attention_pair_ms"] * sum(n * r.read + n * (n + 1) // 2 for r, n in reads)  # E7
        ms += c["per_cached_token_ms"] * n_cached  # E13
        verify_ms, drafts = self.verified(c, len(writes))  # E16: k draft tokens per reply, each read, and drafted
        ms += verify_ms + tiles(c, read + len(writes) + drafts)  # E15 (E16: a verified draft token is a row)
        ms += experts_touched(c, read + len(writes) + drafts)  # E17 (its tokens: E15's rows)
        index = len(g.iterations)
        for r, n in reads:
            if r.pending == r.prompt:
                r.read_started = now
                g.held += self.reservation(g, r)
                g.peak = max(g.peak, g.held)
            r.pending -= n + (r.cached if r.pending == r.prompt else 0)
            g.reads.append((index, r.id, n))
        g.queue = [r for r in g.queue if r.pending > 0]
        end = now + max(1, to_ns(ms))
        g.iterations.append({"started_at_ns": now, "ended_at_ns": end, "n_replies_written": len(writes),
                             "n_prompt_tokens_read": sum(n for _, n in reads), "kv_used_tokens": g.held})
        g.busy = (end, writes, reads)

    def end(self, g: Gpu, now: int):
        _, writes, reads = g.busy
        g.busy = None
        for r in writes:  # words 2..n (E16: one, then each next word while accepted, at most 1 + k, at most the reply)
            r.written += 1
            r.word_times.append(now)
            if self.speculative:
                k, n = self.speculative[0], 1
                while n < 1 + k and r.written < r.words and self.accepted(r, r.written + 1):
                    r.written += 1
                    n += 1
                    r.word_times.append(now)
            if r.written == r.words:
                r.finished = now
                g.replies.remove(r)
                g.held -= r.prompt + r.words
        for r, n in reads:  # arrival order
            r.read += n
            if r.read < r.prompt:
                continue
            if g.cache is not None:  # E13: its full blocks enter the cache
                g.cache.end(r)
            r.first_word, r.written = now, 1
            r.word_times.append(now)
            if r.local:
                g.local_unread -= 1
            if r.words == 1:  # D8: no ship, no writing GPU
                r.finished = now
                g.held -= self.reservation(g, r)
            elif g.side == "reading":
                self.handoff.append(r)
            else:  # colocated, or a local prompt (E6): the reply stays here
                r.writing_gpu, r.joined = g.number, now
                self.join(g, r, now)
        if self.split:
            self.serve_handoff(now)

    def verified(self, c: dict, n_replies: int):
        """E16: what verifying `n_replies` replies' draft tokens adds to an iteration of cost `c`
        (each token at per_prompt_token_ms, and drafted), in ms, and their tokens (rows of E15)."""
        if self.speculative is None:
            return 0, 0
        k, _, draft_ms, _ = self.speculative
        return (c["per_prompt_token_ms"] + draft_ms) * k * n_replies, k * n_replies

    def accepted(self, r: Req, word: int) -> bool:
        """E16: whether the draft of `word` of r's reply is accepted (the request's own draw)."""
        _, a, _, keys = self.speculative
        return bool(uniforms(np.array([keys[r.id]]), np.array([word]))[0] < a)

    # -- handoff and ships (D3, M4, E4e, E5) -----------------------------------------------------
    def serve_handoff(self, now: int):
        while self.handoff:
            r = self.handoff[0]
            need = r.prompt + r.words
            room = [w for w in self.writing if w.free() >= need]
            if not room:
                return
            self.handoff.pop(0)
            w = self.pick(room, Gpu.n_replies, "writing")
            w.held += need
            w.peak = max(w.peak, w.held)
            w.shipping += 1
            r.writing_gpu, r.handoff_at = w.number, now
            if self.link == "independent":
                self.start_ship(r, now)
                continue
            link = {"per_reading_gpu": r.reading_gpu, "per_writing_gpu": w.number, "shared": 0}[self.link]
            if link in self.link_busy:
                self.link_queue.setdefault(link, []).append(r)
            else:
                self.link_busy[link] = r
                self.start_ship(r, now)

    def start_ship(self, r: Req, now: int):
        r.ship_started = now
        self.ships.append((now + to_ns(self.ship_ms * r.prompt), r))

    def ship_end(self, r: Req, now: int):
        w = self.gpus[r.writing_gpu]
        w.shipping -= 1
        r.joined = now
        self.join(w, r, now)
        self.gpus[r.reading_gpu].held -= r.prompt  # E4b
        for link, busy in list(self.link_busy.items()):
            if busy is r:
                del self.link_busy[link]
                waiting = self.link_queue.get(link)
                if waiting:
                    nxt = waiting.pop(0)
                    self.link_busy[link] = nxt
                    self.start_ship(nxt, now)

    def join(self, g: Gpu, r: Req, now: int):
        """A reply joins its writing GPU: without E8 its word 2 comes from the next iteration to
        start; with E8 from the first that gives it a seat, with E10 from the next that writes
        words (set in `start`)."""
        g.replies.append(r)
        if not self.e8 and g.mixed:
            r.seated, r.join_iteration = now, len(g.iterations)

    # -- the clock (D5) --------------------------------------------------------------------------
    def run(self):
        arrivals = list(self.reqs)  # arrival order = request id order
        while True:
            times = [g.busy[0] for g in self.gpus if g.busy] + [t for t, _ in self.ships]
            if arrivals:
                times.append(arrivals[0].arrived)
            times += self.role_times(times)  # E12
            if not times:
                break
            now = min(times)
            for g in self.gpus:  # step 1
                if g.busy and g.busy[0] == now:
                    self.end(g, now)
                    self.ended(g, now)
            self.roles_phase(now)  # E12: the start of step 2
            while True:  # step 2: ship ends and arrivals, by request id
                due = [r for t, r in self.ships if t == now]
                self.ships = [(t, r) for t, r in self.ships if t != now]
                while arrivals and arrivals[0].arrived == now:
                    due.append(arrivals.pop(0))
                if not due:
                    break
                for r in sorted(due, key=lambda r: r.id):
                    if r.first_word == NONE:
                        self.arrive(r)
                    else:
                        self.ship_end(r, now)
                # a ship a link starts here may round to 0 ns (E5): it too ends in this step 2
            for g in self.gpus:  # step 3
                if not g.busy:
                    self.start(g, now)
        return self

    # -- E12 hooks (tests/reference_roles.py): nothing with static roles ------------------------
    def role_times(self, times):
        return []

    def ended(self, g: Gpu, now: int):
        pass

    def roles_phase(self, now: int):
        pass

    # -- records, shaped like the simulator's --------------------------------------------------------
    def records(self) -> dict:
        fields = ("reading_gpu", "read_started", "first_word", "writing_gpu", "joined", "join_iteration",
                  "finished", "handoff_at", "ship_started")
        names = ("reading_gpu", "read_started_at_ns", "first_word_at_ns", "writing_gpu", "joined_at_ns",
                 "join_iteration", "finished_at_ns", "handoff_at_ns", "ship_started_at_ns")
        requests = {n: [getattr(r, f) for r in self.reqs] for f, n in zip(fields, names)}
        iterations = {k: [] for k in ("gpu", "iteration", "started_at_ns", "ended_at_ns", "n_replies_written",
                                      "n_prompt_tokens_read", "kv_used_tokens")}
        reads = {k: [] for k in ("gpu", "iteration", "request_id", "n_tokens")}
        for g in self.gpus:
            for i, it in enumerate(g.iterations):
                for k, v in {"gpu": g.number, "iteration": i, **it}.items():
                    iterations[k].append(v)
            for i, rid, n in g.reads:
                for k, v in zip(reads, (g.number, i, rid, n)):
                    reads[k].append(v)
        if not self.kv_on:
            del iterations["kv_used_tokens"]
        words = {r.id: r.word_times for r in self.reqs}
        kv = {"peak": [g.peak for g in self.gpus], "held_at_end": [g.held for g in self.gpus]} if self.kv_on else None
        return {"requests": requests, "iterations": iterations, "reads": reads, "words": words, "kv": kv,
                "seated_at_ns": [r.seated for r in self.reqs],
                "cached_tokens": [r.cached for r in self.reqs] if self.cache_on else None}


def reference_records(scenario, arrangement, stream) -> dict:
    """Run `arrangement` of `scenario` on `stream` (a workload.stream.Requests) by the spec."""
    if getattr(arrangement, "kv_policy", None) == "paged":  # E9
        from reference_paged import PagedReference
        return PagedReference(scenario, arrangement, stream).run().records()
    if getattr(arrangement, "role_changes", None) is not None:  # E12
        from reference_roles import RolesReference
        return RolesReference(scenario, arrangement, stream).run().records()
    return Reference(scenario, arrangement, stream).run().records()

"""E9 (paged KV memory with preemption) in the plain reference model, written from docs/rules.md
(E9a-i, readings R50-R60; with E10's prompt-only iterations, R61-R67) alone: a subclass of
`reference_model.Reference` that replaces how an iteration starts and ends and how memory is taken
and freed. No block schedule, no stretches: at every start each written reply's next word is
checked against its blocks, and words are given one by one, as the base reference does. Under
E10 an iteration first tries to take prompts (as one writing nothing); only if it takes none does
it seat, grow, preempt, swap in and write. With E16 (speculative decoding, readings R103-R107) a
written reply's blocks must hold its prompt, its words so far and the k draft tokens the iteration
verifies, and the iteration gives it its next word and each next accepted one (the base's E16). E3's
context is each written reply's prompt + its words so far at the start (`launch`): a resumed reply's
words are drawn from its next word on, so its context follows its restarted plan (R108) with no plan kept.
"""

from __future__ import annotations

from reference_model import NONE, Gpu, Reference, exact, experts_touched, tiles, to_ns


def blocks(tokens: int, block: int) -> int:
    return -(-tokens // block)


class PagedReference(Reference):
    """One arrangement with `kv_policy: paged` run by the spec's rules."""

    def __init__(self, scenario, arrangement, stream):
        super().__init__(scenario, arrangement, stream)
        a = arrangement
        self.block = a.kv_block_tokens or 16
        self.swap = a.preemption == "swap"
        self.swap_ms = exact(a.swap_ms_per_token or 0.0)
        self.max_preemptions = 8 if a.max_preemptions is None else a.max_preemptions
        for g in self.gpus:
            g.swapped = []  # swapped out, in the order they come back
        for r in self.reqs:
            r.size = r.prompt  # tokens of the read under way: prompt + words so far for a re-read
            r.blocks = 0  # blocks it holds on the GPU it is on
            r.again = False  # being read again (recompute)
            r.n_preemptions = 0
            r.dropped = NONE

    def free_blocks(self, g) -> int:
        return (g.capacity - g.held) // self.block

    def hold(self, g, n_blocks: int):
        g.held += n_blocks * self.block
        g.peak = max(g.peak, g.held)

    # -- admission (E9b) -----------------------------------------------------------------------
    def take(self, g, n_writes: int, admit: bool = True):
        """As the base reference, but a prompt (or re-read) not begun needs its blocks plus one free,
        and none is admitted while `admit` is false or a swapped reply waits (E9d, E9f)."""
        reads, budget, free = [], g.chunk, self.free_blocks(g)
        room = None if g.budget is None else g.budget - n_writes
        if budget is not None and room is not None:
            budget = min(budget, room)
        for r in g.queue:
            if budget is not None and budget == 0 or len(reads) == g.prompts:  # (R90)
                break
            n = r.pending if budget is None else min(budget, r.pending)
            if budget is None and room is not None and n > room:
                if room == 0 or (r.pending == r.size and r.size <= g.budget):
                    break
                n = room
            if r.pending == r.size:  # not begun
                need = blocks(r.size, self.block)
                if not admit or g.swapped or need + 1 > free:
                    break
                free -= need
            if budget is not None:
                budget -= n
            elif room is not None:
                room -= n
            reads.append((r, n))
        return reads

    # -- an iteration starts (E9c-f) -----------------------------------------------------------
    def start(self, g, now: int):
        b = self.block
        index = len(g.iterations)
        if not g.mixed:  # E10: prompts first, if it can take one (nothing preempted yet); it grows nothing
            reads = self.take(g, 0)
            if reads:
                self.launch(g, now, [], reads, 0)
                return
        for r in g.replies[:g.seats]:
            if r.seated == NONE:
                r.seated, r.join_iteration = now, index
        moved, victims = 0, []
        k = self.speculative[0] if self.speculative else 0  # E16: its k draft tokens need blocks too (R103)
        for r in g.replies[:g.seats]:  # E9c: each written reply's next word, in join order
            while r in g.replies and r.blocks * b < r.prompt + r.written + k:  # (word w needs prompt + w - 1)
                if self.free_blocks(g) < 1:
                    victim = g.replies[-1]
                    victims.append(victim)
                    moved += self.preempt(g, victim, now)
                else:
                    self.hold(g, 1)
                    r.blocks += 1
        self.queue_victims(g, victims)
        preempted = bool(victims)
        if not preempted:
            moved += self.swap_in(g, index, now)
        writes = g.replies[:g.seats]
        reads = self.take(g, len(writes) * self.per_reply, admit=not preempted) if g.mixed else []
        if preempted and not writes and not reads:  # E9d: nothing else to do: admit as usual
            moved += self.swap_in(g, index, now)
            writes = g.replies[:g.seats]
            reads = self.take(g, len(writes) * self.per_reply) if g.mixed or not writes else []  # (E10: one or the other)
        if not writes and not reads:
            return
        self.launch(g, now, writes, reads, moved)

    def launch(self, g, now: int, writes, reads, moved: int):
        """The iteration's cost (M1, E2, E3, E7; E9f's moves rounded on their own), its reads' blocks, its record."""
        b = self.block
        index = len(g.iterations)
        c = g.cost
        ms = c["iteration_ms"] + c["per_reply_ms"] * len(writes)
        read = sum(n for _, n in reads)  # (a recompute's re-read is read as a prompt: E14 too)
        ms += c["per_prompt_token_ms"] * max(0, read - c["free_prompt_tokens"]) + (c["prompt_iteration_ms"] if read else 0)
        ms += c["per_reread_token_ms"] * sum(r.read for r, _ in reads)
        ms += c["per_context_token_ms"] * sum(r.prompt + r.written for r in writes)
        ms += c["per_attention_pair_ms"] * sum(n * r.read + n * (n + 1) // 2 for r, n in reads)
        verify_ms, drafts = self.verified(c, len(writes))  # E16: k draft tokens per written reply
        ms += verify_ms + tiles(c, read + len(writes) + drafts)  # E15 (a recompute's re-read counts: it is read)
        ms += experts_touched(c, read + len(writes) + drafts)  # E17 (the same tokens)
        for r, n in reads:
            if r.pending == r.size:
                if r.read_started == NONE:
                    r.read_started = now
                r.blocks = blocks(r.size, b)
                self.hold(g, r.blocks)
            r.pending -= n
            g.reads.append((index, r.id, n))
        g.queue = [r for r in g.queue if r.pending > 0]
        end = now + max(1, to_ns(ms)) + to_ns(self.swap_ms * moved)  # E9f: the moves, rounded on their own
        g.iterations.append({"started_at_ns": now, "ended_at_ns": end, "n_replies_written": len(writes),
                             "n_prompt_tokens_read": sum(n for _, n in reads), "kv_used_tokens": g.held})
        g.busy = (end, writes, reads)

    def preempt(self, g, r, now: int) -> int:
        """E9c, e-g: free its blocks; drop it past the limit; else it goes away (tokens moved out)."""
        g.replies.remove(r)
        held = r.blocks * self.block
        g.held -= held
        r.n_preemptions += 1
        if r.n_preemptions > self.max_preemptions:
            r.dropped, r.blocks = now, 0
            return 0
        g.away += 1
        if self.swap:
            return held
        r.blocks = 0
        r.size = r.pending = r.prompt + r.written
        r.read, r.again = 0, True
        return 0

    def queue_victims(self, g, victims):
        """An iteration's victims wait in the order they joined, behind earlier ones (and, to be
        read again, behind prompts whose reading has begun)."""
        waiting = [v for v in reversed(victims) if v.dropped == NONE]
        if self.swap:
            g.swapped += waiting
            return
        at = 0
        while at < len(g.queue) and (g.queue[at].pending < g.queue[at].size or g.queue[at].again):
            at += 1
        g.queue[at:at] = waiting

    def swap_in(self, g, index: int, now: int) -> int:
        """E9f: swapped replies come back from the head while their blocks plus one are free."""
        moved = 0
        while g.swapped and self.free_blocks(g) >= g.swapped[0].blocks + 1:
            r = g.swapped.pop(0)
            moved += r.blocks * self.block
            k = self.speculative[0] if self.speculative else 0  # E16 (R103)
            need = max(r.blocks, blocks(r.prompt + r.written + k, self.block))
            self.hold(g, need)
            r.blocks = need
            g.away -= 1
            g.replies.append(r)
            if r.join_iteration == NONE and r in g.replies[:g.seats]:
                r.seated, r.join_iteration = now, index
        return moved

    # -- an iteration ends -----------------------------------------------------------------------
    def end(self, g, now: int):
        _, writes, reads = g.busy
        g.busy = None
        for r in writes:
            r.written += 1
            r.word_times.append(now)
            if self.speculative:  # E16: each next word while accepted, at most 1 + k, at most the reply
                k, n = self.speculative[0], 1
                while n < 1 + k and r.written < r.words and self.accepted(r, r.written + 1):
                    r.written += 1
                    n += 1
                    r.word_times.append(now)
            if r.written == r.words:
                r.finished = now
                g.replies.remove(r)
                g.held -= r.blocks * self.block
        for r, n in reads:
            r.read += n
            if r.read < r.size:
                continue
            if r.again:  # E9e: a re-read ends with the reply's next word; it rejoins, or finishes
                r.again = False
                g.away -= 1
                r.written += 1
                r.word_times.append(now)
                if r.written == r.words:
                    r.finished = now
                    g.held -= r.blocks * self.block
                else:
                    self.join(g, r, now)
                continue
            r.first_word, r.written = now, 1
            r.word_times.append(now)
            if r.local:
                g.local_unread -= 1
            if r.words == 1:
                r.finished = now
                g.held -= r.blocks * self.block
            elif g.side == "reading":
                self.handoff.append(r)
            else:
                r.writing_gpu, r.joined = g.number, now
                self.join(g, r, now)
        if self.split:
            self.serve_handoff(now)

    def join(self, g, r, now: int):
        g.replies.append(r)  # (a rejoin keeps its first join_iteration; E10: set by its first writing iteration)
        if not self.e8 and g.mixed and r.join_iteration == NONE:
            r.seated, r.join_iteration = now, len(g.iterations)

    # -- handoff and ship end (E9b) --------------------------------------------------------------------
    def serve_handoff(self, now: int):
        b = self.block
        while self.handoff:
            r = self.handoff[0]
            n = blocks(r.prompt, b)
            room = [w for w in self.writing if self.free_blocks(w) >= n + 1 and not w.away]  # (E9b: returns first)
            if not room:
                return
            self.handoff.pop(0)
            w = self.pick(room, Gpu.n_replies, "writing")
            self.hold(w, n)
            r.blocks = n
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

    def ship_end(self, r, now: int):
        reader = self.gpus[r.reading_gpu]
        reader.held += r.prompt - blocks(r.prompt, self.block) * self.block  # the base frees the prompt: free its blocks
        super().ship_end(r, now)

    def records(self) -> dict:
        out = super().records()
        out["requests"]["n_preemptions"] = [r.n_preemptions for r in self.reqs]
        out["requests"]["dropped_at_ns"] = [r.dropped for r in self.reqs]
        return out

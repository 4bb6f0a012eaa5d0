"""The reference model's E12 (GPUs that change role, docs/rules.md#e12), written from the rule
alone: a move takes an instance off its side at once, it drains, warms up `switch_s`, and joins
the other side as never assigned (D2). Warm-ups that end, then the schedule's or the policy's
decision, act at the start of D5 step 2 of their instant."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from reference_model import NONE, Reference, exact, experts_touched, tiles, to_ns


def s_to_ns(s) -> int:
    return to_ns(Fraction(Decimal(repr(float(s)))) * 1000)


class RolesReference(Reference):
    def __init__(self, scenario, arrangement, stream):
        super().__init__(scenario, arrangement, stream)
        spec = self.spec = arrangement.role_changes
        self.switch = s_to_ns(spec.switch_s)
        self.policy = spec.policy
        tp = arrangement.reading_tp or 1
        if self.policy:
            self.every = s_to_ns(spec.setting("check_s"))
            self.next_decision = self.every
        else:
            self.steps = [(s_to_ns(x.from_s), x.reading_gpus // tp) for x in spec.schedule if x.from_s > 0]
            self.next_decision = self.steps[0][0] if self.steps else None
        self.target = len(self.reading)
        self.warming: dict[int, int] = {}  # gpu -> warm-up end
        self.moves: dict[int, dict] = {}  # gpu -> its move under way
        self.switches: list[dict] = []
        self.last_decision = None
        self.why = "schedule"

    def role_times(self, times):
        out = list(self.warming.values())
        if self.next_decision is not None and (times or out):  # nothing else left: the run is over
            out.append(self.next_decision)
        return out

    def ended(self, g, now):
        if g.number in self.moves and self.moves[g.number]["drained_at_ns"] == NONE:
            self.try_drained(g, now)

    def try_drained(self, g, now):
        if g.queue or g.replies or g.shipping or g.busy:
            return
        self.moves[g.number]["drained_at_ns"] = now
        self.warming[g.number] = now + self.switch

    def roles_phase(self, now):
        decided = False
        while True:
            due = sorted(n for n, t in self.warming.items() if t == now)
            for n in due:
                self.serve(self.gpus[n], now)
            if not due and not decided and self.next_decision == now:
                decided = True
                self.decide(now)
                continue
            if not due:
                return

    def decide(self, now):
        if not self.policy:
            _, self.target = self.steps.pop(0)
            self.next_decision = self.steps[0][0] if self.steps else None
            self.why = "schedule"
            self.rebalance(now)
            return
        self.next_decision = now + self.every
        spec = self.spec
        if self.moves or (self.last_decision is not None and now - self.last_decision < s_to_ns(spec.setting("cooldown_s"))):
            return
        wait = s_to_ns(spec.setting("wait_s"))
        read_wait = any(g.queue and now - g.queue[0].arrived >= wait for g in self.reading)
        gap = exact(spec.setting("gap_ms")) * 1_000_000
        write_gap = any(to_ns(g.cost["iteration_ms"] + g.cost["per_reply_ms"] * (len(g.replies) + g.shipping)
                              + self.verified(g.cost, len(g.replies) + g.shipping)[0]  # (E15, E16 too, as model/roles.py)
                              + tiles(g.cost, (len(g.replies) + g.shipping) + self.verified(g.cost, len(g.replies) + g.shipping)[1])
                              + experts_touched(g.cost, (len(g.replies) + g.shipping)  # (E17 too)
                                                + self.verified(g.cost, len(g.replies) + g.shipping)[1]))
                        >= gap for g in self.writing)
        write_pressure = write_gap or bool(self.handoff)
        if read_wait and not write_pressure and len(self.writing) > 1:
            self.target, self.why = len(self.reading) + 1, "reading_wait"
        elif write_pressure and not read_wait and len(self.reading) > 1:
            self.target, self.why = len(self.reading) - 1, "writing_gap" if write_gap else "writing_memory"
        else:
            return
        self.last_decision = now
        self.rebalance(now)

    def rebalance(self, now):
        if self.moves:
            return
        n = self.target - len(self.reading)
        for _ in range(n):
            g = min(self.writing, key=lambda g: (g.n_replies(), g.number))
            self.start_move(g, "writing", now)
        for _ in range(-n):
            g = min(self.reading, key=lambda g: (g.work_queued(), g.number))
            self.start_move(g, "reading", now)

    def start_move(self, g, side, now):
        (self.reading if side == "reading" else self.writing).remove(g)
        move = {"gpu": g.number, "from_role": "reads" if side == "reading" else "writes",
                "to_role": "writes" if side == "reading" else "reads", "why": self.why, "requested_at_ns": now,
                "drained_at_ns": NONE, "serving_at_ns": NONE}
        self.moves[g.number] = move
        self.switches.append(move)
        self.try_drained(g, now)
        if move["drained_at_ns"] == now and self.switch == 0:
            pass  # served in this roles phase (warm-up ends at now)

    def serve(self, g, now):
        del self.warming[g.number]
        move = self.moves.pop(g.number)
        move["serving_at_ns"] = now
        side = "reading" if move["to_role"] == "reads" else "writing"
        g.side, g.cost = side, self.side_costs[side]
        self.last_assigned[side].pop(g.number, None)  # never assigned on its new side (D2)
        members = self.reading if side == "reading" else self.writing
        members.append(g)
        members.sort(key=lambda x: x.number)
        self.rebalance(now)

    def records(self):
        out = super().records()
        out["switches"] = {k: [m[k] for m in self.switches] for k in (
            "gpu", "from_role", "to_role", "why", "requested_at_ns", "drained_at_ns", "serving_at_ns")}
        return out

"""A run beyond its presets' fitted range, said out loud: per arrangement, over every seed, the
most prompt tokens one iteration read and replies it wrote on the GPUs a preset costs, and the
longest context a finished reply reached (prompt + words before its last), against the range the
preset was fitted on (`costs/presets.py`: `range`). One line per arrangement that leaves a range,
on stderr and in run.json (`preset_range_warnings`). The top of each range is checked (above it
nothing was measured); below it an iteration costs about its fixed part, which every fit holds
(the errors stated on its smallest rows say how well), a MoE preset's small writing batches
included (E17's `per_expert_ms` follows the experts they touch, fitted over every batch)."""

from __future__ import annotations

import numpy as np

from ..scenario import presets as scenario_presets

#: side -> (GPU roles that side's GPUs have, words for them)
_ROLES = {"cost": (("both", "reads", "writes"), "GPUs"), "reading_cost": (("reads",), "reading GPUs"),
          "writing_cost": (("writes",), "writing GPUs")}
#: what is checked: (range key, words, unit)
_CHECKS = (("prompt_tokens", "prompts", "tokens an iteration"), ("replies", "batches", "replies an iteration"),
           ("context_per_reply", "contexts", "tokens a reply"))


class RangeWatch:
    """A watcher of `run_seeds`: the largest of each checked quantity per (arrangement, side)."""

    def __init__(self, scenario):
        self.sides = {(a.name, side): (where, name) for _, a, side, where, name in scenario_presets.sides(scenario)}
        self.most: dict[tuple[str, str], dict[str, int]] = {}

    def add(self, result, seed: int | None = None) -> None:
        for arrangement, rec in result.records.items():
            for (name, side), _ in self.sides.items():
                if name == arrangement:
                    self._add(name, side, rec)

    def _add(self, name: str, side: str, rec) -> None:
        roles, _ = _ROLES[side]
        mine = np.flatnonzero(np.isin(np.asarray(rec.gpu_roles), roles))
        on = np.isin(rec.iterations["gpu"], mine)
        seen = {"prompt_tokens": _top(rec.iterations["n_prompt_tokens_read"][on]),
                "replies": _top(rec.iterations["n_replies_written"][on])}
        if side != "reading_cost":
            r = rec.requests
            done = (r["finished_at_ns"] >= 0) & (r["n_reply_words"] >= 2)
            seen["context_per_reply"] = _top(r["n_prompt_tokens"][done] + r["n_reply_words"][done] - 1)
        most = self.most.setdefault((name, side), {})
        for key, value in seen.items():
            most[key] = max(most.get(key, 0), value)

    def done(self, seed: int) -> None:
        """(A seed is over: nothing to do; maxima are kept as they come.)"""

    def info(self) -> dict:
        """For run.json: `preset_range_warnings` when some arrangement's costs come from a preset."""
        return {"preset_range_warnings": self.warnings()} if self.sides else {}

    def warnings(self) -> list[str]:
        """One line per arrangement whose GPUs went beyond a preset's fitted range, saying how far."""
        by_arrangement: dict[str, list[str]] = {}
        for (name, side), most in self.most.items():
            where, preset = self.sides[(name, side)]
            fitted = scenario_presets.fitted_range(preset)
            beyond = []
            for key, words, unit in _CHECKS:
                low, high = (fitted.get(key) or [0, 0])
                if key in most and most[key] > high:
                    beyond.append(f"{words} up to {most[key]:,} {unit}, where the preset covers {low:,.0f}-{high:,.0f}")
            if beyond:
                by_arrangement.setdefault(name, []).append(
                    f"its {_ROLES[side][1]} ({preset}, from {where}) ran {' and '.join(beyond)}")
        return [f"{name}: {'; '.join(parts)}; no measurement backs a preset's costs beyond its fitted range"
                for name, parts in by_arrangement.items()]


def _top(values: np.ndarray) -> int:
    return int(values.max()) if len(values) else 0

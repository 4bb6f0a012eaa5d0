"""The scenario as pydantic models: everything a scenario file may say, validated.

A scenario names the traffic (synthetic or a trace), the cost model (M1, M4), the on-time
limits (M7) and the arrangements of GPUs to compare. Everything a run depends on is here, so
`run.json` can record it whole.

Reading files and turning validation errors into one-line messages is `loading.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_serializer, model_validator

from . import presets
from .arrangements import Arrangement, Colocated, Cost, Disaggregated, SideCost
from .base import (
    _NAME,
    Count,
    Name,
    NonNegSeconds,
    Seconds,
    _as_tuple,
    _not_only_dots,
    _show,
    _Strict,
)
from .counts import counted_problem, counted_requests, counted_requests_set, pick_problem, warmup_problem
from .gpu_kinds import omit_prices, prices_problem, roles_kinds_problem
from .lengths import Length, PromptClass, length_bounds, mix_problem, ordered_length
from .limits import (
    MAX_ARRANGEMENTS,
    MAX_BATCH_ARRANGEMENTS,
    MAX_BURSTINESS,
    MAX_BURSTINESS_CV,
    MAX_REQUESTS,
    MAX_SEEDS,
    MIN_BURSTINESS,
    arrangements_limit,
    iterations_problem,
    requests_problem,
    ship_problem,
)
from .limits_slo import Reference, Slo
from .options import largest_draw, preset_tp_problem, sizes_text
from .prefixes import (
    DEFAULT_BLOCK_TOKENS,
    Prefixes,
    Sessions,
    omit_defaults,
    prefix_class_problem,
    prefix_problem,
    session_bounds,
)
from .schedule import (
    MAX_PERIODS,
    Period,
    RateCurve,
    expected_arrivals,
    length_variants,
    rate_key,
    rate_text,
    schedule_problem,
)
from .speculative import Speculative, SpeculativeKeys

__all__ = [  # the models, and what loading.py shows in messages
    "_NAME", "Arrangement", "Colocated", "Cost", "Disaggregated", "PromptClass", "Scenario", "SideCost", "Slo",
    "SyntheticWorkload", "TraceWorkload", "_show",
]

#: Default slack of the safety cap after the last measured arrival (D6).
DEFAULT_CAP_SLACK_S = 600.0

DROP = object()  # with_overrides: remove a key


def has_attention_term() -> bool:
    """Whether the model has the attention cost term (presets then give it)."""
    return "per_attention_pair_ms" in Cost.model_fields


class SyntheticWorkload(_Strict):
    """Arrivals at `rate_per_s` (Poisson, Gamma or evenly spaced), or at a rate that changes
    (`schedule`, `rate_curve`: `schedule.py`, E11); prompt class by share; lengths from each
    class's distribution (M6: uniform ranges). Measured: arrivals in [warmup_s, measure_s) with
    traffic going on after (D6), or exactly `n_requests` arrivals, all measured and nothing after
    (a benchmark client's `--num-prompts`), or `n_requests_per_gpu` x GPUs (scenario/counts.py)."""

    rate_per_s: Annotated[float, Field(gt=0)] | None = None
    warmup_s: NonNegSeconds = 0.0
    measure_s: Seconds | None = None
    n_requests: Annotated[int, Field(ge=1, le=MAX_REQUESTS)] | None = None
    n_requests_per_gpu: Annotated[int, Field(ge=1, le=MAX_REQUESTS)] | None = None
    arrivals: Literal["poisson", "gamma", "constant"] = "poisson"
    burstiness: Annotated[float, Field(ge=MIN_BURSTINESS, le=MAX_BURSTINESS)] | None = None
    prompt_mix: tuple[PromptClass, ...] = Field(min_length=1, max_length=1000)
    reply_words: Length
    schedule: tuple[Period, ...] | None = Field(default=None, min_length=1, max_length=MAX_PERIODS)
    rate_curve: RateCurve | None = None
    prefixes: Prefixes | None = None  # E13
    sessions: Sessions | None = None  # E13

    _dump = model_serializer(mode="wrap")(omit_defaults)  # E13's keys: out of files while unset

    _tuple = field_validator("reply_words", "prompt_mix", "schedule", mode="before")(_as_tuple)
    _range = field_validator("reply_words")(ordered_length)

    @model_validator(mode="after")
    def _check(self) -> SyntheticWorkload:
        problem = mix_problem(self.prompt_mix) or schedule_problem(self) or counted_problem(self, window=True)
        if problem:
            raise ValueError(problem if problem.startswith("@") else f"@prompt_mix: {problem}")
        if self.measure_s is not None and self.warmup_s >= self.measure_s:
            raise ValueError(warmup_problem(self.warmup_s, self.measure_s))
        if self.prefixes is not None and (problem := prefix_class_problem(self.prefixes, self._class_bounds())):
            raise ValueError(problem)
        if self.sessions is not None and self.varies:
            raise ValueError("@sessions: got sessions with a schedule or rate_curve, expected one of them (sessions "
                             "start at a constant rate_per_s)")
        if self.burstiness is not None and self.arrivals != "gamma":
            raise ValueError(f"@burstiness: got {self.burstiness:g} with arrivals {self.arrivals!r}, expected arrivals: gamma "
                             "(burstiness is the Gamma shape)")
        return self

    def _class_bounds(self) -> list[tuple[int, int]]:
        """Each class's (smallest, largest) new prompt, over every part of the traffic."""
        return [length_bounds(c.tokens) for mix, _ in length_variants(self) for c in mix]

    def length_bounds(self) -> list[tuple[list[tuple[int, int]], tuple[int, int]]]:
        """Per part of the traffic (each period of a schedule, or the whole), (each class's
        (smallest, largest) prompt, (smallest, largest) reply) it can draw (with sessions, a later
        turn's prompt holds the earlier turns: E13)."""
        out = []
        for mix, reply in length_variants(self):
            r = length_bounds(reply)
            out.append(([session_bounds(self.sessions, length_bounds(c.tokens), r) for c in mix], r))
        return out

    @property
    def varies(self) -> bool:
        """Whether the rate or the mix changes over time (a schedule or a rate curve)."""
        return self.schedule is not None or self.rate_curve is not None


class TraceWorkload(_Strict):
    """A recorded request stream; `trace` is read relative to the scenario file's folder.

    Formats with arrival times (csv, azure, mooncake) are cut to a window, ties spread and times
    scaled, in that order. A `lengths` file has no times: requests draw a row uniformly (with
    replacement) and arrive by a Poisson process at `rate_per_s`, or a Gamma process with
    `burstiness_cv`.
    """

    trace: str = Field(min_length=1, max_length=4096)
    format: Literal["csv", "azure", "mooncake", "lengths"] = "csv"
    warmup_s: NonNegSeconds = 0.0
    measure_s: Seconds | None = None
    n_requests: Annotated[int, Field(ge=1, le=MAX_REQUESTS)] | None = None
    n_requests_per_gpu: Annotated[int, Field(ge=1, le=MAX_REQUESTS)] | None = None
    pick: Literal["first", "sampled"] = "first"
    start_s: NonNegSeconds | None = None
    duration_s: Seconds | None = None
    spread_ties: bool = False
    time_scale: Annotated[float, Field(gt=0)] | None = None
    rate_per_s: Annotated[float, Field(gt=0)] | None = None
    burstiness_cv: Annotated[float, Field(gt=0, le=MAX_BURSTINESS_CV)] | None = None
    reply_words_max: Count | None = None
    prompt_tokens_max: Count | None = None

    @field_validator("trace")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        if "\0" in value:
            raise ValueError(f"got {_show(value)}, expected a file path (no NUL character)")
        return value

    @model_validator(mode="after")
    def _check(self) -> TraceWorkload:
        if (problem := counted_problem(self) or pick_problem(self)) is not None:
            raise ValueError(problem)
        if self.measure_s is not None and self.warmup_s >= self.measure_s:
            raise ValueError(warmup_problem(self.warmup_s, self.measure_s))
        if self.time_scale is not None and self.rate_per_s is not None:
            raise ValueError(
                f"@rate_per_s: got {self.rate_per_s:g} together with time_scale {self.time_scale:g}, "
                "expected at most one of them"
            )
        if self.format == "lengths":
            for key in ("start_s", "duration_s", "time_scale"):
                if getattr(self, key) is not None:
                    raise ValueError(f"@{key}: got {getattr(self, key):g}, expected no {key}: a 'lengths' trace has no arrival times")
            if self.spread_ties:
                raise ValueError("@spread_ties: got true, expected false: a 'lengths' trace has no arrival times")
            for key in ("rate_per_s",) if counted_requests_set(self) else ("rate_per_s", "measure_s"):
                if getattr(self, key) is None:
                    raise ValueError(f"@{key}: missing, expected a number > 0: a 'lengths' trace has no arrival times")
        elif self.burstiness_cv is not None:
            raise ValueError(
                f"@burstiness_cv: got {self.burstiness_cv:g}, expected none: it applies to 'lengths' traces "
                f"only (a {self.format} trace keeps its own arrivals)"
            )
        return self


def _workload_tag(value: Any) -> str:
    if isinstance(value, TraceWorkload) or (isinstance(value, dict) and "trace" in value):
        return "<trace>"
    return "<synthetic>"


Workload = Annotated[
    Annotated[SyntheticWorkload, Tag("<synthetic>")] | Annotated[TraceWorkload, Tag("<trace>")],
    Discriminator(_workload_tag),
]


class Scenario(SpeculativeKeys):
    """A validated scenario. `source` is the file it came from (for messages and trace paths)."""

    name: Name
    seed: Annotated[int, Field(ge=0, lt=2**63)] = 1
    seeds: Annotated[int, Field(ge=1, le=MAX_SEEDS)] = 1  # the CLI runs seeds seed..seed+seeds-1
    workload: Workload
    max_sim_s: Seconds | None = None
    cost: Cost = Cost()
    slo: Slo = Slo()
    arrangements: tuple[Arrangement, ...] = Field(min_length=1, max_length=MAX_BATCH_ARRANGEMENTS)  # (see _check)
    reference: Reference | None = None
    # E13 (prefix caching) and routers: scenario-wide, for every arrangement
    router: Literal["least_loaded", "round_robin", "power_of_two", "prefix_aware"] = "least_loaded"
    router_load_cap_tokens: Count | None = None  # prefix_aware: default PREFIX_LOAD_CAP_TOKENS
    prefix_cache_tokens: Count | None = None  # per reading (or colocated) instance; None: no cache
    prefix_block_tokens: Count = DEFAULT_BLOCK_TOKENS
    prices: dict[str, float] | None = None  # USD per GPU-hour by GPU kind, over the table's (gpu_kinds.py)
    speculative: Speculative | None = None  # E16; None: off (its checks: scenario/speculative.py)
    source: str = Field(default="<scenario>", exclude=True)

    _dump = model_serializer(mode="wrap")(lambda self, handler, info: omit_prices(omit_defaults(self, handler, info), info))

    _tuple = field_validator("arrangements", mode="before")(_as_tuple)
    _name = field_validator("name")(_not_only_dots)

    @model_validator(mode="before")
    @classmethod
    def _presets(cls, raw: Any) -> Any:
        """`preset: NAME` in cost blocks: its fields where the block writes none (presets.py); `prices:` first."""
        if isinstance(raw, dict) and raw.get("prices") is not None and (problem := prices_problem(raw["prices"])):
            raise ValueError(problem)
        return presets.fill(raw, attention=has_attention_term())

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        if len(self.arrangements) > arrangements_limit():
            raise ValueError(f"@arrangements: got {len(self.arrangements)} arrangements, expected 1 to {MAX_ARRANGEMENTS} "
                             f"(a batch command, which keeps one arrangement's rows at a time, takes up to "
                             f"{MAX_BATCH_ARRANGEMENTS:,})")
        first: dict[str, int] = {}
        for i, a in enumerate(self.arrangements):
            if a.name in first:
                raise ValueError(
                    f"@arrangements[{i}].name: got {a.name!r} again (also arrangements[{first[a.name]}]), "
                    "expected unique names"
                )
            first[a.name] = i
        if self.seed + self.seeds > 2**63:
            raise ValueError(f"@seeds: got {self.seeds} from seed {self.seed}, expected seeds below 2**63")
        for name, pct in (self.reference.on_time_pct if self.reference else {}).items():
            if not 0 <= pct <= 100:
                raise ValueError(f"@reference.on_time_pct.{name}: got {_show(pct)}, expected a share from 0 to 100 (%)")
        w = self.workload
        if self.max_sim_s is not None and w.measure_s is not None and self.max_sim_s < w.measure_s:
            raise ValueError(
                f"@max_sim_s: got {self.max_sim_s:g}, expected at least workload.measure_s ({w.measure_s:g})"
            )
        cap = self.cap_s(None)
        expected = self.expected_requests()
        if expected is not None and w.n_requests is None and w.n_requests_per_gpu is None:
            problem = requests_problem(expected, len(self.arrangements))
            if problem:
                turns = " (every turn of each session counted)" if getattr(w, "sessions", None) is not None else ""
                raise ValueError(
                    f"@workload.{rate_key(w)}: got {rate_text(w)}, which expects, up to the cap at {cap:g} s, "
                    f"{problem}{turns}; expected a lower {'rate_per_s' if rate_key(w) == 'rate_per_s' else 'rate'} or max_sim_s"
                )
        elif expected is not None:
            problem = requests_problem(expected, len(self.arrangements))
            if problem:
                raise ValueError(f"@workload.{'n_requests' if w.n_requests is not None else 'n_requests_per_gpu'}: "
                                 f"got {problem}; expected fewer requests or arrangements")
        if isinstance(w, SyntheticWorkload):
            for key, ms in self.ship_costs():
                problem = ship_problem(ms, max(hi for classes, _ in w.length_bounds() for _, hi in classes))
                if problem:
                    raise ValueError(f"@{key}: {problem}")
        self._check_options()
        if (problem := prefix_problem(self) or self.speculative_problem()) is not None:  # E13, E16
            raise ValueError(problem)
        if self.cap_known:
            problem = iterations_problem(self.arrangements, cap, self.cost)
            if problem:
                raise ValueError(f"@cost.iteration_ms: {problem}")
        return self

    def ship_costs(self) -> list[tuple[str, float]]:
        """(key, ms per token) of each split's KV ship cost, by the key that sets it (E1)."""
        out = []
        for i, a in enumerate(self.arrangements):
            if a.is_split:
                out.append((f"arrangements[{i}].kv_ship_ms_per_token" if a.own_ship_cost else "cost.kv_ship_ms_per_token",
                            a.kv_ship_ms(self.cost)))
        return out

    def _check_options(self) -> None:
        """E5 (reading R13): free shipping only with independent ships; E4f on synthetic traffic."""
        w = self.workload
        for i, a in enumerate(self.arrangements):
            if getattr(a, "kv_policy", None) == "paged" and self.prefix_cache_tokens is not None:  # E9 with E13
                raise ValueError(f"@arrangements[{i}].kv_policy: got 'paged' with prefix_cache_tokens (E13), expected "
                                 "one or the other: no rule fixes what a recompute's re-read finds in a prefix cache "
                                 "(docs/rules.md#e9i)")
            if a.kv_link_mode != "independent" and a.kv_ship_ms(self.cost) == 0:
                raise ValueError(
                    f"@arrangements[{i}].kv_link: got {a.kv_link_mode!r} with a KV ship cost of 0 ms per token, "
                    "expected 'independent' (free ships never wait for a link) or a ship cost above 0"
                )
            for side_problem in (preset_tp_problem(a, self.cost), roles_kinds_problem(self, a)):  # (F33: kinds)
                if side_problem is not None:
                    raise ValueError(f"@arrangements[{i}].{side_problem[0]}: {side_problem[1]}")
            if a.kv_limited and isinstance(w, SyntheticWorkload):
                problem = max((p for b in w.length_bounds() if (p := largest_draw(a, *b, self.draft_tokens))),
                              default=None, key=lambda p: p[4])  # (E16's draft tokens held too with E9: R106)
                if problem is not None:
                    key, cap, prompt, reply, need = problem
                    raise ValueError(
                        f"@arrangements[{i}].{key}: got {cap:,}, but the workload can draw a request reserving "
                        f"{sizes_text(prompt, reply, need, self.draft_tokens)} on one {a.unit} (its largest prompt and reply); "
                        f"expected at least {need:,}"
                    )

    def preset_info(self) -> dict:
        """For run.json: the presets used, the fields written beside them, warnings; {} if none."""
        return presets.info(self, attention=has_attention_term())

    @property
    def draws_requests(self) -> bool:
        """Whether the seed draws the requests themselves (synthetic, `lengths`, `pick: sampled`)."""
        w = self.workload
        return isinstance(w, SyntheticWorkload) or w.format == "lengths" or (w.pick == "sampled" and counted_requests_set(w))

    @property
    def cap_known(self) -> bool:
        """Whether the cap is known without drawing or reading the requests."""
        return self.max_sim_s is not None or self.workload.measure_s is not None

    def expected_requests(self) -> float | None:
        """Requests a run expects before drawing them (`n_requests`, or rate x the cap), None for
        a trace with its own arrivals (its rows tell)."""
        w = self.workload
        turns = (sum(w.sessions.turns) / 2 if isinstance(w, SyntheticWorkload) and w.sessions is not None
                 else 1.0)  # (E13: an arrival starts a session; every turn is drawn, then those past the cap dropped)
        if (counted := counted_requests(self)) is not None:
            return counted * turns
        if isinstance(w, SyntheticWorkload):
            return expected_arrivals(w, self.cap_s(None)) * turns
        if w.rate_per_s is not None and self.draws_requests:
            return w.rate_per_s * self.cap_s(None)
        return None

    def cap_s(self, last_arrival_s: float | None) -> float:
        """The safety cap on simulated time (D6): max_sim_s, or the window's end + 600 s."""
        if self.max_sim_s is not None:
            return self.max_sim_s
        end = self.workload.measure_s
        if end is None:
            end = last_arrival_s or 0.0
        return end + DEFAULT_CAP_SLACK_S

    @property
    def folder(self) -> Path:
        return Path(self.source).parent

    def with_overrides(self, *, flags: dict[str, str] | None = None, **changes: Any) -> Scenario:
        """A re-validated copy with values replaced, by dotted key: `seed`, `workload.rate_per_s`,
        `cost.iteration_ms`, `slo.freeze_ms`, ... (any key of the file).

        A value of None leaves the key as it is; `DROP` removes it (back to its default).
        `flags` names the command-line flag behind each key (`{"workload.rate_per_s": "--rate"}`),
        so an error blames the flag rather than the file.
        """
        raw = presets.unfill(self.model_dump(mode="python", exclude_none=True), has_attention_term())
        raw["slo"] = self.slo.model_dump(mode="python")  # a null limit is off, not the default
        for key, value in changes.items():
            if value is None:
                continue
            where = raw
            *parents, leaf = key.split(".")
            for p in parents:
                where = where.setdefault(p, {})  # (a block the file leaves out, such as reference:)
            if value is DROP:
                where.pop(leaf, None)
            else:
                where[leaf] = value
        used = {k: f for k, f in (flags or {}).items() if changes.get(k) is not None}
        if _validate is None:  # (only if the package's __init__ was bypassed)
            raise RuntimeError("import disagg_simpy.scenario before calling with_overrides")
        return _validate(raw, self.source, flags=used)


#: Validates a raw mapping into a Scenario with one-line errors: `loading.validate`, handed in by
#: the package's `__init__` (loading imports this module, so this module cannot import it).
_validate: Callable[..., Scenario] | None = None


def set_validator(validate: Callable[..., Scenario]) -> None:
    global _validate
    _validate = validate

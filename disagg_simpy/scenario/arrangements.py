"""The arrangements of GPUs a scenario compares (with the options E1, E4-E6, E8); their cost
figures (M1, M4; E1-E3, E7, E13, E14) are in cost_fields.py.

Every stage asks an arrangement the same few questions, answered here and nowhere else:
`roles` (what each GPU does, reading GPUs first), `n_gpus`, `n_instances`, `is_split`, `label`
(a short family name for legends) and `description` (one line for titles and the page). A new
kind is one class below, added to `KINDS`; loading errors, the engine, the plots, the page and
the planner follow from these answers (docs/architecture.md says which files a kind touches); TP instances: docs/tp.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, ClassVar, Literal, Union

from pydantic import Field, field_validator, model_serializer, model_validator

from ..costs import gpus
from .base import CostMs, Count, Gpus, Name, _not_only_dots, _Strict
from .batch_limits import SIDE_LIMIT_KEYS, check_budget, check_side_limits, side_batch_limits
from .cost_fields import Cost, SideCost
from .limits import MAX_GPUS
from .paging import E9_KEYS, PagedKeys, check_paged
from .roles import Roles, check_roles, colocated_roles, static_roles


def _gpu_kind(value):
    """A GPU kind key (`gpu`, `reading_gpu`, `writing_gpu`): one of the table's (costs/gpus.py)."""
    bad = gpus.problem(value) if value is not None else None
    if bad:
        raise ValueError(bad)
    return value


def gpu_count(n: int) -> str:
    """'1 GPU', '4 GPUs'."""
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def gpus_do(n: int, verb: str) -> str:
    """'1 GPU reads', '2 GPUs read'."""
    return f"1 GPU {verb}s" if n == 1 else f"{n} GPUs {verb}"


def _instances(n_gpus: int, tp: int | None) -> str:
    """'2 TP2 instances', '1 TP1 instance'."""
    k = n_gpus // (tp or 1)
    return f"{k} TP{tp or 1} instance{'s' * (k != 1)}"


def _check_tp(tp: int | None, gpus: int, key: str, gpus_key: str) -> None:
    """TP: GPUs stay GPUs; a TP degree must divide them into whole instances."""
    if tp is not None and gpus % tp:
        raise ValueError(f"@{key}: got {tp} with {gpus_key} {gpus}, expected a TP degree that divides the GPUs "
                         f"into whole instances (instances = GPUs / TP)")


class _Arrangement(_Strict):
    """What every kind of arrangement answers (see the module docstring)."""

    #: Whether prompts are read on other GPUs than their replies are written on.
    is_split: ClassVar[bool] = False

    if TYPE_CHECKING:  # every kind declares these itself, in its own order (run.json keeps it)
        name: str
        kind: str
        chunk_tokens: int | None
        kv_capacity_tokens: int | None
        max_batch_replies: int | None  # E8
        max_batch_tokens: int | None  # E8

    def batch_limits(self, role: str) -> tuple[int | None, int | None, int | None]:
        """E8 for an instance of `role` ('reads', 'writes', 'both'): at most (replies written, replies
        + prompt tokens read, prompts read) per iteration; None: no limit. The general keys here; a
        split's sides may override them (R89)."""
        return self.max_batch_replies, self.max_batch_tokens, None

    #: Keys left out of a dump while unset, so a scenario without them is dumped (run.json, the
    #: store's keys) exactly as before they existed.
    _OMIT_UNSET: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler):
        out = handler(self)
        for key in self._OMIT_UNSET:
            if isinstance(out, dict) and out.get(key) is None:
                out.pop(key, None)
        if isinstance(out, dict) and "role_changes" in out:  # E12: dumped under its key, `roles`
            out["roles"] = out.pop("role_changes")
        return out

    @property
    def roles(self) -> tuple[str, ...]:
        """'reads', 'writes' or 'both' by instance number (a split numbers its reading
        instances first). An instance is one GPU, or `tp` GPUs serving as one (TP)."""
        raise NotImplementedError

    @property
    def instance_gpus(self) -> tuple[int, ...]:
        """GPUs of each instance (its TP degree), by instance number."""
        raise NotImplementedError

    @property
    def n_gpus(self) -> int:
        """GPUs in all (what a per-GPU figure divides by)."""
        return sum(self.instance_gpus)

    @property
    def n_instances(self) -> int:
        return len(self.roles)

    @property
    def n_reading(self) -> int:
        """Instances that read prompts (every one when not split); a split numbers them first."""
        return sum(r != "writes" for r in self.roles)

    @property
    def n_reading_gpus(self) -> int:
        """GPUs that read prompts (every GPU when not split)."""
        return sum(g for r, g in zip(self.roles, self.instance_gpus) if r != "writes")

    @property
    def n_writing_gpus(self) -> int:
        """GPUs that write replies (every GPU when not split)."""
        return sum(g for r, g in zip(self.roles, self.instance_gpus) if r != "reads")

    @property
    def has_tp(self) -> bool:
        """Whether some instance spans several GPUs (without, an instance is a GPU)."""
        return any(g > 1 for g in self.instance_gpus)

    @property
    def side_tps(self) -> dict[str, tuple[str, int]]:
        """TP degree of each side, by the key of its cost block: {cost key: (TP key, degree)}."""
        raise NotImplementedError

    def instance_name(self, i: int) -> str:
        """'GPU 3' (every instance one GPU), else 'instance 0 (GPUs 0-1)' or 'instance 2 (GPU 4)'."""
        if not self.has_tp:
            return f"GPU {i}"
        first, n = sum(self.instance_gpus[:i]), self.instance_gpus[i]
        return f"instance {i} (GPU {first})" if n == 1 else f"instance {i} (GPUs {first}-{first + n - 1})"

    @property
    def kv_capacities(self) -> tuple[int | None, int | None]:
        """E4: KV cache tokens an instance holds, (reading side, writing side); None: no limit."""
        return self.kv_capacity_tokens, self.kv_capacity_tokens

    def kv_capacity_key(self, role: str) -> str:
        """The key that sets the KV capacity of the instances of `role` (E4)."""
        return "kv_capacity_tokens"

    @property
    def unit(self) -> str:
        """What one model instance is called in messages: 'GPU', or 'instance' with TP."""
        return "instance" if self.has_tp else "GPU"

    @property
    def kv_limited(self) -> bool:
        """Whether E4 is on (some instance's KV cache is limited)."""
        return any(c is not None for c in self.kv_capacities)

    @property
    def label(self) -> str:
        """A short family name for legends: 'same GPU', 'chunks' or 'split'."""
        raise NotImplementedError

    @property
    def description(self) -> str:
        """One line saying what the GPUs do."""
        raise NotImplementedError

    @property
    def kv_link_mode(self) -> str:
        """E5's link between reading and writing GPUs ('independent': ships never wait)."""
        return "independent"

    @property
    def local_prompt_limit(self) -> int | None:
        """E6: prompts up to this many tokens are read on their writing GPU (None: none are)."""
        return None

    def side_costs(self, base: Cost) -> tuple[Cost, Cost]:
        """(reading, writing) GPUs' cost figures (E1)."""
        raise NotImplementedError

    def kv_ship_ms(self, base: Cost) -> float:
        """The KV ship cost per token (E1: the arrangement's own, else the scenario's)."""
        return base.kv_ship_ms_per_token

    @property
    def own_ship_cost(self) -> bool:
        """Whether the arrangement sets its own `kv_ship_ms_per_token` (E1)."""
        return False

    def shortest_iteration_ms(self, base: Cost) -> float:
        return min(c.iteration_ms for c in self.side_costs(base))


class Colocated(_Arrangement, PagedKeys):
    """Every GPU reads prompts and writes replies; replies stay where their prompt was read."""

    _OMIT_UNSET: ClassVar[tuple[str, ...]] = ("tp", "max_batch_replies", "max_batch_tokens", "role_changes", "mixed_iterations",
                                              "gpu", *E9_KEYS)

    name: Name
    kind: Literal["colocated"]
    gpus: Gpus
    chunk_tokens: Count | None = None
    cost: SideCost | None = None  # E1
    kv_capacity_tokens: Count | None = None  # E4, per instance
    tp: Gpus | None = None  # TP: GPUs per instance (tensor parallelism); None: 1
    max_batch_replies: Count | None = None  # E8
    max_batch_tokens: Count | None = None  # E8
    role_changes: None = Field(None, alias="roles")  # E12: `roles: static` only (every GPU reads and writes)
    mixed_iterations: bool | None = None  # E10: false = an iteration reads prompts or writes words; unset = true
    gpu: str | None = None  # the GPU kind (costs/gpus.py): prices the GPUs, picks the preset on that kind

    _name = field_validator("name")(_not_only_dots)
    _gpu = field_validator("gpu")(_gpu_kind)
    _roles = field_validator("role_changes", mode="before")(colocated_roles)

    @model_validator(mode="after")
    def _check(self) -> Colocated:
        _check_tp(self.tp, self.gpus, "tp", "gpus")
        return check_paged(check_budget(self))

    @property
    def instance_gpus(self) -> tuple[int, ...]:
        tp = self.tp or 1
        return (tp,) * (self.gpus // tp)

    @property
    def roles(self) -> tuple[str, ...]:
        return ("both",) * len(self.instance_gpus)

    @property
    def side_tps(self) -> dict[str, tuple[str, int]]:
        return {"cost": ("tp", self.tp or 1)}

    @property
    def label(self) -> str:
        return "chunks" if self.chunk_tokens else "same GPU"

    @property
    def description(self) -> str:
        text = f"{gpu_count(self.gpus)}, each reads prompts and writes replies"
        if self.has_tp:
            text = f"{gpu_count(self.gpus)} as {_instances(self.gpus, self.tp)}, each reads prompts and writes replies"
        if self.chunk_tokens:
            text += f"; an iteration reads at most {self.chunk_tokens} prompt tokens"
        if self.mixed_iterations is False:
            text += "; an iteration reads prompts (first) or writes words, never both"
        return text

    def side_costs(self, base: Cost) -> tuple[Cost, Cost]:
        """(reading, writing) GPUs' cost figures (E1): one GPU does both here."""
        c = self.cost.over(base) if self.cost else base
        return c, c


class Disaggregated(_Arrangement, PagedKeys):
    """Reading GPUs only read prompts, writing GPUs only write replies; KV caches ship between."""

    is_split: ClassVar[bool] = True

    name: Name
    kind: Literal["disaggregated"]
    reading_gpus: Gpus
    writing_gpus: Gpus
    chunk_tokens: Count | None = None
    reading_cost: SideCost | None = None  # E1
    writing_cost: SideCost | None = None  # E1
    kv_ship_ms_per_token: CostMs | None = None  # E1
    kv_capacity_tokens: Count | None = None  # E4, per instance
    kv_link: Literal["independent", "per_reading_gpu", "per_writing_gpu", "shared"] = "independent"  # E5
    local_prompt_max_tokens: Count | None = None  # E6
    max_batch_replies: Count | None = None  # E8
    max_batch_tokens: Count | None = None  # E8
    reading_max_batch_tokens: Count | None = None  # E8 per side (R89): else max_batch_tokens
    reading_max_batch_requests: Count | None = None  # E8 per side: prompts read per reading iteration
    writing_max_batch_replies: Count | None = None  # E8 per side: else max_batch_replies
    writing_max_batch_tokens: Count | None = None  # E8 per side: else max_batch_tokens
    reading_tp: Gpus | None = None  # TP: GPUs per reading instance; None: 1
    writing_tp: Gpus | None = None  # TP: GPUs per writing instance; None: 1
    reading_kv_capacity_tokens: Count | None = None  # E4 per side (TP): else kv_capacity_tokens
    writing_kv_capacity_tokens: Count | None = None
    kv_path: Literal["intra_node", "inter_node"] | None = None  # which of a preset's KV ship costs
    role_changes: Roles = Field(None, alias="roles")  # E12 `roles:`: None (static), a schedule or a policy
    reading_gpu: str | None = None  # each side's GPU kind (costs/gpus.py): a mixed pool
    writing_gpu: str | None = None

    _OMIT_UNSET: ClassVar[tuple[str, ...]] = ("reading_tp", "writing_tp", "reading_kv_capacity_tokens",
                                              "writing_kv_capacity_tokens", "max_batch_replies", "max_batch_tokens",
                                              "kv_path", "role_changes", "reading_gpu", "writing_gpu", *E9_KEYS,
                                              *SIDE_LIMIT_KEYS)
    _name = field_validator("name")(_not_only_dots)
    _gpu = field_validator("reading_gpu", "writing_gpu")(_gpu_kind)
    _roles = field_validator("role_changes", mode="before")(static_roles)

    @model_validator(mode="after")
    def _check(self) -> Disaggregated:
        check_paged(check_budget(self))
        if self.reading_gpus + self.writing_gpus > MAX_GPUS:
            raise ValueError(
                f"@writing_gpus: got {self.writing_gpus} with {self.reading_gpus} reading GPUs, "
                f"expected at most {MAX_GPUS} GPUs in all"
            )
        _check_tp(self.reading_tp, self.reading_gpus, "reading_tp", "reading_gpus")
        _check_tp(self.writing_tp, self.writing_gpus, "writing_tp", "writing_gpus")
        reading, writing = self.reading_kv_capacity_tokens, self.writing_kv_capacity_tokens
        if self.kv_capacity_tokens is None and (reading is None) != (writing is None):
            missing, given = ("writing", "reading") if writing is None else ("reading", "writing")
            raise ValueError(
                f"@{missing}_kv_capacity_tokens: missing with {given}_kv_capacity_tokens, expected both sides' "
                "capacities (or kv_capacity_tokens for the side not given): KV memory (E4) limits both sides or neither"
            )
        check_roles(self)
        check_side_limits(self)
        return self

    def batch_limits(self, role: str) -> tuple[int | None, int | None, int | None]:
        return side_batch_limits(self, role)

    @property
    def instance_gpus(self) -> tuple[int, ...]:
        rtp, wtp = self.reading_tp or 1, self.writing_tp or 1
        return (rtp,) * (self.reading_gpus // rtp) + (wtp,) * (self.writing_gpus // wtp)

    @property
    def roles(self) -> tuple[str, ...]:
        return ("reads",) * (self.reading_gpus // (self.reading_tp or 1)) + (
            "writes",) * (self.writing_gpus // (self.writing_tp or 1))

    def kv_capacity_key(self, role: str) -> str:
        side = "reading" if role == "reads" else "writing"
        own = self.reading_kv_capacity_tokens if role == "reads" else self.writing_kv_capacity_tokens
        return f"{side}_kv_capacity_tokens" if own is not None else "kv_capacity_tokens"

    @property
    def side_tps(self) -> dict[str, tuple[str, int]]:
        return {"reading_cost": ("reading_tp", self.reading_tp or 1), "writing_cost": ("writing_tp", self.writing_tp or 1)}

    @property
    def kv_capacities(self) -> tuple[int | None, int | None]:
        own = self.reading_kv_capacity_tokens, self.writing_kv_capacity_tokens
        return tuple(self.kv_capacity_tokens if c is None else c for c in own)  # type: ignore[return-value]

    @property
    def label(self) -> str:
        return "split"

    @property
    def description(self) -> str:
        reading, writing = gpus_do(self.reading_gpus, "read"), gpus_do(self.writing_gpus, "write")
        if self.has_tp:
            reading += f" prompts ({_instances(self.reading_gpus, self.reading_tp)})"
            writing += f" replies ({_instances(self.writing_gpus, self.writing_tp)})"
            return f"{reading}, {writing}; KV caches ship between them{self._moves_text}"
        return f"{reading} prompts, {writing} replies; KV caches ship between them{self._moves_text}"

    @property
    def _moves_text(self) -> str:
        """E12: how the roles change ('' when static)."""
        r = self.role_changes
        if r is None:
            return ""
        how = "by a schedule" if r.policy is None else f"by the policy {r.policy}"
        return f" (at the start; GPUs change role {how}, switch_s {r.switch_s:g})"

    @property
    def kv_link_mode(self) -> str:
        return self.kv_link

    @property
    def local_prompt_limit(self) -> int | None:
        return self.local_prompt_max_tokens

    @property
    def own_ship_cost(self) -> bool:
        return self.kv_ship_ms_per_token is not None

    def side_costs(self, base: Cost) -> tuple[Cost, Cost]:
        """(reading, writing) GPUs' cost figures (E1)."""
        return (self.reading_cost.over(base) if self.reading_cost else base,
                self.writing_cost.over(base) if self.writing_cost else base)

    def kv_ship_ms(self, base: Cost) -> float:
        """The KV ship cost per token (E1: the arrangement's own, else the scenario's)."""
        return base.kv_ship_ms_per_token if self.kv_ship_ms_per_token is None else self.kv_ship_ms_per_token


#: Every kind of arrangement, by the `kind:` a scenario writes. A new kind is a class above and
#: a line here.
KINDS: dict[str, type[_Arrangement]] = {"colocated": Colocated, "disaggregated": Disaggregated}

if TYPE_CHECKING:  # every stage asks the interface, whatever the kind
    Arrangement = _Arrangement
else:
    Arrangement = Annotated[Union[tuple(KINDS.values())], Field(discriminator="kind")]  # noqa: UP007


def side_cost_keys(kind: type[_Arrangement]) -> tuple[str, ...]:
    """The keys of a kind that hold cost mappings (E1)."""
    return tuple(k for k, f in kind.model_fields.items() if f.annotation == (SideCost | None))

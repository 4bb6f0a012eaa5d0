"""Scenario files: read YAML safely, validate with pydantic, report one-line errors.

A scenario names the traffic (synthetic or a trace), the cost model (M1, M4), the on-time
limits (M7) and the arrangements of GPUs to compare. Everything a run depends on is here, so
`run.json` can record it whole.
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from .errors import InputError

#: Refuse scenarios that would generate more requests than this (memory stays bounded).
MAX_REQUESTS = 10_000_000
#: Default slack of the safety cap after the last measured arrival (D6).
DEFAULT_CAP_SLACK_S = 600.0

NonNegFloat = Annotated[float, Field(ge=0)]
DROP = object()  # with_overrides: remove a key


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _ordered_range(value: tuple[int, int]) -> tuple[int, int]:
    if value[0] > value[1]:
        raise ValueError(f"a range [low, high] needs low <= high, got {list(value)}")
    return value


class PromptClass(_Strict):
    """One class of prompts: drawn with probability `share`, tokens uniform in `tokens` (inclusive)."""

    share: Annotated[float, Field(gt=0, le=1)]
    tokens: tuple[PositiveInt, PositiveInt]

    _tuple = field_validator("tokens", mode="before")(_as_tuple)
    _range = field_validator("tokens")(_ordered_range)


class SyntheticWorkload(_Strict):
    """Poisson arrivals at `rate_per_s`; prompt class by share; lengths uniform (M6)."""

    rate_per_s: PositiveFloat
    warmup_s: NonNegFloat = 0.0
    measure_s: PositiveFloat
    prompt_mix: tuple[PromptClass, ...] = Field(min_length=1)
    reply_words: tuple[PositiveInt, PositiveInt]

    _tuple = field_validator("reply_words", "prompt_mix", mode="before")(_as_tuple)
    _range = field_validator("reply_words")(_ordered_range)

    @model_validator(mode="after")
    def _check(self) -> "SyntheticWorkload":
        total = sum(c.share for c in self.prompt_mix)
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            raise ValueError(f"prompt_mix shares must sum to 1, got {total:g}")
        if self.warmup_s >= self.measure_s:
            raise ValueError(
                f"warmup_s ({self.warmup_s:g}) must be below measure_s ({self.measure_s:g})"
            )
        return self


class TraceWorkload(_Strict):
    """A recorded request stream; `trace` is read relative to the scenario file's folder.

    Formats with arrival times (csv, azure, mooncake) are cut to a window, ties spread and times
    scaled, in that order. A `lengths` file has no times: requests draw a row uniformly (with
    replacement) and arrive by a Poisson process at `rate_per_s`, or a Gamma process with
    `burstiness_cv`.
    """

    trace: str = Field(min_length=1)
    format: Literal["csv", "azure", "mooncake", "lengths"] = "csv"
    warmup_s: NonNegFloat = 0.0
    measure_s: PositiveFloat | None = None
    start_s: NonNegFloat | None = None
    duration_s: PositiveFloat | None = None
    spread_ties: bool = False
    time_scale: PositiveFloat | None = None
    rate_per_s: PositiveFloat | None = None
    burstiness_cv: PositiveFloat | None = None
    reply_words_max: PositiveInt | None = None
    prompt_tokens_max: PositiveInt | None = None

    @model_validator(mode="after")
    def _check(self) -> "TraceWorkload":
        if self.measure_s is not None and self.warmup_s >= self.measure_s:
            raise ValueError(
                f"warmup_s ({self.warmup_s:g}) must be below measure_s ({self.measure_s:g})"
            )
        if self.time_scale is not None and self.rate_per_s is not None:
            raise ValueError("time_scale and rate_per_s are both set, expected at most one")
        if self.format == "lengths":
            for key in ("start_s", "duration_s", "time_scale"):
                if getattr(self, key) is not None:
                    raise ValueError(f"{key} needs arrival times, which a 'lengths' trace lacks")
            if self.spread_ties:
                raise ValueError("spread_ties needs arrival times, which a 'lengths' trace lacks")
            if self.rate_per_s is None or self.measure_s is None:
                raise ValueError("a 'lengths' trace needs rate_per_s and measure_s (it has no arrival times)")
        elif self.burstiness_cv is not None:
            raise ValueError("burstiness_cv applies to 'lengths' traces only (others keep their own arrivals)")
        return self


class Cost(_Strict):
    """Iteration cost (M1) and KV ship time (M4), in milliseconds."""

    iteration_ms: PositiveFloat = 12.0
    per_reply_ms: NonNegFloat = 0.4
    per_prompt_token_ms: NonNegFloat = 0.05
    kv_ship_ms_per_token: NonNegFloat = 0.01


class Slo(_Strict):
    """On-time limits (M7)."""

    first_word_s: PositiveFloat = 2.0
    mean_gap_ms: PositiveFloat = 50.0
    freeze_ms: PositiveFloat = 250.0


class Colocated(_Strict):
    """Every GPU reads prompts and writes replies; replies stay where their prompt was read."""

    name: str = Field(min_length=1)
    kind: Literal["colocated"]
    gpus: PositiveInt
    chunk_tokens: PositiveInt | None = None

    @property
    def n_reading(self) -> int:
        return self.gpus

    @property
    def n_gpus(self) -> int:
        return self.gpus


class Disaggregated(_Strict):
    """Reading GPUs only read prompts, writing GPUs only write replies; KV caches ship between."""

    name: str = Field(min_length=1)
    kind: Literal["disaggregated"]
    reading_gpus: PositiveInt
    writing_gpus: PositiveInt
    chunk_tokens: PositiveInt | None = None

    @property
    def n_reading(self) -> int:
        return self.reading_gpus

    @property
    def n_gpus(self) -> int:
        return self.reading_gpus + self.writing_gpus


Arrangement = Annotated[Union[Colocated, Disaggregated], Field(discriminator="kind")]


class Scenario(_Strict):
    """A validated scenario. `source` is the file it came from (for messages and trace paths)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    seed: Annotated[int, Field(ge=0, lt=2**63)] = 1
    workload: Union[SyntheticWorkload, TraceWorkload]
    max_sim_s: PositiveFloat | None = None
    cost: Cost = Cost()
    slo: Slo = Slo()
    arrangements: tuple[Arrangement, ...] = Field(min_length=1)
    source: str = Field(default="<scenario>", exclude=True)

    @field_validator("workload", mode="before")
    @classmethod
    def _pick_workload(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return TraceWorkload(**value) if "trace" in value else SyntheticWorkload(**value)
        return value

    _tuple = field_validator("arrangements", mode="before")(_as_tuple)

    @model_validator(mode="after")
    def _check(self) -> "Scenario":
        names = [a.name for a in self.arrangements]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"arrangement names must be unique, {dupes[0]!r} repeats")
        w = self.workload
        if self.max_sim_s is not None and w.measure_s is not None and self.max_sim_s < w.measure_s:
            raise ValueError(
                f"max_sim_s ({self.max_sim_s:g}) must be at least measure_s ({w.measure_s:g})"
            )
        if w.rate_per_s is not None and (isinstance(w, SyntheticWorkload) or w.format == "lengths"):
            expected = w.rate_per_s * self.cap_s(None)
            if expected > MAX_REQUESTS:
                raise ValueError(
                    f"rate_per_s x max_sim_s expects {expected:.3g} requests, above the limit of "
                    f"{MAX_REQUESTS:,}; lower the rate or max_sim_s"
                )
        return self

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

    def with_overrides(self, **changes: Any) -> "Scenario":
        """A re-validated copy with top-level or `workload.<key>` values replaced.

        A value of None leaves the key as it is; `DROP` removes it (back to its default).
        """
        raw = self.model_dump(mode="python", exclude_none=True)
        for key, value in changes.items():
            if value is None:
                continue
            where = raw
            *parents, leaf = key.split(".")
            for p in parents:
                where = where[p]
            if value is DROP:
                where.pop(leaf, None)
            else:
                where[leaf] = value
        return _validate(raw, self.source)


def _suggest(bad: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(bad, allowed, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _allowed_keys(loc: tuple) -> list[str]:
    """The keys a mapping at `loc` may hold, for a did-you-mean hint."""
    models: dict[str, type[BaseModel]] = {
        "": Scenario,
        "cost": Cost,
        "slo": Slo,
        "prompt_mix": PromptClass,
    }
    parts = [p for p in loc[:-1] if isinstance(p, str)]
    if not parts:
        return [f for f in Scenario.model_fields if f != "source"]
    head = parts[0]
    if head == "workload":
        if "prompt_mix" in parts:
            return list(PromptClass.model_fields)
        return sorted(set(SyntheticWorkload.model_fields) | set(TraceWorkload.model_fields))
    if head == "arrangements":
        return sorted(set(Colocated.model_fields) | set(Disaggregated.model_fields))
    return list(models.get(head, Scenario).model_fields)


def _format_error(err: ValidationError, source: str) -> str:
    e = err.errors(include_url=False)[0]
    loc = tuple(e["loc"])
    # pydantic adds the union member's tag to the location; users never wrote it.
    loc = tuple(p for p in loc if p not in ("SyntheticWorkload", "TraceWorkload"))
    key = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")
    kind = e["type"]
    if kind == "extra_forbidden":
        return f"{source}: {key}: unknown key{_suggest(str(loc[-1]), _allowed_keys(loc))}"
    if kind == "missing":
        return f"{source}: {key}: required key is missing"
    got = e.get("input")
    msg = e["msg"].removeprefix("Value error, ")
    if kind == "union_tag_invalid":
        return f"{source}: {key}.kind: got {got.get('kind')!r}, expected 'colocated' or 'disaggregated'"
    if kind == "union_tag_not_found":
        return f"{source}: {key}: missing key 'kind' ('colocated' or 'disaggregated')"
    where = f"{key}: " if key else ""
    if kind == "value_error":
        return f"{source}: {where}{msg}"
    return f"{source}: {where}got {got!r}, expected {msg[0].lower() + msg[1:]}"


def _validate(raw: Any, source: str) -> Scenario:
    if not isinstance(raw, dict):
        kind = "empty" if raw is None else f"a {type(raw).__name__}"
        raise InputError(f"{source}: the file is {kind}, expected a YAML mapping of scenario keys")
    try:
        return Scenario.model_validate({**raw, "source": source})
    except ValidationError as err:
        raise InputError(_format_error(err, source)) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file (safe loader: a file can never build objects)."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a scenario YAML file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file, expected a scenario YAML file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read ({err.__class__.__name__}: {err})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(f"{path}{line}: malformed YAML: {problem}") from None
    if isinstance(raw, dict) and "source" in raw:
        raise InputError(f"{path}: source: unknown key")
    return _validate(raw, str(path))

"""A grid of scenario points: rates x the values of each `--set KEY=V1,V2` key.

Keys are the scenario file's keys, dotted (`cost.iteration_ms`, `workload.reply_words`); an
arrangement's field is named by the arrangement (`arrangements.chunked-512.chunk_tokens`).
Values are read as YAML, so `[50,100],[100,400]` is two ranges. Bad syntax or an unknown key is
one line naming the flag.
"""

from __future__ import annotations

import difflib
import itertools
import math
import typing
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel

from ..errors import InputError
from ..scenario.counts import counted_requests_set
from ..scenario.presets import unfill
from ..scenario.schema import DROP, Scenario, TraceWorkload, has_attention_term

RATE = "rate_per_s"  # the grid column of the offered rate
RATE_PER_GPU = "rate_per_gpu"  # ... or of the offered rate per GPU (--rate-per-gpu: each arrangement at its own rate)
SLO_SCALE = "slo_scale"  # every limit that is on multiplied by this (--slo-scale)
ONLY = "only"  # a point key keeping one arrangement of the scenario (its runs are stored as its own)
MAX_POINTS = 1_000_000


def positive_number(text: str, flag: str, what: str, note: str = "") -> float:
    """`text` as a finite number > 0, or one line naming `flag` and `what` was expected (then `note`)."""
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{flag}: got {text!r}, expected {what}{note}") from None
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{flag}: got {text!r}, expected {what} > 0{note}")
    return value


#: What `parse_rates` reads for a flag other than a rate: (one value, the shape of a list).
_VALUES = {"--slo-scale": ("a scale", " (every SLO limit that is on multiplied by it; 1: as the scenario states them)",
                           "START:STOP:STEP (e.g. 0.5:2:0.25), S1,S2,... or one scale")}


def parse_rates(text: str, flag: str = "--rate") -> list[float]:
    """`START:STOP:STEP` (STOP included when the steps reach it), `R1,R2,...` or one rate (or,
    for `--slo-scale`, scales), each a finite number > 0."""
    one, note, shape = _VALUES.get(flag, ("a rate in requests/s", "",
                                          "START:STOP:STEP (e.g. 4:24:1), R1,R2,... or one rate, in requests/s"))
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise InputError(f"{flag}: got {text!r}, expected {shape}")
        start, stop, step = (positive_number(p.strip(), flag, "numbers in START:STOP:STEP", note) for p in parts)
        if stop < start:
            raise InputError(f"{flag}: got {text!r}, expected START <= STOP")
        n = math.floor((stop - start) / step + 1e-9) + 1
        if n > MAX_POINTS:
            raise InputError(f"{flag}: got {text!r} ({n:,} rates), expected at most {MAX_POINTS:,}")
        return [float(f"{start + i * step:.12g}") for i in range(n)]
    rates = [positive_number(p.strip(), flag, one, note) for p in text.split(",")]
    return sorted(set(rates), key=rates.index)


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets and braces: `[50,100],[100,400]` -> 2 parts."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def parse_set(text: str, flag: str = "--set") -> tuple[str, list[Any]]:
    """`KEY=V1,V2,...` -> (key, values), each value read as YAML."""
    key, eq, values = text.partition("=")
    key = key.strip()
    if not eq or not key or not values.strip():
        raise InputError(f"{flag}: got {text!r}, expected KEY=V1,V2,... (e.g. cost.iteration_ms=10,12)")
    out = []
    for part in _split_top(values):
        try:
            value = yaml.safe_load(part)
        except yaml.YAMLError:
            raise InputError(f"{flag} {key}: got the value {part.strip()!r}, expected a YAML value (a number, "
                             "a word or a list like [50,100])") from None
        if value is None and part.strip():  # (null, ~: a file's "off", which a grid point cannot set)
            raise InputError(f"{flag} {key}: got {part.strip()} in {values!r}, expected values that are not null: "
                             f"{flag} cannot set a key to null (run that point from the scenario without the key)")
        if value is None:
            raise InputError(f"{flag} {key}: got an empty value in {values!r}, expected V1,V2,...")
        out.append(value)
    if len(set(map(repr, out))) != len(out):
        raise InputError(f"{flag} {key}: got {values!r} with a value twice, expected distinct values")
    return key, out


def shown(value: Any) -> Any:
    """A grid value as a table cell: numbers and words stay, lists become their YAML text."""
    if isinstance(value, (int, float, str, bool)):
        return value
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()


def _known_keys(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        out = []
        for k, v in node.items():
            out += [f"{prefix}{k}", *_known_keys(v, f"{prefix}{k}.")]
        return out
    return []


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's annotation holds directly (through unions, Optional, Annotated; not
    in a list, whose items a dotted key cannot name)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (tuple, list, dict):
        return []
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def model_keys(model: BaseModel | type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key a scenario file may write in `model` (a model or its class), read from the
    schema, set or not: a key added to the schema is known here without a list to update."""
    cls = model if isinstance(model, type) else type(model)
    out = []
    for name, field in cls.model_fields.items():
        if field.exclude:
            continue
        key = f"{prefix}{field.alias or name}"
        out.append(key)
        value = None if isinstance(model, type) else getattr(model, name)
        inner = [value] if isinstance(value, BaseModel) else [] if value is not None else _models(field.annotation)
        for m in inner:
            out += model_keys(m, f"{key}.")
    return out


def arrangement_key(scenario: Scenario, key: str) -> tuple[str, str] | None:
    """`arrangements.NAME.FIELD` (FIELD may be dotted, NAME may hold dots) -> (NAME, FIELD), or
    None when no arrangement of the scenario is NAME."""
    rest = key[len("arrangements."):] if key.startswith("arrangements.") else None
    if rest is None:
        return None
    names = sorted((a.name for a in scenario.arrangements if rest.startswith(f"{a.name}.")), key=len, reverse=True)
    return (names[0], rest[len(names[0]) + 1:]) if names else None


def check_key(scenario: Scenario, key: str, flag: str = "--set", more: tuple[str, ...] = ()) -> None:
    """An unknown key is one line naming `flag`, with the closest known keys (`more`: keys the
    flag knows besides the scenario's), matched on the whole key or its last part. Known: every
    key of the schema (`model_keys`), whether the file writes it or not."""
    if key in ("seed", "seeds", "name"):
        raise InputError(f"{flag} {key}: got a key the grid does not vary, expected a scenario setting (seeds: --seeds)")
    raw = scenario.model_dump(mode="python")  # every field, set or not
    raw["arrangements"] = {a["name"]: a for a in raw["arrangements"]}
    known = set(_known_keys(raw)) | {k for k in model_keys(scenario) if not k.startswith("arrangements")}
    known |= {f"arrangements.{a.name}.{k}" for a in scenario.arrangements for k in model_keys(a)}
    if key in known:
        return
    known |= set(more)
    last = {k.rsplit(".", 1)[-1]: k for k in sorted(known)}
    close = [last[k] for k in difflib.get_close_matches(key.rsplit(".", 1)[-1], list(last), n=3, cutoff=0.7)]
    close += [k for k in difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.6) if k not in close]
    hint = f" (did you mean {', '.join(close[:3])}?)" if close else ""
    raise InputError(f"{flag}: got the unknown key {key!r}{hint}, expected a scenario key like cost.iteration_ms "
                     "or arrangements.NAME.chunk_tokens" + (f", or {', '.join(more)}" if more else ""))


def resolve(scenario: Scenario, point: dict[str, Any]) -> Scenario:
    """`scenario` with a point's values: `rate_per_s` sets `workload.rate_per_s` (on a trace it
    replaces any time_scale), other keys as dotted scenario keys."""
    changes: dict[str, Any] = {}
    flags: dict[str, str] = {}
    arrangements = None
    if RATE_PER_GPU in point:  # the rate of the one arrangement kept, at this rate per GPU
        per_gpu = point[RATE_PER_GPU]
        n_gpus = next(a.n_gpus for a in scenario.arrangements if a.name == point[ONLY])
        point = {k: v for k, v in point.items() if k != RATE_PER_GPU} | {RATE: per_gpu * n_gpus}
    for key, value in point.items():
        if key == SLO_SCALE:
            for k, v in scenario.slo.scaled(value).items():
                changes[k], flags[k] = v, f"--slo-scale {value:g}"
        elif key == ONLY:
            changes["arrangements"] = [a.model_dump(mode="python", exclude_none=True)
                                       for a in scenario.arrangements if a.name == value]
            changes["reference"] = DROP
        elif key == RATE:
            changes["workload.rate_per_s"] = value
            flags["workload.rate_per_s"] = f"--rate {value:g}"
            if (stretched := _stretched_cap(scenario, value)) is not None:
                changes["max_sim_s"] = stretched
            if isinstance(scenario.workload, TraceWorkload):
                changes["workload.time_scale"] = DROP
        elif key == "slo.preset":  # the named rule, as the file writing it gets (not only its name)
            changes["slo"] = scenario.slo.with_preset(value)
            flags["slo"] = f"--set {key}={shown(value)}"
        elif key.startswith("arrangements."):
            name, field = arrangement_key(scenario, key) or key[len("arrangements."):].rpartition(".")[::2]
            if arrangements is None:  # (as the file wrote them: a new GPU kind fills its own KV capacity)
                arrangements = unfill(scenario.model_dump(mode="python", exclude_none=True),
                                      has_attention_term())["arrangements"]
            for a in arrangements:
                if a["name"] == name:
                    *parents, leaf = field.split(".")
                    where = a
                    for p in parents:
                        where = where.setdefault(p, {})
                    where[leaf] = value
            flags["arrangements"] = f"--set {key}={shown(value)}"
        else:
            changes[key] = value
            flags[key] = f"--set {key}={shown(value)}"
    if arrangements is not None:
        changes["arrangements"] = arrangements
    if "slo" in changes:  # (the rule first, then any slo.KEY given beside it)
        changes = {"slo": changes.pop("slo")} | changes
    return scenario.with_overrides(flags=flags, **changes)


def _stretched_cap(scenario: Scenario, rate: float) -> float | None:
    """With `n_requests` (or `n_requests_per_gpu`), an explicit max_sim_s at a rate below the scenario's, stretched as the
    arrivals are: max_sim_s x rate_per_s / rate (the same draws at a lower rate arrive that much
    later), so a probe of goodput, plan or sweep below the scenario's rate keeps every request
    and the time after the last arrival in proportion, instead of being refused (docs/capacity.md).
    None: the cap as it is (no count, no max_sim_s, or a rate at or above the scenario's)."""
    w = scenario.workload
    base = getattr(w, "rate_per_s", None)
    if not counted_requests_set(w) or scenario.max_sim_s is None or base is None or rate >= base:
        return None
    return scenario.max_sim_s * base / rate


def apply_sets(scenario: Scenario, texts: list[str]) -> Scenario:
    """`--set KEY=VALUE` of a command that runs one setting (plan, map): each key once, one value
    each, checked like sweep's keys (`router=prefix_aware`, `prefix_cache_tokens=500000`, ...)."""
    point: dict[str, Any] = {}
    for text in texts:
        key, values = parse_set(text)
        if len(values) != 1:
            raise InputError(f"--set {key}: got {len(values)} values, expected one (KEY=VALUE; sweep varies a key)")
        if key in point:
            raise InputError(f"--set {key}: got the key twice, expected each key once")
        check_key(scenario, key)
        point[key] = values[0]
    return resolve(scenario, point) if point else scenario


@dataclass(frozen=True)
class Grid:
    """Rates x each key's values, in the order given (the first key varies slowest)."""

    rates: tuple[float, ...]
    sets: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    per_gpu: bool = False  # rates are per GPU: each arrangement runs at rate x its GPUs

    @property
    def rate_key(self) -> str:
        return RATE_PER_GPU if self.per_gpu else RATE

    @property
    def keys(self) -> list[str]:
        return [self.rate_key, *(k for k, _ in self.sets)]

    def points(self) -> list[dict[str, Any]]:
        values = [list(v) for _, v in self.sets]
        out = []
        for combo in itertools.product(*values):
            for rate in self.rates:
                out.append({self.rate_key: rate, **dict(zip((k for k, _ in self.sets), combo))})
        return out


def make_grid(scenario: Scenario, rate_text: str | None, set_texts: list[str], slo_scale: str | None = None,
              per_gpu_text: str | None = None) -> Grid:
    """The grid of `--rate` (or `--rate-per-gpu`), `--set` and `--slo-scale` flags, every point
    checked against the scenario (one line naming the flag and value that does not fit)."""
    if per_gpu_text is not None:
        if rate_text is not None:
            raise InputError(f"--rate-per-gpu: got {per_gpu_text!r} together with --rate {rate_text!r}, expected one of them")
        rates = parse_rates(per_gpu_text, "--rate-per-gpu")
    elif rate_text is None:
        if scenario.workload.rate_per_s is None:
            raise InputError("--rate: missing, expected rates (the scenario's trace has no rate_per_s)")
        rates = [float(scenario.workload.rate_per_s)]
    else:
        rates = parse_rates(rate_text)
    sets: list[tuple[str, tuple[Any, ...]]] = []
    for text in set_texts:
        key, values = parse_set(text)
        if key in (k for k, _ in sets):
            raise InputError(f"--set {key}: got the key twice, expected each key once")
        if key in (RATE, "workload.rate_per_s"):
            raise InputError(f"--set {key}: got the rate, expected --rate for rates")
        check_key(scenario, key)
        sets.append((key, tuple(values)))
    if slo_scale is not None:
        sets.append((SLO_SCALE, tuple(parse_rates(slo_scale, "--slo-scale"))))
    grid = Grid(tuple(rates), tuple(sets), per_gpu_text is not None)
    n = len(rates) * math.prod(len(v) for _, v in sets)
    if n > MAX_POINTS:
        raise InputError(f"--set: got a grid of {n:,} points, expected at most {MAX_POINTS:,}")
    first = {grid.rate_key: rates[0]} | ({ONLY: scenario.arrangements[0].name} if grid.per_gpu else {})
    resolve(scenario, first)
    for key, point_values in sets:  # each value alone, at the first rate: errors name it
        for v in point_values:
            resolve(scenario, {**first, key: v})
    return grid

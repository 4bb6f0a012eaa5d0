"""Scenario files: read YAML safely, validate with pydantic, report one-line errors.

A scenario names the traffic (synthetic or a trace), the cost model (M1, M4), the on-time
limits (M7) and the arrangements of GPUs to compare. Everything a run depends on is here, so
`run.json` can record it whole.

Every bad value is reported as one line, `FILE:LINE: key.path: got VALUE, expected WHAT`
(an unknown key gets a did-you-mean hint). The YAML loader is PyYAML's safe loader, made
stricter (a key given twice is an error) and friendlier (`1e9` is a number, as in YAML 1.2).
"""

from __future__ import annotations

import datetime
import difflib
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from .errors import InputError
from .limits import (
    MAX_ARRANGEMENTS,
    MAX_BURSTINESS_CV,
    MAX_COST_MS,
    MAX_COUNT,
    MAX_GPUS,
    MAX_MEAN_GAP_MS,
    MAX_SCENARIO_BYTES,
    MAX_TIME_S,
    MIN_ITERATION_MS,
    iterations_problem,
    requests_problem,
    ship_problem,
)

#: Default slack of the safety cap after the last measured arrival (D6).
DEFAULT_CAP_SLACK_S = 600.0

DROP = object()  # with_overrides: remove a key

Seconds = Annotated[float, Field(gt=0, le=MAX_TIME_S)]
NonNegSeconds = Annotated[float, Field(ge=0, le=MAX_TIME_S)]
NonNegFloat = NonNegSeconds  # kept for older imports
Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Gpus = Annotated[int, Field(ge=1, le=MAX_GPUS)]
CostMs = Annotated[float, Field(ge=0, le=MAX_COST_MS)]
Name = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._-]+$")]

_NAME = "a name of letters, digits, '.', '_' and '-' (not only dots)"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _ordered_range(value: tuple[int, int]) -> tuple[int, int]:
    if value[0] > value[1]:
        raise ValueError(f"got {_show(list(value))}, expected a range [low, high] with low <= high")
    return value


def _not_only_dots(value: str) -> str:
    if set(value) == {"."}:
        raise ValueError(f"got {value!r}, expected {_NAME}")
    return value


class PromptClass(_Strict):
    """One class of prompts: drawn with probability `share`, tokens uniform in `tokens` (inclusive)."""

    share: Annotated[float, Field(gt=0, le=1)]
    tokens: tuple[Count, Count]

    _tuple = field_validator("tokens", mode="before")(_as_tuple)
    _range = field_validator("tokens")(_ordered_range)


class SyntheticWorkload(_Strict):
    """Poisson arrivals at `rate_per_s`; prompt class by share; lengths uniform (M6)."""

    rate_per_s: Annotated[float, Field(gt=0)]
    warmup_s: NonNegSeconds = 0.0
    measure_s: Seconds
    prompt_mix: tuple[PromptClass, ...] = Field(min_length=1, max_length=1000)
    reply_words: tuple[Count, Count]

    _tuple = field_validator("reply_words", "prompt_mix", mode="before")(_as_tuple)
    _range = field_validator("reply_words")(_ordered_range)

    @model_validator(mode="after")
    def _check(self) -> "SyntheticWorkload":
        total = math.fsum(c.share for c in self.prompt_mix)
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            shares = " + ".join(f"{c.share:g}" for c in self.prompt_mix[:6])
            more = " + ..." if len(self.prompt_mix) > 6 else ""
            raise ValueError(f"@prompt_mix: got shares {shares}{more} = {total:g}, expected shares summing to 1")
        if self.warmup_s >= self.measure_s:
            raise ValueError(f"@warmup_s: got {self.warmup_s:g}, expected less than measure_s ({self.measure_s:g})")
        return self


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
    def _check(self) -> "TraceWorkload":
        if self.measure_s is not None and self.warmup_s >= self.measure_s:
            raise ValueError(f"@warmup_s: got {self.warmup_s:g}, expected less than measure_s ({self.measure_s:g})")
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
            for key in ("rate_per_s", "measure_s"):
                if getattr(self, key) is None:
                    raise ValueError(f"@{key}: missing, expected a number > 0: a 'lengths' trace has no arrival times")
        elif self.burstiness_cv is not None:
            raise ValueError(
                f"@burstiness_cv: got {self.burstiness_cv:g}, expected none: it applies to 'lengths' traces "
                f"only (a {self.format} trace keeps its own arrivals)"
            )
        return self


class Cost(_Strict):
    """Iteration cost (M1) and KV ship time (M4), in milliseconds."""

    iteration_ms: Annotated[float, Field(ge=MIN_ITERATION_MS, le=MAX_COST_MS)] = 12.0
    per_reply_ms: CostMs = 0.4
    per_prompt_token_ms: CostMs = 0.05
    kv_ship_ms_per_token: CostMs = 0.01


class Slo(_Strict):
    """On-time limits (M7)."""

    first_word_s: Seconds = 2.0
    mean_gap_ms: Annotated[float, Field(gt=0, le=MAX_MEAN_GAP_MS)] = 50.0
    freeze_ms: Annotated[float, Field(gt=0, le=MAX_TIME_S * 1e3)] = 250.0


class Colocated(_Strict):
    """Every GPU reads prompts and writes replies; replies stay where their prompt was read."""

    name: Name
    kind: Literal["colocated"]
    gpus: Gpus
    chunk_tokens: Count | None = None

    _name = field_validator("name")(_not_only_dots)

    @property
    def n_reading(self) -> int:
        return self.gpus

    @property
    def n_gpus(self) -> int:
        return self.gpus


class Disaggregated(_Strict):
    """Reading GPUs only read prompts, writing GPUs only write replies; KV caches ship between."""

    name: Name
    kind: Literal["disaggregated"]
    reading_gpus: Gpus
    writing_gpus: Gpus
    chunk_tokens: Count | None = None

    _name = field_validator("name")(_not_only_dots)

    @model_validator(mode="after")
    def _check(self) -> "Disaggregated":
        if self.n_gpus > MAX_GPUS:
            raise ValueError(
                f"@writing_gpus: got {self.writing_gpus} with {self.reading_gpus} reading GPUs, "
                f"expected at most {MAX_GPUS} GPUs in all"
            )
        return self

    @property
    def n_reading(self) -> int:
        return self.reading_gpus

    @property
    def n_gpus(self) -> int:
        return self.reading_gpus + self.writing_gpus


Arrangement = Annotated[Union[Colocated, Disaggregated], Field(discriminator="kind")]


def _workload_tag(value: Any) -> str:
    if isinstance(value, TraceWorkload) or (isinstance(value, dict) and "trace" in value):
        return "<trace>"
    return "<synthetic>"


Workload = Annotated[
    Union[Annotated[SyntheticWorkload, Tag("<synthetic>")], Annotated[TraceWorkload, Tag("<trace>")]],
    Discriminator(_workload_tag),
]


class Scenario(_Strict):
    """A validated scenario. `source` is the file it came from (for messages and trace paths)."""

    name: Name
    seed: Annotated[int, Field(ge=0, lt=2**63)] = 1
    workload: Workload
    max_sim_s: Seconds | None = None
    cost: Cost = Cost()
    slo: Slo = Slo()
    arrangements: tuple[Arrangement, ...] = Field(min_length=1, max_length=MAX_ARRANGEMENTS)
    source: str = Field(default="<scenario>", exclude=True)

    _tuple = field_validator("arrangements", mode="before")(_as_tuple)
    _name = field_validator("name")(_not_only_dots)

    @model_validator(mode="after")
    def _check(self) -> "Scenario":
        first: dict[str, int] = {}
        for i, a in enumerate(self.arrangements):
            if a.name in first:
                raise ValueError(
                    f"@arrangements[{i}].name: got {a.name!r} again (also arrangements[{first[a.name]}]), "
                    "expected unique names"
                )
            first[a.name] = i
        w = self.workload
        if self.max_sim_s is not None and w.measure_s is not None and self.max_sim_s < w.measure_s:
            raise ValueError(
                f"@max_sim_s: got {self.max_sim_s:g}, expected at least workload.measure_s ({w.measure_s:g})"
            )
        cap = self.cap_s(None)
        if w.rate_per_s is not None and (isinstance(w, SyntheticWorkload) or w.format == "lengths"):
            problem = requests_problem(w.rate_per_s * cap, len(self.arrangements))
            if problem:
                raise ValueError(
                    f"@workload.rate_per_s: got {w.rate_per_s:g}, which expects, up to the cap at {cap:g} s, "
                    f"{problem}; expected a lower rate_per_s or max_sim_s"
                )
        if isinstance(w, SyntheticWorkload):
            problem = ship_problem(self.cost.kv_ship_ms_per_token, max(c.tokens[1] for c in w.prompt_mix))
            if problem and any(not isinstance(a, Colocated) for a in self.arrangements):
                raise ValueError(f"@cost.kv_ship_ms_per_token: {problem}")
        if self.cap_known:
            problem = iterations_problem(self.arrangements, cap, self.cost.iteration_ms)
            if problem:
                raise ValueError(f"@cost.iteration_ms: {problem}")
        return self

    @property
    def cap_known(self) -> bool:
        """Whether the cap is known without reading the trace."""
        return self.max_sim_s is not None or self.workload.measure_s is not None

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

    def with_overrides(self, *, flags: dict[str, str] | None = None, **changes: Any) -> "Scenario":
        """A re-validated copy with top-level or `workload.<key>` values replaced.

        A value of None leaves the key as it is; `DROP` removes it (back to its default).
        `flags` names the command-line flag behind each key (`{"workload.rate_per_s": "--rate"}`),
        so an error blames the flag rather than the file.
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
        used = {k: f for k, f in (flags or {}).items() if changes.get(k) is not None}
        return _validate(raw, self.source, flags=used)


# -- one-line errors ---------------------------------------------------------------------------

_RANGE = "a range [low, high] of whole numbers from 1 to 2**53"
_EXPECT = {
    "name": _NAME,
    "seed": "a whole number from 0 to 2**63-1",
    "workload": "a mapping: synthetic traffic (rate_per_s, measure_s, prompt_mix, reply_words) or a trace (trace: FILE, ...)",
    "max_sim_s": f"a number of seconds > 0, up to {MAX_TIME_S:g}",
    "cost": "a mapping of iteration_ms, per_reply_ms, per_prompt_token_ms, kv_ship_ms_per_token",
    "slo": "a mapping of first_word_s, mean_gap_ms, freeze_ms",
    "arrangements": f"a list of 1 to {MAX_ARRANGEMENTS} arrangements like {{name: same-gpu, kind: colocated, gpus: 4}}",
    "rate_per_s": "a number of requests per second > 0",
    "warmup_s": f"a number of seconds >= 0, up to {MAX_TIME_S:g}",
    "measure_s": f"a number of seconds > 0, up to {MAX_TIME_S:g}",
    "prompt_mix": "a list of 1 to 1000 prompt classes like {share: 0.3, tokens: [3000, 8000]}",
    "reply_words": _RANGE,
    "tokens": _RANGE,
    "share": "a number > 0 and <= 1",
    "trace": "a trace file path",
    "format": "one of csv, azure, mooncake, lengths",
    "start_s": f"a number of seconds >= 0, up to {MAX_TIME_S:g}",
    "duration_s": f"a number of seconds > 0, up to {MAX_TIME_S:g}",
    "spread_ties": "true or false",
    "time_scale": "a number > 0",
    "burstiness_cv": f"a number > 0, up to {MAX_BURSTINESS_CV:g}",
    "reply_words_max": "a whole number from 1 to 2**53",
    "prompt_tokens_max": "a whole number from 1 to 2**53",
    "iteration_ms": f"a number of ms from {MIN_ITERATION_MS:g} (1 ns) to {MAX_COST_MS:g}",
    "per_reply_ms": f"a number of ms >= 0, up to {MAX_COST_MS:g}",
    "per_prompt_token_ms": f"a number of ms >= 0, up to {MAX_COST_MS:g}",
    "kv_ship_ms_per_token": f"a number of ms >= 0, up to {MAX_COST_MS:g}",
    "first_word_s": f"a number of seconds > 0, up to {MAX_TIME_S:g}",
    "mean_gap_ms": f"a number of ms > 0, up to {MAX_MEAN_GAP_MS:g}",
    "freeze_ms": f"a number of ms > 0, up to {MAX_TIME_S * 1e3:g}",
    "kind": "'colocated' or 'disaggregated'",
    "gpus": f"a whole number from 1 to {MAX_GPUS}",
    "reading_gpus": f"a whole number from 1 to {MAX_GPUS}",
    "writing_gpus": f"a whole number from 1 to {MAX_GPUS}",
    "chunk_tokens": "a whole number of tokens from 1 to 2**53",
}
_ITEM_EXPECT = {  # a list's items, by the list's key
    "arrangements": "a mapping like {name: same-gpu, kind: colocated, gpus: 4}",
    "prompt_mix": "a mapping like {share: 0.3, tokens: [3000, 8000]}",
    "tokens": "a whole number of tokens from 1 to 2**53",
    "reply_words": "a whole number of words from 1 to 2**53",
}
_RANGES = ("tokens", "reply_words")
_ARRANGEMENT_TAGS = {"colocated": Colocated, "disaggregated": Disaggregated}
_WORKLOAD_TAGS = {"<synthetic>": SyntheticWorkload, "<trace>": TraceWorkload}


def _show(value: Any, budget: int = 60) -> str:
    """A value as a user would have written it in YAML, cut to about `budget` characters."""
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        return f"{value:.6g}" if len(text) > 10 else text
    if isinstance(value, int):
        text = str(value) if abs(value) < 10**30 else f"{value:.3g}"
        return text
    if isinstance(value, str):
        return repr(value if len(value) <= budget else value[:budget] + "...")
    if isinstance(value, (bytes, bytearray)):
        return f"binary data ({len(value)} bytes)"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return f"the date {value.isoformat()}"
    if isinstance(value, (list, tuple, set)):
        parts, used = [], 2
        for item in value:
            text = _show(item, max(8, budget // 3))
            if used + len(text) > budget and parts:
                parts.append("...")
                break
            parts.append(text)
            used += len(text) + 2
        return "[" + ", ".join(parts) + "]"
    if isinstance(value, dict):
        parts, used = [], 2
        for k, v in value.items():
            text = f"{k if isinstance(k, str) else _show(k, 16)}: {_show(v, max(8, budget // 3))}"
            if used + len(text) > budget and parts:
                parts.append("...")
                break
            parts.append(text)
            used += len(text) + 2
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, BaseModel):
        return _show(value.model_dump(mode="python"), budget)
    return repr(value)[:budget]


def _key_text(loc: tuple) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")


def _parse_key(text: str) -> tuple:
    """`arrangements[3].name` -> ('arrangements', 3, 'name')."""
    parts: list = []
    for piece in text.split("."):
        m = re.fullmatch(r"([^\[\]]*)((?:\[\d+\])*)", piece)
        if m is None:
            parts.append(piece)
            continue
        if m.group(1):
            parts.append(m.group(1))
        parts.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group(2)))
    return tuple(parts)


def _clean_loc(loc: tuple) -> tuple[tuple, list[type[BaseModel] | None]]:
    """Drop the union tags pydantic adds to a location; also return, per part, the model whose
    mapping holds it (None for list items)."""
    clean: list = []
    models: list[type[BaseModel] | None] = []
    model: type[BaseModel] | None = Scenario
    for p in loc:
        if isinstance(p, str) and p in _WORKLOAD_TAGS and clean[-1:] == ["workload"]:
            model = _WORKLOAD_TAGS[p]
            continue
        if isinstance(p, str) and p in _ARRANGEMENT_TAGS and len(clean) >= 2 and clean[-2] == "arrangements" and isinstance(clean[-1], int):
            model = _ARRANGEMENT_TAGS[p]
            continue
        if isinstance(p, str) and p.startswith("function-"):
            continue
        clean.append(p)
        models.append(model)
        if isinstance(p, int):
            parent = clean[-2] if len(clean) >= 2 else None
            model = PromptClass if parent == "prompt_mix" else None
        elif model is Scenario:
            model = {"cost": Cost, "slo": Slo, "workload": SyntheticWorkload}.get(p)
        else:
            model = None
    return tuple(clean), models


def _line_of(node: yaml.Node | None, loc: tuple) -> int | None:
    """The line (from 1) of the deepest node of `loc` found in the YAML node tree."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for depth, p in enumerate(loc):
        child = None
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(p):
                    child, line = v, k.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(p, int) and p < len(node.value):
            child = node.value[p]
            line = child.start_mark.line + 1
        if child is None:
            if depth == 0:
                return None  # not in the file at all (a default)
            break
        node = child
    return line


def _unknown_key(bad: str, model: type[BaseModel] | None) -> str:
    if model is None:
        return "unknown key"
    allowed = [f for f in model.model_fields if f != "source"]
    siblings = {SyntheticWorkload: TraceWorkload, TraceWorkload: SyntheticWorkload, Colocated: Disaggregated, Disaggregated: Colocated}
    other = siblings.get(model)
    what = {SyntheticWorkload: "synthetic traffic", TraceWorkload: "a trace workload",
            Colocated: "a colocated arrangement", Disaggregated: "a disaggregated arrangement"}
    if other is not None and bad in other.model_fields:
        return f"unknown key for {what[model]} (it belongs to {what[other]}); expected one of {', '.join(allowed)}"
    close = difflib.get_close_matches(bad, allowed, n=1, cutoff=0.6)
    if not close:
        close = [f for f in allowed if f.startswith(bad) or bad.startswith(f)][:1]
    if close:
        return f"unknown key (did you mean {close[0]!r}?)"
    return f"unknown key, expected one of {', '.join(allowed)}"


def _pick(errors: list[dict]) -> dict:
    """The error to report: an unknown key first (it usually explains a missing one)."""
    for e in errors:
        if e["type"] == "extra_forbidden":
            return e
    return errors[0]


def _format_error(
    err: ValidationError, source: str, node: yaml.Node | None = None, flags: dict[str, str] | None = None
) -> str:
    e = _pick(err.errors(include_url=False))
    loc, models = _clean_loc(tuple(e["loc"]))
    kind = e["type"]
    got = e.get("input")
    msg = e["msg"].removeprefix("Value error, ")
    if kind == "value_error" and msg.startswith("@"):  # a check that names its own key
        sub, _, msg = msg[1:].partition(": ")
        loc = loc + _parse_key(sub)
    if kind in ("missing", "too_short") and loc and isinstance(loc[-1], int) and len(loc) >= 2 and loc[-2] in _RANGES:
        loc, kind = loc[:-1], "range_length"
    if kind == "union_tag_invalid":
        loc, got = loc + ("kind",), got.get("kind")
    if kind == "invalid_key":
        body = f"got the key {_show(got)}, expected keys that are text"
        loc = loc[:-1]
    elif kind == "extra_forbidden":
        body = _unknown_key(str(loc[-1]), models[-1] if models else None)
    elif kind == "missing" or kind == "union_tag_not_found":
        if kind == "union_tag_not_found":
            loc = loc + ("kind",)
        body = f"required key is missing, expected {_expected(loc)}"
    elif kind == "value_error":
        body = msg
    elif kind == "range_length":
        body = f"got {_show(got)}, expected {_RANGE}"
    else:
        body = f"got {_show(got)}, expected {_expected(loc)}"
    key = _key_text(loc)
    if flags and key in flags:
        return f"{flags[key]}: {body} (it sets {key} of {source})"
    line = _line_of(node, loc if kind not in ("missing", "union_tag_not_found") else loc[:-1])
    where = f"{source}:{line}" if line else source
    text = f"{where}: {key}: {body}" if key else f"{where}: {body}"
    if flags:
        text += f" (with {', '.join(flags.values())} from the command line)"
    return text


def _expected(loc: tuple) -> str:
    if not loc:
        return "a YAML mapping of scenario keys"
    last = loc[-1]
    if isinstance(last, int):
        return _ITEM_EXPECT.get(str(loc[-2]) if len(loc) >= 2 else "", "a valid item")
    if last == "name" and len(loc) == 1:
        return "a scenario " + _NAME.removeprefix("a ")
    return _EXPECT.get(str(last), "a valid value")


def _validate(raw: Any, source: str, node: yaml.Node | None = None, flags: dict[str, str] | None = None) -> Scenario:
    if not isinstance(raw, dict):
        what = "a file that is empty" if raw is None else f"a file holding only {_show(raw)}"
        if isinstance(raw, list):
            what = "a file that is a list"
        raise InputError(f"{source}: got {what}, expected a YAML mapping of scenario keys (key: value lines)")
    if "source" in raw:
        raise InputError(f"{source}:{_line_of(node, ('source',)) or 1}: source: {_unknown_key('source', Scenario)}")
    try:
        return Scenario.model_validate({**raw, "source": source})
    except ValidationError as err:
        raise InputError(_format_error(err, source, node, flags)) from None
    except RecursionError:
        raise InputError(f"{source}: got values nested too deeply, expected a plain scenario") from None


# -- reading YAML ------------------------------------------------------------------------------


class _DuplicateKey(Exception):
    def __init__(self, key: str, line: int, first: int):
        super().__init__(key)
        self.key, self.line, self.first = key, line, first


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader (no Python objects, ever), rejecting keys given twice and reading
    `1e9` and `1.5E-3` as numbers (YAML 1.2) rather than text."""


def _construct_map(loader: _Loader, node: yaml.MappingNode):
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
            continue
        key = loader.construct_object(key_node)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise _DuplicateKey(str(key), line, seen[key])
        seen[key] = line
    yield from yaml.constructor.SafeConstructor.construct_yaml_map(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def parse_yaml(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    """The data in `text` and its node tree (for line numbers); InputError if it is not YAML."""
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as err:  # a control character: refused before parsing
        line = text[: err.position].count("\n") + 1
        raise InputError(
            f"{source}:{line}: got the character {chr(err.character)!r} (U+{err.character:04X}), expected printable text"
        ) from None
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), node
    except _DuplicateKey as d:
        raise InputError(
            f"{source}:{d.line}: {d.key}: got this key a second time (first on line {d.first}), expected each key once"
        ) from None
    except yaml.constructor.ConstructorError as err:
        line = f":{err.problem_mark.line + 1}" if err.problem_mark is not None else ""
        tag = re.search(r"tag '([^']*)'", err.problem or "")
        if tag:
            shown = tag.group(1).replace("tag:yaml.org,2002:", "!!")
            raise InputError(
                f"{source}{line}: got the YAML tag {shown}, expected plain values (numbers, text, lists, mappings)"
            ) from None
        raise InputError(f"{source}{line}: malformed YAML: {err.problem}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        shown = ""
        if mark is not None and mark.line < len(lines := text.splitlines()) and lines[mark.line].strip():
            shown = f", in {_show(lines[mark.line].strip())}"
        raise InputError(f"{source}{line}: malformed YAML: {problem}{shown}") from None
    except RecursionError:
        raise InputError(f"{source}: malformed YAML: nested too deeply, expected a plain scenario") from None
    finally:
        loader.dispose()


def read_text_file(path: Path, what: str, max_bytes: int) -> str:
    """A regular UTF-8 file's text, or a one-line InputError saying what is wrong with it."""
    try:
        if path.is_dir():
            raise InputError(f"{path}: got a directory, expected {what}")
        if not path.exists():
            raise InputError(f"{path}: no such file, expected {what}")
        if not path.is_file():
            raise InputError(f"{path}: got a special file (not a regular file), expected {what}")
        size = path.stat().st_size
        if size > max_bytes:
            raise InputError(f"{path}: got {size:,} bytes, expected {what} of at most {max_bytes:,} bytes")
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(f"{path}: cannot read it ({err.strerror or err}), expected {what}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: got the byte {raw[err.start]:#04x}, expected UTF-8 text") from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file (safe loader: a file can never build objects)."""
    path = Path(path)
    text = read_text_file(path, "a scenario YAML file", MAX_SCENARIO_BYTES)
    raw, node = parse_yaml(text, str(path))
    return _validate(raw, str(path), node)

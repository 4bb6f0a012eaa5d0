"""Reading scenario files: every bad value as one line.

`FILE:LINE: key.path: got VALUE, expected WHAT` (an unknown key gets a did-you-mean hint). The
YAML itself is read by `yaml_file` (YAML 1.2 core rules, safe, bounded).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from ..costs import gpus
from ..errors import InputError
from .arrangements import KINDS, side_cost_keys
from .batch_limits import BATCH_LIMIT_EXPECT
from .cost_fields import E17_EXPECT
from .lengths import LENGTH_TAGS, MAX_WEIGHT, FixedLength, Histogram, HistogramLength, Lognormal, LognormalLength
from .limits import (
    MAX_ARRANGEMENTS,
    MAX_BURSTINESS,
    MAX_BURSTINESS_CV,
    MAX_COST_MS,
    MAX_GPUS,
    MAX_MEAN_GAP_MS,
    MAX_REQUESTS,
    MAX_SCENARIO_BYTES,
    MAX_SEEDS,
    MAX_TIME_S,
    MIN_BURSTINESS,
    MIN_ITERATION_MS,
)
from .limits_slo import LIMIT_KEYS
from .limits_slo import PRESET_NAMES as SLO_PRESET_NAMES
from .schedule import MAX_PERIODS, Diurnal, Period, RateCurve
from .schema import (
    _NAME,
    Cost,
    PromptClass,
    Scenario,
    SideCost,
    Slo,
    SyntheticWorkload,
    TraceWorkload,
    _show,
)
from .speculative import E16_EXPECT, E16_TOKENS, Speculative
from .yaml_file import parse_yaml, read_text_file

# -- one-line errors ---------------------------------------------------------------------------

_RANGE = "a range [low, high] of whole numbers from 1 to 2**53"
_LENGTH = _RANGE + ", or {fixed: N}, {histogram: {edges: [...], weights: [...]}} or {lognormal: {mean, sd, min, max}}"
_SIDE_COST = ("a mapping of iteration_ms, per_reply_ms, per_prompt_token_ms, per_reread_token_ms, per_context_token_ms, "
              "per_attention_pair_ms, prompt_iteration_ms, free_prompt_tokens, token_tile, per_token_tile_ms, per_expert_ms, "
              "experts, experts_per_token (or a preset)")
_EXPECT = {
    "name": _NAME,
    "seed": "a whole number from 0 to 2**63-1",
    "seeds": f"a whole number of seeds from 1 to {MAX_SEEDS}",
    "workload": "a mapping: synthetic traffic (rate_per_s, measure_s, prompt_mix, reply_words) or a trace (trace: FILE, ...)",
    "max_sim_s": f"a number of seconds > 0, up to {MAX_TIME_S:g}",
    "cost": _SIDE_COST.replace("per_prompt_token_ms, ", "per_prompt_token_ms, kv_ship_ms_per_token, "),
    "slo": f"a mapping of {', '.join(LIMIT_KEYS)}, tpot, criterion, percentile, percentile_of, preset",
    "tpot": "exclusive (without the first word, as vLLM and DistServe) or inclusive (end-to-end / words)",
    "e2e_s": f"a number of seconds > 0, up to {MAX_TIME_S:g}, or null (off)",
    "delay_s": f"a number of seconds > 0, up to {MAX_TIME_S:g}, or null (off)",
    "percentile_of": f"a mapping of limit keys ({', '.join(LIMIT_KEYS)}) to percentiles above 0 and below 100",
    "criterion": "per_request or percentiles",
    "percentile": "a number above 0 and below 100",
    "arrangements": f"a list of 1 to {MAX_ARRANGEMENTS} arrangements like {{name: same-gpu, kind: colocated, gpus: 4}}",
    "reference": "a mapping {source: TEXT, on_time_pct: {ARRANGEMENT: PERCENT, ...}}",
    "source": "a line of text saying where the reference figures come from",
    "on_time_pct": "a mapping of arrangement names to on-time shares (%)",
    "rate_per_s": "a number of requests per second > 0",
    "warmup_s": f"a number of seconds >= 0, up to {MAX_TIME_S:g}",
    "measure_s": f"a number of seconds > 0, up to {MAX_TIME_S:g}",
    "prompt_mix": "a list of 1 to 1000 prompt classes like {share: 0.3, tokens: [3000, 8000]}",
    "reply_words": _LENGTH,
    "tokens": _LENGTH,
    "n_requests": f"a whole number of requests from 1 to {MAX_REQUESTS:,}",
    "n_requests_per_gpu": f"a whole number of requests per GPU from 1 to {MAX_REQUESTS:,}",
    "pick": "first (the trace's first n_requests) or sampled (n_requests drawn with the seed, kept in time order)",
    "arrivals": "one of poisson, gamma, constant",
    "burstiness": f"a number from {MIN_BURSTINESS:g} to {MAX_BURSTINESS:g} (the Gamma shape; 1 is Poisson)",
    "fixed": "a whole number from 1 to 2**53",
    "histogram": "a mapping {edges: [e0, e1, ...], weights: [w1, ...]}",
    "edges": "a list of 2 to 10,001 whole numbers from 1 to 2**53, increasing",
    "weights": f"a list of numbers >= 0, up to {MAX_WEIGHT:g} (one per bin), not all zero",
    "lognormal": "a mapping {mean: M, sd: S, min: A, max: B}",
    "mean": "a number > 0, up to 2**53",
    "sd": "a number > 0, up to 2**53",
    "min": "a whole number from 1 to 2**53",
    "max": "a whole number from 1 to 2**53",
    "share": "a number > 0 and <= 1",
    "trace": "a trace file path or a public trace's id",
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
    "first_word_s": f"a number of seconds > 0, up to {MAX_TIME_S:g}, or null (off)",
    "mean_gap_ms": f"a number of ms > 0, up to {MAX_MEAN_GAP_MS:g}, or null (off)",
    "freeze_ms": f"a number of ms > 0, up to {MAX_TIME_S * 1e3:g}, or null (off)",
    "kind": " or ".join(repr(k) for k in KINDS),
    "gpus": f"a whole number from 1 to {MAX_GPUS}",
    "reading_gpus": f"a whole number from 1 to {MAX_GPUS}", "writing_gpus": f"a whole number from 1 to {MAX_GPUS}",
    "chunk_tokens": "a whole number of tokens from 1 to 2**53",
    "per_reread_token_ms": f"a number of ms >= 0, up to {MAX_COST_MS:g}",
    "per_context_token_ms": f"a number of ms >= 0, up to {MAX_COST_MS:g}",
    "per_attention_pair_ms": f"a number of ms >= 0, up to {MAX_COST_MS:g}",
    "prompt_iteration_ms": f"a number of ms >= 0, up to {MAX_COST_MS:g} (E14)",
    "free_prompt_tokens": "a whole number of tokens from 0 to 2**53 (E14)",
    **E16_EXPECT, **E17_EXPECT,
    "token_tile": "a whole number of tokens a tile from 1 to 2**53 (E15)",
    "per_token_tile_ms": f"a number of ms >= 0, up to {MAX_COST_MS:g} (E15)",
    "reading_cost": _SIDE_COST, "writing_cost": _SIDE_COST,
    "kv_capacity_tokens": "a whole number of tokens from 1 to 2**53",
    "kv_link": "one of independent, per_reading_gpu, per_writing_gpu, shared",
    "local_prompt_max_tokens": "a whole number of tokens from 1 to 2**53",
    **BATCH_LIMIT_EXPECT,
    "kv_policy": "reserve or paged (E9)",
    "kv_block_tokens": "a whole number of tokens per KV block from 1 to 2**53",
    "preemption": "recompute or swap (E9)",
    "swap_ms_per_token": f"a number of ms >= 0, up to {MAX_COST_MS:g}",
    "max_preemptions": "a whole number from 0 to 2**53",
    "mixed_iterations": "true or false (false: an iteration reads prompts or writes words, E10)",
    "tp": f"a TP degree: GPUs per instance, a whole number from 1 to {MAX_GPUS} that divides gpus",
    "reading_tp": f"a TP degree: GPUs per reading instance, a whole number from 1 to {MAX_GPUS} that divides reading_gpus",
    "writing_tp": f"a TP degree: GPUs per writing instance, a whole number from 1 to {MAX_GPUS} that divides writing_gpus",
    "reading_kv_capacity_tokens": "a whole number of tokens from 1 to 2**53 (per reading instance)",
    "writing_kv_capacity_tokens": "a whole number of tokens from 1 to 2**53 (per writing instance)",
    "preset": "a preset name like a100-80gb/llama-3-8b/tp1/vidur-sarathi (python -m disagg_simpy presets lists them)",
    "kv_path": "intra_node or inter_node (which of a preset's KV ship costs a split pays)",
    "schedule": (f"a list of 1 to {MAX_PERIODS:,} periods like {{until_s: 3600, rate_per_s: 5}} (optionally "
                 "prompt_mix, reply_words), in order"),
    "until_s": f"a number of seconds > 0, up to {MAX_TIME_S:g} (the period's end)",
    "rate_curve": "a mapping {diurnal: {mean_per_s, amplitude, period_s, phase_s}}",
    "diurnal": "a mapping {mean_per_s: M, amplitude: A, period_s: P, phase_s: F}",
    "mean_per_s": "a number of requests per second > 0",
    "amplitude": "a number from 0 to 1 (the swing, as a share of mean_per_s)",
    "period_s": f"a number of seconds > 0, up to {MAX_TIME_S:g}",
    "phase_s": f"a number of seconds >= 0, up to {MAX_TIME_S:g} (when the rate peaks)",
    # E12: roles that change
    "roles": ("static, {schedule: [{from_s: S, reading_gpus: N}, ...], switch_s: S} or {policy: queue, switch_s, "
              "check_s, cooldown_s, wait_s, gap_ms}"),
    "policy": "queue (the one policy; or a schedule of reading GPUs instead)",
    "switch_s": f"a number of seconds >= 0, up to {MAX_TIME_S:g} (a move's warm-up)",
    "check_s": f"a number of seconds > 0, up to {MAX_TIME_S:g} (how often the policy looks)",
    "cooldown_s": f"a number of seconds >= 0, up to {MAX_TIME_S:g} (from one move to the next, at least)",
    "wait_s": f"a number of seconds > 0, up to {MAX_TIME_S:g} (how long a prompt waits before reading is short)",
    "gap_ms": "a number of ms > 0, up to 1e+06 (the gap at which writing is short)",
    "from_s": f"a number of seconds >= 0, up to {MAX_TIME_S:g} (when the step starts)",
    # E13: prefix caching, routers, synthetic prefixes and sessions
    "prefix_cache_tokens": "a whole number of tokens per instance from 1 to 2**53 (at least prefix_block_tokens), "
                           "or no key (no cache)",
    "prefix_block_tokens": "a whole number of tokens from 1 to 2**53 (default 512; a divisor of 512 on a mooncake trace)",
    "router": "one of " + ", ".join(get_args(Scenario.model_fields["router"].annotation)),
    "router_load_cap_tokens": "a whole number of tokens from 1 to 2**53 (router: prefix_aware only)",
    "per_cached_token_ms": f"a number of ms >= 0, up to {MAX_COST_MS:g} (E13)",
    "prefixes": "a mapping {share: S, groups: G, tokens: [low, high], zipf: Z}",
    "groups": "a whole number of prefix groups from 1 to 100,000",
    "zipf": "a number from 0 to 10 (the popularity exponent; 0: groups alike)",
    "sessions": "a mapping {turns: [low, high], think_s: [low, high]}",
    "turns": "a range [low, high] of whole numbers of turns from 1 to 1000",
    "think_s": f"a range [low, high] of seconds from 0 to {MAX_TIME_S:g}",
    # GPU kinds and their prices
    "gpu": "a GPU kind, one of " + ", ".join(gpus.NAMES),
    "reading_gpu": "a GPU kind, one of " + ", ".join(gpus.NAMES),
    "writing_gpu": "a GPU kind, one of " + ", ".join(gpus.NAMES),
    "prices": f"a mapping of GPU kind to USD per GPU-hour (> 0, up to {gpus.MAX_PRICE:g}), like {{h100-80gb: 2.49}}",
}
#: Keys whose meaning depends on the mapping that holds them: (parent key, key).
_NESTED_EXPECT = {
    ("roles", "schedule"): "a list of 1 to 10,000 steps like {from_s: 3600, reading_gpus: 2}, in order",
    ("prefixes", "tokens"): "a range [low, high] of whole numbers of tokens from 1 to 10,000,000",
    ("speculative", "tokens"): E16_TOKENS,
}
_ITEM_EXPECT = {  # a list's items, by the list's key
    "arrangements": "a mapping like {name: same-gpu, kind: colocated, gpus: 4}",
    "schedule": "a mapping like {until_s: 3600, rate_per_s: 5}",
    "prompt_mix": "a mapping like {share: 0.3, tokens: [3000, 8000]}",
    "tokens": "a whole number of tokens from 1 to 2**53",
    "reply_words": "a whole number of words from 1 to 2**53",
    "edges": "a whole number from 1 to 2**53",
    "weights": f"a number >= 0, up to {MAX_WEIGHT:g}",
    "turns": "a whole number of turns from 1 to 1000",
    "think_s": f"a number of seconds from 0 to {MAX_TIME_S:g}",
}
_RANGES = ("tokens", "reply_words")
_WORKLOAD_TAGS: dict[str, type[BaseModel]] = {"<synthetic>": SyntheticWorkload, "<trace>": TraceWorkload}
_LENGTH_MODELS: dict[str, type[BaseModel]] = {"<histogram>": HistogramLength, "<lognormal>": LognormalLength,
                                              "<fixed>": FixedLength}


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
        if isinstance(p, str) and p in KINDS and len(clean) >= 2 and clean[-2] == "arrangements" and isinstance(clean[-1], int):
            model = KINDS[p]
            continue
        if isinstance(p, str) and (p.startswith("function-") or p in LENGTH_TAGS):
            if p in LENGTH_TAGS:
                model = _LENGTH_MODELS.get(p)
            continue
        clean.append(p)
        models.append(model)
        if isinstance(p, int):
            parent = clean[-2] if len(clean) >= 2 else None
            items: dict[str, type[BaseModel]] = {"prompt_mix": PromptClass, "schedule": Period}
            model = items.get(str(parent))
        elif model is Scenario:
            parts: dict[str, type[BaseModel]] = {"cost": Cost, "slo": Slo, "workload": SyntheticWorkload,
                                                 "speculative": Speculative}
            model = parts.get(p)
        elif model is not None and model in KINDS.values() and p in side_cost_keys(model):  # type: ignore[arg-type]
            model = SideCost
        elif model in (HistogramLength, LognormalLength) and p in ("histogram", "lognormal"):
            model = Histogram if p == "histogram" else Lognormal
        elif (model, p) in ((SyntheticWorkload, "rate_curve"), (RateCurve, "diurnal")):
            model = RateCurve if p == "rate_curve" else Diurnal
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


def _keys(model: type[BaseModel]) -> list[str]:
    """The keys a user writes in a model's mapping: each field under its alias (`roles`, never
    the internal `role_changes`), `source` (set by the loader) left out."""
    return [field.alias or name for name, field in model.model_fields.items() if name != "source"]


def _unknown_key(bad: str, model: type[BaseModel] | None) -> str:
    if model is None:
        return "unknown key"
    allowed = _keys(model)
    siblings: dict[type[BaseModel], list[type[BaseModel]]] = {
        SyntheticWorkload: [TraceWorkload], TraceWorkload: [SyntheticWorkload],
        **{kind: [k for k in KINDS.values() if k is not kind] for kind in KINDS.values()}}
    other = next((m for m in siblings.get(model, []) if bad in _keys(m)), None)
    what: dict[type[BaseModel], str] = {SyntheticWorkload: "synthetic traffic", TraceWorkload: "a trace workload",
                                        **{cls: f"a {name} arrangement" for name, cls in KINDS.items()}}
    if model is SideCost and bad == "kv_ship_ms_per_token":
        return (f"unknown key in a cost mapping (a split sets kv_ship_ms_per_token on the arrangement itself); "
                f"expected one of {', '.join(allowed)}")
    if other is not None:
        return f"unknown key for {what[model]} (it belongs to {what[other]}); expected one of {', '.join(allowed)}"
    close = difflib.get_close_matches(bad, allowed, n=1, cutoff=0.6)
    if not close:
        close = [f for f in allowed if f.startswith(bad) or bad.startswith(f)][:1]
    if close:
        return f"unknown key (did you mean {close[0]!r}?)"
    return f"unknown key, expected one of {', '.join(allowed)}"


def _pick(errors: list[ErrorDetails]) -> ErrorDetails:
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
    got: Any = e.get("input")
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
    elif kind == "too_long" and isinstance(got, list | tuple) and len(got) > 20:  # (a long list: its length)
        body = f"got a list of {len(got):,} entries, expected {_expected(loc)}"
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
        text += f" (with {', '.join(_flags_named(flags, body).values())} from the command line)"
    return text


def _flags_named(flags: dict[str, str], body: str) -> dict[str, str]:
    """The command-line flags an error's text is about (their key, like measure_s, in it), else
    all of them: '--measure-s 5' for a window's error, never a --seeds that had no part in it."""
    named = {k: v for k, v in flags.items() if re.search(rf"\b{re.escape(k.rsplit('.', 1)[-1])}\b", body)}
    return named or flags


def _expected(loc: tuple) -> str:
    if not loc:
        return "a YAML mapping of scenario keys"
    last = loc[-1]
    if isinstance(last, int) and len(loc) >= 3 and (str(loc[-3]), str(loc[-2])) == ("roles", "schedule"):
        return "a mapping like {from_s: 3600, reading_gpus: 2}"
    if isinstance(last, int) and len(loc) >= 3 and (str(loc[-3]), str(loc[-2])) == ("prefixes", "tokens"):
        return "a whole number of tokens from 1 to 10,000,000"
    if isinstance(last, int):
        return _ITEM_EXPECT.get(str(loc[-2]) if len(loc) >= 2 else "", "a valid item")
    if len(loc) >= 2 and (str(loc[-2]), str(last)) in _NESTED_EXPECT:
        return _NESTED_EXPECT[(str(loc[-2]), str(last))]
    if len(loc) >= 2 and loc[-2] == "on_time_pct":
        return "a share from 0 to 100 (%)"
    if last == "cost" and "arrangements" in loc:
        return _SIDE_COST
    if last == "preset" and loc[0] == "slo":
        return "a named SLO rule: " + ", ".join(SLO_PRESET_NAMES)
    if last == "gap_ms" and loc[0] == "slo":  # (a roles policy's gap_ms means another thing)
        return f"a number of ms > 0, up to {MAX_TIME_S * 1e3:g}, or null (off)"
    if last == "name" and len(loc) == 1:
        return "a scenario " + _NAME.removeprefix("a ")
    return _EXPECT.get(str(last), "a valid value")


def validate(raw: Any, source: str, node: yaml.Node | None = None, flags: dict[str, str] | None = None) -> Scenario:
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


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file (safe loader: a file can never build objects)."""
    path = Path(path)
    text = read_text_file(path, "a scenario YAML file", MAX_SCENARIO_BYTES)
    raw, node = parse_yaml(text, str(path))
    return validate(raw, str(path), node)

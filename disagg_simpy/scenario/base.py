"""Building blocks of the scenario models: strict pydantic models, value types, and how a value
is shown in a one-line error (`_show`)."""

from __future__ import annotations

import datetime
import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from .limits import MAX_COST_MS, MAX_COUNT, MAX_GPUS, MAX_TIME_S

Seconds = Annotated[float, Field(gt=0, le=MAX_TIME_S)]
NonNegSeconds = Annotated[float, Field(ge=0, le=MAX_TIME_S)]
Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Gpus = Annotated[int, Field(ge=1, le=MAX_GPUS)]
CostMs = Annotated[float, Field(ge=0, le=MAX_COST_MS)]
Name = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._-]+$")]

_NAME = "a name of letters, digits, '.', '_' and '-' (not only dots)"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def _joined(texts, budget: int) -> str:
    """Comma-joined texts, ending in '...' once about `budget` characters are used."""
    parts: list[str] = []
    used = 2
    for text in texts:
        if used + len(text) > budget and parts:
            parts.append("...")
            break
        parts.append(text)
        used += len(text) + 2
    return ", ".join(parts)


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
    inner = max(8, budget // 3)
    if isinstance(value, (list, tuple, set)):
        return "[" + _joined((_show(item, inner) for item in value), budget) + "]"
    if isinstance(value, dict):
        items = (f"{k if isinstance(k, str) else _show(k, 16)}: {_show(v, inner)}" for k, v in value.items())
        return "{" + _joined(items, budget) + "}"
    if isinstance(value, BaseModel):
        return _show(value.model_dump(mode="python"), budget)
    return repr(value)[:budget]


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

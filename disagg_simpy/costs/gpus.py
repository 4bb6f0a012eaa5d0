"""GPU kinds, named as the presets name them (`a100-80gb/...`): memory, power and a default
price per GPU-hour, each with where it comes from. A scenario's `prices:` (or `--price
KIND=USD`) overrides a price; `python -m disagg_simpy presets gpus` prints the table.

Prices are one provider's public on-demand list prices per GPU (Spheron's, read from its own
blog posts on the dates given), so the kinds compare at one provider's rates; they leave out
networking, storage and any reserved or spot discount (docs/cost.md). Memory and power (board
power, W) are those in NVIDIA's AIConfigurator system files (`systems/<gpu>_sxm.yaml`,
Apache-2.0), which state the SXM boards' data-sheet figures.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

SPHERON_A100_H100 = ("Spheron on-demand list price, 'NVIDIA A100 vs H100' (spheron.network blog), "
                     "prices as of 2026-05-01")
SPHERON_H200_B200 = ("Spheron on-demand list price, 'NVIDIA H200 vs B200 vs GB200' (spheron.network blog), "
                     "prices as of 2026-03-17")
AICONFIGURATOR = "AIConfigurator (ai-dynamo/aiconfigurator @ 095f58a, 2026-08-21, Apache-2.0) systems/{}_sxm.yaml"


@dataclass(frozen=True)
class GpuKind:
    """One GPU kind: memory (GiB), board power (W), default price (USD per GPU-hour)."""

    name: str
    label: str
    memory_gib: float
    power_w: float
    price_per_hour: float
    price_source: str
    spec_source: str


KINDS: dict[str, GpuKind] = {k.name: k for k in (
    GpuKind("a100-80gb", "A100-80GB SXM", 80, 400, 1.64, SPHERON_A100_H100, AICONFIGURATOR.format("a100")),
    GpuKind("h100-80gb", "H100-80GB SXM", 80, 700, 2.90, SPHERON_A100_H100, AICONFIGURATOR.format("h100")),
    GpuKind("h200", "H200-141GB SXM", 141, 700, 4.54, SPHERON_H200_B200, AICONFIGURATOR.format("h200")),
    GpuKind("b200", "B200-180GB SXM", 180, 1000, 6.03, SPHERON_H200_B200, AICONFIGURATOR.format("b200")),
)}
NAMES = tuple(KINDS)
#: the most a price may be, USD per GPU-hour (a typo guard: no GPU rents for more)
MAX_PRICE = 1000.0


def problem(kind: object) -> str | None:
    """Why `kind` is no GPU kind (with a did-you-mean), or None."""
    if isinstance(kind, str) and kind in KINDS:
        return None
    if not isinstance(kind, str):
        return f"got {kind!r}, expected a GPU kind: one of {', '.join(NAMES)}"
    near = [n for n in NAMES if n.startswith(kind.lower())] or difflib.get_close_matches(kind.lower(), NAMES, n=1,
                                                                                          cutoff=0.5)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return f"got {kind!r}, no such GPU kind; {hint}expected one of {', '.join(NAMES)} (python -m disagg_simpy presets gpus)"


def price_problem(value: object) -> str | None:
    """Why `value` is no price in USD per GPU-hour, or None (a number above 0, at most MAX_PRICE)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and 0 < value <= MAX_PRICE:  # type: ignore[operator]
        return None
    return f"got {value!r}, expected a price in USD per GPU-hour above 0 and at most {MAX_PRICE:g}"


def of_preset(preset: str | None) -> str | None:
    """The GPU kind a preset name starts with (`h100-80gb/llama-2-70b/tp4/vllm-splitwise` -> `h100-80gb`), or None."""
    if not preset:
        return None
    kind = preset.split("/", 1)[0]
    return kind if kind in KINDS else None


def swap(preset: str, kind: str) -> str:
    """The same preset name on another GPU kind (its model, TP and engine kept)."""
    return "/".join([kind, *preset.split("/")[1:]])


def table(prices: dict[str, float] | None = None) -> str:
    """The kinds as an aligned table (prices as given, defaults elsewhere), sources below."""
    prices = prices or {}
    rows = [("kind", "GPU", "memory GiB", "power W", "USD per GPU-hour", "price source")]
    for k in KINDS.values():
        own = k.name in prices
        price = f"{prices[k.name]:.2f} (given)" if own else f"{k.price_per_hour:.2f}"
        rows.append((k.name, k.label, f"{k.memory_gib:g}", f"{k.power_w:g}", price,
                     "given" if own else k.price_source.split(",")[0]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in rows]
    sources = sorted({k.price_source for k in KINDS.values()})
    return "\n".join([*lines, "", "prices: " + "; ".join(sources) + ". One provider's on-demand list, per GPU; "
                      "no networking, storage or reserved/spot discount (docs/cost.md).",
                      f"memory and power: {AICONFIGURATOR.format('<gpu>')} (SXM boards' data-sheet figures).",
                      "Override a price in a scenario (prices: {h100-80gb: 2.49}) or with --price KIND=USD."])

"""The map: over the offered rate (x) and one traffic knob (y), which arrangement keeps the
most replies on time, by how much, and where the top two are too close to call.

Each cell runs every arrangement on the same requests (every seed), to the verdict cap (its
on-time shares are exact). The winner has the highest mean on-time share; the runner-up the
next; they are too close to call when the paired 95% interval of their difference (seed by
seed, results/intervals.py) includes 0.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..errors import InputError
from ..results.columns import names
from ..results.paired import paired_difference
from ..scenario.lengths import length_bounds, length_raw
from ..scenario.schema import Scenario, SyntheticWorkload
from .grid import RATE, check_key, parse_rates, parse_set, resolve, shown
from .runner import Runner, Task

LONG_SHARE = "long_prompt_share"  # the default y: the share of requests in the longest prompt class
MAP_COLUMNS = names("map")


def parse_y(scenario: Scenario, text: str | None) -> tuple[str, list[Any]]:
    """`--y KEY=V1,V2,...` or `--y KEY=START:STOP:STEP`; default: the long-prompt share 0-1."""
    if text is None:
        text = f"{LONG_SHARE}=0:0.95:0.05"  # 20 values
    key, _, values = text.partition("=")
    key = key.strip()
    if key == LONG_SHARE:
        if not isinstance(scenario.workload, SyntheticWorkload) or len(scenario.workload.prompt_mix) < 2:
            raise InputError(f"--y {LONG_SHARE}: the scenario's traffic has no prompt classes to share out, expected "
                             "synthetic traffic with two or more prompt_mix classes (or another --y key)")
        if ":" in values and "[" not in values:
            out = [0.0 if v < 1e-12 else v for v in (float(f"{x:.12g}") for x in _range(values))]
        else:
            _, out = parse_set(text, "--y")
        for v in out:
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v <= 1:
                raise InputError(f"--y {LONG_SHARE}: got {v!r}, expected shares from 0 to 1")
        return key, [float(v) for v in out]
    if ":" in values and "[" not in values:
        out = _range(values, f"--y {key}")
    else:
        key, out = parse_set(text, "--y")
    check_key(scenario, key, "--y", (LONG_SHARE,))
    return key, out


def _range(values: str, flag: str = f"--y {LONG_SHARE}") -> list[float]:
    start, _, rest = values.partition(":")
    if float(start or "nan") == 0:  # parse_rates wants values > 0: shift by the step
        stop, _, step = rest.partition(":")
        try:
            n = math.floor(float(stop) / float(step) + 1e-9)
        except (ValueError, ZeroDivisionError):
            raise InputError(f"{flag}: got {values!r}, expected START:STOP:STEP") from None
        return [0.0, *(float(f"{float(step) * i:.12g}") for i in range(1, n + 1))]
    return parse_rates(values, flag)


def with_long_share(scenario: Scenario, share: float) -> Scenario:
    """The traffic with `share` of requests in the longest prompt class; the other classes keep
    their proportions (a class whose share comes to 0 is left out)."""
    assert isinstance(scenario.workload, SyntheticWorkload)  # (the map's y-axis flag checks it first)
    mix = list(scenario.workload.prompt_mix)
    longest = max(range(len(mix)), key=lambda i: length_bounds(mix[i].tokens)[1])
    rest = 1 - mix[longest].share
    classes: list[dict[str, Any]] = []
    for i, c in enumerate(mix):
        s = share if i == longest else (1 - share) * (c.share / rest if rest > 0 else 1 / (len(mix) - 1))
        if s > 0:
            classes.append({"share": s, "tokens": length_raw(c.tokens)})
    total = sum(c["share"] for c in classes)
    for cls in classes:
        cls["share"] /= total
    return scenario.with_overrides(flags={"workload.prompt_mix": f"--y {LONG_SHARE}={share:g}"},
                                   **{"workload.prompt_mix": classes})


def point_scenario(scenario: Scenario, rate: float, key: str, value: Any) -> Scenario:
    s = resolve(scenario, {RATE: rate})
    return with_long_share(s, value) if key == LONG_SHARE else resolve(s, {key: value})


def default_y(scenario: Scenario, key: str) -> Any:
    """The scenario's own value of the y knob (the marker on the map)."""
    if key == LONG_SHARE:
        assert isinstance(scenario.workload, SyntheticWorkload)  # (the map's y-axis flag checks it first)
        mix = scenario.workload.prompt_mix
        return max(mix, key=lambda c: length_bounds(c.tokens)[1]).share
    node: Any = scenario.model_dump(mode="python")
    node["arrangements"] = {a["name"]: a for a in node["arrangements"]}
    for part in key.split("."):
        node = node[part]
    return shown(list(node) if isinstance(node, tuple) else node)


def winner_words(slo) -> str:
    """What a map cell's winner has, after the scenario's rule (`_cell`): 'most replies on
    time', 'most requests meeting TTFT <= 0.25 s ...', or under the percentiles criterion
    'lowest worst figure / limit'."""
    return "most " + slo.share_words() if slo.criterion == "per_request" else "lowest worst figure / limit"


def winners(scenario: Scenario, rates: list[float], key: str, values: list[Any], seeds: tuple[int, ...],
            runner: Runner) -> pd.DataFrame:
    """map.csv: one row per cell (rate x y value)."""
    cells = [(rate, v) for v in values for rate in rates]
    per_request = scenario.slo.criterion == "per_request"  # (percentiles: whole runs)
    tasks = [Task(point_scenario(scenario, rate, key, v), seed, verdicts_only=per_request)
             for rate, v in cells for seed in seeds]
    results = runner.run(tasks, "runs (cells x seeds)")
    rows = []
    n = len(seeds)
    for i, (rate, v) in enumerate(cells):
        block = pd.DataFrame([r for rows in results[i * n:(i + 1) * n] for r in rows])
        rows.append(_cell(block, rate, key, v, per_request))
    return pd.DataFrame(rows, columns=list(MAP_COLUMNS))


def _cell(block: pd.DataFrame, rate: float, key: str, value: Any, per_request: bool = True) -> dict:
    """The cell's winner: the most on time (per request), or with the percentiles criterion the
    lowest mean over seeds of `slo_ratio` (its figure furthest over, or nearest under, its limit)."""
    means = block.groupby("arrangement", sort=False)["on_time_pct"].mean().dropna()
    order = means.sort_values(ascending=False, kind="stable")
    if not per_request:
        ratios = block.groupby("arrangement", sort=False)["slo_ratio"].mean().dropna()
        order = means[ratios.sort_values(kind="stable").index]
    row = {"rate_per_s": rate, "y_key": key, "y_value": shown(value)}
    if order.empty:
        return {**row, "winner": "", "winner_on_time_pct": math.nan, "runner_up": "",
                "runner_up_on_time_pct": math.nan, "too_close": False}
    winner = str(order.index[0])
    row.update(winner=winner, winner_on_time_pct=float(order.iloc[0]))
    if len(order) < 2:
        return {**row, "runner_up": "", "runner_up_on_time_pct": math.nan, "too_close": False}
    second = str(order.index[1])
    if per_request:
        d = paired_difference(block, winner, second)
    else:  # how much lower the winner's ratio is
        d = paired_difference(block, second, winner, "slo_ratio")
    too_close = bool(d.low <= 0) if d.n > 1 and not math.isnan(d.low) else bool(d.mean <= 0)
    return {**row, "runner_up": second, "runner_up_on_time_pct": float(order.iloc[1]), "too_close": too_close}

"""Documented limits: every run stays bounded in memory and time, and every time fits int64 ns.

A scenario past a limit is refused with a one-line error (exit code 2) before anything runs.
The numbers are in docs/guarantees.md ("Limits"); change them here and there together.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: set by `one_arrangement_at_a_time`: the limits on rows kept count one arrangement, not all
_ALONE: ContextVar[bool] = ContextVar("one_arrangement_at_a_time", default=False)


@contextmanager
def one_arrangement_at_a_time() -> Iterator[None]:
    """Inside this block, scenarios are checked as work that keeps one arrangement's rows at a
    time (the batch commands: each task runs its arrangements one by one and keeps summary rows
    only), so the kept-rows limit counts the largest arrangement, not their sum."""
    token = _ALONE.set(True)
    try:
        yield
    finally:
        _ALONE.reset(token)

#: Requests a run may expect up to the safety cap (rate x max_sim_s, or a trace's rows). Each
#: request that arrives costs about 1.3 KB while an arrangement runs (5 million: 6.5 GB, 100 s).
MAX_REQUESTS = 5_000_000
#: Iterations one arrangement could run before the cap: GPUs x max_sim_s / iteration_ms
#: (each iteration lasts at least iteration_ms). About 300 bytes each while it runs.
MAX_ITERATIONS = 10_000_000
#: Rows one seed's run keeps for its results, over all arrangements (requests seen, iterations
#: and reads; about 100-150 bytes each): checked before the run from the expected requests and
#: the iteration bounds.
MAX_KEPT_ROWS = 25_000_000
#: Rows a run writes over all its seeds (requests, iterations, reads, freezes), checked after
#: the first of several seeds from what it wrote: seeds run one at a time and are not kept, so
#: this bounds the files (about 60-90 bytes a row as CSV: 20 GB), not memory.
MAX_WRITTEN_ROWS = 250_000_000
#: Prompt blocks of all requests with a prefix cache (E13): each request's cache block ids are
#: kept for the run (prefix_block_tokens each; a session's turn resends every earlier turn, so
#: its blocks grow with the square of its turns). About 50 bytes each while a run lasts.
MAX_PROMPT_BLOCKS = 20_000_000
#: GPUs in one arrangement (reading + writing on a split).
MAX_GPUS = 1024
#: Arrangements in one scenario; in a batch command, whose tasks keep one arrangement's rows at a
#: time and whose table one row each, MAX_BATCH_ARRANGEMENTS (a 64-GPU plan has 320 candidates).
MAX_ARRANGEMENTS = 100
MAX_BATCH_ARRANGEMENTS = 10_000


def arrangements_limit() -> int:
    """The most arrangements a scenario may hold here: more inside `one_arrangement_at_a_time`."""
    return MAX_BATCH_ARRANGEMENTS if _ALONE.get() else MAX_ARRANGEMENTS
#: seeds a scenario or --seeds may ask for
MAX_SEEDS = 10_000
#: Any time the model keeps, in seconds: max_sim_s, windows, arrivals, a KV ship, an SLO
#: (about 31.7 years; int64 nanoseconds hold 292 years, so sums of two never overflow).
MAX_TIME_S = 1e9
#: Tokens of one prompt, words of one reply, chunk_tokens: whole numbers up to 2**53
#: (exact in float64, as trace readers check).
MAX_COUNT = 2**53
#: The mean-gap SLO in ms: replies of up to MAX_ITERATIONS words x the limit must fit int64 ns.
MAX_MEAN_GAP_MS = 100_000.0
#: The shortest iteration, in ms (1 ns): a shorter one would round to 0 ns and never end.
MIN_ITERATION_MS = 1e-6
#: The largest cost of any kind, in ms per iteration, reply or token.
MAX_COST_MS = MAX_TIME_S * 1e3
#: burstiness_cv of made-up Gamma arrivals.
MAX_BURSTINESS_CV = 100.0
#: burstiness (the Gamma shape of synthetic arrivals, CV = 1/sqrt(shape)): the CV from 0.001 to 100.
MIN_BURSTINESS = 1 / MAX_BURSTINESS_CV**2
MAX_BURSTINESS = 1e6
#: Scenario files (YAML) and trace files, in bytes; trace rows (parsing 5 million rows takes
#: about 4 GB and 30 s).
MAX_SCENARIO_BYTES = 1 << 20
MAX_TRACE_BYTES = 256 << 20
MAX_TRACE_ROWS = 5_000_000
#: One line of a trace, in bytes (the public traces' longest is under 3 KB), and one cell a
#: reader converts (a number or a timestamp), in characters: bounds the work a bad file costs.
MAX_LINE_BYTES = 1 << 16
MAX_CELL_CHARS = 100
#: Values a scenario file may build, counting each YAML alias and merge key where it is used
#: (a 20-line file of nested merges could otherwise build billions).
MAX_YAML_VALUES = 100_000


def count_text(n: float) -> str:
    """A count for messages: 5,000,000 or 6.3e+11."""
    return f"{n:,.0f}" if n < 1e12 else f"{n:.3g}"


def iteration_bound(n_instances: int, cap_s: float, iteration_ms: float) -> float:
    """The most iterations `n_instances` instances can run in `cap_s` (each lasts >= iteration_ms;
    an instance of TP GPUs runs one iteration at a time, so instances count, not GPUs)."""
    return n_instances * (cap_s * 1e3 / iteration_ms + 1)


def _instances_text(a) -> str:
    n, gpus = a.n_instances, a.n_gpus
    return f"{n} instance{'s' * (n != 1)}" + ("" if n == gpus else f" of {gpus} GPUs")


def iterations_problem(arrangements, cap_s: float, cost) -> str | None:
    """`None`, or why an arrangement (or all of them) could run too many iterations before the cap
    (`cost`: the scenario's cost figures; an arrangement's own, E1, may be shorter)."""
    for a in arrangements:
        iteration_ms = a.shortest_iteration_ms(cost)
        bound = iteration_bound(a.n_instances, cap_s, iteration_ms)
        if bound > MAX_ITERATIONS:
            return (
                f"got {iteration_ms:g} ms, with which {a.name} ({_instances_text(a)}) could run "
                f"{count_text(bound)} iterations before the cap at {cap_s:g} s, above the limit of "
                f"{count_text(MAX_ITERATIONS)}; expected a longer iteration_ms, a lower max_sim_s "
                f"or fewer instances (fewer GPUs or a larger tp)"
            )
    if _ALONE.get():
        return None  # each arrangement was checked alone above
    total = sum(iteration_bound(a.n_instances, cap_s, a.shortest_iteration_ms(cost)) for a in arrangements)
    iteration_ms = min(a.shortest_iteration_ms(cost) for a in arrangements)
    if total > MAX_KEPT_ROWS:
        return (
            f"got {iteration_ms:g} ms, with which the {len(arrangements)} arrangements could run "
            f"{count_text(total)} iterations in all before the cap at {cap_s:g} s, above the limit of "
            f"{count_text(MAX_KEPT_ROWS)} rows kept; expected a longer iteration_ms, a lower max_sim_s "
            f"or fewer arrangements"
        )
    return None


def requests_problem(n_requests: float, n_arrangements: int, n_seeds: int = 1) -> str | None:
    """`None`, or why a run would see or keep too many requests (expected, or a trace's rows)."""
    if n_requests > MAX_REQUESTS:
        return f"{count_text(n_requests)} requests, above the limit of {count_text(MAX_REQUESTS)}"
    kept = n_requests * (1 if _ALONE.get() else n_arrangements) * n_seeds
    if kept > MAX_KEPT_ROWS:
        seeds = f" x {n_seeds} seeds" if n_seeds > 1 else ""
        return (
            f"{count_text(n_requests)} requests x {n_arrangements} arrangements{seeds} = {count_text(kept)} "
            f"rows to keep, above the limit of {count_text(MAX_KEPT_ROWS)}"
        )
    return None


def blocks_problem(n_blocks: int, block_tokens: int) -> str | None:
    """`None`, or why the requests' prompt blocks (E13's cache block ids) are too many to keep."""
    if n_blocks > MAX_PROMPT_BLOCKS:
        return (f"{count_text(n_blocks)} prompt blocks of {block_tokens:,} tokens in all, above the limit of "
                f"{count_text(MAX_PROMPT_BLOCKS)} (about 50 bytes each)")
    return None


def ship_problem(kv_ship_ms_per_token: float, longest_prompt: int) -> str | None:
    """`None`, or why the longest prompt's KV ship would not fit the clock."""
    ship_s = kv_ship_ms_per_token * longest_prompt / 1e3
    if ship_s > MAX_TIME_S:
        return (
            f"got {kv_ship_ms_per_token:g} ms, with which the longest prompt ({count_text(longest_prompt)} "
            f"tokens) ships in {ship_s:.3g} s, above the limit of {MAX_TIME_S:g} s; expected a smaller "
            f"cost or shorter prompts"
        )
    return None

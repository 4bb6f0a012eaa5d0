"""The registry of output columns: every column a command writes, with its unit, a short label,
a one-line meaning and the table it belongs to.

Summary rows (`summary.csv`, `RunResult.summary`, a sweep's rows), the console table, the sweep
table and the page's table are all built from this list; a test checks it against the docs'
outputs reference. To add a column: add it here, in the order the table shows it, and fill it
where its family is computed (`metrics.summary_row`, `metrics.option_figures`,
`breakdown.why_late_row`, ...): `summary_figures` refuses a row whose names differ.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

#: The tables, by the file each is written to.
TABLES = ("summary", "goodput", "plan", "map", "slo_scale", "switches", "plan_over_time", "over_time")


@dataclass(frozen=True)
class Column:
    """One output column. `family` says which code fills it (summary columns: `figures` of the
    model, `options` of E4/E5, empty when off, `paged` of E9, present only when it is on, `why_late`); `decimals` is the console table's
    precision; `page_digits` the page table's (None: not on the page; -1: a share, shown with
    one decimal below 10 and none above); `console`: in the console table by default."""

    name: str
    unit: str
    label: str
    meaning: str
    table: str = "summary"
    family: str = "figures"
    decimals: int = 0
    console: bool = False
    page_digits: int | None = None


SHARE = -1  # page_digits of a share: 4.2 but 42


def _in(table: str, *shared: Column) -> tuple[Column, ...]:
    """Columns shared by several tables, placed in `table`."""
    return tuple(replace(c, table=table) for c in shared)


_GOODPUT_INTERVAL = (
    Column("goodput_low_per_s", "requests/s", "low", "95% interval of goodput, the same statistic: low end "
           "(docs/statistics.md)"),
    Column("goodput_high_per_s", "requests/s", "high", "the same interval's high end"))
_GOODPUT = (Column("goodput_per_s", "requests/s", "goodput/s", "the highest rate found to pass the target"),
            Column("goodput_per_gpu_per_s", "requests/s", "per GPU", "goodput divided by the GPUs"))
_BINDING = Column("binding_limit", "", "fails first",
                  "the limit broken by the most measured requests at the failing rate")

COLUMNS: tuple[Column, ...] = (
    # -- summary.csv: the model's figures (metrics.summary_row) --------------------------------
    Column("arrangement", "", "arrangement", "the arrangement's name, as in the scenario"),
    Column("n_requests", "count", "requests", "measured requests", page_digits=0),
    Column("n_unfinished", "count", "unfinished", "measured requests the safety cap cut off (they count as late)",
           page_digits=0),
    Column("on_time_pct", "%", "on time %", "share of measured requests on time (all three limits met)",
           decimals=1, console=True, page_digits=SHARE),
    Column("late_first_word_pct", "%", "first word late %", "share whose first word came after the first-word limit",
           decimals=1, console=True, page_digits=SHARE),
    Column("late_mean_gap_pct", "%", "words too slow %", "share whose mean gap was over the mean-gap limit",
           decimals=1, console=True, page_digits=SHARE),
    Column("froze_pct", "%", "froze %", "share with a gap over the freeze limit (or unfinished)",
           decimals=1, console=True, page_digits=SHARE),
    Column("first_word_p50_s", "s", "first word p50 s", "median wait for the first word (finished requests)",
           decimals=2, console=True, page_digits=2),
    Column("first_word_p90_s", "s", "first word p90 s", "90th percentile of the wait for the first word",
           decimals=2, console=True, page_digits=2),
    Column("median_mean_gap_ms", "ms", "median mean gap ms",
           "median over replies of each reply's mean gap: the average that hides freezes",
           decimals=1, console=True, page_digits=1),
    Column("longest_gap_ms", "ms", "longest gap ms", "the longest gap between two words of a measured reply",
           decimals=1, console=True, page_digits=0),
    Column("p99_gap_ms", "ms", "p99 gap ms", "99th percentile of all gaps of measured replies, pooled",
           decimals=1, page_digits=0),
    Column("reading_iterating_pct", "%", "reading iterating %",
           "share of the span the reading GPUs spend in iterations (not headroom)", decimals=1, page_digits=0),
    Column("writing_iterating_pct", "%", "writing iterating %",
           "share of the span the writing GPUs spend in iterations (not headroom)", decimals=1, page_digits=0),
    Column("replies_per_writing_iteration", "replies", "replies per writing iteration",
           "mean replies written per iteration of the writing GPUs: how full the writing is", decimals=1),
    Column("prompt_tokens_per_reading_iteration", "tokens", "prompt tokens per reading iteration",
           "mean prompt tokens read per iteration of the reading GPUs", decimals=1),
    Column("words_per_s", "words/s", "words/s", "all words written over the span, per second", page_digits=0),
    # -- summary.csv: the options' figures (metrics.option_figures), empty when off -----------
    Column("kv_peak_reading_pct", "%", "KV peak reading %",
           "E4: the most KV cache any reading GPU held, as a share of its capacity", family="options", decimals=1),
    Column("kv_peak_writing_pct", "%", "KV peak writing %",
           "E4: the most KV cache any writing GPU held, as a share of its capacity", family="options", decimals=1),
    Column("handoff_waited_pct", "%", "waited for memory %",
           "E4 on a split: share of measured requests that waited for a writing GPU's memory",
           family="options", decimals=1),
    Column("link_waited_pct", "%", "waited for link %", "E5: share of measured requests whose ship waited for its link",
           family="options", decimals=1),
    # -- summary.csv: E9's figures (metrics.paged_figures), only when an arrangement is paged --
    Column("n_preemptions", "count", "preemptions", "E9: preemptions of measured requests", family="paged"),
    Column("n_dropped", "count", "dropped", "E9: measured requests dropped past max_preemptions (they count as late)",
           family="paged"),
    # -- summary.csv: why late (breakdown.why_late_row) ----------------------------------------
    Column("late_first_word_only_pct", "%", "late on first word only %", "share late on the first-word limit alone",
           family="why_late", decimals=1),
    Column("late_mean_gap_only_pct", "%", "late on mean gap only %", "share late on the mean-gap limit alone",
           family="why_late", decimals=1),
    Column("late_froze_only_pct", "%", "late on freezes only %", "share late on the freeze limit alone",
           family="why_late", decimals=1),
    Column("late_several_pct", "%", "late on several %", "share late on two limits or more",
           family="why_late", decimals=1),
    Column("n_freezes", "count", "freezes", "freezes of measured replies (the rows of freezes.csv)",
           family="why_late"),
    Column("freezes_by_long_prompt_pct", "%", "freezes by a long prompt %",
           "share of the freezes blamed on a prompt over N tokens", family="why_late", decimals=1),
    # -- goodput.csv (sweep.goodput) -----------------------------------------------------------
    Column("arrangement", "", "arrangement", "the arrangement's name, as in the scenario", "goodput"),
    Column("n_gpus", "count", "gpus", "GPUs the arrangement uses", "goodput"),
    Column("target_pct", "%", "target %", "the on-time share to meet", "goodput"),
    Column("seeds", "count", "seeds", "seeds averaged at each rate", "goodput"),
    Column("measure_s", "s", "measured until s", "the end of the measured window", "goodput"),
    *_in("goodput", *_GOODPUT, *_GOODPUT_INTERVAL),
    Column("passing_rate_per_s", "requests/s", "passes at", "the passing end of the bisection's bracket", "goodput"),
    Column("failing_rate_per_s", "requests/s", "fails at", "the failing end of the bracket (empty: none failed)",
           "goodput"),
    Column("passing_on_time_pct", "%", "on time % passing", "mean on-time share over seeds at the passing rate",
           "goodput"),
    Column("failing_on_time_pct", "%", "on time % failing", "mean on-time share over seeds at the failing rate",
           "goodput"),
    *_in("goodput", _BINDING),
    Column("passing_on_time_low_pct", "%", "low passing", "95% interval of the on-time share at the passing rate: "
           "low end (docs/statistics.md)", "goodput"),
    Column("passing_on_time_high_pct", "%", "high passing", "the same interval's high end", "goodput"),
    Column("failing_on_time_low_pct", "%", "low failing", "95% interval of the on-time share at the failing rate: "
           "low end", "goodput"),
    Column("failing_on_time_high_pct", "%", "high failing", "the same interval's high end", "goodput"),
    Column("n_probes", "count", "probes", "rates probed", "goodput"),
    # -- plan.csv (sweep.plan) -------------------------------------------------------------------
    Column("rank", "count", "rank", "1 = the most goodput (ties: the higher on-time share at the rate)", "plan"),
    Column("arrangement", "", "arrangement", "the name a scenario would give it", "plan"),
    Column("kind", "", "kind", "the arrangement's kind", "plan"),
    Column("gpus", "count", "gpus", "GPUs in all", "plan"),
    Column("reading_gpus", "count", "reading GPUs", "a split's reading GPUs (empty otherwise)", "plan"),
    Column("writing_gpus", "count", "writing GPUs", "a split's writing GPUs (empty otherwise)", "plan"),
    Column("tp", "count", "TP", "GPUs per instance (tensor parallelism) on the same GPU (empty for a split)", "plan"),
    Column("reading_tp", "count", "reading TP", "a split's GPUs per reading instance (empty otherwise)", "plan"),
    Column("writing_tp", "count", "writing TP", "a split's GPUs per writing instance (empty otherwise)", "plan"),
    Column("chunk_tokens", "tokens", "chunk", "the chunk size (empty: whole prompts)", "plan"),
    *_in("plan", *_GOODPUT, *_GOODPUT_INTERVAL),
    Column("on_time_pct_at_rate", "%", "on time % at rate", "mean on-time share at the scenario's rate", "plan"),
    *_in("plan", _BINDING),
    Column("goodput_below_per_s", "requests/s", "below", "left (not searched to its end): two others beat it, so "
           "its goodput is below this (empty when searched)", "plan"),
    # -- map.csv (sweep.winners) -------------------------------------------------------------------
    Column("rate_per_s", "requests/s", "rate", "the cell's offered rate", "map"),
    Column("y_key", "", "y key", "the traffic knob on the y axis", "map"),
    Column("y_value", "", "y value", "its value in the cell (a list as its YAML text)", "map"),
    Column("winner", "", "winner", "the arrangement with the most replies on time (another per-request rule: the "
           "most meeting it; the percentiles criterion: the lowest worst figure / limit)", "map"),
    Column("winner_on_time_pct", "%", "winner on time %", "its mean on-time share over seeds", "map"),
    Column("runner_up", "", "runner-up", "the second", "map"),
    Column("runner_up_on_time_pct", "%", "runner-up on time %", "its mean on-time share over seeds", "map"),
    Column("too_close", "", "too close", "the paired 95% interval of their difference includes 0", "map"),
    # -- slo_scale.csv (sweep.slo_scale, `goodput --vary slo`) -------------------------------------
    Column("arrangement", "", "arrangement", "the arrangement's name, as in the scenario", "slo_scale"),
    Column("n_gpus", "count", "gpus", "GPUs the arrangement uses", "slo_scale"),
    Column("rate_per_s", "requests/s", "rate", "the scenario's offered rate", "slo_scale"),
    Column("target_pct", "%", "target %", "the on-time share to meet", "slo_scale"),
    Column("seeds", "count", "seeds", "seeds averaged at each scale", "slo_scale"),
    Column("slo_scale", "factor", "SLO scale", "the smallest factor on every limit that is on meeting the target "
           "(the passing end of the bracket)", "slo_scale"),
    Column("passing_scale", "factor", "passes at", "the passing end of the bisection's bracket", "slo_scale"),
    Column("failing_scale", "factor", "fails at", "the failing end (empty: none failed)", "slo_scale"),
    Column("passing_on_time_pct", "%", "on time % passing", "mean on-time share over seeds at the passing scale",
           "slo_scale"),
    Column("passing_on_time_low_pct", "%", "low passing", "95% interval of that share: low end (docs/statistics.md)",
           "slo_scale"),
    Column("passing_on_time_high_pct", "%", "high passing", "the same interval's high end", "slo_scale"),
    Column("failing_on_time_pct", "%", "on time % failing", "mean on-time share over seeds at the failing scale",
           "slo_scale"),
    Column("failing_on_time_low_pct", "%", "low failing", "95% interval of that share: low end", "slo_scale"),
    Column("failing_on_time_high_pct", "%", "high failing", "the same interval's high end", "slo_scale"),
    Column("n_probes", "count", "probes", "scales probed", "slo_scale"),
    # -- plan_over_time.csv (sweep.role_plan, `plan --over-time`)---------------------------------
    Column("arrangement", "", "arrangement", "a static split (split-R-W), the switching plan (switching) or the "
           "reactive policy (reactive)", "plan_over_time"),
    Column("part", "", "part", "day (the whole measured window) or period_K (requests arriving in period K)",
           "plan_over_time"),
    Column("start_s", "s", "from", "the part's start", "plan_over_time"),
    Column("end_s", "s", "to", "the part's end", "plan_over_time"),
    Column("on_time_pct", "%", "on time %", "mean on-time share over seeds of the part's measured requests",
           "plan_over_time"),
    Column("on_time_low_pct", "%", "low", "its 95% interval over seeds: low end (docs/statistics.md)", "plan_over_time"),
    Column("on_time_high_pct", "%", "high", "the same interval's high end", "plan_over_time"),
    Column("vs_best_static_pct", "%", "vs best static", "mean over seeds of the on-time share minus the best static "
           "split's (the highest over the day), in points: a paired difference", "plan_over_time"),
    Column("vs_best_static_low_pct", "%", "low", "its 95% interval over seeds: low end", "plan_over_time"),
    Column("vs_best_static_high_pct", "%", "high", "the same interval's high end", "plan_over_time"),
    Column("n_switches", "count", "moves", "moves made over the day (rows of switches.csv), mean over seeds",
           "plan_over_time"),
    # -- switches.csv (results.frames.switches_frame; E12: only when some arrangement's roles change) --
    Column("arrangement", "", "arrangement", "the arrangement's name, as in the scenario", "switches"),
    Column("gpu", "count", "GPU", "the instance that moves (its number: a split numbers its first reading "
           "instances first)", "switches"),
    Column("from_role", "", "from", "the side it leaves: reads or writes", "switches"),
    Column("to_role", "", "to", "the side it joins", "switches"),
    Column("why", "", "why", "schedule, or the policy's reason: reading_wait, writing_gap, writing_memory", "switches"),
    Column("requested_at_s", "s", "asked at", "when the move was decided (the instance stops taking new work)",
           "switches"),
    Column("drained_at_s", "s", "drained at", "when its last reply or read finished there: its warm-up "
           "starts (empty: not yet at the stop)", "switches"),
    Column("serving_at_s", "s", "serving at", "when its warm-up ended and it joined its new side (empty: not "
           "yet at the stop)", "switches"),
    # -- over_time.csv (results.over_time: traffic that changes over time) -------------------------
    Column("arrangement", "", "arrangement", "the arrangement's name, as in the scenario", "over_time"),
    Column("window_start_s", "s", "from s", "the window's start (windows cut 0 to the measured window's end)",
           "over_time"),
    Column("window_end_s", "s", "to s", "the window's end (excluded)", "over_time"),
    Column("n_arrived", "count", "arrived", "requests arriving in the window, measured or not", "over_time"),
    Column("offered_rate_per_s", "requests/s", "offered rate", "n_arrived divided by the window's length",
           "over_time"),
    Column("n_measured", "count", "measured", "measured requests arriving in the window", "over_time"),
    Column("n_on_time", "count", "on time", "of those, the ones on time", "over_time"),
    Column("on_time_pct", "%", "on time %", "n_on_time as a share of n_measured (empty: none measured)", "over_time"),
)

#: E13 (prefix caching): columns `summary.csv` and sweep rows gain when `prefix_cache_tokens` is set
#: (`metrics.prefix_figures`), after the others; `requests.csv` then gains `cached_tokens`.
PREFIX = (
    Column("prefix_hit_pct", "%", "prefix hit %", "E13: cached prompt tokens over all prompt tokens of the measured "
           "requests whose reading began", family="prefix", decimals=1),
    Column("cached_tokens", "tokens", "cached tokens", "E13: prompt tokens of measured requests found cached (not read)",
           family="prefix"),
    Column("reading_saved_s", "s", "reading saved s", "E13: reading time the cache saved the measured requests: "
           "cached tokens x (per_prompt_token_ms - per_cached_token_ms) of the reading side; with E14's "
           "free_prompt_tokens, per_prompt_token_ms only on those beyond their iteration's free ones (reading R72)",
           family="prefix",
           decimals=1),
    Column("prefix_hit_pct_by_instance", "%", "hit % by instance", "E13: prefix_hit_pct of each reading (or "
           "colocated) instance, by instance number, as 'i:pct' separated by spaces", family="prefix"),
)
PREFIX_COLUMNS = tuple(c.name for c in PREFIX)

#: The SLO rule's own columns (`rules.rule_columns`): per request, the shares late on end-to-end
#: latency or scheduling delay (only when that limit is on); with `criterion: percentiles`, each
#: judged figure (the explainer's three always, the others when on), `slo_met` and `slo_ratio`.
RULE = (
    Column("late_e2e_pct", "%", "end-to-end late %", "share whose end-to-end latency (arrival to last word) was over "
           "slo.e2e_s (or unfinished)", family="rule", decimals=1, console=True),
    Column("late_e2e_only_pct", "%", "late on end-to-end only %", "share late on the end-to-end limit alone",
           family="rule", decimals=1),
    Column("late_delay_pct", "%", "delay late %", "share whose scheduling delay (arrival to the start of its first "
           "read) was over slo.delay_s (or never read)", family="rule", decimals=1, console=True),
    Column("late_delay_only_pct", "%", "late on delay only %", "share late on the delay limit alone",
           family="rule", decimals=1),
    Column("slo_first_word_s", "s", "TTFT figure s", "criterion percentiles: the judged percentile of the first-word "
           "waits (no first word: +inf)", family="criterion", decimals=3, console=True),
    Column("slo_mean_gap_ms", "ms", "TPOT figure ms", "criterion percentiles: the judged percentile of the replies' mean "
           "gaps (one-word replies left out; tpot inclusive: end-to-end / words); unfinished: +inf",
           family="criterion", decimals=1, console=True),
    Column("slo_longest_gap_ms", "ms", "longest gap figure ms", "criterion percentiles: the judged percentile of the "
           "replies' longest gaps (unfinished: +inf)", family="criterion", decimals=1, console=True),
    Column("slo_gap_ms", "ms", "TBT figure ms", "criterion percentiles: the judged percentile of every gap of every "
           "measured reply, pooled (each unfinished reply adds one +inf gap)", family="criterion", decimals=1,
           console=True),
    Column("slo_e2e_s", "s", "end-to-end figure s", "criterion percentiles: the judged percentile of end-to-end "
           "latencies (unfinished: +inf)", family="criterion", decimals=3, console=True),
    Column("slo_delay_s", "s", "delay figure s", "criterion percentiles: the judged percentile of scheduling delays, "
           "arrival to first read (never read: +inf)", family="criterion", decimals=3, console=True),
    Column("slo_met", "", "meets the rule", "criterion percentiles: True when every judged figure is within its "
           "limit (the console table: the share of seeds, 0 to 1)", family="criterion", decimals=1, console=True),
    Column("slo_ratio", "factor", "worst figure / limit", "criterion percentiles: the largest judged figure / its limit "
           "(at most 1 meets)", family="criterion", decimals=2),
)
RULE_COLUMNS = tuple(c.name for c in RULE)

#: Costs (docs/cost.md, results/costs.py): columns goodput.csv and plan.csv gain, after the
#: others, when the scenario names a GPU kind or a price (`prices:`, `gpu:` keys, `--price`,
#: `plan --gpu-kinds`): per request at the goodput (the rate at which the target share meets the
#: rule, so not every one of those requests does). summary.csv's are `SUMMARY_COST`.
COST = (
    Column("gpu_kinds", "", "GPU kinds", "each side's GPU kind: 'h100-80gb', or 'h100-80gb reading, a100-80gb "
           "writing' (empty: unknown)", family="cost"),
    Column("dollars_per_hour", "USD/h", "$/h", "what the arrangement's GPUs cost an hour: GPUs x USD per GPU-hour "
           "of their kind (costs/gpus.py, or the scenario's prices:)", family="cost", decimals=2, console=True),
    Column("dollars_per_million", "USD", "$/M at goodput", "dollars per million requests at the goodput: "
           "dollars_per_hour / (goodput_per_s x 3,600) x 1e6 (the target share of them meet the rule; summary.csv's "
           "dollars_per_million_on_time counts only those on time)", family="cost", decimals=2, console=True),
    Column("dollars_per_million_low", "USD", "low", "95% interval of dollars_per_million: low end (from the goodput "
           "interval's high end; empty without an interval)", family="cost", decimals=2),
    Column("dollars_per_million_high", "USD", "high", "the same interval's high end (from the goodput's low end)",
           family="cost", decimals=2),
    Column("requests_per_gpu_hour", "requests", "requests/GPU-h", "requests per GPU-hour at the goodput: "
           "goodput_per_s x 3,600 / GPUs", family="cost", decimals=0),
    Column("power_kw", "kW", "kW", "the GPUs' board power (costs/gpus.py; GPUs only: no host, network or cooling)",
           family="cost", decimals=1),
    Column("requests_per_kwh", "requests", "requests per kWh", "requests per kWh of GPU board power at the goodput",
           family="cost", decimals=0),
)
COST_COLUMNS = tuple(c.name for c in COST)
#: the goodput and plan tables' cost cells, console and page (cli/cost_text.py, page/commands.py), in order
COST_CELLS = ("dollars_per_hour", "dollars_per_million", "requests_per_gpu_hour", "power_kw")


def cost_heading(name: str) -> str:
    """Cost column `name`'s heading in those tables: its label, and "(95% interval)" where the cell
    carries one (the column has `_low` and `_high`)."""
    label = next(c.label for c in COST if c.name == name)
    return f"{label} (95% interval)" if f"{name}_low" in COST_COLUMNS else label


#: summary.csv's costs (results/costs.py `on_time_figures`): besides `dollars_per_hour` and
#: `power_kw`, per request on time in the run (measured requests on time over the measured window)
SUMMARY_COST = (
    Column("dollars_per_million_on_time", "USD", "$/M on time", "dollars per million on-time requests: "
           "dollars_per_hour / (measured requests on time per second x 3,600) x 1e6 (over seeds: at the mean rate, "
           "its interval from the rate's; empty for n_requests traffic; inf: none on time)", family="cost", decimals=2, console=True),
    Column("on_time_per_gpu_hour", "requests", "on time per GPU-h", "on-time requests per GPU-hour: measured "
           "requests on time per second x 3,600 / GPUs", family="cost", decimals=0),
    Column("on_time_per_kwh", "requests", "on time per kWh", "on-time requests per kWh of GPU board power",
           family="cost", decimals=0),
)
#: `plan --iso-cost` / `--iso-power` (sweep/plan_kinds.py): plan.csv's rows, one per pool, gain these
ISO = (
    Column("pool", "", "pool", "all of one GPU kind, or reading on one kind and writing on another", "plan", "cost"),
    Column("vs_best_single_per_million", "USD", "vs best one kind $/M", "a mixed pool's dollars per million requests at "
           "its goodput minus the best pool of one kind's, each at its goodput searched on each seed alone: the mean "
           "over seeds of the paired differences (below 0: the mixed pool is cheaper)", "plan", "cost", decimals=2),
    Column("vs_best_single_low", "USD", "low", "its 95% interval over seeds: low end (docs/statistics.md)", "plan",
           "cost", decimals=2),
    Column("vs_best_single_high", "USD", "high", "the same interval's high end", "plan", "cost", decimals=2),
)
ISO_COLUMNS = tuple(c.name for c in ISO)
#: plan.csv's top two, when plan checks its answer against cost errors (`--cost-error`, or the preset's
#: stated errors; sweep/cost_error.py): the range of their goodput with the costs off (empty elsewhere)
COST_ERROR = (
    Column("cost_error_low_per_s", "requests/s", "low under cost error", "the lowest goodput found with one side's "
           "costs off by up to the error checked (--cost-error, or the preset's stated errors; one side at a time, "
           "the same seeds): the top two only", "plan", "cost_error", decimals=2),
    Column("cost_error_high_per_s", "requests/s", "high under cost error", "the highest goodput found so",
           "plan", "cost_error", decimals=2),
)
COST_ERROR_COLUMNS = tuple(c.name for c in COST_ERROR)
#: summary.csv's (one run has no goodput interval, and its kinds are the scenario's)
SUMMARY_COST_COLUMNS = ("dollars_per_hour", "dollars_per_million_on_time", "on_time_per_gpu_hour", "power_kw",
                        "on_time_per_kwh")

#: Columns a seed-by-seed summary adds (`seed`) and a summary over several seeds (`on_time_vs_best_pct`).
SEED = Column("seed", "count", "seed", "the seed of the row's run (several seeds)")
VS_BEST = Column("on_time_vs_best_pct", "%", "on time vs best", "on-time share minus the best arrangement's in "
                 "the same seed, in points (several seeds)", decimals=1)


def columns(table: str, *families: str) -> tuple[Column, ...]:
    """The columns of `table` (of the given families, or all), in order."""
    return tuple(c for c in COLUMNS if c.table == table and (not families or c.family in families))


def names(table: str, *families: str) -> tuple[str, ...]:
    return tuple(c.name for c in columns(table, *families))


_BY_NAME = {c.name: c for c in (*columns("summary"), SEED, VS_BEST, *PREFIX, *RULE, *COST, *SUMMARY_COST)}


def summary_column(name: str) -> Column:
    """A summary column by name (`seed` and `on_time_vs_best_pct` included)."""
    return _BY_NAME[name]


#: E9's figures: summary.csv has them (after the others) only when some arrangement is paged
PAGED_COLUMNS = names("summary", "paged")
#: summary.csv's columns, in order (`seed` and `on_time_vs_best_pct` come with several seeds; E9's when on)
SUMMARY_COLUMNS = tuple(n for n in names("summary") if n not in PAGED_COLUMNS)
#: the model's figures and the options' (`metrics.summary_row`)
FIGURE_COLUMNS = names("summary", "figures", "options")
#: the options' figures (E4, E5): empty when the option is off
OPTION_COLUMNS = names("summary", "options")
#: which limit late requests broke, and freezes (`breakdown.why_late_row`)
WHY_LATE_COLUMNS = names("summary", "why_late")
#: the console table's columns unless `--wide` (and the costs' console ones, when shown: summary.csv's
#: are `SUMMARY_COST`'s, so both families are read)
CONSOLE_COLUMNS = tuple(c.name for c in columns("summary") if c.console)
COST_CONSOLE_COLUMNS = tuple(c.name for c in (*COST, *SUMMARY_COST) if c.console)
#: the page's table, in this order (each with its `page_digits`)
PAGE_ORDER = ("arrangement", "on_time_pct", "late_first_word_pct", "late_mean_gap_pct", "froze_pct",
              "first_word_p50_s", "first_word_p90_s", "median_mean_gap_ms", "longest_gap_ms", "p99_gap_ms",
              "reading_iterating_pct", "writing_iterating_pct", "words_per_s", "n_requests", "n_unfinished")
PAGE_COLUMNS = tuple(_BY_NAME[n] for n in PAGE_ORDER)


def checked(row: dict, expected: tuple[str, ...], what: str) -> dict:
    """`row` if its keys are exactly `expected` (in any order); else a loud error naming the
    difference, so no column is silently dropped or left empty."""
    if set(row) != set(expected):
        missing, extra = sorted(set(expected) - set(row)), sorted(set(row) - set(expected))
        raise AssertionError(f"{what}: columns missing {missing}, not in the registry {extra}")
    return row

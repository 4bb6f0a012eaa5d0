"""Running many points: each point x seed is one task that returns summary rows, never frames,
so memory stays flat however many points there are.

Tasks run in this process (`workers=1`), in a local process pool, or on a Dask distributed
cluster (`dask_address`; Dask is imported only then). Finished tasks are stored at once
(`store.Store`); a task already in the store is skipped. Results do not depend on where a
task ran: each is a pure function of its resolved scenario and seed.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..model.engine import Engine, GiveUp
from ..results.breakdown import summary_figures
from ..results.metrics import OFF_NS, SLACK_NS, LimitsNs, reply_gaps
from ..scenario.counts import for_gpus
from ..scenario.limits import one_arrangement_at_a_time
from ..scenario.schema import Scenario
from ..workload.stream import make_requests
from .store import Store

if TYPE_CHECKING:
    from multiprocessing.pool import Pool


@dataclass(frozen=True)
class Task:
    """One seed of one resolved scenario: every arrangement (`only` None) or one.

    `verdicts_only` runs need only each reply's verdict: they stop once no measured reply can
    still be on time (`verdict_cap_ns`), which leaves `on_time_pct` exact (other figures may
    differ: their rows have `full` false). With `give_up_below_pct`, a run also stops once its
    on-time share is certainly below that."""

    scenario: Scenario
    seed: int
    only: str | None = None
    give_up_below_pct: float | None = None
    verdicts_only: bool = False
    labels: dict[str, Any] = field(default_factory=dict)  # grid values the runner puts first in each row

    def spec(self) -> dict[str, Any]:
        """What the task asks of the run, for its store key."""
        return {"only": self.only, "give_up_below_pct": self.give_up_below_pct, "verdicts_only": self.verdicts_only}


def verdict_cap_ns(stream, limits: LimitsNs) -> int:
    """The time after which no measured reply can still turn out on time: the last measured
    arrival + the first-word limit + (the longest measured reply's words - 1) x the mean-gap
    limit (each with its 1 ns slack). Every reply on time has finished by then, so a run cut
    there has the same on-time verdicts as a run to the end."""
    measured = stream.measured
    if not measured.any():
        return stream.cap_ns
    n_max = int(stream.n_reply_words[measured].max())
    last = int(stream.arrived_at_ns[measured].max())
    if limits.inclusive:  # TPOT with the first word: finished within words x the limit of arriving
        bound = n_max * (limits.mean_gap + SLACK_NS)
    else:
        bound = limits.first_word + SLACK_NS + (n_max - 1) * (limits.mean_gap + SLACK_NS)
    return min(stream.cap_ns, last + min(bound, limits.e2e + SLACK_NS))


def run_task(task: Task) -> list[dict]:
    """The task's summary rows (one per arrangement run), with `seed` and `below_target`.

    A run stopped early has `below_target` true, `on_time_pct` empty and `on_time_at_most_pct`,
    the most it could have reached; its other figures are empty: they were never measured.
    `full` says whether every figure is that of a run to its end (not `verdicts_only`)."""
    with one_arrangement_at_a_time():  # (in a worker process too) summary rows only, one arrangement at a time
        return _run_task(task)


def _task_stream(task: Task, scenario, limits: LimitsNs) -> tuple[Any, int, GiveUp | None]:
    """The stream a task's arrangements run on (cut at the verdict cap for `verdicts_only`), its
    measured requests, and the early stop."""
    stream = make_requests(scenario, task.seed)
    if task.verdicts_only:
        stream = replace(stream, cap_ns=verdict_cap_ns(stream, limits))
    n_measured = int(stream.measured.sum())
    give_up = None
    if task.give_up_below_pct is not None and n_measured:
        max_late = math.floor(n_measured * (1 - task.give_up_below_pct / 100) + 1e-9) + 1
        # (with TPOT inclusive the model's mean-gap count would not bound the rule's: first word only)
        mean_gap = OFF_NS if limits.inclusive else limits.mean_gap
        give_up = GiveUp(limits.first_word + SLACK_NS, mean_gap + SLACK_NS, max_late)
    return stream, n_measured, give_up


def _run_task(task: Task) -> list[dict]:
    scenario = task.scenario
    limits = LimitsNs.from_slo(scenario.slo)
    per_gpu = scenario.workload.n_requests_per_gpu is not None
    streams: dict[int, tuple[Any, int, GiveUp | None]] = {}  # by GPUs with n_requests_per_gpu (else one)
    rows = []
    for arrangement in scenario.arrangements:
        if task.only is not None and arrangement.name != task.only:
            continue
        size = arrangement.n_gpus if per_gpu else 0
        if size not in streams:
            streams[size] = _task_stream(task, for_gpus(scenario, arrangement.n_gpus), limits)
        stream, n_measured, give_up = streams[size]
        engine = Engine(scenario, arrangement, stream, give_up)
        rec = engine.run()
        if engine.gave_up:
            n_late = engine.n_late_first_word + engine.n_late_mean_gap
            row = {"arrangement": arrangement.name, "n_requests": n_measured,
                   "on_time_at_most_pct": 100.0 * (n_measured - n_late) / n_measured,
                   "late_first_word_at_least_pct": 100.0 * engine.n_late_first_word / n_measured,
                   "late_mean_gap_at_least_pct": 100.0 * engine.n_late_mean_gap / n_measured,
                   "below_target": True}
        else:
            gaps = reply_gaps(rec, limits)
            row = summary_figures(scenario, arrangement, rec, gaps, limits)
            row["below_target"] = False
        row["full"] = not task.verdicts_only
        rows.append({"seed": task.seed, **row})
    return rows


def _ignore_sigint() -> None:
    """Pool workers leave Ctrl-C to the command, which stops them (losing only their runs),
    and end quietly when it terminates them (not with the command's own SIGTERM handler)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _pool_ignoring_sigint(workers: int):
    """A process pool whose workers ignore Ctrl-C and die quietly on SIGTERM from birth: they
    start while this process handles the signals so (a child inherits that), then this
    process's own handlers come back."""
    import multiprocessing
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return multiprocessing.get_context().Pool(workers, initializer=_ignore_sigint)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        return multiprocessing.get_context().Pool(workers, initializer=_ignore_sigint)
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])


def _indexed(job: tuple[Callable, int, Any]) -> tuple[int, Any]:
    fn, i, task = job
    return i, fn(task)


class LocalPool:
    """Tasks in this process (1 worker) or a process pool of `workers`."""

    def __init__(self, workers: int):
        self.workers = workers
        self.pool: Pool | None = None

    def run(self, fn: Callable, tasks: list) -> Iterator[tuple[int, Any]]:
        if self.workers <= 1 or len(tasks) <= 1:
            for i, t in enumerate(tasks):
                yield i, fn(t)
            return
        import multiprocessing

        if self.pool is None:
            self.pool = _pool_ignoring_sigint(self.workers)
        try:
            results = self.pool.imap_unordered(_indexed, [(fn, i, t) for i, t in enumerate(tasks)])
            while True:
                try:  # short waits: a signal reaches the main thread only between them
                    yield results.next(timeout=0.2)
                except multiprocessing.TimeoutError:
                    continue
                except StopIteration:
                    return
        except BaseException:
            self.pool.terminate()  # Ctrl-C or a failure: the runs in flight are lost, the stored ones kept
            self.pool.join()
            self.pool = None
            raise

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool.join()
            self.pool = None


class DaskPool:
    """Tasks on a Dask distributed cluster at `address` (the scheduler's, e.g. tcp://host:8786)."""

    def __init__(self, address: str | Any):
        try:
            from dask.distributed import Client
        except ImportError:
            raise InputError("--dask: got an address, but dask.distributed is not installed; expected "
                             "`pip install 'disagg_simpy[dask]'`") from None
        try:
            self.client: Any = address if hasattr(address, "submit") else Client(address, timeout="10s")  # or a test's
            self.owned = not hasattr(address, "submit")
        except (OSError, TimeoutError, ValueError) as err:
            raise InputError(f"--dask: got {address!r}, which did not answer ({err}), expected the address of "
                             "a running Dask scheduler") from None

    def run(self, fn: Callable, tasks: list) -> Iterator[tuple[int, Any]]:
        from dask.distributed import as_completed

        futures = self.client.map(fn, tasks, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for f in as_completed(futures):
                yield index[f.key], f.result()
        except BaseException:
            self.client.cancel(futures)
            raise

    def close(self) -> None:
        if self.owned:
            self.client.close()


def make_pool(workers: int | None, dask_address: str | None):
    if dask_address is not None:
        return DaskPool(dask_address)
    return LocalPool(workers if workers is not None else (os.cpu_count() or 1))


class Runner:
    """Runs tasks through a pool, skipping and filling the store, with a progress bar on a
    terminal. `skipped` and `ran` count distinct tasks over the runner's life: `skipped` those
    found in the store when first asked for (a run this runner made and reuses is not one)."""

    def __init__(self, store: Store, pool, progress: bool | None = None):
        self.store = store
        self.pool = pool
        self.progress = sys.stderr.isatty() if progress is None else progress
        self.skipped = 0
        self.ran = 0
        self.counted: set[str] = set()  # keys asked for before: each task counts once
        self.bar: Any = None  # a tqdm bar once a run is due (tqdm is imported only then)

    def run(self, tasks: Iterable[Task], what: str = "runs") -> list[list[dict]]:
        """Each task's rows, in task order."""
        tasks = list(tasks)
        keys = [self.store.key(t.scenario, t.seed, t.spec()) for t in tasks]
        found = self.store.get_many(keys)
        first: dict[str, int] = {}  # a key asked for twice in one batch runs once
        todo = []
        for i, k in enumerate(keys):
            if k not in found and k not in first:
                first[k] = i
                todo.append(i)
        self.skipped += len((set(keys) & set(found)) - self.counted)
        self.counted |= set(keys)
        bar = self._bar(len(todo), what)
        for j, rows in self.pool.run(run_task, [tasks[i] for i in todo]):
            i = todo[j]
            self.store.put(keys[i], rows)
            found[keys[i]] = rows
            self.ran += 1
            if bar is not None:
                bar.update(1)
        return [[{**t.labels, **row} for row in found[k]] for t, k in zip(tasks, keys)]

    def _bar(self, n: int, what: str):
        """One bar for the runner's life (a search adds runs as it goes): runs done, rate, time left."""
        if not self.progress or not n:
            return self.bar
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=0, desc=what, unit="run", file=sys.stderr, leave=False, dynamic_ncols=True)
        self.bar.total += n
        self.bar.refresh()
        return self.bar

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.pool.close()
        self.store.close()

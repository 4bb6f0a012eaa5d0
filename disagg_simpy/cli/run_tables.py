"""The run command's runs and tables, a seed and an arrangement at a time.

Each arrangement of each seed is run, its rows appended to the temporary files of `requests`,
`iterations`, `reads` and `freezes` (inside the caller's all-or-nothing block), and dropped
before the next one runs. What is kept: every seed's summary rows, the freeze counts by cause,
and the first seed's run only when pictures or the page need it; `watchers` see each
arrangement's run as it comes (the distributions pooled over seeds, the page's other seeds). So
memory is one arrangement's run (plus the first seed's, for pictures) whatever the seeds, and a CSV file is
the same bytes as the whole table's `to_csv(index=False)`. Parquet (`--format parquet`, pyarrow)
gets one row group per block.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

#: the tables written a block at a time, in file order; `summary` is written whole, last
BLOCK_TABLES = ("requests", "iterations", "reads", "freezes")
TABLES = ("summary", *BLOCK_TABLES)
FORMATS = ("csv", "parquet")


def table_files(fmt: str, scenario=None) -> tuple[str, ...]:
    """The file names of the tables in format `fmt` (and `over_time` for a `scenario` whose
    traffic changes over time)."""
    from ..results.over_time import changes_over_time

    extra = ("over_time",) if scenario is not None and changes_over_time(scenario) else ()
    return tuple(f"{name}.{fmt}" for name in (*TABLES, *extra))


def write_over_time(tables: TableFiles, kept: Kept) -> pd.DataFrame | None:
    """Write every seed's `over_time` rows whole; the frame, or None if the run keeps none."""
    if not kept.over_time:
        return None
    frame = pd.concat(kept.over_time, ignore_index=True)
    tables.write_whole("over_time", frame)
    return frame


class TableFiles:
    """Tables appended block by block to temporary files made by `files.atomic_path` (renamed
    into place by the caller's `all_or_nothing` block, or removed with it)."""

    def __init__(self, folder: Path, fmt: str, stack: ExitStack):
        self.folder, self.fmt, self.stack = folder, fmt, stack
        self._open: dict[str, Any] = {}  # name: text file, or (temporary path, ParquetWriter)
        self.n_rows = 0  # rows appended so far

    def append(self, name: str, frame: pd.DataFrame) -> None:
        from ..files import atomic_path

        first = name not in self._open
        self.n_rows += len(frame)
        if first:
            tmp = self.stack.enter_context(atomic_path(self.folder / f"{name}.{self.fmt}"))
            self._open[name] = tmp.open("w", encoding="utf-8", newline="") if self.fmt == "csv" else (tmp, None)
        if self.fmt == "csv":
            from ..results.csv_text import csv_chunks

            handle = self._open[name]
            for chunk in csv_chunks(frame, header=first):
                handle.write(chunk)
        else:
            target, writer = self._open[name]
            self._open[name] = _append_parquet(target, writer, frame)

    def write_whole(self, name: str, frame: pd.DataFrame) -> None:
        self.append(name, frame)
        self.close(name)

    def close(self, name: str | None = None) -> None:
        """Finish table `name` (default: every open one)."""
        for key in [name] if name else list(self._open):
            handle = self._open.pop(key)
            if self.fmt == "csv":
                handle.close()
            elif handle[1] is not None:
                handle[1].close()


def _append_parquet(target, writer, frame: pd.DataFrame):
    """One row group of `frame` on `writer` (opened on `target` by the first block, whose
    column types every later block takes): (target, writer)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    if writer is None:
        fields = [pa.field(f.name, pa.dictionary(pa.int32(), pa.string()) if pa.types.is_dictionary(f.type) else f.type)
                  for f in table.schema]
        writer = pq.ParquetWriter(target, pa.schema(fields))
    table = table.replace_schema_metadata(None).cast(writer.schema)
    writer.write_table(table)
    return target, writer


@dataclass
class Kept:
    """What the run command keeps of its seeds: every seed's summary rows, the why-late block's
    freeze facts, the first seed's whole run (`first`, when `keep_first`) or its request stream."""

    summaries: list[pd.DataFrame] = field(default_factory=list)
    freezes: dict = field(default_factory=dict)  # arrangement: why_late.FreezeFacts
    first: Any = None  # RunResult of the first seed (all arrangements), if kept
    stream: Any = None  # the first seed's request stream (workload.stream.Requests)
    capped: dict = field(default_factory=dict)  # seed: {arrangement: unfinished}
    over_time: list[pd.DataFrame] = field(default_factory=list)  # every seed's over_time rows, if written
    ranges: Any = None  # results.preset_range.RangeWatch: how far the runs went beyond their presets' ranges


def changes_roles(scenario) -> bool:
    """Whether some arrangement's GPUs change role (E12): then the run writes switches.csv."""
    return any(getattr(a, "role_changes", None) is not None for a in scenario.arrangements)


def run_seeds(scenario, seeds: list[int], tables: TableFiles, keep_first: bool,
              after_first: Callable[[object], None], watchers: tuple = ()) -> Kept:
    """Run every seed an arrangement at a time, writing each block of rows as it comes;
    `after_first(result)` checks the first seed's whole run (plot options, what it keeps); each
    of `watchers` gets `add(run, seed)` for every arrangement's run and `done(seed)` after each seed
    (and `kept.ranges`, which notes how far the runs went beyond their presets' fitted ranges)."""
    from ..api import run_each
    from ..results.over_time import changes_over_time
    from ..results.preset_range import RangeWatch
    from ..results.run_result import RunResult
    from ..results.why_late import FreezeFacts

    kept = Kept(ranges=RangeWatch(scenario))
    watchers = (*watchers, kept.ranges)
    many = len(seeds) > 1
    for seed in seeds:
        parts: list[Any] = []  # the seed's RunResults (None where not kept)
        for one in run_each(scenario, seed):
            (name, rec), = one.records.items()
            for table, frame in one.tables_of(name).items():
                tables.append(table, frame.assign(seed=seed) if many and table != "freezes" else frame)
            if getattr(rec, "switches", None) is not None:  # E12: every move, in switches.csv
                from ..results.frames import switches_frame

                frame = switches_frame(rec)
                tables.append("switches", frame.assign(seed=seed) if many else frame)
            kept.summaries.append(one.summary.assign(seed=seed) if many else one.summary)
            if changes_over_time(scenario):
                kept.over_time.append(one.over_time.assign(seed=seed) if many else one.over_time)
            if seed == seeds[0]:
                kept.freezes[name] = FreezeFacts.of(one, name)
            else:
                kept.freezes[name].add(one.blame[name])
            if rec.capped:
                kept.capped.setdefault(str(seed), {})[name] = rec.n_unfinished
            for watcher in watchers:
                watcher.add(one, seed)
            parts.append(one if seed == seeds[0] and keep_first else None)
            kept.stream = kept.stream or one.stream
            del one, rec
        for watcher in watchers:
            watcher.done(seed)
        if seed == seeds[0]:
            first = RunResult(scenario, seed, kept.stream, {n: p.records[n] for p in parts for n in p.records},
                              {n: p.gaps[n] for p in parts for n in p.gaps}) if keep_first else None
            after_first(first)
            kept.first = first
    return kept

"""The one path of the many-run commands (sweep, goodput, plan, map): `run_batch` loads the
scenario with the flags' overrides, picks the seeds, checks the folder, opens the runner (local
pool or Dask, resumable store), lets the command do its runs, then writes its table, run.json and
picture all or nothing and prints the table (or its rows as JSON). A command supplies only its
flags, its checks before any run (`prepare`) and its work (`work`, returning a `Batch`).

The store lives in the results folder (`<out>/store.sqlite`): re-running a command there skips
every run already finished, and says how many.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import InputError
from ..files import check_folder, check_output_file, check_outputs_apart, make_folder
from .common import (
    NotWritten,
    Parser,
    add_price_flag,
    check_own_folder,
    int_at_least,
    load_with_flags,
    path_flag,
    positive_float,
    seeds_to_run,
)

STORE_NAME = "store.sqlite"


def batch_parser(prog: str, description: str, prices: bool = True) -> Parser:
    """A parser with the flags every many-run command takes (`prices`: --price too, for the
    commands whose tables show costs)."""
    p = Parser(prog=f"python -m disagg_simpy {prog}", description=description)
    p.add_argument("scenario", type=Path, help="scenario YAML file (see scenarios/default.yaml)")
    p.add_argument("--seeds", type=int_at_least("--seeds", 1, 10_000), metavar="N",
                   help="seeds SEED..SEED+N-1 at every point (default: the scenario's seeds:, else 1)")
    p.add_argument("--seed", type=int_at_least("--seed", 0), help="override the scenario's first seed")
    p.add_argument("--measure-s", type=positive_float("--measure-s"), metavar="S",
                   help="override workload.measure_s, the end of the measured window (s)")
    p.add_argument("--out", type=path_flag("--out"), metavar="DIR",
                   help=f"results folder (default: runs/<scenario name>-{prog}/, this command's own); its store.sqlite "
                   "keeps finished runs")
    p.add_argument("--json", action="store_true", help="print the table's rows as JSON instead of the text table")
    p.add_argument("--no-plots", action="store_true", help="skip the picture (an earlier one in --out is removed, and said)")
    p.add_argument("--html", type=path_flag("--html", "a file name"), metavar="FILE",
                   help="also write one self-contained HTML page of the results (no network; tables sort on a click, "
                   "charts have a tooltip on every point)")
    p.add_argument("--workers", type=int_at_least("--workers", 1, 1024), metavar="N",
                   help="local worker processes (default: every core)")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run on the Dask cluster whose scheduler is at ADDRESS (e.g. tcp://10.0.0.5:8786)")
    p.add_argument("--format", choices=("csv", "parquet"),
                   help="the table's file: csv (default; sweep: csv and parquet) or parquet (the same columns, typed)")
    if prices:
        add_price_flag(p)
    p.add_argument("--version", action="version", version=f"disagg_simpy {__version__}")
    return p


def target_flag(text: str) -> float:
    """--target: an on-time share in (0, 100]."""
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"--target: got {text!r}, expected an on-time share in percent, above 0 and at most 100") from None
    if not 0 < value <= 100:
        raise InputError(f"--target: got {text!r}, expected an on-time share in percent, above 0 and at most 100")
    return value


def default_folder(scenario, command: str) -> Path:
    """A command's own results folder: `runs/<scenario name>-<command>/` (a run's is
    `runs/<scenario name>/`), so no command replaces another's run.json or mixes files with it."""
    return Path("runs") / f"{scenario.name}-{command}"


def out_folder(args: argparse.Namespace, scenario, names: list[str], command: str) -> Path:
    """The results folder (default: the command's own), checked before any run: not another
    command's (its run.json says), every file writable (`files.check_output_file`), no output
    the scenario file or its trace."""
    from ..scenario.schema import TraceWorkload
    from ..workload.catalog import CATALOG

    out = check_folder(args.out if args.out is not None else default_folder(scenario, command), "--out")
    check_own_folder(out, command)
    outputs = {f"--out {out / name}": check_output_file(out / name, "--out") for name in [*names, STORE_NAME]}
    if args.html is not None:
        outputs[f"--html {args.html}"] = check_output_file(args.html, "--html")
    inputs = {"scenario file": Path(args.scenario)}
    w = scenario.workload
    if isinstance(w, TraceWorkload) and w.trace not in CATALOG:  # a path, not a public trace's id
        trace = inputs["trace file"] = Path(w.trace) if Path(w.trace).is_absolute() else scenario.folder / w.trace
        if trace.exists() and not trace.is_dir():  # (a missing one: the run's own line names the key)
            from ..inputs import open_input
            from ..scenario.limits import MAX_TRACE_BYTES

            with open_input(trace, "a trace file", MAX_TRACE_BYTES, key="file: "):
                pass  # a pipe or a device is refused here, before any worker process starts
    check_outputs_apart(outputs, inputs)
    return out


def open_runner(args: argparse.Namespace, out: Path):
    """The runner: the store in `out`, a local pool or Dask, a progress bar on a terminal."""
    from ..sweep.runner import Runner, make_pool
    from ..sweep.store import Store

    make_folder(out, "--out")
    pool = make_pool(args.workers, args.dask)
    return Runner(Store(out / STORE_NAME, __version__), pool)


def skipped_line(runner) -> str:
    total = runner.skipped + runner.ran
    if not runner.skipped:
        return f"{total} runs, stored in {runner.store.path}"
    return (f"{runner.skipped} of {total} runs were already in {runner.store.path} and were skipped; "
            f"{runner.ran} ran now")


def command_line(command: str, argv: Sequence[str] | None) -> list[str]:
    """The command line that reproduces a command's results: its name and its flags (`argv`,
    the words after the name; None: this process's own)."""
    if argv is None:
        words = sys.argv[1:]
        argv = words[1:] if words[:1] == [command] else words
    return ["python", "-m", "disagg_simpy", command, *argv]


def run_info(command: str, argv, scenario, seeds, **more) -> dict:
    return {
        "version": __version__,
        "command": command_line(command, argv),
        "subcommand": command,
        "seeds": list(seeds),
        "scenario": scenario.model_dump(mode="json"),
        **scenario.preset_info(),
        **more,
    }


def write_all(out: Path, texts: dict[str, str], frames_parquet: dict, picture, page=None,
              remove: list[Path] | None = None) -> list[Path]:
    """Every output, all or nothing: CSV/JSON texts, Parquet tables, then the picture
    (`picture(path_folder)` or None) and the page (`page()` or None); once they are in place,
    the files of `remove` (an earlier picture this run does not draw) are deleted. Returns those
    deleted."""
    from ..files import PartlyWritten, all_or_nothing, atomic_path, atomic_write_text

    try:
        with all_or_nothing() as commit:
            for name, text in texts.items():
                atomic_write_text(out / name, text)
            for name, frame in frames_parquet.items():
                with atomic_path(out / name) as tmp:
                    frame.to_parquet(tmp, index=False)
            if picture is not None:
                picture(out)
            if page is not None:
                page()
            commit.remove = list(remove or [])
        return [p for p in commit.remove if p not in set(commit.not_removed)]
    except PartlyWritten as err:  # a folder changed under the run after every check
        raise NotWritten(f"cannot write the results: {err.strerror or err} ({err.filename}); {len(err.replaced)} "
                         f"of {len(err.replaced) + len(err.kept)} files were already replaced, the others were left "
                         "as they were") from None
    except OSError as err:
        where = f" ({err.filename})" if err.filename else ""
        raise NotWritten(f"cannot write the results: {err.strerror or err}{where}; earlier results were left "
                         "as they were") from None


def json_rows(frame) -> str:
    from ..results.report import summary_json

    return json.dumps(summary_json(frame), indent=2)


@dataclass
class Job:
    """What a command's work gets: its flags, the scenario (with the flags' overrides), the seeds,
    the runner, and what its `prepare` returned."""

    args: argparse.Namespace
    scenario: Any
    seeds: tuple[int, ...]
    runner: Any
    prepared: Any = None


@dataclass
class Batch:
    """What a command's work returns: `table` is written as `<name>.csv` and/or `.parquet`
    (--format; sweep writes both by default) and printed with --json; `info` goes into run.json
    (before the store's figures); `lines` are printed above "results in"; `picture(folder)` draws
    into the results folder; `page(path)` writes the --html page."""

    table: Any
    info: dict = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    picture: Callable[[Path], Any] | None = None
    page: Callable[[Path], Any] | None = None


def _remove_created(paths: list[Path]) -> None:
    """Remove what a refused command created: its store (with SQLite's side files) and its
    folder if it made it and nothing else is there."""
    for path in reversed(paths):
        if path.name == STORE_NAME:
            for p in (path, path.with_name(STORE_NAME + "-wal"), path.with_name(STORE_NAME + "-shm")):
                p.unlink(missing_ok=True)
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def refuse_varying_traffic(scenario, command: str) -> None:
    """goodput and plan scale one steady rate: traffic that changes over time (a schedule, a
    rate curve) is refused before any run, naming `plan --over-time`, which plans it."""
    w = scenario.workload
    key = "schedule" if getattr(w, "schedule", None) is not None else "rate_curve"
    if getattr(w, key, None) is None:
        return
    how = "" if key == "schedule" else " --period-s S"
    raise InputError(f"{scenario.source}: workload.{key}: got traffic that changes over time with {command}, expected "
                     f"a steady workload.rate_per_s ({command} scales one rate); to plan GPUs over the day use "
                     f"plan {scenario.source} --gpus N --over-time{how} (docs/over-time.md)")


def output_files(name: str, parquet: bool = False) -> tuple[str, ...]:
    """What a many-run command writes: `<name>.csv` (and `.parquet`), `<name>.png`, run.json."""
    return (f"{name}.parquet",) * parquet + (f"{name}.csv", f"{name}.png", "run.json")


def run_batch(argv: Sequence[str] | None, parser: Parser, name: str, work: Callable[[Job], Batch | None],
              prepare: Callable[[argparse.Namespace, Any], Any] | None = None, parquet: bool = False,
              default_seeds: int | None = None) -> int:
    """Run one many-run command (see the module docstring): its outputs are `output_files(name,
    parquet)`, `--format` choosing the table's (`parquet`: both by default). `work` may return
    None after saying on stderr why there is nothing to write (plan --rate when no arrangement
    carries the rate). `default_seeds` replaces the scenario's seeds
    when --seeds is not given."""
    from ..results.csv_text import csv_text

    args = parser.parse_args(argv)
    csv, parquet = args.format != "parquet", parquet if args.format is None else args.format == "parquet"
    if default_seeds is not None and args.seeds is None:
        args.seeds = default_seeds
    scenario = load_with_flags(args)
    prepared = prepare(args, scenario) if prepare is not None else None  # every check before any run
    seeds, note = seeds_to_run(scenario)
    command = parser.prog.split()[-1]  # (goodput --vary slo writes slo_scale.csv: still goodput's folder)
    out = out_folder(args, scenario, [f for f in output_files(name, parquet) if csv or not f.endswith(".csv")], command)
    if note:
        print(note, file=sys.stderr)
    created = [p for p in (out, out / STORE_NAME) if not p.exists()]  # (a refused command leaves neither)
    runner = open_runner(args, out)
    try:
        batch = work(Job(args, scenario, seeds, runner, prepared))
    except InputError:
        runner.close()
        _remove_created(created)
        raise
    finally:
        runner.close()
    if batch is not None:
        info = run_info(command, argv, scenario, seeds, **batch.info, store=str(runner.store.path),
                        runs_skipped=runner.skipped, runs_done=runner.ran)
        texts = {f"{name}.csv": csv_text(batch.table)} if csv else {}
        texts["run.json"] = json.dumps(info, indent=2) + "\n"
        picture = None if args.no_plots else batch.picture
        page = None
        if args.html is not None:
            from ..page.commands import table_page

            make_folder(args.html.parent, "--html")
            draw = batch.page or (lambda path: table_page(path, batch.table, batch.lines[0] if batch.lines else name))
            page = lambda: draw(args.html)  # noqa: E731
        earlier = out / f"{name}.png"  # (the folder is this command's own: check_own_folder)
        stale = [earlier] if picture is None and earlier.is_file() and not earlier.is_symlink() else []
        removed = write_all(out, texts, {f"{name}.parquet": batch.table} if parquet else {}, picture, page, stale)
        if args.json:
            print(json_rows(batch.table))
        else:
            for line in batch.lines:
                print(line)
            print(f"results in {out}/")
            if args.html is not None:
                print(f"page in {args.html}")
        for path in removed:
            print(f"note: removed {path}, an earlier run's picture (--no-plots: none drawn this time)", file=sys.stderr)
    print(skipped_line(runner), file=sys.stderr)
    return 0

"""`python -m disagg_simpy SCENARIO`: run, print the table, write results into `--out`.

A run writes only under `--out`, `--plots`, `--save-trace` and `--html`, every file to a temporary file in
its folder and renamed, all or nothing, so a result is never half written. The steps of `run`
are named below, in order: parse, load, check outputs, simulate, tabulate, write, print.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..errors import InputError
from ..files import check_folder, check_output_file, check_outputs_apart, folders_undone_on_failure, make_folder, same_file
from .common import (
    NotWritten,
    Parser,
    add_price_flag,
    check_follow_is_one_request,
    check_own_folder,
    earlier_run_json,
    int_at_least,
    load_with_flags,
    path_flag,
    positive_float,
    seeds_to_run,
)
from .plot_flags import add_plot_arguments, plot_flag_error
from .run_notes import dropped_text, dropped_warnings, no_measured_request, removed_note, shown_run

#: What a run writes into --out (pictures go to --plots, default <out>/plots/); Parquet with
#: --format parquet.
OUTPUT_FILES = ("summary.csv", "requests.csv", "iterations.csv", "reads.csv", "freezes.csv", "run.json")


def output_files(fmt: str, scenario=None) -> tuple[str, ...]:
    """What a run (of `scenario`) writes into --out in table format `fmt`."""
    from .run_tables import table_files

    return (*table_files(fmt, scenario), "run.json")


def build_parser(commands: dict[str, str] | None = None) -> argparse.ArgumentParser:
    """The run command's flags; `commands` (name: summary) lists the other commands in --help."""
    epilog = None
    if commands:
        width = max(map(len, commands)) + 2
        epilog = "other commands (python -m disagg_simpy COMMAND --help):\n" + "\n".join(
            f"  {name.ljust(width)}{summary}" for name, summary in commands.items())
    p = Parser(
        prog="python -m disagg_simpy",
        description="Compare ways of serving a chat model on a few GPUs: same GPU, chunked "
        "prompts, or split reading and writing GPUs. Prints one row per arrangement.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("scenario", type=Path, help="scenario YAML file (see scenarios/default.yaml)")
    p.add_argument("--out", type=path_flag("--out"), metavar="DIR", help="results folder (default: runs/<scenario name>/)")
    p.add_argument("--rate", type=positive_float("--rate"), metavar="PER_S", help="override the arrival rate (requests/s)")
    p.add_argument("--rate-per-gpu", type=positive_float("--rate-per-gpu"), metavar="PER_S",
                   help="the arrival rate per GPU: rate = this x the arrangements' GPUs (all of one size)")
    p.add_argument("--seed", type=int_at_least("--seed", 0), help="override the scenario's seed")
    p.add_argument("--measure-s", type=positive_float("--measure-s"), metavar="S", help="override the measured window's end (s)")
    p.add_argument("--seeds", type=int_at_least("--seeds", 1, 10_000), metavar="N",
                   help="run seeds SEED..SEED+N-1 (default: the scenario's seeds:, else 1); print the mean and its 95%% interval")
    p.add_argument("--json", action="store_true", help="print the table as JSON: with several seeds, per arrangement "
                   "the means, their 95%% intervals and the per-seed rows")
    p.add_argument("--format", choices=("csv", "parquet"), default="csv",
                   help="table files: csv (default) or parquet (the same columns, typed)")
    p.add_argument("--wide", action="store_true", help="print every summary column (default: those that compare arrangements)")
    p.add_argument("--save-trace", type=path_flag("--save-trace", "a file name"), metavar="FILE",
                   help="also write the request stream used as a CSV trace")
    p.add_argument("--html", type=path_flag("--html", "a file name"), metavar="FILE",
                   help="also write one self-contained HTML page: the table, a player per arrangement, the charts")
    add_price_flag(p)
    p.add_argument("--version", action="version", version=f"disagg_simpy {__version__}")
    add_plot_arguments(p)
    p._option_string_actions["--plots"].type = path_flag("--plots")  # an empty path is not "."
    return p


def rate_per_gpu(args: argparse.Namespace, arrangements) -> float:
    """--rate-per-gpu x the GPUs of the arrangements, which one run must share (one request
    stream for all); refused with --rate, or for arrangements of different sizes."""
    if args.rate is not None:
        raise InputError(f"--rate-per-gpu: got {args.rate_per_gpu:g} together with --rate {args.rate:g}, expected one of them")
    sizes = sorted({a.n_gpus for a in arrangements})
    if len(sizes) > 1:
        raise InputError(f"--rate-per-gpu: got {args.rate_per_gpu:g} for arrangements of {' and '.join(map(str, sizes))} GPUs, "
                         "expected arrangements of one size (one run shares one request stream; sweep and goodput "
                         "--rate-per-gpu run each arrangement at its own rate)")
    return args.rate_per_gpu * sizes[0]


@dataclass
class Outputs:
    """Where a run writes: checked before the run, so a bad path costs no simulation."""
    out: Path
    plots: Path | None
    save_trace: Path | None
    html: Path | None = None
    inputs: tuple[Path, ...] = ()  # the scenario and its trace: never removed as stale


def run(argv: Sequence[str] | None, commands: dict[str, str] | None = None) -> int:
    """The run command, step by step (`commands`: the others, for --help). Seeds are run and
    written one at a time (cli/run_tables.py), so memory does not grow with them."""
    args = build_parser(commands).parse_args(argv)  # before the heavy imports: --help stays fast
    scenario = load(args)
    outputs = check_outputs(args, scenario)
    chosen, note = seeds_to_run(scenario)
    if note:
        print(note, file=sys.stderr)
    seeds = list(chosen)
    check_seeds(scenario, seeds)
    summary, kept, run_info = simulate_and_write(args, argv, outputs, scenario, seeds)
    report(args, scenario, outputs, summary, run_info, kept)
    return 0


def load(args: argparse.Namespace):
    """The scenario file with the flags' overrides (--rate, or --rate-per-gpu x the GPUs, sets
    the rate), validated as one."""
    rate = args.rate
    if getattr(args, "rate_per_gpu", None) is not None:  # (explain shares run's flags but not this one)
        from ..scenario.loading import load_scenario

        rate = rate_per_gpu(args, load_scenario(args.scenario).arrangements)
    return load_with_flags(args, rate=rate)


def check_outputs(args: argparse.Namespace, scenario) -> Outputs:
    """Every output path is usable (`files.check_output_file`: a symlink is written through, a
    folder or special file refused), and none overwrites the scenario, its trace or another output."""
    from ..scenario.schema import TraceWorkload
    from ..workload.catalog import resolve_trace

    out = check_folder(args.out if args.out is not None else Path("runs") / scenario.name, "--out")
    check_own_folder(out, "run")
    names = output_files(args.format, scenario)
    outputs = {f"--out {out / name}": check_output_file(out / name, "--out") for name in names}
    plots_dir = None
    if not args.no_plots:
        from ..plots import plot_file_names

        plots_dir = check_folder(args.plots if args.plots is not None else out / "plots", "--plots")
        if args.follow is not None and scenario.workload.n_requests_per_gpu is not None:
            check_follow_is_one_request(scenario, args.follow)
        for name in plot_file_names([a.name for a in scenario.arrangements], args.follow, f"over_time.{args.format}" in names):
            outputs[f"--plots {plots_dir / name}"] = check_output_file(plots_dir / name, "--plots")
    for flag, path in (("--save-trace", args.save_trace), ("--html", args.html)):
        if path is not None:
            outputs[f"{flag} {path}"] = check_output_file(path, flag)
    inputs = {"scenario file": args.scenario}
    w = scenario.workload
    if isinstance(w, TraceWorkload):  # a public trace's id that is not fetched stops the run here
        inputs["trace file"] = resolve_trace(w.trace, w.format, scenario.folder, f"{scenario.source}: workload")
    check_outputs_apart(outputs, inputs)
    return Outputs(out, plots_dir, args.save_trace, args.html, tuple(inputs.values()))


def check_seeds(scenario, seeds: list[int]) -> None:
    """Refuse up front what one seed's run would keep beyond the limits (seeds are run one at a
    time, so they do not multiply what is kept)."""
    from ..scenario.limits import MAX_WRITTEN_ROWS, count_text, requests_problem

    if seeds[-1] >= 2**63:
        raise InputError(f"--seeds: got {len(seeds)} from seed {seeds[0]}, expected seeds below 2**63")
    expected = scenario.expected_requests()  # (n_requests, or rate x the cap; None: a trace's own rows)
    if expected is not None:
        _check_seeds(requests_problem(expected, len(scenario.arrangements)))
        rows = expected * len(scenario.arrangements) * len(seeds)
        if rows > MAX_WRITTEN_ROWS:
            _check_seeds(f"{count_text(expected)} requests x {len(scenario.arrangements)} arrangements x {len(seeds)} "
                         f"seeds = {count_text(rows)} rows to write, above the limit of {count_text(MAX_WRITTEN_ROWS)}")


def _check_written(rows: int, n_seeds: int) -> None:
    """After the first of several seeds: the rows it wrote, times the seeds, within the limit."""
    from ..scenario.limits import MAX_WRITTEN_ROWS, count_text

    if n_seeds > 1 and rows * n_seeds > MAX_WRITTEN_ROWS:
        _check_seeds(f"{count_text(rows)} rows written by the first seed x {n_seeds} seeds, above the "
                     f"limit of {count_text(MAX_WRITTEN_ROWS)} rows written")


def simulate_and_write(args: argparse.Namespace, argv, outputs: Outputs, scenario, seeds: list[int]):
    """Run every seed and write every output, all or nothing: the tables block by block as the
    runs come (a `seed` column when there are several), then the summary, the pictures and the
    page of the first seed, and `run.json`. Returns the summary, what was kept, run.json."""
    from contextlib import ExitStack

    import pandas as pd

    from ..files import PartlyWritten, all_or_nothing, atomic_write_text
    from ..workload.stream import write_trace
    from .run_tables import TableFiles, changes_roles, run_seeds, write_over_time

    many = len(seeds) > 1
    extra = [p.parent for p in (outputs.save_trace, outputs.html) if p is not None]
    with folders_undone_on_failure(outputs.out, outputs.plots, *extra):  # a failed write leaves no new folder
        make_folder(outputs.out, "--out")
        for flag, path in (("--save-trace", outputs.save_trace), ("--html", outputs.html)):
            if path is not None:
                make_folder(path.parent, flag)
        previous = owned_files(outputs.out)
        try:
            with all_or_nothing() as commit, ExitStack() as stack:  # every output is new, or none is
                tables = TableFiles(outputs.out, args.format, stack)
                keep_first = outputs.plots is not None or outputs.html is not None
                pooled = seed_runs = None
                if many and keep_first:
                    from ..results.pooled import Pooled

                    pooled = Pooled()  # the distributions of every seed, as counts on fixed grids
                if many and outputs.html is not None:
                    from ..page.seed_runs import SeedRuns

                    seed_runs = SeedRuns()  # what the player can switch to
                watchers = tuple(w for w in (pooled, seed_runs) if w is not None)
                kept = run_seeds(scenario, seeds, tables, keep_first,
                                 lambda first: _after_first(args, outputs, first, tables.n_rows, len(seeds)), watchers)
                summary = pd.concat(kept.summaries, ignore_index=True)
                if many:
                    from ..results.paired import with_paired_difference

                    summary = with_paired_difference(summary)
                tables.write_whole("summary", summary)
                over_time = write_over_time(tables, kept)
                tables.close()
                written = [outputs.out / f"{name}.{args.format}" for name in ("summary", "requests", "iterations",
                                                                               "reads", "freezes")]
                if changes_roles(scenario):  # E12
                    written.append(outputs.out / f"switches.{args.format}")
                written += [outputs.out / f"over_time.{args.format}"] if over_time is not None else []
                run_info = _run_info(args, argv, scenario, seeds, kept)
                for warning in run_info.get("preset_range_warnings", []):  # beyond a preset's fitted range
                    print(f"warning: {args.scenario}: {warning}", file=sys.stderr)
                first = shown_run(args, outputs.plots is not None, scenario, summary, kept.first) if keep_first else None
                run_info["pictures_seed"] = {"seed": first.seed, "why": first.chosen} if many and first else None
                if outputs.save_trace is not None:
                    write_trace(kept.stream, outputs.save_trace)
                    written.append(outputs.save_trace)
                if outputs.plots is not None:
                    from ..plots import write_plots

                    written += write_plots(first, outputs.plots, window=args.window, n_replies=args.replies,
                                           follow=args.follow, by_seed=summary if many else None, pooled=pooled, over_time=over_time)
                if outputs.html is not None and first is not None:
                    from ..page import write_page

                    reference = first.scenario.reference
                    write_page(first, outputs.html, reference=reference.on_time_pct if reference else None,
                               by_seed=summary if many else None, pooled=pooled, seed_runs=seed_runs, over_time=over_time)
                    written.append(outputs.html)
                run_info["files"] = _inside(outputs.out, [*written, outputs.out / "run.json"])
                atomic_write_text(outputs.out / "run.json", json.dumps(run_info, indent=2) + "\n")
                commit.remove = stale_files(outputs.out, previous, run_info["files"], outputs.inputs)
            for path in commit.not_removed:
                print(f"warning: {path}: an earlier run's file this run no longer writes could not be removed",
                      file=sys.stderr)
            removed = [p for p in commit.remove if p not in set(commit.not_removed)]
            remove_empty_folders(outputs.out, set(removed))
            if removed:
                print(removed_note(outputs.out, removed, args.no_plots, args.format), file=sys.stderr)
        except PartlyWritten as err:  # a folder changed under the run after every check
            raise NotWritten(
                f"cannot write the results: {err.strerror or err} ({err.filename}); {len(err.replaced)} of "
                f"{len(err.replaced) + len(err.kept)} files were already replaced (first {err.replaced[0]}), "
                f"the others were left as they were"
            ) from None
        except OSError as err:  # a full disk, a folder removed meanwhile...
            if err.errno == errno.ENOMEM:  # memory ran out (while running or writing): main says so
                raise
            where = f" ({err.filename})" if err.filename else ""
            raise NotWritten(
                f"cannot write the results: {err.strerror or err}{where}; earlier results were left as they were"
            ) from None
    return summary, kept, run_info


def _after_first(args: argparse.Namespace, outputs: Outputs, first, n_rows: int, n_seeds: int) -> None:
    """Once the first seed ran: the rows the seeds will write, and the picture options (before
    any file is in place)."""
    _check_written(n_rows, n_seeds)
    if outputs.plots is not None:
        from ..plots import PlotOptionError, check_plot_options, empty_window_note

        try:
            window = check_plot_options(first, args.window, args.follow)
        except PlotOptionError as err:
            raise plot_flag_error(err) from None
        note = empty_window_note(first, window)
        if note:
            flag = f"--window {args.window[0]:g}:{args.window[1]:g}" if args.window else "the default window"
            print(f"warning: {flag}: {note}", file=sys.stderr)


def _run_info(args: argparse.Namespace, argv, scenario, seeds: list[int], kept) -> dict:
    """`run.json`, but for its list of files."""
    return {
        "version": __version__,
        "command": ["python", "-m", "disagg_simpy", *(sys.argv[1:] if argv is None else argv)],
        "subcommand": "run",
        "seed": seeds[0] if len(seeds) == 1 else None,
        "seeds": seeds,
        "scenario": scenario.model_dump(mode="json"),
        "scenario_file": str(args.scenario),
        "workload": kept.stream.info,
        "max_sim_s": kept.stream.cap_ns / 1e9,
        "capped": kept.capped,
        **scenario.preset_info(), **kept.ranges.info(),
    }


def _inside(folder: Path, paths: list[Path]) -> list[str]:
    """The paths under `folder`, relative to it, sorted (what run.json says the run owns)."""
    root = os.path.realpath(folder)
    rel = [os.path.relpath(os.path.realpath(p), root) for p in paths]
    return sorted({r for r in rel if not r.startswith(os.pardir)})


def owned_files(out: Path) -> list[str]:
    """What the previous run into `out` wrote there, as its run.json lists it ([] if none or
    unreadable): only plain relative paths of our kinds of file, never outside `out`."""
    listed = (earlier_run_json(out) or {}).get("files", [])
    if not isinstance(listed, list):
        return []
    return [f for f in listed if isinstance(f, str) and not Path(f).is_absolute() and os.pardir not in Path(f).parts
            and Path(f).suffix in (".csv", ".parquet", ".json", ".png")]


def stale_files(out: Path, previous: list[str], current: list[str], inputs=()) -> list[Path]:
    """What a previous run of ours wrote into `out` and this one did not: removed once this run's
    files are in place. Files we did not write, symlinks, this run's inputs, and anything
    whose real path is outside `out` stay."""
    root = os.path.realpath(out)
    stale = []
    for name in sorted(set(previous) - set(current)):
        path = out / name
        inside = os.path.realpath(path).startswith(root + os.sep)
        if inside and path.is_file() and not path.is_symlink() and not any(same_file(path, p) for p in inputs):
            stale.append(path)
    return stale


def remove_empty_folders(out: Path, removed) -> None:
    """Folders of ours under `out` that removing `removed` left empty."""
    for folder in {p.parent for p in removed}:
        try:
            if folder != out and not any(folder.iterdir()):
                folder.rmdir()
        except OSError:
            pass


def report(args: argparse.Namespace, scenario, outputs: Outputs, summary, run_info: dict, kept) -> None:
    """The table (or JSON) and the why-late block on stdout; on stderr, the trace columns ignored
    and a warning for each run the safety cap ended."""
    from ..results.report import format_table, summary_means_json
    from ..results.why_late import why_late_block
    from ..workload.traces import ignored_text

    seeds = run_info["seeds"]
    many = len(seeds) > 1
    if args.json:
        print(json.dumps(summary_means_json(summary), indent=2))
    else:
        w = scenario.workload
        from ..scenario.schedule import rate_words

        rate = rate_words(w)
        traffic = f"trace {w.trace} ({w.format}) {'at ' + rate if rate else ''}".rstrip() if hasattr(w, "trace") else rate
        seed_text = f"seed {seeds[0]}" if not many else f"seeds {seeds[0]}..{seeds[-1]}, mean and 95% interval"
        counts = summary.drop_duplicates("seed")["n_requests"] if many else summary["n_requests"].iloc[:1]
        n_text = f"{counts.mean():.0f} measured requests" + (" per seed on average" if many else "")
        print(f"{scenario.name}: {traffic}, {seed_text}; {n_text}{dropped_text(summary, many)}")
        print(format_table(summary, wide=args.wide))
        if many:
            from ..results.paired import verdict_line

            line = verdict_line(summary)
            if line:
                print(line)
        print(why_late_block(summary, kept.freezes, len(seeds)))
        print(f"results in {outputs.out}/")
        if outputs.plots is not None:
            print(f"pictures in {outputs.plots}/")
        if outputs.html is not None:
            print(f"page in {outputs.html}")
    if not (summary["n_requests"].fillna(0) > 0).any():
        print(f"warning: {no_measured_request(scenario)}", file=sys.stderr)
    workload = run_info["workload"]
    if workload.get("ignored_columns"):
        print(f"note: {workload['path']}: ignored column(s) {ignored_text(workload['ignored_columns'])}, "
              f"which the {workload['format']} format does not use", file=sys.stderr)
    sys.stderr.writelines(f"{line}\n" for line in dropped_warnings(summary, scenario, seeds))  # E9's drops
    for seed, arrangements in run_info["capped"].items():
        for name, n in arrangements.items():
            print(
                f"warning: {name} (seed {seed}): the safety cap max_sim_s={run_info['max_sim_s']:g} s ended the run "
                f"with {n} measured {'reply' if n == 1 else 'replies'} unfinished; they count as not on time",
                file=sys.stderr,
            )

def _check_seeds(problem: str | None) -> None:
    if problem:
        raise InputError(f"--seeds: got {problem}; expected fewer seeds (or a smaller run)")


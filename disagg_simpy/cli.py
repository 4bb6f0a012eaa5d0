"""`python -m disagg_simpy SCENARIO`: run, print the table, write results into `--out`.

Only this module touches the filesystem, and only under `--out` (and `--save-trace`). Every
file is written to a temporary file in its folder and renamed, so a result is never half
written. Bad input is one line on stderr and exit code 2; Ctrl-C is exit code 130.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Sequence

from . import __version__
from .errors import InputError
from .files import check_folder, make_folder
from .plot_args import add_plot_arguments

EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
#: What a run writes into --out (pictures go to --plots, default <out>/plots/).
OUTPUT_FILES = ("summary.csv", "requests.csv", "iterations.csv", "reads.csv", "run.json")


class _NotWritten(Exception):
    """The results could not be written (exit code 1); none of the earlier ones was replaced."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one line (no usage dump) via InputError."""

    def error(self, message: str):  # type: ignore[override]
        raise InputError(f"{self.prog}: {message} (see --help)")


def _positive_float(flag: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{flag}: got {text!r}, expected a number") from None
        if not math.isfinite(value) or value <= 0:
            raise InputError(f"{flag}: got {text!r}, expected a number > 0")
        return value

    return parse


def _int_at_least(flag: str, low: int, high: int = 2**63 - 1):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise InputError(f"{flag}: got {text!r}, expected a whole number") from None
        if not low <= value <= high:
            raise InputError(f"{flag}: got {text!r}, expected a whole number from {low} to {high}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m disagg_simpy",
        description="Compare ways of serving a chat model on a few GPUs: same GPU, chunked "
        "prompts, or split reading and writing GPUs. Prints one row per arrangement.",
    )
    p.add_argument("scenario", type=Path, help="scenario YAML file (see scenarios/default.yaml)")
    p.add_argument("--out", type=_path("--out"), metavar="DIR", help="results folder (default: runs/<scenario name>/)")
    p.add_argument("--rate", type=_positive_float("--rate"), metavar="PER_S", help="override the arrival rate (requests/s)")
    p.add_argument("--seed", type=_int_at_least("--seed", 0), help="override the scenario's seed")
    p.add_argument("--measure-s", type=_positive_float("--measure-s"), metavar="S", help="override the measured window's end (s)")
    p.add_argument("--seeds", type=_int_at_least("--seeds", 1, 10_000), metavar="N", default=1,
                   help="run seeds SEED..SEED+N-1; print mean ± 95%% half-width")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of the table")
    p.add_argument("--save-trace", type=_path("--save-trace"), metavar="FILE", help="also write the request stream used as a CSV trace")
    p.add_argument("--version", action="version", version=f"disagg_simpy {__version__}")
    add_plot_arguments(p)
    p._option_string_actions["--plots"].type = _path("--plots")  # an empty path is not "."
    return p


def _overrides(args: argparse.Namespace, scenario) -> tuple[dict, dict]:
    """Flag values as scenario keys, and the flag behind each key (for error messages). On a
    trace, --rate replaces any time_scale."""
    from .scenario import DROP, TraceWorkload

    changes = {"seed": args.seed, "workload.rate_per_s": args.rate, "workload.measure_s": args.measure_s}
    flags = {
        "seed": f"--seed {args.seed}",
        "workload.rate_per_s": f"--rate {args.rate:g}" if args.rate is not None else "--rate",
        "workload.measure_s": f"--measure-s {args.measure_s:g}" if args.measure_s is not None else "--measure-s",
    }
    if args.rate is not None and isinstance(scenario.workload, TraceWorkload):
        changes["workload.time_scale"] = DROP
    return changes, flags


def _path(flag: str):
    """A path flag's value; an empty one is refused (Path("") would quietly mean ".")."""

    def parse(text: str) -> Path:
        if not text.strip():
            raise InputError(f"{flag}: got an empty path, expected {'a folder' if flag != '--save-trace' else 'a file name'}")
        if "\0" in text:
            raise InputError(f"{flag}: got a path with a NUL character, expected a path")
        return Path(text)

    return parse


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b) or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def _check_outputs_spare_inputs(outputs: dict[str, Path], inputs: dict[str, Path]) -> None:
    """No output may overwrite the scenario file or the trace it reads."""
    for flag, out in outputs.items():
        for what, path in inputs.items():
            if _same_file(out, path):
                raise InputError(f"{flag}: writing {out} would overwrite the {what} {path}, expected another place")


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)  # before the heavy imports: --help stays fast

    import pandas as pd

    from .api import run
    from .csv_text import csv_text
    from .files import all_or_nothing, atomic_write_text
    from .limits import MAX_KEPT_ROWS, count_text, requests_problem
    from .report import format_table, summary_json
    from .scenario import SyntheticWorkload, TraceWorkload
    from .scenario_file import load_scenario
    from .workload import write_trace

    scenario = load_scenario(args.scenario)
    changes, flags = _overrides(args, scenario)
    scenario = scenario.with_overrides(flags=flags, **changes)
    out = check_folder(args.out if args.out is not None else Path("runs") / scenario.name, "--out")
    outputs = [("--out", out / name) for name in OUTPUT_FILES]
    if args.save_trace is not None:
        check_folder(args.save_trace.parent, "--save-trace")
        if args.save_trace.is_dir():
            raise InputError(f"--save-trace: got {args.save_trace}, which is a folder, expected a file name")
        outputs.append(("--save-trace", args.save_trace))
    plots_dir = None
    if not args.no_plots:
        plots_dir = check_folder(args.plots if args.plots is not None else out / "plots", "--plots")
    inputs = {"scenario file": args.scenario}
    w = scenario.workload
    if isinstance(w, TraceWorkload):
        trace = Path(w.trace)
        inputs["trace file"] = trace if trace.is_absolute() else scenario.folder / trace
    _check_outputs_spare_inputs({f"{flag} {path}": path for flag, path in outputs}, inputs)

    seeds = list(range(scenario.seed, scenario.seed + args.seeds))
    if seeds[-1] >= 2**63:
        raise InputError(f"--seeds: got {args.seeds} from seed {seeds[0]}, expected seeds below 2**63")
    n_arrangements = len(scenario.arrangements)
    if isinstance(w, SyntheticWorkload) or w.format == "lengths":
        _check_seeds(requests_problem(w.rate_per_s * scenario.cap_s(None), n_arrangements, len(seeds)))
    results = []
    for s in seeds:
        results.append(run(scenario, seed=s))
        if len(results) == 1 and len(seeds) > 1:  # what the first seed kept, times the seeds
            _check_seeds(requests_problem(len(results[0].stream), n_arrangements, len(seeds)))
            kept = sum(len(r.requests["request_id"]) + len(r.iterations["gpu"]) + len(r.reads["gpu"])
                       for r in results[0].records.values())
            if kept * len(seeds) > MAX_KEPT_ROWS:
                _check_seeds(f"{count_text(kept)} rows kept by the first seed x {len(seeds)} seeds, above the "
                             f"limit of {count_text(MAX_KEPT_ROWS)}")
    many = len(seeds) > 1

    def stack(frame_of) -> pd.DataFrame:
        frames = [frame_of(r).assign(seed=r.seed) if many else frame_of(r) for r in results]
        return pd.concat(frames, ignore_index=True) if many else frames[0]

    summary = stack(lambda r: r.summary)
    files = {
        "summary.csv": summary,
        "requests.csv": stack(lambda r: r.requests),
        "iterations.csv": stack(lambda r: r.iterations),
        "reads.csv": stack(lambda r: r.reads),
    }
    capped = {
        str(r.seed): {name: r.records[name].n_unfinished for name in r.capped} for r in results if r.capped
    }
    run_info = {
        "version": __version__,
        "command": ["python", "-m", "disagg_simpy", *(sys.argv[1:] if argv is None else argv)],
        "seed": seeds[0] if not many else None,
        "seeds": seeds,
        "scenario": scenario.model_dump(mode="json"),
        "scenario_file": str(args.scenario),
        "workload": results[0].stream.info,
        "max_sim_s": results[0].stream.cap_ns / 1e9,
        "capped": capped,
    }
    if not args.no_plots:
        from .plots import check_plot_options, write_plots

        check_plot_options(results[0], args.window, args.follow)  # before anything is written
    make_folder(out, "--out")
    try:
        with all_or_nothing():  # every output is new, or none is
            for name, frame in files.items():
                atomic_write_text(out / name, csv_text(frame))  # = frame.to_csv(index=False), faster
            atomic_write_text(out / "run.json", json.dumps(run_info, indent=2) + "\n")
            if args.save_trace is not None:
                write_trace(results[0].stream, args.save_trace)
            if plots_dir is not None:
                write_plots(results[0], plots_dir, window=args.window, n_replies=args.replies, follow=args.follow)
    except OSError as err:  # a full disk, a folder removed meanwhile...
        where = f" ({err.filename})" if err.filename else ""
        raise _NotWritten(
            f"cannot write the results: {err.strerror or err}{where}; earlier results were left as they were"
        ) from None

    if args.json:
        print(json.dumps(summary_json(summary), indent=2))
    else:
        rate = f"{w.rate_per_s:g} requests/s" if w.rate_per_s is not None else ""
        traffic = f"trace {w.trace} ({w.format}) {'at ' + rate if rate else ''}".rstrip() if hasattr(w, "trace") else rate
        seed_text = f"seed {seeds[0]}" if not many else f"seeds {seeds[0]}..{seeds[-1]}, mean ± 95% half-width"
        counts = summary.drop_duplicates("seed")["n_requests"] if many else summary["n_requests"].iloc[:1]
        n_text = f"{counts.mean():.0f} measured requests" + (" per seed on average" if many else "")
        print(f"{scenario.name}: {traffic}, {seed_text}; {n_text}")
        print(format_table(summary))
        print(f"results in {out}/")
        if plots_dir is not None:
            print(f"pictures in {plots_dir}/")
    for seed, arrangements in capped.items():
        for name, n in arrangements.items():
            print(
                f"warning: {name} (seed {seed}): the safety cap max_sim_s={run_info['max_sim_s']:g} s ended the run "
                f"with {n} measured {'reply' if n == 1 else 'replies'} unfinished; they count as not on time",
                file=sys.stderr,
            )
    return 0


def _check_seeds(problem: str | None) -> None:
    if problem:
        raise InputError(f"--seeds: got {problem}; expected fewer seeds (or a smaller run)")


def build_describe_parser() -> argparse.ArgumentParser:
    from .traces import FORMATS

    p = _Parser(
        prog="python -m disagg_simpy describe",
        description="Print a trace's statistics: requests, duration, rate, burstiness, busiest "
        "second and minute, prompt and reply percentiles.",
    )
    p.add_argument("trace", type=Path, help="trace file")
    p.add_argument("--format", choices=FORMATS, default="csv", help="trace format (default csv)")
    p.add_argument("--plot", type=Path, metavar="FILE", help="also write a PNG of arrivals per second and lengths")
    return p


def _describe(argv: Sequence[str]) -> int:
    from .traces import describe_trace, format_description, plot_description, read_trace

    args = build_describe_parser().parse_args(argv)
    table = read_trace(args.trace, args.format)
    print(format_description(describe_trace(table)))
    if args.plot is not None:
        make_folder(args.plot.parent if str(args.plot.parent) else Path("."), "--plot")
        plot_description(table, args.plot)
        print(f"plot in {args.plot}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 ok, 1 internal error, 2 bad input, 130 interrupted)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["describe"]:
            return _describe(args[1:])
        return _run(argv)
    except InputError as err:
        print(f"error: {_one_line(str(err))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except _NotWritten as err:
        print(f"error: {_one_line(str(err))}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt as err:
        from .files import InterruptedAfterWriting

        if isinstance(err, InterruptedAfterWriting):
            print("interrupted: the new results had all been written", file=sys.stderr)
        else:
            print("interrupted: earlier results were left as they were", file=sys.stderr)
        return EXIT_INTERRUPTED
    except SystemExit as done:  # --help and --version
        return done.code if isinstance(done.code, int) else 0
    except BrokenPipeError:  # e.g. piped into `head`: the results are written; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except MemoryError:
        print("error: out of memory; see README 'Errors and limits' for the sizes a run may take", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception as err:  # a bug: still one line, unless asked for the traceback
        if os.environ.get("DISAGG_SIMPY_TRACEBACK"):
            raise
        print(
            f"error: internal error (a bug; please report it): {type(err).__name__}: {_one_line(str(err))} "
            "(set DISAGG_SIMPY_TRACEBACK=1 to see where)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _one_line(text: str) -> str:
    return " ".join(text.split("\n")).strip()

"""What the many-run commands (sweep, goodput) share: their flags, the scenario with the
flags' overrides, the seeds, the runner (local pool or Dask, resumable store) and writing.

The store lives in the results folder (`<out>/store.sqlite`): re-running a command there skips
every run already finished, and says how many.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import __version__
from ..errors import InputError
from ..files import check_folder, check_output_file, check_outputs_apart, make_folder
from .common import NotWritten, Parser, check_own_folder, int_at_least, path_flag, positive_float

STORE_NAME = "store.sqlite"


def batch_parser(prog: str, description: str) -> Parser:
    """A parser with the flags every many-run command takes."""
    p = Parser(prog=f"python -m disagg_simpy {prog}", description=description)
    p.set_defaults(subcommand=prog)
    p.add_argument("scenario", type=Path, help="scenario YAML file (see scenarios/default.yaml)")
    p.add_argument("--seeds", type=int_at_least("--seeds", 1, 10_000), metavar="N",
                   help="seeds SEED..SEED+N-1 at every point (default: the scenario's seeds:, else 1)")
    p.add_argument("--seed", type=int_at_least("--seed", 0), help="override the scenario's first seed")
    p.add_argument("--measure-s", type=positive_float("--measure-s"), metavar="S",
                   help="override workload.measure_s, the end of the measured window (s)")
    p.add_argument("--out", type=path_flag("--out"), metavar="DIR",
                   help=f"results folder (default: runs/<scenario name>-{prog}/; a folder of another command's "
                   "results is refused); its store.sqlite keeps finished runs")
    p.add_argument("--json", action="store_true", help="print the table's rows as JSON instead of the text table")
    p.add_argument("--no-plots", action="store_true", help="skip the picture")
    p.add_argument("--html", type=path_flag("--html", "a file name"), metavar="FILE",
                   help="also write the results as one self-contained HTML page (sortable table, charts; no network)")
    p.add_argument("--workers", type=int_at_least("--workers", 1, 1024), metavar="N",
                   help="local worker processes (default: every core)")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run on the Dask cluster whose scheduler is at ADDRESS (e.g. tcp://10.0.0.5:8786)")
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


def load(args: argparse.Namespace):
    """The scenario with --seed, --seeds and --measure-s, validated as one."""
    from ..scenario.loading import load_scenario

    scenario = load_scenario(args.scenario)
    changes = {"seed": args.seed, "seeds": args.seeds, "workload.measure_s": args.measure_s}
    flags = {"seed": f"--seed {args.seed}", "seeds": "--seeds",
             "workload.measure_s": f"--measure-s {args.measure_s:g}" if args.measure_s else "--measure-s"}
    return scenario.with_overrides(flags=flags, **changes)


def seeds_of(scenario) -> tuple[tuple[int, ...], str]:
    """The seeds to run, and a note when they collapse: a trace with its own arrival times
    gives the same requests whatever the seed, so one seed says all."""
    from ..scenario.schema import TraceWorkload

    w = scenario.workload
    seeds = tuple(range(scenario.seed, scenario.seed + scenario.seeds))
    if isinstance(w, TraceWorkload) and w.format != "lengths" and len(seeds) > 1:
        return seeds[:1], f"note: the trace fixes every arrival, so seeds give identical runs; running seed {seeds[0]} only"
    return seeds, ""


def out_folder(args: argparse.Namespace, scenario, names: list[str]) -> Path:
    """The results folder, checked before any run (`files.check_output_file` for every file);
    no output may be the scenario file or its trace."""
    from ..scenario.schema import TraceWorkload
    from ..workload.catalog import CATALOG

    out = check_folder(args.out if args.out is not None else Path("runs") / f"{scenario.name}-{args.subcommand}", "--out")
    check_own_folder(out, args.subcommand)
    outputs = {f"--out {out / name}": check_output_file(out / name, "--out") for name in [*names, STORE_NAME]}
    if getattr(args, "html", None) is not None:
        outputs[f"--html {args.html}"] = check_output_file(args.html, "--html")
    inputs = {"scenario file": Path(args.scenario)}
    w = scenario.workload
    if isinstance(w, TraceWorkload) and w.trace not in CATALOG:  # a path, not a public trace's id
        inputs["trace file"] = Path(w.trace) if Path(w.trace).is_absolute() else scenario.folder / w.trace
    check_outputs_apart(outputs, inputs)
    return out


def open_runner(args: argparse.Namespace, out: Path):
    """The runner: the store in `out`, a local pool or Dask, a progress bar on a terminal."""
    from ..sweep.runner import Runner, make_pool
    from ..sweep.store import Store

    make_folder(out, "--out")
    pool = make_pool(args.workers, args.dask)
    return Runner(Store(out / STORE_NAME, __version__), pool)


def over_seeds(seeds) -> str:
    """'seed 1' or 'mean of 30 seeds': what a figure over `seeds` is."""
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"mean of {len(seeds)} seeds"


def skipped_line(runner) -> str:
    total = runner.skipped + runner.ran
    if not runner.skipped:
        return f"{total} runs, stored in {runner.store.path}"
    return (f"{runner.skipped} of {total} runs were already in {runner.store.path} and were skipped; "
            f"{runner.ran} ran now")


def run_info(args: argparse.Namespace, argv, scenario, seeds, **more) -> dict:
    """run.json: the command line that reproduces the results (its subcommand included), the
    seeds, the scenario as run, and the command's own figures."""
    return {
        "version": __version__,
        "command": ["python", "-m", "disagg_simpy", *(sys.argv[1:] if argv is None else [args.subcommand, *argv])],
        "subcommand": args.subcommand,
        "seeds": list(seeds),
        "scenario": scenario.model_dump(mode="json"),
        **more,
    }


def write_all(out: Path, texts: dict[str, str], frames_parquet: dict, picture, page=None) -> None:
    """Every output, all or nothing: CSV/JSON texts, Parquet tables, the picture
    (`picture(path_folder)` or None), then the --html page (`page()` or None)."""
    from ..files import PartlyWritten, all_or_nothing, atomic_path, atomic_write_text

    try:
        with all_or_nothing():
            for name, text in texts.items():
                atomic_write_text(out / name, text)
            for name, frame in frames_parquet.items():
                with atomic_path(out / name) as tmp:
                    frame.to_parquet(tmp, index=False)
            if picture is not None:
                picture(out)
            if page is not None:
                page()
    except PartlyWritten as err:  # a folder changed under the run after every check
        raise NotWritten(f"cannot write the results: {err.strerror or err} ({err.filename}); {len(err.replaced)} "
                         f"of {len(err.replaced) + len(err.kept)} files were already replaced, the others were left "
                         "as they were") from None
    except OSError as err:
        where = f" ({err.filename})" if err.filename else ""
        raise NotWritten(f"cannot write the results: {err.strerror or err}{where}; earlier results were left "
                         "as they were") from None


def html_page(args: argparse.Namespace, draw):
    """The --html page's writer for `write_all` (None without --html): its folder made, then
    `draw(path)`."""
    if args.html is None:
        return None

    def write() -> None:
        make_folder(args.html.parent, "--html")
        draw(args.html)

    return write


def json_rows(frame) -> str:
    from ..results.report import summary_json

    return json.dumps(summary_json(frame), indent=2)

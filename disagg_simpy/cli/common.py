"""What every command shares: one-line argument errors, flag value parsers, exit codes."""

from __future__ import annotations

import argparse
import codecs
import sys
from pathlib import Path

from ..errors import InputError
from ..inputs import read_input

EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class NotWritten(Exception):
    """The results could not be written (exit code 1); none of the earlier ones was replaced."""


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one line (no usage dump) via InputError, and takes
    no abbreviations (`--seed` must not become another command's `--seeds`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        raise InputError(f"{self.prog}: {message} (see --help)")


def positive_float(flag: str):
    from ..sweep.grid import positive_number

    return lambda text: positive_number(text, flag, "a number")


def cost_error_flag(text: str) -> float:
    """`--cost-error PCT`: a percentage above 0 and below 100 (costs scaled by 1 - PCT/100 stay > 0)."""
    from ..sweep.grid import positive_number

    expected = "a percentage above 0 and below 100 (each side's costs off by up to that much either way)"
    value = positive_number(text, "--cost-error", expected)
    if value >= 100:
        raise InputError(f"--cost-error: got {text!r}, expected {expected}")
    return value


def int_list_flag(flag: str, example: str, what: str, none_ok: bool = True):
    """A comma-separated list of distinct whole numbers >= 1 (or 'none', when allowed: ())."""

    def parse(text: str) -> tuple[int, ...]:
        if none_ok and text.strip() == "none":
            return ()
        try:
            values = tuple(int(v) for v in text.split(","))
        except ValueError:
            raise InputError(f"{flag}: got {text!r}, expected {example}{' (or none)' * none_ok}") from None
        if any(v < 1 for v in values) or len(set(values)) != len(values):
            raise InputError(f"{flag}: got {text!r}, expected distinct whole numbers of {what} >= 1")
        return values

    return parse


def price_flag(text: str) -> tuple[str, float]:
    """--price KIND=USD: a GPU kind and its price per GPU-hour (costs/gpus.py)."""
    from ..costs import gpus

    kind, eq, usd = text.partition("=")
    try:
        value = float(usd) if eq else None
    except ValueError:
        value = None
    if value is None:
        raise InputError(f"--price: got {text!r}, expected KIND=USD per GPU-hour, like h100-80gb=2.49")
    problem = gpus.problem(kind.strip()) or gpus.price_problem(value)
    if problem:
        raise InputError(f"--price {text}: {problem}")
    return kind.strip(), value


def add_price_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--price", type=price_flag, action="append", default=[], metavar="KIND=USD",
                   help="a GPU kind's price per GPU-hour, over the scenario's prices: and the table's (python -m "
                        "disagg_simpy presets gpus); shows the costs (repeatable; docs/cost.md)")


def int_at_least(flag: str, low: int, high: int = 2**63 - 1):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise InputError(f"{flag}: got {text!r}, expected a whole number") from None
        if not low <= value <= high:
            raise InputError(f"{flag}: got {text!r}, expected a whole number from {low} to {high}")
        return value

    return parse


def path_flag(flag: str, what: str = "a folder"):
    """A path flag's value; an empty one is refused (Path("") would quietly mean ".")."""

    def parse(text: str) -> Path:
        if not text.strip():
            raise InputError(f"{flag}: got an empty path, expected {what}")
        if "\0" in text:
            raise InputError(f"{flag}: got a path with a NUL character, expected a path")
        return Path(text)

    return parse


MAX_MESSAGE_CHARS = 1000
#: An earlier run's run.json read back (who wrote a folder, which files it owns).
MAX_RUN_JSON_BYTES = 64 << 20
_PLAIN = {"±": "+/-", "×": "x", "µ": "u", "…": "...", "–": "-", "—": "-", "≤": "<=", "≥": ">=", "→": "->"}


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS - len("error: ")) -> str:
    """A message as one printable line: newlines joined, control characters escaped, and cut to
    `limit` characters, the note of what was left out included (the start and the end kept),
    whatever a bad input held: with its `error: `, a printed line stays within MAX_MESSAGE_CHARS."""
    text = " ".join(text.split("\n")).strip()
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    if len(text) > limit:
        note = ""
        for _ in range(3):  # (the note's own length changes the count it states, by a digit at most)
            note = f" ... ({len(text) - (limit - len(note)):,} characters left out) ... "
        head = (limit - len(note)) * 2 // 3
        text = f"{text[:head]}{note}{text[len(text) - (limit - len(note) - head):]}"
    return text


def say(text: str) -> None:
    """One line on stderr; if stderr itself cannot be written, there is no one left to tell."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _plain(err: UnicodeEncodeError) -> tuple[str, int]:
    """Codec error handler: ± as +/- and the like, anything else as a backslash escape."""
    bad = err.object[err.start:err.end]
    return "".join(_PLAIN.get(c) or c.encode("unicode_escape").decode("ascii") for c in bad), err.end


codecs.register_error("disagg_simpy_plain", _plain)  # type: ignore[arg-type]  # used to encode only: always a UnicodeEncodeError


def tolerant_output() -> None:
    """Let stdout and stderr print what their encoding can (PYTHONIOENCODING=ascii, an old
    terminal): `±` becomes `+/-`, other characters a backslash escape, never an error."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="disagg_simpy_plain")  # type: ignore[union-attr]  # (a replaced stream may lack it)
        except (AttributeError, ValueError, OSError):
            pass


def earlier_run_json(out: Path) -> dict | None:
    """The run.json an earlier run left in `out`, or None (none, unreadable, not a mapping, or
    not a regular file: a pipe there is never waited on)."""
    import json

    try:
        info = json.loads(read_input(out / "run.json", "a run.json", MAX_RUN_JSON_BYTES))
    except (InputError, OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def results_owner(out: Path) -> str | None:
    """Which command wrote the results in `out`, as its run.json says ("run", "sweep", ...);
    None when there is none (or it cannot be read)."""

    info = earlier_run_json(out)
    if info is None:
        return None
    if isinstance(info.get("subcommand"), str):
        return info["subcommand"]
    command = info.get("command")
    if isinstance(command, list) and len(command) > 3 and command[3] in ("sweep", "goodput", "plan", "map"):
        return command[3]  # written before run.json said its subcommand
    return "run" if isinstance(command, list) else None


def check_own_folder(out: Path, mine: str) -> None:
    """Refuse a results folder another command wrote (its run.json and files would be replaced
    or mixed with this command's)."""
    owner = results_owner(out)
    if owner is not None and owner != mine:
        what = "a run" if owner == "run" else f"`{owner}`"
        raise InputError(f"--out {out}: holds the results of {what} (its run.json), expected a new folder or one of "
                         f"{'a run' if mine == 'run' else f'`{mine}`'}'s own (each command has its own default folder)")

def load_with_flags(args: argparse.Namespace, rate: float | None = None):
    """The scenario file with the flags that override its keys (`--seed`, `--seeds`,
    `--measure-s`, and `rate` when the command's --rate sets the scenario's rate), validated as
    one: a bad value blames its flag. On a trace, a rate replaces any time_scale."""
    from ..scenario.loading import load_scenario
    from ..scenario.schema import DROP, TraceWorkload

    scenario = load_scenario(args.scenario)
    seed, seeds, measure_s = args.seed, args.seeds, args.measure_s
    changes = {"seed": seed, "seeds": seeds, "workload.rate_per_s": rate, "workload.measure_s": measure_s}
    flags = {
        "seed": f"--seed {seed}",
        "seeds": "--seeds",
        "workload.rate_per_s": f"--rate {rate:g}" if rate is not None else "--rate",
        "workload.measure_s": f"--measure-s {measure_s:g}" if measure_s is not None else "--measure-s",
    }
    if rate is not None and isinstance(scenario.workload, TraceWorkload):
        changes["workload.time_scale"] = DROP
    if getattr(args, "price", None):  # --price KIND=USD over the scenario's prices:
        changes["prices"] = {**(scenario.prices or {}), **dict(args.price)}
        flags["prices"] = "--price"
    scenario = scenario.with_overrides(flags=flags, **changes)
    if getattr(args, "fixed", None):  # plan, map: --set KEY=VALUE
        from ..sweep.grid import apply_sets

        scenario = apply_sets(scenario, args.fixed)
    for warning in scenario.preset_info().get("preset_warnings", []):  # a preset outside its fit
        print(f"warning: {args.scenario}: {warning}", file=sys.stderr)
    return scenario


def seeds_to_run(scenario) -> tuple[tuple[int, ...], str]:
    """The seeds to run (`seed`, `seeds`), and a note when they collapse to one: a trace with its
    own arrival times gives the same requests whatever the seed, unless a rule draws per request
    (`counts.seed_matters`)."""
    seeds = tuple(range(scenario.seed, scenario.seed + scenario.seeds))
    from ..scenario.counts import seed_matters

    if seed_matters(scenario) or len(seeds) == 1:
        return seeds, ""
    w = scenario.workload
    return seeds[:1], (f"warning: {len(seeds)} seeds: the {w.format} trace {w.trace} fixes every request, so every "
                       f"seed gives the same figures; running seed {seeds[0]} only")


def check_follow_is_one_request(scenario, request_id: int) -> None:
    """`--follow N` draws id N in every arrangement: refused where n_requests_per_gpu gives an
    arrangement another request under that id (a subset in another order: `pick: sampled`,
    sessions), rather than show two requests as one (`explain` follows one by identity)."""
    from ..workload.counted import own_id
    from ..workload.stream import streams_by_gpus

    streams = streams_by_gpus(scenario, scenario.seed)
    for a in scenario.arrangements:
        own = own_id(streams[a.n_gpus].origin, len(streams[a.n_gpus]), request_id)
        if own is not None and own != request_id:
            raise InputError(f"--follow: got {request_id}, but with n_requests_per_gpu that request is request {own} "
                             f"in arrangement {a.name!r} and id {request_id} another one; expected a request with "
                             f"one id everywhere, or use `explain --request {request_id}`, which follows it by identity")

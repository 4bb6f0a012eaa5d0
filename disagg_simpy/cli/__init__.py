"""The command line: `python -m disagg_simpy SCENARIO` runs a scenario (`run.py`);
`python -m disagg_simpy describe TRACE` describes a trace (`describe.py`); `python -m disagg_simpy
traces fetch|list` downloads and lists the public traces (`traces.py`); `sweep` runs a grid of
points (`sweep.py`), `goodput` finds each arrangement's capacity (`goodput.py`), `plan` ranks every
way to use N GPUs (`plan.py`) and `map` shows where the best one flips (`map.py`); `explain
SCENARIO --request ID` tells one request's story (`explain.py`).

Bad input is one line on stderr and exit code 2; a failure to write (or of the environment:
memory, a full disk, a closed output), one line and exit 1; Ctrl-C, 130; SIGTERM and SIGHUP,
128 + the signal's number, cleaned up like Ctrl-C.
"""

from __future__ import annotations

import difflib
import errno
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from .. import files
from ..errors import InputError
from ..files import signals_as_interrupts
from .common import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, NotWritten, one_line, say, tolerant_output
from .describe import describe
from .explain import explain
from .fit import fit_command
from .goodput import goodput_command
from .map import map_command
from .plan import plan_command
from .presets import presets_command
from .run import OUTPUT_FILES, build_parser, run
from .sweep import sweep_command
from .traces import traces
from .validate import validate_command

__all__ = ["OUTPUT_FILES", "build_parser", "main"]

#: subcommand -> its entry point (argv after the command's name); anything else is a run
COMMANDS = {"describe": describe, "traces": traces, "sweep": sweep_command, "goodput": goodput_command,
            "plan": plan_command, "map": map_command, "explain": explain, "presets": presets_command,
            "fit": fit_command, "validate": validate_command}


#: the commands whose runs keep summary rows only, an arrangement at a time (sweep/runner.py)
BATCH_COMMANDS = ("sweep", "goodput", "plan", "map")


def command_help() -> dict[str, str]:
    """Each subcommand's one-line summary (its entry function's first docstring line), for --help."""
    return {name: (entry.__doc__ or "").strip().split("\n")[0] for name, entry in COMMANDS.items()}


def _check_not_a_misspelt_command(word: str) -> None:
    """A first word that is no file but close to a command name is a misspelt command; `run`
    (no file of that name) is how a scenario runs, said plainly."""
    if word == "run" and not Path(word).exists():
        raise InputError("there is no command 'run': a scenario runs as `python -m disagg_simpy SCENARIO` "
                         "(e.g. python -m disagg_simpy scenarios/default.yaml; see --help)")
    near = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.6)
    if near and not word.startswith("-") and not Path(word).exists():
        raise InputError(f"got {word!r}, which is neither a command nor a scenario file; did you mean {near[0]!r}? "
                         f"(commands: {', '.join(COMMANDS)}; see --help)")

_OUT_OF_MEMORY = "error: out of memory; see docs/guarantees.md for the sizes a run may take"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 ok, 1 failed, 2 bad input, 130 interrupted)."""
    args = list(sys.argv[1:] if argv is None else argv)
    tolerant_output()
    files.written.clear()
    hook, sys.unraisablehook = sys.unraisablehook, _quiet_unraisable(sys.unraisablehook)
    stdout, sys.stdout = sys.stdout, _Stdout(sys.stdout)
    try:
        with signals_as_interrupts():
            code = _main(args, argv)
            if code == 0:
                code = _flush_stdout()
    finally:
        sys.unraisablehook = hook
        if isinstance(sys.stdout, _Stdout):
            sys.stdout = stdout
    return code


def _main(args: list[str], argv) -> int:
    try:
        command = COMMANDS.get(args[0]) if args else None
        if command is not None and args[0] in BATCH_COMMANDS:
            from ..scenario.limits import one_arrangement_at_a_time

            with one_arrangement_at_a_time():  # their tasks keep one arrangement's rows at a time
                return command(args[1:])
        if command is not None:
            return command(args[1:])
        if args:
            _check_not_a_misspelt_command(args[0])
        return run(argv, commands=command_help())
    except InputError as err:
        say(f"error: {one_line(str(err))}")
        return EXIT_BAD_INPUT
    except NotWritten as err:
        say(f"error: {one_line(str(err))}")
        return EXIT_INTERNAL
    except KeyboardInterrupt as err:
        return _interrupted(err)
    except SystemExit as done:  # --help and --version
        return done.code if isinstance(done.code, int) else 0
    except BrokenPipeError:  # e.g. piped into `head`: the results are written; stop quietly
        _silence_stdout()
        return 0
    except MemoryError as err:
        _drop(err)  # free what the failed step held before saying anything
        say(_OUT_OF_MEMORY)
        return EXIT_INTERNAL
    except OSError as err:  # the environment failed: say what, not "a bug"
        if _out_of_memory(err):
            _drop(err)
            say(_OUT_OF_MEMORY)
            return EXIT_INTERNAL
        if getattr(err, "on_stdout", False):
            _silence_stdout()
            say(f"error: cannot write to standard output: {err.strerror or err}")
            return EXIT_INTERNAL
        where = f" ({err.filename})" if err.filename else ""
        say(f"error: {err.strerror or one_line(str(err))}{where}")
        return EXIT_INTERNAL
    except Exception as err:  # a bug: still one line, unless asked for the traceback
        if os.environ.get("DISAGG_SIMPY_TRACEBACK"):
            raise
        if _out_of_memory(err):
            _drop(err)
            say(_OUT_OF_MEMORY)
            return EXIT_INTERNAL
        say(
            f"error: internal error (a bug; please report it): {type(err).__name__}: {one_line(str(err))} "
            "(set DISAGG_SIMPY_TRACEBACK=1 to see where)"
        )
        return EXIT_INTERNAL


def _interrupted(err: KeyboardInterrupt) -> int:
    from ..files import InterruptedAfterWriting, written

    signum = getattr(err, "signum", signal.SIGINT)
    what = "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
    if isinstance(err, InterruptedAfterWriting) or written:  # e.g. while the table was printed
        say(f"{what}: the new results had all been written")
    else:
        say(f"{what}: earlier results were left as they were")
    return EXIT_INTERRUPTED if signum == signal.SIGINT else 128 + signum


#: What libraries say when memory runs out without raising MemoryError (a shared library that
#: cannot be mapped under `ulimit -v`, pyarrow failing to make a Python string, C++ new).
_NO_MEMORY_TEXT = ("failed to map segment", "cannot allocate memory", "bad_alloc", "out of memory")


def _out_of_memory(err: BaseException | None) -> bool:
    """Whether `err`, or one it came from, means memory ran out."""
    seen = set()
    while err is not None and id(err) not in seen:
        text = str(err).lower()
        if isinstance(err, MemoryError) or getattr(err, "errno", None) == errno.ENOMEM:
            return True
        if any(t in text for t in _NO_MEMORY_TEXT):
            return True
        if type(err).__name__.startswith("Arrow") and text.startswith("unknown error: wrapping"):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def _quiet_unraisable(hook):
    """Under memory pressure, finalizers (generators, buffers) fail as they are collected, and
    Python would print each ('Exception ignored in ...'): the one out-of-memory line says it."""

    def quiet(unraisable):
        if not _out_of_memory(unraisable.exc_value):
            hook(unraisable)

    return quiet


def _drop(err: BaseException | None) -> None:
    """Let go of the frames (and arrays) a failed step's traceback keeps alive."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        err.__traceback__ = None
        err = err.__cause__ or err.__context__


def _silence_stdout() -> None:
    """Send what is left of stdout to /dev/null, so exiting does not fail a second time."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


class _Stdout:
    """sys.stdout, marking an OSError raised while writing it (`on_stdout`), so that a full or
    closed output is said as such rather than taken for a file of ours."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as err:
            err.on_stdout = True
            raise

    def flush(self):
        try:
            return self._stream.flush()
        except OSError as err:
            err.on_stdout = True
            raise

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _flush_stdout() -> int:
    """Flush stdout now, so a closed or full output is one line and exit 1, not a traceback."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    except OSError as err:
        _silence_stdout()
        say(f"error: cannot write to standard output: {err.strerror or err}")
        return EXIT_INTERNAL
    return 0

"""The command line: `python -m disagg_simpy SCENARIO` runs a scenario (`run.py`);
`python -m disagg_simpy describe TRACE` describes a trace (`describe.py`); `python -m disagg_simpy
traces fetch|list` downloads and lists the public traces (`traces.py`); `sweep` runs a grid of
points (`sweep.py`) and `goodput` finds each arrangement's capacity (`goodput.py`); `explain
SCENARIO --request ID` tells one request's story (`explain.py`).

Bad input is one line on stderr and exit code 2; a failure to write (or of the environment:
memory, a full disk, a closed output), one line and exit 1; Ctrl-C, 130; SIGTERM and SIGHUP,
128 + the signal's number, cleaned up like Ctrl-C.
"""

from __future__ import annotations

import difflib
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import InputError
from ..files import signals_as_interrupts
from .common import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, NotWritten, one_line, say, tolerant_output
from .describe import describe
from .explain import explain
from .goodput import goodput_command
from .run import OUTPUT_FILES, build_parser, run
from .sweep import sweep_command
from .traces import traces

__all__ = ["OUTPUT_FILES", "build_parser", "main"]

#: subcommand -> its entry point (argv after the command's name); anything else is a run
COMMANDS = {"describe": describe, "traces": traces, "sweep": sweep_command, "goodput": goodput_command, "explain": explain}


def command_help() -> dict[str, str]:
    """Each subcommand's one-line summary (its entry function's first docstring line), for --help."""
    return {name: (entry.__doc__ or "").strip().split("\n")[0] for name, entry in COMMANDS.items()}


def _check_not_a_misspelt_command(word: str) -> None:
    """A first word that is no file but close to a command name is a misspelt command."""
    near = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.6)
    if near and not word.startswith("-") and not Path(word).exists():
        raise InputError(f"got {word!r}, which is neither a command nor a scenario file; did you mean {near[0]!r}? "
                         f"(commands: {', '.join(COMMANDS)}; see --help)")

_OUT_OF_MEMORY = "error: out of memory; see README 'Errors and limits' for the sizes a run may take"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 ok, 1 failed, 2 bad input, 130 interrupted)."""
    args = list(sys.argv[1:] if argv is None else argv)
    tolerant_output()
    with signals_as_interrupts():
        code = _main(args, argv)
        if code == 0:
            code = _flush_stdout()
    return code


def _main(args: list[str], argv) -> int:
    try:
        command = COMMANDS.get(args[0]) if args else None
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
        where = f" ({err.filename})" if err.filename else ""
        say(f"error: {err.strerror or one_line(str(err))}{where}")
        return EXIT_INTERNAL
    except Exception as err:  # a bug: still one line, unless asked for the traceback
        if os.environ.get("DISAGG_SIMPY_TRACEBACK"):
            raise
        if _caused_by(err, MemoryError):
            _drop(err)
            say(_OUT_OF_MEMORY)
            return EXIT_INTERNAL
        say(
            f"error: internal error (a bug; please report it): {type(err).__name__}: {one_line(str(err))} "
            "(set DISAGG_SIMPY_TRACEBACK=1 to see where)"
        )
        return EXIT_INTERNAL


def _interrupted(err: KeyboardInterrupt) -> int:
    from ..files import InterruptedAfterWriting

    signum = getattr(err, "signum", signal.SIGINT)
    what = "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
    if isinstance(err, InterruptedAfterWriting):
        say(f"{what}: the new results had all been written")
    else:
        say(f"{what}: earlier results were left as they were")
    return EXIT_INTERRUPTED if signum == signal.SIGINT else 128 + signum


def _caused_by(err: BaseException, kind: type) -> bool:
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, kind):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def _drop(err: BaseException) -> None:
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

"""The command line: `python -m disagg_simpy SCENARIO` runs a scenario (`run.py`);
`python -m disagg_simpy describe TRACE` describes a trace (`describe.py`); `python -m disagg_simpy
traces fetch|list` downloads and lists the public traces (`traces.py`); `python -m disagg_simpy
explain SCENARIO --request ID` tells one request's story (`explain.py`).

Bad input is one line on stderr and exit code 2; a failure to write, exit 1; Ctrl-C, 130.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import InputError
from .common import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, NotWritten, one_line
from .describe import describe
from .explain import explain
from .run import OUTPUT_FILES, build_parser, run
from .traces import traces

__all__ = ["OUTPUT_FILES", "build_parser", "main"]

#: subcommand -> its entry point (argv after the command's name); anything else is a run
COMMANDS = {"describe": describe, "traces": traces, "explain": explain}


def command_help() -> dict[str, str]:
    """Each subcommand's one-line summary (its entry function's first docstring line), for --help."""
    return {name: (entry.__doc__ or "").strip().split("\n")[0] for name, entry in COMMANDS.items()}


def _check_not_a_misspelt_command(word: str) -> None:
    """A first word that is no file but close to a command name is a misspelt command."""
    near = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.6)
    if near and not word.startswith("-") and not Path(word).exists():
        raise InputError(f"got {word!r}, which is neither a command nor a scenario file; did you mean {near[0]!r}? "
                         f"(commands: {', '.join(COMMANDS)}; see --help)")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 ok, 1 internal error, 2 bad input, 130 interrupted)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        command = COMMANDS.get(args[0]) if args else None
        if command is not None:
            return command(args[1:])
        if args:
            _check_not_a_misspelt_command(args[0])
        return run(argv, commands=command_help())
    except InputError as err:
        print(f"error: {one_line(str(err))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except NotWritten as err:
        print(f"error: {one_line(str(err))}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt as err:
        from ..files import InterruptedAfterWriting

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
            f"error: internal error (a bug; please report it): {type(err).__name__}: {one_line(str(err))} "
            "(set DISAGG_SIMPY_TRACEBACK=1 to see where)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL

"""What every command shares: one-line argument errors, flag value parsers, exit codes."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ..errors import InputError

EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class NotWritten(Exception):
    """The results could not be written (exit code 1); none of the earlier ones was replaced."""


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one line (no usage dump) via InputError."""

    def error(self, message: str):  # type: ignore[override]
        raise InputError(f"{self.prog}: {message} (see --help)")


def positive_float(flag: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{flag}: got {text!r}, expected a number") from None
        if not math.isfinite(value) or value <= 0:
            raise InputError(f"{flag}: got {text!r}, expected a number > 0")
        return value

    return parse


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


def path_flag(flag: str):
    """A path flag's value; an empty one is refused (Path("") would quietly mean ".")."""

    def parse(text: str) -> Path:
        if not text.strip():
            raise InputError(f"{flag}: got an empty path, expected {'a file name' if flag in ('--save-trace', '--html') else 'a folder'}")
        if "\0" in text:
            raise InputError(f"{flag}: got a path with a NUL character, expected a path")
        return Path(text)

    return parse


def one_line(text: str) -> str:
    return " ".join(text.split("\n")).strip()

"""Reading a user's input file (a scenario, a trace, a `fit` table, an earlier run's run.json)
in one place: anything but a regular file is refused at once in one line (a named pipe would
wait for a writer forever, a device such as /dev/zero never ends), and so is a file over the
caller's size limit; at most that many bytes are ever read, however the file grows meanwhile."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from .errors import InputError

_KINDS = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


@contextmanager
def open_input(path: str | Path, what: str, max_bytes: int, key: str = "") -> Iterator[BinaryIO]:
    """`path` opened for reading if it is a regular file of at most `max_bytes` bytes; otherwise
    a one-line InputError `{path}: {key}got ..., expected {what}`, at once: the open never waits
    (O_NONBLOCK, so a named pipe without a writer opens and is refused) and the kind of file is
    checked on the open file itself, so nothing swapped in after a check is read."""
    where = f"{path}: {key}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{where}no such file, expected {what}") from None
    except OSError as err:
        raise InputError(f"{where}got a path that cannot be read ({err.strerror or err}), expected {what}") from None
    try:
        mode, size = (st := os.fstat(fd)).st_mode, st.st_size
        if stat.S_ISDIR(mode):
            raise InputError(f"{where}got a directory, expected {what}")
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "a special file")
            raise InputError(f"{where}got {kind} (not a regular file), expected {what}")
        if size > max_bytes:
            raise InputError(f"{where}got {size:,} bytes, expected {what} of at most {max_bytes:,} bytes")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        yield f


def read_input(path: str | Path, what: str, max_bytes: int, key: str = "") -> bytes:
    """The bytes of a regular file of at most `max_bytes` (`open_input`); at most `max_bytes` + 1
    are read, so a file that grows meanwhile is refused, never read whole."""
    with open_input(path, what, max_bytes, key) as f:
        try:
            raw = f.read(max_bytes + 1)
        except OSError as err:
            raise InputError(f"{path}: {key}got a file that cannot be read ({err.strerror or err}), "
                             f"expected {what}") from None
    if len(raw) > max_bytes:
        raise InputError(f"{path}: {key}got more than {max_bytes:,} bytes, expected {what} of at most {max_bytes:,} bytes")
    return raw

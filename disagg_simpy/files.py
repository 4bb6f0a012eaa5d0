"""Writing result files so that none is ever half written: a temporary file in the same folder,
renamed onto the target only once it is complete (an interrupted run leaves the old file).

Inside `all_or_nothing()`, finished files wait as temporary files and are renamed together when
the block ends, so a run's outputs (CSVs, run.json, pictures) are either all new or all as they
were: an error or Ctrl-C inside the block removes the temporary files, and Ctrl-C during the
renames is held until the last one is done.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import InputError

_pending: list[list[tuple[Path, Path]]] = []  # open all_or_nothing blocks: (temporary, target)


class InterruptedAfterWriting(KeyboardInterrupt):
    """Ctrl-C came while `all_or_nothing` renamed its files: every new file is in place."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path`; renamed onto `path` when the block ends without error
    (or, inside `all_or_nothing()`, when that block ends)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        if _pending:
            _pending[-1].append((Path(tmp), path))
        else:
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="")


@contextmanager
def _sigint_held() -> Iterator[list]:
    """Hold Ctrl-C for the block; the list it yields is non-empty if one came."""
    caught: list = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield caught
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def all_or_nothing() -> Iterator[None]:
    """Files written with `atomic_path` inside the block are renamed into place only when the
    whole block succeeds; otherwise every one is removed and the old files stay."""
    batch: list[tuple[Path, Path]] = []
    _pending.append(batch)
    try:
        yield
        with _sigint_held() as caught:
            for tmp, path in batch:
                os.replace(tmp, path)
            batch.clear()
        if caught:
            raise InterruptedAfterWriting
    finally:
        _pending.pop()
        for tmp, _ in batch:
            tmp.unlink(missing_ok=True)


def check_folder(folder: Path, flag: str) -> Path:
    """Refuse a folder that exists as a file or cannot be created; create nothing."""
    try:
        if folder.exists():
            if not folder.is_dir():
                raise InputError(f"{flag}: {folder} is a file, expected a folder")
            if not os.access(folder, os.W_OK | os.X_OK):
                raise InputError(f"{flag}: got {folder}, which you cannot write to, expected a writable folder")
            return folder
        parent = folder.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise InputError(f"{flag}: cannot create {folder}: {parent} is a file, expected folders")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise InputError(f"{flag}: cannot create {folder}: {parent} is not writable, expected a writable folder")
    except OSError as err:
        raise InputError(f"{flag}: got {folder}, which cannot be used ({err.strerror or err}), expected a folder") from None
    return folder


def make_folder(folder: Path, flag: str) -> Path:
    """Create `folder` (and its parents), or say in one line which flag's path cannot be used."""
    check_folder(folder, flag)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise InputError(f"{flag}: cannot create {folder}: a part of the path is a file, expected folders") from None
    except OSError as err:
        raise InputError(f"{flag}: cannot create {folder} ({err.strerror})") from None
    return folder

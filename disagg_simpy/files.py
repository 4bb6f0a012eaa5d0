"""Writing result files so that none is ever half written, and no user file is ever lost.

Every output is written to a hidden temporary file in its folder and renamed onto the target
only once it is complete (an interrupted run leaves the old file). Inside `all_or_nothing()`,
finished files wait as temporary files and are renamed together when the block ends, so a run's
outputs (CSVs, run.json, pictures) are either all new or all as they were: every target is
checked before the first rename, an error, Ctrl-C or SIGTERM inside the block removes the
temporary files, and those signals are held during the renames.

The rules for output paths, for every command (`check_output_file`, `check_outputs_apart`):
an output is a regular file or a new name in a folder that exists or can be created; a symlink
is written through (its target is replaced, the link stays); a folder, a device, a pipe or a
socket is refused; no output may be an input or another output of the same command. Check
them all before any work, so a bad path costs nothing.
"""

from __future__ import annotations

import os
import re
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import InputError

_pending: list[list[tuple[Path, Path]]] = []  # open all_or_nothing blocks: (temporary, target)
_TMP_MARK = "disagg_simpy"
_TMP_NAME = re.compile(rf"^\..*\.{_TMP_MARK}-(\d+)-[A-Za-z0-9_]{{8}}\.tmp$")
_swept: set[str] = set()  # folders already cleared of stale temporaries in this process
_HELD = ("SIGINT", "SIGTERM", "SIGHUP")  # signals that end a run like Ctrl-C
#: Set when files were renamed into place (a whole `all_or_nothing` block, or a lone file), so
#: that an interruption afterwards is not reported as "earlier results were left".
written: list[Path] = []


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled like Ctrl-C (exit code 128 + the signal's number)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class InterruptedAfterWriting(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP) came while `all_or_nothing` renamed its files: every new file
    is in place."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum


class PartlyWritten(OSError):
    """A rename failed after others had succeeded (a folder changed under the run): `replaced`
    lists the targets already new, `kept` those left as they were."""

    def __init__(self, err: OSError, replaced: list[Path], kept: list[Path]):
        super().__init__(err.errno, err.strerror, err.filename)
        self.replaced, self.kept = replaced, kept


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def name_max(folder: Path) -> int:
    """The longest file name (in bytes) the file system holding `folder` takes (255 if unknown)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _temp_prefix(target: Path) -> str:
    """`.<name>.disagg_simpy-<pid>-`, the name cut so that the whole temporary name (with
    mkstemp's 8 random characters and `.tmp`) fits the file system's limit."""
    tail = f".{_TMP_MARK}-{os.getpid()}-"
    budget = name_max(target.parent) - 1 - len(tail) - 8 - len(".tmp")
    name = os.fsencode(target.name)[: max(budget, 1)].decode("utf-8", errors="ignore") or "x"
    return f".{name}{tail}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's process
        return True
    return True


def clear_stale_temporaries(folder: Path) -> list[Path]:
    """Remove our own temporary files left in `folder` by a process that no longer runs (killed
    with SIGKILL, or a power cut); returns them. Only names we make are touched, and only
    those of dead processes, so a run writing into the same folder meanwhile keeps its own."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        m = _TMP_NAME.match(entry.name)
        if m is None or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
            continue
        try:
            if entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


def _sweep_once(folder: Path) -> None:
    key = os.path.realpath(folder)
    if key not in _swept:
        _swept.add(key)
        clear_stale_temporaries(folder)


def _writable_target(path: Path) -> Path:
    """The file a write to `path` replaces: a symlink's target (the link stays); an OSError if
    it is a folder or a special file."""
    target = Path(os.path.realpath(path))
    try:
        mode = os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):  # a new file (a bad folder is check_folder's)
        return target
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(21, "a folder is in the way", str(path))
    if not stat.S_ISREG(mode):
        raise OSError(22, "not a regular file (a device, pipe or socket)", str(path))
    return target


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path`; renamed onto `path` when the block ends without error
    (or, inside `all_or_nothing()`, when that block ends). A symlink is written through."""
    target = _writable_target(Path(path))
    _sweep_once(target.parent)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        if _pending:
            _pending[-1].append((Path(tmp), target))
        else:
            os.replace(tmp, target)
            written.append(target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="")


@contextmanager
def _signals_held() -> Iterator[list]:
    """Hold Ctrl-C, SIGTERM and SIGHUP for the block; the list it yields gets those that came."""
    caught: list = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    previous = {}
    for name in _HELD:
        signum = getattr(signal, name, None)
        if signum is not None:
            previous[signum] = signal.signal(signum, lambda signum, frame: caught.append(signum))
    try:
        yield caught
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _check_renames(batch: list[tuple[Path, Path]]) -> None:
    """Every rename of the batch can happen: each temporary file is there and each target is
    a regular file or free (checked before the first rename)."""
    for tmp, target in batch:
        os.stat(tmp)
        _writable_target(target)
        if not os.access(target.parent, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied", str(target.parent))


class Commit:
    """What `all_or_nothing` does when its block succeeds, besides the renames: `remove` lists
    old files to delete after them (a previous run's outputs this one no longer writes);
    `not_removed` gets those that could not be."""

    def __init__(self) -> None:
        self.remove: list[Path] = []
        self.not_removed: list[Path] = []


@contextmanager
def all_or_nothing() -> Iterator[Commit]:
    """Files written with `atomic_path` inside the block are renamed into place only when the
    whole block succeeds; otherwise every one is removed and the old files stay. If a rename
    fails even so (a folder changed under the run), `PartlyWritten` says which were replaced.
    After the renames, the files in the yielded `Commit.remove` are deleted (signals held)."""
    batch: list[tuple[Path, Path]] = []
    commit = Commit()
    _pending.append(batch)
    try:
        yield commit
        _check_renames(batch)
        with _signals_held() as caught:
            done: list[Path] = []
            try:
                for tmp, path in batch:
                    os.replace(tmp, path)
                    done.append(path)
                    written.append(path)
            except OSError as err:
                if not done:
                    raise
                raise PartlyWritten(err, done, [p for _, p in batch[len(done):]]) from None
            finally:
                del batch[: len(done)]
            for path in commit.remove:
                try:
                    path.unlink(missing_ok=True)
                except OSError:
                    commit.not_removed.append(path)
        if caught:
            raise InterruptedAfterWriting(caught[0])
    finally:
        _pending.pop()
        for tmp, _ in batch:
            tmp.unlink(missing_ok=True)


@contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """For the block, SIGTERM and SIGHUP raise `Interrupted` (cleaned up like Ctrl-C), and a
    file size limit (ulimit -f) makes a write fail with an error instead of killing the
    process. The previous handlers come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise Interrupted(signum)

    previous: dict[int, Any] = {}  # signal number: its handler before
    for name, handler in (("SIGTERM", interrupt), ("SIGHUP", interrupt), ("SIGXFSZ", signal.SIG_IGN)):
        signum = getattr(signal, name, None)
        if signum is not None:
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# -- output paths ------------------------------------------------------------------------------


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def check_folder(folder: Path, flag: str) -> Path:
    """Refuse a folder that exists as a file or cannot be created; create nothing."""
    try:
        if folder.exists():
            if not folder.is_dir():
                raise InputError(f"{flag}: {folder} is a file, expected a folder")
            if not os.access(folder, os.W_OK | os.X_OK) or _read_only(folder):
                raise InputError(f"{flag}: got {folder}, which you cannot write to, expected a writable folder")
            return folder
        parent = folder.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise InputError(f"{flag}: cannot create {folder}: {parent} is a file, expected folders")
        if not os.access(parent, os.W_OK | os.X_OK) or _read_only(parent):
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


@contextmanager
def folders_undone_on_failure(*folders: Path | None) -> Iterator[None]:
    """Folders among `folders` (with their parents) that do not exist before the block are
    removed again if it fails, when still empty: a failed write leaves no new empty folder."""
    missing: list[Path] = []
    for folder in folders:
        while folder is not None and not folder.exists() and folder != folder.parent:
            missing.append(folder)
            folder = folder.parent
    try:
        yield
    except BaseException:
        for folder in sorted(set(missing), key=lambda f: len(f.parts), reverse=True):
            try:
                folder.rmdir()
            except OSError:
                pass
        raise


def check_output_file(path: Path, flag: str) -> Path:
    """Refuse, in one line, an output file path that could not be written or would destroy
    something: an empty path, a folder, a special file (a device such as /dev/stdout, a pipe,
    a socket), a name too long for the file system, or a folder that cannot be created. A
    symlink to a regular file is fine (it is written through). Creates nothing."""
    text = str(path)
    if not text.strip():
        raise InputError(f"{flag}: got an empty path, expected a file name")
    if "\0" in text:
        raise InputError(f"{flag}: got a path with a NUL character, expected a file name")
    n_bytes, limit = len(os.fsencode(path.name)), name_max(path.parent)
    if n_bytes > limit:
        raise InputError(f"{flag}: got a file name of {n_bytes} bytes, expected at most {limit}")
    try:
        _writable_target(path)
    except IsADirectoryError:
        raise InputError(f"{flag}: got {path}, which is a folder, expected a file name") from None
    except OSError as err:
        if err.errno == 22:
            raise InputError(f"{flag}: got {path}, which is a special file (a device, pipe or socket), "
                             f"expected a regular file or a new file name") from None
        raise InputError(f"{flag}: got {path}, which cannot be used ({err.strerror or err}), expected a file name") from None
    check_folder(Path(os.path.realpath(path)).parent, flag)
    return path


def same_file(a: Path, b: Path) -> bool:
    """Whether writing `a` would replace `b`: the same path after symlinks, or hard links."""
    try:
        return os.path.realpath(a) == os.path.realpath(b) or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def check_outputs_apart(outputs: Mapping[str, Path], inputs: Mapping[str, Path]) -> None:
    """No output may overwrite an input, nor another output. Keys name them in messages:
    outputs like `--save-trace o/t.csv`, inputs like `trace file`."""
    for flag, out in outputs.items():
        for what, path in inputs.items():
            if same_file(out, path):
                raise InputError(f"{flag}: writing {out} would overwrite the {what} {path}, expected another place")
    seen: list[tuple[str, Path]] = []
    for flag, out in outputs.items():
        for other_flag, other in seen:
            if same_file(out, other):
                raise InputError(f"{flag}: would write the same file as {other_flag}, expected another place")
        seen.append((flag, out))

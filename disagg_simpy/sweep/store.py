"""The resumable store: every finished point x seed, kept at once, keyed by what it depends on.

An embedded SQLite file (Python's own `sqlite3`): one table, key -> the point's summary rows
as JSON. Each result is its own transaction, so a crash or Ctrl-C loses at most the work in
flight and never leaves a half-written row; one file holds thousands of points (Parquet would
need a part file per point, or rewriting the table each time); and it needs nothing installed.
Only the parent process writes; workers return rows.

The key is a SHA-256 of the fully resolved scenario, the trace file's bytes (its own hash),
the seed, what was asked of the run (all arrangements, or one with an early stop) and the
package version, so a changed scenario, trace or version never reuses a stale result.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..inputs import open_input
from ..scenario.limits import MAX_TRACE_BYTES
from ..scenario.schema import Scenario, TraceWorkload

_TRACE_HASHES: dict[tuple[str, int, int], str] = {}


def _trace_hash(scenario: Scenario) -> str | None:
    w = scenario.workload
    if not isinstance(w, TraceWorkload):
        return None
    path = Path(w.trace)
    if not path.is_absolute():
        path = scenario.folder / path
    try:
        with open_input(path, "a trace file", MAX_TRACE_BYTES) as f:  # (never waits on a pipe)
            st = os.fstat(f.fileno())
            memo = (str(path.resolve()), st.st_mtime_ns, st.st_size)
            if memo not in _TRACE_HASHES:
                digest = hashlib.sha256()
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
                _TRACE_HASHES[memo] = digest.hexdigest()
    except (InputError, OSError):
        return None  # the run itself reports the file in one line
    return _TRACE_HASHES[memo]


class Store:
    """key -> rows, in one SQLite file (created on first use). `version` is the package's,
    handed in by the command (this stage does not import the package root)."""

    def __init__(self, path: Path, version: str):
        self.path = Path(path)
        self.version = version
        try:
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("CREATE TABLE IF NOT EXISTS runs (key TEXT PRIMARY KEY, rows TEXT NOT NULL)")
        except sqlite3.DatabaseError as err:
            raise InputError(f"{self.path}: got a file that is not a results store ({err}), expected "
                             "a store written by disagg_simpy (or a new path)") from None

    def key(self, scenario: Scenario, seed: int, task: dict[str, Any]) -> str:
        """The key of one run: resolved scenario (its name and seed range aside: they change no
        figure), trace bytes, seed, task, version."""
        spec = {
            "scenario": scenario.model_dump(mode="json", exclude={"name", "seed", "seeds"}),
            "trace_sha256": _trace_hash(scenario),
            "seed": seed,
            "task": task,
            "version": self.version,
        }
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()

    def get_many(self, keys: list[str]) -> dict[str, list[dict]]:
        found: dict[str, list[dict]] = {}
        unique = list(dict.fromkeys(keys))
        for i in range(0, len(unique), 500):
            chunk = unique[i:i + 500]
            marks = ",".join("?" * len(chunk))
            for key, rows in self.db.execute(f"SELECT key, rows FROM runs WHERE key IN ({marks})", chunk):
                found[key] = json.loads(rows)
        return found

    def put(self, key: str, rows: list[dict]) -> None:
        self.db.execute("INSERT OR REPLACE INTO runs (key, rows) VALUES (?, ?)", (key, json.dumps(rows)))

    def close(self) -> None:
        self.db.close()

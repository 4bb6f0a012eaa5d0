"""Request traces: read them (csv, azure, mooncake, lengths) into one table of arrivals and lengths.

Every function is pure (no SimPy, no plotting). Bad user input raises `InputError` with one line,
`<file>:<line>: <column>: got <bad value>, expected <what>`, so a user can go straight to the row.
Parsing is vectorised: cells are read as text, converted with numpy/pandas, and the FIRST bad row
is reported by its 1-based physical line number.

Arrival times: a `csv` trace states seconds since the start of traffic, taken as written (so a
trace saved with `--save-trace` replays its run exactly); `azure` and `mooncake` hold absolute
timestamps, so their times count from the first row. Columns (or JSON keys) a format does not use
are ignored and listed in the frame's `attrs["ignored_columns"]`.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..inputs import read_input
from ..scenario.limits import MAX_CELL_CHARS, MAX_LINE_BYTES, MAX_TIME_S, MAX_TRACE_BYTES, MAX_TRACE_ROWS
from ..texts import quoted as _shown
from ..units import NS_PER_S as _NS_PER_S
from ..units import nearest_ns as _nearest_ns

__all__ = ["FORMATS", "TIME_RULES", "ignored_text", "read_trace"]

FORMATS = ("azure", "csv", "lengths", "mooncake")
_MAX_COUNT = 2**53
_AZURE_EXAMPLE = "a timestamp like 2023-11-16 18:17:03.9799600 (no time zone)"


def _error(source, line, key, got, expected) -> InputError:
    where = f"{source}:{line}" if line else f"{source}"
    return InputError(f"{where}: {key}: got {got}, expected {expected}")




def ignored_text(names) -> str:
    """The ignored columns for a note: the first few, quoted and cut, and how many more."""
    names = list(names)
    shown = ", ".join(_shown(str(n), 40) for n in names[:5])
    return shown + (f" and {len(names) - 5:,} more" if len(names) > 5 else "")


def _check_bytes(path, raw: bytes) -> None:
    """Refuse, in time linear in the file, a NUL byte (not text) and a line longer than
    MAX_LINE_BYTES (no trace row is that long; parsing one would cost far more than reading it)."""
    nul = raw.find(b"\0")
    if nul >= 0:
        raise _error(path, raw.count(b"\n", 0, nul) + 1, "text", "the byte 0x00 (NUL)", "text")
    b = np.frombuffer(raw, dtype=np.uint8)
    ends = np.flatnonzero((b == 10) | (b == 13))
    starts = np.concatenate(([0], ends + 1))
    lengths = np.concatenate((ends, [len(raw)])) - starts
    long = np.flatnonzero(lengths > MAX_LINE_BYTES)
    if long.size:
        i = int(long[0])
        line = raw.count(b"\n", 0, int(starts[i])) + 1
        raise _error(path, line, "line", f"a line of {int(lengths[i]):,} bytes",
                     f"lines of at most {MAX_LINE_BYTES:,} bytes (one request each)")


def _lines(path) -> list[str]:
    """The file's physical lines (universal newlines, BOM dropped); errors for missing/empty files."""
    p = Path(path)
    if not p.exists():
        raise _error(path, None, "path", "no such file", "an existing trace file")
    if p.is_dir():
        raise _error(path, None, "path", "a directory", "a trace file")
    raw = read_input(p, "a trace file", MAX_TRACE_BYTES, key="file: ")  # (a FIFO or a device: refused at once)
    n_lines = raw.count(b"\n") + (not raw.endswith(b"\n"))
    if n_lines > MAX_TRACE_ROWS + 1:
        raise _error(path, None, "file", f"{n_lines:,} lines", f"at most {MAX_TRACE_ROWS:,} rows (and a header)")
    _check_bytes(path, raw)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise _error(path, line, "text", f"byte {raw[e.start]:#04x}", "UTF-8 text") from None
    if not text.strip():
        raise _error(path, None, "file", "an empty file", "request rows")
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


class _Problems:
    """Collects the first bad row of each check, so the earliest line in the file is reported."""

    def __init__(self, path, line_nos):
        self.path, self.line_nos, self.found = path, line_nos, []

    def stop_at(self, key: str, got: str, expected: str) -> None:
        """Parsing stopped at the last line in line_nos; rows before it may hold earlier problems."""
        self.found.append((len(self.line_nos) - 1, len(self.found), key, got, expected))

    def check(self, bad: np.ndarray, key: str, got, expected: str) -> None:
        hits = np.flatnonzero(bad)
        if hits.size:
            i = int(hits[0])
            self.found.append((i, len(self.found), key, got(i), expected))

    def raise_first(self) -> None:
        if self.found:
            i, _, key, got, expected = min(self.found)
            raise _error(self.path, int(self.line_nos[i]), key, got, expected)


def _csv_columns(path, lines, required) -> tuple[dict[str, np.ndarray], _Problems, list[str]]:
    """Split a plain comma-separated file (no quoting) into text columns, up to any ragged row;
    also the names of the header's other columns (ignored)."""
    header = [h.strip() for h in lines[0].split(",")]
    missing = [c for c in required if c not in header]
    duplicated = sorted(c for c, n in Counter(header).items() if n > 1)
    if missing or duplicated:
        named = (("missing", missing), ("duplicated", duplicated))
        what = "; ".join(f"{label} {', '.join(cols) if label == 'missing' else ignored_text(cols)}"
                         for label, cols in named if cols)
        need = ",".join(required) + " (other columns ignored)"
        raise _error(path, 1, "header", f"{_shown(lines[0])} ({what})", f"columns {need}")
    ignored = [c for c in header if c not in required]
    numbered = [(i, line) for i, line in enumerate(lines[1:], start=2) if line.strip()]
    if not numbered:
        raise _error(path, 2, "rows", "no data rows after the header", "at least one data row")
    line_nos = np.fromiter((i for i, _ in numbered), dtype=np.int64, count=len(numbered))
    rows = [line.split(",") for _, line in numbered]
    n_fields = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    ragged = np.flatnonzero(n_fields != len(header))
    problems = _Problems(path, line_nos)
    if ragged.size:
        i = int(ragged[0])
        problems.line_nos = line_nos[: i + 1]
        problems.stop_at("row", f"{n_fields[i]} fields in {_shown(numbered[i][1])}",
                         f"{len(header)} comma-separated fields like the header")
        if i == 0:
            problems.raise_first()
        rows = rows[:i]
    columns = {}
    for c in required:  # only the columns used, each as wide as its longest cell, at most MAX_CELL_CHARS
        j = header.index(c)
        cells = [row[j] for row in rows]
        long = np.fromiter(map(len, cells), dtype=np.int64, count=len(cells)) > MAX_CELL_CHARS
        if long.any():
            problems.check(long, c, lambda i, cells=cells: f"{_shown(cells[i])} ({len(cells[i]):,} characters)",
                           f"a value of at most {MAX_CELL_CHARS} characters")
            cells = [cell if not bad else "" for cell, bad in zip(cells, long)]
        columns[c] = np.char.strip(np.array(cells, dtype=str).reshape(len(cells)))
    return columns, problems, ignored


def _numbers(text: np.ndarray) -> np.ndarray:
    return pd.to_numeric(pd.Series(text, dtype=object), errors="coerce").to_numpy(dtype=np.float64)


def _counts(problems: _Problems, text: np.ndarray, key: str) -> np.ndarray:
    """Positive whole numbers from text cells (or from JSON values, passed as floats)."""
    values = _numbers(text) if text.dtype.kind == "U" else text.astype(np.float64)
    with np.errstate(invalid="ignore"):
        non_numeric = ~np.isfinite(values)
        fractional = ~non_numeric & (values != np.floor(values))
        not_positive = ~non_numeric & (values <= 0)
        too_big = ~non_numeric & (values > _MAX_COUNT)
    expected = "a positive whole number"
    problems.check(non_numeric, key, lambda i: _shown(str(text[i])), expected)
    problems.check(fractional, key, lambda i: f"{values[i]:g}", expected)
    problems.check(not_positive, key, lambda i: f"{values[i]:g}", expected)
    problems.check(too_big, key, lambda i: f"{values[i]:g}", "a whole number up to 2**53")
    return np.where(non_numeric | fractional | not_positive | too_big, 1, values).astype(np.int64)


def _check_order(problems: _Problems, values: np.ndarray, text, key: str) -> None:
    with np.errstate(invalid="ignore"):
        back = np.concatenate(([False], values[1:] < values[:-1]))
    problems.check(back, key, lambda i: f"{text[i]} after {text[i - 1]} on line {problems.line_nos[i - 1]}",
                   "arrival times that never decrease")


def _check_span(problems: _Problems, seconds: np.ndarray, text, key: str) -> None:
    """Arrivals more than MAX_TIME_S after the first row would not fit the model's clock."""
    if len(seconds):
        with np.errstate(invalid="ignore", over="ignore"):
            far = (seconds - seconds[0]) > MAX_TIME_S
        problems.check(far, key, lambda i: f"{text[i]} ({seconds[i] - seconds[0]:.3g} s after the first row)",
                       f"arrivals within {MAX_TIME_S:g} s of the first row")


def _check_clock(problems: _Problems, seconds: np.ndarray, text, key: str) -> None:
    """Times taken as written must fit the model's clock."""
    with np.errstate(invalid="ignore"):
        problems.check(seconds > MAX_TIME_S, key, lambda i: str(text[i]), f"a time of at most {MAX_TIME_S:g} s")


def _seconds_ns(problems: _Problems, text: np.ndarray, key: str) -> np.ndarray:
    values = _numbers(text)
    bad = ~np.isfinite(values)
    problems.check(bad, key, lambda i: _shown(str(text[i])), "a number of seconds")
    with np.errstate(invalid="ignore"):
        problems.check(values < 0, key, lambda i: str(text[i]), "a time >= 0 s")
    _check_order(problems, values, text, key)
    _check_clock(problems, values, text, key)
    problems.raise_first()
    return _nearest_ns(values * _NS_PER_S)  # as written: seconds since the start of traffic


def _azure_ns(problems: _Problems, text: np.ndarray, key: str) -> np.ndarray:
    """Exact integer ns after the first row, via numpy datetime64[ns] (never through float seconds)."""
    def parse(cells):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return np.array(cells, dtype="datetime64[ns]")

    try:
        stamps = parse(text)
        bad = np.isnat(stamps)
    except (ValueError, Warning, OverflowError):
        bad = np.zeros(len(text), dtype=bool)
        for i, cell in enumerate(text):
            try:
                bad[i] = np.isnat(parse(cell))
            except (ValueError, Warning, OverflowError):
                bad[i] = True
        stamps = parse(np.where(bad, "NaT", text))
    problems.check(bad, key, lambda i: _shown(str(text[i])), _AZURE_EXAMPLE)
    ns = stamps.astype(np.int64)
    _check_order(problems, np.where(bad, np.nan, ns.astype(np.float64)), text, key)
    _check_span(problems, np.where(bad, np.nan, ns.astype(np.float64) / _NS_PER_S), text, key)
    problems.raise_first()
    return ns - ns[0]


def _jsonl_record(line: str, keys, seen: set) -> tuple | None:
    """The numbers under `keys` in one JSON Lines line (adding its keys to `seen`), or None if
    it is not that simple."""
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(record, dict) or not all(type(record.get(k)) in (int, float) for k in keys):
        return None
    seen.update(record)
    return tuple(record[k] for k in keys)


def _jsonl_problem(line: str, keys) -> tuple[str, str, str]:
    """(key, got, expected) saying why `_jsonl_record` refused this line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        return "json", _shown(line.strip()), f"one JSON object per line ({e.msg} at column {e.colno})"
    except RecursionError:
        return "json", "nesting too deep", "one JSON object per line"
    if not isinstance(record, dict):
        return "json", _shown(line.strip()), "one JSON object per line"
    missing = [k for k in keys if k not in record]
    if missing:
        return missing[0], "a line without it", f"keys {', '.join(keys)} on every line"
    k = next(k for k in keys if type(record[k]) not in (int, float))
    return k, json.dumps(record[k])[:60], "a number"


def _jsonl_fields(path, lines, keys) -> tuple[dict[str, np.ndarray], _Problems, list[str]]:
    """Pick the numbers under `keys` out of every non-blank JSON Lines line, up to any bad line;
    also the other keys seen (ignored)."""
    records, line_nos, stopped = [], [], None
    seen: set[str] = set()
    for line_no, line in enumerate(lines, start=1):
        if line.strip():
            line_nos.append(line_no)
            record = _jsonl_record(line, keys, seen)
            if record is None:
                stopped = _jsonl_problem(line, keys)
                break
            records.append(record)
    problems = _Problems(path, np.array(line_nos, dtype=np.int64))
    if stopped:
        problems.stop_at(*stopped)
        if not records:
            problems.raise_first()
    table = np.array(records, dtype=np.float64).reshape(-1, len(keys))
    return {k: table[:, j] for j, k in enumerate(keys)}, problems, sorted(seen - set(keys))


def _read_mooncake(path, lines) -> pd.DataFrame:
    keys = ("timestamp", "input_length", "output_length")
    cols, problems, ignored = _jsonl_fields(path, lines, keys)
    ms = cols["timestamp"]
    with np.errstate(invalid="ignore"):
        problems.check(~np.isfinite(ms) | (ms < 0), "timestamp", lambda i: f"{ms[i]:g}", "a time >= 0 ms")
    _check_order(problems, ms, [f"{v:g}" for v in ms], "timestamp")
    _check_span(problems, ms / 1e3, [f"{v:g}" for v in ms], "timestamp")
    prompt = _counts(problems, cols["input_length"], "input_length")
    reply = _counts(problems, cols["output_length"], "output_length")
    problems.raise_first()
    arrived_at_ns = _nearest_ns((ms - ms[0]) * 1_000_000)
    # (hash_ids is the format's own: the prefix cache reads it, E13; without a cache it is unused, not ignored)
    return _frame(arrived_at_ns, prompt, reply, [k for k in ignored if k != "hash_ids"])


def _frame(arrived_at_ns, prompt, reply, ignored) -> pd.DataFrame:
    data = {} if arrived_at_ns is None else {"arrived_at_ns": arrived_at_ns}
    data.update(n_prompt_tokens=prompt, n_reply_words=reply)
    frame = pd.DataFrame({k: np.asarray(v, dtype=np.int64) for k, v in data.items()})
    frame.attrs["ignored_columns"] = list(ignored)
    return frame


_CSV_LAYOUTS = {  # fmt: (arrival column, prompt column, reply column)
    "csv": ("arrived_at_s", "n_prompt_tokens", "n_reply_words"),
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "lengths": (None, "num_prefill_tokens", "num_decode_tokens"),
}

#: How each format's arrival times are read (docs/traces.md, "Trace formats").
TIME_RULES = {
    "csv": "seconds since the start of traffic, as written",
    "azure": "wall-clock timestamps, counted from the first row",
    "mooncake": "milliseconds, counted from the first row",
    "lengths": "none (arrivals are drawn)",
}


def _format_hint(header: str, fmt: str) -> str:
    """When a header that does not fit `fmt` is another format's, say which (the flag and the
    scenario key that choose it)."""
    other: str | None = None
    if header.lstrip("\ufeff ").startswith("{"):
        other = "mooncake"
    else:
        names = {h.strip() for h in header.split(",")}
        other = next((f for f, layout in _CSV_LAYOUTS.items() if f != fmt and {c for c in layout if c} <= names), None)
    if other is None or other == fmt:
        return ""
    article = "an" if other[0] in "aeiou" else "a"
    return (f"; it looks like {article} {other} trace: give its format (describe --format {other}, or "
            f"format: {other} in the scenario's workload)")


def read_trace(path, fmt: str = "csv") -> pd.DataFrame:
    """Read a request trace into columns `arrived_at_ns` (absent for "lengths"), `n_prompt_tokens`,
    `n_reply_words`, all int64, in ns: a csv trace's times as written, the others' counted from
    the first row (`TIME_RULES`). Other columns are ignored and named in
    `attrs["ignored_columns"]`.

    fmt: "csv" (`arrived_at_s,n_prompt_tokens,n_reply_words`), "azure" (Azure LLM
    inference 2023: `TIMESTAMP,ContextTokens,GeneratedTokens`), "mooncake" (JSON Lines with
    `timestamp` in ms, `input_length`, `output_length`) or "lengths" (ShareGPT/arXiv length tables:
    `num_prefill_tokens,num_decode_tokens`, no arrivals).
    """
    if fmt not in FORMATS:
        raise _error(path, None, "format", _shown(str(fmt)), f"one of {', '.join(FORMATS)}")
    lines = _lines(path)
    if fmt == "mooncake":
        return _read_mooncake(path, lines)
    arrival_col, prompt_col, reply_col = _CSV_LAYOUTS[fmt]
    required = tuple(c for c in (arrival_col, prompt_col, reply_col) if c)
    try:
        cols, problems, ignored = _csv_columns(path, lines, required)
    except InputError as err:
        raise InputError(f"{err}{_format_hint(lines[0], fmt)}") from None
    prompt = _counts(problems, cols[prompt_col], prompt_col)
    reply = _counts(problems, cols[reply_col], reply_col)
    if fmt == "csv" and arrival_col is not None:
        arrived_at_ns = _seconds_ns(problems, cols[arrival_col], arrival_col)
    elif fmt == "azure" and arrival_col is not None:
        arrived_at_ns = _azure_ns(problems, cols[arrival_col], arrival_col)
    else:
        arrived_at_ns = None
        problems.raise_first()
    return _frame(arrived_at_ns, prompt, reply, ignored)

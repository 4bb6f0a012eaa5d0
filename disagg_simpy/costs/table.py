"""Reading a table of measured iterations for `fit` (one row each): every bad value as one line."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..inputs import read_input
from ..texts import quoted
from .fitting import COLUMNS, OPTIONAL

MAX_TABLE_BYTES = 64 * 2**20
#: The most the iteration times of one table may differ by (longest / shortest): a prompt of 100,000
#: tokens against a one-reply iteration is about 10,000x; far beyond, a row is in other units (or a
#: typo), and a least-squares fit over such a span loses every term of the short rows.
MAX_SPREAD = 1e6


def read_table(path: Path) -> pd.DataFrame:
    """The rows of a CSV of measured iterations (columns `fitting.COLUMNS`, optional
    `fitting.OPTIONAL`), checked: counts whole and >= 0, `ms` > 0, `prompts` >= 1 where tokens are read."""
    raw = read_input(path, "a CSV table of measured iterations", MAX_TABLE_BYTES)  # (a pipe or device: refused)
    nul = raw.find(b"\0")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        raise InputError(f"{path}: row {line}: got the byte 0x00 (NUL), expected a CSV text table")
    try:  # cells as text: an empty cell is told from a written 'nan'
        t = pd.read_csv(io.BytesIO(raw), skipinitialspace=True, dtype=str, keep_default_na=False)
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: cannot read it ({err}), expected a CSV table of measured iterations") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise InputError(f"{path}: {str(err).splitlines()[0] or 'no rows'}, expected a CSV table with columns "
                         f"{', '.join(COLUMNS)}") from None
    missing = [c for c in COLUMNS if c not in t.columns]
    if missing:
        raise InputError(f"{path}: column {missing[0]}: missing, expected columns {', '.join(COLUMNS)} "
                         f"(optional: {', '.join(OPTIONAL)})")
    unknown = [c for c in t.columns if c not in COLUMNS + OPTIONAL]
    if unknown:
        raise InputError(f"{path}: column {quoted(str(unknown[0]))}: unknown, expected {', '.join(COLUMNS + OPTIONAL)}")
    if t.empty:
        raise InputError(f"{path}: no rows, expected one row per measured iteration")
    for col in t.columns:
        values = pd.to_numeric(t[col], errors="coerce")
        bad = values.isna() | ~np.isfinite(values) | (values <= 0 if col == "ms" else values < 0)
        if col != "ms":
            bad |= values.notna() & (values != np.round(values))
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            what = "a time in ms > 0" if col == "ms" else "a whole number >= 0"
            cell = str(t[col].iloc[i])
            got = quoted(cell) if cell.strip() else "an empty cell"
            raise InputError(f"{path}: row {i + 2}: column {col}: got {got}, expected {what}")
        t[col] = values
    _check_spread(path, t.ms.to_numpy(float))
    if "prompts" in t and ((t.prompt_tokens > 0) & (t.prompts < 1)).any():
        i = int(np.flatnonzero(((t.prompt_tokens > 0) & (t.prompts < 1)).to_numpy())[0])
        raise InputError(f"{path}: row {i + 2}: column prompts: got 0 with {t.prompt_tokens.iloc[i]:g} prompt "
                         "tokens, expected at least 1")
    return t


def _check_spread(path: Path, ms: np.ndarray) -> None:
    """Refuse, naming the row, iteration times spread over more than MAX_SPREAD: the row whose
    time is furthest (by ratio) from the median."""
    if ms.max() <= MAX_SPREAD * ms.min():
        return
    far = np.abs(np.log(ms) - np.log(np.median(ms)))
    i = int(np.argmax(far))
    j = int(np.argmin(ms)) if ms[i] > np.median(ms) else int(np.argmax(ms))
    raise InputError(f"{path}: row {i + 2}: column ms: got {ms[i]:g}, {max(ms[i] / ms[j], ms[j] / ms[i]):.2g} times "
                     f"row {j + 2}'s {ms[j]:g}; expected one iteration's time in ms, all rows within a factor of "
                     f"{MAX_SPREAD:,.0f} of each other (is that row in other units?)")

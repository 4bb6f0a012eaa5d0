"""Aligned text tables, the one helper every printed table uses, and a bad value quoted for a
one-line message (standard library only)."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def aligned(rows: Sequence[Sequence[str]], left: Collection[int] = (0,), sep: str = "  ", pad_last: bool = True,
            strip: bool = False) -> list[str]:
    """The rows of cells as lines, each column as wide as its widest cell: the columns numbered
    in `left` padded on the right (text), the others on the left (numbers). Without `pad_last`
    the last column is left as it is (a long free-text column); `strip` drops trailing spaces."""
    n = len(rows[0]) if rows else 0
    widths = [max(len(r[i]) for r in rows) for i in range(n)]
    if n and not pad_last:
        widths[-1] = 0
    lines = []
    for r in rows:
        line = sep.join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        lines.append(line.rstrip() if strip else line)
    return lines


def quoted(text: str, limit: int = 60) -> str:
    """A bad value for a message: quoted, escaped (no raw control characters), cut to `limit`
    characters (docs/guarantees.md: a message is one line; a value in it at most 60 characters)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")

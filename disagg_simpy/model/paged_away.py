"""E9's record of replies that went away (model/paged_kv.py preempts them): the stretches their
words fall in, as the table the records keep (`stretch_log`, model/words.py's STRETCH_LOG_FIELDS).

A preempted reply's `Request.stretches` holds, per stretch, [iteration index of its first word
(-1: not seated yet), first word, words (-1: open), time of the word before, whether the stretch
wrote that word (a re-read's)], written only by its own methods (model/request.py: `end_stretch`,
`go_away`, `read_again`, `seated`, `close_stretch`); a reply never preempted has one stretch,
words 2..n from `join_iteration`, and logs none."""

from __future__ import annotations

from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .request import Request


def stretch_log(arrived: Sequence[Request]) -> np.ndarray:
    """Every request's stretches as model/words.py's STRETCH_LOG_FIELDS rows, in arrival order (an
    open stretch with its planned words: the run's end cuts them), as one int64 table. A request
    never preempted has one, words 2..n from `join_iteration`: those rows are made in bulk, in C;
    the preempted ones' rows are made in one list and put in their places by one mask."""
    n = len(arrived)
    one = np.fromiter(chain.from_iterable(map(_ONE, arrived)), np.int64, 6 * n).reshape(n, 6)
    moved = one[:, 5] > 0  # (preempted: stretches logged)
    rows = []
    if moved.any():
        counts = np.ones(n, np.int64)
        for i in np.flatnonzero(moved).tolist():
            r = arrived[i]
            stretches = r.stretches or []  # (moved: logged)
            counts[i] = len(stretches)
            rid, gpu, words = r.request_id, r.writing_gpu, r.n_reply_words
            for at, first, k, lead, written in stretches:
                rows.append((rid, gpu, at, first, words - first + 1 if k < 0 else k, lead, written))
        one = one[~moved]
    table = np.empty((len(one), 7), np.int64)
    table[:, :3] = one[:, :3]  # request id, gpu, join iteration
    table[:, 3] = 2
    table[:, 4] = one[:, 3] - 1
    table[:, 5] = one[:, 4]  # the word before: the first
    table[:, 6] = one[:, 4] >= 0
    if not rows:
        return table
    full = np.empty((len(table) + len(rows), 7), np.int64)
    in_moved = np.repeat(moved, counts)  # (each request's rows, in arrival order)
    full[in_moved] = rows
    full[~in_moved] = table
    return full


_ONE = attrgetter("request_id", "writing_gpu", "join_iteration", "n_reply_words", "first_word_at_ns", "n_preemptions")

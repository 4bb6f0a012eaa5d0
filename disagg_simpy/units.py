"""The clock (D10): whole nanoseconds, with halves rounded up wherever a time is made whole.

Every stage counts time in int64 ns and shows seconds; this is the one place that says how.
Standard library only at import (numpy inside the functions), so the command line's flag
parsing can use it and `--help` stays fast.
"""

from __future__ import annotations

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
#: D8: a time is over a limit only above limit + 1 ns.
SLACK_NS = 1

#: A time window in seconds, [start, end).
Window = tuple[float, float]


def nearest_ns(ns):
    """Nanoseconds (float) to the nearest whole nanosecond, halves up (D10), as int64."""
    import numpy as np

    return np.floor(np.asarray(ns, dtype=np.float64) + 0.5).astype(np.int64)


def seconds_to_ns(seconds):
    """Seconds to whole nanoseconds, halves up (D10), as int64."""
    import numpy as np

    return nearest_ns(np.asarray(seconds, dtype=np.float64) * NS_PER_S)

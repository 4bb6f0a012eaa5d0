"""The clock (D10): whole nanoseconds, with halves rounded up wherever a time is made whole.

Every stage counts time in int64 ns and shows seconds; this is the one place that says how.
"""

from __future__ import annotations

import numpy as np

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000


def nearest_ns(ns) -> np.ndarray:
    """Nanoseconds (float) to the nearest whole nanosecond, halves up (D10), as int64."""
    return np.floor(np.asarray(ns, dtype=np.float64) + 0.5).astype(np.int64)


def seconds_to_ns(seconds) -> np.ndarray:
    """Seconds to whole nanoseconds, halves up (D10), as int64."""
    return nearest_ns(np.asarray(seconds, dtype=np.float64) * NS_PER_S)

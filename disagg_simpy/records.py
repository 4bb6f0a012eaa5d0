"""What a run leaves behind: plain numpy arrays, one set per arrangement.

The model fills Python lists during the run; `collect` turns them into arrays once. Word times
are not stored: words 2..n of a reply are the ends of the iterations `join_iteration ..
join_iteration + n - 2` of its writing GPU, derived on demand (`word_times`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .engine import Engine

REQUEST_FIELDS = (
    "request_id",
    "arrived_at_ns",
    "n_prompt_tokens",
    "n_reply_words",
    "reading_gpu",
    "read_started_at_ns",
    "first_word_at_ns",
    "writing_gpu",
    "joined_at_ns",
    "join_iteration",
    "finished_at_ns",
)


@dataclass
class ArrangementRecords:
    """Records of one arrangement's run. Times are int64 ns; -1 means "never"."""

    name: str
    kind: str
    gpu_roles: tuple[str, ...]  # "reads", "writes" or "both", by GPU number
    requests: dict[str, np.ndarray]  # REQUEST_FIELDS + "measured", every request that arrived
    iterations: dict[str, np.ndarray]  # gpu, iteration, started_at_ns, ended_at_ns, n_replies_written, n_prompt_tokens_read
    gpu_offsets: np.ndarray  # GPU g's iterations are rows gpu_offsets[g]:gpu_offsets[g+1]
    reads: dict[str, np.ndarray]  # gpu, iteration, request_id, n_tokens
    stopped_at_ns: int
    cap_ns: int
    n_events: int  # SimPy events the run scheduled (a structural cost measure)

    @property
    def n_unfinished(self) -> int:
        r = self.requests
        return int((r["measured"] & (r["finished_at_ns"] < 0)).sum())

    @property
    def capped(self) -> bool:
        """The safety cap ended the run before every measured reply finished (D6)."""
        return self.n_unfinished > 0

    @classmethod
    def collect(cls, engine: Engine) -> "ArrangementRecords":
        arrived = engine.arrived
        requests = {
            f: np.fromiter((getattr(r, f) for r in arrived), np.int64, len(arrived))
            for f in REQUEST_FIELDS
        }
        requests["measured"] = np.fromiter((r.measured for r in arrived), bool, len(arrived))
        gpus = engine.gpus
        counts = [len(g.ended_at_ns) for g in gpus]
        iterations = {
            "gpu": np.repeat(np.arange(len(gpus), dtype=np.int64), counts),
            "iteration": np.concatenate([np.arange(c, dtype=np.int64) for c in counts]),
        }
        for f in ("started_at_ns", "ended_at_ns", "n_replies_written", "n_prompt_tokens_read"):
            iterations[f] = np.concatenate([np.asarray(getattr(g, f), dtype=np.int64) for g in gpus])
        logs = [np.asarray(g.reads_log, dtype=np.int64).reshape(-1, 3) for g in gpus]
        reads_table = np.concatenate(logs)
        reads = {
            "gpu": np.repeat(np.arange(len(gpus), dtype=np.int64), [len(x) for x in logs]),
            "iteration": reads_table[:, 0],
            "request_id": reads_table[:, 1],
            "n_tokens": reads_table[:, 2],
        }
        return cls(
            name=engine.arrangement.name,
            kind=engine.arrangement.kind,
            gpu_roles=tuple(g.role for g in gpus),
            requests=requests,
            iterations=iterations,
            gpu_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            reads=reads,
            stopped_at_ns=engine.stopped_at_ns,
            cap_ns=engine.requests.cap_ns,
            n_events=engine.n_events,
        )

    def word_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For requests `rows` (indices into `requests`): global iteration row of word 2 and
        how many of words 2..n were written before the run stopped."""
        r = self.requests
        gpu = r["writing_gpu"][rows]
        has_writer = gpu >= 0
        first = np.where(has_writer, self.gpu_offsets[np.maximum(gpu, 0)] + r["join_iteration"][rows], 0)
        end = np.where(has_writer, self.gpu_offsets[np.maximum(gpu, 0) + 1], 0)
        wanted = np.where(has_writer, r["n_reply_words"][rows] - 1, 0)
        written = np.clip(np.minimum(wanted, end - first), 0, None)
        return first, written

    def word_times(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every written word of requests `rows`: (request id, word number from 1, time ns)."""
        r = self.requests
        first, written = self.word_rows(rows)
        has_first = r["first_word_at_ns"][rows] >= 0
        per_request = written + has_first
        total = int(per_request.sum())
        starts = np.cumsum(per_request) - per_request
        request_id = np.repeat(r["request_id"][rows], per_request)
        word = np.arange(total, dtype=np.int64) - np.repeat(starts, per_request) + 1
        # word k >= 2 is the end of global iteration row first + k - 2
        at = np.empty(total, dtype=np.int64)
        is_first = word == 1
        at[is_first] = r["first_word_at_ns"][rows][has_first]
        later = ~is_first
        at[later] = self.iterations["ended_at_ns"][np.repeat(first - 2, per_request)[later] + word[later]]
        return request_id, word, at

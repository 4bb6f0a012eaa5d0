"""E16 (speculative decoding, docs/rules.md#e16): each request's draft-acceptance draws, and the
writing iterations they give its words.

Every request gets one 64-bit key (`Requests.draft_keys`), drawn in arrival order from the
seed's own `speculative` stream (so no other draw moves, and a stream's first n requests have the keys of any longer
one's). Word w >= 3 of its reply is *accepted* when u(key, w) < acceptance, u a uniform made by
hashing (key, w) (splitmix64's mix, 53 bits): a draw of the request alone, the same in every
arrangement, whatever iteration or GPU writes the word.

The iterations: the reply's first writing iteration writes word 2, then words 3, 4, ... while
each is accepted, at most 1 + tokens words; the next iteration begins at the first word not
taken, and so on to word n (the last iteration may stop short: words past the reply are not
written). An iteration's accepted drafts A are then geometric, truncated at `tokens`:
P(A >= j) = acceptance^j for j <= tokens (Leviathan et al. 2023), independent between
iterations, as each word's draw is used by one iteration at most.
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
#: words handled per block by `writing_iterations` (bounds its temporaries)
WORDS_PER_BLOCK = 1 << 20


def uniforms(keys: np.ndarray, words: np.ndarray) -> np.ndarray:
    """u(key, word) in [0, 1) for each pair (arrays of one length): splitmix64's finalizer of
    key + word x 0x9E3779B97F4A7C15 (mod 2^64), its top 53 bits."""
    with np.errstate(over="ignore"):
        z = np.asarray(keys, np.uint64) + np.asarray(words, np.uint64) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


def writing_iterations(keys: np.ndarray, n_words: np.ndarray, tokens: int, acceptance: float
                       ) -> tuple[np.ndarray, np.ndarray]:
    """For replies of `n_words` words (keys `keys`): how many writing iterations write words
    2..n of each (0 for a one-word reply), and, word by word (words 2..n of the first reply,
    then of the next, ...), the iteration of its reply that writes it (from 0)."""
    return stretch_iterations(keys, None, np.maximum(np.asarray(n_words, np.int64) - 1, 0), tokens, acceptance)


def stretch_iterations(keys: np.ndarray, first: np.ndarray | None, n: np.ndarray, tokens: int, acceptance: float
                       ) -> tuple[np.ndarray, np.ndarray]:
    """`writing_iterations` for stretches of `n` words from word `first` (None: 2) of replies of keys
    `keys`, word `first` beginning an iteration (a reply back after E9's preemption, docs/rules.md#r104):
    each stretch's iterations, and word by word, the iteration of its stretch that writes it (from 0)."""
    keys = np.asarray(keys, np.uint64)
    later = np.asarray(n, np.int64)
    ends = np.cumsum(later)
    counts = np.zeros(len(later), np.int64)
    ordinals = np.empty(int(ends[-1]) if len(ends) else 0, np.int64)
    cuts = np.searchsorted(ends, np.arange(WORDS_PER_BLOCK, len(ordinals), WORDS_PER_BLOCK), side="right")
    bounds = np.concatenate([[0], cuts, [len(later)]])
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if lo == hi:
            continue
        n = later[lo:hi]
        if not n.any():
            continue
        start = int(ends[lo] - n[0])
        begins = np.cumsum(n) - n  # block offset of each stretch's first word
        at = np.arange(int(n.sum())) - np.repeat(begins, n)  # words into the stretch
        words = at + 2 if first is None else at + np.repeat(np.asarray(first[lo:hi], np.int64), n)
        taken = uniforms(np.repeat(keys[lo:hi], n), words) < acceptance
        taken[begins[n > 0]] = False  # its first word begins its first iteration
        idx = np.arange(len(at))
        begun = np.maximum.accumulate(np.where(taken, -1, idx))  # the word its run of accepted words follows
        opens = (idx - begun) % (tokens + 1) == 0  # ... cut every 1 + tokens words
        ordinal = np.cumsum(opens)
        ordinal -= np.repeat(ordinal[np.minimum(begins, len(at) - 1)], n)  # (from 0 per stretch)
        ordinals[start:start + len(at)] = ordinal
        has = n > 0
        counts[lo:hi][has] = ordinal[begins[has] + n[has] - 1] + 1
    return counts, ordinals


def iteration_starts(key: int, first: int, n_words: int, tokens: int, acceptance: float) -> list[int]:
    """The first word of each writing iteration that writes words `first`..`n_words` of a reply of
    key `key`, `first` beginning one (word 2, or a reply's first word back after E9's preemption,
    docs/rules.md#r104): each next word joins the iteration before it while accepted and that
    iteration has fewer than 1 + `tokens` words (from `first` = 2, `writing_iterations`' iterations)."""
    if first > n_words:
        return []
    later = range(first + 1, n_words + 1)
    taken = (uniforms(np.full(len(later), key, np.uint64), np.arange(first + 1, n_words + 1)) < acceptance).tolist()
    starts, run = [first], 1
    for word, accepted in zip(later, taken):
        if accepted and run <= tokens:
            run += 1
        else:
            starts.append(word)
            run = 1
    return starts


class IterationCounts:
    """Each request's count of writing iterations (`writing_iterations`) by request id, drawn a
    block of requests at a time as they are asked for: a run pays for the requests that reach a
    writing GPU, not for its whole stream (which runs to the safety cap)."""

    BLOCK = 256

    def __init__(self, keys: np.ndarray, n_words: np.ndarray, tokens: int, acceptance: float) -> None:
        self.keys, self.n_words, self.tokens, self.acceptance = keys, n_words, tokens, acceptance
        self.lookahead = tokens  # E9 with E16: a written reply's blocks hold its k draft tokens (a model/kv_blocks.WordPlan)
        self.counts: list[int] = []

    def __getitem__(self, request_id: int) -> int:
        counts = self.counts
        while request_id >= len(counts):
            lo = len(counts)
            block = slice(lo, lo + self.BLOCK)
            counts.extend(writing_iterations(self.keys[block], self.n_words[block], self.tokens, self.acceptance)[0].tolist())
        return counts[request_id]

    def starts(self, request_id: int, first: int) -> list[int]:
        """E16 with E9: the first word of each writing iteration that writes the request's words `first`.. from a
        seat that begins with `first` (`iteration_starts`)."""
        return iteration_starts(int(self.keys[request_id]), first, int(self.n_words[request_id]), self.tokens,
                                self.acceptance)

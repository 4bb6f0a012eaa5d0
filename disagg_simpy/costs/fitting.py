"""Fitting the project's cost fields (M1, E2, E3 and the attention term) to measured iterations.

One row per iteration: `replies` written (words 2..n, D9), `prompt_tokens` read, `context_tokens`
(the sum of those replies' contexts, E3), optional `earlier_tokens` (tokens of the prompt read by
earlier iterations, E2; a row with them reads one prompt), optional `prompts` (how many prompts
of equal length the row reads, default 1), and the measured `ms`. Composed rows
(costs/composed.py) may also hold `experts` and `experts_per_token`, a mixture-of-experts model's,
the same on every row: E17's `per_expert_ms` then joins the fit.

The fit is least squares on relative error ((fitted - measured) / measured) with every coefficient
>= 0: `scipy.optimize.nnls` on the rows divided by their measured time. nnls because it is an
exact active-set solver (no tolerance to tune, the same answer on every machine) and
non-negativity is the only constraint the cost fields have; relative error so that short
writing iterations count as much as long prompt reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import InputError

COLUMNS = ("replies", "prompt_tokens", "context_tokens", "ms")
OPTIONAL = ("earlier_tokens", "prompts")
KINDS = ("writing only", "chunked", "whole prompt")
BASE_TERMS = ("iteration_ms", "per_reply_ms", "per_prompt_token_ms", "per_context_token_ms")
REREAD, ATTENTION = "per_reread_token_ms", "per_attention_pair_ms"
PROMPT_ITERATION, FREE = "prompt_iteration_ms", "free_prompt_tokens"  # E14 (FREE is no column: a shift of tokens)
TILE, TILE_SIZE = "per_token_tile_ms", "token_tile"  # E15 (TILE_SIZE is no column: the tile the column counts in)
EXPERT, EXPERT_COUNTS = "per_expert_ms", ("experts", "experts_per_token")  # E17 (the counts are no columns)
COUNTS = (FREE, TILE_SIZE, *EXPERT_COUNTS)  # a fit's fields that are counts, not costs of a column
#: term -> (what its column counts, for messages)
_COUNTS = {"per_reply_ms": "replies", "per_prompt_token_ms": "prompt tokens", "per_context_token_ms": "context tokens",
           REREAD: "earlier tokens", ATTENTION: "prompt tokens", PROMPT_ITERATION: "prompt-reading rows",
           TILE: "token tiles", EXPERT: "experts touched"}
SIGNIFICANT = 4  # the printed (and shipped) precision of a coefficient


def rounded(x: float) -> float:
    """A coefficient to the printed precision (4 significant digits)."""
    return float(f"{x:.{SIGNIFICANT}g}")


def kinds(t: pd.DataFrame) -> np.ndarray:
    """Each row's kind: writing only (no prompt tokens), whole prompt (prompt tokens only, none
    read before, no replies) or chunked (prompt tokens beside replies or after earlier ones)."""
    earlier = t["earlier_tokens"] if "earlier_tokens" in t else 0
    whole = (t.replies == 0) & (earlier == 0)
    return np.where(t.prompt_tokens == 0, KINDS[0], np.where(whole, KINDS[2], KINDS[1]))


def columns(t: pd.DataFrame, terms: tuple[str, ...], free: int = 0, tile: int = 0) -> np.ndarray:
    """The design matrix: each term's count in each row; with E14's `free` prompt tokens an
    iteration reads at no per-token cost, and E15's tiles of `tile` rows (prompt tokens read +
    replies written, ceil: R73) when `terms` has TILE; E17's experts touched, min(experts,
    experts_per_token x (prompt tokens + replies)), from the rows' own counts when it has EXPERT."""
    p = t.prompt_tokens.to_numpy(float)
    earlier = t["earlier_tokens"].to_numpy(float) if "earlier_tokens" in t else np.zeros(len(t))
    prompts = t["prompts"].to_numpy(float) if "prompts" in t else np.ones(len(t))
    each = np.divide(p, prompts, out=np.zeros(len(t)), where=prompts > 0)
    cols = {"iteration_ms": np.ones(len(t)), "per_reply_ms": t.replies.to_numpy(float),
            "per_prompt_token_ms": np.maximum(p - free, 0.0), "per_context_token_ms": t.context_tokens.to_numpy(float),
            PROMPT_ITERATION: (p > 0).astype(float),
            REREAD: np.where(p > 0, earlier, 0.0),
            ATTENTION: p * earlier + p * (each + 1) / 2}  # attention: c*o + c(c+1)/2 per prompt
    if TILE in terms:
        if tile < 1:
            raise ValueError(f"{TILE} needs a tile of at least 1 row, got {tile}")
        cols[TILE] = np.ceil((p + t.replies.to_numpy(float)) / tile)
    if EXPERT in terms:
        cols[EXPERT] = np.minimum(t.experts.to_numpy(float),
                                  t.experts_per_token.to_numpy(float) * (p + t.replies.to_numpy(float)))
    return np.column_stack([cols[k] for k in terms])


@dataclass
class Fit:
    """Fitted cost fields (rounded to the printed precision) and how far they are from the rows."""

    coefficients: dict[str, float]
    errors_pct: dict[str, float]  # kind -> the largest relative error (signed, %), on rows of that kind
    rows: dict[str, int]  # kind -> rows
    ranges: dict[str, list[float]]  # replies, prompt_tokens, context_per_reply: [low, high]
    fitted: np.ndarray = field(repr=False)


def check_separable(a: np.ndarray, terms: tuple[str, ...], t: pd.DataFrame) -> None:
    """Refuse, naming the term, a table that cannot separate every term."""
    if len(t) < len(terms):
        raise InputError(f"got {len(t)} rows, expected at least {len(terms)} to fit {', '.join(terms)}")
    for j, term in enumerate(terms[1:], start=1):
        col = a[:, j]
        if not col.any():
            raise InputError(f"every row has 0 {_COUNTS[term]}: cannot fit {term}")
        if np.all(col == col[0]):
            raise InputError(f"every row has the same {_COUNTS[term]} ({col[0]:g}): cannot fit {term} apart "
                             "from iteration_ms")
    scaled = a / np.linalg.norm(a, axis=0)
    for j in reversed(range(len(terms))):  # name the later (finer) term
        term = terms[j]
        others = np.delete(scaled, j, axis=1)
        coef = np.linalg.lstsq(others, scaled[:, j], rcond=None)[0]
        if np.linalg.norm(others @ coef - scaled[:, j]) < 1e-9:
            used = [terms[k] for k in np.flatnonzero(np.abs(np.insert(coef, j, 0)) > 1e-9)]
            raise InputError(f"the rows cannot separate {term} from {', '.join(used)}: its count is a fixed "
                             "combination of theirs in every row (vary them independently)")


def fit(t: pd.DataFrame, attention: bool = False, unsaturated: bool = False, tile: int = 0) -> Fit:
    """Fit the cost fields to the rows of `t` (see the module's docstring): the base terms, the
    re-read term when any row has earlier tokens, the attention term when asked, E17's
    `per_expert_ms` when the rows are a mixture-of-experts model's (`experts_of`), E15's
    `per_token_tile_ms` at a `tile` of that many rows when one is given, and with `unsaturated`
    E14's two fields (`fit_unsaturated`)."""
    terms: tuple[str, ...] = BASE_TERMS
    if "earlier_tokens" in t and (t.earlier_tokens > 0).any():
        terms += (REREAD,)
    if attention:
        terms += (ATTENTION,)
    if experts_of(t):
        terms += (EXPERT,)
    if tile:
        terms += (TILE,)
    result = fit_unsaturated(t, terms, tile) if unsaturated else _least_squares(t, terms, 0, tile)[0]
    if tile:
        result.coefficients[TILE_SIZE] = tile
    return with_expert_counts(result, t)


def experts_of(t: pd.DataFrame) -> dict[str, int]:
    """E17's counts of the rows' model ({} for a dense model, or rows without them)."""
    if "experts" not in t or not len(t) or not int(t.experts.iloc[0]):
        return {}
    return {k: int(t[k].iloc[0]) for k in EXPERT_COUNTS}


def with_expert_counts(result: Fit, t: pd.DataFrame) -> Fit:
    """`result` with E17's counts beside its `per_expert_ms` (R95), if it has one."""
    if EXPERT in result.coefficients:
        result.coefficients.update(experts_of(t))
    return result


def _least_squares(t: pd.DataFrame, terms: tuple[str, ...], free: int = 0, tile: int = 0) -> tuple[Fit, float]:
    """nnls over `terms` (E14's `free` tokens shifting the prompt-token column, E15's tiles of
    `tile` rows), and its sum of squared relative errors."""
    a = columns(t, terms, free, tile)
    check_separable(a, terms, t)
    from scipy.optimize import nnls

    y = t.ms.to_numpy(float)
    weighted = a / y[:, None]
    norms = np.linalg.norm(weighted, axis=0)
    x = nnls(weighted / norms, np.ones(len(t)), maxiter=50 * len(terms))[0] / norms
    x[x * np.abs(a).max(axis=0) < 1e-9 * y.max()] = 0.0  # solver residue (e.g. 5.5e-21), no term: it would switch options on
    coefficients = {k: rounded(v) for k, v in zip(terms, x, strict=True)}
    fitted = a @ np.array([coefficients[k] for k in terms])
    return Fit(coefficients, *summarise(t, fitted), fitted=fitted), float(np.sum((weighted @ x - 1) ** 2))


def free_candidates(t: pd.DataFrame) -> list[int]:
    """E14's free prompt tokens tried: 0, multiples of 32 up to 512 and every prompt-token count of
    a row, all below the largest (a GPU that reads every row's tokens free has no per-token cost)."""
    reads = t.prompt_tokens[t.prompt_tokens > 0].astype(int)
    top = int(reads.max()) if len(reads) else 0
    return [0] + sorted(f for f in {*range(32, 513, 32), *reads.tolist()} if f < top)


def fit_unsaturated(t: pd.DataFrame, terms: tuple[str, ...], tile: int = 0) -> Fit:
    """Least squares with E14 (unsaturated reading): `prompt_iteration_ms` is a
    column (1 in a row reading prompt tokens), `free_prompt_tokens` F a shift of the prompt-token
    column, so each F of `free_candidates` is one nnls and the F with the smallest sum of squared
    relative errors wins (the smaller on a tie). Needs rows that read no prompt tokens, else the
    fixed cost of a reading iteration is not apart from `iteration_ms`."""
    if (t.prompt_tokens > 0).all():
        raise InputError("every row reads prompt tokens: cannot fit prompt_iteration_ms apart from iteration_ms "
                         "(add writing-only rows)")
    more = terms + (PROMPT_ITERATION,)
    best: tuple[float, int, Fit] | None = None
    for free in free_candidates(t):
        try:
            result, ssr = _least_squares(t, more, free, tile)
        except InputError:
            if free == 0:  # the table cannot separate the terms themselves
                raise
            continue  # this shift ties the prompt-token column to another: not a candidate
        if best is None or ssr < best[0]:
            best = (ssr, free, result)
    assert best is not None  # free = 0 either fitted or raised
    _, free, result = best
    result.coefficients[FREE] = free
    return result


def summarise(t: pd.DataFrame, fitted: np.ndarray) -> tuple[dict, dict, dict]:
    """(largest error per kind, rows per kind, range) of `fitted` against the rows."""
    rel = fitted / t.ms.to_numpy(float) - 1
    kind = kinds(t)
    errors, rows = {}, {}
    for k in KINDS:
        r = rel[kind == k]
        if len(r):
            worst = r[np.argmax(np.abs(r))]
            errors[k] = round(100 * float(worst), 1) + 0.0  # never -0.0
            rows[k] = len(r)
    reading = t.prompt_tokens[t.prompt_tokens > 0]
    writing = t[t.replies > 0]
    per_reply = writing.context_tokens / writing.replies
    ranges = {"replies": _span(t.replies), "prompt_tokens": _span(reading), "context_per_reply": _span(per_reply)}
    return errors, rows, ranges


def _span(s: pd.Series) -> list[float]:
    return [float(s.min()), float(s.max())] if len(s) else []

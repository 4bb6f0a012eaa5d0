"""Invariants every run must satisfy, whatever the scenario: `check_run(result)` asserts them all.

They are computed here from the records and the model's rules, independently of the code that
computes figures (words are rebuilt from iteration ends, costs recomputed exactly from the
scenario's decimal values):

- conservation: the arrangement saw exactly the stream's requests that arrived before it
  stopped, once each; every measured request has exactly its words, or is counted unfinished
  (only when the safety cap ended the run) with fewer;
- time: nothing happens after the cap; word times of a reply strictly increase; a GPU's
  iterations never overlap; each lasts exactly the cost formula rounded to whole ns (D10);
- roles: a reading GPU never writes words 2..n, a writing GPU never reads; a reply's words come
  from the first iteration of its writing GPU that starts at or after it joined (M2, D5);
- split: a reply joins exactly its ship time after word 1, so its first gap is at least that;
- reading: every prompt token is read once, on the prompt's GPU, at most chunk_tokens an
  iteration, word 1 at the end of the iteration that read the last token;
- figures: the summary's counts agree with the requests.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from invariants_options import check_options

NS_PER_MS = 1_000_000


def _exact_ns_per(ms: float) -> Fraction:
    """A cost in ms as the user wrote it (the float's shortest decimal), in exact ns."""
    return Fraction(repr(float(ms))) * NS_PER_MS


def rounded_ns(fixed: Fraction, per: list[tuple[Fraction, np.ndarray]]) -> np.ndarray:
    """floor(fixed + sum(c * n) + 1/2) for each row, exactly (D10: nearest ns, halves up)."""
    n_rows = len(per[0][1]) if per else 0
    denominators = [fixed.denominator] + [c.denominator for c, _ in per]
    d = int(np.lcm.reduce(np.array(denominators, dtype=object)))
    a = fixed.numerator * (d // fixed.denominator)
    coeffs = [(c.numerator * (d // c.denominator), n) for c, n in per]
    bound = abs(a) + sum(abs(c) * (int(n.max()) if len(n) else 0) for c, n in coeffs)
    if 2 * bound + d < 2**62:
        total = np.full(n_rows, a, dtype=np.int64)
        for c, n in coeffs:
            total += c * n.astype(np.int64)
        return (2 * total + d) // (2 * d)
    out = []
    for i in range(n_rows):
        x = a + sum(c * int(n[i]) for c, n in coeffs)
        out.append((2 * x + d) // (2 * d))
    return np.array(out, dtype=object)


def check_run(result) -> None:
    """Assert every invariant for every arrangement of `result` (an api.RunResult)."""
    summary = result.summary.set_index("arrangement")
    for arrangement in result.scenario.arrangements:
        check_arrangement(result, arrangement, summary.loc[arrangement.name])
        check_options(result, arrangement)


def check_arrangement(result, arrangement, summary_row) -> None:  # noqa: C901 (one list of rules)
    scenario, stream = result.scenario, result.stream
    rec = result.records[arrangement.name]
    name = arrangement.name
    cap = stream.cap_ns
    stop = rec.stopped_at_ns
    assert stop <= cap, f"{name}: stopped at {stop} ns, past the cap {cap}"
    split = arrangement.is_split
    n_reading = arrangement.n_reading
    n_gpus = arrangement.n_gpus
    roles = np.array(rec.gpu_roles)
    assert len(roles) == n_gpus
    if split:
        assert (roles[:n_reading] == "reads").all() and (roles[n_reading:] == "writes").all()
    else:
        assert (roles == "both").all()

    # -- conservation of requests
    q = rec.requests
    n_seen = len(q["request_id"])
    assert (q["request_id"] == np.arange(n_seen)).all(), f"{name}: request ids lost or duplicated"
    if stream.measured.any():
        assert n_seen == int(np.searchsorted(stream.arrived_at_ns, stop, side="right")), (
            f"{name}: saw {n_seen} requests, the stream has "
            f"{int(np.searchsorted(stream.arrived_at_ns, stop, side='right'))} by the stop")
    for field, column in (("arrived_at_ns", "arrived_at_ns"), ("n_prompt_tokens", "n_prompt_tokens"),
                          ("n_reply_words", "n_reply_words"), ("measured", "measured")):
        assert (q[field] == getattr(stream, column)[:n_seen]).all(), f"{name}: {field} differs from the stream"
    local_max = getattr(arrangement, "local_prompt_max_tokens", None)  # E6: short prompts read on writing GPUs
    local = np.zeros(n_seen, bool) if local_max is None else q["n_prompt_tokens"] <= local_max
    assert (q["reading_gpu"][~local] >= 0).all() and (q["reading_gpu"][~local] < n_reading).all()
    assert (q["reading_gpu"][local] >= n_reading).all() and (q["reading_gpu"][local] < n_gpus).all()

    # -- iterations: no overlap, exact cost, nothing after the cap
    it = rec.iterations
    offsets = rec.gpu_offsets
    assert offsets[0] == 0 and offsets[-1] == len(it["gpu"]) and len(offsets) == n_gpus + 1
    started, ended = it["started_at_ns"], it["ended_at_ns"]
    for g in range(n_gpus):
        lo, hi = offsets[g], offsets[g + 1]
        assert (it["gpu"][lo:hi] == g).all() and (it["iteration"][lo:hi] == np.arange(hi - lo)).all()
        if hi - lo > 1:
            assert (started[lo + 1:hi] >= ended[lo:hi - 1]).all(), f"{name}: GPU {g} runs two iterations at once"
    assert (ended > started).all() and (started >= 0).all()
    assert not len(ended) or ended.max() <= stop, f"{name}: an iteration ends after the run stopped"
    reader_rows = np.isin(it["gpu"], np.flatnonzero(roles == "reads"))
    writer_rows = np.isin(it["gpu"], np.flatnonzero(roles == "writes"))
    assert (it["n_replies_written"][reader_rows] == 0).all(), f"{name}: a reading GPU wrote words 2..n"
    if local_max is None:
        assert (it["n_prompt_tokens_read"][writer_rows] == 0).all(), f"{name}: a writing GPU read prompt tokens"

    # -- reads: each token once, on the prompt's GPU, within chunk_tokens, word 1 at the last one
    rd = rec.reads
    assert (rd["n_tokens"] > 0).all()
    assert (rd["gpu"] == q["reading_gpu"][rd["request_id"]]).all(), f"{name}: a prompt read on another GPU"
    assert (roles[rd["gpu"]] == "writes").sum() == local[rd["request_id"]].sum(), f"{name}: a writing GPU read a long prompt"
    read_rows = offsets[rd["gpu"]] + rd["iteration"]
    per_iteration = np.bincount(read_rows, weights=rd["n_tokens"], minlength=len(started)).astype(np.int64)
    assert (per_iteration == it["n_prompt_tokens_read"]).all(), f"{name}: iteration token counts disagree with reads"
    if arrangement.chunk_tokens is not None:
        assert (it["n_prompt_tokens_read"] <= arrangement.chunk_tokens).all()
    mixed = getattr(arrangement, "mixed_iterations", None) is not False  # E10 when False: no iteration both reads and writes
    if not mixed:
        assert not ((it["n_replies_written"] > 0) & (it["n_prompt_tokens_read"] > 0)).any(), (
            f"{name}: an iteration read prompts and wrote words under mixed_iterations: false")
    # E8: no iteration over its budget (a split: each side's own, R89; a reading iteration's prompts, R90)
    prompts_read = np.bincount(read_rows, minlength=len(started))
    for role in set(roles.tolist()):
        replies, tokens, prompts = arrangement.batch_limits(role)
        mine = roles[it["gpu"]] == role
        seats = [x for x in (replies, tokens) if x is not None]
        if seats:
            assert (it["n_replies_written"][mine] <= min(seats)).all(), f"{name}: an iteration wrote more replies than its seats"
        if tokens is not None:
            assert (it["n_replies_written"][mine] + it["n_prompt_tokens_read"][mine] <= tokens).all(), (
                f"{name}: an iteration over its token budget")
        if prompts is not None:
            assert (prompts_read[mine] <= prompts).all(), f"{name}: an iteration read more prompts than its cap"
    read_total = np.bincount(rd["request_id"], weights=rd["n_tokens"], minlength=n_seen).astype(np.int64)
    first = q["first_word_at_ns"]
    has_first = first >= 0
    assert (read_total <= q["n_prompt_tokens"]).all(), f"{name}: a prompt token read twice"
    assert (read_total[has_first] == q["n_prompt_tokens"][has_first]).all(), f"{name}: word 1 before the whole prompt was read"
    assert (read_total[~has_first] < q["n_prompt_tokens"][~has_first]).all()
    if len(rd["request_id"]):
        order = np.lexsort((read_rows, rd["request_id"]))
        rid, rows = rd["request_id"][order], read_rows[order]
        starts = np.flatnonzero(np.r_[True, rid[1:] != rid[:-1]])
        ends = np.r_[starts[1:], len(rid)] - 1
        assert (q["read_started_at_ns"][rid[starts]] == started[rows[starts]]).all()
        done = has_first[rid[ends]]
        assert (first[rid[ends]][done] == ended[rows[ends]][done]).all(), f"{name}: word 1 is not the end of the last read"
    touched = np.zeros(n_seen, dtype=bool)
    touched[rd["request_id"]] = True
    began = q["read_started_at_ns"] >= 0  # or touched by an iteration still running when the run stopped
    assert (began[touched]).all() and (q["read_started_at_ns"][began & ~touched] <= stop).all()
    assert (q["read_started_at_ns"][began] >= q["arrived_at_ns"][began]).all()
    assert (first[has_first] > q["read_started_at_ns"][has_first]).all()

    # -- writing: joins, words from iteration ends, replies per iteration
    words = q["n_reply_words"]
    w_gpu, join_it, joined = q["writing_gpu"], q["join_iteration"], q["joined_at_ns"]
    one = words == 1
    assert (w_gpu[one] == -1).all() and (joined[one] == -1).all(), f"{name}: a one-word reply has a writing GPU"
    assert (q["finished_at_ns"][one & has_first] == first[one & has_first]).all()
    assert (q["finished_at_ns"][one & ~has_first] == -1).all()
    multi = ~one & has_first
    assert (w_gpu[~has_first] == -1).all() and (joined[~has_first] == -1).all()
    if split:
        # E4e: a reply may still wait in the handoff queue (no writing GPU yet) when the run stops
        queued = multi & (q["handoff_at_ns"] < 0) & ~local
        assert arrangement.kv_capacity_tokens is not None or not queued.any(), f"{name}: a reply never handed over"
        assert (w_gpu[queued] == -1).all()
        assert (w_gpu[multi & ~queued] >= n_reading).all() and (w_gpu[multi & ~queued] < n_gpus).all()
        stays = multi & local  # E6: written where it was read, with no ship
        assert (w_gpu[stays] == q["reading_gpu"][stays]).all() and (joined[stays] == first[stays]).all()
        shipped = multi & ~local
        handoff, ship_start = q["handoff_at_ns"], q["ship_started_at_ns"]
        # the writing GPU is chosen at the read's end (D3), later only under E4e; the ship starts
        # then, later only under E5
        if arrangement.kv_capacity_tokens is None:
            assert (handoff[shipped] == first[shipped]).all(), f"{name}: a handoff waited without a memory limit"
        if arrangement.kv_link == "independent":
            assert (ship_start[shipped] == handoff[shipped]).all(), f"{name}: a ship waited for an independent link"
        granted = shipped & (handoff >= 0)
        assert (handoff[granted] >= first[granted]).all() and (w_gpu[shipped & (handoff < 0)] == -1).all()
        began = shipped & (ship_start >= 0)
        assert (ship_start[began] >= handoff[began]).all() and (ship_start[shipped & ~granted] == -1).all()
        ship_ms = arrangement.kv_ship_ms(scenario.cost)
        ship = rounded_ns(Fraction(0), [(_exact_ns_per(ship_ms), q["n_prompt_tokens"][began])])
        lands = ship_start[began] + np.asarray(ship, dtype=np.int64)
        landed = lands <= stop
        assert (joined[began][landed] == lands[landed]).all(), f"{name}: a ship took the wrong time"
        assert (joined[began][~landed] == -1).all(), f"{name}: a reply joined after the run stopped"
        assert (joined[shipped & ~began] == -1).all(), f"{name}: a reply joined before its ship started"
    else:
        assert (w_gpu[multi] == q["reading_gpu"][multi]).all(), f"{name}: a colocated reply moved GPU"
        assert (joined[multi] == first[multi]).all()
    in_gpu = multi & (join_it >= 0)  # joined its writing GPU before the run stopped
    if split:
        # a reply still shipping when the run stopped has not joined, and only then
        assert seats or (joined[multi & (join_it < 0)] == -1).all()  # (E8: or waits for a seat)
        assert (joined[in_gpu] <= stop).all()
    elif not seats and mixed:  # (E8: a reply may still wait for a seat when the run stops; E10: for a writing iteration)
        assert (join_it[multi] >= 0).all()
    g, j = w_gpu[in_gpu], join_it[in_gpu]
    n_it = offsets[g + 1] - offsets[g]
    # join_iteration counts iterations started, one of which may still run when the run stops
    assert (j <= n_it + 1).all()
    has_prev = (j > 0) & (j <= n_it)
    prev_start = started[(offsets[g] + j - 1)[has_prev]]
    if not seats and mixed:  # (E8: a reply waiting for a seat misses iterations; E10: prompt-only ones)
        assert (prev_start < joined[in_gpu][has_prev]).all(), f"{name}: a reply missed an iteration that started after it joined"
    has_next = j < n_it
    assert (started[(offsets[g] + j)[has_next]] >= joined[in_gpu][has_next]).all(), f"{name}: a reply got a word before it joined"
    # a reply's words 2..n end iterations j, j+1, ... of its GPU that write words: all of them
    # (M2) unless E10 puts prompt-only iterations between them. In "positions" (iterations that
    # write words, numbered per GPU then on across GPUs: iteration rows when mixed) reply r covers
    # positions p0 .. p0 + n - 2.
    writes = it["n_replies_written"] > 0
    pos_of = np.concatenate([[0], np.cumsum(writes)]) if not mixed else np.arange(len(started) + 1)
    row_of = np.flatnonzero(writes) if not mixed else np.arange(len(started))
    p_end = pos_of[offsets[g + 1]]
    rows0 = offsets[g] + np.minimum(j, n_it)
    if not mixed:  # word 2 ends iteration j itself, a writing one
        assert writes[rows0[j < n_it]].all(), f"{name}: join_iteration is not an iteration writing words"
    p0 = pos_of[rows0]
    n_written = np.clip(np.minimum(words[in_gpu] - 1, p_end - p0), 0, None)
    cover = np.zeros(len(row_of) + 1, dtype=np.int64)
    some = n_written > 0
    np.add.at(cover, p0[some], 1)
    np.add.at(cover, (p0 + n_written)[some], -1)
    assert (np.cumsum(cover)[:-1] == it["n_replies_written"][row_of]).all(), f"{name}: an iteration wrote the wrong number of words"
    # E3: a reply getting word w has context prompt + w - 1; at position k (word k - p0 + 2) that is
    # prompt + 1 - p0 + k, summed over the replies the position writes
    base = np.zeros(len(row_of) + 1, dtype=np.int64)
    np.add.at(base, p0[some], (q["n_prompt_tokens"][in_gpu] + 1 - p0)[some])
    np.add.at(base, (p0 + n_written)[some], -(q["n_prompt_tokens"][in_gpu] + 1 - p0)[some])
    context = np.zeros(len(started), dtype=np.int64)
    context[row_of] = np.cumsum(base)[:-1] + np.arange(len(row_of)) * it["n_replies_written"][row_of]
    check_costs(result, arrangement, roles, rec, context)
    rows0 = row_of[np.minimum(p0, max(len(row_of) - 1, 0))] if len(row_of) else rows0
    # word times: word 2 after word 1, later words at increasing iteration ends
    w2 = n_written > 0
    assert (ended[rows0[w2]] > first[in_gpu][w2]).all(), f"{name}: word 2 not after word 1"
    if split:
        assert (ended[rows0[w2]] - first[in_gpu][w2] >= (joined - first)[in_gpu][w2]).all(), f"{name}: first gap shorter than the ship"
    complete = n_written == words[in_gpu] - 1
    last_row = row_of[np.clip(p0 + n_written - 1, 0, max(len(row_of) - 1, 0))] if len(row_of) else p0
    last_at = np.where(complete, ended[last_row] if len(ended) else -1, -1)
    assert (q["finished_at_ns"][in_gpu] == last_at).all(), f"{name}: finished_at is not the last word's time"
    finished = q["finished_at_ns"] >= 0
    assert (finished[multi & ~in_gpu] == False).all()  # noqa: E712

    # -- measured requests: all their words, or unfinished only when the cap cut the run
    measured = q["measured"]
    unfinished = measured & ~finished
    assert rec.n_unfinished == int(unfinished.sum())
    if unfinished.any():
        assert stop == cap, f"{name}: requests unfinished although the run stopped before the cap"
    elif measured.any():
        assert stop == q["finished_at_ns"][measured].max(), f"{name}: the run went on after the last measured word"
    assert (q["finished_at_ns"][finished] <= stop).all()
    assert int(summary_row["n_requests"]) == int(measured.sum())
    assert int(summary_row["n_unfinished"]) == int(unfinished.sum())


def check_costs(result, arrangement, roles, rec, context) -> None:
    """Each iteration lasts exactly its side's cost formula (M1, E1-E3, E7, E14, E15, E17, D10), rounded once."""
    it, rd, offsets = rec.iterations, rec.reads, rec.gpu_offsets
    started, ended = it["started_at_ns"], it["ended_at_ns"]
    # E2: each read pays for the tokens of its prompt read by earlier iterations
    read_rows = offsets[rd["gpu"]] + rd["iteration"]
    order = np.lexsort((read_rows, rd["request_id"]))
    rid, n = rd["request_id"][order], rd["n_tokens"][order]
    total = np.cumsum(n)
    start_of = np.flatnonzero(np.r_[True, rid[1:] != rid[:-1]]) if len(rid) else np.zeros(0, np.int64)
    before_request = np.repeat(total[start_of] - n[start_of], np.diff(np.r_[start_of, len(rid)]))
    earlier = total - n - before_request
    reread = np.bincount(read_rows[order], weights=earlier, minlength=len(started)).astype(np.int64)
    pairs = np.zeros(len(started), dtype=np.int64)  # E7: each read's n x earlier + n (n + 1) / 2
    np.add.at(pairs, read_rows[order], n * earlier + n * (n + 1) // 2)
    reading, writing = arrangement.side_costs(result.scenario.cost)
    gpu_is_writer = roles[it["gpu"]] == "writes"
    expected = np.zeros(len(started), dtype=np.int64)
    for side, rows in ((reading, ~gpu_is_writer), (writing, gpu_is_writer)):
        expected[rows] = np.asarray(rounded_ns(_exact_ns_per(side.iteration_ms), [
            (_exact_ns_per(side.per_reply_ms), it["n_replies_written"][rows]),
            (_exact_ns_per(side.per_prompt_token_ms),  # E14: the first free_prompt_tokens free
             np.maximum(it["n_prompt_tokens_read"][rows] - (side.free_prompt_tokens or 0), 0)),
            (_exact_ns_per(side.prompt_iteration_ms or 0.0), (it["n_prompt_tokens_read"][rows] > 0).astype(np.int64)),
            (_exact_ns_per(side.per_reread_token_ms), reread[rows]),
            (_exact_ns_per(side.per_context_token_ms), context[rows]),
            (_exact_ns_per(side.per_attention_pair_ms), pairs[rows]),
            (_exact_ns_per(side.per_token_tile_ms or 0.0),  # E15: started tiles of tokens read + replies written
             -(-(it["n_prompt_tokens_read"][rows] + it["n_replies_written"][rows]) // (side.token_tile or 1))),
            (_exact_ns_per(side.per_expert_ms or 0.0),  # E17: experts touched by tokens read + replies written
             np.minimum(side.experts or 0, (side.experts_per_token or 0)
                        * (it["n_prompt_tokens_read"][rows] + it["n_replies_written"][rows]))),
        ]), dtype=np.int64)
    duration = ended - started
    bad = np.flatnonzero(duration != expected)
    assert not bad.size, (
        f"{arrangement.name}: iteration row {bad[0]} lasts {duration[bad[0]]} ns, the cost formula gives "
        f"{expected[bad[0]]} ns ({it['n_replies_written'][bad[0]]} replies, {it['n_prompt_tokens_read'][bad[0]]} "
        f"tokens, {reread[bad[0]]} re-read, context {context[bad[0]]})")


def oracle_words(rec, request_id: int) -> list[int]:
    """Word times (ns) of one request from the rules: word 1, then the ends of iterations
    join_iteration .. of its writing GPU that write words (none while it ships)."""
    q = rec.requests
    first = int(q["first_word_at_ns"][request_id])
    if first < 0:
        return []
    g, j = int(q["writing_gpu"][request_id]), int(q["join_iteration"][request_id])
    if g < 0 or j < 0:
        return [first]
    lo, hi = rec.gpu_offsets[g] + j, rec.gpu_offsets[g + 1]
    n = int(q["n_reply_words"][request_id]) - 1
    writing = rec.iterations["n_replies_written"][lo:hi] > 0
    return [first] + rec.iterations["ended_at_ns"][lo:hi][writing][:n].tolist()


def check_words_frame(result, arrangement_name: str) -> None:
    """`result.words()` agrees with the rule-built words of every measured request."""
    rec = result.records[arrangement_name]
    q = rec.requests
    frame = result.words(arrangement_name)
    got = {int(rid): (w["at_s"].to_numpy() * 1e9) for rid, w in frame.groupby("request_id")}
    for rid in np.flatnonzero(q["measured"]):
        want = np.array(oracle_words(rec, int(rid)), dtype=np.float64)
        have = got.get(int(rid), np.zeros(0))
        assert len(have) == len(want) and np.allclose(have, want, atol=1), f"{arrangement_name}: words of request {rid}"
        if len(have) > 1:
            assert (np.diff(have) > 0).all()

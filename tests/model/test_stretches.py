"""The records' word view (model/words.py): the writing iterations, and the stretches every
consumer reads. A model that moves replies logs its stretches; a log that cuts each reply's one
stretch into several pieces on the same GPU describes the same words, so every figure read from
the view (word times, gaps, freezes, time parts) must come out the same."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from disagg_simpy import load_scenario, run
from disagg_simpy.model.words import STRETCH_LOG_FIELDS
from disagg_simpy.results.blame import freeze_blame, freeze_summary, reply_freezes
from disagg_simpy.results.breakdown import time_breakdown_ns
from disagg_simpy.results.metrics import LimitsNs, reply_gaps

SCENARIO = """\
name: stretches
seed: 3
workload:
  rate_per_s: 9
  measure_s: 6
  prompt_mix:
    - {share: 0.3, tokens: [3000, 8000]}
    - {share: 0.7, tokens: [200, 1200]}
  reply_words: [1, 40]
max_sim_s: 12
slo: {freeze_ms: 150}
cost: {kv_ship_ms_per_token: 0.05}
arrangements:
  - {name: same-gpu, kind: colocated, gpus: 2}
  - {name: split-1-1, kind: disaggregated, reading_gpus: 1, writing_gpus: 1}
"""


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    path = tmp_path_factory.mktemp("stretches") / "s.yaml"
    path.write_text(SCENARIO)
    return run(load_scenario(path))


def cut_log(rec, piece: int) -> list[tuple[int, ...]]:
    """Each reply's one stretch as a log, cut into pieces of `piece` words on its GPU: every
    piece after the first leads with the previous piece's last word (not its own)."""
    r, w = rec.requests, rec.writes
    st = rec.stretches
    log = []
    for i in range(len(r["request_id"])):
        g, j, n_words = int(r["writing_gpu"][i]), int(r["join_iteration"][i]), int(r["n_reply_words"][i])
        lead = int(r["first_word_at_ns"][i])
        log.append((i, g, j, 2, n_words - 1, lead, 1))
        if j < 0 or n_words - 1 <= piece:
            continue
        log.pop()
        log.append((i, g, j, 2, piece, lead, 1))
        first = int(st.first[i])
        for k in range(piece, n_words - 1, piece):  # words 2 + k .. on write positions first + k ..
            p = first + k
            if p >= w.offsets[g + 1]:  # the run stopped before
                break
            iteration = int(w.rows[p] - rec.gpu_offsets[g])
            log.append((i, g, iteration, 2 + k, min(piece, n_words - 1 - k), int(w.ended[p - 1]), 0))
    return log


def test_the_derived_stretches_are_the_rule(result):
    """One stretch per reply: word 2 on write position of iteration join_iteration."""
    for rec in result.records.values():
        r, w, st = rec.requests, rec.writes, rec.stretches
        assert st.one_each and len(st.n) == len(r["request_id"])
        assert (rec.iterations["n_replies_written"][w.rows] > 0).all()
        placed = np.flatnonzero(st.n > 0)
        rows = rec.gpu_offsets[r["writing_gpu"][placed]] + r["join_iteration"][placed]
        np.testing.assert_array_equal(w.rows[st.first[placed]], rows)


@pytest.mark.parametrize("piece", [1, 3])
def test_a_log_of_the_same_words_cut_in_pieces_reads_the_same(result, piece):
    limits = LimitsNs.from_slo(result.scenario.slo)
    for rec in result.records.values():
        log = cut_log(rec, piece)
        assert len(log) > len(rec.requests["request_id"])  # some replies were cut
        logged = dataclasses.replace(rec, stretch_log=dict(zip(STRETCH_LOG_FIELDS, np.array(log).T)))
        assert not logged.stretches.one_each
        rows = np.arange(len(rec.requests["request_id"]))
        for a, b in zip(rec.word_times(rows), logged.word_times(rows)):
            np.testing.assert_array_equal(a, b)
        g1, g2 = reply_gaps(rec, limits), reply_gaps(logged, limits)
        for f in ("max_gap_ns", "n_freezes", "gap_values_ns", "gap_counts", "on_time"):
            np.testing.assert_array_equal(getattr(g1, f), getattr(g2, f), err_msg=f)
        assert g1.n_freezes.sum() > 0  # the freeze limit is met
        b1, b2 = freeze_blame(rec, g1, limits), freeze_blame(logged, g2, limits)
        for f in ("end_row", "started_at_ns", "gap_ns", "cause", "n_replies"):
            np.testing.assert_array_equal(getattr(b1, f), getattr(b2, f), err_msg=f)
        assert b1.blamed_ids == b2.blamed_ids
        for a, b in zip(reply_freezes(rec, g1, b1), reply_freezes(logged, g2, b2)):
            np.testing.assert_array_equal(a, b)
        assert freeze_summary(rec, g1, limits, 2000) == freeze_summary(logged, g2, limits, 2000)
        t1, t2 = time_breakdown_ns(rec, g1, limits), time_breakdown_ns(logged, g2, limits)
        for k in t1:
            np.testing.assert_array_equal(t1[k], t2[k], err_msg=k)

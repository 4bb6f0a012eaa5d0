"""The array-based metrics against a plain per-word computation from `.words()`."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import DEFAULT

from disagg_simpy import load_scenario, run


@pytest.fixture(scope="module")
def result():
    # a short, busy window with every arrangement, chunking on a split too
    scenario = load_scenario(DEFAULT).with_overrides(**{"workload.measure_s": 12, "seed": 5})
    return run(scenario)


@pytest.mark.parametrize("arrangement", ["same-gpu", "chunked-512", "split-2-2", "split-1-3", "split-3-1"])
def test_per_request_figures_match_a_per_word_computation(result, arrangement):
    slo = result.scenario.slo
    req = result.requests[result.requests.arrangement == arrangement].set_index("request_id")
    words = result.words(arrangement)
    pooled = []
    for rid, w in words.groupby("request_id"):
        t = w.at_s.to_numpy()
        r = req.loc[rid]
        assert r.first_word_s == pytest.approx(t[0] - r.arrived_at_s, abs=1e-9)
        gaps = np.diff(t)
        pooled.extend(gaps)
        if len(gaps):
            assert r.mean_gap_ms == pytest.approx(gaps.mean() * 1e3, rel=1e-9)
            assert r.max_gap_ms == pytest.approx(gaps.max() * 1e3, abs=1e-6)
            assert r.n_freezes == int((gaps > slo.freeze_ms / 1e3 + 1e-9).sum())
        on_time = (
            t[0] - r.arrived_at_s <= slo.first_word_s + 1e-9
            and (not len(gaps) or gaps.mean() <= slo.mean_gap_ms / 1e3 + 1e-9)
            and (not len(gaps) or gaps.max() <= slo.freeze_ms / 1e3 + 1e-9)
        )
        assert r.on_time == on_time
    summary = result.summary.set_index("arrangement").loc[arrangement]
    assert summary.longest_gap_ms == pytest.approx(max(pooled) * 1e3, abs=1e-6)
    assert summary.p99_gap_ms == pytest.approx(np.percentile(pooled, 99) * 1e3, abs=1e-6)
    assert summary.on_time_pct == pytest.approx(100 * req.on_time.mean())
    assert summary.median_mean_gap_ms == pytest.approx(np.median(req.mean_gap_ms.dropna()), rel=1e-12)
    assert summary.first_word_p90_s == pytest.approx(np.percentile(req.first_word_s, 90), rel=1e-12)


def test_iterating_shares_fullness_and_words_per_second(result):
    it = result.iterations
    for name, rec in result.records.items():
        req = result.requests[result.requests.arrangement == name]
        span = req.finished_at_s.max()
        block = it[it.arrangement == name]
        busy = (block.ended_at_s.clip(upper=span) - block.started_at_s.clip(upper=span)).clip(lower=0)
        roles = np.asarray(rec.gpu_roles)
        summary = result.summary.set_index("arrangement").loc[name]
        for role, column in (("reads", "reading_iterating_pct"), ("writes", "writing_iterating_pct")):
            gpus = np.flatnonzero((roles == role) | (roles == "both"))
            expected = 100 * busy[block.gpu.isin(gpus)].sum() / (len(gpus) * span)
            assert summary[column] == pytest.approx(expected, rel=1e-9)
        ended = block[(block.ended_at_s <= span)]
        writes = ended[ended.gpu.isin(np.flatnonzero(roles != "reads"))]
        reads = ended[ended.gpu.isin(np.flatnonzero(roles != "writes"))]
        assert summary.replies_per_writing_iteration == pytest.approx(writes.n_replies_written.mean(), rel=1e-12)
        assert summary.prompt_tokens_per_reading_iteration == pytest.approx(reads.n_prompt_tokens_read.mean(), rel=1e-12)
        first_words = (rec.requests["first_word_at_ns"] >= 0) & (rec.requests["first_word_at_ns"] <= round(span * 1e9))
        n_words = block[block.ended_at_s <= span].n_replies_written.sum() + first_words.sum()
        assert summary.words_per_s == pytest.approx(n_words / span, rel=1e-9)

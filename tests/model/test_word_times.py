"""RunResult.words / ArrangementRecords.word_times: built a block of requests at a time, the
words are the same whatever the block size; a reply whose KV ship had not landed when the cap
ended the run has word 1 only."""

from __future__ import annotations

import numpy as np
import pytest

from disagg_simpy import load_scenario, run
from disagg_simpy.model import records

SCENARIO = """\
name: words
seed: 2
workload:
  rate_per_s: 14.25
  measure_s: 20
  prompt_mix:
    - {share: 0.3, tokens: [3000, 8000]}
    - {share: 0.7, tokens: [200, 1200]}
  reply_words: [1, 60]
max_sim_s: 25
cost: {kv_ship_ms_per_token: 2.0}
arrangements:
  - {name: same-gpu, kind: colocated, gpus: 4}
  - {name: split-2-2, kind: disaggregated, reading_gpus: 2, writing_gpus: 2}
  - {name: split-3-1, kind: disaggregated, reading_gpus: 3, writing_gpus: 1}
"""


def reference_words(rec, rows):
    """Word k >= 2 of a reply ends iteration join_iteration + k - 2 of its writing GPU."""
    r = rec.requests
    it = rec.iterations
    out = []
    for i in rows:
        if r["first_word_at_ns"][i] < 0:
            continue
        out.append((r["request_id"][i], 1, r["first_word_at_ns"][i]))
        g, j = r["writing_gpu"][i], r["join_iteration"][i]
        if g < 0 or j < 0:
            continue
        ended = it["ended_at_ns"][rec.gpu_offsets[g] : rec.gpu_offsets[g + 1]]
        for k in range(2, r["n_reply_words"][i] + 1):
            if j + k - 2 >= len(ended):
                break
            out.append((r["request_id"][i], k, ended[j + k - 2]))
    return [np.array(c, dtype=np.int64) for c in zip(*out)] if out else [np.zeros(0, np.int64)] * 3


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    path = tmp_path_factory.mktemp("words") / "words.yaml"
    path.write_text(SCENARIO)
    return run(load_scenario(path))


@pytest.mark.parametrize("block", [1, 5, 97, 1 << 20])
def test_words_match_the_rule_for_any_block_size(result, block, monkeypatch):
    monkeypatch.setattr(records, "WORDS_PER_BLOCK", block)
    assert result.capped  # the cap ends these runs: unfinished replies, ships in flight
    for rec in result.records.values():
        rows = np.arange(len(rec.requests["request_id"]))
        want = reference_words(rec, rows)
        got = rec.word_times(rows)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g, w)
        seconds = rec.word_times(rows, ns_per_unit=1e9)[2]
        np.testing.assert_array_equal(seconds, want[2] / 1e9)


def test_replies_still_shipping_at_the_cap_have_word_1_only(result):
    rec = result.records["split-2-2"]
    r = rec.requests
    shipping = np.flatnonzero((r["writing_gpu"] >= 0) & (r["join_iteration"] < 0))
    assert len(shipping) > 0
    _, word, _ = rec.word_times(shipping)
    assert len(word) == len(shipping) and (word == 1).all()


def test_words_frame_is_compact(result):
    words = result.words("same-gpu")
    assert [str(t) for t in words.dtypes] == ["int32", "int16", "float64"]
    assert words.memory_usage(index=False).sum() == 14 * len(words)

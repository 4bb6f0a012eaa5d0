"""The kept fusion (docs/architecture.md, `Gpu.fused`) leaves exactly the records of the generic
path it stands in for: with every option off, the GPU's inline start instead of the planner's
composition (model/planner.py) (E10's writing repeats, a fusion before, now run the one `Repeat`).
Fast-forward on and off, on light and heavier traffic (tests/model/test_fast_forward.py compares
repeats with the one-by-one loop)."""

from __future__ import annotations

import pytest
from helpers import small_traffic_scenario
from test_fast_forward import all_records

from disagg_simpy.model.gpu import Gpu

ARRANGEMENTS = [
    {"name": "same", "kind": "colocated", "gpus": 2},
    {"name": "chunked", "kind": "colocated", "gpus": 1, "chunk_tokens": 128},
    {"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2},
    {"name": "e10", "kind": "colocated", "gpus": 1, "mixed_iterations": False},
    {"name": "e10-chunked-e8", "kind": "colocated", "gpus": 2, "mixed_iterations": False, "chunk_tokens": 256,
     "max_batch_replies": 3},
]


@pytest.mark.parametrize("rate", [6, 30])
@pytest.mark.parametrize("fast", [True, False])
def test_the_kept_fusion_leaves_the_generic_paths_records(tmp_path, monkeypatch, rate, fast):
    path = small_traffic_scenario(tmp_path, ARRANGEMENTS, rate_per_s=rate)
    monkeypatch.setattr(Gpu, "fast_forward", fast)
    monkeypatch.setattr(Gpu, "fused", True)
    fused = all_records(path, fast, monkeypatch)
    monkeypatch.setattr(Gpu, "fused", False)
    generic = all_records(path, fast, monkeypatch)
    assert fused.keys() == generic.keys()
    for key, want in generic.items():
        if key[-1] != "events":  # (the generic repeat takes no iteration ahead: more SimPy events)
            assert fused[key] == want, f"{key}: fused {fused[key]}, generic {want}"

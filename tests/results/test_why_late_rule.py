"""The run's "why late" block adds up under any per-request rule: with `e2e_s` or `delay_s` on, a
request late on that limit alone gets its own column (review F11: the block showed only the
explainer's three limits, so a run late on end-to-end alone read 'late 88.9, first word only 0.0,
several 0.0')."""

from __future__ import annotations

import pytest
import yaml

from disagg_simpy import load_scenario
from disagg_simpy.api import run
from disagg_simpy.results.why_late import why_late_text

SPEC = {"name": "e2e", "seed": 3, "max_sim_s": 30,
        "workload": {"rate_per_s": 200, "n_requests": 90, "prompt_mix": [{"share": 1, "tokens": [100, 2000]}],
                     "reply_words": [10, 300]},
        "cost": {"preset": "a100-80gb/llama-3-8b/tp1/vidur-sarathi"},
        "arrangements": [{"name": "one", "kind": "colocated", "gpus": 1},
                         {"name": "two", "kind": "colocated", "gpus": 3}]}


@pytest.mark.parametrize(("slo", "header", "column"), [
    ({"preset": "vllm-bench", "first_word_s": 5, "e2e_s": 3}, "end-to-end only", "late_e2e_only_pct"),
    ({"first_word_s": 5, "mean_gap_ms": 200, "freeze_ms": None, "delay_s": 0.5}, "delay only", "late_delay_only_pct"),
], ids=["e2e", "delay"])
def test_the_block_has_the_rules_own_column_and_adds_up(tmp_path, slo, header, column):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "slo": slo}, sort_keys=False))
    result = run(load_scenario(path))
    lines = why_late_text([result]).splitlines()
    assert header in lines[1], lines[1]
    heads = [h.strip() for h in lines[1].split("  ") if h.strip()]
    summary = result.summary.set_index("arrangement")
    late_alone = 0.0
    for line in lines[2:4]:
        name, late, *parts = line.split()
        cells = dict(zip(heads[2:], map(float, parts)))
        assert cells[header] == pytest.approx(summary.loc[name, column], abs=0.05)
        assert sum(cells.values()) == pytest.approx(float(late), abs=0.2), line  # each late request once
        late_alone += cells[header]
    assert late_alone > 0  # the case is one: some requests are late on that limit alone

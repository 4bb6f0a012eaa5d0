"""A concurrency figure is of the catalog's arrangement only (review F21): its TTFT and TPOT, and
the Little's-law search for its rate, are that arrangement's, whatever else the scenario holds."""

from __future__ import annotations

import pytest
import yaml

from disagg_simpy import load_scenario
from disagg_simpy.errors import InputError
from disagg_simpy.validation import at_concurrency

FAST = {"name": "fast", "kind": "colocated", "gpus": 1}
SLOW = {"name": "slow", "kind": "colocated", "gpus": 1, "cost": {"iteration_ms": 60.0}}


def _scenario(tmp_path, arrangements):
    spec = {"name": "conc", "seed": 3, "max_sim_s": 200,
            "workload": {"rate_per_s": 1, "warmup_s": 2, "measure_s": 20,
                         "prompt_mix": [{"share": 1, "tokens": {"fixed": 300}}], "reply_words": {"fixed": 20}},
            "arrangements": arrangements}
    path = tmp_path / f"{'-'.join(a['name'] for a in arrangements)}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return load_scenario(path)


def test_the_figure_is_the_named_arrangements_alone(tmp_path):
    both = _scenario(tmp_path, [FAST, SLOW])
    for name, alone in (("fast", [FAST]), ("slow", [SLOW])):
        ours = at_concurrency(both, name, 4, 3, halvings=4)
        assert ours == at_concurrency(_scenario(tmp_path, alone), name, 4, 3, halvings=4), name
    fast, slow = at_concurrency(both, "fast", 4, 3, halvings=4), at_concurrency(both, "slow", 4, 3, halvings=4)
    assert slow[1] > 2 * fast[1]  # the two differ: a mean over both would be neither


def test_an_arrangement_the_scenario_lacks_is_refused_before_any_run(tmp_path):
    with pytest.raises(InputError, match=r"no arrangement 'tp2' \(the catalog's arrangement\); expected one of fast, slow"):
        at_concurrency(_scenario(tmp_path, [FAST, SLOW]), "tp2", 4, 3)

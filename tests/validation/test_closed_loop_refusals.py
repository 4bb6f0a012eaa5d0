"""validation.closed_loop builds its own stream: options whose draws it does not make are refused
in one line (review2 G14: they were an AssertionError deep in the model)."""

from __future__ import annotations

import pytest

from disagg_simpy.errors import InputError
from disagg_simpy.scenario.loading import load_scenario
from disagg_simpy.validation import closed_loop

FIXED = """name: cl
seed: 1
max_sim_s: 600
workload:
  rate_per_s: 1
  n_requests: 4
  prompt_mix: [{{share: 1, tokens: {{fixed: 500}}}}]
  reply_words: {{fixed: 50}}
cost:
  preset: a100-80gb/llama-3-8b/tp1/vidur-sarathi
{extra}
arrangements:
  - {{name: c, kind: colocated, gpus: 2}}
"""


@pytest.mark.parametrize(("extra", "named"), [
    ("speculative: {tokens: 4, acceptance: 0.7}", "speculative"),
    ("router: power_of_two", "router: power_of_two"),
])
def test_a_closed_loop_refuses_per_request_draws_it_does_not_make(tmp_path, extra, named):
    path = tmp_path / "cl.yaml"
    path.write_text(FIXED.format(extra=extra), encoding="utf-8")
    with pytest.raises(InputError) as err:
        closed_loop(load_scenario(path), "c", clients=4, per_client=3)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: {named}: got it in a closed-loop figure"), message


def test_a_closed_loop_without_them_runs(tmp_path):
    path = tmp_path / "cl.yaml"
    path.write_text(FIXED.format(extra=""), encoding="utf-8")
    loop = closed_loop(load_scenario(path), "c", clients=2, per_client=2)
    assert loop.ttft_ms > 0 and loop.tpot_ms > 0

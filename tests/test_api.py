"""The Python API as pydoc shows it: the frames and pictures documented, a scenario built in code."""

from __future__ import annotations

from helpers import ONE_GPU_THREE_WAYS, SMALL_TRAFFIC, scenario_text


def test_help_shows_the_frames_and_the_pictures_and_building_a_scenario_in_code(tmp_path):
    import pydoc

    import yaml

    import disagg_simpy
    from disagg_simpy import RunResult, Scenario, run

    text = pydoc.render_doc(RunResult, renderer=pydoc.plaintext)
    properties = text.split("Readonly properties defined here:")[1]
    for name, words in (("summary", "summary.csv"), ("requests", "requests.csv"), ("iterations", "iterations.csv"),
                        ("reads", "reads.csv")):
        assert f" |  {name}\n |      " in properties and words in properties
    package = pydoc.render_doc(disagg_simpy, renderer=pydoc.plaintext)
    assert "plots.write_plots(result, folder)" in package and "Scenario.model_validate" in package
    raw = yaml.safe_load(scenario_text("inline", {**SMALL_TRAFFIC, "measure_s": 1}, arrangements=ONE_GPU_THREE_WAYS[:1]))
    result = run(Scenario.model_validate(raw).with_overrides(**{"cost.iteration_ms": 8}))
    assert result.scenario.cost.iteration_ms == 8 and len(result.summary) == 1

"""Every scenario key's message states what the key takes (issue 37 items 14, 15, 17): no key
falls back on "expected a valid value", unknown-key lists name the keys a user writes (`roles`,
never the internal `role_changes`), and a limit is blamed on what broke it (a long plain
schedule is told the schedule's limit, not the one on YAML aliases)."""

from __future__ import annotations

import typing

import pytest
import yaml
from pydantic import BaseModel

from disagg_simpy.errors import InputError
from disagg_simpy.scenario import loading
from disagg_simpy.scenario.arrangements import KINDS
from disagg_simpy.scenario.loading import load_scenario
from disagg_simpy.scenario.schema import Scenario, SyntheticWorkload, TraceWorkload


def _models() -> set[type[BaseModel]]:
    """Every model a scenario file's mappings are read into, found from Scenario's fields."""

    def inside(annotation, out):
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out.add(annotation)
        for arg in typing.get_args(annotation):
            inside(arg, out)

    seen: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = [Scenario, SyntheticWorkload, TraceWorkload, *KINDS.values()]
    while todo:
        model = todo.pop()
        if model not in seen:
            seen.add(model)
            for field in model.model_fields.values():
                found: set[type[BaseModel]] = set()
                inside(field.annotation, found)
                todo.extend(found)
    return seen


def test_every_key_a_user_writes_has_its_own_expectation():
    missing = sorted({(m.__name__, key) for m in _models() for key in loading._keys(m)
                      if loading._expected((key,)) == "a valid value"})
    assert missing == [], f"keys whose bad value would say only 'expected a valid value': {missing}"


def test_unknown_key_lists_name_roles_never_role_changes():
    for model in KINDS.values():
        keys = loading._keys(model)
        assert "roles" in keys and "role_changes" not in keys


def _scenario(tmp_path, workload_extra="", arrangement="{name: same, kind: colocated, gpus: 1}"):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nworkload:\n  measure_s: 2\n  prompt_mix: [{share: 1, tokens: [10, 20]}]\n"
                    f"  reply_words: [1, 2]\n{workload_extra}arrangements:\n  - {arrangement}\n")
    return path


def test_a_plain_schedule_over_the_yaml_value_limit_is_told_the_schedule_limit(tmp_path, monkeypatch):
    """A file that writes its values out (no alias) is bounded by its size; what it breaks is
    the schedule's 10,000 periods. (The YAML limit lowered to 1,000 values stands in for a
    20,000-period file, which took seconds to parse.)"""
    monkeypatch.setattr("disagg_simpy.scenario.yaml_file.MAX_YAML_VALUES", 1000)
    periods = "".join(f"    - {{until_s: {k + 1}, rate_per_s: 5}}\n" for k in range(10_001))
    with pytest.raises(InputError) as err:
        load_scenario(_scenario(tmp_path, "  schedule:\n" + periods))
    assert "s.yaml:6: workload.schedule: got a list of 10,001 entries, expected a list of 1 to 10,000 periods" \
        in str(err.value) and "aliases" not in str(err.value)
    short = "".join(f"    - {{until_s: {k + 1}, rate_per_s: 5}}\n" for k in range(300))  # 1,500 values written
    assert len(load_scenario(_scenario(tmp_path, "  schedule:\n" + short)).workload.schedule) == 300


def test_aliases_are_still_held_to_the_limit_past_what_the_file_writes(tmp_path, monkeypatch):
    monkeypatch.setattr("disagg_simpy.scenario.yaml_file.MAX_YAML_VALUES", 1000)
    text = "x0: &a0 [" + ", ".join(["1"] * 40) + "]\n" + "".join(
        f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 4)}]\n" for i in range(1, 4))  # 40 x 4^3 values from ~60 written
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(InputError, match="got YAML aliases or merge keys .* that expand to more than 1,000 values"):
        load_scenario(tmp_path / "s.yaml")
    assert yaml.safe_load(text)["x1"][0][0] == 1  # (a plain YAML reader builds it)

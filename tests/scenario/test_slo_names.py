"""The SLO rules' names and the limit keys have one definition each (review F13): the schema
accepts every rule of SLO_PRESETS and every key of LIMIT_KEYS in `percentile_of` (a name added to
one list and not to a Literal written out beside it was refused while the refusal listed it), the
messages list them from there, and the rule's words and columns cover the same keys."""

from __future__ import annotations

import sys
import types

from disagg_simpy.results.rules import CRITERION_COLUMNS, SLACK
from disagg_simpy.scenario import limits_slo
from disagg_simpy.scenario.limits_slo import _FIELD, LIMIT_KEYS, SLO_PRESETS, Slo
from disagg_simpy.scenario.loading import _EXPECT


def test_every_named_rule_and_limit_key_is_accepted_and_listed():
    for name in SLO_PRESETS:
        assert Slo.model_validate({"preset": name, "first_word_s": 1.0}).preset == name
    for key in LIMIT_KEYS:
        slo = Slo.model_validate({"criterion": "percentiles", "percentile": 99, key: 1.0, "percentile_of": {key: 50}})
        assert slo.percentile_of == {key: 50}
    assert all(k in _EXPECT["percentile_of"] and k in _EXPECT["slo"] for k in LIMIT_KEYS)
    assert set(_FIELD) == set(CRITERION_COLUMNS) == set(SLACK) == set(LIMIT_KEYS)


def test_a_rule_added_to_the_presets_is_accepted_without_another_list():
    """The schema's choices are built from SLO_PRESETS at import: the module run with one more
    rule accepts it (a Literal written out by hand beside the presets refused it)."""
    source = limits_slo.__file__
    text = open(source, encoding="utf-8").read()
    text = text.replace("PRESET_NAMES = tuple(SLO_PRESETS)",
                        'SLO_PRESETS["my-rule"] = {"first_word_s": 0.5, "mean_gap_ms": 40.0, "freeze_ms": None, '
                        '"source": "a test"}\nPRESET_NAMES = tuple(SLO_PRESETS)')
    text = text.replace("from .base", "from disagg_simpy.scenario.base").replace("from .limits ",
                                                                                "from disagg_simpy.scenario.limits ")
    module = types.ModuleType("limits_slo_with_one_more_rule")
    sys.modules[module.__name__] = module  # (pydantic resolves the annotations in the module's namespace)
    try:
        exec(compile(text, source, "exec"), module.__dict__)
        assert module.Slo.model_validate({"preset": "my-rule"}).first_word_s == 0.5
    finally:
        del sys.modules[module.__name__]

"""Every shipped composed preset refitted from AIConfigurator's tables gives the shipped numbers
back (about a minute on a quiet machine: a file of its own, so it runs beside the others).
Skipped, with one line, without the tables."""

from __future__ import annotations

import pytest

from disagg_simpy.costs import composed as C
from disagg_simpy.costs import operators as O
from disagg_simpy.costs.presets import from_table

PRESETS = from_table("composed_presets.json")

BY_NAME = {spec.name: spec for spec in C.specs()}


@pytest.mark.aiconfigurator
@pytest.mark.parametrize("name", list(PRESETS))
def test_a_refit_from_the_tables_gives_the_shipped_numbers(name):
    """E15's tile searched over the shipped one alone (each size is a refit; the generator searched
    them all, and the kept tile still earns its point over none)."""
    folder = O.data_folder()
    assert folder is not None
    tile = PRESETS[name]["attention_cost"].get("token_tile")
    assert C.refit(BY_NAME[name], folder, tiles=(tile,) if tile else ()) == PRESETS[name]

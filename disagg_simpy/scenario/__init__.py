"""The scenario stage: what to run (traffic, costs, limits, arrangements), read and validated.

`schema` holds the `Scenario` model, built from `base` (strict value types) and `arrangements`
(costs and the arrangements of GPUs); `options` checks what the options need of the workload's sizes (E4f) and a side's preset (TP);
`yaml_file` reads YAML safely and `loading` turns validation errors into one-line messages;
`limits` holds the documented sizes a run may take. docs/architecture.md lists every module.
"""

from __future__ import annotations

from . import loading, schema
from .loading import load_scenario
from .schema import Scenario

schema.set_validator(loading.validate)

__all__ = ["Scenario", "load_scenario"]

"""The scenario stage: what to run (traffic, costs, limits, arrangements), read and validated.

`schema` holds the pydantic models, `loading` reads YAML files and turns validation errors into
one-line messages, `limits` the documented sizes a run may take.
"""

from __future__ import annotations

from . import loading, schema
from .loading import load_scenario
from .schema import Scenario

schema.set_validator(loading.validate)

__all__ = ["Scenario", "load_scenario"]

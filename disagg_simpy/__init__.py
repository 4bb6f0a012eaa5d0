"""disagg_simpy: why and when an LLM service should split prompt reading from reply writing.

>>> from disagg_simpy import load_scenario, run
>>> result = run(load_scenario("scenarios/default.yaml"))
>>> result.summary            # one row per arrangement; also .requests, .iterations, .reads
>>> result.words("split-2-2") # every word's time, built on demand

Scenarios: `load_scenario(path)`, `Scenario.model_validate(mapping)` for one built in code (the
same keys as a file), and `scenario.with_overrides(**{"cost.iteration_ms": 8})` for a changed copy
(any key, dotted). Pictures: `disagg_simpy.plots.write_plots(result, folder)` writes summary.png
and a timeline per arrangement; `disagg_simpy.page.write_page(result, path)` one HTML page.

Docstrings cite the model's rules by id (M1-M7, D1-D10, options E1-E15, readings R1-R78):
docs/rules.md defines each, one page for all of them.

The public names are imported on first use, so `python -m disagg_simpy --help` does not pay
for pandas, SimPy and pydantic.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

__version__ = "0.1.0"

from .errors import InputError

if TYPE_CHECKING:
    from .api import RunResult, run
    from .scenario.loading import load_scenario
    from .scenario.schema import Scenario

#: public name -> module that defines it (imported when the name is first used)
_LAZY = {
    "RunResult": ".results.run_result",
    "run": ".api",
    "Scenario": ".scenario.schema",
    "load_scenario": ".scenario.loading",
}

__all__ = ["InputError", "RunResult", "Scenario", "__version__", "load_scenario", "run"]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # later lookups skip this hook
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

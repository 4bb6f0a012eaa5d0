"""disagg_simpy: why and when an LLM service should split prompt reading from reply writing.

>>> from disagg_simpy import load_scenario, run
>>> result = run(load_scenario("scenarios/default.yaml"))
>>> result.summary            # one row per arrangement
"""

__version__ = "0.1.0"

from .api import RunResult, run
from .errors import InputError
from .scenario import Scenario, load_scenario

__all__ = ["InputError", "RunResult", "Scenario", "__version__", "load_scenario", "run"]

"""The composed presets' numbers: `composed_presets.json`, written by
`python -m disagg_simpy.costs.composed` from AIConfigurator's per-operator timings (see
composed.py, operators.py); do not edit by hand. JSON, not a module: 131 presets of about 50
lines each."""

import json
from pathlib import Path
from typing import Any

PRESETS: dict[str, dict[str, Any]] = json.loads(Path(__file__).with_name("composed_presets.json").read_text())

"""One description of each thing in costs/ (review F16): the shipped tables of presets have one
reader (presets.py, whose `from_table` gives one table's presets as the package reads them), and
the GPU kinds and their memory one list (gpus.KINDS), which the other tables only name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from disagg_simpy.costs import catalog, composed, gpus, operators, presets


def test_the_tables_are_read_once_and_split_back_exactly():
    folder = Path(presets.__file__).parent
    parts = {file: presets.from_table(file) for file in presets.TABLES}
    for file, table in parts.items():
        assert table == json.loads((folder / file).read_text(encoding="utf-8")), file
    assert sum(map(len, parts.values())) == len(presets.PRESETS)
    with pytest.raises(ValueError, match="not one of the tables"):
        presets.from_table("composed_shipped.json")
    assert not (folder / "composed_shipped.py").exists()  # the second reader is gone


def test_every_gpu_named_by_a_table_is_a_kind_with_its_memory():
    assert set(operators.GPUS) <= set(gpus.NAMES)
    assert {gpu for gpu, _ in composed.PAIRS} <= set(gpus.NAMES)
    assert set(catalog.GPU_MEMORY) <= set(gpus.NAMES)
    for kind, memory in catalog.GPU_MEMORY.items():
        assert memory == gpus.KINDS[kind].memory_gib * catalog.GIB, kind

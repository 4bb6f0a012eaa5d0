"""The readers on generated files in each public trace's real format (no copy of the public
traces is needed): every arrival to the nanosecond, every length, in file order."""

from __future__ import annotations

import pytest
import trace_files

from disagg_simpy.workload.traces import read_trace

FORMATS = [("azure", trace_files.azure, "t.csv"), ("mooncake", trace_files.mooncake, "t.jsonl"),
           ("lengths", trace_files.lengths, "t.csv")]


@pytest.mark.parametrize(("fmt", "make", "name"), FORMATS, ids=[f[0] for f in FORMATS])
def test_reader_takes_the_real_format_exactly(tmp_path, fmt, make, name):
    generated = make()
    path = tmp_path / name
    path.write_text(generated.text)
    table = read_trace(path, fmt)
    assert table["n_prompt_tokens"].tolist() == generated.n_prompt_tokens
    assert table["n_reply_words"].tolist() == generated.n_reply_words
    if generated.arrived_at_ns is None:
        assert "arrived_at_ns" not in table
    else:
        assert table["arrived_at_ns"].tolist() == generated.arrived_at_ns


def test_generated_files_hold_the_quirks_they_stand_for():
    """The files are worth testing on only if they carry the real formats' awkward parts."""
    azure = trace_files.azure()
    stamps = [line.split(",")[0] for line in azure.text.splitlines()[1:]]
    assert all(len(s.rsplit(".", 1)[1]) == 7 for s in stamps)  # seven fractional digits
    assert stamps[0].startswith("2023-11-16") and stamps[-1].startswith("2023-11-17")  # crosses midnight
    gaps = {b - a for a, b in zip(azure.arrived_at_ns, azure.arrived_at_ns[1:])}
    assert {0, 100, 700} <= gaps  # ties and gaps float seconds since 1970 cannot hold
    moon = trace_files.mooncake()
    steps = {b - a for a, b in zip(moon.arrived_at_ns, moon.arrived_at_ns[1:])} - {0}
    assert steps and all(2_997_000_000 <= s <= 3_003_000_000 for s in steps)
    assert len(set(moon.arrived_at_ns)) < len(moon.arrived_at_ns) / 3  # many requests per tick

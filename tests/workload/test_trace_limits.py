"""Bad traces are refused in time linear in their size, with a short, escaped one-line message;
a trace's span never sets the memory its statistics or picture take."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from helpers import ROOT

from disagg_simpy.cli import main
from disagg_simpy.cli.common import MAX_MESSAGE_CHARS, one_line
from disagg_simpy.errors import InputError
from disagg_simpy.scenario.limits import MAX_LINE_BYTES
from disagg_simpy.workload import traces
from disagg_simpy.workload.trace_stats import describe_trace


def refused(tmp_path, capsys, argv) -> str:
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


# -- refused in time linear in the size, with short messages ---------------------------------------


def test_a_very_long_line_is_refused_before_any_parsing(tmp_path, monkeypatch):
    """An 80,000-name header (550 KB) took 80 s to refuse; now the line-length scan
    refuses it before the parser sees a single field."""

    def no_parsing(*args, **kwargs):
        raise AssertionError("parsed a line longer than MAX_LINE_BYTES")

    monkeypatch.setattr(traces, "_csv_columns", no_parsing)
    monkeypatch.setattr(traces, "_jsonl_fields", no_parsing)
    header = ",".join(f"c{i}" for i in range(80_000))
    array = "[" + ",".join(map(str, range(200_000))) + "]"  # a 1.3 MB one-line JSON array
    for text, fmt in ((header + "\n1,2,3\n", "csv"), (array + "\n", "csv"), (array + "\n", "mooncake"),
                      ("arrived_at_s,n_prompt_tokens,n_reply_words\n0,1,1\n" + "9" * (MAX_LINE_BYTES + 1), "csv")):
        path = tmp_path / "t.txt"
        path.write_text(text)
        with pytest.raises(InputError, match=r"line: got a line of [\d,]+ bytes, expected lines of at most 65,536"):
            traces.read_trace(path, fmt)


def test_many_columns_under_the_line_limit_are_refused_or_ignored_with_a_short_message(tmp_path):
    names = [f"c{i % 3000}" for i in range(6000)]  # every name twice: duplicated
    path = tmp_path / "t.csv"
    path.write_text(",".join(names + ["arrived_at_s", "n_prompt_tokens", "n_reply_words"]) + "\n")
    with pytest.raises(InputError) as err:
        traces.read_trace(path)
    assert "and 2,995 more" in str(err.value) and len(str(err.value)) < 600


@pytest.mark.parametrize("content, fragment", [
    (b"\0" * 1_000_000, "t.csv:1: text: got the byte 0x00 (NUL), expected text"),
    (b"arrived_at_s,n_prompt_tokens,n_reply_words\n0,1,1\n1,1,\0\n", "t.csv:3: text: got the byte 0x00"),
    (b"arrived_at_s,n_prompt_tokens,n_reply_words\n0," + b"7" * 5000 + b",1\n", "(5,000 characters), expected a value of at most 100"),
    (b"\x1b[2J" * 1000 + b",\n", "\\x1b[2J"),  # a terminal escape is shown escaped, never sent raw
], ids=["nul-file", "nul-byte", "long-cell", "escape"])
def test_bad_bytes_in_a_trace_get_a_short_escaped_line(tmp_path, capsys, content, fragment):
    (tmp_path / "t.csv").write_bytes(content)
    err = refused(tmp_path, capsys, ["describe", tmp_path / "t.csv"])
    assert fragment in err and len(err) < 400 and "\0" not in err and "\x1b" not in err


def test_every_message_is_one_printable_line_of_bounded_length():
    text = one_line("a\nb\0c\x1b" + "x" * 5_000_000)
    assert text.isprintable() and len("error: " + text) <= MAX_MESSAGE_CHARS  # (as printed: docs/guarantees.md)
    assert text.startswith("a b\\x00c\\x1b") and "characters left out" in text


# -- a trace's span never sets the memory taken ---------------------------------------------------

_LIMITED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
from disagg_simpy.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_AS"), reason="needs RLIMIT_AS (Linux) to bound the process's memory")
def test_describe_and_its_picture_of_arrivals_1e9_s_apart_fit_in_2_gb_in_a_real_process(tmp_path):
    """One bin per second over 1e9 s took 8 GB for the statistics and 24 GB for the
    picture; both now bin by the data (a bounded number of bins). Run under a 2 GB address
    space limit, so a regression fails here instead of taking the machine's memory."""
    (tmp_path / "t.csv").write_text("arrived_at_s,n_prompt_tokens,n_reply_words\n0,10,5\n1e9,10,5\n")
    limit = 2 << 30
    proc = subprocess.run([sys.executable, "-c", _LIMITED, str(limit), "describe", "t.csv", "--plot", "p.png"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert "busiest full minute                      0.02 req/s (of 16666666 full minutes)" in proc.stdout
    assert (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")


def test_busiest_second_and_minute_counted_from_the_rows():
    minute = 60 * 10**9 * 10**6  # a whole minute, 1e6 minutes in
    t_ns = np.array([0, minute, minute + 1, minute + 59 * 10**9, 10**18], dtype=np.int64)
    stats = describe_trace(pd.DataFrame({"arrived_at_ns": t_ns, "n_prompt_tokens": 1, "n_reply_words": 1}))
    assert stats["busiest_second_per_s"] == 2 and stats["busiest_minute_per_s"] == 3 / 60

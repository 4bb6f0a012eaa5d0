"""Trace reading, arrival shaping, clipping, made-up arrivals and statistics (the public traces
themselves: workload/test_public_traces.py)."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from helpers import ROOT, write_scenario
from hypothesis import given, settings
from hypothesis import strategies as st

from disagg_simpy.cli import main
from disagg_simpy.errors import InputError
from disagg_simpy.plots.trace import plot_description
from disagg_simpy.workload.shaping import clip_lengths, lengths_arrivals, sample_lengths, shape_arrivals
from disagg_simpy.workload.trace_stats import describe_trace, format_description
from disagg_simpy.workload.traces import FORMATS, read_trace

DATA = ROOT / "tests" / "data"
BAD = DATA / "bad"
S = 1_000_000_000


def test_csv_sample_loads_with_exact_ns_as_written():
    df = read_trace(DATA / "sample.csv", "csv")
    assert list(df.columns) == ["arrived_at_ns", "n_prompt_tokens", "n_reply_words"]
    assert all(dtype == np.int64 for dtype in df.dtypes)
    assert df["arrived_at_ns"].tolist() == [10_500_000_000, 10_500_000_000, 11 * S, 12_250_000_000, 13_000_000_001]
    assert df["n_prompt_tokens"].tolist() == [100, 200, 300, 50, 60]
    assert df["n_reply_words"].tolist() == [20, 30, 40, 5, 6]


def test_azure_sample_parses_exactly_to_the_ns():
    df = read_trace(DATA / "sample_azure.csv", "azure")
    assert df["arrived_at_ns"].tolist() == [
        0,
        52_000_000,  # 04.0319600 - 03.9799600
        52_000_100,  # 100 ns later: float seconds since 1970 cannot tell these apart
        56_020_039_900,  # 18:17:59.9999999 - 18:17:03.9799600
        56_020_040_000,
        (5 * 3600 + 42 * 60 + 56) * S + 20_040_100,  # next day 00:00:00.0000001
    ]
    assert df["n_prompt_tokens"].tolist() == [4808, 3180, 100, 7, 1, 5]
    assert df["n_reply_words"].tolist() == [10, 8, 1, 7, 2, 5]


def test_mooncake_sample_loads_ms_as_ns_and_ignores_other_keys():
    df = read_trace(DATA / "sample_mooncake.jsonl", "mooncake")
    assert df["arrived_at_ns"].tolist() == [0, 0, 3 * S, 3 * S, 6_001_000_000]
    assert df["n_prompt_tokens"].tolist() == [6758, 7322, 891, 1024, 5]
    assert df["n_reply_words"].tolist() == [500, 490, 1, 2000, 7]


def test_lengths_sample_has_no_arrivals():
    df = read_trace(DATA / "sample_lengths.csv", "lengths")
    assert list(df.columns) == ["n_prompt_tokens", "n_reply_words"]
    assert df["n_prompt_tokens"].tolist() == [74, 290, 1, 8141, 1730]
    assert df["n_reply_words"].tolist() == [918, 905, 2, 8, 415]


MALFORMED = [  # (file, format, line number or None, words the message must contain)
    ("no_such_file.csv", "csv", None, "no such file"),
    ("", "csv", None, "directory"),
    ("empty.csv", "csv", None, "empty file"),
    ("blank.jsonl", "mooncake", None, "empty file"),
    ("header_only.csv", "csv", 2, "no data rows"),
    ("missing_column.csv", "csv", 1, "missing n_reply_words"),
    ("non_numeric.csv", "csv", 4, "n_prompt_tokens: got 'abc'"),
    ("empty_cell.csv", "csv", 3, "n_prompt_tokens: got ''"),
    ("ragged.csv", "csv", 5, "4 fields"),
    ("zero_count.csv", "csv", 3, "n_reply_words: got 0"),
    ("negative_count.csv", "csv", 6, "n_prompt_tokens: got -5"),
    ("fractional_count.csv", "csv", 4, "n_reply_words: got 2.5"),
    ("backwards.csv", "csv", 5, "1.5 after 2.0 on line 4"),
    ("negative_arrival.csv", "csv", 2, "arrived_at_s: got -1.0"),
    ("non_numeric_arrival.csv", "csv", 3, "arrived_at_s: got 'soon'"),
    ("blank_lines_then_bad.csv", "csv", 6, "n_prompt_tokens: got 0"),
    ("earliest_wins.csv", "csv", 4, "got 7.5"),
    ("backwards_before_bad_count.csv", "csv", 4, "never decrease"),
    ("not_utf8.csv", "csv", 3, "UTF-8"),
    ("ragged_first_row.csv", "csv", 2, "2 fields"),
    ("ragged_after_bad_count.csv", "csv", 3, "n_reply_words: got 0"),
    ("azure_missing_column.csv", "azure", 1, "missing GeneratedTokens"),
    ("azure_bad_timestamp.csv", "azure", 4, "TIMESTAMP: got '2023-11-16 25:17:04.0319600'"),
    ("azure_backwards.csv", "azure", 3, "never decrease"),
    ("azure_zero_tokens.csv", "azure", 5, "ContextTokens: got 0"),
    ("lengths_missing_column.csv", "lengths", 1, "missing num_decode_tokens"),
    ("lengths_negative.csv", "lengths", 3, "num_decode_tokens: got -905"),
    ("mooncake_bad_json.jsonl", "mooncake", 3, "Expecting value at column 55"),
    ("mooncake_missing_field.jsonl", "mooncake", 2, "output_length: got a line without it"),
    ("mooncake_backwards.jsonl", "mooncake", 4, "4 after 5 on line 2"),
    ("mooncake_string_value.jsonl", "mooncake", 2, 'input_length: got "12", expected a number'),
    ("mooncake_fractional.jsonl", "mooncake", 3, "output_length: got 2.5"),
    ("mooncake_not_object.jsonl", "mooncake", 1, "JSON object"),
    ("mooncake_bad_json_after_bad_count.jsonl", "mooncake", 2, "input_length: got -7"),
    ("mooncake_negative_timestamp.jsonl", "mooncake", 2, "timestamp: got -3"),
    ("sample.csv", "parquet", None, "one of azure, csv, lengths, mooncake"),
]


@pytest.mark.parametrize(("name", "fmt", "line", "words"), MALFORMED, ids=[m[0] or "directory" for m in MALFORMED])
def test_malformed_input_gives_one_line_naming_file_and_line(name, fmt, line, words):
    path = (DATA if name == "sample.csv" else BAD) / name
    with pytest.raises(InputError) as caught:
        read_trace(path, fmt)
    message = str(caught.value)
    assert "\n" not in message and "got " in message and "expected " in message
    assert message.startswith(f"{path}:{line}: " if line else f"{path}: ")
    assert words in message


def test_known_formats():
    assert FORMATS == ("azure", "csv", "lengths", "mooncake")


T = np.array([0, 1, 1, 1, 3, 5, 5]) * S


def test_window_keeps_start_inclusive_end_exclusive_and_recounts_from_start():
    mask, t, info = shape_arrivals(T, start_s=1, duration_s=3)
    assert mask.tolist() == [False, True, True, True, True, False, False]
    assert t.tolist() == [0, 0, 0, 2 * S]
    assert info["n_rows_kept"] == 4 and info["n_rows_in"] == 7 and info["time_scale"] == 1.0


def test_spread_ties_moves_kth_of_m_to_fraction_of_gap_and_leaves_last_group():
    mask, t, info = shape_arrivals(T, spread_ties=True)
    assert mask.all()
    assert t.tolist() == [0, 1 * S, 1_666_666_667, 2_333_333_333, 3 * S, 5 * S, 5 * S]
    assert info["n_rows_spread"] == 2


def test_time_scale_two_replays_twice_as_fast():
    _, t, _ = shape_arrivals(T, time_scale=2.0)
    assert t.tolist() == [0, S // 2, S // 2, S // 2, 3 * S // 2, 5 * S // 2, 5 * S // 2]


def test_rate_without_window_uses_first_to_last_arrival():
    _, t, info = shape_arrivals(T, rate_per_s=2.8)  # 7 rows over 5 s is 1.4/s: twice as fast
    assert info["time_scale"] == pytest.approx(2.0) and info["rate_window_s"] == 5.0
    assert t.tolist() == shape_arrivals(T, time_scale=2.0)[1].tolist()


def test_rate_with_window_uses_duration():
    _, t, info = shape_arrivals(T, start_s=1, duration_s=3, rate_per_s=4)  # 4 rows in 3 s -> 4/s
    assert info["time_scale"] == pytest.approx(3.0)
    assert t.tolist() == [0, 0, 0, 666_666_667]


def test_window_then_spread_then_scale_in_that_order():
    _, t, info = shape_arrivals(T, start_s=1, duration_s=4, spread_ties=True, time_scale=2)
    assert t.tolist() == [0, 333_333_333, 666_666_667, S]
    assert info["window_start_s"] == 1 and info["window_duration_s"] == 4.0 and info["spread_ties"]


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"time_scale": 2, "rate_per_s": 1}, "at most one of time_scale and rate_per_s"),
    ({"time_scale": 0}, "time_scale: got 0"),
    ({"time_scale": -1.5}, "time_scale: got -1.5"),
    ({"rate_per_s": 0}, "rate_per_s: got 0"),
    ({"start_s": 100}, "no arrivals in [100 s, end)"),
    ({"start_s": 1.5, "duration_s": 1}, "no arrivals in [1.5 s, 2.5 s)"),
    ({"start_s": -1}, "start_s: got -1"),
    ({"duration_s": 0}, "duration_s: got 0"),
    ({"start_s": 5, "rate_per_s": 3}, "all at one time"),
])
def test_shape_errors(kwargs, words):
    with pytest.raises(InputError, match=re.escape(words)) as caught:
        shape_arrivals(T, source="trace.csv", **kwargs)
    assert str(caught.value).startswith("trace.csv: ")


def test_shape_refuses_lengths_only_traces():
    with pytest.raises(InputError, match="lengths-only"):
        shape_arrivals(None)


def test_clip_lengths_counts_clipped_rows_and_leaves_input_alone():
    df = pd.DataFrame({"n_prompt_tokens": [10, 200, 300], "n_reply_words": [5, 50, 500]})
    out, info = clip_lengths(df, reply_words_max=50, prompt_tokens_max=100)
    assert out["n_prompt_tokens"].tolist() == [10, 100, 100]
    assert out["n_reply_words"].tolist() == [5, 50, 50]
    assert info == {"prompt_tokens_max": 100, "n_prompt_tokens_clipped": 2,
                    "reply_words_max": 50, "n_reply_words_clipped": 1}
    assert df["n_reply_words"].tolist() == [5, 50, 500]
    assert clip_lengths(df)[1]["n_reply_words_clipped"] == 0
    with pytest.raises(InputError, match="reply_words_max: got 0"):
        clip_lengths(df, reply_words_max=0)


def test_lengths_arrivals_poisson_matches_cumsum_of_exponential_gaps():
    t = lengths_arrivals(5, 4.0, None, np.random.default_rng(7))
    expected = np.rint(np.cumsum(np.random.default_rng(7).exponential(0.25, 5)) * S).astype(np.int64)
    assert t.dtype == np.int64 and t.tolist() == expected.tolist() and t[0] > 0
    assert lengths_arrivals(5, 4.0, 1.0, np.random.default_rng(7)).tolist() == expected.tolist()


@pytest.mark.parametrize("cv", [0.5, 3.0])
def test_lengths_arrivals_gamma_has_the_asked_rate_and_cv(cv):
    t = lengths_arrivals(20_000, 4.0, cv, np.random.default_rng(1))
    gaps = np.diff(t) / S
    assert gaps.mean() == pytest.approx(0.25, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.05)


def test_lengths_arrivals_rejects_bad_rate():
    with pytest.raises(InputError, match="rate_per_s: got 0"):
        lengths_arrivals(5, 0, None, np.random.default_rng(0))


def test_sample_lengths_keeps_pairs_and_draws_every_row():
    table = read_trace(DATA / "sample_lengths.csv", "lengths")
    prompt, reply = sample_lengths(table, 1000, np.random.default_rng(3))
    pairs = set(zip(table["n_prompt_tokens"], table["n_reply_words"]))
    assert set(zip(prompt.tolist(), reply.tolist())) == pairs


def test_describe_sample_by_hand():
    stats = describe_trace(read_trace(DATA / "sample.csv"))
    gaps = np.array([0, 0.5, 1.25, 0.750000001])
    assert stats["n_requests"] == 5
    assert stats["duration_s"] == pytest.approx(2.500000001, abs=1e-12)
    assert stats["mean_rate_per_s"] == pytest.approx(5 / 2.500000001)
    assert stats["interarrival_cv"] == pytest.approx(gaps.std() / gaps.mean())
    assert stats["tied_arrivals_pct"] == 40.0
    assert stats["busiest_second_per_s"] == 3
    assert stats["busiest_minute_per_s"] is None and stats["n_full_minutes"] == 0
    assert stats["prompt_tokens_p50"] == 100 and stats["prompt_tokens_p90"] == pytest.approx(260.0)
    assert (stats["reply_words_min"], stats["reply_words_max"], stats["reply_words_mean"]) == (5, 40, 20.2)
    text = format_description(stats)
    assert "requests" in text and "p99" in text and "40.0 %" in text


def test_plot_description_writes_a_png_atomically(tmp_path):
    out = tmp_path / "trace.png"
    plot_description(read_trace(DATA / "sample_mooncake.jsonl", "mooncake"), out)
    plot_description(read_trace(DATA / "sample_lengths.csv", "lengths"), tmp_path / "lengths.png")
    assert out.read_bytes().startswith(b"\x89PNG") and sorted(p.name for p in tmp_path.iterdir()) == [
        "lengths.png", "trace.png"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=40))
def test_spread_ties_keeps_order_and_the_last_group(seconds):
    t = np.sort(np.array(seconds, dtype=np.int64)) * S
    _, spread, _ = shape_arrivals(t, spread_ties=True)
    assert np.all(np.diff(spread) >= 0)
    assert np.all(spread >= t) and np.all(spread[t == t[-1]] == t[-1])
    assert np.all(spread[1:][t[1:] != t[:-1]] == t[1:][t[1:] != t[:-1]])


def test_csv_arrivals_are_as_written_and_other_formats_count_from_the_first_row(tmp_path):
    (tmp_path / "t.csv").write_text("arrived_at_s,n_prompt_tokens,n_reply_words\n2.5,10,3\n4,10,3\n")
    assert read_trace(tmp_path / "t.csv")["arrived_at_ns"].tolist() == [2_500_000_000, 4_000_000_000]
    (tmp_path / "m.jsonl").write_text('{"timestamp": 2500, "input_length": 1, "output_length": 1}\n'
                                      '{"timestamp": 4000, "input_length": 1, "output_length": 1}\n')
    assert read_trace(tmp_path / "m.jsonl", "mooncake")["arrived_at_ns"].tolist() == [0, 1_500_000_000]


def test_unknown_columns_are_ignored_in_every_format_and_named_on_stderr(tmp_path, capsys):
    (tmp_path / "a.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens,extra\n"
                                    "2023-11-16 18:17:03.9799600,10,3,x\n")
    assert read_trace(tmp_path / "a.csv", "azure").attrs["ignored_columns"] == ["extra"]
    (tmp_path / "m.jsonl").write_text('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1], '
                                      '"user": 7}\n')
    # (hash_ids is the mooncake format's own, read by the prefix cache: never called unused; issue 37 item 18)
    assert read_trace(tmp_path / "m.jsonl", "mooncake").attrs["ignored_columns"] == ["user"]
    path = write_scenario(tmp_path, [(0.0, 100, 3), (0.5, 50, 2)])
    (tmp_path / "micro.csv").write_text("user,arrived_at_s,n_prompt_tokens,n_reply_words\n"
                                        "alice,0.0,100,3\nbob,0.5,50,2\n")
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ignored column(s) 'user'" in err
    assert json.loads((tmp_path / "out" / "run.json").read_text())["workload"]["ignored_columns"] == ["user"]
    assert main(["describe", str(tmp_path / "micro.csv")]) == 0
    assert "ignored column(s) 'user'" in capsys.readouterr().err

"""Hand-built micro scenarios on the model's boundaries, with exact nanosecond times.

Each test holds a rule that a plausible one-line slip breaks while every statistic still
looks right: the order in which one iteration's first words are handed out (D5, D2),
arrivals rounded (not truncated) to the nanosecond (D10), and limits compared with 1 ns of
slack (D8): a gap of exactly 250 ms is not a freeze, a first word exactly 2 s after arrival is
on time. Times are whole ns computed here from M1 (an iteration lasts iteration_ms + per_reply_ms
per reply written + per_prompt_token_ms per prompt token read; a ship kv_ship_ms_per_token per
token) and compared with `==`: the frames hold ns / 1e9, which `seconds` reproduces exactly.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from helpers import request, run_rows, scenario_text, seconds

from disagg_simpy import load_scenario, run

MS = 1_000_000  # ns
SPLIT_1_2 = [{"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2}]


def iteration_ns(replies: int, tokens: int, extra_ns: int = 0) -> int:
    """M1 with the default costs (12 ms, 0.4 ms a reply, 0.05 ms a token), plus `extra_ns` on
    the fixed part when a test sets iteration_ms = 12 ms + extra_ns."""
    return 12 * MS + extra_ns + 400_000 * replies + 50_000 * tokens


def ship_ns(tokens: int) -> int:
    return 10_000 * tokens  # M4: 0.01 ms a token


def words_at(result, arrangement, request_id) -> list[float]:
    w = result.words(arrangement)
    return w.loc[w.request_id == request_id, "at_s"].tolist()


# --- D5 + D2: first words finished in one iteration are handed out in arrival order ----------

def test_first_words_of_one_iteration_go_out_in_arrival_order_to_the_least_recent_writer(tmp_path):
    """1 reading GPU (0) + 2 writing GPUs (1, 2). R0, R1, R2 set the writers' records up so
    that when P and Q (same instant, P first by id) finish reading in one iteration, both
    writers hold one reply and GPU 2's last assignment is the older: P must get GPU 2 (D2),
    then Q GPU 1 (fewer replies). Handing out in reverse order (Q first) or breaking the tie by
    GPU number gives P GPU 1 and Q GPU 2, and later finish times."""
    rows = [
        (0.0, 100, 2),   # R0 -> GPU 1 (never assigned, lowest number): assignment 0
        (0.1, 100, 40),  # R1 -> GPU 2 (never assigned beats assigned): assignment 1; still writing
        (0.2, 100, 40),  # R2 -> GPU 1 (0 replies: R0 is done; GPU 2 has R1): assignment 2
        (0.3, 100, 2),   # P (id 3)
        (0.3, 200, 2),   # Q (id 4), same instant: both wait for the GPU's next start (D5)
    ]
    res = run_rows(tmp_path, rows, SPLIT_1_2)
    # the reading GPU is idle at each arrival: a 100-token read lasts 17 ms, a ship 1 ms
    read = iteration_ns(0, 100)
    r0_joined, r1_joined, r2_joined = (t * MS + read + ship_ns(100) for t in (0, 100, 200))
    assert r0_joined == 18 * MS
    assert [request(res, "split", i).writing_gpu for i in (0, 1, 2)] == [1, 2, 1]
    # R0's one later word ends GPU 1's only iteration: 18 + 12.4 ms
    assert request(res, "split", 0).finished_at_s == seconds(r0_joined + iteration_ns(1, 0))

    # P and Q are read together from 300 ms: 12 + 0.05 * 300 = 27 ms; both first words at 327 ms
    first = 300 * MS + iteration_ns(0, 300)
    # at 327 ms GPU 1 has R2 and GPU 2 has R1 (a tie); GPU 2 was assigned longest ago (1 < 2)
    p, q = request(res, "split", 3), request(res, "split", 4)
    assert (p.writing_gpu, q.writing_gpu) == (2, 1)
    assert p.first_word_at_s == q.first_word_at_s == seconds(first)
    p_joined, q_joined = first + ship_ns(100), first + ship_ns(200)  # 328 and 329 ms
    assert (p.joined_at_s, q.joined_at_s) == (seconds(p_joined), seconds(q_joined))

    # Each writer runs back-to-back 12.4 ms iterations (one reply) from its reply's join:
    # GPU 2 from 118 ms: 17 of them end at 328.8 ms, after P lands (328 ms), so P joins the
    # iteration starting then, written beside R1: 12.8 ms -> 341.6 ms.
    gpu2_start = r1_joined + 17 * iteration_ns(1, 0)
    assert r1_joined + 16 * iteration_ns(1, 0) < p_joined < gpu2_start
    assert p.finished_at_s == seconds(gpu2_start + iteration_ns(2, 0))
    # GPU 1 from 218 ms: 9 iterations end at 329.6 ms, after Q lands (329 ms): Q ends 342.4 ms.
    gpu1_start = r2_joined + 9 * iteration_ns(1, 0)
    assert r2_joined + 8 * iteration_ns(1, 0) < q_joined < gpu1_start
    assert q.finished_at_s == seconds(gpu1_start + iteration_ns(2, 0))
    assert words_at(res, "split", 3) == [seconds(first), seconds(gpu2_start + iteration_ns(2, 0))]
    # (reversed, Q would wait on GPU 2 for the iteration after 328.8 ms and end at 354 ms)


# --- D10: arrivals are rounded to the nearest nanosecond, never truncated ---------------------

# Decimal times whose float product with 1e9 (or quotient by 1e-9) lands just below the whole
# ns: truncating would put them 1 ns early. 0.3 s is the classic example (0.3 * 1e9 happens to
# be exact in float64, 0.3 / 1e-9 is not); 1.001 * 1e9 = 1000999999.9999999; 1.101 and 0.35
# (first row at 0.1 s: a csv trace's times are taken as written) fall short too.
ROUNDING_TRACES = {
    "from-zero": ["0.0", "0.3", "1.001", "1.057"],
    "from-0.1": ["0.1", "0.35", "1.101", "1.103"],
}


@pytest.mark.parametrize("times", ROUNDING_TRACES.values(), ids=ROUNDING_TRACES)
def test_decimal_trace_arrivals_round_to_the_nearest_ns(tmp_path, times):
    # times as written; each request finds the GPU idle (rows >= 17 ms apart except
    # 1.101/1.103, where the second waits for the first's read)
    res = run_rows(tmp_path, [(t, 100, 1) for t in times])
    exact = [int(Decimal(t) * 10**9) for t in times]
    assert res.requests.arrived_at_s.tolist() == [seconds(ns) for ns in exact]
    read = iteration_ns(0, 100)  # 17 ms: the read writes the only word
    done, want = 0, []
    for ns in exact:
        done = max(done, ns) + read
        want.append(done)
    assert res.requests.first_word_at_s.tolist() == [seconds(ns) for ns in want]
    assert res.requests.first_word_s.tolist() == [seconds(w - a) for w, a in zip(want, exact)]


def test_mooncake_millisecond_arrivals_round_to_the_nearest_ns(tmp_path):
    # 512.3 ms * 1e6 = 512299999.99999994 in float: truncated it would arrive 1 ns early
    lines = [{"timestamp": ms, "input_length": 100, "output_length": 1} for ms in (0, 300, 512.3)]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "m.yaml").write_text(scenario_text("m", {"trace": "m.jsonl", "format": "mooncake"}))
    res = run(load_scenario(tmp_path / "m.yaml"))
    arrived = [0, 300 * MS, 512_300_000]
    assert res.requests.arrived_at_s.tolist() == [seconds(ns) for ns in arrived]
    assert res.requests.first_word_at_s.tolist() == [seconds(ns + iteration_ns(0, 100)) for ns in arrived]


@pytest.mark.parametrize(
    ("window", "measured"),
    [
        # warmup_s = 1.001 s is 1,001,000,000 ns: 1 ns earlier is before it, 1.001 is not
        ({"warmup_s": 1.001}, [2, 3]),
        # measure_s = 1.001 s: 1 ns earlier is inside, 1.001 itself is not (the window is [a, b))
        ({"measure_s": 1.001}, [0, 1]),
    ],
)
def test_the_measured_window_rounds_its_bounds_to_the_nearest_ns(tmp_path, window, measured):
    # the same rounding turns warmup_s and measure_s into ns (a truncated 1.001 s would be
    # 1,000,999,999 ns and take in, or leave out, the request 1 ns before the bound)
    rows = [("0.0", 100, 1), ("1.000999999", 100, 1), ("1.001", 100, 1), ("1.5", 100, 1)]
    res = run_rows(tmp_path, rows, workload=window)
    assert res.requests.request_id.tolist() == measured


# --- D8: limits are compared with 1 ns of slack ------------------------------------------------

# extra ns on the fixed cost of every iteration -> the long gap is 250 ms + extra:
# exactly at the limit and 1 ns over are not freezes (slack), 2 ns over is.
FREEZE_CASES = [(0, False), (1, False), (2, True)]


def _iteration_ms(extra_ns: int) -> float:
    return float(Decimal(12) + Decimal(extra_ns) / 10**6)  # 12.000002 is exactly 12,000,002 ns


@pytest.mark.parametrize(("extra_ns", "freezes"), FREEZE_CASES)
@pytest.mark.parametrize("which", ["first gap", "later gap"])
def test_a_gap_of_exactly_the_freeze_limit_is_not_a_freeze(tmp_path, which, extra_ns, freezes):
    # A (100 tokens, 10 words) alone on one GPU; B (4752 tokens, 1 word) is read in the
    # iteration that also writes one of A's words: 12 + 0.4 + 0.05 * 4752 = 250 ms exactly.
    # Arriving at 1 ms, B joins the iteration after A's read (A's first gap: word 1 -> 2);
    # arriving at 20 ms, after that iteration started at 17 ms, the next one (word 2 -> 3).
    b_at = {"first gap": 0.001, "later gap": 0.020}[which]
    res = run_rows(
        tmp_path, [(0.0, 100, 10), (b_at, 4752, 1)], cost={"iteration_ms": _iteration_ms(extra_ns)}
    )
    long_gap = iteration_ns(1, 4752, extra_ns)
    assert long_gap == 250 * MS + extra_ns
    short = iteration_ns(1, 0, extra_ns)  # 12.4 ms + extra: A's other gaps
    t = [iteration_ns(0, 100, extra_ns)]  # word 1: A's read
    for k in range(2, 11):
        long_one = (which == "first gap" and k == 2) or (which == "later gap" and k == 3)
        t.append(t[-1] + (long_gap if long_one else short))
    assert words_at(res, "same", 0) == [seconds(x) for x in t]
    a = request(res, "same", 0)
    assert a.max_gap_ms == long_gap / 1e6
    assert a.n_freezes == int(freezes)
    # mean gap (250 + 8 * 12.4) / 9 = 38.8 ms and word 1 at 17 ms: only a freeze makes A late
    assert a.mean_gap_ms < 50
    assert bool(a.on_time) is not freezes
    summary = res.summary.iloc[0]
    assert summary.on_time_pct == (50.0 if freezes else 100.0)  # B (one word) is on time


@pytest.mark.parametrize(("extra_ns", "late"), FREEZE_CASES)
def test_a_first_word_exactly_at_the_limit_is_on_time(tmp_path, extra_ns, late):
    # B arrives at 0.5 s on an idle GPU; its read of 39,760 tokens lasts
    # 12 ms + extra + 0.05 ms * 39,760 = 2 s + extra, and writes its only word.
    res = run_rows(
        tmp_path, [(0.0, 100, 1), (0.5, 39_760, 1)], cost={"iteration_ms": _iteration_ms(extra_ns)}
    )
    wait = iteration_ns(0, 39_760, extra_ns)
    assert wait == 2_000 * MS + extra_ns
    b = request(res, "same", 1)
    assert b.first_word_at_s == seconds(500 * MS + wait)
    assert b.first_word_s == seconds(wait)
    assert bool(b.on_time) is not late


@pytest.mark.parametrize(("over_ns", "late"), FREEZE_CASES)
def test_the_mean_gap_limit_has_1_ns_of_slack_per_gap(tmp_path, over_ns, late):
    # A 3-word reply alone on one GPU: word 1 ends its read, words 2 and 3 each end an
    # iteration of one reply (12.4 ms), so both gaps are 12.4 ms. With the limit set to
    # 12.4 ms - `over_ns`, each gap is limit + over_ns: the mean is over the limit only above
    # limit + 1 ns, that is when the total of 2 gaps is above 2 x (limit + 1 ns). (Slack added
    # once to the total would make gaps of limit + 1 ns late.)
    gap = iteration_ns(1, 0)
    limit_ns = gap - over_ns
    res = run_rows(tmp_path, [(0.0, 100, 3)], slo={"mean_gap_ms": float(Decimal(limit_ns) / 10**6)})
    first = iteration_ns(0, 100)
    assert words_at(res, "same", 0) == [seconds(first), seconds(first + gap), seconds(first + 2 * gap)]
    a = request(res, "same", 0)
    assert a.first_word_s == seconds(first) and a.n_freezes == 0  # only the mean gap can be late
    assert bool(a.on_time) is not late
    assert res.summary.iloc[0].late_mean_gap_pct == (100.0 if late else 0.0)

"""E12 by hand, in exact ns: a writing GPU that drains then warms up, a reading GPU that
finishes its read then warms up, and what the router does meanwhile (docs/rules.md#e12).

Costs are the explainer's (12 ms + 0.4 ms per reply + 0.05 ms per prompt token; ships 0.01 ms
per token), so each time below is worked from M1-M4."""

from __future__ import annotations

from helpers import write_scenario
from test_reference import compare

from disagg_simpy import load_scenario
from disagg_simpy.api import run_arrangement
from disagg_simpy.workload.stream import make_requests

MS = 1_000_000


def run_one(tmp_path, rows, arrangement):
    path = write_scenario(tmp_path, rows, [arrangement])
    scenario = load_scenario(path)
    rec = run_arrangement(scenario, scenario.arrangements[0], make_requests(scenario))
    compare(path)  # and the reference model agrees to the ns
    return rec.requests, rec.switches


def test_a_writing_gpu_drains_its_reply_then_warms_up(tmp_path):
    """1 reading GPU (0), 2 writing (1, 2); at 25 ms the schedule asks for 2 reading GPUs.
    Requests 0 and 1 are read together (0-22 ms) and ship to GPUs 1 and 2 (joined at 23 ms).
    Both have one reply: the tie goes to the lower number, GPU 1, which keeps writing request 0
    (words at 35.4, 47.8, 60.2, 72.6 ms): drained at 72.6, serving as a reading GPU at 82.6."""
    rows = [("0", 100, 5), ("0", 100, 3), ("0.030", 100, 3), ("0.080", 100, 2), ("0.0826", 100, 2)]
    split = {"name": "s", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2,
             "roles": {"schedule": [{"from_s": 0.025, "reading_gpus": 2}], "switch_s": 0.010}}
    r, sw = run_one(tmp_path, rows, split)
    assert sw == {"gpu": [1], "from_role": ["writes"], "to_role": ["reads"], "why": ["schedule"],
                  "requested_at_ns": [25 * MS], "drained_at_ns": [72_600_000], "serving_at_ns": [82_600_000]}
    # the reply in progress finishes on its GPU
    assert (r["writing_gpu"][0], r["finished_at_ns"][0]) == (1, 72_600_000)
    # request 2 (read 30-47 ms) goes elsewhere: without the move D2 would pick GPU 1 (its last
    # assignment is older); GPU 2 has just finished request 1 at 47.8 ms: joined 48, done 72.8
    assert (r["writing_gpu"][2], r["joined_at_ns"][2], r["finished_at_ns"][2]) == (2, 48 * MS, 72_800_000)
    # during the warm-up nothing is routed to GPU 1: request 3 (80 ms) is read on GPU 0
    assert (r["reading_gpu"][3], r["first_word_at_ns"][3]) == (0, 97 * MS)
    # request 4 arrives at the ns the warm-up ends: GPU 1 has joined first and, never assigned
    # on the reading side, wins the tie with busy GPU 0 (both have 0 tokens queued, D1, D2)
    assert (r["reading_gpu"][4], r["read_started_at_ns"][4], r["first_word_at_ns"][4]) == (1, 82_600_000, 99_600_000)


def test_a_reading_gpu_finishes_its_read_then_warms_up(tmp_path):
    """2 reading GPUs (0, 1), 1 writing (2); at 10 ms the schedule asks for 1. Both reading GPUs
    have 0 tokens queued (their reads are under way), so the lower number, GPU 0, moves: it
    finishes reading request 0 (0-22 ms), warms up 5 ms and writes from 27 ms. Request 2 (15 ms)
    waits for GPU 1, the only reading GPU left, busy until 22 ms."""
    rows = [("0", 200, 3), ("0.005", 100, 3), ("0.015", 100, 3)]
    split = {"name": "s", "kind": "disaggregated", "reading_gpus": 2, "writing_gpus": 1,
             "roles": {"schedule": [{"from_s": 0.010, "reading_gpus": 1}], "switch_s": 0.005}}
    r, sw = run_one(tmp_path, rows, split)
    assert sw == {"gpu": [0], "from_role": ["reads"], "to_role": ["writes"], "why": ["schedule"],
                  "requested_at_ns": [10 * MS], "drained_at_ns": [22 * MS], "serving_at_ns": [27 * MS]}
    assert (r["reading_gpu"][0], r["first_word_at_ns"][0], r["writing_gpu"][0]) == (0, 22 * MS, 2)
    # request 2 waits for GPU 1: read 22-39 ms
    assert (r["reading_gpu"][2], r["read_started_at_ns"][2], r["first_word_at_ns"][2]) == (1, 22 * MS, 39 * MS)
    # at 39 ms GPU 2 writes two replies, GPU 0 (writing since 27 ms) none: request 2 goes to GPU 0,
    # ships 1 ms, words at 52.4 and 64.8 ms
    assert (r["writing_gpu"][2], r["joined_at_ns"][2], r["finished_at_ns"][2]) == (0, 40 * MS, 64_800_000)


def test_static_roles_dump_as_before(tmp_path):
    """`roles: static` is the default, left out of a dump (run.json and the store's keys unchanged)."""
    from disagg_simpy.scenario.arrangements import Disaggregated

    plain = {"name": "s", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1}
    assert Disaggregated.model_validate({**plain, "roles": "static"}).model_dump() == \
        Disaggregated.model_validate(plain).model_dump()


def test_the_policy_sees_the_queue_of_an_instant_before_any_gpu_starts(tmp_path):
    """The policy (E12c) at 17 ms, the instant GPU 0 ends its first read: request 1 (1 ms) has
    waited 16 ms >= wait_s 10 ms, and GPU 0 starts only in D5 step 3 (E12d), so the decision sees
    it waiting: the writing GPU with the fewest replies (GPU 2; GPU 1 has request 0 shipping)
    moves, idle, so drained at once; warm-up 2 ms; request 2 (20 ms) is read there (never
    assigned on the reading side, it wins the tie with busy GPU 0)."""
    rows = [("0", 100, 3), ("0.001", 100, 3), ("0.020", 100, 3)]
    split = {"name": "s", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 2,
             "roles": {"policy": "queue", "switch_s": 0.002, "check_s": 0.017, "wait_s": 0.010, "gap_ms": 1000}}
    r, sw = run_one(tmp_path, rows, split)
    assert sw == {"gpu": [2], "from_role": ["writes"], "to_role": ["reads"], "why": ["reading_wait"],
                  "requested_at_ns": [17 * MS], "drained_at_ns": [17 * MS], "serving_at_ns": [19 * MS]}
    assert (r["reading_gpu"][1], r["read_started_at_ns"][1]) == (0, 17 * MS)
    assert (r["reading_gpu"][2], r["read_started_at_ns"][2], r["first_word_at_ns"][2]) == (2, 20 * MS, 37 * MS)


def test_a_tp_split_moving_from_4_to_2_reading_gpus_moves_one_instance(tmp_path):
    """R33: with reading_tp = writing_tp = 2, schedule counts are GPUs: 4 reading GPUs (2
    instances) to 2 is one instance moving, one row in switches.csv (counting instances as GPUs
    would move both, and leave no reading instance). The lower-numbered reading instance with 0
    tokens queued, instance 0, moves; requests after the move are read on instance 1."""
    rows = [("0", 100, 3), ("0.005", 100, 3), ("0.050", 100, 3), ("0.060", 100, 3)]
    split = {"name": "s", "kind": "disaggregated", "reading_gpus": 4, "writing_gpus": 2, "reading_tp": 2,
             "writing_tp": 2, "roles": {"schedule": [{"from_s": 0.030, "reading_gpus": 2}], "switch_s": 0.005}}
    r, sw = run_one(tmp_path, rows, split)
    assert sw["gpu"] == [0] and sw["from_role"] == ["reads"] and sw["to_role"] == ["writes"]
    assert sw["requested_at_ns"] == [30 * MS] and sw["why"] == ["schedule"]
    assert [r["reading_gpu"][i] for i in (2, 3)] == [1, 1]  # the one reading instance left reads both

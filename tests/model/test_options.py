"""Hand-timed micro-scenarios for the optional rules E1-E6 (docs/rules.md), in exact nanoseconds.

Costs unless a test says otherwise: an iteration is 10 ms + 1 ms per reply written + 0.01 ms per
prompt token read (10 us); a ship is 0.001 ms (1 us) per prompt token. Every time below is
worked out by hand from the rules and written in whole ns; the words are compared with `==`.
"""

from __future__ import annotations

import math

from helpers import request, run_rows, seconds

MS = 1_000_000  # ns
COST = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01, "kv_ship_ms_per_token": 0.001}


def cost(**changes):
    return {**COST, **changes}


def words_ns(result, arrangement, request_id) -> list[int]:
    """Word times of one request in whole ns (the frames hold ns / 1e9)."""
    w = result.words(arrangement, [request_id])
    return [round(t * 1e9) for t in w["at_s"]]


def split(name, reading=1, writing=1, **options):
    return {"name": name, "kind": "disaggregated", "reading_gpus": reading, "writing_gpus": writing, **options}


def same(name, gpus=1, **options):
    return {"name": name, "kind": "colocated", "gpus": gpus, **options}


# -- E1 per-side costs -------------------------------------------------------------------------
def test_e1_each_side_costs_its_own_iterations_and_a_split_its_own_ships(tmp_path):
    res = run_rows(tmp_path, [(0.0, 1000, 3)], [
        split("split", reading_cost={"iteration_ms": 20}, writing_cost={"iteration_ms": 5, "per_reply_ms": 2},
              kv_ship_ms_per_token=0.002),
        same("same", cost={"iteration_ms": 4, "per_prompt_token_ms": 0.02}),
    ], cost=COST)
    # reading GPU: 20 + 1000 x 0.01 = 30 ms; ship 1000 x 0.002 = 2 ms; writing GPU: 5 + 2 = 7 ms a word
    assert words_ns(res, "split", 0) == [30 * MS, 39 * MS, 46 * MS]
    assert request(res, "split", 0).joined_at_s == seconds(32 * MS)
    # colocated: 4 + 1000 x 0.02 = 24 ms, then 4 + 1 (the scenario's per_reply_ms) = 5 ms a word
    assert words_ns(res, "same", 0) == [24 * MS, 29 * MS, 34 * MS]


# -- E2 re-reading earlier chunks --------------------------------------------------------------
def test_e2_a_prompt_read_in_four_chunks_pays_for_the_tokens_read_before_each(tmp_path):
    arrangements = [same("chunked", chunk_tokens=512), same("whole")]
    res = run_rows(tmp_path, [(0.0, 2000, 2)], arrangements, cost=cost(per_reread_token_ms=0.001))
    # chunks 512, 512, 512, 464 re-read 0, 512, 1024, 1536 tokens at 1 us (3,072 in all)
    chunks = [10 * MS + 5_120_000, 10 * MS + 5_120_000 + 512_000, 10 * MS + 5_120_000 + 1_024_000,
              10 * MS + 4_640_000 + 1_536_000]
    first = sum(chunks)
    assert first == 63_072_000
    assert words_ns(res, "chunked", 0) == [first, first + 11 * MS]
    assert res.iterations.query("arrangement == 'chunked'")["n_prompt_tokens_read"].tolist() == [512, 512, 512, 464, 0]
    # a prompt read in one piece pays nothing extra: 10 + 20 ms, then 11 ms
    assert words_ns(res, "whole", 0) == [30 * MS, 41 * MS]


def test_e2_each_prompt_an_iteration_reads_pays_for_its_own_earlier_chunks(tmp_path):
    # A (300) and 212 tokens of B share the first chunk; the second reads B's last 188 tokens,
    # re-reading B's 212 (not A's 300), while writing A's word 2
    res = run_rows(tmp_path, [(0.0, 300, 2), (0.0, 400, 2)], [same("chunked", chunk_tokens=512)],
                   cost=cost(per_reread_token_ms=0.001))
    it0 = 10 * MS + 5_120_000
    it1 = 10 * MS + 1 * MS + 1_880_000 + 212_000
    assert words_ns(res, "chunked", 0) == [it0, it0 + it1]
    assert words_ns(res, "chunked", 1) == [it0 + it1, it0 + it1 + 11 * MS]


def test_e2_a_reread_cost_of_0_is_the_pages_model(tmp_path):
    rows = [(0.0, 2000, 5), (0.003, 700, 3), (0.004, 1500, 2)]
    arrangements = [same("chunked", chunk_tokens=512), split("split", chunk_tokens=300)]
    plain = run_rows(tmp_path, rows, arrangements, cost=COST)
    zero = run_rows(tmp_path, rows, arrangements, cost=cost(per_reread_token_ms=0, per_context_token_ms=0))
    for name in ("chunked", "split"):
        assert plain.words(name).equals(zero.words(name))
    assert plain.iterations.equals(zero.iterations)


# -- E3 context cost of writing ----------------------------------------------------------------
def test_e3_each_word_pays_for_its_replys_context_and_word_1_pays_nothing(tmp_path):
    # A: prompt 100, 4 words at 0; B: prompt 50, 2 words, arrives at 15 ms while A's word 2 is written
    res = run_rows(tmp_path, [(0.0, 100, 4), (0.015, 50, 2)], [same("same")],
                   cost=cost(per_context_token_ms=0.001))
    it0 = 11 * MS  # reads A's prompt: 10 + 1; word 1 pays no context
    it1 = 11 * MS + 101_000  # A's word 2: context 100 + 1
    it2 = 11 * MS + 500_000 + 102_000  # reads B's prompt (0.5 ms) and writes A's word 3 (context 102)
    it3 = 12 * MS + 103_000 + 51_000  # A's word 4 (context 103) and B's word 2 (context 50 + 1)
    ends = [sum([it0, it1, it2, it3][: k + 1]) for k in range(4)]
    assert ends == [11_000_000, 22_101_000, 33_703_000, 45_857_000]
    assert words_ns(res, "same", 0) == ends
    assert words_ns(res, "same", 1) == ends[2:]


# -- E4 KV-cache memory ------------------------------------------------------------------------
def test_e4_a_second_request_waits_for_the_first_to_finish(tmp_path):
    # capacity 1000: A reserves 500 + 3 = 503 at 0; B (600 + 2 = 602) arrives at 1 ms and does not fit
    rows = [(0.0, 500, 3), (0.001, 600, 2)]
    res = run_rows(tmp_path, rows, [same("kv", kv_capacity_tokens=1000), same("free")], cost=COST)
    # A: read 10 + 5 = 15 ms, words 2, 3 at 26, 37 ms; A frees 503 at 37 ms; B is read from 37 ms
    assert words_ns(res, "kv", 0) == [15 * MS, 26 * MS, 37 * MS]
    assert request(res, "kv", 1).read_started_at_s == seconds(37 * MS)
    assert words_ns(res, "kv", 1) == [53 * MS, 64 * MS]  # 37 + 10 + 6, then 11
    it = res.iterations.query("arrangement == 'kv'")
    assert it["kv_used_tokens"].tolist() == [503, 503, 503, 602, 602]
    summary = res.summary.set_index("arrangement")
    assert summary.loc["kv", "kv_peak_reading_pct"] == 100 * 602 / 1000
    # without a limit B is read at 15 ms beside A's word 2 (10 + 1 + 6 = 17 ms), then both write (12)
    assert words_ns(res, "free", 1) == [32 * MS, 44 * MS]
    assert res.iterations.query("arrangement == 'free'")["kv_used_tokens"].isna().all()
    assert math.isnan(summary.loc["free", "kv_peak_reading_pct"])


def test_e4e_a_head_with_no_room_blocks_the_handoff_queue_behind_it(tmp_path):
    # capacity 1200 on each GPU. A (400 + 3), B (700 + 150), C (100 + 2) arrive at 0 and are read
    # together (400 + 700 + 100 = 1200 fits the reading GPU): 10 + 12 = 22 ms. A reserves 403 on the
    # writing GPU; B needs 850 > 797 free, so B waits, and C (102, which would fit) waits behind it.
    rows = [(0.0, 400, 3), (0.0, 700, 150), (0.0, 100, 2)]
    res = run_rows(tmp_path, rows, [split("kv", kv_capacity_tokens=1200)], cost=COST)
    read = 22 * MS
    a_join = read + 400_000  # ship 0.4 ms
    assert words_ns(res, "kv", 0) == [read, a_join + 11 * MS, a_join + 22 * MS]
    a_done = a_join + 22 * MS  # 44.4 ms: A frees 403; the queue is served: B, then C
    b = request(res, "kv", 1)
    c = request(res, "kv", 2)
    assert (b.handoff_wait_s, c.handoff_wait_s) == (seconds(a_done - read), seconds(a_done - read))
    assert request(res, "kv", 0).handoff_wait_s == 0
    assert c.joined_at_s == seconds(a_done + 100_000)  # C's ship: 0.1 ms, the idle GPU starts then
    assert b.joined_at_s == seconds(a_done + 700_000)  # B's: 0.7 ms, while C's word 2 is written
    c_word2 = a_done + 100_000 + 11 * MS  # 55.5 ms
    assert words_ns(res, "kv", 2) == [read, c_word2]
    assert words_ns(res, "kv", 1) == [read] + [c_word2 + k * 11 * MS for k in range(1, 150)]
    assert b.finished_at_s == seconds(1_694_500_000)
    w = res.iterations.query("arrangement == 'kv'")
    assert w.query("gpu == 0")["kv_used_tokens"].tolist() == [1200]
    assert w.query("gpu == 1")["kv_used_tokens"].tolist()[:4] == [403, 403, 403 - 403 + 850 + 102, 850]
    summary = res.summary.set_index("arrangement").loc["kv"]
    assert summary["handoff_waited_pct"] == 100 * 2 / 3
    assert math.isnan(summary["link_waited_pct"])


# -- E5 links ----------------------------------------------------------------------------------
def test_e5_per_writing_gpu_against_shared_and_per_reading_gpu(tmp_path):
    # A and B (1000 tokens, 2 words) arrive at 0: A is read on GPU 0, B on GPU 1, both by 20 ms;
    # D5 step 1 by GPU number: A picks the first writing GPU, B the next (2 + 2) or the same (2 + 1)
    rows = [(0.0, 1000, 2), (0.0, 1000, 2)]
    res = run_rows(tmp_path, rows, [
        split("2-2-per-writer", 2, 2, kv_link="per_writing_gpu"),
        split("2-2-shared", 2, 2, kv_link="shared"),
        split("2-1-per-reader", 2, 1, kv_link="per_reading_gpu"),
        split("2-1-per-writer", 2, 1, kv_link="per_writing_gpu"),
        split("2-2-independent", 2, 2),
    ], cost=COST)
    read, ship = 20 * MS, 1 * MS
    # different writing GPUs: both ship at once, unless the link is shared
    for name in ("2-2-per-writer", "2-2-independent"):
        assert words_ns(res, name, 0) == words_ns(res, name, 1) == [read, read + ship + 11 * MS]
    assert words_ns(res, "2-2-shared", 0) == [read, read + ship + 11 * MS]
    assert words_ns(res, "2-2-shared", 1) == [read, read + 2 * ship + 11 * MS]  # B's ship waits 1 ms
    assert request(res, "2-2-shared", 1).link_wait_s == seconds(ship)
    assert request(res, "2-2-per-writer", 1).link_wait_s == 0
    assert math.isnan(request(res, "2-2-independent", 1).link_wait_s)
    # one writing GPU: per reading GPU both ship at once and share its first iteration (10 + 2)
    assert words_ns(res, "2-1-per-reader", 0) == words_ns(res, "2-1-per-reader", 1) == [read, read + ship + 12 * MS]
    # per writing GPU B's ship waits for A's; A's word 2 is written alone, B's in the next iteration
    assert words_ns(res, "2-1-per-writer", 0) == [read, read + ship + 11 * MS]
    assert words_ns(res, "2-1-per-writer", 1) == [read, read + ship + 22 * MS]
    assert request(res, "2-1-per-writer", 1).joined_at_s == seconds(read + 2 * ship)
    shares = res.summary.set_index("arrangement")["link_waited_pct"]
    assert shares["2-2-shared"] == shares["2-1-per-writer"] == 50 and shares["2-2-per-writer"] == 0


def test_free_ships_end_in_step_2_of_the_instant_they_start(tmp_path):
    res = run_rows(tmp_path, [(0.0, 1000, 3)], [split("free", kv_ship_ms_per_token=0)], cost=COST)
    assert request(res, "free", 0).joined_at_s == seconds(20 * MS)
    assert words_ns(res, "free", 0) == [20 * MS, 31 * MS, 42 * MS]  # the idle writing GPU starts at 20 ms


# -- E6 short prompts read where they are written -----------------------------------------------
def test_e6_a_short_prompt_read_on_a_writing_gpu_freezes_the_replies_there(tmp_path):
    # A (1000 tokens, 5 words) is read on GPU 0 by 20 ms and ships (1 ms) to GPU 1, which writes its
    # word 2 from 21 to 32 ms. L (500 tokens <= 500, 3 words) arrives at 25 ms and goes to GPU 1:
    # its read (5 ms) lengthens the iteration that writes A's word 3 to 16 ms, over the 15 ms limit.
    rows = [(0.0, 1000, 5), (0.025, 500, 3)]
    arrangements = [split("local", local_prompt_max_tokens=500), split("plain")]
    res = run_rows(tmp_path, rows, arrangements, cost=COST, slo={"freeze_ms": 15})
    assert words_ns(res, "local", 0) == [20 * MS, 32 * MS, 48 * MS, 60 * MS, 72 * MS]
    assert words_ns(res, "local", 1) == [48 * MS, 60 * MS, 72 * MS]
    a, local = request(res, "local", 0), request(res, "local", 1)
    assert (a.n_freezes, a.max_gap_ms) == (1, 16.0)
    assert (local.reading_gpu, local.writing_gpu) == (1, 1)
    assert local.read_started_at_s == seconds(32 * MS) and local.joined_at_s == seconds(48 * MS)
    assert math.isnan(local.link_wait_s)
    # the explainer's model reads L on GPU 0 (25 + 10 + 5 = 40 ms) and ships it (0.5 ms): A never freezes
    assert request(res, "plain", 0).n_freezes == 0
    assert words_ns(res, "plain", 1)[0] == 40 * MS


# -- bad options: one line, exit 2, nothing written ---------------------------------------------
SYNTHETIC = {"rate_per_s": 5, "measure_s": 1, "prompt_mix": [{"share": 1, "tokens": [100, 800]}],
             "reply_words": [5, 40]}
BAD_OPTIONS = [
    (same("a", cost={"iteration_ms": -1}), "arrangements[0].cost.iteration_ms: got -1, expected"),
    (same("a", cost={"per_reread_token_ms": -0.5}), "arrangements[0].cost.per_reread_token_ms: got -0.5"),
    (split("a", writing_cost={"per_context_token_ms": -2}), "arrangements[0].writing_cost.per_context_token_ms: got -2"),
    (split("a", kv_ship_ms_per_token=-1), "arrangements[0].kv_ship_ms_per_token: got -1"),
    (same("a", cost={"speed": 2}), "arrangements[0].cost.speed: unknown key"),
    (same("a", cost={"kv_ship_ms_per_token": 1}), "kv_ship_ms_per_token on the arrangement itself"),
    (split("a", reading_cost={"iteration": 5}), "did you mean 'iteration_ms'?"),
    (split("a", cost={"iteration_ms": 5}), "arrangements[0].cost: unknown key for a disaggregated arrangement"),
    (same("a", reading_cost={"iteration_ms": 5}), "arrangements[0].reading_cost: unknown key for a colocated"),
    (same("a", kv_link="shared"), "arrangements[0].kv_link: unknown key for a colocated arrangement"),
    (same("a", local_prompt_max_tokens=100), "arrangements[0].local_prompt_max_tokens: unknown key for a colocated"),
    (same("a", kv_ship_ms_per_token=0.1), "arrangements[0].kv_ship_ms_per_token: unknown key for a colocated"),
    (split("a", kv_link="bus"), "arrangements[0].kv_link: got 'bus', expected one of independent, per_reading_gpu"),
    (split("a", kv_link="shared", kv_ship_ms_per_token=0), "arrangements[0].kv_link: got 'shared' with a KV ship cost of 0"),
    (split("a", kv_capacity_tokens=0), "arrangements[0].kv_capacity_tokens: got 0, expected a whole number"),
    (split("a", local_prompt_max_tokens=-3), "arrangements[0].local_prompt_max_tokens: got -3"),
    # E4f: the largest prompt and reply the traffic can draw (800 + 40) must fit one GPU
    (same("a", kv_capacity_tokens=839), "kv_capacity_tokens: got 839, but the workload can draw a request "
                                        "reserving prompt 800 + reply 40 = 840 tokens"),
    (split("a", kv_capacity_tokens=839), "prompt 800 + reply 40 = 840 tokens"),
]


def _cli(folder, text: str):
    import contextlib
    import io

    from disagg_simpy.cli import main

    path = folder / "s.yaml"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(path), "--out", str(folder / "out"), "--no-plots"])
    return code, err.getvalue()


def test_bad_options_get_one_line_and_exit_2(tmp_path):
    from helpers import scenario_text

    for arrangement, expected in BAD_OPTIONS:
        code, err = _cli(tmp_path, scenario_text("bad", SYNTHETIC, arrangements=[arrangement]))
        assert code == 2 and err.count("\n") == 1 and expected in err, (arrangement, err)
        assert not (tmp_path / "out").exists()


def test_e4f_a_trace_row_too_large_for_the_memory_is_named(tmp_path):
    from helpers import scenario_text, write_trace

    write_trace(tmp_path, [(0.0, 100, 5), (0.5, 300, 1), (1.0, 900, 200), (1.5, 2000, 2)], name="bad")
    cases = [  # a one-word reply on a split reserves its prompt only (reading R9); E6 prompt + reply
        (split("a", kv_capacity_tokens=1099), "row 3 of bad.csv reserves prompt 900 + reply 200 = 1,100 tokens"),
        (same("a", kv_capacity_tokens=1100), "row 4 of bad.csv reserves prompt 2,000 + reply 2 = 2,002 tokens"),
        (split("a", kv_capacity_tokens=300, local_prompt_max_tokens=300),
         "row 2 of bad.csv reserves prompt 300 + reply 1 = 301 tokens"),
    ]
    for arrangement, expected in cases:
        code, err = _cli(tmp_path, scenario_text("bad", arrangements=[arrangement]))
        assert code == 2 and err.count("\n") == 1 and expected in err, err
    code, _ = _cli(tmp_path, scenario_text("bad", arrangements=[split("a", kv_capacity_tokens=2002)]))
    assert code == 0


# -- the timeline with E4 and E5 on ---------------------------------------------------------------
def test_timeline_shows_kv_use_under_each_gpu_and_link_waits_on_the_ship_lane(tmp_path):
    import numpy as np
    from matplotlib.figure import Figure

    from disagg_simpy.plots import draw_gpu_lanes
    from disagg_simpy.plots.data import frames_of
    from disagg_simpy.plots.style import tokens_norm

    rows = [(0.0, 1000, 2), (0.0, 1000, 2), (0.0, 400, 3), (0.0, 700, 150), (0.0, 100, 2)]
    res = run_rows(tmp_path, rows, [split("kv", 2, 1, kv_capacity_tokens=1300, kv_link="shared"), split("plain", 2, 1)],
                   cost=COST)
    window = (0.0, 0.2)

    def gids(name, capacity):
        requests, iterations, _ = frames_of(res, name)
        ax = Figure().subplots()
        draw_gpu_lanes(ax, iterations, requests, res.gpu_roles(name), window, tokens_norm(1000), capacity)
        return {c.get_gid(): c for c in ax.collections}, requests, iterations

    drawn, requests, iterations = gids("kv", 1300)
    shown = iterations[(iterations.started_at_s < window[1]) & (iterations.ended_at_s > window[0])]
    band = drawn["kv-use"]
    assert len(band.get_paths()) == len(shown)
    assert np.allclose(band.get_array(), shown["kv_used_tokens"].to_numpy(dtype=float) / 1300)
    waited = requests["link_wait_s"] > 0
    assert waited.sum() > 0 and len(drawn["link-waits"].get_segments()) == int(waited.sum())
    drawn, _, _ = gids("plain", None)
    assert "kv-use" not in drawn and len(drawn["link-waits"].get_segments()) == 0

"""`explain`: one request's story, whose numbers are the frames' numbers, and its bad input."""

from __future__ import annotations

import re

import pytest
import yaml
from helpers import ROOT, SPLIT_1_1, freezes_by_reply, run_rows, write_scenario

from disagg_simpy import load_scenario, run
from disagg_simpy.cli import main
from disagg_simpy.results.story import ms_text, seconds_text, story_facts, story_text

DEFAULT = ROOT / "scenarios" / "default.yaml"
FRAME_KEYS = ("request_id", "arrived_at_s", "n_prompt_tokens", "n_reply_words", "reading_gpu", "read_started_at_s",
              "first_word_at_s", "writing_gpu", "joined_at_s", "finished_at_s", "first_word_s", "mean_gap_ms",
              "max_gap_ms", "n_freezes", "on_time", "queued_s", "reading_s", "shipping_s", "joining_s", "writing_s",
              "frozen_s")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The default scenario cut to 6 s with three arrangements; its path and its run."""
    raw = yaml.safe_load(DEFAULT.read_text())
    raw["workload"]["measure_s"] = 6
    raw.pop("max_sim_s", None)
    raw["arrangements"] = [a for a in raw["arrangements"] if a["name"] in ("same-gpu", "split-2-2", "split-3-1")]
    path = tmp_path_factory.mktemp("explain") / "small.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path, run(load_scenario(path))


def flat(text: str) -> str:
    """The story without its line wrapping."""
    return " ".join(text.split())


def a_frozen_request(res) -> int:
    return int(freezes_by_reply(res, "same-gpu").request_id.iloc[0])


def test_the_story_numbers_are_the_frames_numbers(small):
    _, res = small
    rid = a_frozen_request(res)
    for name in res.records:
        facts = story_facts(res, name, rid)
        row = res.requests[(res.requests.arrangement == name) & (res.requests.request_id == rid)].iloc[0]
        for key in FRAME_KEYS:
            assert facts[key] == row[key], (name, key)
        by_reply = freezes_by_reply(res, name)
        frozen = by_reply[by_reply.request_id == rid]
        assert [f["gap_s"] for f in facts["freezes"]] == frozen.gap_s.tolist()
        assert [f["gap_started_at_s"] for f in facts["freezes"]] == frozen.gap_started_at_s.tolist()
        assert [f["cause"] for f in facts["freezes"]] == frozen.cause.astype(str).tolist()
        text = flat(story_text(facts))
        for key in ("arrived_at_s", "first_word_at_s", "finished_at_s", "reading_s", "writing_s"):
            assert seconds_text(row[key]) in text, (name, key)
        assert f"queued {seconds_text(row.queued_s)}" in text if row.queued_s > 0 else "read at once" in text
        assert ms_text(row.mean_gap_ms) in text and ms_text(row.max_gap_ms) in text
        for f in facts["freezes"][:4]:
            assert f"frozen {seconds_text(f['gap_s'])} at {seconds_text(f['gap_started_at_s'])}" in text
        assert text.endswith("on time") == bool(row.on_time)
    # what a request queued behind is every prompt token its reading GPU read while it waited
    req = res.requests[(res.requests.arrangement == "split-2-2") & (res.requests.queued_s > 0.05)]
    assert len(req)
    for row in req.head(5).itertuples():
        facts = story_facts(res, "split-2-2", row.request_id)
        it = res.iterations[(res.iterations.arrangement == "split-2-2") & (res.iterations.gpu == row.reading_gpu)]
        busy = it[(it.ended_at_s > row.arrived_at_s) & (it.started_at_s < row.read_started_at_s)]
        assert len(busy) and sum(t for _, t in facts["queued_behind"]) == busy.n_prompt_tokens_read.sum()
        assert [t for _, t in facts["queued_behind"]] == sorted((t for _, t in facts["queued_behind"]), reverse=True)


def test_a_hand_built_story_names_the_prompt_that_froze_it(tmp_path):
    res = run_rows(tmp_path, [(0.0, 100, 40), (0.0, 100, 40), (0.0, 100, 40), (0.1, 6000, 5)])
    text = flat(story_text(story_facts(res, "same", 0)))
    assert "read in 0.027 s, along with request 1 (100 tokens) and request 2 (100 tokens)" in text
    assert "frozen 0.31 s at" in text and "while GPU 0 read request 3 (6,000 tokens)" in text
    assert text.endswith("late: one freeze over 250 ms")
    res = run_rows(tmp_path, [(0.0, 5000, 10)], SPLIT_1_1, cost={"kv_ship_ms_per_token": 0.1})
    text = flat(story_text(story_facts(res, "split", 0)))
    assert "shipped in 0.50 s to GPU 1" in text and "most of it getting its KV cache across (0.50 s)" in text


def test_the_command_prints_the_stories_of_every_arrangement_or_one(small, capsys):
    path, res = small
    rid = a_frozen_request(res)
    assert main(["explain", str(path), "--request", str(rid)]) == 0
    out = capsys.readouterr().out
    stories = [story_text(story_facts(res, name, rid)) for name in res.records]
    assert out == "\n\n".join(stories) + "\n"
    assert main(["explain", str(path), "--request", str(rid), "--arrangement", "split-3-1"]) == 0
    assert capsys.readouterr().out == stories[2] + "\n"


def test_overrides_mean_what_they_mean_for_a_run(small, capsys):
    path, _ = small
    assert main(["explain", str(path), "--request", "3", "--seed", "2", "--arrangement", "same-gpu"]) == 0
    out = capsys.readouterr().out
    res = run(load_scenario(path), seed=2)
    assert out == story_text(story_facts(res, "same-gpu", 3)) + "\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--request", "100000"], "--request: got 100000, expected the id of a measured request (0 to "),
        (["--request", "-1"], "--request: got '-1', expected a whole number from 0"),
        (["--request", "x"], "--request: got 'x', expected a whole number"),
        ([], "the following arguments are required: --request"),
        (["--request", "1", "--arrangement", "split22"], "expected one of same-gpu, split-2-2, split-3-1 (did you mean 'split-2-2'?)"),
        (["--request", "1", "--rate", "0"], "--rate: got '0', expected a number > 0"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(small, capsys, args, message):
    path, _ = small
    assert main(["explain", str(path), *args]) == 2
    out = capsys.readouterr()
    assert out.out == "" and message in out.err and out.err.count("\n") == 1


def test_a_request_outside_the_measured_window_is_refused(tmp_path, capsys):
    path = write_scenario(tmp_path, [(0.0, 100, 3), (1.0, 100, 3), (2.0, 100, 3)], workload={"warmup_s": 0.5, "measure_s": 1.5})
    assert main(["explain", str(path), "--request", "0"]) == 2
    assert "expected the id of a measured request (1 to 1 in micro, seed" in capsys.readouterr().err
    assert main(["explain", str(path), "--request", "1"]) == 0


def test_a_reply_that_waited_for_kv_memory_says_so(tmp_path):
    # E4 (the case of tests/model/test_options.py): B and C wait 22.4 ms for room on the
    # writing GPU, then ship; with freezes over 20 ms, their first gaps freeze, most of it the wait
    cost = {"iteration_ms": 10, "per_reply_ms": 1, "per_prompt_token_ms": 0.01, "kv_ship_ms_per_token": 0.001}
    split = {"name": "kv", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1, "kv_capacity_tokens": 1200}
    res = run_rows(tmp_path, [(0.0, 400, 3), (0.0, 700, 150), (0.0, 100, 2)], [split], cost=cost, slo={"freeze_ms": 20})
    f = freezes_by_reply(res, "kv")
    assert list(zip(f.request_id, f.cause.astype(str))) == [(1, "kv_ship"), (2, "kv_ship")]
    row = res.requests.set_index("request_id").loc[2]
    text = flat(story_text(story_facts(res, "kv", 2)))
    waited = f"waited {seconds_text(row.handoff_wait_s)} for memory"
    assert f"its KV cache reached GPU 1 in {seconds_text(row.shipping_s)} ({waited})" in text
    assert f"most of it getting its KV cache across ({seconds_text(row.shipping_s)}: {waited})" in text


def test_per_gpu_counts_tell_the_story_where_the_request_was_sent(tmp_path, capsys):
    """F24: with n_requests_per_gpu an id only the larger arrangement gets was an internal
    error (IndexError); the smaller one now says it never got it."""
    spec = {"name": "per-gpu", "seed": 3,
            "workload": {"rate_per_s": 5, "n_requests_per_gpu": 6, "prompt_mix": [{"share": 1, "tokens": [100, 800]}],
                         "reply_words": [5, 30]},
            "arrangements": [{"name": "one", "kind": "colocated", "gpus": 1},
                             {"name": "three", "kind": "colocated", "gpus": 3}]}
    path = tmp_path / "per-gpu.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert main(["explain", str(path), "--request", "10"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("one: request 10 is not sent to it (n_requests_per_gpu sends its 1 GPU 6 requests)")
    assert "three: request 10 (" in out
    assert main(["explain", str(path), "--request", "18"]) == 2
    assert "--request: got 18, expected the id of a measured request (0 to 17" in capsys.readouterr().err


def test_a_sampled_per_gpu_trace_tells_one_requests_story_in_every_arrangement(tmp_path, capsys):
    """Review finding G2: with n_requests_per_gpu and `pick: sampled` a smaller arrangement's
    stream is a subset of the larger's in another order, so id N named another request in each,
    told side by side as one. explain now follows the request (the id of the largest stream)
    and says its own id where it differs; --follow, which draws id N everywhere, is refused."""
    rows = [(0.1 * i, 100 * (i + 1), 2 + i) for i in range(10)]
    path = write_scenario(tmp_path, rows, arrangements=[{"name": "one", "kind": "colocated", "gpus": 1},
                                                        {"name": "three", "kind": "colocated", "gpus": 3}],
                          seed=2, workload={"n_requests_per_gpu": 3, "pick": "sampled"})
    checked = 0
    for request in range(9):
        assert main(["explain", str(path), "--request", str(request)]) == 0
        out = capsys.readouterr().out
        prompts = set(re.findall(r"\(([\d,]+)-token prompt", out))
        assert len(prompts) == 1, out  # one request, whatever each arrangement calls it
        if "is its request" in out:
            checked += 1
            assert main([str(path), "--follow", str(request), "--out", str(tmp_path / "f")]) == 2
            assert "--follow: got" in capsys.readouterr().err and not (tmp_path / "f").exists()
    assert checked  # (seed 2 renumbers at least one: the case at stake)


@pytest.mark.parametrize("slo, said", [
    ({"first_word_s": None, "mean_gap_ms": None, "freeze_ms": None, "e2e_s": 0.2}, "end-to-end {e2e} (limit 0.2 s)"),
    ({"first_word_s": None, "mean_gap_ms": 1, "freeze_ms": None, "tpot": "inclusive"},
     "TPOT with word 1 {tpot} (limit 1 ms)"),
])
def test_the_verdict_names_the_rules_own_limits(tmp_path, slo, said):
    """F11: a request late on end-to-end alone read "late: " with no reason, and under
    tpot: inclusive the verdict gave the exclusive mean gap."""
    spec = {"name": "rule", "seed": 2,
            "workload": {"rate_per_s": 5, "n_requests": 8, "prompt_mix": [{"share": 1, "tokens": [100, 800]}],
                         "reply_words": [5, 30]},
            "slo": slo, "arrangements": [{"name": "one", "kind": "colocated", "gpus": 1}]}
    path = tmp_path / "rule.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    res = run(load_scenario(path))
    late = res.requests[~res.requests["on_time"].astype(bool)]
    assert len(late)
    for row in late.itertuples():
        e2e = row.finished_at_s - row.arrived_at_s
        text = flat(story_text(story_facts(res, "one", row.request_id)))
        assert said.format(e2e=seconds_text(e2e), tpot=ms_text(e2e * 1e3 / row.n_reply_words)) in text

"""Benchmark-client counts: `n_requests` on trace workloads (the first N, or N drawn with the
seed: `pick`), and `n_requests_per_gpu` (each arrangement sends per GPU x its GPUs requests,
the first that many of the seed's stream), so one file compares arrangements of different
sizes the way the papers did (vLLM's 100 requests on 1 GPU against DistServe's 300 on 3)."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import ROOT, run_rows, write_scenario

from disagg_simpy import load_scenario, run
from disagg_simpy.cli import main

#: ten requests, 0.1 s apart, prompts 100..1000 tokens, replies of 2..11 words
TEN = [(0.1 * i, 100 * (i + 1), 2 + i) for i in range(10)]
ONE_AND_THREE = [{"name": "one", "kind": "colocated", "gpus": 1}, {"name": "three", "kind": "colocated", "gpus": 3}]


def test_trace_n_requests_sends_the_first_n(tmp_path):
    r = run_rows(tmp_path, TEN, workload={"n_requests": 4}).requests
    assert r["n_prompt_tokens"].tolist() == [100, 200, 300, 400]
    assert r["arrived_at_s"].tolist() == pytest.approx([0.0, 0.1, 0.2, 0.3])


def test_trace_n_requests_sampled_draws_n_rows_with_the_seed_in_time_order(tmp_path):
    picks = {}
    for seed in (1, 2, 1):
        r = run_rows(tmp_path, TEN, workload={"n_requests": 4, "pick": "sampled"}, seed=seed).requests
        prompts = r["n_prompt_tokens"].tolist()
        assert len(prompts) == 4 and prompts == sorted(prompts) and set(prompts) <= {100 * (i + 1) for i in range(10)}
        assert r["arrived_at_s"].tolist() == pytest.approx([(p / 100 - 1) * 0.1 for p in prompts])  # each its own row's time
        assert picks.setdefault(seed, prompts) == prompts  # the same seed: the same rows
    assert picks[1] != picks[2]


def test_seeds_run_each_seed_on_a_sampled_trace(tmp_path, capsys):
    """F30: `pick: sampled` draws with the seed, so --seeds 3 runs three seeds (it said the
    trace 'fixes every request' and ran seed 1 only); `pick: first` still runs one."""
    prompts = {}
    for pick in ("sampled", "first"):
        path = write_scenario(tmp_path, TEN, workload={"n_requests": 4, "pick": pick})
        out = tmp_path / f"out-{pick}"
        assert main([str(path), "--seeds", "3", "--out", str(out), "--no-plots"]) == 0
        assert ("fixes every request" in capsys.readouterr().err) == (pick == "first")
        requests = pd.read_csv(out / "requests.csv")
        seeds = requests["seed"] if "seed" in requests else pd.Series(1, index=requests.index)
        prompts[pick] = {s: tuple(requests.loc[seeds == s, "n_prompt_tokens"]) for s in seeds.unique()}
    assert sorted(prompts["sampled"]) == [1, 2, 3] and len(set(prompts["sampled"].values())) > 1
    assert list(prompts["first"]) == [1]


def test_n_requests_per_gpu_gives_each_arrangement_its_share_of_one_stream(tmp_path):
    spec = {"name": "per-gpu", "seed": 4,
            "workload": {"rate_per_s": 6, "n_requests_per_gpu": 20, "prompt_mix": [{"share": 1, "tokens": [50, 400]}],
                         "reply_words": [3, 12]},
            "arrangements": ONE_AND_THREE}
    path = tmp_path / "per-gpu.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = run(load_scenario(path))
    assert result.summary.set_index("arrangement")["n_requests"].to_dict() == {"one": 20, "three": 60}
    r = result.requests
    one, three = r[r.arrangement == "one"], r[r.arrangement == "three"]
    for column in ("arrived_at_s", "n_prompt_tokens", "n_reply_words"):  # the 1-GPU run's are the first 20 of the 3-GPU's
        assert np.array_equal(one[column].to_numpy(), three[column].to_numpy()[:20]), column


def test_trace_n_requests_per_gpu(tmp_path):
    r = run_rows(tmp_path, TEN, arrangements=ONE_AND_THREE, workload={"n_requests_per_gpu": 3}).requests
    assert r.groupby("arrangement")["n_prompt_tokens"].apply(list).to_dict() == {
        "one": [100, 200, 300], "three": [100 * (i + 1) for i in range(9)]}


def test_trace_n_requests_per_gpu_sampled_smaller_rows_are_the_larger_ones(tmp_path):
    """With `pick: sampled`, every size draws from one seeded order of the rows, so the 1-GPU
    arrangement runs a subset of the 3-GPU one's requests (each at its own trace time), and what
    run.json holds (the largest stream) says which: review finding F1, a separate draw per size."""
    for seed in (1, 2, 3, 4, 5):
        r = run_rows(tmp_path, TEN, arrangements=ONE_AND_THREE, seed=seed,
                     workload={"n_requests_per_gpu": 3, "pick": "sampled"}).requests
        one = set(r[r.arrangement == "one"]["n_prompt_tokens"])
        three = set(r[r.arrangement == "three"]["n_prompt_tokens"])
        assert len(one) == 3 and len(three) == 9 and one < three, (seed, one, three)


@pytest.mark.parametrize("workload", [
    {"n_requests_per_gpu": 3, "pick": "sampled"},  # a trace: a smaller count's rows a subset, not a prefix
    "sessions",  # E13 sessions: a smaller count's turns interleave with other sessions' in the larger
])
def test_a_request_has_the_same_draws_in_every_arrangement(tmp_path, workload):
    """Review finding G1: E16's acceptance keys and E13's router draws were taken by position in
    each size's stream, so with `n_requests_per_gpu` and a subset in another order the same request
    accepted other drafts (and was routed by another draw) in each arrangement. Now each request
    carries its draws from the largest stream, and `origin` says where it sits there."""
    from disagg_simpy.workload.stream import streams_by_gpus

    spec = {"speculative": {"tokens": 3, "acceptance": 0.6}, "router": "power_of_two"}
    for seed in (1, 2, 3):
        if workload == "sessions":
            path = tmp_path / "sessions.yaml"
            path.write_text(yaml.safe_dump({
                "name": "sessions", "seed": seed, **spec,
                "workload": {"rate_per_s": 4, "n_requests_per_gpu": 6, "prompt_mix": [{"share": 1, "tokens": [50, 400]}],
                             "reply_words": [3, 12], "sessions": {"turns": [1, 4], "think_s": [0.5, 3]}},
                "arrangements": [{"name": "one", "kind": "colocated", "gpus": 1},
                                 {"name": "four", "kind": "colocated", "gpus": 4}]}, sort_keys=False))
        else:
            path = write_scenario(tmp_path, TEN, arrangements=[{**a, "gpus": 2} if a["name"] == "one" else a for a in ONE_AND_THREE],
                                  seed=seed, workload=workload, **spec)
        scenario = load_scenario(path)
        streams = streams_by_gpus(scenario, seed)
        small, large = streams[min(streams)], streams[max(streams)]
        o = small.origin
        assert o is not None and large.origin is None
        for field in ("arrived_at_ns", "n_prompt_tokens", "n_reply_words", "draft_keys", "router_draws"):
            assert np.array_equal(getattr(small, field), getattr(large, field)[o]), (seed, field)
        assert not np.array_equal(o, np.arange(len(small))), seed  # (a subset in another order: the case at stake)


def test_seeds_run_each_seed_when_the_router_draws_on_a_timed_trace(tmp_path, capsys):
    """Review finding G4: a trace with its own arrival times and `router: power_of_two` said
    'every seed gives the same figures' and ran seed 1 only, but the seed draws the router's
    choices, which move the reading GPUs and first words."""
    path = write_scenario(tmp_path, TEN, arrangements=[{"name": "c", "kind": "colocated", "gpus": 4}],
                          router="power_of_two")
    out = tmp_path / "out"
    assert main([str(path), "--seeds", "3", "--out", str(out), "--no-plots"]) == 0
    assert "fixes every request" not in capsys.readouterr().err
    requests = pd.read_csv(out / "requests.csv")
    assert sorted(requests["seed"].unique()) == [1, 2, 3]


def test_n_requests_per_gpu_stretches_max_sim_s_below_the_rate_as_n_requests_does(tmp_path, capsys):
    """goodput probes rates below the scenario's: with `n_requests_per_gpu` and `max_sim_s` the cap
    is stretched as with `n_requests` (docs/traffic.md), not the search refused (finding F2)."""
    spec = {"name": "per-gpu-cap", "seed": 3, "max_sim_s": 10,
            "workload": {"rate_per_s": 200, "n_requests_per_gpu": 30, "prompt_mix": [{"share": 1, "tokens": [100, 2000]}],
                         "reply_words": [10, 300]},
            "cost": {"preset": "a100-80gb/llama-3-8b/tp1/vidur-sarathi"},  # capacity below 200/s: probes below it
            "arrangements": ONE_AND_THREE}
    path = tmp_path / "cap.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    assert main(["goodput", str(path), "--out", str(out), "--no-plots", "--workers", "1"]) == 0, capsys.readouterr().err
    assert (out / "goodput.csv").exists()


def test_a_count_every_rate_carries_is_refused_not_answered_with_a_huge_rate(tmp_path, capsys):
    """40 requests that 2 GPUs serve on time even all at once: with a count, a faster rate only
    packs the same requests closer, so goodput's search stepped up to 4.7e207 requests/s and
    printed it. Now refused in one line, nothing written."""
    spec = {"name": "forty", "seed": 1,
            "workload": {"rate_per_s": 2, "n_requests": 40, "prompt_mix": [{"share": 1, "tokens": [100, 2000]}],
                         "reply_words": [10, 300]},
            "cost": {"preset": "a100-80gb/llama-3-8b/tp1/vidur-sarathi"},
            "arrangements": [{"name": "co", "kind": "colocated", "gpus": 2, "chunk_tokens": 256}]}
    path = tmp_path / "forty.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert main(["goodput", str(path), "--out", str(tmp_path / "out"), "--no-plots", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "all 40 counted requests arrive within nanoseconds" in err, err
    assert not (tmp_path / "out").exists()


def test_lengths_trace_n_requests_draws_exactly_n(tmp_path):
    shutil.copy(ROOT / "tests" / "data" / "sample_lengths.csv", tmp_path / "lengths.csv")
    spec = {"name": "lengths", "seed": 2,
            "workload": {"trace": "lengths.csv", "format": "lengths", "rate_per_s": 5, "n_requests": 37},
            "arrangements": [{"name": "one", "kind": "colocated", "gpus": 1}]}
    (tmp_path / "l.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    result = run(load_scenario(tmp_path / "l.yaml"))
    assert len(result.requests) == 37 and result.summary["n_requests"].iloc[0] == 37


@pytest.mark.parametrize(("workload", "fragment"), [
    ({"n_requests": 11}, "workload.n_requests: got 11, but the trace holds 10 requests; expected at most that many"),
    ({"n_requests": 3, "measure_s": 1}, "workload.n_requests: got 3 together with measure_s 1, expected one of them"),
    ({"n_requests": 3, "n_requests_per_gpu": 2}, "got 2 together with n_requests 3, expected one of them"),
    ({"pick": "sampled"}, "workload.pick: got 'sampled' without n_requests, expected n_requests or n_requests_per_gpu"),
    ({"n_requests": 3, "pick": "random"}, "workload.pick: got 'random', expected first (the trace's first n_requests) or sampled"),
    ({"n_requests_per_gpu": 3, "warmup_s": 0.2}, "workload.warmup_s: got 0.2 with n_requests_per_gpu, expected 0"),
])
def test_bad_counts_are_one_line_exit_2(tmp_path, capsys, workload, fragment):
    path = write_scenario(tmp_path, TEN, workload=workload)
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err, err
    assert not (tmp_path / "out").exists()

"""A catalogue of bad input: each case gets exit code 2, one line on stderr naming the file, the
key or row (and line), the bad value and what was expected, and nothing is written anywhere.

The catalogue runs in-process (`main(argv)`); a few cases also go through a real subprocess.
Tests run as root, so an unwritable `--out` is made with a regular file in its path, never with
permissions.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import ROOT, write_scenario

from disagg_simpy.cli import main

BASE = {
    "name": "bad",
    "seed": 1,
    "workload": {
        "rate_per_s": 5,
        "measure_s": 2,
        "prompt_mix": [{"share": 0.3, "tokens": [3000, 8000]}, {"share": 0.7, "tokens": [200, 1200]}],
        "reply_words": [10, 40],
    },
    "arrangements": [
        {"name": "same", "kind": "colocated", "gpus": 1},
        {"name": "split", "kind": "disaggregated", "reading_gpus": 1, "writing_gpus": 1},
    ],
}
BASE_TEXT = """\
name: bad
workload:
  rate_per_s: 5
  measure_s: 2
  prompt_mix:
    - {share: 0.3, tokens: [3000, 8000]}
    - {share: 0.7, tokens: [200, 1200]}
  reply_words: [10, 40]
arrangements:
  - {name: same, kind: colocated, gpus: 1}
  - {name: split, kind: disaggregated, reading_gpus: 1, writing_gpus: 1}
"""
TRACE_HEADER = "arrived_at_s,n_prompt_tokens,n_reply_words\n"
GOOD_ROWS = "0.0,100,5\n0.5,200,6\n1.0,300,7\n"


def spec(change=None) -> str:
    """BASE as YAML, after `change(dict)` edits a deep copy of it."""
    data = copy.deepcopy(BASE)
    if change is not None:
        change(data)
    return yaml.safe_dump(data, sort_keys=False)


def text(old: str, new: str) -> str:
    assert old in BASE_TEXT
    return BASE_TEXT.replace(old, new, 1)


def trace_spec(**workload) -> str:
    return spec(lambda d: d.update(workload={"trace": "t.csv", **workload}))


def setitem(path: str, value):
    """A change that sets d[a][b]... (ints index lists)."""

    def change(d):
        *parents, leaf = [int(p) if p.isdigit() else p for p in path.split(".")]
        for p in parents:
            d = d[p]
        d[leaf] = value

    return change


def delitem(path: str):
    def change(d):
        *parents, leaf = [int(p) if p.isdigit() else p for p in path.split(".")]
        for p in parents:
            d = d[p]
        del d[leaf]

    return change


# (id, scenario YAML (str, bytes, None = no file, "DIR" = a folder), {other file: content},
#  extra argv ({tmp} is the test folder), fragments the one-line message must contain)
CATALOGUE = [
    # -- the file itself
    ("malformed-yaml", "name: [unclosed\n", {}, [], ["s.yaml:2: malformed YAML"]),
    ("tab-indent", "name: x\n\tseed: 1\n", {}, [], ["s.yaml:2: malformed YAML", "'\\t'"]),
    ("empty-file", "", {}, [], ["s.yaml: got a file that is empty, expected a YAML mapping"]),
    ("only-comments", "# nothing here\n", {}, [], ["got a file that is empty"]),
    ("top-level-list", "- 1\n- 2\n", {}, [], ["got a file that is a list, expected a YAML mapping"]),
    ("top-level-text", "hello\n", {}, [], ["s.yaml: got a file holding only 'hello', expected a YAML mapping of scenario keys"]),
    ("python-object-tag", "!!python/object/apply:os.system ['echo pwned']\n", {}, [],
     ["s.yaml:1: got the YAML tag !!python/object/apply:os.system, expected plain values"]),
    ("duplicate-key", BASE_TEXT + "name: again\n", {}, [],
     ["s.yaml:12: name: got this key a second time (first on line 1), expected each key once"]),
    ("not-utf8", b"name: caf\xe9\n", {}, [], ["s.yaml:1: got the byte 0xe9, expected UTF-8 text"]),
    ("scenario-is-a-directory", "DIR", {}, [], ["s.yaml: got a directory, expected a scenario YAML file"]),
    ("no-scenario-file", None, {}, [], ["s.yaml: no such file, expected a scenario YAML file"]),
    ("key-that-is-a-number", BASE_TEXT + "1: 2\n", {}, [], ["got the key 1, expected keys that are text"]),
    # -- keys
    ("unknown-key-did-you-mean", BASE_TEXT + "sed: 3\n", {}, [], ["s.yaml:12: sed: unknown key (did you mean 'seed'?)"]),
    ("nested-unknown-key", BASE_TEXT + "cost: {iteration_mss: 3}\n", {}, [],
     ["s.yaml:12: cost.iteration_mss: unknown key (did you mean 'iteration_ms'?)"]),
    ("unknown-arrangement-key", text("gpus: 1}", "gpus: 1, chunk: 64}"), {}, [],
     ["s.yaml:10: arrangements[0].chunk: unknown key (did you mean 'chunk_tokens'?)"]),
    ("key-of-the-other-kind", text("reading_gpus: 1, writing_gpus: 1", "gpus: 2"), {}, [],
     ["arrangements[1].gpus: unknown key for a disaggregated arrangement (it belongs to a colocated arrangement)"]),
    ("synthetic-key-on-a-trace", trace_spec(prompt_mix=[]), {"t.csv": TRACE_HEADER + GOOD_ROWS}, [],
     ["workload.prompt_mix: unknown key for a trace workload (it belongs to synthetic traffic)"]),
    ("unknown-key-no-hint", BASE_TEXT + "zzz: 1\n", {}, [],
     ["zzz: unknown key, expected one of name, seed, seeds, workload, max_sim_s, cost, slo, arrangements"]),
    ("source-key", BASE_TEXT + "source: x\n", {}, [], ["s.yaml:12: source: unknown key"]),
    ("missing-workload", spec(delitem("workload")), {}, [], ["workload: required key is missing, expected a mapping"]),
    ("missing-kind", text("kind: colocated, ", ""), {}, [],
     ["s.yaml:10: arrangements[0].kind: required key is missing, expected 'colocated' or 'disaggregated'"]),
    ("unknown-kind", text("kind: colocated", "kind: mixed"), {}, [],
     ["s.yaml:10: arrangements[0].kind: got 'mixed', expected 'colocated' or 'disaggregated'"]),
    # -- types
    ("bool-for-int", text("gpus: 1", "gpus: true"), {}, [],
     ["s.yaml:10: arrangements[0].gpus: got true, expected a whole number from 1 to 1024"]),
    ("float-for-int", text("gpus: 1", "gpus: 1.5"), {}, [], ["arrangements[0].gpus: got 1.5, expected a whole number"]),
    ("text-for-number", text("rate_per_s: 5", "rate_per_s: '5'"), {}, [],
     ["s.yaml:3: workload.rate_per_s: got '5', expected a number of requests per second > 0"]),
    ("list-for-mapping", BASE_TEXT + "cost: [1, 2]\n", {}, [], ["s.yaml:12: cost: got [1, 2], expected a mapping of iteration_ms"]),
    ("mapping-for-list", spec(setitem("arrangements", {"a": 1})), {}, [], ["arrangements: got {a: 1}, expected a list of 1 to 100"]),
    ("empty-value-for-mapping", BASE_TEXT + "slo:\n", {}, [], ["slo: got an empty value, expected a mapping of first_word_s"]),
    ("text-for-arrangement", spec(setitem("arrangements", ["same-gpu"])), {}, [],
     ["arrangements[0]: got 'same-gpu', expected a mapping like {name: same-gpu, kind: colocated, gpus: 4}"]),
    ("key-not-text", BASE_TEXT + "~: 1\n", {}, [], [f":{BASE_TEXT.count(chr(10)) + 1}: got the key ~ (an empty value), expected keys that are text"]),
    ("name-with-slash", spec(setitem("name", "../../etc")), {}, [], ["name: got '../../etc', expected a scenario name of letters"]),
    ("name-only-dots", spec(setitem("arrangements.0.name", "..")), {}, [], ["arrangements[0].name: got '..', expected a name"]),
    ("negative-seed", BASE_TEXT + "seed: -1\n", {}, [], ["seed: got -1, expected a whole number from 0 to 2**63-1"]),
    ("fractional-seed", BASE_TEXT + "seed: 1.5\n", {}, [], ["seed: got 1.5, expected a whole number"]),
    # -- ranges
    ("range-of-three", text("[3000, 8000]", "[3000, 8000, 9000]"), {}, [],
     ["s.yaml:6: workload.prompt_mix[0].tokens: got [3000, 8000, 9000], expected a range [low, high]"]),
    ("range-of-one", text("[3000, 8000]", "[3000]"), {}, [], ["workload.prompt_mix[0].tokens: got [3000], expected a range"]),
    ("range-reversed", text("[3000, 8000]", "[8000, 3000]"), {}, [],
     ["workload.prompt_mix[0].tokens: got [8000, 3000], expected a range [low, high] with low <= high"]),
    ("range-from-zero", text("[10, 40]", "[0, 40]"), {}, [], ["workload.reply_words[0]: got 0, expected a whole number of words"]),
    ("range-as-text", text("[3000, 8000]", "'3000-8000'"), {}, [], ["tokens: got '3000-8000', expected a range"]),
    # -- cross-field rules and ranges of values
    ("shares-not-summing-to-1", text("share: 0.7", "share: 0.6"), {}, [],
     ["s.yaml:5: workload.prompt_mix: got shares 0.3 + 0.6 = 0.9, expected shares summing to 1"]),
    ("share-zero", text("share: 0.3", "share: 0"), {}, [], ["prompt_mix[0].share: got 0, expected a number > 0 and <= 1"]),
    ("duplicate-arrangement-names", BASE_TEXT + "  - {name: same, kind: colocated, gpus: 2}\n", {}, [],
     ["s.yaml:12: arrangements[2].name: got 'same' again (also arrangements[0]), expected unique names"]),
    ("warmup-not-below-measure", text("measure_s: 2", "measure_s: 2\n  warmup_s: 3"), {}, [],
     ["workload.warmup_s: got 3, expected less than measure_s (2)"]),
    ("warmup-equal-to-measure", text("measure_s: 2", "measure_s: 2\n  warmup_s: 2"), {}, [],  # nothing measured
     ["workload.warmup_s: got 2, expected less than measure_s (2)"]),
    ("trace-warmup-equal-to-measure", trace_spec(warmup_s=1, measure_s=1), {"t.csv": TRACE_HEADER + GOOD_ROWS}, [],
     ["workload.warmup_s: got 1, expected less than measure_s (1)"]),
    ("cap-below-window", BASE_TEXT + "max_sim_s: 1\n", {}, [], ["max_sim_s: got 1, expected at least workload.measure_s (2)"]),
    ("zero-gpus", text("gpus: 1", "gpus: 0"), {}, [], ["arrangements[0].gpus: got 0, expected a whole number from 1"]),
    ("chunk-tokens-zero", text("gpus: 1}", "gpus: 1, chunk_tokens: 0}"), {}, [],
     ["arrangements[0].chunk_tokens: got 0, expected a whole number of tokens from 1"]),
    ("no-reading-gpu", text("reading_gpus: 1", "reading_gpus: 0"), {}, [], ["arrangements[1].reading_gpus: got 0"]),
    ("no-writing-gpu", text("writing_gpus: 1", "writing_gpus: 0"), {}, [], ["arrangements[1].writing_gpus: got 0"]),
    ("negative-slo", BASE_TEXT + "slo: {first_word_s: -1}\n", {}, [], ["slo.first_word_s: got -1, expected a number of seconds > 0"]),
    ("zero-freeze-limit", BASE_TEXT + "slo: {freeze_ms: 0}\n", {}, [], ["slo.freeze_ms: got 0, expected a number of ms > 0"]),
    ("nan-rate", text("rate_per_s: 5", "rate_per_s: .nan"), {}, [], ["workload.rate_per_s: got .nan, expected a number"]),
    ("inf-window", text("measure_s: 2", "measure_s: .inf"), {}, [], ["workload.measure_s: got .inf, expected a number of seconds"]),
    ("nan-cost", BASE_TEXT + "cost: {per_reply_ms: .nan}\n", {}, [], ["cost.per_reply_ms: got .nan, expected a number of ms >= 0"]),
    ("no-arrangements", spec(setitem("arrangements", [])), {}, [], ["arrangements: got [], expected a list of 1 to 100"]),
    ("empty-prompt-mix", spec(setitem("workload.prompt_mix", [])), {}, [], ["workload.prompt_mix: got [], expected a list"]),
    # -- huge numbers: refused by a documented limit, never a crash or an endless run
    ("rate-1e9", text("rate_per_s: 5", "rate_per_s: 1e9"), {}, [],
     ["s.yaml:3: workload.rate_per_s: got 1e+09, which expects, up to the cap at 602 s, 602,000,000,000 requests, "
      "above the limit of 5,000,000; expected a lower rate_per_s or max_sim_s"]),
    ("iteration-of-a-picosecond", BASE_TEXT + "cost: {iteration_ms: 1.0e-9}\n", {}, [],
     ["cost.iteration_ms: got 1e-09, expected a number of ms from 1e-06 (1 ns)"]),
    ("too-many-iterations", BASE_TEXT + "cost: {iteration_ms: 0.001}\n", {}, [],
     ["cost.iteration_ms: got 0.001 ms, with which same (1 instance) could run 602,000,001 iterations", "limit of 10,000,000"]),
    ("iterations-counted-per-instance", spec(lambda d: d.update(arrangements=[{"name": "big", "kind": "colocated", "gpus": 256,
                                                                                "tp": 8}], cost={"iteration_ms": 0.6})), {}, [],
     ["with which big (32 instances of 256 GPUs) could run 32,106,699 iterations before the cap at 602 s"]),
    ("gpus-1e11", text("gpus: 1", "gpus: 100000000000"), {}, [], ["arrangements[0].gpus: got 100000000000, expected a whole number from 1 to 1024"]),
    ("trillion-token-ship", text("[3000, 8000]", "[1000000000000, 1000000000000]") + "cost: {kv_ship_ms_per_token: 1000}\n", {}, [],
     ["cost.kv_ship_ms_per_token: got 1000 ms, with which the longest prompt (1e+12 tokens) ships in 1e+12 s"]),
    ("tokens-past-2-53", text("[3000, 8000]", "[3000, 100000000000000000000]"), {}, [],
     ["workload.prompt_mix[0].tokens[1]: got 100000000000000000000, expected a whole number of tokens from 1 to 2**53"]),
    ("mean-gap-limit-huge", BASE_TEXT + "slo: {mean_gap_ms: 1.0e+9}\n", {}, [], ["slo.mean_gap_ms: got 1e+09, expected a number of ms > 0, up to 100000"]),
    ("cap-of-centuries", BASE_TEXT + "max_sim_s: 1.0e+10\n", {}, [], ["max_sim_s: got 1e+10, expected a number of seconds > 0, up to 1e+09"]),
    ("histogram-weight-1e308", text("reply_words: [10, 40]", "reply_words: {histogram: {edges: [1, 10, 20], weights: [1.0e+308, 1]}}"),
     {}, [], ["workload.reply_words.histogram.weights[0]: got 1e+308, expected a number >= 0, up to 1e+300"]),
    ("lognormal-sd-1e300", text("reply_words: [10, 40]", "reply_words: {lognormal: {mean: 20, sd: 1.0e+300, min: 1, max: 100}}"),
     {}, [], ["workload.reply_words.lognormal.sd: got 1e+300, expected a number > 0, up to 2**53"]),
    # -- traces
    ("trace-missing", trace_spec(trace="nope.csv"), {}, [], ["s.yaml: workload.trace: got 'nope.csv' (no such file:", "expected a trace file"]),
    ("trace-is-a-directory", trace_spec(trace="d"), {"d": "DIR"}, [], ["workload.trace: got 'd' (a directory:"]),
    ("trace-missing-column", trace_spec(), {"t.csv": "arrived_at_s,n_prompt_tokens\n0,5\n"}, [],
     ["t.csv:1: header: got 'arrived_at_s,n_prompt_tokens' (missing n_reply_words)"]),
    ("trace-negative-count", trace_spec(), {"t.csv": TRACE_HEADER + "0,100,5\n1,-5,3\n"}, [],
     ["t.csv:3: n_prompt_tokens: got -5, expected a positive whole number"]),
    ("trace-non-numeric-cell", trace_spec(), {"t.csv": TRACE_HEADER + "0,100,5\n1,abc,3\n"}, [],
     ["t.csv:3: n_prompt_tokens: got 'abc', expected a positive whole number"]),
    ("trace-fractional-count", trace_spec(), {"t.csv": TRACE_HEADER + "0,100,2.5\n"}, [], ["t.csv:2: n_reply_words: got 2.5"]),
    ("trace-arrivals-go-back", trace_spec(), {"t.csv": TRACE_HEADER + "0,100,5\n2,100,5\n1,100,5\n"}, [],
     ["t.csv:4: arrived_at_s: got 1 after 2 on line 3, expected arrival times that never decrease"]),
    ("trace-negative-arrival", trace_spec(), {"t.csv": TRACE_HEADER + "-1,100,5\n"}, [], ["t.csv:2: arrived_at_s: got -1, expected a time >= 0 s"]),
    ("trace-empty-file", trace_spec(), {"t.csv": ""}, [], ["t.csv: file: got an empty file, expected request rows"]),
    ("trace-arrival-of-1e300", trace_spec(), {"t.csv": TRACE_HEADER + "0,100,5\n1e300,100,5\n"}, [],
     ["t.csv:3: arrived_at_s: got 1e300", "expected a time of at most 1e+09 s"]),
    ("trace-time-scale-overflow", trace_spec(time_scale=1e-300), {"t.csv": TRACE_HEADER + GOOD_ROWS}, [],
     ["time_scale: got 1e-300, which puts the last arrival at", "expected arrivals within 1e+09 s"]),
    ("trace-unknown-format", trace_spec(format="parquet"), {}, [], ["workload.format: got 'parquet', expected one of csv, azure, mooncake, lengths"]),
    ("trace-empty-path", trace_spec(trace=""), {}, [], ["workload.trace: got '', expected a trace file path"]),
    ("trace-count-past-2-53", trace_spec(), {"t.csv": TRACE_HEADER + "0,1e20,5\n"}, [], ["n_prompt_tokens: got 1e+20, expected a whole number up to 2**53"]),
    # -- prefix caching (E13)
    ("prefix-cache-zero", BASE_TEXT + "prefix_cache_tokens: 0\n", {}, [],
     ["s.yaml:12: prefix_cache_tokens: got 0, expected a whole number of tokens per instance from 1 to 2**53"]),
    ("prefix-block-zero", BASE_TEXT + "prefix_block_tokens: 0\n", {}, [],
     ["s.yaml:12: prefix_block_tokens: got 0, expected a whole number of tokens from 1 to 2**53"]),
    ("router-unknown", BASE_TEXT + "router: fastest\n", {}, [],
     ["s.yaml:12: router: got 'fastest', expected one of least_loaded, round_robin, power_of_two, prefix_aware"]),
    ("router-load-cap-zero", BASE_TEXT + "router_load_cap_tokens: 0\n", {}, [],
     ["router_load_cap_tokens: got 0, expected a whole number of tokens from 1 to 2**53 (router: prefix_aware only)"]),
    ("session-of-no-turns", text("reply_words: [10, 40]", "reply_words: [10, 40]\n  sessions: {turns: [0, 3], think_s: [1, 2]}"),
     {}, [], ["workload.sessions.turns[0]: got 0, expected a whole number of turns from 1 to 1000"]),
    ("prefix-tokens-past-their-limit", text("reply_words: [10, 40]", "reply_words: [10, 40]\n  prefixes: {share: 0.5, "
                                            "groups: 3, tokens: [1, 20000000]}"), {}, [],
     ["workload.prefixes.tokens[1]: got 20000000, expected a whole number of tokens from 1 to 10,000,000"]),
    ("prefix-cache-below-a-block", BASE_TEXT + "prefix_cache_tokens: 100\n", {}, [],
     ["prefix_cache_tokens: got 100, expected at least prefix_block_tokens (512): a cache smaller than one block"]),
    ("prefix-aware-without-cache", BASE_TEXT + "router: prefix_aware\n", {}, [],
     ["router: got 'prefix_aware' without prefix_cache_tokens, expected prefix_cache_tokens"]),
    ("prefix-block-not-dividing-the-trace", spec(lambda d: d.update(
        workload={"trace": "t.jsonl", "format": "mooncake"}, prefix_cache_tokens=4096, prefix_block_tokens=300)),
     {"t.jsonl": '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n'}, [],
     ["prefix_block_tokens: got 300, expected a divisor of the mooncake trace's block of 512 tokens"]),
    ("prefix-hash-ids-too-few", spec(lambda d: d.update(
        workload={"trace": "t.jsonl", "format": "mooncake"}, prefix_cache_tokens=4096)),
     {"t.jsonl": '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n'
                 '{"timestamp": 1, "input_length": 600, "output_length": 5, "hash_ids": [0]}\n'}, [],
     ["t.jsonl:2: hash_ids: got [0] (1 entry), expected 2 whole numbers"]),
    ("prefix-cache-with-roles-that-change", spec(lambda d: d.update(prefix_cache_tokens=4096) or d["arrangements"][1].update(
        roles={"schedule": [{"from_s": 1, "reading_gpus": 1}]}, reading_gpus=1, writing_gpus=2)), {}, [],
     ["arrangements[1].roles: got roles that change (E12) with prefix_cache_tokens, expected static roles"]),
    ("prefix-longer-than-a-prompt-class", spec(lambda d: d["workload"].update(
        prefixes={"share": 0.6, "groups": 20, "tokens": [500, 2000]})), {}, [],
     ["workload.prefixes.tokens: got up to 2,000 tokens, but prompt_mix[1] draws prompts from 200 tokens; "
      "expected prefixes shorter than every prompt"]),
    # -- flags
    ("flag-rate-not-a-number", BASE_TEXT, {}, ["--rate", "fast"], ["--rate: got 'fast', expected a number"]),
    ("flag-rate-zero", BASE_TEXT, {}, ["--rate", "0"], ["--rate: got '0', expected a number > 0"]),
    ("flag-rate-huge", BASE_TEXT, {}, ["--rate", "1e9"],
     ["--rate 1e+09: got 1e+09, which expects, up to the cap at 602 s, 602,000,000,000 requests", "(it sets workload.rate_per_s of"]),
    ("flag-measure-past-limit", BASE_TEXT, {}, ["--measure-s", "1e10"], ["--measure-s 1e+10: got 1e+10, expected a number of seconds > 0"]),
    ("flag-measure-equal-to-warmup", text("measure_s: 2", "measure_s: 2\n  warmup_s: 1"), {}, ["--measure-s", "1", "--seeds", "2"],
     ["workload.warmup_s: got 1, expected less than measure_s (1): the measured window is [warmup_s, measure_s), so a "
      "shorter run keeps measure_s above 1", "(with --measure-s 1 from the command line)"]),  # (not --seeds)
    ("flag-measure-with-a-count", text("measure_s: 2", "n_requests: 20"), {}, ["--measure-s", "5", "--seeds", "2"],
     ["workload.n_requests: got 20 together with measure_s 5", "to shorten the run, lower n_requests rather than set "
      "measure_s) (with --measure-s 5 from the command line)"]),
    ("flag-measure-past-cap", BASE_TEXT + "max_sim_s: 5\n", {}, ["--measure-s", "10"],
     ["max_sim_s: got 5, expected at least workload.measure_s (10) (with --measure-s 10 from the command line)"]),
    ("flag-seeds-zero", BASE_TEXT, {}, ["--seeds", "0"], ["--seeds: got '0', expected a whole number from 1 to 10000"]),
    ("flag-seed-negative", BASE_TEXT, {}, ["--seed", "-3"], ["--seed: got '-3'"]),
    ("flag-seeds-too-many-rows", BASE_TEXT, {}, ["--rate", "1000", "--seeds", "300"],
     ["--seeds: got 602,000 requests x 2 arrangements x 300 seeds = 361,200,000 rows to write, above the limit of "
      "250,000,000; expected fewer seeds"]),
    ("too-many-rows-to-keep", spec(lambda d: d.update(
        arrangements=[{"name": f"a{i}", "kind": "colocated", "gpus": 1} for i in range(10)],
        workload={**d["workload"], "rate_per_s": 5000})), {}, [],
     ["workload.rate_per_s: got 5000, which expects, up to the cap at 602 s, 3,010,000 requests x 10 arrangements = "
      "30,100,000 rows to keep, above the limit of 25,000,000"]),
    ("too-many-iterations-in-all", spec(lambda d: d.update(
        arrangements=[{"name": f"a{i}", "kind": "colocated", "gpus": 8} for i in range(100)])), {}, [],
     ["cost.iteration_ms: got 12 ms, with which the 100 arrangements could run 40,134,133 iterations in all",
      "above the limit of 25,000,000 rows kept"]),
    ("flag-seed-past-2-63", BASE_TEXT, {}, ["--seed", str(2**63 - 1), "--seeds", "2"], ["--seeds: got 2 from seed 9223372036854775807"]),
    ("flag-unknown", BASE_TEXT, {}, ["--bogus"], ["unrecognized arguments: --bogus"]),
    ("out-is-a-file", BASE_TEXT, {"f": "old"}, ["--out", "{tmp}/f"], ["--out: {tmp}/f is a file, expected a folder"]),
    ("out-under-a-file", BASE_TEXT, {"f": "old"}, ["--out", "{tmp}/f/results"],
     ["--out: cannot create {tmp}/f/results: {tmp}/f is a file, expected folders"]),
    ("out-empty", BASE_TEXT, {}, ["--out", ""], ["--out: got an empty path, expected a folder"]),
    ("save-trace-over-the-scenario", BASE_TEXT, {}, ["--save-trace", "{tmp}/s.yaml"],
     ["--save-trace {tmp}/s.yaml: writing {tmp}/s.yaml would overwrite the scenario file"]),
    ("out-over-the-trace", trace_spec(trace="o/summary.csv"), {"o/summary.csv": TRACE_HEADER + GOOD_ROWS}, ["--out", "{tmp}/o"],
     ["--out {tmp}/o/summary.csv: writing {tmp}/o/summary.csv would overwrite the trace file"]),
    ("save-trace-is-a-folder", BASE_TEXT, {"d": "DIR"}, ["--save-trace", "{tmp}/d"], ["--save-trace: got {tmp}/d, which is a folder"]),
    ("plots-empty", BASE_TEXT, {}, ["--plots", ""], ["--plots: got an empty path, expected a folder"]),
    ("plots-under-a-file", BASE_TEXT, {"f": "old"}, ["--plots", "{tmp}/f/p"], ["--plots: cannot create {tmp}/f/p: {tmp}/f is a file"]),
    # -- E12: roles that change
    ("roles-leave-writing-empty", text("writing_gpus: 1}", "writing_gpus: 1, roles: {schedule: [{from_s: 5, "
                                       "reading_gpus: 2}]}}"), {}, [],
     ["arrangements[1].roles.schedule[0].reading_gpus: got 2 of 2 GPUs, expected at most 1 (the writing side needs a GPU)"]),
    ("roles-no-reading", text("writing_gpus: 1}", "writing_gpus: 1, roles: {schedule: [{from_s: 5, reading_gpus: 0}]}}"),
     {}, [], ["arrangements[1].roles.schedule[0].reading_gpus: got 0"]),
    ("roles-out-of-order", text("reading_gpus: 1, writing_gpus: 1}", "reading_gpus: 1, writing_gpus: 2, roles: {schedule: "
                                "[{from_s: 9, reading_gpus: 2}, {from_s: 5, reading_gpus: 1}]}}"), {}, [],
     ["arrangements[1].roles.schedule[1].from_s: got 5 after 9, expected entries in increasing from_s"]),
    ("roles-on-a-mixed-pool", text("writing_gpus: 1}", "writing_gpus: 1, reading_gpu: h100-80gb, writing_gpu: a100-80gb, "
                                   "roles: {policy: queue}}"), {}, [],
     ["arrangements[1].roles: got reading GPUs h100-80gb and writing GPUs a100-80gb, expected one GPU kind on both sides"]),
    ("roles-negative-switch", text("writing_gpus: 1}", "writing_gpus: 1, roles: {policy: queue, switch_s: -1}}"), {}, [],
     ["arrangements[1].roles.switch_s: got -1, expected a number of seconds >= 0, up to 1e+09 (a move's warm-up)"]),
    ("roles-unknown-policy", text("writing_gpus: 1}", "writing_gpus: 1, roles: {policy: magic}}"), {}, [],
     ["arrangements[1].roles.policy: got 'magic', expected queue (the one policy; or a schedule of reading GPUs instead)"]),
    ("roles-negative-cooldown", text("writing_gpus: 1}", "writing_gpus: 1, roles: {policy: queue, cooldown_s: -5}}"), {}, [],
     ["arrangements[1].roles.cooldown_s: got -5, expected a number of seconds >= 0"]),
    ("roles-step-not-a-mapping", text("writing_gpus: 1}", "writing_gpus: 1, roles: {schedule: [3]}}"), {}, [],
     ["arrangements[1].roles.schedule[0]: got 3, expected a mapping like {from_s: 3600, reading_gpus: 2}"]),
    ("tp-on-a-split", text("writing_gpus: 1}", "writing_gpus: 1, tp: 2}"), {}, [],
     ["arrangements[1].tp: unknown key for a disaggregated arrangement (it belongs to a colocated arrangement)",
      "writing_kv_capacity_tokens, kv_path, roles"]),  # (the keys a user writes: never the internal role_changes)
    ("internal-role-changes-key", text("writing_gpus: 1}", "writing_gpus: 1, role_changes: 2}"), {}, [],
     ["arrangements[1].role_changes: unknown key, expected one of"]),
    ("roles-policy-colocated", text("gpus: 1}", "gpus: 1, roles: {policy: queue}}"), {}, [],
     ["arrangements[0].roles: got a schedule or policy, expected static: a colocated arrangement's GPUs all read"]),
    ("roles-start-differs", text("writing_gpus: 1}", "writing_gpus: 2, roles: {schedule: [{from_s: 0, reading_gpus: 2}]}}"),
     {}, [], ["arrangements[1].roles.schedule[0].reading_gpus: got 2 from 0 s, expected the arrangement's reading_gpus 1"]),
]


def _make(folder: Path, name: str, content) -> None:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if content == "DIR":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file and folder under `folder`, with each file's bytes."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


def setup_case(folder: Path, scenario, files: dict, extra: list[str]) -> list[str]:
    if scenario is not None:
        _make(folder, "s.yaml", scenario)
    for name, content in files.items():
        _make(folder, name, content)
    # an earlier run's results, which a failed run must leave as they were
    _make(folder, "out/summary.csv", "earlier results\n")
    args = [a.replace("{tmp}", str(folder)) for a in extra]
    if "--out" not in extra:
        args += ["--out", str(folder / "out")]
    if "--plots" not in extra:
        args += ["--no-plots"]
    return [str(folder / "s.yaml"), *args]


def test_the_catalogue_has_at_least_30_cases_with_unique_ids():
    ids = [c[0] for c in CATALOGUE]
    assert len(ids) >= 30 and len(set(ids)) == len(ids)


@pytest.mark.parametrize(("scenario", "files", "extra", "fragments"), [c[1:] for c in CATALOGUE], ids=[c[0] for c in CATALOGUE])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, scenario, files, extra, fragments):
    argv = setup_case(tmp_path, scenario, files, extra)
    before = snapshot(tmp_path)
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("error: ") and err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err and captured.out == ""
    for fragment in fragments:
        assert fragment.replace("{tmp}", str(tmp_path)) in err, err
    assert snapshot(tmp_path) == before  # nothing created, nothing changed


def test_without_out_nothing_is_created_under_runs(tmp_path, capsys, monkeypatch):
    _make(tmp_path, "s.yaml", text("gpus: 1", "gpus: 0"))
    monkeypatch.chdir(tmp_path)
    assert main(["s.yaml", "--no-plots"]) == 2
    assert "arrangements[0].gpus: got 0" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


SUBPROCESS_CASES = ["malformed-yaml", "unknown-key-did-you-mean", "trace-negative-count", "out-under-a-file", "flag-rate-huge"]


@pytest.mark.parametrize("case_id", SUBPROCESS_CASES)
def test_a_real_process_gets_the_same_one_line_and_exit_2(tmp_path, case_id):
    _, scenario, files, extra, fragments = next(c for c in CATALOGUE if c[0] == case_id)
    argv = setup_case(tmp_path, scenario, files, extra)
    before = snapshot(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "disagg_simpy", *argv], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == "" and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    for fragment in fragments:
        assert fragment.replace("{tmp}", str(tmp_path)) in done.stderr
    assert snapshot(tmp_path) == before


def test_an_internal_error_is_one_line_exit_1(tmp_path, capsys, monkeypatch):
    import disagg_simpy.api

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(disagg_simpy.api, "run_each", broken)
    argv = setup_case(tmp_path, BASE_TEXT, {}, [])
    before = snapshot(tmp_path)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: internal error (a bug; please report it): ZeroDivisionError: a bug") and err.count("\n") == 1
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(("module", "name", "value", "fragment"), [
    ("workload.traces", "MAX_TRACE_ROWS", 2, "t.csv: file: got 4 lines, expected at most 2 rows (and a header)"),
    ("workload.traces", "MAX_TRACE_BYTES", 50, "t.csv: file: got 73 bytes, expected a trace file of at most 50 bytes"),
    ("scenario.limits", "MAX_REQUESTS", 2, "workload: got, up to the cap at 601 s, 3 requests, above the limit of 2"),
    ("scenario.loading", "MAX_SCENARIO_BYTES", 20, "s.yaml: got 170 bytes, expected a scenario YAML file of at most 20 bytes"),
])
def test_size_limits_scaled_down_are_one_line_errors(tmp_path, capsys, monkeypatch, module, name, value, fragment):
    """The file and request limits, shown on small files by lowering them."""
    import importlib

    monkeypatch.setattr(importlib.import_module(f"disagg_simpy.{module}"), name, value)
    argv = setup_case(tmp_path, trace_spec(), {"t.csv": TRACE_HEADER + GOOD_ROWS}, [])
    before = snapshot(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and fragment in err, err
    assert snapshot(tmp_path) == before


def test_rows_written_over_seeds_are_checked_after_the_first_seed_of_a_trace(tmp_path, capsys, monkeypatch):
    """What a run writes is known only once it ran: the first seed's rows x the seeds decide
    (seeds are not kept, so the limit is on the files): up front, 6 requests x 2 arrangements x
    2 seeds = 24 rows pass a limit of 100, but the first seed writes each reply's iterations too.
    (A `lengths` trace: seeds draw its requests; on a csv trace every seed would be the same.)"""
    monkeypatch.setattr("disagg_simpy.scenario.limits.MAX_WRITTEN_ROWS", 100)
    workload = {"trace": "t.csv", "format": "lengths", "rate_per_s": 2, "measure_s": 2}
    scenario = spec(lambda d: d.update(workload=workload, max_sim_s=3, cost={"iteration_ms": 10}))
    lengths = "num_prefill_tokens,num_decode_tokens\n100,50\n200,60\n"
    argv = setup_case(tmp_path, scenario, {"t.csv": lengths}, ["--seeds", "2"])
    before = snapshot(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --seeds: got ") and "rows written by the first seed x 2 seeds, above the limit of 100 rows written" in err
    assert err.count("\n") == 1 and snapshot(tmp_path) == before


def test_the_reference_figures_are_shares(tmp_path, capsys):
    path = write_scenario(tmp_path, [(0.0, 100, 3)], reference={"source": "a paper", "on_time_pct": {"same": 300}})
    assert main([str(path), "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "reference.on_time_pct.same: got 300" in err and "from 0 to 100" in err


def test_the_iteration_limit_counts_instances_not_gpus(tmp_path):
    """Issue 37 item 18: `gpus: 256, tp: 8` was refused for 12.8 million iterations counted per
    GPU, though its 32 instances run at most 1.6 million (an instance's TP GPUs share each)."""
    from disagg_simpy import load_scenario

    path = tmp_path / "s.yaml"
    path.write_text(spec(lambda d: d.update(arrangements=[{"name": "big", "kind": "colocated", "gpus": 256, "tp": 8}])))
    assert load_scenario(path).arrangements[0].n_instances == 32


@pytest.mark.parametrize("command", ["goodput", "plan"])
@pytest.mark.parametrize("pct", ["100", "150"])
def test_cost_error_of_100_or_more_is_refused_before_any_run(tmp_path, capsys, command, pct):
    """F28: costs off by 100% or more go to zero or below; it was a pydantic dump after the
    whole search (exit 1, a store left behind)."""
    _make(tmp_path, "s.yaml", BASE_TEXT)
    extra = ["--gpus", "2"] if command == "plan" else []
    argv = [command, str(tmp_path / "s.yaml"), *extra, "--cost-error", pct, "--out", str(tmp_path / "out"), "--no-plots"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--cost-error: got '{pct}', expected a percentage above 0 and below 100" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, said", [
    (["validate", "--seed", "5"], "unrecognized arguments: --seed"),  # (was --seeds 5)
    (["goodput", "{s}", "--rate", "10"], "unrecognized arguments: --rate"),  # (was --rate-per-gpu 10)
    (["presets", "build", "--model", "cfg.json", "--gpu", "h100-80gb", "--engine", "vllm-0.24", "--tp", "1"],
     "required: --model-config"),  # (was --model-config cfg.json)
    (["{s}", "--see", "2"], "unrecognized arguments: --see"),  # (was --seed 2)
])
def test_a_flag_is_never_taken_for_a_longer_one(tmp_path, capsys, argv, said):
    """F29: argparse's prefix matching made a flag one command lacks silently another one."""
    _make(tmp_path, "s.yaml", BASE_TEXT)
    argv = [a.replace("{s}", str(tmp_path / "s.yaml")) for a in argv]
    assert main([*argv, "--out", str(tmp_path / "out")] if argv[0] != "presets" else argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err
    assert not (tmp_path / "out").exists()

"""The page with speculative decoding (E16): several words of a reply share an iteration. Its data
gives each reply's writing iterations (`wn`), and the iterations the player draws for a reply are
exactly the distinct times of the run's words 2.. (the default scenario at 6 s, k = 4, a = 0.7)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from helpers import DEFAULT
from test_page_data import decode_iterations, decode_requests, ns

from disagg_simpy import load_scenario, run
from disagg_simpy.page import embedded_data, page_html


@pytest.fixture(scope="module")
def spec_res(tmp_path_factory):
    spec = yaml.safe_load(DEFAULT.read_text())
    spec["speculative"] = {"tokens": 4, "acceptance": 0.7}
    path = tmp_path_factory.mktemp("speculative") / "speculative.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return run(load_scenario(path).with_overrides(**{"workload.measure_s": 6}))


def test_the_players_iterations_are_the_times_of_the_words(spec_res):
    data = embedded_data(page_html(spec_res))
    lo, hi = data["span_ns"]
    shared = 0
    for a in data["arrangements"]:
        its, r = decode_iterations(data, a), decode_requests(data, a)
        wn = np.array(a["requests"]["wn"])
        words = spec_res.words(a["name"])
        at = ns(words["at_s"])
        for i in range(len(r["id"])):
            if r["jw"][i] < 0:
                continue
            it = its[r["wg"][i]]
            wend = it["end"][it["rep"] > 0]
            local = r["jw"][i] - it["wfirst"] + np.arange(wn[i])  # as player.js's wordRange
            got = {int(t) for t in wend[local[(local >= 0) & (local < len(wend))]] if lo < t <= hi}
            mine = at[(words["request_id"].to_numpy() == r["id"][i]) & (words["word"].to_numpy() >= 2)]
            assert got == {int(t) for t in mine if lo < t <= hi}, (a["name"], r["id"][i])
            shared += int(r["n"][i] - 1 - wn[i])
    assert shared > 0  # words that shared an iteration with the one before


def test_without_speculation_the_page_has_no_wn():
    res = run(load_scenario(DEFAULT).with_overrides(**{"workload.measure_s": 2}))
    assert all("wn" not in a["requests"] for a in embedded_data(page_html(res))["arrangements"])

"""Several seeds in pictures and the page (issue 24): the page's table is summary.csv's means
with intervals and each seed's figure; the player and the timelines show the representative
seed, named with the reason; the summary's distributions pool the seeds."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from helpers import DEFAULT

from disagg_simpy.cli import main
from disagg_simpy.page import embedded_data
from disagg_simpy.results.seeds import representative_seed


def test_the_representative_seed_is_closest_to_the_means_lowest_on_a_tie():
    summary = pd.DataFrame({"seed": [1, 1, 2, 2, 3, 3, 4, 4], "arrangement": ["a", "b"] * 4,
                            "on_time_pct": [45.0, 72.0, 95.0, 100.0, 93.0, 99.0, 97.0, 100.0]})
    # means a 82.5, b 92.75: seed 3 (10.5^2 + 6.25^2) is closer than 2 (12.5^2 + 7.25^2) or 4
    seed, why = representative_seed(summary)
    assert seed == 3 and why == "on-time shares closest to the means of 4 seeds"
    tie = pd.DataFrame({"seed": [5, 6], "arrangement": ["a", "a"], "on_time_pct": [40.0, 60.0]})
    assert representative_seed(tie)[0] == 5


@pytest.fixture(scope="module")
def three_seeds(tmp_path_factory):
    out = tmp_path_factory.mktemp("seeds")
    argv = [str(DEFAULT), "--seeds", "3", "--measure-s", "3", "--out", str(out), "--html", str(out / "page.html"),
            "--no-plots"]
    assert main(argv) == 0
    return out


def test_the_pages_table_is_summary_csvs_means_with_each_seeds_figure(three_seeds):
    data = embedded_data((three_seeds / "page.html").read_text())
    summary = pd.read_csv(three_seeds / "summary.csv")
    assert data["scenario"]["seeds"] == [1, 2, 3]
    for a in data["arrangements"]:
        rows = summary[summary["arrangement"] == a["name"]]
        for column in ("on_time_pct", "froze_pct", "first_word_p90_s", "longest_gap_ms"):
            assert a["means"][column] == pytest.approx(rows[column].mean(), abs=1e-6)
            assert a["by_seed"][column] == pytest.approx(rows[column].tolist(), abs=1e-6)
            low, high = a["interval"][column]
            assert low <= a["means"][column] <= high


def test_the_player_and_the_timelines_show_the_representative_seed_and_say_why(three_seeds):
    summary = pd.read_csv(three_seeds / "summary.csv")
    seed, why = representative_seed(summary)
    data = embedded_data((three_seeds / "page.html").read_text())
    assert data["scenario"]["seed"] == seed and data["scenario"]["seed_why"] == why
    player = data["arrangements"][0]["summary"]
    shown = summary[(summary["seed"] == seed) & (summary["arrangement"] == data["arrangements"][0]["name"])]
    assert player["on_time_pct"] == pytest.approx(shown["on_time_pct"].iloc[0], abs=1e-6)
    info = json.loads((three_seeds / "run.json").read_text())
    assert info["pictures_seed"] == {"seed": seed, "why": why}

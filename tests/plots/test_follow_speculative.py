"""The --follow picture under E16 (speculative decoding): an iteration writes several words of a
reply at one instant, so its title and legend say that a tick can stand for several words
(review2 G17: they spoke of one tick per word, as without E16)."""

from __future__ import annotations

from helpers import run_rows

from disagg_simpy.plots.follow import follow_figure

HAND = {"iteration_ms": 10, "per_prompt_token_ms": 0.01, "per_reply_ms": 0.5, "kv_ship_ms_per_token": 0}


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]


def test_the_follow_picture_says_words_written_together_share_a_tick(tmp_path):
    rows = [(0.0, 40, 30), (0.01, 40, 30)]
    arrangements = [{"name": "same", "kind": "colocated", "gpus": 1}]
    on = run_rows(tmp_path, rows, arrangements, cost=HAND, speculative={"tokens": 3, "acceptance": 0.6})
    texts = _texts(follow_figure(on, 0))
    assert "later words (1 to 4 a tick, E16)" in texts and "a later word" not in texts
    assert "close-up: arrival to word 3; words written together (1 to 4 an iteration, E16) share a tick" in texts
    (tmp_path / "off").mkdir()
    off = _texts(follow_figure(run_rows(tmp_path / "off", rows, arrangements, cost=HAND), 0))
    assert "a later word" in off and "close-up: arrival to word 3" in off

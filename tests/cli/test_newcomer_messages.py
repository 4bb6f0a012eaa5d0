"""Messages a first-time user meets, found by running the docs' commands on a fresh clone:
the top-level help names every presets subcommand, `presets show` has no dangling colon when a
preset has no engine note, and an unknown preset name reads as one sentence."""

from __future__ import annotations

from disagg_simpy.cli import main
from disagg_simpy.costs.presets import NAMES, PRESETS, problem


def test_top_level_help_names_every_presets_subcommand(capsys):
    try:
        main(["--help"])
    except SystemExit:
        pass
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  presets "))
    for sub in ("show", "compare", "gpus", "build"):
        assert sub in line, line


def test_presets_show_header_has_no_dangling_colon(capsys, monkeypatch):
    """Every shipped preset has an engine note (composed ones say what the scheduler does); one
    without (a preset added later) must still read as a sentence."""
    assert all(PRESETS[n].get("engine_note") for n in NAMES)
    name = NAMES[0]
    monkeypatch.setitem(PRESETS, name, {k: v for k, v in PRESETS[name].items() if k != "engine_note"})
    assert main(["presets", "show", name]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert not first.rstrip().endswith(":"), first


def test_unknown_preset_is_one_sentence():
    message = problem("nosuch")
    assert message is not None
    assert "; (" not in message, message

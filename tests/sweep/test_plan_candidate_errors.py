"""A refusal raised on one of plan's candidates names the candidate and the flag that made it,
never the user's file's arrangements[i] (which is another arrangement, or none); and --tp starts
from a preset of any TP degree, so the remedy such a refusal gives works (review F18)."""

from __future__ import annotations

import yaml
from helpers import SMALL_TRAFFIC

from disagg_simpy.cli import main

TP2 = "a100-80gb/codellama-34b/tp2/vidur-sarathi"


def _scenario(tmp_path, arrangement_cost: bool):
    arrangement = {"name": "mine", "kind": "colocated", "gpus": 4, "tp": 2}
    spec = {"name": "tp2", "seeds": 1, "max_sim_s": 20, "workload": {**SMALL_TRAFFIC, "measure_s": 2},
            "arrangements": [{**arrangement, "cost": {"preset": TP2}} if arrangement_cost else arrangement]}
    if not arrangement_cost:
        spec["cost"] = {"preset": TP2}
    path = tmp_path / "tp2.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_candidates_refusal_names_the_candidate_not_the_file(tmp_path, capsys):
    path = _scenario(tmp_path, arrangement_cost=True)
    assert main(["plan", str(path), "--gpus", "4", "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    # the file's arrangements[0] writes tp: 2; the TP1 candidate is plan's first (same-gpu)
    assert err.startswith("error: --gpus: plan's candidate same-gpu (built from "), err
    assert "arrangements[0]" not in err and f"{path}: " not in err, err
    assert "--tp" in err, err
    assert not (tmp_path / "out").exists()


def test_tp_starts_from_a_tp2_preset_in_the_scenario_or_its_arrangements(tmp_path, capsys):
    for arrangement_cost in (True, False):
        path = _scenario(tmp_path, arrangement_cost)
        out = tmp_path / f"out-{arrangement_cost}"
        code = main(["plan", str(path), "--gpus", "4", "--tp", "2", "--chunks", "512", "--out", str(out),
                     "--no-plots"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        assert "same-gpu-tp2" in captured.out and "split-2-2-tp2-2" in captured.out, captured.out

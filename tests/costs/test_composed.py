"""The composed presets (costs/composed.py; read by presets.from_table): each one's stated errors are its
fields on the iterations composed afresh from AIConfigurator's tables (the refit itself:
test_composed_refit.py); the facts every preset states; the docs' table. Skipped, with one line,
without the tables."""

from __future__ import annotations

import pytest

from disagg_simpy.costs import composed as C
from disagg_simpy.costs import operators as O
from disagg_simpy.costs.presets import from_table

PRESETS = from_table("composed_presets.json")

TABLES = pytest.mark.aiconfigurator
BY_NAME = {spec.name: spec for spec in C.specs()}


def _fitted(p: dict, cost: str, t):
    from disagg_simpy.costs.fitting import COUNTS, FREE, TILE_SIZE, columns

    fields = {k: v for k, v in p[cost].items() if k not in COUNTS}
    return columns(t, tuple(fields), p[cost].get(FREE, 0), p[cost].get(TILE_SIZE, 0)) @ list(fields.values())


@TABLES
def test_each_composed_presets_stated_errors_are_its_fields_on_its_composed_rows():
    """Every shipped composed preset: its rows composed afresh, its shipped fields evaluated on them
    by the fitting's own columns (no fit), give the errors it states, per kind and per size."""
    from disagg_simpy.costs.fitting import summarise
    from disagg_simpy.costs.minimax import whole_range_error

    folder = O.data_folder()
    assert folder is not None
    for name, p in PRESETS.items():
        spec = BY_NAME[name]
        model = C.config_of(folder, spec.model)
        rows = C.grid(O.tables(folder, spec.gpu, spec.engine), model, spec.tp)
        assert summarise(rows, _fitted(p, "cost", rows))[0] == p["errors_pct"], name
        fitted = _fitted(p, "attention_cost", rows)
        assert summarise(rows, fitted)[0] == p["attention_errors_pct"], name
        assert whole_range_error(rows, fitted) == p["attention_whole_64_4096_pct"], name
        assert C.errors_by_size(rows, fitted) == p["errors_by_size_pct"], name


def test_the_composed_presets_cover_the_asked_models_engines_and_gpus():
    """The models of issue 38 on each GPU and engine the tables cover: Llama-3.1-8B TP1/2/4 on all
    eight, the MoE models where the MoE tables hold their expert shapes."""
    for gpu, engine in C.PAIRS:
        for tp in (1, 2, 4):
            assert f"{gpu}/llama-3.1-8b/tp{tp}/{engine}" in PRESETS
            assert f"{gpu}/qwen3-32b/tp{tp}/{engine}" in PRESETS
        for tp in (2, 4, 8):
            assert f"{gpu}/llama-3.1-70b/tp{tp}/{engine}" in PRESETS
    assert sum(name.split("/")[1] in ("mixtral-8x7b", "qwen3-30b-a3b") for name in PRESETS) >= 20


def test_every_composed_preset_states_source_licence_engine_range_and_error():
    for name, p in PRESETS.items():
        gpu, model, tp, engine = name.split("/")
        framework, version = O.ENGINES[engine]
        assert (p["gpu"].lower(), p["model"].lower(), p["tp"]) == (gpu, model, int(tp[2:]))
        assert (p["engine"], p["engine_version"]) == (C.ENGINE_LABELS[framework], version)
        assert "AIConfigurator" in p["source"] and p["licence"] == "Apache-2.0" and "host overhead" in p["source"]
        assert set(p["errors_pct"]) == set(p["attention_errors_pct"]) == {"writing only", "chunked", "whole prompt"}
        assert p["range"]["prompt_tokens"][1] >= 4096 and p["range"]["replies"][1] >= 64
        assert p["kv_capacity_tokens"] > 0 and p["kv_bytes_per_token"] > 0


def test_the_composed_presets_page_lists_every_preset_with_its_errors():
    """docs/composed-presets.md's table is `python -m disagg_simpy.costs.composed --report`, row for row."""
    from helpers import ROOT

    text = (ROOT / "docs" / "composed-presets.md").read_text()
    for line in C.report(PRESETS).splitlines():
        assert line in text, line


def test_a_scenario_names_a_composed_preset_and_runs_with_its_fields_and_capacity(tmp_path):
    """The composed presets are in the catalogue: a scenario naming one takes its fields and KV
    capacity, and runs."""
    from helpers import scenario_text

    from disagg_simpy import load_scenario, run
    from disagg_simpy.costs.presets import PRESETS as CATALOGUE

    name = "h100-80gb/llama-3.1-8b/tp1/vllm-0.24"
    assert set(PRESETS) <= set(CATALOGUE) and CATALOGUE[name] == PRESETS[name]
    workload = {"rate_per_s": 2, "measure_s": 3, "prompt_mix": [{"share": 1, "tokens": [100, 1500]}],
                "reply_words": [5, 60]}
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text(workload=workload, cost={"preset": name},
                                  arrangements=[{"name": "same", "kind": "colocated", "gpus": 1}]))
    s = load_scenario(path)
    assert s.cost.iteration_ms in (PRESETS[name]["cost"]["iteration_ms"], PRESETS[name]["attention_cost"]["iteration_ms"])
    assert s.arrangements[0].kv_capacity_tokens == PRESETS[name]["kv_capacity_tokens"]
    assert run(s).summary.n_requests.iloc[0] > 0


def test_each_composed_preset_says_what_its_engines_scheduler_does():
    for name, p in PRESETS.items():
        note = p["engine_note"]
        assert note.startswith(f"{p['engine']} {p['engine_version']} "), name
        assert ("mixed_iterations: false" in note) == (p["engine"] == "SGLang"), name
        assert "max_batch_tokens: " in note, name


def test_moe_presets_carry_the_expert_term_fitted_over_every_writing_batch():
    """E17: a MoE preset's fields hold `per_expert_ms` with the model's experts and top-k (8 and 2
    for Mixtral, 128 and 8 for Qwen3-30B-A3B), fitted from one reply up (no range left below some
    batch); its writing error holds from 1-8 replies to 256. Dense presets carry no expert field."""
    for name, p in PRESETS.items():
        moe = "mixtral" in name or "a3b" in name
        for cost in ("cost", "attention_cost"):
            assert ("per_expert_ms" in p[cost]) == moe, name
            if moe:
                assert (p[cost]["experts"], p[cost]["experts_per_token"]) == ((8, 2) if "mixtral" in name else (128, 8))
        assert set(p["range"]) == {"replies", "prompt_tokens", "context_per_reply"} and p["range"]["replies"][0] <= 1
        if moe:
            assert p["attention_cost"]["per_expert_ms"] > 0, name
            assert max(abs(v) for v in p["errors_by_size_pct"]["writing only"].values()) < 20, name


def test_the_fits_expert_column_is_what_the_model_charges():
    """A MoE preset's fields through the fitting's columns (E17's min(experts, top-k x (prompt tokens
    + replies)) among them) give the iteration model/costs.py charges, to the ns, below, at and above
    the batch where every expert is busy."""
    import numpy as np
    import pandas as pd

    from disagg_simpy.costs.fitting import COUNTS, FREE, TILE_SIZE, columns
    from disagg_simpy.model.costs import CostNs

    c = PRESETS["h100-80gb/qwen3-30b-a3b/tp1/vllm-0.24"]["attention_cost"]
    replies = [1, 2, 8, 15, 16, 17, 200, 0, 0, 3]
    prompt = [0, 0, 0, 0, 0, 0, 0, 1, 700, 9]
    rows = pd.DataFrame({"replies": replies, "prompt_tokens": prompt, "context_tokens": 0, "ms": 1.0,
                         "experts": c["experts"], "experts_per_token": c["experts_per_token"]})
    terms = ("iteration_ms", "per_reply_ms", "per_prompt_token_ms", "prompt_iteration_ms", "per_token_tile_ms",
             "per_expert_ms")
    assert set(c) - set(COUNTS) >= set(terms)
    fitted = columns(rows, terms, c[FREE], c[TILE_SIZE]) @ np.array([c[k] for k in terms])
    cost = CostNs.from_ms(c["iteration_ms"], c["per_reply_ms"], c["per_prompt_token_ms"], 0.0,
                          prompt_iteration_ms=c["prompt_iteration_ms"], free_prompt_tokens=c[FREE],
                          per_token_tile_ms=c["per_token_tile_ms"], token_tile=c[TILE_SIZE],
                          per_expert_ms=c["per_expert_ms"], experts=c["experts"],
                          experts_per_token=c["experts_per_token"])
    charged = [cost.iteration_ns(r, p) for r, p in zip(replies, prompt, strict=True)]
    assert charged == pytest.approx(list(fitted * 1e6), abs=1)
    assert charged[1] - charged[0] > charged[5] - charged[4] > 0  # below 16 replies each adds 8 experts; above, none


def test_without_the_tables_the_refit_tests_are_skipped_with_one_line(tmp_path):
    """$DISAGG_SIMPY_AICONFIGURATOR set to nothing: every refit test skipped, one summary line."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, O.ENV_FOLDER: "", "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-rN",
                          str(root / "tests" / "costs" / "test_composed_refit.py")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300).stdout
    said = [line for line in out.splitlines() if "tests of AIConfigurator's tables skipped" in line]
    assert said == [f"{len(PRESETS)} tests of AIConfigurator's tables skipped: ${O.ENV_FOLDER} is not set (set it to "
                    "a folder holding systems/data/: docs/composed-presets.md says where to get them)"], out
    assert "passed" not in out and "failed" not in out

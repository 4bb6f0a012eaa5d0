"""`python -m disagg_simpy map SCENARIO --gpus 4`: over the offered rate and one traffic knob,
which way of using the GPUs keeps the most replies on time, and where the answer flips."""

from __future__ import annotations

from collections.abc import Sequence

from .batch import Batch, Job, batch_parser, output_files, run_batch
from .common import int_at_least
from .plan import chunks_flag

OUTPUT_FILES = output_files("map")
MAP_SEEDS = 5  # default seeds per cell (not the scenario's: a map has hundreds of cells)


def build_map_parser():
    p = batch_parser("map", "Colour a map of offered rate (x) by a traffic knob (y) with the arrangement of "
                     "--gpus GPUs that keeps the most replies on time, shaded by its margin, hatched where the top "
                     "two are too close to call.", prices=False)
    p.add_argument("--gpus", type=int_at_least("--gpus", 2, 64), required=True, metavar="N", help="GPUs to arrange")
    p.add_argument("--rate", metavar="RATES",
                   help="x: offered rates, START:STOP:STEP or R1,R2,... (default: 20 rates up to 1.5 x the scenario's)")
    p.add_argument("--y", metavar="KEY=VALUES",
                   help="y: a traffic knob and its values, KEY=V1,V2,... or KEY=START:STOP:STEP "
                   "(default long_prompt_share=0:0.95:0.05, 20 values; e.g. workload.reply_words=[50,100],[100,400])")
    p.add_argument("--set", dest="fixed", action="append", default=[], metavar="KEY=VALUE",
                   help="set a scenario key for every run, e.g. router=prefix_aware or prefix_cache_tokens=500000 "
                        "(repeatable)")
    p.add_argument("--chunks", type=chunks_flag, default=(512,), metavar="C1,C2",
                   help="chunk sizes of the same-GPU arrangements compared (default 512; splits read whole)")
    return p


def _cells(args, scenario):
    """The map's axes and arrangements, every y value checked before any run."""
    from ..errors import InputError
    from ..sweep.grid import parse_rates
    from ..sweep.plan import candidates, with_candidates
    from ..sweep.winners import parse_y, point_scenario

    key, values = parse_y(scenario, args.y)
    start = scenario.workload.rate_per_s
    if args.rate is not None:
        rates = parse_rates(args.rate)
    elif start is None:
        raise InputError("--rate: missing, expected rates (the scenario's trace has no rate_per_s)")
    else:
        rates = [float(f"{start * 1.5 * i / 20:.4g}") for i in range(1, 21)]
    arranged = with_candidates(scenario, candidates(args.gpus, args.chunks, split_chunks=()), "--gpus")
    for v in values:
        point_scenario(arranged, rates[0], key, v)
    return key, values, rates, arranged


def _map(job: Job) -> Batch:
    from ..page.commands import map_page
    from ..sweep.winners import default_y, winner_words, winners

    scenario, seeds, args = job.scenario, job.seeds, job.args
    key, values, rates, arranged = job.prepared
    cells = winners(arranged, rates, key, values, seeds, job.runner)
    start = scenario.workload.rate_per_s
    marker = (float(start), default_y(scenario, key)) if start is not None else None
    words = winner_words(scenario.slo)
    title = (f"{scenario.name}: {words} on {args.gpus} GPUs ({len(rates)} x {len(values)} cells, "
             f"mean of {len(seeds)} seed{'s' * (len(seeds) > 1)} each)")
    names = [a.name for a in arranged.arrangements]
    wins = cells[cells["winner"] != ""].groupby("winner").size().sort_values(ascending=False)
    close = int(cells["too_close"].sum())

    def picture(folder):
        from ..plots.capacity import save_map

        return save_map(cells, folder / "map.png", title, marker, names, words)

    return Batch(
        cells,
        info={"gpus": args.gpus, "rates": rates, "y_key": key, "y_values": [str(v) for v in values],
              "arrangements": names},
        lines=[title, "criterion: " + (("most on time (per request: " + scenario.slo.words() + ")"
                                       if scenario.slo.is_default_kind else "most " + scenario.slo.share_words())
                                      if scenario.slo.criterion == "per_request"
                                      else f"lowest worst figure / limit ({scenario.slo.words()}, mean over seeds)"),
               "cells won: " + ", ".join(f"{n} {c}" for n, c in wins.items()) + f"; too close to call: {close}"],
        picture=picture,
        page=lambda path: map_page(path, cells, title, names, words, scenario.slo.share_header().removesuffix(" %")),
    )


def map_command(argv: Sequence[str]) -> int:
    """Map where the best way to use N GPUs flips, over offered rate and a traffic knob."""
    return run_batch(argv, build_map_parser(), "map", _map, prepare=_cells, default_seeds=MAP_SEEDS)

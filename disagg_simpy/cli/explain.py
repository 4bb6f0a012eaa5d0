"""`python -m disagg_simpy explain SCENARIO --request ID`: one request's story in each arrangement.

Runs the scenario (only `--arrangement`, if given: every arrangement sees the same requests, so
its story is the same as in a run of all of them) and prints where the request's time went,
what froze it and which limit it broke, from the same frames the CSVs hold.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from pathlib import Path

from ..errors import InputError
from .common import Parser, int_at_least, positive_float


def build_explain_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m disagg_simpy explain",
        description="Tell one measured request's story in words, in every arrangement (or one): when it "
        "arrived, what it queued behind, reading, ship, writing, each freeze and what caused it, and "
        "which limit it broke.",
    )
    p.add_argument("scenario", type=Path, help="scenario YAML file")
    p.add_argument("--request", type=int_at_least("--request", 0), metavar="ID", required=True,
                   help="the id of a measured request (the request_id column of requests.csv)")
    p.add_argument("--arrangement", metavar="NAME", help="only this arrangement (default: every one, in turn)")
    p.add_argument("--seed", type=int_at_least("--seed", 0), help="override the scenario's seed")
    p.add_argument("--rate", type=positive_float("--rate"), metavar="PER_S", help="override the arrival rate (requests/s)")
    p.add_argument("--measure-s", type=positive_float("--measure-s"), metavar="S", help="override the measured window's end (s)")
    return p


def explain(argv: Sequence[str]) -> int:
    """Tell one request's story: where its time went, what froze it, which limit it broke."""
    from ..api import run as run_scenario
    from ..results.story import story_facts, story_text
    from ..workload.counted import own_id
    from ..workload.stream import streams_by_gpus
    from .run import load

    args = build_explain_parser().parse_args(argv)
    args.seeds = None  # one story is one seed's (--seed picks which)
    scenario = load(args)
    names = [a.name for a in scenario.arrangements]
    if args.arrangement is not None:
        if args.arrangement not in names:
            close = difflib.get_close_matches(args.arrangement, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(f"--arrangement: got {args.arrangement!r}, expected one of {', '.join(names)}{hint}")
        picked = [a for a in scenario.arrangements if a.name == args.arrangement]
        scenario = scenario.model_copy(update={"arrangements": picked})
    streams = streams_by_gpus(scenario, scenario.seed)  # (n_requests_per_gpu: a stream per size)
    ids = {a.name: own_id(streams[a.n_gpus].origin, len(streams[a.n_gpus]), args.request) for a in scenario.arrangements}
    sent = lambda a: ids[a.name] is not None and bool(streams[a.n_gpus].measured[ids[a.name]])  # noqa: E731
    if not any(sent(a) for a in scenario.arrangements):
        stream = streams[max(streams)]
        measured = stream.measured.nonzero()[0]
        raise InputError(
            f"--request: got {args.request}, expected the id of a measured request "
            + (f"({measured.min()} to {measured.max()} in {scenario.name}, seed {scenario.seed})" if len(measured)
               else f"(none is measured in {scenario.name}, seed {scenario.seed})")
        )
    result = run_scenario(scenario)
    def renumbered(a) -> str:  # n_requests_per_gpu with a subset in another order: its own id for the request
        own = ids[a.name]
        return "" if own == args.request else (f"{a.name}: request {args.request} (of the largest arrangement's "
                                               f"stream) is its request {own}\n")

    stories = [renumbered(a) + story_text(story_facts(result, a.name, int(ids[a.name] or 0))) if sent(a) else
               f"{a.name}: request {args.request} is not sent to it (n_requests_per_gpu sends its {a.n_gpus} GPU"
               f"{'s' * (a.n_gpus > 1)} {len(streams[a.n_gpus])} requests)" for a in scenario.arrangements]
    print("\n\n".join(stories))
    return 0

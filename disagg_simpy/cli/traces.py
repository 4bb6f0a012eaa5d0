"""`python -m disagg_simpy traces fetch [ID ...]` and `traces list`: the public traces a scenario
can name by id, downloaded on demand into a cache and checked by SHA-256."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..texts import aligned
from ..workload.catalog import CATALOG, ENV_FOLDER, ENV_URL, FETCH_COMMAND, FetchError, cache_folder, fetch, sha256_of
from .common import EXIT_INTERNAL, EXIT_INTERRUPTED, Parser


def build_traces_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m disagg_simpy traces",
        description=f"The public traces scenarios name by id ({', '.join(CATALOG)}). They are not part of the "
        f"project: fetch downloads them from their public repositories into a cache folder ({ENV_FOLDER} if set, "
        f"else the user cache folder) and checks each file's SHA-256; {ENV_URL}=BASE fetches BASE/<file> instead.",
    )
    commands = p.add_subparsers(dest="command", required=True, metavar="{fetch,list}", parser_class=Parser)
    get = commands.add_parser("fetch", help="download traces (all by default) into the cache, checked by SHA-256")
    get.add_argument("ids", nargs="*", metavar="ID", help=f"trace ids (default: all of {', '.join(CATALOG)})")
    commands.add_parser("list", help="what is known, what is cached, sizes, sources and licences")
    return p


def traces(argv: Sequence[str]) -> int:
    """Fetch or list the public traces a scenario can name by id (traces fetch|list)."""
    args = build_traces_parser().parse_args(argv)
    if args.command == "list":
        return _list()
    unknown = [i for i in args.ids if i not in CATALOG]
    if unknown:
        from ..errors import InputError

        raise InputError(f"traces fetch: got {unknown[0]!r}, expected one of {', '.join(CATALOG)}")
    ids = list(dict.fromkeys(args.ids)) or list(CATALOG)
    try:
        paths = fetch(ids)
    except FetchError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt as err:  # pooch removes the temporary file of the download under way
        what = "interrupted" if not hasattr(err, "signum") else "terminated"
        print(f"{what}: files fetched before are complete; no partial file was left", file=sys.stderr)
        return EXIT_INTERRUPTED if not hasattr(err, "signum") else 128 + err.signum
    for trace_id, path in zip(ids, paths):
        t = CATALOG[trace_id]
        print(f"{trace_id}: {path} ({t.size:,} bytes, SHA-256 checked), licence {t.licence}")
        print(f"  attribution: {t.attribution}")
    return 0


def _list() -> int:
    folder = cache_folder()
    print(f"cache folder: {folder}")
    rows = [("id", "format", "size", "cached", "licence", "source")]
    for t in CATALOG.values():
        path = folder / t.file
        state = "no"
        if path.is_file():
            state = "yes" if sha256_of(path) == t.sha256 else "wrong SHA-256"
        rows.append((t.id, t.format, t.size_text, state, t.licence, t.source))
    for line in aligned(rows, left=range(len(rows[0])), pad_last=False):
        print(line)
    licences = dict(sorted((t.licence, t.licence_url) for t in CATALOG.values()))
    print(f"fetch with: {FETCH_COMMAND} [ID ...] (it prints each trace's attribution)")
    print("licences: " + "; ".join(f"{name} {url}" for name, url in licences.items()))
    return 0

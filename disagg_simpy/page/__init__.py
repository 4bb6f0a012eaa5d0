"""One self-contained HTML page of a run: the comparison table, a player per arrangement and
the summary charts, with every script, style and datum inline (no network).

`write_page(result, path)` writes it; `page_html` returns the text; `page_data` (data.py) is the
JSON the page embeds. The page reads the result frames only, never the model.
"""

from __future__ import annotations

import json
import re
from html import escape as html_escape
from importlib import resources
from pathlib import Path

from ..files import atomic_write_text
from .data import FORMAT_VERSION, page_data

__all__ = ["FORMAT_VERSION", "embedded_data", "page_data", "page_html", "write_page"]

_SCRIPTS = ("page.js", "charts.js", "player.js", "pieces.js", "overtime.js")  # in this order, then boot()


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _script_safe(text: str) -> str:
    """Text that cannot end the <script> or <style> element it sits in."""
    return text.replace("</", "<\\/")


def page_html(result, reference=None, span_s=None, by_seed=None, pooled=None, seed_runs=None, over_time=None) -> str:
    """The page as one HTML string. `reference`: {arrangement: on-time %} to show beside ours
    (e.g. the explainer's figures); `span_s`: (start, end) of the iterations to embed; `by_seed`:
    the summary of every seed (a `seed` column; the table shows means over them, the player
    `result`, one of them); `pooled` (results/pooled.Pooled): the distributions of every seed;
    `seed_runs` (seed_runs.SeedRuns): the other seeds the player can switch to; `over_time`: the
    `over_time.csv` frame of every seed (by default `result`'s own, if its traffic changes over time)."""
    runs, note = seed_runs.for_page(int(result.seed)) if seed_runs is not None else ([], "")
    content = page_data(result, reference, span_s, by_seed, pooled, runs, over_time)
    content["seed_runs_note"] = note
    data = json.dumps(content, separators=(",", ":"), allow_nan=False)
    title = (f"disagg_simpy: {result.scenario.name}, " +
             (f"{by_seed['seed'].nunique()} seeds" if by_seed is not None else f"seed {result.seed}"))
    script = "(function () {\n\"use strict\";\n" + "\n".join(_asset(n) for n in _SCRIPTS) + "\nboot();\n})();"
    parts = {
        "title": html_escape(title),
        "style": _script_safe(_asset("style.css")),
        "data": _script_safe(data),
        "script": _script_safe(script),
    }
    return re.sub(r"\{\{(title|style|data|script)\}\}", lambda m: parts[m[1]], _asset("template.html"))


def write_page(result, path: str | Path, reference=None, span_s=None, by_seed=None, pooled=None,
               seed_runs=None, over_time=None) -> Path:
    """Write the page to `path` atomically (a temporary file, then a rename)."""
    atomic_write_text(path, page_html(result, reference, span_s, by_seed, pooled, seed_runs, over_time))
    return Path(path)


def embedded_data(html: str) -> dict:
    """The JSON a written page embeds (for tests and tools)."""
    start = html.index('<script type="application/json" id="page-data">') + len(
        '<script type="application/json" id="page-data">')
    end = html.index("</script>", start)
    return json.loads(html[start:end].replace("<\\/", "</"))

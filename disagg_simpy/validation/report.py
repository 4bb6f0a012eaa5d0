"""The validate table as text, Markdown and an HTML page with one chart per source (inline SVG:
each figure's published value, its tolerance band and ours)."""

from __future__ import annotations

import html
import math

from ..texts import aligned

HEADER = ["figure", "metric", "published", "ours", "error", "tolerance", "verdict"]


def _num(x: float) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:,.3g}" if abs(x) < 100 else f"{x:,.0f}"


def cells(r: dict) -> list[str]:
    return [r["id"], r["metric"], _num(r["published"]), _num(r["ours"]), f"{r['error_pct']:+.1f}%",
            f"+-{r['tolerance_pct']:g}%", r["verdict"]]


def text_table(rows: list[dict]) -> str:
    return "\n".join(aligned([HEADER, *[cells(r) for r in rows]], sep="  "))


def summary_lines(s: dict) -> list[str]:
    medians = ", ".join(f"{m} {e:.1f}%" for m, e in s["median_abs_error_pct"].items())
    return [f"{s['within']} of {s['figures']} figures within their tolerance; median absolute error: {medians}"]


def markdown_table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join([*HEADER, "source"]) + " |", "|" + "---|" * (len(HEADER) + 1)]
    lines += ["| " + " | ".join([f"`{c}`" if i == 0 else c for i, c in enumerate(cells(r))] + [r["where"]]) + " |"
              for r in rows]
    return "\n".join(lines)


def _chart(rows: list[dict]) -> str:
    """One source's figures: a row each, published value (black tick) in its tolerance band
    (grey), ours (a dot, green within, red outside), each on its own scale (ratio to published)."""
    width, left, row_h = 640, 260, 26
    height = 30 + row_h * len(rows)
    top = max([1.6, *[(r["ours"] / r["published"]) * 1.1 for r in rows if r["published"]]])
    x = lambda ratio: left + (width - left - 20) * min(ratio, top) / top  # noqa: E731
    parts = [f'<svg width="{width}" height="{height}" role="img" aria-label="published against ours">']
    for i, r in enumerate(rows):
        y = 20 + i * row_h
        t = r["tolerance_pct"] / 100
        ours = r["ours"] / r["published"] if r["published"] else math.nan
        colour = "#2e7d32" if r["verdict"] == "within" else "#c62828"
        parts += [f'<text x="4" y="{y + 4}" font-size="11">{html.escape(r["id"])}</text>',
                  f'<rect x="{x(1 - t):.1f}" y="{y - 7}" width="{x(1 + t) - x(1 - t):.1f}" height="14" fill="#ddd"/>',
                  f'<line x1="{x(1):.1f}" x2="{x(1):.1f}" y1="{y - 9}" y2="{y + 9}" stroke="black" stroke-width="2"/>']
        if not math.isnan(ours):
            parts.append(f'<circle cx="{x(ours):.1f}" cy="{y}" r="5" fill="{colour}"><title>{_num(r["ours"])} '
                         f'against {_num(r["published"])} ({r["error_pct"]:+.1f}%)</title></circle>')
    parts.append(f'<text x="{left}" y="{height - 2}" font-size="10">ours / published (tick: published = 1, grey: '
                 'its tolerance; dot: ours)</text></svg>')
    return "".join(parts)


def html_page(rows: list[dict], sources: dict[str, dict], summary: dict, title: str) -> str:
    """A self-contained page: the summary, one chart and table per source."""
    body = [f"<h1>{html.escape(title)}</h1>", "<p>" + html.escape(summary_lines(summary)[0]) + "</p>"]
    for key, src in sources.items():
        mine = [r for r in rows if r["source"] == key]
        if not mine:
            continue
        body += [f"<h2>{html.escape(src['group'])}</h2>", f"<p>{html.escape(src['cite'])}</p>", _chart(mine),
                 "<table><tr>" + "".join(f"<th>{h}</th>" for h in [*HEADER, "where"]) + "</tr>"]
        body += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in [*cells(r), r["where"]]) + "</tr>" for r in mine]
        body.append("</table>")
    style = "body{font-family:sans-serif;max-width:60em;margin:2em auto}td,th{padding:2px 8px;text-align:left}"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>")

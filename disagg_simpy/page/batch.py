"""One self-contained HTML page for a batch command (`--html` on sweep, goodput, plan, map): a
table that sorts by any column on a click, and charts drawn here as inline SVG, every datum in
the file. Like the run's page: no network (its Content-Security-Policy allows nothing to load),
one file, written atomically. The SVG is built from the command's own tables, never the model.
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

import pandas as pd

from ..files import atomic_write_text

CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
body { margin: 0 auto; max-width: 1280px; padding: 12px 20px 40px; font: 14px/1.45 system-ui, sans-serif; color: #1d1d1d; }
h1 { font-size: 20px; margin: 4px 0; } h2 { font-size: 16px; margin: 22px 0 8px; }
.note { color: #5c5c5c; font-size: 13px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: 13px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #d9d9d9; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
thead button { all: unset; cursor: pointer; font-weight: 600; }
thead th[aria-sort=ascending] button::after { content: " \\25B2"; }
thead th[aria-sort=descending] button::after { content: " \\25BC"; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
svg text { font-size: 11px; fill: #1d1d1d; } .grid { stroke: #ececec; } .axis { stroke: #888; }
"""
#: Sorting: a click on a header sorts the rows by that column's `data-v` (numbers as numbers).
SCRIPT = """
document.querySelectorAll("table.sortable").forEach((table) => {
  table.querySelectorAll("thead th").forEach((th, col) => {
    th.querySelector("button").addEventListener("click", () => {
      const dir = th.getAttribute("aria-sort") === "descending" ? 1 : -1;
      table.querySelectorAll("thead th").forEach((h) => h.setAttribute("aria-sort", "none"));
      th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
      const value = (tr) => { const v = tr.cells[col].dataset.v; const n = Number(v); return v === "" ? null : Number.isNaN(n) ? v : n; };
      const rows = Array.from(table.tBodies[0].rows);
      rows.sort((a, b) => { const x = value(a), y = value(b);
        if (x === y) return 0; if (x === null) return 1; if (y === null) return -1; return (x < y ? -1 : 1) * dir; });
      rows.forEach((r) => table.tBodies[0].appendChild(r));
    });
  });
});
"""


def _value(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return ""
    return str(v)


def _shown(v) -> str:
    """A cell's text by default: a float to 2 decimals at most (its `data-v` keeps every digit)."""
    if isinstance(v, float) and not math.isnan(v):
        return f"{round(v, 2):g}"
    return _value(v)


def table_html(frame: pd.DataFrame, columns: list[tuple[str, str]], cells: dict | None = None, testid: str = "table") -> str:
    """A sortable table of `frame`'s `columns` ((key, label) pairs); `cells` {key: fn(row) -> text}
    formats a cell (default: the value as is); each cell keeps its raw value to sort by."""
    cells = cells or {}
    head = "".join(f'<th scope="col" aria-sort="none"><button type="button" data-key="{escape(k)}">{escape(label)}'
                   "</button></th>" for k, label in columns)
    body = []
    for _, row in frame.iterrows():
        tds = "".join(f'<td data-v="{escape(_value(row[k]))}">{escape(cells[k](row) if k in cells else _shown(row[k]))}</td>'
                      for k, _ in columns)
        body.append(f'<tr data-testid="row">{tds}</tr>')
    return (f'<table class="sortable" data-testid="{escape(testid)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


class Chart:
    """An SVG chart with linear axes: lines with bands, vertical marks, rectangles, a legend."""

    def __init__(self, title: str, x: tuple[float, float], y: tuple[float, float], xlabel: str, ylabel: str,
                 width: int = 560, height: int = 320, left: int = 56):
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.w, self.h = width, height
        self.x0, self.x1, self.y0, self.y1 = left, width - 14, height - 42, 14
        lo, hi = x if x[1] > x[0] else (x[0] - 1, x[0] + 1)
        self.xr, self.yr = (lo, hi), y
        self.parts: list[str] = []
        self.legend: list[tuple[str, str]] = []

    def X(self, v: float) -> float:
        return self.x0 + (v - self.xr[0]) / (self.xr[1] - self.xr[0]) * (self.x1 - self.x0)

    def Y(self, v: float) -> float:
        return self.y0 - (v - self.yr[0]) / (self.yr[1] - self.yr[0]) * (self.y0 - self.y1)

    def line(self, name: str, colour: str, xs, ys, lows=None, highs=None, tips=None, dash: str = "",
             legend: bool = True) -> None:
        """A line with dots (each with a tooltip) and, given lows and highs, its band; `dash`, an
        SVG dash pattern (a limit's own line beside the joint one)."""
        pts = [(x, y) for x, y in zip(xs, ys) if not math.isnan(y)]
        if lows is not None and highs is not None:
            band = [(x, lo, hi) for x, lo, hi in zip(xs, lows, highs) if not (math.isnan(lo) or math.isnan(hi))]
            if band:
                poly = [f"{self.X(x):.1f},{self.Y(hi):.1f}" for x, _, hi in band]
                poly += [f"{self.X(x):.1f},{self.Y(lo):.1f}" for x, lo, _ in reversed(band)]
                self.parts.append(f'<polygon points="{" ".join(poly)}" fill="{colour}" fill-opacity="0.13" '
                                  f'stroke="{colour}" stroke-dasharray="2 2" stroke-width="0.8"/>')
        if pts:
            d = "".join(f"{'L' if i else 'M'}{self.X(x):.1f} {self.Y(y):.1f}" for i, (x, y) in enumerate(pts))
            dashed = f' stroke-dasharray="{dash}" stroke-width="1.3"' if dash else ' stroke-width="2"'
            self.parts.append(f'<path d="{d}" fill="none" stroke="{colour}"{dashed} data-arrangement="{escape(name)}"/>')
        for i, (x, y) in enumerate(pts):
            tip = tips[i] if tips else f"{name}: {y:.1f} at {x:g}"
            self.parts.append(f'<circle cx="{self.X(x):.1f}" cy="{self.Y(y):.1f}" r="{2 if dash else 3}" '
                              f'fill="{colour}"><title>{escape(tip)}</title></circle>')
        if legend:
            self.legend.append((name, colour))

    def xspan(self, lo: float, hi: float, colour: str, tip: str) -> None:
        """A translucent strip from x = lo to hi over the whole height (an interval of x)."""
        lo, hi = max(lo, self.xr[0]), min(hi, self.xr[1])
        if hi > lo:
            self.parts.append(f'<rect x="{self.X(lo):.1f}" y="{self.y1}" width="{self.X(hi) - self.X(lo):.1f}" '
                              f'height="{self.y0 - self.y1}" fill="{colour}" fill-opacity="0.12" data-testid="span">'
                              f"<title>{escape(tip)}</title></rect>")

    def hline(self, v: float, text: str) -> None:
        self.parts.append(f'<line x1="{self.x0}" x2="{self.x1}" y1="{self.Y(v):.1f}" y2="{self.Y(v):.1f}" '
                          'stroke="#000" stroke-dasharray="3 3"/>')
        self.parts.append(f'<text x="{self.x1}" y="{self.Y(v) - 3:.1f}" text-anchor="end">{escape(text)}</text>')

    def vline(self, v: float, colour: str, tip: str) -> None:
        self.parts.append(f'<line x1="{self.X(v):.1f}" x2="{self.X(v):.1f}" y1="{self.y0}" y2="{self.y1}" '
                          f'stroke="{colour}" stroke-width="1.5"><title>{escape(tip)}</title></line>')

    def rect(self, x0: float, x1: float, y0: float, y1: float, colour: str, tip: str, hatch: bool = False,
             opacity: float = 1.0) -> None:
        attrs = 'stroke="#000" stroke-dasharray="3 2" stroke-width="1"' if hatch else 'stroke="white" stroke-width="0.5"'
        self.parts.append(f'<rect x="{self.X(x0):.1f}" y="{self.Y(y1):.1f}" width="{self.X(x1) - self.X(x0):.1f}" '
                          f'height="{self.Y(y0) - self.Y(y1):.1f}" fill="{colour}" fill-opacity="{opacity:.2f}" {attrs} '
                          'data-testid="cell">'
                          f"<title>{escape(tip)}</title></rect>")

    def bar(self, x0: float, x1: float, value: float, low: float, high: float, colour: str, tip: str) -> None:
        """A vertical bar from 0 to `value` between x0 and x1, its interval (low-high) as a black
        whisker when known; the tooltip on both."""
        if math.isnan(value):
            return
        self.parts.append(f'<rect x="{self.X(x0):.1f}" y="{self.Y(value):.1f}" width="{self.X(x1) - self.X(x0):.1f}" '
                          f'height="{self.Y(self.yr[0]) - self.Y(value):.1f}" fill="{colour}" data-testid="bar">'
                          f"<title>{escape(tip)}</title></rect>")
        if not (math.isnan(low) or math.isnan(high)):
            x = self.X((x0 + x1) / 2)
            self.parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{self.Y(low):.1f}" y2="{self.Y(high):.1f}" '
                              f'stroke="#000" stroke-width="1.5" data-testid="whisker"><title>{escape(tip)}</title></line>')

    def steps(self, name: str, colour: str, xs, ys, tips, dash: str = "") -> None:
        """A step function: y = ys[i] from xs[i] to xs[i + 1] (len(xs) = len(ys) + 1), a dot with
        its tooltip at each step's start."""
        d = f"M{self.X(xs[0]):.1f} {self.Y(ys[0]):.1f}"
        for i, y in enumerate(ys):
            d += f"L{self.X(xs[i + 1]):.1f} {self.Y(y):.1f}" + (f"L{self.X(xs[i + 1]):.1f} {self.Y(ys[i + 1]):.1f}"
                                                                 if i + 1 < len(ys) else "")
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="2"{dashed} '
                          f'data-arrangement="{escape(name)}"/>')
        for x, y, tip in zip(xs, ys, tips):
            self.parts.append(f'<circle cx="{self.X(x):.1f}" cy="{self.Y(y):.1f}" r="3" fill="{colour}">'
                              f"<title>{escape(tip)}</title></circle>")
        self.legend.append((name, colour))

    def svg(self, yticks=None, ylabels=None, xticks=None, xlabels=None) -> str:
        axes = [f'<line class="axis" x1="{self.x0}" x2="{self.x1}" y1="{self.y0}" y2="{self.y0}"/>',
                f'<line class="axis" x1="{self.x0}" x2="{self.x0}" y1="{self.y0}" y2="{self.y1}"/>']
        xs = xticks if xticks is not None else _ticks(*self.xr)
        for v, label in zip(xs, xlabels or [f"{v:g}" for v in xs]):
            axes.append(f'<text x="{self.X(v):.1f}" y="{self.y0 + 14}" text-anchor="middle">{escape(str(label))}</text>')
        for v, label in zip(yticks or _ticks(*self.yr), ylabels or [f"{v:g}" for v in (yticks or _ticks(*self.yr))]):
            axes.append(f'<line class="grid" x1="{self.x0}" x2="{self.x1}" y1="{self.Y(v):.1f}" y2="{self.Y(v):.1f}"/>')
            axes.append(f'<text x="{self.x0 - 4}" y="{self.Y(v) + 4:.1f}" text-anchor="end">{escape(str(label))}</text>')
        axes.append(f'<text x="{(self.x0 + self.x1) / 2}" y="{self.h - 8}" text-anchor="middle">{escape(self.xlabel)}</text>')
        axes.append(f'<text x="12" y="{(self.y0 + self.y1) / 2}" text-anchor="middle" '
                    f'transform="rotate(-90 12 {(self.y0 + self.y1) / 2})">{escape(self.ylabel)}</text>')
        legend = "".join(f'<span><svg width="18" height="8"><line x1="0" y1="4" x2="18" y2="4" stroke="{c}" '
                         f'stroke-width="3"/></svg> {escape(n)}</span> ' for n, c in self.legend)
        return (f'<figure><figcaption>{escape(self.title)}</figcaption><svg width="{self.w}" height="{self.h}" '
                f'viewBox="0 0 {self.w} {self.h}" role="img" aria-label="{escape(self.title)}">{"".join(axes)}'
                f'{"".join(self.parts)}</svg><div class="note">{legend}</div></figure>')


def _ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    """About `n` round ticks from lo to hi."""
    if not hi > lo:
        return [lo]
    raw = (hi - lo) / n
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if step * m >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def batch_page(title: str, lede: str, sections: list[tuple[str, str]]) -> str:
    """The page: a title, a lede, then (heading, HTML) sections; the sorting script inline."""
    body = "".join(f"<section><h2>{escape(h)}</h2>{html}</section>" for h, html in sections)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1><p class=\"note\">{escape(lede)}</p>"
            f"<main>{body}</main><footer class=\"note\">Written by disagg_simpy. One file: no network, all data inline."
            f"</footer><script>{SCRIPT}</script></body></html>")


def write_batch_page(path: Path, title: str, lede: str, sections: list[tuple[str, str]]) -> Path:
    atomic_write_text(path, batch_page(title, lede, sections))
    return Path(path)

// Summary charts (on-time bars with the reference figures, first-word and gap distributions)
// and the "follow one request across every arrangement" table.

// The distributions pool every seed's requests and gaps (counts on the grid, results/pooled.py).
const POOLED_TEXT = D.pooled_seeds.length > 1 ? ` (all ${D.pooled_seeds.length} seeds pooled)` : "";

function chart(parent, title, w, h) {
  const fig = el("figure", {class: "chart"}, parent);
  el("figcaption", {}, fig, title);
  return el("svg:svg", {width: w, height: h, viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": title}, fig);
}

function logAxis(svg, x, lo, hi, y0, y1, unit) {
  const perDecade = Math.abs(x(hi) - x(lo)) / Math.log10(hi / lo);
  const marks = perDecade < 120 ? [1] : [1, 2, 5];  // 1-2-5 labels only where a decade is wide enough for them
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of marks) {
      const v = m * 10 ** e;
      if (v < lo || v > hi) continue;
      el("svg:line", {x1: x(v), x2: x(v), y1: y0, y2: y1, class: "grid"}, svg);
      el("svg:text", {x: x(v), y: y1 + 14, "text-anchor": "middle", class: "tick"}, svg, `${+v.toPrecision(2)}`);
    }
  }
  el("svg:text", {x: (x(lo) + x(hi)) / 2, y: y1 + 30, "text-anchor": "middle"}, svg, unit);
}

function shareAxis(svg, y, x0, x1, label) {
  for (const p of [0, 25, 50, 75, 100]) {
    el("svg:line", {x1: x0, x2: x1, y1: y(p), y2: y(p), class: "grid"}, svg);
    el("svg:text", {x: x0 - 4, y: y(p) + 4, "text-anchor": "end"}, svg, String(p));
  }
  el("svg:text", {x: 12, y: (y(0) + y(100)) / 2, transform: `rotate(-90 12 ${(y(0) + y(100)) / 2})`, "text-anchor": "middle"}, svg, label);
}

function limitLine(svg, x, v, y0, y1, text, row) {
  el("svg:line", {x1: x(v), x2: x(v), y1: y0, y2: y1, class: "limit"}, svg);
  el("svg:text", {x: x(v), y: y0 - 4 - 12 * row, "text-anchor": "middle", class: "limit-label"}, svg, text);
}

function curve(svg, a, points) {
  if (!points.length) return;
  const d = points.map(([x, y], k) => `${k ? "L" : "M"}${x.toFixed(1)} ${y.toFixed(1)}`).join("");
  el("svg:path", {d, fill: "none", stroke: a.colour, "stroke-width": 2, "stroke-dasharray": a.dash, "data-arrangement": a.name}, svg);
}

const Charts = {
  draw(box) {
    this.bars(box);
    this.firstWord(box);
    this.gaps(box);
    drawOverTime(box);  // E11 only (overtime.js)
    const legend = el("div", {class: "legend chart-legend"}, box);
    ARR.forEach((a) => {
      const s = el("span", {}, legend);
      const sw = el("svg:svg", {width: 26, height: 10, "aria-hidden": "true"}, s);
      el("svg:line", {x1: 1, y1: 5, x2: 25, y2: 5, stroke: a.colour, "stroke-width": 3, "stroke-dasharray": a.dash}, sw);
      s.append(a.name);
    });
    if (D.reference) { const s = el("span", {}, legend); el("i", {class: "key reference"}, s); s.append("the reference figure (on time)"); }
  },

  bars(box) {
    const w = Math.max(300, 60 + 76 * ARR.length), h = 260, x0 = 40, y = (p) => 200 - p * 1.7;
    const svg = chart(box, MANY ? `Replies on time (%): mean of ${SEEDS.length} seeds, 95% interval, dots: seeds` : "Replies on time (%)", w, h);
    shareAxis(svg, y, x0, w - 5, "on time (%)");
    const bw = (w - x0 - 10) / Math.max(ARR.length, 1);
    ARR.forEach((a, k) => {
      const v = cell(a, "on_time_pct") ?? 0, x = x0 + 5 + k * bw;
      const bar = el("svg:rect", {x: x + bw * 0.15, y: y(v), width: bw * 0.7, height: y(0) - y(v), fill: a.colour,
                                  "data-testid": "on-time-bar", "data-arrangement": a.name}, svg);
      el("svg:title", {}, bar, `${a.name}: ${pct(v)}% on time`);
      el("svg:text", {x: x + bw / 2, y: y(0) + 14, "text-anchor": "middle", class: "small"}, svg, a.name);
      el("svg:text", {x: x + bw / 2, y: y(0) + 28, "text-anchor": "middle", class: "small"}, svg, `${pct(v)}%`);
      const span = MANY && a.interval ? a.interval.on_time_pct : null;
      if (span) {  // the mean's 95% interval, and each seed as a dot
        const cx = x + bw / 2;
        const line = el("svg:path", {d: `M${cx - 6} ${y(span[0])}h12M${cx} ${y(span[0])}V${y(span[1])}M${cx - 6} ${y(span[1])}h12`,
                                     stroke: "#000", "stroke-width": 2, fill: "none", "data-testid": "on-time-interval"}, svg);
        el("svg:title", {}, line, `${a.name}: mean ${pct(v)}%, 95% interval ${pct(span[0])}–${pct(span[1])}%`);
        (a.by_seed.on_time_pct || []).forEach((s, j) => {
          if (s === null) return;
          const dot = el("svg:circle", {cx: x + bw * (0.25 + 0.5 * ((j * 0.618) % 1)), cy: y(s), r: 2.2, fill: a.colour, stroke: "#000",
                                        "stroke-width": 0.4, class: "seed-dot"}, svg);
          el("svg:title", {}, dot, `seed ${SEEDS[j]}: ${pct(s)}%`);
        });
      }
      const ref = D.reference && D.reference[a.name];
      if (ref !== undefined && ref !== null && D.reference) {
        const cx = x + bw / 2, cy = y(ref);
        const m = el("svg:path", {d: `M${cx} ${cy - 6}l6 6l-6 6l-6 -6z`, class: "reference", "data-testid": "reference-mark"}, svg);
        el("svg:title", {}, m, `${a.name}: reference ${ref}% on time`);
      }
    });
  },

  firstWord(box) {
    const w = 370, h = 260, x0 = 44, x1 = w - 18, y = (p) => 200 - p * 1.7, grid = D.first_word_grid_s;
    const svg = chart(box, "Wait for the first word" + POOLED_TEXT, w, h);
    // from the shortest wait any arrangement has to where the last curve stops rising
    let first = grid.length - 1, last = 0;
    ARR.forEach((a) => a.first_words.forEach((v, k) => {
      if (v > 0) first = Math.min(first, k);
      if (k > 0 && v > a.first_words[k - 1]) last = Math.max(last, k);
    }));
    const fw = SLO.first_word_s ?? grid[last];  // (null: off, no limit line)
    const lo = Math.min(grid[Math.max(first - 1, 0)], fw / 10), hi = Math.max(grid[last], fw * 2);
    const x = (v) => x0 + ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * (x1 - x0);
    shareAxis(svg, y, x0, x1, "replies (%)");
    logAxis(svg, x, lo, hi, y(100), y(0), "seconds from arrival to the first word (log)");
    if (SLO.first_word_s != null) limitLine(svg, x, SLO.first_word_s, y(100), y(0), `${SLO.first_word_s} s limit`, 0);
    ARR.forEach((a) => {
      const pts = [];
      grid.forEach((v, k) => { if (v >= lo && v <= hi && a.first_words.length) pts.push([x(v), y(a.first_words[k])]); });
      curve(svg, a, pts);
    });
  },

  gaps(box) {
    const w = 370, h = 260, x0 = 44, x1 = w - 18, y = (p) => 200 - p * 1.7, grid = D.gap_grid_ms;
    const svg = chart(box, "Gaps between words" + POOLED_TEXT, w, h);
    let last = 0;  // the gaps drawn reach to where the last curve stops rising (at least 1 s)
    ARR.forEach((a) => a.gaps.forEach((v, k) => { if (k > 0 && v > a.gaps[k - 1]) last = Math.max(last, k); }));
    const lo = 5, hi = Math.max(1000, (SLO.freeze_ms || 0) * 4, grid[last] || 0);
    const x = (v) => x0 + ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * (x1 - x0);
    shareAxis(svg, y, x0, x1, "gaps (%)");
    logAxis(svg, x, lo, hi, y(100), y(0), "gap between consecutive words (ms, log)");
    if (SLO.mean_gap_ms != null) limitLine(svg, x, SLO.mean_gap_ms, y(100), y(0), `${SLO.mean_gap_ms} ms mean-gap limit`, 1);
    if (SLO.freeze_ms != null) limitLine(svg, x, SLO.freeze_ms, y(100), y(0), `${SLO.freeze_ms} ms freeze`, 0);
    ARR.forEach((a) => {
      const pts = [];
      grid.forEach((v, k) => { if (v >= lo && v <= hi && a.gaps.length) pts.push([x(v), y(a.gaps[k])]); });
      curve(svg, a, pts);
    });
  },
};

/** The followed request in every arrangement: its numbers and a bar from arrival to its last word. */
function drawFollow() {
  const box = document.getElementById("follow");
  box.replaceChildren();
  const id = Player.follow;
  if (id === null || !ROW_OF.has(id)) {
    el("p", {class: "note"}, box, "Click a reply (or type a request id above) to follow it across every arrangement.");
    return;
  }
  const i = ROW_OF.get(id);
  el("h3", {}, box, `Request #${id} in every arrangement (${REQ.prompt[i].toLocaleString("en")} prompt tokens, ${REQ.words[i]} words)`);
  const table = el("table", {class: "follow", "data-testid": "follow"}, box);
  const head = el("tr", {}, el("thead", {}, table));
  ["arrangement", "GPUs", "first word s", "mean gap ms", "longest gap ms", "verdict", "arrival → last word"].forEach((t) => el("th", {scope: "col"}, head, t));
  const body = el("tbody", {}, table);
  const end = Math.max(...ARR.map((a) => (a.req.fin[i] >= 0 ? a.req.fin[i] : REQ.arrived[i])));
  const unsent = (r) => r.sent && !r.sent[i];  // n_requests_per_gpu: not sent to this (smaller) arrangement
  const scale = 260 / Math.max(end - REQ.arrived[i], 1);
  ARR.forEach((a, k) => {
    const r = a.req, tr = el("tr", {"data-arrangement": a.name, tabindex: "0", class: a === Player.arr ? "current" : ""}, body);
    el("th", {scope: "row"}, tr, a.name);
    if (unsent(r)) { el("td", {colspan: "6", class: "note"}, tr, "not sent (n_requests_per_gpu: it gets the first requests)"); return; }
    el("td", {}, tr, r.wg[i] >= 0 && r.wg[i] !== r.rg[i] ? `${r.rg[i]}→${r.wg[i]}` : String(r.rg[i]));
    el("td", {}, tr, r.first[i] < 0 ? "–" : ((r.first[i] - REQ.arrived[i]) / NS).toFixed(3));
    el("td", {}, tr, r.fin[i] < 0 || REQ.words[i] < 2 ? "–" : ((r.fin[i] - r.first[i]) / (REQ.words[i] - 1) / 1e6).toFixed(1));
    el("td", {}, tr, r.maxgap[i] < 0 ? "–" : (r.maxgap[i] / 1e6).toFixed(1));
    el("td", {class: r.late[i] ? "late" : "ok"}, tr, shortLate(r.late[i]));
    const svg = el("svg:svg", {width: 270, height: 12}, el("td", {}, tr));
    const at = (t) => 5 + (t - REQ.arrived[i]) * scale;
    if (r.first[i] >= 0) el("svg:rect", {x: at(REQ.arrived[i]), y: 3, width: at(r.first[i]) - at(REQ.arrived[i]), height: 6, class: "to-first"}, svg);
    if (r.fin[i] >= 0) el("svg:rect", {x: at(r.first[i]), y: 3, width: Math.max(1, at(r.fin[i]) - at(r.first[i])), height: 6, fill: a.colour}, svg);
    const go = () => Player.jumpTo(k, id);
    tr.addEventListener("click", go);
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") go(); });
  });
  el("p", {class: "note"}, box, "Bars: grey from arrival to the first word, then the arrangement's colour to the last word. Click a row to watch it there.");
}

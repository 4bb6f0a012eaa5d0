// Boot: decode the embedded data, draw the table and the charts, start the player.
// Everything is inline; nothing is fetched. Times are whole nanoseconds (see data.py).

const D = JSON.parse(document.getElementById("page-data").textContent);
const NS = 1e9;
const SLO = D.scenario.slo;
const FREEZE_NS = SLO.freeze_ms == null ? Infinity : Math.floor(SLO.freeze_ms * 1e6 + 0.5);  // null: off
// the limits that are on, in words (a null limit is off)
const LIMIT_WORDS = [SLO.first_word_s != null ? `first word within ${SLO.first_word_s} s` : "",
  SLO.mean_gap_ms != null ? (SLO.tpot === "inclusive" ? `TPOT with word 1 within ${SLO.mean_gap_ms} ms`
                                                      : `mean gap within ${SLO.mean_gap_ms} ms`) : "",
  SLO.freeze_ms != null ? `no gap over ${SLO.freeze_ms} ms (a freeze)` : "",
  SLO.e2e_s != null ? `last word within ${SLO.e2e_s} s of arrival (end-to-end)` : "",
  SLO.delay_s != null ? `reading started within ${SLO.delay_s} s of arrival (delay)` : ""].filter(Boolean).join(", ");
const LATE = {FIRST: 1, MEAN: 2, FROZE: 4, UNFINISHED: 8, E2E: 16, DELAY: 32};
// Okabe-Ito, in the order the PNG figures use (orange marks reading, vermillion freezes).
const COLOURS = ["#0072B2", "#009E73", "#CC79A7", "#56B4E9", "#000000", "#E69F00", "#F0E442"];
const DASHES = ["", "6 3", "8 3 2 3", "2 3", "10 3 2 3 2 3"];
const SVGNS = "http://www.w3.org/2000/svg";

function cumsum(a) {
  const out = new Float64Array(a.length);
  let s = 0;
  for (let i = 0; i < a.length; i++) { s += a[i]; out[i] = s; }
  return out;
}

function el(tag, attrs, parent, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

/** A figure from the data: JSON has no infinity, so an infinite one comes as "inf" (a reply
 *  never finished under a percentiles rule; dollars per million with nothing on time). */
function num(x) { return x === "inf" ? Infinity : x === "-inf" ? -Infinity : x; }

function fmt(x, digits) {
  x = num(x);
  if (x === Infinity || x === -Infinity) return x > 0 ? "∞" : "−∞";
  return x === null || x === undefined || Number.isNaN(x) ? "–" : x.toFixed(digits);
}

function pct(x) { return x === null ? "–" : x < 9.95 ? x.toFixed(1) : x.toFixed(0); }

// The player's run: the page's own seed (D itself), or another seed's run of D.seed_runs
// (the same fields over a shorter span); `useRun` switches REQ, ROW_OF and each ARR's times.
const OWN_RUN = {seed: D.scenario.seed, span_ns: D.span_ns, requests: D.requests, arrangements: D.arrangements};
const REQ = {id: [], arrived: [], prompt: [], words: []};
const ROW_OF = new Map();

/** An arrangement's player part (its requests' times and its iterations), decoded against REQ
 * and the run's span. */
function decodePlayer(a, span) {
  const r = a.requests, n = REQ.id.length;
  const abs = (base, off) => { const out = new Float64Array(n); for (let i = 0; i < n; i++) out[i] = off[i] < 0 || base[i] < 0 ? -1 : base[i] + off[i]; return out; };
  const read = abs(REQ.arrived, r.read), first = abs(REQ.arrived, r.first);
  const gpus = a.iterations.map((g) => {
    const start = new Float64Array(g.dur.length), end = new Float64Array(g.dur.length);
    let t = span[0];
    for (let i = 0; i < g.dur.length; i++) { start[i] = t + g.wait[i]; end[i] = start[i] + g.dur[i]; t = end[i]; }
    const wend = [];  // ends of the iterations that write words, in order: a reply's words 2.. are consecutive here
    for (let i = 0; i < g.dur.length; i++) if (g.rep[i] > 0) wend.push(end[i]);
    return {first: g.first, wfirst: g.wfirst, start, end, wend: Float64Array.from(wend), tok: g.tok, rep: g.rep};
  });
  return {gpus, req: {rg: r.rg, wg: r.wg, read, first, joined: abs(first, r.join), fin: abs(REQ.arrived, r.fin),
                      maxgap: r.maxgap, nfz: r.nfz, late: r.late, jw: r.jw,
                      sent: r.sent || null,  // n_requests_per_gpu only: 1 for the requests this arrangement was sent
                      wn: r.wn || null,  // E16 only: each reply's writing iterations (several words each)
                      // replies in several stretches (E9) only: each reply's stretches of words [GPU, first write
                      // position, its word number, words, word before (abs ns), whether the stretch wrote it] and
                      // its preemptions (abs ns)
                      st: r.st ? r.st.map((ss, i) => ss.map(([g, p, f, k, l, o, per]) => [g, p, f, k, l < 0 ? -1 : REQ.arrived[i] + l, o, per])) : null,
                      pre: r.pre ? r.pre.map((ts, i) => ts.map((t) => REQ.arrived[i] + t)) : null,
                      // and its re-reads (E9 recompute) [GPU, from, to (abs ns), tokens, first and last iteration, iterations]
                      rr: r.rr ? r.rr.map((xs, i) => xs.map(([g, f, t, ...more]) => [g, REQ.arrived[i] + f, REQ.arrived[i] + t, ...more])) : null}};
}

function decodeArrangement(a, index) {
  return {
    name: a.name, kind: a.kind, description: a.description, isSplit: a.is_split, lanes: a.lanes, unit: a.unit, roles: a.roles, moves: a.moves, summary: a.summary, gaps: a.gaps, first_words: a.first_words, index,
    means: a.means || null, interval: a.interval || null, by_seed: a.by_seed || null,
    colour: COLOURS[index % COLOURS.length], dash: DASHES[index % DASHES.length], gpus: [], req: null,
  };
}
const ARR = D.arrangements.map(decodeArrangement);

/** Make `run` the player's: its requests, its span (D.span_ns) and, per arrangement, its times,
 * iterations and summary (with several seeds, the seed's own figures from by_seed). */
function useRun(run) {
  REQ.id = cumsum(run.requests.id); REQ.arrived = cumsum(run.requests.arrived);
  REQ.prompt = run.requests.prompt; REQ.words = run.requests.words;
  ROW_OF.clear();
  REQ.id.forEach((id, i) => ROW_OF.set(id, i));
  D.span_ns = run.span_ns;
  const k = D.scenario.seeds.indexOf(run.seed);
  ARR.forEach((a, i) => {
    Object.assign(a, decodePlayer(run.arrangements[i], run.span_ns));
    a.seed = run.seed;
    if (run !== OWN_RUN && a.by_seed && k >= 0) {
      a.summary = Object.fromEntries(Object.entries(a.by_seed).map(([key, v]) => [key, v[k]]));
    } else a.summary = D.arrangements[i].summary;
  });
}
useRun(OWN_RUN);

// Shade scale of tokens read, shared by every arrangement and seed: the longest prompt of the
// page's own seed is darkest (an iteration reading more, or another seed's longer prompt, is as dark).
const MAX_TOKENS = REQ.prompt.reduce((m, p) => Math.max(m, p), 1);

// ---- the comparison table ----
// Columns come from the embedded data (the registry of output columns); the reference figure,
// when the scenario gives one, follows the on-time share.
function formatter(digits) {
  if (digits === "share") return pct;
  return (x) => fmt(x, digits);
}
const COLUMNS = [];
D.columns.forEach((c) => {
  COLUMNS.push([c.key, c.label, c.key === "arrangement" ? null : formatter(c.digits), c.meaning]);
  if (c.key === "on_time_pct" && D.reference) {
    COLUMNS.push(["reference", "page's figure %", (x) => (x === null ? "–" : String(x)),
                  "the on-time share the scenario gives as reference"]);
  }
});

const SEEDS = D.scenario.seeds;
const MANY = SEEDS.length > 1;

/** A table cell's figure: with several seeds, the mean over them (summary.csv's mean). */
function cell(a, key) {
  if (key === "arrangement") return a.name;
  if (key === "reference") return D.reference[a.name] ?? null;
  return num(MANY ? a.means[key] ?? null : a.summary[key]);
}

/** " ±1.2" or " −2.9/+1.4" (the 95% interval's sides, as the terminal's --wide prints them). */
function intervalText(a, key, f) {
  const span = MANY && a.interval ? a.interval[key] : null, m = cell(a, key);
  if (!span || m === null || !Number.isFinite(m) || !Number.isFinite(num(span[1]))) return "";
  const below = m - span[0], above = span[1] - m;
  const lo = f(below), hi = f(above);
  return lo === hi || Math.max(below, above) <= 1.25 * Math.min(below, above) ? ` ±${f(Math.max(below, above))}` : ` −${lo}/+${hi}`;
}

function drawTable() {
  const table = document.getElementById("arrangements");
  const head = el("tr", {}, table.tHead);
  let sortKey = null, sortDir = 1;
  COLUMNS.forEach(([key, label, , meaning]) => {
    const th = el("th", {scope: "col", "aria-sort": "none", title: meaning}, head);
    const b = el("button", {type: "button", "data-key": key}, th, label);
    b.addEventListener("click", () => {
      sortDir = sortKey === key ? -sortDir : (key === "arrangement" ? 1 : -1);
      sortKey = key;
      head.querySelectorAll("th").forEach((h) => h.setAttribute("aria-sort", "none"));
      th.setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending");
      const rows = Array.from(table.tBodies[0].rows);
      rows.sort((r1, r2) => {
        const x = cell(ARR[r1.dataset.index], key), y = cell(ARR[r2.dataset.index], key);
        if (x === y) return r1.dataset.index - r2.dataset.index;
        if (x === null) return 1;
        if (y === null) return -1;
        return (x < y ? -1 : 1) * sortDir;
      });
      rows.forEach((r) => table.tBodies[0].appendChild(r));
    });
  });
  ARR.forEach((a, i) => {
    const tr = el("tr", {"data-testid": "arrangement-row", "data-arrangement": a.name, "data-index": i,
                         tabindex: "0", "aria-selected": "false"}, table.tBodies[0]);
    COLUMNS.forEach(([key, , f]) => {
      const td = el(key === "arrangement" ? "th" : "td", key === "arrangement" ? {scope: "row"} : {}, tr);
      if (key === "arrangement") {
        const sw = el("svg:svg", {width: 22, height: 10, "aria-hidden": "true"}, td);
        el("svg:line", {x1: 1, y1: 5, x2: 21, y2: 5, stroke: a.colour, "stroke-width": 3, "stroke-dasharray": a.dash}, sw);
        td.append(" " + a.name);
      } else {
        td.textContent = f(cell(a, key)) + (key === "reference" ? "" : intervalText(a, key, f));
        if (MANY && a.by_seed && a.by_seed[key]) {  // hover: every seed's own figure
          td.title = `mean of ${SEEDS.length} seeds; ` + a.by_seed[key].map((v, k) => `seed ${SEEDS[k]}: ${f(v)}`).join(", ");
          td.dataset.seeds = JSON.stringify(a.by_seed[key]);
        }
      }
    });
    const choose = () => { Player.show(i); document.getElementById("player").scrollIntoView({block: "nearest"}); };
    tr.addEventListener("click", choose);
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); choose(); } });
  });
  const s = D.scenario;
  const n = ARR.length ? ARR[0].summary.n_requests : 0;
  const seedText = MANY ? `each figure the mean of ${SEEDS.length} seeds (${SEEDS[0]}–${SEEDS[SEEDS.length - 1]}) ± its 95% interval; hover a cell for each seed's figure`
    : `seed ${s.seed}`;
  const note = [`${n.toLocaleString("en")} measured requests (arriving ${+s.measured_s[0].toFixed(3)}–${+s.measured_s[1].toFixed(3)} s)${MANY ? " in the player's seed" : ""}, ${seedText}` +
    (s.rate_per_s ? `, ${s.rate_per_s} requests/s` : "") + ". On time: " +
    `${LIMIT_WORDS}.`];
  if (D.reference) note.push("“page's figure”: the on-time share the scenario gives as reference (its own run, its own traffic).");
  document.getElementById("table-note").textContent = note.join(" ");
}

function boot() {
  document.getElementById("lede").textContent =
    `${ARR.length} arrangements of the same requests. The player animates one arrangement's GPUs and a sample of its replies; ` +
    `it holds the iterations from ${(D.span_ns[0] / NS).toFixed(1)} s to ${(D.span_ns[1] / NS).toFixed(1)} s ` +
    `and the ${REQ.id.length.toLocaleString("en")} requests in progress then.` +
    (MANY ? ` The player shows seed ${D.scenario.seed} of ${SEEDS.length}: ${D.scenario.seed_why}.` +
      (D.seed_runs.length ? ` Switch it to ${D.seed_runs.length === SEEDS.length - 1 ? "any other seed" : `${D.seed_runs.length} other seeds`} ` +
        `(their runs from ${(D.seed_runs[0].span_ns[0] / NS).toFixed(1)} s to ${(D.seed_runs[0].span_ns[1] / NS).toFixed(1)} s only)` +
        (D.seed_runs_note ? `; ${D.seed_runs_note}` : "") + "." : "") : "");
  drawTable();
  performance.mark("table-shown");
  Charts.draw(document.getElementById("charts"));
  Player.init();
  if (ARR.length) Player.show(0);
  document.getElementById("footer").textContent = "Written by disagg_simpy. One file: no network, all data inline.";
}

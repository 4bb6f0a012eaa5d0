// The player: one arrangement's GPUs and a sample of its replies over a window, animated.
// Everything is drawn once per arrangement or window; playing only moves the playhead, the
// veil over the future and the clock.

const LABEL_W = 190, LANE_H = 22, REPLY_H = 15, TOP = 22, N_REPLIES = 16;
const WRITE_FILL = "#A9B4C2", SHIP = "#0072B2", FREEZE = "#D55E00", WORD = "#333333", WAIT = "#8C8C8C";
const ROLE_TEXT = {reads: "reads prompts", writes: "writes replies", both: "reads + writes"};

function readShade(tokens) {
  // light to dark orange, by tokens read (shared scale over the page, square-root so short
  // prompts still show)
  const f = Math.min(1, Math.sqrt(tokens / MAX_TOKENS));
  const lo = [249, 205, 130], hi = [140, 70, 0];
  return `rgb(${lo.map((v, i) => Math.round(v + (hi[i] - v) * f)).join(",")})`;
}

function lowerBound(arr, x) { // first index with arr[i] >= x
  let lo = 0, hi = arr.length;
  while (lo < hi) { const m = (lo + hi) >> 1; if (arr[m] < x) lo = m + 1; else hi = m; }
  return lo;
}

function lateText(bits, nfz) {
  if (!bits) return "on time";
  const why = [];
  if (bits & LATE.UNFINISHED) why.push("unfinished when the run stopped");
  if (bits & LATE.FIRST) why.push(`first word after ${SLO.first_word_s} s`);
  if (bits & LATE.MEAN) why.push(SLO.tpot === "inclusive" ? `TPOT with word 1 over ${SLO.mean_gap_ms} ms` : `mean gap over ${SLO.mean_gap_ms} ms`);
  if (bits & LATE.FROZE && !(bits & LATE.UNFINISHED)) why.push(`froze (${nfz} gap${nfz === 1 ? "" : "s"} over ${SLO.freeze_ms} ms)`);
  if (bits & LATE.E2E) why.push(`end-to-end over ${SLO.e2e_s} s`);
  if (bits & LATE.DELAY) why.push(`delay over ${SLO.delay_s} s`);
  return "late: " + why.join("; ");
}

function shortLate(bits) {
  if (!bits) return "✓ on time";
  const why = [];
  if (bits & LATE.UNFINISHED) return "✗ unfinished";
  if (bits & LATE.FIRST) why.push("slow 1st word");
  if (bits & LATE.MEAN) why.push("slow words");
  if (bits & LATE.FROZE) why.push("froze");
  if (bits & LATE.E2E) why.push("slow end-to-end");
  if (bits & LATE.DELAY) why.push("slow start");
  return "✗ " + why.join(", ");
}

/** Words 2.. of reply row `i` of arrangement `a` that the embedded iterations hold: indices lo
 * to hi into its writing GPU's `wend` (the ends of the held iterations that write words), and
 * where word 2 is (for the first gap, which starts at word 1). With E16 an iteration may write
 * several of its words (`wn` iterations in all): one tick each, their gaps of 0 no freeze. */
function wordRange(a, i) {
  const r = a.req, g = r.wg[i], jw = r.jw[i];
  if (g < 0 || jw < 0) return null;
  const gpu = a.gpus[g];
  const n = r.wn ? r.wn[i] : REQ.words[i] - 1;  // the writing iterations of its words 2..
  const lo = jw - gpu.wfirst, hi = jw + n - 1 - gpu.wfirst; // inclusive, local
  return {gpu, lo: Math.max(lo, 0), hi: Math.min(hi, gpu.wend.length - 1), jwLocal: lo};
}

const Player = {
  arr: null, a: 0, len: 4 * NS, t: 0, playing: false, speed: 0.5, follow: null, pinned: null, last: 0,

  init() {
    const lo = D.span_ns[0], hi = D.span_ns[1], m = D.scenario.measured_s;
    this.len = Math.min(this.len, hi - lo);
    this.a = Math.max(lo, Math.min(hi - this.len, Math.round((m[0] + (m[1] - m[0]) / 3) * NS)));
    this.t = this.a;
    const ws = document.getElementById("win-start");
    ws.min = (lo / NS).toFixed(1); ws.max = (hi / NS).toFixed(1); ws.value = (this.a / NS).toFixed(1);
    ws.addEventListener("change", () => this.setWindow(Number(ws.value) * NS, this.len));
    const wl = document.getElementById("win-len");
    wl.addEventListener("change", () => this.setWindow(this.a, Number(wl.value) * NS));
    document.getElementById("speed").addEventListener("change", (e) => { this.speed = Number(e.target.value); });
    document.getElementById("play").addEventListener("click", () => this.toggle());
    document.getElementById("scrub").addEventListener("input", (e) => this.seek(this.a + (Number(e.target.value) / 1000) * this.len));
    const fid = document.getElementById("follow-id");
    fid.min = REQ.id[0] ?? 0; fid.max = REQ.id[REQ.id.length - 1] ?? 0;
    fid.addEventListener("change", () => {
      const id = Number(fid.value);
      if (ROW_OF.has(id)) { this.followRequest(id); return; }
      const box = document.getElementById("follow");  // an id the run does not hold: say so, keep what was followed
      box.querySelector("[data-testid=follow-unknown]")?.remove();
      const ids = `${REQ.id[0]} to ${REQ.id[REQ.id.length - 1]}`;
      box.prepend(el("p", {class: "note", "data-testid": "follow-unknown"}, null,
        `No measured request has id ${fid.value.trim() || "(empty)"} in this run (measured ids run from ${ids}).`));
    });
    const seeds = document.getElementById("seed-run");
    const runs = [OWN_RUN, ...D.seed_runs].sort((p, q) => p.seed - q.seed);
    if (runs.length > 1) {
      runs.forEach((run) => el("option", {value: run.seed}, seeds,
        `seed ${run.seed}${run === OWN_RUN ? " (representative)" : ""}`));
      seeds.value = String(D.scenario.seed);
      seeds.addEventListener("change", () => this.useSeed(runs.find((run) => run.seed === Number(seeds.value))));
    } else seeds.parentElement.hidden = true;
    document.addEventListener("keydown", (e) => this.key(e));
    window.addEventListener("resize", () => { if (this.arr) this.render(); });
  },

  key(e) {
    const tag = e.target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA" || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === " " && tag !== "BUTTON") { e.preventDefault(); this.toggle(); }
    else if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
      e.preventDefault();
      const step = (e.shiftKey ? 1 : 0.1) * NS * (e.key === "ArrowRight" ? 1 : -1);
      this.seek(this.t + step);
    }
  },

  show(index) {
    this.arr = ARR[index];
    document.getElementById("player").dataset.arrangement = this.arr.name;
    document.querySelectorAll("[data-testid=arrangement-row]").forEach((tr) =>
      tr.setAttribute("aria-selected", String(tr.dataset.arrangement === this.arr.name)));
    document.getElementById("player-h").textContent =
      `${this.arr.name}${MANY ? ` (seed ${this.arr.seed})` : ""}: ${pct(this.arr.summary.on_time_pct)}% of ` +
      `${this.arr.summary.n_requests.toLocaleString("en")} replies on time. ${this.arr.description}`;
    this.render();
    if (this.pinned !== null) this.detail(this.pinned);
  },

  /** Switch to another seed's run: the same arrangement, the window kept where that run holds
   * it; a followed or pinned request is let go (the seeds' requests differ). */
  useSeed(run) {
    this.pause();
    useRun(run);
    document.getElementById("player").dataset.seed = String(run.seed);
    this.follow = null; this.pinned = null;
    document.getElementById("follow-id").value = "";
    const fid = document.getElementById("follow-id");
    fid.min = REQ.id[0] ?? 0; fid.max = REQ.id[REQ.id.length - 1] ?? 0;
    const ws = document.getElementById("win-start");
    ws.min = (D.span_ns[0] / NS).toFixed(1); ws.max = (D.span_ns[1] / NS).toFixed(1);
    document.getElementById("reply-detail").replaceChildren(el("p", {class: "note"}, null, "Hover or click a reply to see its numbers."));
    drawFollow();
    const len = Math.min(this.len, D.span_ns[1] - D.span_ns[0]);
    this.setWindow(Math.max(D.span_ns[0], Math.min(this.a, D.span_ns[1] - len)), len);
    this.show(this.arr.index);
  },

  setWindow(a, len) {
    const lo = D.span_ns[0], hi = D.span_ns[1];
    len = Math.min(len, hi - lo);
    a = Math.max(lo, Math.min(a, hi - len));
    this.a = a; this.len = len; this.t = a;
    document.getElementById("win-start").value = (a / NS).toFixed(1);
    this.render();
  },

  toggle() { this.playing ? this.pause() : this.play(); },

  play() {
    if (this.t >= this.a + this.len) this.t = this.a;
    this.playing = true; this.last = performance.now();
    document.getElementById("play").textContent = "❚❚ Pause";
    document.getElementById("play").setAttribute("aria-pressed", "true");
    const step = (now) => {
      if (!this.playing) return;
      this.seek(this.t + (now - this.last) * 1e6 * this.speed);
      this.last = now;
      if (this.t >= this.a + this.len) this.pause(); else requestAnimationFrame(step);
    };
    requestAnimationFrame(step);
  },

  pause() {
    this.playing = false;
    document.getElementById("play").textContent = "▶ Play";
    document.getElementById("play").setAttribute("aria-pressed", "false");
  },

  seek(t) {
    this.t = Math.max(this.a, Math.min(t, this.a + this.len));
    document.getElementById("clock").textContent = (this.t / NS).toFixed(3);
    document.getElementById("scrub").value = Math.round(((this.t - this.a) / this.len) * 1000);
    if (!this.svg) return;
    const x = this.x(this.t);
    this.head.setAttribute("x1", x); this.head.setAttribute("x2", x);
    this.veil.setAttribute("x", x); this.veil.setAttribute("width", Math.max(0, this.x(this.a + this.len) - x));
  },

  x(t) { return LABEL_W + ((t - this.a) / this.len) * this.plotW; },

  sample() {
    const a = this.arr, r = a.req, end = this.a + this.len, rows = [];
    for (let i = 0; i < REQ.id.length; i++)
      if ((!r.sent || r.sent[i]) && REQ.arrived[i] < end && (r.fin[i] < 0 || r.fin[i] >= this.a)) rows.push(i);
    let pick = rows;
    if (rows.length > N_REPLIES) {
      pick = [];
      for (let k = 0; k < N_REPLIES; k++) pick.push(rows[Math.round((k * (rows.length - 1)) / (N_REPLIES - 1))]);
      pick = [...new Set(pick)];
    }
    const f = this.follow === null ? -1 : ROW_OF.get(this.follow);
    if (f >= 0 && (!r.sent || r.sent[f]) && !pick.includes(f)) { pick.push(f); pick.sort((p, q) => p - q); }
    return pick;
  },

  render() {
    const a = this.arr, stage = document.getElementById("stage");
    const W = Math.max(720, stage.clientWidth || 1000);
    this.plotW = W - LABEL_W - 12;
    const split = a.isSplit;
    const nReads = a.roles.filter((r) => r === "reads").length;
    const gpuY = (g) => TOP + (g + (split && g >= nReads ? 1 : 0)) * LANE_H;
    const shipY = TOP + nReads * LANE_H;
    const replyTop = TOP + (a.roles.length + (split ? 1 : 0)) * LANE_H + 18;
    const rows = this.sample();
    const H = replyTop + rows.length * REPLY_H + 8;
    const svg = el("svg:svg", {width: W, height: H, role: "img", "aria-label": `timeline of ${a.name}`, "data-testid": "timeline"});
    const lo = this.a, hi = this.a + this.len, X = (t) => this.x(Math.max(lo, Math.min(hi, t)));

    // time axis
    const axis = el("svg:g", {class: "axis"}, svg);
    const stepS = [0.1, 0.2, 0.5, 1, 2, 5][lowerBound([0.5, 1, 2.5, 5, 10, 25], this.len / NS / 2) ] || 5;
    for (let s = Math.ceil(lo / NS / stepS) * stepS; s * NS <= hi + 1; s += stepS) {
      const x = this.x(s * NS);
      el("svg:line", {x1: x, x2: x, y1: TOP - 4, y2: H, class: "grid"}, axis);
      el("svg:text", {x, y: TOP - 8, "text-anchor": "middle"}, axis, `${+s.toFixed(2)} s`);
    }

    // GPU lanes
    a.roles.forEach((role, g) => {
      const lane = el("svg:g", {"data-testid": "gpu-lane", "data-gpu": g, "data-role": role}, svg);
      el("svg:text", {x: 4, y: gpuY(g) + LANE_H / 2 + 4, class: "lane-label"}, lane, `${a.lanes[g]}: ${ROLE_TEXT[role]}`);
      const it = a.gpus[g], i0 = lowerBound(it.end, lo + 1), y = gpuY(g) + 2;
      for (let i = i0; i < it.start.length && it.start[i] < hi; i++) {
        const x0 = X(it.start[i]), x1 = X(it.end[i]), tok = it.tok[i];
        const rect = el("svg:rect", {x: x0, y, width: Math.max(0.5, x1 - x0), height: LANE_H - 4,
                                     fill: tok > 0 ? readShade(tok) : WRITE_FILL, class: "it"}, lane);
        el("svg:title", {}, rect, `${a.lanes[g]}, iteration ${it.first + i}: ${((it.end[i] - it.start[i]) / 1e6).toFixed(2)} ms, ` +
          `${(it.start[i] / NS).toFixed(3)}–${(it.end[i] / NS).toFixed(3)} s; writes ${it.rep[i]} word${it.rep[i] === 1 ? "" : "s"}` +
          (tok ? `, reads ${tok.toLocaleString("en")} prompt tokens` : ""));
        if (tok && x1 - x0 > 70) el("svg:text", {x: (x0 + x1) / 2, y: y + LANE_H / 2 + 2, "text-anchor": "middle",
          class: Math.sqrt(tok / MAX_TOKENS) > 0.6 ? "block-label dark" : "block-label"}, lane, `${tok.toLocaleString("en")} tokens`);
      }
    });
    // E12: each move on its GPU's lane: outlined while it drains, grey while it warms up
    (a.moves || []).forEach((m) => {
      const y = gpuY(m.gpu) + 2, drained = m.drained < 0 ? hi : m.drained, serving = m.serving < 0 ? hi : m.serving;
      const g = el("svg:g", {"data-testid": "move"}, svg);
      if (drained > lo && m.asked < hi && drained > m.asked)
        el("svg:rect", {x: X(m.asked), y, width: Math.max(0.5, X(drained) - X(m.asked)), height: LANE_H - 4,
                        fill: "none", stroke: "#F2C14E", "stroke-width": 2, class: "move-drain"}, g);
      if (serving > lo && drained < hi && serving > drained)
        el("svg:rect", {x: X(drained), y, width: Math.max(0.5, X(serving) - X(drained)), height: LANE_H - 4,
                        fill: "#7F7F7F", opacity: 0.5, class: "move-warm"}, g);
      el("svg:title", {}, g, `${a.lanes[m.gpu]} moves to ${m.to === "reads" ? "reading" : "writing"} (${m.why}): ` +
        `asked ${(m.asked / NS).toFixed(3)} s, drained ${m.drained < 0 ? "-" : (m.drained / NS).toFixed(3) + " s"}, ` +
        `serving ${m.serving < 0 ? "-" : (m.serving / NS).toFixed(3) + " s"}`);
      if (m.serving >= lo && m.serving <= hi) el("svg:text", {x: this.x(m.serving) + 2, y: y + 9, class: "block-label"},
                                               g, `→ ${m.to}`);
    });
    if (split) {
      const ships = el("svg:g", {"data-testid": "ship-lane"}, svg);
      el("svg:text", {x: 4, y: shipY + LANE_H / 2 + 4, class: "lane-label"}, ships, "KV cache ships ↓");
      const r = a.req;
      for (let i = 0; i < REQ.id.length; i++) {
        if (r.joined[i] < 0 || r.joined[i] <= r.first[i] || r.first[i] >= hi || r.joined[i] <= lo) continue;
        el("svg:line", {x1: this.x(r.first[i]), y1: shipY + 2, x2: this.x(r.joined[i]), y2: shipY + LANE_H - 2,
                        stroke: SHIP, "stroke-width": 1.5, class: "ship"}, ships);
      }
    }

    // reply lanes
    el("svg:text", {x: 4, y: replyTop - 5, class: "section-label"}, svg,
       `${rows.length} replies in progress in this window (request id, reading→writing GPU, verdict)`);
    rows.forEach((i, k) => this.replyLane(svg, i, replyTop + k * REPLY_H, X));

    this.head = el("svg:line", {y1: TOP - 4, y2: H, class: "playhead"}, svg);
    this.veil = el("svg:rect", {y: TOP - 4, height: H - TOP + 4, class: "veil"}, svg);
    stage.replaceChildren(svg);
    this.svg = svg;
    this.seek(this.t);
    this.drawLegend(split);
    drawFollow();
  },

  replyLane(svg, i, y, X) {
    const a = this.arr, r = a.req, lo = this.a, hi = this.a + this.len, id = REQ.id[i], mid = y + REPLY_H / 2;
    const lane = el("svg:g", {"data-testid": "reply-lane", "data-request-id": id, class: "reply" +
      (r.late[i] ? " late" : "") + (id === this.follow ? " followed" : ""), tabindex: "0"}, svg);
    el("svg:rect", {x: 0, y, width: this.x(hi) + 2, height: REPLY_H, class: "reply-bg"}, lane);
    const gp = r.wg[i] >= 0 && r.wg[i] !== r.rg[i] ? `${a.unit} ${r.rg[i]}→${r.wg[i]}` : `${a.unit} ${r.rg[i]}`;
    el("svg:text", {x: 4, y: mid + 4, class: "reply-label"}, lane, `#${id} ${gp} ${shortLate(r.late[i])}`);
    const span = (t0, t1, cls) => {
      if (t0 < 0) return;
      if (t1 < 0) t1 = hi;
      if (t1 <= lo || t0 >= hi || t1 <= t0) return;
      el("svg:line", {x1: X(t0), x2: X(t1), y1: mid, y2: mid, class: cls}, lane);
    };
    span(REQ.arrived[i], r.read[i] < 0 ? -1 : r.read[i], "waiting");
    span(r.read[i], r.first[i] < 0 ? -1 : r.first[i], "reading");
    if (r.joined[i] > r.first[i]) span(r.first[i], r.joined[i], "shipping");
    if (r.st) drawPieces(this, lane, i, y, X);  // E9: a reply's words in several stretches (pieces.js)
    const w = r.st ? null : wordRange(a, i);
    if (w) {
      const {gpu, jwLocal} = w, wend = gpu.wend;
      let d = "";
      const from = Math.max(w.lo, lowerBound(wend, lo)), to = Math.min(w.hi, lowerBound(wend, hi + 1) - 1);
      for (let k = from; k <= to; k++) d += `M${this.x(wend[k]).toFixed(1)} ${y + 3}v${REPLY_H - 6}`;
      if (d) el("svg:path", {d, class: "words"}, lane);
      // freezes: gaps over the limit that reach into the window (the first gap starts at word 1)
      const upto = Math.min(w.hi, lowerBound(wend, hi));
      for (let k = Math.max(w.lo, lowerBound(wend, lo)); k <= upto; k++) {
        const prev = k === jwLocal ? r.first[i] : k - 1 >= 0 ? wend[k - 1] : -1;
        if (prev < 0 || wend[k] - prev <= FREEZE_NS + 1 || prev >= hi) continue;
        el("svg:rect", {x: X(prev), y: mid - 3, width: Math.max(1, X(wend[k]) - X(prev)), height: 6,
                        class: "freeze"}, lane);
      }
    }
    if (r.first[i] >= lo && r.first[i] <= hi) {
      const x = this.x(r.first[i]);
      el("svg:path", {d: `M${x} ${mid - 5}l5 5l-5 5l-5 -5z`, class: "first-word"}, lane);
    }
    lane.addEventListener("mouseenter", () => this.detail(id));
    lane.addEventListener("mouseleave", () => { if (this.pinned !== null) this.detail(this.pinned); });
    const pin = () => { this.pinned = id; this.detail(id); this.followRequest(id, false); };
    lane.addEventListener("click", pin);
    lane.addEventListener("keydown", (e) => { if (e.key === "Enter") pin(); });
  },

  detail(id) {
    const a = this.arr, r = a.req, i = ROW_OF.get(id), box = document.getElementById("reply-detail");
    box.dataset.requestId = id;
    box.replaceChildren();
    el("h3", {}, box, `Request #${id} on ${a.name}`);
    if (r.sent && !r.sent[i]) {  // n_requests_per_gpu: a smaller arrangement is sent only the first requests
      el("p", {class: "note", "data-field": "not_sent"}, box, `${a.name} was not sent this request (n_requests_per_gpu: a smaller ` +
         "arrangement gets only the first requests, per GPU x its GPUs).");
      box.classList.remove("late");
      return;
    }
    const dl = el("dl", {}, box);
    const row = (label, field, text) => { el("dt", {}, dl, label); el("dd", {"data-field": field}, dl, text); };
    const s = (t) => (t < 0 ? "–" : (t / NS).toFixed(6));
    const n = REQ.words[i];
    row("prompt tokens", "n_prompt_tokens", String(REQ.prompt[i]));
    row("reply words", "n_reply_words", String(n));
    row("arrived at (s)", "arrived_at_s", s(REQ.arrived[i]));
    row("reading GPU", "reading_gpu", r.rg[i] < 0 ? "–" : String(r.rg[i]));
    row("first word at (s)", "first_word_at_s", s(r.first[i]));
    row("wait for the first word (s)", "first_word_s", r.first[i] < 0 ? "–" : ((r.first[i] - REQ.arrived[i]) / NS).toFixed(6));
    row("writing GPU", "writing_gpu", r.wg[i] < 0 ? "–" : String(r.wg[i]));
    if (r.joined[i] > r.first[i]) row("KV cache ship (ms)", "ship_ms", ((r.joined[i] - r.first[i]) / 1e6).toFixed(3));
    row("finished at (s)", "finished_at_s", s(r.fin[i]));
    row("mean gap (ms)", "mean_gap_ms", r.fin[i] < 0 || n < 2 ? "–" : ((r.fin[i] - r.first[i]) / (n - 1) / 1e6).toFixed(3));
    row("longest gap (ms)", "max_gap_ms", r.maxgap[i] < 0 ? "–" : (r.maxgap[i] / 1e6).toFixed(3));
    row("freezes", "n_freezes", r.nfz[i] < 0 ? "–" : String(r.nfz[i]));
    if (r.st) {  // E9: the reply's pieces (stretches) and preemptions, from the run's stretches
      const held = r.st[i].filter(([, , , k, l, o]) => k > 0 || (o && l >= 0));
      const one = new Set(held.map(([g]) => g)).size <= 1;  // every piece on one writing GPU: named once
      const parts = held.map(([g, , f, k, l, o]) => `${f - (o && l >= 0 ? 1 : 0)}–${f + k - 1}` +
        (one || g < 0 ? "" : ` on ${a.lanes[g]}`));
      if (one && held.length && held[0][0] >= 0) parts[parts.length - 1] += ` (${a.lanes[held[0][0]]})`;
      row("preemptions", "n_preemptions", String(r.pre[i].length));
      row("words written, by piece", "pieces", parts.length ? parts.join("; ") : "–");
      row("words written", "n_words_written", String(r.st[i].reduce((s, [, , , k, l, o]) => s + k + (o && l >= 0 ? 1 : 0), 0)));
      const rr = r.rr ? r.rr[i] : [];
      if (rr.length) row("read again (recompute)", "rereads", rr.map(([g, f, t, tok, i0, i1, k]) =>
        `${tok.toLocaleString("en")} tokens on ${a.lanes[g]}, ${s(f)}–${s(t)} s (iteration${k === 1 ? ` ${i0}` : `s ${i0}–${i1}`})`).join("; "));
    }
    row("verdict", "verdict", lateText(r.late[i], r.nfz[i]));
    box.classList.toggle("late", r.late[i] !== 0);
  },

  followRequest(id, rerender = true) {
    this.follow = id;
    document.getElementById("follow-id").value = id;
    if (rerender) { this.pinned = id; this.render(); this.detail(id); } else drawFollow();
    this.svg.querySelectorAll(".reply").forEach((g) => g.classList.toggle("followed", Number(g.dataset.requestId) === id));
  },

  /** Show arrangement `index` with the window around request `id`'s first word. */
  jumpTo(index, id) {
    const i = ROW_OF.get(id), a = ARR[index];
    const t = a.req.first[i] >= 0 ? a.req.first[i] : REQ.arrived[i];
    this.arr = a;
    this.setWindow(t - this.len / 4, this.len);
    this.show(index);
  },

  drawLegend(split) {
    const items = [["it-read", "iteration reading a prompt (darker: more tokens)"], ["it-write", "iteration only writing"],
      ["waiting", "prompt waits"], ["reading", "prompt being read"], ["first-word", "first word"],
      ["words", "a later word"], ...(SLO.freeze_ms == null ? [] : [["freeze", `freeze: gap over ${SLO.freeze_ms} ms`]])];
    if (split) items.splice(5, 0, ["shipping", "KV cache ships"]);
    if (this.arr.req.pre) items.push(["preempted", "preempted (KV memory, E9)"], ["away", "away until read again or its next word (preempted)"]);
    const box = document.getElementById("legend");
    box.replaceChildren();
    for (const [cls, text] of items) { const s = el("span", {}, box); el("i", {class: "key " + cls}, s); s.append(text); }
  },
};

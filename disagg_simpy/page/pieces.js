// Replies in several pieces (E9: a preempted reply resumes after a re-read or a swap): the
// player draws every stretch of words the run logged, each on its own GPU's writing iterations,
// and each re-read (recompute) as a reading span over the iterations that read it.

/** The pieces of reply row `i` of arrangement `a` that has stretches (E9): per stretch, its GPU
 * and the [word number, time] of each of its words the embedded iterations hold (its own word
 * first, if it wrote it; E16: several words of one iteration share its time, all but the first `shared`). */
function stretchPieces(a, i) {
  const pieces = [];
  for (const [g, p, f, n, lead, own, per] of a.req.st[i]) {
    const words = [];
    if (own && lead >= 0) words.push([f - 1, lead]);
    const gpu = g >= 0 ? a.gpus[g] : null;
    if (gpu && p >= 0 && per) {  // E16: iteration k wrote per[k] words (after the first, shared: no tick)
      for (let k = 0, w = f; k < per.length; w += per[k], k++) {
        const at = p + k - gpu.wfirst;
        if (at >= gpu.wend.length) break;
        if (at >= 0) for (let j = 0; j < per[k]; j++) words.push([w + j, gpu.wend[at], j > 0]);
      }
    } else if (gpu && p >= 0) {
      for (let k = Math.max(0, gpu.wfirst - p); k < n; k++) {
        const at = p + k - gpu.wfirst;
        if (at >= gpu.wend.length) break;
        words.push([f + k, gpu.wend[at]]);
      }
    }
    if (words.length) pieces.push({gpu: g, words});
  }
  return pieces;
}

/** A reply in several stretches (E9: preempted, then re-read or swapped back in): each
 * stretch is drawn as its own piece on its own GPU's writing iterations (led by the word it
 * wrote itself, if it did: word 1 or a re-read's word), the time away between two pieces as a
 * dashed line until a re-read starts (recompute), each re-read as a reading span from its first
 * reading iteration's start to its last one's end, freezes between consecutive words over the
 * limit, and a cross at each preemption. Each piece, time away and re-read carries the figures it
 * draws (data-*). */
function drawPieces(player, lane, i, y, X) {
  const a = player.arr, r = a.req, lo = player.a, hi = player.a + player.len, mid = y + REPLY_H / 2;
  const pieces = stretchPieces(a, i);
  let prev = null;
  for (const pc of pieces) {
    const words = pc.words, first = words[0], last = words[words.length - 1];
    if (prev) {  // the time away: from the last word of the piece before to this piece's first
      const t0 = prev.words[prev.words.length - 1][1], t1 = first[1];
      const g = el("svg:g", {"data-testid": "piece-gap", "data-from-ns": t0, "data-to-ns": t1}, lane);
      if (t1 > t0 + FREEZE_NS + 1 && t0 < hi && t1 > lo)
        el("svg:rect", {x: X(t0), y: mid - 3, width: Math.max(1, X(t1) - X(t0)), height: 6, class: "freeze"}, g);
      const rr = (r.rr ? r.rr[i] : []).find(([, f, t]) => f >= t0 && t <= t1);  // a re-read ends the time away
      const away = rr ? rr[1] : t1;
      if (t0 < hi && away > lo && away > t0) el("svg:line", {x1: X(t0), x2: X(away), y1: mid, y2: mid, class: "away"}, g);
      el("svg:title", {}, g, `away ${((t1 - t0) / 1e6).toFixed(3)} ms between words ${prev.words[prev.words.length - 1][0]} and ${first[0]}`);
    }
    const g = el("svg:g", {"data-testid": "piece", "data-gpu": pc.gpu, "data-first-word": first[0], "data-last-word": last[0],
                           "data-words": words.length, "data-from-ns": first[1], "data-to-ns": last[1]}, lane);
    let d = "", ticks = 0;
    words.forEach(([w, t, shared], k) => {
      if (k > 0) {  // freezes inside the piece
        const t0 = words[k - 1][1];
        if (t - t0 > FREEZE_NS + 1 && t0 < hi && t > lo)
          el("svg:rect", {x: X(t0), y: mid - 3, width: Math.max(1, X(t) - X(t0)), height: 6, class: "freeze"}, g);
      }
      if (w > 1 && !shared && t >= lo && t <= hi) { d += `M${player.x(t).toFixed(1)} ${y + 3}v${REPLY_H - 6}`; ticks++; }
    });
    g.dataset.ticks = ticks;
    if (d) el("svg:path", {d, class: "words"}, g);
    el("svg:title", {}, g, `words ${first[0]}–${last[0]} on ${a.lanes[pc.gpu] ?? "–"}`);
    prev = pc;
  }
  for (const [g, f, t, tok, i0, i1, n] of r.rr ? r.rr[i] : []) {  // E9 recompute: each re-read, a reading span
    const rg = el("svg:g", {"data-testid": "reread", "data-gpu": g, "data-from-ns": f, "data-to-ns": t, "data-tokens": tok,
                            "data-first-iteration": i0, "data-last-iteration": i1, "data-iterations": n}, lane);
    if (f < hi && t > lo) el("svg:line", {x1: X(f), x2: X(t), y1: mid, y2: mid, class: "reading"}, rg);
    el("svg:title", {}, rg, `read again: ${tok.toLocaleString("en")} tokens (prompt + words so far) on ${a.lanes[g]}, ` +
       `iteration${n === 1 ? ` ${i0}` : `s ${i0}–${i1}`}, ${((t - f) / 1e6).toFixed(3)} ms`);
  }
  for (const t of r.pre[i]) {
    if (t < lo || t > hi) continue;
    const x = player.x(t);
    el("svg:path", {d: `M${x - 4} ${mid - 4}l8 8m0 -8l-8 8`, class: "preempted", "data-testid": "preempted", "data-at-ns": t}, lane);
  }
}

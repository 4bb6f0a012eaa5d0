// Traffic that changes over time (E11): the offered rate and each arrangement's on-time share,
// window by window, as over_time.csv has them (D.over_time; several seeds: their mean, as
// over_time.png draws it). Each window and point carries its figures (data-*).

function drawOverTime(box) {
  const o = D.over_time;
  if (!o || !o.start_s.length) return;
  const n = o.start_s.length, span = o.end_s[n - 1];
  const [per, unit] = span >= 7200 ? [3600, "h"] : span >= 600 ? [60, "min"] : [1, "s"];
  const W = 720, H = 330, L = 56, R = 16, top = [24, 176], ph = 110;
  const seeds = o.n_seeds > 1 ? `, mean of ${o.n_seeds} seeds` : "";
  const bounds = o.boundaries_s.length ? `; dotted line: the schedule's period boundary` : "";  // (as over_time.png's legend)
  const svg = chart(box, `Over time: requests arriving per second (top) and the share of them on time (bottom), window by window${seeds}${bounds}`, W, H);
  svg.setAttribute("data-testid", "over-time");
  const x = (s) => L + (s / span) * (W - L - R);
  const peak = Math.max(1e-9, ...o.rate_per_s.map((v) => v ?? 0)), mag = 10 ** Math.floor(Math.log10(peak));
  const rateStep = [1, 2, 5, 10].map((m) => m * mag).find((s) => peak / s <= 4), rateMax = Math.ceil(peak / rateStep) * rateStep;
  const yRate = (v) => top[0] + ph - (v / rateMax) * ph, yPct = (v) => top[1] + ph - (v / 100) * ph;
  // axes: rate ticks, share grid, time ticks
  for (let v = 0; v <= rateMax * (1 + 1e-9); v += rateStep) {
    el("svg:line", {x1: L, x2: W - R, y1: yRate(v), y2: yRate(v), class: "grid"}, svg);
    el("svg:text", {x: L - 4, y: yRate(v) + 4, "text-anchor": "end"}, svg, String(+v.toPrecision(3)));
  }
  el("svg:text", {x: 12, y: top[0] + ph / 2, transform: `rotate(-90 12 ${top[0] + ph / 2})`, "text-anchor": "middle"}, svg, "per s");
  for (const p of [0, 50, 100]) {
    el("svg:line", {x1: L, x2: W - R, y1: yPct(p), y2: yPct(p), class: "grid"}, svg);
    el("svg:text", {x: L - 4, y: yPct(p) + 4, "text-anchor": "end"}, svg, String(p));
  }
  el("svg:text", {x: 12, y: top[1] + ph / 2, transform: `rotate(-90 12 ${top[1] + ph / 2})`, "text-anchor": "middle"}, svg, "% on time");
  const step = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 43200, 86400].find((s) => span / s <= 8) || span;
  for (let s = 0; s <= span + 1e-9; s += step) {
    el("svg:text", {x: x(s), y: top[1] + ph + 14, "text-anchor": "middle", class: "tick"}, svg, `${+(s / per).toFixed(2)}`);
  }
  el("svg:text", {x: (L + W - R) / 2, y: top[1] + ph + 30, "text-anchor": "middle"}, svg, `arrival time (${unit})`);
  for (const b of o.boundaries_s) {
    el("svg:line", {x1: x(b), x2: x(b), y1: top[0], y2: top[1] + ph, class: "limit", "data-testid": "period-boundary"}, svg);
  }
  // the offered rate, as steps (the same requests for every arrangement)
  let d = "";
  for (let k = 0; k < n; k++) {
    const y = yRate(o.rate_per_s[k] ?? 0);
    d += `${k ? "L" : "M"}${x(o.start_s[k]).toFixed(1)} ${y.toFixed(1)}H${x(o.end_s[k]).toFixed(1)}`;
  }
  el("svg:path", {d, fill: "none", stroke: "#555555", "stroke-width": 1.5, "data-testid": "offered-rate"}, svg);
  // each arrangement's share, a point at each window's middle (none where no measured request arrived)
  ARR.forEach((a, i) => {
    const shares = o.on_time_pct[i];
    let line = "", pen = "M";
    shares.forEach((v, k) => {
      if (v === null) { pen = "M"; return; }
      line += `${pen}${x((o.start_s[k] + o.end_s[k]) / 2).toFixed(1)} ${yPct(v).toFixed(1)}`;
      pen = "L";
    });
    el("svg:path", {d: line, fill: "none", stroke: a.colour, "stroke-width": 2, "stroke-dasharray": a.dash, "data-arrangement": a.name}, svg);
    shares.forEach((v, k) => {
      if (v === null) return;
      el("svg:circle", {cx: x((o.start_s[k] + o.end_s[k]) / 2), cy: yPct(v), r: 2.5, fill: a.colour, "data-testid": "over-time-point",
                        "data-arrangement": a.name, "data-window": k, "data-on-time-pct": v}, svg);
    });
  });
  // each window, for hovering: its rate and every arrangement's share
  for (let k = 0; k < n; k++) {
    const g = el("svg:rect", {x: x(o.start_s[k]), y: top[0], width: Math.max(0.5, x(o.end_s[k]) - x(o.start_s[k])),
                              height: top[1] + ph - top[0], class: "window", "data-testid": "over-time-window", "data-window": k,
                              "data-start-s": o.start_s[k], "data-end-s": o.end_s[k], "data-rate-per-s": o.rate_per_s[k] ?? ""}, svg);
    el("svg:title", {}, g, `${+(o.start_s[k] / per).toFixed(3)}–${+(o.end_s[k] / per).toFixed(3)} ${unit}: ` +
      `${o.rate_per_s[k] === null ? "–" : o.rate_per_s[k].toFixed(2)} requests/s; ` +
      ARR.map((a, i) => `${a.name} ${o.on_time_pct[i][k] === null ? "–" : pct(o.on_time_pct[i][k])}% on time`).join(", "));
  }
}

// Canvas charts, drawn by hand (no library, no external request):
//  stacked(rows)      horizontal stacked bars, one per row (e.g. baseline / predicted)
//  grouped(cats, ser) vertical grouped bars
//  line(series)       x/y curves with an optional knee marker
// Each returns an element with a canvas that redraws on resize and theme change,
// and an aria-label that states the numbers.

import { h, cssVar } from './ui.js';

const charts = new Set();
export function redrawAll() { for (const c of charts) if (c.isConnected) c.__draw(); else charts.delete(c); }
window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', redrawAll);

function mount(height, label, drawFn) {
  const c = h('canvas', { class: 'chart', role: 'img', 'aria-label': label, style: `height:${height}px` });
  c.__draw = () => {
    const w = c.clientWidth || 400;
    const dpr = window.devicePixelRatio || 1;
    c.width = Math.round(w * dpr); c.height = Math.round(height * dpr);
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, height);
    g.font = '11.5px system-ui, sans-serif';
    g.textBaseline = 'middle';
    drawFn(g, w, height, { fg: cssVar('--fg'), muted: cssVar('--muted'), grid: cssVar('--grid'), border: cssVar('--border'), panel: cssVar('--panel') });
  };
  new ResizeObserver(() => c.__draw()).observe(c);
  charts.add(c);
  return c;
}

// Legend entries left to right, wrapping at maxX; returns the y of the last line.
function legend(g, items, x0, y, maxX, col) {
  let x = x0;
  for (const it of items) {
    const w = g.measureText(it.label).width + 30;
    if (x + w > maxX && x > x0) { x = x0; y += 16; }
    g.fillStyle = colorOf(it.color); g.fillRect(x, y - 5, 10, 10);
    g.fillStyle = col.muted; g.textAlign = 'left'; g.fillText(it.label, x + 14, y);
    x += w;
  }
  return y;
}

const colorOf = (c) => (c && c.startsWith('--') ? cssVar(c) : c);

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// rows: [{label, segments:[{label, value, color}]}]; fmt(v) for values.
export function stacked(rows, { fmt = (v) => v.toFixed(1), title = 'stacked bars' } = {}) {
  const segNames = rows.length ? rows[0].segments.map((s) => s.label) : [];
  const label = `${title}: ` + rows.map((r) => `${r.label}: ` + r.segments.map((s) => `${s.label} ${fmt(s.value)}`).join(', ')).join('; ');
  const height = rows.length * 34 + 52;
  const c = mount(height, label, (g, w, H, col) => {
    const left = 92, right = 12;
    const max = Math.max(1e-9, ...rows.map((r) => r.segments.reduce((a, s) => a + Math.max(0, s.value), 0)));
    rows.forEach((r, ri) => {
      const y = 8 + ri * 34;
      g.fillStyle = col.fg; g.textAlign = 'right'; g.fillText(r.label, left - 8, y + 12); g.textAlign = 'left';
      let x = left;
      for (const s of r.segments) {
        const wpx = (Math.max(0, s.value) / max) * (w - left - right);
        g.fillStyle = colorOf(s.color); g.fillRect(x, y, Math.max(0, wpx - 1), 24);
        if (wpx > 54) { g.fillStyle = '#fff'; g.fillText(fmt(s.value), x + 4, y + 12); }
        x += wpx;
      }
    });
    if (rows[0]) legend(g, rows[0].segments, 12, rows.length * 34 + 14, w - 4, col);
  });
  c.dataset.segments = segNames.join(',');
  return c;
}

// cats: ['forward', ...]; series: [{label, color, values:[...]}]
export function grouped(cats, series, { fmt = (v) => v.toFixed(1), title = 'bars', height = 200, integer = false } = {}) {
  const label = `${title}: ` + cats.map((c, i) => `${c}: ` + series.map((s) => `${s.label} ${fmt(s.values[i])}`).join(', ')).join('; ');
  return mount(height, label, (g, w, H, col) => {
    const left = 56, top = 10, right = 10;
    const gw = (w - left - right) / Math.max(1, cats.length);
    // Labels wider than their group go on two rows, and the legend below both.
    g.font = '10px system-ui, sans-serif';
    const crowded = cats.some((c) => g.measureText(c).width > gw - 6);
    g.font = '11.5px system-ui, sans-serif';
    const bottom = crowded ? 70 : 56;
    let max = niceMax(Math.max(0, ...series.flatMap((s) => s.values.filter(Number.isFinite))));
    if (integer) max = Math.max(4, Math.ceil(max / 4) * 4); // whole-number ticks for counts
    const ph = H - top - bottom;
    g.strokeStyle = col.grid; g.fillStyle = col.muted; g.textAlign = 'right';
    for (let i = 0; i <= 4; i++) {
      const y = top + ph - (ph * i) / 4;
      g.beginPath(); g.moveTo(left, Math.round(y) + 0.5); g.lineTo(w - right, Math.round(y) + 0.5); g.stroke();
      g.fillText(fmt((max * i) / 4), left - 6, y);
    }
    const bw = Math.min(42, (gw * 0.75) / Math.max(1, series.length));
    g.textAlign = 'center';
    cats.forEach((cat, ci) => {
      const gx = left + gw * ci + (gw - bw * series.length) / 2;
      series.forEach((s, si) => {
        const v = Math.max(0, s.values[ci] || 0);
        const bh = (v / max) * ph;
        g.fillStyle = colorOf(s.color);
        g.fillRect(gx + si * bw, top + ph - bh, bw - 2, bh);
      });
      g.fillStyle = col.fg; g.font = crowded ? '10px system-ui, sans-serif' : '11.5px system-ui, sans-serif';
      g.fillText(cat, left + gw * ci + gw / 2, H - bottom + 12 + (crowded && ci % 2 ? 13 : 0));
      g.font = '11.5px system-ui, sans-serif';
    });
    const legendY = H - bottom + (crowded ? 44 : 30);
    legend(g, series, 12, legendY, w - 4, col);
    // For the browser test: the lowest label row's centre and the legend's.
    g.canvas.dataset.labelRows = crowded ? '2' : '1';
    g.canvas.dataset.labelBottom = String(H - bottom + 12 + (crowded ? 13 : 0));
    g.canvas.dataset.legendY = String(legendY);
  });
}

// series: [{label, color, points:[{x,y}]}]; knee: {x, y, label}
export function line(series, { xLabel = '', yLabel = '', fmtX = (v) => String(v), fmtY = (v) => v.toFixed(2), knee, title = 'curve', height = 240, logX = false } = {}) {
  const label = `${title}: ` + series.map((s) => `${s.label}: ` + s.points.map((p) => `${fmtX(p.x)} → ${fmtY(p.y)}`).join(', ')).join('; ') + (knee ? `; knee at ${fmtX(knee.x)}` : '');
  return mount(height, label, (g, w, H, col) => {
    const left = 64, right = 16, top = 14, bottom = 44;
    const pts = series.flatMap((s) => s.points).filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y));
    if (!pts.length) { g.fillStyle = col.muted; g.fillText('no points', left, H / 2); return; }
    const tx = (x) => (logX ? Math.log2(x) : x);
    let x0 = Math.min(...pts.map((p) => tx(p.x))), x1 = Math.max(...pts.map((p) => tx(p.x)));
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    let y0 = Math.min(...pts.map((p) => p.y)), y1 = Math.max(...pts.map((p) => p.y));
    const pad = (y1 - y0) * 0.1 || Math.abs(y1) * 0.1 || 1;
    // Figures that are never negative (memory, times, energy) keep their
    // axis at or above 0.
    y0 = y0 >= 0 ? Math.max(0, y0 - pad) : y0 - pad; y1 += pad;
    const X = (x) => left + ((tx(x) - x0) / (x1 - x0)) * (w - left - right);
    const Y = (y) => top + (1 - (y - y0) / (y1 - y0)) * (H - top - bottom);
    g.strokeStyle = col.grid; g.fillStyle = col.muted; g.textAlign = 'right';
    for (let i = 0; i <= 4; i++) {
      const v = y0 + ((y1 - y0) * i) / 4;
      g.beginPath(); g.moveTo(left, Math.round(Y(v)) + 0.5); g.lineTo(w - right, Math.round(Y(v)) + 0.5); g.stroke();
      g.fillText(fmtY(v), left - 6, Y(v));
    }
    g.textAlign = 'center';
    const xs = [...new Set(pts.map((p) => p.x))].sort((a, b) => a - b);
    const every = Math.ceil(xs.length / 10);
    xs.forEach((x, i) => { if (i % every === 0) g.fillText(fmtX(x), X(x), H - bottom + 12); });
    g.fillText(xLabel, left + (w - left - right) / 2, H - 10);
    g.save(); g.translate(12, top + (H - top - bottom) / 2); g.rotate(-Math.PI / 2); g.fillText(yLabel, 0, 0); g.restore();
    for (const s of series) {
      g.strokeStyle = colorOf(s.color); g.fillStyle = colorOf(s.color); g.lineWidth = 2;
      g.beginPath();
      s.points.forEach((p, i) => (i ? g.lineTo(X(p.x), Y(p.y)) : g.moveTo(X(p.x), Y(p.y))));
      g.stroke();
      for (const p of s.points) { g.beginPath(); g.arc(X(p.x), Y(p.y), 3, 0, Math.PI * 2); g.fill(); }
    }
    if (knee && Number.isFinite(knee.x)) {
      const kx = X(knee.x), ky = Y(knee.y);
      g.strokeStyle = cssVar('--c-critical'); g.setLineDash([4, 3]); g.lineWidth = 1.5;
      g.beginPath(); g.moveTo(kx, top); g.lineTo(kx, H - bottom); g.stroke(); g.setLineDash([]);
      g.fillStyle = cssVar('--c-critical'); g.beginPath(); g.arc(kx, ky, 6, 0, Math.PI * 2); g.fill();
      g.textAlign = kx > w - 140 ? 'right' : 'left';
      g.fillText(knee.label || 'knee', kx + (g.textAlign === 'right' ? -9 : 9), top + 8);
    }
    // legend
    g.textAlign = 'left';
    let lx = left + 8;
    for (const s of series) {
      g.fillStyle = colorOf(s.color); g.fillRect(lx, top + 2, 10, 10);
      g.fillStyle = col.fg; g.fillText(s.label, lx + 14, top + 7); lx += g.measureText(s.label).width + 30;
    }
  });
}

// The knee of a curve: the point farthest from the chord between its ends
// (Kneedle's idea), on axes normalised to [0, 1].
export function knee(points) {
  const p = points.filter((q) => Number.isFinite(q.x) && Number.isFinite(q.y));
  if (p.length < 3) return null;
  const xs = p.map((q) => q.x), ys = p.map((q) => q.y);
  const nx = (x) => (x - Math.min(...xs)) / ((Math.max(...xs) - Math.min(...xs)) || 1);
  const ny = (y) => (y - Math.min(...ys)) / ((Math.max(...ys) - Math.min(...ys)) || 1);
  const a = { x: nx(p[0].x), y: ny(p[0].y) }, b = { x: nx(p[p.length - 1].x), y: ny(p[p.length - 1].y) };
  const len = Math.hypot(b.x - a.x, b.y - a.y) || 1;
  let best = null, bd = 0.02; // flat curves have no knee
  for (const q of p.slice(1, -1)) {
    const d = Math.abs((b.y - a.y) * nx(q.x) - (b.x - a.x) * ny(q.y) + b.x * a.y - b.y * a.x) / len;
    if (d > bd) { bd = d; best = q; }
  }
  return best;
}

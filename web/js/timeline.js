// The canvas timeline: one or more tracks (measured, baseline, predicted)
// stacked on one time axis, a row per CPU thread / GPU stream / comm channel.
// No DOM node per task: every frame is drawn from typed arrays.
//
// Level of detail, per row and per frame:
//  - find the visible tasks with a binary search on the row's running
//    maximum of end times (tasks sorted by start);
//  - when a row has more than DETAIL_MAX visible tasks, draw one column per
//    pixel from the precomputed busy-time pyramid (tldata.js buildLod) at the
//    level whose bins are just under a pixel wide;
//  - otherwise draw the tasks, merging runs narrower than a pixel into one
//    column each, and label boxes wide enough for text.

import { h, cssVar, showTip, hideTip, fmtUs, clear } from './ui.js';
import { KIND_NAMES, KIND_VARS, PHASES, LOD_BINS } from './tldata.js';

const DETAIL_MAX = 6000;
const ROW_H = 18, ROW_GAP = 2, TRACK_HEAD = 30, AXIS_H = 24, GUTTER = 168;

export class Timeline {
  constructor(tracks, { title = 'Timeline', height } = {}) {
    this.tracks = tracks.filter(Boolean);
    this.fixedHeight = height;
    this.critOnly = false;
    this.showCrit = true;
    this.lastFrameMs = 0;
    this.frames = 0;
    let t0 = Infinity, t1 = -Infinity;
    for (const tr of this.tracks) { t0 = Math.min(t0, tr.t0); t1 = Math.max(t1, tr.t1); }
    if (!Number.isFinite(t0)) { t0 = 0; t1 = 1; }
    this.full = [t0, t1 + (t1 - t0) * 0.01];
    this.view = this.full.slice();
    this.canvas = h('canvas', {
      class: 'tl-canvas', tabindex: '0', role: 'img',
      'aria-label': `${title}: ${this.tracks.map((t) => `${t.title}, ${t.n} tasks on ${t.rows.length} rows`).join('; ')}. Use plus and minus to zoom, arrow keys to pan, 0 to reset.`,
    });
    this.canvas.__timeline = this;
    this.status = h('span', { class: 'sub', 'aria-live': 'polite' });
    const btn = (label, aria, fn) => h('button', { class: 'btn small', type: 'button', 'aria-label': aria, onclick: fn }, label);
    const critBox = h('input', { type: 'checkbox', id: 'crit-' + Math.random().toString(36).slice(2), onchange: (e) => { this.critOnly = e.target.checked; this.draw(); } });
    const anyCrit = this.tracks.some((t) => t.hasCritical);
    this.toolbar = h('div', { class: 'tl-toolbar' },
      btn('+', 'Zoom in', () => this.zoom(0.5)), btn('−', 'Zoom out', () => this.zoom(2)),
      btn('←', 'Pan left', () => this.pan(-0.2)), btn('→', 'Pan right', () => this.pan(0.2)),
      btn('Reset', 'Reset zoom', () => this.reset()),
      anyCrit ? h('label', { class: 'field inline' }, critBox, 'Critical path only') : h('span', { class: 'sub' }, 'no critical path in this view'),
      h('span', { class: 'grow' }), this.status);
    this.legend = h('div', { class: 'tl-legend', 'aria-hidden': 'true' },
      KIND_NAMES.slice(0, 6).map((n, i) => h('span', {}, h('span', { class: 'swatch', style: `background:var(${KIND_VARS[i]})` }), n)),
      h('span', {}, h('span', { class: 'swatch', style: 'background:var(--c-critical)' }), 'critical path'),
      h('span', {}, h('span', { class: 'swatch', style: 'background:transparent;border:1px dashed var(--muted)' }), 'iteration'));
    this.el = h('div', { class: 'tl-wrap' }, this.toolbar, this.canvas, this.legend);
    this.bind();
    this.ro = new ResizeObserver(() => this.draw());
    this.ro.observe(this.canvas);
    // The theme toggle changes the CSS colours the canvas reads: redraw.
    this.onTheme = () => this.draw();
    window.addEventListener('rv-theme', this.onTheme);
  }

  destroy() { this.ro.disconnect(); window.removeEventListener('rv-theme', this.onTheme); hideTip(); }

  layout() {
    // y offsets of each track's rows
    let y = AXIS_H;
    this.rowsY = [];
    for (const tr of this.tracks) {
      const ys = { track: tr, y: y, rows: [] };
      y += TRACK_HEAD;
      for (const row of tr.rows) { ys.rows.push({ row, y }); y += ROW_H + ROW_GAP; }
      y += 6;
      this.rowsY.push(ys);
    }
    return y + 4;
  }

  reset() { this.view = this.full.slice(); this.draw(); }
  zoom(f, centerFrac = 0.5) {
    const [a, b] = this.view;
    const c = a + (b - a) * centerFrac;
    let w = (b - a) * f;
    w = Math.max(w, 0.05); // 50 ns
    w = Math.min(w, (this.full[1] - this.full[0]) * 4);
    this.view = [c - w * centerFrac, c + w * (1 - centerFrac)];
    this.draw();
  }
  pan(frac) {
    const w = this.view[1] - this.view[0];
    this.view = [this.view[0] + w * frac, this.view[1] + w * frac];
    this.draw();
  }
  setView(a, b) { this.view = [a, b]; this.draw(); }

  bind() {
    const c = this.canvas;
    const frac = (e) => { const r = c.getBoundingClientRect(); return Math.min(1, Math.max(0, (e.clientX - r.left - GUTTER) / Math.max(1, r.width - GUTTER))); };
    c.addEventListener('wheel', (e) => {
      e.preventDefault();
      if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) this.pan((e.deltaX || e.deltaY) / 800);
      else this.zoom(Math.exp(e.deltaY * 0.0015), frac(e));
    }, { passive: false });
    let drag = null;
    c.addEventListener('pointerdown', (e) => { drag = { x: e.clientX, view: this.view.slice() }; c.setPointerCapture(e.pointerId); hideTip(); });
    c.addEventListener('pointermove', (e) => {
      if (drag) {
        const r = c.getBoundingClientRect();
        const w = drag.view[1] - drag.view[0];
        const dt = ((e.clientX - drag.x) / Math.max(1, r.width - GUTTER)) * w;
        this.view = [drag.view[0] - dt, drag.view[1] - dt];
        this.draw();
        return;
      }
      this.hover(e);
    });
    c.addEventListener('pointerup', () => { drag = null; });
    c.addEventListener('pointerleave', () => { if (!drag) hideTip(); });
    c.addEventListener('dblclick', (e) => this.zoom(0.5, frac(e)));
    c.addEventListener('keydown', (e) => {
      const k = e.key;
      if (k === '+' || k === '=') this.zoom(0.7);
      else if (k === '-' || k === '_') this.zoom(1 / 0.7);
      else if (k === 'ArrowLeft') this.pan(-0.15);
      else if (k === 'ArrowRight') this.pan(0.15);
      else if (k === 'ArrowUp') this.zoom(0.7);
      else if (k === 'ArrowDown') this.zoom(1 / 0.7);
      else if (k === '0' || k === 'Home') this.reset();
      else return;
      e.preventDefault();
    });
    c.addEventListener('blur', hideTip);
  }

  colors() {
    if (!this._colors || this._theme !== document.documentElement.dataset.theme) {
      this._theme = document.documentElement.dataset.theme;
      this._colors = {
        kinds: KIND_VARS.map(cssVar), fg: cssVar('--fg'), muted: cssVar('--muted'), grid: cssVar('--grid'),
        panel: cssVar('--panel'), panel2: cssVar('--panel-2'), crit: cssVar('--c-critical'), border: cssVar('--border'),
      };
    }
    return this._colors;
  }

  draw() {
    if (this._raf) return;
    this._raf = requestAnimationFrame(() => { this._raf = 0; this.render(); });
  }

  // Draws one frame now; returns its time in ms (the browser test measures it).
  render() {
    const t = performance.now();
    const c = this.canvas;
    const cssW = c.clientWidth || 800;
    const cssH = this.layout();
    const dpr = window.devicePixelRatio || 1;
    if (c.width !== Math.round(cssW * dpr) || c.height !== Math.round(cssH * dpr)) {
      c.width = Math.round(cssW * dpr); c.height = Math.round(cssH * dpr); c.style.height = cssH + 'px';
    }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    const col = this.colors();
    g.fillStyle = col.panel; g.fillRect(0, 0, cssW, cssH);
    const W = Math.max(10, cssW - GUTTER);
    const [v0, v1] = this.view;
    const k = W / (v1 - v0);
    const X = (us) => GUTTER + (us - v0) * k;
    this.drawAxis(g, col, cssW, cssH, v0, v1, k, X);
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    for (const ys of this.rowsY) {
      const tr = ys.track;
      g.fillStyle = col.fg; g.font = '600 12px system-ui, sans-serif';
      g.fillText(`${tr.title}`, 6, ys.y + 9);
      g.fillStyle = col.muted; g.font = '10.5px system-ui, sans-serif';
      g.fillText(`${tr.n.toLocaleString('en-US')} tasks${tr.truncated ? ' (truncated)' : ''}`, 6, ys.y + 22);
      g.font = '11px system-ui, sans-serif';
      for (const { row, y } of ys.rows) {
        g.fillStyle = col.panel2; g.fillRect(GUTTER, y, W, ROW_H);
        g.fillStyle = col.muted;
        g.save(); g.beginPath(); g.rect(0, y, GUTTER - 6, ROW_H); g.clip();
        g.fillText(row.label, 6, y + ROW_H / 2); g.restore();
        g.save(); g.beginPath(); g.rect(GUTTER, y, W, ROW_H); g.clip();
        this.drawRow(g, col, tr, row, y, v0, v1, k, X, W);
        g.restore();
      }
      this.drawIterations(g, col, tr, ys, X, W);
    }
    this.lastFrameMs = performance.now() - t;
    this.frames++;
    const span = v1 - v0;
    this.status.textContent = `window ${fmtUs(span)} · frame ${this.lastFrameMs.toFixed(1)} ms`;
    return this.lastFrameMs;
  }

  drawAxis(g, col, cssW, cssH, v0, v1, k, X) {
    const span = v1 - v0;
    const target = span / 8;
    const p = Math.pow(10, Math.floor(Math.log10(target)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= target) || p * 10;
    g.font = '11px system-ui, sans-serif'; g.textBaseline = 'middle';
    g.strokeStyle = col.grid; g.fillStyle = col.muted; g.lineWidth = 1;
    for (let s = Math.ceil(v0 / step) * step; s <= v1; s += step) {
      const x = Math.round(X(s)) + 0.5;
      g.beginPath(); g.moveTo(x, AXIS_H - 6); g.lineTo(x, cssH); g.stroke();
      g.fillText(fmtUs(s), x + 3, AXIS_H / 2);
    }
    g.strokeStyle = col.border;
    g.beginPath(); g.moveTo(GUTTER, AXIS_H - 0.5); g.lineTo(cssW, AXIS_H - 0.5); g.stroke();
  }

  drawRow(g, col, tr, row, y, v0, v1, k, X, W) {
    const { order, maxEnd } = row;
    // first task whose running max end reaches v0
    let lo = 0, hi = order.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (maxEnd[m] < v0) lo = m + 1; else hi = m; }
    const first = lo;
    lo = first; hi = order.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (tr.start[order[m]] <= v1) lo = m + 1; else hi = m; }
    const last = lo; // exclusive
    const critOnly = this.critOnly;
    if (last - first > DETAIL_MAX) { this.drawLod(g, col, tr, row, y, v0, v1, k, W); return; }
    const kinds = col.kinds;
    let colX = -1, colCov = 0, colKind = 0, colCrit = 0;
    const flush = () => {
      if (colX < 0) return;
      g.globalAlpha = (critOnly && !colCrit ? 0.15 : 1) * Math.min(1, 0.35 + colCov);
      g.fillStyle = kinds[colKind]; g.fillRect(colX, y, 1, ROW_H);
      if (colCrit && this.showCrit) { g.fillStyle = col.crit; g.fillRect(colX, y + ROW_H - 3, 1, 3); }
      g.globalAlpha = 1;
      colX = -1; colCov = 0; colCrit = 0;
    };
    for (let j = first; j < last; j++) {
      const i = order[j];
      const s = tr.start[i], d = tr.dur[i];
      if (s + d < v0) continue;
      const x0 = X(s), x1 = X(s + d);
      const cr = tr.crit[i];
      if (x1 - x0 < 1) {
        const cx = Math.floor(x0);
        if (cx !== colX) { flush(); colX = cx; colKind = tr.kind[i]; }
        colCov += x1 - x0; if (cr) colCrit = 1;
        continue;
      }
      flush();
      const a = Math.max(x0, GUTTER - 2), b = Math.min(x1, GUTTER + W + 2);
      g.globalAlpha = critOnly && !cr ? 0.15 : 1;
      g.fillStyle = kinds[tr.kind[i]];
      g.fillRect(a, y, Math.max(1, b - a - (b - a > 3 ? 0.5 : 0)), ROW_H);
      if (cr && this.showCrit) { g.fillStyle = col.crit; g.fillRect(a, y + ROW_H - 3, b - a, 3); }
      if (b - a > 44) {
        g.fillStyle = '#fff';
        g.save(); g.beginPath(); g.rect(a, y, b - a, ROW_H); g.clip();
        g.fillText(tr.names[tr.name[i]], a + 3, y + ROW_H / 2 - 1);
        g.restore();
      }
      g.globalAlpha = 1;
    }
    flush();
  }

  drawLod(g, col, tr, row, y, v0, v1, k, W) {
    // level whose bin is at most one pixel wide, as coarse as possible
    let level = 0;
    while (level + 1 < row.lod.length && tr.lodBinUs * (1 << (level + 1)) * k <= 1) level++;
    const L = row.lod[level];
    const bw = tr.lodBinUs * (1 << level);
    const nb = L.busy.length;
    const b0 = Math.max(0, Math.floor((v0 - tr.t0) / bw)), b1 = Math.min(nb - 1, Math.floor((v1 - tr.t0) / bw));
    const colBusy = this._colBusy && this._colBusy.length >= W + 2 ? this._colBusy : (this._colBusy = new Float32Array(W + 2));
    const colCrit = this._colCrit && this._colCrit.length >= W + 2 ? this._colCrit : (this._colCrit = new Float32Array(W + 2));
    colBusy.fill(0); colCrit.fill(0);
    for (let b = b0; b <= b1; b++) {
      const v = L.busy[b];
      if (!v) continue;
      const x = Math.floor((tr.t0 + (b + 0.5) * bw - v0) * k);
      if (x < 0 || x > W) continue;
      colBusy[x] += v; colCrit[x] += L.crit[b];
    }
    const pxUs = 1 / k;
    const color = col.kinds[row.mainKind];
    for (let x = 0; x <= W; x++) {
      const v = colBusy[x];
      if (!v) continue;
      const cov = Math.min(1, v / pxUs);
      const cr = colCrit[x] > 0;
      g.globalAlpha = (this.critOnly && !cr ? 0.15 : 1) * (0.3 + 0.7 * cov);
      g.fillStyle = color;
      g.fillRect(GUTTER + x, y, 1, ROW_H);
      if (cr && this.showCrit) { g.fillStyle = col.crit; g.fillRect(GUTTER + x, y + ROW_H - 3, 1, 3); }
    }
    g.globalAlpha = 1;
  }

  drawIterations(g, col, tr, ys, X, W) {
    if (!tr.iterations || !tr.iterations.length) return;
    const top = ys.y + 2, bottom = ys.rows.length ? ys.rows[ys.rows.length - 1].y + ROW_H : ys.y + TRACK_HEAD;
    g.save();
    g.beginPath(); g.rect(GUTTER, 0, W, bottom + 2); g.clip();
    g.strokeStyle = col.fg; g.globalAlpha = 0.55; g.setLineDash([4, 3]); g.lineWidth = 1;
    g.fillStyle = col.fg; g.font = '10px system-ui, sans-serif';
    let lastLabel = -1e9;
    for (const it of tr.iterations) {
      const x = Math.round(X(it.start_us)) + 0.5;
      // A step that began before the view but reaches into it: its label at the left edge.
      if (x < GUTTER - 1 && X(it.end_us) > GUTTER + 60) { g.fillText(`step ${it.step}`, GUTTER + 3, ys.y + TRACK_HEAD - 9); lastLabel = GUTTER; continue; }
      if (x < GUTTER - 1 || x > GUTTER + W + 1) continue;
      g.beginPath(); g.moveTo(x, top); g.lineTo(x, bottom); g.stroke();
      if (x - lastLabel > 60) { g.fillText(`step ${it.step}`, x + 3, ys.y + TRACK_HEAD - 9); lastLabel = x; }
    }
    g.restore();
  }

  // The task under the pointer: the shortest task covering x (±3 px).
  hover(e) {
    const r = this.canvas.getBoundingClientRect();
    const px = e.clientX - r.left, py = e.clientY - r.top;
    if (px < GUTTER) { hideTip(); return; }
    let hit = null;
    for (const ys of this.rowsY || []) for (const ry of ys.rows) if (py >= ry.y && py < ry.y + ROW_H) hit = { tr: ys.track, row: ry.row };
    if (!hit) { hideTip(); return; }
    const W = Math.max(10, r.width - GUTTER);
    const [v0, v1] = this.view;
    const k = W / (v1 - v0);
    const t = v0 + (px - GUTTER) / k, tol = 3 / k;
    const { tr, row } = hit;
    const { order, maxEnd } = row;
    let lo = 0, hi = order.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (maxEnd[m] < t - tol) lo = m + 1; else hi = m; }
    let best = -1, bestScore = Infinity;
    for (let j = lo, steps = 0; j < order.length && steps < 4000; j++, steps++) {
      const i = order[j];
      if (tr.start[i] > t + tol) break;
      const s = tr.start[i], en = s + tr.dur[i];
      if (en < t - tol) continue;
      const inside = t >= s && t <= en;
      const score = (inside ? 0 : 1e12) + tr.dur[i];
      if (score < bestScore) { bestScore = score; best = i; }
    }
    if (best < 0) { hideTip(); return; }
    const i = best;
    const layer = tr.names[tr.layer[i]];
    showTip(e.clientX, e.clientY, h('div', {},
      h('b', {}, tr.names[tr.name[i]]),
      h('div', {}, h('span', { class: 'k' }, 'duration '), fmtUs(tr.dur[i]), h('span', { class: 'k' }, '  start '), fmtUs(tr.start[i])),
      h('div', {}, h('span', { class: 'k' }, 'layer '), layer || '–'),
      h('div', {}, h('span', { class: 'k' }, 'phase '), PHASES[tr.phase[i]], h('span', { class: 'k' }, '  kind '), KIND_NAMES[tr.kind[i]]),
      h('div', {}, h('span', { class: 'k' }, 'row '), row.label, tr.crit[i] ? h('span', { class: 'bad' }, '  · on the critical path') : null),
      h('div', { class: 'k' }, tr.title)));
  }
}

export function timelineNote(text) {
  return h('p', { class: 'sub' }, text);
}
export { clear };

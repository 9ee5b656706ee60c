// Timeline data: the API's timelines turned into column arrays (one typed
// array per field) that the canvas timeline draws without allocating.
//
// Sources:
//  - GET /v1/traces/{id}/timeline?format=chrome: simulated times, plus per task
//    its layer, whether it is on the critical path, and its measured start.
//  - GET /v1/traces/{id}/timeline (JSON): the thread kinds (cpu/gpu/comm), and
//    measured times; used for the kinds and the measured clock's origin.
//  - GET /v1/traces/{id}/original: ProfilerStep#N events, the iteration marks
//    (the timeline endpoints do not carry iteration boundaries yet).

import { api, request } from './api.js';

export const KIND = { cpu: 0, kernel: 1, memcpy: 2, memset: 3, comm: 4, data: 5, other: 6 };
export const KIND_NAMES = ['CPU (runtime)', 'kernel', 'memcpy', 'memset', 'communication', 'data loading', 'other'];
export const KIND_VARS = ['--c-cpu', '--c-kernel', '--c-memcpy', '--c-memset', '--c-comm', '--c-data', '--c-other'];
export const PHASES = ['forward', 'backward', 'optimizer', 'dataloader', 'unknown'];
const THREAD_ORDER = { cpu: 0, gpu: 1, comm: 2, other: 3 };

function kindOf(cat, name, threadKind) {
  if (/nccl|allreduce|all_reduce|allgather|reducescatter|sendrecv/i.test(name)) return KIND.comm;
  switch (cat) {
    case 'cuda_runtime': case 'cuda_driver': case 'cpu_op': case 'cuda_sync': case 'cpu': return KIND.cpu;
    case 'kernel': return KIND.kernel;
    case 'gpu_memcpy': return KIND.memcpy;
    case 'gpu_memset': return KIND.memset;
    case 'comm': return KIND.comm;
    case 'data': return KIND.data;
    case 'gpu':
      if (/^memcpy/i.test(name)) return KIND.memcpy;
      if (/^memset/i.test(name)) return KIND.memset;
      return KIND.kernel;
    default:
      return threadKind === 'cpu' ? KIND.cpu : threadKind === 'comm' ? KIND.comm : KIND.other;
  }
}

class Strings {
  constructor() { this.list = ['']; this.map = new Map([['', 0]]); }
  id(s) {
    if (s === undefined || s === null) return 0;
    let i = this.map.get(s);
    if (i === undefined) { i = this.list.length; this.list.push(s); this.map.set(s, i); }
    return i;
  }
}

// A builder for one track: push tasks, then finish() sorts rows and builds the index.
class TrackBuilder {
  constructor(title, threads) {
    this.title = title;
    this.threads = threads; // [{id, label, kind}]
    this.strings = new Strings();
    this.cap = 1024; this.n = 0;
    this.alloc(this.cap);
  }
  alloc(cap) {
    const grow = (A, old) => { const a = new A(cap); if (old) a.set(old.subarray(0, this.n)); return a; };
    this.start = grow(Float64Array, this.start); this.dur = grow(Float64Array, this.dur);
    this.thread = grow(Int32Array, this.thread); this.name = grow(Int32Array, this.name);
    this.layer = grow(Int32Array, this.layer); this.kind = grow(Uint8Array, this.kind);
    this.phase = grow(Uint8Array, this.phase); this.crit = grow(Uint8Array, this.crit);
    this.taskId = grow(Int32Array, this.taskId);
  }
  push(t) {
    if (this.n === this.cap) { this.cap *= 2; this.alloc(this.cap); }
    const i = this.n++;
    this.start[i] = t.start; this.dur[i] = Math.max(0, t.dur); this.thread[i] = t.thread;
    this.name[i] = this.strings.id(t.name); this.layer[i] = this.strings.id(t.layer || '');
    this.kind[i] = t.kind; this.phase[i] = Math.max(0, PHASES.indexOf(t.phase || 'unknown'));
    this.crit[i] = t.crit ? 1 : 0; this.taskId[i] = t.task ?? -1;
  }
  finish(extra = {}) {
    const n = this.n;
    const tr = {
      title: this.title, n, names: this.strings.list,
      start: this.start.subarray(0, n), dur: this.dur.subarray(0, n), thread: this.thread.subarray(0, n),
      name: this.name.subarray(0, n), layer: this.layer.subarray(0, n), kind: this.kind.subarray(0, n),
      phase: this.phase.subarray(0, n), crit: this.crit.subarray(0, n), taskId: this.taskId.subarray(0, n),
      iterations: [], hasCritical: false, hasLayer: false, ...extra,
    };
    let t0 = Infinity, t1 = -Infinity;
    for (let i = 0; i < n; i++) {
      if (tr.start[i] < t0) t0 = tr.start[i];
      if (tr.start[i] + tr.dur[i] > t1) t1 = tr.start[i] + tr.dur[i];
      if (tr.crit[i]) tr.hasCritical = true;
      if (tr.layer[i]) tr.hasLayer = true;
    }
    tr.t0 = n ? t0 : 0; tr.t1 = n ? t1 : 1;
    // Rows: one per thread that has tasks; CPU threads, then GPU streams, then comm channels.
    const byThread = new Map();
    for (let i = 0; i < n; i++) {
      const th = tr.thread[i];
      let c = byThread.get(th);
      if (!c) byThread.set(th, (c = []));
      c.push(i);
    }
    const thInfo = new Map(this.threads.map((t) => [t.id, t]));
    tr.rows = [...byThread.entries()].map(([th, idx]) => {
      const info = thInfo.get(th) || { id: th, label: 'thread ' + th, kind: 'other' };
      const order = Int32Array.from(idx).sort((a, b) => tr.start[a] - tr.start[b]);
      // maxEnd[k] = max end of tasks order[0..k]: monotone, so a binary search
      // finds the first task that can reach into a window even when tasks overlap.
      const maxEnd = new Float64Array(order.length);
      let m = -Infinity;
      const kinds = new Float64Array(7);
      for (let k = 0; k < order.length; k++) {
        const i = order[k];
        m = Math.max(m, tr.start[i] + tr.dur[i]);
        maxEnd[k] = m;
        kinds[tr.kind[i]] += tr.dur[i];
      }
      let main = 0;
      for (let k = 1; k < 7; k++) if (kinds[k] > kinds[main]) main = k;
      return { thread: th, label: info.label, kind: info.kind, order, maxEnd, mainKind: main };
    }).sort((a, b) => (THREAD_ORDER[a.kind] ?? 3) - (THREAD_ORDER[b.kind] ?? 3) || a.label.localeCompare(b.label, 'en', { numeric: true }));
    buildLod(tr);
    return tr;
  }
}

// Level of detail: per row, busy time (and critical busy time) per bin over
// [t0, t1] at LOD_BINS bins, then halved repeatedly. Zoomed out, the canvas
// draws one column per pixel from the level whose bins are just under a pixel.
export const LOD_BINS = 1 << 14;
function buildLod(tr) {
  const span = Math.max(1e-9, tr.t1 - tr.t0);
  const bw = span / LOD_BINS;
  tr.lodBinUs = bw;
  for (const row of tr.rows) {
    const busy = new Float32Array(LOD_BINS), crit = new Float32Array(LOD_BINS);
    for (let k = 0; k < row.order.length; k++) {
      const i = row.order[k];
      const s = tr.start[i] - tr.t0, e = s + tr.dur[i];
      let b = Math.min(LOD_BINS - 1, Math.floor(s / bw));
      const be = Math.min(LOD_BINS - 1, Math.floor(e / bw));
      const c = tr.crit[i];
      if (b === be) {
        const d = Math.max(e - s, bw * 0.02); // keep zero-length tasks visible
        busy[b] += d; if (c) crit[b] += d;
        continue;
      }
      for (; b <= be; b++) {
        const lo = Math.max(s, b * bw), hi = Math.min(e, (b + 1) * bw);
        if (hi > lo) { busy[b] += hi - lo; if (c) crit[b] += hi - lo; }
      }
    }
    const levels = [{ busy, crit }];
    for (let len = LOD_BINS / 2; len >= 64; len /= 2) {
      const p = levels[levels.length - 1];
      const nb = new Float32Array(len), nc = new Float32Array(len);
      for (let j = 0; j < len; j++) { nb[j] = p.busy[2 * j] + p.busy[2 * j + 1]; nc[j] = p.crit[2 * j] + p.crit[2 * j + 1]; }
      levels.push({ busy: nb, crit: nc });
    }
    row.lod = levels;
  }
}

// Chrome-trace JSON of the simulator (baseline or predicted) -> track.
// threadsMeta: the JSON timeline's threads [{id,label,kind}] (optional).
export function fromChrome(chrome, title, threadsMeta, { measured = false, measuredOffsetUs = 0 } = {}) {
  const ev = Array.isArray(chrome) ? chrome : chrome.traceEvents || [];
  const labels = new Map();
  const pidOf = new Map();
  for (const e of ev) {
    if (e.ph === 'M' && e.name === 'thread_name') { labels.set(e.tid, e.args && e.args.name); pidOf.set(e.tid, e.pid); }
  }
  const metaById = new Map((threadsMeta || []).map((t) => [t.id, t]));
  const threads = [...labels.entries()].map(([tid, label]) => {
    const m = metaById.get(tid);
    const kind = m ? m.kind : pidOf.get(tid) === 0 ? 'cpu' : /comm|nccl|channel/i.test(label || '') ? 'comm' : 'gpu';
    return { id: tid, label: label || (m && m.label) || 'thread ' + tid, kind };
  });
  const thKind = new Map(threads.map((t) => [t.id, t.kind]));
  const b = new TrackBuilder(title, threads);
  const iterSpan = new Map();
  for (const e of ev) {
    if (e.ph !== 'X') continue;
    const a = e.args || {};
    let start = e.ts;
    if (measured) {
      if (!(a.measured_ts >= 0)) continue;
      start = a.measured_ts - measuredOffsetUs;
    }
    b.push({ start, dur: e.dur || 0, thread: e.tid, name: e.name, layer: a.layer, kind: kindOf(e.cat, e.name || '', thKind.get(e.tid)), phase: a.phase, crit: a.critical, task: a.task });
    if (a.iteration !== undefined && a.iteration >= 0) {
      const s = iterSpan.get(a.iteration) || [Infinity, -Infinity];
      s[0] = Math.min(s[0], start); s[1] = Math.max(s[1], start + (e.dur || 0));
      iterSpan.set(a.iteration, s);
    }
  }
  const tr = b.finish();
  if (iterSpan.size) tr.iterations = [...iterSpan.entries()].sort((x, y) => x[1][0] - y[1][0]).map(([step, s]) => ({ step, start_us: s[0], end_us: s[1] }));
  return tr;
}

// The dashboard JSON timeline -> track.
export function fromJson(j, title) {
  const threads = j.threads || [];
  const thKind = new Map(threads.map((t) => [t.id, t.kind]));
  const b = new TrackBuilder(title, threads);
  for (const t of j.tasks || []) {
    b.push({ start: t.start_us, dur: t.dur_us, thread: t.thread, name: t.name, layer: t.layer, kind: kindOf(t.kind, t.name || '', thKind.get(t.thread)), phase: t.phase, crit: t.critical, task: t.id });
  }
  const tr = b.finish({ truncated: !!j.truncated, omitted: j.omitted || 0 });
  if (Array.isArray(j.iterations)) tr.iterations = j.iterations;
  return tr;
}

// Both views of a stored trace from one simulation: the simulated baseline
// and the measured times (the Chrome export carries each task's measured
// start on the trace's own clock; the JSON timeline's first task gives the origin).
export async function loadTraceTimelines(id, { signal } = {}) {
  const [meta, chrome] = await Promise.all([
    api.timeline(id, { source: 'measured', max_tasks: 1 }),
    request('GET', `/v1/traces/${id}/timeline?source=baseline&format=chrome`, { signal }),
  ]);
  let offset = 0;
  const first = meta.tasks && meta.tasks[0];
  const ev = chrome.traceEvents || [];
  const firstX = ev.find((e) => e.ph === 'X' && e.args && e.args.measured_ts >= 0);
  if (first && firstX) offset = firstX.args.measured_ts - first.start_us;
  const measured = fromChrome(chrome, 'Measured', meta.threads, { measured: true, measuredOffsetUs: offset });
  const simulated = fromChrome(chrome, 'Simulated (baseline)', meta.threads);
  if (Array.isArray(meta.iterations)) measured.iterations = meta.iterations;
  return { measured, simulated, offsetUs: offset, chromeBytes: null };
}

// Predicted timeline of a what-if document (the whole trace, simulated).
export async function loadPredicted(id, doc, threadsMeta) {
  const chrome = await request('GET', `/v1/traces/${id}/timeline?source=predicted&format=chrome&whatif=${encodeURIComponent(JSON.stringify(doc))}`);
  return fromChrome(chrome, 'Predicted', threadsMeta);
}

// Iteration marks from the original upload: ProfilerStep#N events (measured
// clock), then the same steps on a simulated track through each task's
// measured start. Skipped for originals over maxBytes.
export async function loadIterations(id, trace, offsetUs, maxBytes = 48 << 20) {
  if (!trace || !(trace.original_size > 0) || trace.original_size > maxBytes) return [];
  const res = await request('GET', `/v1/traces/${id}/original`, { raw: true });
  let buf = await res.arrayBuffer();
  const u8 = new Uint8Array(buf);
  if (u8.length > 2 && u8[0] === 0x1f && u8[1] === 0x8b && typeof DecompressionStream !== 'undefined') {
    buf = await new Response(new Blob([buf]).stream().pipeThrough(new DecompressionStream('gzip'))).arrayBuffer();
  }
  if (buf.byteLength > 8 * maxBytes) return [];
  const text = new TextDecoder().decode(buf);
  const steps = [];
  const re = /ProfilerStep#(\d+)/g;
  let m;
  while ((m = re.exec(text)) && steps.length < 10000) {
    // The event object around the name: back to its own '{' (skipping any
    // closed object such as args before the name), then ts and dur after it.
    let lo = text.lastIndexOf('{', m.index);
    while (lo > 0 && text.slice(lo, m.index).includes('}')) lo = text.lastIndexOf('{', lo - 1);
    if (lo < 0) continue;
    const obj = text.slice(lo, Math.min(text.length, m.index + 600));
    const ts = /"ts"\s*:\s*"?([0-9.eE+-]+)/.exec(obj), dur = /"dur"\s*:\s*"?([0-9.eE+-]+)/.exec(obj);
    const cat = /"cat"\s*:\s*"([^"]*)"/.exec(obj);
    if (!ts || !dur) continue;
    if (cat && /gpu_user_annotation/.test(cat[1])) continue;
    steps.push({ step: Number(m[1]), start_us: Number(ts[1]) - offsetUs, end_us: Number(ts[1]) + Number(dur[1]) - offsetUs });
  }
  const seen = new Set();
  return steps.filter((s) => (seen.has(s.step) ? false : seen.add(s.step))).sort((a, b) => a.start_us - b.start_us);
}

// Measured steps -> the same steps on a simulated track, by the measured
// start of each task (the Chrome export gives both clocks per task).
export function mapIterations(measuredTrack, simTrack, steps) {
  if (!steps.length || measuredTrack.n !== simTrack.n) return [];
  const out = steps.map((s) => ({ step: s.step, start_us: Infinity, end_us: -Infinity }));
  for (let i = 0; i < measuredTrack.n; i++) {
    const ms = measuredTrack.start[i];
    let lo = 0, hi = steps.length - 1, k = -1;
    while (lo <= hi) { const mid = (lo + hi) >> 1; if (steps[mid].start_us <= ms) { k = mid; lo = mid + 1; } else hi = mid - 1; }
    if (k < 0 || ms >= steps[k].end_us) continue;
    const s = simTrack.start[i], e = s + simTrack.dur[i];
    if (s < out[k].start_us) out[k].start_us = s;
    if (e > out[k].end_us) out[k].end_us = e;
  }
  return out.filter((s) => Number.isFinite(s.start_us));
}

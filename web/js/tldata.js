// Timeline data: the API's timelines turned into column arrays (one typed
// array per field) that the canvas timeline draws without allocating.
//
// Source: GET /v1/traces/{id}/timeline (JSON) with source=measured, baseline
// or predicted. Per task it gives thread, name, kind, layer, phase, times and
// whether the task is on the critical path; per answer the threads (cpu/gpu/
// comm) and the steps in the window (iterations, in the tasks' time base).
// The Chrome export (format=chrome) is only the "Open in Perfetto" download.

import { api } from './api.js';

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

// The most tasks one timeline answer may carry (the server's cap); a trace
// with more is drawn truncated and says so.
export const MAX_TASKS = 200000;

// One view of a stored trace: its measured times, or the simulated baseline;
// each with its own critical-path flags and step marks.
export async function loadTrack(id, source) {
  const j = await api.timeline(id, { source, max_tasks: MAX_TASKS });
  return fromJson(j, source === 'measured' ? 'Measured' : 'Simulated (baseline)');
}

// Predicted timeline of a what-if document (the whole trace, simulated).
export async function loadPredicted(id, doc) {
  const j = await api.timeline(id, { source: 'predicted', max_tasks: MAX_TASKS, whatif: JSON.stringify(doc) });
  return fromJson(j, 'Predicted');
}

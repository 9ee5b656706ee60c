// One trace: summary cards, the timeline (measured / simulated), breakdowns,
// top kernels, critical path, platform overheads T1..T5, Perfetto export.

import { api, request } from '../api.js';
import { h, clear, loading, empty, errorBox, sortableTable, fmtUs, fmtPct, fmtDate, fmtBytes, fmtJ, download, toast, shortName, warningsBox } from '../ui.js';
import { stacked, grouped, line } from '../charts.js';
import { Timeline } from '../timeline.js';
import { loadTrack } from '../tldata.js';

export function card(label, value, note, attrs = {}) {
  return h('div', { class: 'card', ...attrs }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value), note ? h('div', { class: 'note' }, note) : null);
}

// Allocated bytes over the reported step(s) (the answer's memory.series)
// and the breakdown: weights, gradients, optimizer state, activations,
// from the execution trace or the op shapes. Without memory events the
// peak is the breakdown's estimate, and says so.
/* The dimensions the run communicates over (docs/models/parallel.md). */
export function parallelismView(list) {
  if (!Array.isArray(list) || list.length === 0) return empty('No collectives: one GPU, no parallelism dimension.');
  const num = (v, d = 1) => (v === null || v === undefined ? '–' : Number(v).toFixed(d));
  return h('div', { class: 'table-wrap' }, h('table', { id: 'parallelism-table' },
    h('thead', {}, h('tr', {}, ...['dimension', 'degree', 'process group', 'collectives / step', 'communication', 'exposed', 'kinds'].map((t) => h('th', {}, t)))),
    h('tbody', {}, ...list.map((d) => h('tr', { 'data-dim': d.dim },
      h('td', {}, d.dim), h('td', { class: 'num' }, d.degree === null ? '–' : String(d.degree)),
      h('td', {}, d.process_group || (d.source === 'what-if' ? 'inserted' : '–')),
      h('td', { class: 'num' }, num(d.collectives)), h('td', { class: 'num' }, fmtUs(d.comm_us)),
      h('td', { class: 'num' }, fmtUs(d.exposed_comm_us)),
      h('td', {}, Object.keys(d.ops || {}).join(', ')))))));
}

export function memoryView(m) {
  const estimated = m && (m.peak_bytes === null || m.peak_bytes === undefined);
  const peak = m ? (estimated ? m.estimated_peak_bytes : m.peak_bytes) : null;
  if (!m || peak === null || peak === undefined) {
    return h('div', { id: 'memory-view', 'data-peak-bytes': '', 'data-points': '0' }, empty(m && m.reason ? m.reason : 'No memory figures.'));
  }
  const s = m.series || { t_us: [], bytes: [] };
  const points = s.t_us.map((t, i) => ({ x: t / 1e3, y: s.bytes[i] / 2 ** 20 }));
  const bd = m.breakdown;
  const from = bd ? (bd.source === 'shapes' ? 'the op shapes' : 'the execution trace') : '';
  const rows = bd ? [['Weights', bd.weights], ['Gradients', bd.gradients], ['Optimizer state', bd.optimizer_state], ['Activations saved for backward', bd.activations], ['Activations and other', bd.activations_and_other]].filter(([k, v]) => k !== 'Activations saved for backward' || (v !== null && v !== undefined)) : [];
  const what = estimated ? `estimated peak ${fmtBytes(peak)} (from ${from}: the trace has no memory events)`
    : `peak ${fmtBytes(peak)} (${m.source === 'allocator_totals' ? 'allocator totals' : 'allocations since profiling started: a lower bound'})`;
  return h('div', { id: 'memory-view', 'data-peak-bytes': String(peak), 'data-estimated': String(estimated), 'data-points': String(points.length) },
    h('p', { class: 'sub' }, what,
      m.predicted_peak_bytes ? ` · predicted ${fmtBytes(m.predicted_peak_bytes)}` : ''),
    points.length ? line([{ label: 'allocated MiB', color: '--c-memcpy', points }], { xLabel: 'ms into the window', yLabel: 'MiB', fmtX: (v) => v.toFixed(0), fmtY: (v) => v.toFixed(0), title: 'allocated GPU memory over the step', height: 200 }) : empty(estimated ? 'No memory events: the peak is estimated from the breakdown.' : 'No memory event inside the step.'),
    rows.length ? h('div', {}, h('p', { class: 'sub' }, `Breakdown from ${from}${bd.optimizer ? `, optimizer ${bd.optimizer}` : ''}`),
      h('table', { id: 'memory-breakdown', 'data-source': bd.source || '' }, h('tbody', {}, ...rows.map(([k, v]) => h('tr', { 'data-part': k }, h('td', {}, k), h('td', { class: 'num' }, v === null || v === undefined ? '–' : fmtBytes(v)))))))
      : h('p', { class: 'sub' }, m.breakdown_reason || 'No breakdown.'));
}

export function breakdownCharts(bd, pred) {
  // bd: breakdown.baseline; pred: breakdown.predicted (optional, for comparisons)
  const rowsCG = [['Baseline', bd]].concat(pred ? [['Predicted', pred]] : []).map(([label, b]) => ({
    label, segments: [
      { label: 'CPU only', value: b.cpu_gpu.cpu_only_us / 1e3, color: '--c-cpu' },
      { label: 'GPU only', value: b.cpu_gpu.gpu_only_us / 1e3, color: '--c-kernel' },
      { label: 'CPU+GPU parallel', value: b.cpu_gpu.parallel_us / 1e3, color: '--c-comm' },
      { label: 'idle', value: b.cpu_gpu.idle_us / 1e3, color: '--c-idle' },
    ],
  }));
  const rowsG = [['Baseline', bd]].concat(pred ? [['Predicted', pred]] : []).map(([label, b]) => ({
    label, segments: [
      { label: 'compute', value: b.gpu.compute_us / 1e3, color: '--c-kernel' },
      { label: 'communication', value: b.gpu.communication_us / 1e3, color: '--c-comm' },
      { label: 'memcpy', value: b.gpu.memcpy_us / 1e3, color: '--c-memcpy' },
      { label: 'memset', value: b.gpu.memset_us / 1e3, color: '--c-memset' },
      { label: 'idle', value: b.gpu.idle_us / 1e3, color: '--c-idle' },
    ],
  }));
  const phases = Object.keys(bd.phases || {});
  const series = [
    { label: 'GPU (baseline)', color: '--c-kernel', values: phases.map((p) => bd.phases[p].gpu_us / 1e3) },
    { label: 'CPU (baseline)', color: '--c-cpu', values: phases.map((p) => bd.phases[p].cpu_us / 1e3) },
  ];
  if (pred && pred.phases) {
    series.push({ label: 'GPU (predicted)', color: '--c-pred', values: phases.map((p) => (pred.phases[p] ? pred.phases[p].gpu_us / 1e3 : 0)) });
    series.push({ label: 'CPU (predicted)', color: '--c-memcpy', values: phases.map((p) => (pred.phases[p] ? pred.phases[p].cpu_us / 1e3 : 0)) });
  }
  const ms = (v) => v.toFixed(1) + ' ms';
  return h('div', { class: 'grid2' },
    h('section', { class: 'panel', 'aria-labelledby': 'bd-cg' }, h('h2', { id: 'bd-cg' }, 'CPU / GPU overlap per iteration'), stacked(rowsCG, { fmt: ms, title: 'CPU-only, GPU-only, parallel and idle time per iteration in ms' })),
    h('section', { class: 'panel', 'aria-labelledby': 'bd-g' }, h('h2', { id: 'bd-g' }, 'GPU time per iteration'), stacked(rowsG, { fmt: ms, title: 'GPU compute, communication, memcpy, memset and idle time per iteration in ms' }),
      h('p', { class: 'sub' }, `exposed communication ${fmtUs(bd.gpu.exposed_communication_us)}`, pred ? ` → ${fmtUs(pred.gpu.exposed_communication_us)}` : '')),
    phases.length ? h('section', { class: 'panel', 'aria-labelledby': 'bd-ph' }, h('h2', { id: 'bd-ph' }, 'Per phase'), grouped(phases, series, { fmt: ms, title: 'busy time per phase in ms' })) : null);
}

export function topKernelsTable(tk) {
  if (!tk || !tk.length) return empty('No kernels in the iteration.');
  return h('div', { class: 'table-wrap' }, sortableTable([
    { key: 'name', label: 'Kernel', fmt: (k) => h('span', { class: 'name mono', title: k.name }, shortName(k.name, 110)) },
    { key: 'total_us', label: 'Total / iter', num: true, fmt: (k) => fmtUs(k.total_us) },
    { key: 'count', label: 'Count / iter', num: true, fmt: (k) => k.count.toFixed(k.count % 1 ? 1 : 0) },
    { key: 'mean_us', label: 'Mean', num: true, fmt: (k) => fmtUs(k.mean_us) },
    { key: 'max_us', label: 'Max', num: true, fmt: (k) => fmtUs(k.max_us) },
    { key: 'share', label: 'Share of GPU', num: true, fmt: (k) => fmtPct(k.share) },
  ], tk, { sortKey: 'total_us', desc: true }));
}

// What a critical-path stretch ran on, in words: its kind and its thread
// or stream (a bare number is a thread id, so say so).
const RES_KIND = { cpu: 'CPU', gpu: 'GPU', comm: 'communication', data: 'input loading', wait: 'waiting' };
function resourceName(s) {
  const r = String(s.resource || '');
  const k = RES_KIND[s.kind] || s.kind || '';
  return /^\d+$/.test(r) ? `${k} · thread ${r}` : `${k} · ${r}`;
}

function criticalPathBox(cp) {
  if (!cp || !cp.length_us) return empty('No critical path reported.');
  return h('div', {},
    h('p', { id: 'cp-bound', 'data-bound': cp.bound_by || '' }, `Bound by `, h('strong', {}, RES_KIND[cp.bound_by] || cp.bound_by || '–'), cp.shares && cp.bound_by ? ` (${fmtPct(cp.shares[cp.bound_by], 0)} of the path)` : '', ` · length ${fmtUs(cp.length_us)} · ${cp.tasks} tasks · CPU ${fmtUs(cp.cpu_us)}, CPU gaps ${fmtUs(cp.cpu_gap_us)}, GPU ${fmtUs(cp.gpu_us)}, communication ${fmtUs(cp.comm_us)}, waiting ${fmtUs(cp.wait_us)}`),
    cp.stretches && cp.stretches.length ? h('div', { class: 'table-wrap' }, sortableTable([
      { key: 'resource', label: 'Resource', fmt: resourceName },
      { key: 'start_us', label: 'From', num: true, fmt: (s) => fmtUs(s.start_us) },
      { key: 'end_us', label: 'To', num: true, fmt: (s) => fmtUs(s.end_us) },
      { key: 'len', label: 'Length', num: true, value: (s) => s.end_us - s.start_us, fmt: (s) => fmtUs(s.end_us - s.start_us) },
      { key: 'tasks', label: 'Tasks', num: true },
      { key: 'first_task', label: 'First task', fmt: (s) => h('span', { class: 'mono' }, shortName(s.first_task, 60)) },
    ], cp.stretches, { sortKey: 'start_us', desc: false })) : null);
}

export function overheadsBox(platformId) {
  const box = h('div', { id: 'overheads' }, loading('Loading platform overheads…'));
  api.overheads(platformId).then((o) => {
    const rows = o.overheads || [];
    if (!rows.length) { clear(box, empty('No overhead statistics for this platform yet.')); return; }
    const overall = ['T1', 'T2', 'T3', 'T4', 'T5'].map((t) => rows.find((r) => r.type === t && r.op_name === '*') || { type: t, op_name: '*' });
    const desc = { T1: 'between top-level ops', T2: 'op start → first launch', T3: 'last launch → op end', T4: 'runtime call itself', T5: 'between launches' };
    const filter = h('input', { type: 'search', placeholder: 'filter ops…', 'aria-label': 'Filter overheads by op name' });
    const perOp = h('div', {});
    const renderOps = () => {
      const q = filter.value.trim().toLowerCase();
      const r = rows.filter((x) => x.op_name !== '*' && (!q || x.op_name.toLowerCase().includes(q) || x.type.toLowerCase() === q));
      clear(perOp, r.length ? sortableTable([
        { key: 'type', label: 'Type' }, { key: 'op_name', label: 'Op', fmt: (x) => h('span', { class: 'mono' }, shortName(x.op_name, 70)) },
        { key: 'count', label: 'Count', num: true }, { key: 'mean_us', label: 'Mean', num: true, fmt: (x) => fmtUs(x.mean_us) },
        { key: 'median_us', label: 'Median', num: true, fmt: (x) => fmtUs(x.median_us) }, { key: 'p90_us', label: 'p90', num: true, fmt: (x) => fmtUs(x.p90_us) },
      ], r.slice(0, 400), { sortKey: 'count', desc: true }) : empty('No op matches.'));
    };
    filter.addEventListener('input', renderOps);
    renderOps();
    clear(box,
      h('div', { class: 'table-wrap' }, h('table', { id: 'overheads-table' },
        h('thead', {}, h('tr', {}, ['Type', 'What', 'Samples', 'Kept', 'Mean', 'Std', 'Median', 'p90'].map((x, i) => h('th', { class: i > 1 ? 'num' : '', scope: 'col' }, x)))),
        h('tbody', {}, overall.map((r) => h('tr', { 'data-type': r.type },
          h('td', {}, h('strong', {}, r.type)), h('td', {}, desc[r.type]), h('td', { class: 'num' }, r.samples ?? '–'), h('td', { class: 'num' }, r.count ?? '–'),
          h('td', { class: 'num', 'data-us': String(r.mean_us) }, fmtUs(r.mean_us)), h('td', { class: 'num' }, fmtUs(r.std_us)), h('td', { class: 'num' }, fmtUs(r.median_us)), h('td', { class: 'num' }, fmtUs(r.p90_us))))))),
      h('p', { class: 'sub' }, 'Shared by every trace of this platform; mean after IQR outlier removal.'),
      h('details', {}, h('summary', {}, `Per op (${rows.length - overall.filter((x) => x.count).length} rows)`), h('div', { class: 'row', style: 'margin:8px 0' }, filter), perOp));
  }).catch((e) => clear(box, errorBox(e, 'Cannot load overheads')));
  return box;
}

export function tracePage({ main, arg }) {
  const id = Number(arg);
  let alive = true;
  let tl = null;
  if (!(id > 0)) { main.append(errorBox({ message: `'${arg}' is not a trace id`, code: 'invalid' }, 'Bad address')); return null; }
  const head = h('div', {}, loading(`Loading trace ${id}…`));
  const cards = h('div', { class: 'cards', id: 'summary-cards' });
  const tlBox = h('div', { id: 'timeline-box' }, loading('Simulating and loading the timeline…'));
  const modeSel = h('select', { id: 'tl-mode', 'aria-label': 'Timeline view' },
    h('option', { value: 'measured' }, 'Measured'), h('option', { value: 'simulated' }, 'Simulated'), h('option', { value: 'both' }, 'Measured and simulated'));
  const perfetto = h('button', { class: 'btn', type: 'button', id: 'perfetto' }, 'Open in Perfetto (download)');
  const bdBox = h('div', { id: 'breakdowns' });
  const memBox = h('div', { id: 'memory-box' }, loading());
  const parBox = h('div', { id: 'parallelism-box' }, loading());
  const tkBox = h('div', { id: 'top-kernels' }, loading());
  const cpBox = h('div', { id: 'critical-path' }, loading());
  const ohPanel = h('section', { class: 'panel', 'aria-labelledby': 'oh-h' }, h('h2', { id: 'oh-h' }, 'Platform host overheads (T1..T5)'), loading());

  clear(main, head, cards,
    h('section', { class: 'panel', 'aria-labelledby': 'tl-h' }, h('header', {}, h('h2', { id: 'tl-h' }, 'Timeline'), modeSel, h('span', { class: 'grow' }), perfetto), tlBox,
      h('p', { class: 'sub' }, 'Wheel: zoom · Shift+wheel or drag: pan · double-click: zoom in · keys (focus the timeline): + − ← → 0')),
    bdBox,
    h('section', { class: 'panel', 'aria-labelledby': 'mem-h' }, h('h2', { id: 'mem-h' }, 'GPU memory over the step'), memBox),
    h('section', { class: 'panel', 'aria-labelledby': 'par-h' }, h('h2', { id: 'par-h' }, 'Parallelism'), parBox),
    h('div', { class: 'grid2' },
      h('section', { class: 'panel', 'aria-labelledby': 'tk-h' }, h('h2', { id: 'tk-h' }, 'Top kernels (simulated iteration)'), tkBox),
      h('section', { class: 'panel', 'aria-labelledby': 'cp-h' }, h('h2', { id: 'cp-h' }, 'Critical path'), cpBox)),
    h('div', { style: 'height:16px' }), ohPanel);

  perfetto.addEventListener('click', async () => {
    perfetto.disabled = true;
    try {
      const res = await request('GET', `/v1/traces/${id}/timeline?source=baseline&format=chrome`, { raw: true });
      download(await res.blob(), `reverie-trace-${id}-baseline.json`);
      toast('Saved the Chrome trace: open it at ui.perfetto.dev (Open trace file)');
    } catch (e) { toast(`Export failed: ${e.message}`, 'error'); }
    perfetto.disabled = false;
  });

  (async () => {
    let trace;
    try {
      trace = await api.trace(id);
    } catch (e) {
      clear(head, errorBox(e, `Cannot load trace ${id}`));
      clear(cards); clear(tlBox); clear(tkBox); clear(cpBox); ohPanel.remove();
      return;
    }
    if (!alive) return;
    const p = trace.platform || {};
    clear(head, h('div', { class: 'row' },
      h('h1', { class: 'grow' }, `Trace ${trace.id}: ${trace.job || '(no job)'}`),
      h('a', { class: 'btn primary', href: `#/whatif/${id}` }, 'What-if…'),
      h('a', { class: 'btn', href: `/v1/traces/${id}/original`, download: '' }, 'Original')),
    h('p', { class: 'sub' }, `${p.gpu_model || 'unknown GPU'}${p.gpus_per_node ? ` ×${p.gpus_per_node}` : ''} · ${trace.source_format} · ${(trace.tasks || 0).toLocaleString('en-US')} tasks · uploaded ${fmtDate(trace.uploaded_at)} · ${fmtBytes(trace.original_size)}`,
      trace.rank !== null && trace.rank !== undefined ? ` · rank ${trace.rank}${trace.world_size ? ' of ' + trace.world_size : ''}` : ''));
    clear(ohPanel, h('h2', { id: 'oh-h' }, `Platform host overheads (T1..T5) — platform #${p.id}`), p.id ? overheadsBox(p.id) : empty('No platform.'));

    // Figures from the simulator: a what-if with an empty document is the replay.
    api.whatif(id, {}).then((w) => {
      if (!alive) return;
      const b = w.breakdown && w.breakdown.baseline;
      clear(cards,
        // An execution trace alone is modelled: measured_us and replay_error
        // are null, and no card claims a measurement.
        w.measured_us === null
          ? card('Measured iteration', '–', 'modelled, not measured (an execution trace alone)', { 'data-metric': 'measured', 'data-us': '' })
          : card('Measured iteration', fmtUs(w.measured_us), w.steps && w.steps.count > 1 ? `median of ${w.steps.count} steady steps` : w.iterations ? 'the step' : 'the whole trace (no steps)', { 'data-metric': 'measured', 'data-us': String(w.measured_us) }),
        card(w.measured_us === null ? 'Modelled iteration' : 'Simulated iteration', fmtUs(w.baseline_us), 'replay of the graph', { 'data-metric': 'simulated', 'data-us': String(w.baseline_us) }),
        w.replay_error === null
          ? card('Replay error', '–', 'not measured: nothing to replay against', { 'data-metric': 'replay_error', 'data-value': '' })
          : card('Replay error', h('span', { class: w.replay_error <= 0.02 ? 'good' : 'bad' }, fmtPct(w.replay_error, 2)), '|simulated − measured| / measured, target ≤ 2 %', { 'data-metric': 'replay_error', 'data-value': String(w.replay_error) }),
        card('GPU utilization', b ? fmtPct(b.gpu_utilization) : '–', 'busy share of the iteration', { 'data-metric': 'gpu_utilization', 'data-value': String(b ? b.gpu_utilization : '') }),
        card('Exposed communication', b ? fmtUs(b.gpu.exposed_communication_us) : '–', b ? `of ${fmtUs(b.gpu.communication_us)} communication` : '', { 'data-metric': 'exposed_comm', 'data-us': String(b ? b.gpu.exposed_communication_us : '') }),
        card('Energy / iteration', fmtJ(w.energy_j && w.energy_j.baseline), w.avg_power_w && w.avg_power_w.baseline ? `${w.avg_power_w.baseline.toFixed(0)} W average` : 'GPU unknown', { 'data-metric': 'energy' }));
      cards.after(warningsBox(w.warnings, 'trace-warnings'));
      clear(bdBox, b ? breakdownCharts(b) : empty('No breakdown.'));
      clear(memBox, memoryView(w.memory));
      clear(parBox, parallelismView(w.parallelism));
      clear(tkBox, topKernelsTable(w.top_kernels));
      clear(cpBox, criticalPathBox(w.critical_path));
    }).catch((e) => {
      clear(cards, errorBox(e, 'Cannot simulate this trace'));
      clear(tkBox); clear(cpBox); clear(memBox); clear(parBox);
    });

    try {
      // An execution trace alone has no measured times: its one view is
      // the modelled timeline.
      if (trace.source_format === 'et') clear(modeSel, h('option', { value: 'simulated' }, 'Modelled (execution trace alone)'));
      // The measured view first; the simulated one is fetched when a view needs it.
      const measured = trace.source_format === 'et' ? await loadTrack(id, 'baseline') : await loadTrack(id, 'measured');
      let simulated = trace.source_format === 'et' ? measured : null, simLoad = null;
      if (!alive) return;
      const show = async () => {
        const m = modeSel.value;
        if (m !== 'measured' && !simulated) {
          clear(tlBox, loading('Simulating and loading the timeline…'));
          try {
            simulated = await (simLoad = simLoad || loadTrack(id, 'baseline'));
          } catch (e) {
            simLoad = null; // the next change of view tries again
            clear(tlBox, errorBox(e, 'Cannot load the simulated timeline'));
            return;
          }
          if (!alive || modeSel.value !== m) return;
        }
        if (tl) tl.destroy();
        const tracks = m === 'measured' ? [measured] : m === 'simulated' ? [simulated] : [measured, simulated];
        tl = new Timeline(tracks, { title: `Trace ${id} timeline` });
        clear(tlBox, tl.el);
        tl.render();
      };
      modeSel.addEventListener('change', show);
      if (!measured.n) { clear(tlBox, empty('This trace has no tasks to draw.')); return; }
      await show();
      window.__rvTimeline = () => tl;
    } catch (e) {
      clear(tlBox, errorBox(e, 'Cannot load the timeline'));
    }
  })();
  return { cleanup() { alive = false; if (tl) tl.destroy(); } };
}

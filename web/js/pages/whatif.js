// What-if: a form generated from the what-if kinds, the comparison of the
// baseline and the prediction (cards, stacked timelines, breakdown deltas),
// sweeps drawn as curves with the knee marked, and the request as curl.

import { api, origin } from '../api.js';
import { h, clear, loading, empty, errorBox, fmtUs, fmtPct, fmtSignedPct, fmtX, fmtJ, copyText, toast, shortName, warningsBox } from '../ui.js';
import { normalizeKinds } from '../kinds.js';
import { Timeline } from '../timeline.js';
import { loadTrack, loadPredicted } from '../tldata.js';
import { line, knee } from '../charts.js';
import { card, breakdownCharts, topKernelsTable } from './trace.js';

let kindsCache = null;
// The catalogue comes from the server only; a failure reaches the page's
// error state (and the next visit asks again).
export async function loadKinds() {
  if (!kindsCache) kindsCache = normalizeKinds(await api.kinds());
  return kindsCache;
}

// One input for one field spec; returns {el, get(), input}.
function fieldInput(spec, idPrefix, selectorSpec) {
  const id = `${idPrefix}-${spec.name}`;
  const hint = [spec.description, spec.min !== undefined || spec.max !== undefined ? `${spec.exclusive_min ? '>' : '≥'} ${spec.min ?? '−∞'}${spec.max !== undefined ? `, ≤ ${spec.max}` : ''}` : ''].filter(Boolean).join(' · ');
  if (spec.type === 'selector') {
    const subs = (selectorSpec || []).map((s) => fieldInput(s, id, null));
    const el = h('fieldset', { class: 'field', style: 'border:1px solid var(--border);border-radius:6px;padding:6px 8px' },
      h('legend', { class: 'sub' }, `${spec.name}${spec.required ? ' *' : ''} (select tasks: every given field must match)`), h('div', { class: 'fields' }, subs.map((s) => s.el)));
    return {
      el, input: subs[0] && subs[0].input,
      get() { const o = {}; for (const s of subs) { const v = s.get(); if (v !== undefined) o[s.name] = v; } return Object.keys(o).length ? o : undefined; },
      name: spec.name,
    };
  }
  let input;
  if (spec.type === 'enum') {
    input = h('select', { id }, h('option', { value: '' }, spec.default !== undefined ? `(default ${spec.default})` : '(default)'), (spec.values || []).map((v) => h('option', { value: v }, v)));
  } else if (spec.type === 'boolean') {
    input = h('select', { id }, h('option', { value: '' }, spec.default !== undefined ? `(default ${spec.default})` : '(default)'), h('option', { value: 'true' }, 'true'), h('option', { value: 'false' }, 'false'));
  } else {
    input = h('input', {
      id, type: spec.type === 'string' || spec.type === 'table' ? 'text' : 'number', step: spec.type === 'integer' ? '1' : 'any',
      min: spec.min, max: spec.max, placeholder: spec.default !== undefined ? String(spec.default) : spec.type === 'table' ? '[[bytes, us], ...]' : '',
      style: spec.type === 'table' ? 'width:240px' : 'width:150px',
    });
    if (spec.required && spec.default !== undefined) input.value = String(spec.default);
  }
  const el = h('div', { class: 'field' }, h('label', { for: id }, spec.name, spec.required ? ' *' : ''), input, hint ? h('span', { class: 'hint' }, hint) : null);
  return {
    el, input, name: spec.name,
    get() {
      const v = input.value.trim();
      if (v === '') return undefined;
      if (spec.type === 'boolean') return v === 'true';
      if (spec.type === 'number' || spec.type === 'integer') return Number(v);
      // A table is JSON ([[x, y], ...]); text that is not JSON goes as is, for the server to refuse.
      if (spec.type === 'table') { try { return JSON.parse(v); } catch (e) { return v; } }
      return v;
    },
  };
}

// The what-if document from the form, and where each member came from (for
// pointing at the input the server's error names).
// hw: the hardware row the server resolved for the trace (GET
// /v1/traces/{id} "hardware", null when unknown); hwList: GET /v1/hardware.
function buildForm(kinds, hw, hwList) {
  const inputs = new Map(); // doc path -> input element
  const kindBoxes = kinds.kinds.map((k) => {
    const enable = h('input', { type: 'checkbox', id: `k-${k.kind}-on`, 'aria-label': `Apply ${k.label}`, 'data-kind': k.kind });
    const fields = k.fields.map((f) => fieldInput(f, `k-${k.kind}`, kinds.selector));
    const box = h('details', { class: 'kind-box', 'data-kind': k.kind },
      h('summary', {}, h('span', { onclick: (e) => e.stopPropagation() }, enable), ' ', k.label, ' ', h('code', { class: 'sub' }, k.kind)),
      h('p', { class: 'desc' }, k.description), fields.length ? h('div', { class: 'fields' }, fields.map((f) => f.el)) : h('p', { class: 'sub' }, 'No parameters.'));
    // Editing a field turns the kind on.
    box.addEventListener('input', (e) => { if (e.target !== enable) enable.checked = true; });
    // Ticking a kind opens its fields.
    enable.addEventListener('change', () => { if (enable.checked) box.open = true; });
    return { k, enable, fields, box };
  });
  const distOn = h('input', { type: 'checkbox', id: 'dist-on', 'aria-label': 'Apply distributed data parallel' });
  const distFields = kinds.distributed.fields.map((f) => fieldInput(f, 'dist', null));
  const distBox = h('details', { class: 'kind-box', 'data-kind': 'distributed' },
    h('summary', {}, h('span', { onclick: (e) => e.stopPropagation() }, distOn), ' ', kinds.distributed.label || 'Distributed', ' ', h('code', { class: 'sub' }, 'distributed')),
    h('p', { class: 'desc' }, kinds.distributed.description || ''), h('div', { class: 'fields' }, distFields.map((f) => f.el)));
  distBox.addEventListener('input', (e) => { if (e.target !== distOn) distOn.checked = true; });
  distOn.addEventListener('change', () => { if (distOn.checked) distBox.open = true; });

  // Power limit: a slider over the GPU's range, from the row the server
  // resolved (no name matching here).
  const lo = hw ? hw.min_power_limit_w : 100, hi = hw ? (hw.max_power_limit_w || hw.default_power_limit_w) : 400;
  const plOn = h('input', { type: 'checkbox', id: 'pl-on', 'aria-label': 'Apply a power limit' });
  const plVal = h('output', { for: 'pl', id: 'pl-out' }, `${hi} W`);
  const pl = h('input', { type: 'range', id: 'pl', min: String(lo), max: String(hi), step: '5', value: String(hi), 'aria-label': 'GPU power limit in watts', style: 'width:260px' });
  pl.addEventListener('input', () => { plVal.textContent = `${pl.value} W`; plOn.checked = true; });
  // "gpu" is a choice among the hardware table's rows, not free text.
  const hwNames = (hwList || []).map((r) => r.name);
  const others = kinds.top.filter((f) => f.name !== 'power_limit_w').map((f) => fieldInput(
    f.name === 'gpu' && hwNames.length ? { ...f, type: 'enum', values: hwNames, default: hw ? `${hw.name}, the trace's` : undefined } : f, 'top', null));
  const plNote = h('span', { class: 'sub', id: 'pl-range' }, hw ? `${hw.name}: ${lo}–${hi} W (trace ran at ${hw.default_power_limit_w} W unless its metadata says otherwise)` : 'GPU not in the hardware table');
  const range = [lo, hi];
  // Another GPU chosen: the slider spans that GPU's power range.
  const gpuIn = others.find((f) => f.name === 'gpu');
  if (gpuIn && gpuIn.input) gpuIn.input.addEventListener('change', () => {
    const row = (hwList || []).find((r) => r.name === gpuIn.input.value) || hw;
    if (!row) return;
    range[0] = row.min_power_limit_w; range[1] = row.max_power_limit_w || row.default_power_limit_w;
    pl.min = String(range[0]); pl.max = String(range[1]);
    if (Number(pl.value) > range[1] || Number(pl.value) < range[0]) pl.value = String(range[1]);
    plVal.textContent = `${pl.value} W`;
    plNote.textContent = `${row.name}: ${range[0]}–${range[1]} W`;
  });
  const topBox = h('div', { class: 'kind-box' },
    h('div', { class: 'row' }, h('label', { class: 'field inline', for: 'pl-on' }, plOn, h('strong', {}, 'Power limit')), pl, plVal, plNote),
    h('div', { class: 'fields', style: 'margin-top:8px' }, others.map((f) => f.el)));

  function doc() {
    inputs.clear();
    const d = {};
    const opts = [];
    for (const b of kindBoxes) {
      if (!b.enable.checked) continue;
      const o = { kind: b.k.kind };
      inputs.set(`optimizations[${opts.length}]`, b.enable);
      for (const f of b.fields) {
        const v = f.get();
        if (v !== undefined) o[f.name] = v;
        inputs.set(`optimizations[${opts.length}].${f.name}`, f.input);
      }
      opts.push(o);
    }
    if (opts.length) d.optimizations = opts;
    if (distOn.checked) {
      const o = {};
      for (const f of distFields) { const v = f.get(); if (v !== undefined) o[f.name] = v; inputs.set(`distributed.${f.name}`, f.input); }
      d.distributed = o;
    }
    if (plOn.checked) { d.power_limit_w = Number(pl.value); inputs.set('power_limit_w', pl); }
    for (const f of others) { const v = f.get(); if (v !== undefined) d[f.name] = v; inputs.set(f.name, f.input); }
    return d;
  }
  return {
    el: h('div', {}, h('h3', {}, 'Optimizations'), kindBoxes.map((b) => b.box), h('h3', {}, 'Scale-out and network'), distBox, h('h3', {}, 'Power and settings'), topBox),
    doc, inputs, setPower(v) { pl.value = String(v); plVal.textContent = `${v} W`; plOn.checked = true; }, plRange: range,
  };
}

export function curlFor(id, d) {
  return `curl -s -H 'Content-Type: application/json' -X POST ${origin()}/v1/traces/${id}/whatif \\\n  -d '${JSON.stringify(d).replace(/'/g, "'\\''")}'`;
}

function deltaTable(b, p) {
  const rows = [
    ['Iteration window', b.window_us, p.window_us],
    ['CPU only', b.cpu_gpu.cpu_only_us, p.cpu_gpu.cpu_only_us],
    ['GPU only', b.cpu_gpu.gpu_only_us, p.cpu_gpu.gpu_only_us],
    ['CPU+GPU parallel', b.cpu_gpu.parallel_us, p.cpu_gpu.parallel_us],
    ['GPU compute', b.gpu.compute_us, p.gpu.compute_us],
    ['GPU communication', b.gpu.communication_us, p.gpu.communication_us],
    ['Exposed communication', b.gpu.exposed_communication_us, p.gpu.exposed_communication_us],
    ['GPU memcpy', b.gpu.memcpy_us, p.gpu.memcpy_us],
    ['GPU idle', b.gpu.idle_us, p.gpu.idle_us],
    ...Object.keys(b.phases || {}).flatMap((ph) => [[`${ph} GPU`, b.phases[ph].gpu_us, p.phases && p.phases[ph] ? p.phases[ph].gpu_us : 0], [`${ph} CPU`, b.phases[ph].cpu_us, p.phases && p.phases[ph] ? p.phases[ph].cpu_us : 0]]),
  ];
  return h('div', { class: 'table-wrap' }, h('table', { id: 'delta-table' },
    h('thead', {}, h('tr', {}, ['', 'Baseline', 'Predicted', 'Δ'].map((x, i) => h('th', { class: i ? 'num' : '', scope: 'col' }, x)))),
    h('tbody', {}, rows.map(([n, x, y]) => {
      const d = y - x;
      return h('tr', {}, h('td', {}, n), h('td', { class: 'num' }, fmtUs(x)), h('td', { class: 'num' }, fmtUs(y)),
        h('td', { class: 'num ' + (Math.abs(d) < 0.5 ? '' : d > 0 ? 'delta-up' : 'delta-down') }, (d > 0 ? '+' : '') + fmtUs(d)));
    }),
    h('tr', {}, h('td', {}, 'GPU utilization'), h('td', { class: 'num' }, fmtPct(b.gpu_utilization)), h('td', { class: 'num' }, fmtPct(p.gpu_utilization)),
      h('td', { class: 'num' }, ((p.gpu_utilization - b.gpu_utilization) * 100).toFixed(1) + ' pt')))));
}

const SWEEPS = {
  power: { label: 'Power limit (W)', path: 'power_limit_w', values: (pl) => { const [lo, hi] = pl; const n = 8; return [...new Set(Array.from({ length: n }, (_, i) => Math.round(lo + ((hi - lo) * i) / (n - 1))))]; } },
  loader: { label: 'Data-loader workers', path: 'dataloader.workers', values: () => [0, 1, 2, 4, 8, 16] },
  workers: { label: 'Data-parallel workers', path: 'distributed.workers', values: () => [1, 2, 4, 8, 16, 32, 64], logX: true },
  bandwidth: { label: 'Inter-node bandwidth (Gb/s, 16 workers on 2 nodes)', path: 'distributed.inter_node_gbps', values: () => [1, 5, 10, 25, 50, 100, 200, 400], logX: true },
};

// The document of one sweep point: the form's document with the swept field set.
export function sweepDoc(base, kind, v) {
  const d = JSON.parse(JSON.stringify(base));
  if (kind === 'power') d.power_limit_w = v;
  else if (kind === 'loader') {
    d.optimizations = (d.optimizations || []).filter((o) => o.kind !== 'dataloader');
    d.optimizations.push({ kind: 'dataloader', workers: v });
  } else if (kind === 'workers') d.distributed = { ...(d.distributed || {}), workers: v };
  else if (kind === 'bandwidth') d.distributed = { workers: 16, gpus_per_node: 8, ...(d.distributed || {}), inter_node_gbps: v };
  return d;
}

export function whatifPage({ main, arg }) {
  let alive = true;
  let tl = null;
  const id = Number(arg);
  const pickBox = h('div', {});
  clear(main, h('h1', {}, 'What-if'), pickBox);
  // Choose a trace first.
  api.traces({ limit: 200 }).then(({ traces }) => {
    if (!alive) return;
    const sel = h('select', { id: 'whatif-trace', 'aria-label': 'Trace' }, h('option', { value: '' }, 'Choose a trace…'),
      traces.map((t) => h('option', { value: String(t.id) }, `#${t.id} ${t.job || '(no job)'} — ${(t.platform && t.platform.gpu_model) || ''}`)));
    sel.value = id > 0 ? String(id) : '';
    sel.addEventListener('change', () => { location.hash = `#/whatif/${sel.value}`; });
    clear(pickBox, h('div', { class: 'row', style: 'margin-bottom:12px' }, h('label', { for: 'whatif-trace' }, 'Trace'), sel,
      id > 0 ? h('a', { href: `#/trace/${id}` }, 'trace details') : null));
    if (!traces.length) pickBox.append(empty('No traces stored yet. ', h('a', { href: '#/traces' }, 'Upload one first.')));
  }).catch((e) => clear(pickBox, errorBox(e, 'Cannot list traces')));
  if (!(id > 0)) return { cleanup() { alive = false; } };

  const formBox = h('div', {}, loading('Loading the what-if kinds…'));
  const curlBox = h('div', { class: 'curl' });
  const runBtn = h('button', { class: 'btn primary', type: 'submit', id: 'run-whatif' }, 'Run what-if');
  const formErr = h('div', { id: 'whatif-error' });
  const results = h('div', { id: 'whatif-results' });
  const sweepBox = h('div', { id: 'sweep-box' });
  const form = h('form', { id: 'whatif-form', 'aria-label': 'What-if document', novalidate: true }, formBox,
    h('div', { class: 'row', style: 'margin:12px 0' }, runBtn, h('span', { class: 'sub', id: 'kinds-source' })), formErr,
    h('h3', {}, 'The same request with curl'), curlBox);
  main.append(h('div', { class: 'grid2', style: 'grid-template-columns: minmax(380px, 1fr) minmax(380px, 1.4fr); align-items:start' },
    h('div', { class: 'stack' }, h('section', { class: 'panel', 'aria-labelledby': 'form-h' }, h('h2', { id: 'form-h' }, 'Scenario'), form),
      h('section', { class: 'panel', 'aria-labelledby': 'sw-h' }, h('h2', { id: 'sw-h' }, 'Sweeps'), sweepBox)),
    h('section', { class: 'panel', 'aria-labelledby': 'res-h' }, h('h2', { id: 'res-h' }, 'Prediction'), results)));
  clear(results, empty('Choose changes on the left and run the what-if.'));

  let F = null, trace = null, baseline = null;
  (async () => {
    try {
      const [kinds, t, hw] = await Promise.all([loadKinds(), api.trace(id), api.hardware().catch(() => ({ hardware: [] }))]);
      if (!alive) return;
      trace = t;
      F = buildForm(kinds, t.hardware || null, hw.hardware || []);
      clear(formBox, F.el);
      document.getElementById('kinds-source').textContent = `form from ${kinds.source}`;
      const upd = () => clear(curlBox, h('pre', { id: 'curl-text' }, curlFor(id, F.doc())), h('button', { class: 'btn small', type: 'button', onclick: () => copyText(curlFor(id, F.doc())) }, 'Copy'));
      form.addEventListener('input', upd);
      form.addEventListener('change', upd);
      upd();
      renderSweeps();
    } catch (e) {
      clear(formBox, errorBox(e, `Cannot load trace ${id} or the what-if catalogue`));
    }
  })();

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (!F) return;
    const d = F.doc();
    clear(formErr);
    for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
    runBtn.disabled = true;
    clear(results, loading('Simulating…'));
    try {
      const w = await api.whatif(id, d);
      if (!alive) return;
      showResult(w, d);
    } catch (err) {
      clear(results, errorBox(err, 'The what-if failed'));
      clear(formErr, errorBox(err, 'The server refused the document'));
      const el = err.field && (F.inputs.get(err.field) || F.inputs.get(err.field.replace(/\.[^.]*$/, '')));
      if (el) { el.setAttribute('aria-invalid', 'true'); el.focus(); }
    }
    runBtn.disabled = false;
  });

  // What bounds the step, on the speedup card: a GPU-side change that
  // barely moves a CPU- or input-bound step says why (warnings cpu_bound,
  // input_bound; docs/whatif.md).
  function boundNote(w) {
    const cp = w.critical_path || {};
    const ws = (w.warnings || []).find((x) => x.code === 'cpu_bound' || x.code === 'input_bound');
    if (!ws || !cp.bound_by) return 'baseline / predicted';
    const share = cp.shares && cp.shares[cp.bound_by];
    const what = cp.bound_by === 'data' ? 'input loading' : 'the CPU';
    return h('span', { id: 'speedup-bound', 'data-bound': ws.code, title: ws.message }, `bound by ${what} (${fmtPct(share, 0)} of the critical path): a GPU-side change cannot help`);
  }

  // One figure of an applied entry in words: times as times, counts with
  // separators, the rest as given.
  function appliedValue(k, v) {
    if (typeof v !== 'number') return String(v);
    if (/_us$/.test(k)) return fmtUs(v);
    if (Number.isInteger(v)) return v.toLocaleString('en-US');
    return String(+v.toFixed(4));
  }

  function showResult(w, d) {
    const bb = w.breakdown && w.breakdown.baseline, pb = w.breakdown && w.breakdown.predicted;
    const tlBox = h('div', { id: 'whatif-timeline' }, loading('Loading baseline and predicted timelines…'));
    const eB = w.energy_j && w.energy_j.baseline, eP = w.energy_j && w.energy_j.predicted;
    clear(results,
      h('div', { class: 'cards', id: 'whatif-cards' },
        card('Baseline iteration', fmtUs(w.baseline_us), w.measured_us === null ? 'modelled, not measured' : `measured ${fmtUs(w.measured_us)}`, { 'data-metric': 'baseline', 'data-us': String(w.baseline_us) }),
        card('Predicted iteration', fmtUs(w.predicted_us), w.cached ? 'from the cache' : 'simulated now', { 'data-metric': 'predicted', 'data-us': String(w.predicted_us) }),
        card('Speedup', h('span', { class: w.speedup > 1.0005 ? 'good' : w.speedup < 0.9995 ? 'bad' : '' }, fmtX(w.speedup)), boundNote(w), { 'data-metric': 'speedup', 'data-value': String(w.speedup) }),
        card('Replay error', fmtPct(w.replay_error, 2), w.replay_error === null ? 'not measured' : 'of the unmodified graph', { 'data-metric': 'replay_error', 'data-value': String(w.replay_error) }),
        card('Energy / iteration', `${fmtJ(eB)} → ${fmtJ(eP)}`, eB > 0 && eP > 0 ? fmtSignedPct(eP / eB - 1) : 'GPU unknown', { 'data-metric': 'energy', 'data-value': String(eP) }),
        card('Average power', w.avg_power_w ? `${(w.avg_power_w.baseline || 0).toFixed(0)} → ${(w.avg_power_w.predicted || 0).toFixed(0)} W` : '–', w.power_limit_w ? `cap ${(w.power_limit_w.predicted || 0).toFixed(0)} W` : '')),
      warningsBox(w.warnings, 'whatif-warnings'),
      h('h3', {}, 'What each model changed'),
      w.applied && w.applied.length ? h('ul', { id: 'applied' }, w.applied.map((a) => h('li', {}, h('strong', {}, a.model), a.changed === false ? h('span', { class: 'sub' }, ' (changed nothing)') : '',
        h('dl', { class: 'applied-fields' }, Object.entries(a).filter(([k, v]) => !['model', 'index', 'warnings', 'changed'].includes(k) && (typeof v !== 'object' || v === null)).flatMap(([k, v]) => [
          h('dt', {}, k.replace(/_/g, ' ')), h('dd', { class: 'mono' }, appliedValue(k, v))]))))) : h('p', { class: 'sub' }, 'Nothing changed: the prediction is the replay.'),
      h('h3', {}, 'Baseline and predicted timelines (one time axis)'), tlBox,
      bb && pb ? h('div', {}, h('h3', {}, 'Breakdown deltas (per iteration)'), deltaTable(bb, pb), h('div', { style: 'height:12px' }), breakdownCharts(bb, pb)) : null,
      h('h3', {}, 'Top kernels after the change'), topKernelsTable(w.top_kernels));
    (async () => {
      try {
        // The baseline is fetched once per page; the prediction per run.
        const [base, pred] = await Promise.all([baseline || loadTrack(id, 'baseline'), loadPredicted(id, d)]);
        baseline = base;
        if (!alive) return;
        if (tl) tl.destroy();
        tl = new Timeline([baseline, pred], { title: 'Baseline and predicted timelines' });
        clear(tlBox, tl.el);
        tl.render();
      } catch (e) { clear(tlBox, errorBox(e, 'Cannot load the timelines')); }
    })();
  }

  function renderSweeps() {
    const kindSel = h('select', { id: 'sweep-kind', 'aria-label': 'Sweep parameter' }, Object.entries(SWEEPS).map(([k, s]) => h('option', { value: k }, s.label)));
    const go = h('button', { class: 'btn', type: 'button', id: 'run-sweep' }, 'Run sweep');
    const out = h('div', { id: 'sweep-out' }, h('p', { class: 'sub' }, 'A sweep asks the what-if endpoint once per point, starting from the scenario on the left.'));
    clear(sweepBox, h('div', { class: 'row' }, kindSel, go), out);
    go.addEventListener('click', async () => {
      const k = kindSel.value, s = SWEEPS[k];
      const vals = s.values(F.plRange);
      const base = F.doc();
      go.disabled = true;
      const pts = [];
      const prog = h('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': String(vals.length), 'aria-label': 'Sweep progress' }, h('div', { style: 'width:0%' }));
      clear(out, prog);
      for (let i = 0; i < vals.length && alive; i++) {
        try {
          const w = await api.whatif(id, sweepDoc(base, k, vals[i]));
          pts.push({ x: vals[i], t: w.predicted_us, e: w.energy_j ? w.energy_j.predicted : NaN, sp: w.speedup });
        } catch (e) {
          pts.push({ x: vals[i], err: e.message });
        }
        prog.setAttribute('aria-valuenow', String(i + 1));
        prog.firstChild.style.width = `${((i + 1) / vals.length) * 100}%`;
      }
      go.disabled = false;
      if (!alive) return;
      const ok = pts.filter((p) => !p.err);
      if (!ok.length) { clear(out, errorBox({ message: pts.map((p) => `${p.x}: ${p.err}`).join('; '), code: 'sweep' }, 'Every point failed')); return; }
      const tp = ok.map((p) => ({ x: p.x, y: p.t / 1e3 }));
      const ep = ok.filter((p) => p.e > 0).map((p) => ({ x: p.x, y: p.e }));
      const kt = knee(tp), ke = knee(ep);
      clear(out,
        line([{ label: 'predicted iteration (ms)', color: '--c-pred', points: tp }], { xLabel: s.label, yLabel: 'ms / iteration', fmtY: (v) => v.toFixed(1), knee: kt ? { ...kt, label: `knee ${kt.x}` } : null, title: 'predicted iteration time', logX: s.logX }),
        ep.length ? line([{ label: 'energy per iteration (J)', color: '--c-memcpy', points: ep }], { xLabel: s.label, yLabel: 'J / iteration', fmtY: (v) => v.toFixed(1), knee: ke ? { ...ke, label: `knee ${ke.x}` } : null, title: 'energy per iteration', logX: s.logX }) : h('p', { class: 'sub' }, 'No energy figures (GPU not in the hardware table).'),
        h('div', { class: 'table-wrap' }, h('table', { id: 'sweep-table' }, h('thead', {}, h('tr', {}, [s.label, 'Predicted', 'Speedup', 'Energy / iter', ''].map((x, i) => h('th', { class: i ? 'num' : '' }, x)))),
          h('tbody', {}, pts.map((p) => h('tr', {}, h('td', {}, String(p.x)), h('td', { class: 'num' }, p.err ? '–' : fmtUs(p.t)), h('td', { class: 'num' }, p.err ? '–' : fmtX(p.sp)), h('td', { class: 'num' }, p.err ? '–' : fmtJ(p.e)),
            h('td', { class: 'bad' }, p.err ? shortName(p.err, 80) : (kt && kt.x === p.x ? 'knee' : ''))))))));
      toast(`Sweep done: ${ok.length} of ${pts.length} points`);
    });
  }

  return { cleanup() { alive = false; if (tl) tl.destroy(); } };
}

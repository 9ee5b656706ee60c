// Fleet: a selection of traces x scenarios, answered inline or as a job
// (202 + polling /v1/jobs/{id}); aggregates and a table per trace.

import { api, origin } from '../api.js';
import { h, clear, loading, empty, errorBox, sortableTable, fmtUs, fmtX, fmtJ, fmtPct, copyText, toast } from '../ui.js';
import { grouped } from '../charts.js';

const PRESETS = [
  { id: 'amp', label: 'AMP (fp16)', doc: { optimizations: [{ kind: 'amp', dtype: 'fp16' }] } },
  { id: 'fused', label: 'Fused optimizer', doc: { optimizations: [{ kind: 'fused_optimizer' }] } },
  { id: 'loader', label: 'Data loader, 4 workers', doc: { optimizations: [{ kind: 'dataloader', workers: 4 }] } },
  { id: 'pl300', label: 'Power limit 300 W', doc: { power_limit_w: 300 } },
  { id: 'pl250', label: 'Power limit 250 W', doc: { power_limit_w: 250 } },
  { id: 'pl200', label: 'Power limit 200 W', doc: { power_limit_w: 200 } },
  { id: 'dp8', label: '8 workers, 100 Gb/s', doc: { distributed: { workers: 8, inter_node_gbps: 100 } } },
  { id: 'dp8x2', label: '8 workers, 200 Gb/s (2× bandwidth)', doc: { distributed: { workers: 8, inter_node_gbps: 200 } } },
];

export function scenarioLabel(s) {
  const p = PRESETS.find((x) => JSON.stringify(x.doc) === JSON.stringify(s));
  return p ? p.label : JSON.stringify(s);
}

export function fleetPage({ main }) {
  let alive = true;
  let pollTimer = null;
  const platSel = h('select', { id: 'fleet-platform', 'aria-label': 'Platform' }, h('option', { value: '' }, 'Any platform'));
  const job = h('input', { id: 'fleet-job', type: 'text', placeholder: 'e.g. bert-* (glob)', 'aria-label': 'Job glob' });
  const since = h('input', { id: 'fleet-since', type: 'date', 'aria-label': 'Uploaded since' });
  const ids = h('input', { id: 'fleet-ids', type: 'text', placeholder: 'e.g. 1, 4, 7', 'aria-label': 'Trace ids' });
  const presetBoxes = PRESETS.map((p) => h('label', { class: 'field inline' }, h('input', { type: 'checkbox', value: p.id, 'data-preset': p.id }), p.label));
  const custom = h('textarea', { id: 'fleet-custom', placeholder: 'More scenarios: a JSON what-if document per line, e.g. {"optimizations":[{"kind":"cpu_speed","factor":2}]}', 'aria-label': 'Custom scenarios, one JSON document per line' });
  const asyncBox = h('input', { type: 'checkbox', id: 'fleet-async' });
  const run = h('button', { class: 'btn primary', type: 'submit', id: 'run-fleet' }, 'Run fleet what-if');
  const curlBox = h('div', { class: 'curl' });
  const out = h('div', { id: 'fleet-out' }, empty('Choose a selection and scenarios, then run.'));
  const form = h('form', { id: 'fleet-form', novalidate: true },
    h('h3', {}, 'Selection'),
    h('div', { class: 'fields' },
      h('div', { class: 'field' }, h('label', { for: 'fleet-platform' }, 'Platform'), platSel),
      h('div', { class: 'field' }, h('label', { for: 'fleet-job' }, 'Job'), job),
      h('div', { class: 'field' }, h('label', { for: 'fleet-since' }, 'Uploaded since'), since),
      h('div', { class: 'field' }, h('label', { for: 'fleet-ids' }, 'Trace ids'), ids)),
    h('h3', { style: 'margin-top:14px' }, 'Scenarios'),
    h('div', { class: 'fields' }, presetBoxes), h('div', { style: 'margin-top:8px' }, custom),
    h('div', { class: 'row', style: 'margin:12px 0' }, run, h('label', { class: 'field inline', for: 'fleet-async' }, asyncBox, 'always run as a background job')),
    h('div', { id: 'fleet-form-error' }),
    h('h3', {}, 'The same request with curl'), curlBox);
  clear(main, h('h1', {}, 'Fleet'),
    h('section', { class: 'panel', 'aria-labelledby': 'ff-h' }, h('h2', { id: 'ff-h' }, 'Question'), form),
    h('section', { class: 'panel', 'aria-labelledby': 'fo-h' }, h('h2', { id: 'fo-h' }, 'Answer'), out));

  api.platforms().then(({ platforms }) => {
    platSel.append(...platforms.map((p) => h('option', { value: String(p.id) }, `${p.gpu_model || 'unknown'} (#${p.id}, ${p.traces} traces)`)));
  }).catch(() => {});

  function request() {
    const select = {};
    if (platSel.value) select.platform = Number(platSel.value);
    if (job.value.trim()) select.job = job.value.trim();
    if (since.value) select.since = since.value;
    const idl = ids.value.split(/[\s,]+/).filter(Boolean).map(Number).filter((x) => x > 0);
    if (idl.length) select.trace_ids = idl;
    const scenarios = PRESETS.filter((p) => form.querySelector(`[data-preset="${p.id}"]`).checked).map((p) => p.doc);
    for (const lineText of custom.value.split('\n').map((l) => l.trim()).filter(Boolean)) scenarios.push(JSON.parse(lineText));
    const r = { select, scenarios };
    if (asyncBox.checked) r.async = true;
    return r;
  }
  const curl = (r) => `curl -s -H 'Content-Type: application/json' -X POST ${origin()}/v1/fleet/whatif \\\n  -d '${JSON.stringify(r).replace(/'/g, "'\\''")}'`;
  const upd = () => {
    let r;
    try { r = request(); } catch (e) { clear(curlBox, h('p', { class: 'bad' }, `A custom scenario is not JSON: ${e.message}`)); return; }
    clear(curlBox, h('pre', { id: 'fleet-curl' }, curl(r)), h('button', { class: 'btn small', type: 'button', onclick: () => copyText(curl(r)) }, 'Copy'));
  };
  form.addEventListener('input', upd);
  form.addEventListener('change', upd);
  upd();

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const errBox = document.getElementById('fleet-form-error');
    clear(errBox);
    let r;
    try { r = request(); } catch (err) { clear(errBox, errorBox({ message: err.message, code: 'invalid_json' }, 'A custom scenario is not JSON')); return; }
    if (!r.scenarios.length) { clear(errBox, errorBox({ message: 'choose at least one scenario', code: 'invalid', field: 'scenarios' }, 'Nothing to ask')); return; }
    run.disabled = true;
    clear(out, loading('Asking…'));
    try {
      const res = await api.fleet(r);
      if (res._status === 202) await poll(res.job_id);
      else show(res);
    } catch (err) {
      clear(out, errorBox(err, 'The fleet what-if failed'));
    }
    run.disabled = false;
  });

  function poll(jobId) {
    return new Promise((resolve) => {
      const bar = h('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': '100', 'aria-label': `Job ${jobId} progress` }, h('div', { style: 'width:0%' }));
      const txt = h('p', { class: 'sub', id: 'job-state', 'aria-live': 'polite' }, `Job ${jobId}: queued`);
      clear(out, txt, bar);
      const tick = async () => {
        if (!alive) return resolve();
        try {
          const j = await api.job(jobId);
          const p = Math.max(0, Math.min(1, j.progress || 0));
          bar.firstChild.style.width = `${p * 100}%`;
          bar.setAttribute('aria-valuenow', String(Math.round(p * 100)));
          txt.textContent = `Job ${jobId}: ${j.state} · ${Math.round(p * 100)} %`;
          if (j.state === 'done') { show(j.result, jobId); return resolve(); }
          if (j.state === 'failed') { clear(out, errorBox({ message: j.error || 'the job failed', code: 'job_failed' }, `Job ${jobId} failed`)); return resolve(); }
        } catch (err) {
          txt.textContent = `Job ${jobId}: cannot read its state (${err.message}); retrying`;
        }
        pollTimer = setTimeout(tick, 1000);
      };
      tick();
    });
  }

  function show(res, jobId) {
    if (!res || !res.scenarios) { clear(out, errorBox({ message: 'the answer has no scenarios', code: 'internal' }, 'Unexpected answer')); return; }
    if (!res.traces) { clear(out, empty('The selection matched no trace.')); return; }
    const sc = res.scenarios;
    const names = sc.map((s, i) => `#${i + 1} ${scenarioLabel(s.scenario)}`);
    // Speedup distribution: share of traces per speedup bin, per scenario.
    const bins = [[0, 0.9, '<0.9'], [0.9, 0.99, '0.9–.99'], [0.99, 1.01, '≈1'], [1.01, 1.1, '1.01–1.1'], [1.1, 1.5, '1.1–1.5'], [1.5, 2, '1.5–2'], [2, Infinity, '≥2']];
    const colors = ['--c-pred', '--c-kernel', '--c-memcpy', '--c-comm', '--c-data', '--c-cpu', '--c-other'];
    const hist = sc.map((s, i) => ({ label: names[i], color: colors[i % colors.length], values: bins.map(([a, b]) => (s.rows || []).filter((r) => !r.error && r.speedup >= a && r.speedup < b).length) }));
    // GPU time is per iteration; GPU-hours per million iterations reads better.
    const gh = (v) => ((v * 1e6) / 3600).toFixed(1);
    clear(out,
      h('p', { class: 'sub' }, `${res.traces} trace${res.traces === 1 ? '' : 's'} × ${sc.length} scenario${sc.length === 1 ? '' : 's'}${jobId ? ` · job ${jobId}` : ' · answered inline'}${res.shards ? ` · ${res.shards} shards` : ''}${res.workers && res.workers.length ? ` · worked by ${res.workers.join(', ')}` : ''}`),
      h('div', { class: 'table-wrap' }, h('table', { id: 'fleet-aggregates' },
        h('thead', {}, h('tr', {}, ['Scenario', 'Traces', 'Failed', 'Median speedup', 'Mean', 'p90', 'GPU time before → after (per iteration)', 'Energy before → after', '> 10 % gain'].map((x, i) => h('th', { class: i ? 'num' : '', scope: 'col' }, x)))),
        h('tbody', {}, sc.map((s, i) => {
          const a = s.aggregate || {};
          return h('tr', { 'data-scenario': String(i) }, h('td', {}, names[i]), h('td', { class: 'num' }, a.count), h('td', { class: 'num' }, a.failed),
            h('td', { class: 'num', 'data-value': String(a.median_speedup) }, fmtX(a.median_speedup)), h('td', { class: 'num' }, fmtX(a.mean_speedup)), h('td', { class: 'num' }, fmtX(a.p90_speedup)),
            h('td', { class: 'num' }, `${fmtUs(a.gpu_time_before_s * 1e6)} → ${fmtUs(a.gpu_time_after_s * 1e6)}`),
            h('td', { class: 'num' }, `${fmtJ(a.energy_before_j)} → ${fmtJ(a.energy_after_j)}`), h('td', { class: 'num' }, a.gain_over_10pct_count ?? 0));
        })))),
      h('div', { class: 'grid2', style: 'margin-top:14px' },
        h('section', { class: 'panel' }, h('h2', {}, 'Speedup distribution (traces per speedup bin, ×)'), grouped(bins.map((b) => b[2]), hist, { fmt: (v) => v.toFixed(0), title: 'traces per speedup bin', integer: true })),
        h('section', { class: 'panel' }, h('h2', {}, 'GPU time per iteration, before and after (s)'),
          grouped(names.map((n, i) => `#${i + 1}`), [
            { label: 'before (s)', color: '--c-base', values: sc.map((s) => (s.aggregate || {}).gpu_time_before_s || 0) },
            { label: 'after (s)', color: '--c-pred', values: sc.map((s) => (s.aggregate || {}).gpu_time_after_s || 0) }], { fmt: (v) => v.toFixed(3), title: 'GPU seconds before and after, per scenario' }),
          h('p', { class: 'sub' }, sc.map((s, i) => `#${i + 1}: ${gh((s.aggregate || {}).gpu_time_before_s || 0)} → ${gh((s.aggregate || {}).gpu_time_after_s || 0)} GPU-hours per million iterations`).join(' · '))),
        h('section', { class: 'panel' }, h('h2', {}, 'Energy per iteration, before and after (J)'),
          grouped(names.map((n, i) => `#${i + 1}`), [
            { label: 'before', color: '--c-base', values: sc.map((s) => (s.aggregate || {}).energy_before_j || 0) },
            { label: 'after', color: '--c-memcpy', values: sc.map((s) => (s.aggregate || {}).energy_after_j || 0) }], { fmt: (v) => v.toFixed(1), title: 'energy before and after, per scenario' }))),
      ...sc.map((s, i) => h('section', { class: 'panel', 'data-scenario-rows': String(i) }, h('h2', {}, `Per trace — ${names[i]}`),
        (s.rows || []).length ? h('div', { class: 'table-wrap' }, sortableTable([
          { key: 'trace_id', label: 'Trace', num: true, fmt: (r) => h('a', { href: `#/trace/${r.trace_id}` }, String(r.trace_id)) },
          { key: 'measured_us', label: 'Measured', num: true, fmt: (r) => fmtUs(r.measured_us) },
          { key: 'baseline_us', label: 'Baseline', num: true, fmt: (r) => fmtUs(r.baseline_us) },
          { key: 'predicted_us', label: 'Predicted', num: true, fmt: (r) => h('span', { 'data-us': String(r.predicted_us) }, fmtUs(r.predicted_us)) },
          { key: 'speedup', label: 'Speedup', num: true, fmt: (r) => (r.error ? '–' : fmtX(r.speedup)) },
          { key: 'replay_error', label: 'Replay error', num: true, fmt: (r) => fmtPct(r.replay_error, 2) },
          { key: 'warning_count', label: 'Warnings', num: true, fmt: (r) => (r.error ? '–' : String(r.warning_count || 0)) },
          { key: 'energy', label: 'Energy before → after', num: true, value: (r) => (r.energy_j ? r.energy_j.predicted : null), fmt: (r) => (r.energy_j ? `${fmtJ(r.energy_j.baseline)} → ${fmtJ(r.energy_j.predicted)}` : '–') },
          { key: 'error', label: 'Error', fmt: (r) => (r.error ? h('span', { class: 'bad' }, r.error) : '') },
        ], s.rows, { sortKey: 'speedup', desc: true })) : empty('No rows.'))));
    toast('Fleet answer ready');
  }

  return { cleanup() { alive = false; clearTimeout(pollTimer); } };
}

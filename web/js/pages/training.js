// Training jobs: the traces of one distributed run (docs/internals/web.md).
//   #/training-jobs        every job: ranks present, missing ranks; the
//                          upload of every rank as one .tar / .tar.gz
//   #/training-job/ID      one job: ranks stacked on one aligned time axis
//                          (the straggler highlighted), wait vs transfer per
//                          rank, stragglers, and what-ifs on the whole job
// Numbers come from GET /v1/training-jobs[/ID] and
// POST /v1/training-jobs/ID/whatif (the engine's job answer); each rank's
// tasks from its own trace's measured timeline, moved onto the job's clock
// by the answer's origin_us and clock_offsets_us.

import { request } from '../api.js';
import { parallelismView } from './trace.js';
import { h, clear, loading, empty, errorBox, sortableTable, fmtUs, fmtPct, fmtX, cssVar, warningsBox, showTip, hideTip } from '../ui.js';

const LANE_H = 26;
const LABEL_W = 120;
const MAX_TASKS = 20000;

function card(label, value, note, attrs = {}) {
  return h('div', { class: 'card', ...attrs }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value), note ? h('div', { class: 'note' }, note) : null);
}

function rankList(ranks) {
  if (!ranks || !ranks.length) return 'none';
  const s = ranks.slice(0, 32).join(', ');
  return ranks.length > 32 ? `${s}, … (${ranks.length})` : s;
}

export function trainingJobsPage({ main }) {
  let alive = true;
  const box = h('div', { id: 'tj-list' }, loading('Loading training jobs…'));
  // One .tar / .tar.gz of every rank: POST /v1/training-jobs?job=NAME.
  const nameIn = h('input', { id: 'tj-upload-job', type: 'text', placeholder: 'job name', 'aria-label': 'Job name for the archive' });
  const fileIn = h('input', { id: 'tj-upload-file', type: 'file', accept: '.tar,.tar.gz,.tgz,application/gzip,application/x-tar', 'aria-label': 'Choose a .tar or .tar.gz of the rank traces' });
  const upStatus = h('div', { id: 'tj-upload-status', 'aria-live': 'polite' });
  fileIn.addEventListener('change', async () => {
    const f = fileIn.files && fileIn.files[0];
    if (!f) return;
    if (!nameIn.value.trim()) return clear(upStatus, errorBox({ message: 'give the job a name first', code: 'invalid' }, 'Upload'));
    clear(upStatus, loading(`Uploading ${f.name}…`));
    try {
      const r = await request('POST', '/v1/training-jobs?job=' + encodeURIComponent(nameIn.value.trim()), {
        body: f, headers: { 'Content-Type': /\.(tgz|gz)$/i.test(f.name) ? 'application/gzip' : 'application/octet-stream' },
      });
      if (!alive) return;
      const refused = (r.members || []).filter((m) => m.error);
      clear(upStatus, h('p', { id: 'tj-upload-result', 'data-stored': r.stored, 'data-duplicates': r.duplicates, 'data-refused': r.refused },
        `${f.name}: ${r.stored} stored, ${r.duplicates} already stored, ${r.refused} refused. `,
        r.training_job ? h('a', { href: `#/training-job/${r.training_job.id}` }, `Open ${r.training_job.name}`)
          : r.duplicates ? 'Its traces were stored before, under the job they were first uploaded with, so this name forms no job.'
            : 'No member had a rank, so no job was formed.'),
      refused.length ? h('ul', { class: 'warnings' }, refused.map((m) => h('li', { class: 'warn' }, h('strong', {}, m.name), ' ', m.message))) : null);
      load();
    } catch (e) {
      if (alive) clear(upStatus, errorBox(e, 'Upload failed'));
    }
  });
  clear(main,
    h('h1', {}, 'Training jobs'),
    h('p', { class: 'sub' }, 'Traces with a job name and a rank (from the upload or the trace\'s ',
      h('code', {}, 'distributedInfo'), ') form a training job; ',
      h('code', {}, 'reverie upload --job NAME --rank R --world-size W FILE'), '.'),
    h('section', { class: 'panel', 'aria-labelledby': 'tju-h' }, h('h2', { id: 'tju-h' }, 'Upload every rank as one archive'),
      h('div', { class: 'row' }, nameIn, fileIn), upStatus),
    h('section', { class: 'panel', 'aria-labelledby': 'tjl-h' }, h('h2', { id: 'tjl-h' }, 'Jobs'), box));
  const load = () => request('GET', '/v1/training-jobs?limit=1000').then((d) => {
    if (!alive) return;
    const jobs = d.training_jobs || [];
    if (!jobs.length) return clear(box, empty('No training jobs yet: upload the ranks of a distributed run with a job name.'));
    const cols = [
      { key: 'name', label: 'Job', fmt: (j) => h('a', { href: `#/training-job/${j.id}` }, j.name) },
      { key: 'world_size', label: 'World size', num: true },
      { key: 'ranks_present', label: 'Ranks present', num: true, fmt: (j) => `${j.ranks_present}${j.world_size ? ' / ' + j.world_size : ''}` },
      { key: 'missing_count', label: 'Missing', num: true, fmt: (j) => h('span', { class: j.missing_count ? 'bad' : 'good', 'data-missing': j.missing.join(',') }, j.missing_count ? rankList(j.missing) : 'none') },
      { key: 'id', label: 'Id', num: true },
    ];
    clear(box, sortableTable(cols, jobs, { sortKey: 'id', desc: true, rowAttrs: (j) => ({ 'data-job-id': j.id }) }));
  }).catch((e) => { if (alive) clear(box, errorBox(e, 'Cannot list training jobs')); });
  load();
  return { cleanup() { alive = false; } };
}

// The lanes: one per rank, its GPU and communication tasks on the job's
// aligned clock; the first straggler's lane is highlighted.
function lanesCanvas(lanes, straggler) {
  let t0 = Infinity, t1 = -Infinity;
  for (const l of lanes) for (const t of l.tasks) { t0 = Math.min(t0, t.s); t1 = Math.max(t1, t.s + t.d); }
  if (!Number.isFinite(t0)) { t0 = 0; t1 = 1; }
  const canvas = h('canvas', { id: 'tj-lanes', role: 'img', 'aria-label': `Ranks on one aligned time axis, ${fmtUs(t1 - t0)}`, tabindex: 0 });
  const wrap = h('div', { class: 'tj-lanes-wrap' }, canvas);
  function draw() {
    const w = Math.max(300, wrap.clientWidth || 900), hgt = lanes.length * LANE_H + 24;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = w * dpr; canvas.height = hgt * dpr;
    canvas.style.width = w + 'px'; canvas.style.height = hgt + 'px';
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, hgt);
    const span = Math.max(1e-9, t1 - t0), pw = w - LABEL_W - 8;
    const x = (t) => LABEL_W + ((t - t0) / span) * pw;
    g.font = '12px system-ui, sans-serif';
    lanes.forEach((l, i) => {
      const y = i * LANE_H;
      if (l.rank === straggler) {
        g.fillStyle = cssVar('--warn'); g.globalAlpha = 0.18; g.fillRect(0, y, w, LANE_H); g.globalAlpha = 1;
      }
      g.fillStyle = cssVar('--fg') || '#000';
      g.fillText(`rank ${l.rank}${l.rank === straggler ? ' ⚠ straggler' : ''}`, 4, y + 17);
      for (const t of l.tasks) {
        g.fillStyle = cssVar(t.comm ? '--c-comm' : '--c-kernel');
        g.fillRect(x(t.s), y + 4, Math.max(1, x(t.s + t.d) - x(t.s)), LANE_H - 8);
      }
    });
    g.fillStyle = cssVar('--muted') || '#666';
    const yAx = lanes.length * LANE_H + 16;
    for (let k = 0; k <= 4; k++) {
      const t = t0 + (span * k) / 4;
      const label = fmtUs(t - t0);
      g.fillText(label, Math.min(w - g.measureText(label).width - 4, x(t)), yAx);
    }
  }
  canvas.addEventListener('mousemove', (ev) => {
    const r = canvas.getBoundingClientRect();
    const i = Math.floor((ev.clientY - r.top) / LANE_H);
    if (i < 0 || i >= lanes.length) return hideTip();
    const l = lanes[i];
    showTip(ev.clientX, ev.clientY, h('div', {}, h('strong', {}, `rank ${l.rank}`), h('div', {}, `${l.tasks.length} GPU/communication tasks`),
      h('div', {}, `clock offset ${fmtUs(l.offset)}`)));
  });
  canvas.addEventListener('mouseleave', hideTip);
  // Redrawn on resize and on a theme change (the colours are CSS variables).
  new ResizeObserver(() => draw()).observe(wrap);
  window.addEventListener('rv-theme', () => { if (canvas.isConnected) draw(); });
  requestAnimationFrame(draw);
  return { el: wrap, t0, t1 };
}

async function loadLane(rank, traceId, shift) {
  const tl = await request('GET', `/v1/traces/${traceId}/timeline?source=measured&max_tasks=${MAX_TASKS}`);
  const kinds = (tl.threads || []).map((t) => t.kind);
  const tasks = [];
  for (const t of tl.tasks || []) {
    const k = kinds[t.thread];
    if (k !== 'gpu' && k !== 'comm') continue;
    tasks.push({ s: t.start_us + shift, d: t.dur_us, comm: k === 'comm' || t.kind === 'comm' });
  }
  return { rank, traceId, tasks, truncated: !!tl.truncated };
}

function waitTransfer(ranks, straggler) {
  const max = Math.max(1e-9, ...ranks.map((r) => (r.wait_us || 0) + (r.transfer_us || 0)));
  const bar = (r) => h('div', { class: 'tj-bar', title: `wait ${fmtUs(r.wait_us)}, transfer ${fmtUs(r.transfer_us)}` },
    h('span', { class: 'tj-wait', style: `width:${(100 * (r.wait_us || 0)) / max}%` }),
    h('span', { class: 'tj-transfer', style: `width:${(100 * (r.transfer_us || 0)) / max}%` }));
  const cols = [
    { key: 'rank', label: 'Rank', num: true, fmt: (r) => (r.rank === straggler ? h('strong', {}, `${r.rank} ⚠`) : String(r.rank)) },
    { key: 'measured_us', label: 'Measured', num: true, fmt: (r) => h('span', { 'data-us': String(r.measured_us) }, fmtUs(r.measured_us)) },
    { key: 'predicted_us', label: 'Predicted', num: true, fmt: (r) => h('span', { 'data-us': String(r.predicted_us) }, fmtUs(r.predicted_us)) },
    { key: 'replay_error', label: 'Replay error', num: true, fmt: (r) => h('span', { class: r.replay_error <= 0.02 ? 'good' : 'bad' }, fmtPct(r.replay_error, 2)) },
    { key: 'wait_us', label: 'Waiting for peers', num: true, fmt: (r) => h('span', { class: 'tj-wait-us', 'data-us': String(r.wait_us) }, fmtUs(r.wait_us)) },
    { key: 'transfer_us', label: 'Transferring', num: true, fmt: (r) => h('span', { class: 'tj-transfer-us', 'data-us': String(r.transfer_us) }, fmtUs(r.transfer_us)) },
    { key: 'bar', label: 'Wait | transfer', sortable: false, fmt: bar },
  ];
  return sortableTable(cols, ranks, { sortKey: 'rank', desc: false, rowAttrs: (r) => ({ 'data-rank': r.rank, class: r.rank === straggler ? 'straggler' : '' }) });
}

function answerCards(a) {
  const s = (a.stragglers || [])[0];
  return h('div', { class: 'cards' },
    card('Measured step', fmtUs(a.measured_us), 'the job, as traced', { 'data-metric': 'measured', 'data-us': String(a.measured_us) }),
    card('Simulated step', fmtUs(a.baseline_us), 'replay of the global graph', { 'data-metric': 'baseline', 'data-us': String(a.baseline_us) }),
    card('Predicted step', fmtUs(a.predicted_us), 'under the what-if', { 'data-metric': 'predicted', 'data-us': String(a.predicted_us) }),
    card('Speedup', fmtX(a.speedup), 'baseline / predicted', { 'data-metric': 'speedup', 'data-value': String(a.speedup) }),
    card('Straggler', s ? `rank ${s.rank}` : 'none', s ? `others wait ${fmtUs(s.delay_us)}` : '', { 'data-metric': 'straggler', 'data-rank': s ? String(s.rank) : '' }));
}

export function trainingJobPage({ main, arg }) {
  let alive = true;
  const id = Number(arg);
  const head = h('div', { id: 'tj-head' }, loading('Loading the job…'));
  const lanesBox = h('div', { id: 'tj-lanes-box' }, loading('Loading the ranks\' timelines…'));
  const wtBox = h('div', { id: 'tj-wait-transfer' }, loading('Simulating the job…'));
  const doc = h('textarea', { id: 'tj-whatif', 'aria-label': 'What-if document for the job', rows: 4,
    placeholder: '{"optimizations":[{"kind":"scale","select":{"kind":"kernel"},"factor":1.5,"ranks":[3]}]}' });
  const ranksIn = h('input', { id: 'tj-ranks', type: 'text', placeholder: 'all', 'aria-label': 'Ranks to simulate (comma list; empty = all)' });
  const out = h('div', { id: 'tj-result', 'aria-live': 'polite' });
  const form = h('form', { id: 'tj-form', novalidate: true },
    h('label', { for: 'tj-whatif' }, 'What-if document (an optimization may name its "ranks")'), doc,
    h('div', { class: 'row', style: 'margin:8px 0' },
      h('label', { for: 'tj-ranks' }, 'Ranks to simulate'), ranksIn,
      h('button', { class: 'btn primary', type: 'submit', id: 'run-tj-whatif' }, 'Run on the job')));
  clear(main, head,
    h('section', { class: 'panel', 'aria-labelledby': 'tjt-h' }, h('h2', { id: 'tjt-h' }, 'Ranks on one aligned time axis'), lanesBox),
    h('section', { class: 'panel', 'aria-labelledby': 'tjw-h' }, h('h2', { id: 'tjw-h' }, 'Wait vs transfer per rank'), wtBox),
    h('section', { class: 'panel', 'aria-labelledby': 'tjf-h' }, h('h2', { id: 'tjf-h' }, 'What-if on the job'), form, out));

  async function whatif(body) {
    return request('POST', `/v1/training-jobs/${id}/whatif`, { body });
  }

  async function load() {
    let job;
    try {
      job = await request('GET', `/v1/training-jobs/${id}`);
    } catch (e) {
      if (alive) { clear(head, errorBox(e, 'Cannot load the training job')); clear(lanesBox); clear(wtBox); }
      return;
    }
    if (!alive) return;
    clear(head, h('h1', {}, `Training job ${job.name}`),
      h('p', { id: 'tj-summary', 'data-present': job.ranks.join(','), 'data-missing': job.missing.join(',') },
        `${job.ranks_present} of ${job.world_size ?? '?'} ranks present; missing: ${rankList(job.missing)}.`));
    let ans = null, ansErr = null;
    try { ans = await whatif({}); } catch (e) { ansErr = e; }
    if (!alive) return;
    const straggler = ans && ans.stragglers && ans.stragglers.length ? ans.stragglers[0].rank : null;
    if (ans) {
      // The dimensions come from one rank (parallelism_rank): the ranks of a
      // job run one layout. Communication is the transfer; waits are above.
      clear(wtBox, answerCards(ans), warningsBox(ans.warnings, 'tj-warnings'), waitTransfer(ans.ranks || [], straggler),
        h('h3', { id: 'tj-par-h' }, `Parallelism (rank ${ans.parallelism_rank ?? '?'}, transfer time per step)`), parallelismView(ans.parallelism));
    } else {
      clear(wtBox, errorBox(ansErr, 'The job could not be simulated'));
    }
    // Each rank's own measured tasks, shifted onto the job's clock when the
    // answer gives its origin and clock offset.
    const used = (job.rank_traces || []).filter((t) => t.used);
    const origin = new Map(((ans && ans.training_job && ans.training_job.ranks) || []).map((r) => [r.rank, r.origin_us]));
    const offsets = (ans && ans.clock_offsets_us) || {};
    const aligned = used.every((t) => origin.has(t.rank));
    try {
      const lanes = await Promise.all(used.map((t) => {
        const off = Number(offsets[String(t.rank)] || 0);
        return loadLane(t.rank, t.trace_id, aligned ? origin.get(t.rank) + off : 0).then((l) => ({ ...l, offset: off }));
      }));
      if (!alive) return;
      const c = lanesCanvas(lanes, straggler);
      clear(lanesBox,
        aligned ? null : h('p', { class: 'sub', id: 'tj-unaligned' }, 'Clock offsets unavailable: each rank is drawn from its own trace start.'),
        h('ul', { id: 'tj-lane-list', class: 'tl-legend tj-lane-list' }, lanes.map((l) => h('li', {
          'data-rank': l.rank, 'data-trace-id': l.traceId, 'data-tasks': l.tasks.length, 'data-offset-us': String(l.offset),
          class: l.rank === straggler ? 'straggler' : '',
        }, h('a', { href: `#/trace/${l.traceId}` }, `rank ${l.rank}`), l.rank === straggler ? ' (straggler)' : '', l.truncated ? ' (truncated)' : ''))),
        c.el,
        h('p', { class: 'sub' }, h('span', { class: 'swatch', style: `background:${cssVar('--c-kernel')}` }), ' GPU  ',
          h('span', { class: 'swatch', style: `background:${cssVar('--c-comm')}` }), ' communication'));
    } catch (e) {
      if (alive) clear(lanesBox, errorBox(e, 'Cannot load the ranks\' timelines'));
    }
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    let body = {};
    const text = doc.value.trim();
    if (text) {
      try { body = JSON.parse(text); } catch (e) { return clear(out, errorBox({ message: e.message, code: 'invalid' }, 'The what-if is not JSON')); }
    }
    const rs = ranksIn.value.split(',').map((s) => s.trim()).filter(Boolean).map(Number);
    if (rs.length) body.ranks = rs;
    clear(out, loading('Simulating…'));
    try {
      const a = await whatif(body);
      if (!alive) return;
      const s = a.stragglers && a.stragglers.length ? a.stragglers[0].rank : null;
      clear(out, answerCards(a), warningsBox(a.warnings, 'tj-result-warnings'), waitTransfer(a.ranks || [], s));
    } catch (e) {
      if (alive) clear(out, errorBox(e, 'What-if failed'));
    }
  });
  if (!id) clear(head, errorBox({ message: `no training job '${arg || ''}'`, code: 'not_found' }, 'Not found'));
  else load();
  return { cleanup() { alive = false; hideTip(); } };
}

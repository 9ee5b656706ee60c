// Advise: the ranked plans of POST /v1/traces/{id}/advise (docs/advise.md),
// each opening as a what-if (the diff page against its prediction).
//   #/advise/ID?objective=time|energy|cost

import { request } from '../api.js';
import { h, clear, loading, empty, errorBox, sortableTable, fmtUs, fmtX, fmtJ, fmtBytes, warningsBox } from '../ui.js';

function candidateRows(cands) {
  return cands.map((c, i) => ({ ...c, rank: i + 1 }));
}

function table(id, ans) {
  const cols = [
    { key: 'rank', label: '#', num: true },
    { key: 'changes', label: 'Changes', value: (r) => r.changes.join(', '),
      fmt: (r) => h('span', { title: r.why }, r.changes.join(' + ')) },
    { key: 'speedup', label: 'Speedup / sample', num: true, fmt: (r) => fmtX(r.speedup) },
    { key: 'predicted_us', label: 'Step', num: true, fmt: (r) => fmtUs(r.predicted_us) },
    { key: 'energy_j', label: 'Energy / step', num: true, fmt: (r) => (r.energy_j === null ? '–' : fmtJ(r.energy_j)) },
    { key: 'memory_peak_bytes', label: 'Memory peak', num: true,
      fmt: (r) => (r.memory_peak_bytes === null ? '–' : fmtBytes(r.memory_peak_bytes)) },
    { key: 'fits', label: 'Fits', value: (r) => (r.fits ? 1 : 0),
      fmt: (r) => h('span', { class: r.fits ? '' : 'bad', title: r.fits_reason || '' }, r.fits ? 'yes' : 'no') },
    { key: 'open', label: 'Open', sortable: false,
      fmt: (r) => h('a', { href: `#/diff/${id}?whatif=${encodeURIComponent(JSON.stringify(r.whatif))}&top=20`,
        class: 'open-whatif' }, 'as a what-if') },
  ];
  return sortableTable(cols, candidateRows(ans.candidates), {
    sortKey: 'rank', desc: false,
    caption: `Ranked by ${ans.objective} per sample; ${ans.searched} plans run, ${ans.pruned} pruned, ${ans.seconds.toFixed(1)} s`,
    rowAttrs: (r) => ({ 'data-rank': String(r.rank) }),
  });
}

export function advisePage({ main, arg, query }) {
  let alive = true;
  const tid = h('input', { id: 'advise-trace', type: 'number', min: 1, value: arg || '', 'aria-label': 'Trace id' });
  const obj = h('select', { id: 'advise-objective', 'aria-label': 'Objective' },
    h('option', { value: 'time' }, 'time per sample'), h('option', { value: 'energy' }, 'energy per sample'),
    h('option', { value: 'cost' }, 'GPU-hour cost per sample'));
  const asked = query.get('objective');
  obj.value = asked === 'energy' || asked === 'cost' ? asked : 'time';
  const out = h('div', { id: 'advise-out' }, empty('Pick a trace and search its what-ifs.'));
  const form = h('form', { id: 'advise-form', novalidate: true },
    h('div', { class: 'fields' },
      h('div', { class: 'field' }, h('label', { for: 'advise-trace' }, 'Trace'), tid),
      h('div', { class: 'field' }, h('label', { for: 'advise-objective' }, 'Objective'), obj)),
    h('div', { class: 'row', style: 'margin:12px 0' }, h('button', { class: 'btn primary', type: 'submit', id: 'run-advise' }, 'Advise')));
  clear(main, h('h1', {}, 'Advise'),
    h('section', { class: 'panel', 'aria-labelledby': 'ad-h' }, h('h2', { id: 'ad-h' }, 'Search'), form),
    h('section', { class: 'panel', 'aria-labelledby': 'ar-h' }, h('h2', { id: 'ar-h' }, 'Plans'), out));

  async function run() {
    const id = Number(tid.value);
    if (!id) return clear(out, empty('Give a trace id.'));
    clear(out, loading('Searching the what-ifs…'));
    try {
      const ans = await request('POST', `/v1/traces/${id}/advise`, { body: { objective: obj.value } });
      if (!alive) return;
      const top = ans.candidates[0];
      clear(out,
        h('p', { id: 'advise-baseline' }, `Baseline: ${fmtUs(ans.baseline.predicted_us)} per step, bound by ${ans.baseline.bound}.`),
        ans.complete ? null : h('p', { class: 'warn', id: 'advise-incomplete' }, `Search cut short: ${ans.stopped}`),
        top ? h('p', { id: 'advise-why' }, top.why) : empty('No plan beats the baseline.'),
        ans.candidates.length ? table(id, ans) : null,
        top ? h('h3', {}, 'What the top plan rests on') : null,
        top ? warningsBox(top.warnings, 'advise-warnings') : null);
    } catch (e) {
      if (alive) clear(out, errorBox(e, 'Advise failed'));
    }
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const want = `#/advise/${tid.value}?objective=${obj.value}`;
    if (location.hash !== want) location.hash = want; // route() calls run() again
    else run();
  });
  if (arg) run();
  return { cleanup() { alive = false; } };
}

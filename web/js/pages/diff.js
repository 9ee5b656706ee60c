// Diff: a trace against another trace (GET /v1/traces/{id}/diff?with=)
// or against its prediction under a what-if (POST /v1/traces/{id}/diff),
// per op, kernel class and kernel, ordered by |Δ time| (docs/internals/diff.md).
//   #/diff/ID?with=ID2      #/diff/ID?whatif={"optimizations":[...]}

import { request, qs } from '../api.js';
import { h, clear, loading, empty, errorBox, sortableTable, fmtUs, fmtNum, shortName } from '../ui.js';

const STATUS = { appeared: '+ appeared', vanished: '− vanished', changed: 'changed', same: 'same' };

function signed(us) {
  return (us > 0 ? '+' : '') + fmtUs(us);
}

function table(rows, caption, op) {
  const cols = [
    { key: 'name', label: op ? 'Op' : 'Name', fmt: (r) => h('span', { title: r.name }, shortName(r.name, 80)) },
    { key: 'status', label: 'Status', fmt: (r) => h('span', { class: `diff-${r.status}` }, STATUS[r.status] || r.status) },
    { key: 'count_a', label: 'Count A', num: true, fmt: (r) => fmtNum(r.count_a, 1) },
    { key: 'count_b', label: 'Count B', num: true, fmt: (r) => fmtNum(r.count_b, 1) },
    { key: 'time_us_a', label: 'Time A', num: true, fmt: (r) => fmtUs(r.time_us_a) },
    { key: 'time_us_b', label: 'Time B', num: true, fmt: (r) => fmtUs(r.time_us_b) },
    { key: 'abs', label: 'Δ time', num: true, value: (r) => Math.abs(r.delta_us), fmt: (r) => signed(r.delta_us) },
  ];
  return sortableTable(cols, rows, { sortKey: 'abs', desc: true, caption });
}

export function diffPage({ main, arg, query }) {
  let alive = true;
  const a = h('input', { id: 'diff-a', type: 'number', min: 1, value: arg || '', 'aria-label': 'Trace A id' });
  const b = h('input', { id: 'diff-b', type: 'number', min: 1, value: query.get('with') || '', 'aria-label': 'Trace B id' });
  const doc = h('textarea', { id: 'diff-whatif', 'aria-label': 'What-if document (instead of trace B)',
    placeholder: '{"optimizations":[{"kind":"dataloader","workers":4}]}' }, query.get('whatif') || '');
  const top = h('input', { id: 'diff-top', type: 'number', min: 1, max: 1000, value: query.get('top') || 20, 'aria-label': 'Rows per table' });
  const out = h('div', { id: 'diff-out' }, empty('Pick trace A and a trace B or a what-if, then compare.'));
  const form = h('form', { id: 'diff-form', novalidate: true },
    h('div', { class: 'fields' },
      h('div', { class: 'field' }, h('label', { for: 'diff-a' }, 'Trace A'), a),
      h('div', { class: 'field' }, h('label', { for: 'diff-b' }, 'Trace B'), b),
      h('div', { class: 'field' }, h('label', { for: 'diff-top' }, 'Rows'), top)),
    h('div', { style: 'margin-top:8px' }, h('label', { for: 'diff-whatif' }, 'or A under a what-if'), doc),
    h('div', { class: 'row', style: 'margin:12px 0' }, h('button', { class: 'btn primary', type: 'submit', id: 'run-diff' }, 'Compare')));
  clear(main, h('h1', {}, 'Diff'),
    h('section', { class: 'panel', 'aria-labelledby': 'df-h' }, h('h2', { id: 'df-h' }, 'Compare'), form),
    h('section', { class: 'panel', 'aria-labelledby': 'dr-h' }, h('h2', { id: 'dr-h' }, 'Result'), out));

  async function run() {
    const id = Number(a.value), n = Number(top.value) || 20, text = doc.value.trim();
    if (!id) return clear(out, empty('Trace A needs an id.'));
    let body = null;
    if (text) {
      try { body = JSON.parse(text); } catch (e) { return clear(out, errorBox({ message: e.message, code: 'invalid' }, 'The what-if is not JSON')); }
    } else if (!Number(b.value)) {
      return clear(out, empty('Give trace B or a what-if document.'));
    }
    clear(out, loading('Comparing…'));
    try {
      const d = body
        ? await request('POST', `/v1/traces/${id}/diff` + qs({ top: n }), { body })
        : await request('GET', `/v1/traces/${id}/diff` + qs({ with: Number(b.value), top: n }));
      if (!alive) return;
      const bLabel = body ? 'what-if' : `trace ${d.b.trace_id}`;
      clear(out,
        h('p', { id: 'diff-summary' },
          `Iteration: A (trace ${d.a.trace_id}) ${fmtUs(d.a.iteration_us)}, B (${bLabel}) ${fmtUs(d.b.iteration_us)}, Δ ${signed(d.delta_us)}.`),
        table(d.ops.rows, `Ops: top ${d.ops.rows.length} of ${d.ops.total} by |Δ time| per iteration (CPU + GPU time)`, true),
        table(d.kernel_classes, 'Kernel classes', false),
        table(d.kernels.rows, `Kernels: top ${d.kernels.rows.length} of ${d.kernels.total}`, false));
    } catch (e) {
      if (alive) clear(out, errorBox(e, 'Diff failed'));
    }
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = doc.value.trim() ? qs({ whatif: doc.value.trim(), top: top.value }) : qs({ with: b.value, top: top.value });
    const want = `#/diff/${a.value}${q}`;
    if (location.hash !== want) location.hash = want; // route() calls run() again
    else run();
  });
  if (arg && (query.get('with') || query.get('whatif'))) run();
  return { cleanup() { alive = false; } };
}

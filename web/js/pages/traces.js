// Traces: searchable, sortable list; platform filter; upload (drop or pick); delete.

import { api } from '../api.js';
import { h, clear, loading, empty, errorBox, toast, sortableTable, fmtUs, fmtPct, fmtDate, fmtBytes } from '../ui.js';

// GPU busy time over the trace's span, from the ingest summary: the union of
// every GPU stream's busy intervals (concurrent streams count once, as in the
// trace page's GPU utilization; without ProfilerSteps both cover the whole
// span). The list has no simulation behind it.
export function gpuBusyShare(t) {
  const s = t.summary || {};
  if (!(s.span_us > 0) || !(s.gpu_busy_us >= 0)) return null;
  return Math.min(1, s.gpu_busy_us / s.span_us);
}

export function tracesPage({ main }) {
  let all = [];
  let cursor = null;
  let platform = '';
  let search = '';
  let alive = true;

  const searchBox = h('input', { type: 'search', placeholder: 'Search job, platform, id…', 'aria-label': 'Search traces', id: 'trace-search', style: 'min-width:240px' });
  const platSel = h('select', { 'aria-label': 'Filter by platform', id: 'platform-filter' }, h('option', { value: '' }, 'All platforms'));
  const listBox = h('div', { id: 'trace-list' }, loading('Loading traces…'));
  const more = h('button', { class: 'btn', type: 'button', hidden: true, onclick: () => load(true) }, 'Load more');
  const jobInput = h('input', { type: 'text', placeholder: 'job name (optional)', 'aria-label': 'Job name for the upload', id: 'upload-job' });
  const fileInput = h('input', { type: 'file', accept: '.json,.gz,.json.gz,application/json,application/gzip', id: 'upload-file', 'aria-label': 'Choose a trace file to upload', style: 'display:none' });
  const pick = h('button', { class: 'btn', type: 'button', onclick: () => fileInput.click() }, 'Choose file…');
  const upStatus = h('div', { id: 'upload-status', 'aria-live': 'polite' });
  const drop = h('div', { class: 'dropzone', id: 'dropzone', role: 'region', 'aria-label': 'Upload a trace: drop a file here' },
    h('div', {}, 'Drop a PyTorch profiler (Kineto) trace here — ', h('code', {}, '.json'), ' or ', h('code', {}, '.json.gz'), ' — or'),
    h('div', { class: 'row', style: 'justify-content:center;margin-top:8px' }, pick, jobInput), fileInput, upStatus);

  clear(main,
    h('div', { class: 'row' }, h('h1', { class: 'grow' }, 'Traces'), searchBox, platSel),
    h('section', { class: 'panel', 'aria-labelledby': 'upload-h' }, h('h2', { id: 'upload-h' }, 'Upload'), drop),
    h('section', { class: 'panel', 'aria-labelledby': 'list-h' }, h('header', {}, h('h2', { id: 'list-h' }, 'Stored traces'), h('span', { class: 'sub', id: 'trace-count' })), listBox, more));

  async function upload(file) {
    if (!file) return;
    clear(upStatus, loading(`Uploading ${file.name} (${fmtBytes(file.size)})…`));
    const job = jobInput.value.trim() || file.name.replace(/(\.pt)?\.trace\.json(\.gz)?$|\.json(\.gz)?$/i, '');
    try {
      const t = await api.upload(file, { job });
      clear(upStatus, h('p', { class: 'sub' }, t.duplicate ? `Already stored as trace ${t.id} (same bytes).` : `Stored as trace ${t.id}: ${t.tasks} tasks. `, h('a', { href: `#/trace/${t.id}` }, 'Open')));
      toast(t.duplicate ? `Trace ${t.id} was already stored` : `Uploaded trace ${t.id}`);
      loadPlatforms();
      load(false);
    } catch (e) {
      clear(upStatus, errorBox(e, `Upload of ${file.name} failed`));
    }
  }
  fileInput.addEventListener('change', () => { upload(fileInput.files[0]); fileInput.value = ''; });
  for (const ev of ['dragenter', 'dragover']) drop.addEventListener(ev, (e) => { e.preventDefault(); drop.classList.add('over'); });
  for (const ev of ['dragleave', 'drop']) drop.addEventListener(ev, (e) => { e.preventDefault(); drop.classList.remove('over'); });
  drop.addEventListener('drop', (e) => { const f = e.dataTransfer && e.dataTransfer.files[0]; upload(f); });

  searchBox.addEventListener('input', () => { search = searchBox.value.trim().toLowerCase(); render(); });
  platSel.addEventListener('change', () => { platform = platSel.value; load(false); });

  async function loadPlatforms() {
    try {
      const { platforms } = await api.platforms();
      const cur = platSel.value;
      clear(platSel, h('option', { value: '' }, 'All platforms'),
        platforms.map((p) => h('option', { value: String(p.id) }, `${p.gpu_model || 'unknown GPU'} (#${p.id}, ${p.traces} trace${p.traces === 1 ? '' : 's'})`)));
      platSel.value = cur;
    } catch (e) { /* the list shows the error */ }
  }

  async function load(append) {
    if (!append) { all = []; cursor = null; clear(listBox, loading('Loading traces…')); }
    try {
      const page = await api.traces({ platform, limit: 200, cursor: append ? cursor : undefined });
      if (!alive) return;
      all = all.concat(page.traces || []);
      cursor = page.next_cursor;
      // No "Load more" once every trace is listed (a short page is the last).
      more.hidden = !cursor || (page.traces || []).length < 200;
      render();
    } catch (e) {
      clear(listBox, errorBox(e, 'Cannot list traces'));
    }
  }

  async function del(t) {
    if (!window.confirm(`Delete trace ${t.id} (${t.job || 'no job'}) and everything derived from it?`)) return;
    try {
      await api.deleteTrace(t.id);
      toast(`Deleted trace ${t.id}`);
      all = all.filter((x) => x.id !== t.id);
      render();
      loadPlatforms();
    } catch (e) {
      toast(`Delete failed: ${e.message}`, 'error');
    }
  }

  function render() {
    const rows = all.filter((t) => {
      if (!search) return true;
      const p = t.platform || {};
      return [t.id, t.job, p.gpu_model, p.cpu_model, (t.tags || []).join(' '), t.source_format].join(' ').toLowerCase().includes(search);
    });
    document.getElementById('trace-count').textContent = all.length ? `${rows.length} of ${all.length}${cursor ? '+' : ''}` : '';
    if (!all.length) {
      clear(listBox, empty('No traces yet. Upload one above, or with curl: ',
        h('code', {}, `curl -H 'Content-Type: application/gzip' --data-binary @trace.json.gz '${location.origin}/v1/traces?job=myjob'`)));
      return;
    }
    if (!rows.length) { clear(listBox, empty(`No trace matches “${search}”.`)); return; }
    const cols = [
      { key: 'id', label: 'ID', num: true, fmt: (t) => h('a', { href: `#/trace/${t.id}` }, String(t.id)) },
      { key: 'job', label: 'Job', fmt: (t) => h('span', {}, h('a', { href: `#/trace/${t.id}` }, t.job || '(no job)'), ' ', (t.tags || []).map((x) => h('span', { class: 'tag' }, x))) },
      { key: 'platform', label: 'Platform', value: (t) => (t.platform && t.platform.gpu_model) || '', fmt: (t) => (t.platform && t.platform.gpu_model) || '–' },
      { key: 'rank', label: 'Rank', num: true, fmt: (t) => (t.rank === null || t.rank === undefined ? '–' : t.world_size ? `${t.rank} / ${t.world_size}` : String(t.rank)) },
      { key: 'uploaded_at', label: 'Uploaded', value: (t) => t.uploaded_at, fmt: (t) => h('time', { datetime: t.uploaded_at }, fmtDate(t.uploaded_at)) },
      { key: 'measured_us', label: 'Measured iteration', num: true, fmt: (t) => h('span', { 'data-us': String(t.measured_us), title: t.iterations ? `median of ${t.iterations} steps` : 'no steps found at ingest: the whole span' }, fmtUs(t.measured_us), t.iterations ? '' : ' *') },
      { key: 'gpu', label: 'GPU busy', num: true, value: gpuBusyShare, fmt: (t) => h('span', { 'data-gpu-busy': String(gpuBusyShare(t) ?? '') }, fmtPct(gpuBusyShare(t))) },
      { key: 'tasks', label: 'Tasks', num: true, fmt: (t) => (t.tasks ?? 0).toLocaleString('en-US') },
      { key: 'actions', label: 'Actions', sortable: false, fmt: (t) => h('span', { class: 'row', style: 'gap:6px;flex-wrap:nowrap' },
        h('a', { class: 'btn small', href: `#/whatif/${t.id}`, 'aria-label': `What-if on trace ${t.id}` }, 'What-if'),
        h('button', { class: 'btn small danger', type: 'button', 'aria-label': `Delete trace ${t.id}`, onclick: () => del(t) }, 'Delete')) },
    ];
    clear(listBox, h('div', { class: 'table-wrap' }, sortableTable(cols, rows, { sortKey: 'id', desc: true, rowAttrs: (t) => ({ 'data-trace-id': String(t.id) }) })),
      rows.some((t) => !t.iterations) ? h('p', { class: 'sub' }, '* no ProfilerStep found at ingest: the figure is the whole traced span. GPU busy = GPU busy time / traced span.') : null);
  }

  loadPlatforms();
  load(false);
  return { cleanup() { alive = false; } };
}

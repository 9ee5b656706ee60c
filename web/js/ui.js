// Small DOM helpers shared by the pages: element builder, number formats,
// the loading / empty / error states, toasts, a sortable table, the tooltip.

export function h(tag, attrs = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'html') el.innerHTML = v;
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value') el.value = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, v);
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

export function clear(el, ...kids) {
  el.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false));
  return el;
}

// Times arrive in microseconds everywhere in the API.
export function fmtUs(us) {
  if (us === null || us === undefined || !Number.isFinite(us)) return '–';
  const a = Math.abs(us);
  if (a >= 1e6) return (us / 1e6).toFixed(a >= 1e7 ? 1 : 2) + ' s';
  if (a >= 1e3) return (us / 1e3).toFixed(a >= 1e5 ? 1 : 2) + ' ms';
  if (a >= 1) return us.toFixed(a >= 100 ? 0 : 1) + ' µs';
  if (a === 0) return '0 µs';
  return (us * 1e3).toFixed(0) + ' ns';
}
export function fmtMs(us) {
  if (us === null || us === undefined || !Number.isFinite(us)) return '–';
  return (us / 1e3).toFixed(2) + ' ms';
}
export function fmtPct(x, digits = 1) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '–';
  return (x * 100).toFixed(digits) + ' %';
}
export function fmtSignedPct(x, digits = 2) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '–';
  return (x >= 0 ? '+' : '') + (x * 100).toFixed(digits) + ' %';
}
export function fmtX(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '–';
  return x.toFixed(3) + '×';
}
export function fmtNum(x, digits = 2) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '–';
  return x.toLocaleString('en-US', { maximumFractionDigits: digits });
}
export function fmtJ(j) {
  if (!Number.isFinite(j) || j === 0) return '–';
  if (Math.abs(j) >= 3.6e6) return (j / 3.6e6).toFixed(2) + ' kWh';
  if (Math.abs(j) >= 1e3) return (j / 1e3).toFixed(2) + ' kJ';
  return j.toFixed(2) + ' J';
}
export function fmtBytes(b) {
  if (!Number.isFinite(b)) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return b.toFixed(i ? 1 : 0) + ' ' + u[i];
}
export function fmtDate(s) {
  if (!s) return '–';
  const d = new Date(s);
  if (Number.isNaN(d.getTime())) return s;
  return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit' });
}

export function loading(text = 'Loading…') {
  return h('div', { class: 'state', role: 'status', 'aria-live': 'polite' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), text);
}
export function empty(text, ...extra) {
  return h('div', { class: 'state empty' }, text, ...extra);
}
export function errorBox(err, what = 'Request failed') {
  const code = err && err.code ? err.code : 'error';
  return h('div', { class: 'state error', role: 'alert' },
    h('strong', {}, what + ': '), err && err.message ? err.message : String(err),
    ' ', h('code', {}, code), err && err.field ? h('span', {}, ' (field ', h('code', {}, err.field), ')') : null);
}

export function toast(text, kind = 'info', ms = 5000) {
  const box = document.getElementById('toasts');
  const t = h('div', { class: 'toast ' + kind, role: kind === 'error' ? 'alert' : 'status' }, text);
  box.append(t);
  setTimeout(() => t.remove(), ms);
}

// A table whose columns sort on click (and Enter/Space, the headers are buttons).
// cols: [{key, label, num, fmt(row) -> text|Node, value(row) -> sort key}]
export function sortableTable(cols, rows, { sortKey, desc = true, caption, rowAttrs } = {}) {
  let key = sortKey || cols[0].key;
  let down = desc;
  const table = h('table', {});
  if (caption) table.append(h('caption', { class: 'sub', style: 'text-align:left;caption-side:top;padding-bottom:6px' }, caption));
  const thead = h('thead');
  const tbody = h('tbody');
  table.append(thead, tbody);
  const val = (c, r) => (c.value ? c.value(r) : r[c.key]);
  function render() {
    const hr = h('tr');
    for (const c of cols) {
      const active = c.key === key;
      const th = h('th', { class: c.num ? 'num' : '', scope: 'col', 'aria-sort': active ? (down ? 'descending' : 'ascending') : 'none' });
      if (c.sortable === false) th.append(c.label);
      else th.append(h('button', { class: 'sort', type: 'button', onclick: () => { if (key === c.key) down = !down; else { key = c.key; down = !!c.num; } render(); } },
        c.label, active ? (down ? ' ▾' : ' ▴') : ''));
      hr.append(th);
    }
    clear(thead, hr);
    const c = cols.find((x) => x.key === key) || cols[0];
    const sorted = rows.slice().sort((a, b) => {
      const va = val(c, a), vb = val(c, b);
      let r;
      if (va === vb) r = 0;
      else if (va === null || va === undefined) r = 1;
      else if (vb === null || vb === undefined) r = -1;
      else r = typeof va === 'number' && typeof vb === 'number' ? va - vb : String(va).localeCompare(String(vb));
      return down ? -r : r;
    });
    clear(tbody, sorted.map((r) => h('tr', rowAttrs ? rowAttrs(r) : {}, cols.map((col) => {
      const v = col.fmt ? col.fmt(r) : r[col.key];
      return h('td', { class: col.num ? 'num' : '' }, v === undefined || v === null ? '–' : v);
    }))));
  }
  render();
  return table;
}

const tip = () => document.getElementById('tooltip');
export function showTip(x, y, content) {
  const t = tip();
  clear(t, content);
  t.hidden = false;
  const r = t.getBoundingClientRect();
  let left = x + 14, top = y + 14;
  if (left + r.width > window.innerWidth - 8) left = x - r.width - 14;
  if (top + r.height > window.innerHeight - 8) top = y - r.height - 14;
  t.style.left = Math.max(4, left) + 'px';
  t.style.top = Math.max(4, top) + 'px';
}
export function hideTip() {
  const t = tip();
  if (t) t.hidden = true;
}

export function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    toast('Copied to the clipboard');
  } catch (e) {
    // Clipboard needs a secure context; select the text so Ctrl+C works.
    toast('Select the text and press Ctrl+C to copy', 'info');
  }
}

// Download a Blob under a file name (the "Open in Perfetto" export).
export function download(blob, name) {
  const a = h('a', { href: URL.createObjectURL(blob), download: name });
  document.body.append(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

export function shortName(s, n = 90) {
  if (!s) return '';
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}

// What an answer rests on: its warnings ({code, message}), the replay error
// in red. An answer with nothing to say shows a quiet line.
export function warningsBox(warnings, id) {
  const list = warnings || [];
  if (!list.length) return h('p', { class: 'sub', id, 'data-warnings': '0' }, 'No warnings: nothing assumed beyond the models.');
  return h('ul', { class: 'warnings', id, 'data-warnings': String(list.length), 'aria-label': 'Warnings' },
    list.map((w) => h('li', { class: w.code === 'replay_error' ? 'bad' : 'warn', 'data-code': w.code }, h('strong', {}, w.code), ' ', w.message)));
}

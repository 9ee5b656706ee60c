// The dashboard shell: hash routing, theme, server health, sign-in.
//   #/traces            list, upload, delete
//   #/trace/ID          one trace: cards, timeline, breakdowns, kernels, overheads
//   #/whatif[/ID]       what-if form, comparison, sweeps
//   #/fleet             fleet what-ifs and jobs
//   #/diff/ID?with=ID2  a trace vs another trace or (?whatif=DOC) its what-if
//   #/training-jobs     training jobs (ranks of one run); #/training-job/ID one job
//   #/advise/ID         the ranked what-if plans of a trace

import { api } from './api.js';
import { setupAuth } from './auth.js';
import { clear, errorBox } from './ui.js';
import { redrawAll } from './charts.js';
import { tracesPage } from './pages/traces.js';
import { tracePage } from './pages/trace.js';
import { whatifPage } from './pages/whatif.js';
import { fleetPage } from './pages/fleet.js';
import { diffPage } from './pages/diff.js';
import { trainingJobsPage, trainingJobPage } from './pages/training.js';
import { advisePage } from './pages/advise.js';

const main = document.getElementById('main');
let current = null; // {cleanup()}

function route() {
  const hash = location.hash.replace(/^#\/?/, '') || 'traces';
  const [page, arg, ...rest] = hash.split('/');
  const query = new URLSearchParams(hash.includes('?') ? hash.slice(hash.indexOf('?') + 1) : '');
  const cleanArg = arg ? arg.split('?')[0] : undefined;
  if (current && current.cleanup) current.cleanup();
  current = null;
  clear(main);
  for (const a of document.querySelectorAll('[data-nav]')) {
    const on = a.dataset.nav === (page === 'trace' ? 'traces' : page === 'training-job' ? 'training-jobs' : page.split('?')[0]);
    on ? a.setAttribute('aria-current', 'page') : a.removeAttribute('aria-current');
  }
  const ctx = { main, arg: cleanArg, rest, query };
  const pages = { traces: tracesPage, trace: tracePage, whatif: whatifPage, fleet: fleetPage, diff: diffPage };
  pages['training-jobs'] = trainingJobsPage;
  pages['training-job'] = trainingJobPage;
  pages.advise = advisePage;
  const fn = pages[page.split('?')[0]];
  try {
    current = fn ? fn(ctx) : (main.append(errorBox({ message: `no page '${page}'`, code: 'not_found' }, 'Not found')), null);
  } catch (e) {
    main.append(errorBox(e, 'This page failed'));
    console.error(e);
  }
  document.title = `Reverie · ${page.split('?')[0]}${cleanArg ? ' ' + cleanArg : ''}`;
}

function setupTheme() {
  const btn = document.getElementById('theme');
  const root = document.documentElement;
  const isDark = () => root.dataset.theme ? root.dataset.theme === 'dark' : window.matchMedia('(prefers-color-scheme: dark)').matches;
  const sync = () => { btn.setAttribute('aria-pressed', String(isDark())); btn.title = isDark() ? 'Switch to light' : 'Switch to dark'; };
  btn.addEventListener('click', () => {
    root.dataset.theme = isDark() ? 'light' : 'dark';
    try { localStorage.setItem('rv-theme', root.dataset.theme); } catch (e) { /* private mode */ }
    sync();
    redrawAll();
    window.dispatchEvent(new Event('rv-theme'));
  });
  sync();
}

async function health() {
  const el = document.getElementById('health');
  try {
    const j = await api.health();
    el.textContent = `reveried ${j.version || ''}`;
    el.classList.remove('bad');
  } catch (e) {
    el.textContent = 'server unreachable';
    el.classList.add('bad');
  }
}

setupTheme();
setupAuth(route);
window.addEventListener('hashchange', route);
route();
health();
setInterval(health, 30000);

// End-to-end test of the dashboard: a real reveried with its embedded
// PostgreSQL, real traces, Debian's Chromium driven by playwright-core.
// Every number checked on screen is compared with the API's answer.
//
// Env: RV_BIN_DIR (reveried), RV_SOURCE_DIR (repo), RV_SHARED_TRACES (public
// traces), RV_WEB_OUT (screenshots + frame times; default a temp folder),
// RV_KEEP_TEST_HOME=1 keeps the server's state folder. When the server cannot
// get a database, every test is skipped and RV_WEB_OUT/skipped says why (the
// ctest wrapper turns that into exit 77).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { synthTrace } from './synth.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
// The dashboard's own number formats (web/ has no package.json, so load the
// module from its text), so the test checks the text the page shows.
const { fmtUs, fmtPct, fmtX, fmtBytes } = await import('data:text/javascript,' + encodeURIComponent(fs.readFileSync(path.resolve(here, '../../web/js/ui.js'), 'utf8')));
const SRC = process.env.RV_SOURCE_DIR || path.resolve(here, '../..');
const BIN = process.env.RV_BIN_DIR || path.join(SRC, 'build/bin');
const SHARED = process.env.RV_SHARED_TRACES || '';
const OUT = process.env.RV_WEB_OUT || fs.mkdtempSync(path.join(os.tmpdir(), 'reverie-web-out-'));
const SHOTS = path.join(OUT, 'screenshots');
const BIG = 'data/samples/resnet50-v100-workers0.pt.trace.json.gz';
const RESNET = [SHARED && path.join(SHARED, 'kineto/resnet50-v100-workers0.pt.trace.json.gz'), path.join(SRC, BIG)].find((p) => p && fs.existsSync(p));
const SMALL = SHARED && path.join(SHARED, 'hta/critical-path-simple-add.json.gz');
const T = 120_000; // generous: a loaded 2-core machine

let home, port, base, server, browser, ctx, page, skip = '';
const requests = [];
const pageErrors = [];
let resnetId = 0, smallId = 0, bigId = 0;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
    s.on('error', reject);
  });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function api(method, p, body, headers = {}) {
  const res = await fetch(base + p, { method, body, headers: body && typeof body === 'string' ? { 'Content-Type': 'application/json', ...headers } : headers });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}
async function shot(name) {
  await page.waitForTimeout(300); // let the last animation frame land
  await page.screenshot({ path: path.join(SHOTS, name + '.png'), fullPage: true });
}
async function attr(sel, name) {
  return page.getAttribute(sel, name);
}
async function attr2(p, sel, name) {
  return p.getAttribute(sel, name);
}
function near(a, b, what) {
  assert.ok(Math.abs(Number(a) - Number(b)) <= 1e-9 * Math.max(1, Math.abs(b)), `${what}: screen ${a} != API ${b}`);
}

before(async () => {
  fs.mkdirSync(SHOTS, { recursive: true });
  fs.rmSync(path.join(OUT, 'skipped'), { force: true });
  const bin = path.join(BIN, 'reveried');
  // Every early return that skips says why in OUT/skipped, or run.sh would
  // report the skipped tests as passed.
  const skipAll = (why) => { skip = why; fs.writeFileSync(path.join(OUT, 'skipped'), why + '\n'); };
  if (!fs.existsSync(bin)) { skipAll(`no reveried at ${bin}`); return; }
  if (!RESNET) { skipAll('no ResNet-50 trace (RV_SHARED_TRACES or data/samples)'); return; }
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'reverie-web-'));
  fs.chmodSync(home, 0o755); // the embedded cluster runs as an unprivileged user
  port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const log = fs.openSync(path.join(home, 'reveried.log'), 'a');
  server = spawn(bin, ['--port', String(port), '--home', home, '--web', path.join(SRC, 'web')], { stdio: ['ignore', log, log] });
  let ready = false;
  for (let i = 0; i < 360 && server.exitCode === null; i++) {
    try { if ((await fetch(base + '/readyz')).status === 200) { ready = true; break; } } catch (e) { /* not yet */ }
    await sleep(500);
  }
  if (!ready) {
    skipAll(`reveried did not get ready (no PostgreSQL?); log: ${path.join(home, 'reveried.log')}`);
    return;
  }
  const udd = fs.mkdtempSync(path.join(os.tmpdir(), 'reverie-chromium-'));
  ctx = await chromium.launchPersistentContext(udd, {
    executablePath: process.env.RV_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-quic'],
    viewport: { width: 1440, height: 900 },
    colorScheme: 'light',
    acceptDownloads: true,
  });
  browser = udd;
  page = ctx.pages()[0] || (await ctx.newPage());
  page.setDefaultTimeout(T);
  page.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('dialog', (d) => d.accept());
});

after(async () => {
  if (ctx) await ctx.close().catch(() => {});
  if (browser) fs.rmSync(browser, { recursive: true, force: true });
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    for (let i = 0; i < 240 && server.exitCode === null; i++) await sleep(250);
    if (server.exitCode === null) server.kill('SIGKILL');
  }
  if (home && !process.env.RV_KEEP_TEST_HOME) fs.rmSync(home, { recursive: true, force: true });
  console.log(`screenshots in ${SHOTS}`);
});

test('traces page: empty state, upload by file picker and drop, search, sort', { timeout: T * 2 }, async (t) => {
  if (skip) return t.skip(skip);
  await page.goto(base + '/#/traces');
  await page.waitForSelector('#trace-list .state.empty');
  assert.match(await page.textContent('#trace-list'), /No traces yet/);
  await shot('01-traces-empty');

  // Keyboard: the first Tab reaches the skip link, the next ones the navigation.
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.className), 'skip');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')), 'Reverie home');

  await page.fill('#upload-job', 'resnet50-web');
  await page.setInputFiles('#upload-file', RESNET);
  await page.waitForSelector('#upload-status a[href^="#/trace/"]');
  resnetId = Number((await attr('#upload-status a[href^="#/trace/"]', 'href')).split('/').pop());
  await page.waitForSelector(`tr[data-trace-id="${resnetId}"]`);
  const tr = (await api('GET', `/v1/traces/${resnetId}`)).json;
  assert.equal(tr.job, 'resnet50-web');
  const row = `tr[data-trace-id="${resnetId}"]`;
  near(await attr(`${row} [data-us]`, 'data-us'), tr.measured_us, 'measured iteration');
  assert.ok((await page.textContent(row)).includes(fmtUs(tr.measured_us)));
  assert.ok((await page.textContent(row)).includes(fmtPct(Math.min(1, tr.summary.gpu_busy_us / tr.summary.span_us))));
  assert.ok((await page.textContent(row)).includes(tr.platform.gpu_model));

  // Drag and drop a second, small trace (bytes handed to the page as a File).
  if (SMALL && fs.existsSync(SMALL)) {
    const b64 = fs.readFileSync(SMALL).toString('base64');
    const dt = await page.evaluateHandle((b) => {
      const bytes = Uint8Array.from(atob(b), (c) => c.charCodeAt(0));
      const d = new DataTransfer();
      d.items.add(new File([bytes], 'simple-add.json.gz', { type: 'application/gzip' }));
      return d;
    }, b64);
    await page.fill('#upload-job', '');
    await page.dispatchEvent('#dropzone', 'dragenter', { dataTransfer: dt });
    await page.dispatchEvent('#dropzone', 'drop', { dataTransfer: dt });
    await page.waitForFunction(() => /Stored as trace \d+/.test(document.querySelector('#upload-status').textContent));
    smallId = Number((await attr('#upload-status a[href^="#/trace/"]', 'href')).split('/').pop());
    await page.waitForSelector(`tr[data-trace-id="${smallId}"]`);
    assert.equal((await api('GET', `/v1/traces/${smallId}`)).json.job, 'simple-add');
  }
  // A file that is not a trace: the API's error message is shown.
  await page.setInputFiles('#upload-file', { name: 'broken.json', mimeType: 'application/json', buffer: Buffer.from('{"traceEvents": [ {') });
  await page.waitForSelector('#upload-status .state.error');
  assert.match(await page.textContent('#upload-status'), /parse_error|invalid/);
  await shot('02-traces-list');

  // Search narrows the list; sorting by job reorders it.
  const listed = (await api('GET', '/v1/traces')).json.traces;
  assert.equal(await page.locator('#trace-list tbody tr').count(), listed.length);
  await page.fill('#trace-search', 'resnet50-web');
  await page.waitForFunction(() => document.querySelectorAll('#trace-list tbody tr').length === 1);
  await page.fill('#trace-search', '');
  await page.click('th button.sort:has-text("Job")');
  await page.waitForSelector('th[aria-sort="ascending"] >> text=Job');
});

test('trace page: cards, timeline, breakdowns, kernels, overheads, Perfetto export', { timeout: T * 2 }, async (t) => {
  if (skip) return t.skip(skip);
  await page.goto(base + `/#/trace/${resnetId}`);
  await page.waitForSelector('[data-metric="measured"]');
  await page.waitForSelector('#timeline-box canvas');
  const w = (await api('POST', `/v1/traces/${resnetId}/whatif`, '{}')).json;
  near(await attr('[data-metric="measured"]', 'data-us'), w.measured_us, 'measured');
  near(await attr('[data-metric="simulated"]', 'data-us'), w.baseline_us, 'simulated');
  near(await attr('[data-metric="replay_error"]', 'data-value'), w.replay_error, 'replay error');
  assert.ok(w.replay_error >= 0, `replay error is |baseline - measured| / measured (${w.replay_error})`);
  // Ratios are rounded to 4 decimals (docs/whatif.md "Numbers").
  const re = Math.abs(w.baseline_us - w.measured_us) / w.measured_us;
  assert.ok(Math.abs(w.replay_error - re) <= 0.5e-4 + 1e-9, `replay error definition: ${w.replay_error} vs ${re}`);
  // One meaning of "measured": the answer's steps median.
  assert.equal(w.measured_us, w.steps.median_us);
  // What bounds the step: the critical path's largest share, named in words.
  await page.waitForSelector('#cp-bound');
  assert.equal(await attr('#cp-bound', 'data-bound'), w.critical_path.bound_by);
  assert.ok((await page.textContent('#cp-bound')).includes(fmtPct(w.critical_path.shares[w.critical_path.bound_by], 0)));
  near(await attr('[data-metric="gpu_utilization"]', 'data-value'), w.breakdown.baseline.gpu_utilization, 'GPU utilization');
  near(await attr('[data-metric="exposed_comm"]', 'data-us'), w.breakdown.baseline.gpu.exposed_communication_us, 'exposed comm');
  const cards = await page.textContent('#summary-cards');
  for (const s of [fmtUs(w.measured_us), fmtUs(w.baseline_us), fmtPct(w.replay_error, 2), fmtPct(w.breakdown.baseline.gpu_utilization)]) assert.ok(cards.includes(s), `cards show ${s}`);
  // The answer's warnings are on the page, one item each, with their codes.
  await page.waitForSelector('#trace-warnings');
  assert.equal(Number(await attr('#trace-warnings', 'data-warnings')), w.warnings.length, 'trace page shows every warning');
  const codes = await page.$$eval('#trace-warnings li', (els) => els.map((e) => e.getAttribute('data-code')));
  assert.deepEqual(codes, w.warnings.map((x) => x.code), 'warning codes on the trace page');
  // Memory over the step: the answer's series drawn, its peak stated.
  await page.waitForSelector('#memory-view');
  assert.ok(w.memory.series && w.memory.series.t_us.length > 0, 'the ResNet-50 trace has memory events in its step');
  assert.equal(Number(await attr('#memory-view', 'data-points')), w.memory.series.t_us.length, 'every memory point is drawn');
  assert.equal(Number(await attr('#memory-view', 'data-peak-bytes')), w.memory.peak_bytes, 'peak as the API says');
  assert.ok(await page.$('#memory-view canvas'), 'memory chart drawn');
  assert.ok((await page.textContent('#memory-view')).includes(fmtBytes(w.memory.peak_bytes)), 'peak shown in the dashboard format');
  // The ResNet-50 trace records its shapes: the breakdown comes from them.
  assert.equal(await attr('#memory-breakdown', 'data-source'), w.memory.breakdown.source, 'breakdown source as the API says');
  assert.equal(w.memory.breakdown.source, 'shapes', 'the ResNet-50 breakdown is read from its op shapes');
  assert.ok((await page.textContent('#memory-breakdown')).includes(fmtBytes(w.memory.breakdown.weights)), 'weights shown');
  // Parallelism: a row per dimension the API names (none on one GPU).
  await page.waitForSelector('#parallelism-box .state, #parallelism-table');
  assert.equal(await page.$$eval('#parallelism-table tbody tr', (els) => els.length), (w.parallelism || []).length, 'a row per parallelism dimension');
  // Top kernels: the first row is the API's first kernel.
  await page.waitForSelector('#top-kernels tbody tr');
  const first = await page.textContent('#top-kernels tbody tr:first-child');
  assert.ok(first.includes(fmtUs(w.top_kernels[0].total_us)));
  assert.equal(await page.getAttribute('#top-kernels tbody tr:first-child .name', 'title'), w.top_kernels[0].name);
  // Overheads T1..T5 from the platform endpoint.
  await page.waitForSelector('#overheads-table');
  const tr = (await api('GET', `/v1/traces/${resnetId}`)).json;
  const oh = (await api('GET', `/v1/platforms/${tr.platform.id}/overheads`)).json.overheads;
  for (const type of ['T1', 'T2', 'T3', 'T4', 'T5']) {
    const o = oh.find((x) => x.type === type && x.op_name === '*');
    if (o) near(await attr(`#overheads-table tr[data-type="${type}"] [data-us]`, 'data-us'), o.mean_us, `${type} mean`);
  }
  // The timeline: every task of the measured timeline, iterations marked, critical path known.
  const tlMeas = (await api('GET', `/v1/traces/${resnetId}/timeline?source=measured&max_tasks=200000`)).json;
  const tlBase = (await api('GET', `/v1/traces/${resnetId}/timeline?source=baseline&max_tasks=200000`)).json;
  await page.waitForFunction(() => window.__rvTimeline && window.__rvTimeline().tracks[0].iterations.length > 0, null, { timeout: T });
  const info = await page.evaluate(() => {
    const tl = window.__rvTimeline();
    const tr0 = tl.tracks[0];
    let crit = 0, layered = 0;
    for (let i = 0; i < tr0.n; i++) { crit += tr0.crit[i]; layered += tr0.layer[i] ? 1 : 0; }
    return { n: tr0.n, rows: tr0.rows.length, iters: tr0.iterations, crit, layered, ids: Array.from(tr0.taskId.subarray(0, 3)), view: tl.view };
  });
  assert.equal(tlMeas.truncated, false, 'the whole ResNet-50 trace fits one answer');
  assert.equal(info.n, tlMeas.tasks.length, 'every measured task is on the timeline');
  assert.equal(info.rows, new Set(tlMeas.tasks.map((x) => x.thread)).size);
  assert.deepEqual(info.ids, tlMeas.tasks.slice(0, 3).map((x) => x.id), 'task ids from the API');
  // Step marks, critical-path flags and layers are the API's own.
  assert.ok(tlMeas.iterations.length >= 5, `the API marks the steps (${tlMeas.iterations.length})`);
  assert.deepEqual(info.iters, tlMeas.iterations, 'step marks equal the API\'s');
  assert.equal(info.crit, tlMeas.tasks.filter((x) => x.critical).length, 'critical flags equal the API\'s');
  assert.ok(info.crit > 0 && info.crit < info.n, `some tasks are critical (${info.crit} of ${info.n})`);
  assert.equal(info.layered, tlMeas.tasks.filter((x) => x.layer).length, 'layers equal the API\'s');
  // The baseline's steps are the measured ones mapped onto the simulation: same steps, close times.
  assert.deepEqual(tlBase.iterations.map((x) => x.step), tlMeas.iterations.map((x) => x.step));
  for (let k = 0; k < tlMeas.iterations.length; k++) {
    const m = tlMeas.iterations[k], b = tlBase.iterations[k];
    assert.ok(Math.abs((b.end_us - b.start_us) - (m.end_us - m.start_us)) <= 0.02 * (m.end_us - m.start_us), `step ${m.step} replays within 2 %`);
  }
  // Keyboard zoom and pan.
  await page.focus('#timeline-box canvas');
  await page.keyboard.press('+');
  await page.keyboard.press('+');
  await page.keyboard.press('ArrowRight');
  await page.waitForTimeout(200);
  const v2 = await page.evaluate(() => window.__rvTimeline().view);
  assert.ok(v2[1] - v2[0] < (info.view[1] - info.view[0]) * 0.6, 'zoomed in');
  // Mouse wheel zoom and hover tooltip with name, duration and layer.
  const box = await page.locator('#timeline-box canvas').boundingBox();
  await page.mouse.move(box.x + box.width * 0.5, box.y + 30 + 30 + 40);
  await page.mouse.wheel(0, -300);
  await page.waitForTimeout(200);
  const v3 = await page.evaluate(() => window.__rvTimeline().view);
  assert.ok(v3[1] - v3[0] < v2[1] - v2[0], 'wheel zoomed in');
  await page.keyboard.press('0');
  // Hover over the GPU row (the third row) until a task is under the pointer.
  let tip = '';
  for (let x = 0.3; x < 0.9 && !tip; x += 0.01) {
    await page.mouse.move(box.x + 168 + (box.width - 168) * x, box.y + 24 + 30 + 2 * 20 + 9);
    tip = await page.evaluate(() => { const t = document.getElementById('tooltip'); return t.hidden ? '' : t.textContent; });
  }
  assert.match(tip, /duration/);
  assert.match(tip, /layer/);
  await shot('03-trace');
  // Both views stacked.
  await page.selectOption('#tl-mode', 'both');
  await page.waitForFunction(() => window.__rvTimeline().tracks.length === 2);
  const simIters = await page.evaluate(() => window.__rvTimeline().tracks[1].iterations);
  assert.deepEqual(simIters, tlBase.iterations, 'simulated step marks equal the API\'s');
  // Dark theme.
  await page.click('#theme');
  await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark');
  await shot('04-trace-dark');
  await page.click('#theme');
  // "Open in Perfetto": a download of the Chrome trace.
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#perfetto')]);
  const file = path.join(OUT, 'perfetto.json');
  await dl.saveAs(file);
  const chrome = JSON.parse(fs.readFileSync(file, 'utf8'));
  assert.equal(chrome.traceEvents.filter((e) => e.ph === 'X').length, tlMeas.tasks.length);
});

test('what-if page: form from the kinds, run, numbers equal the API, error, sweep', { timeout: T * 3 }, async (t) => {
  if (skip) return t.skip(skip);
  await page.goto(base + `/#/whatif/${resnetId}`);
  await page.waitForSelector('details[data-kind="dataloader"] > summary');
  // Every kind the form was built from has a box.
  for (const k of ['amp', 'fused_optimizer', 'dataloader', 'scale', 'remove', 'insert', 'cpu_speed', 'distributed']) await page.waitForSelector(`details[data-kind="${k}"]`);
  await page.click('details[data-kind="dataloader"] > summary');
  await page.fill('#k-dataloader-workers', '4');
  await page.waitForFunction(() => document.getElementById('curl-text').textContent.includes('"workers":4'));
  const doc = { optimizations: [{ kind: 'dataloader', workers: 4 }] };
  assert.ok((await page.textContent('#curl-text')).includes(JSON.stringify(doc)), 'curl shows the document');
  await page.click('#run-whatif');
  await page.waitForSelector('#whatif-cards');
  const w = (await api('POST', `/v1/traces/${resnetId}/whatif`, JSON.stringify(doc))).json;
  near(await attr('[data-metric="baseline"]', 'data-us'), w.baseline_us, 'baseline');
  near(await attr('[data-metric="predicted"]', 'data-us'), w.predicted_us, 'predicted');
  near(await attr('[data-metric="speedup"]', 'data-value'), w.speedup, 'speedup');
  await page.waitForSelector('#whatif-warnings');
  assert.equal(Number(await attr('#whatif-warnings', 'data-warnings')), w.warnings.length, 'what-if page shows every warning');
  const cards = await page.textContent('#whatif-cards');
  for (const s of [fmtUs(w.baseline_us), fmtUs(w.predicted_us), fmtX(w.speedup)]) assert.ok(cards.includes(s), `cards show ${s}`);
  assert.ok(w.speedup > 1.05, 'the data-loader what-if speeds the ResNet-50 trace up');
  await page.waitForSelector('#whatif-timeline canvas');
  await page.waitForFunction(() => document.querySelector('#whatif-timeline canvas').__timeline.tracks.length === 2);
  const wt = await page.evaluate(() => document.querySelector('#whatif-timeline canvas').__timeline.tracks.map((x) => ({ span: x.t1 - x.t0, n: x.n, iters: x.iterations })));
  assert.ok(wt[1].span < wt[0].span, 'the predicted timeline is shorter');
  const tlPred = (await api('GET', `/v1/traces/${resnetId}/timeline?source=predicted&max_tasks=200000&whatif=${encodeURIComponent(JSON.stringify(doc))}`)).json;
  assert.equal(wt[1].n, tlPred.tasks.length, 'every predicted task is drawn');
  assert.deepEqual(wt[1].iters, tlPred.iterations, 'predicted step marks equal the API\'s');
  const lastP = tlPred.iterations[tlPred.iterations.length - 1], lastB = wt[0].iters[wt[0].iters.length - 1];
  assert.ok(lastP.end_us < lastB.end_us, 'the last step ends earlier in the prediction');
  await page.waitForSelector('#delta-table');
  await shot('05-whatif');

  // A document the server refuses: its error and field are shown.
  await page.click('details[data-kind="cpu_speed"] > summary');
  await page.fill('#k-cpu_speed-factor', '-1');
  await page.click('#run-whatif');
  await page.waitForSelector('#whatif-error .state.error');
  const err = await page.textContent('#whatif-error');
  const apiErr = (await api('POST', `/v1/traces/${resnetId}/whatif`, JSON.stringify({ optimizations: [{ kind: 'cpu_speed', factor: -1 }, { kind: 'dataloader', workers: 4 }] }))).json.error;
  assert.ok(err.includes(apiErr.message), `shows the API's message: ${apiErr.message}`);
  assert.equal(await page.getAttribute('#k-cpu_speed-factor', 'aria-invalid'), 'true');
  await shot('06-whatif-error');
  await page.fill('#k-cpu_speed-factor', '');
  await page.uncheck('#k-cpu_speed-on');

  // A custom selection: scale every kernel by 0.5 (selector sub-form).
  await page.reload(); // a fresh form
  await page.waitForSelector('details[data-kind="scale"] > summary');
  await page.click('details[data-kind="scale"] > summary');
  await page.selectOption('#k-scale-select-kind', 'kernel');
  await page.fill('#k-scale-factor', '0.5');
  await page.click('#run-whatif');
  await page.waitForSelector('#whatif-cards');
  const sdoc = { optimizations: [{ kind: 'scale', select: { kind: 'kernel' }, factor: 0.5 }] };
  assert.deepEqual(JSON.parse(/-d '(.*)'\s*$/s.exec(await page.textContent('#curl-text'))[1]), sdoc, 'curl shows the selector');
  const ws = (await api('POST', `/v1/traces/${resnetId}/whatif`, JSON.stringify(sdoc))).json;
  near(await attr('[data-metric="predicted"]', 'data-us'), ws.predicted_us, 'scaled kernels: predicted');
  await page.uncheck('#k-scale-on');

  // A power-limit sweep, one what-if per point, drawn as a curve with its knee.
  await page.selectOption('#sweep-kind', 'power');
  await page.click('#run-sweep');
  await page.waitForSelector('#sweep-table', { timeout: T });
  const rows = await page.locator('#sweep-table tbody tr').count();
  assert.ok(rows >= 5, `sweep points ${rows}`);
  const firstW = Number(await page.textContent('#sweep-table tbody tr:first-child td:first-child'));
  const p1 = (await api('POST', `/v1/traces/${resnetId}/whatif`, JSON.stringify({ ...doc, power_limit_w: firstW }))).json;
  assert.ok((await page.textContent('#sweep-table tbody tr:first-child')).includes(fmtUs(p1.predicted_us)));
  assert.ok((await page.textContent('#sweep-table')).includes('knee'), 'the knee is marked');
  await (await page.$('#sweep-box')).scrollIntoViewIfNeeded();
  await shot('07-whatif-sweep');
});

test('advise page: ranked plans, the top one changes the loader and opens as a what-if', { timeout: T * 2 }, async (t) => {
  if (skip) return t.skip(skip);
  await page.goto(base + `/#/advise/${resnetId}`);
  await page.waitForSelector('#advise-out table tbody tr', { timeout: T });
  assert.match(await page.textContent('#advise-why'), /dataloader/, 'the top plan relieves the loader');
  const href = await page.getAttribute('#advise-out tr[data-rank="1"] a.open-whatif', 'href');
  assert.ok(href.startsWith(`#/diff/${resnetId}?whatif=`), `open link ${href}`);
  const doc = JSON.parse(decodeURIComponent(href.split('whatif=')[1].split('&')[0]));
  assert.ok(doc.optimizations.some((o) => o.kind === 'dataloader'), 'the link carries the plan');
  await shot('08c-advise');
});

test('what-if page: the power slider spans the hardware row the API resolved (A100, H100); gpu is a list', { timeout: T * 2 }, async (t) => {
  if (skip) return t.skip(skip);
  // Names the old substring match got wrong: "A100-PG509-200" read as an
  // A10, "H100 80GB HBM3" as no GPU at all.
  const cases = [{ gpu: 'NVIDIA A100-PG509-200', shot: '07b-whatif-a100' }, { gpu: 'NVIDIA H100 80GB HBM3', shot: '07c-whatif-h100' }];
  const hwList = (await api('GET', '/v1/hardware')).json.hardware;
  for (const c of cases) {
    const up = await api('POST', `/v1/traces?job=hw-${c.shot}`, synthTrace({ steps: 4, perStep: 50, gpu: c.gpu }));
    assert.equal(up.status, 201);
    const id = up.json.id;
    const hw = (await api('GET', `/v1/traces/${id}`)).json.hardware;
    assert.ok(hw && hw.name, `the API resolves ${c.gpu}`);
    assert.ok(hw.name.startsWith(c.gpu.includes('A100') ? 'A100' : 'H100'), `${c.gpu} resolves to ${hw.name}`);
    assert.equal(hw.matched_from, c.gpu);
    await page.goto(base + `/#/whatif/${id}`);
    await page.waitForSelector('#pl');
    assert.equal(Number(await attr('#pl', 'min')), hw.min_power_limit_w, 'slider min from the resolved row');
    assert.equal(Number(await attr('#pl', 'max')), hw.max_power_limit_w, 'slider max from the resolved row');
    assert.ok((await page.textContent('#pl-range')).includes(hw.name));
    // gpu is a choice among the table's rows.
    const opts = await page.$$eval('#top-gpu option', (os) => os.map((o) => o.value).filter(Boolean));
    assert.deepEqual(opts, hwList.map((r) => r.name));
    await shot(c.shot);
    assert.equal((await api('DELETE', `/v1/traces/${id}`)).status, 200);
  }
  // AMP on the sample (bound by the CPU and the input): the speedup card
  // says what bounds the step, as the answer's warning does.
  await page.goto(base + `/#/whatif/${resnetId}`);
  await page.waitForSelector('#k-amp-on');
  await page.check('#k-amp-on');
  assert.ok(await page.$eval('details[data-kind="amp"]', (d) => d.open), 'ticking a kind opens its fields');
  await page.click('#run-whatif');
  await page.waitForSelector('#whatif-cards');
  // What each model changed: named figures, not a key=value dump.
  assert.ok((await page.$$('#applied dl.applied-fields dt')).length > 3);
  const w = (await api('POST', `/v1/traces/${resnetId}/whatif`, JSON.stringify({ optimizations: [{ kind: 'amp' }] }))).json;
  const code = (w.warnings.find((x) => x.code === 'cpu_bound' || x.code === 'input_bound') || {}).code;
  assert.ok(code, 'the answer warns cpu_bound or input_bound');
  assert.equal(await attr('#speedup-bound', 'data-bound'), code, 'the speedup card says what bounds the step');
  await shot('07d-whatif-amp-bound');
});

test('diff page: a trace vs its data-loader what-if, top op as the API says', { timeout: T * 2 }, async (t) => {
  if (skip) return t.skip(skip);
  const doc = { optimizations: [{ kind: 'dataloader', workers: 4 }] };
  await page.goto(base + `/#/diff/${resnetId}?whatif=${encodeURIComponent(JSON.stringify(doc))}&top=5`);
  await page.waitForSelector('#diff-summary');
  const d = (await api('POST', `/v1/traces/${resnetId}/diff?top=5`, JSON.stringify(doc))).json;
  assert.match(d.ops.rows[0].name, /DataLoader/, 'the loader op is the top difference');
  const first = await page.textContent('#diff-out table tbody tr td');
  assert.ok(first.includes('enumerate(DataLoader)'), `first op row: ${first}`);
  await shot('08b-diff');
});

test('fleet page: inline answer and a queued job with progress', { timeout: T * 3 }, async (t) => {
  if (skip) return t.skip(skip);
  await page.goto(base + '/#/fleet');
  await page.check('[data-preset="pl250"]');
  await page.check('[data-preset="loader"]');
  await page.fill('#fleet-ids', String(resnetId));
  await page.click('#run-fleet');
  await page.waitForSelector('#fleet-aggregates');
  const req = { select: { trace_ids: [resnetId] }, scenarios: [{ optimizations: [{ kind: 'dataloader', workers: 4 }] }, { power_limit_w: 250 }] };
  const f = (await api('POST', '/v1/fleet/whatif', JSON.stringify(req))).json;
  for (let i = 0; i < 2; i++) {
    near(await attr(`#fleet-aggregates tr[data-scenario="${i}"] [data-value]`, 'data-value'), f.scenarios[i].aggregate.median_speedup, `scenario ${i} median speedup`);
    near(await attr(`[data-scenario-rows="${i}"] tbody tr [data-us]`, 'data-us'), f.scenarios[i].rows[0].predicted_us, `scenario ${i} predicted`);
  }
  // The histogram's seven bin labels: on two rows when they do not fit
  // side by side, and the legend below the lower row, not over it.
  const hist = await page.$eval('canvas[aria-label^="traces per speedup bin"]', (c) => ({ ...c.dataset, w: c.clientWidth }));
  assert.ok(hist.labelRows === '1' || hist.labelRows === '2', JSON.stringify(hist));
  assert.ok(Number(hist.legendY) - Number(hist.labelBottom) >= 14, `legend clear of the bin labels: ${JSON.stringify(hist)}`);
  await shot('08-fleet');
  // The same as a background job: 202, then /v1/jobs/{id} is polled until done.
  await page.fill('#fleet-ids', '');
  await page.check('#fleet-async');
  await page.click('#run-fleet');
  // The job line shows while the job runs; a one-trace job is often done
  // before the first poll (local workers are woken on enqueue), so the
  // answer naming its job is what proves the queued path was taken.
  await page.waitForFunction(() => document.querySelector('#job-state') ||
    /job \d+/.test(document.querySelector('#fleet-out')?.textContent || ''), null, { timeout: T });
  await page.waitForSelector('#fleet-aggregates', { timeout: T });
  assert.match(await page.textContent('#fleet-out'), /job \d+/);
  const n = (await api('GET', '/v1/traces')).json.traces.length;
  assert.ok((await page.textContent('#fleet-out')).includes(`${n} trace`));
  await shot('09-fleet-job');
});

test('timeline frame time with 120k tasks', { timeout: T * 3 }, async (t) => {
  if (skip) return t.skip(skip);
  const body = synthTrace({ steps: 60, perStep: 1000 });
  const up = await api('POST', '/v1/traces?job=synthetic-120k', body);
  assert.equal(up.status, 201, JSON.stringify(up.json));
  bigId = up.json.id;
  const t0 = Date.now();
  await page.goto(base + `/#/trace/${bigId}`);
  await page.waitForSelector('#timeline-box canvas', { timeout: T });
  const loadMs = Date.now() - t0;
  await page.waitForFunction(() => window.__rvTimeline && window.__rvTimeline().tracks[0].iterations.length === 60, null, { timeout: T });
  const r = await page.evaluate(() => {
    const tl = window.__rvTimeline();
    const out = { tasks: tl.tracks[0].n };
    const measure = (label) => { const xs = []; for (let i = 0; i < 25; i++) xs.push(tl.render()); xs.sort((a, b) => a - b); out[label] = { median_ms: xs[12], max_ms: xs[24] }; };
    const [a, b] = tl.full;
    tl.reset(); measure('whole trace');
    tl.setView(a, a + (b - a) / 20); measure('1/20 of the trace');
    tl.setView(a, a + (b - a) / 400); measure('1/400 of the trace');
    tl.reset();
    // 40 wheel-sized zoom steps in and out, each drawn.
    const s = performance.now();
    for (let i = 0; i < 20; i++) { tl.zoom(0.8, 0.4); tl.render(); }
    for (let i = 0; i < 20; i++) { tl.zoom(1.25, 0.4); tl.render(); }
    out['40 zoom steps'] = { per_frame_ms: (performance.now() - s) / 40 };
    return out;
  });
  r.first_paint_ms = loadMs;
  fs.writeFileSync(path.join(OUT, 'frame-times.json'), JSON.stringify(r, null, 2));
  console.log('frame times:', JSON.stringify(r));
  assert.equal(r.tasks, 120060);
  assert.ok(r['whole trace'].median_ms < 50, `whole-trace frame ${r['whole trace'].median_ms} ms`);
  assert.ok(r['40 zoom steps'].per_frame_ms < 50);
  await shot('10-large-trace');
});

test('GPU busy in the list is the union of streams and agrees with the trace page', { timeout: T * 2 }, async (t) => {
  if (skip) return t.skip(skip);
  // Two overlapping GPU streams and no ProfilerStep: the list (ingest
  // summary over the span) and the trace page (simulated window, here the
  // whole run) measure the same busy time; a sum of streams would not.
  const up = await api('POST', '/v1/traces?job=synthetic-streams', synthTrace({ steps: 4, perStep: 300, profilerSteps: false }));
  assert.equal(up.status, 201);
  const id = up.json.id;
  const s = up.json.summary;
  const w = (await api('POST', `/v1/traces/${id}/whatif`, '{}')).json;
  const util = w.breakdown.baseline.gpu_utilization;
  assert.ok(Math.abs(s.gpu_busy_us / s.span_us - util) < 0.001, `list GPU busy ${s.gpu_busy_us / s.span_us} vs trace page GPU utilization ${util}`);
  await page.goto(base + '/#/traces');
  const cell = `tr[data-trace-id="${id}"] [data-gpu-busy]`;
  await page.waitForSelector(cell);
  assert.equal((await page.textContent(cell)).trim(), fmtPct(util), 'the list shows the trace page figure');
  await page.goto(base + `/#/trace/${id}`);
  await page.waitForSelector('[data-metric="gpu_utilization"]');
  near(await attr('[data-metric="gpu_utilization"]', 'data-value'), util, 'GPU utilization');
  assert.equal((await api('DELETE', `/v1/traces/${id}`)).status, 200);
});

test('sign-in with --require-auth: token entry, scope in the header, what-if, 401 brings it back', { timeout: T * 3 }, async (t) => {
  if (skip) return t.skip(skip);
  const home2 = fs.mkdtempSync(path.join(os.tmpdir(), 'reverie-web-auth-'));
  fs.chmodSync(home2, 0o755);
  const port2 = await freePort();
  const base2 = `http://127.0.0.1:${port2}`;
  const log = fs.openSync(path.join(home2, 'reveried.log'), 'a');
  const srv = spawn(path.join(BIN, 'reveried'), ['--port', String(port2), '--home', home2, '--require-auth', '--web', path.join(SRC, 'web')], { stdio: ['ignore', log, log] });
  const cli = (...args) => {
    const r = spawnSync(path.join(BIN, 'reverie'), [...args, '--home', home2], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `reverie ${args.join(' ')}: ${r.stderr}`);
    return r.stdout.trim().split('\n')[0];
  };
  const who = async (tok) => (await fetch(base2 + '/v1/whoami', { headers: { Authorization: `Bearer ${tok}` } })).status;
  const p2 = await ctx.newPage();
  const errors2 = [];
  p2.on('pageerror', (e) => errors2.push(e.message));
  p2.setDefaultTimeout(T);
  try {
    let ready = false;
    for (let i = 0; i < 360 && srv.exitCode === null && !ready; i++) {
      try { ready = (await fetch(base2 + '/readyz')).status === 200; } catch (e) { /* not yet */ }
      if (!ready) await sleep(500);
    }
    assert.ok(ready, `reveried --require-auth did not get ready; log: ${path.join(home2, 'reveried.log')}`);
    const admin = cli('token', 'create', '--name', 'web-admin', '--scopes', 'admin');
    const read = cli('token', 'create', '--name', 'web-read', '--scopes', 'read');
    for (let i = 0; i < 100 && ((await who(admin)) !== 200 || (await who(read)) !== 200); i++) await sleep(200);
    const up = await fetch(base2 + '/v1/traces?job=auth', { method: 'POST', body: fs.readFileSync(SMALL && fs.existsSync(SMALL) ? SMALL : RESNET), headers: { 'Content-Type': 'application/gzip', Authorization: `Bearer ${admin}` } });
    assert.equal(up.status, 201, 'upload with the admin token');
    const id = (await up.json()).id;
    // No token: the page asks for one.
    await p2.goto(base2 + `/#/whatif/${id}`);
    await p2.waitForSelector('#signin[open]');
    assert.match(await p2.textContent('#signin-reason'), /requires an API token/);
    // A wrong token is refused with the server's reason, and not kept.
    await p2.fill('#signin-token', 'rvt_00000000_' + '0'.repeat(40));
    await p2.click('#signin-submit');
    await p2.waitForFunction(() => /unknown or revoked token/.test(document.getElementById('signin-reason').textContent) && !document.getElementById('signin-reason').hidden);
    assert.ok(await p2.evaluate(() => document.getElementById('signin').open), 'a wrong token leaves the sign-in open');
    assert.equal(await p2.evaluate(() => localStorage.getItem('rv-token')), null);
    // The read token: signed in, the header names its scope, a what-if runs.
    await p2.fill('#signin-token', read);
    await p2.click('#signin-submit');
    await p2.waitForSelector('#signin', { state: 'hidden' });
    await p2.waitForSelector('#who:not([hidden])');
    assert.equal(await attr2(p2, '#who', 'data-scopes'), 'read');
    assert.match(await p2.textContent('#who'), /read/, 'the header shows the scope');
    assert.ok(await p2.isVisible('#signout'));
    assert.equal(await p2.evaluate(() => localStorage.getItem('rv-token')), read, 'the token is kept per browser');
    await p2.click('#run-whatif');
    await p2.waitForSelector('#whatif-cards');
    await p2.screenshot({ path: path.join(SHOTS, '12-signed-in-whatif.png'), fullPage: true });
    // Revoked: the next call answers 401, the token is forgotten and the
    // sign-in comes back with the reason.
    const me = await (await fetch(base2 + '/v1/whoami', { headers: { Authorization: `Bearer ${read}` } })).json();
    cli('token', 'revoke', me.name);
    for (let i = 0; i < 100 && (await who(read)) !== 401; i++) await sleep(200);
    await p2.click('#run-whatif');
    await p2.waitForSelector('#signin[open]');
    assert.match(await p2.textContent('#signin-reason'), /refused the token/);
    assert.equal(await p2.evaluate(() => localStorage.getItem('rv-token')), null, 'a refused token is cleared');
    assert.ok(await p2.isHidden('#who'), 'no scope shown once signed out');
    assert.ok(await p2.isHidden('#signout'), 'no sign-out button once signed out');
    await p2.screenshot({ path: path.join(SHOTS, '13-signed-out.png'), fullPage: true });
    assert.deepEqual(errors2, [], 'no uncaught errors in the page');
  } finally {
    await p2.close().catch(() => {});
    srv.kill('SIGTERM');
    for (let i = 0; i < 240 && srv.exitCode === null; i++) await sleep(250);
    if (srv.exitCode === null) srv.kill('SIGKILL');
    if (!process.env.RV_KEEP_TEST_HOME) fs.rmSync(home2, { recursive: true, force: true });
  }
});

test('delete, no external requests, no page errors', { timeout: T }, async (t) => {
  if (skip) return t.skip(skip);
  await page.goto(base + '/#/traces');
  const id = smallId || bigId;
  await page.waitForSelector(`tr[data-trace-id="${id}"]`);
  await page.click(`button[aria-label="Delete trace ${id}"]`);
  await page.waitForSelector(`tr[data-trace-id="${id}"]`, { state: 'detached' });
  assert.equal((await api('GET', `/v1/traces/${id}`)).status, 404);
  // An unknown trace: the error state.
  await page.goto(base + '/#/trace/999999');
  await page.waitForSelector('.state.error');
  assert.match(await page.textContent('main'), /not_found/);
  await shot('11-trace-not-found');
  const foreign = requests.filter((u) => !u.startsWith(base) && !u.startsWith('data:') && !u.startsWith('blob:'));
  assert.deepEqual(foreign, [], 'every request goes to reveried');
  assert.deepEqual(pageErrors, [], 'no uncaught errors in the page');
});

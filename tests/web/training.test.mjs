// The training-job pages in a real browser: a real reveried with its
// embedded PostgreSQL, the 8 DLRM rank traces uploaded as one job, Debian's
// Chromium driven by playwright-core. Numbers on screen are compared with
// the API's answers. Env as in dashboard.test.mjs; skipped (with the reason)
// when the DLRM traces or a database are missing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const SRC = process.env.RV_SOURCE_DIR || path.resolve(here, '../..');
const BIN = process.env.RV_BIN_DIR || path.join(SRC, 'build/bin');
const SHARED = process.env.RV_SHARED_TRACES || '';
const OUT = process.env.RV_WEB_OUT || fs.mkdtempSync(path.join(os.tmpdir(), 'reverie-web-out-'));
const SHOTS = path.join(OUT, 'screenshots');
const DLRM = SHARED && path.join(SHARED, 'param/dlrm-8rank');
const T = 120_000;

let home, base, server, ctx, udd, page, skip = '';
const pageErrors = [];
const requests = [];
let jobId = 0;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
    s.on('error', reject);
  });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function api(method, p, body, headers = {}) {
  const res = await fetch(base + p, { method, body, headers: typeof body === 'string' ? { 'Content-Type': 'application/json', ...headers } : headers });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}
async function uploadRank(r) {
  const bytes = fs.readFileSync(path.join(DLRM, `worker${r}.kineto.json.gz`));
  const res = await api('POST', '/v1/traces?job=dlrm-web', bytes, { 'Content-Type': 'application/gzip' });
  assert.equal(res.status, 201, JSON.stringify(res.json));
  return res.json.id;
}
async function shot(name) {
  await page.waitForTimeout(300);
  await page.screenshot({ path: path.join(SHOTS, name + '.png'), fullPage: true });
}
function near(a, b, what) {
  assert.ok(Math.abs(Number(a) - Number(b)) <= 1e-9 * Math.max(1, Math.abs(b)), `${what}: screen ${a} != API ${b}`);
}

before(async () => {
  fs.mkdirSync(SHOTS, { recursive: true });
  const bin = path.join(BIN, 'reveried');
  if (!fs.existsSync(bin)) { skip = `no reveried at ${bin}`; return; }
  if (!DLRM || !fs.existsSync(path.join(DLRM, 'worker7.kineto.json.gz'))) { skip = 'no DLRM rank traces (RV_SHARED_TRACES)'; return; }
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'reverie-web-tj-'));
  fs.chmodSync(home, 0o755);
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const log = fs.openSync(path.join(home, 'reveried.log'), 'a');
  server = spawn(bin, ['--port', String(port), '--home', home, '--web', path.join(SRC, 'web')], { stdio: ['ignore', log, log] });
  let ready = false;
  for (let i = 0; i < 360 && server.exitCode === null; i++) {
    try { if ((await fetch(base + '/readyz')).status === 200) { ready = true; break; } } catch (e) { /* not yet */ }
    await sleep(500);
  }
  if (!ready) { skip = `reveried did not get ready (no PostgreSQL?); log: ${path.join(home, 'reveried.log')}`; return; }
  udd = fs.mkdtempSync(path.join(os.tmpdir(), 'reverie-chromium-'));
  ctx = await chromium.launchPersistentContext(udd, {
    executablePath: process.env.RV_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-quic'],
    viewport: { width: 1440, height: 900 },
    colorScheme: 'light',
  });
  page = ctx.pages()[0] || (await ctx.newPage());
  page.setDefaultTimeout(T);
  page.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => pageErrors.push(e.message));
});

after(async () => {
  if (ctx) await ctx.close().catch(() => {});
  if (udd) fs.rmSync(udd, { recursive: true, force: true });
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    for (let i = 0; i < 240 && server.exitCode === null; i++) await sleep(250);
    if (server.exitCode === null) server.kill('SIGKILL');
  }
  if (home && !process.env.RV_KEEP_TEST_HOME) fs.rmSync(home, { recursive: true, force: true });
});

test('training jobs list: 7 ranks name the missing one, 8 are complete', { timeout: T * 2 }, async (t) => {
  if (skip) return t.skip(skip);
  for (let r = 0; r < 7; r++) await uploadRank(r);
  const list = (await api('GET', '/v1/training-jobs')).json.training_jobs;
  jobId = list.find((j) => j.name === 'dlrm-web').id;
  await page.goto(base + '/#/training-jobs');
  const row = `tr[data-job-id="${jobId}"]`;
  await page.waitForSelector(row);
  assert.equal(await page.getAttribute(`${row} [data-missing]`, 'data-missing'), '7');
  assert.match(await page.textContent(row), /7 \/ 8/);
  await shot('20-training-jobs-partial');
  await uploadRank(7);
  await page.reload();
  await page.waitForSelector(row);
  assert.equal(await page.getAttribute(`${row} [data-missing]`, 'data-missing'), '');
  assert.match(await page.textContent(row), /8 \/ 8/);
  assert.match(await page.textContent(row), /none/);
});

test('training job page: ranks on one axis, straggler, wait vs transfer, what-if', { timeout: T * 2 }, async (t) => {
  if (skip) return t.skip(skip);
  await page.goto(base + `/#/training-job/${jobId}`);
  await page.waitForSelector('#tj-summary');
  assert.equal(await page.getAttribute('#tj-summary', 'data-present'), '0,1,2,3,4,5,6,7');
  assert.equal(await page.getAttribute('#tj-summary', 'data-missing'), '');
  // One lane per rank, each with the GPU and communication tasks of its
  // trace's measured timeline.
  await page.waitForSelector('#tj-lane-list li[data-rank="7"]');
  await page.waitForSelector('#tj-lanes');
  const job = (await api('GET', `/v1/training-jobs/${jobId}`)).json;
  for (const rt of job.rank_traces.filter((x) => x.used)) {
    const tl = (await api('GET', `/v1/traces/${rt.trace_id}/timeline?source=measured&max_tasks=20000`)).json;
    const kinds = tl.threads.map((th) => th.kind);
    const n = tl.tasks.filter((k) => kinds[k.thread] === 'gpu' || kinds[k.thread] === 'comm').length;
    const li = `#tj-lane-list li[data-rank="${rt.rank}"]`;
    assert.equal(Number(await page.getAttribute(li, 'data-trace-id')), rt.trace_id);
    assert.equal(Number(await page.getAttribute(li, 'data-tasks')), n, `rank ${rt.rank} tasks`);
    assert.ok(n > 0, `rank ${rt.rank} has GPU tasks`);
  }
  const ans = await api('POST', `/v1/training-jobs/${jobId}/whatif`, '{}');
  assert.equal(ans.status, 200, JSON.stringify(ans.json));
  const a = ans.json;
  await page.waitForSelector('#tj-wait-transfer [data-metric="predicted"]');
  near(await page.getAttribute('#tj-wait-transfer [data-metric="measured"]', 'data-us'), a.measured_us, 'measured');
  near(await page.getAttribute('#tj-wait-transfer [data-metric="predicted"]', 'data-us'), a.predicted_us, 'predicted');
  const first = a.stragglers.length ? a.stragglers[0].rank : null;
  assert.notEqual(first, null, 'the DLRM job has a straggler');
  assert.equal(await page.getAttribute('#tj-wait-transfer [data-metric="straggler"]', 'data-rank'), String(first));
  assert.equal(await page.getAttribute('#tj-lane-list li.straggler', 'data-rank'), String(first), 'the straggler lane is highlighted');
  await page.waitForSelector(`#tj-wait-transfer tr.straggler[data-rank="${first}"]`);
  for (const r of a.ranks) {
    const tr = `#tj-wait-transfer tr[data-rank="${r.rank}"]`;
    near(await page.getAttribute(`${tr} .tj-wait-us`, 'data-us'), r.wait_us, `rank ${r.rank} wait`);
    near(await page.getAttribute(`${tr} .tj-transfer-us`, 'data-us'), r.transfer_us, `rank ${r.rank} transfer`);
  }
  // The job's parallelism dimensions: DLRM's all-to-all (embedding) and
  // all-reduce (data), a row each.
  await page.waitForSelector('#tj-wait-transfer #parallelism-table');
  assert.equal(await page.$$eval('#tj-wait-transfer #parallelism-table tbody tr', (els) => els.length), a.parallelism.length);
  for (const dim of ['embedding', 'data'])
    assert.ok(await page.$(`#tj-wait-transfer #parallelism-table tr[data-dim="${dim}"]`), `a ${dim} row`);
  for (const [rank, off] of Object.entries(a.clock_offsets_us))
    near(await page.getAttribute(`#tj-lane-list li[data-rank="${rank}"]`, 'data-offset-us'), off, `rank ${rank} offset`);
  await shot('21-training-job');

  // A what-if on the job from the form: kernels of rank 3 slower.
  const doc = { optimizations: [{ kind: 'scale', select: { kind: 'kernel' }, factor: 1.5, ranks: [3] }] };
  await page.fill('#tj-whatif', JSON.stringify(doc));
  await page.click('#run-tj-whatif');
  await page.waitForSelector('#tj-result [data-metric="predicted"], #tj-result .state.error');
  const b = await api('POST', `/v1/training-jobs/${jobId}/whatif`, JSON.stringify(doc));
  assert.equal(b.status, 200, JSON.stringify(b.json));
  near(await page.getAttribute('#tj-result [data-metric="predicted"]', 'data-us'), b.json.predicted_us, 'what-if predicted');
  assert.equal((await page.$$('#tj-result tr[data-rank]')).length, b.json.ranks.length);
  await shot('22-training-job-whatif');
});

test('training jobs list: one archive of every rank from the file picker', { timeout: T }, async (t) => {
  if (skip) return t.skip(skip);
  // The DLRM folder (8 ranks, already stored above, and their 8 execution
  // traces, which are no Kineto traces) as one .tar.gz.
  const tgz = path.join(home, 'dlrm.tar.gz');
  const r = spawnSync('tar', ['-C', path.dirname(DLRM), '-czf', tgz, path.basename(DLRM)]);
  assert.equal(r.status, 0, String(r.stderr));
  await page.goto(base + '/#/training-jobs');
  await page.fill('#tj-upload-job', 'dlrm-archive');
  await page.setInputFiles('#tj-upload-file', tgz);
  await page.waitForSelector('#tj-upload-result');
  assert.equal(await page.getAttribute('#tj-upload-result', 'data-stored'), '0');
  assert.equal(await page.getAttribute('#tj-upload-result', 'data-duplicates'), '8');
  assert.equal(await page.getAttribute('#tj-upload-result', 'data-refused'), '8');
  assert.equal((await page.$$('#tj-upload-status .warnings li')).length, 8, 'each refused member is named');
  await shot('23-training-jobs-archive');
});

test('training job: unknown id, no external requests, no page errors', { timeout: T }, async (t) => {
  if (skip) return t.skip(skip);
  await page.goto(base + '/#/training-job/999999');
  await page.waitForSelector('#tj-head .state.error');
  assert.match(await page.textContent('#tj-head'), /not_found/);
  const foreign = requests.filter((u) => !u.startsWith(base) && !u.startsWith('data:') && !u.startsWith('blob:'));
  assert.deepEqual(foreign, [], 'every request goes to reveried');
  assert.deepEqual(pageErrors, [], 'no uncaught errors in the page');
});

'use strict';
// The Node binding's lock cycle against C's, and against redlock + ioredis on
// the same Redis, in one run (issue 40; docs/benchmarks.md, "Node binding").
//
//   node bench/lock_bench.js [REDIS_URL] [CYCLES]
//
// Env: SIMBA_CYCLE_BENCH (default ../../build/bench/simba_cycle_bench),
// SIMBA_BENCH_ROUNDS (default 5). Without REDIS_URL (or SIMBA_TEST_REDIS_URL)
// only memory:// runs. redlock and ioredis are installed from npm into
// bench/node_modules (not committed) on first use.
//
// Per round: C cycle, Node cycle, C cycle again (the Node figure over the mean
// of the two C figures around it), then redlock's cycle; the table gives the
// median of the rounds and, in brackets, the lowest and highest round.
// Handover: client A holds the name, B waits for it; the time from A's
// release call to B holding it, 200 times, mean and p50.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const simba = require(path.join(__dirname, '..', 'lib', 'index.js'));

const REDIS = process.argv[2] || process.env.SIMBA_TEST_REDIS_URL || '';
const CYCLES = Number(process.argv[3] || 4000);
const ROUNDS = Number(process.env.SIMBA_BENCH_ROUNDS || 5);
const CB = process.env.SIMBA_CYCLE_BENCH ||
  path.join(__dirname, '..', '..', '..', 'build', 'bench', 'simba_cycle_bench');

function ensureNpm() {
  if (fs.existsSync(path.join(__dirname, 'node_modules', 'redlock')) &&
      fs.existsSync(path.join(__dirname, 'node_modules', 'ioredis'))) return;
  console.error('# installing redlock and ioredis from npm into bench/node_modules');
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--no-save', '--prefix', __dirname,
    'redlock@5.0.0-beta.2', 'ioredis@5'], { stdio: 'inherit' });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const now = () => Number(process.hrtime.bigint()) / 1000; // µs
// the median and, in brackets, the lowest and highest round
const spread = (xs, d = 1) => `${median(xs).toFixed(d)} [${Math.min(...xs).toFixed(d)}-${Math.max(...xs).toFixed(d)}]`;
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');

function cCycle(url, cycles) {
  const out = execFileSync(CB, ['--mode', 'pool', '--url', url, '--cycles', String(cycles),
    '--warmup', String(Math.floor(cycles / 10))]).toString();
  const m = /pool_mean_us=([0-9.]+)/.exec(out);
  return Number(m[1]);
}

async function nodeCycle(c, name, cycles) {
  for (let i = 0; i < cycles / 10; i++) { const t = await c.lock(name); await t.release(); }
  const t0 = now();
  for (let i = 0; i < cycles; i++) { const t = await c.lock(name); await t.release(); }
  return (now() - t0) / cycles;
}

async function redlockCycle(rl, name, cycles) {
  for (let i = 0; i < cycles / 10; i++) { const l = await rl.acquire([name], 10000); await l.release(); }
  const t0 = now();
  for (let i = 0; i < cycles; i++) { const l = await rl.acquire([name], 10000); await l.release(); }
  return (now() - t0) / cycles;
}

// A holds, B waits; µs from A's release call to B holding the name.
async function handover(acquireA, acquireB, n) {
  const xs = [];
  for (let i = 0; i < n; i++) {
    const a = await acquireA();
    const waiting = acquireB();
    await new Promise((r) => setTimeout(r, 2));
    const t0 = now();
    await a.release();
    const b = await waiting;
    xs.push(now() - t0);
    await b.release();
  }
  return { mean: xs.reduce((x, y) => x + y, 0) / xs.length, p50: median(xs) };
}

async function benchBackend(label, url, cycles, withRedlock) {
  const c = await simba.open(url, { lease: 15000 });
  const rows = { c: [], node: [], ratio: [], redlock: [] };
  let rl = null; let redis = null;
  if (withRedlock) {
    ensureNpm();
    const Redis = require(path.join(__dirname, 'node_modules', 'ioredis'));
    const Redlock = require(path.join(__dirname, 'node_modules', 'redlock')).default;
    redis = new Redis(url);
    rl = new Redlock([redis], { retryCount: -1, retryDelay: 10, retryJitter: 0 });
  }
  await nodeCycle(c, `bench.node.${process.pid}`, cycles); // JIT warm-up, not counted
  for (let r = 0; r < ROUNDS; r++) {
    const c1 = cCycle(url, cycles);
    const n = await nodeCycle(c, `bench.node.${process.pid}`, cycles);
    const c2 = cCycle(url, cycles);
    rows.c.push((c1 + c2) / 2);
    rows.node.push(n);
    rows.ratio.push(n / ((c1 + c2) / 2));
    if (rl) rows.redlock.push(await redlockCycle(rl, `bench.redlock.${process.pid}`, cycles));
    console.log(`# ${label} round ${r + 1}: C ${c1.toFixed(1)}/${c2.toFixed(1)} µs, node ${n.toFixed(1)} µs` +
      ` (${(n / ((c1 + c2) / 2)).toFixed(2)} x)` +
      (rl ? `, redlock ${rows.redlock[r].toFixed(1)} µs` : ''));
  }
  const res = { label, c: spread(rows.c), node: spread(rows.node), ratio: spread(rows.ratio, 2) };
  if (rl) {
    res.redlock = spread(rows.redlock);
    const b = await simba.open(url, { lease: 15000 });
    const name = `bench.ho.${process.pid}`;
    res.hoSimba = await handover(() => c.lock(name), () => b.lock(name), 200);
    res.hoRedlock = await handover(() => rl.acquire([name + '.rl'], 10000),
      () => rl.acquire([name + '.rl'], 10000), 200);
    await b.close();
    redis.disconnect();
  }
  await c.close();
  return res;
}

(async () => {
  console.log(`# load average at start: ${load()}`);
  const results = [await benchBackend('memory://', 'memory://node-bench', CYCLES * 10, false)];
  if (REDIS) results.push(await benchBackend('redis', REDIS, CYCLES, true));
  console.log(`# load average at end: ${load()}; ${ROUNDS} rounds: median [lowest-highest round]`);
  console.log('\n| backend | C cycle µs | Node cycle µs | Node / C | redlock cycle µs | handover Simba mean / p50 µs | handover redlock mean / p50 µs |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of results) {
    const ho = (h) => (h ? `${h.mean.toFixed(0)} / ${h.p50.toFixed(0)}` : '-');
    console.log(`| ${r.label} | ${r.c} | ${r.node} | ${r.ratio} | ` +
      `${r.redlock || '-'} | ${ho(r.hoSimba)} | ${ho(r.hoRedlock)} |`);
  }
})().catch((e) => { console.error(e); process.exit(1); });

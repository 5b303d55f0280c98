'use strict';
// client.close() against a backend that answers nothing (libsimba 1.5,
// simba_client_close_async on Node's loop): the loop keeps turning while the
// close is pending, and the close settles by the session's local deadline with
// a 'warning' (SIMBA_ETIMEDOUT). The silent backend is Redis behind the chaos
// suite's proxy (tests/chaos/nemesis.py) in blackhole mode.
const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const { simba, requireBackend, sleep, uniqueName } = require('./helper.js');

const REDIS = requireBackend('redis');
const LEASE = 2000;
const CHAOS = path.join(__dirname, '..', '..', '..', 'tests', 'chaos');

// The proxy in a Python child: prints its port, then sets its mode from each
// line of stdin and answers 'ok'.
function startProxy(port) {
  const py = process.env.SIMBA_PYTHON || '/usr/bin/python3';
  const src = `import sys
sys.path.insert(0, sys.argv[1])
import nemesis
p = nemesis.Proxy([int(sys.argv[2])])
print(p.port, flush=True)
for line in sys.stdin:
    p.mode = line.strip()
    print("ok", flush=True)
p.close()`;
  const child = spawn(py, ['-c', src, CHAOS, String(port)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = [];
  let buf = '';
  let wake = null;
  child.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      lines.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
    if (wake) wake();
  });
  const next = async () => {
    while (!lines.length) await new Promise((r) => { wake = r; });
    return lines.shift();
  };
  return {
    child,
    port: next().then(Number),
    async mode(m) {
      child.stdin.write(m + '\n');
      assert.equal(await next(), 'ok');
    },
    stop() { child.stdin.end(); return new Promise((r) => child.once('exit', r)); },
  };
}

const proxy = startProxy(new URL(REDIS).port);
after(() => proxy.stop());

async function viaProxy() {
  const u = new URL(REDIS);
  u.port = String(await proxy.port);
  return simba.open(u.toString(), { lease: LEASE, name: 'node-close' });
}

// Ticks of a 20 ms interval while p is pending: their count and largest gap.
async function ticksWhile(p) {
  const gaps = [];
  let last = Date.now();
  const iv = setInterval(() => {
    const now = Date.now();
    gaps.push(now - last);
    last = now;
  }, 20);
  try {
    await p;
  } finally {
    clearInterval(iv);
  }
  return { n: gaps.length, max: Math.max(0, ...gaps) };
}

test('a close the backend never answers leaves the loop turning and settles with a warning',
  { skip: simba.versionNumber < 0x010500 && 'libsimba 1.4 closes blocking' }, async () => {
    const c = await viaProxy();
    const name = uniqueName('close-silent');
    const t = await c.lock(name, { timeout: 5000 });
    const revoked = new Promise((r) => t.onRevoked(r));
    const warnings = [];
    c.on('warning', (w) => warnings.push(w));
    let closedEvents = 0;
    c.on('closed', () => closedEvents++);
    await proxy.mode('blackhole');
    const t0 = Date.now();
    const closing = c.close();
    assert.equal(c.close(), closing); // again: the same promise
    const ticks = await ticksWhile(closing);
    const took = Date.now() - t0;
    console.log(`# close against a silent backend: ${took} ms, ${ticks.n} ticks of 20 ms, ` +
      `largest gap ${ticks.max} ms, warning ${warnings.map((w) => w.code)}`);
    // pending until the session's local deadline (under the lease), never longer
    assert.ok(took >= 300, `settled after ${took} ms: the backend was not silent`);
    assert.ok(took <= LEASE + 1000, `settled after ${took} ms`);
    // the loop turned at the interval's rate all along
    assert.ok(ticks.max < 250, `the loop stalled ${ticks.max} ms`);
    assert.ok(ticks.n >= took / 20 / 2, `${ticks.n} ticks in ${took} ms`);
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0].code, 'SIMBA_ETIMEDOUT');
    assert.equal(warnings[0].name, 'SimbaCloseWarning');
    assert.equal(closedEvents, 1);
    assert.equal(await revoked, 'STOPPED');
    assert.equal(c.status, 'CLOSED');
    await assert.rejects(c.lock('x'), (e) => e.code === 'SIMBA_ECLOSED');
    await c.close(); // closed already: resolves

    // The lease frees at the session's expiry on the backend (the proxy still
    // holds the close: in 'pass' its bytes would flow, late).
    const other = await simba.open(REDIS, { lease: LEASE, name: 'node-close-other' });
    try {
      const t1 = Date.now();
      const t2 = await other.lock(name, { timeout: 3 * LEASE });
      console.log(`# the lock was free ${Date.now() - t1} ms after the close settled`);
      assert.ok(t2.token > t.token);
      await t2.release();
    } finally {
      await other.close();
      await proxy.mode('pass');
    }
  });

test('a close the backend answers releases at once, without a warning', async () => {
  await proxy.mode('pass');
  const c = await viaProxy();
  const name = uniqueName('close-ok');
  await c.lock(name, { timeout: 5000 });
  const warnings = [];
  c.on('warning', (w) => warnings.push(w));
  const t0 = Date.now();
  await c.close();
  const took = Date.now() - t0;
  assert.ok(took < 1000, `close took ${took} ms`);
  assert.deepEqual(warnings, []);
  const other = await simba.open(REDIS, { lease: LEASE });
  try {
    const t = await other.tryLock(name); // free now: no EBUSY
    await t.release();
  } finally {
    await other.close();
  }
});

test('without a warning listener the warning goes to process.emitWarning', 
  { skip: simba.versionNumber < 0x010500 && 'libsimba 1.4 closes blocking' }, async () => {
    const c = await viaProxy();
    await c.lock(uniqueName('close-pw'), { timeout: 5000 });
    const seen = [];
    const onWarn = (w) => seen.push(w);
    process.on('warning', onWarn);
    try {
      await proxy.mode('blackhole');
      await c.close();
      await sleep(50); // process 'warning' is emitted on a later tick
    } finally {
      process.off('warning', onWarn);
      await proxy.mode('pass');
    }
    assert.deepEqual(seen.map((w) => [w.name, w.code]), [['SimbaCloseWarning', 'SIMBA_ETIMEDOUT']]);
  });

test('a worker terminated while its close is pending on a silent backend', async () => {
  // the environment's cleanup hook finishes the close blocking (the worker's
  // thread, until the session's local deadline); the main loop keeps turning
  const { Worker } = require('node:worker_threads');
  const u = new URL(REDIS);
  u.port = String(await proxy.port);
  const src = `
    const { parentPort, workerData } = require('node:worker_threads');
    const simba = require(workerData.lib);
    (async () => {
      const c = await simba.open(workerData.url, { lease: ${LEASE} });
      await c.lock(workerData.name, { timeout: 5000 });
      parentPort.once('message', () => { c.close(); setTimeout(() => parentPort.postMessage('closing'), 100); });
      parentPort.postMessage('held');
    })().catch((e) => parentPort.postMessage('error ' + e.code + ' ' + e.message));`;
  const w = new Worker(src, { eval: true,
    workerData: { lib: require.resolve('../lib/index.js'), url: u.toString(), name: uniqueName('close-worker') } });
  const next = () => new Promise((r, j) => { w.once('message', r); w.once('error', j); });
  assert.equal(await next(), 'held');
  await proxy.mode('blackhole');
  try {
    w.postMessage('go');
    assert.equal(await next(), 'closing');
    const t0 = Date.now();
    const ticks = await ticksWhile(w.terminate());
    const took = Date.now() - t0;
    console.log(`# worker terminated during a pending close: ${took} ms, largest main-loop gap ${ticks.max} ms`);
    assert.ok(took <= LEASE + 1000, `terminate took ${took} ms`);
    assert.ok(ticks.max < 250, `the main loop stalled ${ticks.max} ms`);
  } finally {
    await proxy.mode('pass');
  }
});

'use strict';
// Checks that need a second Node process: unref() lets an idle process exit,
// and a lock handed over between two processes (clean release and kill -9) on
// every real backend whose SIMBA_TEST_*_URL is set.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const { simba, backendUrl, uniqueName } = require('./helper.js');

const LIB = path.join(__dirname, '..', 'lib', 'index.js');

function child(src, env = {}) {
  const p = spawn(process.execPath, ['-e', src], {
    env: { ...process.env, SIMBA_LIB: LIB, ...env },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  p.lines = [];
  let buf = '';
  p.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      p.lines.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
      p.emit('line', p.lines[p.lines.length - 1]);
    }
  });
  p.exited = new Promise((r) => p.on('exit', (code, sig) => r({ code, sig })));
  return p;
}

const line = (p) => new Promise((r) => p.once('line', r));

test('an unref\'d idle client lets the process exit; a ref\'d one keeps it alive', async () => {
  const src = (unref) => `
    const simba = require(process.env.SIMBA_LIB);
    simba.open('memory://unref', { lease: 3000 }).then(async (c) => {
      const t = await c.lock('held', { timeout: 1000 });
      globalThis.keep = [c, t];
      ${unref ? 'c.unref();' : ''}
      console.log('ready');
    });`;
  const a = child(src(true));
  const t0 = Date.now();
  const r = await a.exited;
  assert.equal(r.code, 0);
  assert.deepEqual(a.lines, ['ready']);
  assert.ok(Date.now() - t0 < 5000);
  const b = child(src(false));
  await line(b);
  const early = await Promise.race([b.exited, new Promise((res) => setTimeout(() => res('alive'), 1500))]);
  assert.equal(early, 'alive');
  b.kill('SIGKILL');
  await b.exited;
});

test('an unref\'d client with a lock wait pending stays alive until it resolves', async () => {
  const c = child(`
    const simba = require(process.env.SIMBA_LIB);
    (async () => {
      const a = await simba.open('memory://w', { lease: 3000 });
      const b = await simba.open('memory://w', { lease: 3000 });
      a.unref(); b.unref();
      const t = await a.lock('n');
      setTimeout(() => t.release(), 300);
      const t2 = await b.lock('n', { timeout: 5000 });
      console.log('got ' + (t2.token > t.token));
    })();`);
  const r = await c.exited;
  assert.equal(r.code, 0);
  assert.deepEqual(c.lines, ['got true']);
});

test('a worker terminated with its client open: the cleanup hook closes it, no crash', async () => {
  // The addon loaded by the worker only is unloaded at its exit: the uv handles'
  // close callbacks must run before (an async cleanup hook; a segfault before).
  const c = child(`
    const { Worker } = require('node:worker_threads');
    const w = new Worker(\`
      const { parentPort } = require('node:worker_threads');
      const simba = require(process.env.SIMBA_LIB);
      simba.open('memory://exit', { lease: 3000 }).then(async (c) => {
        globalThis.keep = [c, await c.lock('n', { timeout: 1000 })];
        parentPort.postMessage('held');
      });\`, { eval: true });
    w.once('message', async (m) => {
      await w.terminate();
      console.log(m + ', terminated');
    });`);
  const r = await c.exited;
  assert.deepEqual(c.lines, ['held, terminated']);
  assert.equal(r.code, 0);
});

const HOLDER = `
  const simba = require(process.env.SIMBA_LIB);
  (async () => {
    const c = await simba.open(process.env.URL, { lease: 2000, name: 'child' });
    const t = await c.lock(process.env.NAME, { timeout: 10000 });
    console.log('held ' + t.token + ' ' + t.remaining);
    process.stdin.once('data', async () => {
      process.stdin.pause();
      await t.release();
      await c.close();
      console.log('released');
    });
  })();`;

for (const kind of ['redis', 'postgres', 'zookeeper']) {
  const url = backendUrl(kind);
  test(`two-process handover on ${kind}: clean release and kill -9`, { skip: !url && `SIMBA_TEST_${kind.toUpperCase()}_URL unset` }, async () => {
    const name = uniqueName('handover');
    const c = await simba.open(url, { lease: 2000, name: 'parent' });
    try {
      // clean: the child releases, the parent's waiting lock gets a greater token
      const p = child(HOLDER, { URL: url, NAME: name });
      const [, tok] = (await line(p)).split(' ');
      await assert.rejects(c.tryLock(name), (e) => e.code === 'SIMBA_EBUSY');
      const waiting = c.lock(name, { timeout: 10000 });
      p.stdin.end('go\n');
      const t = await waiting;
      assert.ok(t.token > BigInt(tok));
      assert.equal((await p.exited).code, 0);
      await t.release();
      // crash: the parent gets the lease only after the child's session expired
      const q = child(HOLDER, { URL: url, NAME: name });
      const [, tok2, remaining] = (await line(q)).split(' ');
      const killedAt = Date.now();
      q.kill('SIGKILL');
      await q.exited;
      const t2 = await c.lock(name, { timeout: 15000 });
      assert.ok(t2.token > BigInt(tok2));
      assert.ok(Date.now() - killedAt >= Number(remaining) - 200,
        `took over ${Date.now() - killedAt} ms after the kill, child had ${remaining} ms`);
      await t2.release();
    } finally {
      await c.close();
    }
  });
}

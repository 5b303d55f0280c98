'use strict';
// The binding's checks on one backend (SIMBA_NODE_BACKEND: memory, redis,
// postgres, zookeeper). Run with node --expose-gc (the GC-release check).
const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const { simba, requireBackend, sleep, until, uniqueName } = require('./helper.js');

const KIND = process.env.SIMBA_NODE_BACKEND || 'memory';
const URL = requireBackend(KIND);
const OPTS = { lease: 3000, name: `node-${KIND}` };
const clients = [];

async function client(opts = {}) {
  const c = await simba.open(URL, { ...OPTS, ...opts });
  clients.push(c);
  return c;
}

after(async () => {
  for (const c of clients) await c.close();
});

function rejectsWith(p, code) {
  return assert.rejects(p, (e) => {
    assert.equal(e.code, code, `${e.code}: ${e.message}`);
    assert.ok(e instanceof Error);
    return true;
  });
}

test('open: live session, version, names of every code and unknown values', async () => {
  const c = await client();
  assert.equal(c.status, 'LIVE');
  assert.equal(simba.version, '1.5.0');
  assert.ok(simba.versionNumber >= 0x010300);
  assert.equal(simba.codes.EBUSY, -9);
  assert.equal(simba.codeName(-9), 'EBUSY');
  assert.equal(simba.codeName(-999), 'UNKNOWN');
  assert.equal(simba.reasonName(5), 'TAKEN_OVER');
  assert.equal(simba.reasonName(99), 'UNKNOWN');
  assert.equal(simba.statusName(1), 'LIVE');
  assert.equal(simba.statusName(42), 'UNKNOWN');
  assert.equal(simba.eventName(2), 'SESSION_SUSPENDED');
  assert.equal(simba.eventName(77), 'UNKNOWN');
  assert.equal(simba.strerror(-9).length > 0, true);
  assert.equal(c.foreign, undefined);
  assert.equal(simba._native.foreign(c._h), 0);
});

test('lock, tryLock EBUSY, timeout ETIMEDOUT, tokens rising across holders', async () => {
  const a = await client();
  const b = await client();
  const name = uniqueName('lock');
  const t1 = await a.lock(name, { timeout: 5000 });
  assert.equal(t1.name, name);
  assert.equal(typeof t1.token, 'bigint');
  assert.ok(t1.valid);
  assert.ok(t1.remaining > 0 && t1.remaining <= 3000);
  assert.equal(t1.isLock, true);
  assert.equal(t1.reason, null);
  await rejectsWith(b.tryLock(name), 'SIMBA_EBUSY');
  const t0 = Date.now();
  await rejectsWith(b.lock(name, { timeout: 300 }), 'SIMBA_ETIMEDOUT');
  assert.ok(Date.now() - t0 >= 250);
  // a waiter gets the lease once the holder releases it
  const waiting = b.lock(name, { timeout: 10000 });
  await sleep(50);
  await t1.release();
  const t2 = await waiting;
  assert.ok(t2.token > t1.token, `${t2.token} > ${t1.token}`);
  await t2.release();
  const t3 = await a.lock(name, { timeout: 5000 });
  assert.ok(t3.token > t2.token);
  await t3.release();
});

test('released term stays readable; validity never restored; ensureValid', async () => {
  const c = await client();
  const name = uniqueName('ended');
  const t = await c.lock(name, { timeout: 5000 });
  assert.equal(t.ensureValid(100), t);
  assert.throws(() => t.ensureValid(60000), (e) => e.code === 'SIMBA_EEXPIRED');
  assert.throws(() => t.ensureValid(-1), (e) => e.code === 'SIMBA_EINVAL');
  const token = t.token;
  await t.release();
  await t.release(); // again: a no-op
  for (let i = 0; i < 20; i++) {
    assert.equal(t.valid, false);
    assert.equal(t.remaining, 0);
    await sleep(5);
  }
  assert.equal(t.name, name);
  assert.equal(t.token, token);
  assert.equal(t.reason, 'STOPPED');
  assert.throws(() => t.ensureValid(0), (e) => e.code === 'SIMBA_EEXPIRED');
  // a term revoked by the engine: once invalid, never valid again
  const t2 = await c.lock(name, { timeout: 5000 });
  const seen = [];
  t2.onRevoked((r) => seen.push(r));
  const closing = c.close();
  await closing;
  assert.deepEqual(seen, ['STOPPED']);
  assert.equal(t2.valid, false);
  assert.equal(t2.reason, 'STOPPED');
});

test('election: elected and revoked pair with one token, the next leader has a greater one', async () => {
  const a = await client();
  const b = await client();
  const name = uniqueName('elect');
  const events = [];
  const ea = a.election(name);
  ea.on('elected', (t) => events.push(['a+', t.token]));
  ea.on('revoked', (t, r) => events.push(['a-', t.token, r]));
  await until(() => ea.isLeader, 8000, 'a elected');
  const eb = b.election(name);
  eb.on('elected', (t) => events.push(['b+', t.token]));
  eb.on('revoked', (t, r) => events.push(['b-', t.token, r]));
  await sleep(100);
  assert.equal(eb.isLeader, false);
  await ea.stop();
  await until(() => eb.isLeader, 8000, 'b elected');
  await eb.stop();
  assert.deepEqual(events.map((e) => e[0]), ['a+', 'a-', 'b+', 'b-']);
  assert.equal(events[0][1], events[1][1]);
  assert.equal(events[1][2], 'STOPPED');
  assert.equal(events[2][1], events[3][1]);
  assert.ok(events[2][1] > events[0][1]);
  await ea.stop(); // stopping again resolves
});

test('stepDown: revoked STEPPED_DOWN, then elected again', async () => {
  const c = await client();
  const e = c.election(uniqueName('step'));
  const reasons = [];
  e.on('revoked', (t, r) => reasons.push(r));
  await until(() => e.isLeader, 8000, 'elected');
  const first = e.term.token;
  await e.stepDown(0);
  assert.deepEqual(reasons, ['STEPPED_DOWN']);
  await until(() => e.isLeader, 8000, 're-elected');
  assert.ok(e.term.token > first);
  await e[Symbol.asyncDispose]();
});

test('runWhileLeader: the signal aborts at revocation, the lease is released after the work', async () => {
  const c = await client();
  const other = await client();
  const name = uniqueName('work');
  let started;
  const running = new Promise((r) => { started = r; });
  const log = [];
  const task = c.runWhileLeader(name, async (term, signal) => {
    log.push(['start', term.token, signal.aborted]);
    started();
    await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
    log.push(['aborted', signal.reason.code, signal.reason.reason, term.valid]);
    // handover order: the lease is still held while the work winds down
    await assert.rejects(other.tryLock(name), (e) => e.code === 'SIMBA_EBUSY');
    log.push(['done']);
  });
  await running;
  await task.stop();
  assert.deepEqual(log.map((e) => e[0]), ['start', 'aborted', 'done']);
  assert.equal(log[0][2], false);
  assert.deepEqual(log[1].slice(1), ['SIMBA_EEXPIRED', 'STOPPED', false]);
  const t = await other.tryLock(name);
  assert.ok(t.token > log[0][1]);
  await t.release();
});

test('runWhileLeader: an error of the work is emitted, the task contends again', async () => {
  const c = await client();
  let runs = 0;
  const task = c.runWhileLeader(uniqueName('fail'), async () => {
    runs += 1;
    throw new Error(`boom ${runs}`);
  });
  const errors = [];
  task.on('error', (e) => errors.push(e.message));
  await until(() => runs >= 2, 10000, 'two runs');
  await task.stop();
  assert.ok(errors.includes('boom 1'));
});

test('schedule and joinGroup run on the leader', async () => {
  const c = await client();
  const runs = [];
  const s = c.schedule(uniqueName('sched'), { initialDelay: 0, period: 50 }, async (term) => {
    runs.push(term.token);
  });
  await until(() => runs.length >= 3, 8000, 'three scheduled runs');
  await s.stop();
  assert.equal(new Set(runs).size, 1);
  const group = uniqueName('grp');
  const parts = new Set();
  const g = c.joinGroup(group, 2, async (term, signal) => {
    parts.add(term.name);
    await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
  });
  await until(() => parts.size === 2, 15000, 'both partitions');
  await g.stop();
  assert.deepEqual([...parts].sort(), [`${group}.0`, `${group}.1`]);
  assert.throws(() => c.joinGroup(group, 1.5, () => {}), (e) => e.code === 'ERR_INVALID_ARG_VALUE');
});

test('AbortSignal cancels a lock wait; the name is not left held', async () => {
  const a = await client();
  const b = await client();
  const name = uniqueName('abort');
  const held = await a.lock(name, { timeout: 5000 });
  const ac = new AbortController();
  const t0 = Date.now();
  const waiting = b.lock(name, { signal: ac.signal });
  setTimeout(() => ac.abort(), 100);
  await assert.rejects(waiting, (e) => e.name === 'AbortError');
  assert.ok(Date.now() - t0 < 2000);
  await assert.rejects(b.lock(name, { signal: AbortSignal.abort() }), (e) => e.name === 'AbortError');
  await held.release();
  // the abandoned wait may still win the name: it is released at once
  const t = await a.lock(name, { timeout: 10000 });
  assert.ok(t.token > held.token);
  await t.release();
  const t2 = await b.lock(name, { timeout: 5000, signal: new AbortController().signal });
  await t2.release();
});

test('Symbol.asyncDispose releases a lock term and closes a client (await using)', async () => {
  const c = await client();
  const name = uniqueName('dispose');
  const t = await c.lock(name, { timeout: 5000 });
  await t[Symbol.asyncDispose]();
  assert.equal(t.valid, false);
  const c2 = await simba.open(URL, OPTS);
  const t2 = await c2.tryLock(name);
  await c2[Symbol.asyncDispose]();
  assert.equal(c2.status, 'CLOSED');
  assert.equal(t2.valid, false);
});

test('a lock term collected without release is released (GC)', { skip: !global.gc && 'needs --expose-gc' }, async () => {
  const a = await client();
  const b = await client();
  const name = uniqueName('gc');
  await (async () => {
    const t = await a.lock(name, { timeout: 5000 });
    assert.ok(t.valid);
  })();
  await rejectsWith(b.tryLock(name), 'SIMBA_EBUSY');
  let got = null;
  await until(async () => {
    global.gc();
    await sleep(20);
    try {
      got = await b.tryLock(name);
      return true;
    } catch (e) {
      assert.equal(e.code, 'SIMBA_EBUSY');
      return false;
    }
  }, 8000, 'the collected term released');
  await got.release();
});

test('a loop of lock/release yields to the event loop; a term released before its GC net', async () => {
  // memory:// completes an uncontended lock inside lock() (ADR 0036): at most
  // a few per loop turn, so that timers and other clients still run.
  const a = await client();
  const b = await client();
  const c = await client();
  const mine = uniqueName('yield.a');
  const theirs = uniqueName('yield.b');
  const held = await c.lock(theirs, { timeout: 5000 });
  const waiter = b.lock(theirs, { timeout: 5000 });
  let waited = null;
  waiter.then((t) => { waited = t; }, () => {});
  setTimeout(() => held.release(), 5); // a timer, then b's turn: both need the loop
  let n = 0;
  while (waited === null && n < 200000) {
    const t = await a.lock(mine, { timeout: 5000 });
    await t.release();
    n++;
  }
  assert.ok(waited !== null, `b was served while a looped (${n} cycles)`);
  const last = await a.lock(mine);
  await last.release();
  assert.equal(last.valid, false);
  assert.equal(last.name, mine);
  assert.equal(last.reason, 'STOPPED');
  await waited.release();
  global.gc?.(); // the loop's terms were released before any GC net: nothing released twice
  await sleep(20);
  const again = await a.tryLock(mine);
  await again.release();
});

test('NUL bytes and non-string names are refused', async () => {
  const c = await client();
  await assert.rejects(c.lock('jobs\0tenant'), (e) => e.code === 'SIMBA_EINVAL' && /NUL/.test(e.message));
  await assert.rejects(c.tryLock('jobs\0tenant'), (e) => e.code === 'SIMBA_EINVAL');
  await assert.rejects(c.lock(42), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_ARG_TYPE');
  await assert.rejects(c.lock('bad name'), (e) => e.code === 'SIMBA_EINVAL' && /' '/.test(e.message));
  assert.throws(() => c.election('a\0b'), (e) => e.code === 'SIMBA_EINVAL');
  assert.throws(() => c.election(null), (e) => e.code === 'ERR_INVALID_ARG_TYPE');
  assert.throws(() => c.runWhileLeader('x\0', () => {}), (e) => e.code === 'SIMBA_EINVAL');
  assert.throws(() => c.joinGroup('g\0x', 2, () => {}), (e) => e.code === 'SIMBA_EINVAL');
  assert.throws(() => c.observe('o\0'), (e) => e.code === 'SIMBA_EINVAL');
  assert.throws(() => simba.checkName('a\0b'), (e) => e.code === 'SIMBA_EINVAL');
  await assert.rejects(simba.open('memory://x\0y'), (e) => e.code === 'SIMBA_EINVAL' && /index 10/.test(e.message));
  await assert.rejects(simba.open(URL, { name: 'n\0' }), (e) => e.code === 'SIMBA_EINVAL');
  await assert.rejects(simba.open(URL, { config: { 'session.margin': '1\0' } }), (e) => e.code === 'SIMBA_EINVAL');
  await assert.rejects(simba.open(URL, { bogus: 1 }), (e) => e.code === 'ERR_INVALID_ARG_VALUE');
  await assert.rejects(simba.open(URL, { lease: 1000, renew: 900 }), (e) => e.code === 'SIMBA_EINVAL');
  await assert.rejects(simba.open('nosuch://x'), (e) => e.code === 'SIMBA_EUNSUPPORTED' || e.code === 'SIMBA_EINVAL');
  // "jobs\0tenant" never became "jobs"
  const t = await c.tryLock('jobs');
  await t.release();
});

test('double close, use after close, close inside a callback', async () => {
  const c = await simba.open(URL, OPTS);
  await Promise.all([c.close(), c.close()]);
  await c.close();
  assert.equal(c.status, 'CLOSED');
  await rejectsWith(c.lock('x'), 'SIMBA_ECLOSED');
  await rejectsWith(c.tryLock('x'), 'SIMBA_ECLOSED');
  assert.throws(() => c.election('x'), (e) => e.code === 'SIMBA_ECLOSED');
  assert.throws(() => c.metrics(), (e) => e.code === 'SIMBA_ECLOSED');
  // close from an 'elected' listener: no deadlock, the term is revoked
  const d = await simba.open(URL, OPTS);
  const e = d.election(uniqueName('cb'));
  const revoked = new Promise((r) => e.on('revoked', (t, reason) => r(reason)));
  const closed = new Promise((r) => e.on('elected', () => r(d.close())));
  await closed;
  assert.equal(await revoked, 'STOPPED');
  assert.equal(d.status, 'CLOSED');
});

test('observe shows a handover with a greater token', async () => {
  const a = await client();
  const b = await client({ name: 'node-b' });
  const o = await client({ name: 'node-observer' });
  const name = uniqueName('obs');
  const t1 = await a.lock(name, { timeout: 5000 });
  const changes = [];
  const ac = new AbortController();
  const seen = (async () => {
    try {
      for await (const ch of o.observe(name, { pollMs: 50, signal: ac.signal })) {
        changes.push(ch);
        if (ch.holderClient === 'node-b') break;
      }
    } catch (e) {
      if (e.name !== 'AbortError') throw e;
    }
  })();
  await until(() => changes.length >= 1, 5000, 'the first state');
  await t1.release();
  const t2 = await b.lock(name, { timeout: 5000 });
  await Promise.race([seen, sleep(8000)]);
  ac.abort();
  await seen;
  const first = changes[0];
  const last = changes[changes.length - 1];
  assert.equal(first.holderClient, OPTS.name);
  assert.equal(first.token, t1.token);
  assert.equal(last.holderClient, 'node-b');
  assert.equal(last.token, t2.token);
  assert.ok(last.token > first.token);
  assert.equal(typeof last.holder, 'string');
  await t2.release();
});

test('metrics text after known activity, snapshot, inspect', async () => {
  const c = await client({ name: 'node-metrics' });
  const name = uniqueName('metrics');
  for (let i = 0; i < 3; i++) {
    const t = await c.lock(name, { timeout: 5000 });
    await t.release();
  }
  await until(() => /simba_releases_total\{client="node-metrics"\} 3\b/.test(c.metrics()) &&
    /reason="STOPPED"\} 3\b/.test(c.metrics()), 5000, 'three releases');
  const m = c.metrics();
  assert.match(m, /simba_acquires_total\{client="node-metrics"\} 3\b/);
  assert.match(m, /simba_terms_total\{client="node-metrics"\} 3\b/);
  assert.match(m, /simba_revocations_total\{client="node-metrics",reason="STOPPED"\} 3\b/);
  const s = c.snapshot();
  assert.equal(s.session.status.toUpperCase(), 'LIVE');
  const held = await c.lock(name, { timeout: 5000 });
  const inspected = await c.inspect([name]);
  const lease = inspected.leases.find((l) => l.name === name);
  assert.equal(BigInt(lease.token), held.token);
  assert.equal(lease.holder_client, 'node-metrics');
  await held.release();
  assert.deepEqual(Object.keys(simba.checkConfig({ lease: 3000 })).sort(),
    ['drift', 'lease', 'margin', 'minBackoff', 'renew', 'retryJitter']);
  assert.equal(simba.checkConfig({ lease: 3000 }).renew, 1000);
});

test('session events and the logger reach JavaScript on the main thread', async () => {
  const kinds = [];
  const c = await client({ onEvent: (kind) => kinds.push(kind) });
  assert.ok(kinds.includes('SESSION_OPENED'), kinds.join(','));
  const closed = new Promise((r) => c.on('session', (k) => k === 'SESSION_CLOSED' && r()));
  await c.close();
  await closed;
});

test('worker_threads each get their own client', async () => {
  const { Worker } = require('node:worker_threads');
  const name = uniqueName('worker');
  const src = `
    const { parentPort, workerData } = require('node:worker_threads');
    const simba = require(workerData.lib);
    (async () => {
      const c = await simba.open(workerData.url, { lease: 3000 });
      const t = await c.lock(workerData.name, { timeout: 10000 });
      const token = t.token;
      await t.release();
      await c.close();
      parentPort.postMessage(String(token));
    })().catch((e) => parentPort.postMessage('error ' + e.code + ' ' + e.message));`;
  const lib = require.resolve('../lib/index.js');
  const run = () => new Promise((resolve, reject) => {
    const w = new Worker(src, { eval: true, workerData: { lib, url: URL, name } });
    w.once('message', resolve);
    w.once('error', reject);
  });
  const tokens = await Promise.all([run(), run()]);
  for (const t of tokens) assert.match(t, /^\d+$/);
  assert.notEqual(tokens[0], tokens[1]);
});

// libsimba 1.4: closeAsync, the one close of every handle. Each records its
// callbacks in order; 'D' is the close's promise settling (its done).
test('closeAsync: an election from outside and from its own elected handler', async () => {
  const a = await client();
  const b = await client({ name: 'node-b' });
  const name = uniqueName('close-e');
  const log = [];
  const e = a.election(name);
  e.on('elected', () => log.push('E')).on('revoked', () => log.push('R'));
  await until(() => e.isLeader, 5000, 'elected');
  const p = e.closeAsync();
  assert.equal(e.closeAsync(), p); // again: the same promise
  let dones = 0;
  await p.then(() => { dones += 1; log.push('D'); });
  await sleep(50);
  assert.equal(dones, 1);
  assert.deepEqual(log, ['E', 'D']); // detached: no 'revoked'
  const eb = b.election(name); // the name was released
  await until(() => eb.isLeader, 5000, 'b elected');

  const log2 = [];
  let inner = null;
  const e2 = a.election(uniqueName('close-e-cb'));
  e2.on('elected', () => {
    log2.push('E<');
    inner = e2.closeAsync().then(() => log2.push('D'));
    log2.push('>');
  }).on('revoked', () => log2.push('R'));
  await until(() => inner !== null, 5000, 'elected');
  await inner;
  await sleep(50);
  assert.deepEqual(log2, ['E<', '>', 'D']);
  await eb.closeAsync();
});

test('closeAsync: an earlier stop settles first', async () => {
  const a = await client();
  const e = a.election(uniqueName('close-stop'));
  await until(() => e.isLeader, 5000, 'elected');
  const log = [];
  const s = e.stop().then(() => log.push('S'));
  await e.closeAsync().then(() => log.push('D'));
  await s;
  assert.deepEqual(log, ['S', 'D']);
  await e.closeAsync(); // stopped and closed: resolves at once
});

test('closeAsync: a task from its own work settles after the work', async () => {
  const a = await client();
  const log = [];
  let closed = null;
  const t = a.runWhileLeader(uniqueName('close-t'), async (term, signal) => {
    log.push('W');
    closed = t.closeAsync().then(() => log.push('D'));
    await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
    await sleep(20);
    log.push('X');
  });
  await until(() => closed !== null, 5000, 'the work');
  await closed;
  await sleep(50);
  assert.deepEqual(log, ['W', 'X', 'D']);
});

test('closeAsync: an observer from inside its loop, a lock term after its onRevoked', async () => {
  const a = await client();
  const name = uniqueName('close-o');
  const log = [];
  const ob = a.observe(name, { pollMs: 20 });
  for await (const ch of ob) {
    log.push('O');
    assert.equal(ch.free, true);
    await ob.closeAsync();
    log.push('D');
  }
  assert.deepEqual(log, ['O', 'D']); // the iteration ended
  const it = a.observe(name)[Symbol.asyncIterator]();
  await it.closeAsync();
  assert.deepEqual(await it.next(), { value: undefined, done: true });

  const t = await a.lock(name, { timeout: 5000 });
  const tlog = [];
  t.onRevoked((why) => tlog.push(why));
  const tok = t.token;
  await t.closeAsync().then(() => tlog.push('D'));
  assert.deepEqual(tlog, ['STOPPED', 'D']);
  assert.equal(t.valid, false);
  assert.equal(t.reason, 'STOPPED');
  assert.equal(t.token, tok); // still readable
  const t2 = await a.tryLock(name); // released
  assert.ok(t2.token > tok);
  await t2.closeAsync();
  await t2.closeAsync(); // released: resolves at once
});

test('semaphore: permits counted, tokens rising, another size refused, kind', async () => {
  const a = await client();
  const b = await client();
  const name = uniqueName('sem');
  const s1 = await a.semaphore(name, 2, { timeout: 5000 });
  const s2 = await b.semaphore(name, 2, { timeout: 5000 });
  assert.equal(s1.kind, 'SEMAPHORE');
  assert.equal(simba.kindName(simba._native.termKind(s1._t)), 'SEMAPHORE');
  assert.equal(s1.isLock, true);
  assert.ok(s1.valid && s1.remaining > 0 && s1.name === name);
  assert.ok(s1.token > 0n && s2.token > s1.token, `${s1.token} < ${s2.token}`);
  await rejectsWith(b.trySemaphore(name, 2), 'SIMBA_EBUSY');
  await rejectsWith(a.semaphore(name, 2, { timeout: 200 }), 'SIMBA_ETIMEDOUT');
  await assert.rejects(b.semaphore(name, 5, { timeout: 5000 }), (e) =>
    e.code === 'SIMBA_ESTATE' && e.message === `semaphore ${name} has 2 permits, not 5`);
  await assert.rejects(b.trySemaphore(name, 3), (e) =>
    e.code === 'SIMBA_ESTATE' && e.message.includes('has 2 permits, not 3'));
  const waiting = b.semaphore(name, 2, { timeout: 10000 });
  await sleep(50);
  await s1.release();
  assert.equal(s1.valid, false);
  assert.equal(s1.reason, 'STOPPED');
  assert.equal(s1.kind, 'SEMAPHORE'); // readable once released
  const s3 = await waiting;
  assert.ok(s3.token > s2.token);
  // closeAsync: resolves once the backend answered the release (release() does not wait)
  await s2.closeAsync();
  await s3.closeAsync();
  // the size went with its last holder
  await (await a.trySemaphore(name, 7)).release();
  for (const bad of [0, -1, 1.5, 2 ** 32, '2', undefined]) {
    await assert.rejects(a.semaphore(name, bad), (e) => e.code === 'ERR_INVALID_ARG_VALUE');
  }
  await rejectsWith(a.readLock('a\0b'), 'SIMBA_EINVAL');
  const ac = new AbortController();
  const held = await a.semaphore(name, 1);
  const aborted = b.semaphore(name, 1, { signal: ac.signal });
  ac.abort(new Error('stop waiting'));
  await assert.rejects(aborted, /stop waiting/);
  await held.closeAsync();
  // nothing kept by the abandoned wait: a permit it won is released at once
  await until(async () => {
    try {
      await (await b.trySemaphore(name, 1)).closeAsync();
      return true;
    } catch (e) {
      if (e.code !== 'SIMBA_EBUSY') throw e;
      return false;
    }
  }, 5000, 'the abandoned permit released');
});

test('read/write lock: readers share, writer excludes and is preferred, epoch tokens', async () => {
  const a = await client();
  const b = await client();
  const name = uniqueName('rw');
  const w0 = await a.writeLock(name, { timeout: 5000 });
  assert.equal(w0.kind, 'WRITE');
  assert.equal(simba.kindName(simba._native.termKind(w0._t)), 'WRITE');
  await rejectsWith(b.tryReadLock(name), 'SIMBA_EBUSY');
  await w0.release();
  const r1 = await a.readLock(name, { timeout: 5000 });
  const r2 = await b.tryReadLock(name);
  assert.equal(r1.kind, 'READ');
  assert.equal(r1.token, w0.token); // the write epoch
  assert.equal(r2.token, w0.token);
  await rejectsWith(a.tryWriteLock(name), 'SIMBA_EBUSY');
  const writer = b.writeLock(name, { timeout: 10000 });
  // its intent reaches the backend: new readers wait
  await until(async () => {
    try {
      await (await a.tryReadLock(name)).closeAsync();
      return false;
    } catch (e) {
      if (e.code !== 'SIMBA_EBUSY') throw e;
      return true;
    }
  }, 5000, "the writer's intent");
  await r1.release();
  await r2.release();
  const w1 = await writer;
  assert.ok(w1.token > w0.token);
  const reader = a.readLock(name, { timeout: 10000 });
  await sleep(50);
  await w1.release();
  const r3 = await reader;
  assert.equal(r3.token, w1.token);
  await rejectsWith(b.writeLock(name, { timeout: 200 }), 'SIMBA_ETIMEDOUT');
  await r3.release();
  const lk = await a.lock(name, { timeout: 5000 }); // a lock of the same name is another resource
  assert.equal(lk.kind, 'LOCK');
  await lk.release();
  assert.deepEqual([0, 1, 2, 3, 4, 9].map(simba.kindName),
    ['ELECTION', 'LOCK', 'SEMAPHORE', 'READ', 'WRITE', 'UNKNOWN']);
});

test('a closed client revokes its permits and frees them', async () => {
  const a = await simba.open(URL, OPTS);
  const b = await client();
  const name = uniqueName('permclose');
  const s = await a.semaphore(name, 1, { timeout: 5000 });
  const w = await a.writeLock(name, { timeout: 5000 });
  await a.close();
  assert.equal(s.valid, false);
  assert.equal(w.valid, false);
  await rejectsWith(a.semaphore(name, 1), 'SIMBA_ECLOSED');
  await (await b.semaphore(name, 1, { timeout: 5000 })).release();
  await (await b.readLock(name, { timeout: 5000 })).release();
});

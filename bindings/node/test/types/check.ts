// Type-checked by tsc (ctest node_types, test/types/run.js): every call of
// index.d.ts as a program would make it. Not run.
import * as simba from '../../index';

async function main(): Promise<void> {
  const c: simba.Client = await simba.open('memory://x', {
    lease: 3000, renew: '1s', name: 'types', config: { 'session.margin': 200 },
    logger: (level, line) => void [level.toUpperCase(), line], logLevel: 'warn',
    onEvent: (kind, detail) => void [kind, detail], wait: true, openTimeout: 5000,
  });
  const t: simba.Term = await c.lock('a', { timeout: 100, signal: AbortSignal.timeout(50) });
  const tok: bigint = t.token;
  const name: string = t.name;
  const reason: string | null = t.reason;
  const ok: boolean = t.valid && t.isLock && t.remaining > 0;
  t.ensureValid(10).onRevoked((r: string) => void r);
  const fd: number = t.revokeFd();
  await t.release();
  await t[Symbol.asyncDispose]();
  const closedTerm: Promise<void> = t.closeAsync();
  await closedTerm;
  const t2 = await c.tryLock('b');
  await t2.release();
  const s1: simba.Term = await c.semaphore('s', 3, { timeout: 100, signal: AbortSignal.timeout(50) });
  const kind: simba.TermKind = s1.kind;
  await (await c.trySemaphore('s', 3)).release();
  await (await c.readLock('rw')).release();
  await (await c.writeLock('rw', { timeout: 10 })).release();
  await (await c.tryReadLock('rw')).release();
  await (await c.tryWriteLock('rw')).release();
  const kn: string = simba.kindName(2);
  void [kind, kn];

  const e: simba.Election = c.election('e');
  e.on('elected', (term) => void term.token).on('revoked', (term, why) => void [term.name, why]);
  const leader: boolean = e.isLeader && e.term !== null;
  await e.stepDown(100);
  await e[Symbol.asyncDispose]();
  await e.closeAsync();

  const w: simba.Task = c.runWhileLeader('w', async (term, signal) => {
    term.ensureValid(10);
    return signal.aborted;
  });
  w.on('error', (err) => void err);
  const s = c.schedule('s', { initialDelay: 0, period: 1000 }, (term) => term.valid);
  const g = c.joinGroup('g', 4, async () => undefined);
  await Promise.all([w.stop(), s.stepDown(10), g[Symbol.asyncDispose]()]);
  await Promise.all([w.closeAsync(), s.closeAsync(), g.closeAsync()]);

  for await (const ch of c.observe('a', { pollMs: 100, signal: new AbortController().signal })) {
    const h: string | null = ch.holder;
    const free: boolean = ch.free;
    void [h, free, ch.token + 1n];
    break;
  }
  const ob: simba.Observation = c.observe('a');
  for await (const ch of ob) {
    await ob.closeAsync();
    void ch.holderClient;
  }
  const it = c.observe('b')[Symbol.asyncIterator]();
  await it.closeAsync();
  const text: string = c.metrics() + c.status;
  void [c.snapshot(), await c.inspect(['a'], { timeout: 100 }), await c.inspect()];
  c.on('session', (kind, detail) => void [kind, detail]).unref().ref();
  c.on('warning', (w) => void [w.code, w.errno, w.message]).on('closed', () => undefined);
  await c.waitLive(100);
  await c.close();
  await c[Symbol.asyncDispose]();

  const cfg = simba.checkConfig({ lease: 3000 });
  const n: number = cfg.lease + cfg.renew + cfg.drift + simba.versionNumber + simba.codes.EBUSY;
  const v: string = simba.version + simba.codeName(-9) + simba.reasonName(1) + simba.statusName(1) +
    simba.eventName(1) + simba.strerror(-9) + simba.schema('redis://x');
  simba.checkName('x');
  try {
    await c.lock('z');
  } catch (err) {
    const se = err as simba.SimbaError;
    void [se.code, se.errno];
  }
  void [tok, name, reason, ok, fd, leader, text, n, v];
}
void main;

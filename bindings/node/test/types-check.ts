import * as simba from '../index';
async function main(): Promise<void> {
  const c = await simba.open('memory://x', { lease: 3000 });
  const t = await c.lock('a', { timeout: 100, signal: AbortSignal.timeout(50) });
  const tok: bigint = t.token;
  c.runWhileLeader('w', async (term, signal) => { term.ensureValid(10); return signal.aborted; });
  for await (const ch of c.observe('a')) { const h: string | null = ch.holder; break; }
  await t.release();
  await c.close();
  void tok;
}
void main;

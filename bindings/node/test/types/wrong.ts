// Must NOT type-check (test/types/run.js): proves the check sees the real
// declarations, not `any` (a shim or a missing module would let these pass).
import * as simba from '../../index';

async function wrong(c: simba.Client): Promise<void> {
  const t = await c.lock('a');
  const tok: number = t.token; // ERROR: a bigint
  c.lock(42); // ERROR: a name is a string
  t.release(1); // ERROR: no argument
  const e = c.election('e');
  e.on('elected', (term: simba.Term) => term.nope); // ERROR: no such property
  void [tok, t[Symbol.asyncDispose]().then((x: string) => x)]; // ERROR: resolves void
  e.closeAsync(() => 1); // ERROR: no argument
  void e.closeAsync().then((x: number) => x); // ERROR: resolves void
  c.semaphore('s'); // ERROR: the size is required
  const k: 'LOCK' | 'ELECTION' = t.kind; // ERROR: a permit's kinds too
  void k;
}
void wrong;

'use strict';
// ctest node_types: index.d.ts checked by tsc (SIMBA_TSC: Debian's
// node-typescript 4.8 here), with node-shim.d.ts for what 4.8 and a machine
// without @types/node lack. check.ts must compile; wrong.ts must fail on
// exactly its lines marked ERROR; index.d.ts and lib/index.js export the same
// names.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const TSC = process.env.SIMBA_TSC || 'tsc';
const HERE = __dirname;
const ROOT = path.join(HERE, '..', '..');

function tsc(files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simba-types-'));
  const cfg = path.join(dir, 'tsconfig.json');
  fs.writeFileSync(cfg, JSON.stringify({
    extends: path.join(HERE, 'tsconfig.json'),
    files: files.map((f) => path.join(HERE, f)),
  }));
  const r = spawnSync(TSC, ['-p', cfg, '--pretty', 'false'], { encoding: 'utf8' });
  fs.rmSync(dir, { recursive: true, force: true });
  if (r.error) throw r.error;
  return { status: r.status, out: (r.stdout || '') + (r.stderr || '') };
}

test('check.ts type-checks against index.d.ts', () => {
  const r = tsc(['node-shim.d.ts', '../../index.d.ts', 'check.ts']);
  assert.equal(r.status, 0, r.out);
});

test('wrong.ts fails on exactly its ERROR lines', () => {
  const r = tsc(['node-shim.d.ts', '../../index.d.ts', 'wrong.ts']);
  assert.notEqual(r.status, 0, 'tsc accepted wrong.ts');
  const got = new Set([...r.out.matchAll(/wrong\.ts\((\d+),\d+\): error TS\d+/g)].map((m) => Number(m[1])));
  const want = new Set(fs.readFileSync(path.join(HERE, 'wrong.ts'), 'utf8').split('\n')
    .map((l, i) => (l.includes('// ERROR') ? i + 1 : 0)).filter(Boolean));
  assert.deepEqual([...got].sort(), [...want].sort(), r.out);
});

test('index.d.ts declares what lib/index.js exports', () => {
  const dts = fs.readFileSync(path.join(ROOT, 'index.d.ts'), 'utf8');
  const declared = new Set([...dts.matchAll(/^export (?:declare )?(?:async )?(?:function|const|class|let) (\w+)/gm)]
    .map((m) => m[1]));
  const exported = Object.keys(require(path.join(ROOT, 'lib', 'index.js'))).filter((k) => !k.startsWith('_'));
  assert.deepEqual([...declared].sort(), exported.sort());
});

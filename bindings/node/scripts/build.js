'use strict';
// npm install: build simba.node with node-gyp against this Node's own headers
// (--nodedir: /usr/include/node of nodesource's nodejs or Debian's
// libnode-dev), offline. libsimba: SIMBA_LIBRARY (the path of libsimba.so, or
// its directory; headers from SIMBA_INCLUDE_DIR or ../include next to it), or
// pkg-config simba. `node scripts/build.js --libs` prints the link flags.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

function simbaFlags() {
  const lib = process.env.SIMBA_LIBRARY;
  if (lib) {
    const dir = fs.statSync(lib).isDirectory() ? lib : path.dirname(lib);
    const inc = process.env.SIMBA_INCLUDE_DIR || path.join(dir, '..', 'include');
    return { libs: `-L${dir} -Wl,-rpath,${dir} -lsimba`, cflags: `-I${inc}`, inc };
  }
  try {
    const libs = execFileSync('pkg-config', ['--libs', 'simba']).toString().trim();
    const ldir = execFileSync('pkg-config', ['--variable=libdir', 'simba']).toString().trim();
    const inc = execFileSync('pkg-config', ['--variable=includedir', 'simba']).toString().trim();
    return { libs: `${libs} -Wl,-rpath,${ldir}`, cflags: `-I${inc}`, inc };
  } catch (e) {
    console.error('simba: libsimba not found: install it (pkg-config simba) or set SIMBA_LIBRARY');
    process.exit(1);
  }
}

if (process.argv[2] === '--libs') {
  process.stdout.write(simbaFlags().libs);
  process.exit(0);
}

const f = simbaFlags();
const nodedir = path.resolve(process.execPath, '..', '..');
if (!fs.existsSync(path.join(nodedir, 'include', 'node', 'node_api.h'))) {
  console.error(`simba: Node's headers not found under ${nodedir}/include/node (Debian: apt install libnode-dev)`);
  process.exit(1);
}
const gyp = process.env.npm_config_node_gyp ||
  path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
execFileSync(process.execPath, [gyp, 'rebuild', `--nodedir=${nodedir}`], {
  stdio: 'inherit',
  env: { ...process.env, SIMBA_INCLUDE_DIR: f.inc },
});

'use strict';
// Shared by the node tests: the backend under test (SIMBA_NODE_BACKEND) and
// small waits. A backend whose SIMBA_TEST_*_URL is unset exits 77 (ctest: skipped).
const path = require('node:path');

const simba = require(path.join(__dirname, '..', 'lib', 'index.js'));

const URLS = {
  memory: () => `memory://node-test-${process.pid}`,
  redis: () => process.env.SIMBA_TEST_REDIS_URL,
  postgres: () => process.env.SIMBA_TEST_POSTGRES_URL,
  zookeeper: () => process.env.SIMBA_TEST_ZOOKEEPER_URL,
};

function backendUrl(kind) {
  const f = URLS[kind];
  if (!f) throw new Error(`unknown backend ${kind}`);
  return f() || null;
}

function requireBackend(kind) {
  const url = backendUrl(kind);
  if (!url) {
    console.log(`# SKIP: ${kind}: SIMBA_TEST_${kind.toUpperCase()}_URL is not set`);
    process.exit(77);
  }
  return url;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(pred, ms = 5000, what = 'condition') {
  const end = Date.now() + ms;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

let seq = 0;
function uniqueName(prefix) {
  seq += 1;
  return `${prefix}.${process.pid}.${Date.now() % 100000}.${seq}`;
}

module.exports = { simba, backendUrl, requireBackend, sleep, until, uniqueName };

'use strict';
// simba for Node.js: the JavaScript API over the Node-API addon simba.node
// (src/simba_node.c). Every client runs on Node's own libuv loop (libsimba's
// EXTERNAL mode): callbacks, events and lock results arrive on this thread, in
// the loop's poll phase. Design: docs/adr/0033-node-binding-on-nodes-loop.md.

const { EventEmitter } = require('node:events');
const path = require('node:path');

function loadAddon() {
  const tried = [];
  const candidates = [];
  if (process.env.SIMBA_NODE_ADDON) candidates.push(path.resolve(process.env.SIMBA_NODE_ADDON));
  candidates.push(path.join(__dirname, '..', 'build', 'Release', 'simba.node'));
  for (const file of candidates) {
    try {
      return require(file);
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND' || !String(e.message).includes(file)) throw e;
      tried.push(file);
    }
  }
  const e = new Error(`simba: the addon simba.node was not found (tried ${tried.join(', ')}); ` +
    'build it with npm install (libsimba found by pkg-config or SIMBA_LIBRARY)');
  e.code = 'MODULE_NOT_FOUND';
  throw e;
}

const native = loadAddon();
// native.termRelease's second result (the revoke reason), without a second call
const OUT = new Int32Array(1);
native.setOut(OUT);

// Clients that are open: an open client is closed by close(), never by the GC.
const openClients = new Set();

const LOG_LEVELS = { debug: 0, info: 1, warn: 2, error: 3 };
const DURATIONS = {
  lease: 'session.lease-duration',
  renew: 'session.renew-interval',
  margin: 'session.margin',
  retryJitter: 'session.retry-jitter',
  minBackoff: 'session.min-backoff',
};
const OPTIONS = new Set([...Object.keys(DURATIONS), 'drift', 'name', 'config', 'logger',
  'logLevel', 'onEvent', 'wait', 'openTimeout']);

function simbaError(code, message) {
  const e = new Error(message);
  e.code = 'SIMBA_' + native.codeName(code);
  e.errno = code;
  return e;
}

function argError(message) {
  const e = new TypeError(message);
  e.code = 'ERR_INVALID_ARG_VALUE';
  return e;
}

function noNul(value, what) {
  if (typeof value !== 'string') {
    const e = new TypeError(`The "${what}" argument must be of type string`);
    e.code = 'ERR_INVALID_ARG_TYPE';
    throw e;
  }
  const i = value.indexOf('\0');
  if (i >= 0) throw simbaError(-1, `${what} contains a NUL byte at index ${i}`);
  return value;
}

function libName(fn, value) {
  const n = fn(value);
  return n === 'UNKNOWN' ? `UNKNOWN(${value})` : n;
}

/** The library's name of a revoke reason; 'UNKNOWN(n)' for one it does not define. */
function reasonText(reason) {
  return libName(native.reasonName, reason);
}

function msOf(v, what) {
  if (v === undefined || v === null) return -1;
  if (typeof v !== 'number' || Number.isNaN(v)) throw argError(`${what} must be a number of ms`);
  return v < 0 || v === Infinity ? -1 : Math.floor(v);
}

// A semaphore's size: the C ABI's uint32_t, >= 1 (checked here, not wrapped).
function permitsOf(n) {
  if (!Number.isInteger(n) || n < 1 || n > 0xffffffff) {
    throw argError(`permits must be an integer 1..4294967295, not ${String(n)}`);
  }
  return n;
}

// Configuration keys and values of open()'s options.
function configPairs(options) {
  const keys = [];
  const values = [];
  for (const k of Object.keys(options)) {
    if (!OPTIONS.has(k)) throw argError(`simba.open: unknown option '${k}'`);
  }
  for (const [opt, key] of Object.entries(DURATIONS)) {
    const v = options[opt];
    if (v === undefined) continue;
    keys.push(key);
    values.push(typeof v === 'number' ? `${Math.floor(v)}ms` : noNul(v, `option ${opt}`));
  }
  if (options.drift !== undefined) {
    keys.push('session.drift');
    values.push(String(options.drift));
  }
  if (options.name !== undefined) {
    keys.push('client.name');
    values.push(noNul(options.name, 'option name'));
  }
  for (const [k, v] of Object.entries(options.config || {})) {
    noNul(k, 'configuration key');
    if (k === 'loop.mode' || k.startsWith('callback.')) {
      throw argError(`simba.open: '${k}' is fixed by the binding (EXTERNAL mode on Node's loop)`);
    }
    keys.push(k);
    values.push(noNul(String(v), 'configuration value'));
  }
  return [keys, values];
}

// Terms kept past a loop turn get a GC safety net (native.termNet: a
// finalizer that drops the term's reference); terms released before never pay
// for one (ADR 0036). Until then `young` holds them, so none is collected
// without its net.
let young = [];
let sweepQueued = false;
function sweepYoung() {
  sweepQueued = false;
  const terms = young;
  young = [];
  for (const t of terms) if (t._t !== null && t._net === null) t._net = native.termNet(t._t);
}

const EEXPIRED = -3; // SIMBA_EEXPIRED
const RESOLVED = Promise.resolve(); // what release() returns: nothing to wait for

/** A period of ownership of a lease: a lock's, a permit's or an election's. */
class Term {
  constructor(ext, client, isLock, name, kind) {
    this._t = ext; // null once released
    this._c = client;
    this._net = null;
    this._isLock = isLock;
    this._kind = kind; // simba_term_kind's name, known from the call that made the term
    this._name = name; // cached: immutable
    this._token = undefined;
    this._reason = 0; // the revoke reason at release
    if (young.push(this) === 1 && !sweepQueued) {
      sweepQueued = true;
      setImmediate(sweepYoung);
    }
  }
  get name() {
    if (this._name === undefined) this._name = native.termName(this._t);
    return this._name;
  }
  /** The fencing token (bigint): strictly increasing across terms of a name. */
  get token() {
    if (this._token === undefined) this._token = native.termToken(this._t);
    return this._token;
  }
  get valid() { return this._t !== null && native.termValid(this._t); }
  /** ms left before the local deadline; 0 once ended. */
  get remaining() { return this._t === null ? 0 : native.termRemaining(this._t); }
  /** null while not revoked, else the library's name ('STOPPED', 'TAKEN_OVER', ...). */
  get reason() {
    const r = this._t === null ? this._reason : native.termReason(this._t);
    return r === 0 ? null : reasonText(r);
  }
  /** True for a term this program releases: a lock's or a permit's. */
  get isLock() { return this._isLock; }
  /** 'ELECTION', 'LOCK', 'SEMAPHORE', 'READ' or 'WRITE' (simba_term_kind). */
  get kind() { return this._kind; }
  /** Throws SIMBA_EEXPIRED unless the term stays valid for more than minMs. */
  ensureValid(minMs = 0) {
    if (this._t === null) {
      if (minMs < 0) throw simbaError(-1, 'ensureValid: negative minimum');
      throw simbaError(EEXPIRED, 'the term was released');
    }
    native.termEnsureValid(this._t, minMs);
    return this;
  }
  /** fn(reason) runs once, when the term is revoked. */
  onRevoked(fn) {
    if (typeof fn !== 'function') throw argError('onRevoked needs a function');
    if (this._t === null) throw simbaError(-6, 'the term was released');
    native.termOnRevoked(this._t, this._c._h, (r) => fn(reasonText(r)));
  }
  revokeFd() { return this._t === null ? -1 : native.termRevokeFd(this._t); }
  /** Release a lock: revoke the term and release the lease with its token
   *  (sent at once; the library resends a failed release, ADR 0030). A no-op
   *  on a released term. */
  release() {
    try {
      const t = this._t;
      if (t === null) return RESOLVED;
      if (!this._isLock) throw simbaError(-1, 'release: not a lock term');
      // what stays readable once the reference is gone
      if (this._name === undefined) this._name = native.termName(t);
      this._t = null;
      const want = this._token === undefined;
      const tok = native.termRelease(t, this._c._h, this._net, want);
      if (want) this._token = tok;
      this._reason = OUT[0];
      return RESOLVED;
    } catch (e) {
      return Promise.reject(e);
    }
  }
  /** Drop this term without waiting (libsimba 1.4, simba_term_close_async):
   *  a lock term not released yet is released (revoked STOPPED, the lease
   *  released with its token), and the promise resolves once the backend
   *  answered and every onRevoked function ran; any other term resolves after
   *  the callbacks already queued for it. Callable from any callback. The term
   *  stays readable as a released one (valid false); again: resolves at once. */
  closeAsync() {
    const t = this._t;
    if (t === null || this._c._closed) return this.release();
    if (this._name === undefined) this._name = native.termName(t);
    return new Promise((resolve, reject) => {
      this._t = null;
      this._token = native.termCloseAsync(t, this._c._h, this._net, (err) => (err ? reject(err) : resolve()));
      this._reason = OUT[0];
    });
  }
  [Symbol.asyncDispose]() {
    return this._isLock ? this.release() : Promise.resolve();
  }
  toString() { return `Term(${this.name}, token ${this.token}, ${this.valid ? 'valid' : 'ended'})`; }
}

function stopPromise(start) {
  return new Promise((resolve, reject) => {
    start((err) => (err ? reject(err) : resolve()));
  });
}

// closeAsync of an election, task or observer handle (libsimba 1.4): resolves
// in the close's done, the handle's last callback; at once when there is
// nothing left to close (its stop completed, or the client closed).
function closePromise(client, h) {
  return new Promise((resolve, reject) => {
    if (client._closed || !native.closeAsync(h, (err) => (err ? reject(err) : resolve()))) resolve();
  });
}

/** An election: 'elected' (term) and 'revoked' (term, reason) events. */
class Election extends EventEmitter {
  constructor(client, name) {
    super();
    this.name = name;
    this.term = null;
    this._c = client;
    this._stopped = null;
    this._closing = null;
    this._h = native.electionStart(client._h, name, (kind, ext, reason) => {
      const term = new Term(ext, client, false, name, 'ELECTION');
      if (kind === 1) {
        this.term = term;
        this.emit('elected', term);
      } else {
        if (this.term && this.term.token === term.token) this.term = null;
        this.emit('revoked', term, reasonText(reason));
      }
    });
  }
  get isLeader() { return this.term !== null && this.term.valid; }
  /** Revoke the term (STOPPED), release the lease, stop contending. */
  stop() {
    if (!this._stopped) {
      this._stopped = this._c._closed ? Promise.resolve()
        : stopPromise((done) => native.stop(this._h, done));
    }
    return this._stopped;
  }
  /** Release the lease (STEPPED_DOWN) and do not contend for cooldownMs. */
  stepDown(cooldownMs) {
    return stopPromise((done) => native.stepDown(this._h, cooldownMs, done));
  }
  /** Close without waiting, from anywhere ('elected' and 'revoked' handlers
   *  included): stop as stop() does unless stopped already; no event is
   *  emitted once this returns (not even the 'revoked' of the term it stops).
   *  Resolves after the election's last callback (an earlier stop's or
   *  step-down's included): the name is released then. Again: the same promise. */
  closeAsync() {
    if (!this._closing) this._closing = closePromise(this._c, this._h);
    return this._closing;
  }
  [Symbol.asyncDispose]() { return this.stop(); }
}

/** Leader work (runWhileLeader, schedule, joinGroup); 'error' when the work throws. */
class Task extends EventEmitter {
  constructor(client, kind, name, a, b, fn) {
    super();
    if (typeof fn !== 'function') throw argError('leader work must be a function');
    this.name = name;
    this._c = client;
    this._stopped = null;
    this._closing = null;
    this._aborts = new Map();
    // (id, term, done) starts a run; (id, null, null): its term was revoked.
    this._h = native.taskStart(client._h, kind, name, a, b, (id, ext, done) => {
      if (ext === null) {
        const abort = this._aborts.get(id);
        if (abort) abort();
        return;
      }
      const term = new Term(ext, client, false, kind === 2 ? undefined : name, 'ELECTION');
      const ac = new AbortController();
      const abort = (fallback) => {
        if (ac.signal.aborted) return;
        const reason = term.reason || fallback || 'STOPPED';
        const e = simbaError(-3, `the term of ${term.name} (token ${term.token}) was revoked: ${reason}`);
        e.reason = reason;
        ac.abort(e);
      };
      this._aborts.set(id, abort);
      if (!term.valid) abort('DEADLINE_PASSED');
      let p;
      try {
        p = Promise.resolve(fn(term, ac.signal));
      } catch (e) {
        p = Promise.reject(e);
      }
      const end = () => {
        this._aborts.delete(id);
        done();
      };
      p.then(end, (err) => {
        end();
        if (!(ac.signal.aborted && err === ac.signal.reason)) this.emit('error', err);
      });
    });
  }
  stop() {
    if (!this._stopped) {
      this._stopped = this._c._closed ? Promise.resolve()
        : stopPromise((done) => native.stop(this._h, done));
    }
    return this._stopped;
  }
  stepDown(cooldownMs) {
    return stopPromise((done) => native.stepDown(this._h, cooldownMs, done));
  }
  /** Close without waiting, from anywhere (the task's own work included):
   *  stop as stop() does unless stopped already; resolves once every run of
   *  the work settled and the lease was handed over, after the task's last
   *  callback. Again: the same promise. */
  closeAsync() {
    if (!this._closing) this._closing = closePromise(this._c, this._h);
    return this._closing;
  }
  [Symbol.asyncDispose]() { return this.stop(); }
}

/** One client: one session on one backend. Emits 'session' (kind, detail). */
class Client extends EventEmitter {
  constructor(url, options) {
    super();
    noNul(url, 'backend URL');
    const [keys, values] = configPairs(options);
    const logger = options.logger;
    if (logger !== undefined && typeof logger !== 'function') throw argError('logger must be a function');
    const level = LOG_LEVELS[options.logLevel || 'info'];
    if (level === undefined) throw argError(`unknown logLevel '${options.logLevel}'`);
    const onEvent = options.onEvent;
    this._closed = false;
    this._closing = null;
    this._ops = new Set();
    this._waits = 0;
    this._lockId = 0;
    this._locks = new Map();
    this._abandoned = new Set();
    this._unrefd = false;
    this._h = native.open(url, keys, values, (kind, type, detail) => {
      let d;
      try { d = JSON.parse(detail); } catch (e) { d = { raw: detail }; }
      if (onEvent) onEvent(kind, d);
      this.emit('session', kind, d);
    }, logger ? (lv, line) => logger(['debug', 'info', 'warn', 'error'][lv] || String(lv), line) : null,
    level, this, (id, err, ext) => this._onLock(id, err, ext));
    openClients.add(this);
  }

  _check() {
    if (this._closed) throw simbaError(-6, 'the client is closed');
  }

  _op(p) {
    this._ops.add(p);
    const drop = () => this._ops.delete(p);
    p.then(drop, drop);
    return p;
  }

  /** 'OPENING', 'LIVE', 'SUSPENDED' or 'CLOSED'. */
  get status() { return libName(native.statusName, native.status(this._h)); }

  /** Resolves once the session is live (rejects SIMBA_ETIMEDOUT). */
  waitLive(timeoutMs) {
    try {
      this._check();
      return this._op(native.waitLive(this._h, msOf(timeoutMs, 'timeout')));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Acquire a lock, waiting up to timeout ms (none: without bound); an
   *  AbortSignal ends the wait with its reason. */
  lock(name, options) {
    try {
      this._check();
      const timeout = options == null ? undefined : options.timeout;
      const signal = options == null ? undefined : options.signal;
      if (signal && signal.aborted) throw signal.reason;
      const id = ++this._lockId;
      // a result the library has at once (memory://) comes back from the call
      const ext = native.lock(this._h, name, msOf(timeout, 'timeout'), id);
      if (ext !== undefined) return Promise.resolve(new Term(ext, this, true, name, 'LOCK'));
      return this._wait(id, signal, name, 'LOCK');
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** A permit of semaphore name of `permits` permits (libsimba 1.5), waiting
   *  up to timeout ms; rejects SIMBA_ESTATE when the semaphore has another
   *  size ("semaphore NAME has N permits, not M"). */
  semaphore(name, permits, options) {
    return this._permit(1, permits, 'SEMAPHORE', name, options);
  }

  /** Read/write lock name, shared (libsimba 1.5): waits while a writer holds
   *  or waits for it; its token is the name's write epoch. */
  readLock(name, options) { return this._permit(2, 1, 'READ', name, options); }

  /** Read/write lock name, exclusive (libsimba 1.5); no upgrade from a read. */
  writeLock(name, options) { return this._permit(2, 2, 'WRITE', name, options); }

  /** One attempt at a permit: SIMBA_EBUSY when every permit is held. */
  trySemaphore(name, permits) { return this._tryPermit(1, permits, 'SEMAPHORE', name); }

  /** One attempt: SIMBA_EBUSY while a writer holds or waits for it. */
  tryReadLock(name) { return this._tryPermit(2, 1, 'READ', name); }

  /** One attempt: SIMBA_EBUSY while anyone holds it (leaves no intent). */
  tryWriteLock(name) { return this._tryPermit(2, 2, 'WRITE', name); }

  _permit(what, arg, kind, name, options) {
    try {
      this._check();
      const timeout = options == null ? undefined : options.timeout;
      const signal = options == null ? undefined : options.signal;
      if (signal && signal.aborted) throw signal.reason;
      if (what === 1) permitsOf(arg);
      const id = ++this._lockId;
      const ext = native.permit(this._h, name, what, arg, msOf(timeout, 'timeout'), id);
      if (ext !== undefined) return Promise.resolve(new Term(ext, this, true, name, kind));
      return this._wait(id, signal, name, kind);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  _tryPermit(what, arg, kind, name) {
    try {
      this._check();
      if (what === 1) permitsOf(arg);
      const p = native.tryPermit(this._h, name, what, arg);
      return this._op(p.then((ext) => new Term(ext, this, true, name, kind)));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  // A lock or permit result to come through _onLock.
  _wait(id, signal, name, kind) {
    return new Promise((resolve, reject) => {
      const w = { resolve, reject, signal, onAbort: null, name, kind };
      this._locks.set(id, w);
      this._waitStart();
      if (signal) {
        w.onAbort = () => {
          if (!this._locks.delete(id)) return;
          this._abandoned.add(id);
          this._waitEnd();
          reject(signal.reason);
        };
        signal.addEventListener('abort', w.onAbort, { once: true });
      }
    });
  }

  // Every lock result: (id, err, term).
  _onLock(id, err, ext) {
    const w = this._locks.get(id);
    if (!w) {
      // the wait was abandoned (AbortSignal): release what it won at once
      this._abandoned.delete(id);
      if (ext) native.termRelease(ext, this._h, null, false);
      return;
    }
    this._locks.delete(id);
    this._waitEnd();
    if (w.onAbort) w.signal.removeEventListener('abort', w.onAbort);
    if (err) w.reject(err);
    else w.resolve(new Term(ext, this, true, w.name, w.kind));
  }

  _waitStart() {
    if (++this._waits === 1 && this._unrefd) native.pending(this._h, 1);
  }

  _waitEnd() {
    if (--this._waits === 0 && this._unrefd && !this._closed) native.pending(this._h, 0);
  }

  /** One attempt: the term, or SIMBA_EBUSY when someone holds the name. */
  tryLock(name) {
    try {
      this._check();
      return this._op(native.tryLock(this._h, name).then((ext) => new Term(ext, this, true, name, 'LOCK')));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Contend for name: an Election emitting 'elected' and 'revoked'. */
  election(name) {
    this._check();
    return new Election(this, name);
  }

  /** While leader of name, run await fn(term, signal); the signal aborts at
   *  revocation, and the lease is released after fn settled (handover order). */
  runWhileLeader(name, fn) {
    this._check();
    return new Task(this, 0, name, 0, 0, fn);
  }

  /** While leader of name: fn(term, signal) after initialDelay, then every period ms. */
  schedule(name, { initialDelay = 0, period } = {}, fn) {
    this._check();
    return new Task(this, 1, name, msOf(initialDelay, 'initialDelay'), msOf(period, 'period'), fn);
  }

  /** Join the partition group: fn(term, signal) for each partition led (term.name 'group.K'). */
  joinGroup(group, partitions, fn) {
    this._check();
    if (!Number.isInteger(partitions)) throw argError('partitions must be an integer');
    return new Task(this, 2, group, partitions, 0, fn);
  }

  /** for await (const change of client.observe(name)): who holds name.
   *  closeAsync() (on the iterable or its iterator; also from inside the loop
   *  body) ends the iteration and resolves after the observer's last callback. */
  observe(name, { pollMs = 0, signal } = {}) {
    this._check();
    native.checkName(name);
    const client = this;
    const closers = [];
    return {
      closeAsync() {
        return Promise.all(closers.map((close) => close())).then(() => undefined);
      },
      [Symbol.asyncIterator]() {
        const queue = [];
        let wake = null;
        let done = false;
        let failure = null;
        let closing = null;
        const h = native.observeStart(client._h, name, pollMs, (n, holder, holderClient, token) => {
          queue.push({ name: n, holder, holderClient, token, free: holder === null });
          if (wake) wake();
        });
        // every end (return(), closeAsync(), abort, the client's close) closes
        // the observer with simba_observer_close_async
        const finish = () => {
          if (closing) return closing;
          done = true;
          closing = closePromise(client, h);
          if (signal) signal.removeEventListener('abort', onAbort);
          if (wake) wake();
          return closing;
        };
        closers.push(finish);
        const onAbort = () => {
          failure = signal.reason;
          finish();
        };
        if (signal) {
          if (signal.aborted) onAbort();
          else signal.addEventListener('abort', onAbort, { once: true });
        }
        client.once('closed', finish);
        return {
          async next() {
            for (;;) {
              if (queue.length) return { value: queue.shift(), done: false };
              if (failure) {
                const f = failure;
                failure = null;
                throw f;
              }
              if (done) return { value: undefined, done: true };
              await new Promise((r) => { wake = () => { wake = null; r(); }; });
            }
          },
          async return() {
            finish();
            return { value: undefined, done: true };
          },
          closeAsync: finish,
          [Symbol.asyncIterator]() { return this; },
        };
      },
    };
  }

  /** The Prometheus text of the client's metrics. */
  metrics() {
    this._check();
    return native.metrics(this._h);
  }

  /** The client's snapshot (session, elections, locks, counters), parsed. */
  snapshot() {
    this._check();
    return JSON.parse(native.snapshot(this._h));
  }

  /** What the backend holds (one read outside the session), parsed. */
  inspect(names = null, { timeout = 5000 } = {}) {
    try {
      this._check();
      return this._op(native.inspect(this._h, names, timeout).then(JSON.parse));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Do not keep the process alive while idle (no lock wait pending). */
  unref() {
    this._unrefd = true;
    native.pending(this._h, this._waits);
    native.setRef(this._h, false);
    return this;
  }

  ref() {
    this._unrefd = false;
    native.setRef(this._h, true);
    return this;
  }

  /** Close: revoke every term (STOPPED), release the leases, end the session.
   *  libsimba 1.5: without blocking the loop (simba_client_close_async); it
   *  resolves once the client is freed, also when the backend never confirmed
   *  the close (then a 'warning' is emitted: the leases free at the session's
   *  expiry). libsimba 1.4: simba_client_close() blocks the JS thread. */
  close() {
    if (!this._closing) {
      this._closed = true;
      this._closing = (async () => {
        await Promise.allSettled([...this._ops]);
        await new Promise((r) => setImmediate(r)); // outside any callback of this client
        let err = 0;
        try {
          err = await new Promise((resolve) => {
            if (!native.close(this._h, resolve)) resolve(0);
          });
        } finally {
          openClients.delete(this);
          if (err !== 0) this._unconfirmed(err);
          this.emit('closed');
        }
      })();
    }
    return this._closing;
  }

  // A close the backend did not confirm (ETIMEDOUT, EBACKEND): not an error of
  // the caller's, who cannot act on it, so a warning, not a rejection.
  _unconfirmed(err) {
    const w = simbaError(err, `the backend did not confirm the close (${native.codeName(err)}): ` +
      'its leases free when the session expires');
    w.name = 'SimbaCloseWarning';
    if (this.listenerCount('warning') > 0) this.emit('warning', w);
    else process.emitWarning(w);
  }

  get closed() { return this._closed; }

  [Symbol.asyncDispose]() { return this.close(); }
}

/** Open a client; by default resolves once its session is live. */
async function open(url, options = {}) {
  const c = new Client(url, options);
  if (options.wait !== false) {
    try {
      await c.waitLive(options.openTimeout === undefined ? 10000 : options.openTimeout);
    } catch (e) {
      await c.close();
      throw e;
    }
  }
  return c;
}

/** The library's configuration rules applied to open()'s options: resolved durations. */
function checkConfig(options = {}) {
  const [keys, values] = configPairs(options);
  return native.checkConfig(keys, values);
}

const codes = {};
for (let n = -1; native.codeName(n) !== 'UNKNOWN'; n--) codes[native.codeName(n)] = n;

module.exports = {
  open,
  Client,
  Term,
  Election,
  Task,
  version: native.versionString(),
  versionNumber: native.version(),
  codes,
  codeName: (n) => native.codeName(n),
  reasonName: (n) => native.reasonName(n),
  statusName: (n) => native.statusName(n),
  eventName: (n) => native.eventName(n),
  kindName: (n) => native.kindName(n),
  strerror: (n) => native.strerror(n),
  checkName: (name) => native.checkName(name),
  schema: (url) => native.schema(url),
  checkConfig,
  _native: native,
};

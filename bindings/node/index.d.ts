// Type declarations of simba for Node.js (lib/index.js).
import { EventEmitter } from 'node:events';

export interface OpenOptions {
  lease?: number | string; renew?: number | string; margin?: number | string;
  retryJitter?: number | string; minBackoff?: number | string; drift?: number;
  name?: string;
  config?: Record<string, string | number>;
  logger?: (level: 'debug' | 'info' | 'warn' | 'error', line: string) => void;
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
  onEvent?: (kind: string, detail: object) => void;
  /** resolve once the session is live (default true) */
  wait?: boolean;
  openTimeout?: number;
}

export interface SimbaError extends Error { code: string; errno: number; }

/** What a term is a term of (simba_term_kind). */
export type TermKind = 'ELECTION' | 'LOCK' | 'SEMAPHORE' | 'READ' | 'WRITE';

export interface AcquireOptions { timeout?: number; signal?: AbortSignal; }

export class Term {
  readonly name: string;
  readonly token: bigint;
  readonly valid: boolean;
  readonly remaining: number;
  readonly reason: string | null;
  /** True for a term this program releases: a lock's or a permit's. */
  readonly isLock: boolean;
  readonly kind: TermKind;
  ensureValid(minMs?: number): this;
  onRevoked(fn: (reason: string) => void): void;
  revokeFd(): number;
  release(): Promise<void>;
  /** Drop the term without waiting (libsimba 1.4): a lock term is released and
   *  the promise resolves after its onRevoked functions and the backend's
   *  answer; the term then reads as released. */
  closeAsync(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export class Election extends EventEmitter {
  readonly name: string;
  readonly term: Term | null;
  readonly isLeader: boolean;
  stop(): Promise<void>;
  stepDown(cooldownMs: number): Promise<void>;
  /** Close without waiting, from anywhere (libsimba 1.4): no event after the
   *  call; resolves after the election's last callback (name released). */
  closeAsync(): Promise<void>;
  on(event: 'elected', fn: (term: Term) => void): this;
  on(event: 'revoked', fn: (term: Term, reason: string) => void): this;
  [Symbol.asyncDispose](): Promise<void>;
}

export type Work = (term: Term, signal: AbortSignal) => unknown | Promise<unknown>;

export class Task extends EventEmitter {
  readonly name: string;
  stop(): Promise<void>;
  stepDown(cooldownMs: number): Promise<void>;
  /** Close without waiting, from anywhere (its own work included, libsimba
   *  1.4): resolves once every run of the work settled, the task's last callback. */
  closeAsync(): Promise<void>;
  on(event: 'error', fn: (err: unknown) => void): this;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface HolderChange {
  name: string; holder: string | null; holderClient: string | null; token: bigint; free: boolean;
}

/** What client.observe() returns: an async iterable of changes that closes. */
export interface Observation extends AsyncIterable<HolderChange> {
  /** End the iteration; resolves after the observer's last callback (libsimba 1.4). */
  closeAsync(): Promise<void>;
  [Symbol.asyncIterator](): AsyncIterator<HolderChange> & { closeAsync(): Promise<void> };
}

export class Client extends EventEmitter {
  readonly status: string;
  readonly closed: boolean;
  waitLive(timeoutMs?: number): Promise<void>;
  lock(name: string, options?: AcquireOptions): Promise<Term>;
  tryLock(name: string): Promise<Term>;
  /** A permit of semaphore `name` of `permits` permits (libsimba 1.5); rejects
   *  SIMBA_ESTATE when the semaphore has another size. */
  semaphore(name: string, permits: number, options?: AcquireOptions): Promise<Term>;
  trySemaphore(name: string, permits: number): Promise<Term>;
  /** Read/write lock `name`, shared (libsimba 1.5); writers are preferred. */
  readLock(name: string, options?: AcquireOptions): Promise<Term>;
  /** Read/write lock `name`, exclusive (libsimba 1.5). */
  writeLock(name: string, options?: AcquireOptions): Promise<Term>;
  tryReadLock(name: string): Promise<Term>;
  tryWriteLock(name: string): Promise<Term>;
  election(name: string): Election;
  runWhileLeader(name: string, fn: Work): Task;
  schedule(name: string, options: { initialDelay?: number; period: number }, fn: Work): Task;
  joinGroup(group: string, partitions: number, fn: Work): Task;
  observe(name: string, options?: { pollMs?: number; signal?: AbortSignal }): Observation;
  metrics(): string;
  snapshot(): any;
  inspect(names?: string[] | null, options?: { timeout?: number }): Promise<any>;
  unref(): this;
  ref(): this;
  /** Resolves once the client is freed; libsimba 1.5 does not block the loop
   *  meanwhile. A close the backend did not confirm by the session's local
   *  deadline still resolves, after a 'warning' (SIMBA_ETIMEDOUT, SIMBA_EBACKEND;
   *  process.emitWarning() without a listener): its leases free at the session's expiry. */
  close(): Promise<void>;
  on(event: 'session', fn: (kind: string, detail: object) => void): this;
  on(event: 'warning', fn: (warning: Error & { code: string; errno: number }) => void): this;
  on(event: 'closed', fn: () => void): this;
  [Symbol.asyncDispose](): Promise<void>;
}

export function open(url: string, options?: OpenOptions): Promise<Client>;
export function checkConfig(options?: OpenOptions): {
  lease: number; renew: number; margin: number; retryJitter: number; minBackoff: number; drift: number;
};
export const version: string;
export const versionNumber: number;
export const codes: Record<string, number>;
export function codeName(code: number): string;
export function reasonName(reason: number): string;
export function statusName(status: number): string;
export function eventName(event: number): string;
/** The library's name of a term kind (libsimba 1.5); 'UNKNOWN' for one it does not define. */
export function kindName(kind: number): string;
export function strerror(code: number): string;
export function checkName(name: string): void;
export function schema(url: string): string;

/* simba_bench: Simba's figures against the backend's own round trip, measured
 * in one run against one server (issues 3 and 4, "Benchmarks";
 * docs/benchmarks.md).
 *
 *   simba_bench --url redis://127.0.0.1:PORT [--json FILE] [options]
 *   simba_bench --url postgresql://USER@127.0.0.1:PORT/DB [--json FILE] [options]
 *   simba_bench --url zookeeper://127.0.0.1:PORT [--json FILE] [options]
 *   simba_bench --url etcd://127.0.0.1:PORT [--json FILE] [options]
 *
 * Phases, in this order:
 *   setup      a Simba client opens and closes in a child process, so that what
 *              Simba creates on first use (PostgreSQL: its schema) exists before
 *              the raw baseline uses it
 *   raw        the raw round trip: the backend's client library, synchronous, one
 *              request in flight (raw_backend.h): a ping, a read and the
 *              baseline, a durable write shaped like Simba's operations (Redis:
 *              a script doing HGET + HSET; PostgreSQL: Simba's own acquire and
 *              release statements; ZooKeeper: create, then delete, of an
 *              ephemeral node)
 *   handover   two forked processes contend for one election; the leader steps
 *              down, and the time from just before its simba_election_step_down()
 *              to the other process's on_elected is measured, both read on
 *              CLOCK_MONOTONIC (shared by the processes of one machine) and passed
 *              through a pipe
 *   cycle      an uncontended simba_lock_acquire + simba_lock_release, blocking;
 *              plus two diagnostics: the same cycle on memory:// (no I/O: the
 *              library's own overhead) and simba_client_snapshot_json (a
 *              call without a backend call: run on the caller's thread when the
 *              loop thread is idle, ADR 0014; a hop to it and back otherwise)
 *   permits    (issue 41) an uncontended simba_semaphore_acquire (size 4),
 *              simba_rwlock_acquire READ and WRITE, each + simba_lock_release,
 *              in blocks taken in turns with the raw baseline and the lock
 *              cycle (bench_arms_alternating); then the same on memory://
 *   leases     for each count (1, 100, 10000): one client starts that many
 *              elections (the time until every on_elected arrived is "time to
 *              elect"), then, in a quiet window of whole renew periods with only
 *              that client connected, counts the backend calls on the server
 *              (Redis: INFO commandstats; PostgreSQL: pg_stat_user_functions;
 *              ZooKeeper: the packets of the srvr four-letter word) and
 *              reads the process's VmRSS; the client's snapshot counters are the
 *              cross-check
 *   durability (--also-durability VALUE) the raw baseline and the cycle again
 *              with the server's durability setting changed (Redis appendfsync),
 *              then restored
 * Every Simba figure is reported as a multiple of the raw baseline of this run.
 * Public ABI only (simba.h), plus the backend's client for the raw baseline.
 *
 * This file: main() and the order of the phases. The options are in
 * bench_options.c, the phases' measurements in bench_scenarios.c and
 * bench_handover.c, the table and the JSON in bench_report.c; simba_bench.h
 * is what they share.
 */
#define _POSIX_C_SOURCE 200809L
#include "simba_bench.h"

#include <signal.h>
#include <simba.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cycle.h"
#include "bench_util.h"
#include "raw_backend.h"

/* The raw baselines this program knows, by URL scheme: those built
 * (bench/CMakeLists.txt), one line each. */
static const raw_backend_t *const kRawBackends[] = {
#ifdef SIMBA_BENCH_RAW_REDIS
    &raw_redis_backend,
#endif
#ifdef SIMBA_BENCH_RAW_POSTGRES
    &raw_postgres_backend,
#endif
#ifdef SIMBA_BENCH_RAW_ZOOKEEPER
    &raw_zookeeper_backend,
#endif
#ifdef SIMBA_BENCH_RAW_ETCD
    &raw_etcd_backend,
#endif
};

static int has_scheme(const char *url, const char *scheme) {
  const size_t n = scheme ? strlen(scheme) : 0;
  return n && strncmp(url, scheme, n) == 0 && strncmp(url + n, "://", 3) == 0;
}

static const raw_backend_t *raw_backend_for_url(const char *url) {
  for (size_t i = 0; i < sizeof kRawBackends / sizeof kRawBackends[0]; i++) {
    if (has_scheme(url, kRawBackends[i]->scheme) || has_scheme(url, kRawBackends[i]->alt_scheme)) {
      return kRawBackends[i];
    }
  }
  return NULL;
}

/* The load averages, as /proc/loadavg has them; "?" if unreadable. */
static void loadavg(char *buf, size_t len) {
  snprintf(buf, len, "?");
  FILE *f = fopen("/proc/loadavg", "r");
  if (!f) return;
  if (fgets(buf, (int)len, f)) buf[strcspn(buf, "\n")] = '\0';
  fclose(f);
}

/* The URL without user:password, nor the value of a password= parameter
 * (libpq's URIs take one), nor the password of auth=digest:user:password
 * (ZooKeeper's). */
static void redact(const char *url, char *out, size_t len) {
  const char *scheme_end = strstr(url, "://");
  const char *at = scheme_end ? strchr(scheme_end + 3, '@') : NULL;
  if (at) {
    snprintf(out, len, "%.*s***@%s", (int)(scheme_end + 3 - url), url, at + 1);
  } else {
    snprintf(out, len, "%s", url);
  }
  char *q = strchr(out, '?');
  for (char *p = q; p; p = strchr(p + 1, '&')) {
    char *v;
    if (strncmp(p + 1, "password=", 9) == 0) {
      v = p + 10;
    } else if (strncmp(p + 1, "auth=", 5) == 0) {
      const size_t alen = strcspn(p + 6, "&");
      char *colon = NULL; /* the last ':' of the value: the password follows */
      for (char *x = p + 6; x < p + 6 + alen; x++) {
        if (*x == ':') colon = x;
      }
      if (!colon) continue;
      v = colon + 1;
    } else {
      continue;
    }
    const size_t vlen = strcspn(v, "&");
    memmove(v + 3, v + vlen, strlen(v + vlen) + 1);
    memcpy(v, "***", 3);
  }
}

/* ------------------------------------------------------------------------- */
/* The phases, in order */

static int raw_phase(const options_t *o, const raw_backend_t *rb, raw_conn_t *rc, results_t *r) {
  progress("raw round trips: %d of each kind", o->rtt_iterations);
  if (run_raw(rb, rc, o->rtt_iterations, o->warmup, 0, &r->raw) != 0) return -1;
  const int idle_n = o->handovers < 200 ? o->handovers : 200;
  if (idle_n > 0 && run_raw_idle(rb, rc, idle_n, o->handover_gap_ms, &r->raw_idle) != 0) return -1;
  return 0;
}

static void handover_phase(const options_t *o, const raw_backend_t *rb, results_t *r) {
  progress("handover: %d between two processes", o->handovers);
  run_handover(o, &r->handover);
  if (r->handover.failed) progress("handover failed: %s", r->handover.error);
  if (rb->native_handover && o->handovers > 0) {
    progress("native lock handover: %d between two processes", o->handovers);
    bench_samples_t s;
    bench_samples_init(&s);
    if (rb->native_handover(o->url, o->handovers, o->handover_gap_ms, &s, r->native_error,
                            sizeof r->native_error) == 0) {
      r->native_handover = bench_summarize(&s);
      r->native_handover_done = 1;
    } else {
      progress("native lock handover failed: %s", r->native_error);
    }
    bench_samples_free(&s);
  }
}

/* The cycle of a client with a host executor (a one-thread queue, as a
 * binding's callback thread) against the default pool's, alternating in
 * blocks, on memory:// and on the backend (issue 36). */
static void host_executor_diagnostic(const options_t *o, results_t *r) {
  bench_queue_executor_t *q = bench_queue_executor_start();
  if (!q) {
    progress("cannot start the host executor's thread");
    return;
  }
  const char *urls[2] = {"memory://simba-bench-host", o->url};
  bench_stats_t *outs[2][2] = {{&r->host_memory_pool, &r->host_memory_host},
                               {&r->host_remote_pool, &r->host_remote_host}};
  int rc = 0;
  for (int i = 0; i < 2 && rc == 0; i++) {
    progress("diagnostic: lock cycle with a host executor against the default pool, %s",
             i ? "on the backend" : "on memory://");
    simba_client_t *pool = open_client(urls[i], o, "bench-pool");
    simba_client_t *host = open_client_with(urls[i], o, "bench-host-executor", NULL, NULL,
                                            bench_queue_executor_submit, q);
    rc = bench_cycles_alternating(pool, "bench-cycle-pool", host, "bench-cycle-host",
                                  o->cycle_iterations, o->warmup, 50, outs[i][0], outs[i][1]);
    simba_client_close(host);
    simba_client_close(pool);
  }
  bench_queue_executor_stop(q);
  r->host_executor_done = rc == 0;
}

/* The diagnostics of the cycle: on memory://, with loop.mode=external, and
 * with a host executor. */
static void cycle_diagnostics(const options_t *o, results_t *r) {
  progress("diagnostic: lock cycle on memory://");
  simba_client_t *m = open_client("memory://simba-bench", o, "bench-memory");
  cycle_result_t mc;
  run_cycle(m, NULL, NULL, o->cycle_iterations, o->warmup, 0, &mc);
  r->memory_cycle = mc.cycle;
  simba_client_close(m);
  /* The same cycle in EXTERNAL mode, where a blocking call on the host's
   * thread runs the loop itself until its answer came: the bound on what a
   * THREAD-mode caller that borrows the idle loop (ADR 0014) can get. */
  progress("diagnostic: lock cycle with loop.mode=external");
  simba_client_t *x = open_client_kv(o->url, o, "bench-cycle-external", "loop.mode", "external");
  cycle_result_t xc;
  run_cycle(x, NULL, NULL, o->cycle_iterations, o->warmup, 0, &xc);
  r->external_cycle = xc.cycle;
  simba_client_close(x);
  r->diagnostics_done = 1;
  host_executor_diagnostic(o, r);
}

static int cycle_phase(const options_t *o, const raw_backend_t *rb, raw_conn_t *rc,
                       int64_t settle_ms, results_t *r) {
  progress("lock cycle: %d acquire+release", o->cycle_iterations);
  simba_client_t *c = open_client(o->url, o, "bench-cycle");
  run_cycle(c, rb, rc, o->cycle_iterations, o->warmup, settle_ms, &r->cycle);
  progress("lock cycle: %d, alternating with the baseline in blocks of %d", o->cycle_iterations,
           kPairBlock);
  if (run_cycle_paired(c, rb, rc, o->cycle_iterations, o->warmup, &r->paired_cycle,
                       &r->paired_rtt) != 0) {
    return -1;
  }
  r->paired_done = 1;
  if (rb->native_lock_cycle) {
    progress("lock cycle: %d, alternating with the native lock's cycle in blocks of %d",
             o->cycle_iterations, kPairBlock);
    if (run_native_cycle_paired(c, rb, rc, o->cycle_iterations, o->warmup, &r->native_simba_cycle,
                                &r->native_cycle, r->native_error, sizeof r->native_error) == 0) {
      r->native_cycle_done = 1;
    } else {
      progress("native lock cycle failed: %s", r->native_error);
    }
  }
  r->snapshot_hop = run_snapshot_hop(c, o->cycle_iterations);
  simba_client_close(c);
  cycle_diagnostics(o, r);
  return 0;
}

static void permits_phase(const options_t *o, const raw_backend_t *rb, raw_conn_t *rc,
                          int64_t settle_ms, results_t *r) {
  progress("permit cycles: %d of each kind, with the baseline and the lock cycle, in turns",
           o->permit_iterations);
  if (run_permit_cycles(o, rb, rc, settle_ms, &r->permits) != 0) progress("permit cycles failed");
}

static void leases_phase(const options_t *o, const raw_backend_t *rb, raw_conn_t *rc,
                         results_t *r) {
  for (int i = 0; i < o->n_lease_counts; i++) {
    progress("leases: %d held by one client (window of %d renew periods)", o->lease_counts[i],
             o->window_periods);
    lease_result_t *x = &r->leases[r->n_leases++];
    run_leases(o, rb, rc, o->lease_counts[i], 0, x);
    if (x->ok) continue;
    progress("leases %d: %s", o->lease_counts[i], x->error);
    if (o->slow_renew_ms <= o->renew_ms) continue;
    /* The same count at a longer renew interval: does the client get there
     * when its calls have more time? Reported apart, never judged. */
    options_t slow = *o;
    slow.renew_ms = o->slow_renew_ms;
    slow.lease_ms = 3 * o->slow_renew_ms;
    if (slow.window_periods > 2) slow.window_periods = 2;
    progress("leases: %d again with lease %lld ms, renew %lld ms (window of %d periods)",
             o->lease_counts[i], (long long)slow.lease_ms, (long long)slow.renew_ms,
             slow.window_periods);
    x = &r->leases[r->n_leases++];
    run_leases(&slow, rb, rc, o->lease_counts[i], 1, x);
    if (!x->ok)
      progress("leases %d (renew %lld ms): %s", o->lease_counts[i], (long long)slow.renew_ms,
               x->error);
  }
}

/* --also-durability: the raw baseline and the cycle again with the server's
 * durability setting changed, then restored. */
static void durability_phase(const options_t *o, const raw_backend_t *rb, raw_conn_t *rc,
                             int64_t settle_ms, results_t *r) {
  char err[256];
  char previous[64];
  if (rb->set_durability(rc, o->also_durability, previous, sizeof previous, err, sizeof err) != 0) {
    progress("cannot change the durability: %s", err);
    return;
  }
  char version[64];
  rb->describe(rc, version, sizeof version, r->alt_durability, sizeof r->alt_durability);
  progress("with %s: raw round trips and lock cycle", r->alt_durability);
  if (run_raw(rb, rc, o->rtt_iterations, o->warmup, 0, &r->alt_raw) == 0) {
    simba_client_t *c = open_client(o->url, o, "bench-cycle-alt");
    run_cycle(c, rb, rc, o->cycle_iterations, o->warmup, settle_ms, &r->alt_cycle);
    simba_client_close(c);
    r->alt_done = 1;
  }
  char ignored[64];
  if (rb->set_durability(rc, previous, ignored, sizeof ignored, err, sizeof err) != 0) {
    progress("cannot restore the durability: %s", err);
  }
}

/* The baseline again at the end, to see whether the machine drifted. */
static void raw_end_phase(const options_t *o, const raw_backend_t *rb, raw_conn_t *rc,
                          results_t *r) {
  char version[64], now_durability[96];
  rb->describe(rc, version, sizeof version, now_durability, sizeof now_durability);
  if (strcmp(now_durability, r->durability) != 0) {
    progress("the server's durability is now '%s', not '%s'", now_durability, r->durability);
  }
  progress("raw round trips again, to see whether the machine drifted");
  run_raw(rb, rc, o->rtt_iterations, o->warmup, RAW_OP_WRITE, &r->raw_end);
}

/* The raw baseline's connection, prepared, and the server described in *r. */
static raw_conn_t *connect_raw(const options_t *o, const raw_backend_t *rb, results_t *r) {
  char err[256];
  raw_conn_t *rc = rb->connect(o->url, err, sizeof err);
  if (!rc) {
    fprintf(stderr, "simba_bench: %s\n", err);
    return NULL;
  }
  if (rb->prepare(rc, err, sizeof err) != 0) {
    fprintf(stderr, "simba_bench: %s\n", err);
    return NULL;
  }
  rb->describe(rc, r->server_version, sizeof r->server_version, r->durability,
               sizeof r->durability);
  progress("%s, %s (%s)", r->url_redacted, r->server_version, r->durability);
  return rc;
}

/* Every phase asked for, in order. 0, or 1 when one could not go on. */
static int run_phases(const options_t *o, const raw_backend_t *rb, raw_conn_t *rc, results_t *r) {
  /* A lagging count holds every call made more than this long ago: the lag,
   * then one renew period for the client's next keep-alive to publish it. */
  const int64_t settle_ms = rb->counts_lag_ms > 0 ? rb->counts_lag_ms + o->renew_ms + 250 : 0;
  if (o->run_raw && raw_phase(o, rb, rc, r) != 0) return 1;
  /* Before any client exists in this process: fork() copies no thread. */
  if (o->run_handover) handover_phase(o, rb, r);
  if (o->run_cycle && cycle_phase(o, rb, rc, settle_ms, r) != 0) return 1;
  if (o->run_permits && o->permit_iterations > 0) permits_phase(o, rb, rc, settle_ms, r);
  if (o->run_leases) leases_phase(o, rb, rc, r);
  if (o->also_durability && rb->set_durability) durability_phase(o, rb, rc, settle_ms, r);
  if (o->run_raw) raw_end_phase(o, rb, rc, r);
  return 0;
}

int main(int argc, char **argv) {
  options_t o;
  if (parse_options(argc, argv, &o) != 0) return 2;
  signal(SIGPIPE, SIG_IGN);
  if ((simba_version() >> 16) != SIMBA_VERSION_MAJOR) {
    fprintf(stderr, "simba_bench: header %d.x and library %s disagree\n", SIMBA_VERSION_MAJOR,
            simba_version_string());
    return 1;
  }
  const raw_backend_t *rb = raw_backend_for_url(o.url);
  if (!rb) {
    fprintf(stderr, "simba_bench: no raw baseline for the scheme of %s\n", o.url);
    return 2;
  }
  add_namespace(&o, rb);
  static results_t r; /* large: not on the stack */
  bench_utc_now(r.date, sizeof r.date);
  bench_machine(r.machine, sizeof r.machine, &r.cpus);
  redact(o.url, r.url_redacted, sizeof r.url_redacted);
  loadavg(r.loadavg_start, sizeof r.loadavg_start);

  /* Before any client exists in this process (fork() copies no thread). */
  if (setup_backend(&o) != 0) return 1;

  raw_conn_t *rc = connect_raw(&o, rb, &r);
  if (!rc) return 1;
  if (run_phases(&o, rb, rc, &r) != 0) return 1;
  rb->disconnect(rc);
  loadavg(r.loadavg_end, sizeof r.loadavg_end);

  print_report(&o, rb, &r);
  if (o.json_path && write_json(o.json_path, &o, rb, &r) != 0) return 1;
  if (o.json_path) progress("wrote %s", o.json_path);
  return r.handover.failed ? 1 : 0;
}

/* simba_bench's measured scenarios, except the two-process handover
 * (bench_handover.c): the raw round trips, the lock cycle and its
 * diagnostics, and N leases held by one client; plus the helpers they share
 * (simba_bench.h). Public ABI only, plus the backend's client for the raw
 * baseline (raw_backend.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <simba.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "simba_bench.h"

/* ------------------------------------------------------------------------- */
/* Helpers */

void die(const char *what, int rc) {
  fprintf(stderr, "simba_bench: %s: %s (%s)\n", what, simba_strerror(rc), simba_last_error());
  exit(1);
}

void progress(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("simba_bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

simba_client_t *open_client_kv(const char *url, const options_t *o, const char *name,
                               const char *key, const char *value) {
  return open_client_with(url, o, name, key, value, NULL, NULL);
}

simba_client_t *open_client_with(const char *url, const options_t *o, const char *name,
                                 const char *key, const char *value, simba_submit_fn submit,
                                 void *submit_ctx) {
  simba_config_t *cfg = NULL;
  int rc = simba_config_new(&cfg);
  if (rc == SIMBA_OK) rc = simba_config_set_ms(cfg, "session.lease-duration", o->lease_ms);
  if (rc == SIMBA_OK) rc = simba_config_set_ms(cfg, "session.renew-interval", o->renew_ms);
  if (rc == SIMBA_OK) rc = simba_config_set(cfg, "client.name", name);
  if (rc == SIMBA_OK && key) rc = simba_config_set(cfg, key, value);
  if (rc == SIMBA_OK && submit) rc = simba_config_set_executor(cfg, submit, submit_ctx);
  if (rc != SIMBA_OK) die("config", rc);
  simba_client_t *c = NULL;
  rc = simba_client_open(&c, url, cfg);
  simba_config_free(cfg);
  if (rc != SIMBA_OK) die("simba_client_open", rc);
  rc = simba_client_wait_live(c, 10000);
  if (rc != SIMBA_OK) die("simba_client_wait_live", rc);
  return c;
}

simba_client_t *open_client(const char *url, const options_t *o, const char *name) {
  return open_client_kv(url, o, name, NULL, NULL);
}

/* The integer after "key": in a snapshot; -1 if absent. */
static int64_t json_int(const char *json, const char *key) {
  char pat[96];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = json ? strstr(json, pat) : NULL;
  return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

typedef struct counters {
  int64_t keep_alives, acquires, releases, terms, renew_period_ms, sessions_opened;
} counters_t;

static counters_t snapshot_counters(simba_client_t *c) {
  counters_t k = {-1, -1, -1, -1, -1, -1};
  char *s = simba_client_snapshot_json(c);
  if (!s) return k;
  k.sessions_opened = json_int(s, "sessions_opened");
  k.keep_alives = json_int(s, "keep_alives");
  k.acquires = json_int(s, "acquires");
  k.releases = json_int(s, "releases");
  k.terms = json_int(s, "terms");
  k.renew_period_ms = json_int(s, "renew_period_ms");
  simba_free(s);
  return k;
}

int setup_backend(const options_t *o) {
  fflush(NULL);
  const pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "simba_bench: fork: %s\n", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    simba_client_t *c = open_client(o->url, o, "bench-setup"); /* exits on failure */
    simba_client_close(c);
    _exit(0);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "simba_bench: the setup client failed\n");
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------------- */
/* Phase: raw round trips */

int run_raw(const raw_backend_t *rb, raw_conn_t *rc, int iterations, int warmup, int first_op,
            raw_result_t *out) {
  char err[256];
  for (int op = first_op; op < RAW_OP_COUNT; op++) {
    bench_samples_t s;
    bench_samples_init(&s);
    uint64_t calls0 = 0, usec0 = 0, calls1 = 0, usec1 = 0;
    out->server_usec[op] = NAN;
    /* write_pairs: a sample is the mean of two round trips (acquire, release). */
    const int trips = op == RAW_OP_WRITE && rb->write_pairs ? 2 : 1;
    for (int i = 0; i < warmup + iterations; i++) {
      if (i == warmup && rb->server_calls(rc, &calls0, &usec0, err, sizeof err) != 0) calls0 = 0;
      int64_t t0 = bench_now_ns();
      for (int k = 0; k < trips; k++) {
        if (rb->round_trip(rc, op, err, sizeof err) != 0) {
          fprintf(stderr, "simba_bench: raw round trip: %s\n", err);
          bench_samples_free(&s);
          return -1;
        }
      }
      int64_t t1 = bench_now_ns();
      if (i >= warmup) bench_samples_push(&s, (t1 - t0) / trips);
    }
    if (op != RAW_OP_PING && !rb->calls_untimed &&
        rb->server_calls(rc, &calls1, &usec1, err, sizeof err) == 0 && calls1 > calls0) {
      out->server_usec[op] = (double)(usec1 - usec0) / (double)(calls1 - calls0);
    }
    out->op[op] = bench_summarize(&s);
    bench_samples_free(&s);
  }
  out->done = 1;
  return 0;
}

/* The baseline round trip after the same idle pause as between two handovers:
 * what one round trip costs when every thread involved was asleep. One round
 * trip per sample, also with write_pairs (then acquires and releases alternate). */
int run_raw_idle(const raw_backend_t *rb, raw_conn_t *rc, int iterations, int gap_ms,
                 bench_stats_t *out) {
  char err[256];
  bench_samples_t s;
  bench_samples_init(&s);
  for (int i = 0; i < iterations; i++) {
    bench_sleep_ns((int64_t)gap_ms * 1000000);
    int64_t t0 = bench_now_ns();
    if (rb->round_trip(rc, RAW_OP_WRITE, err, sizeof err) != 0) {
      fprintf(stderr, "simba_bench: raw round trip: %s\n", err);
      bench_samples_free(&s);
      return -1;
    }
    bench_samples_push(&s, bench_now_ns() - t0);
  }
  *out = bench_summarize(&s);
  bench_samples_free(&s);
  return 0;
}

/* ------------------------------------------------------------------------- */
/* Phase: lock acquire + release cycle (and the diagnostics) */

/* settle_ms: with a backend whose counts lag (counts_lag_ms), how long to wait
 * before each reading of the server's count so that it holds every call made
 * before the wait: the calls are then counted over the warmup too. */
void run_cycle(simba_client_t *c, const raw_backend_t *rb, raw_conn_t *rc, int iterations,
               int warmup, int64_t settle_ms, cycle_result_t *out) {
  bench_samples_t cyc, acq, rel;
  bench_samples_init(&cyc);
  bench_samples_init(&acq);
  bench_samples_init(&rel);
  memset(out, 0, sizeof *out);
  uint64_t calls0 = 0, calls1 = 0, usec = 0, usec0 = 0;
  char err[256];
  counters_t k0 = {0, 0, 0, 0, 0, 0};
  const int lag = rb && rb->counts_lag_ms > 0;
  const int counted = lag ? warmup + iterations : iterations;
  if (lag) {
    bench_sleep_ns(settle_ms * 1000000);
    if (rb->server_calls(rc, &calls0, &usec0, err, sizeof err) != 0) calls0 = 0;
  }
  for (int i = 0; i < warmup + iterations; i++) {
    if (i == warmup) {
      k0 = snapshot_counters(c);
      if (rb && !lag && rb->server_calls(rc, &calls0, &usec0, err, sizeof err) != 0) calls0 = 0;
    }
    simba_term_t *t = NULL;
    const int64_t t0 = bench_now_ns();
    int r = simba_lock_acquire(&t, c, "bench-cycle", 5000);
    const int64_t t1 = bench_now_ns();
    if (r != SIMBA_OK) die("simba_lock_acquire", r);
    r = simba_lock_release(t);
    const int64_t t2 = bench_now_ns();
    if (r != SIMBA_OK) die("simba_lock_release", r);
    if (i >= warmup) {
      bench_samples_push(&cyc, t2 - t0);
      bench_samples_push(&acq, t1 - t0);
      bench_samples_push(&rel, t2 - t1);
    }
  }
  counters_t k1 = snapshot_counters(c);
  if (lag) bench_sleep_ns(settle_ms * 1000000);
  if (rb && rb->server_calls(rc, &calls1, &usec, err, sizeof err) == 0 && calls0 > 0) {
    out->server_calls_per_cycle = (double)(calls1 - calls0) / counted;
    out->server_usec_per_call = calls1 > calls0 && !rb->calls_untimed
                                    ? (double)(usec - usec0) / (double)(calls1 - calls0)
                                    : NAN;
  } else {
    out->server_calls_per_cycle = out->server_usec_per_call = NAN;
  }
  out->acquires = k1.acquires - k0.acquires;
  out->releases = k1.releases - k0.releases;
  out->terms = k1.terms - k0.terms;
  out->cycle = bench_summarize(&cyc);
  out->acquire = bench_summarize(&acq);
  out->release = bench_summarize(&rel);
  out->done = 1;
  bench_samples_free(&cyc);
  bench_samples_free(&acq);
  bench_samples_free(&rel);
}

/* One lock cycle of Simba's (acquire, then release, of "bench-cycle"), in ns. */
static int64_t simba_lock_cycle_ns(simba_client_t *c) {
  const int64_t ns = bench_lock_cycle_ns(c, "bench-cycle");
  if (ns < 0) exit(1); /* after bench_lock_cycle_ns's message */
  return ns;
}

/* The baseline round trip, one sample (the mean of a pair with write_pairs). */
typedef struct raw_arm {
  const raw_backend_t *rb;
  raw_conn_t *rc;
} raw_arm_t;

static int64_t raw_arm_run(void *ctx, int measured) {
  (void)measured;
  const raw_arm_t *a = ctx;
  char err[256];
  const int trips = a->rb->write_pairs ? 2 : 1;
  const int64_t t0 = bench_now_ns();
  for (int k = 0; k < trips; k++) {
    if (a->rb->round_trip(a->rc, RAW_OP_WRITE, err, sizeof err) != 0) {
      fprintf(stderr, "simba_bench: raw round trip: %s\n", err);
      return -1;
    }
  }
  return (bench_now_ns() - t0) / trips;
}

/* Why in blocks: kPairBlock, simba_bench.h. */
int run_cycle_paired(simba_client_t *c, const raw_backend_t *rb, raw_conn_t *rc, int iterations,
                     int warmup, bench_stats_t *cycle_out, bench_stats_t *rtt_out) {
  bench_samples_t cyc, rtt;
  bench_samples_init(&cyc);
  bench_samples_init(&rtt);
  raw_arm_t raw = {rb, rc};
  int rc_out = 0;
  for (int done = 0; done < warmup + iterations && rc_out == 0; done += kPairBlock) {
    const int measured = done >= warmup;
    for (int i = 0; i < kPairBlock; i++) {
      const int64_t ns = raw_arm_run(&raw, measured);
      if (ns < 0) {
        rc_out = -1;
        break;
      }
      if (measured) bench_samples_push(&rtt, ns);
    }
    for (int i = 0; i < kPairBlock && rc_out == 0; i++) {
      const int64_t ns = simba_lock_cycle_ns(c);
      if (measured) bench_samples_push(&cyc, ns);
    }
  }
  *cycle_out = bench_summarize(&cyc);
  *rtt_out = bench_summarize(&rtt);
  bench_samples_free(&cyc);
  bench_samples_free(&rtt);
  return rc_out;
}

/* The server's own lock cycle (lock + unlock on the baseline's connection) and
 * Simba's lock cycle in alternating blocks of kPairBlock, as above. */
int run_native_cycle_paired(simba_client_t *c, const raw_backend_t *rb, raw_conn_t *rc,
                            int iterations, int warmup, bench_stats_t *simba_out,
                            bench_stats_t *native_out, char *err, size_t errlen) {
  bench_samples_t cyc, nat;
  bench_samples_init(&cyc);
  bench_samples_init(&nat);
  int rc_out = 0;
  for (int done = 0; done < warmup + iterations && rc_out == 0; done += kPairBlock) {
    const int measured = done >= warmup;
    for (int i = 0; i < kPairBlock; i++) {
      const int64_t t0 = bench_now_ns();
      if (rb->native_lock_cycle(rc, err, errlen) != 0) {
        rc_out = -1;
        break;
      }
      if (measured) bench_samples_push(&nat, bench_now_ns() - t0);
    }
    for (int i = 0; i < kPairBlock && rc_out == 0; i++) {
      const int64_t ns = simba_lock_cycle_ns(c);
      if (measured) bench_samples_push(&cyc, ns);
    }
  }
  *simba_out = bench_summarize(&cyc);
  *native_out = bench_summarize(&nat);
  bench_samples_free(&cyc);
  bench_samples_free(&nat);
  return rc_out;
}

/* ------------------------------------------------------------------------- */
/* Phase: permit cycles (issue 41) */

/* A cycle of one kind; the acquires' durations go to `acquire`. */
typedef struct kind_arm {
  simba_client_t *c;
  bench_kind_t kind;
  uint32_t permits;
  bench_samples_t acquire;
} kind_arm_t;

static const char *const kKindNames[BENCH_KIND_COUNT] = {"bench-cycle", "bench-semaphore",
                                                         "bench-rwlock", "bench-rwlock"};

/* Cycles per kind whose backend calls are counted. */
enum { kPermitCounted = 100 };

static int64_t kind_arm_run(void *ctx, int measured) {
  kind_arm_t *a = ctx;
  int64_t acq = 0;
  const int64_t ns = bench_acquire_cycle_ns(a->c, a->kind, kKindNames[a->kind], a->permits, &acq);
  if (ns >= 0 && measured) bench_samples_push(&a->acquire, acq);
  return ns;
}

/* Every kind's cycle on client c, with the baseline as arm 0 when rb is not
 * NULL; cycles[k] and acquires[k] (if not NULL) per kind. */
static int permit_arms(simba_client_t *c, const raw_backend_t *rb, raw_conn_t *rc, uint32_t permits,
                       int iterations, int warmup, bench_stats_t *rtt, bench_stats_t *cycles,
                       bench_stats_t *acquires) {
  raw_arm_t raw = {rb, rc};
  kind_arm_t kinds[BENCH_KIND_COUNT];
  bench_arm_t arms[BENCH_KIND_COUNT + 1];
  bench_stats_t outs[BENCH_KIND_COUNT + 1];
  int n = 0;
  if (rb) arms[n++] = (bench_arm_t){raw_arm_run, &raw};
  for (int k = 0; k < BENCH_KIND_COUNT; k++) {
    kinds[k] = (kind_arm_t){c, (bench_kind_t)k, permits, {0}};
    bench_samples_init(&kinds[k].acquire);
    arms[n++] = (bench_arm_t){kind_arm_run, &kinds[k]};
  }
  const int r = bench_arms_alternating(arms, n, iterations, warmup, kPairBlock, outs);
  if (rb) *rtt = outs[0];
  for (int k = 0; k < BENCH_KIND_COUNT; k++) {
    cycles[k] = outs[n - BENCH_KIND_COUNT + k];
    if (acquires) acquires[k] = bench_summarize(&kinds[k].acquire);
    bench_samples_free(&kinds[k].acquire);
  }
  return r;
}

/* The server's count of calls over `n` cycles of each kind alone: how many
 * round trips an operation makes. settle_ms: as for run_cycle (a lagging
 * count then also holds the client's keep-alives of the wait, about
 * settle_ms / renew per kind). */
static void count_permit_calls(simba_client_t *c, const raw_backend_t *rb, raw_conn_t *rc, int n,
                               int64_t settle_ms, permit_result_t *out) {
  char err[256];
  uint64_t calls0 = 0, usec0 = 0;
  bench_sleep_ns(settle_ms * 1000000);
  if (rb->server_calls(rc, &calls0, &usec0, err, sizeof err) != 0) return;
  for (int k = 0; k < BENCH_KIND_COUNT; k++) {
    for (int i = 0; i < n; i++) {
      if (bench_acquire_cycle_ns(c, (bench_kind_t)k, kKindNames[k], out->permits, NULL) < 0) return;
    }
    uint64_t calls1 = 0, usec1 = 0;
    bench_sleep_ns(settle_ms * 1000000);
    if (rb->server_calls(rc, &calls1, &usec1, err, sizeof err) != 0) return;
    out->calls_per_cycle[k] = (double)(calls1 - calls0) / n;
    out->usec_per_call[k] = calls1 > calls0 && !rb->calls_untimed
                                ? (double)(usec1 - usec0) / (double)(calls1 - calls0)
                                : NAN;
    calls0 = calls1;
    usec0 = usec1;
  }
  out->counted = 1;
}

int run_permit_cycles(const options_t *o, const raw_backend_t *rb, raw_conn_t *rc,
                      int64_t settle_ms, permit_result_t *out) {
  memset(out, 0, sizeof *out);
  out->permits = 4;
  simba_client_t *c = open_client(o->url, o, "bench-permits");
  const int r = permit_arms(c, rb, rc, out->permits, o->permit_iterations, o->warmup, &out->rtt,
                            out->cycle, out->acquire);
  if (r == 0) {
    progress("permit cycles: backend calls over %d of each kind alone", kPermitCounted);
    count_permit_calls(c, rb, rc, kPermitCounted, settle_ms, out);
  }
  simba_client_close(c);
  if (r != 0) return -1;
  out->done = 1;
  progress("permit cycles on memory://: %d of each kind, in turns", o->permit_iterations);
  simba_client_t *m = open_client("memory://simba-bench-permits", o, "bench-permits-memory");
  out->memory_done = permit_arms(m, NULL, NULL, out->permits, o->permit_iterations, o->warmup, NULL,
                                 out->memory_cycle, NULL) == 0;
  simba_client_close(m);
  return 0;
}

bench_stats_t run_snapshot_hop(simba_client_t *c, int iterations) {
  bench_samples_t s;
  bench_samples_init(&s);
  for (int i = 0; i < iterations; i++) {
    const int64_t t0 = bench_now_ns();
    char *j = simba_client_snapshot_json(c);
    const int64_t t1 = bench_now_ns();
    if (!j) die("simba_client_snapshot_json", SIMBA_ECLOSED);
    simba_free(j);
    bench_samples_push(&s, t1 - t0);
  }
  bench_stats_t st = bench_summarize(&s);
  bench_samples_free(&s);
  return st;
}

/* ------------------------------------------------------------------------- */
/* Phase: keep-alive and memory with N leases */

/* Terms won and lost by one client's elections. A lease counts as held from
 * its on_elected to its on_revoked; "all held" is the first moment all n were
 * held at once. */
typedef struct elect_ctx {
  int64_t n;
  atomic_int_fast64_t elected, revoked, max_held;
  atomic_int_fast64_t all_held_ns;        /* 0 before */
  atomic_int_fast64_t revoked_before_all; /* terms revoked before that moment */
} elect_ctx_t;

static void count_elected(void *ud, simba_term_t *term) {
  (void)term;
  elect_ctx_t *e = ud;
  const int64_t now = bench_now_ns();
  const int_fast64_t held = atomic_fetch_add(&e->elected, 1) + 1 - atomic_load(&e->revoked);
  int_fast64_t max = atomic_load(&e->max_held);
  while (held > max && !atomic_compare_exchange_weak(&e->max_held, &max, held)) {
  }
  int_fast64_t none = 0;
  if (held >= e->n && atomic_compare_exchange_strong(&e->all_held_ns, &none, now)) {
    atomic_store(&e->revoked_before_all, atomic_load(&e->revoked));
  }
}

static void count_revoked(void *ud, simba_term_t *term, simba_revoke_reason_t reason) {
  (void)term;
  (void)reason;
  elect_ctx_t *e = ud;
  atomic_fetch_add(&e->revoked, 1);
}

/* One run of run_leases(): the client, its elections, and what they counted. */
typedef struct lease_run {
  const options_t *o;
  const raw_backend_t *rb;
  raw_conn_t *rc;
  simba_client_t *c;
  counters_t k_open; /* the client's counters once open */
  elect_ctx_t ec;
  simba_listener_t l; /* counts into ec */
  lease_result_t *out;
} lease_run_t;

/* A keep-alive count window: the server's count and the client's counters at
 * each end, and when they are. */
typedef struct lease_window {
  uint64_t calls0, usec0, calls1, usec1;
  counters_t ka0, ka1;
  int64_t w0, w1;
} lease_window_t;

/* Starts the n elections and waits until all n are held at once. 0, or -1 with
 * out->error set. */
static int elect_all(lease_run_t *lr, int n, simba_election_t **es) {
  const options_t *o = lr->o;
  lease_result_t *out = lr->out;
  const int64_t t0 = bench_now_ns();
  for (int i = 0; i < n; i++) {
    char name[64];
    snprintf(name, sizeof name, "lease-%d-%lld-%06d", n, (long long)o->renew_ms, i);
    int r = simba_election_start(&es[i], lr->c, name, &lr->l);
    if (r != SIMBA_OK) die("simba_election_start", r);
  }
  const int64_t t_started = bench_now_ns();
  const int64_t give_up = t_started + (int64_t)o->elect_timeout_s * 1000000000LL;
  while (atomic_load(&lr->ec.all_held_ns) == 0 && bench_now_ns() < give_up) bench_sleep_ns(200000);
  if (atomic_load(&lr->ec.all_held_ns) == 0) {
    const counters_t k_now = snapshot_counters(lr->c);
    snprintf(out->error, sizeof out->error,
             "never held all %d at once within %d s: at most %lld; %lld terms won, %lld revoked; "
             "%lld new sessions",
             n, o->elect_timeout_s, (long long)atomic_load(&lr->ec.max_held),
             (long long)atomic_load(&lr->ec.elected), (long long)atomic_load(&lr->ec.revoked),
             (long long)(k_now.sessions_opened - lr->k_open.sessions_opened));
    return -1;
  }
  out->start_ms = (double)(t_started - t0) / 1e6;
  out->elect_ms = (double)(atomic_load(&lr->ec.all_held_ns) - t0) / 1e6;
  out->acquires_to_elect = snapshot_counters(lr->c).acquires - lr->k_open.acquires;
  out->sessions_to_elect =
      snapshot_counters(lr->c).sessions_opened - lr->k_open.sessions_opened + 1;
  out->rss_kb = bench_rss_kb();
  out->connected_clients = lr->rb->connected_clients(lr->rc);
  return 0;
}

/* Waits for a keep-alive (the only calls this client makes now that every
 * election is won): the server's count changes from what it was. *calls and
 * *usec: the count after that change. 0, or -1 with out->error set. */
static int await_keep_alive(lease_run_t *lr, int64_t period_ns, uint64_t *calls_out,
                            uint64_t *usec_out) {
  char err[256];
  uint64_t calls = 0, usec = 0;
  if (lr->rb->server_calls(lr->rc, &calls, &usec, err, sizeof err) != 0) {
    snprintf(lr->out->error, sizeof lr->out->error, "%s", err);
    return -1;
  }
  const int64_t wait_until = bench_now_ns() + 3 * period_ns;
  uint64_t c2 = calls;
  while (c2 == calls && bench_now_ns() < wait_until) {
    bench_sleep_ns(1000000);
    if (lr->rb->server_calls(lr->rc, &c2, &usec, err, sizeof err) != 0) break;
  }
  if (c2 == calls) {
    snprintf(lr->out->error, sizeof lr->out->error, "no keep-alive seen within 3 renew periods");
    return -1;
  }
  *calls_out = c2;
  *usec_out = usec;
  return 0;
}

/* Counted at once: a window of whole periods on the clock, starting half a
 * period after a keep-alive. */
static void window_on_clock(lease_run_t *lr, int64_t period_ns, lease_window_t *w) {
  char err[256];
  bench_sleep_ns(period_ns / 2);
  w->ka0 = snapshot_counters(lr->c);
  lr->rb->server_calls(lr->rc, &w->calls0, &w->usec0, err, sizeof err);
  w->w0 = bench_now_ns();
  bench_sleep_ns(period_ns * lr->o->window_periods);
  lr->rb->server_calls(lr->rc, &w->calls1, &w->usec1, err, sizeof err);
  w->w1 = bench_now_ns();
  w->ka1 = snapshot_counters(lr->c);
}

/* Counted late, in batches published at the end of one of the client's
 * statements (only keep-alives now), each holding every earlier call: the
 * window runs from the change just seen (c2, usec) to the first change at
 * least window_periods - 1/2 periods later, so both ends sit just after a
 * keep-alive and every keep-alive inside is counted. The client's own
 * counter is read half a period after each end, away from any keep-alive.
 * 0, or -1 with out->error set. */
static int window_on_count(lease_run_t *lr, int64_t period_ns, uint64_t c2, uint64_t usec,
                           lease_window_t *w) {
  char err[256];
  w->calls0 = c2;
  w->usec0 = usec;
  w->w0 = bench_now_ns();
  bench_sleep_ns(period_ns / 2);
  w->ka0 = snapshot_counters(lr->c);
  bench_sleep_ns(period_ns * (lr->o->window_periods - 1));
  uint64_t mid = 0, mid_usec = 0;
  if (lr->rb->server_calls(lr->rc, &mid, &mid_usec, err, sizeof err) != 0) {
    snprintf(lr->out->error, sizeof lr->out->error, "%s", err);
    return -1;
  }
  w->calls1 = mid;
  const int64_t until = bench_now_ns() + 3 * period_ns;
  while (w->calls1 == mid && bench_now_ns() < until) {
    bench_sleep_ns(1000000);
    if (lr->rb->server_calls(lr->rc, &w->calls1, &w->usec1, err, sizeof err) != 0) break;
  }
  w->w1 = bench_now_ns();
  if (w->calls1 == mid) {
    snprintf(lr->out->error, sizeof lr->out->error,
             "the count did not change within 3 renew periods");
    return -1;
  }
  bench_sleep_ns(period_ns / 2);
  w->ka1 = snapshot_counters(lr->c);
  return 0;
}

/* The keep-alive figures of a window; ok unless a lease was lost after all were held. */
static void window_results(lease_run_t *lr, int n, int64_t period_ns, const lease_window_t *w) {
  lease_result_t *out = lr->out;
  out->window_ms = (double)(w->w1 - w->w0) / 1e6;
  out->periods = (double)(w->w1 - w->w0) / (double)period_ns;
  out->server_calls = w->calls1 - w->calls0;
  out->calls_per_period = (double)out->server_calls / out->periods;
  out->server_usec_per_call = out->server_calls && !lr->rb->calls_untimed
                                  ? (double)(w->usec1 - w->usec0) / (double)out->server_calls
                                  : NAN;
  out->snapshot_keep_alives = w->ka1.keep_alives - w->ka0.keep_alives;
  out->snapshot_acquires = w->ka1.acquires - w->ka0.acquires;
  out->ok = 1;
  if (atomic_load(&lr->ec.revoked) > atomic_load(&lr->ec.revoked_before_all)) {
    out->ok = 0;
    snprintf(out->error, sizeof out->error,
             "held all %d at once after %.1f s, then lost %lld of them by the end of the window", n,
             out->elect_ms / 1e3,
             (long long)(atomic_load(&lr->ec.revoked) - atomic_load(&lr->ec.revoked_before_all)));
  }
}

/* Once all are held: align the window on the keep-alives (wait for one, then
 * start half a period later, so that a window of P whole periods holds exactly
 * P keep-alives when there is one per period), and count. */
static void count_keep_alives(lease_run_t *lr, int n) {
  lease_result_t *out = lr->out;
  counters_t k = snapshot_counters(lr->c);
  out->renew_period_ms = k.renew_period_ms > 0 ? k.renew_period_ms : lr->o->renew_ms;
  const int64_t period_ns = out->renew_period_ms * 1000000;
  uint64_t c2 = 0, usec = 0;
  if (await_keep_alive(lr, period_ns, &c2, &usec) != 0) return;
  lease_window_t w = {0, 0, 0, 0, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}, 0, 0};
  out->period_tolerance = lr->rb->counts_lag_ms == 0 ? 0.05 : 0.1;
  if (lr->rb->counts_lag_ms == 0) {
    window_on_clock(lr, period_ns, &w);
  } else if (window_on_count(lr, period_ns, c2, usec, &w) != 0) {
    return;
  }
  window_results(lr, n, period_ns, &w);
}

void run_leases(const options_t *o, const raw_backend_t *rb, raw_conn_t *rc, int n, int slow,
                lease_result_t *out) {
  memset(out, 0, sizeof *out);
  out->leases = n;
  out->slow = slow;
  out->lease_ms = o->lease_ms;
  out->renew_ms = o->renew_ms;
  out->rss_before_kb = bench_rss_kb();
  char cname[48];
  snprintf(cname, sizeof cname, "bench-leases-%d-%lld", n, (long long)o->renew_ms);
  lease_run_t lr;
  lr.o = o;
  lr.rb = rb;
  lr.rc = rc;
  lr.out = out;
  lr.c = open_client(o->url, o, cname);
  lr.k_open = snapshot_counters(lr.c);
  simba_election_t **es = calloc((size_t)n, sizeof *es);
  if (!es) die("calloc", SIMBA_ENOMEM);
  lr.ec.n = n;
  atomic_init(&lr.ec.elected, 0);
  atomic_init(&lr.ec.revoked, 0);
  atomic_init(&lr.ec.max_held, 0);
  atomic_init(&lr.ec.all_held_ns, 0);
  atomic_init(&lr.ec.revoked_before_all, 0);
  lr.l.on_elected = count_elected;
  lr.l.on_revoked = count_revoked;
  lr.l.ud = &lr.ec;

  if (elect_all(&lr, n, es) == 0) count_keep_alives(&lr, n);

  out->revoked = atomic_load(&lr.ec.revoked);
  out->max_held = atomic_load(&lr.ec.max_held);
  out->sessions_opened = snapshot_counters(lr.c).sessions_opened - lr.k_open.sessions_opened + 1;
  const int64_t tc = bench_now_ns();
  simba_client_close(lr.c);
  out->close_ms = (double)(bench_now_ns() - tc) / 1e6;
  for (int i = 0; i < n; i++) simba_election_free(es[i]);
  free(es);
}

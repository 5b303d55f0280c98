/* simba_bench: Simba's figures against the backend's own round trip, measured
 * in one run against one server (issues 3 and 4, "Benchmarks";
 * docs/benchmarks.md).
 *
 *   simba_bench --url redis://127.0.0.1:PORT [--json FILE] [options]
 *   simba_bench --url postgresql://USER@127.0.0.1:PORT/DB [--json FILE] [options]
 *   simba_bench --url zookeeper://127.0.0.1:PORT [--json FILE] [options]
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
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <simba.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Targets of issue 3. */
#define TARGET_CYCLE_RATIO 1.15   /* cycle p50 <= 1.15 x two raw round trips */
#define TARGET_HANDOVER_RTTS 4.0  /* handover p50 <= 4 raw round trips */
/* Against the server's own lock (raw_backend_t.native_*), issue 21. */
#define TARGET_NATIVE_CYCLE 2.0    /* Simba's cycle p50 <= 2 x the native cycle p50 */
#define TARGET_NATIVE_HANDOVER 2.0 /* Simba's handover p50 <= 2 x the native one */
#define TARGET_KEEPALIVE_LEASES 10000

#define MAX_LEASE_COUNTS 8

/* ------------------------------------------------------------------------- */
/* Options */

typedef struct options {
  char url[1024];
  const char *json_path;
  int rtt_iterations;
  int cycle_iterations;
  int warmup;
  int handovers;
  int handover_gap_ms;
  int handover_cooldown_ms;
  int64_t lease_ms;
  int64_t renew_ms;
  int elect_timeout_s;
  int64_t slow_renew_ms;
  int lease_counts[MAX_LEASE_COUNTS];
  int n_lease_counts;
  int window_periods;
  const char *also_durability;
  int run_raw, run_handover, run_cycle, run_leases;
} options_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: simba_bench [options]\n"
          "  --url URL               backend (default $SIMBA_BENCH_URL, else redis://127.0.0.1:6379):\n"
          "                          redis://..., postgresql://... or zookeeper://...; without\n"
          "                          its namespace (Redis prefix=, PostgreSQL schema=, ZooKeeper\n"
          "                          the chroot path), one unique to this run is added\n"
          "  --json FILE             write the results as JSON to FILE\n"
          "  --rtt-iterations N      raw round trips per kind (default 5000)\n"
          "  --cycle-iterations N    lock acquire+release cycles (default 2000)\n"
          "  --warmup N              unmeasured iterations before each loop (default 200)\n"
          "  --handovers N           handovers between two processes (default 200)\n"
          "  --handover-gap-ms N     pause between handovers (default 25; ZooKeeper: use 100)\n"
          "  --handover-cooldown-ms N  step-down cooldown, < the gap (default 15; ZooKeeper:\n"
          "                          use 80, longer than a handover there)\n"
          "  --lease-duration-ms N   session lease of every client (default 3000)\n"
          "  --renew-interval-ms N   keep-alive period (default 1000)\n"
          "  --lease-counts A,B,...  leases held by one client (default 1,100,10000)\n"
          "  --window-periods N      renew periods per keep-alive count window (default 4)\n"
          "  --elect-timeout-s N     how long one client may take to hold all its leases at\n"
          "                          once (default 30)\n"
          "  --slow-renew-ms N       when a lease count fails at the bench's timing, try it\n"
          "                          again with this renew interval (lease 3x, a window of at\n"
          "                          most 2 periods), reported apart; 0: never (default 5000)\n"
          "  --also-durability V     also measure raw + cycle with this durability\n"
          "                          (Redis appendfsync: always|everysec|no), then restore\n"
          "  --only LIST             phases to run: raw,handover,cycle,leases (default all)\n"
          "  -h, --help\n");
}

static int parse_int(const char *s, int *out) {
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (!s[0] || *end || v < 0 || v > 100000000) return -1;
  *out = (int)v;
  return 0;
}

static int parse_options(int argc, char **argv, options_t *o) {
  memset(o, 0, sizeof *o);
  const char *url = getenv("SIMBA_BENCH_URL");
  snprintf(o->url, sizeof o->url, "%s", url && *url ? url : "redis://127.0.0.1:6379");
  o->rtt_iterations = 5000;
  o->cycle_iterations = 2000;
  o->warmup = 200;
  o->handovers = 200;
  o->handover_gap_ms = 25;
  o->handover_cooldown_ms = 15;
  o->lease_ms = 3000;
  o->renew_ms = 1000;
  o->lease_counts[0] = 1;
  o->lease_counts[1] = 100;
  o->lease_counts[2] = 10000;
  o->n_lease_counts = 3;
  o->window_periods = 4;
  o->elect_timeout_s = 30;
  o->slow_renew_ms = 5000;
  o->run_raw = o->run_handover = o->run_cycle = o->run_leases = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int n = 0;
#define NEED_VALUE()                                            \
  do {                                                          \
    if (!v) {                                                   \
      fprintf(stderr, "simba_bench: %s needs a value\n", a);    \
      return -1;                                                \
    }                                                           \
    i++;                                                        \
  } while (0)
#define INT_OPTION(flag, field)                                            \
  if (strcmp(a, flag) == 0) {                                              \
    NEED_VALUE();                                                          \
    if (parse_int(v, &n) != 0) {                                           \
      fprintf(stderr, "simba_bench: %s: not a count: '%s'\n", a, v);       \
      return -1;                                                           \
    }                                                                      \
    field = n;                                                             \
    continue;                                                              \
  }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (strcmp(a, "--url") == 0) {
      NEED_VALUE();
      snprintf(o->url, sizeof o->url, "%s", v);
      continue;
    }
    if (strcmp(a, "--json") == 0) {
      NEED_VALUE();
      o->json_path = v;
      continue;
    }
    if (strcmp(a, "--also-durability") == 0) {
      NEED_VALUE();
      o->also_durability = v;
      continue;
    }
    INT_OPTION("--rtt-iterations", o->rtt_iterations)
    INT_OPTION("--cycle-iterations", o->cycle_iterations)
    INT_OPTION("--warmup", o->warmup)
    INT_OPTION("--handovers", o->handovers)
    INT_OPTION("--handover-gap-ms", o->handover_gap_ms)
    INT_OPTION("--handover-cooldown-ms", o->handover_cooldown_ms)
    INT_OPTION("--lease-duration-ms", o->lease_ms)
    INT_OPTION("--renew-interval-ms", o->renew_ms)
    INT_OPTION("--window-periods", o->window_periods)
    INT_OPTION("--elect-timeout-s", o->elect_timeout_s)
    INT_OPTION("--slow-renew-ms", o->slow_renew_ms)
    if (strcmp(a, "--lease-counts") == 0) {
      NEED_VALUE();
      char buf[256];
      snprintf(buf, sizeof buf, "%s", v);
      o->n_lease_counts = 0;
      for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (o->n_lease_counts == MAX_LEASE_COUNTS || parse_int(tok, &n) != 0 || n < 1) {
          fprintf(stderr, "simba_bench: --lease-counts: bad list '%s'\n", v);
          return -1;
        }
        o->lease_counts[o->n_lease_counts++] = n;
      }
      continue;
    }
    if (strcmp(a, "--only") == 0) {
      NEED_VALUE();
      o->run_raw = strstr(v, "raw") != NULL;
      o->run_handover = strstr(v, "handover") != NULL;
      o->run_cycle = strstr(v, "cycle") != NULL;
      o->run_leases = strstr(v, "leases") != NULL;
      continue;
    }
#undef INT_OPTION
#undef NEED_VALUE
    fprintf(stderr, "simba_bench: unknown argument '%s'\n", a);
    usage(stderr);
    return -1;
  }
  if (o->window_periods < 1 || o->renew_ms < 1 || o->lease_ms < 2 * o->renew_ms) {
    fprintf(stderr, "simba_bench: need --window-periods >= 1 and lease >= 2 x renew\n");
    return -1;
  }
  if (o->run_handover && o->handovers > 0 && o->handover_cooldown_ms >= o->handover_gap_ms) {
    fprintf(stderr, "simba_bench: need --handover-cooldown-ms < --handover-gap-ms\n");
    return -1;
  }
  return 0;
}

/* A namespace of this run's own (Redis key prefix, PostgreSQL schema,
 * ZooKeeper chroot), unless the URL names one, so that runs against a
 * long-lived server never meet each other's leases (or tokens). */
static void add_namespace(options_t *o, const raw_backend_t *rb) {
  if (!rb->namespace_fmt || (!rb->namespace_param && !rb->namespace_in_path)) return;
  char value[64];
  snprintf(value, sizeof value, rb->namespace_fmt, (long)getpid());
  if (rb->namespace_in_path) {
    /* scheme://hosts[/path][?params]: "/value" in place of an empty path. */
    char *const start = strstr(o->url, "://") + 3; /* the scheme matched */
    const size_t end = strcspn(start, "?");
    char *const slash = memchr(start, '/', end);
    if (slash && slash + 1 < start + end) return; /* a path of its own */
    char rest[sizeof o->url];
    snprintf(rest, sizeof rest, "%s", start + end);
    char *const at = slash ? slash : start + end;
    snprintf(at, sizeof o->url - (size_t)(at - o->url), "/%s%s", value, rest);
    return;
  }
  const char *q = strchr(o->url, '?');
  const size_t plen = strlen(rb->namespace_param);
  for (const char *p = q; p; p = strchr(p + 1, '&')) {
    if (strncmp(p + 1, rb->namespace_param, plen) == 0 && p[1 + plen] == '=') return;
  }
  const size_t len = strlen(o->url);
  snprintf(o->url + len, sizeof o->url - len, "%c%s=%s", q ? '&' : '?', rb->namespace_param,
           value);
}

/* ------------------------------------------------------------------------- */
/* Small helpers */

static void die(const char *what, int rc) {
  fprintf(stderr, "simba_bench: %s: %s (%s)\n", what, simba_strerror(rc), simba_last_error());
  exit(1);
}

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("simba_bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* A client with the benchmark's timing and, if key is not NULL, one more
 * setting; exits on failure. */
static simba_client_t *open_client_kv(const char *url, const options_t *o, const char *name,
                                      const char *key, const char *value) {
  simba_config_t *cfg = NULL;
  int rc = simba_config_new(&cfg);
  if (rc == SIMBA_OK) rc = simba_config_set_ms(cfg, "session.lease-duration", o->lease_ms);
  if (rc == SIMBA_OK) rc = simba_config_set_ms(cfg, "session.renew-interval", o->renew_ms);
  if (rc == SIMBA_OK) rc = simba_config_set(cfg, "client.name", name);
  if (rc == SIMBA_OK && key) rc = simba_config_set(cfg, key, value);
  if (rc != SIMBA_OK) die("config", rc);
  simba_client_t *c = NULL;
  rc = simba_client_open(&c, url, cfg);
  simba_config_free(cfg);
  if (rc != SIMBA_OK) die("simba_client_open", rc);
  rc = simba_client_wait_live(c, 10000);
  if (rc != SIMBA_OK) die("simba_client_wait_live", rc);
  return c;
}

static simba_client_t *open_client(const char *url, const options_t *o, const char *name) {
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

/* ------------------------------------------------------------------------- */
/* Results */

typedef struct raw_result {
  int done;
  bench_stats_t op[RAW_OP_COUNT];
  double server_usec[RAW_OP_COUNT]; /* EVALSHA execution time inside the server; NaN for PING */
} raw_result_t;

typedef struct cycle_result {
  int done;
  bench_stats_t cycle, acquire, release;
  double server_calls_per_cycle; /* EVALSHAs counted by the server, per cycle */
  double server_usec_per_call;   /* their execution time in the server (no fsync, no I/O) */
  int64_t acquires, releases, terms; /* snapshot counter deltas */
} cycle_result_t;

typedef struct handover_result {
  int done, failed;
  int handovers;
  bench_stats_t h;
  /* Its parts: step-down call -> returned (the request reached the old
   * leader's loop thread); step-down call -> old leader's on_revoked (its
   * release answered); that on_revoked -> new leader's on_elected. */
  bench_stats_t hop_in, release_done, takeover;
  int tokens_increasing;
  int regained; /* step-downs after which the old leader won the lease back */
  uint64_t first_token, last_token;
  char error[256];
} handover_result_t;

typedef struct lease_result {
  int leases;
  int ok;
  /* A second try at a longer renew interval (--slow-renew-ms), after this
   * count failed at the bench's own timing: reported, never judged. */
  int slow;
  int64_t lease_ms, renew_ms; /* the client's timing */
  /* Terms revoked, and sessions opened, from the first simba_election_start
   * to the end of the window: 0 and 1 when the client held its leases. */
  int64_t revoked;
  int64_t sessions_opened;
  int64_t max_held; /* most leases held at once */
  int64_t acquires_to_elect; /* acquire calls until all were held (snapshot) */
  int64_t sessions_to_elect; /* sessions used until all were held: 1 normally */
  double start_ms;  /* the simba_election_start calls */
  double elect_ms;  /* first start -> last on_elected */
  double close_ms;  /* simba_client_close with every lease held */
  int64_t rss_before_kb, rss_kb;
  int64_t renew_period_ms;
  double window_ms;
  double periods; /* window / renew period */
  /* How far from a whole number of periods the window may be for the count to
   * be read as "one call per period": 0.05 for a window on the clock, 0.1 for
   * one bounded by observed changes of a lagging count (its ends move with
   * the keep-alives' own duration). */
  double period_tolerance;
  uint64_t server_calls;
  double calls_per_period;
  double server_usec_per_call;
  int64_t snapshot_keep_alives;
  int64_t snapshot_acquires; /* during the window: 0 expected */
  int64_t connected_clients;
  char error[256];
} lease_result_t;

typedef struct results {
  char date[32];
  char machine[256];
  int cpus;
  char server_version[64];
  char durability[96];
  char url_redacted[1024];
  raw_result_t raw, raw_end;
  bench_stats_t raw_idle; /* baseline after an idle pause of --handover-gap-ms */
  char loadavg_start[64], loadavg_end[64];
  handover_result_t handover;
  cycle_result_t cycle;
  /* The cycle and the baseline in alternating blocks: the judged ratio. */
  bench_stats_t paired_cycle, paired_rtt;
  int paired_done;
  bench_stats_t memory_cycle;
  bench_stats_t external_cycle; /* loop.mode=external: the caller's thread runs the loop */
  bench_stats_t snapshot_hop;
  int diagnostics_done;
  /* The server's own lock (raw_backend_t.native_*): its cycle in blocks
   * alternating with Simba's cycle, and its handover between two processes. */
  int native_cycle_done, native_handover_done;
  bench_stats_t native_cycle, native_simba_cycle, native_handover;
  char native_error[256];
  lease_result_t leases[2 * MAX_LEASE_COUNTS]; /* with the --slow-renew-ms rows */
  int n_leases;
  /* --also-durability */
  int alt_done;
  char alt_durability[96];
  raw_result_t alt_raw;
  cycle_result_t alt_cycle;
} results_t;

/* ------------------------------------------------------------------------- */
/* Phase: raw round trips */

static int run_raw(const raw_backend_t *rb, raw_conn_t *rc, int iterations, int warmup, int first_op,
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
static int run_raw_idle(const raw_backend_t *rb, raw_conn_t *rc, int iterations, int gap_ms,
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
/* Phase: handover between two processes */

enum {
  MSG_READY = 1,
  MSG_ELECTED = 2,
  MSG_RELEASE = 3,  /* t: just before simba_election_step_down() */
  MSG_RETURNED = 4, /* t: when it returned (the request reached the loop thread) */
  MSG_REVOKED = 5,  /* t: the old leader's on_revoked (its release was answered) */
  MSG_BYE = 6,
  MSG_ERROR = 7
};

/* Children -> parent, one write each (smaller than PIPE_BUF, so atomic). */
typedef struct msg {
  int32_t who;
  int32_t kind;
  int64_t t_ns;
  uint64_t token;
  int64_t rc;
} msg_t;

typedef struct child_ctx {
  int who;
  int report_fd;
} child_ctx_t;

static void send_msg(int fd, int who, int kind, int64_t t_ns, uint64_t token, int64_t rc) {
  msg_t m = {who, kind, t_ns, token, rc};
  ssize_t n;
  do {
    n = write(fd, &m, sizeof m);
  } while (n < 0 && errno == EINTR);
}

static void child_on_elected(void *ud, simba_term_t *term) {
  const int64_t now = bench_now_ns(); /* first: this is the measured moment */
  child_ctx_t *cx = ud;
  send_msg(cx->report_fd, cx->who, MSG_ELECTED, now, simba_term_token(term), 0);
}

static void child_on_revoked(void *ud, simba_term_t *term, simba_revoke_reason_t reason) {
  const int64_t now = bench_now_ns();
  child_ctx_t *cx = ud;
  send_msg(cx->report_fd, cx->who, MSG_REVOKED, now, simba_term_token(term), reason);
}

/* The contending process: reports READY, every election, and the moment it
 * starts each step-down the parent asks for ('S'); 'Q' ends it. */
static void child_main(int who, int cmd_fd, int report_fd, const options_t *o) {
  char name[32];
  snprintf(name, sizeof name, "bench-handover-%c", 'A' + who);
  simba_client_t *c = open_client(o->url, o, name);
  child_ctx_t cx = {who, report_fd};
  simba_listener_t l = {child_on_elected, child_on_revoked, &cx};
  simba_election_t *e = NULL;
  int rc = simba_election_start(&e, c, "bench-handover", &l);
  if (rc != SIMBA_OK) {
    send_msg(report_fd, who, MSG_ERROR, 0, 0, rc);
    _exit(1);
  }
  send_msg(report_fd, who, MSG_READY, bench_now_ns(), 0, 0);
  for (;;) {
    char cmd;
    ssize_t n = read(cmd_fd, &cmd, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || cmd == 'Q') break;
    if (cmd == 'S') {
      const int64_t t = bench_now_ns();
      rc = simba_election_step_down(e, o->handover_cooldown_ms, NULL, NULL);
      const int64_t returned = bench_now_ns();
      send_msg(report_fd, who, MSG_RELEASE, t, 0, rc);
      send_msg(report_fd, who, MSG_RETURNED, returned, 0, rc);
    }
  }
  simba_election_stop_wait(e, 5000);
  simba_election_free(e);
  simba_client_close(c);
  send_msg(report_fd, who, MSG_BYE, bench_now_ns(), 0, 0);
  _exit(0);
}

/* Reads one message, waiting at most timeout_ms; 0, or -1 (timeout, EOF). */
static int read_msg(int fd, msg_t *m, int timeout_ms) {
  const int64_t until = bench_now_ns() + (int64_t)timeout_ms * 1000000;
  for (;;) {
    int64_t left = (until - bench_now_ns()) / 1000000;
    if (left < 0) return -1;
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, (int)left + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    ssize_t n = read(fd, m, sizeof *m);
    if (n < 0 && errno == EINTR) continue;
    return n == (ssize_t)sizeof *m ? 0 : -1;
  }
}

/* Waits for a message of `kind` from `who`, keeping the other messages' effect
 * on *elected (who was last elected, and when). */
typedef struct handover_state {
  int leader;              /* last process elected, -1 before */
  int64_t elected_at[2];   /* its on_elected time */
  uint64_t token[2];
  int64_t release_at[2];   /* its last step-down start */
  int64_t returned_at[2];  /* when that simba_election_step_down() returned */
  int64_t revoked_at[2];   /* its last on_revoked */
  int have_elected[2], have_release[2], have_returned[2], have_revoked[2];
} handover_state_t;

static int pump(int fd, handover_state_t *st, int timeout_ms, char *err, size_t errlen) {
  msg_t m;
  if (read_msg(fd, &m, timeout_ms) != 0) {
    snprintf(err, errlen, "no message from the contending processes within %d ms", timeout_ms);
    return -1;
  }
  if (m.who < 0 || m.who > 1) {
    snprintf(err, errlen, "garbled message");
    return -1;
  }
  switch (m.kind) {
    case MSG_ELECTED:
      st->leader = m.who;
      st->elected_at[m.who] = m.t_ns;
      st->token[m.who] = m.token;
      st->have_elected[m.who] = 1;
      break;
    case MSG_RELEASE:
      if (m.rc != SIMBA_OK) {
        snprintf(err, errlen, "simba_election_step_down: %s", simba_strerror((int)m.rc));
        return -1;
      }
      st->release_at[m.who] = m.t_ns;
      st->have_release[m.who] = 1;
      break;
    case MSG_RETURNED:
      st->returned_at[m.who] = m.t_ns;
      st->have_returned[m.who] = 1;
      break;
    case MSG_REVOKED:
      st->revoked_at[m.who] = m.t_ns;
      st->have_revoked[m.who] = 1;
      break;
    case MSG_ERROR:
      snprintf(err, errlen, "process %c failed: %s", 'A' + m.who, simba_strerror((int)m.rc));
      return -1;
    default:
      break;
  }
  return m.kind;
}

static void run_handover(const options_t *o, handover_result_t *out) {
  int report[2], cmd[2][2];
  pid_t pid[2] = {-1, -1};
  memset(out, 0, sizeof *out);
  out->tokens_increasing = 1;
  if (pipe(report) != 0 || pipe(cmd[0]) != 0 || pipe(cmd[1]) != 0) {
    snprintf(out->error, sizeof out->error, "pipe: %s", strerror(errno));
    out->failed = 1;
    return;
  }
  fflush(NULL);
  handover_state_t st;
  memset(&st, 0, sizeof st);
  st.leader = -1;
  char *err = out->error;
  const size_t errlen = sizeof out->error;
  bench_samples_t s, s_in, s_rel, s_take;
  bench_samples_init(&s);
  bench_samples_init(&s_in);
  bench_samples_init(&s_rel);
  bench_samples_init(&s_take);

  /* A first, alone, so that it is the first leader; then B, which waits. */
  for (int who = 0; who < 2; who++) {
    pid[who] = fork();
    if (pid[who] < 0) {
      snprintf(err, errlen, "fork: %s", strerror(errno));
      goto fail;
    }
    if (pid[who] == 0) {
      close(report[0]);
      close(cmd[who][1]);
      close(cmd[1 - who][0]);
      close(cmd[1 - who][1]);
      child_main(who, cmd[who][0], report[1], o);
    }
    close(cmd[who][0]);
    int ready = 0;
    while (!ready || (who == 0 && !st.have_elected[0])) {
      int k = pump(report[0], &st, 15000, err, errlen);
      if (k < 0) goto fail;
      if (k == MSG_READY) ready = 1;
    }
  }
  close(report[1]);
  report[1] = -1;
  /* B's first attempt (answered "held") is over well within the gap. */
  for (int i = 0; i < o->handovers; i++) {
    bench_sleep_ns((int64_t)o->handover_gap_ms * 1000000);
    const int from = st.leader, to = 1 - from;
    const uint64_t prev_token = st.token[from];
    st.have_elected[to] = st.have_elected[from] = 0;
    st.have_release[from] = st.have_returned[from] = st.have_revoked[from] = 0;
    if (write(cmd[from][1], "S", 1) != 1) {
      snprintf(err, errlen, "cannot signal process %c", 'A' + from);
      goto fail;
    }
    while (!st.have_elected[to] || !st.have_release[from] || !st.have_returned[from] ||
           !st.have_revoked[from]) {
      if (pump(report[0], &st, 5000, err, errlen) < 0) {
        snprintf(err + strlen(err), errlen - strlen(err), " (handover %d, %c -> %c)", i + 1,
                 'A' + from, 'A' + to);
        goto fail;
      }
      if (st.have_elected[from]) break;
    }
    if (st.have_elected[from]) {
      /* The new leader was not elected before the old one's cooldown ended,
       * and the old one won the lease back (as it may): count it, no sample. */
      out->regained++;
      if (out->regained > o->handovers / 10 + 1) {
        snprintf(err, errlen, "the old leader won its lease back %d times (raise "
                 "--handover-cooldown-ms)", out->regained);
        goto fail;
      }
      i--;
      continue;
    }
    if (st.token[to] <= prev_token) out->tokens_increasing = 0;
    if (i == 0) out->first_token = prev_token;
    out->last_token = st.token[to];
    bench_samples_push(&s, st.elected_at[to] - st.release_at[from]);
    bench_samples_push(&s_in, st.returned_at[from] - st.release_at[from]);
    bench_samples_push(&s_rel, st.revoked_at[from] - st.release_at[from]);
    bench_samples_push(&s_take, st.elected_at[to] - st.revoked_at[from]);
  }
  out->done = 1;
  goto end;
fail:
  out->failed = 1;
end:
  out->handovers = (int)s.n;
  out->h = bench_summarize(&s);
  out->hop_in = bench_summarize(&s_in);
  out->release_done = bench_summarize(&s_rel);
  out->takeover = bench_summarize(&s_take);
  bench_samples_free(&s);
  bench_samples_free(&s_in);
  bench_samples_free(&s_rel);
  bench_samples_free(&s_take);
  for (int who = 0; who < 2; who++) {
    if (pid[who] > 0) {
      if (write(cmd[who][1], "Q", 1) != 1) {
      }
    }
  }
  for (int who = 0; who < 2; who++) {
    if (pid[who] <= 0) continue;
    int status = 0;
    const int64_t until = bench_now_ns() + 10 * 1000000000LL;
    while (waitpid(pid[who], &status, WNOHANG) == 0) {
      if (bench_now_ns() > until) {
        kill(pid[who], SIGKILL); /* our own child only */
        waitpid(pid[who], &status, 0);
        break;
      }
      bench_sleep_ns(10 * 1000000);
    }
    close(cmd[who][1]);
  }
  close(report[0]);
  if (report[1] >= 0) close(report[1]);
}

/* ------------------------------------------------------------------------- */
/* Phase: lock acquire + release cycle (and the diagnostics) */

/* settle_ms: with a backend whose counts lag (counts_lag_ms), how long to wait
 * before each reading of the server's count so that it holds every call made
 * before the wait: the calls are then counted over the warmup too. */
static void run_cycle(simba_client_t *c, const raw_backend_t *rb, raw_conn_t *rc, int iterations,
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
  simba_term_t *t = NULL;
  const int64_t t0 = bench_now_ns();
  int r = simba_lock_acquire(&t, c, "bench-cycle", 5000);
  if (r != SIMBA_OK) die("simba_lock_acquire", r);
  r = simba_lock_release(t);
  if (r != SIMBA_OK) die("simba_lock_release", r);
  return bench_now_ns() - t0;
}

/* The cycle and the baseline round trip in alternating blocks of kPairBlock,
 * so that both see the same server: a Redis fsync's time drifts by a quarter
 * between phases a few seconds apart (282 and 359 us in two idle runs), which
 * alone moved the ratio of a separate measurement by more than its target's
 * margin. Same client, same connection of the baseline, same name. */
enum { kPairBlock = 20 };

static int run_cycle_paired(simba_client_t *c, const raw_backend_t *rb, raw_conn_t *rc,
                            int iterations, int warmup, bench_stats_t *cycle_out,
                            bench_stats_t *rtt_out) {
  bench_samples_t cyc, rtt;
  bench_samples_init(&cyc);
  bench_samples_init(&rtt);
  char err[256];
  const int trips = rb->write_pairs ? 2 : 1;
  int rc_out = 0;
  for (int done = 0; done < warmup + iterations && rc_out == 0; done += kPairBlock) {
    const int measured = done >= warmup;
    for (int i = 0; i < kPairBlock; i++) {
      const int64_t t0 = bench_now_ns();
      for (int k = 0; k < trips; k++) {
        if (rb->round_trip(rc, RAW_OP_WRITE, err, sizeof err) != 0) {
          fprintf(stderr, "simba_bench: raw round trip: %s\n", err);
          rc_out = -1;
          break;
        }
      }
      if (rc_out != 0) break;
      if (measured) bench_samples_push(&rtt, (bench_now_ns() - t0) / trips);
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
static int run_native_cycle_paired(simba_client_t *c, const raw_backend_t *rb, raw_conn_t *rc,
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

static bench_stats_t run_snapshot_hop(simba_client_t *c, int iterations) {
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
  atomic_int_fast64_t all_held_ns; /* 0 before */
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

static void run_leases(const options_t *o, const raw_backend_t *rb, raw_conn_t *rc, int n,
                       int slow, lease_result_t *out) {
  char err[256];
  memset(out, 0, sizeof *out);
  out->leases = n;
  out->slow = slow;
  out->lease_ms = o->lease_ms;
  out->renew_ms = o->renew_ms;
  out->rss_before_kb = bench_rss_kb();
  char cname[48];
  snprintf(cname, sizeof cname, "bench-leases-%d-%lld", n, (long long)o->renew_ms);
  simba_client_t *c = open_client(o->url, o, cname);
  const counters_t k_open = snapshot_counters(c);
  simba_election_t **es = calloc((size_t)n, sizeof *es);
  if (!es) die("calloc", SIMBA_ENOMEM);
  elect_ctx_t ec;
  ec.n = n;
  atomic_init(&ec.elected, 0);
  atomic_init(&ec.revoked, 0);
  atomic_init(&ec.max_held, 0);
  atomic_init(&ec.all_held_ns, 0);
  atomic_init(&ec.revoked_before_all, 0);
  simba_listener_t l = {count_elected, count_revoked, &ec};

  const int64_t t0 = bench_now_ns();
  for (int i = 0; i < n; i++) {
    char name[64];
    snprintf(name, sizeof name, "lease-%d-%lld-%06d", n, (long long)o->renew_ms, i);
    int r = simba_election_start(&es[i], c, name, &l);
    if (r != SIMBA_OK) die("simba_election_start", r);
  }
  const int64_t t_started = bench_now_ns();
  const int64_t give_up = t_started + (int64_t)o->elect_timeout_s * 1000000000LL;
  while (atomic_load(&ec.all_held_ns) == 0 && bench_now_ns() < give_up) bench_sleep_ns(200000);
  if (atomic_load(&ec.all_held_ns) == 0) {
    const counters_t k_now = snapshot_counters(c);
    snprintf(out->error, sizeof out->error,
             "never held all %d at once within %d s: at most %lld; %lld terms won, %lld revoked; "
             "%lld new sessions",
             n, o->elect_timeout_s, (long long)atomic_load(&ec.max_held),
             (long long)atomic_load(&ec.elected), (long long)atomic_load(&ec.revoked),
             (long long)(k_now.sessions_opened - k_open.sessions_opened));
    goto close;
  }
  out->start_ms = (double)(t_started - t0) / 1e6;
  out->elect_ms = (double)(atomic_load(&ec.all_held_ns) - t0) / 1e6;
  out->acquires_to_elect = snapshot_counters(c).acquires - k_open.acquires;
  out->sessions_to_elect = snapshot_counters(c).sessions_opened - k_open.sessions_opened + 1;
  out->rss_kb = bench_rss_kb();
  out->connected_clients = rb->connected_clients(rc);

  /* Align the window on the keep-alives: wait for one (the only calls this
   * client makes now that every election is won), then start half a period
   * later, so that a window of P whole periods holds exactly P keep-alives
   * when there is one per period. */
  counters_t k = snapshot_counters(c);
  out->renew_period_ms = k.renew_period_ms > 0 ? k.renew_period_ms : o->renew_ms;
  const int64_t period_ns = out->renew_period_ms * 1000000;
  uint64_t calls = 0, usec = 0, calls0 = 0, usec0 = 0, calls1 = 0, usec1 = 0;
  if (rb->server_calls(rc, &calls, &usec, err, sizeof err) != 0) {
    snprintf(out->error, sizeof out->error, "%s", err);
    goto close;
  }
  const int64_t wait_until = bench_now_ns() + 3 * period_ns;
  uint64_t c2 = calls;
  while (c2 == calls && bench_now_ns() < wait_until) {
    bench_sleep_ns(1000000);
    if (rb->server_calls(rc, &c2, &usec, err, sizeof err) != 0) break;
  }
  if (c2 == calls) {
    snprintf(out->error, sizeof out->error, "no keep-alive seen within 3 renew periods");
    goto close;
  }
  counters_t ka0, ka1;
  int64_t w0, w1;
  out->period_tolerance = rb->counts_lag_ms == 0 ? 0.05 : 0.1;
  if (rb->counts_lag_ms == 0) {
    /* Counted at once: a window of whole periods on the clock. */
    bench_sleep_ns(period_ns / 2);
    ka0 = snapshot_counters(c);
    rb->server_calls(rc, &calls0, &usec0, err, sizeof err);
    w0 = bench_now_ns();
    bench_sleep_ns(period_ns * o->window_periods);
    rb->server_calls(rc, &calls1, &usec1, err, sizeof err);
    w1 = bench_now_ns();
    ka1 = snapshot_counters(c);
  } else {
    /* Counted late, in batches published at the end of one of the client's
     * statements (only keep-alives now), each holding every earlier call: the
     * window runs from the change just seen to the first change at least
     * window_periods - 1/2 periods later, so both ends sit just after a
     * keep-alive and every keep-alive inside is counted. The client's own
     * counter is read half a period after each end, away from any keep-alive. */
    calls0 = c2;
    usec0 = usec;
    w0 = bench_now_ns();
    bench_sleep_ns(period_ns / 2);
    ka0 = snapshot_counters(c);
    bench_sleep_ns(period_ns * (o->window_periods - 1));
    uint64_t mid = 0, mid_usec = 0;
    if (rb->server_calls(rc, &mid, &mid_usec, err, sizeof err) != 0) {
      snprintf(out->error, sizeof out->error, "%s", err);
      goto close;
    }
    calls1 = mid;
    const int64_t until = bench_now_ns() + 3 * period_ns;
    while (calls1 == mid && bench_now_ns() < until) {
      bench_sleep_ns(1000000);
      if (rb->server_calls(rc, &calls1, &usec1, err, sizeof err) != 0) break;
    }
    w1 = bench_now_ns();
    if (calls1 == mid) {
      snprintf(out->error, sizeof out->error, "the count did not change within 3 renew periods");
      goto close;
    }
    bench_sleep_ns(period_ns / 2);
    ka1 = snapshot_counters(c);
  }
  out->window_ms = (double)(w1 - w0) / 1e6;
  out->periods = (double)(w1 - w0) / (double)period_ns;
  out->server_calls = calls1 - calls0;
  out->calls_per_period = (double)out->server_calls / out->periods;
  out->server_usec_per_call = out->server_calls && !rb->calls_untimed
                                  ? (double)(usec1 - usec0) / (double)out->server_calls
                                  : NAN;
  out->snapshot_keep_alives = ka1.keep_alives - ka0.keep_alives;
  out->snapshot_acquires = ka1.acquires - ka0.acquires;
  out->ok = 1;
  if (atomic_load(&ec.revoked) > atomic_load(&ec.revoked_before_all)) {
    out->ok = 0;
    snprintf(out->error, sizeof out->error,
             "held all %d at once after %.1f s, then lost %lld of them by the end of the window",
             n, out->elect_ms / 1e3,
             (long long)(atomic_load(&ec.revoked) - atomic_load(&ec.revoked_before_all)));
  }
close:;
  out->revoked = atomic_load(&ec.revoked);
  out->max_held = atomic_load(&ec.max_held);
  out->sessions_opened = snapshot_counters(c).sessions_opened - k_open.sessions_opened + 1;
  const int64_t tc = bench_now_ns();
  simba_client_close(c);
  out->close_ms = (double)(bench_now_ns() - tc) / 1e6;
  for (int i = 0; i < n; i++) simba_election_free(es[i]);
  free(es);
}

/* ------------------------------------------------------------------------- */
/* Report */

static double ratio(double a, double b) { return b > 0 ? a / b : NAN; }

static const char *verdict(int met) { return met ? "met" : "MISSED"; }

static void print_row(const char *label, const bench_stats_t *s, const char *extra) {
  printf("  %-44s %6zu %9.1f %9.1f %9.1f  %s\n", label, s->n, s->p50_us, s->p90_us, s->p99_us,
         extra ? extra : "");
}

/* The baseline round trip of a raw result. */
static const bench_stats_t *baseline(const raw_result_t *r) { return &r->op[RAW_OP_WRITE]; }

typedef struct verdicts {
  double cycle_ratio, cycle_ratio_p99, handover_rtts, handover_rtts_p99; /* judged */
  double cycle_tight, cycle_tight_p99, handover_tight, handover_tight_p99;
  int cycle_met, handover_met;
  const lease_result_t *ka; /* the row at TARGET_KEEPALIVE_LEASES, if measured */
  int ka_met;
} verdicts_t;

/* Each target is judged against the baseline measured in the same conditions
 * (ADR 0013): the cycle against the raw round trips alternating with it, the
 * handover, which starts from processes idle for --handover-gap-ms, against
 * the raw round trip after the same idle pause. The ratios to the tight-loop
 * round trip of the start are printed too (`*_tight`). */
static verdicts_t judge(const results_t *r) {
  verdicts_t v;
  memset(&v, 0, sizeof v);
  const double rtt = r->raw.done ? baseline(&r->raw)->p50_us : NAN;
  const double rtt99 = r->raw.done ? baseline(&r->raw)->p99_us : NAN;
  v.cycle_tight = r->cycle.done ? ratio(r->cycle.cycle.p50_us, 2 * rtt) : NAN;
  v.cycle_tight_p99 = r->cycle.done ? ratio(r->cycle.cycle.p99_us, 2 * rtt99) : NAN;
  if (r->paired_done) {
    v.cycle_ratio = ratio(r->paired_cycle.p50_us, 2 * r->paired_rtt.p50_us);
    v.cycle_ratio_p99 = ratio(r->paired_cycle.p99_us, 2 * r->paired_rtt.p99_us);
  } else {
    v.cycle_ratio = v.cycle_tight;
    v.cycle_ratio_p99 = v.cycle_tight_p99;
  }
  v.cycle_met = v.cycle_ratio <= TARGET_CYCLE_RATIO;
  v.handover_tight = r->handover.done ? ratio(r->handover.h.p50_us, rtt) : NAN;
  v.handover_tight_p99 = r->handover.done ? ratio(r->handover.h.p99_us, rtt99) : NAN;
  if (r->handover.done && r->raw_idle.n) {
    v.handover_rtts = ratio(r->handover.h.p50_us, r->raw_idle.p50_us);
    v.handover_rtts_p99 = ratio(r->handover.h.p99_us, r->raw_idle.p99_us);
  } else {
    v.handover_rtts = v.handover_tight;
    v.handover_rtts_p99 = v.handover_tight_p99;
  }
  v.handover_met = v.handover_rtts <= TARGET_HANDOVER_RTTS;
  for (int i = 0; i < r->n_leases; i++) {
    const lease_result_t *x = &r->leases[i];
    if (x->leases == TARGET_KEEPALIVE_LEASES && !x->slow) v.ka = x;
  }
  /* Exactly one call per renew interval: as many calls as whole periods. */
  v.ka_met = v.ka && v.ka->ok && fabs(v.ka->periods - round(v.ka->periods)) < v.ka->period_tolerance &&
             v.ka->server_calls == (uint64_t)llround(v.ka->periods);
  return v;
}

static void print_report(const options_t *o, const raw_backend_t *rb, const results_t *r) {
  const verdicts_t v = judge(r);
  char buf[160], label[96];
  printf("\nSimba %s benchmarks, %s\n", simba_version_string(), r->date);
  printf("machine: %s\n", r->machine);
  printf("server:  %s (%s), %s\n", r->server_version, r->durability, r->url_redacted);
  printf("calls:   %s\n", rb->calls_desc);
  printf("timing:  lease %lld ms, renew %lld ms; load average at start %s, at end %s\n\n",
         (long long)o->lease_ms, (long long)o->renew_ms, r->loadavg_start, r->loadavg_end);
  printf("  %-44s %6s %9s %9s %9s\n", "latency (us)", "n", "p50", "p90", "p99");
  if (r->raw.done) {
    for (int op = 0; op < RAW_OP_COUNT; op++) {
      char sv[64] = "";
      if (!isnan(r->raw.server_usec[op])) {
        snprintf(sv, sizeof sv, "%.1f us inside the server", r->raw.server_usec[op]);
      }
      snprintf(label, sizeof label, "%s%s", rb->op_label[op],
               op == RAW_OP_WRITE ? " = RTT (baseline)" : "");
      print_row(label, &r->raw.op[op], sv);
    }
    if (rb->write_pairs) {
      printf("  %-44s (RTT = one raw acquire + one raw release, halved)\n", "");
    }
    if (r->raw_idle.n) {
      snprintf(buf, sizeof buf, "after %d ms idle, like a handover", o->handover_gap_ms);
      print_row("raw RTT after an idle pause", &r->raw_idle, buf);
    }
  }
  if (r->cycle.done) {
    snprintf(buf, sizeof buf, "%.2f x 2 RTT (p99 %.2f)", v.cycle_tight, v.cycle_tight_p99);
    print_row("lock acquire+release cycle", &r->cycle.cycle, buf);
    snprintf(buf, sizeof buf, "%.2f RTT", ratio(r->cycle.acquire.p50_us, baseline(&r->raw)->p50_us));
    print_row("  acquire (simba_lock_acquire)", &r->cycle.acquire, buf);
    snprintf(buf, sizeof buf, "%.2f RTT", ratio(r->cycle.release.p50_us, baseline(&r->raw)->p50_us));
    print_row("  release (simba_lock_release)", &r->cycle.release, buf);
    if (isnan(r->cycle.server_usec_per_call)) {
      printf("  %-44s %.2f backend calls per cycle\n", "", r->cycle.server_calls_per_cycle);
    } else {
      printf("  %-44s %.2f backend calls per cycle, %.1f us each inside the server\n", "",
             r->cycle.server_calls_per_cycle, r->cycle.server_usec_per_call);
    }
  }
  if (r->paired_done) {
    print_row("raw RTT, alternating with the cycle below", &r->paired_rtt, NULL);
    snprintf(buf, sizeof buf, "%.2f x 2 RTT (p99 %.2f; target <= %.2f: %s)", v.cycle_ratio,
             v.cycle_ratio_p99, TARGET_CYCLE_RATIO, verdict(v.cycle_met));
    print_row("lock cycle, alternating with that RTT", &r->paired_cycle, buf);
  }
  if (r->handover.done || r->handover.failed) {
    snprintf(buf, sizeof buf, "%.2f x the RTT after idle (p99 %.2f; target <= %.0f: %s)",
             v.handover_rtts, v.handover_rtts_p99, TARGET_HANDOVER_RTTS, verdict(v.handover_met));
    print_row("handover, step-down -> other's on_elected", &r->handover.h, buf);
    snprintf(buf, sizeof buf, "%.2f x the tight-loop RTT (p99 %.2f)", v.handover_tight,
             v.handover_tight_p99);
    print_row("  (same)", &r->handover.h, buf);
    print_row("  step-down call returns (into the loop)", &r->handover.hop_in, NULL);
    print_row("  old leader's on_revoked (release done)", &r->handover.release_done, NULL);
    print_row("  that on_revoked -> new on_elected", &r->handover.takeover, NULL);
    printf("  %-44s tokens strictly increasing: %s; old leader won its lease back %d times\n", "",
           r->handover.tokens_increasing ? "yes" : "NO", r->handover.regained);
  }
  if (r->native_cycle_done) {
    print_row("native lock cycle (lock + unlock)", &r->native_cycle, NULL);
    snprintf(buf, sizeof buf, "%.2f x native cycle (p99 %.2f; target <= %.0f: %s)",
             ratio(r->native_simba_cycle.p50_us, r->native_cycle.p50_us),
             ratio(r->native_simba_cycle.p99_us, r->native_cycle.p99_us), TARGET_NATIVE_CYCLE,
             verdict(ratio(r->native_simba_cycle.p50_us, r->native_cycle.p50_us) <=
                     TARGET_NATIVE_CYCLE));
    print_row("lock cycle, alternating with the native one", &r->native_simba_cycle, buf);
  }
  if (r->native_handover_done) {
    snprintf(buf, sizeof buf, "unlock call -> other's lock returns, %d ms idle", o->handover_gap_ms);
    print_row("native lock handover", &r->native_handover, buf);
    if (r->handover.done) {
      const double x = ratio(r->handover.h.p50_us, r->native_handover.p50_us);
      printf("  %-44s Simba's handover = %.2f x the native one (p99 %.2f; target <= %.0f: %s)\n",
             "", x, ratio(r->handover.h.p99_us, r->native_handover.p99_us),
             TARGET_NATIVE_HANDOVER, verdict(x <= TARGET_NATIVE_HANDOVER));
    }
  }
  if (rb->native_lock_desc && r->native_error[0]) {
    printf("  %-44s native lock: %s\n", "", r->native_error);
  }
  if (r->diagnostics_done) {
    print_row("diag: cycle on memory:// (no I/O)", &r->memory_cycle, NULL);
    snprintf(buf, sizeof buf, "%.2f x 2 RTT: no thread hop",
             ratio(r->external_cycle.p50_us, 2 * baseline(&r->raw)->p50_us));
    print_row("diag: cycle, loop.mode=external", &r->external_cycle, buf);
    print_row("diag: snapshot_json (no backend call)", &r->snapshot_hop, NULL);
  }
  if (r->alt_done) {
    printf("\n  with %s:\n", r->alt_durability);
    snprintf(label, sizeof label, "%s = RTT", rb->op_label[RAW_OP_WRITE]);
    print_row(label, baseline(&r->alt_raw), NULL);
    snprintf(buf, sizeof buf, "%.2f x 2 RTT",
             ratio(r->alt_cycle.cycle.p50_us, 2 * baseline(&r->alt_raw)->p50_us));
    print_row("lock acquire+release cycle", &r->alt_cycle.cycle, buf);
  }
  if (r->raw_end.done) {
    snprintf(label, sizeof label, "%s again at the end", rb->op_label[RAW_OP_WRITE]);
    print_row(label, baseline(&r->raw_end), NULL);
  }
  if (r->n_leases) {
    printf("\n  %7s %10s %10s %8s %9s %9s %11s %9s %9s %8s\n", "leases", "elect ms",
           "start ms", "periods", "calls", "calls/per", "server us/ka", "snap ka", "RSS MiB",
           "+MiB");
    int slow_rows = 0;
    for (int i = 0; i < r->n_leases; i++) {
      const lease_result_t *x = &r->leases[i];
      slow_rows += x->slow;
      if (!x->ok) {
        printf("  %6d%s  failed: %s\n", x->leases, x->slow ? "*" : " ", x->error);
      } else {
        char sus[32] = "-"; /* unknown with calls_untimed */
        if (!isnan(x->server_usec_per_call)) {
          snprintf(sus, sizeof sus, "%.0f", x->server_usec_per_call);
        }
        printf("  %6d%s %10.1f %10.1f %8.2f %9llu %9.2f %11s %9lld %9.1f %8.1f\n", x->leases,
             x->slow ? "*" : " ", x->elect_ms, x->start_ms, x->periods,
             (unsigned long long)x->server_calls, x->calls_per_period, sus,
             (long long)x->snapshot_keep_alives, (double)x->rss_kb / 1024.0,
             (double)(x->rss_kb - x->rss_before_kb) / 1024.0);
      }
      if (x->acquires_to_elect > x->leases || x->sessions_to_elect > 1) {
        printf("  %7s  to hold them all: %lld acquire calls, %lld sessions, %lld terms revoked\n",
               "", (long long)x->acquires_to_elect, (long long)x->sessions_to_elect,
               (long long)x->revoked);
      }
    }
    if (slow_rows) {
      printf("  * again after a failure, with lease %lld ms, renew %lld ms (not judged)\n",
             (long long)3 * o->slow_renew_ms, (long long)o->slow_renew_ms);
    }
    if (v.ka && v.ka->ok) {
      printf("  keep-alive at %d leases: %.2f calls per renew interval (target exactly 1: %s)\n",
             TARGET_KEEPALIVE_LEASES, v.ka->calls_per_period, verdict(v.ka_met));
    } else if (v.ka) {
      printf("  keep-alive at %d leases: not measured, the client did not keep them all (target "
             "exactly 1: %s)\n", TARGET_KEEPALIVE_LEASES, verdict(0));
    }
  }
  if (r->handover.failed) printf("\nhandover phase failed: %s\n", r->handover.error);
  printf("\n");
}

static void json_raw(bench_json_t *j, const char *key, const raw_backend_t *rb,
                     const raw_result_t *r) {
  static const char *const names[RAW_OP_COUNT] = {"ping", "read", "write"};
  bench_json_begin_object(j, key);
  for (int op = 0; op < RAW_OP_COUNT; op++) {
    bench_json_begin_object(j, names[op]);
    bench_json_string(j, "what", rb->op_desc[op]);
    bench_json_stats(j, "latency", &r->op[op]);
    bench_json_double(j, "server_usec_per_call", r->server_usec[op]);
    bench_json_end_object(j);
  }
  bench_json_string(j, "baseline", "write");
  bench_json_end_object(j);
}

static void json_cycle(bench_json_t *j, const char *key, const cycle_result_t *c, double rtt_us) {
  bench_json_begin_object(j, key);
  bench_json_stats(j, "cycle", &c->cycle);
  bench_json_stats(j, "acquire", &c->acquire);
  bench_json_stats(j, "release", &c->release);
  bench_json_double(j, "cycle_p50_over_two_rtt", ratio(c->cycle.p50_us, 2 * rtt_us));
  bench_json_double(j, "server_calls_per_cycle", c->server_calls_per_cycle);
  bench_json_double(j, "server_usec_per_call", c->server_usec_per_call);
  bench_json_int(j, "snapshot_acquires", c->acquires);
  bench_json_int(j, "snapshot_releases", c->releases);
  bench_json_int(j, "snapshot_terms", c->terms);
  bench_json_end_object(j);
}

static int write_json(const char *path, const options_t *o, const raw_backend_t *rb,
                      const results_t *r) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "simba_bench: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  const verdicts_t v = judge(r);
  bench_json_t j;
  bench_json_init(&j, f);
  bench_json_begin_object(&j, NULL);
  bench_json_int(&j, "schema", 1);
  bench_json_string(&j, "date", r->date);
  bench_json_string(&j, "simba_version", simba_version_string());
  bench_json_begin_object(&j, "machine");
  bench_json_string(&j, "description", r->machine);
  bench_json_int(&j, "cpus", r->cpus);
  bench_json_string(&j, "loadavg_start", r->loadavg_start);
  bench_json_string(&j, "loadavg_end", r->loadavg_end);
  bench_json_end_object(&j);
  bench_json_begin_object(&j, "backend");
  bench_json_string(&j, "name", rb->name);
  bench_json_string(&j, "url", r->url_redacted);
  bench_json_string(&j, "server", r->server_version);
  bench_json_string(&j, "durability", r->durability);
  bench_json_string(&j, "server_calls_counted_with", rb->calls_desc);
  bench_json_int(&j, "server_counts_lag_ms", rb->counts_lag_ms);
  bench_json_bool(&j, "baseline_is_mean_of_acquire_and_release", rb->write_pairs);
  bench_json_end_object(&j);
  bench_json_begin_object(&j, "options");
  bench_json_int(&j, "rtt_iterations", o->rtt_iterations);
  bench_json_int(&j, "cycle_iterations", o->cycle_iterations);
  bench_json_int(&j, "warmup", o->warmup);
  bench_json_int(&j, "handovers", o->handovers);
  bench_json_int(&j, "handover_gap_ms", o->handover_gap_ms);
  bench_json_int(&j, "handover_cooldown_ms", o->handover_cooldown_ms);
  bench_json_int(&j, "lease_duration_ms", o->lease_ms);
  bench_json_int(&j, "renew_interval_ms", o->renew_ms);
  bench_json_int(&j, "window_periods", o->window_periods);
  bench_json_int(&j, "elect_timeout_s", o->elect_timeout_s);
  bench_json_int(&j, "slow_renew_ms", o->slow_renew_ms);
  bench_json_end_object(&j);
  if (r->raw.done) json_raw(&j, "raw", rb, &r->raw);
  if (r->raw_idle.n) bench_json_stats(&j, "raw_write_after_idle_gap", &r->raw_idle);
  const double rtt = r->raw.done ? baseline(&r->raw)->p50_us : NAN;
  if (r->cycle.done) json_cycle(&j, "lock_cycle", &r->cycle, rtt);
  if (r->paired_done) {
    bench_json_begin_object(&j, "lock_cycle_paired");
    bench_json_int(&j, "block", kPairBlock);
    bench_json_stats(&j, "raw_rtt", &r->paired_rtt);
    bench_json_stats(&j, "cycle", &r->paired_cycle);
    bench_json_end_object(&j);
  }
  if (r->handover.done || r->handover.failed) {
    bench_json_begin_object(&j, "handover");
    bench_json_bool(&j, "completed", r->handover.done);
    if (r->handover.failed) bench_json_string(&j, "error", r->handover.error);
    bench_json_int(&j, "handovers", r->handover.handovers);
    bench_json_stats(&j, "latency", &r->handover.h);
    bench_json_double(&j, "p50_in_rtt", v.handover_rtts);
    bench_json_double(&j, "p99_in_rtt_p99", v.handover_rtts_p99);
    bench_json_double(&j, "p50_in_idle_rtt", ratio(r->handover.h.p50_us, r->raw_idle.p50_us));
    bench_json_stats(&j, "step_down_call_returned", &r->handover.hop_in);
    bench_json_stats(&j, "old_leader_on_revoked", &r->handover.release_done);
    bench_json_stats(&j, "on_revoked_to_new_on_elected", &r->handover.takeover);
    bench_json_bool(&j, "tokens_strictly_increasing", r->handover.tokens_increasing);
    bench_json_int(&j, "regained_by_old_leader", r->handover.regained);
    bench_json_int(&j, "first_token", (int64_t)r->handover.first_token);
    bench_json_int(&j, "last_token", (int64_t)r->handover.last_token);
    bench_json_end_object(&j);
  }
  if (r->diagnostics_done) {
    bench_json_begin_object(&j, "diagnostics");
    bench_json_stats(&j, "memory_lock_cycle", &r->memory_cycle);
    bench_json_stats(&j, "external_loop_lock_cycle", &r->external_cycle);
    bench_json_stats(&j, "snapshot_json_call", &r->snapshot_hop);
    bench_json_end_object(&j);
  }
  if (r->n_leases) {
    bench_json_begin_array(&j, "leases");
    for (int i = 0; i < r->n_leases; i++) {
      const lease_result_t *x = &r->leases[i];
      bench_json_begin_object(&j, NULL);
      bench_json_int(&j, "leases", x->leases);
      bench_json_bool(&j, "ok", x->ok);
      bench_json_bool(&j, "slow_retry", x->slow);
      bench_json_int(&j, "lease_duration_ms", x->lease_ms);
      bench_json_int(&j, "renew_interval_ms", x->renew_ms);
      bench_json_int(&j, "max_held_at_once", x->max_held);
      bench_json_int(&j, "terms_revoked", x->revoked);
      bench_json_int(&j, "sessions_opened", x->sessions_opened);
      bench_json_int(&j, "acquire_calls_until_all_held", x->acquires_to_elect);
      bench_json_int(&j, "sessions_until_all_held", x->sessions_to_elect);
      if (!x->ok) bench_json_string(&j, "error", x->error);
      bench_json_double(&j, "start_calls_ms", x->start_ms);
      bench_json_double(&j, "time_to_elect_ms", x->elect_ms);
      bench_json_double(&j, "close_ms", x->close_ms);
      bench_json_int(&j, "renew_period_ms", x->renew_period_ms);
      bench_json_double(&j, "window_ms", x->window_ms);
      bench_json_double(&j, "window_periods", x->periods);
      bench_json_string(&j, "window_bounds", rb->counts_lag_ms ? "observed count changes" : "clock");
      bench_json_double(&j, "window_period_tolerance", x->period_tolerance);
      bench_json_int(&j, "server_calls", (int64_t)x->server_calls);
      bench_json_double(&j, "calls_per_renew_interval", x->calls_per_period);
      bench_json_double(&j, "server_usec_per_keep_alive", x->server_usec_per_call);
      bench_json_int(&j, "snapshot_keep_alives", x->snapshot_keep_alives);
      bench_json_int(&j, "snapshot_acquires_in_window", x->snapshot_acquires);
      bench_json_int(&j, "connected_clients", x->connected_clients);
      bench_json_int(&j, "rss_kb", x->rss_kb);
      bench_json_int(&j, "rss_before_client_kb", x->rss_before_kb);
      bench_json_end_object(&j);
    }
    bench_json_end_array(&j);
  }
  if (r->alt_done) {
    bench_json_begin_object(&j, "alternate_durability");
    bench_json_string(&j, "durability", r->alt_durability);
    json_raw(&j, "raw", rb, &r->alt_raw);
    json_cycle(&j, "lock_cycle", &r->alt_cycle, baseline(&r->alt_raw)->p50_us);
    bench_json_end_object(&j);
  }
  if (r->raw_end.done) json_raw(&j, "raw_at_end", rb, &r->raw_end);
  if (r->native_cycle_done || r->native_handover_done || r->native_error[0]) {
    bench_json_begin_object(&j, "native_lock");
    bench_json_string(&j, "what", rb->native_lock_desc);
    if (r->native_error[0]) bench_json_string(&j, "error", r->native_error);
    if (r->native_cycle_done) {
      bench_json_int(&j, "block", kPairBlock);
      bench_json_stats(&j, "cycle", &r->native_cycle);
      bench_json_stats(&j, "simba_cycle_alternating", &r->native_simba_cycle);
    }
    if (r->native_handover_done) bench_json_stats(&j, "handover", &r->native_handover);
    bench_json_end_object(&j);
  }
  bench_json_begin_array(&j, "targets");
  if (r->cycle.done && r->raw.done) {
    bench_json_begin_object(&j, NULL);
    bench_json_string(&j, "name",
                      "lock cycle p50 / (2 x raw RTT p50), alternating blocks (ADR 0013)");
    bench_json_double(&j, "value", v.cycle_ratio);
    bench_json_double(&j, "limit", TARGET_CYCLE_RATIO);
    bench_json_bool(&j, "met", v.cycle_met);
    bench_json_double(&j, "value_vs_tight_loop_rtt_at_start", v.cycle_tight);
    bench_json_end_object(&j);
  }
  if (r->handover.done && r->raw.done) {
    bench_json_begin_object(&j, NULL);
    bench_json_string(&j, "name", "handover p50 / raw RTT p50 after the same idle pause");
    bench_json_double(&j, "value", v.handover_rtts);
    bench_json_double(&j, "limit", TARGET_HANDOVER_RTTS);
    bench_json_bool(&j, "met", v.handover_met);
    bench_json_double(&j, "value_vs_tight_loop_rtt", v.handover_tight);
    bench_json_end_object(&j);
  }
  if (r->native_cycle_done) {
    const double x = ratio(r->native_simba_cycle.p50_us, r->native_cycle.p50_us);
    bench_json_begin_object(&j, NULL);
    bench_json_string(&j, "name", "lock cycle p50 / native lock cycle p50, alternating blocks");
    bench_json_double(&j, "value", x);
    bench_json_double(&j, "limit", TARGET_NATIVE_CYCLE);
    bench_json_bool(&j, "met", x <= TARGET_NATIVE_CYCLE);
    bench_json_end_object(&j);
  }
  if (r->native_handover_done && r->handover.done) {
    const double x = ratio(r->handover.h.p50_us, r->native_handover.p50_us);
    bench_json_begin_object(&j, NULL);
    bench_json_string(&j, "name", "handover p50 / native lock handover p50, same idle pause");
    bench_json_double(&j, "value", x);
    bench_json_double(&j, "limit", TARGET_NATIVE_HANDOVER);
    bench_json_bool(&j, "met", x <= TARGET_NATIVE_HANDOVER);
    bench_json_end_object(&j);
  }
  if (v.ka) {
    bench_json_begin_object(&j, NULL);
    bench_json_string(&j, "name", "keep-alive calls per renew interval at 10000 leases");
    bench_json_double(&j, "value", v.ka->ok ? v.ka->calls_per_period : NAN);
    if (!v.ka->ok) bench_json_string(&j, "error", v.ka->error);
    bench_json_double(&j, "limit", 1.0);
    bench_json_bool(&j, "met", v.ka_met);
    bench_json_end_object(&j);
  }
  bench_json_end_array(&j);
  bench_json_end_object(&j);
  int rc = ferror(f) ? -1 : 0;
  if (fclose(f) != 0) rc = -1;
  if (rc != 0) fprintf(stderr, "simba_bench: error writing %s\n", path);
  return rc;
}

/* One Simba client opens (which creates what Simba needs on first use: the
 * PostgreSQL schema) and closes, in a child process. 0, or -1 if it failed. */
static int setup_backend(const options_t *o) {
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
  /* A lagging count holds every call made more than this long ago: the lag,
   * then one renew period for the client's next keep-alive to publish it. */
  const int64_t settle_ms = rb->counts_lag_ms > 0 ? rb->counts_lag_ms + o.renew_ms + 250 : 0;
  static results_t r; /* large: not on the stack */
  bench_utc_now(r.date, sizeof r.date);
  bench_machine(r.machine, sizeof r.machine, &r.cpus);
  redact(o.url, r.url_redacted, sizeof r.url_redacted);
  loadavg(r.loadavg_start, sizeof r.loadavg_start);

  /* Before any client exists in this process (fork() copies no thread). */
  if (setup_backend(&o) != 0) return 1;

  char err[256];
  raw_conn_t *rc = rb->connect(o.url, err, sizeof err);
  if (!rc) {
    fprintf(stderr, "simba_bench: %s\n", err);
    return 1;
  }
  if (rb->prepare(rc, err, sizeof err) != 0) {
    fprintf(stderr, "simba_bench: %s\n", err);
    return 1;
  }
  rb->describe(rc, r.server_version, sizeof r.server_version, r.durability, sizeof r.durability);
  progress("%s, %s (%s)", r.url_redacted, r.server_version, r.durability);

  if (o.run_raw) {
    progress("raw round trips: %d of each kind", o.rtt_iterations);
    if (run_raw(rb, rc, o.rtt_iterations, o.warmup, 0, &r.raw) != 0) return 1;
    const int idle_n = o.handovers < 200 ? o.handovers : 200;
    if (idle_n > 0 && run_raw_idle(rb, rc, idle_n, o.handover_gap_ms, &r.raw_idle) != 0) return 1;
  }
  /* Before any client exists in this process: fork() copies no thread. */
  if (o.run_handover) {
    progress("handover: %d between two processes", o.handovers);
    run_handover(&o, &r.handover);
    if (r.handover.failed) progress("handover failed: %s", r.handover.error);
    if (rb->native_handover && o.handovers > 0) {
      progress("native lock handover: %d between two processes", o.handovers);
      bench_samples_t s;
      bench_samples_init(&s);
      if (rb->native_handover(o.url, o.handovers, o.handover_gap_ms, &s, r.native_error,
                              sizeof r.native_error) == 0) {
        r.native_handover = bench_summarize(&s);
        r.native_handover_done = 1;
      } else {
        progress("native lock handover failed: %s", r.native_error);
      }
      bench_samples_free(&s);
    }
  }
  if (o.run_cycle) {
    progress("lock cycle: %d acquire+release", o.cycle_iterations);
    simba_client_t *c = open_client(o.url, &o, "bench-cycle");
    run_cycle(c, rb, rc, o.cycle_iterations, o.warmup, settle_ms, &r.cycle);
    progress("lock cycle: %d, alternating with the baseline in blocks of %d", o.cycle_iterations,
             kPairBlock);
    if (run_cycle_paired(c, rb, rc, o.cycle_iterations, o.warmup, &r.paired_cycle,
                         &r.paired_rtt) != 0) {
      return 1;
    }
    r.paired_done = 1;
    if (rb->native_lock_cycle) {
      progress("lock cycle: %d, alternating with the native lock's cycle in blocks of %d",
               o.cycle_iterations, kPairBlock);
      if (run_native_cycle_paired(c, rb, rc, o.cycle_iterations, o.warmup, &r.native_simba_cycle,
                                  &r.native_cycle, r.native_error, sizeof r.native_error) == 0) {
        r.native_cycle_done = 1;
      } else {
        progress("native lock cycle failed: %s", r.native_error);
      }
    }
    r.snapshot_hop = run_snapshot_hop(c, o.cycle_iterations);
    simba_client_close(c);
    progress("diagnostic: lock cycle on memory://");
    simba_client_t *m = open_client("memory://simba-bench", &o, "bench-memory");
    cycle_result_t mc;
    run_cycle(m, NULL, NULL, o.cycle_iterations, o.warmup, 0, &mc);
    r.memory_cycle = mc.cycle;
    simba_client_close(m);
    /* The same cycle in EXTERNAL mode, where a blocking call on the host's
     * thread runs the loop itself until its answer came: the bound on what a
     * THREAD-mode caller that borrows the idle loop (ADR 0014) can get. */
    progress("diagnostic: lock cycle with loop.mode=external");
    simba_client_t *x = open_client_kv(o.url, &o, "bench-cycle-external", "loop.mode", "external");
    cycle_result_t xc;
    run_cycle(x, NULL, NULL, o.cycle_iterations, o.warmup, 0, &xc);
    r.external_cycle = xc.cycle;
    simba_client_close(x);
    r.diagnostics_done = 1;
  }
  if (o.run_leases) {
    for (int i = 0; i < o.n_lease_counts; i++) {
      progress("leases: %d held by one client (window of %d renew periods)", o.lease_counts[i],
               o.window_periods);
      lease_result_t *x = &r.leases[r.n_leases++];
      run_leases(&o, rb, rc, o.lease_counts[i], 0, x);
      if (x->ok) continue;
      progress("leases %d: %s", o.lease_counts[i], x->error);
      if (o.slow_renew_ms <= o.renew_ms) continue;
      /* The same count at a longer renew interval: does the client get there
       * when its calls have more time? Reported apart, never judged. */
      options_t slow = o;
      slow.renew_ms = o.slow_renew_ms;
      slow.lease_ms = 3 * o.slow_renew_ms;
      if (slow.window_periods > 2) slow.window_periods = 2;
      progress("leases: %d again with lease %lld ms, renew %lld ms (window of %d periods)",
               o.lease_counts[i], (long long)slow.lease_ms, (long long)slow.renew_ms,
               slow.window_periods);
      x = &r.leases[r.n_leases++];
      run_leases(&slow, rb, rc, o.lease_counts[i], 1, x);
      if (!x->ok) progress("leases %d (renew %lld ms): %s", o.lease_counts[i],
                           (long long)slow.renew_ms, x->error);
    }
  }
  if (o.also_durability && rb->set_durability) {
    char previous[64];
    if (rb->set_durability(rc, o.also_durability, previous, sizeof previous, err, sizeof err) != 0) {
      progress("cannot change the durability: %s", err);
    } else {
      char version[64];
      rb->describe(rc, version, sizeof version, r.alt_durability, sizeof r.alt_durability);
      progress("with %s: raw round trips and lock cycle", r.alt_durability);
      if (run_raw(rb, rc, o.rtt_iterations, o.warmup, 0, &r.alt_raw) == 0) {
        simba_client_t *c = open_client(o.url, &o, "bench-cycle-alt");
        run_cycle(c, rb, rc, o.cycle_iterations, o.warmup, settle_ms, &r.alt_cycle);
        simba_client_close(c);
        r.alt_done = 1;
      }
      char ignored[64];
      if (rb->set_durability(rc, previous, ignored, sizeof ignored, err, sizeof err) != 0) {
        progress("cannot restore the durability: %s", err);
      }
    }
  }
  if (o.run_raw) {
    char version[64], now_durability[96];
    rb->describe(rc, version, sizeof version, now_durability, sizeof now_durability);
    if (strcmp(now_durability, r.durability) != 0) {
      progress("the server's durability is now '%s', not '%s'", now_durability, r.durability);
    }
    progress("raw round trips again, to see whether the machine drifted");
    run_raw(rb, rc, o.rtt_iterations, o.warmup, RAW_OP_WRITE, &r.raw_end);
  }
  rb->disconnect(rc);
  loadavg(r.loadavg_end, sizeof r.loadavg_end);

  print_report(&o, rb, &r);
  if (o.json_path && write_json(o.json_path, &o, rb, &r) != 0) return 1;
  if (o.json_path) progress("wrote %s", o.json_path);
  return r.handover.failed ? 1 : 0;
}

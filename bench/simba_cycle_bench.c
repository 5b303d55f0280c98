/* simba_cycle_bench: the lock cycle (simba_lock_acquire + simba_lock_release,
 * blocking, uncontended) of a C client with the default callback pool and of
 * one with a host executor (simba_config_set_executor, a one-thread queue), in
 * alternating blocks in one run, and their ratio (issue 36; docs/benchmarks.md,
 * "Host executor"). No raw baseline, so any URL: memory:// shows the library's
 * own cost. scripts/bench-bindings.sh runs it (--mode pool) as the C figure
 * each binding's cycle is divided by.
 *
 *   simba_cycle_bench [--url URL] [--cycles N] [--warmup N] [--block N]
 *                     [--mode both|pool|host]
 *
 * The last line of stdout is machine-readable:
 *   RESULT url=... pool_p50_us=4.7 host_p50_us=4.8 ratio=1.02 target=1.30
 *          pool_mean_us=5.1 host_mean_us=5.2 round_mean_us=nan
 * (on one line; a mode's missing figure is "nan"; round_mean_us, with one
 * client alone: the median of five rounds' means). Public ABI only. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <simba.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_cycle.h"
#include "bench_util.h"

typedef struct options {
  const char *url;
  int cycles, warmup, block;
  const char *mode;
} options_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: simba_cycle_bench [--url URL] [--cycles N] [--warmup N] [--block N]\n"
          "                         [--mode both|pool|host]\n"
          "  --url URL    backend (default memory://cycle-bench)\n"
          "  --cycles N   measured cycles of each client (default 4000)\n"
          "  --warmup N   unmeasured cycles of each first (default 400)\n"
          "  --block N    cycles of one client before the other's turn (default 50)\n"
          "  --mode M     both (default): the default pool and a host executor,\n"
          "               alternating; pool or host: that client alone\n");
}

static int parse(int argc, char **argv, options_t *o) {
  *o = (options_t){"memory://cycle-bench", 4000, 400, 50, "both"};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    }
    if (i + 1 >= argc) {
      usage(stderr);
      return -1;
    }
    const char *v = argv[++i];
    if (!strcmp(a, "--url")) {
      o->url = v;
    } else if (!strcmp(a, "--cycles")) {
      o->cycles = atoi(v);
    } else if (!strcmp(a, "--warmup")) {
      o->warmup = atoi(v);
    } else if (!strcmp(a, "--block")) {
      o->block = atoi(v);
    } else if (!strcmp(a, "--mode")) {
      o->mode = v;
    } else {
      usage(stderr);
      return -1;
    }
  }
  if (o->cycles <= 0 || o->warmup < 0 || o->block <= 0 ||
      (strcmp(o->mode, "both") && strcmp(o->mode, "pool") && strcmp(o->mode, "host"))) {
    usage(stderr);
    return -1;
  }
  return 0;
}

static simba_client_t *open_client(const char *url, const char *name, bench_queue_executor_t *q) {
  simba_config_t *cfg = NULL;
  int rc = simba_config_new(&cfg);
  if (rc == SIMBA_OK) rc = simba_config_set(cfg, "client.name", name);
  if (rc == SIMBA_OK && q) rc = simba_config_set_executor(cfg, bench_queue_executor_submit, q);
  simba_client_t *c = NULL;
  if (rc == SIMBA_OK) rc = simba_client_open(&c, url, cfg);
  simba_config_free(cfg);
  if (rc == SIMBA_OK) rc = simba_client_wait_live(c, 10000);
  if (rc != SIMBA_OK) {
    fprintf(stderr, "simba_cycle_bench: %s: %s (%s)\n", name, simba_strerror(rc),
            simba_last_error());
    exit(1);
  }
  return c;
}

static void print_stats(const char *label, const bench_stats_t *s) {
  printf("%-30s %6zu  p50 %8.1f  p90 %8.1f  p99 %8.1f us\n", label, s->n, s->p50_us, s->p90_us,
         s->p99_us);
}

/* One client's cycles alone. *round_mean_us: the median of the means of five
 * equal rounds, the statistic the bindings' benches print (they time loops). 0
 * or -1. */
static int cycle_alone(simba_client_t *c, const char *name, const options_t *o, bench_stats_t *out,
                       double *round_mean_us) {
  enum { kRounds = 5 };
  bench_samples_t s;
  bench_samples_init(&s);
  double means[kRounds] = {0};
  const int per = o->cycles / kRounds > 0 ? o->cycles / kRounds : 1;
  int rc = 0;
  for (int i = 0; i < o->warmup + o->cycles && rc == 0; i++) {
    const int64_t ns = bench_lock_cycle_ns(c, name);
    if (ns < 0) rc = -1;
    if (ns < 0 || i < o->warmup) continue;
    bench_samples_push(&s, ns);
    const int r = (i - o->warmup) / per;
    if (r < kRounds) means[r] += ns / 1000.0 / per;
  }
  for (int i = 1; i < kRounds; i++) { /* insertion sort of five */
    for (int k = i; k > 0 && means[k] < means[k - 1]; k--) {
      const double t = means[k];
      means[k] = means[k - 1];
      means[k - 1] = t;
    }
  }
  *round_mean_us = means[kRounds / 2];
  *out = bench_summarize(&s);
  bench_samples_free(&s);
  return rc;
}

int main(int argc, char **argv) {
  options_t o;
  if (parse(argc, argv, &o) != 0) return 2;
  const int memory = strncmp(o.url, "memory://", 9) == 0;
  const double target = memory ? TARGET_HOST_EXECUTOR_MEMORY : TARGET_HOST_EXECUTOR_REMOTE;
  const int want_pool = strcmp(o.mode, "host") != 0, want_host = strcmp(o.mode, "pool") != 0;
  char pool_name[64], host_name[64];
  snprintf(pool_name, sizeof pool_name, "cycle-bench-%ld-pool", (long)getpid());
  snprintf(host_name, sizeof host_name, "cycle-bench-%ld-host", (long)getpid());

  bench_queue_executor_t *q = want_host ? bench_queue_executor_start() : NULL;
  if (want_host && !q) {
    fprintf(stderr, "simba_cycle_bench: cannot start the executor's thread\n");
    return 1;
  }
  simba_client_t *pool = want_pool ? open_client(o.url, pool_name, NULL) : NULL;
  simba_client_t *host = want_host ? open_client(o.url, host_name, q) : NULL;
  bench_stats_t ps = {0}, hs = {0};
  double round_mean = NAN; /* one client alone */
  int rc = 0;
  if (pool && host) {
    rc = bench_cycles_alternating(pool, pool_name, host, host_name, o.cycles, o.warmup, o.block,
                                  &ps, &hs);
  } else {
    rc = cycle_alone(pool ? pool : host, pool ? pool_name : host_name, &o, pool ? &ps : &hs,
                     &round_mean);
  }
  if (pool) simba_client_close(pool);
  if (host) simba_client_close(host);
  bench_queue_executor_stop(q);
  if (rc != 0) return 1;

  double pool_p50 = NAN, host_p50 = NAN;
  printf("simba_cycle_bench: %s, libsimba %s, %d cycles each after %d, blocks of %d\n", o.url,
         simba_version_string(), o.cycles, o.warmup, o.block);
  if (pool && host) {
    print_stats("lock cycle, default pool", &ps);
    print_stats("lock cycle, host executor", &hs);
    pool_p50 = ps.p50_us;
    host_p50 = hs.p50_us;
    const double ratio = host_p50 / pool_p50;
    printf("host executor / default pool   %.2f (target <= %.2f: %s)\n", ratio, target,
           ratio <= target ? "met" : "MISSED");
  } else {
    print_stats(pool ? "lock cycle, default pool" : "lock cycle, host executor", pool ? &ps : &hs);
    pool_p50 = pool ? ps.p50_us : NAN;
    host_p50 = host ? hs.p50_us : NAN;
  }
  printf(
      "RESULT url=%s pool_p50_us=%.2f host_p50_us=%.2f ratio=%.3f target=%.2f "
      "pool_mean_us=%.2f host_mean_us=%.2f round_mean_us=%.2f\n",
      o.url, pool_p50, host_p50, host_p50 / pool_p50, target, pool ? ps.mean_us : NAN,
      host ? hs.mean_us : NAN, round_mean);
  return 0;
}

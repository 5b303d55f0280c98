/* simba_sentinel_bench: what redis+sentinel:// and its wait_replicas cost
 * (ADR 0025; docs/benchmarks.md "Redis Sentinel"), measured in one run on one
 * primary + replica + Sentinels that scripts/bench_sentinel.sh starts.
 *
 *   simba_sentinel_bench --primary-port P --sentinel-url URL [--cycles N]
 *
 * In alternating blocks (the servers' fsync time drifts between phases):
 *   raw write   hiredis, synchronous: an EVAL doing one HSET (the shape of
 *               Simba's writes), AOF fsynced by the server
 *   raw waited  the same EVAL and a WAIT 1 pipelined behind it: the replica's
 *               acknowledgement on top of the write
 *   cycles      simba_lock_acquire + simba_lock_release on redis:// (the
 *               primary directly), on URL, and on URL with wait_replicas=1
 * Medians, and each cycle as a multiple of two raw writes (an acquire and a
 * release are one write each). */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "simba.h"

enum { kBlock = 20, kWarmup = 100 };

static void die(const char *what, const char *detail) {
  fprintf(stderr, "simba_sentinel_bench: %s: %s\n", what, detail);
  exit(1);
}

static redisContext *connect_raw(int port) {
  redisContext *c = redisConnect("127.0.0.1", port);
  if (!c || c->err) die("connect", c ? c->errstr : "out of memory");
  return c;
}

/* One EVAL (an HSET), and with `waited` a WAIT 1 behind it, pipelined. */
static int64_t raw_write_ns(redisContext *c, int waited) {
  const int64_t t0 = bench_now_ns();
  redisAppendCommand(c, "EVAL %s 1 %s %s", "return redis.call('HSET', KEYS[1], 'v', ARGV[1])",
                     "bench-sentinel-raw", "1");
  if (waited) redisAppendCommand(c, "WAIT 1 1000");
  for (int i = 0; i < 1 + waited; i++) {
    redisReply *r = NULL;
    if (redisGetReply(c, (void **)&r) != REDIS_OK || !r) die("raw write", c->errstr);
    if (r->type == REDIS_REPLY_ERROR) die("raw write", r->str);
    if (waited && i == 1 && r->integer < 1) die("raw write", "WAIT: no replica acknowledged");
    freeReplyObject(r);
  }
  return bench_now_ns() - t0;
}

static simba_client_t *open_client(const char *url) {
  simba_client_t *c = NULL;
  const int rc = simba_client_open(&c, url, NULL);
  if (rc != SIMBA_OK) die(url, simba_last_error());
  return c;
}

static int64_t cycle_ns(simba_client_t *c) {
  simba_term_t *t = NULL;
  const int64_t t0 = bench_now_ns();
  if (simba_lock_acquire(&t, c, "bench-sentinel-cycle", 5000) != SIMBA_OK) {
    die("simba_lock_acquire", simba_last_error());
  }
  if (simba_lock_release(t) != SIMBA_OK) die("simba_lock_release", simba_last_error());
  return bench_now_ns() - t0;
}

enum { kRaw, kRawWaited, kDirect, kSentinel, kSentinelWait, kKinds };
static const char *const kNames[kKinds] = {"raw write (EVAL, fsync)", "raw write + WAIT 1",
                                           "cycle redis:// (primary)", "cycle redis+sentinel://",
                                           "cycle redis+sentinel://?wait_replicas=1"};

int main(int argc, char **argv) {
  int port = 0, cycles = 1000;
  const char *url = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--primary-port") == 0)
      port = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--sentinel-url") == 0)
      url = argv[i + 1];
    else if (strcmp(argv[i], "--cycles") == 0)
      cycles = atoi(argv[i + 1]);
  }
  if (port <= 0 || !url || cycles <= 0 || strchr(url, '?')) {
    fprintf(stderr,
            "usage: simba_sentinel_bench --primary-port P --sentinel-url "
            "redis+sentinel://HOSTS/MASTER (no query) [--cycles N]\n");
    return 2;
  }
  char direct_url[128], wait_url[1024];
  snprintf(direct_url, sizeof direct_url, "redis://127.0.0.1:%d", port);
  snprintf(wait_url, sizeof wait_url, "%s?wait_replicas=1", url);
  redisContext *raw = connect_raw(port);
  simba_client_t *clients[kKinds] = {NULL, NULL, open_client(direct_url), open_client(url),
                                     open_client(wait_url)};
  bench_samples_t s[kKinds];
  for (int k = 0; k < kKinds; k++) bench_samples_init(&s[k]);
  for (int done = 0; done < kWarmup + cycles; done += kBlock) {
    for (int k = 0; k < kKinds; k++) {
      for (int i = 0; i < kBlock; i++) {
        const int64_t ns =
            k <= kRawWaited ? raw_write_ns(raw, k == kRawWaited) : cycle_ns(clients[k]);
        if (done >= kWarmup) bench_samples_push(&s[k], ns);
      }
    }
  }
  bench_stats_t st[kKinds];
  for (int k = 0; k < kKinds; k++) st[k] = bench_summarize(&s[k]);
  printf("%-42s %9s %9s %9s  %s\n", "", "p50 us", "p90 us", "p99 us", "p50 / 2 raw writes");
  for (int k = 0; k < kKinds; k++) {
    printf("%-42s %9.1f %9.1f %9.1f  %.2f\n", kNames[k], st[k].p50_us, st[k].p90_us, st[k].p99_us,
           st[k].p50_us / (2 * st[kRaw].p50_us));
  }
  printf("wait_replicas=1 costs %.2fx the cycle without it; WAIT adds %.1f us to a raw write\n",
         st[kSentinelWait].p50_us / st[kSentinel].p50_us, st[kRawWaited].p50_us - st[kRaw].p50_us);
  for (int k = 0; k < kKinds; k++) {
    bench_samples_free(&s[k]);
    simba_client_close(clients[k]);
  }
  redisFree(raw);
  return 0;
}

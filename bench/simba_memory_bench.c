/* simba_memory_bench: what one lease costs in memory (issue 21).
 *
 * One client (its own loop thread, the default) starts N elections on distinct
 * names, waits until every one is won, holds them for a few renew periods (so
 * that keep-alives ran and what a burst of acquires left behind is gone), and
 * reports, divided by N:
 *   - the heap bytes in use (glibc mallinfo2: uordblks + hblkhd) added by the
 *     N elections, measured from the client's own baseline (open and live);
 *   - the VmRSS added over the same span (pages the process touched: includes
 *     heap the allocator keeps but no longer uses, thread stacks, fragmentation).
 * Both include everything a program holding N elections pays: the library's
 * state, the simba_election_t handles, and for memory:// the in-process store's
 * records (for a remote backend the store is the server's, not counted here).
 * After simba_client_close() and every simba_election_free() it reports the
 * heap left above the client's baseline too (memory:// keeps its lease records
 * for the life of the process, so that tokens never reset).
 *
 *   simba_memory_bench [--url memory://NAME] [--leases N[,N...]] [--hold-periods P]
 *                      [--lease-ms L] [--renew-ms R] [--json PATH]
 *
 * Uses the public ABI only. Plain C11 + POSIX + glibc's mallinfo2/malloc_trim. */
#define _GNU_SOURCE
#include <malloc.h>
#include <simba.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#define MAX_COUNTS 8

typedef struct options {
  const char *url;
  int counts[MAX_COUNTS];
  int n_counts;
  int hold_periods;
  int64_t lease_ms, renew_ms;
  int elect_timeout_s;
  const char *json;
} options_t;

typedef struct row {
  int leases;
  int ok;
  double start_ms, elect_ms, close_ms;
  int64_t heap_client, heap_held, heap_after_close; /* bytes: above the process baseline */
  int64_t rss_client_kb, rss_held_kb;
  int64_t keep_alives_held, acquires_held, revoked;
  char error[200];
} row_t;

static void die(const char *what, int rc) {
  fprintf(stderr, "simba_memory_bench: %s: %s (%s)\n", what, simba_strerror(rc),
          simba_last_error());
  exit(1);
}

static int64_t heap_in_use(void) {
  const struct mallinfo2 mi = mallinfo2();
  return (int64_t)(mi.uordblks + mi.hblkhd);
}

static int64_t json_int(const char *json, const char *key) {
  char pat[96];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = json ? strstr(json, pat) : NULL;
  return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

static int64_t counter(simba_client_t *c, const char *key) {
  char *s = simba_client_snapshot_json(c);
  const int64_t v = json_int(s, key);
  simba_free(s);
  return v;
}

typedef struct elect_ctx {
  atomic_int elected, revoked;
} elect_ctx_t;

static void on_elected(void *ud, simba_term_t *t) {
  (void)t;
  atomic_fetch_add(&((elect_ctx_t *)ud)->elected, 1);
}

static void on_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t r) {
  (void)t;
  (void)r;
  atomic_fetch_add(&((elect_ctx_t *)ud)->revoked, 1);
}

static void run(const options_t *o, int n, int64_t heap0, row_t *out) {
  memset(out, 0, sizeof *out);
  out->leases = n;
  simba_config_t *cfg = NULL;
  int rc = simba_config_new(&cfg);
  if (rc == SIMBA_OK) rc = simba_config_set_ms(cfg, "session.lease-duration", o->lease_ms);
  if (rc == SIMBA_OK) rc = simba_config_set_ms(cfg, "session.renew-interval", o->renew_ms);
  if (rc == SIMBA_OK) rc = simba_config_set(cfg, "client.name", "memory-bench");
  if (rc != SIMBA_OK) die("config", rc);
  simba_client_t *c = NULL;
  rc = simba_client_open(&c, o->url, cfg);
  simba_config_free(cfg);
  if (rc != SIMBA_OK) die("simba_client_open", rc);
  rc = simba_client_wait_live(c, 10000);
  if (rc != SIMBA_OK) die("simba_client_wait_live", rc);
  /* Let the loop thread and the callback pool touch their stacks first. */
  bench_sleep_ns(50 * 1000000LL);
  malloc_trim(0);
  out->heap_client = heap_in_use() - heap0;
  out->rss_client_kb = bench_rss_kb();

  simba_election_t **es = calloc((size_t)n, sizeof *es);
  if (!es) die("calloc", SIMBA_ENOMEM);
  elect_ctx_t ec;
  atomic_init(&ec.elected, 0);
  atomic_init(&ec.revoked, 0);
  simba_listener_t l = {on_elected, on_revoked, &ec};
  const int64_t t0 = bench_now_ns();
  for (int i = 0; i < n; i++) {
    char name[64];
    /* 19 characters, longer than a std::string's inline buffer like most real
     * names; distinct per row, so that no row finds the store's records of
     * an earlier one. */
    snprintf(name, sizeof name, "mem.%07d.%07d", n, i);
    rc = simba_election_start(&es[i], c, name, &l);
    if (rc != SIMBA_OK) die("simba_election_start", rc);
  }
  const int64_t t_started = bench_now_ns();
  const int64_t give_up = t_started + (int64_t)o->elect_timeout_s * 1000000000LL;
  while (atomic_load(&ec.elected) < n && bench_now_ns() < give_up) bench_sleep_ns(1000000);
  const int64_t t_elected = bench_now_ns();
  out->start_ms = (double)(t_started - t0) / 1e6;
  out->elect_ms = (double)(t_elected - t0) / 1e6;
  if (atomic_load(&ec.elected) < n) {
    snprintf(out->error, sizeof out->error, "only %d of %d elected within %d s",
             atomic_load(&ec.elected), n, o->elect_timeout_s);
  } else {
    /* Hold: keep-alives run, and the acquires' traces (calls, timers) are gone. */
    const int64_t ka0 = counter(c, "keep_alives");
    const int64_t acq0 = counter(c, "acquires");
    bench_sleep_ns((int64_t)o->hold_periods * o->renew_ms * 1000000LL);
    out->keep_alives_held = counter(c, "keep_alives") - ka0;
    out->acquires_held = counter(c, "acquires") - acq0;
    out->revoked = atomic_load(&ec.revoked);
    malloc_trim(0);
    out->heap_held = heap_in_use() - heap0;
    out->rss_held_kb = bench_rss_kb();
    out->ok = out->revoked == 0 && out->acquires_held == 0 && out->keep_alives_held >= 1;
    if (!out->ok) {
      snprintf(out->error, sizeof out->error,
               "not held steadily: %lld revoked, %lld acquires and %lld keep-alives while held",
               (long long)out->revoked, (long long)out->acquires_held,
               (long long)out->keep_alives_held);
    }
  }
  const int64_t t_close = bench_now_ns();
  rc = simba_client_close(c);
  if (rc != SIMBA_OK) die("simba_client_close", rc);
  out->close_ms = (double)(bench_now_ns() - t_close) / 1e6;
  for (int i = 0; i < n; i++) simba_election_free(es[i]);
  free(es);
  malloc_trim(0);
  out->heap_after_close = heap_in_use() - heap0;
}

static int parse_counts(const char *s, options_t *o) {
  o->n_counts = 0;
  while (*s && o->n_counts < MAX_COUNTS) {
    char *end;
    const long v = strtol(s, &end, 10);
    if (end == s || v <= 0 || v > 10000000) return -1;
    o->counts[o->n_counts++] = (int)v;
    s = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return -1;
  }
  return o->n_counts > 0 ? 0 : -1;
}

static void usage(void) {
  fprintf(stderr,
          "usage: simba_memory_bench [--url URL] [--leases N[,N...]] [--hold-periods P]\n"
          "                          [--lease-ms L] [--renew-ms R] [--elect-timeout-s S]\n"
          "                          [--json PATH]\n"
          "defaults: memory://memory-bench, 1000,10000,100000, 3 periods, 3000/1000 ms, 120 s\n");
}

int main(int argc, char **argv) {
  options_t o = {"memory://memory-bench", {1000, 10000, 100000}, 3, 3, 3000, 1000, 120, NULL};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage();
      return 0;
    }
    if (!v) {
      usage();
      return 2;
    }
    ++i;
    if (!strcmp(a, "--url")) {
      o.url = v;
    } else if (!strcmp(a, "--leases")) {
      if (parse_counts(v, &o) != 0) {
        usage();
        return 2;
      }
    } else if (!strcmp(a, "--hold-periods")) {
      o.hold_periods = atoi(v);
    } else if (!strcmp(a, "--lease-ms")) {
      o.lease_ms = atoll(v);
    } else if (!strcmp(a, "--renew-ms")) {
      o.renew_ms = atoll(v);
    } else if (!strcmp(a, "--elect-timeout-s")) {
      o.elect_timeout_s = atoi(v);
    } else if (!strcmp(a, "--json")) {
      o.json = v;
    } else {
      usage();
      return 2;
    }
  }
  if (o.hold_periods < 1) o.hold_periods = 1;

  char date[32], machine[256];
  int cpus = 0;
  bench_utc_now(date, sizeof date);
  bench_machine(machine, sizeof machine, &cpus);
  printf(
      "Simba %s memory per lease, %s\nmachine: %s\nbackend: %s; lease %lld ms, renew %lld ms;"
      " measured after %d renew periods held\n\n",
      simba_version_string(), date, machine, o.url, (long long)o.lease_ms, (long long)o.renew_ms,
      o.hold_periods);
  printf("  %9s %9s %9s %12s %12s %11s %11s %10s\n", "leases", "start ms", "elect ms",
         "heap B/lease", "RSS B/lease", "base KiB", "left B/ls", "close ms");

  malloc_trim(0);
  const int64_t heap0 = heap_in_use();
  row_t rows[MAX_COUNTS];
  int failed = 0;
  for (int k = 0; k < o.n_counts; k++) {
    row_t *r = &rows[k];
    run(&o, o.counts[k], heap0, r);
    const double n = (double)r->leases;
    printf("  %9d %9.1f %9.1f %12.0f %12.0f %11.0f %11.0f %10.1f%s%s\n", r->leases, r->start_ms,
           r->elect_ms, (double)(r->heap_held - r->heap_client) / n,
           (double)(r->rss_held_kb - r->rss_client_kb) * 1024.0 / n,
           (double)r->heap_client / 1024.0, (double)r->heap_after_close / n, r->close_ms,
           r->ok ? "" : "  FAILED: ", r->ok ? "" : r->error);
    failed |= !r->ok;
  }
  printf(
      "\n  heap B/lease: heap in use (mallinfo2) with every lease held, above the same"
      " client live\n  without a lease; RSS B/lease: VmRSS added likewise; base KiB: heap above"
      " the program's\n  start with the client live, before its leases (memory:// keeps the"
      " records of earlier\n  rows); left B/ls: heap still above the start once the client"
      " closed and every handle\n  was freed (memory:// keeps its lease records for good,"
      " so that tokens never reset)\n");

  if (o.json) {
    FILE *f = fopen(o.json, "w");
    if (!f) {
      perror(o.json);
      return 1;
    }
    bench_json_t j;
    bench_json_init(&j, f);
    bench_json_begin_object(&j, NULL);
    bench_json_string(&j, "simba", simba_version_string());
    bench_json_string(&j, "date", date);
    bench_json_string(&j, "machine", machine);
    bench_json_string(&j, "url", o.url);
    bench_json_int(&j, "lease_ms", o.lease_ms);
    bench_json_int(&j, "renew_ms", o.renew_ms);
    bench_json_int(&j, "hold_periods", o.hold_periods);
    bench_json_begin_array(&j, "rows");
    for (int k = 0; k < o.n_counts; k++) {
      const row_t *r = &rows[k];
      bench_json_begin_object(&j, NULL);
      bench_json_int(&j, "leases", r->leases);
      bench_json_bool(&j, "ok", r->ok);
      bench_json_double(&j, "start_ms", r->start_ms);
      bench_json_double(&j, "elect_ms", r->elect_ms);
      bench_json_double(&j, "close_ms", r->close_ms);
      bench_json_int(&j, "heap_client_bytes", r->heap_client);
      bench_json_int(&j, "heap_held_bytes", r->heap_held);
      bench_json_double(&j, "heap_bytes_per_lease",
                        (double)(r->heap_held - r->heap_client) / r->leases);
      bench_json_int(&j, "rss_client_kb", r->rss_client_kb);
      bench_json_int(&j, "rss_held_kb", r->rss_held_kb);
      bench_json_double(&j, "rss_bytes_per_lease",
                        (double)(r->rss_held_kb - r->rss_client_kb) * 1024.0 / r->leases);
      bench_json_int(&j, "heap_after_close_bytes", r->heap_after_close);
      bench_json_int(&j, "keep_alives_while_held", r->keep_alives_held);
      bench_json_int(&j, "acquires_while_held", r->acquires_held);
      bench_json_string(&j, "error", r->error);
      bench_json_end_object(&j);
    }
    bench_json_end_array(&j);
    bench_json_end_object(&j);
    fputc('\n', f);
    fclose(f);
  }
  return failed ? 1 : 0;
}

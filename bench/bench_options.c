/* simba_bench's options: defaults, $SIMBA_BENCH_URL, the command line, and the
 * namespace added to the URL (simba_bench.h). */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "simba_bench.h"

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: simba_bench [options]\n"
      "  --url URL               backend (default $SIMBA_BENCH_URL, else redis://127.0.0.1:6379):\n"
      "                          redis://..., postgresql://..., zookeeper://... or etcd://...; "
      "without\n"
      "                          its namespace (Redis prefix=, PostgreSQL schema=, ZooKeeper\n"
      "                          the chroot path), one unique to this run is added\n"
      "  --json FILE             write the results as JSON to FILE\n"
      "  --rtt-iterations N      raw round trips per kind (default 5000)\n"
      "  --cycle-iterations N    lock acquire+release cycles (default 2000)\n"
      "  --permit-iterations N   cycles of each kind in the permits phase (default 500)\n"
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
      "  --only LIST             phases to run: raw,handover,cycle,permits,leases\n"
      "                          (default all)\n"
      "  -h, --help\n");
}

static int parse_int(const char *s, int *out) {
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (!s[0] || *end || v < 0 || v > 100000000) return -1;
  *out = (int)v;
  return 0;
}

/* The options that take a count, and the field each sets (an int or an int64_t). */
#define COUNT_OPTION(flag, field) \
  { flag, offsetof(options_t, field), sizeof(((options_t *)0)->field) }
static const struct {
  const char *flag;
  size_t offset, size;
} kCountOptions[] = {
    COUNT_OPTION("--rtt-iterations", rtt_iterations),
    COUNT_OPTION("--cycle-iterations", cycle_iterations),
    COUNT_OPTION("--permit-iterations", permit_iterations),
    COUNT_OPTION("--warmup", warmup),
    COUNT_OPTION("--handovers", handovers),
    COUNT_OPTION("--handover-gap-ms", handover_gap_ms),
    COUNT_OPTION("--handover-cooldown-ms", handover_cooldown_ms),
    COUNT_OPTION("--lease-duration-ms", lease_ms),
    COUNT_OPTION("--renew-interval-ms", renew_ms),
    COUNT_OPTION("--window-periods", window_periods),
    COUNT_OPTION("--elect-timeout-s", elect_timeout_s),
    COUNT_OPTION("--slow-renew-ms", slow_renew_ms),
};
#undef COUNT_OPTION

static void set_defaults(options_t *o) {
  memset(o, 0, sizeof *o);
  const char *url = getenv("SIMBA_BENCH_URL");
  snprintf(o->url, sizeof o->url, "%s", url && *url ? url : "redis://127.0.0.1:6379");
  o->rtt_iterations = 5000;
  o->cycle_iterations = 2000;
  o->permit_iterations = 500;
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
  o->run_raw = o->run_handover = o->run_cycle = o->run_leases = o->run_permits = 1;
}

/* A count option a = v: 1 if set, 0 if a is none, -1 after a message. */
static int set_count(options_t *o, const char *a, const char *v) {
  for (size_t k = 0; k < sizeof kCountOptions / sizeof kCountOptions[0]; k++) {
    if (strcmp(a, kCountOptions[k].flag) != 0) continue;
    int n = 0;
    if (parse_int(v, &n) != 0) {
      fprintf(stderr, "simba_bench: %s: not a count: '%s'\n", a, v);
      return -1;
    }
    char *field = (char *)o + kCountOptions[k].offset;
    if (kCountOptions[k].size == sizeof(int64_t)) {
      const int64_t wide = n;
      memcpy(field, &wide, sizeof wide);
    } else {
      memcpy(field, &n, sizeof n);
    }
    return 1;
  }
  return 0;
}

static int set_lease_counts(options_t *o, const char *v) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", v);
  o->n_lease_counts = 0;
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    int n = 0;
    if (o->n_lease_counts == MAX_LEASE_COUNTS || parse_int(tok, &n) != 0 || n < 1) {
      fprintf(stderr, "simba_bench: --lease-counts: bad list '%s'\n", v);
      return -1;
    }
    o->lease_counts[o->n_lease_counts++] = n;
  }
  return 0;
}

/* An option that takes a value: a = v. 1 if set, 0 if a is none, -1 after a message. */
static int set_option(options_t *o, const char *a, const char *v) {
  if (strcmp(a, "--url") == 0) {
    snprintf(o->url, sizeof o->url, "%s", v);
  } else if (strcmp(a, "--json") == 0) {
    o->json_path = v;
  } else if (strcmp(a, "--also-durability") == 0) {
    o->also_durability = v;
  } else if (strcmp(a, "--lease-counts") == 0) {
    if (set_lease_counts(o, v) != 0) return -1;
  } else if (strcmp(a, "--only") == 0) {
    o->run_raw = strstr(v, "raw") != NULL;
    o->run_handover = strstr(v, "handover") != NULL;
    o->run_cycle = strstr(v, "cycle") != NULL;
    o->run_leases = strstr(v, "leases") != NULL;
    o->run_permits = strstr(v, "permits") != NULL;
  } else {
    return set_count(o, a, v);
  }
  return 1;
}

static int takes_value(const char *a) {
  static const char *const kValueOptions[] = {"--url", "--json", "--also-durability",
                                              "--lease-counts", "--only"};
  for (size_t k = 0; k < sizeof kValueOptions / sizeof kValueOptions[0]; k++) {
    if (strcmp(a, kValueOptions[k]) == 0) return 1;
  }
  for (size_t k = 0; k < sizeof kCountOptions / sizeof kCountOptions[0]; k++) {
    if (strcmp(a, kCountOptions[k].flag) == 0) return 1;
  }
  return 0;
}

int parse_options(int argc, char **argv, options_t *o) {
  set_defaults(o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (!takes_value(a)) {
      fprintf(stderr, "simba_bench: unknown argument '%s'\n", a);
      usage(stderr);
      return -1;
    }
    if (!v) {
      fprintf(stderr, "simba_bench: %s needs a value\n", a);
      return -1;
    }
    i++;
    if (set_option(o, a, v) < 0) return -1;
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

void add_namespace(options_t *o, const raw_backend_t *rb) {
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
  snprintf(o->url + len, sizeof o->url - len, "%c%s=%s", q ? '&' : '?', rb->namespace_param, value);
}

/* chaos_hold: one client holding many elections, for the soak and load runs
 * (scripts/soak.sh, scripts/load.sh, docs/testing.md).
 *
 * Takes chaos_worker's arguments, so that nemesis.py runs it in a worker's
 * place (--worker chaos_hold), and logs the same term lines the checker reads
 * (elected, valid, revoked, exit), without the register: it holds, it does not
 * write. Every --sample seconds (and at start and end) it logs what the soak and
 * load runs measure:
 *
 *   T stats PHASE RSS_KB FDS CPU_MS KEEP_ALIVES KA_FAILURES HELD ELECTED LOST RENEW_MS
 *
 * PHASE start|run|end; RSS and fds from /proc/self, CPU user+system; the
 * keep-alive counters and the renew period from simba_client_snapshot_json();
 * HELD terms held now, ELECTED and LOST (revoked DEADLINE_PASSED,
 * SESSION_EXPIRED, TAKEN_OVER) since start.
 *
 *   chaos_hold --url URL [--id ID] [--names a,b | --count N [--prefix P]]
 *              [--log FILE] [--lease MS] [--renew MS] [--sample S] [--valid-every MS]
 *
 * Without --log the lines go to stdout. SIGTERM or SIGINT: the end line, every
 * election stopped, the client closed, exit 0. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "chaos_common.h"
#include "simba.h"

typedef struct slot {
  char *name;
  pthread_mutex_t mu;
  simba_term_t *term; /* retained while held */
  simba_election_t *election;
} slot_t;

static volatile sig_atomic_t stopping;
static atomic_int held, elected, lost;

static void on_signal(int sig) {
  (void)sig;
  stopping = 1;
}

static void on_elected(void *ud, simba_term_t *term) {
  slot_t *s = ud;
  const int64_t t = mono_ns();
  log_at(t, "elected %s %" PRIu64 " %d", s->name, simba_term_token(term),
         simba_term_is_valid(term));
  simba_term_retain(term);
  pthread_mutex_lock(&s->mu);
  simba_term_t *old = s->term;
  s->term = term;
  pthread_mutex_unlock(&s->mu);
  if (old) simba_term_release(old);
  atomic_fetch_add(&held, 1);
  atomic_fetch_add(&elected, 1);
}

static void on_revoked(void *ud, simba_term_t *term, simba_revoke_reason_t reason) {
  slot_t *s = ud;
  log_at(mono_ns(), "revoked %s %" PRIu64 " %d", s->name, simba_term_token(term), (int)reason);
  pthread_mutex_lock(&s->mu);
  simba_term_t *old = NULL;
  if (s->term == term) {
    old = s->term;
    s->term = NULL;
  }
  pthread_mutex_unlock(&s->mu);
  if (old) {
    simba_term_release(old);
    atomic_fetch_sub(&held, 1);
  }
  if (reason == SIMBA_REVOKE_DEADLINE_PASSED || reason == SIMBA_REVOKE_SESSION_EXPIRED ||
      reason == SIMBA_REVOKE_TAKEN_OVER)
    atomic_fetch_add(&lost, 1);
}

static int64_t json_int(const char *json, const char *key) {
  char pat[96];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = json ? strstr(json, pat) : NULL;
  return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

static int64_t rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int64_t kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kb = strtoll(line + 6, NULL, 10);
  if (f) fclose(f);
  return kb;
}

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  if (d) closedir(d);
  return n - 1; /* the directory's own fd */
}

static int64_t cpu_ms(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

static void stats(simba_client_t *c, const char *phase) {
  char *snap = simba_client_snapshot_json(c);
  log_at(mono_ns(), "stats %s %" PRId64 " %d %" PRId64 " %" PRId64 " %" PRId64 " %d %d %d %" PRId64,
         phase, rss_kb(), open_fds(), cpu_ms(), json_int(snap, "keep_alives"),
         json_int(snap, "keep_alive_failures"), atomic_load(&held), atomic_load(&elected),
         atomic_load(&lost), json_int(snap, "renew_period_ms"));
  simba_free(snap);
}

int main(int argc, char **argv) {
  const char *url = arg(argc, argv, "--url", NULL);
  const char *id = arg(argc, argv, "--id", "hold");
  const char *names = arg(argc, argv, "--names", NULL);
  const int count = atoi(arg(argc, argv, "--count", "0"));
  const char *prefix = arg(argc, argv, "--prefix", "hold-");
  const char *logp = arg(argc, argv, "--log", NULL);
  const char *lease = arg(argc, argv, "--lease", NULL);
  const char *renew = arg(argc, argv, "--renew", NULL);
  const double sample_s = atof(arg(argc, argv, "--sample", "5"));
  const int64_t lease_ms = lease ? atoll(lease) : 15000;
  const int64_t valid_ms = atoll(arg(argc, argv, "--valid-every", "0"));
  if (!url || (!names && count <= 0)) {
    fprintf(stderr,
            "usage: chaos_hold --url URL [--names a,b | --count N [--prefix P]] [--log FILE]\n");
    return 2;
  }
  if (logp && (log_fd = open(logp, O_WRONLY | O_APPEND | O_CREAT, 0644)) < 0) {
    perror(logp);
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);

  int n = count;
  char *list = names ? strdup(names) : NULL;
  if (names) {
    n = 1;
    for (const char *p = names; *p; p++) n += *p == ',';
  }
  slot_t *slots = calloc((size_t)n, sizeof *slots);
  if (!slots) return 2;
  char *save = NULL, *tok = list ? strtok_r(list, ",", &save) : NULL;
  for (int i = 0; i < n; i++) {
    if (list) {
      slots[i].name = strdup(tok ? tok : "?");
      tok = strtok_r(NULL, ",", &save);
    } else if (asprintf(&slots[i].name, "%s%d", prefix, i) < 0) {
      return 2;
    }
    pthread_mutex_init(&slots[i].mu, NULL);
  }

  simba_config_t *cfg = NULL;
  if (simba_config_new(&cfg) != SIMBA_OK) return 2;
  int rc = simba_config_set(cfg, "client.name", id);
  if (rc == SIMBA_OK && lease) rc = simba_config_set(cfg, "session.lease-duration", lease);
  if (rc == SIMBA_OK && renew) rc = simba_config_set(cfg, "session.renew-interval", renew);
  if (rc != SIMBA_OK) {
    fprintf(stderr, "chaos_hold: config: %s\n", simba_last_error());
    return 2;
  }
  log_at(mono_ns(), "start %s %d", id, (int)getpid());
  simba_client_t *c = NULL;
  if (simba_client_open(&c, url, cfg) != SIMBA_OK) {
    fprintf(stderr, "chaos_hold: open: %s\n", simba_last_error());
    return 2;
  }
  simba_config_free(cfg);
  for (int i = 0; i < n; i++) {
    simba_listener_t l = {on_elected, on_revoked, &slots[i]};
    if (simba_election_start(&slots[i].election, c, slots[i].name, &l) != SIMBA_OK) {
      fprintf(stderr, "chaos_hold: election %s: %s\n", slots[i].name, simba_last_error());
      return 2;
    }
  }
  stats(c, "start");

  /* The loop: a valid line per held term every --valid-every ms (0: none; the
   * checker's overlap and stuck checks need them), stats every --sample s. */
  const int64_t step_ns =
      (valid_ms > 0 ? valid_ms : (lease_ms / 4 > 0 ? lease_ms / 4 : 1)) * 1000000;
  int64_t next_stats = mono_ns() + (int64_t)(sample_s * 1e9);
  while (!stopping) {
    if (valid_ms > 0) {
      for (int i = 0; i < n && !stopping; i++) {
        pthread_mutex_lock(&slots[i].mu);
        simba_term_t *t = slots[i].term;
        if (t) simba_term_retain(t);
        pthread_mutex_unlock(&slots[i].mu);
        if (!t) continue;
        const int64_t t0 = mono_ns(); /* read before asking, as chaos_worker does */
        if (simba_term_is_valid(t))
          log_at(t0, "valid %s %" PRIu64, slots[i].name, simba_term_token(t));
        simba_term_release(t);
      }
    }
    if (mono_ns() >= next_stats) {
      stats(c, "run");
      next_stats += (int64_t)(sample_s * 1e9);
    }
    int64_t nap = step_ns, to_stats = next_stats - mono_ns();
    if (to_stats < nap) nap = to_stats > 0 ? to_stats : 0;
    struct timespec ts = {(time_t)(nap / 1000000000), (long)(nap % 1000000000)};
    nanosleep(&ts, NULL);
  }
  stats(c, "end");
  for (int i = 0; i < n; i++) simba_election_stop(slots[i].election, NULL, NULL);
  for (int i = 0; i < n; i++) simba_election_stop_wait(slots[i].election, 10000);
  for (int i = 0; i < n; i++) simba_election_free(slots[i].election);
  simba_client_close(c);
  for (int i = 0; i < n; i++) {
    if (slots[i].term) simba_term_release(slots[i].term);
    free(slots[i].name);
  }
  log_at(mono_ns(), "exit %s", id);
  free(slots);
  free(list);
  return 0;
}

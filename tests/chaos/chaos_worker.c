/* chaos_worker: one contender of the chaos suite (tests/chaos, label chaos).
 *
 * Contends for every name in --names over the public ABI only, and while it
 * holds a name writes to the fenced register (a file per name under --reg, a
 * compare-and-set on the token under flock). Every line it logs carries a
 * CLOCK_MONOTONIC timestamp read with the raw syscall, so that the clock-rate
 * shim (slowclock.so, which slows the library's clock) never skews the log:
 * the checker compares these times across processes on one machine.
 *
 *   chaos_worker --url URL --id ID --names a,b --reg DIR --log FILE
 *                [--lease MS] [--margin MS] [--drift D] [--period MS]
 *                [--sem NAME [--sem-size N]] [--rw NAME [--write-every K]]
 *                [--permit-rogue]
 *
 * While it holds a name, each round checks the term, works --period ms (a
 * sleep), then writes with the term's token.
 *
 * --sem / --rw (ADR 0046): one more thread each, which takes a permit of
 * semaphore NAME (size N, 2 by default) or a read lock of read/write lock NAME
 * (a write lock one time in K, 4 by default), blocking and async forms in
 * turn, holds it 2-6 rounds of --period (one time in 8: 1-3 leases) checking
 * it each round, releases it, and again. --permit-rogue (negative control): a
 * holder that ignores its own release, still calling its permit valid 5 rounds
 * after letting it go.
 *
 * Log lines (space separated, first field the time in ns):
 *   T start ID PID
 *   T elected NAME TOKEN VALID(0|1)
 *   T valid NAME TOKEN              the term was valid at T (T read before asking)
 *   T write NAME TOKEN SEQ accepted|rejected|error T_CHECKED
 *   T revoked NAME TOKEN REASON
 *   T permit PID KIND NAME TOKEN SIZE V  a permit granted (checker.py's format)
 *   T pvalid PID                         the permit was valid at T (as "valid")
 *   T prevoked PID REASON
 *   T exit ID
 * SIGTERM or SIGINT: close the client (every term revoked, STOPPED) and exit 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "chaos_common.h"
#include "simba.h"

#define MAX_NAMES 8

static const char *worker_id = "?";

#define logf_line(...) log_at(mono_ns(), __VA_ARGS__)

typedef struct slot {
  const char *name;
  pthread_mutex_t mu;
  simba_term_t *term; /* retained while held; NULL otherwise */
  simba_election_t *election;
  uint64_t seq;
} slot_t;

static slot_t slots[MAX_NAMES];
static int n_slots;
static const char *reg_dir;
static volatile sig_atomic_t stopping;

static void on_signal(int sig) {
  (void)sig;
  stopping = 1;
}

static void on_elected(void *ud, simba_term_t *term) {
  slot_t *s = ud;
  int64_t t = mono_ns();
  int valid = simba_term_is_valid(term);
  log_at(t, "elected %s %" PRIu64 " %d", s->name, simba_term_token(term), valid);
  simba_term_retain(term);
  pthread_mutex_lock(&s->mu);
  simba_term_t *old = s->term;
  s->term = term;
  pthread_mutex_unlock(&s->mu);
  if (old) simba_term_release(old);
}

static void on_revoked(void *ud, simba_term_t *term, simba_revoke_reason_t reason) {
  slot_t *s = ud;
  logf_line("revoked %s %" PRIu64 " %d", s->name, simba_term_token(term), (int)reason);
  pthread_mutex_lock(&s->mu);
  simba_term_t *old = NULL;
  if (s->term == term) {
    old = s->term;
    s->term = NULL;
  }
  pthread_mutex_unlock(&s->mu);
  if (old) simba_term_release(old);
}

/* The fenced register: REG/NAME.reg holds the highest accepted token; REG/NAME.log
 * gets one line per accepted write, appended under the same lock, so the order
 * of its lines is the order the register applied the writes. Compare and set
 * in one critical section (flock on the .reg file). Returns 1, 0, or -1. */
static int register_write(const char *name, uint64_t token, uint64_t seq) {
  char path[1024], lpath[1024];
  snprintf(path, sizeof path, "%s/%s.reg", reg_dir, name);
  snprintf(lpath, sizeof lpath, "%s/%s.log", reg_dir, name);
  int fd = open(path, O_RDWR | O_CREAT, 0644);
  if (fd < 0) return -1;
  if (flock(fd, LOCK_EX) != 0) {
    close(fd);
    return -1;
  }
  char buf[64] = {0};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  uint64_t highest = n > 0 ? strtoull(buf, NULL, 10) : 0;
  int accepted = token >= highest;
  int rc = accepted;
  if (accepted) {
    int len = snprintf(buf, sizeof buf, "%020" PRIu64 "\n", token);
    if (pwrite(fd, buf, (size_t)len, 0) != len) rc = -1;
    int lfd = open(lpath, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (lfd >= 0) {
      char line[256];
      int ll = snprintf(line, sizeof line, "%" PRId64 " %" PRIu64 " %s %" PRIu64 " %" PRIu64 "\n",
                        mono_ns(), token, worker_id, seq, highest);
      if (write(lfd, line, (size_t)ll) != ll) rc = -1;
      close(lfd);
    } else {
      rc = -1;
    }
  }
  flock(fd, LOCK_UN);
  close(fd);
  return rc;
}

/* Permit contenders (--sem, --rw): a thread each, beside the elections. */
typedef struct permit_loop {
  simba_client_t *c;
  const char *name;
  int sem;          /* 1: a semaphore of `size` permits; 0: a read/write lock */
  uint32_t size;    /* 0 for a read/write lock (the checker's SIZE) */
  int write_every;  /* read/write lock: one write lock in K */
  int64_t lease_ms; /* the long holds' unit */
  pthread_t thread;
} permit_loop_t;

static int period_ms = 20;
/* An acquire's bound: short, so that a SIGTERM's stop waits little for it. */
static const int64_t acquire_ms = 250;
static int permit_rogue;
static int permit_seq; /* atomic: numbers the worker's permit terms */

static void on_prevoked(void *ud, simba_term_t *term, simba_revoke_reason_t reason) {
  (void)term;
  logf_line("prevoked %d %d", (int)(intptr_t)ud, (int)reason);
}

/* The grant's line, its time read before asking, as "elected" reads it. */
static int log_grant(const permit_loop_t *pl, simba_term_t *t) {
  int id = __atomic_add_fetch(&permit_seq, 1, __ATOMIC_RELAXED);
  int64_t t0 = mono_ns();
  int valid = simba_term_is_valid(t);
  simba_term_kind_t k = simba_term_kind(t);
  log_at(t0, "permit %d %s %s %" PRIu64 " %u %d", id,
         k == SIMBA_TERM_SEMAPHORE ? "semaphore"
         : k == SIMBA_TERM_WRITE   ? "write"
                                   : "read",
         pl->name, simba_term_token(t), pl->size, valid);
  simba_term_on_revoked(t, on_prevoked, (void *)(intptr_t)id);
  return id;
}

typedef struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  const permit_loop_t *pl;
  int done, id;
  simba_term_t *term;
} waiter_t;

static void on_permit(void *ud, int err, simba_term_t *t) {
  waiter_t *w = ud;
  int id = err == SIMBA_OK ? log_grant(w->pl, t) : 0;
  pthread_mutex_lock(&w->mu);
  w->term = err == SIMBA_OK ? t : NULL;
  w->id = id;
  w->done = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* One acquire, the blocking form or the async one: the term, or NULL. */
static simba_term_t *permit_acquire(const permit_loop_t *pl, int mode, int async, int *id) {
  simba_term_t *t = NULL;
  if (!async) {
    int rc = pl->sem ? simba_semaphore_acquire(&t, pl->c, pl->name, pl->size, acquire_ms)
                     : simba_rwlock_acquire(&t, pl->c, pl->name, mode, acquire_ms);
    if (rc != SIMBA_OK) return NULL;
    *id = log_grant(pl, t);
    return t;
  }
  waiter_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, pl, 0, 0, NULL};
  int rc = pl->sem
               ? simba_semaphore_acquire_async(pl->c, pl->name, pl->size, acquire_ms, on_permit, &w)
               : simba_rwlock_acquire_async(pl->c, pl->name, mode, acquire_ms, on_permit, &w);
  if (rc != SIMBA_OK) return NULL;
  pthread_mutex_lock(&w.mu);
  while (!w.done) pthread_cond_wait(&w.cv, &w.mu); /* the callback runs exactly once */
  pthread_mutex_unlock(&w.mu);
  *id = w.id;
  return w.term;
}

static void *permit_main(void *arg) {
  permit_loop_t *pl = arg;
  unsigned seed = (unsigned)getpid() * 2654435761u + (unsigned)pl->sem;
  struct timespec nap = {0, (long)period_ms * 1000000L};
  for (unsigned n = 0; !stopping; n++) {
    int mode = rand_r(&seed) % pl->write_every == 0 ? SIMBA_LOCK_WRITE : SIMBA_LOCK_READ;
    int id = 0;
    simba_term_t *t = permit_acquire(pl, mode, n & 1, &id);
    if (!t) {
      nanosleep(&nap, NULL);
      continue;
    }
    /* Mostly short holds; one in 8 spans 1-3 leases, so that pauses, cuts
     * and backend faults land on a held permit, not only between permits. */
    int rounds = rand_r(&seed) % 8 == 0
                     ? (int)(pl->lease_ms / period_ms) * (1 + (int)(rand_r(&seed) % 3))
                     : 2 + (int)(rand_r(&seed) % 5);
    for (int i = 0; i < rounds && !stopping; i++) {
      int64_t t0 = mono_ns(); /* read before asking, as for "valid" */
      if (!permit_rogue && !simba_term_is_valid(t)) break;
      log_at(t0, "pvalid %d", id);
      nanosleep(&nap, NULL);
    }
    simba_lock_release(t);
    /* The negative control: work on after letting go, as if still valid. */
    for (int i = 0; permit_rogue && i < 5 && !stopping; i++) {
      logf_line("pvalid %d", id);
      nanosleep(&nap, NULL);
    }
    struct timespec idle = {0, (long)(rand_r(&seed) % 3) * period_ms * 1000000L};
    nanosleep(&idle, NULL);
  }
  return NULL;
}

static int has_flag(int argc, char **argv, const char *key) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], key) == 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  const char *url = arg(argc, argv, "--url", NULL);
  const char *names = arg(argc, argv, "--names", "a");
  const char *logp = arg(argc, argv, "--log", NULL);
  reg_dir = arg(argc, argv, "--reg", NULL);
  worker_id = arg(argc, argv, "--id", "w");
  const char *lease = arg(argc, argv, "--lease", "1000");
  const char *margin = arg(argc, argv, "--margin", NULL);
  const char *drift = arg(argc, argv, "--drift", NULL);
  period_ms = atoi(arg(argc, argv, "--period", "20"));
  permit_rogue = has_flag(argc, argv, "--permit-rogue");
  permit_loop_t loops[2] = {
      {NULL, arg(argc, argv, "--sem", NULL), 1, (uint32_t)atoi(arg(argc, argv, "--sem-size", "2")),
       1, atoll(lease), 0},
      {NULL, arg(argc, argv, "--rw", NULL), 0, 0, atoi(arg(argc, argv, "--write-every", "4")),
       atoll(lease), 0}};
  if (!url || !logp || !reg_dir) {
    fprintf(stderr, "usage: chaos_worker --url URL --id ID --names a,b --reg DIR --log FILE\n");
    return 2;
  }
  log_fd = open(logp, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (log_fd < 0) {
    perror(logp);
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);

  simba_config_t *cfg = NULL;
  if (simba_config_new(&cfg) != SIMBA_OK) return 2;
  int rc = simba_config_set(cfg, "session.lease-duration", lease);
  if (rc == SIMBA_OK && margin) rc = simba_config_set(cfg, "session.margin", margin);
  if (rc == SIMBA_OK && drift) rc = simba_config_set(cfg, "session.drift", drift);
  if (rc == SIMBA_OK) rc = simba_config_set(cfg, "client.name", worker_id);
  if (rc != SIMBA_OK) {
    fprintf(stderr, "chaos_worker: config: %s\n", simba_last_error());
    return 2;
  }
  logf_line("start %s %d", worker_id, (int)getpid());
  simba_client_t *c = NULL;
  if (simba_client_open(&c, url, cfg) != SIMBA_OK) {
    fprintf(stderr, "chaos_worker: open: %s\n", simba_last_error());
    return 2;
  }
  simba_config_free(cfg);

  char *list = strdup(names);
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && n_slots < MAX_NAMES;
       tok = strtok_r(NULL, ",", &save)) {
    slot_t *s = &slots[n_slots++];
    s->name = tok;
    pthread_mutex_init(&s->mu, NULL);
    simba_listener_t l = {on_elected, on_revoked, s};
    if (simba_election_start(&s->election, c, tok, &l) != SIMBA_OK) {
      fprintf(stderr, "chaos_worker: election %s: %s\n", tok, simba_last_error());
      return 2;
    }
  }

  for (int i = 0; i < 2; i++) {
    loops[i].c = c;
    if (loops[i].name && pthread_create(&loops[i].thread, NULL, permit_main, &loops[i]) != 0)
      return 2;
  }

  struct timespec nap = {0, (long)period_ms * 1000000L};
  while (!stopping) {
    for (int i = 0; i < n_slots; i++) {
      slot_t *s = &slots[i];
      pthread_mutex_lock(&s->mu);
      simba_term_t *t = s->term;
      if (t) simba_term_retain(t);
      pthread_mutex_unlock(&s->mu);
      if (!t) continue;
      /* The time is read BEFORE asking: a term valid now was valid at t0 (it
       * was granted before, and never becomes valid again once invalid). */
      int64_t t0 = mono_ns();
      if (simba_term_is_valid(t)) {
        uint64_t token = simba_term_token(t);
        log_at(t0, "valid %s %" PRIu64, s->name, token);
        uint64_t seq = ++s->seq;
        /* The step's work between the check and the write: a pause that lands
         * here sends the write out late, with the old token, which the register
         * must turn away once a newer owner wrote. */
        nanosleep(&nap, NULL);
        int w = register_write(s->name, token, seq);
        logf_line("write %s %" PRIu64 " %" PRIu64 " %s %" PRId64, s->name, token, seq,
                  w == 1   ? "accepted"
                  : w == 0 ? "rejected"
                           : "error",
                  t0);
      }
      simba_term_release(t);
    }
    struct timespec idle = {0, 2000000L};
    nanosleep(&idle, NULL);
  }
  for (int i = 0; i < 2; i++)
    if (loops[i].name) pthread_join(loops[i].thread, NULL); /* each released its permit */
  for (int i = 0; i < n_slots; i++) simba_election_stop_wait(slots[i].election, 10000);
  for (int i = 0; i < n_slots; i++) simba_election_free(slots[i].election);
  simba_client_close(c);
  for (int i = 0; i < n_slots; i++)
    if (slots[i].term) simba_term_release(slots[i].term);
  logf_line("exit %s", worker_id);
  free(list);
  return 0;
}

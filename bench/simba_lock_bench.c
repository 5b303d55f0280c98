/* simba_lock_bench: Simba's side of the side-by-side with etcd's Go
 * `concurrency` package (issue 38; bench/peers/etcd_concurrency/main.go is the
 * peer, with the same modes, definitions and output; scripts/bench.sh --backend
 * etcd runs both in alternating rounds). Public ABI only, any URL.
 *
 *   simba_lock_bench MODE --url URL [--n N] [--warmup N] [--lease-ms MS]
 *                    [--renew-ms MS] [--gap-ms MS] [--name NAME]
 *
 * Modes, one JSON line each on stdout:
 *   cycle     one client, N x simba_lock_acquire + simba_lock_release of one
 *             free name, after `warmup` unmeasured ones
 *   handover  two clients: A holds the name, B is blocked in
 *             simba_lock_acquire (`gap` ms after it started); the time from
 *             A's simba_lock_release call to B's acquire returning; N times
 *   failover  a holder process (this program, mode hold) acquires the name,
 *             a waiter client here is blocked acquiring it; the holder is
 *             killed with SIGKILL 200 ms + a uniform random part of the lease
 *             after it acquired (so at any point of its renew period); the time
 *             from the kill to the waiter's acquire returning; N times
 *   hold      (used by failover) acquire, print "held", wait to be killed
 * The session lease is --lease-ms (default 2000), the renew interval
 * --renew-ms (default: the library's, lease / 3). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <simba.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

extern char **environ;

typedef struct options {
  const char *mode, *url, *name;
  int n, warmup, gap_ms;
  int64_t lease_ms, renew_ms;
} options_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: simba_lock_bench cycle|handover|failover|hold --url URL [--n N] [--warmup N]\n"
          "                        [--lease-ms MS] [--renew-ms MS] [--gap-ms MS] [--name NAME]\n");
}

static int parse(int argc, char **argv, options_t *o) {
  *o = (options_t){NULL, NULL, NULL, 0, 100, 25, 2000, 0};
  if (argc < 2) return -1;
  o->mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const char *a = argv[i], *v = argv[i + 1];
    if (!strcmp(a, "--url")) {
      o->url = v;
    } else if (!strcmp(a, "--name")) {
      o->name = v;
    } else if (!strcmp(a, "--n")) {
      o->n = atoi(v);
    } else if (!strcmp(a, "--warmup")) {
      o->warmup = atoi(v);
    } else if (!strcmp(a, "--gap-ms")) {
      o->gap_ms = atoi(v);
    } else if (!strcmp(a, "--lease-ms")) {
      o->lease_ms = atoll(v);
    } else if (!strcmp(a, "--renew-ms")) {
      o->renew_ms = atoll(v);
    } else {
      return -1;
    }
  }
  if (argc % 2 != 0 || !o->url || o->lease_ms <= 0 || o->gap_ms < 0) return -1;
  if (o->n <= 0) o->n = !strcmp(o->mode, "cycle") ? 1000 : !strcmp(o->mode, "failover") ? 3 : 100;
  if (!o->name) o->name = o->mode;
  return 0;
}

static void die(const char *what, int rc) {
  fprintf(stderr, "simba_lock_bench: %s: %s (%s)\n", what, simba_strerror(rc), simba_last_error());
  exit(1);
}

/* A failure outside Simba (a system call, the holder process). */
static void fail(const char *what) {
  fprintf(stderr, "simba_lock_bench: %s: %s\n", what, errno ? strerror(errno) : "failed");
  exit(1);
}

static simba_client_t *open_client(const options_t *o) {
  simba_config_t *cfg = NULL;
  int rc = simba_config_new(&cfg);
  if (rc == SIMBA_OK) rc = simba_config_set_ms(cfg, "session.lease-duration", o->lease_ms);
  if (rc == SIMBA_OK && o->renew_ms > 0)
    rc = simba_config_set_ms(cfg, "session.renew-interval", o->renew_ms);
  if (rc != SIMBA_OK) die("config", rc);
  simba_client_t *c = NULL;
  rc = simba_client_open(&c, o->url, cfg);
  simba_config_free(cfg);
  if (rc != SIMBA_OK) die("simba_client_open", rc);
  if ((rc = simba_client_wait_live(c, 10000)) != SIMBA_OK) die("simba_client_wait_live", rc);
  return c;
}

static simba_term_t *acquire(simba_client_t *c, const char *name, int64_t timeout_ms) {
  simba_term_t *t = NULL;
  int rc = simba_lock_acquire(&t, c, name, timeout_ms);
  if (rc != SIMBA_OK) die("simba_lock_acquire", rc);
  return t;
}

/* The peer's output, field for field. */
static void print_result(const options_t *o, bench_samples_t *s) {
  const bench_stats_t st = bench_summarize(s);
  printf(
      "{\"library\":\"simba\",\"mode\":\"%s\",\"lease_ms\":%lld,\"renew_ms\":%lld,\"n\":%zu,\"p50_"
      "us\":%.1f,"
      "\"p90_us\":%.1f,\"p99_us\":%.1f,\"min_us\":%.1f,\"max_us\":%.1f,\"mean_us\":%.1f}\n",
      o->mode, (long long)o->lease_ms, (long long)(o->renew_ms > 0 ? o->renew_ms : o->lease_ms / 3),
      st.n, st.p50_us, st.p90_us, st.p99_us, st.min_us, st.max_us, st.mean_us);
  fflush(stdout);
}

static void run_cycle(const options_t *o, bench_samples_t *s) {
  simba_client_t *c = open_client(o);
  for (int i = 0; i < o->warmup + o->n; i++) {
    const int64_t t0 = bench_now_ns();
    int rc = simba_lock_release(acquire(c, o->name, 5000));
    const int64_t t1 = bench_now_ns();
    if (rc != SIMBA_OK) die("simba_lock_release", rc);
    if (i >= o->warmup) bench_samples_push(s, t1 - t0);
  }
  simba_client_close(c);
}

/* The blocked acquire of handover and failover, on a thread of its own. */
typedef struct waiter {
  simba_client_t *c;
  const char *name;
  simba_term_t *t;
  int64_t returned_ns;
  pthread_t thread;
} waiter_t;

static void *waiter_main(void *p) {
  waiter_t *w = p;
  w->t = acquire(w->c, w->name, 30000);
  w->returned_ns = bench_now_ns();
  return NULL;
}

static void start_waiter(waiter_t *w) {
  if (pthread_create(&w->thread, NULL, waiter_main, w) != 0) fail("pthread_create");
}

static int64_t join_waiter(waiter_t *w) {
  pthread_join(w->thread, NULL);
  const int rc = simba_lock_release(w->t);
  if (rc != SIMBA_OK) die("simba_lock_release (waiter)", rc);
  return w->returned_ns;
}

static void run_handover(const options_t *o, bench_samples_t *s) {
  simba_client_t *a = open_client(o), *b = open_client(o);
  for (int i = 0; i < o->warmup / 10 + o->n; i++) {
    simba_term_t *held = acquire(a, o->name, 5000);
    waiter_t w = {b, o->name, NULL, 0, 0};
    start_waiter(&w);
    bench_sleep_ns((int64_t)o->gap_ms * 1000000); /* B is blocked by then */
    const int64_t t0 = bench_now_ns();
    const int rc = simba_lock_release(held);
    if (rc != SIMBA_OK) die("simba_lock_release", rc);
    const int64_t t1 = join_waiter(&w);
    if (i >= o->warmup / 10) bench_samples_push(s, t1 - t0);
  }
  simba_client_close(b);
  simba_client_close(a);
}

/* `self hold ...` with its stdout on a pipe; returns its pid once it printed
 * "held". */
static pid_t spawn_holder(const options_t *o, const char *self) {
  int fds[2];
  if (pipe(fds) != 0) fail("pipe");
  char lease[32], renew[32];
  snprintf(lease, sizeof lease, "%lld", (long long)o->lease_ms);
  snprintf(renew, sizeof renew, "%lld", (long long)o->renew_ms);
  char *argv[] = {(char *)self, "hold", "--url",      (char *)o->url, "--name", (char *)o->name,
                  "--lease-ms", lease,  "--renew-ms", renew,          NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid = -1;
  if (posix_spawn(&pid, self, &fa, NULL, argv, environ) != 0) fail("posix_spawn");
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  char buf[16] = {0};
  ssize_t n;
  do {
    n = read(fds[0], buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  close(fds[0]);
  if (n <= 0 || strncmp(buf, "held", 4) != 0) fail("the holder did not acquire");
  return pid;
}

static void run_failover(const options_t *o, const char *self, bench_samples_t *s) {
  simba_client_t *c = open_client(o);
  srand((unsigned)getpid());
  for (int i = 0; i < o->n; i++) {
    const pid_t holder = spawn_holder(o, self);
    waiter_t w = {c, o->name, NULL, 0, 0};
    start_waiter(&w);
    /* A random point of a lease's span (whole renew periods of Simba's lease / 3
     * and of the Go client's 1 s keep-alive at TTL 2), uniform against both. */
    bench_sleep_ns((200 + (int64_t)(rand() % (int)o->lease_ms)) * 1000000);
    const int64_t t0 = bench_now_ns();
    kill(holder, SIGKILL); /* our own child */
    waitpid(holder, NULL, 0);
    const int64_t t1 = join_waiter(&w);
    bench_samples_push(s, t1 - t0);
    if (getenv("SIMBA_LOCK_BENCH_TRACE")) {
      struct timespec now;
      clock_gettime(CLOCK_REALTIME, &now);
      fprintf(stderr, "failover %d: killed at realtime %.3f s, acquired %.1f ms later\n", i,
              (double)now.tv_sec + now.tv_nsec / 1e9 - (bench_now_ns() - t0) / 1e9,
              (t1 - t0) / 1e6);
    }
  }
  simba_client_close(c);
}

static void run_hold(const options_t *o) {
  simba_client_t *c = open_client(o);
  simba_term_t *t = acquire(c, o->name, 30000);
  (void)t;
  printf("held\n");
  fflush(stdout);
  for (;;) pause(); /* until killed */
}

int main(int argc, char **argv) {
  options_t o;
  if (parse(argc, argv, &o) != 0) {
    usage(stderr);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  bench_samples_t s;
  bench_samples_init(&s);
  if (!strcmp(o.mode, "cycle")) {
    run_cycle(&o, &s);
  } else if (!strcmp(o.mode, "handover")) {
    run_handover(&o, &s);
  } else if (!strcmp(o.mode, "failover")) {
    run_failover(&o, argv[0], &s);
  } else if (!strcmp(o.mode, "hold")) {
    run_hold(&o);
  } else {
    usage(stderr);
    return 2;
  }
  print_result(&o, &s);
  bench_samples_free(&s);
  return 0;
}

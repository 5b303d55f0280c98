/* Leader work on memory://, in one process (see docs/leader-work.md).
 *
 * Two nodes (two clients) run simba_run_while_leader() on the lease "ledger".
 * The leader settles batches into a fenced ledger: simba_term_ensure_valid()
 * before each batch, simba_term_token() with each write, and the ledger checks
 * the token and writes under one mutex. Node 0 also runs a simba_schedule()
 * that reports the ledger's progress. Midway the leader is stepped down: its
 * work sees the revocation and returns, then the lease is released and the
 * other node continues with a greater token. A late write with the old token
 * is then rejected by the ledger. Once every batch is settled, the leader's
 * work waits for the end of its term on the term's revoke fd. Last, both
 * nodes join the partition group "shards": its 4 partitions end up 2 per node,
 * each partition's work on a thread of its own. Then everything is closed.
 *
 *   ./leader_work      (built by CMake as build/examples/leader_work)
 */
#define _POSIX_C_SOURCE 200809L
#include <simba.h>

#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NODES 2
#define BATCHES 10

/* ---- The protected resource: a ledger that fences writes by token. ---- */

static pthread_mutex_t ledger_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t ledger_highest; /* highest token accepted so far */
static int ledger_settled;      /* batches settled: 1..BATCHES */

/* Accept batch @p batch only with a token at least the highest accepted, and
 * record the token: the check and the write are one step under the mutex.
 * Returns 1 if written, 0 if refused (a stale token). */
static int ledger_settle(int batch, uint64_t token) {
  pthread_mutex_lock(&ledger_mu);
  int ok = token >= ledger_highest;
  if (ok) {
    ledger_highest = token;
    if (batch > ledger_settled) ledger_settled = batch;
  }
  pthread_mutex_unlock(&ledger_mu);
  return ok;
}

static int ledger_next_batch(void) {
  pthread_mutex_lock(&ledger_mu);
  int next = ledger_settled + 1;
  pthread_mutex_unlock(&ledger_mu);
  return next;
}

/* ---- Printing with a timestamp. ---- */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
static double t0;

static pthread_mutex_t print_mu = PTHREAD_MUTEX_INITIALIZER;
static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&print_mu);
  printf("%7.1f ms  ", now_ms() - t0);
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  pthread_mutex_unlock(&print_mu);
  va_end(ap);
}

static const char *reason_name(simba_revoke_reason_t r) {
  switch (r) {
    case SIMBA_REVOKE_STOPPED: return "STOPPED";
    case SIMBA_REVOKE_STEPPED_DOWN: return "STEPPED_DOWN";
    case SIMBA_REVOKE_DEADLINE_PASSED: return "DEADLINE_PASSED";
    case SIMBA_REVOKE_SESSION_EXPIRED: return "SESSION_EXPIRED";
    case SIMBA_REVOKE_TAKEN_OVER: return "TAKEN_OVER";
    default: return "NONE (not revoked yet)";
  }
}

/* ---- State the main thread watches. ---- */

static pthread_mutex_t state_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t state_cv = PTHREAD_COND_INITIALIZER;
static int leader = -1;        /* node whose work runs now, -1 if none */
static uint64_t leader_token;  /* its term's token */
static int step_down_done;     /* set by the step-down's done callback */

struct node {
  int id;
  simba_client_t *client;
  simba_task_t *ledger_task;
};
static struct node nodes[NODES];

static void notify(void) {
  pthread_mutex_lock(&state_mu);
  pthread_cond_broadcast(&state_cv);
  pthread_mutex_unlock(&state_mu);
}

static void set_leader(int id, uint64_t token) {
  pthread_mutex_lock(&state_mu);
  leader = id;
  leader_token = token;
  pthread_cond_broadcast(&state_cv);
  pthread_mutex_unlock(&state_mu);
}

/* Wait until pred() holds or timeout_ms passed; returns pred(). */
static int wait_for(int (*pred)(void), int64_t timeout_ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)(timeout_ms / 1000);
  until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&state_mu);
  int ok;
  while (!(ok = pred())) {
    if (pthread_cond_timedwait(&state_cv, &state_mu, &until) != 0) {
      ok = pred();
      break;
    }
  }
  pthread_mutex_unlock(&state_mu);
  return ok;
}
/* Predicates, called with state_mu held. */
static int has_leader(void) { return leader >= 0; }
static int stepped_down(void) { return step_down_done; }
static int all_settled(void) {
  pthread_mutex_lock(&ledger_mu);
  int done = ledger_settled >= BATCHES;
  pthread_mutex_unlock(&ledger_mu);
  return done;
}
static int four_settled(void) {
  pthread_mutex_lock(&ledger_mu);
  int done = ledger_settled >= 4;
  pthread_mutex_unlock(&ledger_mu);
  return done;
}

/* ---- Leader work: runs on a thread of its own for each term. ---- */

static void settle_batches(void *ud, simba_term_t *term) {
  struct node *n = ud;
  uint64_t token = simba_term_token(term);
  say("node %d elected for %s: token %llu, %lld ms left; work starts", n->id,
      simba_term_name(term), (unsigned long long)token,
      (long long)simba_term_remaining_ms(term));
  set_leader(n->id, token);

  for (int batch = ledger_next_batch(); batch <= BATCHES; batch++) {
    /* Do not start a batch unless the term outlives it (200 ms per batch). */
    int rc = simba_term_ensure_valid(term, 200);
    if (rc != SIMBA_OK) {
      say("node %d: %s before batch %d: stop, do not retry with token %llu", n->id,
          simba_strerror(rc), batch, (unsigned long long)token);
      goto out;
    }
    if (!ledger_settle(batch, token)) {
      say("node %d: the ledger refused token %llu: a newer owner wrote; stop", n->id,
          (unsigned long long)token);
      goto out;
    }
    say("node %d settled batch %d with token %llu", n->id, batch, (unsigned long long)token);
    notify();
    /* "Processing" the next batch: an interruptible sleep. */
    if (simba_term_wait_revoked(term, 120) == SIMBA_OK) {
      say("node %d: term revoked (%s) while working; work returns", n->id,
          reason_name(simba_term_revoke_reason(term)));
      goto out;
    }
  }

  /* Nothing left to do. Returning now would release the lease and contend
   * again at once; instead, stay leader idle until the term ends, waiting on
   * the term's revoke fd as a poll() loop would (bounded by the time left). */
  say("node %d: all %d batches settled; idle until the term ends", n->id, BATCHES);
  struct pollfd pfd = {.fd = simba_term_revoke_fd(term), .events = POLLIN};
  if (pfd.fd < 0) {
    simba_term_wait_revoked(term, -1);
  } else {
    while (simba_term_is_valid(term)) {
      int64_t left = simba_term_remaining_ms(term);
      int timeout = left > 1000 ? 1000 : (int)left + 1;
      if (poll(&pfd, 1, timeout) > 0) break; /* readable: revoked */
      /* timeout: loop and read is_valid again (other fds would go here) */
    }
  }
  say("node %d: revoke fd readable, term of token %llu revoked (%s); work returns", n->id,
      (unsigned long long)token, reason_name(simba_term_revoke_reason(term)));

out:
  set_leader(-1, 0);
}

/* ---- A schedule: runs every 400 ms while node 0 leads "ledger.report". ---- */

static void report(void *ud, simba_term_t *term) {
  int *runs = ud;
  ++*runs; /* runs of one task never overlap: no lock needed */
  pthread_mutex_lock(&ledger_mu);
  int settled = ledger_settled;
  uint64_t highest = ledger_highest;
  pthread_mutex_unlock(&ledger_mu);
  say("report run %d (token %llu): %d/%d batches settled, ledger token %llu", *runs,
      (unsigned long long)simba_term_token(term), settled, BATCHES,
      (unsigned long long)highest);
}

/* ---- A partition group: the nodes share the partitions shards.0 .. shards.3. ---- */

#define SHARDS 4
static int shards_held[NODES]; /* partitions whose work runs, per node; state_mu */

static void shard_work(void *ud, simba_term_t *term) {
  struct node *n = ud;
  pthread_mutex_lock(&state_mu);
  shards_held[n->id]++;
  pthread_cond_broadcast(&state_cv);
  pthread_mutex_unlock(&state_mu);
  say("node %d works on %s (token %llu)", n->id, simba_term_name(term),
      (unsigned long long)simba_term_token(term));
  /* A real shard loops like settle_batches: ensure_valid, write with the token. */
  simba_term_wait_revoked(term, -1);
  pthread_mutex_lock(&state_mu);
  shards_held[n->id]--;
  pthread_cond_broadcast(&state_cv);
  pthread_mutex_unlock(&state_mu);
}

static int shards_balanced(void) {
  for (int i = 0; i < NODES; i++) {
    if (shards_held[i] != SHARDS / NODES) return 0;
  }
  return 1;
}
static int shards_all_on_last(void) { return shards_held[NODES - 1] == SHARDS; }

static void on_step_down_done(void *ud, int err) {
  struct node *n = ud;
  say("node %d: step-down complete (%s): the lease was released after the work returned",
      n->id, simba_strerror(err));
  pthread_mutex_lock(&state_mu);
  step_down_done = 1;
  pthread_cond_broadcast(&state_cv);
  pthread_mutex_unlock(&state_mu);
}

static void check(int rc, const char *what) {
  if (rc != SIMBA_OK) {
    fprintf(stderr, "%s failed: %s (%s)\n", what, simba_strerror(rc), simba_last_error());
    exit(1);
  }
}

int main(void) {
  simba_config_t *cfg;
  check(simba_config_new(&cfg), "simba_config_new");
  /* Short leases so the example is quick: renew every 500 ms. */
  check(simba_config_set(cfg, "session.lease-duration", "1500ms"), "lease-duration");
  t0 = now_ms();
  say("Simba %s: two nodes run the work of \"ledger\" on memory://leader-work",
      simba_version_string());

  for (int i = 0; i < NODES; i++) {
    nodes[i].id = i;
    check(simba_client_open(&nodes[i].client, "memory://leader-work", cfg), "simba_client_open");
    check(simba_client_wait_live(nodes[i].client, 5000), "simba_client_wait_live");
  }
  int report_runs = 0;
  simba_task_t *reporter;
  check(simba_schedule(&reporter, nodes[0].client, "ledger.report", 0, 400, report, &report_runs),
        "simba_schedule");
  for (int i = 0; i < NODES; i++) {
    check(simba_run_while_leader(&nodes[i].ledger_task, nodes[i].client, "ledger",
                                 settle_batches, &nodes[i]),
          "simba_run_while_leader");
  }

  /* After four batches, step the leader down for 3 s. */
  if (!wait_for(four_settled, 10000)) {
    fprintf(stderr, "the ledger made no progress\n");
    return 1;
  }
  pthread_mutex_lock(&state_mu);
  int old = leader;
  uint64_t old_token = leader_token;
  pthread_mutex_unlock(&state_mu);
  if (old < 0) {
    fprintf(stderr, "no leader after four batches\n");
    return 1;
  }
  say("-- step node %d down for 3 s: revoke, wait for its work, release, then done", old);
  check(simba_task_step_down(nodes[old].ledger_task, 3000, on_step_down_done, &nodes[old]),
        "simba_task_step_down");
  if (!wait_for(stepped_down, 5000) || !wait_for(has_leader, 5000)) {
    fprintf(stderr, "no handover\n");
    return 1;
  }

  /* A write that node `old` sent before the step-down arrives late: the ledger
   * has seen a greater token by now and refuses it. */
  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
  say("-- a late write with node %d's old token %llu arrives: %s", old,
      (unsigned long long)old_token,
      ledger_settle(BATCHES, old_token) ? "ACCEPTED (wrong!)" : "refused by the ledger");

  if (!wait_for(all_settled, 10000)) {
    fprintf(stderr, "the ledger did not finish\n");
    return 1;
  }
  nanosleep(&pause, NULL);

  say("-- both nodes join the group \"shards\" (%d partitions)", SHARDS);
  simba_task_t *groups[NODES];
  for (int i = 0; i < NODES; i++) {
    check(simba_group_join(&groups[i], nodes[i].client, "shards", SHARDS, shard_work, &nodes[i]),
          "simba_group_join");
  }
  if (!wait_for(shards_balanced, 15000)) {
    fprintf(stderr, "the group did not balance\n");
    return 1;
  }
  say("shards balanced: %d partitions per node", SHARDS / NODES);
  for (int i = 0; i < NODES - 1; i++) check(simba_task_close(groups[i]), "simba_task_close(group)");
  say("-- the other nodes left the group: node %d takes their partitions", NODES - 1);
  if (!wait_for(shards_all_on_last, 15000)) {
    fprintf(stderr, "the orphaned partitions were not taken\n");
    return 1;
  }
  check(simba_task_close(groups[NODES - 1]), "simba_task_close(group)");

  say("-- close the tasks: each stop revokes, waits for the work, then releases");
  check(simba_task_close(reporter), "simba_task_close(reporter)");
  say("report task closed after %d runs", report_runs);
  for (int i = 0; i < NODES; i++) { /* the stepped-down node (a candidate) first */
    int id = (old + i) % NODES;
    check(simba_task_close(nodes[id].ledger_task), "simba_task_close");
    say("node %d: ledger task closed", id);
  }
  for (int i = 0; i < NODES; i++) check(simba_client_close(nodes[i].client), "simba_client_close");
  simba_config_free(cfg);

  pthread_mutex_lock(&ledger_mu);
  say("ledger: %d/%d batches settled, highest token %llu", ledger_settled, BATCHES,
      (unsigned long long)ledger_highest);
  int ok = ledger_settled == BATCHES;
  pthread_mutex_unlock(&ledger_mu);
  return ok ? 0 : 1;
}

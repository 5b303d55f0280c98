/* A live demo of Simba on memory://: three workers of one process contend for
 * the lease "report"; the leader writes to a fenced ledger with its token. The
 * demo then stops the leader, steps the next one down, and closes the third's
 * client, showing each handover with its timing and the increasing tokens.
 *
 *   ./election_demo            (built by CMake as build/examples/election_demo)
 */
#define _POSIX_C_SOURCE 200809L
#include <simba.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WORKERS 3

/* The protected resource: it accepts a write only with a token at least the
 * highest it has seen (check and write under one mutex). */
static pthread_mutex_t ledger_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t ledger_highest;
static int ledger_write(uint64_t token) {
  pthread_mutex_lock(&ledger_mu);
  int ok = token >= ledger_highest;
  if (ok) ledger_highest = token;
  pthread_mutex_unlock(&ledger_mu);
  return ok;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
static double t0;

static pthread_mutex_t state_mu = PTHREAD_MUTEX_INITIALIZER;
static int leader = -1;           /* which worker leads, -1 if none */
static double handover_from = -1; /* when the demo asked the leader to give up */

struct worker {
  int id;
  simba_client_t *client;
  simba_election_t *election;
};
static struct worker workers[WORKERS];

static void on_elected(void *ud, simba_term_t *term) {
  struct worker *w = ud;
  pthread_mutex_lock(&state_mu);
  leader = w->id;
  double gap = handover_from >= 0 ? now_ms() - handover_from : -1;
  handover_from = -1;
  pthread_mutex_unlock(&state_mu);
  printf("%8.1f ms  worker %d elected: lease %s, token %llu, valid for %lld ms",
         now_ms() - t0, w->id, simba_term_name(term),
         (unsigned long long)simba_term_token(term), (long long)simba_term_remaining_ms(term));
  if (gap >= 0) printf(" (%.1f ms after the handover began)", gap);
  printf("\n");
  /* Every write carries the token; ensure_valid first narrows the window. */
  if (simba_term_ensure_valid(term, 100) == SIMBA_OK) {
    printf("%8.1f ms  worker %d writes to the ledger with token %llu: %s\n", now_ms() - t0, w->id,
           (unsigned long long)simba_term_token(term),
           ledger_write(simba_term_token(term)) ? "accepted" : "REJECTED");
  }
}

static const char *reason_name(simba_revoke_reason_t r) {
  switch (r) {
    case SIMBA_REVOKE_STOPPED: return "STOPPED";
    case SIMBA_REVOKE_STEPPED_DOWN: return "STEPPED_DOWN";
    case SIMBA_REVOKE_DEADLINE_PASSED: return "DEADLINE_PASSED";
    case SIMBA_REVOKE_SESSION_EXPIRED: return "SESSION_EXPIRED";
    case SIMBA_REVOKE_TAKEN_OVER: return "TAKEN_OVER";
    default: return "NONE";
  }
}

static void on_revoked(void *ud, simba_term_t *term, simba_revoke_reason_t reason) {
  struct worker *w = ud;
  pthread_mutex_lock(&state_mu);
  if (leader == w->id) leader = -1;
  pthread_mutex_unlock(&state_mu);
  printf("%8.1f ms  worker %d revoked: token %llu, reason %s, valid now: %s\n", now_ms() - t0,
         w->id, (unsigned long long)simba_term_token(term), reason_name(reason),
         simba_term_is_valid(term) ? "yes" : "no");
}

static void begin_handover(void) {
  pthread_mutex_lock(&state_mu);
  handover_from = now_ms();
  pthread_mutex_unlock(&state_mu);
}

static int current_leader(double timeout_ms) {
  double until = now_ms() + timeout_ms;
  for (;;) {
    pthread_mutex_lock(&state_mu);
    int l = leader;
    pthread_mutex_unlock(&state_mu);
    if (l >= 0 || now_ms() > until) return l;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
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
  /* Short leases so the demo is quick: renew every 500 ms. */
  check(simba_config_set(cfg, "session.lease-duration", "1500ms"), "lease-duration");
  check(simba_config_validate(cfg), "config");
  t0 = now_ms();
  printf("Simba %s: three workers contend for \"report\" on memory://demo\n",
         simba_version_string());
  for (int i = 0; i < WORKERS; i++) {
    workers[i].id = i;
    check(simba_client_open(&workers[i].client, "memory://demo", cfg), "simba_client_open");
    check(simba_client_wait_live(workers[i].client, 5000), "simba_client_wait_live");
    simba_listener_t l = {on_elected, on_revoked, &workers[i]};
    check(simba_election_start(&workers[i].election, workers[i].client, "report", &l),
          "simba_election_start");
  }

  int l = current_leader(5000);
  printf("\n-- stop the leader (worker %d): it revokes, releases with its token, and a\n"
         "   candidate takes over at once through the release broadcast. The old term is\n"
         "   invalid before the release; its on_revoked comes once the release is answered\n", l);
  begin_handover();
  check(simba_election_stop_wait(workers[l].election, 5000), "simba_election_stop_wait");
  simba_election_free(workers[l].election);
  workers[l].election = NULL;

  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
  l = current_leader(5000);
  printf("\n-- worker %d steps down for 2 s: the last candidate takes over\n", l);
  begin_handover();
  simba_election_step_down(workers[l].election, 2000, NULL, NULL);
  nanosleep(&pause, NULL);

  l = current_leader(5000);
  printf("\n-- close worker %d's client: its session closes and frees every lease at once\n", l);
  begin_handover();
  simba_client_close(workers[l].client);
  workers[l].client = NULL;
  workers[l].election = NULL; /* freed below only if still held */

  l = current_leader(5000);
  printf("\nthe stepped-down worker leads again after its cooldown: worker %d\n", l);
  char *snap = l >= 0 ? simba_client_snapshot_json(workers[l].client) : NULL;
  if (snap) printf("snapshot: %s\n", snap);
  simba_free(snap);

  for (int i = 0; i < WORKERS; i++) {
    if (workers[i].client) simba_client_close(workers[i].client);
  }
  for (int i = 0; i < WORKERS; i++) simba_election_free(workers[i].election);
  simba_config_free(cfg);
  printf("\nledger's highest token: %llu\n", (unsigned long long)ledger_highest);
  return 0;
}

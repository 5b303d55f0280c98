/*
 * Leader work: simba_run_while_leader, simba_schedule and the task handle, on
 * memory://. The handover order of the seed (revoke, wait for the work or the
 * term's deadline at the stop, release, then complete), work that returns while
 * leading, schedules, closes from inside work, and an executor that rejects an
 * onElected.
 */
#include <pthread.h>

#include "capi_test.h"

/* What one task's work saw, written by its work thread(s). */
/* Tests wait on a counter, then read what the run recorded: each counter is
 * bumped only after the fields it publishes (a run takes its index from a
 * slot counter of its own first). */
typedef struct {
  int slots;              /* work calls that took an index */
  int runs;               /* work calls started, their start recorded */
  int running;            /* work calls in progress (never > 1 per task) */
  int overlap;            /* set if two runs overlapped */
  int started_invalid;    /* set if a run started on an invalid term */
  int64_t first_start_ms; /* start of the first run */
  int64_t last_exit_ms;   /* end of the last run */
  uint64_t tokens[64];    /* token of each run */
  int ignore_revoke_ms;   /* >0: keep working this long whatever happens */
  int return_at_once;     /* return as soon as started (while still leading) */
  simba_task_t *self;     /* for the close-from-work test */
  simba_client_t *client; /* for the client-close-from-work test */
  int64_t close_took_ms;  /* how long the close from work took */
} work_t;

static void work_begin(work_t *w, simba_term_t *t) {
  const int n = ainc(&w->slots);
  if (ainc(&w->running) > 1) ast(&w->overlap, 1);
  if (!simba_term_is_valid(t)) ast(&w->started_invalid, 1);
  if (n == 1) ast64(&w->first_start_ms, now_ms());
  if (n <= 64) astu64(&w->tokens[n - 1], simba_term_token(t));
  ainc(&w->runs);
}

static void work_end(work_t *w) {
  ast64(&w->last_exit_ms, now_ms());
  __atomic_sub_fetch(&w->running, 1, __ATOMIC_SEQ_CST);
}

/* Cooperative work: runs until its term is revoked, then cleans up a little. */
static void cooperative(void *ud, simba_term_t *t) {
  work_t *w = (work_t *)ud;
  work_begin(w, t);
  if (w->return_at_once) {
    work_end(w);
    return;
  }
  if (w->ignore_revoke_ms > 0) {
    sleep_ms(w->ignore_revoke_ms); /* deaf to revocation */
  } else {
    while (simba_term_wait_revoked(t, 1000) != SIMBA_OK) {
    }
    assert_int_equal(simba_term_is_valid(t), 0);
    sleep_ms(50); /* finishing the current step */
  }
  work_end(w);
}

static void count_done(void *ud, int err) {
  assert_int_equal(err, SIMBA_OK);
  ast64((int64_t *)ud, now_ms());
}

static void test_task_arguments(void **state) {
  simba_client_t *c = open_client("task-args");
  simba_task_t *t = (simba_task_t *)&t;
  work_t w;
  (void)state;
  memset(&w, 0, sizeof w);
  CHECK_ERR(simba_run_while_leader(NULL, c, "task-args", cooperative, &w), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_run_while_leader(&t, NULL, "task-args", cooperative, &w), SIMBA_EINVAL, "NULL");
  assert_null(t);
  CHECK_ERR(simba_run_while_leader(&t, c, NULL, cooperative, &w), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_run_while_leader(&t, c, "task-args", NULL, &w), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_run_while_leader(&t, c, "bad name", cooperative, &w), SIMBA_EINVAL, "name");
  CHECK_ERR(simba_schedule(&t, c, "task-args", -1, 100, cooperative, &w), SIMBA_EINVAL, "delay");
  CHECK_ERR(simba_schedule(&t, c, "task-args", 0, 0, cooperative, &w), SIMBA_EINVAL, "period");
  CHECK_ERR(simba_schedule(&t, c, "task-args", 0, 10, NULL, &w), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_task_stop(NULL, NULL, NULL), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_task_step_down(NULL, 0, NULL, NULL), SIMBA_EINVAL, "NULL");
  CHECK_OK(simba_task_close(NULL));
  CHECK_OK(simba_run_while_leader(&t, c, "task-args", cooperative, &w));
  CHECK_ERR(simba_task_step_down(t, -1, NULL, NULL), SIMBA_EINVAL, "cooldown");
  /* The name is taken on this client. */
  {
    simba_task_t *t2 = NULL;
    CHECK_ERR(simba_run_while_leader(&t2, c, "task-args", cooperative, &w), SIMBA_ESTATE, NULL);
    assert_null(t2);
  }
  CHECK_OK(simba_task_close(t));
  CHECK_OK(simba_client_close(c));
}

/* Handover order: stop revokes, the work exits, THEN the lease is released
 * (the other node's work starts only after ours exited), THEN the stop's done. */
static void test_stop_waits_for_the_work(void **state) {
  simba_client_t *a = open_live_client("task-order");
  simba_client_t *b = open_live_client("task-order");
  work_t wa, wb;
  simba_task_t *ta = NULL, *tb = NULL;
  int64_t done_at = 0, stop_at;
  (void)state;
  memset(&wa, 0, sizeof wa);
  memset(&wb, 0, sizeof wb);
  CHECK_OK(simba_run_while_leader(&ta, a, "task-order", cooperative, &wa));
  ASSERT_EVENTUALLY(ald(&wa.runs) == 1);
  CHECK_OK(simba_run_while_leader(&tb, b, "task-order", cooperative, &wb));
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&wb.runs), 0);

  stop_at = now_ms();
  CHECK_OK(simba_task_stop(ta, count_done, &done_at));
  ASSERT_EVENTUALLY(ald(&wb.runs) == 1);
  ASSERT_EVENTUALLY(ald64(&done_at) != 0);
  /* a's work took >= 50 ms to finish after the revocation; b started after it. */
  assert_true(ald64(&wa.last_exit_ms) >= stop_at + 50);
  assert_true(ald64(&wb.first_start_ms) >= ald64(&wa.last_exit_ms));
  assert_true(ald64(&done_at) >= ald64(&wa.last_exit_ms));
  assert_true(aldu64(&wb.tokens[0]) > aldu64(&wa.tokens[0]));
  CHECK_ERR(simba_task_stop(ta, NULL, NULL), SIMBA_ESTATE, NULL);
  CHECK_OK(simba_task_close(ta));
  CHECK_OK(simba_task_close(tb));
  assert_int_equal(ald(&wa.overlap) + ald(&wb.overlap), 0);
  assert_int_equal(ald(&wa.started_invalid) + ald(&wb.started_invalid), 0);
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
}

/* Work deaf to revocation delays the handover by at most the term's remaining
 * time at the stop: the lease is released at that deadline, not when the work
 * ends, and nobody else starts the work before then. */
static void test_deaf_work_delays_the_handover_at_most_its_remaining_time(void **state) {
  simba_client_t *a = open_live_client("task-deaf");
  simba_client_t *b = open_live_client("task-deaf");
  work_t wa, wb;
  simba_task_t *ta = NULL, *tb = NULL;
  int64_t done_at = 0, stop_at, remaining_at_stop;
  simba_term_t *term = NULL;
  (void)state;
  memset(&wa, 0, sizeof wa);
  memset(&wb, 0, sizeof wb);
  wa.ignore_revoke_ms = (int)(4 * lease_ms());
  CHECK_OK(simba_run_while_leader(&ta, a, "task-deaf", cooperative, &wa));
  ASSERT_EVENTUALLY(ald(&wa.runs) == 1);
  CHECK_OK(simba_run_while_leader(&tb, b, "task-deaf", cooperative, &wb));
  (void)term;
  {
    /* The remaining time of a's term, read from a's snapshot. */
    char *js = simba_client_snapshot_json(a);
    const char *p = js ? strstr(js, "\"remaining_ms\":") : NULL;
    assert_non_null(p);
    remaining_at_stop = strtoll(p + strlen("\"remaining_ms\":"), NULL, 10);
    simba_free(js);
  }
  stop_at = now_ms();
  CHECK_OK(simba_task_stop(ta, count_done, &done_at));
  ASSERT_EVENTUALLY(ald64(&done_at) != 0);
  ASSERT_EVENTUALLY(ald(&wb.runs) == 1);
  /* Released at a's deadline as at the stop (plus scheduling slack), while
   * a's work still ran; and not before that deadline. */
  assert_true(ald64(&done_at) - stop_at <= remaining_at_stop + 200 * tscale());
  assert_true(ald64(&wb.first_start_ms) >= stop_at + remaining_at_stop - 60);
  assert_int_equal(ald(&wa.running), 1);
  /* Close waits for the deaf work to return. */
  CHECK_OK(simba_task_close(ta));
  assert_int_equal(ald(&wa.running), 0);
  CHECK_OK(simba_task_close(tb));
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
}

/* Work that returns while leading: the lease is handed over and the task
 * contends again; each run has a new, larger token. */
static void test_work_returning_contends_again(void **state) {
  simba_client_t *c = open_live_client("task-again");
  work_t w;
  simba_task_t *t = NULL;
  int i;
  (void)state;
  memset(&w, 0, sizeof w);
  w.return_at_once = 1;
  CHECK_OK(simba_run_while_leader(&t, c, "task-again", cooperative, &w));
  ASSERT_EVENTUALLY(ald(&w.runs) >= 4);
  CHECK_OK(simba_task_close(t));
  for (i = 1; i < 4; ++i) assert_true(aldu64(&w.tokens[i]) > aldu64(&w.tokens[i - 1]));
  assert_int_equal(ald(&w.overlap), 0);
  CHECK_OK(simba_client_close(c));
}

/* A schedule: runs after the initial delay, then every period, only while
 * leader, never overlapping, never on a revoked term, nothing after its stop. */
typedef struct {
  int slots; /* as in work_t */
  int runs;
  int bad;
  int64_t first_ms;
  int64_t last_ms;
} sched_t;

static void scheduled(void *ud, simba_term_t *t) {
  sched_t *s = (sched_t *)ud;
  if (!simba_term_is_valid(t)) ast(&s->bad, 1);
  if (ainc(&s->slots) == 1) ast64(&s->first_ms, now_ms());
  ast64(&s->last_ms, now_ms());
  ainc(&s->runs);
  sleep_ms(5);
}

static void test_schedule(void **state) {
  simba_client_t *c = open_live_client("task-sched");
  sched_t s;
  simba_task_t *t = NULL;
  int64_t start, window;
  int runs;
  (void)state;
  memset(&s, 0, sizeof s);
  start = now_ms();
  CHECK_OK(simba_schedule(&t, c, "task-sched", 100, 40, scheduled, &s));
  ASSERT_EVENTUALLY(ald(&s.runs) >= 1);
  assert_true(ald64(&s.first_ms) >= start + 100);
  sleep_ms(400);
  window = now_ms() - ald64(&s.first_ms);
  runs = ald(&s.runs);
  /* A fixed delay of 40 ms after each 5 ms run: at most window / 45 + 1. */
  assert_true(runs <= window / 45 + 2);
  assert_true(runs >= 3);
  CHECK_OK(simba_task_close(t));
  runs = ald(&s.runs);
  sleep_ms(200);
  assert_int_equal(ald(&s.runs), runs);
  assert_int_equal(ald(&s.bad), 0);
  CHECK_OK(simba_client_close(c));
}

/* A number after `"key":` in a JSON text (the first occurrence), or -1. */
static int64_t json_int_after(const char *js, const char *key) {
  char pat[64];
  const char *p;
  snprintf(pat, sizeof pat, "\"%s\":", key);
  p = js ? strstr(js, pat) : NULL;
  return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* A counter of a client's snapshot ("acquires", "releases", ...). */
static int64_t snapshot_counter(simba_client_t *c, const char *key) {
  char *js = simba_client_snapshot_json(c);
  const char *counters = js ? strstr(js, "\"counters\":") : NULL;
  const int64_t v = json_int_after(counters, key);
  simba_free(js);
  return v;
}

/* Schedules of two nodes on one name. Each run asks the store who holds the
 * lease: a run must see its own session as the holder and its own token as
 * the lease's token (it runs on the leader, on its valid term). */
#define SCHED_MAX 256
static int sched_running_total; /* runs in progress, over both nodes */
static int sched_overlap;       /* set if runs of the two nodes overlapped */

typedef struct {
  simba_client_t *client;
  const char *name;
  int runs;
  int not_leader; /* runs on an invalid term, or not the store's holder/token */
  int64_t start_ms[SCHED_MAX];
  int64_t end_ms[SCHED_MAX];
  uint64_t token[SCHED_MAX];
} node_sched_t;

static void node_scheduled(void *ud, simba_term_t *t) {
  node_sched_t *n = (node_sched_t *)ud;
  const int i = ainc(&n->runs) - 1;
  const uint64_t token = simba_term_token(t);
  const char *names[1];
  char *snap, *js = NULL;
  char own[128], holder[128];
  int ok, valid;
  if (ainc(&sched_running_total) > 1) ast(&sched_overlap, 1);
  if (i < SCHED_MAX) {
    ast64(&n->start_ms[i], now_ms());
    astu64(&n->token[i], token);
  }
  ok = valid = simba_term_is_valid(t);
  names[0] = n->name;
  snap = simba_client_snapshot_json(n->client);
  ok = ok && snap && json_find_string(snap, "id", own, sizeof own);
  ok = ok && simba_client_inspect_json(n->client, names, 1, 1000, &js) == SIMBA_OK;
  ok = ok && json_find_string(js, "holder", holder, sizeof holder) && strcmp(holder, own) == 0;
  ok = ok && json_int_after(js, "token") == (int64_t)token;
  if (!ok) {
    print_error("run %d of token %llu: not the leader (term valid: %d, store: %s)\n", i,
                (unsigned long long)token, valid, js ? js : "(not asked)");
    ainc(&n->not_leader);
  }
  simba_free(snap);
  simba_free(js);
  sleep_ms(5);
  __atomic_sub_fetch(&sched_running_total, 1, __ATOMIC_SEQ_CST);
  if (i < SCHED_MAX) ast64(&n->end_ms[i], now_ms());
}

/* Runs of `n` with `token` that started at or after `from_ms`. */
static int runs_since(node_sched_t *n, uint64_t token, int64_t from_ms) {
  int i, count = 0;
  const int runs = ald(&n->runs) < SCHED_MAX ? ald(&n->runs) : SCHED_MAX;
  for (i = 0; i < runs; ++i) {
    if (aldu64(&n->token[i]) == token && ald64(&n->start_ms[i]) >= from_ms) ++count;
  }
  return count;
}

/* The first run of `n` with a token other than `token`, or -1. */
static int first_run_after_term(node_sched_t *n, uint64_t token) {
  int i;
  const int runs = ald(&n->runs) < SCHED_MAX ? ald(&n->runs) : SCHED_MAX;
  for (i = 0; i < runs; ++i) {
    if (aldu64(&n->token[i]) != token) return i;
  }
  return -1;
}

static void test_schedules_of_two_nodes_run_only_on_the_leader(void **state) {
  const int64_t delay = 150 * tscale(), period = 30;
  simba_client_t *a = open_live_client("task-sched2");
  simba_client_t *b = open_live_client("task-sched2");
  node_sched_t *na = (node_sched_t *)calloc(1, sizeof *na);
  node_sched_t *nb = (node_sched_t *)calloc(1, sizeof *nb);
  simba_task_t *ta = NULL, *tb = NULL;
  int64_t sd_done = 0, b_done = 0;
  uint64_t a_token;
  int a_runs, b_runs, i, j;
  (void)state;
  assert_non_null(na);
  assert_non_null(nb);
  na->client = a;
  nb->client = b;
  na->name = nb->name = "task-sched2";
  CHECK_OK(simba_schedule(&ta, a, "task-sched2", delay, period, node_scheduled, na));
  ASSERT_EVENTUALLY(ald(&na->runs) >= 3);
  CHECK_OK(simba_schedule(&tb, b, "task-sched2", delay, period, node_scheduled, nb));
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&nb->runs), 0); /* b is no leader: it never runs */
  a_token = aldu64(&na->token[0]);

  /* a steps down mid-schedule: its term's runs stop, b's term starts with the
   * initial delay after a's last run exited (the release comes after it). */
  CHECK_OK(simba_task_step_down(ta, 4 * lease_ms(), count_done, &sd_done));
  ASSERT_EVENTUALLY(ald64(&sd_done) != 0);
  a_runs = ald(&na->runs);
  ASSERT_EVENTUALLY(ald(&nb->runs) >= 3);
  assert_int_equal(ald(&na->runs), a_runs); /* no further run on a, during its cooldown */
  assert_int_equal(runs_since(na, a_token, ald64(&sd_done)), 0);
  assert_true(ald64(&nb->start_ms[0]) >= ald64(&na->end_ms[a_runs - 1]) + delay);

  /* b stops: a (after its cooldown) has a new term, which starts again with
   * the initial delay, counted after b's last run exited. */
  CHECK_OK(simba_task_stop(tb, count_done, &b_done));
  ASSERT_EVENTUALLY(ald64(&b_done) != 0);
  b_runs = ald(&nb->runs);
  ASSERT_EVENTUALLY(ald(&na->runs) >= a_runs + 2);
  i = first_run_after_term(na, a_token);
  assert_int_equal(i, a_runs);
  assert_true(aldu64(&na->token[i]) > aldu64(&nb->token[0]));
  assert_true(ald64(&na->start_ms[i]) >= ald64(&nb->end_ms[b_runs - 1]) + delay);
  for (j = 1; j < b_runs; ++j) assert_true(aldu64(&nb->token[j]) == aldu64(&nb->token[0]));

  CHECK_OK(simba_task_close(ta));
  CHECK_OK(simba_task_close(tb));
  assert_int_equal(ald(&nb->runs), b_runs);
  assert_int_equal(ald(&na->not_leader) + ald(&nb->not_leader), 0);
  assert_int_equal(ald(&sched_overlap), 0);
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
  free(na);
  free(nb);
}

/* Step-down and stop of a run_while_leader task, seen from C: the term is
 * revoked and its work waited for, the release comes after the work exited,
 * the cooldown holds, and the term's on_revoked (registered by the work)
 * reports the reason before the task's done runs. */
static int order_seq;

typedef struct {
  int slots, runs, running; /* slots, runs: as in work_t */
  int64_t start_ms[8];
  int64_t exit_ms[8];
  int nrevoked;
  simba_revoke_reason_t reasons[8];
  int revoked_seq[8];
  int revoked_while_running; /* on_revoked ran before the work exited */
} sd_work_t;

typedef struct {
  int64_t at_ms;
  int seq;
} sd_done_t;

static void sd_on_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t reason) {
  sd_work_t *w = (sd_work_t *)ud;
  const int i = ainc(&w->nrevoked) - 1;
  (void)t;
  if (ald(&w->running)) ainc(&w->revoked_while_running);
  if (i < 8) {
    w->reasons[i] = reason;
    ast(&w->revoked_seq[i], ainc(&order_seq));
  }
}

static void sd_work(void *ud, simba_term_t *t) {
  sd_work_t *w = (sd_work_t *)ud;
  const int i = ainc(&w->slots) - 1;
  ainc(&w->running);
  if (i < 8) ast64(&w->start_ms[i], now_ms());
  ainc(&w->runs);
  CHECK_OK(simba_term_on_revoked(t, sd_on_revoked, w));
  while (simba_term_wait_revoked(t, 1000) != SIMBA_OK) {
  }
  sleep_ms(50); /* finishing the current step */
  if (i < 8) ast64(&w->exit_ms[i], now_ms());
  __atomic_sub_fetch(&w->running, 1, __ATOMIC_SEQ_CST);
}

static void sd_done(void *ud, int err) {
  sd_done_t *d = (sd_done_t *)ud;
  assert_int_equal(err, SIMBA_OK);
  ast64(&d->at_ms, now_ms()); /* before seq, which the test waits on */
  ast(&d->seq, ainc(&order_seq));
}

static void test_task_step_down_and_stop_in_handover_order(void **state) {
  const int64_t cooldown = 3 * lease_ms();
  simba_client_t *a = open_live_client("task-sd");
  simba_client_t *b = open_live_client("task-sd");
  sd_work_t wa, wb;
  sd_done_t sd = {0, 0}, stop_a = {0, 0}, stop_b = {0, 0};
  simba_task_t *ta = NULL, *tb = NULL;
  int64_t sd_at, stop_at;
  (void)state;
  memset(&wa, 0, sizeof wa);
  memset(&wb, 0, sizeof wb);
  CHECK_OK(simba_run_while_leader(&ta, a, "task-sd", sd_work, &wa));
  ASSERT_EVENTUALLY(ald(&wa.runs) == 1);
  CHECK_OK(simba_run_while_leader(&tb, b, "task-sd", sd_work, &wb));
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&wb.runs), 0);

  sd_at = now_ms();
  CHECK_OK(simba_task_step_down(ta, cooldown, sd_done, &sd));
  ASSERT_EVENTUALLY(ald(&sd.seq) != 0);
  /* The work was revoked and waited for (it took >= 50 ms to exit). */
  assert_int_equal(ald(&wa.running), 0);
  assert_true(ald64(&wa.exit_ms[0]) >= sd_at + 50);
  assert_true(ald64(&sd.at_ms) >= ald64(&wa.exit_ms[0]));
  /* The term's on_revoked: STEPPED_DOWN, after the work exited, before done. */
  assert_int_equal(ald(&wa.nrevoked), 1);
  assert_int_equal(wa.reasons[0], SIMBA_REVOKE_STEPPED_DOWN);
  assert_true(ald(&wa.revoked_seq[0]) < ald(&sd.seq));
  assert_int_equal(ald(&wa.revoked_while_running), 0);
  /* The release came after the work exited: b starts only then. */
  ASSERT_EVENTUALLY(ald(&wb.runs) == 1);
  assert_true(ald64(&wb.start_ms[0]) >= ald64(&wa.exit_ms[0]));

  /* b stops at once: the lease is free, yet a waits out its cooldown. */
  CHECK_OK(simba_task_stop(tb, sd_done, &stop_b));
  ASSERT_EVENTUALLY(ald(&stop_b.seq) != 0);
  assert_true(ald64(&stop_b.at_ms) < sd_at + cooldown); /* else the check below proves nothing */
  assert_int_equal(ald(&wb.nrevoked), 1);
  assert_int_equal(wb.reasons[0], SIMBA_REVOKE_STOPPED);
  assert_true(ald(&wb.revoked_seq[0]) < ald(&stop_b.seq));
  ASSERT_EVENTUALLY(ald(&wa.runs) == 2);
  assert_true(ald64(&wa.start_ms[1]) >= sd_at + cooldown);

  /* Stop: STOPPED, the work waited for, its on_revoked before done. */
  stop_at = now_ms();
  CHECK_OK(simba_task_stop(ta, sd_done, &stop_a));
  ASSERT_EVENTUALLY(ald(&stop_a.seq) != 0);
  assert_int_equal(ald(&wa.running), 0);
  assert_true(ald64(&wa.exit_ms[1]) >= stop_at + 50);
  assert_true(ald64(&stop_a.at_ms) >= ald64(&wa.exit_ms[1]));
  assert_int_equal(ald(&wa.nrevoked), 2);
  assert_int_equal(wa.reasons[1], SIMBA_REVOKE_STOPPED);
  assert_true(ald(&wa.revoked_seq[1]) < ald(&stop_a.seq));
  assert_int_equal(ald(&wa.revoked_while_running) + ald(&wb.revoked_while_running), 0);
  CHECK_OK(simba_task_close(ta));
  CHECK_OK(simba_task_close(tb));
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
}

/* Blocking closes called from leader work do not wait for themselves. */
static void closes_itself(void *ud, simba_term_t *t) {
  work_t *w = (work_t *)ud;
  const int64_t t0 = now_ms();
  work_begin(w, t);
  if (!w->client) {
    WAIT_UNTIL(aldp((void *const *)&w->self) != NULL, long_wait_ms());
    CHECK_OK(simba_task_close((simba_task_t *)aldp((void *const *)&w->self)));
  }
  if (w->client) CHECK_OK(simba_client_close(w->client));
  ast64(&w->close_took_ms, now_ms() - t0);
  work_end(w);
}

static void test_close_from_work_does_not_wait(void **state) {
  simba_client_t *c = open_live_client("task-self");
  simba_client_t *d = open_live_client("task-self2");
  work_t w, v;
  simba_task_t *t = NULL, *u = NULL;
  (void)state;
  memset(&w, 0, sizeof w);
  memset(&v, 0, sizeof v);
  /* The work waits until the handle is published, then closes it. */
  CHECK_OK(simba_run_while_leader(&t, c, "task-self", closes_itself, &w));
  astp((void **)&w.self, t);
  ASSERT_EVENTUALLY(ald(&w.runs) == 1 && ald(&w.running) == 0);
  assert_true(ald64(&w.close_took_ms) < 200 * tscale());
  CHECK_OK(simba_client_close(c));

  v.client = d;
  CHECK_OK(simba_run_while_leader(&u, d, "task-self2", closes_itself, &v));
  ASSERT_EVENTUALLY(ald(&v.runs) == 1 && ald(&v.running) == 0);
  assert_true(ald64(&v.close_took_ms) < 200 * tscale());
  /* The client closed itself from its work: the task handle is still ours. */
  CHECK_OK(simba_task_close(u));
}

/* A host executor that runs each task on a thread of its own (after
 * `delay_ms`, if set), or rejects. */
typedef struct {
  int reject;
  int rejected;
  int delay_ms;
} rejecting_t;

typedef struct {
  void (*run)(void *);
  void *arg;
  int delay_ms;
} job_t;

/* Marks the threads of the host executor below, so that a callback can tell
 * whether it runs on the callback executor. */
static pthread_key_t host_thread_key;
static pthread_once_t host_thread_once = PTHREAD_ONCE_INIT;
static void make_host_thread_key(void) { (void)pthread_key_create(&host_thread_key, NULL); }
static int on_host_executor(void) {
  (void)pthread_once(&host_thread_once, make_host_thread_key);
  return pthread_getspecific(host_thread_key) != NULL;
}

static void *job_main(void *p) {
  job_t j = *(job_t *)p;
  free(p);
  (void)pthread_once(&host_thread_once, make_host_thread_key);
  (void)pthread_setspecific(host_thread_key, &host_thread_key);
  if (j.delay_ms > 0) sleep_ms(j.delay_ms);
  j.run(j.arg);
  return NULL;
}

static int rejecting_submit(void *ctx, void (*run)(void *), void *arg) {
  rejecting_t *x = (rejecting_t *)ctx;
  pthread_t th;
  job_t *j;
  if (ald(&x->reject)) {
    ainc(&x->rejected);
    return -1;
  }
  j = (job_t *)malloc(sizeof *j);
  if (!j) return -1;
  j->run = run;
  j->arg = arg;
  j->delay_ms = ald(&x->delay_ms);
  if (pthread_create(&th, NULL, job_main, j) != 0) {
    free(j);
    return -1;
  }
  pthread_detach(th);
  return 0;
}

typedef struct {
  int elected, revoked;
} pair_t;
static void pair_elected(void *ud, simba_term_t *t) {
  (void)t;
  ainc(&((pair_t *)ud)->elected);
}
static void pair_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t r) {
  (void)t;
  (void)r;
  ainc(&((pair_t *)ud)->revoked);
}

/* If the executor rejects an onElected, nobody learns of the term, the
 * election steps down for one lease duration, and no onRevoked comes either. */
static void test_rejected_on_elected_steps_down(void **state) {
  rejecting_t x = {0, 0, 0};
  simba_config_t *cfg = test_config(lease_ms());
  simba_client_t *a = NULL, *b;
  simba_election_t *ea = NULL, *eb = NULL;
  pair_t pa = {0, 0}, pb = {0, 0};
  simba_listener_t la = {pair_elected, pair_revoked, &pa};
  simba_listener_t lb = {pair_elected, pair_revoked, &pb};
  int64_t t0, rejected_at, acquires, releases;
  (void)state;
  CHECK_OK(simba_config_set_executor(cfg, rejecting_submit, &x));
  CHECK_OK(simba_client_open(&a, "memory://task-reject", cfg));
  simba_config_free(cfg);
  CHECK_OK(simba_client_wait_live(a, long_wait_ms()));
  b = open_live_client("task-reject");
  sleep_ms(quiet_ms()); /* the session events went through the executor */
  ast(&x.reject, 1);
  t0 = now_ms();
  releases = snapshot_counter(a, "releases");
  CHECK_OK(simba_election_start(&ea, a, "task-reject", &la));
  ASSERT_EVENTUALLY(ald(&x.rejected) >= 1);
  rejected_at = now_ms();
  ast(&x.reject, 0);
  /* The attempt that won the rejected term; a makes no other for one lease
   * duration (its step-down's cooldown starts after the rejection). */
  acquires = snapshot_counter(a, "acquires");
  assert_true(acquires >= 1);
  /* a stepped down: b (which starts now) takes the lease within the cooldown. */
  CHECK_OK(simba_election_start(&eb, b, "task-reject", &lb));
  ASSERT_EVENTUALLY(ald(&pb.elected) == 1);
  assert_true(now_ms() - t0 < lease_ms() + 400 * tscale());
  /* The rejected term was released, and a did not contend again meanwhile. */
  ASSERT_EVENTUALLY(snapshot_counter(a, "releases") > releases);
  if (rejected_at + lease_ms() - 100 * tscale() > now_ms()) {
    sleep_ms(rejected_at + lease_ms() - 100 * tscale() - now_ms());
  }
  assert_int_equal(snapshot_counter(a, "acquires"), acquires);
  assert_int_equal(ald(&pa.elected), 0);
  assert_int_equal(ald(&pa.revoked), 0); /* the released term's on_revoked never came */
  /* After its cooldown, a contends again (b holds the lease: a waits). */
  ASSERT_EVENTUALLY(snapshot_counter(a, "acquires") > acquires);
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&pa.elected), 0);
  assert_int_equal(ald(&pa.revoked), 0);
  /* After b stops, a (contending again after its cooldown) is elected normally. */
  CHECK_OK(simba_election_stop_wait(eb, long_wait_ms()));
  ASSERT_EVENTUALLY(ald(&pa.elected) == 1);
  CHECK_OK(simba_election_stop_wait(ea, long_wait_ms()));
  assert_int_equal(ald(&pa.revoked), 1);
  simba_election_free(ea);
  simba_election_free(eb);
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
}

/* Blocking closes called from a callback (here a step-down's done) do not
 * wait for themselves: the close starts the stop, frees the handle and
 * returns; the stop then finishes on its own. */
typedef struct {
  simba_task_t *task;
  int64_t took_ms;
  int ran;
} closer_t;

static void close_in_done(void *ud, int err) {
  closer_t *c = (closer_t *)ud;
  const int64_t t0 = now_ms();
  assert_int_equal(err, SIMBA_OK);
  CHECK_OK(simba_task_close(c->task));
  ast64(&c->took_ms, now_ms() - t0);
  ast(&c->ran, 1);
}

static void test_close_from_a_callback_does_not_wait(void **state) {
  simba_client_t *c = open_live_client("task-cbclose");
  work_t w;
  closer_t cl = {NULL, 0, 0};
  simba_task_t *t = NULL;
  int runs;
  (void)state;
  memset(&w, 0, sizeof w);
  CHECK_OK(simba_run_while_leader(&t, c, "task-cbclose", cooperative, &w));
  ASSERT_EVENTUALLY(ald(&w.runs) == 1);
  cl.task = t;
  CHECK_OK(simba_task_step_down(t, 0, close_in_done, &cl));
  ASSERT_EVENTUALLY(ald(&cl.ran) == 1);
  assert_true(ald64(&cl.took_ms) < 200 * tscale());
  /* The stop the close started goes on: no work runs afterwards. */
  ASSERT_EVENTUALLY(ald(&w.running) == 0);
  runs = ald(&w.runs);
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&w.runs), runs);
  assert_int_equal(ald(&w.running), 0);
  CHECK_OK(simba_client_close(c));
}

/* A partition group's work and its dones. */
typedef struct {
  int held;   /* partitions whose work runs now */
  int starts; /* work calls */
  int close_from_work;
  simba_task_t *self; /* close-from-work: the group's handle, published by the test */
  int64_t close_took_ms;
  int revoked_after_close; /* the work's term was revoked after its close */
} group_work_t;

static void group_work(void *ud, simba_term_t *t) {
  group_work_t *g = (group_work_t *)ud;
  ainc(&g->starts);
  ainc(&g->held);
  if (g->close_from_work) {
    simba_task_t *self;
    int64_t t0;
    WAIT_UNTIL(aldp((void *const *)&g->self) != NULL, long_wait_ms());
    self = (simba_task_t *)__atomic_exchange_n((void **)&g->self, NULL, __ATOMIC_SEQ_CST);
    if (self) {
      t0 = now_ms();
      CHECK_OK(simba_task_close(self));
      ast64(&g->close_took_ms, now_ms() - t0);
      if (simba_term_wait_revoked(t, long_wait_ms()) == SIMBA_OK) ast(&g->revoked_after_close, 1);
    }
  }
  while (simba_term_wait_revoked(t, 1000) != SIMBA_OK) {
  }
  sleep_ms(20); /* finishing the current step */
  __atomic_sub_fetch(&g->held, 1, __ATOMIC_SEQ_CST);
}

typedef struct {
  group_work_t *work;
  simba_client_t *client;
  simba_task_t *task; /* closed from the done, if set */
  int on_executor;    /* the done ran on a thread of the host executor */
  int wait_live_rc;   /* a blocking call from the done */
  int held_at_done;   /* partitions still running their work */
  int64_t close_took_ms;
  int ran;
} group_done_t;

static void group_done(void *ud, int err) {
  group_done_t *d = (group_done_t *)ud;
  assert_int_equal(err, SIMBA_OK);
  ast(&d->on_executor, on_host_executor());
  ast(&d->wait_live_rc, simba_client_wait_live(d->client, 0));
  ast(&d->held_at_done, ald(&d->work->held));
  if (d->task) {
    const int64_t t0 = now_ms();
    CHECK_OK(simba_task_close(d->task));
    ast64(&d->close_took_ms, now_ms() - t0);
  }
  ast(&d->ran, 1);
}

/* A group's step-down and stop dones run on the callback executor (here the
 * host's), as simba_task_stop() says, after every partition's work exited;
 * blocking calls there refuse with SIMBA_EWOULDBLOCK, and a close there does
 * not wait for itself. */
static void test_group_dones_run_on_the_callback_executor(void **state) {
  rejecting_t x = {0, 0, 0};
  simba_config_t *cfg = test_config(lease_ms());
  simba_client_t *c = NULL;
  simba_task_t *g = NULL;
  group_work_t w;
  group_done_t d1, d2;
  (void)state;
  memset(&w, 0, sizeof w);
  memset(&d1, 0, sizeof d1);
  memset(&d2, 0, sizeof d2);
  CHECK_OK(simba_config_set_executor(cfg, rejecting_submit, &x));
  CHECK_OK(simba_client_open(&c, "memory://task-gdone", cfg));
  simba_config_free(cfg);
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  CHECK_OK(simba_group_join(&g, c, "task-gdone", 2, group_work, &w));
  ASSERT_EVENTUALLY(ald(&w.held) == 2);

  d1.work = &w;
  d1.client = c;
  /* A cooldown, so that no partition is taken again before the done ran. */
  CHECK_OK(simba_task_step_down(g, lease_ms(), group_done, &d1));
  ASSERT_EVENTUALLY(ald(&d1.ran) == 1);
  assert_int_equal(ald(&d1.on_executor), 1);
  assert_int_equal(ald(&d1.wait_live_rc), SIMBA_EWOULDBLOCK);
  assert_int_equal(ald(&d1.held_at_done), 0);
  ASSERT_EVENTUALLY(ald(&w.held) == 2); /* joined again after the cooldown */

  d2.work = &w;
  d2.client = c;
  d2.task = g; /* the done closes the group */
  CHECK_OK(simba_task_stop(g, group_done, &d2));
  ASSERT_EVENTUALLY(ald(&d2.ran) == 1);
  assert_int_equal(ald(&d2.on_executor), 1);
  assert_int_equal(ald(&d2.wait_live_rc), SIMBA_EWOULDBLOCK);
  assert_int_equal(ald(&d2.held_at_done), 0);
  assert_true(ald64(&d2.close_took_ms) < 200 * tscale());
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&w.held), 0);
  CHECK_OK(simba_client_close(c));
}

/* simba_task_close of a group returns only after the done of its stop ran:
 * nothing of the group runs after its close, even on a slow executor. */
static void test_group_close_waits_for_its_done(void **state) {
  rejecting_t x = {0, 0, 0};
  simba_config_t *cfg = test_config(lease_ms());
  simba_client_t *c = NULL;
  simba_task_t *g = NULL;
  group_work_t w;
  group_done_t d;
  (void)state;
  memset(&w, 0, sizeof w);
  memset(&d, 0, sizeof d);
  CHECK_OK(simba_config_set_executor(cfg, rejecting_submit, &x));
  CHECK_OK(simba_client_open(&c, "memory://task-gclose", cfg));
  simba_config_free(cfg);
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  CHECK_OK(simba_group_join(&g, c, "task-gclose", 2, group_work, &w));
  ASSERT_EVENTUALLY(ald(&w.held) == 2);
  ast(&x.delay_ms, (int)(200 * tscale())); /* every callback comes late from now on */
  d.work = &w;
  d.client = c;
  CHECK_OK(simba_task_stop(g, group_done, &d));
  CHECK_OK(simba_task_close(g));
  assert_int_equal(ald(&d.ran), 1);
  assert_int_equal(ald(&d.on_executor), 1);
  assert_int_equal(ald(&w.held), 0);
  CHECK_OK(simba_client_close(c));
}

/* A close of the group from its own partition's work does not wait for
 * itself; the stop it started then revokes that work's term. */
static void test_group_close_from_its_work_does_not_wait(void **state) {
  simba_client_t *c = open_live_client("task-gself");
  simba_task_t *g = NULL;
  group_work_t w;
  (void)state;
  memset(&w, 0, sizeof w);
  w.close_from_work = 1;
  CHECK_OK(simba_group_join(&g, c, "task-gself", 1, group_work, &w));
  astp((void **)&w.self, g);
  ASSERT_EVENTUALLY(ald(&w.starts) == 1 && ald(&w.held) == 0);
  assert_true(ald64(&w.close_took_ms) < 200 * tscale());
  assert_int_equal(ald(&w.revoked_after_close), 1);
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&w.starts), 1); /* the group left for good */
  CHECK_OK(simba_client_close(c));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_task_arguments),
      cmocka_unit_test(test_stop_waits_for_the_work),
      cmocka_unit_test(test_deaf_work_delays_the_handover_at_most_its_remaining_time),
      cmocka_unit_test(test_work_returning_contends_again),
      cmocka_unit_test(test_schedule),
      cmocka_unit_test(test_schedules_of_two_nodes_run_only_on_the_leader),
      cmocka_unit_test(test_task_step_down_and_stop_in_handover_order),
      cmocka_unit_test(test_close_from_work_does_not_wait),
      cmocka_unit_test(test_rejected_on_elected_steps_down),
      cmocka_unit_test(test_close_from_a_callback_does_not_wait),
      cmocka_unit_test(test_group_dones_run_on_the_callback_executor),
      cmocka_unit_test(test_group_close_waits_for_its_done),
      cmocka_unit_test(test_group_close_from_its_work_does_not_wait),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

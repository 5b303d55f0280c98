/*
 * The lifetime and threading contract that bindings build on
 * (docs/bindings-contract.md): each test here backs one rule of that page and
 * fails if the rule breaks. memory:// only; every wait is bounded.
 */
#include <signal.h>
#include <unistd.h>

#include "capi_test.h"

/* A close that hangs must fail the test, not run into ctest's timeout. */
static void watchdog(unsigned seconds) { alarm(seconds * (unsigned)tscale()); }

/* ------------------------------------------------------------------------- */
/* A host executor that only the test's main thread drains (pump()): the shape
 * of a single-threaded host (an event loop that runs submitted tasks between
 * events). */

typedef struct qtask {
  void (*run)(void *);
  void *arg;
  struct qtask *next;
} qtask_t;

typedef struct {
  pthread_mutex_t mu;
  qtask_t *head, *tail;
  int submitted;
} mainq_t;

static int mainq_submit(void *ctx, void (*run)(void *), void *arg) {
  mainq_t *q = (mainq_t *)ctx;
  qtask_t *t = (qtask_t *)calloc(1, sizeof *t);
  if (!t) return 1;
  t->run = run;
  t->arg = arg;
  pthread_mutex_lock(&q->mu);
  if (q->tail) {
    q->tail->next = t;
  } else {
    q->head = t;
  }
  q->tail = t;
  q->submitted++;
  pthread_mutex_unlock(&q->mu);
  return 0;
}

/* Runs what was submitted so far; returns how many tasks ran. */
static int mainq_pump(mainq_t *q) {
  int n = 0;
  for (;;) {
    qtask_t *t;
    pthread_mutex_lock(&q->mu);
    t = q->head;
    if (t) {
      q->head = t->next;
      if (!q->head) q->tail = NULL;
    }
    pthread_mutex_unlock(&q->mu);
    if (!t) return n;
    t->run(t->arg);
    free(t);
    ++n;
  }
}

static int mainq_pending(mainq_t *q) {
  int n = 0;
  qtask_t *t;
  pthread_mutex_lock(&q->mu);
  for (t = q->head; t; t = t->next) ++n;
  pthread_mutex_unlock(&q->mu);
  return n;
}

static int on_main(pthread_t main) { return pthread_equal(pthread_self(), main); }

typedef struct {
  pthread_t main;
  int elected, revoked, revoked_on_main, event_calls;
} hostrec_t;

static void host_elected(void *ud, simba_term_t *t) {
  (void)t;
  ainc(&((hostrec_t *)ud)->elected);
}

static void host_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t r) {
  hostrec_t *h = (hostrec_t *)ud;
  (void)t;
  (void)r;
  ainc(&h->revoked);
  if (on_main(h->main)) ainc(&h->revoked_on_main);
}

/* Opens memory://store on a mainq_t executor and starts an election on
 * "leader" with a hostrec_t listener, pumping the queue until it is elected. */
static simba_client_t *open_elected_on_mainq(const char *store, mainq_t *q, hostrec_t *h,
                                             simba_election_t **e) {
  simba_config_t *cfg = test_config(lease_ms());
  simba_client_t *c = NULL;
  simba_listener_t l;
  char url[128];
  memset(q, 0, sizeof *q);
  memset(h, 0, sizeof *h);
  pthread_mutex_init(&q->mu, NULL);
  h->main = pthread_self();
  CHECK_OK(simba_config_set_executor(cfg, mainq_submit, q));
  snprintf(url, sizeof url, "memory://%s", store);
  CHECK_OK(simba_client_open(&c, url, cfg));
  simba_config_free(cfg);
  l.on_elected = host_elected;
  l.on_revoked = host_revoked;
  l.ud = h;
  CHECK_OK(simba_election_start(e, c, "leader", &l));
  {
    const int64_t until = now_ms() + long_wait_ms();
    while (ald(&h->elected) == 0 && now_ms() < until) {
      mainq_pump(q);
      sleep_ms(2);
    }
  }
  assert_int_equal(ald(&h->elected), 1);
  return c;
}

/* Rule: simba_client_close() does not hang when the closing thread is the only
 * one that runs the host executor's tasks: it runs them itself, before it
 * returns, and the host's later run() of those tasks does nothing. */
static void test_close_runs_unstarted_host_tasks_on_the_closing_thread(void **state) {
  mainq_t q;
  hostrec_t h;
  simba_election_t *e = NULL;
  simba_client_t *c = open_elected_on_mainq("contract-host-close", &q, &h, &e);
  (void)state;

  /* The main thread stops pumping: the close's on_revoked can only run here. */
  watchdog(30);
  CHECK_OK(simba_client_close(c));
  alarm(0);
  assert_int_equal(ald(&h.revoked), 1);
  assert_int_equal(ald(&h.revoked_on_main), 1);

  /* The host now runs what it was given: only frees, no callback again. */
  mainq_pump(&q);
  assert_int_equal(ald(&h.elected), 1);
  assert_int_equal(ald(&h.revoked), 1);
  assert_int_equal(mainq_pending(&q), 0);
  simba_election_free(e);
  pthread_mutex_destroy(&q.mu);
}

/* Rule: with a host executor, simba_election_free() from the thread that alone
 * drains it returns too (the stop's callbacks run on that thread). */
static void test_election_free_with_a_host_executor_drained_by_the_caller(void **state) {
  mainq_t q;
  hostrec_t h;
  simba_election_t *e = NULL;
  simba_client_t *c = open_elected_on_mainq("contract-host-free", &q, &h, &e);
  (void)state;
  watchdog(30);
  simba_election_free(e);
  alarm(0);
  /* Freed: the listener got nothing more (the free suppresses on_revoked). */
  mainq_pump(&q);
  assert_int_equal(ald(&h.revoked), 0);
  watchdog(30);
  CHECK_OK(simba_client_close(c));
  alarm(0);
  mainq_pump(&q);
  assert_int_equal(ald(&h.elected), 1);
  pthread_mutex_destroy(&q.mu);
}

/* ------------------------------------------------------------------------- */
/* EXTERNAL mode: only the host thread closes. */

typedef struct {
  simba_client_t *c;
  int rc;
  char detail[256];
  int done;
} closer_t;

static void *close_from_other_thread(void *arg) {
  closer_t *k = (closer_t *)arg;
  k->rc = simba_client_close(k->c);
  snprintf(k->detail, sizeof k->detail, "%s", simba_last_error());
  ast(&k->done, 1);
  return NULL;
}

static void process_once(simba_client_t *c, int max_wait_ms) {
  poll_client(c, max_wait_ms);
  assert_int_equal(simba_client_process(c), SIMBA_OK);
}

/* Rule: simba_client_close() of an EXTERNAL-mode client from a thread other
 * than its host thread returns SIMBA_EWOULDBLOCK and closes nothing, while the
 * host thread goes on processing (TSan: no race with simba_client_process). */
static void test_external_close_from_another_thread_is_refused(void **state) {
  simba_client_t *c = open_client_kv("contract-ext-close", "loop.mode", "external");
  rec_t r;
  simba_election_t *e;
  closer_t k;
  pthread_t th;
  (void)state;
  rec_init(&r, "ext");
  e = rec_start(&r, c, "leader");
  {
    const int64_t until = now_ms() + long_wait_ms();
    while (ald(&r.elected) == 0 && now_ms() < until) process_once(c, 10);
  }
  assert_int_equal(ald(&r.elected), 1);

  memset(&k, 0, sizeof k);
  k.c = c;
  assert_int_equal(pthread_create(&th, NULL, close_from_other_thread, &k), 0);
  {
    const int64_t until = now_ms() + long_wait_ms();
    while (!ald(&k.done) && now_ms() < until) process_once(c, 5);
  }
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(k.rc, SIMBA_EWOULDBLOCK);
  assert_true(contains_ci(k.detail, "host thread"));

  /* Nothing was closed: the term is still held and valid, the loop still runs. */
  assert_int_equal(simba_client_status(c), SIMBA_SESSION_LIVE);
  assert_int_equal(ald(&r.revoked), 0);
  assert_true(simba_term_is_valid(r.current));
  process_once(c, 5);

  simba_term_release(r.current);
  r.current = NULL;
  CHECK_OK(simba_client_close(c)); /* on the host thread */
  assert_int_equal(ald(&r.revoked), 1);
  rec_seal(&r);
  simba_election_free(e);
  REC_CHECK(&r);
  rec_destroy(&r);
}

/* ------------------------------------------------------------------------- */
/* No callback after free */

typedef struct {
  int entered, left, after_free, freed;
  int term_cb, term_cb_after_free;
  int64_t hold_ms;
} slow_t;

static void slow_elected(void *ud, simba_term_t *t) {
  slow_t *s = (slow_t *)ud;
  (void)t;
  if (ald(&s->freed)) ainc(&s->after_free);
  ast(&s->entered, 1);
  sleep_ms(s->hold_ms);
  ast(&s->left, 1);
}

static void slow_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t r) {
  slow_t *s = (slow_t *)ud;
  (void)t;
  (void)r;
  if (ald(&s->freed)) ainc(&s->after_free);
}

static void slow_term_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t r) {
  slow_t *s = (slow_t *)ud;
  (void)t;
  (void)r;
  sleep_ms(s->hold_ms / 2);
  if (ald(&s->freed)) ainc(&s->term_cb_after_free);
  ainc(&s->term_cb);
}

/* Rule: simba_election_free() (outside callbacks) returns only once no callback
 * of the election runs: one running on the pool finishes first. */
static void test_election_free_waits_for_a_running_callback(void **state) {
  simba_client_t *c = open_live_client("contract-free-running");
  simba_election_t *e = NULL;
  simba_listener_t l;
  slow_t s;
  (void)state;
  memset(&s, 0, sizeof s);
  s.hold_ms = 300 * tscale();
  l.on_elected = slow_elected;
  l.on_revoked = slow_revoked;
  l.ud = &s;
  CHECK_OK(simba_election_start(&e, c, "leader", &l));
  ASSERT_EVENTUALLY(ald(&s.entered) == 1);
  simba_election_free(e);
  assert_int_equal(ald(&s.left), 1); /* the running on_elected had returned */
  ast(&s.freed, 1);                  /* the listener's ud is gone from here on */
  sleep_ms(quiet_ms());
  CHECK_OK(simba_client_close(c));
  assert_int_equal(ald(&s.after_free), 0);
}

typedef struct {
  int elected, revoked, step_done, stop_done, done_err;
} donerec_t;

static void dr_elected(void *ud, simba_term_t *t) {
  (void)t;
  ainc(&((donerec_t *)ud)->elected);
}

static void dr_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t r) {
  (void)t;
  (void)r;
  ainc(&((donerec_t *)ud)->revoked);
}

static void dr_step_done(void *ud, int err) {
  donerec_t *d = (donerec_t *)ud;
  if (err != SIMBA_OK) ast(&d->done_err, err);
  ainc(&d->step_done);
}

static void dr_stop_done(void *ud, int err) {
  donerec_t *d = (donerec_t *)ud;
  if (err != SIMBA_OK) ast(&d->done_err, err);
  ainc(&d->stop_done);
}

/* Rule: a stop's or step-down's done that was asked for before
 * simba_election_free() (outside callbacks) has run, once, when the free
 * returns; the listener gets nothing from the free on; nothing runs after it. */
static void test_election_free_runs_the_dones_asked_for_before_it(void **state) {
  simba_client_t *c = open_live_client("contract-free-dones");
  simba_election_t *e = NULL;
  simba_listener_t l;
  donerec_t d;
  (void)state;
  memset(&d, 0, sizeof d);
  l.on_elected = dr_elected;
  l.on_revoked = dr_revoked;
  l.ud = &d;
  CHECK_OK(simba_election_start(&e, c, "leader", &l));
  ASSERT_EVENTUALLY(ald(&d.elected) == 1);
  CHECK_OK(simba_election_step_down(e, 60000, dr_step_done, &d));
  CHECK_OK(simba_election_stop(e, dr_stop_done, &d));
  simba_election_free(e);
  assert_int_equal(ald(&d.step_done), 1);
  assert_int_equal(ald(&d.stop_done), 1);
  assert_int_equal(ald(&d.done_err), 0);
  /* The step-down's on_revoked ran if it came before the free, not after it. */
  assert_true(ald(&d.revoked) <= 1);
  memset(&d, 0, sizeof d); /* a late callback would count here */
  sleep_ms(quiet_ms());
  CHECK_OK(simba_client_close(c));
  assert_int_equal(ald(&d.elected) + ald(&d.revoked) + ald(&d.step_done) + ald(&d.stop_done), 0);
}

typedef struct {
  slow_t *s;
  simba_term_t *term; /* retained by on_elected */
} holder_t;

static void hold_elected(void *ud, simba_term_t *t) {
  holder_t *h = (holder_t *)ud;
  simba_term_retain(t);
  astp((void **)&h->term, t);
}

/* Rule: term-level on_revoked callbacks of an election's term have run when
 * simba_election_free() returns (it waits for the stop). */
static void test_election_free_waits_for_term_on_revoked(void **state) {
  simba_client_t *c = open_live_client("contract-free-term");
  simba_election_t *e = NULL;
  simba_listener_t l;
  slow_t s;
  holder_t h;
  simba_term_t *t;
  (void)state;
  memset(&s, 0, sizeof s);
  memset(&h, 0, sizeof h);
  s.hold_ms = 200 * tscale();
  h.s = &s;
  l.on_elected = hold_elected;
  l.on_revoked = NULL;
  l.ud = &h;
  CHECK_OK(simba_election_start(&e, c, "leader", &l));
  ASSERT_EVENTUALLY(aldp((void *const *)&h.term) != NULL);
  t = (simba_term_t *)aldp((void *const *)&h.term);
  CHECK_OK(simba_term_on_revoked(t, slow_term_revoked, &s));
  simba_election_free(e);
  assert_int_equal(ald(&s.term_cb), 1);
  assert_int_equal(simba_term_revoke_reason(t), SIMBA_REVOKE_STOPPED);
  ast(&s.freed, 1);
  simba_term_release(t);
  sleep_ms(quiet_ms());
  CHECK_OK(simba_client_close(c));
  assert_int_equal(ald(&s.term_cb), 1);
  assert_int_equal(ald(&s.term_cb_after_free), 0);
}

static void task_work_registers(void *ud, simba_term_t *t) {
  slow_t *s = (slow_t *)ud;
  if (simba_term_on_revoked(t, slow_term_revoked, s) == SIMBA_OK) ast(&s->entered, 1);
  simba_term_wait_revoked(t, -1);
}

/* Rule: simba_task_close() returns once the work returned and the on_revoked
 * callbacks of its terms ran. */
static void test_task_close_waits_for_work_and_term_callbacks(void **state) {
  simba_client_t *c = open_live_client("contract-task-close");
  simba_task_t *task = NULL;
  slow_t s;
  (void)state;
  memset(&s, 0, sizeof s);
  s.hold_ms = 200 * tscale();
  CHECK_OK(simba_run_while_leader(&task, c, "worker", task_work_registers, &s));
  ASSERT_EVENTUALLY(ald(&s.entered) == 1);
  CHECK_OK(simba_task_close(task));
  assert_int_equal(ald(&s.term_cb), 1);
  ast(&s.freed, 1);
  sleep_ms(quiet_ms());
  CHECK_OK(simba_client_close(c));
  assert_int_equal(ald(&s.term_cb_after_free), 0);
}

/* Rule: when simba_lock_release() returns (outside callbacks), every
 * on_revoked callback of the lock's term has run. */
static void test_lock_release_returns_after_the_terms_callbacks(void **state) {
  simba_client_t *c = open_live_client("contract-lock-release");
  simba_term_t *t = NULL;
  slow_t s;
  (void)state;
  memset(&s, 0, sizeof s);
  s.hold_ms = 200 * tscale();
  CHECK_OK(simba_lock_acquire(&t, c, "res", long_wait_ms()));
  CHECK_OK(simba_term_on_revoked(t, slow_term_revoked, &s));
  CHECK_OK(simba_term_on_revoked(t, slow_term_revoked, &s));
  CHECK_OK(simba_lock_release(t));
  assert_int_equal(ald(&s.term_cb), 2);
  ast(&s.freed, 1);
  sleep_ms(quiet_ms());
  CHECK_OK(simba_client_close(c));
  assert_int_equal(ald(&s.term_cb_after_free), 0);
}

/* ------------------------------------------------------------------------- */
/* Dropping the last reference of a held lock term */

/* Rule: simba_term_release() of the caller's last reference of a held lock term
 * releases the lock (with its token): another client gets it while the first
 * stays alive, and the first can lock the name again. A retained extra
 * reference keeps it held. */
static void test_dropping_the_last_lock_reference_releases_it(void **state) {
  simba_client_t *a = open_live_client("contract-lock-drop");
  simba_client_t *b = open_live_client("contract-lock-drop");
  simba_term_t *t = NULL, *u = NULL, *again = NULL;
  uint64_t first;
  int rc = SIMBA_EBUSY;
  (void)state;
  CHECK_OK(simba_lock_acquire(&t, a, "gc", long_wait_ms()));
  first = simba_term_token(t);

  simba_term_retain(t); /* two caller references */
  simba_term_release(t);
  CHECK_ERR(simba_lock_try_acquire(&u, b, "gc"), SIMBA_EBUSY, NULL);
  assert_true(simba_term_is_valid(t));

  simba_term_retain(t); /* keep the struct readable past the last caller ref */
  simba_term_release(t);
  simba_term_release(t); /* the caller's last: the lock goes */
  {
    const int64_t until = now_ms() + long_wait_ms();
    while ((rc = simba_lock_try_acquire(&u, b, "gc")) == SIMBA_EBUSY && now_ms() < until) {
      sleep_ms(10);
    }
  }
  CHECK_OK(rc);
  assert_true(simba_term_token(u) > first);
  CHECK_OK(simba_lock_release(u));

  /* Not blocked on `a` either. */
  CHECK_OK(simba_lock_acquire(&again, a, "gc", long_wait_ms()));
  assert_true(simba_term_token(again) > first);
  CHECK_OK(simba_lock_release(again));
  CHECK_OK(simba_client_close(b));
  CHECK_OK(simba_client_close(a));
}

static void note_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t r) {
  (void)t;
  ast((int *)ud, (int)r);
}

/* Rule: the implicit release revokes the term with STOPPED, and its on_revoked
 * callbacks run once. */
static void test_dropped_lock_term_is_revoked_stopped(void **state) {
  simba_client_t *a = open_live_client("contract-lock-drop-reason");
  simba_term_t *t = NULL;
  int reason = -1;
  (void)state;
  CHECK_OK(simba_lock_acquire(&t, a, "gc", long_wait_ms()));
  CHECK_OK(simba_term_on_revoked(t, note_revoked, &reason));
  simba_term_release(t);
  ASSERT_EVENTUALLY(ald(&reason) == SIMBA_REVOKE_STOPPED);
  CHECK_OK(simba_client_close(a));
}

/* ------------------------------------------------------------------------- */
/* simba_last_error */

static void *read_last_error(void *arg) {
  snprintf((char *)arg, 128, "%s", simba_last_error());
  return NULL;
}

/* Rule: a failing call sets this thread's detail; a succeeding call leaves it
 * unchanged; other threads do not see it. */
static void test_last_error_is_per_thread_and_success_leaves_it(void **state) {
  simba_config_t *cfg = NULL;
  char before[256], other[128] = "unset";
  pthread_t th;
  (void)state;
  CHECK_OK(simba_config_new(&cfg));
  CHECK_ERR(simba_config_set(cfg, "no.such.key", "1"), SIMBA_EINVAL, "no.such.key");
  snprintf(before, sizeof before, "%s", simba_last_error());
  CHECK_OK(simba_config_set(cfg, "session.lease-duration", "3s"));
  assert_string_equal(simba_last_error(), before);
  assert_int_equal(pthread_create(&th, NULL, read_last_error, other), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_string_equal(other, "");
  simba_config_free(cfg);
}

/* ------------------------------------------------------------------------- */
/* simba_client_close_async */

typedef struct {
  simba_client_t *c;
  int revoked, done, done_err, order_ok, close_rc;
  int done_thread_is_main;
  pthread_t main;
} async_t;

static void async_done(void *ud, int err) {
  async_t *a = (async_t *)ud;
  a->done_err = err;
  a->order_ok = ald(&a->revoked) == 1; /* the listener's last callback returned first */
  a->done_thread_is_main = on_main(a->main);
  ainc(&a->done);
}

static void async_elected(void *ud, simba_term_t *t) {
  async_t *a = (async_t *)ud;
  (void)t;
  /* Inside a callback: start the close without waiting. */
  ast(&a->close_rc, simba_client_close_async(a->c, async_done, a));
}

static void async_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t r) {
  async_t *a = (async_t *)ud;
  (void)t;
  (void)r;
  sleep_ms(50 * tscale());
  ainc(&a->revoked);
}

/* Rule: simba_client_close_async() from a callback returns at once; its done
 * runs once, after every other callback of the client returned. */
static void test_close_async_from_a_callback_runs_done_last(void **state) {
  async_t a;
  simba_election_t *e = NULL;
  simba_listener_t l;
  (void)state;
  memset(&a, 0, sizeof a);
  a.main = pthread_self();
  a.close_rc = 1;
  a.c = open_live_client("contract-close-async");
  l.on_elected = async_elected;
  l.on_revoked = async_revoked;
  l.ud = &a;
  CHECK_OK(simba_election_start(&e, a.c, "leader", &l));
  ASSERT_EVENTUALLY(ald(&a.done) == 1);
  assert_int_equal(ald(&a.close_rc), SIMBA_OK);
  assert_int_equal(a.done_err, SIMBA_OK);
  assert_true(a.order_ok);
  assert_false(a.done_thread_is_main);
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&a.done), 1);
  assert_int_equal(ald(&a.revoked), 1);
  simba_election_free(e); /* the handle of a closed client: frees only */
}

static void *close_async_from_other_thread(void *arg) {
  closer_t *k = (closer_t *)arg;
  k->rc = simba_client_close_async(k->c, NULL, NULL);
  snprintf(k->detail, sizeof k->detail, "%s", simba_last_error());
  return NULL;
}

static void count_done(void *ud, int err) {
  int *n = (int *)ud;
  n[0]++;
  n[1] = err;
}

/* Rule (1.5): an EXTERNAL-mode client's close_async starts the close on its
 * host thread and returns; done runs inside simba_client_process, which then
 * says SIMBA_ECLOSED; off the host thread it is refused as simba_client_close. */
static void test_close_async_arguments(void **state) {
  simba_client_t *x = open_client_kv("contract-close-async-ext", "loop.mode", "external");
  closer_t k;
  pthread_t th;
  int done[2] = {0, -100};
  (void)state;
  CHECK_ERR(simba_client_close_async(NULL, NULL, NULL), SIMBA_EINVAL, "NULL");
  memset(&k, 0, sizeof k);
  k.c = x;
  assert_int_equal(pthread_create(&th, NULL, close_async_from_other_thread, &k), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(k.rc, SIMBA_EWOULDBLOCK);
  assert_true(contains_ci(k.detail, "host thread"));
  CHECK_OK(simba_client_close_async(x, count_done, done));
  assert_int_equal(done[0], 0); /* never inside the call */
  assert_int_equal(process_until_not_ok(x, NULL), SIMBA_ECLOSED);
  assert_int_equal(done[0], 1);
  assert_int_equal(done[1], SIMBA_OK);
  CHECK_OK(simba_client_close(x)); /* frees */
  {
    async_t a;
    memset(&a, 0, sizeof a);
    a.revoked = 1; /* no election: order holds trivially */
    a.main = pthread_self();
    CHECK_OK(simba_client_close_async(open_client("contract-close-async-2"), async_done, &a));
    ASSERT_EVENTUALLY(ald(&a.done) == 1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_close_runs_unstarted_host_tasks_on_the_closing_thread),
      cmocka_unit_test(test_election_free_with_a_host_executor_drained_by_the_caller),
      cmocka_unit_test(test_external_close_from_another_thread_is_refused),
      cmocka_unit_test(test_election_free_waits_for_a_running_callback),
      cmocka_unit_test(test_election_free_waits_for_term_on_revoked),
      cmocka_unit_test(test_election_free_runs_the_dones_asked_for_before_it),
      cmocka_unit_test(test_task_close_waits_for_work_and_term_callbacks),
      cmocka_unit_test(test_lock_release_returns_after_the_terms_callbacks),
      cmocka_unit_test(test_dropping_the_last_lock_reference_releases_it),
      cmocka_unit_test(test_dropped_lock_term_is_revoked_stopped),
      cmocka_unit_test(test_last_error_is_per_thread_and_success_leaves_it),
      cmocka_unit_test(test_close_async_from_a_callback_runs_done_last),
      cmocka_unit_test(test_close_async_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Callback executors: the default pool, "direct" (the loop thread), and a
 * host's executor (simba_config_set_executor).
 */
#include "capi_test.h"

static pthread_t main_thread;

/* ------------------------------------------------------------------------- */
/* A host executor: one thread and a FIFO queue; it can be paused. */

typedef struct task {
  void (*run)(void *);
  void *arg;
  struct task *next;
} task_t;

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  task_t *head, *tail;
  int stopping, paused;
  int submitted, started, ran; /* guarded by mu; `ran` counts after run() returned */
  int submit_on_worker;        /* submit called from the worker thread itself */
  pthread_t worker;
} hostex_t;

static void *hostex_main(void *arg) {
  hostex_t *x = (hostex_t *)arg;
  pthread_mutex_lock(&x->mu);
  for (;;) {
    task_t *t;
    while (!x->stopping && (x->paused || !x->head)) pthread_cond_wait(&x->cv, &x->mu);
    if (!x->head) break; /* stopping and drained */
    if (x->paused && !x->stopping) continue;
    t = x->head;
    x->head = t->next;
    if (!x->head) x->tail = NULL;
    x->started++;
    pthread_mutex_unlock(&x->mu);
    t->run(t->arg);
    free(t);
    pthread_mutex_lock(&x->mu);
    x->ran++;
    pthread_cond_broadcast(&x->cv);
  }
  pthread_mutex_unlock(&x->mu);
  return NULL;
}

static int hostex_submit(void *ctx, void (*run)(void *), void *arg) {
  hostex_t *x = (hostex_t *)ctx;
  task_t *t = (task_t *)malloc(sizeof *t);
  if (!t) return 1;
  t->run = run;
  t->arg = arg;
  t->next = NULL;
  pthread_mutex_lock(&x->mu);
  if (pthread_equal(pthread_self(), x->worker)) x->submit_on_worker = 1;
  if (x->tail) {
    x->tail->next = t;
  } else {
    x->head = t;
  }
  x->tail = t;
  x->submitted++;
  pthread_cond_broadcast(&x->cv);
  pthread_mutex_unlock(&x->mu);
  return 0;
}

static void hostex_start(hostex_t *x) {
  memset(x, 0, sizeof *x);
  pthread_mutex_init(&x->mu, NULL);
  pthread_cond_init(&x->cv, NULL);
  assert_int_equal(pthread_create(&x->worker, NULL, hostex_main, x), 0);
}

static void hostex_pause(hostex_t *x, int paused) {
  pthread_mutex_lock(&x->mu);
  x->paused = paused;
  pthread_cond_broadcast(&x->cv);
  pthread_mutex_unlock(&x->mu);
}

static int hostex_get(hostex_t *x, const int *field) {
  int v;
  pthread_mutex_lock(&x->mu);
  v = *field;
  pthread_mutex_unlock(&x->mu);
  return v;
}

static void hostex_stop(hostex_t *x) {
  pthread_mutex_lock(&x->mu);
  x->stopping = 1;
  pthread_cond_broadcast(&x->cv);
  pthread_mutex_unlock(&x->mu);
  pthread_join(x->worker, NULL);
  pthread_cond_destroy(&x->cv);
  pthread_mutex_destroy(&x->mu);
}

/* ------------------------------------------------------------------------- */
/* What a callback saw. */

typedef struct {
  simba_client_t *c;
  simba_election_t *e; /* atomic pointer */
  pthread_t thread;
  int rc_wait_live, rc_stop_wait, rc_acquire, rc_try, rc_snapshot; /* in on_elected */
  int ran;                                                         /* atomic */
  pthread_t event_thread;
  int events; /* atomic */
} seen_t;

static void seen_elected(rec_t *r, simba_term_t *t) {
  seen_t *s = (seen_t *)r->hook_ud;
  simba_term_t *lt = NULL;
  simba_election_t *e = NULL;
  char *js;
  (void)t;
  s->thread = pthread_self();
  s->rc_wait_live = simba_client_wait_live(s->c, 1000);
  WAIT_UNTIL((e = (simba_election_t *)aldp((void **)&s->e)) != NULL, long_wait_ms());
  s->rc_stop_wait = simba_election_stop_wait(e, 1000);
  s->rc_acquire = simba_lock_acquire(&lt, s->c, "ex-lock", 1000);
  s->rc_try = simba_lock_try_acquire(&lt, s->c, "ex-lock");
  js = simba_client_snapshot_json(s->c);
  s->rc_snapshot = js && json_valid(js) ? SIMBA_OK : SIMBA_EBACKEND;
  simba_free(js);
  ainc(&s->ran);
}

static void seen_event(void *ud, simba_event_type_t type, const char *detail) {
  seen_t *s = (seen_t *)ud;
  (void)type;
  (void)detail;
  if (ainc(&s->events) == 1) s->event_thread = pthread_self();
}

/* Runs one election with `cfg` and checks where its callbacks ran. */
static void run_election(simba_config_t *cfg, const char *store, seen_t *s, rec_t *r) {
  char url[128];
  simba_client_t *c = NULL;
  simba_election_t *e;
  snprintf(url, sizeof url, "memory://%s", store);
  memset(s, 0, sizeof *s);
  /* On the config: the sink sees SESSION_OPENED, delivered while the client
   * runs (a sink set after open may miss it, and then see only SESSION_CLOSED,
   * which the close may run on the closing thread: ADR 0015). */
  CHECK_OK(simba_config_set_event_sink(cfg, seen_event, s));
  CHECK_OK(simba_client_open(&c, url, cfg));
  CHECK_OK(simba_config_set_event_sink(cfg, NULL, NULL)); /* cfg is reused */
  s->c = c;
  rec_init(r, store);
  r->on_elected_hook = seen_elected;
  r->hook_ud = s;
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  e = rec_start(r, c, "ex");
  astp((void **)&s->e, e);
  ASSERT_EVENTUALLY(ald(&s->ran) == 1);
  CHECK_OK(simba_election_stop(e, rec_on_done, r));
  ASSERT_EVENTUALLY(ald(&r->done) == 1);
  CHECK_OK(simba_client_close(c));
  simba_election_free(e);
  /* Blocking calls from a callback are refused, whatever the executor. */
  assert_int_equal(s->rc_wait_live, SIMBA_EWOULDBLOCK);
  assert_int_equal(s->rc_stop_wait, SIMBA_EWOULDBLOCK);
  assert_int_equal(s->rc_acquire, SIMBA_EWOULDBLOCK);
  assert_int_equal(s->rc_try, SIMBA_EWOULDBLOCK);
  assert_int_equal(s->rc_snapshot, SIMBA_OK);
  /* Never on the test's thread, and one election's callbacks on one thread here. */
  assert_false(pthread_equal(s->thread, main_thread));
  REC_CHECK(r);
}

static void test_default_pool(void **state) {
  simba_config_t *cfg = test_config(lease_ms());
  seen_t s;
  rec_t r;
  (void)state;
  run_election(cfg, "ex-pool", &s, &r);
  simba_config_free(cfg);
  rec_destroy(&r);
}

static void test_pool_of_one_thread(void **state) {
  simba_config_t *cfg = test_config(lease_ms());
  seen_t s;
  rec_t r;
  (void)state;
  CHECK_OK(simba_config_set(cfg, "callback.threads", "1"));
  run_election(cfg, "ex-pool-1", &s, &r);
  simba_config_free(cfg);
  /* One pool thread: every callback, events included, ran on it. */
  assert_false(r.cb_thread_changed);
  assert_true(ald(&s.events) > 0);
  assert_true(pthread_equal(s.event_thread, s.thread));
  rec_destroy(&r);
}

static void test_direct_executor(void **state) {
  simba_config_t *cfg = test_config(lease_ms());
  seen_t s;
  rec_t r;
  (void)state;
  CHECK_OK(simba_config_set(cfg, "callback.executor", "direct"));
  run_election(cfg, "ex-direct", &s, &r);
  simba_config_free(cfg);
  /* On the loop thread: every callback and every event on that one thread. */
  assert_false(r.cb_thread_changed);
  assert_true(ald(&s.events) > 0);
  assert_true(pthread_equal(s.event_thread, s.thread));
  rec_destroy(&r);
}

/* simba_client_close from a direct callback, on the loop thread itself. */
typedef struct {
  simba_client_t *c;
  int rc;       /* atomic */
  int64_t took; /* atomic */
  int returned; /* atomic */
} closer_t;

static void close_on_loop(rec_t *r, simba_term_t *t) {
  closer_t *x = (closer_t *)r->hook_ud;
  const int64_t t0 = now_ms();
  (void)t;
  ast(&x->rc, simba_client_close(x->c));
  ast64(&x->took, now_ms() - t0);
  ast(&x->returned, 1);
}

static void test_direct_close_from_callback(void **state) {
  simba_client_t *c = open_client_kv("ex-direct-close", "callback.executor", "direct");
  simba_election_t *e;
  closer_t x;
  rec_t r;
  (void)state;
  memset(&x, 0, sizeof x);
  x.c = c;
  rec_init(&r, "ex-direct-close");
  r.on_elected_hook = close_on_loop;
  r.hook_ud = &x;
  e = rec_start(&r, c, "direct-close");
  ASSERT_EVENTUALLY(ald(&x.returned) == 1);
  assert_int_equal(ald(&x.rc), SIMBA_OK);
  assert_true(ald64(&x.took) < lease_ms());
  WAIT_REVOKED(&r, 1);
  assert_int_equal(rec_reason(&r, 0), SIMBA_REVOKE_STOPPED);
  sleep_ms(quiet_ms());
  CHECK_ERR(simba_election_stop(e, NULL, NULL), SIMBA_ESTATE, NULL);
  simba_election_free(e);
  REC_CHECK(&r);
  rec_destroy(&r);
  sleep_ms(quiet_ms()); /* let the close thread free the handle (valgrind) */
}

static void test_host_executor(void **state) {
  simba_config_t *cfg = test_config(lease_ms());
  hostex_t x;
  seen_t s;
  rec_t r;
  int submitted;
  (void)state;
  hostex_start(&x);
  CHECK_OK(simba_config_set_executor(cfg, hostex_submit, &x));
  run_election(cfg, "ex-host", &s, &r);
  simba_config_free(cfg);
  /* The callbacks ran on the host's thread, through its submit (the close
   * itself runs tasks the host had not started yet on the closing thread, so
   * a slow host may see its last on_revoked run there: ADR 0015). */
  assert_true(pthread_equal(s.thread, x.worker));
  assert_true(pthread_equal(r.cb_thread, x.worker));
  assert_true(ald(&s.events) > 0);
  assert_true(pthread_equal(s.event_thread, x.worker));
  /* Every accepted task had run when the close returned; the host still gets
   * each one it was given (a task the close ran only frees itself there), and
   * none is submitted afterwards. */
  submitted = hostex_get(&x, &x.submitted);
  assert_true(submitted > 0);
  ASSERT_EVENTUALLY(hostex_get(&x, &x.started) == submitted);
  ASSERT_EVENTUALLY(hostex_get(&x, &x.ran) == submitted);
  sleep_ms(quiet_ms());
  assert_int_equal(hostex_get(&x, &x.submitted), submitted);
  assert_false(hostex_get(&x, &x.submit_on_worker));
  hostex_stop(&x);
  rec_destroy(&r);
}

/* A stop completes only when its callbacks ran: with the host executor
 * paused, stop_wait times out (and the stop goes on). */
static void test_host_executor_paused_stop_wait(void **state) {
  simba_config_t *cfg = test_config(lease_ms());
  simba_client_t *c = NULL;
  simba_election_t *e;
  hostex_t x;
  rec_t r;
  char log[REC_MAX + 1];
  (void)state;
  hostex_start(&x);
  CHECK_OK(simba_config_set_executor(cfg, hostex_submit, &x));
  CHECK_OK(simba_client_open(&c, "memory://ex-host-paused", cfg));
  simba_config_free(cfg);
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  rec_init(&r, "ex-host-paused");
  e = rec_start(&r, c, "paused");
  WAIT_ELECTED(&r, 1);
  hostex_pause(&x, 1);
  CHECK_ERR(simba_election_stop_wait(e, 200), SIMBA_ETIMEDOUT, NULL);
  assert_int_equal(ald(&r.revoked), 0);
  hostex_pause(&x, 0);
  CHECK_OK(simba_election_stop_wait(e, long_wait_ms()));
  rec_log(&r, log, sizeof log);
  assert_string_equal(log, "ER");
  assert_int_equal(rec_reason(&r, 0), SIMBA_REVOKE_STOPPED);
  CHECK_OK(simba_client_close(c));
  simba_election_free(e);
  hostex_stop(&x);
  REC_CHECK(&r);
  rec_destroy(&r);
}

/* simba_config_set_executor(NULL) and "callback.executor" text replace a host executor. */
static void test_host_executor_replaced(void **state) {
  hostex_t x;
  seen_t s;
  rec_t r;
  simba_config_t *cfg = test_config(lease_ms());
  (void)state;
  hostex_start(&x);
  CHECK_OK(simba_config_set_executor(cfg, hostex_submit, &x));
  CHECK_OK(simba_config_set_executor(cfg, NULL, NULL));
  run_election(cfg, "ex-host-null", &s, &r);
  rec_destroy(&r);
  CHECK_OK(simba_config_set_executor(cfg, hostex_submit, &x));
  CHECK_OK(simba_config_set(cfg, "callback.executor", "pool"));
  run_election(cfg, "ex-host-text", &s, &r);
  rec_destroy(&r);
  simba_config_free(cfg);
  assert_int_equal(hostex_get(&x, &x.submitted), 0);
  hostex_stop(&x);
}

/* A copied config keeps the host executor. */
static void test_host_executor_copied(void **state) {
  hostex_t x;
  seen_t s;
  rec_t r;
  simba_config_t *cfg = test_config(lease_ms()), *copy = NULL;
  (void)state;
  hostex_start(&x);
  CHECK_OK(simba_config_set_executor(cfg, hostex_submit, &x));
  CHECK_OK(simba_config_copy(&copy, cfg));
  simba_config_free(cfg);
  run_election(copy, "ex-host-copy", &s, &r);
  simba_config_free(copy);
  assert_true(pthread_equal(s.thread, x.worker));
  assert_true(hostex_get(&x, &x.submitted) > 0);
  rec_destroy(&r);
  hostex_stop(&x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_pool),
      cmocka_unit_test(test_pool_of_one_thread),
      cmocka_unit_test(test_direct_executor),
      cmocka_unit_test(test_direct_close_from_callback),
      cmocka_unit_test(test_host_executor),
      cmocka_unit_test(test_host_executor_paused_stop_wait),
      cmocka_unit_test(test_host_executor_replaced),
      cmocka_unit_test(test_host_executor_copied),
  };
  main_thread = pthread_self();
  return cmocka_run_group_tests(tests, NULL, NULL);
}

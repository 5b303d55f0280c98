/*
 * Blocking calls from callbacks return SIMBA_EWOULDBLOCK; non-blocking ones
 * work there; simba_client_close from a callback starts the close and returns.
 */
#include "capi_test.h"

enum {
  R_WAIT_LIVE,
  R_STOP_WAIT,
  R_LOCK_ACQUIRE,
  R_LOCK_TRY,
  R_LOCK_RELEASE,
  R_SNAPSHOT,
  R_STEP_DOWN,
  R_COUNT
};

typedef struct {
  simba_client_t *c;
  simba_election_t *e; /* atomic pointer: set after start returned */
  simba_term_t *lock;  /* a lock held by the test, released from the callback */
  int rc[R_COUNT];
  int detail_ok[R_COUNT];
  int ran; /* atomic */
} ctx_t;

static simba_election_t *ctx_election(ctx_t *x) {
  simba_election_t *e = NULL;
  WAIT_UNTIL((e = (simba_election_t *)aldp((void **)&x->e)) != NULL, long_wait_ms());
  return e;
}

static int detail_mentions_callback(void) {
  const char *e = simba_last_error();
  return e && (contains_ci(e, "callback") || contains_ci(e, "loop"));
}

/* Runs inside on_elected. */
static void blocking_calls(rec_t *r, simba_term_t *t) {
  ctx_t *x = (ctx_t *)r->hook_ud;
  simba_term_t *lt = (simba_term_t *)&lt;
  char *js;
  int64_t t0;
  (void)t;
  x->rc[R_WAIT_LIVE] = simba_client_wait_live(x->c, long_wait_ms());
  x->detail_ok[R_WAIT_LIVE] = detail_mentions_callback();
  x->rc[R_STOP_WAIT] = simba_election_stop_wait(ctx_election(x), long_wait_ms());
  x->detail_ok[R_STOP_WAIT] = detail_mentions_callback();
  x->rc[R_LOCK_ACQUIRE] = simba_lock_acquire(&lt, x->c, "blocking-lock", long_wait_ms());
  x->detail_ok[R_LOCK_ACQUIRE] = detail_mentions_callback() && lt == NULL;
  lt = (simba_term_t *)&lt;
  x->rc[R_LOCK_TRY] = simba_lock_try_acquire(&lt, x->c, "blocking-lock");
  x->detail_ok[R_LOCK_TRY] = detail_mentions_callback() && lt == NULL;
  /* Not blocking there: releasing a lock does not wait from a callback. */
  t0 = now_ms();
  x->rc[R_LOCK_RELEASE] = simba_lock_release(x->lock);
  x->detail_ok[R_LOCK_RELEASE] = now_ms() - t0 < lease_ms();
  js = simba_client_snapshot_json(x->c);
  x->rc[R_SNAPSHOT] = js ? SIMBA_OK : SIMBA_EBACKEND;
  x->detail_ok[R_SNAPSHOT] = js && json_valid(js);
  simba_free(js);
  /* stop is not blocking: it starts here and completes after this callback. */
  x->rc[R_STEP_DOWN] = simba_election_stop(ctx_election(x), rec_on_done, r);
  x->detail_ok[R_STEP_DOWN] = 1;
  ainc(&x->ran);
}

static void test_blocking_calls_in_on_elected(void **state) {
  simba_client_t *c = open_live_client("blk-elected");
  simba_client_t *d = open_live_client("blk-elected");
  simba_term_t *u = NULL;
  ctx_t x;
  rec_t r;
  char log[REC_MAX + 1];
  int i;
  (void)state;
  memset(&x, 0, sizeof x);
  x.c = c;
  CHECK_OK(simba_lock_acquire(&x.lock, c, "released-in-cb", long_wait_ms()));
  rec_init(&r, "blk-elected");
  r.on_elected_hook = blocking_calls;
  r.hook_ud = &x;
  astp((void **)&x.e, rec_start(&r, c, "blk-elected"));
  ASSERT_EVENTUALLY(ald(&x.ran) == 1);
  assert_int_equal(x.rc[R_WAIT_LIVE], SIMBA_EWOULDBLOCK);
  assert_int_equal(x.rc[R_STOP_WAIT], SIMBA_EWOULDBLOCK);
  assert_int_equal(x.rc[R_LOCK_ACQUIRE], SIMBA_EWOULDBLOCK);
  assert_int_equal(x.rc[R_LOCK_TRY], SIMBA_EWOULDBLOCK);
  assert_int_equal(x.rc[R_LOCK_RELEASE], SIMBA_OK);
  assert_int_equal(x.rc[R_SNAPSHOT], SIMBA_OK);
  assert_int_equal(x.rc[R_STEP_DOWN], SIMBA_OK);
  for (i = 0; i < R_COUNT; ++i) assert_true(x.detail_ok[i]);
  /* The stop started in the callback completes: STOPPED, then done. */
  ASSERT_EVENTUALLY(ald(&r.done) == 1);
  rec_log(&r, log, sizeof log);
  assert_string_equal(log, "ERD");
  assert_int_equal(rec_reason(&r, 0), SIMBA_REVOKE_STOPPED);
  /* The release from the callback went through: another client gets the lease. */
  {
    int rc = SIMBA_EBUSY;
    WAIT_UNTIL((rc = simba_lock_try_acquire(&u, d, "released-in-cb")) != SIMBA_EBUSY,
               long_wait_ms());
    CHECK_OK(rc);
  }
  CHECK_OK(simba_lock_release(u));
  CHECK_OK(simba_client_close(c));
  CHECK_OK(simba_client_close(d));
  simba_election_free(x.e);
  REC_CHECK(&r);
  rec_destroy(&r);
}

/* Blocking calls from on_revoked, a done callback, an event sink and a lock
 * completion. */
typedef struct {
  simba_client_t *c;
  int rc_revoked, rc_done, rc_event, rc_lock; /* atomics, start at 1 (not run) */
} where_t;

static void revoked_tries(rec_t *r, simba_term_t *t) {
  where_t *w = (where_t *)r->hook_ud;
  simba_term_t *lt = NULL;
  (void)t;
  ast(&w->rc_revoked, simba_lock_try_acquire(&lt, w->c, "where"));
}

static void done_tries(void *ud, int err) {
  where_t *w = (where_t *)ud;
  simba_term_t *lt = NULL;
  (void)err;
  ast(&w->rc_done, simba_lock_acquire(&lt, w->c, "where", 100));
}

static void event_tries(void *ud, simba_event_type_t type, const char *detail) {
  where_t *w = (where_t *)ud;
  (void)type;
  (void)detail;
  if (ald(&w->rc_event) == 1) ast(&w->rc_event, simba_client_wait_live(w->c, 100));
}

static void lock_tries(void *ud, int err, simba_term_t *t) {
  where_t *w = (where_t *)ud;
  simba_term_t *lt = NULL;
  ast(&w->rc_lock, simba_lock_try_acquire(&lt, w->c, "where-2"));
  if (err == SIMBA_OK) simba_lock_release(t);
}

static void test_blocking_calls_in_other_callbacks(void **state) {
  simba_client_t *c = open_client("blk-other");
  simba_election_t *e;
  where_t w;
  rec_t r;
  (void)state;
  w.c = c;
  w.rc_revoked = w.rc_done = w.rc_event = w.rc_lock = 1;
  rec_init(&r, "blk-other");
  r.on_revoked_hook = revoked_tries;
  r.hook_ud = &w;
  /* The first event is at the latest SESSION_CLOSED, during the close below. */
  CHECK_OK(simba_client_on_event(c, event_tries, &w));
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  e = rec_start(&r, c, "blk-other");
  WAIT_ELECTED(&r, 1);
  CHECK_OK(simba_election_stop(e, done_tries, &w));
  ASSERT_EVENTUALLY(ald(&w.rc_done) != 1);
  CHECK_OK(simba_lock_acquire_async(c, "blk-other-lock", long_wait_ms(), lock_tries, &w));
  ASSERT_EVENTUALLY(ald(&w.rc_lock) != 1);
  CHECK_OK(simba_client_close(c));
  simba_election_free(e);
  assert_int_equal(ald(&w.rc_revoked), SIMBA_EWOULDBLOCK);
  assert_int_equal(ald(&w.rc_done), SIMBA_EWOULDBLOCK);
  assert_int_equal(ald(&w.rc_lock), SIMBA_EWOULDBLOCK);
  /* The sink ran at least for SESSION_CLOSED (from within the close):
   * refused there whatever the session's status. */
  assert_int_equal(ald(&w.rc_event), SIMBA_EWOULDBLOCK);
  REC_CHECK(&r);
  rec_destroy(&r);
}

/* simba_client_close from a callback: starts the close, returns at once; the
 * terms are revoked with STOPPED after the callback returns; calls that need
 * the client afterwards answer ECLOSED. */
typedef struct {
  simba_client_t *c;
  int rc_close;                     /* atomic */
  int64_t close_took;               /* atomic */
  int rc_start, rc_async, rc_event; /* atomics */
  int returned;                     /* atomic: the callback returned */
  int revoked_before_return;        /* atomic */
} closer_t;

static int late_lock_calls;
static void late_lock(void *ud, int err, simba_term_t *t) {
  (void)ud;
  (void)err;
  ainc(&late_lock_calls);
  if (t) simba_lock_release(t);
}

static void closing_elected(rec_t *r, simba_term_t *t) {
  closer_t *x = (closer_t *)r->hook_ud;
  simba_election_t *e2 = NULL;
  simba_listener_t l = {NULL, NULL, NULL};
  const int64_t t0 = now_ms();
  (void)t;
  ast(&x->rc_close, simba_client_close(x->c));
  ast64(&x->close_took, now_ms() - t0);
  /* The handle stays usable until this callback returned. */
  ast(&x->rc_start, simba_election_start(&e2, x->c, "after-close", &l));
  ast(&x->rc_async, simba_lock_acquire_async(x->c, "after-close-lock", 100, late_lock, NULL));
  ast(&x->rc_event, simba_client_on_event(x->c, NULL, NULL));
  sleep_ms(quiet_ms()); /* give a wrong implementation time to run on_revoked now */
  if (ald(&r->revoked) != 0) ainc(&x->revoked_before_return);
  ast(&x->returned, 1);
}

static int closed_events;
static void count_closed(void *ud, simba_event_type_t type, const char *detail) {
  (void)ud;
  (void)detail;
  if (type == SIMBA_EVENT_SESSION_CLOSED) ainc(&closed_events);
}

static void test_close_from_callback(void **state) {
  simba_client_t *c = open_live_client("blk-close");
  simba_client_t *d = open_live_client("blk-close");
  simba_election_t *e, *e2, *ed;
  closer_t x;
  rec_t r, r2, rd;
  int calls;
  (void)state;
  memset(&x, 0, sizeof x);
  x.c = c;
  rec_init(&r, "blk-close");
  rec_init(&r2, "blk-close-2");
  rec_init(&rd, "blk-close-d");
  CHECK_OK(simba_client_on_event(c, count_closed, NULL));
  /* A second election of c, elected before the closing one starts. */
  e2 = rec_start(&r2, c, "close-2");
  WAIT_ELECTED(&r2, 1);
  ed = rec_start(&rd, d, "close-2"); /* d waits for it */
  r.on_elected_hook = closing_elected;
  r.hook_ud = &x;
  e = rec_start(&r, c, "close-1");
  ASSERT_EVENTUALLY(ald(&x.returned) == 1);
  assert_int_equal(ald(&x.rc_close), SIMBA_OK);
  assert_true(ald64(&x.close_took) < lease_ms()); /* "returns at once" */
  assert_int_equal(ald(&x.rc_start), SIMBA_ECLOSED);
  assert_int_equal(ald(&x.rc_event), SIMBA_ECLOSED);
  assert_int_equal(ald(&x.rc_async), SIMBA_ECLOSED);
  assert_int_equal(ald(&x.revoked_before_return), 0);
  /* The close completes: both terms revoked with STOPPED, SESSION_CLOSED. */
  WAIT_REVOKED(&r, 1);
  WAIT_REVOKED(&r2, 1);
  assert_int_equal(rec_reason(&r, 0), SIMBA_REVOKE_STOPPED);
  assert_int_equal(rec_reason(&r2, 0), SIMBA_REVOKE_STOPPED);
  ASSERT_EVENTUALLY(ald(&closed_events) == 1);
  /* d takes over c's other lease. */
  WAIT_ELECTED(&rd, 1);
  assert_true(rec_token(&rd, 0) > rec_token(&r2, 0));
  /* Nothing more from c. (c's handle is freed by now or soon: not touched.) */
  calls = ald(&r.calls) + ald(&r2.calls);
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&r.calls) + ald(&r2.calls), calls);
  assert_int_equal(ald(&closed_events), 1);
  assert_int_equal(ald(&late_lock_calls), 0);
  /* The elections stay handles, stopped. */
  CHECK_ERR(simba_election_stop(e, NULL, NULL), SIMBA_ESTATE, NULL);
  CHECK_OK(simba_election_stop_wait(e2, long_wait_ms()));
  simba_election_free(e);
  simba_election_free(e2);
  CHECK_OK(simba_election_stop_wait(ed, long_wait_ms()));
  simba_election_free(ed);
  CHECK_OK(simba_client_close(d));
  REC_CHECK(&r);
  REC_CHECK(&r2);
  REC_CHECK(&rd);
  rec_destroy(&r);
  rec_destroy(&r2);
  rec_destroy(&rd);
  /* Let the close thread free c's handle before the process ends (valgrind). */
  sleep_ms(quiet_ms());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_blocking_calls_in_on_elected),
      cmocka_unit_test(test_blocking_calls_in_other_callbacks),
      cmocka_unit_test(test_close_from_callback),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

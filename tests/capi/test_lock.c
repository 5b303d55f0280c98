/*
 * Locks: acquire / try_acquire / acquire_async / release, queueing within a
 * client, conflicts with elections, release waiting for the backend, tokens.
 */
#include "capi_test.h"

/* An acquire_async completion that records its result. */
typedef struct {
  int calls; /* atomic */
  int err;   /* atomic */
  simba_term_t *term;
  int sealed, after_seal; /* atomics */
  int inside_call;        /* atomic: set around the acquire_async call */
  pthread_t caller;
  int ran_inside_call; /* atomic */
} async_t;

static void async_done(void *ud, int err, simba_term_t *t) {
  async_t *a = (async_t *)ud;
  if (ald(&a->sealed)) ainc(&a->after_seal);
  if (ald(&a->inside_call) && pthread_equal(a->caller, pthread_self())) ainc(&a->ran_inside_call);
  astp((void **)&a->term, t);
  ast(&a->err, err);
  ainc(&a->calls);
}

static int acquire_async(simba_client_t *c, const char *name, int64_t timeout, async_t *a) {
  int rc;
  a->caller = pthread_self();
  ast(&a->inside_call, 1);
  rc = simba_lock_acquire_async(c, name, timeout, async_done, a);
  ast(&a->inside_call, 0);
  return rc;
}

static void test_lock_arguments(void **state) {
  simba_client_t *c = open_client("lock-args");
  simba_term_t *t = NULL;
  async_t a;
  (void)state;
  memset(&a, 0, sizeof a);
  CHECK_ERR(simba_lock_acquire(NULL, c, "x", 100), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_lock_acquire(&t, NULL, "x", 100), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_lock_acquire(&t, c, NULL, 100), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_lock_try_acquire(NULL, c, "x"), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_lock_try_acquire(&t, NULL, "x"), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_lock_try_acquire(&t, c, NULL), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_lock_acquire_async(NULL, "x", 100, async_done, &a), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_lock_acquire_async(c, NULL, 100, async_done, &a), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_lock_acquire_async(c, "x", 100, NULL, &a), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_lock_release(NULL), SIMBA_EINVAL, "NULL");
  CHECK_OK(simba_client_close(c));
  assert_int_equal(a.calls, 0);
}

static void test_acquire_release(void **state) {
  simba_client_t *c = open_live_client("lock-basic");
  simba_term_t *t = NULL;
  uint64_t token;
  (void)state;
  CHECK_OK(simba_lock_acquire(&t, c, "basic", long_wait_ms()));
  assert_non_null(t);
  assert_string_equal(simba_term_name(t), "basic");
  token = simba_term_token(t);
  assert_true(token > 0);
  assert_int_equal(simba_term_is_valid(t), 1);
  assert_true(simba_term_remaining_ms(t) > 0);
  assert_int_equal(simba_term_revoke_reason(t), SIMBA_REVOKE_NONE);
  CHECK_OK(simba_term_ensure_valid(t, 1));
  CHECK_OK(simba_lock_release(t));
  /* Again, without bound: a new term with a larger token. */
  CHECK_OK(simba_lock_acquire(&t, c, "basic", -1));
  assert_true(simba_term_token(t) > token);
  CHECK_OK(simba_lock_release(t));
  /* A fresh client, not live yet: try_acquire waits for the session. */
  {
    simba_client_t *d = open_client("lock-basic");
    CHECK_OK(simba_lock_try_acquire(&t, d, "basic"));
    CHECK_OK(simba_lock_release(t));
    CHECK_OK(simba_client_close(d));
  }
  CHECK_OK(simba_client_close(c));
}

/* try_acquire answers EBUSY while someone else holds the lease; once
 * simba_lock_release returned, the lease is free at once (no retry needed). */
static void test_try_acquire_busy_and_release_frees(void **state) {
  simba_client_t *a = open_live_client("lock-busy");
  simba_client_t *b = open_live_client("lock-busy");
  simba_client_t *cl[2];
  simba_term_t *t = NULL, *u = NULL;
  uint64_t last = 0;
  int i;
  (void)state;
  cl[0] = a;
  cl[1] = b;
  CHECK_OK(simba_lock_acquire(&t, a, "busy", long_wait_ms()));
  CHECK_ERR(simba_lock_try_acquire(&u, b, "busy"), SIMBA_EBUSY, NULL);
  assert_null(u);
  /* Held by another lock of the same client: busy as well. */
  CHECK_ERR(simba_lock_try_acquire(&u, a, "busy"), SIMBA_EBUSY, NULL);
  /* Still ours. */
  assert_int_equal(simba_term_is_valid(t), 1);
  last = simba_term_token(t);
  CHECK_OK(simba_lock_release(t));

  /* Ping-pong: each release frees the lease before it returns; tokens increase. */
  for (i = 0; i < 10; ++i) {
    simba_client_t *who = cl[i % 2];
    CHECK_OK(simba_lock_try_acquire(&t, who, "busy"));
    assert_true(simba_term_token(t) > last);
    last = simba_term_token(t);
    CHECK_ERR(simba_lock_try_acquire(&u, cl[(i + 1) % 2], "busy"), SIMBA_EBUSY, NULL);
    CHECK_OK(simba_lock_release(t));
  }
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
}

/* Two locks of one client on one name queue: first come, first served. */
static void test_same_client_queues(void **state) {
  simba_client_t *c = open_live_client("lock-queue");
  simba_term_t *t1 = NULL, *t2 = NULL;
  async_t a;
  int64_t t0;
  (void)state;
  memset(&a, 0, sizeof a);
  CHECK_OK(simba_lock_acquire(&t1, c, "queue", long_wait_ms()));
  /* A second acquire waits behind the first, until its timeout. */
  t0 = now_ms();
  CHECK_ERR(simba_lock_acquire(&t2, c, "queue", 200), SIMBA_ETIMEDOUT, NULL);
  assert_true(now_ms() - t0 >= 190);
  assert_null(t2);
  assert_int_equal(simba_term_is_valid(t1), 1);
  /* Queued asynchronously; granted once the first is released. */
  CHECK_OK(acquire_async(c, "queue", long_wait_ms(), &a));
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&a.calls), 0);
  CHECK_OK(simba_lock_release(t1));
  ASSERT_EVENTUALLY(ald(&a.calls) == 1);
  assert_int_equal(ald(&a.err), SIMBA_OK);
  t2 = (simba_term_t *)aldp((void **)&a.term);
  assert_non_null(t2);
  assert_int_equal(simba_term_is_valid(t2), 1);
  assert_string_equal(simba_term_name(t2), "queue");
  assert_int_equal(ald(&a.ran_inside_call), 0);
  CHECK_OK(simba_lock_release(t2));
  CHECK_OK(simba_client_close(c));
}

/* A blocking acquire from another thread is granted when the holder releases. */
typedef struct {
  simba_client_t *c;
  int rc;
  simba_term_t *t;
  int done; /* atomic */
} waiter_t;

static void *acquire_thread(void *arg) {
  waiter_t *w = (waiter_t *)arg;
  w->rc = simba_lock_acquire(&w->t, w->c, "handover", long_wait_ms());
  ast(&w->done, 1);
  return NULL;
}

static void test_blocking_acquire_waits_for_release(void **state) {
  simba_client_t *a = open_live_client("lock-handover");
  simba_client_t *b = open_live_client("lock-handover");
  simba_term_t *t = NULL;
  pthread_t th;
  waiter_t w;
  (void)state;
  memset(&w, 0, sizeof w);
  w.c = b;
  CHECK_OK(simba_lock_acquire(&t, a, "handover", long_wait_ms()));
  assert_int_equal(pthread_create(&th, NULL, acquire_thread, &w), 0);
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&w.done), 0);
  CHECK_OK(simba_lock_release(t));
  pthread_join(th, NULL);
  CHECK_OK(w.rc);
  assert_non_null(w.t);
  assert_int_equal(simba_term_is_valid(w.t), 1);
  CHECK_OK(simba_lock_release(w.t));
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
}

static void test_lock_vs_election(void **state) {
  simba_client_t *c = open_live_client("lock-election");
  simba_election_t *e, *e2 = NULL;
  simba_term_t *t = NULL, *et;
  simba_listener_t l;
  async_t a;
  rec_t r, r2;
  (void)state;
  memset(&a, 0, sizeof a);
  rec_init(&r, "lock-election");
  rec_init(&r2, "lock-election-2");
  e = rec_start(&r, c, "shared");
  /* A lock on a name an election of this client uses: ESTATE. */
  CHECK_ERR(simba_lock_acquire(&t, c, "shared", 100), SIMBA_ESTATE, "shared");
  CHECK_ERR(simba_lock_try_acquire(&t, c, "shared"), SIMBA_ESTATE, "shared");
  CHECK_ERR(simba_lock_acquire_async(c, "shared", 100, async_done, &a), SIMBA_ESTATE, "shared");
  /* An election on a name a lock of this client holds: ESTATE. */
  CHECK_OK(simba_lock_acquire(&t, c, "locked", long_wait_ms()));
  l = rec_listener(&r2);
  CHECK_ERR(simba_election_start(&e2, c, "locked", &l), SIMBA_ESTATE, "locked");
  /* simba_lock_release on an election's term: EINVAL, and the term lives on. */
  WAIT_ELECTED(&r, 1);
  et = rec_take_term(&r);
  CHECK_ERR(simba_lock_release(et), SIMBA_EINVAL, "lock");
  assert_int_equal(simba_term_is_valid(et), 1);
  assert_int_equal(simba_term_revoke_reason(et), SIMBA_REVOKE_NONE);
  simba_term_release(et);
  CHECK_OK(simba_lock_release(t));
  CHECK_OK(simba_election_stop_wait(e, long_wait_ms()));
  CHECK_OK(simba_client_close(c));
  simba_election_free(e);
  assert_int_equal(ald(&a.calls), 0);
  assert_int_equal(ald(&r2.calls), 0);
  REC_CHECK(&r);
  rec_destroy(&r);
  rec_destroy(&r2);
}

static void test_acquire_async(void **state) {
  simba_client_t *a = open_live_client("lock-async");
  simba_client_t *b = open_live_client("lock-async");
  simba_term_t *t = NULL, *held = NULL;
  async_t ok, late, canceled;
  int64_t t0;
  (void)state;
  memset(&ok, 0, sizeof ok);
  memset(&late, 0, sizeof late);
  memset(&canceled, 0, sizeof canceled);

  /* Free: OK with the term, owned by the callee. */
  CHECK_OK(acquire_async(a, "async", long_wait_ms(), &ok));
  ASSERT_EVENTUALLY(ald(&ok.calls) == 1);
  assert_int_equal(ald(&ok.err), SIMBA_OK);
  t = (simba_term_t *)aldp((void **)&ok.term);
  assert_non_null(t);
  assert_int_equal(simba_term_is_valid(t), 1);
  assert_true(simba_term_token(t) > 0);
  assert_int_equal(ald(&ok.ran_inside_call), 0);

  /* Held: ETIMEDOUT after the timeout, without a term. */
  t0 = now_ms();
  CHECK_OK(acquire_async(b, "async", 200, &late));
  ASSERT_EVENTUALLY(ald(&late.calls) == 1);
  assert_int_equal(ald(&late.err), SIMBA_ETIMEDOUT);
  assert_null(aldp((void **)&late.term));
  assert_true(now_ms() - t0 >= 190);

  /* Held, waiting without bound: the client's close cancels it, and the
   * callback runs before close returns, never after. */
  CHECK_OK(acquire_async(b, "async", -1, &canceled));
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&canceled.calls), 0);
  CHECK_OK(simba_client_close(b));
  ast(&canceled.sealed, 1);
  assert_int_equal(ald(&canceled.calls), 1);
  assert_int_equal(ald(&canceled.err), SIMBA_ECANCELED);
  assert_null(aldp((void **)&canceled.term));

  CHECK_OK(simba_lock_release(t));
  /* Free again: a blocking acquire of a takes it at once. */
  CHECK_OK(simba_lock_try_acquire(&held, a, "async"));
  CHECK_OK(simba_lock_release(held));
  CHECK_OK(simba_client_close(a));
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&ok.calls), 1);
  assert_int_equal(ald(&late.calls), 1);
  assert_int_equal(ald(&canceled.calls), 1);
  assert_int_equal(ald(&canceled.after_seal), 0);
}

/* Releasing a lock that the client's close already revoked drops the reference. */
static void test_release_after_close(void **state) {
  simba_client_t *c = open_live_client("lock-after-close");
  simba_client_t *d;
  simba_term_t *t = NULL, *u = NULL;
  uint64_t token;
  (void)state;
  CHECK_OK(simba_lock_acquire(&t, c, "after-close", long_wait_ms()));
  token = simba_term_token(t);
  CHECK_OK(simba_client_close(c));
  assert_int_equal(simba_term_is_valid(t), 0);
  assert_int_equal(simba_term_revoke_reason(t), SIMBA_REVOKE_STOPPED);
  CHECK_OK(simba_term_wait_revoked(t, 0));
  /* The close freed the lease on the backend. */
  d = open_live_client("lock-after-close");
  CHECK_OK(simba_lock_try_acquire(&u, d, "after-close"));
  assert_true(simba_term_token(u) > token);
  CHECK_OK(simba_lock_release(t));
  CHECK_OK(simba_lock_release(u));
  CHECK_OK(simba_client_close(d));
}

/* Locks and elections of different clients exclude each other on one name. */
static void test_lock_vs_other_clients_election(void **state) {
  simba_client_t *a = open_live_client("lock-mixed");
  simba_client_t *b = open_live_client("lock-mixed");
  simba_election_t *e;
  simba_term_t *t = NULL;
  rec_t r;
  (void)state;
  rec_init(&r, "lock-mixed");
  e = rec_start(&r, a, "mixed");
  WAIT_ELECTED(&r, 1);
  CHECK_ERR(simba_lock_try_acquire(&t, b, "mixed"), SIMBA_EBUSY, NULL);
  CHECK_OK(simba_election_stop_wait(e, long_wait_ms()));
  CHECK_OK(simba_lock_try_acquire(&t, b, "mixed"));
  assert_true(simba_term_token(t) > rec_token(&r, 0));
  CHECK_OK(simba_lock_release(t));
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
  simba_election_free(e);
  REC_CHECK(&r);
  rec_destroy(&r);
}

/* Many lock terms over time: tokens strictly increase per name. */
static void test_tokens_increase(void **state) {
  simba_client_t *c = open_live_client("lock-tokens");
  simba_term_t *t = NULL;
  uint64_t last = 0;
  int i;
  (void)state;
  for (i = 0; i < 25; ++i) {
    CHECK_OK(simba_lock_acquire(&t, c, "tokens", long_wait_ms()));
    assert_true(simba_term_token(t) > last);
    last = simba_term_token(t);
    CHECK_OK(simba_lock_release(t));
  }
  CHECK_OK(simba_client_close(c));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lock_arguments),
      cmocka_unit_test(test_acquire_release),
      cmocka_unit_test(test_try_acquire_busy_and_release_frees),
      cmocka_unit_test(test_same_client_queues),
      cmocka_unit_test(test_blocking_acquire_waits_for_release),
      cmocka_unit_test(test_lock_vs_election),
      cmocka_unit_test(test_acquire_async),
      cmocka_unit_test(test_release_after_close),
      cmocka_unit_test(test_lock_vs_other_clients_election),
      cmocka_unit_test(test_tokens_increase),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

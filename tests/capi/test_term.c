/*
 * Terms: accessors, ensure_valid, revoke_reason, on_revoked (before and after
 * the revocation), wait_revoked, revoke_fd, retain/release, and NULL.
 */
#include <poll.h>

#include "capi_test.h"

/* 1 if fd is readable now. */
static int readable(int fd) {
  struct pollfd p;
  p.fd = fd;
  p.events = POLLIN;
  p.revents = 0;
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* An extra on_revoked callback: records its reason, whether it ran inside the
 * call that registered it, and the thread it ran on. */
typedef struct {
  int calls;               /* atomic */
  int reason;              /* atomic */
  int inside_registration; /* atomic */
  int registering;         /* atomic: set around simba_term_on_revoked */
  pthread_t registrar;
  simba_term_t *term_seen;
  rec_t *rec; /* the election's listener, to check serial delivery */
} extra_t;

static void extra_on_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t reason) {
  extra_t *x = (extra_t *)ud;
  if (x->rec && axchg(&x->rec->inside, 1) != 0) ainc(&x->rec->overlap);
  if (ald(&x->registering) && pthread_equal(pthread_self(), x->registrar)) {
    ainc(&x->inside_registration);
  }
  astp((void **)&x->term_seen, t);
  ast(&x->reason, (int)reason);
  ainc(&x->calls);
  if (x->rec) ast(&x->rec->inside, 0);
}

static int register_extra(simba_term_t *t, extra_t *x) {
  int rc;
  x->registrar = pthread_self();
  ast(&x->registering, 1);
  rc = simba_term_on_revoked(t, extra_on_revoked, x);
  ast(&x->registering, 0);
  return rc;
}

static void test_null_term(void **state) {
  (void)state;
  assert_null(simba_term_name(NULL));
  assert_int_equal(simba_term_token(NULL), 0);
  assert_int_equal(simba_term_is_valid(NULL), 0);
  assert_int_equal(simba_term_remaining_ms(NULL), 0);
  CHECK_ERR(simba_term_ensure_valid(NULL, 0), SIMBA_EINVAL, "NULL");
  assert_int_equal(simba_term_revoke_reason(NULL), SIMBA_REVOKE_NONE);
  CHECK_ERR(simba_term_on_revoked(NULL, extra_on_revoked, NULL), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_term_wait_revoked(NULL, 0), SIMBA_EINVAL, "NULL");
  assert_int_equal(simba_term_revoke_fd(NULL), -1);
  check_last_error_("NULL", __FILE__, __LINE__);
  simba_term_retain(NULL);
  simba_term_release(NULL);
  CHECK_ERR(simba_lock_release(NULL), SIMBA_EINVAL, "NULL");
}

/* Everything about one election term, from elected to stopped. */
static void test_election_term_lifecycle(void **state) {
  simba_client_t *c = open_live_client("term-life");
  simba_election_t *e;
  simba_term_t *t;
  extra_t before, after;
  rec_t r;
  int fd, fd2;
  int64_t left;
  uint64_t token;
  const int64_t lease = lease_ms();
  (void)state;
  memset(&before, 0, sizeof before);
  memset(&after, 0, sizeof after);
  rec_init(&r, "term-life");
  before.rec = &r;
  after.rec = &r;
  e = rec_start(&r, c, "life");
  WAIT_ELECTED(&r, 1);
  /* Retained inside on_elected: usable after the callback returned. */
  t = rec_take_term(&r);
  assert_non_null(t);

  /* While valid. */
  assert_string_equal(simba_term_name(t), "life");
  token = simba_term_token(t);
  assert_true(token > 0);
  assert_int_equal(token, rec_token(&r, 0));
  assert_int_equal(simba_term_is_valid(t), 1);
  left = simba_term_remaining_ms(t);
  assert_true(left > 0);
  assert_true(left <= lease);
  CHECK_OK(simba_term_ensure_valid(t, 0));
  CHECK_OK(simba_term_ensure_valid(t, 1));
  CHECK_ERR(simba_term_ensure_valid(t, lease + 1), SIMBA_EEXPIRED, "life");
  CHECK_ERR(simba_term_ensure_valid(t, 10 * lease), SIMBA_EEXPIRED, NULL);
  CHECK_ERR(simba_term_ensure_valid(t, -1), SIMBA_EINVAL, "negative");
  assert_int_equal(simba_term_revoke_reason(t), SIMBA_REVOKE_NONE);
  CHECK_ERR(simba_term_wait_revoked(t, 0), SIMBA_ETIMEDOUT, NULL);
  CHECK_ERR(simba_term_wait_revoked(t, 50), SIMBA_ETIMEDOUT, NULL);
  fd = simba_term_revoke_fd(t);
  assert_true(fd >= 0);
  fd2 = simba_term_revoke_fd(t);
  assert_int_equal(fd2, fd);
  assert_false(readable(fd));
  /* Keep-alives keep it valid for longer than one lease. */
  sleep_ms(2 * lease);
  assert_int_equal(simba_term_is_valid(t), 1);
  assert_int_equal(simba_term_token(t), token);
  assert_false(readable(fd));
  CHECK_OK(simba_term_ensure_valid(t, 1));
  CHECK_ERR(simba_term_on_revoked(t, NULL, NULL), SIMBA_EINVAL, "NULL");
  CHECK_OK(register_extra(t, &before));

  /* Stop. */
  CHECK_OK(simba_election_stop(e, rec_on_done, &r));
  CHECK_OK(simba_term_wait_revoked(t, long_wait_ms()));
  assert_int_equal(simba_term_is_valid(t), 0);
  ASSERT_EVENTUALLY(ald(&r.done) == 1);
  assert_int_equal(simba_term_revoke_reason(t), SIMBA_REVOKE_STOPPED);
  assert_int_equal(simba_term_remaining_ms(t), 0);
  CHECK_ERR(simba_term_ensure_valid(t, 0), SIMBA_EEXPIRED, NULL);
  CHECK_OK(simba_term_wait_revoked(t, 0));
  CHECK_OK(simba_term_wait_revoked(t, -1));
  assert_true(readable(fd));
  assert_true(readable(fd)); /* stays readable */
  assert_int_equal(simba_term_revoke_fd(t), fd);
  /* Name and token outlive the term. */
  assert_string_equal(simba_term_name(t), "life");
  assert_int_equal(simba_term_token(t), token);

  /* The on_revoked registered before ran once, with STOPPED, before done. */
  assert_int_equal(ald(&before.calls), 1);
  assert_int_equal(ald(&before.reason), SIMBA_REVOKE_STOPPED);
  assert_ptr_equal(aldp((void **)&before.term_seen), t);
  assert_int_equal(ald(&before.inside_registration), 0);

  /* Registered after the revocation: still runs, but not inside the call. */
  CHECK_OK(register_extra(t, &after));
  ASSERT_EVENTUALLY(ald(&after.calls) == 1);
  assert_int_equal(ald(&after.reason), SIMBA_REVOKE_STOPPED);
  assert_int_equal(ald(&after.inside_registration), 0);
  assert_ptr_equal(aldp((void **)&after.term_seen), t);

  sleep_ms(quiet_ms());
  assert_int_equal(ald(&before.calls), 1);
  assert_int_equal(ald(&after.calls), 1);
  simba_term_release(t);
  CHECK_OK(simba_client_close(c));
  simba_election_free(e);
  REC_CHECK(&r);
  rec_destroy(&r);
}

/* on_revoked called from inside on_elected (on the callback executor): runs later. */
static extra_t in_cb_extra;
static void register_in_callback(rec_t *r, simba_term_t *t) {
  (void)r;
  ast(&in_cb_extra.registering, 1);
  in_cb_extra.registrar = pthread_self();
  if (simba_term_on_revoked(t, extra_on_revoked, &in_cb_extra) != SIMBA_OK) {
    ainc(&in_cb_extra.inside_registration);
  }
  ast(&in_cb_extra.registering, 0);
}

static void test_on_revoked_from_callback_and_order(void **state) {
  simba_client_t *c = open_live_client("term-cb");
  simba_election_t *e;
  rec_t r;
  (void)state;
  memset(&in_cb_extra, 0, sizeof in_cb_extra);
  rec_init(&r, "term-cb");
  r.on_elected_hook = register_in_callback;
  e = rec_start(&r, c, "term-cb");
  WAIT_ELECTED(&r, 1);
  CHECK_OK(simba_election_stop_wait(e, long_wait_ms()));
  /* The term's own on_revoked ran, once, with STOPPED, by the time the stop completed. */
  assert_int_equal(ald(&in_cb_extra.calls), 1);
  assert_int_equal(ald(&in_cb_extra.reason), SIMBA_REVOKE_STOPPED);
  assert_int_equal(ald(&in_cb_extra.inside_registration), 0);
  CHECK_OK(simba_client_close(c));
  simba_election_free(e);
  REC_CHECK(&r);
  rec_destroy(&r);
}

/* Several on_revoked on one term, registered before: each runs exactly once. */
static void test_several_on_revoked(void **state) {
  simba_client_t *c = open_live_client("term-several");
  simba_term_t *t = NULL;
  extra_t x[5];
  int i;
  (void)state;
  memset(x, 0, sizeof x);
  CHECK_OK(simba_lock_acquire(&t, c, "several", long_wait_ms()));
  for (i = 0; i < 5; ++i) CHECK_OK(register_extra(t, &x[i]));
  simba_term_retain(t); /* keep reading it after the release */
  CHECK_OK(simba_lock_release(t));
  assert_int_equal(simba_term_revoke_reason(t), SIMBA_REVOKE_STOPPED);
  for (i = 0; i < 5; ++i) {
    ASSERT_EVENTUALLY(ald(&x[i].calls) == 1);
    assert_int_equal(ald(&x[i].reason), SIMBA_REVOKE_STOPPED);
    assert_int_equal(ald(&x[i].inside_registration), 0);
  }
  sleep_ms(quiet_ms());
  for (i = 0; i < 5; ++i) assert_int_equal(ald(&x[i].calls), 1);
  simba_term_release(t);
  CHECK_OK(simba_client_close(c));
}

/* A term revoked by the client's close: readable after close, its fd readable,
 * and a wait returns at once. A term that any thread saw invalid stays invalid,
 * even when the node wins the name again. */
static void test_term_after_close_and_reelection(void **state) {
  simba_client_t *a = open_live_client("term-close");
  simba_client_t *b;
  simba_election_t *ea, *eb;
  simba_term_t *t, *t2;
  extra_t x;
  rec_t ra, rb;
  int fd;
  (void)state;
  memset(&x, 0, sizeof x);
  rec_init(&ra, "term-close-a");
  rec_init(&rb, "term-close-b");
  ea = rec_start(&ra, a, "close");
  WAIT_ELECTED(&ra, 1);
  t = rec_take_term(&ra);
  fd = simba_term_revoke_fd(t);
  assert_true(fd >= 0);
  CHECK_OK(simba_client_close(a));
  assert_int_equal(simba_term_is_valid(t), 0);
  assert_int_equal(simba_term_revoke_reason(t), SIMBA_REVOKE_STOPPED);
  assert_int_equal(simba_term_remaining_ms(t), 0);
  CHECK_OK(simba_term_wait_revoked(t, 0));
  assert_true(readable(fd));
  /* The client is gone: a late on_revoked cannot run any more (it would run
   * after the close completed), and the call says so. */
  {
    const int rc = register_extra(t, &x);
    assert_true(rc == SIMBA_ECLOSED);
    check_last_error_(NULL, __FILE__, __LINE__);
  }
  assert_int_equal(ald(&x.calls), 0);
  simba_election_free(ea);

  /* A new client wins the same name: the old term stays invalid. */
  b = open_live_client("term-close");
  eb = rec_start(&rb, b, "close");
  WAIT_ELECTED(&rb, 1);
  t2 = rec_take_term(&rb);
  assert_true(simba_term_token(t2) > simba_term_token(t));
  assert_int_equal(simba_term_is_valid(t), 0);
  assert_int_equal(simba_term_is_valid(t2), 1);
  simba_term_release(t2);
  simba_term_release(t);
  CHECK_OK(simba_election_stop_wait(eb, long_wait_ms()));
  CHECK_OK(simba_client_close(b));
  simba_election_free(eb);
  REC_CHECK(&ra);
  REC_CHECK(&rb);
  rec_destroy(&ra);
  rec_destroy(&rb);
  assert_int_equal(ald(&x.calls), 0);
}

/* The term accessors from many threads at once while the term ends: once any
 * thread saw it invalid, no thread sees it valid again. */
typedef struct {
  simba_term_t *t;
  int *seen_invalid; /* atomic, shared */
  int violations;
  int stop; /* atomic */
} reader_t;

static void *term_reader(void *arg) {
  reader_t *rd = (reader_t *)arg;
  while (!ald(&rd->stop)) {
    const int seen = ald(rd->seen_invalid);
    const int valid = simba_term_is_valid(rd->t);
    if (!valid) ast(rd->seen_invalid, 1);
    if (seen && valid) ++rd->violations;
    if (!valid && simba_term_remaining_ms(rd->t) != 0) ++rd->violations;
    if (!valid && simba_term_ensure_valid(rd->t, 0) != SIMBA_EEXPIRED) ++rd->violations;
  }
  return NULL;
}

static void test_term_readers(void **state) {
  simba_client_t *c = open_live_client("term-readers");
  simba_term_t *t = NULL;
  pthread_t th[4];
  reader_t rd[4];
  int i, seen_invalid = 0;
  (void)state;
  CHECK_OK(simba_lock_acquire(&t, c, "readers", long_wait_ms()));
  simba_term_retain(t);
  for (i = 0; i < 4; ++i) {
    rd[i].t = t;
    rd[i].seen_invalid = &seen_invalid;
    rd[i].violations = 0;
    rd[i].stop = 0;
    assert_int_equal(pthread_create(&th[i], NULL, term_reader, &rd[i]), 0);
  }
  sleep_ms(20);
  CHECK_OK(simba_lock_release(t));
  sleep_ms(20);
  for (i = 0; i < 4; ++i) {
    ast(&rd[i].stop, 1);
    pthread_join(th[i], NULL);
    assert_int_equal(rd[i].violations, 0);
  }
  assert_int_equal(simba_term_is_valid(t), 0);
  simba_term_release(t);
  CHECK_OK(simba_client_close(c));
}

/* A thread blocked in wait_revoked (and one in poll on the fd) wakes at the revocation. */
typedef struct {
  simba_term_t *t;
  int rc;
  int fd_ready;
  int done; /* atomic */
} blocked_t;

static void *wait_revoked_thread(void *arg) {
  blocked_t *b = (blocked_t *)arg;
  b->rc = simba_term_wait_revoked(b->t, -1);
  ast(&b->done, 1);
  return NULL;
}

static void *poll_fd_thread(void *arg) {
  blocked_t *b = (blocked_t *)arg;
  struct pollfd p;
  p.fd = simba_term_revoke_fd(b->t);
  p.events = POLLIN;
  p.revents = 0;
  b->fd_ready = p.fd >= 0 && poll(&p, 1, (int)long_wait_ms()) == 1 && (p.revents & POLLIN);
  ast(&b->done, 1);
  return NULL;
}

static void test_blocked_waiters_wake(void **state) {
  simba_client_t *c = open_live_client("term-wake");
  simba_term_t *t = NULL;
  pthread_t th1, th2;
  blocked_t b1, b2;
  (void)state;
  memset(&b1, 0, sizeof b1);
  memset(&b2, 0, sizeof b2);
  CHECK_OK(simba_lock_acquire(&t, c, "wake", long_wait_ms()));
  simba_term_retain(t);
  b1.t = b2.t = t;
  assert_int_equal(pthread_create(&th1, NULL, wait_revoked_thread, &b1), 0);
  assert_int_equal(pthread_create(&th2, NULL, poll_fd_thread, &b2), 0);
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&b1.done), 0);
  assert_int_equal(ald(&b2.done), 0);
  CHECK_OK(simba_lock_release(t));
  pthread_join(th1, NULL);
  pthread_join(th2, NULL);
  CHECK_OK(b1.rc);
  assert_true(b2.fd_ready);
  simba_term_release(t);
  CHECK_OK(simba_client_close(c));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_term),
      cmocka_unit_test(test_election_term_lifecycle),
      cmocka_unit_test(test_on_revoked_from_callback_and_order),
      cmocka_unit_test(test_several_on_revoked),
      cmocka_unit_test(test_term_after_close_and_reelection),
      cmocka_unit_test(test_term_readers),
      cmocka_unit_test(test_blocked_waiters_wake),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

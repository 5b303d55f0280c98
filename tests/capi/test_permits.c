/*
 * Semaphores and read/write locks (1.5, ADR 0046): arguments, sizes, tokens,
 * side-by-side permits, writer preference through intents, async forms and the
 * refused size's message, kinds, and permits freed with their session.
 */
#include "capi_test.h"

typedef struct {
  int calls; /* atomic */
  int err;   /* atomic */
  simba_term_t *term;
  char detail[256];
} done_t;

static void on_done(void *ud, int err, simba_term_t *t) {
  done_t *d = (done_t *)ud;
  if (err != SIMBA_OK) snprintf(d->detail, sizeof d->detail, "%s", simba_last_error());
  astp((void **)&d->term, t);
  ast(&d->err, err);
  ainc(&d->calls);
}

static void test_arguments(void **state) {
  simba_client_t *c = open_client("permits-args");
  simba_term_t *t = NULL;
  done_t d;
  (void)state;
  memset(&d, 0, sizeof d);
  CHECK_ERR(simba_semaphore_acquire(NULL, c, "s", 2, 100), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_semaphore_acquire(&t, NULL, "s", 2, 100), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_semaphore_acquire(&t, c, NULL, 2, 100), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_semaphore_acquire(&t, c, "s", 0, 100), SIMBA_EINVAL, "permit");
  CHECK_ERR(simba_semaphore_try_acquire(&t, c, "s", 0), SIMBA_EINVAL, "permit");
  CHECK_ERR(simba_semaphore_acquire_async(c, "s", 0, 100, on_done, &d), SIMBA_EINVAL, "permit");
  CHECK_ERR(simba_semaphore_acquire_async(c, "s", 2, 100, NULL, &d), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_rwlock_acquire(&t, c, "rw", 0, 100), SIMBA_EINVAL, "mode");
  CHECK_ERR(simba_rwlock_acquire(&t, c, "rw", SIMBA_LOCK_READ | SIMBA_LOCK_WRITE, 100),
            SIMBA_EINVAL, "mode");
  CHECK_ERR(simba_rwlock_try_acquire(&t, c, "rw", 7), SIMBA_EINVAL, "mode");
  CHECK_ERR(simba_rwlock_acquire_async(c, "rw", -1, 100, on_done, &d), SIMBA_EINVAL, "mode");
  CHECK_ERR(simba_rwlock_acquire(NULL, c, "rw", SIMBA_LOCK_READ, 100), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_rwlock_acquire(&t, c, "bad name", SIMBA_LOCK_READ, 100), SIMBA_EINVAL, NULL);
  assert_null(t);
  CHECK_OK(simba_client_close(c));
  assert_int_equal(ald(&d.calls), 0);
}

static void test_kind_names(void **state) {
  (void)state;
  assert_string_equal(simba_term_kind_name(SIMBA_TERM_ELECTION), "ELECTION");
  assert_string_equal(simba_term_kind_name(SIMBA_TERM_LOCK), "LOCK");
  assert_string_equal(simba_term_kind_name(SIMBA_TERM_SEMAPHORE), "SEMAPHORE");
  assert_string_equal(simba_term_kind_name(SIMBA_TERM_READ), "READ");
  assert_string_equal(simba_term_kind_name(SIMBA_TERM_WRITE), "WRITE");
  assert_string_equal(simba_term_kind_name((simba_term_kind_t)42), "UNKNOWN");
  assert_int_equal(simba_term_kind(NULL), SIMBA_TERM_ELECTION);
  assert_true(simba_version() >= 0x010500);
}

/* Two permits of size 2 across two clients (one of them twice): the size holds,
 * tokens strictly increase across permits, another size is refused by name. */
static void test_semaphore(void **state) {
  simba_client_t *a = open_live_client("permits-sem");
  simba_client_t *b = open_live_client("permits-sem");
  simba_term_t *p1 = NULL, *p2 = NULL, *p3 = NULL, *l = NULL;
  (void)state;
  CHECK_OK(simba_semaphore_acquire(&p1, a, "pool", 2, long_wait_ms()));
  CHECK_OK(simba_semaphore_acquire(&p2, a, "pool", 2, long_wait_ms()));
  assert_int_equal(simba_term_kind(p1), SIMBA_TERM_SEMAPHORE);
  assert_string_equal(simba_term_name(p1), "pool");
  assert_true(simba_term_token(p1) > 0);
  assert_true(simba_term_token(p2) > simba_term_token(p1));
  assert_true(simba_term_is_valid(p1) && simba_term_is_valid(p2));
  /* The session's own permits count: full for everyone. */
  CHECK_ERR(simba_semaphore_try_acquire(&p3, b, "pool", 2), SIMBA_EBUSY, NULL);
  CHECK_ERR(simba_semaphore_try_acquire(&p3, a, "pool", 2), SIMBA_EBUSY, NULL);
  CHECK_ERR(simba_semaphore_acquire(&p3, b, "pool", 3, long_wait_ms()), SIMBA_ESTATE,
            "has 2 permits, not 3");
  assert_null(p3);
  /* A lock of the same name is another resource. */
  CHECK_OK(simba_lock_try_acquire(&l, b, "pool"));
  assert_int_equal(simba_term_kind(l), SIMBA_TERM_LOCK);
  CHECK_OK(simba_lock_release(l));
  /* A released permit is the next holder's, with a higher token. */
  const uint64_t top = simba_term_token(p2);
  CHECK_OK(simba_lock_release(p1));
  CHECK_OK(simba_semaphore_acquire(&p3, b, "pool", 2, long_wait_ms()));
  assert_true(simba_term_token(p3) > top);
  CHECK_OK(simba_lock_release(p2));
  CHECK_OK(simba_lock_release(p3));
  /* No holder left: the next first holder fixes a new size. */
  CHECK_OK(simba_semaphore_try_acquire(&p1, b, "pool", 5));
  CHECK_OK(simba_lock_release(p1));
  CHECK_OK(simba_client_close(b));
  CHECK_OK(simba_client_close(a));
}

/* The async form's refused size: SIMBA_ESTATE, and the detail in the callback. */
static void test_semaphore_async_refused(void **state) {
  simba_client_t *c = open_live_client("permits-sem-async");
  simba_term_t *p = NULL;
  done_t d;
  (void)state;
  memset(&d, 0, sizeof d);
  CHECK_OK(simba_semaphore_acquire(&p, c, "jobs", 1, long_wait_ms()));
  CHECK_OK(simba_semaphore_acquire_async(c, "jobs", 4, long_wait_ms(), on_done, &d));
  ASSERT_EVENTUALLY(ald(&d.calls) == 1);
  assert_int_equal(ald(&d.err), SIMBA_ESTATE);
  assert_null(d.term);
  assert_non_null(strstr(d.detail, "has 1 permits, not 4"));
  memset(&d, 0, sizeof d);
  CHECK_OK(simba_semaphore_acquire_async(c, "jobs", 1, long_wait_ms(), on_done, &d));
  CHECK_OK(simba_lock_release(p));
  ASSERT_EVENTUALLY(ald(&d.calls) == 1);
  assert_int_equal(ald(&d.err), SIMBA_OK);
  assert_int_equal(simba_term_kind(d.term), SIMBA_TERM_SEMAPHORE);
  CHECK_OK(simba_lock_release(d.term));
  CHECK_OK(simba_client_close(c));
}

/* Readers share the name and carry the write epoch; a writer excludes everyone
 * and moves the epoch to its own token. */
static void test_rwlock_tokens(void **state) {
  simba_client_t *a = open_live_client("permits-rw");
  simba_client_t *b = open_live_client("permits-rw");
  simba_term_t *r1 = NULL, *r2 = NULL, *w = NULL, *x = NULL;
  uint64_t wtok;
  (void)state;
  CHECK_OK(simba_rwlock_acquire(&r1, a, "doc", SIMBA_LOCK_READ, long_wait_ms()));
  CHECK_OK(simba_rwlock_acquire(&r2, b, "doc", SIMBA_LOCK_READ, long_wait_ms()));
  assert_int_equal(simba_term_kind(r1), SIMBA_TERM_READ);
  assert_int_equal(simba_term_token(r1), 0); /* no writer yet */
  assert_int_equal(simba_term_token(r2), 0);
  CHECK_ERR(simba_rwlock_try_acquire(&x, b, "doc", SIMBA_LOCK_WRITE), SIMBA_EBUSY, NULL);
  CHECK_OK(simba_lock_release(r1));
  CHECK_OK(simba_lock_release(r2));
  CHECK_OK(simba_rwlock_try_acquire(&w, a, "doc", SIMBA_LOCK_WRITE));
  assert_int_equal(simba_term_kind(w), SIMBA_TERM_WRITE);
  wtok = simba_term_token(w);
  assert_true(wtok > 0);
  CHECK_ERR(simba_rwlock_try_acquire(&x, b, "doc", SIMBA_LOCK_READ), SIMBA_EBUSY, NULL);
  CHECK_ERR(simba_rwlock_try_acquire(&x, b, "doc", SIMBA_LOCK_WRITE), SIMBA_EBUSY, NULL);
  CHECK_OK(simba_lock_release(w));
  CHECK_OK(simba_rwlock_try_acquire(&r1, b, "doc", SIMBA_LOCK_READ));
  assert_int_equal(simba_term_token(r1), wtok); /* the epoch is the last writer's */
  CHECK_OK(simba_lock_release(r1));
  CHECK_OK(simba_rwlock_try_acquire(&w, b, "doc", SIMBA_LOCK_WRITE));
  assert_true(simba_term_token(w) > wtok);
  CHECK_OK(simba_lock_release(w));
  CHECK_OK(simba_client_close(b));
  CHECK_OK(simba_client_close(a));
}

/* 1 when a try-read of `name` is busy; a read it got is released at once. */
static int read_held_back(simba_client_t *r, const char *name) {
  simba_term_t *t = NULL;
  const int rc = simba_rwlock_try_acquire(&t, r, name, SIMBA_LOCK_READ);
  if (rc == SIMBA_OK) CHECK_OK(simba_lock_release(t));
  return rc == SIMBA_EBUSY;
}

/* A blocked writer's intent holds new readers back (a try-read is busy); the
 * writer gets the name when the last reader leaves; then readers come back. */
static void test_writer_preference(void **state) {
  simba_client_t *a = open_live_client("permits-pref");
  simba_client_t *b = open_live_client("permits-pref");
  simba_client_t *r = open_live_client("permits-pref");
  simba_term_t *held = NULL, *x = NULL;
  done_t d;
  (void)state;
  memset(&d, 0, sizeof d);
  CHECK_OK(simba_rwlock_acquire(&held, a, "table", SIMBA_LOCK_READ, long_wait_ms()));
  CHECK_OK(simba_rwlock_acquire_async(b, "table", SIMBA_LOCK_WRITE, long_wait_ms(), on_done, &d));
  /* Readers may pass until the writer's first attempt left its intent. */
  WAIT_UNTIL(read_held_back(r, "table"), long_wait_ms());
  CHECK_ERR(simba_rwlock_try_acquire(&x, r, "table", SIMBA_LOCK_READ), SIMBA_EBUSY, NULL);
  assert_int_equal(ald(&d.calls), 0);
  CHECK_OK(simba_lock_release(held));
  ASSERT_EVENTUALLY(ald(&d.calls) == 1);
  assert_int_equal(ald(&d.err), SIMBA_OK);
  assert_int_equal(simba_term_kind(d.term), SIMBA_TERM_WRITE);
  CHECK_ERR(simba_rwlock_try_acquire(&x, r, "table", SIMBA_LOCK_READ), SIMBA_EBUSY, NULL);
  CHECK_OK(simba_lock_release(d.term));
  CHECK_OK(simba_rwlock_try_acquire(&x, r, "table", SIMBA_LOCK_READ));
  CHECK_OK(simba_lock_release(x));
  CHECK_OK(simba_client_close(r));
  CHECK_OK(simba_client_close(b));
  CHECK_OK(simba_client_close(a));
}

/* A client that closes holding permits revokes them (STOPPED) and frees them. */
static void test_close_frees_permits(void **state) {
  simba_client_t *a = open_live_client("permits-close");
  simba_client_t *b = open_live_client("permits-close");
  simba_term_t *p = NULL, *w = NULL, *q = NULL;
  (void)state;
  CHECK_OK(simba_semaphore_acquire(&p, a, "slots", 1, long_wait_ms()));
  CHECK_OK(simba_rwlock_acquire(&w, a, "file", SIMBA_LOCK_WRITE, long_wait_ms()));
  simba_term_retain(p);
  simba_term_retain(w);
  CHECK_OK(simba_client_close(a));
  assert_false(simba_term_is_valid(p));
  assert_int_equal(simba_term_revoke_reason(p), SIMBA_REVOKE_STOPPED);
  assert_int_equal(simba_term_revoke_reason(w), SIMBA_REVOKE_STOPPED);
  CHECK_OK(simba_semaphore_try_acquire(&q, b, "slots", 1));
  CHECK_OK(simba_lock_release(q));
  CHECK_OK(simba_rwlock_try_acquire(&q, b, "file", SIMBA_LOCK_READ));
  CHECK_OK(simba_lock_release(q));
  CHECK_OK(simba_lock_release(p));
  CHECK_OK(simba_lock_release(w));
  simba_term_release(p);
  simba_term_release(w);
  CHECK_OK(simba_client_close(b));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arguments),           cmocka_unit_test(test_kind_names),
      cmocka_unit_test(test_semaphore),           cmocka_unit_test(test_semaphore_async_refused),
      cmocka_unit_test(test_rwlock_tokens),       cmocka_unit_test(test_writer_preference),
      cmocka_unit_test(test_close_frees_permits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

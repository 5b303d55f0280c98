/*
 * The one close shape of 1.4 (ADR 0041): simba_election_close_async,
 * simba_task_close_async, simba_observer_close_async, simba_term_close_async.
 * For each: from outside, from the handle's own callback (or leader work), on
 * an EXTERNAL-mode client; `done` runs exactly once, never on the calling
 * thread inside the call, after every other callback of the handle, and no
 * callback of the handle starts after it. memory:// only; every wait is bounded.
 */
#include <poll.h>
#include <unistd.h>

#include "capi_test.h"

/* ------------------------------------------------------------------------- */
/* What a close's done saw. */

typedef struct {
  rec_t *r;          /* the handle's listener, sealed by done (may be NULL) */
  const int *before; /* a counter read when done runs (may be NULL) */
  pthread_t caller;  /* the thread that called the close */
  int done, err, inside_at_done, before_at_done, on_caller, in_process_at_done;
} closed_t;

/* EXTERNAL-mode host: set while the host thread is inside simba_client_process. */
static int in_process;

static void closed_init(closed_t *c, rec_t *r, const int *before) {
  memset(c, 0, sizeof *c);
  c->r = r;
  c->before = before;
  c->caller = pthread_self();
  c->before_at_done = -1;
}

static void closed_done(void *ud, int err) {
  closed_t *c = (closed_t *)ud;
  c->err = err;
  if (c->r) {
    ast(&c->inside_at_done, ald(&c->r->inside));
    rec_seal(c->r); /* any callback of the listener from now on fails REC_CHECK */
  }
  if (c->before) ast(&c->before_at_done, ald(c->before));
  if (pthread_equal(pthread_self(), c->caller)) ainc(&c->on_caller);
  ast(&c->in_process_at_done, in_process);
  ainc(&c->done);
}

/* done ran once, with SIMBA_OK, and stays at once over a quiet period. */
static void expect_done_once(closed_t *c) {
  ASSERT_EVENTUALLY(ald(&c->done) >= 1);
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&c->done), 1);
  assert_int_equal(c->err, SIMBA_OK);
  assert_int_equal(ald(&c->inside_at_done), 0);
  if (c->r) REC_CHECK_NO_PAIRS(c->r);
}

/* ------------------------------------------------------------------------- */
/* Elections */

static void test_election_close_from_outside(void **state) {
  simba_client_t *c = open_live_client("close-el-1");
  simba_client_t *other = open_live_client("close-el-1");
  simba_election_t *e;
  simba_term_t *t = NULL;
  rec_t r;
  closed_t cl;
  (void)state;
  rec_init(&r, "outside");
  e = rec_start(&r, c, "leader");
  WAIT_ELECTED(&r, 1);
  closed_init(&cl, &r, NULL);
  CHECK_OK(simba_election_close_async(e, closed_done, &cl));
  expect_done_once(&cl);
  assert_int_equal(ald(&cl.on_caller), 0);
  /* The listener heard nothing from the close on: no on_revoked for the term. */
  assert_int_equal(ald(&r.revoked), 0);
  /* After done the name is not held for the election any more. */
  CHECK_OK(simba_lock_try_acquire(&t, other, "leader"));
  CHECK_OK(simba_lock_release(t));
  CHECK_OK(simba_client_close(other));
  CHECK_OK(simba_client_close(c));
  rec_destroy(&r);
}

static simba_election_t *volatile self_election;
static closed_t self_closed;
static int self_close_rc = 1;

static void close_self_in_elected(rec_t *r, simba_term_t *t) {
  simba_election_t *e;
  (void)r;
  (void)t;
  while ((e = (simba_election_t *)aldp((void *const *)&self_election)) == NULL) sleep_ms(1);
  ast(&self_close_rc, simba_election_close_async(e, closed_done, &self_closed));
  /* Still inside the callback: done must wait for it to return. */
  sleep_ms(50 * tscale());
}

static void test_election_close_from_its_own_callback(void **state) {
  simba_client_t *c = open_live_client("close-el-2");
  rec_t r;
  (void)state;
  rec_init(&r, "own-callback");
  r.on_elected_hook = close_self_in_elected;
  closed_init(&self_closed, &r, NULL);
  astp((void **)&self_election, rec_start(&r, c, "leader"));
  expect_done_once(&self_closed);
  assert_int_equal(ald(&self_close_rc), SIMBA_OK);
  assert_int_equal(ald(&r.elected), 1);
  assert_int_equal(ald(&r.revoked), 0);
  CHECK_OK(simba_client_close(c));
  rec_destroy(&r);
}

static void slow_elected(rec_t *r, simba_term_t *t) {
  (void)t;
  ast((int *)r->hook_ud, 1);
  sleep_ms(200 * tscale());
}

/* A callback running on another thread when the close is called finishes
 * before done; the done of a stop and of a step-down asked for before run
 * too, before it. */
static void test_election_close_waits_for_running_callback_and_earlier_dones(void **state) {
  simba_client_t *c = open_live_client("close-el-3");
  simba_election_t *e;
  int in_elected = 0;
  rec_t r;
  closed_t cl;
  (void)state;
  rec_init(&r, "running");
  r.on_elected_hook = slow_elected;
  r.hook_ud = &in_elected;
  e = rec_start(&r, c, "leader");
  ASSERT_EVENTUALLY(ald(&in_elected) == 1);
  closed_init(&cl, &r, &r.done);
  CHECK_OK(simba_election_step_down(e, 0, rec_on_step_down_done, &r));
  CHECK_OK(simba_election_stop(e, rec_on_done, &r));
  CHECK_OK(simba_election_close_async(e, closed_done, &cl));
  expect_done_once(&cl);
  assert_int_equal(cl.before_at_done, 1); /* the stop's done ran first */
  assert_int_equal(ald(&r.sd_done), 1);
  assert_int_equal(ald(&r.elected), 1);
  CHECK_OK(simba_client_close(c));
  rec_destroy(&r);
}

static int term_cb_ran;
static void count_term_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t reason) {
  (void)t;
  (void)reason;
  ainc((int *)ud);
}

/* on_revoked callbacks registered on the term the close stops run, before done. */
static void test_election_close_runs_term_callbacks_first(void **state) {
  simba_client_t *c = open_live_client("close-el-4");
  simba_election_t *e;
  simba_term_t *t;
  rec_t r;
  closed_t cl;
  (void)state;
  term_cb_ran = 0;
  rec_init(&r, "term-callbacks");
  e = rec_start(&r, c, "leader");
  WAIT_ELECTED(&r, 1);
  t = rec_take_term(&r);
  CHECK_OK(simba_term_on_revoked(t, count_term_revoked, &term_cb_ran));
  closed_init(&cl, &r, &term_cb_ran);
  CHECK_OK(simba_election_close_async(e, closed_done, &cl));
  expect_done_once(&cl);
  assert_int_equal(cl.before_at_done, 1);
  assert_int_equal(simba_term_revoke_reason(t), SIMBA_REVOKE_STOPPED);
  simba_term_release(t);
  CHECK_OK(simba_client_close(c));
  rec_destroy(&r);
}

/* A close around the client's close. Asked for before: its done has run by the
 * time simba_client_close() returns. After (the handle of a closed client):
 * done still runs, once, on a library thread. */
static void run_close_around_client_close(const char *store, int close_first) {
  simba_client_t *c = open_live_client(store);
  simba_election_t *e;
  rec_t r;
  closed_t cl;
  rec_init(&r, store);
  e = rec_start(&r, c, "leader");
  WAIT_ELECTED(&r, 1);
  closed_init(&cl, &r, NULL);
  if (close_first) {
    CHECK_OK(simba_election_close_async(e, closed_done, &cl));
    CHECK_OK(simba_client_close(c));
    assert_int_equal(ald(&cl.done), 1);
  } else {
    CHECK_OK(simba_client_close(c));
    CHECK_OK(simba_election_close_async(e, closed_done, &cl));
  }
  expect_done_once(&cl);
  assert_int_equal(ald(&cl.on_caller), 0);
  rec_destroy(&r);
}

static void test_election_close_done_before_client_close_returns(void **state) {
  (void)state;
  run_close_around_client_close("close-el-5", 1);
}

static void test_election_close_after_client_close(void **state) {
  (void)state;
  run_close_around_client_close("close-el-6", 0);
}

/* ------------------------------------------------------------------------- */
/* Tasks */

typedef struct {
  simba_task_t *task; /* atomic pointer: set after the task started */
  closed_t *cl;
  int close_from_work, close_rc;
  int started, returned;
} work_t;

static void revoked_then_late_return(void *ud, simba_term_t *t) {
  work_t *w = (work_t *)ud;
  if (ainc(&w->started) == 1 && w->close_from_work) {
    simba_task_t *task;
    while ((task = (simba_task_t *)aldp((void *const *)&w->task)) == NULL) sleep_ms(1);
    ast(&w->close_rc, simba_task_close_async(task, closed_done, w->cl));
  }
  while (simba_term_wait_revoked(t, 20) != SIMBA_OK) {
  }
  sleep_ms(100 * tscale()); /* returns late: done must still wait for it */
  ainc(&w->returned);
}

static void run_task_close(const char *store, int from_work, int group) {
  simba_client_t *c = open_live_client(store);
  simba_client_t *other = open_live_client(store);
  simba_term_t *t = NULL;
  simba_task_t *task = NULL;
  work_t w;
  closed_t cl;
  memset(&w, 0, sizeof w);
  closed_init(&cl, NULL, &w.returned);
  w.cl = &cl;
  w.close_from_work = from_work;
  w.close_rc = 1;
  if (group) {
    CHECK_OK(simba_group_join(&task, c, "grp", 2, revoked_then_late_return, &w));
  } else {
    CHECK_OK(simba_run_while_leader(&task, c, "job", revoked_then_late_return, &w));
  }
  astp((void **)&w.task, task);
  /* From its work, the first run closes the group: the other partition may never start. */
  ASSERT_EVENTUALLY(ald(&w.started) >= (group && !from_work ? 2 : 1));
  if (!from_work) CHECK_OK(simba_task_close_async(task, closed_done, &cl));
  expect_done_once(&cl);
  if (from_work) assert_int_equal(ald(&w.close_rc), SIMBA_OK);
  assert_int_equal(ald(&cl.on_caller), 0);
  /* Every run of the work had returned when done ran. */
  assert_int_equal(cl.before_at_done, ald(&w.started));
  /* And the lease is free. */
  CHECK_OK(simba_lock_try_acquire(&t, other, group ? "grp.0" : "job"));
  CHECK_OK(simba_lock_release(t));
  CHECK_OK(simba_client_close(other));
  CHECK_OK(simba_client_close(c));
}

static void test_task_close_from_outside(void **state) {
  (void)state;
  run_task_close("close-task-1", 0, 0);
}

static void test_task_close_from_its_own_work(void **state) {
  (void)state;
  run_task_close("close-task-2", 1, 0);
}

static void test_group_close_from_outside(void **state) {
  (void)state;
  run_task_close("close-task-3", 0, 1);
}

static void test_group_close_from_its_own_work(void **state) {
  (void)state;
  run_task_close("close-task-4", 1, 1);
}

/* ------------------------------------------------------------------------- */
/* Observers */

typedef struct {
  simba_observer_t *o; /* atomic pointer */
  closed_t *cl;
  int calls, close_in_callback, close_rc, after_done, inside, inside_at_done;
} watch_t;

static void watch_fn(void *ud, const char *name, const char *holder, const char *holder_client,
                     uint64_t token) {
  watch_t *w = (watch_t *)ud;
  (void)name;
  (void)holder;
  (void)holder_client;
  (void)token;
  ast(&w->inside, 1);
  if (ald(&w->cl->done)) ainc(&w->after_done);
  if (ainc(&w->calls) == 1 && w->close_in_callback) {
    simba_observer_t *o;
    while ((o = (simba_observer_t *)aldp((void *const *)&w->o)) == NULL) sleep_ms(1);
    ast(&w->close_rc, simba_observer_close_async(o, closed_done, w->cl));
    sleep_ms(50 * tscale());
  }
  ast(&w->inside, 0);
}

static void run_observer_close(const char *store, int in_callback) {
  simba_client_t *c = open_live_client(store);
  simba_client_t *holder = open_live_client(store);
  simba_observer_t *o = NULL;
  simba_term_t *t = NULL;
  watch_t w;
  closed_t cl;
  memset(&w, 0, sizeof w);
  closed_init(&cl, NULL, &w.inside);
  w.cl = &cl;
  w.close_in_callback = in_callback;
  CHECK_OK(simba_observe_start(&o, c, "watched", 10, watch_fn, &w));
  astp((void **)&w.o, o);
  ASSERT_EVENTUALLY(ald(&w.calls) >= 1);
  if (!in_callback) CHECK_OK(simba_observer_close_async(o, closed_done, &cl));
  expect_done_once(&cl);
  if (in_callback) assert_int_equal(ald(&w.close_rc), SIMBA_OK);
  assert_int_equal(cl.before_at_done, 0); /* no call of fn was running */
  assert_int_equal(ald(&cl.on_caller), 0);
  /* Changes after the close are not delivered. */
  CHECK_OK(simba_lock_acquire(&t, holder, "watched", long_wait_ms()));
  sleep_ms(quiet_ms());
  CHECK_OK(simba_lock_release(t));
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&w.after_done), 0);
  CHECK_OK(simba_client_close(holder));
  CHECK_OK(simba_client_close(c));
}

static void test_observer_close_from_outside(void **state) {
  (void)state;
  run_observer_close("close-obs-1", 0);
}

static void test_observer_close_from_its_own_callback(void **state) {
  (void)state;
  run_observer_close("close-obs-2", 1);
}

/* ------------------------------------------------------------------------- */
/* Terms */

/* A lock term: released with its token; done after the answer and after its
 * on_revoked callbacks; the name is free then. */
static void test_term_close_releases_a_lock(void **state) {
  simba_client_t *c = open_live_client("close-term-1");
  simba_client_t *other = open_live_client("close-term-1");
  simba_term_t *t = NULL, *t2 = NULL;
  int revoked = 0;
  closed_t cl;
  (void)state;
  CHECK_OK(simba_lock_acquire(&t, c, "res", long_wait_ms()));
  CHECK_OK(simba_term_on_revoked(t, count_term_revoked, &revoked));
  closed_init(&cl, NULL, &revoked);
  CHECK_OK(simba_term_close_async(t, closed_done, &cl));
  expect_done_once(&cl);
  assert_int_equal(cl.before_at_done, 1);
  assert_int_equal(ald(&cl.on_caller), 0);
  CHECK_OK(simba_lock_try_acquire(&t2, other, "res"));
  CHECK_OK(simba_lock_release(t2));
  CHECK_OK(simba_client_close(other));
  CHECK_OK(simba_client_close(c));
}

typedef struct {
  closed_t *cl;
  int close_rc, acquired;
} acq_t;

static void close_in_acquire_callback(void *ud, int err, simba_term_t *t) {
  acq_t *a = (acq_t *)ud;
  if (err == SIMBA_OK) {
    ast(&a->acquired, 1);
    ast(&a->close_rc, simba_term_close_async(t, closed_done, a->cl));
  }
}

/* From a callback (the async acquire's): never blocks; done runs after it. */
static void test_term_close_from_a_callback(void **state) {
  simba_client_t *c = open_live_client("close-term-2");
  simba_client_t *other = open_live_client("close-term-2");
  simba_term_t *t2 = NULL;
  acq_t a;
  closed_t cl;
  (void)state;
  memset(&a, 0, sizeof a);
  a.close_rc = 1;
  closed_init(&cl, NULL, NULL);
  a.cl = &cl;
  CHECK_OK(simba_lock_acquire_async(c, "res", long_wait_ms(), close_in_acquire_callback, &a));
  expect_done_once(&cl);
  assert_int_equal(ald(&a.acquired), 1);
  assert_int_equal(ald(&a.close_rc), SIMBA_OK);
  CHECK_OK(simba_lock_try_acquire(&t2, other, "res"));
  CHECK_OK(simba_lock_release(t2));
  CHECK_OK(simba_client_close(other));
  CHECK_OK(simba_client_close(c));
}

/* An election's term: dropping the reference neither revokes it nor waits for
 * its revocation; done runs soon, once. */
static void test_term_close_of_an_election_term(void **state) {
  simba_client_t *c = open_live_client("close-term-3");
  simba_election_t *e;
  simba_term_t *t;
  rec_t r;
  closed_t cl;
  (void)state;
  rec_init(&r, "election-term");
  e = rec_start(&r, c, "leader");
  WAIT_ELECTED(&r, 1);
  t = rec_take_term(&r);
  closed_init(&cl, NULL, NULL);
  CHECK_OK(simba_term_close_async(t, closed_done, &cl));
  expect_done_once(&cl);
  /* Still leader: the close revoked nothing. Under a loaded machine the
   * 500 ms session may lapse meanwhile (a keep-alive late): that revocation
   * names the session, never STOPPED. */
  pthread_mutex_lock(&r.mu);
  for (int i = 0; i < r.nreasons; ++i) {
    assert_true(r.reasons[i] == SIMBA_REVOKE_DEADLINE_PASSED ||
                r.reasons[i] == SIMBA_REVOKE_SESSION_EXPIRED);
  }
  pthread_mutex_unlock(&r.mu);
  CHECK_OK(simba_election_stop_wait(e, long_wait_ms()));
  simba_election_free(e);
  CHECK_OK(simba_client_close(c));
  rec_destroy(&r);
}

/* ------------------------------------------------------------------------- */
/* EXTERNAL mode: done runs inside simba_client_process() on the host thread. */

static simba_client_t *open_external(const char *store) {
  return open_client_kv(store, "loop.mode", "external");
}

/* The host's loop: poll the fd, process, until *flag or the long wait passed. */
static void drive_until(simba_client_t *c, const int *flag) {
  const int64_t deadline = now_ms() + long_wait_ms();
  while (!ald(flag) && now_ms() < deadline) {
    assert_true(poll_client(c, 20) >= 0);
    in_process = 1;
    CHECK_OK(simba_client_process(c));
    in_process = 0;
  }
  assert_true(ald(flag));
}

static void drive_for(simba_client_t *c, int64_t ms) {
  const int64_t deadline = now_ms() + ms;
  while (now_ms() < deadline) {
    in_process = 1;
    CHECK_OK(simba_client_process(c));
    in_process = 0;
    sleep_ms(5);
  }
}

static void expect_done_in_process(simba_client_t *c, closed_t *cl) {
  drive_until(c, &cl->done);
  drive_for(c, quiet_ms());
  assert_int_equal(ald(&cl->done), 1);
  assert_int_equal(cl->err, SIMBA_OK);
  assert_int_equal(ald(&cl->in_process_at_done), 1);
  assert_int_equal(ald(&cl->inside_at_done), 0);
  if (cl->r) REC_CHECK_NO_PAIRS(cl->r);
}

static void test_external_election_close_outside_and_in_callback(void **state) {
  simba_client_t *c = open_external("close-ext-1");
  simba_election_t *e;
  rec_t r, r2;
  closed_t cl;
  (void)state;
  /* From the host thread, outside simba_client_process(). */
  rec_init(&r, "ext-outside");
  e = rec_start(&r, c, "leader");
  drive_until(c, &r.elected);
  closed_init(&cl, &r, NULL);
  CHECK_OK(simba_election_close_async(e, closed_done, &cl));
  assert_int_equal(ald(&cl.done), 0); /* nothing runs without the host's loop */
  expect_done_in_process(c, &cl);
  /* From its own callback, inside simba_client_process(). */
  rec_init(&r2, "ext-own-callback");
  r2.on_elected_hook = close_self_in_elected;
  closed_init(&self_closed, &r2, NULL);
  astp((void **)&self_election, NULL);
  astp((void **)&self_election, rec_start(&r2, c, "leader2"));
  expect_done_in_process(c, &self_closed);
  assert_int_equal(ald(&self_close_rc), SIMBA_OK);
  CHECK_OK(simba_client_close(c));
  rec_destroy(&r);
  rec_destroy(&r2);
}

static void test_external_task_close_from_its_work(void **state) {
  simba_client_t *c = open_external("close-ext-2");
  simba_task_t *task = NULL;
  work_t w;
  closed_t cl;
  (void)state;
  memset(&w, 0, sizeof w);
  closed_init(&cl, NULL, &w.returned);
  w.cl = &cl;
  w.close_from_work = 1;
  w.close_rc = 1;
  CHECK_OK(simba_run_while_leader(&task, c, "job", revoked_then_late_return, &w));
  astp((void **)&w.task, task);
  expect_done_in_process(c, &cl);
  assert_int_equal(ald(&w.close_rc), SIMBA_OK);
  assert_int_equal(cl.before_at_done, 1);
  CHECK_OK(simba_client_close(c));
}

static void test_external_observer_and_term_close(void **state) {
  simba_client_t *c = open_external("close-ext-3");
  simba_observer_t *o = NULL;
  simba_term_t *t = NULL;
  watch_t w;
  closed_t cl, tcl;
  int revoked = 0;
  (void)state;
  memset(&w, 0, sizeof w);
  closed_init(&cl, NULL, &w.inside);
  w.cl = &cl;
  CHECK_OK(simba_observe_start(&o, c, "watched", 10, watch_fn, &w));
  drive_until(c, &w.calls);
  CHECK_OK(simba_observer_close_async(o, closed_done, &cl));
  expect_done_in_process(c, &cl);
  /* A lock term, acquired on the host thread (the blocking call runs the loop). */
  CHECK_OK(simba_lock_acquire(&t, c, "res", long_wait_ms()));
  CHECK_OK(simba_term_on_revoked(t, count_term_revoked, &revoked));
  closed_init(&tcl, NULL, &revoked);
  CHECK_OK(simba_term_close_async(t, closed_done, &tcl));
  expect_done_in_process(c, &tcl);
  assert_int_equal(tcl.before_at_done, 1);
  assert_int_equal(ald(&w.after_done), 0);
  CHECK_OK(simba_client_close(c));
}

/* ------------------------------------------------------------------------- */

static void test_close_async_null_is_einval(void **state) {
  (void)state;
  CHECK_ERR(simba_election_close_async(NULL, closed_done, NULL), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_task_close_async(NULL, closed_done, NULL), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_observer_close_async(NULL, closed_done, NULL), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_term_close_async(NULL, closed_done, NULL), SIMBA_EINVAL, "NULL");
  assert_true(simba_version() >= 0x010400);
}

/* done may be NULL: the handle is still closed and freed (ASan/valgrind see it). */
static void test_close_async_without_done(void **state) {
  simba_client_t *c = open_live_client("close-null-done");
  simba_election_t *e;
  rec_t r;
  (void)state;
  rec_init(&r, "null-done");
  e = rec_start(&r, c, "leader");
  WAIT_ELECTED(&r, 1);
  CHECK_OK(simba_election_close_async(e, NULL, NULL));
  CHECK_OK(simba_client_close(c));
  rec_destroy(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_election_close_from_outside),
      cmocka_unit_test(test_election_close_from_its_own_callback),
      cmocka_unit_test(test_election_close_waits_for_running_callback_and_earlier_dones),
      cmocka_unit_test(test_election_close_runs_term_callbacks_first),
      cmocka_unit_test(test_election_close_done_before_client_close_returns),
      cmocka_unit_test(test_election_close_after_client_close),
      cmocka_unit_test(test_task_close_from_outside),
      cmocka_unit_test(test_task_close_from_its_own_work),
      cmocka_unit_test(test_group_close_from_outside),
      cmocka_unit_test(test_group_close_from_its_own_work),
      cmocka_unit_test(test_observer_close_from_outside),
      cmocka_unit_test(test_observer_close_from_its_own_callback),
      cmocka_unit_test(test_term_close_releases_a_lock),
      cmocka_unit_test(test_term_close_from_a_callback),
      cmocka_unit_test(test_term_close_of_an_election_term),
      cmocka_unit_test(test_external_election_close_outside_and_in_callback),
      cmocka_unit_test(test_external_task_close_from_its_work),
      cmocka_unit_test(test_external_observer_and_term_close),
      cmocka_unit_test(test_close_async_null_is_einval),
      cmocka_unit_test(test_close_async_without_done),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Elections: one leader per name, stop / step_down / stop_wait / free, their
 * ordering and error codes, and the pairing and serial-delivery promises of
 * every listener (checked by rec_t in capi_test.h, in every test).
 */
#include "capi_test.h"

/* A done callback that only counts. */
static void count_done(void *ud, int err) {
  (void)err;
  ainc((int *)ud);
}

/* Samples both terms; fails if both were valid at one instant. `tb` is read
 * first: a term that reads valid later was valid then too (it never becomes
 * valid again once invalid, and it existed before the first read). */
static int two_valid_leaders(rec_t *a, rec_t *b) {
  simba_term_t *ta = rec_take_term(a);
  simba_term_t *tb = rec_take_term(b);
  int both = 0;
  if (ta && tb) {
    const int vb = simba_term_is_valid(tb);
    const int va = simba_term_is_valid(ta);
    both = va && vb;
  }
  simba_term_release(ta);
  simba_term_release(tb);
  return both;
}

/* 1 if the client's snapshot contains `needle`. */
static int snapshot_has(simba_client_t *c, const char *needle) {
  char *js = simba_client_snapshot_json(c);
  const int has = js && strstr(js, needle) != NULL;
  simba_free(js);
  return has;
}

static void test_start_arguments(void **state) {
  simba_client_t *c = open_client("el-args");
  simba_election_t *e = (simba_election_t *)&e; /* not NULL */
  rec_t r;
  simba_listener_t l;
  (void)state;
  rec_init(&r, "args");
  l = rec_listener(&r);
  CHECK_ERR(simba_election_start(NULL, c, "el-args", &l), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_election_start(&e, NULL, "el-args", &l), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_election_start(&e, c, NULL, &l), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_election_start(&e, c, "el-args", NULL), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_election_stop(NULL, rec_on_done, &r), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_election_stop(NULL, NULL, NULL), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_election_step_down(NULL, 0, NULL, NULL), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_election_stop_wait(NULL, 100), SIMBA_EINVAL, "NULL");
  CHECK_OK(simba_client_close(c));
  assert_int_equal(ald(&r.calls), 0);
  rec_destroy(&r);
}

/* Two clients, one name: one leader; stop it; the other takes over. */
static void test_one_leader_then_failover(void **state) {
  simba_client_t *a = open_live_client("el-failover");
  simba_client_t *b = open_live_client("el-failover");
  simba_election_t *ea, *eb, *el, *ef;
  rec_t ra, rb, *leader, *follower;
  int done2 = 0, calls_after_done;
  int64_t until;
  char log[REC_MAX + 1];
  (void)state;
  rec_init(&ra, "failover-a");
  rec_init(&rb, "failover-b");
  ea = rec_start(&ra, a, "failover");
  eb = rec_start(&rb, b, "failover");
  ASSERT_EVENTUALLY(ald(&ra.elected) + ald(&rb.elected) >= 1);

  /* For a few lease durations: exactly one leader, never two valid terms. */
  until = now_ms() + 3 * lease_ms();
  while (now_ms() < until) {
    assert_false(two_valid_leaders(&ra, &rb));
    assert_false(two_valid_leaders(&rb, &ra));
    sleep_ms(5);
  }
  assert_int_equal(ald(&ra.elected) + ald(&rb.elected), 1);
  assert_int_equal(ald(&ra.revoked) + ald(&rb.revoked), 0);
  if (ald(&ra.elected) == 1) {
    leader = &ra, follower = &rb, el = ea, ef = eb;
  } else {
    leader = &rb, follower = &ra, el = eb, ef = ea;
  }

  /* Stop the leader: on_revoked(STOPPED), then done. */
  CHECK_OK(simba_election_stop(el, rec_on_done, leader));
  ASSERT_EVENTUALLY(ald(&leader->done) == 1);
  rec_seal(leader);
  calls_after_done = ald(&leader->calls);
  assert_int_equal(ald(&leader->done_err), SIMBA_OK);
  rec_log(leader, log, sizeof log);
  assert_string_equal(log, "ERD");
  assert_int_equal(rec_reason(leader, 0), SIMBA_REVOKE_STOPPED);

  /* The other is elected with a larger token. */
  WAIT_ELECTED(follower, 1);
  assert_true(rec_token(follower, 0) > rec_token(leader, 0));

  /* Stop twice: ESTATE, and that done never runs. */
  CHECK_ERR(simba_election_stop(el, count_done, &done2), SIMBA_ESTATE, "stop");
  CHECK_ERR(simba_election_step_down(el, 0, count_done, &done2), SIMBA_ESTATE, NULL);
  /* stop_wait on a stopped election returns at once. */
  CHECK_OK(simba_election_stop_wait(el, long_wait_ms()));

  CHECK_OK(simba_election_stop_wait(ef, long_wait_ms()));
  rec_seal(follower);
  rec_log(follower, log, sizeof log);
  assert_string_equal(log, "ER");
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
  simba_election_free(ea);
  simba_election_free(eb);
  sleep_ms(quiet_ms());
  assert_int_equal(done2, 0);
  assert_int_equal(ald(&leader->calls), calls_after_done);
  REC_CHECK(&ra);
  REC_CHECK(&rb);
  rec_destroy(&ra);
  rec_destroy(&rb);
}

static void test_start_same_name_twice(void **state) {
  simba_client_t *c = open_live_client("el-twice");
  simba_election_t *e1, *e2 = NULL, *e3;
  rec_t r1, r2, r3;
  simba_listener_t l;
  (void)state;
  rec_init(&r1, "twice-1");
  rec_init(&r2, "twice-2");
  rec_init(&r3, "twice-3");
  e1 = rec_start(&r1, c, "twice");
  l = rec_listener(&r2);
  CHECK_ERR(simba_election_start(&e2, c, "twice", &l), SIMBA_ESTATE, "twice");
  /* Another name is fine. */
  e2 = rec_start(&r2, c, "twice-other");
  WAIT_ELECTED(&r1, 1);
  WAIT_ELECTED(&r2, 1);
  /* While stopping, the name is still taken... */
  CHECK_OK(simba_election_stop_wait(e1, long_wait_ms()));
  /* ...once stopped, it can be started again, with a new term and a larger token. */
  e3 = rec_start(&r3, c, "twice");
  WAIT_ELECTED(&r3, 1);
  assert_true(rec_token(&r3, 0) > rec_token(&r1, 0));
  CHECK_OK(simba_client_close(c));
  simba_election_free(e1);
  simba_election_free(e2);
  simba_election_free(e3);
  assert_int_equal(rec_reason(&r2, 0), SIMBA_REVOKE_STOPPED);
  assert_int_equal(rec_reason(&r3, 0), SIMBA_REVOKE_STOPPED);
  REC_CHECK(&r1);
  REC_CHECK(&r2);
  REC_CHECK(&r3);
  rec_destroy(&r1);
  rec_destroy(&r2);
  rec_destroy(&r3);
}

/* Stopping a candidate (never elected): done runs, no on_revoked. */
static void test_stop_candidate(void **state) {
  simba_client_t *a = open_live_client("el-stop-cand");
  simba_client_t *b = open_live_client("el-stop-cand");
  simba_election_t *ea, *eb;
  rec_t ra, rb;
  int done2 = 0;
  char log[REC_MAX + 1];
  (void)state;
  rec_init(&ra, "cand-a");
  rec_init(&rb, "cand-b");
  ea = rec_start(&ra, a, "cand");
  WAIT_ELECTED(&ra, 1);
  eb = rec_start(&rb, b, "cand");
  CHECK_OK(simba_election_stop(eb, rec_on_done, &rb));
  CHECK_ERR(simba_election_stop(eb, count_done, &done2), SIMBA_ESTATE, NULL);
  ASSERT_EVENTUALLY(ald(&rb.done) == 1);
  rec_seal(&rb);
  rec_log(&rb, log, sizeof log);
  assert_string_equal(log, "D");
  /* A stop with a NULL done is fine too. */
  CHECK_OK(simba_election_stop(ea, NULL, NULL));
  CHECK_OK(simba_election_stop_wait(ea, long_wait_ms()));
  rec_seal(&ra);
  rec_log(&ra, log, sizeof log);
  assert_string_equal(log, "ER");
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
  simba_election_free(ea);
  simba_election_free(eb);
  assert_int_equal(done2, 0);
  REC_CHECK(&ra);
  REC_CHECK(&rb);
  rec_destroy(&ra);
  rec_destroy(&rb);
}

static void test_stop_wait(void **state) {
  simba_client_t *c = open_live_client("el-stop-wait");
  simba_election_t *e;
  rec_t r;
  int done2 = 0;
  (void)state;
  rec_init(&r, "stop-wait");
  e = rec_start(&r, c, "stop-wait");
  WAIT_ELECTED(&r, 1);
  CHECK_OK(simba_election_stop_wait(e, long_wait_ms()));
  /* When it returns, on_revoked(STOPPED) has run. */
  assert_int_equal(ald(&r.revoked), 1);
  assert_int_equal(rec_reason(&r, 0), SIMBA_REVOKE_STOPPED);
  rec_seal(&r);
  CHECK_OK(simba_election_stop_wait(e, 0));
  CHECK_OK(simba_election_stop_wait(e, -1));
  CHECK_ERR(simba_election_stop(e, count_done, &done2), SIMBA_ESTATE, NULL);
  /* The name is free at once on the backend (the stop waited for the release). */
  {
    simba_client_t *d = open_live_client("el-stop-wait");
    simba_term_t *t = NULL;
    CHECK_OK(simba_lock_try_acquire(&t, d, "stop-wait"));
    assert_true(simba_term_token(t) > rec_token(&r, 0));
    CHECK_OK(simba_lock_release(t));
    CHECK_OK(simba_client_close(d));
  }
  CHECK_OK(simba_client_close(c));
  simba_election_free(e);
  assert_int_equal(done2, 0);
  REC_CHECK(&r);
  rec_destroy(&r);
}

/* A blocking stop on one thread and a step-down with a done on another, at
 * once, on elections that asked for neither before: whichever comes first
 * makes the election's block of rarely used members (ADR 0024), from an API
 * thread or from the loop. Every stop completes, every step-down the library
 * accepted has its done run before the stop returns, and the listener's
 * promises hold. TSan runs it too. */
#define RARE_RACE_N 32
typedef struct {
  simba_election_t *e;
  int rc;
} stop_wait_arg_t;

static void *stop_wait_thread(void *p) {
  stop_wait_arg_t *a = p;
  a->rc = simba_election_stop_wait(a->e, long_wait_ms());
  return NULL;
}

static void test_stop_wait_races_step_down(void **state) {
  simba_client_t *c = open_live_client("el-rare-race");
  simba_election_t *e[RARE_RACE_N];
  rec_t r[RARE_RACE_N];
  stop_wait_arg_t arg[RARE_RACE_N];
  pthread_t th[RARE_RACE_N];
  int dones[RARE_RACE_N] = {0}, accepted[RARE_RACE_N] = {0};
  int n, rc;
  char name[32];
  (void)state;
  for (n = 0; n < RARE_RACE_N; ++n) {
    snprintf(name, sizeof name, "rare-race-%d", n);
    rec_init(&r[n], "rare-race");
    e[n] = rec_start(&r[n], c, name);
  }
  for (n = 0; n < RARE_RACE_N; ++n) WAIT_ELECTED(&r[n], 1);
  for (n = 0; n < RARE_RACE_N; ++n) {
    arg[n].e = e[n];
    arg[n].rc = -1;
    assert_int_equal(pthread_create(&th[n], NULL, stop_wait_thread, &arg[n]), 0);
    rc = simba_election_step_down(e[n], 0, count_done, &dones[n]);
    assert_true(rc == SIMBA_OK || rc == SIMBA_ESTATE);
    accepted[n] = rc == SIMBA_OK;
  }
  for (n = 0; n < RARE_RACE_N; ++n) {
    assert_int_equal(pthread_join(th[n], NULL), 0);
    assert_int_equal(arg[n].rc, SIMBA_OK);
    assert_int_equal(ald(&dones[n]), accepted[n]);
    rec_seal(&r[n]);
  }
  CHECK_OK(simba_client_close(c));
  for (n = 0; n < RARE_RACE_N; ++n) {
    simba_election_free(e[n]);
    REC_CHECK(&r[n]);
    rec_destroy(&r[n]);
  }
}

/* step_down(cooldown): STEPPED_DOWN then done; the other client takes over;
 * the node does not win again before the cooldown has passed. */
static void test_step_down_cooldown(void **state) {
  simba_client_t *a = open_live_client("el-step-down");
  simba_client_t *b = open_live_client("el-step-down");
  simba_election_t *ea, *eb;
  rec_t ra, rb;
  const int64_t cooldown = 3 * lease_ms();
  int64_t t0;
  char log[REC_MAX + 1];
  (void)state;
  rec_init(&ra, "step-a");
  rec_init(&rb, "step-b");
  ea = rec_start(&ra, a, "step");
  WAIT_ELECTED(&ra, 1);
  eb = rec_start(&rb, b, "step");

  CHECK_ERR(simba_election_step_down(ea, -1, rec_on_step_down_done, &ra), SIMBA_EINVAL, "cooldown");
  t0 = now_ms();
  CHECK_OK(simba_election_step_down(ea, cooldown, rec_on_step_down_done, &ra));
  ASSERT_EVENTUALLY(ald(&ra.sd_done) == 1);
  assert_int_equal(ald(&ra.sd_err), SIMBA_OK);
  rec_log(&ra, log, sizeof log);
  assert_string_equal(log, "ERS");
  assert_int_equal(rec_reason(&ra, 0), SIMBA_REVOKE_STEPPED_DOWN);

  /* b takes over; then b stops, so that only the cooldown keeps a out. */
  WAIT_ELECTED(&rb, 1);
  assert_true(rec_token(&rb, 0) > rec_token(&ra, 0));
  CHECK_OK(simba_election_stop_wait(eb, long_wait_ms()));

  WAIT_ELECTED(&ra, 2);
  {
    const int64_t again = ra.elected_at[1];
    if (again < t0 + cooldown) {
      print_error("re-elected %lld ms after the step-down, cooldown %lld ms\n",
                  (long long)(again - t0), (long long)cooldown);
      fail();
    }
  }
  assert_true(rec_token(&ra, 1) > rec_token(&rb, 0));
  rec_log(&ra, log, sizeof log);
  assert_string_equal(log, "ERSE");

  CHECK_OK(simba_election_stop_wait(ea, long_wait_ms()));
  assert_int_equal(rec_reason(&ra, 1), SIMBA_REVOKE_STOPPED);
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
  simba_election_free(ea);
  simba_election_free(eb);
  REC_CHECK(&ra);
  REC_CHECK(&rb);
  rec_destroy(&ra);
  rec_destroy(&rb);
}

/* A candidate that steps down does not contend during the cooldown either. */
static void test_step_down_candidate(void **state) {
  simba_client_t *a = open_live_client("el-step-cand");
  simba_client_t *b = open_live_client("el-step-cand");
  simba_election_t *ea, *eb;
  rec_t ra, rb;
  const int64_t cooldown = 3 * lease_ms();
  int64_t t0;
  char log[REC_MAX + 1];
  (void)state;
  rec_init(&ra, "step-cand-a");
  rec_init(&rb, "step-cand-b");
  ea = rec_start(&ra, a, "step-cand");
  WAIT_ELECTED(&ra, 1);
  eb = rec_start(&rb, b, "step-cand");
  t0 = now_ms();
  CHECK_OK(simba_election_step_down(eb, cooldown, rec_on_step_down_done, &rb));
  ASSERT_EVENTUALLY(ald(&rb.sd_done) == 1);
  rec_log(&rb, log, sizeof log);
  assert_string_equal(log, "S");
  CHECK_OK(simba_election_stop_wait(ea, long_wait_ms()));
  WAIT_ELECTED(&rb, 1);
  if (rb.elected_at[0] < t0 + cooldown) {
    print_error("candidate elected %lld ms after its step-down, cooldown %lld ms\n",
                (long long)(rb.elected_at[0] - t0), (long long)cooldown);
    fail();
  }
  assert_true(rec_token(&rb, 0) > rec_token(&ra, 0));
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
  simba_election_free(ea);
  simba_election_free(eb);
  REC_CHECK(&ra);
  REC_CHECK(&rb);
  rec_destroy(&ra);
  rec_destroy(&rb);
}

/* step_down(0) on the only candidate: revoked, then re-elected with a new term. */
static void test_step_down_zero_cooldown(void **state) {
  simba_client_t *c = open_live_client("el-step-zero");
  simba_election_t *e;
  simba_term_t *first;
  rec_t r;
  char log[REC_MAX + 1];
  (void)state;
  rec_init(&r, "step-zero");
  e = rec_start(&r, c, "step-zero");
  WAIT_ELECTED(&r, 1);
  first = rec_take_term(&r);
  CHECK_OK(simba_election_step_down(e, 0, NULL, NULL));
  WAIT_ELECTED(&r, 2);
  assert_true(rec_token(&r, 1) > rec_token(&r, 0));
  rec_log(&r, log, sizeof log);
  assert_string_equal(log, "ERE");
  /* The first term stays ended. */
  assert_false(simba_term_is_valid(first));
  assert_int_equal(simba_term_revoke_reason(first), SIMBA_REVOKE_STEPPED_DOWN);
  {
    simba_term_t *second = rec_take_term(&r);
    assert_ptr_not_equal(first, second);
    assert_true(simba_term_is_valid(second));
    simba_term_release(second);
  }
  simba_term_release(first);
  CHECK_OK(simba_election_stop(e, rec_on_done, &r));
  ASSERT_EVENTUALLY(ald(&r.done) == 1);
  rec_seal(&r);
  rec_log(&r, log, sizeof log);
  assert_string_equal(log, "ERERD");
  CHECK_OK(simba_client_close(c));
  simba_election_free(e);
  REC_CHECK(&r);
  rec_destroy(&r);
}

/* simba_election_free before the stop completed: the stop starts, and no
 * callback of that election runs afterwards. */
static void test_free_before_stop(void **state) {
  simba_client_t *a = open_live_client("el-free");
  simba_client_t *b = open_live_client("el-free");
  simba_election_t *ea, *eb;
  rec_t ra, rb, rq;
  int i;
  (void)state;
  rec_init(&ra, "free-a");
  rec_init(&rb, "free-b");
  ea = rec_start(&ra, a, "free");
  WAIT_ELECTED(&ra, 1);
  ASSERT_EVENTUALLY(ald(&ra.inside) == 0);
  eb = rec_start(&rb, b, "free");
  simba_election_free(ea);
  rec_seal(&ra);
  /* The stop started: b takes over. */
  WAIT_ELECTED(&rb, 1);
  assert_true(rec_token(&rb, 0) > rec_token(&ra, 0));

  /* Free right after start, again and again, racing the election. */
  rec_init(&rq, "free-quick");
  for (i = 0; i < 20; ++i) {
    /* A freed election stays started until its stop completes: a new name each time. */
    char qname[32];
    simba_election_t *q;
    snprintf(qname, sizeof qname, "free-quick-%d", i);
    q = rec_start(&rq, a, qname);
    if (i % 2) sleep_ms(i);
    simba_election_free(q);
  }
  rec_seal(&rq);
  sleep_ms(quiet_ms());
  CHECK_OK(simba_client_close(a));
  sleep_ms(quiet_ms());
  REC_CHECK_NO_PAIRS(&ra);
  REC_CHECK_NO_PAIRS(&rq);
  assert_int_equal(ald(&ra.revoked), 0);

  CHECK_OK(simba_election_stop_wait(eb, long_wait_ms()));
  simba_election_free(eb);
  CHECK_OK(simba_client_close(b));
  REC_CHECK(&rb);
  rec_destroy(&ra);
  rec_destroy(&rb);
  rec_destroy(&rq);
}

/* Two step-downs in a row, then a stop: each done after its revocation, in order. */
static void test_step_downs_then_stop(void **state) {
  simba_client_t *c = open_live_client("el-sd-stop");
  simba_election_t *e;
  rec_t r;
  int done2 = 0;
  char log[REC_MAX + 1];
  (void)state;
  rec_init(&r, "sd-stop");
  e = rec_start(&r, c, "sd-stop");
  WAIT_ELECTED(&r, 1);
  CHECK_OK(simba_election_step_down(e, long_wait_ms(), rec_on_step_down_done, &r));
  CHECK_OK(simba_election_step_down(e, long_wait_ms(), rec_on_step_down_done, &r));
  CHECK_OK(simba_election_stop(e, rec_on_done, &r));
  /* Stopping: no more step-downs, no second stop. */
  CHECK_ERR(simba_election_step_down(e, 0, count_done, &done2), SIMBA_ESTATE, NULL);
  CHECK_ERR(simba_election_stop(e, count_done, &done2), SIMBA_ESTATE, NULL);
  /* stop_wait joins the stop in progress. */
  CHECK_OK(simba_election_stop_wait(e, long_wait_ms()));
  assert_int_equal(ald(&r.done), 1);
  rec_seal(&r);
  rec_log(&r, log, sizeof log);
  assert_string_equal(log, "ERSSD");
  assert_int_equal(rec_reason(&r, 0), SIMBA_REVOKE_STEPPED_DOWN);
  CHECK_OK(simba_client_close(c));
  simba_election_free(e);
  assert_int_equal(done2, 0);
  REC_CHECK(&r);
  rec_destroy(&r);
}

/* Stop right after start, racing the first acquire: either nothing or a full
 * E R before done; never anything after done; the name is free after done. */
static void test_stop_races_acquire(void **state) {
  simba_client_t *c = open_live_client("el-stop-race");
  simba_client_t *d = open_live_client("el-stop-race");
  int i;
  (void)state;
  for (i = 0; i < 30; ++i) {
    simba_election_t *e;
    simba_term_t *t = NULL;
    rec_t r;
    char log[REC_MAX + 1];
    rec_init(&r, "stop-race");
    e = rec_start(&r, c, "race");
    if (i % 3 == 1) sleep_ms(i % 7);
    CHECK_OK(simba_election_stop(e, rec_on_done, &r));
    ASSERT_EVENTUALLY(ald(&r.done) == 1);
    rec_seal(&r);
    rec_log(&r, log, sizeof log);
    if (strcmp(log, "D") != 0 && strcmp(log, "ERD") != 0) {
      print_error("round %d: callbacks %s\n", i, log);
      fail();
    }
    /* Whatever the first attempt won was released. */
    CHECK_OK(simba_lock_try_acquire(&t, d, "race"));
    CHECK_OK(simba_lock_release(t));
    simba_election_free(e);
    REC_CHECK(&r);
    rec_destroy(&r);
  }
  CHECK_OK(simba_client_close(c));
  CHECK_OK(simba_client_close(d));
}

/* simba_election_free from the election's own on_elected: the running callback
 * finishes, nothing runs afterwards, and the lease is given up. */
static simba_election_t *self_freed;
static void free_self(rec_t *r, simba_term_t *t) {
  (void)t;
  WAIT_UNTIL(aldp((void **)&self_freed) != NULL, long_wait_ms());
  simba_election_free((simba_election_t *)aldp((void **)&self_freed));
  rec_seal(r);
}

static void test_free_from_own_callback(void **state) {
  simba_client_t *a = open_live_client("el-free-self");
  simba_client_t *b = open_live_client("el-free-self");
  simba_election_t *eb;
  rec_t ra, rb;
  (void)state;
  rec_init(&ra, "free-self-a");
  rec_init(&rb, "free-self-b");
  ra.on_elected_hook = free_self;
  astp((void **)&self_freed, rec_start(&ra, a, "free-self"));
  WAIT_ELECTED(&ra, 1);
  eb = rec_start(&rb, b, "free-self");
  WAIT_ELECTED(&rb, 1);
  assert_true(rec_token(&rb, 0) > rec_token(&ra, 0));
  sleep_ms(quiet_ms());
  CHECK_OK(simba_client_close(a));
  assert_int_equal(ald(&ra.calls), 1);
  CHECK_OK(simba_election_stop_wait(eb, long_wait_ms()));
  simba_election_free(eb);
  CHECK_OK(simba_client_close(b));
  REC_CHECK_NO_PAIRS(&ra);
  REC_CHECK(&rb);
  rec_destroy(&ra);
  rec_destroy(&rb);
}

/* A listener without callbacks is allowed. */
static void test_null_callbacks(void **state) {
  simba_client_t *a = open_live_client("el-null-cb");
  simba_client_t *b = open_live_client("el-null-cb");
  simba_election_t *ea, *eb;
  simba_listener_t quiet = {NULL, NULL, NULL};
  rec_t rb;
  (void)state;
  rec_init(&rb, "null-cb-b");
  CHECK_OK(simba_election_start(&ea, a, "null-cb", &quiet));
  /* a wins silently: the snapshot says so. */
  ASSERT_EVENTUALLY(snapshot_has(a, "\"leader\""));
  eb = rec_start(&rb, b, "null-cb");
  CHECK_OK(simba_election_stop_wait(ea, long_wait_ms()));
  WAIT_ELECTED(&rb, 1);
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
  simba_election_free(ea);
  simba_election_free(eb);
  REC_CHECK(&rb);
  rec_destroy(&rb);
}

/* Many elections on a pool of several threads, churned by step-downs: the
 * callbacks of each election never overlap, pair up, and tokens increase;
 * never two valid leaders of a name. */
#define CH_NAMES 4

static void test_churn(void **state) {
  simba_client_t *cl[2];
  simba_election_t *e[2][CH_NAMES];
  rec_t r[2][CH_NAMES];
  simba_config_t *cfg = test_config(lease_ms());
  char name[32];
  int i, k, n, round = 0;
  int64_t until;
  (void)state;
  CHECK_OK(simba_config_set(cfg, "callback.threads", "4"));
  for (k = 0; k < 2; ++k) {
    CHECK_OK(simba_client_open(&cl[k], "memory://el-churn", cfg));
    CHECK_OK(simba_client_wait_live(cl[k], long_wait_ms()));
  }
  simba_config_free(cfg);
  for (n = 0; n < CH_NAMES; ++n) {
    snprintf(name, sizeof name, "churn-%d", n);
    for (k = 0; k < 2; ++k) {
      rec_init(&r[k][n], "churn");
      e[k][n] = rec_start(&r[k][n], cl[k], name);
    }
  }
  until = now_ms() + 6 * lease_ms();
  while (now_ms() < until) {
    for (n = 0; n < CH_NAMES; ++n) {
      assert_false(two_valid_leaders(&r[0][n], &r[1][n]));
      assert_false(two_valid_leaders(&r[1][n], &r[0][n]));
    }
    if (++round % 5 == 0) {
      k = round % 2;
      n = (round / 2) % CH_NAMES;
      CHECK_OK(simba_election_step_down(e[k][n], 0, NULL, NULL));
    }
    sleep_ms(3);
  }
  for (n = 0; n < CH_NAMES; ++n) {
    for (k = 0; k < 2; ++k) CHECK_OK(simba_election_stop(e[k][n], rec_on_done, &r[k][n]));
  }
  for (n = 0; n < CH_NAMES; ++n) {
    for (k = 0; k < 2; ++k) {
      ASSERT_EVENTUALLY(ald(&r[k][n].done) == 1);
      rec_seal(&r[k][n]);
    }
  }
  for (k = 0; k < 2; ++k) CHECK_OK(simba_client_close(cl[k]));
  for (n = 0; n < CH_NAMES; ++n) {
    int total = 0;
    for (k = 0; k < 2; ++k) {
      rec_t *x = &r[k][n];
      REC_CHECK(x);
      total += x->ntokens;
      for (i = 1; i < x->ntokens; ++i) assert_true(x->tokens[i] > x->tokens[i - 1]);
      /* Tokens of one name are never reused across the two clients. */
      for (i = 0; i < x->ntokens; ++i) {
        int j;
        for (j = 0; j < r[1 - k][n].ntokens; ++j) {
          assert_true(x->tokens[i] != r[1 - k][n].tokens[j]);
        }
      }
      simba_election_free(e[k][n]);
    }
    assert_true(total >= 2); /* the step-downs moved leadership */
  }
  for (n = 0; n < CH_NAMES; ++n) {
    for (k = 0; k < 2; ++k) rec_destroy(&r[k][n]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_start_arguments),
      cmocka_unit_test(test_one_leader_then_failover),
      cmocka_unit_test(test_start_same_name_twice),
      cmocka_unit_test(test_stop_candidate),
      cmocka_unit_test(test_stop_wait),
      cmocka_unit_test(test_step_down_cooldown),
      cmocka_unit_test(test_step_down_candidate),
      cmocka_unit_test(test_step_down_zero_cooldown),
      cmocka_unit_test(test_step_downs_then_stop),
      cmocka_unit_test(test_stop_wait_races_step_down),
      cmocka_unit_test(test_stop_races_acquire),
      cmocka_unit_test(test_free_before_stop),
      cmocka_unit_test(test_free_from_own_callback),
      cmocka_unit_test(test_null_callbacks),
      cmocka_unit_test(test_churn),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

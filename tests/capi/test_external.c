/*
 * EXTERNAL loop mode: the host's poll() loop drives the client through
 * simba_client_fd / simba_client_timeout_ms / simba_client_process.
 */
#include <poll.h>

#include "capi_test.h"

static pthread_t host_thread;
/* Host thread only: set around simba_client_process and around the blocking
 * calls that run the loop on the host thread (close, stop_wait, wait_live):
 * callbacks run on the host thread, inside one of those. */
static int in_process;

#define HOST_CALL(call) (in_process = 1, host_rc_ = (call), in_process = 0, host_rc_)
static int host_rc_;

static simba_client_t *open_external(const char *store) {
  return open_client_kv(store, "loop.mode", "external");
}

/* A host loop over `n` clients: poll their fds with the smallest timeout, then
 * process each. Stops when done(ud) holds; 0 if `timeout` ms passed first. */
static int drive(simba_client_t **cs, int n, int (*done)(void *), void *ud, int64_t timeout) {
  const int64_t deadline = now_ms() + timeout;
  struct pollfd p[8];
  int i;
  assert_true(n <= 8);
  while (!done(ud)) {
    int64_t wait = deadline - now_ms();
    if (wait <= 0) return 0;
    for (i = 0; i < n; ++i) {
      const int fd = simba_client_fd(cs[i]);
      const int64_t to = simba_client_timeout_ms(cs[i]);
      assert_true(fd >= 0);
      assert_true(to >= -1);
      if (to >= 0 && to < wait) wait = to;
      p[i].fd = fd;
      p[i].events = POLLIN;
      p[i].revents = 0;
    }
    assert_true(poll(p, (nfds_t)n, (int)wait) >= 0);
    for (i = 0; i < n; ++i) {
      int rc;
      in_process = 1;
      rc = simba_client_process(cs[i]);
      in_process = 0;
      CHECK_OK(rc);
    }
  }
  return 1;
}

static int never(void *ud) {
  (void)ud;
  return 0;
}

static int flag_set(void *ud) { return ald((int *)ud) != 0; }

/* ud: rec_t[2]. */
static int any_elected(void *ud) {
  rec_t *r = (rec_t *)ud;
  return ald(&r[0].elected) + ald(&r[1].elected) > 0;
}

/* Callbacks: on the host thread, inside simba_client_process. */
typedef struct {
  int wrong_place;  /* atomic */
  int rc_wait_live; /* in on_elected */
  simba_client_t *c;
} where_t;

static void check_place(rec_t *r, simba_term_t *t) {
  where_t *w = (where_t *)r->hook_ud;
  (void)t;
  if (!pthread_equal(pthread_self(), host_thread) || !in_process) ainc(&w->wrong_place);
  if (w->c) w->rc_wait_live = simba_client_wait_live(w->c, 1000);
}

static void check_place_revoked(rec_t *r, simba_term_t *t) {
  where_t *w = (where_t *)r->hook_ud;
  (void)t;
  if (!pthread_equal(pthread_self(), host_thread) || !in_process) ainc(&w->wrong_place);
}

static int event_wrong_place, event_calls;
static void event_place(void *ud, simba_event_type_t type, const char *detail) {
  (void)ud;
  (void)type;
  (void)detail;
  ainc(&event_calls);
  if (!pthread_equal(pthread_self(), host_thread) || !in_process) ainc(&event_wrong_place);
}

static void test_external_basics(void **state) {
  simba_client_t *c = open_external("ext-basics");
  int64_t to;
  (void)state;
  assert_true(simba_client_fd(c) >= 0);
  to = simba_client_timeout_ms(c);
  assert_true(to >= -1);
  /* Nothing processed yet: not live, and a check does not wait. */
  assert_int_equal(simba_client_status(c), SIMBA_SESSION_OPENING);
  CHECK_ERR(simba_client_wait_live(c, 0), SIMBA_ETIMEDOUT, NULL);
  /* From the host thread, outside process: wait_live runs the loop itself. */
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  assert_int_equal(simba_client_status(c), SIMBA_SESSION_LIVE);
  /* Processing with nothing ready is fine and never blocks. */
  {
    const int64_t t0 = now_ms();
    int i;
    for (i = 0; i < 100; ++i) CHECK_OK(simba_client_process(c));
    assert_true(now_ms() - t0 < lease_ms());
  }
  /* Keep-alives: driving for a few leases keeps the session live. */
  drive(&c, 1, never, NULL, 3 * lease_ms());
  assert_int_equal(simba_client_status(c), SIMBA_SESSION_LIVE);
  CHECK_OK(simba_client_close(c));
}

static void test_external_election(void **state) {
  simba_client_t *cs[2];
  simba_election_t *e[2];
  rec_t r[2];
  where_t w[2];
  rec_t *leader, *follower;
  simba_election_t *el, *ef;
  char log[REC_MAX + 1];
  int k;
  (void)state;
  event_wrong_place = event_calls = 0;
  for (k = 0; k < 2; ++k) {
    cs[k] = open_external("ext-election");
    memset(&w[k], 0, sizeof w[k]);
    w[k].c = cs[k];
    rec_init(&r[k], k ? "ext-b" : "ext-a");
    r[k].on_elected_hook = check_place;
    r[k].on_revoked_hook = check_place_revoked;
    r[k].hook_ud = &w[k];
    CHECK_OK(simba_client_on_event(cs[k], event_place, NULL));
    e[k] = rec_start(&r[k], cs[k], "ext");
  }
  /* Driving the loops elects one of them. */
  assert_true(drive(cs, 2, any_elected, r, long_wait_ms()));
  /* For a few leases: still exactly one leader, and its term stays valid. */
  drive(cs, 2, never, NULL, 3 * lease_ms());
  assert_int_equal(ald(&r[0].elected) + ald(&r[1].elected), 1);
  assert_int_equal(ald(&r[0].revoked) + ald(&r[1].revoked), 0);
  k = ald(&r[0].elected) ? 0 : 1;
  leader = &r[k];
  follower = &r[1 - k];
  el = e[k];
  ef = e[1 - k];
  {
    simba_term_t *t = rec_take_term(leader);
    assert_int_equal(simba_term_is_valid(t), 1);
    simba_term_release(t);
  }
  assert_int_equal(w[k].rc_wait_live, SIMBA_EWOULDBLOCK);

  /* Stop the leader from the host thread; drive until done. */
  CHECK_OK(simba_election_stop(el, rec_on_done, leader));
  assert_true(drive(cs, 2, flag_set, &leader->done, long_wait_ms()));
  rec_log(leader, log, sizeof log);
  assert_string_equal(log, "ERD");
  rec_seal(leader);
  assert_true(drive(cs, 2, flag_set, &follower->elected, long_wait_ms()));
  assert_true(rec_token(follower, 0) > rec_token(leader, 0));

  /* stop_wait from the host thread runs the loop itself. */
  CHECK_OK(HOST_CALL(simba_election_stop_wait(ef, long_wait_ms())));
  assert_int_equal(ald(&follower->revoked), 1);
  assert_int_equal(rec_reason(follower, 0), SIMBA_REVOKE_STOPPED);
  for (k = 0; k < 2; ++k) {
    CHECK_OK(HOST_CALL(simba_client_close(cs[k])));
    simba_election_free(e[k]);
    REC_CHECK(&r[k]);
    assert_int_equal(ald(&w[k].wrong_place), 0);
    rec_destroy(&r[k]);
  }
  assert_true(ald(&event_calls) > 0);
  assert_int_equal(ald(&event_wrong_place), 0);
}

/* Close with an elected term: the close (on the host thread) runs the loop
 * to the end; the term is revoked with STOPPED inside the close. */
static void test_external_close_revokes(void **state) {
  simba_client_t *c = open_external("ext-close");
  simba_election_t *e;
  rec_t r;
  where_t w;
  (void)state;
  memset(&w, 0, sizeof w);
  rec_init(&r, "ext-close");
  r.on_elected_hook = check_place;
  r.hook_ud = &w;
  CHECK_OK(HOST_CALL(simba_client_wait_live(c, long_wait_ms())));
  e = rec_start(&r, c, "close");
  assert_true(drive(&c, 1, flag_set, &r.elected, long_wait_ms()));
  CHECK_OK(HOST_CALL(simba_client_close(c)));
  assert_int_equal(ald(&r.revoked), 1);
  assert_int_equal(rec_reason(&r, 0), SIMBA_REVOKE_STOPPED);
  rec_seal(&r);
  CHECK_ERR(simba_election_stop(e, NULL, NULL), SIMBA_ESTATE, NULL);
  simba_election_free(e);
  REC_CHECK(&r);
  assert_int_equal(ald(&w.wrong_place), 0);
  rec_destroy(&r);
}

/* Calls from another thread are queued to the host's loop and answered once it
 * processes. */
typedef struct {
  simba_client_t *c;
  simba_election_t *e;
  rec_t *r;
  int rc_start;
  int snapshot_ok;
  int done; /* atomic */
} other_t;

static void *other_thread(void *arg) {
  other_t *o = (other_t *)arg;
  simba_listener_t l = rec_listener(o->r);
  char *js;
  o->rc_start = simba_election_start(&o->e, o->c, "from-other", &l);
  js = simba_client_snapshot_json(o->c);
  o->snapshot_ok = js && json_valid(js) && strstr(js, "from-other") != NULL;
  simba_free(js);
  ast(&o->done, 1);
  return NULL;
}

static void test_external_calls_from_other_thread(void **state) {
  simba_client_t *c = open_external("ext-other");
  pthread_t th;
  other_t o;
  rec_t r;
  (void)state;
  memset(&o, 0, sizeof o);
  rec_init(&r, "ext-other");
  o.c = c;
  o.r = &r;
  assert_int_equal(pthread_create(&th, NULL, other_thread, &o), 0);
  assert_true(drive(&c, 1, flag_set, &o.done, long_wait_ms()));
  pthread_join(th, NULL);
  CHECK_OK(o.rc_start);
  assert_true(o.snapshot_ok);
  assert_true(drive(&c, 1, flag_set, &r.elected, long_wait_ms()));
  CHECK_OK(simba_election_stop_wait(o.e, long_wait_ms()));
  CHECK_OK(simba_client_close(c));
  simba_election_free(o.e);
  REC_CHECK(&r);
  rec_destroy(&r);
}

/* wait_live from another thread honours its timeout even while the host does
 * not process (it cannot become live then). */
typedef struct {
  simba_client_t *c;
  int rc;
  int64_t took;
  int done; /* atomic */
} live_t;

static void *wait_live_thread(void *arg) {
  live_t *l = (live_t *)arg;
  const int64_t t0 = now_ms();
  l->rc = simba_client_wait_live(l->c, 100);
  l->took = now_ms() - t0;
  ast(&l->done, 1);
  return NULL;
}

static void test_external_wait_live_timeout_from_other_thread(void **state) {
  simba_client_t *c = open_external("ext-live-timeout");
  pthread_t th;
  live_t l;
  (void)state;
  memset(&l, 0, sizeof l);
  l.c = c;
  assert_int_equal(pthread_create(&th, NULL, wait_live_thread, &l), 0);
  /* The host is busy elsewhere for a while. */
  WAIT_UNTIL(ald(&l.done), 2000 * tscale());
  assert_true(ald(&l.done));
  pthread_join(th, NULL);
  assert_int_equal(l.rc, SIMBA_ETIMEDOUT);
  assert_true(l.took >= 90);
  CHECK_OK(simba_client_close(c));
}

/* Locks from the host thread: the blocking calls run the loop themselves. */
static void test_external_locks(void **state) {
  simba_client_t *c = open_external("ext-locks");
  simba_client_t *d = open_live_client("ext-locks"); /* a THREAD-mode neighbour */
  simba_term_t *t = NULL, *u = NULL;
  uint64_t token;
  (void)state;
  CHECK_OK(simba_lock_acquire(&t, c, "ext-lock", long_wait_ms()));
  token = simba_term_token(t);
  assert_true(token > 0);
  CHECK_ERR(simba_lock_try_acquire(&u, d, "ext-lock"), SIMBA_EBUSY, NULL);
  CHECK_ERR(simba_lock_try_acquire(&u, c, "ext-lock"), SIMBA_EBUSY, NULL);
  CHECK_OK(simba_lock_release(t));
  /* Free once release returned. */
  CHECK_OK(simba_lock_try_acquire(&u, d, "ext-lock"));
  assert_true(simba_term_token(u) > token);
  CHECK_OK(simba_lock_release(u));
  CHECK_OK(simba_lock_try_acquire(&t, c, "ext-lock"));
  CHECK_OK(simba_lock_release(t));
  CHECK_OK(simba_client_close(c));
  CHECK_OK(simba_client_close(d));
}

/* simba_client_close from a callback of an EXTERNAL-mode client (ADR 0003):
 * it starts the close and returns SIMBA_EWOULDBLOCK; the host finishes the
 * close with another simba_client_close outside simba_client_process. */
typedef struct {
  simba_client_t *c;
  int rc;  /* atomic */
  int ran; /* atomic */
} ext_closer_t;

static void close_inside_process(rec_t *r, simba_term_t *t) {
  ext_closer_t *x = (ext_closer_t *)r->hook_ud;
  (void)t;
  ast(&x->rc, simba_client_close(x->c));
  ast(&x->ran, 1);
}

static void test_external_close_from_callback(void **state) {
  simba_client_t *c = open_external("ext-close-cb");
  simba_election_t *e;
  ext_closer_t x;
  rec_t r;
  (void)state;
  memset(&x, 0, sizeof x);
  x.c = c;
  rec_init(&r, "ext-close-cb");
  r.on_elected_hook = close_inside_process;
  r.hook_ud = &x;
  e = rec_start(&r, c, "close-cb");
  assert_true(drive(&c, 1, flag_set, &x.ran, long_wait_ms()));
  assert_int_equal(ald(&x.rc), SIMBA_EWOULDBLOCK);
  check_last_error_("close", __FILE__, __LINE__);
  /* The client is closing: calls that need it answer ECLOSED. */
  CHECK_ERR(HOST_CALL(simba_client_wait_live(c, 100)), SIMBA_ECLOSED, NULL);
  {
    simba_election_t *e2 = NULL;
    simba_listener_t quiet = {NULL, NULL, NULL};
    CHECK_ERR(simba_election_start(&e2, c, "after-close", &quiet), SIMBA_ECLOSED, NULL);
  }
  /* Processing goes on until the close is done; then process says ECLOSED. */
  {
    int rc = SIMBA_OK;
    const int64_t give_up = now_ms() + long_wait_ms();
    while (rc == SIMBA_OK && now_ms() < give_up) {
      struct pollfd p;
      p.fd = simba_client_fd(c);
      p.events = POLLIN;
      p.revents = 0;
      if (p.fd >= 0) poll(&p, 1, 10);
      rc = HOST_CALL(simba_client_process(c));
    }
    CHECK_ERR(rc, SIMBA_ECLOSED, NULL);
  }
  assert_int_equal(simba_client_status(c), SIMBA_SESSION_CLOSED);
  CHECK_OK(HOST_CALL(simba_client_close(c)));
  assert_int_equal(ald(&r.revoked), 1);
  assert_int_equal(rec_reason(&r, 0), SIMBA_REVOKE_STOPPED);
  rec_seal(&r);
  simba_election_free(e);
  REC_CHECK(&r);
  rec_destroy(&r);
}

/* simba_client_close_async of an EXTERNAL-mode client (1.5): it starts the
 * close and returns; done runs once, last, inside simba_client_process, which
 * returns SIMBA_ECLOSED from then on; simba_client_close then frees at once. */
typedef struct {
  simba_client_t *c;
  rec_t *r;
  int rc_async;       /* from the callback, when started there */
  int calls;          /* atomic: done's */
  int err;            /* done's */
  int wrong_place;    /* done off the host thread or outside process */
  int revoked_before; /* the election's on_revoked calls when done ran */
  int close_in_done;  /* simba_client_close inside done: EWOULDBLOCK, frees nothing */
} ext_async_t;

static void ext_async_done(void *ud, int err) {
  ext_async_t *x = (ext_async_t *)ud;
  ainc(&x->calls);
  x->err = err;
  if (!pthread_equal(pthread_self(), host_thread) || !in_process) ++x->wrong_place;
  x->revoked_before = ald(&x->r->revoked);
  x->close_in_done = simba_client_close(x->c);
}

static void close_async_inside_process(rec_t *r, simba_term_t *t) {
  ext_async_t *x = (ext_async_t *)r->hook_ud;
  (void)t;
  x->rc_async = simba_client_close_async(x->c, ext_async_done, x);
}

static void ext_close_async(int from_callback) {
  simba_client_t *c = open_external(from_callback ? "ext-async-cb" : "ext-async");
  simba_election_t *e;
  ext_async_t x;
  rec_t r;
  memset(&x, 0, sizeof x);
  x.c = c;
  x.r = &r;
  x.rc_async = -100;
  rec_init(&r, "ext-async");
  r.hook_ud = &x;
  if (from_callback) r.on_elected_hook = close_async_inside_process;
  e = rec_start(&r, c, "close-async");
  assert_true(drive(&c, 1, flag_set, &r.elected, long_wait_ms()));
  if (from_callback) {
    assert_int_equal(x.rc_async, SIMBA_OK);
  } else {
    CHECK_OK(simba_client_close_async(c, ext_async_done, &x));
    /* Nothing of the close ran inside the call. */
    assert_int_equal(ald(&r.revoked), 0);
    CHECK_ERR(simba_client_close_async(c, NULL, NULL), SIMBA_ECLOSED, "already");
  }
  assert_int_equal(ald(&x.calls), 0);
  CHECK_ERR(HOST_CALL(simba_client_wait_live(c, 100)), SIMBA_ECLOSED, NULL);
  CHECK_ERR(process_until_not_ok(c, &in_process), SIMBA_ECLOSED, NULL);
  assert_int_equal(ald(&x.calls), 1);
  assert_int_equal(x.err, SIMBA_OK); /* memory:// confirmed the close */
  assert_int_equal(x.wrong_place, 0);
  assert_int_equal(x.revoked_before, 1); /* done came last */
  assert_int_equal(x.close_in_done, SIMBA_EWOULDBLOCK);
  assert_int_equal(rec_reason(&r, 0), SIMBA_REVOKE_STOPPED);
  assert_int_equal(simba_client_status(c), SIMBA_SESSION_CLOSED);
  assert_int_equal(simba_client_timeout_ms(c), -1);
  CHECK_ERR(HOST_CALL(simba_client_process(c)), SIMBA_ECLOSED, NULL);
  assert_int_equal(ald(&x.calls), 1);
  rec_seal(&r);
  CHECK_OK(HOST_CALL(simba_client_close(c))); /* frees, at once */
  simba_election_free(e);
  REC_CHECK(&r);
  rec_destroy(&r);
}

static void test_external_close_async_from_the_host_thread(void **state) {
  (void)state;
  ext_close_async(0);
}

static void test_external_close_async_from_a_callback(void **state) {
  (void)state;
  ext_close_async(1);
}

/* A blocking simba_client_close before done ran finishes the close and runs
 * done before it returns; off the host thread close_async is refused. */
typedef struct {
  simba_client_t *c;
  int rc;
} ext_off_t;

static void *close_async_off_thread(void *arg) {
  ext_off_t *o = (ext_off_t *)arg;
  o->rc = simba_client_close_async(o->c, NULL, NULL);
  return NULL;
}

static void test_external_close_async_then_close(void **state) {
  simba_client_t *c = open_external("ext-async-close");
  ext_async_t x;
  rec_t r;
  ext_off_t o;
  pthread_t th;
  (void)state;
  memset(&x, 0, sizeof x);
  rec_init(&r, "ext-async-close");
  x.c = c;
  x.r = &r;
  CHECK_OK(HOST_CALL(simba_client_wait_live(c, long_wait_ms())));
  o.c = c;
  o.rc = 0;
  assert_int_equal(pthread_create(&th, NULL, close_async_off_thread, &o), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(o.rc, SIMBA_EWOULDBLOCK);
  assert_int_equal(simba_client_status(c), SIMBA_SESSION_LIVE); /* nothing closed */
  CHECK_OK(simba_client_close_async(c, ext_async_done, &x));
  CHECK_OK(HOST_CALL(simba_client_close(c)));
  assert_int_equal(ald(&x.calls), 1);
  assert_int_equal(x.err, SIMBA_OK);
  assert_int_equal(x.close_in_done, SIMBA_EWOULDBLOCK);
  rec_destroy(&r);
}

/* A partition group on an EXTERNAL-mode client: its manager thread needs the
 * loop (reads, locks, stops), which only the host drives. simba_task_close on
 * the host thread drives the loop while it waits for the manager to leave;
 * joining that thread without driving the loop would deadlock. */
typedef struct {
  int running; /* atomic: partition works running */
  int ran;     /* atomic: partition works started */
} ext_group_t;

static void ext_group_work(void *ud, simba_term_t *t) {
  ext_group_t *g = (ext_group_t *)ud;
  ainc(&g->running);
  ainc(&g->ran);
  while (simba_term_wait_revoked(t, 1000) != SIMBA_OK) {
  }
  __atomic_sub_fetch(&g->running, 1, __ATOMIC_SEQ_CST);
}

static int ext_group_all_running(void *ud) { return ald(&((ext_group_t *)ud)->running) == 3; }

static void test_external_group_close(void **state) {
  simba_client_t *c = open_external("ext-group");
  simba_task_t *task = NULL;
  ext_group_t g = {0, 0};
  (void)state;
  CHECK_OK(simba_group_join(&task, c, "ext.group", 3, ext_group_work, &g));
  assert_true(drive(&c, 1, ext_group_all_running, &g, long_wait_ms()));
  CHECK_OK(HOST_CALL(simba_task_close(task))); /* returns: every partition handed over */
  assert_int_equal(ald(&g.running), 0);
  assert_int_equal(ald(&g.ran), 3);
  CHECK_OK(HOST_CALL(simba_client_close(c)));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_external_basics),
      cmocka_unit_test(test_external_election),
      cmocka_unit_test(test_external_close_revokes),
      cmocka_unit_test(test_external_calls_from_other_thread),
      cmocka_unit_test(test_external_wait_live_timeout_from_other_thread),
      cmocka_unit_test(test_external_locks),
      cmocka_unit_test(test_external_close_from_callback),
      cmocka_unit_test(test_external_group_close),
      cmocka_unit_test(test_external_close_async_from_the_host_thread),
      cmocka_unit_test(test_external_close_async_from_a_callback),
      cmocka_unit_test(test_external_close_async_then_close),
  };
  host_thread = pthread_self();
  return cmocka_run_group_tests(tests, NULL, NULL);
}

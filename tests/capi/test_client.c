/*
 * Clients and sessions: open, wait_live, status, snapshot_json, on_event,
 * close; the NULL and wrong-mode cases of every client function.
 */
#include "capi_test.h"

/* ------------------------------------------------------------------------- */
/* An event sink that records everything. */

#define EV_MAX 64

typedef struct {
  pthread_mutex_t mu;
  int types[EV_MAX];
  char *details[EV_MAX];
  int n;
  int calls;      /* atomic */
  int inside;     /* atomic */
  int overlap;    /* atomic */
  int bad_json;   /* atomic */
  int sealed;     /* atomic: set once close returned */
  int after_seal; /* atomic */
} events_t;

static void ev_init(events_t *ev) {
  memset(ev, 0, sizeof *ev);
  pthread_mutex_init(&ev->mu, NULL);
}

static void ev_destroy(events_t *ev) {
  int i;
  for (i = 0; i < ev->n; ++i) free(ev->details[i]);
  pthread_mutex_destroy(&ev->mu);
}

static void ev_sink(void *ud, simba_event_type_t type, const char *detail) {
  events_t *ev = (events_t *)ud;
  if (axchg(&ev->inside, 1) != 0) ainc(&ev->overlap);
  if (ald(&ev->sealed)) ainc(&ev->after_seal);
  if (!detail || !json_valid(detail)) ainc(&ev->bad_json);
  pthread_mutex_lock(&ev->mu);
  if (ev->n < EV_MAX) {
    ev->types[ev->n] = (int)type;
    ev->details[ev->n] = detail ? strdup(detail) : NULL;
    ev->n++;
  }
  pthread_mutex_unlock(&ev->mu);
  ainc(&ev->calls);
  ast(&ev->inside, 0);
}

/* Index of the first event of `type`, or -1. */
static int ev_find(events_t *ev, int type) {
  int i, at = -1;
  pthread_mutex_lock(&ev->mu);
  for (i = 0; i < ev->n; ++i) {
    if (ev->types[i] == type) {
      at = i;
      break;
    }
  }
  pthread_mutex_unlock(&ev->mu);
  return at;
}

/* ------------------------------------------------------------------------- */

static void test_open_wait_live_status(void **state) {
  simba_client_t *c = NULL;
  (void)state;
  CHECK_OK(simba_client_open(&c, "memory://cl-live", NULL));
  assert_non_null(c);
  {
    const simba_session_status_t st = simba_client_status(c);
    assert_true(st == SIMBA_SESSION_OPENING || st == SIMBA_SESSION_LIVE);
  }
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  assert_int_equal(simba_client_status(c), SIMBA_SESSION_LIVE);
  /* Live already: 0 and negative timeouts return at once. */
  CHECK_OK(simba_client_wait_live(c, 0));
  CHECK_OK(simba_client_wait_live(c, -1));
  CHECK_OK(simba_client_close(c));
}

static void test_null_client(void **state) {
  (void)state;
  CHECK_ERR(simba_client_wait_live(NULL, 0), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_client_wait_live(NULL, 100), SIMBA_EINVAL, "NULL");
  assert_int_equal(simba_client_status(NULL), SIMBA_SESSION_CLOSED);
  assert_null(simba_client_snapshot_json(NULL));
  check_last_error_("NULL", __FILE__, __LINE__);
  CHECK_ERR(simba_client_on_event(NULL, ev_sink, NULL), SIMBA_EINVAL, "NULL");
  assert_int_equal(simba_client_fd(NULL), -1);
  assert_int_equal(simba_client_timeout_ms(NULL), -1);
  CHECK_ERR(simba_client_process(NULL), SIMBA_EINVAL, "NULL");
  assert_int_equal(simba_client_close(NULL), SIMBA_OK);
}

static void test_thread_mode_has_no_external_loop(void **state) {
  simba_client_t *c = open_live_client("cl-thread-mode");
  (void)state;
  assert_int_equal(simba_client_fd(c), -1);
  CHECK_ERR(simba_client_process(c), SIMBA_EINVAL, "external");
  assert_int_equal(simba_client_status(c), SIMBA_SESSION_LIVE);
  CHECK_OK(simba_client_close(c));
}

static void test_snapshot_json(void **state) {
  simba_client_t *c = open_client_kv("cl-snapshot", "client.name", "snap-client-7");
  simba_election_t *e;
  simba_term_t *lock = NULL;
  char id[256];
  char *js;
  rec_t r;
  (void)state;
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  rec_init(&r, "snapshot");
  e = rec_start(&r, c, "snap-election");
  WAIT_ELECTED(&r, 1);
  CHECK_OK(simba_lock_acquire(&lock, c, "snap-lock", long_wait_ms()));

  js = simba_client_snapshot_json(c);
  assert_non_null(js);
  if (!json_valid(js)) {
    print_error("not JSON: %s\n", js ? js : "(null)");
    fail();
  }
  assert_non_null(strstr(js, "\"LIVE\""));
  assert_non_null(strstr(js, "snap-client-7"));
  assert_non_null(strstr(js, "\"snap-election\""));
  assert_non_null(strstr(js, "\"snap-lock\""));
  assert_non_null(strstr(js, "\"keep_alives\""));
  assert_non_null(strstr(js, "\"acquires\""));
  assert_non_null(strstr(js, "\"releases\""));
  assert_non_null(strstr(js, "\"remaining_ms\""));
  assert_non_null(strstr(js, "\"renew_period_ms\""));
  assert_non_null(strstr(js, "\"lease_shortened\""));
  /* The session id is there and not empty. */
  assert_true(json_find_string(js, "id", id, sizeof id));
  assert_true(strlen(id) > 0);
  simba_free(js);

  CHECK_OK(simba_lock_release(lock));
  CHECK_OK(simba_election_stop_wait(e, long_wait_ms()));
  CHECK_OK(simba_client_close(c));
  simba_election_free(e);
  REC_CHECK(&r);
  rec_destroy(&r);
}

/* Two clients of one store have two sessions. */
static void test_two_clients_two_sessions(void **state) {
  simba_client_t *a = open_live_client("cl-two-sessions");
  simba_client_t *b = open_live_client("cl-two-sessions");
  char ida[256], idb[256];
  char *ja = simba_client_snapshot_json(a);
  char *jb = simba_client_snapshot_json(b);
  (void)state;
  assert_non_null(ja);
  assert_non_null(jb);
  assert_true(json_find_string(ja, "id", ida, sizeof ida));
  assert_true(json_find_string(jb, "id", idb, sizeof idb));
  assert_string_not_equal(ida, idb);
  simba_free(ja);
  simba_free(jb);
  CHECK_OK(simba_client_close(a));
  CHECK_OK(simba_client_close(b));
}

static void test_events(void **state) {
  simba_client_t *c = NULL;
  simba_config_t *cfg = test_config(lease_ms());
  events_t ev;
  char id[256], *js;
  int opened, closed, before;
  (void)state;
  ev_init(&ev);
  CHECK_OK(simba_client_open(&c, "memory://cl-events", cfg));
  simba_config_free(cfg);
  /* Registered after open: SESSION_OPENED may already have gone by. */
  CHECK_OK(simba_client_on_event(c, ev_sink, &ev));
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  js = simba_client_snapshot_json(c);
  assert_non_null(js);
  assert_true(json_find_string(js, "id", id, sizeof id));
  simba_free(js);
  /* A sink can be replaced by itself, and keep-alives keep the session live. */
  CHECK_OK(simba_client_on_event(c, ev_sink, &ev));
  WAIT_UNTIL(0, lease_ms()); /* a couple of keep-alives (not an assertion) */
  assert_int_equal(simba_client_status(c), SIMBA_SESSION_LIVE);

  before = ald(&ev.calls);
  CHECK_OK(simba_client_close(c));
  ast(&ev.sealed, 1);
  /* Close closed the session: SESSION_CLOSED came, before close returned,
   * naming the session. */
  closed = ev_find(&ev, SIMBA_EVENT_SESSION_CLOSED);
  assert_true(closed >= 0);
  assert_true(ald(&ev.calls) > before);
  assert_non_null(ev.details[closed]);
  assert_non_null(strstr(ev.details[closed], id));
  opened = ev_find(&ev, SIMBA_EVENT_SESSION_OPENED);
  if (opened >= 0) {
    assert_true(opened < closed);
    assert_non_null(strstr(ev.details[opened], id));
  }
  /* Nothing bad happened to a healthy session. */
  assert_int_equal(ev_find(&ev, SIMBA_EVENT_SESSION_SUSPENDED), -1);
  assert_int_equal(ev_find(&ev, SIMBA_EVENT_SESSION_EXPIRED), -1);
  /* Nothing after close returned. */
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&ev.after_seal), 0);
  assert_int_equal(ald(&ev.overlap), 0);
  assert_int_equal(ald(&ev.bad_json), 0);
  ev_destroy(&ev);
}

/* A sink set on the config receives every event from the first SESSION_OPENED
 * on; simba_client_on_event() replaces it later. */
static void test_event_sink_from_the_config_sees_the_first_event(void **state) {
  simba_client_t *c = NULL;
  simba_config_t *cfg = test_config(lease_ms());
  events_t ev, later;
  int closed;
  (void)state;
  ev_init(&ev);
  ev_init(&later);
  CHECK_ERR(simba_config_set_event_sink(NULL, ev_sink, &ev), SIMBA_EINVAL, "NULL");
  CHECK_OK(simba_config_set_event_sink(cfg, ev_sink, &ev));
  CHECK_OK(simba_client_open(&c, "memory://cl-events-cfg", cfg));
  simba_config_free(cfg); /* the sink outlives the config */
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  ASSERT_EVENTUALLY(ald(&ev.calls) >= 1);
  assert_int_equal(ev_find(&ev, SIMBA_EVENT_SESSION_OPENED), 0);
  CHECK_OK(simba_client_on_event(c, ev_sink, &later));
  CHECK_OK(simba_client_close(c));
  ast(&ev.sealed, 1);
  ast(&later.sealed, 1);
  assert_int_equal(ev_find(&ev, SIMBA_EVENT_SESSION_CLOSED), -1);
  closed = ev_find(&later, SIMBA_EVENT_SESSION_CLOSED);
  assert_true(closed >= 0);
  /* NULL on the config means none. */
  cfg = test_config(lease_ms());
  CHECK_OK(simba_config_set_event_sink(cfg, ev_sink, &ev));
  CHECK_OK(simba_config_set_event_sink(cfg, NULL, NULL));
  CHECK_OK(simba_client_open(&c, "memory://cl-events-cfg-none", cfg));
  simba_config_free(cfg);
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  CHECK_OK(simba_client_close(c));
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&ev.after_seal), 0);
  assert_int_equal(ald(&later.after_seal), 0);
  assert_int_equal(ald(&ev.overlap) + ald(&later.overlap), 0);
  ev_destroy(&ev);
  ev_destroy(&later);
}

static void test_event_sink_removed(void **state) {
  simba_client_t *c = open_client("cl-events-off");
  events_t ev;
  (void)state;
  ev_init(&ev);
  CHECK_OK(simba_client_on_event(c, ev_sink, &ev));
  CHECK_OK(simba_client_on_event(c, NULL, NULL));
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  CHECK_OK(simba_client_close(c));
  /* The sink was removed before the session even opened... but an OPENED
   * could have been queued before the removal: at least CLOSED must not come. */
  assert_int_equal(ev_find(&ev, SIMBA_EVENT_SESSION_CLOSED), -1);
  ev_destroy(&ev);
}

/* Close returns; no callback of the client runs afterwards. */
static void test_close_then_nothing_runs(void **state) {
  simba_client_t *a = open_live_client("cl-close-quiet");
  simba_client_t *b = open_live_client("cl-close-quiet");
  simba_election_t *ea, *eb, *ea2;
  events_t ev;
  rec_t ra, rb, ra2;
  int calls_a, calls_a2, calls_ev;
  (void)state;
  ev_init(&ev);
  rec_init(&ra, "close-a");
  rec_init(&ra2, "close-a2");
  rec_init(&rb, "close-b");
  CHECK_OK(simba_client_on_event(a, ev_sink, &ev));
  ea = rec_start(&ra, a, "quiet-1");
  WAIT_ELECTED(&ra, 1);
  eb = rec_start(&rb, b, "quiet-1"); /* b waits as a candidate */
  ea2 = rec_start(&ra2, a, "quiet-2");
  WAIT_ELECTED(&ra2, 1);

  CHECK_OK(simba_client_close(a));
  rec_seal(&ra);
  rec_seal(&ra2);
  ast(&ev.sealed, 1);
  calls_a = ald(&ra.calls);
  calls_a2 = ald(&ra2.calls);
  calls_ev = ald(&ev.calls);
  /* Close revoked a's terms with STOPPED, before it returned. */
  assert_int_equal(ald(&ra.revoked), 1);
  assert_int_equal(rec_reason(&ra, 0), SIMBA_REVOKE_STOPPED);
  assert_int_equal(ald(&ra2.revoked), 1);
  assert_int_equal(rec_reason(&ra2, 0), SIMBA_REVOKE_STOPPED);
  /* The backend freed a's leases at once: b takes over. */
  WAIT_ELECTED(&rb, 1);
  assert_true(rec_token(&rb, 0) > rec_token(&ra, 0));
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&ra.calls), calls_a);
  assert_int_equal(ald(&ra2.calls), calls_a2);
  assert_int_equal(ald(&ev.calls), calls_ev);

  /* The elections of a closed client stay handles: stopped already. */
  CHECK_ERR(simba_election_stop(ea, rec_on_done, &ra), SIMBA_ESTATE, NULL);
  CHECK_ERR(simba_election_step_down(ea, 0, rec_on_step_down_done, &ra), SIMBA_ESTATE, NULL);
  CHECK_OK(simba_election_stop_wait(ea2, long_wait_ms()));
  simba_election_free(ea);
  simba_election_free(ea2);
  assert_int_equal(ald(&ra.done), 0);
  assert_int_equal(ald(&ra.sd_done), 0);

  CHECK_OK(simba_election_stop_wait(eb, long_wait_ms()));
  simba_election_free(eb);
  CHECK_OK(simba_client_close(b));
  REC_CHECK(&ra);
  REC_CHECK(&ra2);
  REC_CHECK(&rb);
  assert_int_equal(ald(&ev.after_seal), 0);
  rec_destroy(&ra);
  rec_destroy(&ra2);
  rec_destroy(&rb);
  ev_destroy(&ev);
}

/* Close right after open, before the session is live. */
static void test_close_while_opening(void **state) {
  int i;
  (void)state;
  for (i = 0; i < 20; ++i) {
    simba_client_t *c = NULL;
    CHECK_OK(simba_client_open(&c, "memory://cl-close-early", NULL));
    CHECK_OK(simba_client_close(c));
  }
}

/* Many clients, opened and closed from several threads at once. */
static void *open_close_thread(void *arg) {
  int i, *failures = (int *)arg;
  for (i = 0; i < 5; ++i) {
    simba_client_t *c = NULL;
    if (simba_client_open(&c, "memory://cl-threads", NULL) != SIMBA_OK) ainc(failures);
    if (simba_client_wait_live(c, long_wait_ms()) != SIMBA_OK) ainc(failures);
    if (simba_client_close(c) != SIMBA_OK) ainc(failures);
  }
  return NULL;
}

static void test_clients_from_threads(void **state) {
  pthread_t th[4];
  int i, failures = 0;
  (void)state;
  for (i = 0; i < 4; ++i)
    assert_int_equal(pthread_create(&th[i], NULL, open_close_thread, &failures), 0);
  for (i = 0; i < 4; ++i) pthread_join(th[i], NULL);
  assert_int_equal(failures, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open_wait_live_status),
      cmocka_unit_test(test_null_client),
      cmocka_unit_test(test_thread_mode_has_no_external_loop),
      cmocka_unit_test(test_snapshot_json),
      cmocka_unit_test(test_two_clients_two_sessions),
      cmocka_unit_test(test_events),
      cmocka_unit_test(test_event_sink_removed),
      cmocka_unit_test(test_event_sink_from_the_config_sees_the_first_event),
      cmocka_unit_test(test_close_then_nothing_runs),
      cmocka_unit_test(test_close_while_opening),
      cmocka_unit_test(test_clients_from_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * simba_observe_start / simba_observer_free and simba_client_metrics_text on
 * memory://: an observer sees the state at the start, each change of holder
 * (with the holder's session, client name and token) and the name freed, one
 * call at a time and nothing after its free; the metrics count what happened.
 */
#include "capi_test.h"

#define OBS_MAX 32

typedef struct {
  pthread_mutex_t mu;
  int n;
  char holder[OBS_MAX][128]; /* "" when free */
  char client[OBS_MAX][64];  /* "?" when unknown */
  uint64_t token[OBS_MAX];
  int inside, overlap, sealed, after_seal, calls, bad_name;
  simba_observer_t *self_free; /* freed from its own callback when set */
} obs_t;

static void obs_init(obs_t *o) {
  memset(o, 0, sizeof *o);
  pthread_mutex_init(&o->mu, NULL);
}

static void obs_fn(void *ud, const char *name, const char *holder, const char *client,
                   uint64_t token) {
  obs_t *o = (obs_t *)ud;
  if (axchg(&o->inside, 1) != 0) ainc(&o->overlap);
  if (ald(&o->sealed)) ainc(&o->after_seal);
  if (!name || strcmp(name, "obs.name") != 0) ainc(&o->bad_name);
  pthread_mutex_lock(&o->mu);
  if (o->n < OBS_MAX) {
    snprintf(o->holder[o->n], sizeof o->holder[0], "%s", holder ? holder : "");
    snprintf(o->client[o->n], sizeof o->client[0], "%s", client ? client : "?");
    o->token[o->n] = token;
    o->n++;
  }
  pthread_mutex_unlock(&o->mu);
  ast(&o->inside, 0);
  ainc(&o->calls);
  {
    simba_observer_t *self =
        (simba_observer_t *)__atomic_exchange_n(&o->self_free, NULL, __ATOMIC_SEQ_CST);
    if (self) {
      simba_observer_free(self); /* from its own callback: returns at once */
      ast(&o->sealed, 1);
    }
  }
}

static int obs_count(obs_t *o) {
  int n;
  pthread_mutex_lock(&o->mu);
  n = o->n;
  pthread_mutex_unlock(&o->mu);
  return n;
}

static void session_id(simba_client_t *c, char *out, size_t cap) {
  char *js = simba_client_snapshot_json(c);
  assert_non_null(js);
  assert_true(json_find_string(js, "id", out, cap));
  simba_free(js);
}

static void on_el(void *ud, simba_term_t *t) { astu64((uint64_t *)ud, simba_term_token(t)); }

static void test_arguments(void **state) {
  simba_client_t *c = open_client("obs-args");
  simba_observer_t *o = (simba_observer_t *)&o;
  obs_t rec;
  (void)state;
  obs_init(&rec);
  CHECK_ERR(simba_observe_start(NULL, c, "a", 0, obs_fn, &rec), SIMBA_EINVAL, "out");
  CHECK_ERR(simba_observe_start(&o, NULL, "a", 0, obs_fn, &rec), SIMBA_EINVAL, "NULL");
  assert_null(o); /* cleared on failure */
  CHECK_ERR(simba_observe_start(&o, c, "a", 0, NULL, &rec), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_observe_start(&o, c, NULL, 0, obs_fn, &rec), SIMBA_EINVAL, "name");
  CHECK_ERR(simba_observe_start(&o, c, "", 0, obs_fn, &rec), SIMBA_EINVAL, "name");
  CHECK_ERR(simba_observe_start(&o, c, "a", -1, obs_fn, &rec), SIMBA_EINVAL, "poll_ms");
  CHECK_ERR(simba_observe_start(&o, c, "a", 5, obs_fn, &rec), SIMBA_EINVAL, "poll_ms");
  simba_observer_free(NULL);
  assert_null(simba_client_metrics_text(NULL));
  check_last_error_("NULL", __FILE__, __LINE__);
  CHECK_OK(simba_client_close(c));
  assert_int_equal(ald(&rec.calls), 0);
}

/* The start state, a holder, the name freed, a new holder with a higher token. */
static void test_observer_follows_the_holder(void **state) {
  simba_client_t *watcher = open_live_client("obs-follow");
  simba_client_t *b = open_client_kv("obs-follow", "client.name", "node-b");
  simba_observer_t *o = NULL;
  simba_election_t *e = NULL;
  simba_listener_t l = {on_el, NULL, NULL};
  uint64_t token = 0, token2 = 0;
  char sid[128];
  obs_t rec;
  (void)state;
  obs_init(&rec);
  CHECK_OK(simba_client_wait_live(b, long_wait_ms()));
  session_id(b, sid, sizeof sid);
  CHECK_OK(simba_observe_start(&o, watcher, "obs.name", 50, obs_fn, &rec));
  ASSERT_EVENTUALLY(obs_count(&rec) >= 1);
  assert_string_equal(rec.holder[0], ""); /* free at the start, never granted */
  assert_int_equal(rec.token[0], 0);

  l.ud = &token;
  CHECK_OK(simba_election_start(&e, b, "obs.name", &l));
  ASSERT_EVENTUALLY(aldu64(&token) != 0);
  ASSERT_EVENTUALLY(obs_count(&rec) >= 2);
  assert_string_equal(rec.holder[1], sid);
  assert_string_equal(rec.client[1], "node-b");
  assert_int_equal(rec.token[1], aldu64(&token));

  CHECK_OK(simba_election_stop_wait(e, long_wait_ms()));
  simba_election_free(e);
  ASSERT_EVENTUALLY(obs_count(&rec) >= 3);
  assert_string_equal(rec.holder[2], "");
  assert_string_equal(rec.client[2], "?");
  assert_int_equal(rec.token[2], aldu64(&token)); /* the last granted */

  l.ud = &token2;
  CHECK_OK(simba_election_start(&e, b, "obs.name", &l));
  ASSERT_EVENTUALLY(aldu64(&token2) != 0);
  ASSERT_EVENTUALLY(obs_count(&rec) >= 4);
  assert_string_equal(rec.holder[3], sid);
  assert_true(rec.token[3] > rec.token[1]);
  sleep_ms(quiet_ms()); /* several polls: no change, no call */
  assert_int_equal(obs_count(&rec), 4);

  simba_observer_free(o);
  ast(&rec.sealed, 1);
  CHECK_OK(simba_election_stop_wait(e, long_wait_ms()));
  simba_election_free(e);
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&rec.after_seal), 0);
  assert_int_equal(ald(&rec.overlap), 0);
  assert_int_equal(ald(&rec.bad_name), 0);
  CHECK_OK(simba_client_close(b));
  CHECK_OK(simba_client_close(watcher));
}

/* Freed from its own callback; and a client closed under a live observer. */
static void test_free_from_the_callback_and_close_under_an_observer(void **state) {
  simba_client_t *c = open_live_client("obs-self");
  simba_observer_t *o = NULL, *o2 = NULL;
  simba_election_t *e = NULL;
  simba_listener_t l = {on_el, NULL, NULL};
  uint64_t token = 0;
  obs_t rec, rec2;
  (void)state;
  obs_init(&rec);
  obs_init(&rec2);
  CHECK_OK(simba_observe_start(&o, c, "obs.name", 10, obs_fn, &rec));
  ASSERT_EVENTUALLY(ald(&rec.calls) == 1);
  astp((void **)&rec.self_free, o); /* the next call (a change) frees it */
  l.ud = &token;
  CHECK_OK(simba_election_start(&e, c, "obs.name", &l));
  ASSERT_EVENTUALLY(ald(&rec.sealed) == 1);
  CHECK_OK(simba_observe_start(&o2, c, "obs.name", 10, obs_fn, &rec2));
  ASSERT_EVENTUALLY(ald(&rec2.calls) >= 1);
  CHECK_OK(simba_election_stop_wait(e, long_wait_ms()));
  simba_election_free(e);
  CHECK_OK(simba_client_close(c)); /* stops every observer */
  ast(&rec2.sealed, 1);
  sleep_ms(quiet_ms());
  assert_int_equal(ald(&rec.calls), 2);
  assert_int_equal(ald(&rec.after_seal) + ald(&rec2.after_seal), 0);
  simba_observer_free(o2); /* still valid after the close */
  assert_int_equal(ald(&rec.overlap) + ald(&rec2.overlap), 0);
}

/* The metrics count a won term, its stop and keep-alives; the snapshot has them. */
static void test_metrics_count_what_happened(void **state) {
  simba_client_t *c = open_client_kv("obs-metrics", "client.name", "metrics-node");
  simba_election_t *e = NULL;
  simba_listener_t l = {on_el, NULL, NULL};
  uint64_t token = 0;
  char *text, *js;
  (void)state;
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  l.ud = &token;
  CHECK_OK(simba_election_start(&e, c, "m", &l));
  ASSERT_EVENTUALLY(aldu64(&token) != 0);
  WAIT_UNTIL(0, lease_ms()); /* a few keep-alives (not an assertion) */
  CHECK_OK(simba_election_stop_wait(e, long_wait_ms()));
  simba_election_free(e);
  text = simba_client_metrics_text(c);
  assert_non_null(text);
  assert_non_null(strstr(text, "# TYPE simba_terms_total counter\n"));
  assert_non_null(strstr(text, "simba_terms_total{client=\"metrics-node\"} 1\n"));
  assert_non_null(
      strstr(text, "simba_revocations_total{client=\"metrics-node\",reason=\"STOPPED\"} 1\n"));
  assert_non_null(strstr(text, "simba_handover_seconds_count{client=\"metrics-node\"} 1\n"));
  assert_non_null(strstr(text, "simba_session_state{client=\"metrics-node\",state=\"LIVE\"} 1\n"));
  assert_non_null(strstr(text, "simba_leases_held{client=\"metrics-node\"} 0\n"));
  assert_null(strstr(text, "simba_keep_alive_rtt_seconds_count{client=\"metrics-node\"} 0\n"));
  assert_non_null(strstr(text, "simba_keep_alive_failures_total{client=\"metrics-node\"} 0\n"));
  simba_free(text);
  js = simba_client_snapshot_json(c);
  assert_non_null(js);
  assert_true(json_valid(js));
  assert_non_null(strstr(js, "\"metrics\":{\"keep_alive_failures\":0"));
  assert_non_null(strstr(js, "\"STOPPED\":1"));
  simba_free(js);
  CHECK_OK(simba_client_close(c));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arguments),
      cmocka_unit_test(test_observer_follows_the_holder),
      cmocka_unit_test(test_free_from_the_callback_and_close_under_an_observer),
      cmocka_unit_test(test_metrics_count_what_happened),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

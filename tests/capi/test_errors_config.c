/*
 * Version, error codes, simba_last_error, simba_free, configuration, and the
 * argument checks of simba_client_open (URLs) and of every lease-name taking
 * function.
 */
#include "capi_test.h"

/* ------------------------------------------------------------------------- */
/* Version and errors */

static void test_version(void **state) {
  char want[32];
  const char *s;
  (void)state;
  assert_int_equal(simba_version(), (unsigned)((SIMBA_VERSION_MAJOR << 16) |
                                               (SIMBA_VERSION_MINOR << 8) | SIMBA_VERSION_PATCH));
  s = simba_version_string();
  assert_non_null(s);
  snprintf(want, sizeof want, "%d.%d.%d", SIMBA_VERSION_MAJOR, SIMBA_VERSION_MINOR,
           SIMBA_VERSION_PATCH);
  assert_string_equal(s, want);
  /* A static string: the same pointer every time. */
  assert_ptr_equal(simba_version_string(), s);
}

static void test_error_codes_are_pinned(void **state) {
  (void)state;
  assert_int_equal(SIMBA_OK, 0);
  assert_int_equal(SIMBA_EINVAL, -1);
  assert_int_equal(SIMBA_ESTATE, -2);
  assert_int_equal(SIMBA_EEXPIRED, -3);
  assert_int_equal(SIMBA_ETIMEDOUT, -4);
  assert_int_equal(SIMBA_EBACKEND, -5);
  assert_int_equal(SIMBA_ECLOSED, -6);
  assert_int_equal(SIMBA_ENOMEM, -7);
  assert_int_equal(SIMBA_EWOULDBLOCK, -8);
  assert_int_equal(SIMBA_EBUSY, -9);
  assert_int_equal(SIMBA_EUNSUPPORTED, -10);
  assert_int_equal(SIMBA_ECANCELED, -11);
}

static void test_strerror(void **state) {
  int err, other;
  (void)state;
  for (err = -20; err <= 5; ++err) {
    const char *s = simba_strerror(err);
    assert_non_null(s);
    assert_true(s[0] != '\0');
    if (err < SIMBA_ECANCELED || err > SIMBA_OK) {
      assert_string_equal(s, "unknown error");
    }
  }
  /* Every defined code has its own text, and none reads "unknown error". */
  for (err = SIMBA_ECANCELED; err <= SIMBA_OK; ++err) {
    assert_string_not_equal(simba_strerror(err), "unknown error");
    for (other = SIMBA_ECANCELED; other < err; ++other) {
      assert_string_not_equal(simba_strerror(err), simba_strerror(other));
    }
  }
  assert_non_null(simba_strerror(-2147483647 - 1));
  assert_non_null(simba_strerror(2147483647));
}

static void test_free_null(void **state) {
  (void)state;
  simba_free(NULL);
  simba_config_free(NULL);
  simba_election_free(NULL);
  simba_term_retain(NULL);
  simba_term_release(NULL);
  assert_int_equal(simba_client_close(NULL), SIMBA_OK);
}

static void *last_error_fresh_thread(void *arg) {
  const char *e = simba_last_error();
  int *ok = (int *)arg;
  *ok = e != NULL && e[0] == '\0';
  return NULL;
}

static void *last_error_own_thread(void *arg) {
  int *ok = (int *)arg;
  const char *e;
  *ok = simba_config_new(NULL) == SIMBA_EINVAL;
  e = simba_last_error();
  *ok = *ok && e != NULL && e[0] != '\0';
  return NULL;
}

static void test_last_error_is_thread_local(void **state) {
  pthread_t th;
  int ok = 0;
  char mine[512];
  (void)state;
  /* This thread fails a call... */
  assert_int_equal(simba_config_new(NULL), SIMBA_EINVAL);
  check_last_error_("NULL", __FILE__, __LINE__);
  snprintf(mine, sizeof mine, "%s", simba_last_error());
  /* ...a fresh thread still reads an empty detail... */
  assert_int_equal(pthread_create(&th, NULL, last_error_fresh_thread, &ok), 0);
  pthread_join(th, NULL);
  assert_true(ok);
  /* ...and another thread's failure does not change this thread's detail. */
  assert_int_equal(pthread_create(&th, NULL, last_error_own_thread, &ok), 0);
  pthread_join(th, NULL);
  assert_true(ok);
  assert_string_equal(simba_last_error(), mine);
}

/* ------------------------------------------------------------------------- */
/* Configuration */

static void test_config_null_arguments(void **state) {
  simba_config_t *c = NULL, *copy = NULL;
  int64_t v = 0;
  double d = 0;
  (void)state;
  CHECK_ERR(simba_config_new(NULL), SIMBA_EINVAL, "NULL");
  CHECK_OK(simba_config_new(&c));

  CHECK_ERR(simba_config_copy(NULL, c), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_config_copy(&copy, NULL), SIMBA_EINVAL, "NULL");

  CHECK_ERR(simba_config_set(NULL, "session.margin", "10ms"), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_config_set(c, NULL, "10ms"), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_config_set(c, "session.margin", NULL), SIMBA_EINVAL, "NULL");

  CHECK_ERR(simba_config_set_ms(NULL, "session.margin", 10), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_config_set_ms(c, NULL, 10), SIMBA_EINVAL, "NULL");

  CHECK_ERR(simba_config_get_ms(NULL, "session.margin", &v), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_config_get_ms(c, NULL, &v), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_config_get_ms(c, "session.margin", NULL), SIMBA_EINVAL, "NULL");

  CHECK_ERR(simba_config_get_double(NULL, "session.drift", &d), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_config_get_double(c, NULL, &d), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_config_get_double(c, "session.drift", NULL), SIMBA_EINVAL, "NULL");

  CHECK_ERR(simba_config_set_executor(NULL, NULL, NULL), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_config_set_logger(NULL, NULL, NULL, SIMBA_LOG_INFO), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_config_validate(NULL), SIMBA_EINVAL, "NULL");

  /* Nothing above changed the config. */
  CHECK_OK(simba_config_get_ms(c, "session.margin", &v));
  assert_int_equal(v, 50);
  simba_config_free(c);
}

static void test_config_defaults(void **state) {
  simba_config_t *c = NULL;
  int64_t v = -1;
  double d = -1;
  (void)state;
  CHECK_OK(simba_config_new(&c));
  assert_non_null(c);
  CHECK_OK(simba_config_get_ms(c, "session.lease-duration", &v));
  assert_int_equal(v, 15000);
  CHECK_OK(simba_config_get_ms(c, "session.renew-interval", &v));
  assert_int_equal(v, 5000);
  CHECK_OK(simba_config_get_ms(c, "session.retry-jitter", &v));
  assert_int_equal(v, 2500);
  CHECK_OK(simba_config_get_ms(c, "session.margin", &v));
  assert_int_equal(v, 50);
  CHECK_OK(simba_config_get_ms(c, "session.min-backoff", &v));
  assert_int_equal(v, 100);
  CHECK_OK(simba_config_get_double(c, "session.drift", &d));
  assert_true(d == 0.01);
  CHECK_OK(simba_config_get_double(c, "callback.threads", &d));
  assert_true(d == 2.0);
  CHECK_OK(simba_config_validate(c));
  simba_config_free(c);
}

static void test_config_derived_values(void **state) {
  simba_config_t *c = NULL;
  int64_t v = -1;
  (void)state;
  CHECK_OK(simba_config_new(&c));
  /* renew-interval and retry-jitter follow lease-duration while unset. */
  CHECK_OK(simba_config_set(c, "session.lease-duration", "9s"));
  CHECK_OK(simba_config_get_ms(c, "session.lease-duration", &v));
  assert_int_equal(v, 9000);
  CHECK_OK(simba_config_get_ms(c, "session.renew-interval", &v));
  assert_int_equal(v, 3000);
  CHECK_OK(simba_config_get_ms(c, "session.retry-jitter", &v));
  assert_int_equal(v, 1500);
  /* retry-jitter follows an explicit renew-interval... */
  CHECK_OK(simba_config_set_ms(c, "session.renew-interval", 2000));
  CHECK_OK(simba_config_get_ms(c, "session.retry-jitter", &v));
  assert_int_equal(v, 1000);
  /* ...which no longer follows lease-duration. */
  CHECK_OK(simba_config_set_ms(c, "session.lease-duration", 30000));
  CHECK_OK(simba_config_get_ms(c, "session.renew-interval", &v));
  assert_int_equal(v, 2000);
  /* An explicit retry-jitter stays. */
  CHECK_OK(simba_config_set(c, "session.retry-jitter", "700ms"));
  CHECK_OK(simba_config_set_ms(c, "session.renew-interval", 4000));
  CHECK_OK(simba_config_get_ms(c, "session.retry-jitter", &v));
  assert_int_equal(v, 700);
  CHECK_OK(simba_config_validate(c));
  simba_config_free(c);
}

static void test_config_duration_formats(void **state) {
  static const struct {
    const char *text;
    int64_t ms;
  } ok[] = {{"1234", 1234}, {"250ms", 250}, {"2s", 2000}, {"1m", 60000}, {"0", 0}};
  static const char *const bad[] = {"",   "abc",  "-5", "5h", "1.5s",
                                    " 5", "5 ms", "5S", "ms", "99999999999999999999"};
  simba_config_t *c = NULL;
  int64_t v = -1;
  size_t i;
  (void)state;
  CHECK_OK(simba_config_new(&c));
  for (i = 0; i < sizeof ok / sizeof ok[0]; ++i) {
    CHECK_OK(simba_config_set(c, "session.margin", ok[i].text));
    CHECK_OK(simba_config_get_ms(c, "session.margin", &v));
    assert_int_equal(v, ok[i].ms);
  }
  CHECK_OK(simba_config_set(c, "session.margin", "50ms"));
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    CHECK_ERR(simba_config_set(c, "session.margin", bad[i]), SIMBA_EINVAL, "session.margin");
    /* A refused value changes nothing. */
    CHECK_OK(simba_config_get_ms(c, "session.margin", &v));
    assert_int_equal(v, 50);
  }
  simba_config_free(c);
}

static void test_config_bad_keys_and_values(void **state) {
  simba_config_t *c = NULL;
  int64_t v = -1;
  double d = -1;
  (void)state;
  CHECK_OK(simba_config_new(&c));

  CHECK_ERR(simba_config_set(c, "session.nope", "1"), SIMBA_EINVAL, "session.nope");
  CHECK_ERR(simba_config_set(c, "", "1"), SIMBA_EINVAL, "key");
  CHECK_ERR(simba_config_set_ms(c, "session.nope", 1), SIMBA_EINVAL, "session.nope");
  CHECK_ERR(simba_config_set_ms(c, "session.drift", 1), SIMBA_EINVAL, "session.drift");
  CHECK_ERR(simba_config_set_ms(c, "callback.threads", 1), SIMBA_EINVAL, "callback.threads");
  CHECK_ERR(simba_config_set_ms(c, "session.lease-duration", -1), SIMBA_EINVAL, "negative");
  CHECK_ERR(simba_config_set_ms(c, "session.margin", -15000), SIMBA_EINVAL, "negative");
  CHECK_ERR(simba_config_get_ms(c, "session.drift", &v), SIMBA_EINVAL, "session.drift");
  CHECK_ERR(simba_config_get_ms(c, "client.name", &v), SIMBA_EINVAL, "client.name");
  CHECK_ERR(simba_config_get_ms(c, "nope", &v), SIMBA_EINVAL, "nope");
  CHECK_ERR(simba_config_get_double(c, "session.lease-duration", &d), SIMBA_EINVAL,
            "session.lease-duration");
  CHECK_ERR(simba_config_get_double(c, "loop.mode", &d), SIMBA_EINVAL, "loop.mode");
  CHECK_ERR(simba_config_get_double(c, "nope", &d), SIMBA_EINVAL, "nope");

  /* drift: a decimal in [0, 0.5). */
  CHECK_ERR(simba_config_set(c, "session.drift", "0.5"), SIMBA_EINVAL, "session.drift");
  CHECK_ERR(simba_config_set(c, "session.drift", "-0.1"), SIMBA_EINVAL, "session.drift");
  CHECK_ERR(simba_config_set(c, "session.drift", "abc"), SIMBA_EINVAL, "session.drift");
  CHECK_ERR(simba_config_set(c, "session.drift", "nan"), SIMBA_EINVAL, "session.drift");
  CHECK_ERR(simba_config_set(c, "session.drift", ""), SIMBA_EINVAL, "session.drift");
  CHECK_OK(simba_config_set(c, "session.drift", "0.25"));
  CHECK_OK(simba_config_get_double(c, "session.drift", &d));
  assert_true(d == 0.25);
  CHECK_OK(simba_config_set(c, "session.drift", "0"));
  CHECK_OK(simba_config_get_double(c, "session.drift", &d));
  assert_true(d == 0.0);

  /* callback.threads: 1..64. */
  CHECK_ERR(simba_config_set(c, "callback.threads", "0"), SIMBA_EINVAL, "callback.threads");
  CHECK_ERR(simba_config_set(c, "callback.threads", "65"), SIMBA_EINVAL, "callback.threads");
  CHECK_ERR(simba_config_set(c, "callback.threads", "x"), SIMBA_EINVAL, "callback.threads");
  CHECK_ERR(simba_config_set(c, "callback.threads", "-1"), SIMBA_EINVAL, "callback.threads");
  CHECK_OK(simba_config_set(c, "callback.threads", "64"));
  CHECK_OK(simba_config_get_double(c, "callback.threads", &d));
  assert_true(d == 64.0);
  CHECK_OK(simba_config_set(c, "callback.threads", "1"));
  CHECK_OK(simba_config_get_double(c, "callback.threads", &d));
  assert_true(d == 1.0);

  /* callback.executor, loop.mode, client.name. */
  CHECK_OK(simba_config_set(c, "callback.executor", "pool"));
  CHECK_OK(simba_config_set(c, "callback.executor", "direct"));
  CHECK_ERR(simba_config_set(c, "callback.executor", "host"), SIMBA_EINVAL, "callback.executor");
  CHECK_ERR(simba_config_set(c, "callback.executor", "bogus"), SIMBA_EINVAL, "callback.executor");
  CHECK_OK(simba_config_set(c, "loop.mode", "thread"));
  CHECK_OK(simba_config_set(c, "loop.mode", "external"));
  CHECK_ERR(simba_config_set(c, "loop.mode", "bogus"), SIMBA_EINVAL, "loop.mode");
  CHECK_OK(simba_config_set(c, "client.name", "worker-1"));
  CHECK_OK(simba_config_set(c, "client.name", ""));
  {
    char long_name[130];
    memset(long_name, 'n', 129);
    long_name[129] = '\0';
    CHECK_ERR(simba_config_set(c, "client.name", long_name), SIMBA_EINVAL, "client.name");
    long_name[128] = '\0';
    CHECK_OK(simba_config_set(c, "client.name", long_name));
    CHECK_ERR(simba_config_set(c, "client.name", "line\nbreak"), SIMBA_EINVAL, "client.name");
  }

  /* Durations: 0 and the maximum are values; above it is not. */
  CHECK_OK(simba_config_set_ms(c, "session.margin", 0));
  CHECK_OK(simba_config_set_ms(c, "session.margin", INT64_C(1000000000000)));
  CHECK_ERR(simba_config_set_ms(c, "session.margin", INT64_C(1000000000001)), SIMBA_EINVAL,
            "session.margin");
  CHECK_ERR(simba_config_set_ms(c, "session.margin", INT64_MAX), SIMBA_EINVAL, "session.margin");
  CHECK_ERR(simba_config_set_ms(c, "session.margin", INT64_MIN), SIMBA_EINVAL, "negative");
  CHECK_OK(simba_config_get_ms(c, "session.margin", &v));
  assert_int_equal(v, INT64_C(1000000000000));
  simba_config_free(c);
}

static void test_config_validate_rules(void **state) {
  simba_config_t *c = NULL;
  simba_client_t *cl = NULL;
  (void)state;

  /* Rule 1: renew-interval x 2 <= lease-duration. */
  CHECK_OK(simba_config_new(&c));
  CHECK_OK(simba_config_set_ms(c, "session.lease-duration", 1000));
  CHECK_OK(simba_config_set_ms(c, "session.renew-interval", 501));
  CHECK_ERR(simba_config_validate(c), SIMBA_EINVAL, "renew-interval");
  CHECK_ERR(simba_client_open(&cl, "memory://cfg-rule-1", c), SIMBA_EINVAL, "renew-interval");
  /* Exactly twice is allowed. */
  CHECK_OK(simba_config_set_ms(c, "session.renew-interval", 500));
  CHECK_OK(simba_config_validate(c));
  simba_config_free(c);

  /* Rule 2: lease-duration x (1 - drift) - margin > renew-interval (rule 1 holds). */
  CHECK_OK(simba_config_new(&c));
  CHECK_OK(simba_config_set_ms(c, "session.lease-duration", 1000));
  CHECK_OK(simba_config_set_ms(c, "session.renew-interval", 500));
  CHECK_OK(simba_config_set(c, "session.drift", "0.45"));
  CHECK_ERR(simba_config_validate(c), SIMBA_EINVAL, "drift");
  cl = NULL;
  CHECK_ERR(simba_client_open(&cl, "memory://cfg-rule-2", c), SIMBA_EINVAL, "drift");
  /* The same rule through the margin: 1000 x 0.99 - 490 = 500, not > 500. */
  CHECK_OK(simba_config_set(c, "session.drift", "0.01"));
  CHECK_OK(simba_config_set_ms(c, "session.margin", 490));
  CHECK_ERR(simba_config_validate(c), SIMBA_EINVAL, "margin");
  CHECK_ERR(simba_client_open(&cl, "memory://cfg-rule-2", c), SIMBA_EINVAL, "margin");
  CHECK_OK(simba_config_set_ms(c, "session.margin", 489));
  CHECK_OK(simba_config_validate(c));
  /* margin may be 0. */
  CHECK_OK(simba_config_set_ms(c, "session.margin", 0));
  CHECK_OK(simba_config_validate(c));
  simba_config_free(c);

  /* Every duration but the margin must be positive. */
  CHECK_OK(simba_config_new(&c));
  CHECK_OK(simba_config_set_ms(c, "session.lease-duration", 0));
  CHECK_ERR(simba_config_validate(c), SIMBA_EINVAL, "lease-duration");
  CHECK_ERR(simba_client_open(&cl, "memory://cfg-rule-3", c), SIMBA_EINVAL, "lease-duration");
  simba_config_free(c);

  CHECK_OK(simba_config_new(&c));
  CHECK_OK(simba_config_set_ms(c, "session.renew-interval", 0));
  CHECK_ERR(simba_config_validate(c), SIMBA_EINVAL, "renew-interval");
  simba_config_free(c);

  CHECK_OK(simba_config_new(&c));
  CHECK_OK(simba_config_set_ms(c, "session.min-backoff", 0));
  CHECK_ERR(simba_config_validate(c), SIMBA_EINVAL, "min-backoff");
  CHECK_ERR(simba_client_open(&cl, "memory://cfg-rule-3", c), SIMBA_EINVAL, "min-backoff");
  simba_config_free(c);

  /* The defaults pass; NULL config means the defaults. */
  CHECK_OK(simba_config_new(&c));
  CHECK_OK(simba_config_validate(c));
  simba_config_free(c);
  CHECK_OK(simba_client_open(&cl, "memory://cfg-defaults", NULL));
  assert_non_null(cl);
  CHECK_OK(simba_client_close(cl));
}

static void test_config_copy_is_independent(void **state) {
  simba_config_t *a = NULL, *b = NULL;
  int64_t v = -1;
  double d = -1;
  (void)state;
  CHECK_OK(simba_config_new(&a));
  CHECK_OK(simba_config_set_ms(a, "session.lease-duration", 6000));
  CHECK_OK(simba_config_set(a, "session.drift", "0.2"));
  CHECK_OK(simba_config_copy(&b, a));
  assert_non_null(b);
  assert_ptr_not_equal(a, b);
  /* The copy has the values, derived ones included. */
  CHECK_OK(simba_config_get_ms(b, "session.lease-duration", &v));
  assert_int_equal(v, 6000);
  CHECK_OK(simba_config_get_ms(b, "session.renew-interval", &v));
  assert_int_equal(v, 2000);
  CHECK_OK(simba_config_get_double(b, "session.drift", &d));
  assert_true(d == 0.2);
  /* Changing the copy leaves the original alone... */
  CHECK_OK(simba_config_set_ms(b, "session.lease-duration", 9000));
  CHECK_OK(simba_config_set_ms(b, "session.renew-interval", 1000));
  CHECK_OK(simba_config_set(b, "session.drift", "0.1"));
  CHECK_OK(simba_config_get_ms(a, "session.lease-duration", &v));
  assert_int_equal(v, 6000);
  CHECK_OK(simba_config_get_ms(a, "session.renew-interval", &v));
  assert_int_equal(v, 2000);
  CHECK_OK(simba_config_get_double(a, "session.drift", &d));
  assert_true(d == 0.2);
  /* ...and the other way round; freeing one leaves the other usable. */
  CHECK_OK(simba_config_set_ms(a, "session.margin", 7));
  CHECK_OK(simba_config_get_ms(b, "session.margin", &v));
  assert_int_equal(v, 50);
  simba_config_free(a);
  CHECK_OK(simba_config_get_ms(b, "session.lease-duration", &v));
  assert_int_equal(v, 9000);
  CHECK_OK(simba_config_validate(b));
  simba_config_free(b);
}

static int log_lines, log_below_min, log_bad_line, log_passwords;

static void count_log(void *ud, int level, const char *msg) {
  int min = *(int *)ud;
  ainc(&log_lines);
  if (level < min || level > SIMBA_LOG_ERROR) ainc(&log_below_min);
  if (!msg || strchr(msg, '\n')) ainc(&log_bad_line);
  if (msg && strstr(msg, "hunter2")) ainc(&log_passwords);
}

static void test_config_logger(void **state) {
  static int min_level = SIMBA_LOG_WARN;
  simba_config_t *c = NULL;
  simba_client_t *cl = NULL;
  simba_election_t *e;
  rec_t r;
  (void)state;
  CHECK_OK(simba_config_new(&c));
  CHECK_ERR(simba_config_set_logger(c, count_log, &min_level, -1), SIMBA_EINVAL, "level");
  CHECK_ERR(simba_config_set_logger(c, count_log, &min_level, SIMBA_LOG_ERROR + 1), SIMBA_EINVAL,
            "level");
  CHECK_OK(simba_config_set_logger(c, count_log, &min_level, SIMBA_LOG_DEBUG));
  CHECK_OK(simba_config_set_logger(c, count_log, &min_level, SIMBA_LOG_INFO));
  CHECK_OK(simba_config_set_logger(c, count_log, &min_level, SIMBA_LOG_ERROR));
  CHECK_OK(simba_config_set_logger(c, NULL, NULL, SIMBA_LOG_DEBUG)); /* no logger */
  CHECK_OK(simba_config_set_logger(c, count_log, &min_level, SIMBA_LOG_WARN));
  CHECK_OK(simba_config_set_ms(c, "session.lease-duration", lease_ms()));
  /* A client with a logger works, and every line it logs is one line at or
   * above the minimum level. */
  CHECK_OK(simba_client_open(&cl, "memory://cfg-logger", c));
  simba_config_free(c);
  CHECK_OK(simba_client_wait_live(cl, long_wait_ms()));
  rec_init(&r, "logger");
  e = rec_start(&r, cl, "logged");
  WAIT_ELECTED(&r, 1);
  CHECK_OK(simba_election_stop_wait(e, long_wait_ms()));
  CHECK_OK(simba_client_close(cl));
  simba_election_free(e);
  REC_CHECK(&r);
  rec_destroy(&r);
  assert_int_equal(ald(&log_below_min), 0);
  assert_int_equal(ald(&log_bad_line), 0);
  assert_int_equal(ald(&log_passwords), 0);
}

static int dummy_submit(void *ctx, void (*run)(void *), void *arg) {
  (void)ctx;
  (void)run;
  (void)arg;
  return 1;
}

static void test_config_set_executor(void **state) {
  simba_config_t *c = NULL;
  int ctx = 0;
  (void)state;
  CHECK_OK(simba_config_new(&c));
  CHECK_OK(simba_config_set_executor(c, dummy_submit, &ctx));
  CHECK_OK(simba_config_validate(c));
  CHECK_OK(simba_config_set_executor(c, NULL, NULL)); /* back to the pool */
  CHECK_OK(simba_config_validate(c));
  simba_config_free(c);
}

/* ------------------------------------------------------------------------- */
/* simba_client_open: arguments and URLs */

static void test_client_open_arguments(void **state) {
  simba_client_t *c = NULL;
  (void)state;
  CHECK_ERR(simba_client_open(NULL, "memory://open-args", NULL), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_client_open(&c, NULL, NULL), SIMBA_EINVAL, "NULL");
  /* No scheme: malformed. */
  CHECK_ERR(simba_client_open(&c, "open-args", NULL), SIMBA_EINVAL, "scheme");
  CHECK_ERR(simba_client_open(&c, "", NULL), SIMBA_EINVAL, "scheme");
  CHECK_ERR(simba_client_open(&c, "://open-args", NULL), SIMBA_EINVAL, "scheme");
  /* A memory store name follows the lease-name rule. */
  CHECK_ERR(simba_client_open(&c, "memory://a b", NULL), SIMBA_EINVAL, "name");
  CHECK_ERR(simba_client_open(&c, "memory://a/b", NULL), SIMBA_EINVAL, "name");
  /* Schemes that are not built in (only memory:// is, in this build). */
  CHECK_ERR(simba_client_open(&c, "foo://x", NULL), SIMBA_EUNSUPPORTED, "foo");
#ifndef SIMBA_CAPI_HAVE_REDIS
  CHECK_ERR(simba_client_open(&c, "redis://127.0.0.1:6379/0?prefix=simba", NULL),
            SIMBA_EUNSUPPORTED, "redis");
  CHECK_ERR(simba_client_open(&c, "redis://user:hunter2@127.0.0.1:6379", NULL), SIMBA_EUNSUPPORTED,
            "redis");
  /* Passwords never appear in the detail. */
  assert_null(strstr(simba_last_error(), "hunter2"));
#endif
#ifndef SIMBA_CAPI_HAVE_POSTGRES
  CHECK_ERR(simba_client_open(&c, "postgresql://u:hunter2@127.0.0.1:5432/db", NULL),
            SIMBA_EUNSUPPORTED, "postgres");
  assert_null(strstr(simba_last_error(), "hunter2"));
#endif
#ifndef SIMBA_CAPI_HAVE_ZOOKEEPER
  CHECK_ERR(simba_client_open(&c, "zookeeper://127.0.0.1:2181/simba", NULL), SIMBA_EUNSUPPORTED,
            "zookeeper");
#else
  /* Built in: a malformed one is refused, and the password never shows. */
  CHECK_ERR(simba_client_open(&c, "zookeeper://127.0.0.1:2181/a b?auth=digest:u:hunter2", NULL),
            SIMBA_EINVAL, "chroot");
  assert_null(strstr(simba_last_error(), "hunter2"));
#endif
  /* A good one works. */
  CHECK_OK(simba_client_open(&c, "memory://open-args", NULL));
  assert_non_null(c);
  CHECK_OK(simba_client_close(c));
}

/* ------------------------------------------------------------------------- */
/* Lease names: refused with EINVAL before anything reaches the backend. */

static int counter_value(const char *json, const char *key) {
  char pat[64];
  const char *at;
  snprintf(pat, sizeof pat, "\"%s\":", key);
  at = strstr(json, pat);
  if (!at) return -1;
  return atoi(at + strlen(pat));
}

static int lock_cb_calls;
static void lock_cb_count(void *ud, int err, simba_term_t *t) {
  (void)ud;
  (void)err;
  ainc(&lock_cb_calls);
  if (t) simba_lock_release(t);
}

static void test_bad_lease_names(void **state) {
  const char *const *names = bad_lease_names();
  simba_client_t *c = open_live_client("bad-names");
  simba_listener_t l;
  simba_election_t *e = NULL;
  simba_term_t *t = NULL;
  char *before, *after;
  char good[129];
  int i;
  rec_t r;
  (void)state;
  rec_init(&r, "bad-names");
  l = rec_listener(&r);
  before = simba_client_snapshot_json(c);
  assert_non_null(before);
  for (i = 0; names[i]; ++i) {
    CHECK_ERR(simba_election_start(&e, c, names[i], &l), SIMBA_EINVAL, "name");
    CHECK_ERR(simba_lock_acquire(&t, c, names[i], 1000), SIMBA_EINVAL, "name");
    CHECK_ERR(simba_lock_try_acquire(&t, c, names[i]), SIMBA_EINVAL, "name");
    CHECK_ERR(simba_lock_acquire_async(c, names[i], 1000, lock_cb_count, NULL), SIMBA_EINVAL,
              "name");
  }
  CHECK_ERR(simba_election_start(&e, c, NULL, &l), SIMBA_EINVAL, NULL);
  CHECK_ERR(simba_lock_acquire(&t, c, NULL, 1000), SIMBA_EINVAL, NULL);
  CHECK_ERR(simba_lock_try_acquire(&t, c, NULL), SIMBA_EINVAL, NULL);
  CHECK_ERR(simba_lock_acquire_async(c, NULL, 1000, lock_cb_count, NULL), SIMBA_EINVAL, NULL);
  /* Nothing was started, nothing was asked of the backend. */
  after = simba_client_snapshot_json(c);
  assert_non_null(after);
  assert_int_equal(counter_value(after, "acquires"), counter_value(before, "acquires"));
  assert_non_null(strstr(after, "\"elections\":[]"));
  simba_free(before);
  simba_free(after);

  /* The longest name and every allowed character are fine. */
  memset(good, 'Z', 128);
  good[128] = '\0';
  CHECK_OK(simba_lock_acquire(&t, c, good, long_wait_ms()));
  assert_string_equal(simba_term_name(t), good);
  CHECK_OK(simba_lock_release(t));
  CHECK_OK(simba_lock_acquire(&t, c, "Az09._:-x", long_wait_ms()));
  assert_string_equal(simba_term_name(t), "Az09._:-x");
  CHECK_OK(simba_lock_release(t));
  CHECK_OK(simba_lock_acquire(&t, c, "...", long_wait_ms()));
  CHECK_OK(simba_lock_release(t));

  CHECK_OK(simba_client_close(c));
  assert_int_equal(ald(&lock_cb_calls), 0);
  assert_int_equal(ald(&r.calls), 0);
  rec_destroy(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version),
      cmocka_unit_test(test_error_codes_are_pinned),
      cmocka_unit_test(test_strerror),
      cmocka_unit_test(test_free_null),
      cmocka_unit_test(test_last_error_is_thread_local),
      cmocka_unit_test(test_config_null_arguments),
      cmocka_unit_test(test_config_defaults),
      cmocka_unit_test(test_config_derived_values),
      cmocka_unit_test(test_config_duration_formats),
      cmocka_unit_test(test_config_bad_keys_and_values),
      cmocka_unit_test(test_config_validate_rules),
      cmocka_unit_test(test_config_copy_is_independent),
      cmocka_unit_test(test_config_logger),
      cmocka_unit_test(test_config_set_executor),
      cmocka_unit_test(test_client_open_arguments),
      cmocka_unit_test(test_bad_lease_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The names of the ABI's values (simba_code_name, simba_session_status_name,
 * simba_event_name, simba_revoke_reason_name) and the lease-name rule as a
 * function (simba_lease_name_check), which bindings, tools and host modules use
 * in place of tables of their own.
 */
#include "capi_test.h"

/* Every name is static, non-empty, distinct from the others of its kind, and an
   unknown value reads "UNKNOWN" rather than NULL. */
static void check_names(const char *(*name_of)(int), const char *const *want, int first, int n) {
  int i, j;
  for (i = 0; i < n; ++i) {
    const char *s = name_of(first + i);
    assert_non_null(s);
    assert_string_equal(s, want[i]);
    assert_ptr_equal(name_of(first + i), s);
    for (j = 0; j < i; ++j) assert_string_not_equal(s, name_of(first + j));
  }
  assert_string_equal(name_of(first - 1), "UNKNOWN");
  assert_string_equal(name_of(first + n), "UNKNOWN");
  assert_string_equal(name_of(-2147483647 - 1), "UNKNOWN");
  assert_string_equal(name_of(2147483647), "UNKNOWN");
}

static const char *code_name(int v) { return simba_code_name(v); }
static const char *status_name(int v) {
  return simba_session_status_name((simba_session_status_t)v);
}
static const char *event_name(int v) { return simba_event_name((simba_event_type_t)v); }
static const char *reason_name(int v) { return simba_revoke_reason_name((simba_revoke_reason_t)v); }

static void test_code_names(void **state) {
  static const char *const want[] = {"ECANCELED", "EUNSUPPORTED", "EBUSY",    "EWOULDBLOCK",
                                     "ENOMEM",    "ECLOSED",      "EBACKEND", "ETIMEDOUT",
                                     "EEXPIRED",  "ESTATE",       "EINVAL",   "OK"};
  (void)state;
  check_names(code_name, want, SIMBA_ECANCELED, 12);
  assert_string_equal(simba_code_name(SIMBA_EBUSY), "EBUSY");
}

static void test_session_status_names(void **state) {
  static const char *const want[] = {"OPENING", "LIVE", "SUSPENDED", "CLOSED"};
  (void)state;
  check_names(status_name, want, SIMBA_SESSION_OPENING, 4);
}

static void test_event_names(void **state) {
  static const char *const want[] = {"SESSION_OPENED",    "SESSION_LIVE",
                                     "SESSION_SUSPENDED", "SESSION_EXPIRED",
                                     "SESSION_CLOSED",    "SESSION_LEASE_SHORTENED"};
  (void)state;
  check_names(event_name, want, SIMBA_EVENT_SESSION_OPENED, 6);
}

static void test_revoke_reason_names(void **state) {
  static const char *const want[] = {
      "NONE", "STOPPED", "STEPPED_DOWN", "DEADLINE_PASSED", "SESSION_EXPIRED", "TAKEN_OVER"};
  (void)state;
  check_names(reason_name, want, SIMBA_REVOKE_NONE, 6);
}

/* The reason a term reports and the name the snapshot shows are the same word. */
static void test_reason_name_matches_the_snapshot(void **state) {
  simba_client_t *c = open_live_client("names-snapshot");
  simba_term_t *t = NULL;
  char *snap, want[64];
  (void)state;
  CHECK_OK(simba_lock_acquire(&t, c, "names.lock", long_wait_ms()));
  simba_term_retain(t);
  CHECK_OK(simba_lock_release(t));
  assert_int_equal(simba_term_revoke_reason(t), SIMBA_REVOKE_STOPPED);
  snap = simba_client_metrics_text(c);
  assert_non_null(snap);
  snprintf(want, sizeof want, "reason=\"%s\"", simba_revoke_reason_name(SIMBA_REVOKE_STOPPED));
  assert_non_null(strstr(snap, want));
  simba_free(snap);
  simba_term_release(t);
  CHECK_OK(simba_client_close(c));
}

static void test_lease_name_check(void **state) {
  const char *const *bad = bad_lease_names();
  char longest[129], too_long[129];
  int i;
  (void)state;
  /* The same rule as every name-taking function (test_errors_config.c). */
  for (i = 0; bad[i]; ++i) {
    CHECK_ERR(simba_lease_name_check(bad[i], SIMBA_NAME_CSTRING), SIMBA_EINVAL, "lease name");
    CHECK_ERR(simba_lease_name_check(bad[i], strlen(bad[i])), SIMBA_EINVAL, "lease name");
  }
  CHECK_ERR(simba_lease_name_check(NULL, SIMBA_NAME_CSTRING), SIMBA_EINVAL, "NULL");
  CHECK_ERR(simba_lease_name_check(NULL, 3), SIMBA_EINVAL, "NULL");
  memset(longest, 'Z', 128);
  longest[128] = '\0';
  memset(too_long, 'Z', sizeof too_long);
  CHECK_OK(simba_lease_name_check(longest, SIMBA_NAME_CSTRING));
  CHECK_OK(simba_lease_name_check("Az09._:-x", SIMBA_NAME_CSTRING));

  /* A counted name: the NUL inside is refused and named, where a C string would
     end at it and read "jobs". */
  CHECK_ERR(simba_lease_name_check("jobs\0-tenant-1", 14), SIMBA_EINVAL, "NUL byte at index 4");
  CHECK_OK(simba_lease_name_check("jobs\0-tenant-1", 4));
  CHECK_OK(simba_lease_name_check("jobs\0-tenant-1", SIMBA_NAME_CSTRING));
  /* The length bounds the read: bytes after it are not looked at. */
  CHECK_OK(simba_lease_name_check("abc def", 3));
  CHECK_ERR(simba_lease_name_check("abc def", 4), SIMBA_EINVAL, "index 3");
  CHECK_ERR(simba_lease_name_check("abc", 0), SIMBA_EINVAL, "empty");
  /* Too long counts bytes, not up to a NUL. */
  CHECK_ERR(simba_lease_name_check(too_long, sizeof too_long), SIMBA_EINVAL, "at most 128");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_code_names),
      cmocka_unit_test(test_session_status_names),
      cmocka_unit_test(test_event_names),
      cmocka_unit_test(test_revoke_reason_names),
      cmocka_unit_test(test_reason_name_matches_the_snapshot),
      cmocka_unit_test(test_lease_name_check),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

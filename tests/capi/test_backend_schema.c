/*
 * simba_backend_schema (1.1): the DDL of a postgresql:// URL, honouring
 * schema=, without a server; EINVAL for bad arguments and malformed URLs;
 * EUNSUPPORTED for backends without a schema.
 */
#include "capi_test.h"

/* Port 1 on 127.0.0.1 has no server, and 192.0.2.1 (TEST-NET-1) routes nowhere:
 * a function that connected would fail or hang on them. */

static void test_schema_arguments(void **state) {
  char *text = (char *)"untouched";
  (void)state;
  CHECK_ERR(simba_backend_schema("postgresql://127.0.0.1:1/db", NULL), SIMBA_EINVAL, "out_text");
  CHECK_ERR(simba_backend_schema(NULL, &text), SIMBA_EINVAL, "NULL");
  assert_null(text); /* cleared on failure */
  CHECK_ERR(simba_backend_schema("", &text), SIMBA_EINVAL, "scheme");
  CHECK_ERR(simba_backend_schema("no-scheme", &text), SIMBA_EINVAL, "scheme");
  CHECK_ERR(simba_backend_schema("://x", &text), SIMBA_EINVAL, "scheme");
  assert_null(text);
}

static void test_schema_unsupported_backends(void **state) {
  char *text = NULL;
  (void)state;
  CHECK_ERR(simba_backend_schema("memory://x", &text), SIMBA_EUNSUPPORTED, "no schema");
  CHECK_ERR(simba_backend_schema("redis://u:hunter2@127.0.0.1:1/0", &text), SIMBA_EUNSUPPORTED,
            "redis");
  assert_null(strstr(simba_last_error(), "hunter2"));
  CHECK_ERR(simba_backend_schema("zookeeper://127.0.0.1:1/simba", &text), SIMBA_EUNSUPPORTED,
            "zookeeper");
  CHECK_ERR(simba_backend_schema("foo://x", &text), SIMBA_EUNSUPPORTED, "foo");
  assert_null(text);
#ifndef SIMBA_CAPI_HAVE_POSTGRES
  CHECK_ERR(simba_backend_schema("postgresql://u:hunter2@127.0.0.1:1/db", &text),
            SIMBA_EUNSUPPORTED, "not built");
  assert_null(strstr(simba_last_error(), "hunter2"));
  assert_null(text);
#endif
}

#ifdef SIMBA_CAPI_HAVE_POSTGRES
static int ends_with(const char *s, const char *suffix) {
  const size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void test_schema_postgres_default_and_named(void **state) {
  char *text = NULL, *again = NULL;
  int64_t t0;
  (void)state;
  /* The default schema is public. A password is taken, never checked. */
  t0 = now_ms();
  CHECK_OK(simba_backend_schema("postgresql://u:hunter2@192.0.2.1:5432/db", &text));
  assert_non_null(text);
  assert_true(strncmp(text, "-- Simba schema version 3 in schema \"public\"", 44) == 0);
  assert_non_null(strstr(text, "\nBEGIN;\n"));
  assert_non_null(strstr(text, "CREATE TABLE IF NOT EXISTS \"public\".simba_session"));
  assert_non_null(strstr(text, "CREATE TABLE IF NOT EXISTS \"public\".simba_lease"));
  assert_non_null(strstr(text, "\"public\".simba_acquire"));
  assert_non_null(strstr(text, "pg_notify('public_simba_released'"));
  assert_true(ends_with(text, "COMMIT;\n"));
  assert_null(strstr(text, "hunter2"));
  assert_null(strstr(text, "@S@")); /* every placeholder expanded */
  simba_free(text);
  text = NULL;

  /* schema= names every object; create= and libpq's own parameters are fine. */
  CHECK_OK(simba_backend_schema(
      "postgresql://127.0.0.1:1/db?sslmode=disable&schema=Tenant_7&create=false", &text));
  assert_non_null(text);
  assert_non_null(strstr(text, "in schema \"Tenant_7\""));
  assert_non_null(strstr(text, "CREATE SCHEMA \"Tenant_7\""));
  assert_non_null(strstr(text, "CREATE TABLE IF NOT EXISTS \"Tenant_7\".simba_lease"));
  assert_non_null(strstr(text, "pg_notify('Tenant_7_simba_released'"));
  assert_null(strstr(text, "\"public\""));
  /* postgres:// is the same backend: the same script. */
  CHECK_OK(simba_backend_schema("postgres://127.0.0.1:1/db?schema=Tenant_7", &again));
  assert_string_equal(text, again);
  simba_free(again);
  simba_free(text);
  /* Nothing connected: no waiting on the unroutable address. */
  assert_true(now_ms() - t0 < 1000 * tscale());
}

static void test_schema_postgres_malformed_urls(void **state) {
  char *text = NULL;
  (void)state;
  CHECK_ERR(simba_backend_schema("postgresql://127.0.0.1:1/db?schema=1bad", &text), SIMBA_EINVAL,
            "schema");
  CHECK_ERR(simba_backend_schema("postgresql://127.0.0.1:1/db?schema=a-b", &text), SIMBA_EINVAL,
            "schema");
  CHECK_ERR(simba_backend_schema("postgresql://127.0.0.1:1/db?schema=", &text), SIMBA_EINVAL,
            "schema");
  CHECK_ERR(simba_backend_schema("postgresql://127.0.0.1:1/db?create=maybe", &text), SIMBA_EINVAL,
            "create");
  CHECK_ERR(simba_backend_schema("postgresql://u:hunter2@127.0.0.1:1/db?nosuchparam=1", &text),
            SIMBA_EINVAL, "nosuchparam");
  assert_null(strstr(simba_last_error(), "hunter2"));
  assert_null(text);
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schema_arguments),
      cmocka_unit_test(test_schema_unsupported_backends),
#ifdef SIMBA_CAPI_HAVE_POSTGRES
      cmocka_unit_test(test_schema_postgres_default_and_named),
      cmocka_unit_test(test_schema_postgres_malformed_urls),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * libsimba's hiredis is its own (ADR 0021): a host that exports another
 * redisAsyncConnect (redis-server exports its hiredis to its modules) does not
 * get libsimba's calls. This executable is linked with its symbols exported
 * (ENABLE_EXPORTS, like redis-server's -rdynamic) and defines one.
 */
#include "capi_test.h"

static int host_copy_called; /* atomic */

/* Exported by the executable (default visibility: the tree builds hidden): the
 * dynamic linker would find it first. */
__attribute__((visibility("default"))) void *redisAsyncConnect(const char *ip, int port);
void *redisAsyncConnect(const char *ip, int port) {
  (void)ip;
  (void)port;
  ainc(&host_copy_called);
  return NULL; /* what a foreign hiredis's answer would be worth to libsimba */
}

static void test_redis_calls_stay_inside_libsimba(void **state) {
#if defined(SIMBA_CAPI_HAVE_REDIS) && defined(SIMBA_CAPI_STATIC_HIREDIS)
  simba_config_t *cfg = test_config(lease_ms());
  simba_client_t *c = NULL;
  int64_t until;
  (void)state;
  CHECK_OK(simba_config_set(cfg, "loop.mode", "external"));
  /* Nothing listens on port 1: the connect is tried (and refused) all the same. */
  CHECK_OK(simba_client_open(&c, "redis://127.0.0.1:1", cfg));
  simba_config_free(cfg);
  until = now_ms() + quiet_ms();
  while (now_ms() < until) {
    CHECK_OK(simba_client_process(c));
    sleep_ms(5);
  }
  CHECK_OK(simba_client_close(c));
  assert_int_equal(ald(&host_copy_called), 0);
#else
  (void)state;
  skip();
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_redis_calls_stay_inside_libsimba),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

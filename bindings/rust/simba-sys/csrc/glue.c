/* C helpers for simba-sys: the raw C baseline of the lock-cycle benchmark, so
 * the binding's cycle can be compared with a loop written in C, in the same
 * process, on the same client. */
#define _POSIX_C_SOURCE 200809L
#include <simba.h>
#include <time.h>

static int64_t glue_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* n cycles of simba_lock_acquire + simba_lock_release on `name`. Returns the
 * elapsed nanoseconds, or a negative SIMBA_E* code of the first failure. */
int64_t simba_sys_glue_lock_cycles(simba_client_t *c, const char *name, int64_t n,
                                   int64_t timeout_ms) {
  int64_t i;
  const int64_t t0 = glue_now_ns();
  for (i = 0; i < n; ++i) {
    simba_term_t *t = NULL;
    int rc = simba_lock_acquire(&t, c, name, timeout_ms);
    if (rc != SIMBA_OK) return rc;
    rc = simba_lock_release(t);
    if (rc != SIMBA_OK) return rc;
  }
  return glue_now_ns() - t0;
}

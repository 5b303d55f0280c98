/*
 * Helpers shared by the fencing kit's tests (tests/tck/test_*.c): plain C99
 * against include/simba/tck.h and the recipes of examples/fencing/.
 *
 * Each test is its own program: it prints every report it gets, returns 0 when
 * every expectation held, 1 otherwise, and 77 (ctest SKIP_RETURN_CODE) when the
 * server it needs is not configured.
 */
#ifndef SIMBA_TCK_TEST_H
#define SIMBA_TCK_TEST_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "simba/tck.h"

#define TCK_SKIP 77

static int tck_failures = 0;

#define TCK_CHECK(cond)                                                        \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++tck_failures;                                                          \
    }                                                                          \
  } while (0)

/* Options for a run: fewer rounds under valgrind and the sanitizers, which set
 * SIMBA_VALGRIND / SIMBA_SANITIZER in the tests' environment. */
static inline simba_tck_options_t tck_options(uint32_t rounds) {
  simba_tck_options_t o;
  const char *vg = getenv("SIMBA_VALGRIND");
  const char *san = getenv("SIMBA_SANITIZER");
  memset(&o, 0, sizeof o);
  o.version = SIMBA_TCK_OPTIONS_V1;
  o.writers = 6;
  o.rounds = rounds;
  if ((vg && *vg && strcmp(vg, "0") != 0) || (san && *san)) o.rounds = rounds / 3 + 1;
  return o;
}

/* Run the kit and print the report under a title. Returns the report (or NULL
 * after counting a failure). */
static inline simba_tck_report_t *tck_run(const char *title, const simba_tck_resource_t *res,
                                          const simba_tck_options_t *opts) {
  simba_tck_report_t *rep = NULL;
  int rc = simba_tck_run_fencing_spec(&rep, res, opts);
  printf("---- %s\n", title);
  if (rc != SIMBA_OK || rep == NULL) {
    printf("simba_tck_run_fencing_spec failed: %d\n", rc);
    ++tck_failures;
    return NULL;
  }
  fputs(simba_tck_report_text(rep), stdout);
  fflush(stdout);
  return rep;
}

/* 1 if the report has a case of that name and it passed. */
static inline int tck_case_passed(const simba_tck_report_t *rep, const char *name) {
  size_t i, n = simba_tck_report_case_count(rep);
  for (i = 0; i < n; ++i) {
    if (strcmp(simba_tck_report_case_name(rep, i), name) == 0) {
      return simba_tck_report_case_passed(rep, i);
    }
  }
  fprintf(stderr, "no case named %s in the report\n", name);
  ++tck_failures;
  return 0;
}

/* The recipe must pass the whole spec. */
static inline void tck_expect_pass(const char *title, const simba_tck_resource_t *res,
                                   const simba_tck_options_t *opts) {
  simba_tck_report_t *rep = tck_run(title, res, opts);
  if (rep == NULL) return;
  TCK_CHECK(simba_tck_report_passed(rep) == 1);
  TCK_CHECK(simba_tck_report_case_count(rep) == 5);
  simba_tck_report_free(rep);
}

static inline void tck_sleep_us(long us) {
  struct timespec ts;
  ts.tv_sec = us / 1000000;
  ts.tv_nsec = (us % 1000000) * 1000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* A small pseudo-random number, safe from any thread (a GCC/Clang atomic
 * builtin, which -pedantic C99 accepts): for broken resources' pauses. */
static inline unsigned tck_rand(void) {
  static unsigned counter = 0;
  unsigned x = __atomic_add_fetch(&counter, 1u, __ATOMIC_RELAXED) * 2654435761u;
  x ^= x >> 15;
  return x & 0x7fff;
}

static inline int tck_finish(const char *name) {
  if (tck_failures) {
    printf("%s: %d check(s) failed\n", name, tck_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

#endif

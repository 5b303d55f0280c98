/*
 * The kit's negative controls: resources that break the fencing rule in the ways
 * people do break it must FAIL the kit, each in the case that pins that rule.
 * The first one is the important one: a check and a write that are two steps
 * (here two critical sections with a pause between, as a read and a write over
 * the network would be) pass every sequential case and fail only the concurrent
 * writers, which is why the kit has them.
 */
#include <pthread.h>

#include "tck_test.h"

typedef enum {
  BROKEN_CHECK_THEN_WRITE, /* check under the lock, pause, write under the lock again */
  BROKEN_STRICTLY_GREATER, /* rejects equal tokens: retries within a term fail */
  BROKEN_NO_CHECK,         /* last writer wins */
  BROKEN_32BIT_TOKENS,     /* keeps the token in 32 bits */
  BROKEN_WRITE_ERRORS      /* answers SIMBA_TCK_ERROR to the fifth write */
} broken_mode_t;

typedef struct broken {
  broken_mode_t mode;
  pthread_mutex_t mu;
  uint64_t highest;
  int has_value;
  char value[SIMBA_TCK_VALUE_MAX];
  int writes;
} broken_t;

static int broken_reset(void *ud) {
  broken_t *b = ud;
  pthread_mutex_lock(&b->mu);
  b->highest = 0;
  b->has_value = 0;
  b->writes = 0;
  pthread_mutex_unlock(&b->mu);
  return 0;
}

static void store(broken_t *b, uint64_t token, const char *value) {
  b->highest = token;
  strncpy(b->value, value, sizeof b->value - 1);
  b->value[sizeof b->value - 1] = '\0';
  b->has_value = 1;
}

static int broken_write(void *ud, uint64_t token, const char *value) {
  broken_t *b = ud;
  int ok = 0;
  if (b->mode == BROKEN_CHECK_THEN_WRITE) {
    pthread_mutex_lock(&b->mu);
    ok = token >= b->highest; /* the check ... */
    pthread_mutex_unlock(&b->mu);
    if (!ok) return SIMBA_TCK_REJECTED;
    tck_sleep_us((long)(tck_rand() % 200)); /* ... a pause (GC, a network hop) ... */
    pthread_mutex_lock(&b->mu);
    store(b, token, value); /* ... and the write, no longer checked */
    pthread_mutex_unlock(&b->mu);
    return SIMBA_TCK_ACCEPTED;
  }
  pthread_mutex_lock(&b->mu);
  switch (b->mode) {
    case BROKEN_STRICTLY_GREATER:
      ok = token > b->highest;
      break;
    case BROKEN_NO_CHECK:
      ok = 1;
      break;
    case BROKEN_32BIT_TOKENS:
      ok = (uint32_t)token >= (uint32_t)b->highest;
      if (ok) {
        store(b, (uint32_t)token, value);
        pthread_mutex_unlock(&b->mu);
        return SIMBA_TCK_ACCEPTED;
      }
      break;
    case BROKEN_WRITE_ERRORS:
      if (++b->writes == 5) {
        pthread_mutex_unlock(&b->mu);
        return SIMBA_TCK_ERROR;
      }
      ok = token >= b->highest;
      break;
    case BROKEN_CHECK_THEN_WRITE:
      break;
  }
  if (ok) store(b, token, value);
  pthread_mutex_unlock(&b->mu);
  return ok ? SIMBA_TCK_ACCEPTED : SIMBA_TCK_REJECTED;
}

static int broken_read(void *ud, char *buf, size_t cap) {
  broken_t *b = ud;
  int has;
  pthread_mutex_lock(&b->mu);
  has = b->has_value;
  if (has) {
    strncpy(buf, b->value, cap - 1);
    buf[cap - 1] = '\0';
  }
  pthread_mutex_unlock(&b->mu);
  return has;
}

static simba_tck_resource_t resource_for(broken_t *b) {
  simba_tck_resource_t res;
  memset(&res, 0, sizeof res);
  res.version = SIMBA_TCK_RESOURCE_V1;
  res.reset = broken_reset;
  res.write = broken_write;
  res.read = broken_read;
  res.ud = b;
  return res;
}

/* Run the kit on a broken resource: the report must fail, in @p failing (and,
 * when only_that is set, in no other case). */
static void expect_caught(broken_mode_t mode, const char *title, const char *failing,
                          int only_that) {
  broken_t b;
  simba_tck_resource_t res;
  simba_tck_options_t opts = tck_options(60);
  simba_tck_report_t *rep;
  size_t i;
  memset(&b, 0, sizeof b);
  b.mode = mode;
  pthread_mutex_init(&b.mu, NULL);
  res = resource_for(&b);
  rep = tck_run(title, &res, &opts);
  if (rep != NULL) {
    TCK_CHECK(simba_tck_report_passed(rep) == 0);
    TCK_CHECK(tck_case_passed(rep, failing) == 0);
    for (i = 0; only_that && i < simba_tck_report_case_count(rep); ++i) {
      if (strcmp(simba_tck_report_case_name(rep, i), failing) != 0) {
        TCK_CHECK(simba_tck_report_case_passed(rep, i) == 1);
      } else {
        TCK_CHECK(strlen(simba_tck_report_case_detail(rep, i)) > 0);
      }
    }
    TCK_CHECK(strstr(simba_tck_report_text(rep), "fencing spec: FAILED") != NULL);
    simba_tck_report_free(rep);
  }
  pthread_mutex_destroy(&b.mu);
}

/* The kit refuses what it cannot run. */
static void bad_arguments(void) {
  broken_t b;
  simba_tck_resource_t res;
  simba_tck_options_t opts = tck_options(1);
  simba_tck_report_t *rep = (simba_tck_report_t *)&b; /* must be reset to NULL */
  memset(&b, 0, sizeof b);
  pthread_mutex_init(&b.mu, NULL);
  res = resource_for(&b);

  TCK_CHECK(simba_tck_run_fencing_spec(NULL, &res, NULL) == SIMBA_EINVAL);
  TCK_CHECK(simba_tck_run_fencing_spec(&rep, NULL, NULL) == SIMBA_EINVAL);
  TCK_CHECK(rep == NULL);
  res.version = 2;
  TCK_CHECK(simba_tck_run_fencing_spec(&rep, &res, NULL) == SIMBA_EINVAL);
  res.version = SIMBA_TCK_RESOURCE_V1;
  res.write = NULL;
  TCK_CHECK(simba_tck_run_fencing_spec(&rep, &res, NULL) == SIMBA_EINVAL);
  res.write = broken_write;
  opts.writers = 65;
  TCK_CHECK(simba_tck_run_fencing_spec(&rep, &res, &opts) == SIMBA_EINVAL);
  opts.writers = 2;
  opts.version = 0;
  TCK_CHECK(simba_tck_run_fencing_spec(&rep, &res, &opts) == SIMBA_EINVAL);

  /* The report functions accept NULL and out-of-range indexes. */
  TCK_CHECK(simba_tck_report_passed(NULL) == 0);
  TCK_CHECK(simba_tck_report_case_count(NULL) == 0);
  TCK_CHECK(simba_tck_report_case_name(NULL, 0) == NULL);
  TCK_CHECK(simba_tck_report_case_detail(NULL, 0) == NULL);
  TCK_CHECK(simba_tck_report_case_passed(NULL, 0) == 0);
  TCK_CHECK(strcmp(simba_tck_report_text(NULL), "") == 0);
  simba_tck_report_free(NULL);
  pthread_mutex_destroy(&b.mu);
}

int main(void) {
  expect_caught(BROKEN_CHECK_THEN_WRITE, "broken: check, pause, then write (not atomic)",
                "concurrent_writers", 1);
  expect_caught(BROKEN_STRICTLY_GREATER, "broken: rejects equal tokens", "equal_token_accepted", 0);
  expect_caught(BROKEN_NO_CHECK, "broken: last writer wins", "lower_token_rejected", 0);
  expect_caught(BROKEN_32BIT_TOKENS, "broken: 32-bit tokens", "non_consecutive_tokens_accepted", 0);
  /* An error is never a pass: the fifth write after a reset is in lower_token_rejected. */
  expect_caught(BROKEN_WRITE_ERRORS, "broken: a write answers error", "lower_token_rejected", 0);
  bad_arguments();
  return tck_finish("tck_negative_control");
}

/*
 * Helpers shared by the capi tests (tests/capi/test_*.c): plain C99 against the
 * public header only. Everything here is `static inline` so that a test that
 * does not use a helper does not warn about it.
 *
 * Timing: every wait is a bounded poll of a condition (WAIT_UNTIL), never a
 * sleep that assumes a speed. Durations scale up under valgrind and sanitizers
 * (SIMBA_VALGRIND / SIMBA_SANITIZER in the environment, set by ctest).
 *
 * Atomics: C99 has none, so the GCC/Clang __atomic builtins are used (they are
 * builtins, not a language extension that -pedantic rejects).
 */
#ifndef SIMBA_CAPI_TEST_H
#define SIMBA_CAPI_TEST_H

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* cmocka needs the headers above first (clang-format: keep it in its own block). */
/* clang-format off */
#include <cmocka.h>
/* clang-format on */

#include "simba.h"

/* ------------------------------------------------------------------------- */
/* Clock, sleeping, scaling */

static inline int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void sleep_ms(int64_t ms) {
  struct timespec ts;
  ts.tv_sec = (time_t)(ms / 1000);
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* How much slower than a plain build this run is. */
static inline int64_t tscale(void) {
  static int64_t scale = 0;
  if (scale == 0) {
    const char *vg = getenv("SIMBA_VALGRIND");
    const char *san = getenv("SIMBA_SANITIZER");
    scale = 1;
    if (vg && *vg && strcmp(vg, "0") != 0) {
      scale = 5;
    } else if (san && *san) {
      scale = strcmp(san, "thread") == 0 ? 4 : 2;
    }
  }
  return scale;
}

/* The session lease of most tests: short, so tests are fast. */
static inline int64_t lease_ms(void) { return 500 * tscale(); }
/* A generous bound for anything that should happen "soon". */
static inline int64_t long_wait_ms(void) { return 15000 * tscale(); }

/* EXTERNAL mode: waits for the client's fd, at most until its timeout and
 * never more than `max_ms`; returns poll's answer. */
static inline int poll_client(simba_client_t *c, int64_t max_ms) {
  struct pollfd p;
  int64_t t = simba_client_timeout_ms(c);
  if (t < 0 || t > max_ms) t = max_ms;
  p.fd = simba_client_fd(c);
  p.events = POLLIN;
  p.revents = 0;
  return poll(&p, 1, (int)t);
}

/* EXTERNAL mode: polls the client's fd (at most 10 ms) and processes until
 * simba_client_process answers anything but SIMBA_OK or the long wait passed;
 * returns that answer. *in_process (may be NULL) is 1 while it processes. */
static inline int process_until_not_ok(simba_client_t *c, int *in_process) {
  const int64_t until = now_ms() + long_wait_ms();
  int rc = SIMBA_OK;
  while (rc == SIMBA_OK && now_ms() < until) {
    poll_client(c, 10);
    if (in_process) *in_process = 1;
    rc = simba_client_process(c);
    if (in_process) *in_process = 0;
  }
  return rc;
}
/* A short quiet period used to check that nothing more happens. */
static inline int64_t quiet_ms(void) { return 300 * tscale(); }

/* Polls `cond` every 2 ms until it holds or `timeout` ms passed. */
#define WAIT_UNTIL(cond, timeout)                             \
  do {                                                        \
    const int64_t wait_deadline_ = now_ms() + (timeout);      \
    while (!(cond) && now_ms() < wait_deadline_) sleep_ms(2); \
  } while (0)

/* Waits (long_wait_ms) for `cond`, then asserts it. */
#define ASSERT_EVENTUALLY(cond)         \
  do {                                  \
    WAIT_UNTIL((cond), long_wait_ms()); \
    assert_true(cond);                  \
  } while (0)

/* ------------------------------------------------------------------------- */
/* Atomics */

static inline int ald(const int *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static inline void ast(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static inline int ainc(int *p) { return __atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST); }
static inline int axchg(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static inline int64_t ald64(const int64_t *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static inline void ast64(int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static inline uint64_t aldu64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static inline void astu64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static inline void *aldp(void *const *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static inline void astp(void **p, void *v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }

/* ------------------------------------------------------------------------- */
/* Strings and error checks */

static inline int contains_ci(const char *hay, const char *needle) {
  size_t n, i, j;
  if (!hay || !needle) return 0;
  n = strlen(needle);
  if (n == 0) return 1;
  for (i = 0; hay[i]; ++i) {
    for (j = 0; j < n; ++j) {
      if (!hay[i + j]) return 0;
      if (tolower((unsigned char)hay[i + j]) != tolower((unsigned char)needle[j])) break;
    }
    if (j == n) return 1;
  }
  return 0;
}

/* Asserts the last error detail is non-empty and mentions `about` (case-insensitive). */
static inline void check_last_error_(const char *about, const char *file, int line) {
  const char *e = simba_last_error();
  if (e == NULL) {
    print_error("%s:%d: simba_last_error() returned NULL\n", file, line);
    fail();
  }
  if (e[0] == '\0') {
    print_error("%s:%d: simba_last_error() is empty after a failure\n", file, line);
    fail();
  }
  if (about && !contains_ci(e, about)) {
    print_error("%s:%d: simba_last_error() = \"%s\" does not mention \"%s\"\n", file, line, e,
                about);
    fail();
  }
}

static inline void check_err_(int rc, int want, const char *about, const char *expr,
                              const char *file, int line) {
  if (rc != want) {
    print_error("%s:%d: %s returned %d (%s), expected %d (%s); last error: \"%s\"\n", file, line,
                expr, rc, simba_strerror(rc), want, simba_strerror(want), simba_last_error());
    fail();
  }
  if (want != SIMBA_OK) check_last_error_(about, file, line);
}

/* CHECK_ERR(call, SIMBA_Exxx, "word"): the call returns the code; on failure the
 * detail is non-empty and mentions "word" (NULL: any detail). */
#define CHECK_ERR(call, want, about) check_err_((call), (want), (about), #call, __FILE__, __LINE__)
#define CHECK_OK(call) check_err_((call), SIMBA_OK, NULL, #call, __FILE__, __LINE__)

/* ------------------------------------------------------------------------- */
/* A small JSON syntax checker (RFC 8259 grammar, no semantic checks). */

static inline void json_ws_(const char **p) {
  while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r') ++*p;
}

static inline int json_value_(const char **p, int depth);

static inline int json_string_(const char **p) {
  if (**p != '"') return 0;
  ++*p;
  for (;;) {
    unsigned char ch = (unsigned char)**p;
    if (ch == '\0' || ch < 0x20) return 0;
    if (ch == '"') {
      ++*p;
      return 1;
    }
    if (ch == '\\') {
      ++*p;
      ch = (unsigned char)**p;
      if (ch == 'u') {
        int i;
        for (i = 1; i <= 4; ++i) {
          if (!isxdigit((unsigned char)(*p)[i])) return 0;
        }
        *p += 5;
        continue;
      }
      if (!strchr("\"\\/bfnrt", ch) || ch == '\0') return 0;
    }
    ++*p;
  }
}

static inline int json_number_(const char **p) {
  const char *s = *p;
  if (**p == '-') ++*p;
  if (**p == '0') {
    ++*p;
  } else if (**p >= '1' && **p <= '9') {
    while (isdigit((unsigned char)**p)) ++*p;
  } else {
    return 0;
  }
  if (**p == '.') {
    ++*p;
    if (!isdigit((unsigned char)**p)) return 0;
    while (isdigit((unsigned char)**p)) ++*p;
  }
  if (**p == 'e' || **p == 'E') {
    ++*p;
    if (**p == '+' || **p == '-') ++*p;
    if (!isdigit((unsigned char)**p)) return 0;
    while (isdigit((unsigned char)**p)) ++*p;
  }
  return *p > s;
}

static inline int json_value_(const char **p, int depth) {
  if (depth > 64) return 0;
  json_ws_(p);
  switch (**p) {
    case '{':
      ++*p;
      json_ws_(p);
      if (**p == '}') {
        ++*p;
        return 1;
      }
      for (;;) {
        json_ws_(p);
        if (!json_string_(p)) return 0;
        json_ws_(p);
        if (**p != ':') return 0;
        ++*p;
        if (!json_value_(p, depth + 1)) return 0;
        json_ws_(p);
        if (**p == ',') {
          ++*p;
          continue;
        }
        if (**p == '}') {
          ++*p;
          return 1;
        }
        return 0;
      }
    case '[':
      ++*p;
      json_ws_(p);
      if (**p == ']') {
        ++*p;
        return 1;
      }
      for (;;) {
        if (!json_value_(p, depth + 1)) return 0;
        json_ws_(p);
        if (**p == ',') {
          ++*p;
          continue;
        }
        if (**p == ']') {
          ++*p;
          return 1;
        }
        return 0;
      }
    case '"':
      return json_string_(p);
    case 't':
      if (strncmp(*p, "true", 4) != 0) return 0;
      *p += 4;
      return 1;
    case 'f':
      if (strncmp(*p, "false", 5) != 0) return 0;
      *p += 5;
      return 1;
    case 'n':
      if (strncmp(*p, "null", 4) != 0) return 0;
      *p += 4;
      return 1;
    default:
      return json_number_(p);
  }
}

/* 1 if `s` is one syntactically valid JSON value (an object or array here). */
static inline int json_valid(const char *s) {
  const char *p = s;
  if (!s) return 0;
  json_ws_(&p);
  if (*p != '{' && *p != '[') return 0;
  if (!json_value_(&p, 0)) return 0;
  json_ws_(&p);
  return *p == '\0';
}

/* Copies the string value of the first `"key":"..."` in `json` into `out`
 * (no unescaping; enough for ids). 1 if found. */
static inline int json_find_string(const char *json, const char *key, char *out, size_t cap) {
  char pat[128];
  const char *at, *end;
  size_t n;
  snprintf(pat, sizeof pat, "\"%s\":", key);
  at = json ? strstr(json, pat) : NULL;
  if (!at) return 0;
  at += strlen(pat);
  while (*at == ' ') ++at;
  if (*at != '"') return 0;
  ++at;
  end = strchr(at, '"');
  if (!end) return 0;
  n = (size_t)(end - at);
  if (n + 1 > cap) return 0;
  memcpy(out, at, n);
  out[n] = '\0';
  return 1;
}

/* ------------------------------------------------------------------------- */
/* Clients */

/* A config with the test lease (renew-interval and jitter derived). */
static inline simba_config_t *test_config(int64_t lease) {
  simba_config_t *cfg = NULL;
  assert_int_equal(simba_config_new(&cfg), SIMBA_OK);
  assert_non_null(cfg);
  assert_int_equal(simba_config_set_ms(cfg, "session.lease-duration", lease), SIMBA_OK);
  assert_int_equal(simba_config_validate(cfg), SIMBA_OK);
  return cfg;
}

/* Opens memory://store with the test lease and an optional extra key. */
static inline simba_client_t *open_client_kv(const char *store, const char *key,
                                             const char *value) {
  char url[256];
  simba_client_t *c = NULL;
  simba_config_t *cfg = test_config(lease_ms());
  if (key) assert_int_equal(simba_config_set(cfg, key, value), SIMBA_OK);
  snprintf(url, sizeof url, "memory://%s", store);
  CHECK_OK(simba_client_open(&c, url, cfg));
  assert_non_null(c);
  simba_config_free(cfg);
  return c;
}

static inline simba_client_t *open_client(const char *store) {
  return open_client_kv(store, NULL, NULL);
}

static inline simba_client_t *open_live_client(const char *store) {
  simba_client_t *c = open_client(store);
  CHECK_OK(simba_client_wait_live(c, long_wait_ms()));
  return c;
}

/* ------------------------------------------------------------------------- */
/* A recording election listener.
 *
 * It checks, for every callback of its election:
 *  - callbacks never overlap (an "inside" flag);
 *  - every on_elected is followed by exactly one on_revoked for the same term
 *    pointer (the term is retained from on_elected until its on_revoked);
 *  - the term passed to on_revoked is already invalid and reads the reason;
 *  - nothing runs after it was sealed (rec_seal: its stop completed / client closed).
 * It logs 'E' (elected), 'R' (revoked), 'D' (stop done), 'S' (step-down done).
 */

#define REC_MAX 64

typedef struct rec rec_t;
typedef void (*rec_hook_fn)(rec_t *r, simba_term_t *t);

struct rec {
  const char *tag;
  pthread_mutex_t mu;
  char log[REC_MAX + 1];
  int nlog;
  uint64_t tokens[REC_MAX]; /* token of each on_elected, in order */
  int ntokens;
  simba_revoke_reason_t reasons[REC_MAX]; /* reason of each on_revoked, in order */
  int nreasons;
  simba_term_t *open_terms[REC_MAX]; /* elected, not yet revoked (retained) */
  int nopen;
  simba_term_t *current; /* the last elected term, retained by the test (rec_take_term) */

  int elected, revoked, done, sd_done, calls; /* atomics */
  int done_err, sd_err;                       /* last codes seen */
  int inside, overlap;                        /* atomics */
  int pair_violations;                        /* on_revoked without a matching on_elected */
  int revoked_but_valid;                      /* on_revoked with a term still valid */
  int reason_mismatch;                        /* revoke_reason(t) != reason in on_revoked */
  int after_seal;                             /* callbacks after rec_seal */
  int sealed;
  int64_t elected_at[REC_MAX];
  pthread_t cb_thread;
  int cb_thread_set;
  int cb_thread_changed;

  rec_hook_fn on_elected_hook; /* runs inside on_elected (after recording) */
  rec_hook_fn on_revoked_hook; /* runs inside on_revoked (after recording) */
  void *hook_ud;
};

static inline void rec_init(rec_t *r, const char *tag) {
  memset(r, 0, sizeof *r);
  r->tag = tag;
  pthread_mutex_init(&r->mu, NULL);
}

static inline void rec_enter_(rec_t *r, char what) {
  if (axchg(&r->inside, 1) != 0) ainc(&r->overlap);
  if (ald(&r->sealed)) ainc(&r->after_seal);
  ainc(&r->calls);
  pthread_mutex_lock(&r->mu);
  if (r->nlog < REC_MAX) r->log[r->nlog++] = what;
  r->log[r->nlog] = '\0';
  if (!r->cb_thread_set) {
    r->cb_thread = pthread_self();
    r->cb_thread_set = 1;
  } else if (!pthread_equal(r->cb_thread, pthread_self())) {
    r->cb_thread_changed = 1;
  }
  pthread_mutex_unlock(&r->mu);
}

static inline void rec_leave_(rec_t *r) { ast(&r->inside, 0); }

static inline void rec_on_elected(void *ud, simba_term_t *t) {
  rec_t *r = (rec_t *)ud;
  rec_enter_(r, 'E');
  simba_term_retain(t); /* for the pairing check */
  simba_term_retain(t); /* for r->current */
  pthread_mutex_lock(&r->mu);
  if (r->nopen < REC_MAX) {
    r->open_terms[r->nopen++] = t;
  } else {
    simba_term_release(t);
  }
  if (r->ntokens < REC_MAX) {
    r->elected_at[r->ntokens] = now_ms();
    r->tokens[r->ntokens++] = simba_term_token(t);
  }
  if (r->current) simba_term_release(r->current);
  r->current = t;
  pthread_mutex_unlock(&r->mu);
  ainc(&r->elected);
  if (r->on_elected_hook) r->on_elected_hook(r, t);
  rec_leave_(r);
}

static inline void rec_on_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t reason) {
  rec_t *r = (rec_t *)ud;
  int i, found = 0;
  rec_enter_(r, 'R');
  if (simba_term_is_valid(t)) ainc(&r->revoked_but_valid);
  if (simba_term_revoke_reason(t) != reason) ainc(&r->reason_mismatch);
  pthread_mutex_lock(&r->mu);
  for (i = 0; i < r->nopen; ++i) {
    if (r->open_terms[i] == t) {
      r->open_terms[i] = r->open_terms[--r->nopen];
      found = 1;
      break;
    }
  }
  if (r->nreasons < REC_MAX) r->reasons[r->nreasons++] = reason;
  pthread_mutex_unlock(&r->mu);
  if (found) {
    simba_term_release(t);
  } else {
    ainc(&r->pair_violations);
  }
  ainc(&r->revoked);
  if (r->on_revoked_hook) r->on_revoked_hook(r, t);
  rec_leave_(r);
}

static inline void rec_on_done(void *ud, int err) {
  rec_t *r = (rec_t *)ud;
  rec_enter_(r, 'D');
  ast(&r->done_err, err);
  ainc(&r->done);
  rec_leave_(r);
}

static inline void rec_on_step_down_done(void *ud, int err) {
  rec_t *r = (rec_t *)ud;
  rec_enter_(r, 'S');
  ast(&r->sd_err, err);
  ainc(&r->sd_done);
  rec_leave_(r);
}

static inline simba_listener_t rec_listener(rec_t *r) {
  simba_listener_t l;
  l.on_elected = rec_on_elected;
  l.on_revoked = rec_on_revoked;
  l.ud = r;
  return l;
}

static inline simba_election_t *rec_start(rec_t *r, simba_client_t *c, const char *name) {
  simba_election_t *e = NULL;
  simba_listener_t l = rec_listener(r);
  CHECK_OK(simba_election_start(&e, c, name, &l));
  assert_non_null(e);
  return e;
}

/* The last elected term, retained for the caller (simba_term_release it). */
static inline simba_term_t *rec_take_term(rec_t *r) {
  simba_term_t *t;
  pthread_mutex_lock(&r->mu);
  t = r->current;
  if (t) simba_term_retain(t);
  pthread_mutex_unlock(&r->mu);
  return t;
}

static inline uint64_t rec_token(rec_t *r, int i) {
  uint64_t v;
  pthread_mutex_lock(&r->mu);
  v = i < r->ntokens ? r->tokens[i] : 0;
  pthread_mutex_unlock(&r->mu);
  return v;
}

static inline simba_revoke_reason_t rec_reason(rec_t *r, int i) {
  simba_revoke_reason_t v;
  pthread_mutex_lock(&r->mu);
  v = i < r->nreasons ? r->reasons[i] : (simba_revoke_reason_t)-1;
  pthread_mutex_unlock(&r->mu);
  return v;
}

static inline void rec_log(rec_t *r, char *out, size_t cap) {
  pthread_mutex_lock(&r->mu);
  snprintf(out, cap, "%s", r->log);
  pthread_mutex_unlock(&r->mu);
}

/* From now on any callback of this listener is a failure. */
static inline void rec_seal(rec_t *r) { ast(&r->sealed, 1); }

/* Asserts every invariant; call once no more callbacks can come (stop done or
 * client closed). `pairs` 1: every on_elected had its on_revoked. */
static inline void rec_check_(rec_t *r, int pairs, const char *file, int line) {
  char log[REC_MAX + 1];
  rec_log(r, log, sizeof log);
  if (ald(&r->overlap) != 0) {
    print_error("%s:%d: [%s] callbacks of one election overlapped (log %s)\n", file, line, r->tag,
                log);
    fail();
  }
  if (ald(&r->pair_violations) != 0) {
    print_error("%s:%d: [%s] on_revoked for a term without on_elected (log %s)\n", file, line,
                r->tag, log);
    fail();
  }
  if (pairs && r->nopen != 0) {
    print_error("%s:%d: [%s] %d on_elected without their on_revoked (log %s)\n", file, line, r->tag,
                r->nopen, log);
    fail();
  }
  if (ald(&r->revoked_but_valid) != 0) {
    print_error("%s:%d: [%s] on_revoked got a term that still reads valid\n", file, line, r->tag);
    fail();
  }
  if (ald(&r->reason_mismatch) != 0) {
    print_error("%s:%d: [%s] on_revoked reason differs from simba_term_revoke_reason\n", file, line,
                r->tag);
    fail();
  }
  if (ald(&r->after_seal) != 0) {
    print_error("%s:%d: [%s] %d callbacks ran after the stop/close completed (log %s)\n", file,
                line, r->tag, ald(&r->after_seal), log);
    fail();
  }
}
#define REC_CHECK(r) rec_check_((r), 1, __FILE__, __LINE__)
#define REC_CHECK_NO_PAIRS(r) rec_check_((r), 0, __FILE__, __LINE__)

/* Drops every reference the listener holds. */
static inline void rec_destroy(rec_t *r) {
  int i;
  pthread_mutex_lock(&r->mu);
  for (i = 0; i < r->nopen; ++i) simba_term_release(r->open_terms[i]);
  r->nopen = 0;
  if (r->current) simba_term_release(r->current);
  r->current = NULL;
  pthread_mutex_unlock(&r->mu);
  pthread_mutex_destroy(&r->mu);
}

/* Waits until `r` has been elected `n` times in total. */
#define WAIT_ELECTED(r, n) ASSERT_EVENTUALLY(ald(&(r)->elected) >= (n))
#define WAIT_REVOKED(r, n) ASSERT_EVENTUALLY(ald(&(r)->revoked) >= (n))

/* Asserts a lease name is refused with EINVAL, naming the lease name. */
static inline const char *const *bad_lease_names(void) {
  static char long_name[130];
  static const char *names[8];
  if (!names[0]) {
    memset(long_name, 'a', 129);
    long_name[129] = '\0';
    names[0] = "";
    names[1] = long_name;
    names[2] = ".";
    names[3] = "..";
    names[4] = "a b";
    names[5] = "a/b";
    names[6] = "caf\xc3\xa9";
    names[7] = NULL;
  }
  return names;
}

#endif /* SIMBA_CAPI_TEST_H */

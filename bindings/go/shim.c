/* The C half of the Go binding: shims (see simba_go.h) and the trampolines
 * that carry library callbacks to the //export functions of callbacks.go. The
 * user data of every callback is a runtime/cgo.Handle. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "_cgo_export.h"
#include "simba_go.h"

/* A lease name has at most 128 bytes (simba_lease_name_check). */
#define NAME_CAP 129

static int go_err(int rc, char **msg) {
  if (rc < 0 && msg) *msg = strdup(simba_last_error());
  return rc;
}

/* Checks a Go string as a lease name and copies it into buf (NAME_CAP bytes). */
static int go_name(_GoString_ s, char *buf, char **msg) {
  int rc = simba_lease_name_check(s.p, (size_t)s.n);
  if (rc != SIMBA_OK) return go_err(rc, msg);
  memcpy(buf, s.p, (size_t)s.n);
  buf[s.n] = '\0';
  return SIMBA_OK;
}

static void tr_elected(void *ud, simba_term_t *t) { goElected((uintptr_t)ud, t); }
static void tr_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t r) {
  goRevoked((uintptr_t)ud, t, (int)r);
}
static void tr_done(void *ud, int err) { goDone((uintptr_t)ud, err); }
static void tr_work(void *ud, simba_term_t *t) { goWork((uintptr_t)ud, t); }
static void tr_term_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t r) {
  goTermRevoked((uintptr_t)ud, t, (int)r);
}
static void tr_event(void *ud, simba_event_type_t type, const char *detail) {
  goEvent((uintptr_t)ud, (int)type, (char *)detail);
}
static void tr_log(void *ud, int level, const char *msg) {
  goLog((uintptr_t)ud, level, (char *)msg);
}
static void tr_observe(void *ud, const char *name, const char *session, const char *client,
                       uint64_t token) {
  goObserve((uintptr_t)ud, (char *)name, (char *)session, (char *)client, token);
}
static int tr_submit(void *ctx, void (*run)(void *arg), void *arg) {
  return goSubmit((uintptr_t)ctx, (void *)run, arg);
}

int s_lease_name_check(_GoString_ name, char **msg) {
  return go_err(simba_lease_name_check(name.p, (size_t)name.n), msg);
}
int s_config_set(simba_config_t *c, const char *k, const char *v, char **msg) {
  return go_err(simba_config_set(c, k, v), msg);
}
int s_config_set_ms(simba_config_t *c, const char *k, int64_t ms, char **msg) {
  return go_err(simba_config_set_ms(c, k, ms), msg);
}
int s_config_get_ms(simba_config_t *c, const char *k, int64_t *out, char **msg) {
  return go_err(simba_config_get_ms(c, k, out), msg);
}
int s_config_get_double(simba_config_t *c, const char *k, double *out, char **msg) {
  return go_err(simba_config_get_double(c, k, out), msg);
}
int s_config_validate(simba_config_t *c, char **msg) {
  return go_err(simba_config_validate(c), msg);
}
int s_config_set_logger(simba_config_t *c, uintptr_t h, int level, char **msg) {
  return go_err(simba_config_set_logger(c, tr_log, (void *)h, level), msg);
}
int s_config_set_event_sink(simba_config_t *c, uintptr_t h, char **msg) {
  return go_err(simba_config_set_event_sink(c, tr_event, (void *)h), msg);
}
int s_config_set_executor(simba_config_t *c, uintptr_t h, char **msg) {
  return go_err(simba_config_set_executor(c, tr_submit, (void *)h), msg);
}
void s_run(void *run, void *arg) { ((void (*)(void *))run)(arg); }
int s_client_open(simba_client_t **out, const char *url, simba_config_t *cfg, char **msg) {
  return go_err(simba_client_open(out, url, cfg), msg);
}
int s_client_wait_live(simba_client_t *c, int64_t ms, char **msg) {
  return go_err(simba_client_wait_live(c, ms), msg);
}
int s_client_close(simba_client_t *c, char **msg) { return go_err(simba_client_close(c), msg); }
int s_client_close_async(simba_client_t *c, uintptr_t h, char **msg) {
  return go_err(simba_client_close_async(c, h ? tr_done : NULL, (void *)h), msg);
}
int s_client_on_event(simba_client_t *c, uintptr_t h, char **msg) {
  return go_err(simba_client_on_event(c, h ? tr_event : NULL, (void *)h), msg);
}
int s_client_inspect(simba_client_t *c, const char **names, size_t n, int64_t ms, char **out,
                     char **msg) {
  return go_err(simba_client_inspect_json(c, names, n, ms, out), msg);
}
char *s_client_snapshot(simba_client_t *c, char **msg) {
  char *s = simba_client_snapshot_json(c);
  if (!s && msg) *msg = strdup(simba_last_error());
  return s;
}
char *s_client_metrics(simba_client_t *c, char **msg) {
  char *s = simba_client_metrics_text(c);
  if (!s && msg) *msg = strdup(simba_last_error());
  return s;
}
int s_observe_start(simba_observer_t **out, simba_client_t *c, _GoString_ name, int64_t poll,
                    uintptr_t h, char **msg) {
  char n[NAME_CAP];
  int rc = go_name(name, n, msg);
  if (rc != SIMBA_OK) return rc;
  return go_err(simba_observe_start(out, c, n, poll, tr_observe, (void *)h), msg);
}
int s_backend_schema(const char *url, char **out, char **msg) {
  return go_err(simba_backend_schema(url, out), msg);
}
int s_election_start(simba_election_t **out, simba_client_t *c, _GoString_ name, uintptr_t h,
                     char **msg) {
  char n[NAME_CAP];
  int rc = go_name(name, n, msg);
  if (rc != SIMBA_OK) return rc;
  simba_listener_t l;
  l.on_elected = tr_elected;
  l.on_revoked = tr_revoked;
  l.ud = (void *)h;
  return go_err(simba_election_start(out, c, n, &l), msg);
}
int s_run_while_leader(simba_task_t **out, simba_client_t *c, _GoString_ name, uintptr_t h,
                       char **msg) {
  char n[NAME_CAP];
  int rc = go_name(name, n, msg);
  if (rc != SIMBA_OK) return rc;
  return go_err(simba_run_while_leader(out, c, n, tr_work, (void *)h), msg);
}
int s_schedule(simba_task_t **out, simba_client_t *c, _GoString_ name, int64_t delay,
               int64_t period, uintptr_t h, char **msg) {
  char n[NAME_CAP];
  int rc = go_name(name, n, msg);
  if (rc != SIMBA_OK) return rc;
  return go_err(simba_schedule(out, c, n, delay, period, tr_work, (void *)h), msg);
}
int s_group_join(simba_task_t **out, simba_client_t *c, const char *group, uint32_t n, uintptr_t h,
                 char **msg) {
  return go_err(simba_group_join(out, c, group, n, tr_work, (void *)h), msg);
}
int s_stop(int kind, void *p, uintptr_t h, char **msg) {
  if (kind == S_ELECTION) return go_err(simba_election_stop(p, tr_done, (void *)h), msg);
  return go_err(simba_task_stop(p, tr_done, (void *)h), msg);
}
int s_step_down(int kind, void *p, int64_t cooldown, uintptr_t h, char **msg) {
  if (kind == S_ELECTION)
    return go_err(simba_election_step_down(p, cooldown, tr_done, (void *)h), msg);
  return go_err(simba_task_step_down(p, cooldown, tr_done, (void *)h), msg);
}
void s_free(int kind, void *p) {
  if (kind == S_ELECTION)
    simba_election_free(p);
  else
    simba_task_close(p);
}
int s_close_async(int kind, void *p, uintptr_t h, char **msg) {
  simba_done_fn done = h ? tr_done : NULL;
  if (kind == S_ELECTION) return go_err(simba_election_close_async(p, done, (void *)h), msg);
  if (kind == S_TASK) return go_err(simba_task_close_async(p, done, (void *)h), msg);
  if (kind == S_OBSERVER) return go_err(simba_observer_close_async(p, done, (void *)h), msg);
  return go_err(simba_term_close_async(p, done, (void *)h), msg);
}
s_acquired s_lock_acquire(uintptr_t h, _GoString_ name, int64_t ms) {
  simba_client_t *c = (simba_client_t *)h;
  s_acquired r = {NULL, 0, 0, NULL};
  char n[NAME_CAP];
  r.rc = go_name(name, n, &r.msg);
  if (r.rc == SIMBA_OK) r.rc = go_err(simba_lock_acquire(&r.term, c, n, ms), &r.msg);
  if (r.rc == SIMBA_OK) r.token = simba_term_token(r.term);
  return r;
}
s_acquired s_lock_try_acquire(uintptr_t h, _GoString_ name) {
  simba_client_t *c = (simba_client_t *)h;
  s_acquired r = {NULL, 0, 0, NULL};
  char n[NAME_CAP];
  r.rc = go_name(name, n, &r.msg);
  if (r.rc == SIMBA_OK) r.rc = go_err(simba_lock_try_acquire(&r.term, c, n), &r.msg);
  if (r.rc == SIMBA_OK) r.token = simba_term_token(r.term);
  return r;
}
s_acquired s_permit_acquire(uintptr_t h, int sem, _GoString_ name, uint32_t arg, int64_t ms,
                            int try_) {
  simba_client_t *c = (simba_client_t *)h;
  s_acquired r = {NULL, 0, 0, NULL};
  char n[NAME_CAP];
  r.rc = go_name(name, n, &r.msg);
  if (r.rc != SIMBA_OK) return r;
  int rc;
  if (sem)
    rc = try_ ? simba_semaphore_try_acquire(&r.term, c, n, arg)
              : simba_semaphore_acquire(&r.term, c, n, arg, ms);
  else
    rc = try_ ? simba_rwlock_try_acquire(&r.term, c, n, (int)arg)
              : simba_rwlock_acquire(&r.term, c, n, (int)arg, ms);
  r.rc = go_err(rc, &r.msg);
  if (r.rc == SIMBA_OK) r.token = simba_term_token(r.term);
  return r;
}
int s_term_reason(uintptr_t t) { return (int)simba_term_revoke_reason((simba_term_t *)t); }
/* Whether 2 ms passed since this thread last said so (see s_released.yield). */
static int yield_due(void) {
  static __thread int64_t last;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  if (now - last < 2000000) return 0;
  last = now;
  return 1;
}
s_released s_lock_release(uintptr_t h) {
  simba_term_t *t = (simba_term_t *)h;
  s_released r = {0, (int)simba_term_revoke_reason(t), 0, NULL};
  r.rc = go_err(simba_lock_release(t), &r.msg);
  r.yield = yield_due();
  return r;
}
int s_term_on_revoked(simba_term_t *t, uintptr_t h, char **msg) {
  return go_err(simba_term_on_revoked(t, tr_term_revoked, (void *)h), msg);
}
int s_term_ensure_valid(simba_term_t *t, int64_t min, char **msg) {
  return go_err(simba_term_ensure_valid(t, min), msg);
}

int s_c_lock_cycles(simba_client_t *c, const char *name, int n, char **msg) {
  for (int i = 0; i < n; ++i) {
    simba_term_t *t = NULL;
    int rc = simba_lock_acquire(&t, c, name, 10000);
    if (rc == SIMBA_OK) rc = simba_lock_release(t);
    if (rc != SIMBA_OK) return go_err(rc, msg);
  }
  return SIMBA_OK;
}

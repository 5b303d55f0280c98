/* The C shims of the Go binding. Each calls one ABI function and, when it
 * fails, copies simba_last_error() into *msg (the caller frees it) in the same
 * C call: a goroutine may move to another OS thread between two cgo calls, and
 * the message is thread-local.
 *
 * Lease names come as Go strings (_GoString_: pointer and length, no copy on
 * the Go side): the shim checks them with simba_lease_name_check(), which
 * refuses an embedded NUL byte, and copies them to a NUL-terminated buffer on
 * its stack. */
#ifndef SIMBA_GO_H
#define SIMBA_GO_H
#include <simba.h>
#include <stdint.h>

/* What the lock cycle's shims return by value: an out-parameter in Go memory
 * would escape to the heap at every call. */
typedef struct {
  simba_term_t *term;
  uint64_t token;
  int rc;
  char *msg;
} s_acquired;

typedef struct {
  int rc;
  int reason; /* the term's revoke reason before the release */
  /* 1 when the goroutine should yield: Go's sysmon takes the P of a
   * goroutine that has not been through the scheduler for 10 ms away at its
   * blocking cgo calls, and the goroutine then waits for a P at their return
   * (a lock cycle in a loop never goes through the scheduler by itself). */
  int yield;
  char *msg;
} s_released;

/* The two kinds of handle that stop, step down and free alike; every kind
 * closes alike (s_close_async, 1.4). */
enum { S_ELECTION = 0, S_TASK = 1, S_OBSERVER = 2, S_TERM = 3 };

int s_lease_name_check(_GoString_ name, char **msg);
int s_config_set(simba_config_t *c, const char *k, const char *v, char **msg);
int s_config_set_ms(simba_config_t *c, const char *k, int64_t ms, char **msg);
int s_config_get_ms(simba_config_t *c, const char *k, int64_t *out, char **msg);
int s_config_get_double(simba_config_t *c, const char *k, double *out, char **msg);
int s_config_validate(simba_config_t *c, char **msg);
int s_config_set_logger(simba_config_t *c, uintptr_t h, int level, char **msg);
int s_config_set_event_sink(simba_config_t *c, uintptr_t h, char **msg);
int s_config_set_executor(simba_config_t *c, uintptr_t h, char **msg);
void s_run(void *run, void *arg);
int s_client_open(simba_client_t **out, const char *url, simba_config_t *cfg, char **msg);
int s_client_wait_live(simba_client_t *c, int64_t ms, char **msg);
int s_client_close(simba_client_t *c, char **msg);
int s_client_close_async(simba_client_t *c, uintptr_t h, char **msg);
int s_client_on_event(simba_client_t *c, uintptr_t h, char **msg);
int s_client_inspect(simba_client_t *c, const char **names, size_t n, int64_t ms, char **out,
                     char **msg);
char *s_client_snapshot(simba_client_t *c, char **msg);
char *s_client_metrics(simba_client_t *c, char **msg);
int s_observe_start(simba_observer_t **out, simba_client_t *c, _GoString_ name, int64_t poll,
                    uintptr_t h, char **msg);
int s_backend_schema(const char *url, char **out, char **msg);
int s_election_start(simba_election_t **out, simba_client_t *c, _GoString_ name, uintptr_t h,
                     char **msg);
int s_run_while_leader(simba_task_t **out, simba_client_t *c, _GoString_ name, uintptr_t h,
                       char **msg);
int s_schedule(simba_task_t **out, simba_client_t *c, _GoString_ name, int64_t delay,
               int64_t period, uintptr_t h, char **msg);
int s_group_join(simba_task_t **out, simba_client_t *c, const char *group, uint32_t n, uintptr_t h,
                 char **msg);
/* Stop, step down and free an election (S_ELECTION) or a task (S_TASK). */
int s_stop(int kind, void *p, uintptr_t h, char **msg);
int s_step_down(int kind, void *p, int64_t cooldown, uintptr_t h, char **msg);
void s_free(int kind, void *p);
/* X_close_async of any kind (SIMBA_1.4); h: the done's cgo.Handle, 0 for none. */
int s_close_async(int kind, void *p, uintptr_t h, char **msg);
/* The lock cycle's shims take the client and the term as integers: cgo boxes
 * a C pointer argument (an allocation) to check that it is no Go pointer. */
s_acquired s_lock_acquire(uintptr_t c, _GoString_ name, int64_t ms);
s_acquired s_lock_try_acquire(uintptr_t c, _GoString_ name);
/* A permit (1.5): of semaphore name of size arg (sem), else of read/write lock
 * name in mode arg; one attempt when try_, else a wait of ms. */
s_acquired s_permit_acquire(uintptr_t c, int sem, _GoString_ name, uint32_t arg, int64_t ms,
                            int try_);
int s_term_reason(uintptr_t t); /* simba_term_revoke_reason */
s_released s_lock_release(uintptr_t t);
int s_term_on_revoked(simba_term_t *t, uintptr_t h, char **msg);
int s_term_ensure_valid(simba_term_t *t, int64_t min, char **msg);
/* The raw C lock cycle the benchmark compares the binding with. */
int s_c_lock_cycles(simba_client_t *c, const char *name, int n, char **msg);

#endif

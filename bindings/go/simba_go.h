/* The C shims of the Go binding. Each calls one ABI function and, when it
 * fails, copies simba_last_error() into *msg (the caller frees it) in the same
 * C call: a goroutine may move to another OS thread between two cgo calls, and
 * the message is thread-local. */
#ifndef SIMBA_GO_H
#define SIMBA_GO_H
#include <simba.h>
#include <stdint.h>

int s_config_set(simba_config_t *c, const char *k, const char *v, char **msg);
int s_config_validate(simba_config_t *c, char **msg);
int s_config_set_logger(simba_config_t *c, uintptr_t h, int level, char **msg);
int s_client_open(simba_client_t **out, const char *url, simba_config_t *cfg, char **msg);
int s_client_wait_live(simba_client_t *c, int64_t ms, char **msg);
int s_client_close(simba_client_t *c, char **msg);
int s_client_close_async(simba_client_t *c, char **msg);
int s_client_on_event(simba_client_t *c, uintptr_t h, char **msg);
int s_client_inspect(simba_client_t *c, const char **names, size_t n, int64_t ms, char **out,
                     char **msg);
char *s_client_snapshot(simba_client_t *c, char **msg);
int s_backend_schema(const char *url, char **out, char **msg);
int s_election_start(simba_election_t **out, simba_client_t *c, const char *name, uintptr_t h,
                     char **msg);
int s_election_stop(simba_election_t *e, uintptr_t h, char **msg);
int s_election_step_down(simba_election_t *e, int64_t cooldown, uintptr_t h, char **msg);
int s_run_while_leader(simba_task_t **out, simba_client_t *c, const char *name, uintptr_t h,
                       char **msg);
int s_schedule(simba_task_t **out, simba_client_t *c, const char *name, int64_t delay,
               int64_t period, uintptr_t h, char **msg);
int s_group_join(simba_task_t **out, simba_client_t *c, const char *group, uint32_t n, uintptr_t h,
                 char **msg);
int s_task_stop(simba_task_t *t, uintptr_t h, char **msg);
int s_task_step_down(simba_task_t *t, int64_t cooldown, uintptr_t h, char **msg);
int s_lock_acquire(simba_term_t **out, simba_client_t *c, const char *name, int64_t ms, char **msg);
int s_lock_try_acquire(simba_term_t **out, simba_client_t *c, const char *name, char **msg);
int s_lock_release(simba_term_t *t, char **msg);
int s_term_on_revoked(simba_term_t *t, uintptr_t h, char **msg);
int s_term_ensure_valid(simba_term_t *t, int64_t min, char **msg);
/* The raw C lock cycle the benchmark compares the binding with. */
int s_c_lock_cycles(simba_client_t *c, const char *name, int n, char **msg);

#endif

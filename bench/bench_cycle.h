/* The lock cycle of a client with a host executor against the default pool's
 * (issue 36): a one-thread queue to use as a host executor, and the two
 * clients' cycles measured in alternating blocks; the permit cycles (issue
 * 41) and measurements taken in turns. Shared by simba_bench's
 * diagnostics and simba_cycle_bench. Public ABI only. */
#ifndef SIMBA_BENCH_CYCLE_H
#define SIMBA_BENCH_CYCLE_H

#include <simba.h>

#include "bench_util.h"

/* Targets of issue 36: a client with a host executor against one with the
 * default pool, p50 of alternating blocks. */
#define TARGET_HOST_EXECUTOR_MEMORY 1.30 /* memory:// (no I/O: the library's own cost) */
#define TARGET_HOST_EXECUTOR_REMOTE 1.05 /* a real server */

/* A host's executor: one thread running the tasks submitted, in order, as the
 * C program of issue 36 (and a binding's callback thread) does. */
typedef struct bench_queue_executor bench_queue_executor_t;
bench_queue_executor_t *bench_queue_executor_start(void);
/* Runs what is left, then joins the thread. After the clients using it closed. */
void bench_queue_executor_stop(bench_queue_executor_t *q);
/* simba_submit_fn; ctx is the executor. */
int bench_queue_executor_submit(void *ctx, void (*run)(void *arg), void *arg);

/* One uncontended simba_lock_acquire + simba_lock_release of `name`, in ns;
 * -1 after a message on stderr if a call failed. */
int64_t bench_lock_cycle_ns(simba_client_t *c, const char *name);

/* What a cycle acquires: a lock, or a permit (issue 41). */
typedef enum {
  BENCH_LOCK = 0,
  BENCH_SEMAPHORE, /* simba_semaphore_acquire */
  BENCH_READ,      /* simba_rwlock_acquire, SIMBA_LOCK_READ */
  BENCH_WRITE,     /* simba_rwlock_acquire, SIMBA_LOCK_WRITE */
  BENCH_KIND_COUNT
} bench_kind_t;

/* One uncontended acquire of `kind` (a semaphore of `permits`) + its
 * simba_lock_release, in ns; the acquire's part in *acquire_ns if not NULL.
 * -1 after a message on stderr if a call failed. */
int64_t bench_acquire_cycle_ns(simba_client_t *c, bench_kind_t kind, const char *name,
                               uint32_t permits, int64_t *acquire_ns);

/* One of the measurements taken in turns by bench_arms_alternating: run()
 * makes one sample and returns it in ns, or -1 after a message on stderr;
 * `measured` is 0 during the warmup. */
typedef struct bench_arm {
  int64_t (*run)(void *ctx, int measured);
  void *ctx;
} bench_arm_t;

/* The n arms in blocks of `block` samples, each arm's block in turn, the arm
 * going first rotating from round to round, so that all see the same server
 * (ADR 0013); `iterations` measured each after `warmup`, into outs[0..n).
 * 0, or -1 after a message on stderr. */
int bench_arms_alternating(const bench_arm_t *arms, int n, int iterations, int warmup, int block,
                           bench_stats_t *outs);

/* Cycles of client a (on lock a_name) and b (b_name) in alternating blocks of
 * `block` cycles (which goes first alternates too), `iterations` measured each
 * after `warmup`. 0, or -1 after a message on stderr. */
int bench_cycles_alternating(simba_client_t *a, const char *a_name, simba_client_t *b,
                             const char *b_name, int iterations, int warmup, int block,
                             bench_stats_t *a_out, bench_stats_t *b_out);

#endif

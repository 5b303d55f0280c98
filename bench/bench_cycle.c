/* bench_cycle.h: a one-thread queue as a host executor, and two clients' lock
 * cycles in alternating blocks. */
#define _POSIX_C_SOURCE 200809L
#include "bench_cycle.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct queued_task {
  void (*run)(void *);
  void *arg;
  struct queued_task *next;
} queued_task_t;

struct bench_queue_executor {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  queued_task_t *head, *tail;
  int stopping;
  pthread_t thread;
};

static void *queue_main(void *p) {
  bench_queue_executor_t *q = p;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (!q->head && !q->stopping) pthread_cond_wait(&q->cv, &q->mu);
    queued_task_t *t = q->head;
    if (!t) break; /* stopping, and nothing left */
    q->head = t->next;
    if (!q->head) q->tail = NULL;
    pthread_mutex_unlock(&q->mu);
    t->run(t->arg);
    free(t);
    pthread_mutex_lock(&q->mu);
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

bench_queue_executor_t *bench_queue_executor_start(void) {
  bench_queue_executor_t *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
  if (pthread_create(&q->thread, NULL, queue_main, q) != 0) {
    free(q);
    return NULL;
  }
  return q;
}

void bench_queue_executor_stop(bench_queue_executor_t *q) {
  if (!q) return;
  pthread_mutex_lock(&q->mu);
  q->stopping = 1;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
  pthread_join(q->thread, NULL);
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->mu);
  free(q);
}

int bench_queue_executor_submit(void *ctx, void (*run)(void *arg), void *arg) {
  bench_queue_executor_t *q = ctx;
  queued_task_t *t = malloc(sizeof *t);
  if (!t) return 1; /* rejected */
  t->run = run;
  t->arg = arg;
  t->next = NULL;
  pthread_mutex_lock(&q->mu);
  int rc = 1;
  if (!q->stopping) {
    if (q->tail) {
      q->tail->next = t;
    } else {
      q->head = t;
    }
    q->tail = t;
    pthread_cond_signal(&q->cv);
    rc = 0;
  }
  pthread_mutex_unlock(&q->mu);
  if (rc != 0) free(t);
  return rc;
}

int64_t bench_acquire_cycle_ns(simba_client_t *c, bench_kind_t kind, const char *name,
                               uint32_t permits, int64_t *acquire_ns) {
  simba_term_t *t = NULL;
  const int64_t t0 = bench_now_ns();
  int r;
  switch (kind) {
    case BENCH_SEMAPHORE:
      r = simba_semaphore_acquire(&t, c, name, permits, 5000);
      break;
    case BENCH_READ:
    case BENCH_WRITE:
      r = simba_rwlock_acquire(&t, c, name, kind == BENCH_READ ? SIMBA_LOCK_READ : SIMBA_LOCK_WRITE,
                               5000);
      break;
    default:
      r = simba_lock_acquire(&t, c, name, 5000);
      break;
  }
  const int64_t t1 = bench_now_ns();
  if (r == SIMBA_OK) r = simba_lock_release(t);
  const int64_t t2 = bench_now_ns();
  if (r != SIMBA_OK) {
    fprintf(stderr, "cycle of %s: %s (%s)\n", name, simba_strerror(r), simba_last_error());
    return -1;
  }
  if (acquire_ns) *acquire_ns = t1 - t0;
  return t2 - t0;
}

int64_t bench_lock_cycle_ns(simba_client_t *c, const char *name) {
  return bench_acquire_cycle_ns(c, BENCH_LOCK, name, 0, NULL);
}

int bench_arms_alternating(const bench_arm_t *arms, int n, int iterations, int warmup, int block,
                           bench_stats_t *outs) {
  bench_samples_t *s = calloc((size_t)n, sizeof *s);
  if (!s) return -1;
  int rc = 0;
  int k = 0;
  for (int done = 0; done < warmup + iterations && rc == 0; done += block, k++) {
    const int measured = done >= warmup;
    for (int a = 0; a < n && rc == 0; a++) {
      const int arm = (k + a) % n;
      for (int i = 0; i < block; i++) {
        const int64_t ns = arms[arm].run(arms[arm].ctx, measured);
        if (ns < 0) {
          rc = -1;
          break;
        }
        if (measured) bench_samples_push(&s[arm], ns);
      }
    }
  }
  for (int a = 0; a < n; a++) {
    outs[a] = bench_summarize(&s[a]);
    bench_samples_free(&s[a]);
  }
  free(s);
  return rc;
}

typedef struct lock_arm {
  simba_client_t *c;
  const char *name;
} lock_arm_t;

static int64_t lock_arm_run(void *ctx, int measured) {
  (void)measured;
  const lock_arm_t *l = ctx;
  return bench_lock_cycle_ns(l->c, l->name);
}

int bench_cycles_alternating(simba_client_t *a, const char *a_name, simba_client_t *b,
                             const char *b_name, int iterations, int warmup, int block,
                             bench_stats_t *a_out, bench_stats_t *b_out) {
  lock_arm_t la = {a, a_name}, lb = {b, b_name};
  const bench_arm_t arms[2] = {{lock_arm_run, &la}, {lock_arm_run, &lb}};
  bench_stats_t outs[2];
  const int rc = bench_arms_alternating(arms, 2, iterations, warmup, block, outs);
  *a_out = outs[0];
  *b_out = outs[1];
  return rc;
}

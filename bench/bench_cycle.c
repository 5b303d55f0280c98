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

int64_t bench_lock_cycle_ns(simba_client_t *c, const char *name) {
  simba_term_t *t = NULL;
  const int64_t t0 = bench_now_ns();
  int r = simba_lock_acquire(&t, c, name, 5000);
  if (r == SIMBA_OK) r = simba_lock_release(t);
  const int64_t t1 = bench_now_ns();
  if (r != SIMBA_OK) {
    fprintf(stderr, "lock cycle of %s: %s (%s)\n", name, simba_strerror(r), simba_last_error());
    return -1;
  }
  return t1 - t0;
}

/* `n` cycles of c, pushed into s when `measured`. 0 or -1. */
static int cycle_block(simba_client_t *c, const char *name, int n, int measured,
                       bench_samples_t *s) {
  for (int i = 0; i < n; i++) {
    const int64_t ns = bench_lock_cycle_ns(c, name);
    if (ns < 0) return -1;
    if (measured) bench_samples_push(s, ns);
  }
  return 0;
}

int bench_cycles_alternating(simba_client_t *a, const char *a_name, simba_client_t *b,
                             const char *b_name, int iterations, int warmup, int block,
                             bench_stats_t *a_out, bench_stats_t *b_out) {
  bench_samples_t sa, sb;
  bench_samples_init(&sa);
  bench_samples_init(&sb);
  int rc = 0;
  int k = 0;
  for (int done = 0; done < warmup + iterations && rc == 0; done += block, k++) {
    const int measured = done >= warmup;
    const int a_first = k % 2 == 0;
    rc = cycle_block(a_first ? a : b, a_first ? a_name : b_name, block, measured,
                     a_first ? &sa : &sb);
    if (rc == 0) {
      rc = cycle_block(a_first ? b : a, a_first ? b_name : a_name, block, measured,
                       a_first ? &sb : &sa);
    }
  }
  *a_out = bench_summarize(&sa);
  *b_out = bench_summarize(&sb);
  bench_samples_free(&sa);
  bench_samples_free(&sb);
  return rc;
}

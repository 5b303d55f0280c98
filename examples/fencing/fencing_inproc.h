/* Fencing recipe: a resource inside one process (docs/fencing.md).
 *
 * The token check and the write happen under ONE mutex: checking under the lock
 * and writing under a second acquisition of it would let a stale owner pass the
 * check, lose the CPU, and land its write after a newer owner's.
 */
#ifndef SIMBA_EXAMPLE_FENCING_INPROC_H
#define SIMBA_EXAMPLE_FENCING_INPROC_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define FENCE_MEM_VALUE_MAX 256

typedef struct fence_mem {
  pthread_mutex_t mu;
  uint64_t highest; /* the highest token accepted; 0 before the first write */
  int has_value;
  char value[FENCE_MEM_VALUE_MAX];
} fence_mem_t;

/* Initialize an empty resource. Returns 0, or -1 when the mutex cannot be made. */
int fence_mem_init(fence_mem_t *r);
void fence_mem_destroy(fence_mem_t *r);

/* Forget every token and the value (a new, empty resource). */
void fence_mem_reset(fence_mem_t *r);

/* Write @p value with the writer's fencing token: 1 accepted (token >= highest;
 * equal tokens are retries within one term), 0 rejected (stale owner, nothing
 * changed), -1 error (value too long). */
int fence_mem_write(fence_mem_t *r, uint64_t token, const char *value);

/* Copy the value into buf: 1, or 0 when nothing was written yet. */
int fence_mem_read(fence_mem_t *r, char *buf, size_t cap);

#endif

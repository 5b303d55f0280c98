/* Fencing recipe: check and write under one mutex. See fencing_inproc.h. */
#include "fencing_inproc.h"

#include <string.h>

int fence_mem_init(fence_mem_t *r) {
  memset(r, 0, sizeof *r);
  return pthread_mutex_init(&r->mu, NULL) == 0 ? 0 : -1;
}

void fence_mem_destroy(fence_mem_t *r) { pthread_mutex_destroy(&r->mu); }

void fence_mem_reset(fence_mem_t *r) {
  pthread_mutex_lock(&r->mu);
  r->highest = 0;
  r->has_value = 0;
  r->value[0] = '\0';
  pthread_mutex_unlock(&r->mu);
}

int fence_mem_write(fence_mem_t *r, uint64_t token, const char *value) {
  size_t n = strlen(value);
  int accepted;
  if (n >= sizeof r->value) return -1;
  pthread_mutex_lock(&r->mu);
  /* The check and the write, in one critical section. */
  accepted = token >= r->highest;
  if (accepted) {
    r->highest = token;
    memcpy(r->value, value, n + 1);
    r->has_value = 1;
  }
  pthread_mutex_unlock(&r->mu);
  return accepted;
}

int fence_mem_read(fence_mem_t *r, char *buf, size_t cap) {
  int has;
  if (cap == 0) return -1;
  pthread_mutex_lock(&r->mu);
  has = r->has_value;
  if (has) {
    strncpy(buf, r->value, cap - 1);
    buf[cap - 1] = '\0';
  }
  pthread_mutex_unlock(&r->mu);
  return has;
}

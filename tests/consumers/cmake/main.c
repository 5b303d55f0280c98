/* find_package(simba CONFIG) consumer: links simba::simba and simba::simba_tck.
 * Takes a lock on memory:// and fences a tiny in-process resource with its
 * token, then runs the fencing kit on that resource. */
#include <pthread.h>
#include <simba.h>
#include <simba/tck.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t highest;
static char value[SIMBA_TCK_VALUE_MAX];

static int res_reset(void *ud) {
  (void)ud;
  pthread_mutex_lock(&mu);
  highest = 0;
  value[0] = '\0';
  pthread_mutex_unlock(&mu);
  return 0;
}
static int res_write(void *ud, uint64_t token, const char *v) {
  int ok;
  (void)ud;
  pthread_mutex_lock(&mu);
  ok = token >= highest && strlen(v) < sizeof value;
  if (ok) {
    highest = token;
    strcpy(value, v);
  }
  pthread_mutex_unlock(&mu);
  return ok ? SIMBA_TCK_ACCEPTED : SIMBA_TCK_REJECTED;
}
static int res_read(void *ud, char *buf, size_t cap) {
  int has;
  (void)ud;
  pthread_mutex_lock(&mu);
  has = value[0] != '\0';
  if (has) {
    strncpy(buf, value, cap - 1);
    buf[cap - 1] = '\0';
  }
  pthread_mutex_unlock(&mu);
  return has;
}

int main(void) {
  simba_client_t *c = NULL;
  simba_term_t *t = NULL;
  simba_tck_resource_t res;
  simba_tck_options_t opts;
  simba_tck_report_t *rep = NULL;
  int rc, passed;

  if (simba_client_open(&c, "memory://cmake-consumer", NULL) != SIMBA_OK ||
      simba_lock_acquire(&t, c, "cmake-lock", 10000) != SIMBA_OK) {
    fprintf(stderr, "lock: %s\n", simba_last_error());
    simba_client_close(c);
    return 1;
  }
  if (res_write(NULL, simba_term_token(t), "written under the lock") != SIMBA_TCK_ACCEPTED) {
    fprintf(stderr, "fenced write rejected\n");
    return 1;
  }
  simba_lock_release(t);
  simba_client_close(c);

  memset(&res, 0, sizeof res);
  res.version = SIMBA_TCK_RESOURCE_V1;
  res.reset = res_reset;
  res.write = res_write;
  res.read = res_read;
  memset(&opts, 0, sizeof opts);
  opts.version = SIMBA_TCK_OPTIONS_V1;
  opts.rounds = 20;
  rc = simba_tck_run_fencing_spec(&rep, &res, &opts);
  if (rc != SIMBA_OK) {
    fprintf(stderr, "kit: %s\n", simba_strerror(rc));
    return 1;
  }
  fputs(simba_tck_report_text(rep), stdout);
  passed = simba_tck_report_passed(rep);
  simba_tck_report_free(rep);
  printf("cmake consumer: simba %s, kit %s\n", simba_version_string(),
         passed ? "passed" : "FAILED");
  return passed ? 0 : 1;
}

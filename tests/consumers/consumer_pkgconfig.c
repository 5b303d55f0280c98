/* A consumer of an installed Simba, built with nothing but
 *   cc consumer_pkgconfig.c $(pkg-config --cflags --libs simba)
 * (tests/consumers/run.sh). It checks that the header and the library agree on
 * the version and takes a lock on memory://. */
#define _POSIX_C_SOURCE 200809L
#include <simba.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  simba_client_t *c = NULL;
  simba_term_t *t = NULL;
  char want[32];
  int rc;
  unsigned v = simba_version();
  if (v != ((SIMBA_VERSION_MAJOR << 16) | (SIMBA_VERSION_MINOR << 8) | SIMBA_VERSION_PATCH)) {
    fprintf(stderr, "simba_version() = %#x disagrees with the header's SIMBA_VERSION_*\n", v);
    return 1;
  }
  snprintf(want, sizeof want, "%d.%d.%d", SIMBA_VERSION_MAJOR, SIMBA_VERSION_MINOR,
           SIMBA_VERSION_PATCH);
  if (strcmp(simba_version_string(), want) != 0) {
    fprintf(stderr, "simba_version_string() = %s, header says %s\n", simba_version_string(), want);
    return 1;
  }
  rc = simba_client_open(&c, "memory://pkgconfig-consumer", NULL);
  if (rc != SIMBA_OK) {
    fprintf(stderr, "open: %s (%s)\n", simba_strerror(rc), simba_last_error());
    return 1;
  }
  rc = simba_lock_acquire(&t, c, "consumer-lock", 10000);
  if (rc != SIMBA_OK || simba_term_token(t) == 0 || !simba_term_is_valid(t)) {
    fprintf(stderr, "lock: %s (%s)\n", simba_strerror(rc), simba_last_error());
    simba_client_close(c);
    return 1;
  }
  printf("pkg-config consumer: simba %s, lock %s token %llu\n", simba_version_string(),
         simba_term_name(t), (unsigned long long)simba_term_token(t));
  rc = simba_lock_release(t);
  simba_client_close(c);
  return rc == SIMBA_OK ? 0 : 1;
}

/* A consumer that loads Simba at run time, as language bindings do: it dlopen()s
 * libsimba.so.1 (by soname), resolves each function with dlsym(), checks the
 * version against the header, and runs an election on memory://. Built with the
 * header only (no -lsimba) by tests/consumers/run.sh. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <simba.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef unsigned (*version_fn)(void);
typedef const char *(*strerror_fn)(int);
typedef int (*open_fn)(simba_client_t **, const char *, const simba_config_t *);
typedef int (*close_fn)(simba_client_t *);
typedef int (*start_fn)(simba_election_t **, simba_client_t *, const char *,
                        const simba_listener_t *);
typedef int (*stop_wait_fn)(simba_election_t *, int64_t);
typedef void (*free_fn)(simba_election_t *);
typedef uint64_t (*token_fn)(const simba_term_t *);

static token_fn term_token;
static unsigned elected = 0, revoked = 0;
static uint64_t token = 0;

static void on_elected(void *ud, simba_term_t *t) {
  (void)ud;
  __atomic_store_n(&token, term_token(t), __ATOMIC_RELAXED);
  __atomic_store_n(&elected, 1u, __ATOMIC_RELEASE);
}

static void on_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t reason) {
  (void)ud;
  (void)t;
  __atomic_store_n(&revoked, (unsigned)reason, __ATOMIC_RELEASE);
}

/* dlsym into a function pointer: through memcpy, which ISO C allows. */
static int resolve(void *lib, const char *name, void *fnp, size_t size) {
  void *sym = dlsym(lib, name);
  if (sym == NULL) {
    fprintf(stderr, "dlsym(%s): %s\n", name, dlerror());
    return -1;
  }
  memcpy(fnp, &sym, size);
  return 0;
}
#define RESOLVE(lib, name, var) resolve(lib, name, &(var), sizeof(var))

int main(void) {
  void *lib = dlopen(
      "libsimba.so."
      "1",
      RTLD_NOW | RTLD_LOCAL);
  version_fn version;
  strerror_fn str;
  open_fn client_open;
  close_fn client_close;
  start_fn start;
  stop_wait_fn stop_wait;
  free_fn efree;
  simba_client_t *c = NULL;
  simba_election_t *e = NULL;
  simba_listener_t l;
  unsigned v;
  int rc, i;

  if (lib == NULL) {
    fprintf(stderr, "dlopen(libsimba.so.1): %s\n", dlerror());
    return 1;
  }
  if (RESOLVE(lib, "simba_version", version) || RESOLVE(lib, "simba_strerror", str) ||
      RESOLVE(lib, "simba_client_open", client_open) ||
      RESOLVE(lib, "simba_client_close", client_close) ||
      RESOLVE(lib, "simba_election_start", start) ||
      RESOLVE(lib, "simba_election_stop_wait", stop_wait) ||
      RESOLVE(lib, "simba_election_free", efree) || RESOLVE(lib, "simba_term_token", term_token)) {
    return 1;
  }
  /* What bindings do at load: same major, and a library at least as new. */
  v = version();
  if ((v >> 16) != SIMBA_VERSION_MAJOR ||
      v < (unsigned)((SIMBA_VERSION_MAJOR << 16) | (SIMBA_VERSION_MINOR << 8))) {
    fprintf(stderr, "libsimba %#x does not match the header %d.%d\n", v, SIMBA_VERSION_MAJOR,
            SIMBA_VERSION_MINOR);
    return 1;
  }
  rc = client_open(&c, "memory://dlopen-consumer", NULL);
  if (rc != SIMBA_OK) {
    fprintf(stderr, "open: %s\n", str(rc));
    return 1;
  }
  memset(&l, 0, sizeof l);
  l.on_elected = on_elected;
  l.on_revoked = on_revoked;
  rc = start(&e, c, "dlopen-leader", &l);
  if (rc != SIMBA_OK) {
    fprintf(stderr, "election_start: %s\n", str(rc));
    client_close(c);
    return 1;
  }
  for (i = 0; i < 1000 && !__atomic_load_n(&elected, __ATOMIC_ACQUIRE); ++i) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  rc = stop_wait(e, 10000);
  efree(e);
  client_close(c);
  if (!__atomic_load_n(&elected, __ATOMIC_ACQUIRE) ||
      __atomic_load_n(&token, __ATOMIC_RELAXED) == 0) {
    fprintf(stderr, "not elected within 10 s\n");
    return 1;
  }
  if (rc != SIMBA_OK || __atomic_load_n(&revoked, __ATOMIC_ACQUIRE) != SIMBA_REVOKE_STOPPED) {
    fprintf(stderr, "stop: %s, revoke reason %u\n", str(rc), revoked);
    return 1;
  }
  printf("dlopen consumer: elected with token %llu, revoked STOPPED\n", (unsigned long long)token);
  dlclose(lib);
  return 0;
}

/* slowclock.so: an LD_PRELOAD shim that makes the monotonic clocks of a process
 * run at SIMBA_CHAOS_CLOCK_RATE (e.g. 0.25) times the real rate, counted from
 * the moment the shim loads. The chaos suite's negative control: a worker whose
 * clock runs slower than session.drift allows believes its term valid after the
 * backend expired it, and the checker must flag the overlap. Wall clocks are
 * left alone. Test-only; never shipped. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double rate = 1.0;
static int64_t base_ns[16];

static int64_t raw(clockid_t id) {
  struct timespec ts;
  syscall(SYS_clock_gettime, id, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int slowed(clockid_t id) {
  return id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE || id == CLOCK_MONOTONIC_RAW ||
         id == CLOCK_BOOTTIME;
}

__attribute__((constructor)) static void init(void) {
  const char *r = getenv("SIMBA_CHAOS_CLOCK_RATE");
  if (r) rate = atof(r);
  if (rate <= 0.0) rate = 1.0;
  clockid_t ids[] = {CLOCK_MONOTONIC, CLOCK_MONOTONIC_COARSE, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME};
  for (unsigned i = 0; i < sizeof ids / sizeof ids[0]; i++) base_ns[ids[i]] = raw(ids[i]);
}

__attribute__((visibility("default"))) int clock_gettime(clockid_t id, struct timespec *ts) {
  if (id < 0 || id >= 16 || !slowed(id)) return (int)syscall(SYS_clock_gettime, id, ts);
  int64_t now = raw(id);
  int64_t v = base_ns[id] + (int64_t)((double)(now - base_ns[id]) * rate);
  ts->tv_sec = v / 1000000000;
  ts->tv_nsec = v % 1000000000;
  return 0;
}

/* What the chaos suite's C programs (chaos_worker, chaos_hold) share: the
 * clock their log lines carry, the log line itself, and argument lookup. One
 * place, because the checker parses those lines from both. */
#ifndef SIMBA_TESTS_CHAOS_COMMON_H
#define SIMBA_TESTS_CHAOS_COMMON_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Where log lines go: each program sets it in main (stdout by default). */
static int log_fd = 1;

static int64_t mono_ns(void) {
  struct timespec ts;
  /* The raw syscall, not the vDSO or libc's clock_gettime: the slow-clock shim
   * cannot touch it, so every line is comparable with the nemesis's. */
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* "T line\n" in one write(2) on an O_APPEND fd: a kill -9 loses no line
 * written. `t`: a time the caller read (mono_ns()). */
static void log_at(int64_t t, const char *fmt, ...) {
  char buf[512];
  int n = snprintf(buf, sizeof buf, "%" PRId64 " ", t);
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof buf - 2) n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  ssize_t w = write(log_fd, buf, (size_t)n);
  (void)w;
}

/* The value after `key` on the command line, or `dflt`. */
static const char *arg(int argc, char **argv, const char *key, const char *dflt) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], key) == 0) return argv[i + 1];
  return dflt;
}

#endif

/* Logging, time, durations and signals for the simba tool. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

int cli_verbosity = 0;

static const char *level_name(int level) {
  switch (level) {
    case SIMBA_LOG_DEBUG:
      return "debug";
    case SIMBA_LOG_INFO:
      return "info";
    case SIMBA_LOG_WARN:
      return "warn";
    default:
      return "error";
  }
}

static bool level_shown(int level) {
  if (cli_verbosity < 0) return level >= SIMBA_LOG_WARN;
  if (cli_verbosity == 0) return level >= SIMBA_LOG_INFO;
  return true;
}

void cli_log(int level, const char *fmt, ...) {
  if (!level_shown(level)) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* One fprintf per line: lines of the library's thread and ours never mix. */
  fprintf(stderr, "%s.%03ldZ simba[%ld] %s %s\n", when, ts.tv_nsec / 1000000L, (long)getpid(),
          level_name(level), msg);
}

void cli_library_log(void *ud, int level, const char *msg) {
  (void)ud;
  /* The library's INFO lines are details of its work: shown with -v. */
  if (level == SIMBA_LOG_INFO && cli_verbosity < 1) return;
  cli_log(level, "libsimba: %s", msg);
}

int64_t cli_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool cli_parse_duration(const char *text, int64_t *out_ms) {
  if (!text || *text < '0' || *text > '9') return false;
  errno = 0;
  char *end = NULL;
  const long long v = strtoll(text, &end, 10);
  if (errno == ERANGE || v < 0) return false;
  long long scale = 1;
  if (strcmp(end, "") == 0 || strcmp(end, "ms") == 0) {
    scale = 1;
  } else if (strcmp(end, "s") == 0) {
    scale = 1000;
  } else if (strcmp(end, "m") == 0) {
    scale = 60000;
  } else {
    return false;
  }
  if (v > 1000000000000LL / scale) return false; /* the library's upper bound */
  *out_ms = v * scale;
  return true;
}

/* --- signals -------------------------------------------------------------- */

static int signal_pipe[2] = {-1, -1};

static void on_signal(int signo) {
  const int saved = errno;
  const unsigned char b = (unsigned char)signo;
  /* Non-blocking: a full pipe already holds a wake-up. */
  ssize_t n = write(signal_pipe[1], &b, 1);
  (void)n;
  errno = saved;
}

int cli_signals_install(void) {
  if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
  for (size_t i = 0; i < sizeof signals / sizeof signals[0]; ++i) {
    if (sigaction(signals[i], &sa, NULL) != 0) return -1;
  }
  /* A command's closed stdout must not kill simba before it hands over. */
  signal(SIGPIPE, SIG_IGN);
  return signal_pipe[0];
}

int cli_signals_drain(int fd) {
  int last = 0;
  unsigned char buf[64];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != SIGCHLD) last = buf[i];
    }
  }
  return last;
}

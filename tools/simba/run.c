/* simba run NAME -- CMD: run CMD whenever this process leads NAME.
 * simba lock NAME -- CMD: run CMD once under the lock NAME (or a permit of the
 * semaphore NAME, or the read or write lock NAME). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "json.h"

static const char kRunUsage[] =
    "usage: simba run NAME [--once] [--grace D] [--cooldown D] [--listen ADDR] [OPTIONS]\n"
    "                 -- CMD [ARGS...]\n"
    "\n"
    "Contend for NAME; while leader, run CMD with SIMBA_LEASE, SIMBA_TOKEN and\n"
    "SIMBA_DEADLINE_MS (the term's remaining time at start) in its environment.\n"
    "When the term ends, or its remaining time falls below the grace, CMD gets\n"
    "SIGTERM; if it is still running at the term's local deadline, SIGKILL: CMD\n"
    "never outlives the term. When CMD exits while simba still leads, simba\n"
    "releases NAME, waits the cooldown and contends again.\n"
    "\n"
    "  --once         exit with CMD's status after its first run\n"
    "  --grace D      stop CMD when less than D is left (default 2s, or less\n"
    "                 with a short lease)\n"
    "  --cooldown D   after CMD exits, wait D before contending again (default 1s)\n"
    "  --listen ADDR  serve HTTP on ADDR (HOST:PORT; port 0 picks one): GET /healthz\n"
    "                 (200 while the session is live), /leader (200 while this\n"
    "                 process leads NAME, 503 otherwise), /metrics (Prometheus)\n"
    "\n"
    "SIGINT/SIGTERM/SIGHUP: CMD gets SIGTERM, NAME is released once CMD exited,\n"
    "and simba exits with 128 + the signal. Common options: simba --help.\n";

static const char kLockUsage[] =
    "usage: simba lock NAME [--permits N | --read | --write] [--timeout D] [--grace D]\n"
    "                  [OPTIONS] -- CMD [ARGS...]\n"
    "\n"
    "Wait for the lock NAME (at most the timeout), run CMD once while holding it,\n"
    "release it and exit with CMD's status (124 if the timeout passed first).\n"
    "CMD gets SIMBA_LEASE, SIMBA_TOKEN, SIMBA_DEADLINE_MS and SIMBA_TERM_KIND, and\n"
    "is stopped like under `simba run` if the lock's term ends or nearly ends.\n"
    "\n"
    "  --permits N    take one permit of the semaphore NAME of N permits (at most\n"
    "                 N holders at once; every holder must name the same N)\n"
    "  --read         take the read/write lock NAME shared (with other readers)\n"
    "  --write        take the read/write lock NAME exclusive (writers go first)\n"
    "  --timeout D    how long to wait for the lock (default 30s)\n"
    "  --grace D      stop CMD when less than D is left (default 2s, or less\n"
    "                 with a short lease)\n"
    "\n"
    "A lock, a semaphore and a read/write lock of one NAME are unrelated\n"
    "(docs/locks.md); tokens of each: docs/fencing.md.\n"
    "\n"
    "Common options: simba --help.\n";

typedef struct {
  const char *name;
  char **cmd; /* NULL-terminated, from the command line */
  bool once;
  int64_t grace_ms;
  int64_t cooldown_ms;
  int64_t timeout_ms;
  bool grace_given;
  const char *listen; /* run --listen ADDR, or NULL */
  uint32_t permits;   /* lock --permits N: a semaphore's size; 0 for a lock */
  int rw_mode;        /* lock --read / --write: SIMBA_LOCK_READ or _WRITE; 0 for a lock */
} options_t;

/* Takes lock's --permits N, --read and --write: 1 taken, 0 not one of them, -1 a bad
   value or a second kind (logged). */
static int parse_kind(int argc, char **argv, int *i, options_t *o) {
  const char *a = argv[*i];
  const char *v = NULL;
  int mode = 0;
  if (strcmp(a, "--read") == 0) {
    mode = SIMBA_LOCK_READ;
  } else if (strcmp(a, "--write") == 0) {
    mode = SIMBA_LOCK_WRITE;
  } else if (strncmp(a, "--permits", 9) == 0 && (a[9] == '\0' || a[9] == '=')) {
    v = a[9] == '=' ? a + 10 : (*i + 1 < argc ? argv[++*i] : "");
  } else {
    return 0;
  }
  if (o->permits || o->rw_mode) {
    LOG_ERROR("lock: one of --permits N, --read and --write, once");
    return -1;
  }
  if (mode) {
    o->rw_mode = mode;
    return 1;
  }
  char *end = NULL;
  errno = 0;
  const unsigned long n = strtoul(v, &end, 10);
  if (!*v || *v == '-' || *end || errno || n == 0 || n > UINT32_MAX) {
    LOG_ERROR("--permits needs a whole number from 1 to %" PRIu32 " (got \"%s\")", UINT32_MAX, v);
    return -1;
  }
  o->permits = (uint32_t)n;
  return 1;
}

/* Takes this command's own flag at argv[*i] (--once, --grace, --cooldown, --timeout,
   --listen), with its value: 1 taken, 0 not one of them, -1 a bad value (logged). */
static int parse_flag(int argc, char **argv, int *i, bool is_run, options_t *o) {
  const char *a = argv[*i];
  if (is_run && strcmp(a, "--once") == 0) {
    o->once = true;
    return 1;
  }
  int64_t *duration = NULL;
  const char *flag = NULL;
  if (strncmp(a, "--grace", 7) == 0 && (a[7] == '\0' || a[7] == '=')) {
    duration = &o->grace_ms, flag = "--grace", o->grace_given = true;
  } else if (is_run && strncmp(a, "--cooldown", 10) == 0 && (a[10] == '\0' || a[10] == '=')) {
    duration = &o->cooldown_ms, flag = "--cooldown";
  } else if (!is_run && strncmp(a, "--timeout", 9) == 0 && (a[9] == '\0' || a[9] == '=')) {
    duration = &o->timeout_ms, flag = "--timeout";
  }
  if (is_run && strncmp(a, "--listen", 8) == 0 && (a[8] == '\0' || a[8] == '=')) {
    o->listen = a[8] == '=' ? a + 9 : (*i + 1 < argc ? argv[++*i] : NULL);
    if (!o->listen || !*o->listen) {
      LOG_ERROR("--listen needs an address such as 127.0.0.1:8080 or 0.0.0.0:0");
      return -1;
    }
    if (!cli_http_available()) {
      LOG_ERROR(
          "--listen: this simba was built without libmicrohttpd (install "
          "libmicrohttpd-dev and rebuild)");
      return -1;
    }
    return 1;
  }
  if (duration) {
    const char *v = strchr(a, '=') ? strchr(a, '=') + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
    if (!v || !cli_parse_duration(v, duration)) {
      LOG_ERROR("%s needs a duration such as 500ms, 2s or 1m (got \"%s\")", flag, v ? v : "");
      return -1;
    }
    return 1;
  }
  return 0;
}

/* Validates the configuration and fits the grace to the lease. Returns -1 to go on,
   else an exit status. */
static int check_grace(cli_common_t *common, options_t *o) {
  if (simba_config_validate(common->cfg) != SIMBA_OK) {
    LOG_ERROR("configuration: %s", simba_last_error());
    return EXIT_SIMBA_FAILED;
  }
  const int64_t floor_ms = cli_remaining_floor_ms(common->cfg);
  if (!o->grace_given && o->grace_ms >= floor_ms / 2) {
    o->grace_ms = floor_ms > 0 ? floor_ms / 2 : 0; /* short leases: half of what is left */
    LOG_DEBUG("grace %" PRId64 " ms (the default 2s leaves too little time with this lease)",
              o->grace_ms);
  }
  if (o->grace_ms >= floor_ms) {
    LOG_ERROR("--grace %" PRId64
              "ms leaves no time to work: between renewals a term's remaining "
              "time drops to about %" PRId64
              "ms (lease-duration x (1 - drift) - margin - "
              "renew-interval); use a smaller --grace or a longer --lease-duration",
              o->grace_ms, floor_ms);
    return EXIT_SIMBA_FAILED;
  }
  return -1;
}

/* Parses "NAME [options] -- CMD...". Returns -1 to go on, else an exit status. */
static int parse(cli_common_t *common, int argc, char **argv, bool is_run, options_t *o) {
  const char *usage = is_run ? kRunUsage : kLockUsage;
  o->grace_ms = 2000;
  o->cooldown_ms = 1000;
  o->timeout_ms = 30000;
  int i = 1;
  for (; i < argc; ++i) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      ++i;
      break;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(usage, stdout);
      return 0;
    }
    int f = parse_flag(argc, argv, &i, is_run, o);
    if (f == 0 && !is_run) f = parse_kind(argc, argv, &i, o);
    if (f < 0) return EXIT_SIMBA_FAILED;
    if (f > 0) continue;
    const int r = cli_common_option(common, argc, argv, &i);
    if (r < 0) return EXIT_SIMBA_FAILED;
    if (r > 0) continue;
    if (a[0] == '-') {
      LOG_ERROR("%s: unknown option %s (see simba %s --help)", argv[0], a, argv[0]);
      return EXIT_SIMBA_FAILED;
    }
    if (o->name) {
      LOG_ERROR("%s: one lease name expected, got \"%s\" and \"%s\" (put the command after --)",
                argv[0], o->name, a);
      return EXIT_SIMBA_FAILED;
    }
    o->name = a;
  }
  if (!o->name) {
    LOG_ERROR("%s: no lease name (usage: simba %s NAME -- CMD)", argv[0], argv[0]);
    return EXIT_SIMBA_FAILED;
  }
  if (i >= argc) {
    LOG_ERROR("%s: no command (usage: simba %s NAME -- CMD [ARGS...])", argv[0], argv[0]);
    return EXIT_SIMBA_FAILED;
  }
  o->cmd = argv + i;
  const int status = check_grace(common, o);
  if (status >= 0) return status;
  if (simba_config_set_logger(common->cfg, cli_library_log, NULL, SIMBA_LOG_DEBUG) != SIMBA_OK) {
    LOG_ERROR("%s", simba_last_error());
    return EXIT_SIMBA_FAILED;
  }
  return -1;
}

/* What a callback hands to the main thread through a pipe. */
typedef struct {
  int err;
  simba_term_t *term;
  char detail[256]; /* simba_last_error() of a failure, read in the callback */
} handoff_t;

static void hand_off(int fd, int err, simba_term_t *term) {
  handoff_t h;
  memset(&h, 0, sizeof h); /* no uninitialised padding through write() */
  h.err = err;
  h.term = term;
  if (err != SIMBA_OK) snprintf(h.detail, sizeof h.detail, "%s", simba_last_error());
  /* Smaller than PIPE_BUF: written whole. */
  if (write(fd, &h, sizeof h) != (ssize_t)sizeof h && term) simba_term_release(term);
}

/* Waits for a handoff or a signal. Returns 1 with *h filled, or 0 with *signo. */
static int wait_handoff(int handoff_fd, int signal_fd, handoff_t *h, int *signo) {
  for (;;) {
    struct pollfd fds[2] = {{handoff_fd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return 0;
    if (fds[1].revents & POLLIN) {
      *signo = cli_signals_drain(signal_fd);
      if (*signo) return 0;
    }
    if ((fds[0].revents & POLLIN) && read(handoff_fd, h, sizeof *h) == (ssize_t)sizeof *h) {
      return 1;
    }
  }
}

static void drain_handoffs(int fd) {
  handoff_t h;
  while (read(fd, &h, sizeof h) == (ssize_t)sizeof h) simba_term_release(h.term);
}

/* --- run ------------------------------------------------------------------ */

static void on_elected(void *ud, simba_term_t *term) {
  simba_term_retain(term);
  hand_off(*(int *)ud, SIMBA_OK, term);
}

static void on_revoked(void *ud, simba_term_t *term, simba_revoke_reason_t reason) {
  (void)ud;
  (void)reason;
  LOG_DEBUG("on_revoked: %s token %" PRIu64, simba_term_name(term), simba_term_token(term));
}

/* Opens the client, the HTTP server (--listen) and the election; false (logged,
   what was opened closed again) when one cannot start. */
static bool start_run(cli_common_t *common, const options_t *o, int *handoff_w, simba_client_t **c,
                      cli_http_t **http, simba_election_t **e) {
  *c = cli_open_client(common);
  if (!*c) return false;
  if (o->listen && !(*http = cli_http_start(o->listen, *c, o->name, 0))) {
    simba_client_close(*c);
    return false;
  }
  const simba_listener_t l = {on_elected, on_revoked, handoff_w};
  if (simba_election_start(e, *c, o->name, &l) != SIMBA_OK) {
    LOG_ERROR("cannot contend for %s: %s", o->name, simba_last_error());
    cli_http_stop(*http);
    simba_client_close(*c);
    return false;
  }
  return true;
}

/* Runs CMD under one valid term (released here), then hands the lease over if the
   term is still valid. Returns false to stop contending, with *status set when the
   outcome decides it. */
static bool run_term(const options_t *o, simba_election_t *e, cli_http_t *http, simba_term_t *term,
                     int signal_fd, int *signo, int *status) {
  LOG_INFO("leading %s with token %" PRIu64 " (%" PRId64 " ms left): starting %s", o->name,
           simba_term_token(term), simba_term_remaining_ms(term), o->cmd[0]);
  cli_http_set_term(http, term); /* GET /leader: 200 while it is valid */
  cli_child_t child;
  const int rc = cli_child_start(&child, o->cmd, term);
  if (rc != 0) {
    cli_http_set_term(http, NULL);
    simba_term_release(term);
    *status = rc;
    return false;
  }
  const cli_work_end_t end = cli_supervise(&child, term, o->grace_ms, signal_fd, signo);
  const int code = cli_child_exit_code(&child);
  const bool still_valid = simba_term_is_valid(term) != 0;
  LOG_INFO("%s exited with status %d (%s)", o->cmd[0], code,
           end == CLI_WORK_DONE ? "while leading" : "stopped by simba");
  cli_http_set_term(http, NULL);
  simba_term_release(term);
  if (*signo) return false;
  if (o->once) {
    *status = code;
    return false;
  }
  if (still_valid) {
    /* Hand the lease over (the command is done with it), then contend again. */
    LOG_INFO("releasing %s; contending again in %" PRId64 " ms", o->name, o->cooldown_ms);
    if (simba_election_step_down(e, o->cooldown_ms, NULL, NULL) != SIMBA_OK) {
      LOG_ERROR("cannot step down: %s", simba_last_error());
      return false;
    }
  }
  return true;
}

/* Runs CMD for each term handed off until a signal, --once or an error; returns
   the exit status (*signo set when a signal stopped it). */
static int lead_loop(const options_t *o, simba_election_t *e, cli_http_t *http, int handoff_r,
                     int signal_fd, int *signo) {
  int status = EXIT_SIMBA_FAILED;
  for (;;) {
    handoff_t h;
    if (!wait_handoff(handoff_r, signal_fd, &h, signo)) break;
    simba_term_t *term = h.term;
    if (!simba_term_is_valid(term)) {
      simba_term_release(term); /* ended before we could start: nothing ran */
      continue;
    }
    if (!run_term(o, e, http, term, signal_fd, signo, &status)) break;
  }
  return status;
}

/* Releases the lease, then frees the election, the HTTP server, the client and
   the handoff pipe. */
static void stop_run(cli_common_t *common, simba_election_t *e, cli_http_t *http, simba_client_t *c,
                     const int handoff[2]) {
  /* The command has exited: now release the lease (handover order). */
  int64_t lease_ms = 10000;
  simba_config_get_ms(common->cfg, "session.lease-duration", &lease_ms);
  if (simba_election_stop_wait(e, lease_ms) != SIMBA_OK) {
    LOG_WARN("stopping the election: %s", simba_last_error());
  }
  simba_election_free(e);
  cli_http_stop(http); /* its threads use the client */
  simba_client_close(c);
  drain_handoffs(handoff[0]);
  close(handoff[0]);
  close(handoff[1]);
}

/* The signal fd and the pipe through which callbacks hand results to the main
   thread; false (logged) when either cannot be made. */
static bool open_signals(int *signal_fd, int handoff[2]) {
  *signal_fd = cli_signals_install();
  if (*signal_fd < 0 || pipe2(handoff, O_CLOEXEC | O_NONBLOCK) != 0) {
    LOG_ERROR("cannot set up signals: %s", strerror(errno));
    return false;
  }
  return true;
}

int cli_run(cli_common_t *common, int argc, char **argv) {
  options_t o;
  memset(&o, 0, sizeof o);
  int status = parse(common, argc, argv, true, &o);
  if (status >= 0) return status;

  int signal_fd = -1;
  int handoff[2] = {-1, -1};
  if (!open_signals(&signal_fd, handoff)) return EXIT_SIMBA_FAILED;
  simba_client_t *c = NULL;
  cli_http_t *http = NULL;
  simba_election_t *e = NULL;
  if (!start_run(common, &o, &handoff[1], &c, &http, &e)) return EXIT_SIMBA_FAILED;
  LOG_INFO("contending for %s", o.name);
  int signo = 0;
  status = lead_loop(&o, e, http, handoff[0], signal_fd, &signo);
  stop_run(common, e, http, c, handoff);
  if (signo) {
    LOG_INFO("stopped by signal %d; %s released", signo, o.name);
    return EXIT_SIGNAL_BASE + signo;
  }
  return status;
}

/* --- lock ----------------------------------------------------------------- */

static void on_lock(void *ud, int err, simba_term_t *term) { hand_off(*(int *)ud, err, term); }

/* What `simba lock` takes, for messages: "the lock x", "a permit of the semaphore x". */
static const char *lock_what(const options_t *o, char buf[300]) {
  const char *what = o->permits                       ? "a permit of the semaphore"
                     : o->rw_mode == SIMBA_LOCK_READ  ? "the read lock"
                     : o->rw_mode == SIMBA_LOCK_WRITE ? "the write lock"
                                                      : "the lock";
  snprintf(buf, 300, "%s %s", what, o->name);
  return buf;
}

/* Whether an inspect row (simba_client_inspect_json) is of what `o` takes: a lease
   row has no "kind"; a read/write lock's rows are its reads, writes and intents. */
static bool row_is_ours(const options_t *o, const json_value_t *row) {
  const json_value_t *k = json_get(row, "kind");
  const char *kind = k && k->type == JSON_STRING ? k->string : NULL;
  if (o->permits) return kind && strcmp(kind, "semaphore") == 0;
  if (o->rw_mode) return kind && strcmp(kind, "semaphore") != 0;
  return !kind;
}

/* Best effort, for the timeout message: who holds `o->name` now (each permit's
   holder for a semaphore or a read/write lock). */
static void log_holder(simba_client_t *c, const options_t *o) {
  char *text = NULL;
  const char *names[] = {o->name};
  if (simba_client_inspect_json(c, names, 1, 1000, &text) != SIMBA_OK) return;
  json_value_t *root = json_parse(text);
  const json_value_t *leases = json_get(root, "leases");
  size_t held = 0;
  for (size_t i = 0; leases && leases->type == JSON_ARRAY && i < leases->count; ++i) {
    const json_value_t *l = &leases->items[i];
    const json_value_t *holder = json_get(l, "holder");
    if (!row_is_ours(o, l) || !holder || holder->type != JSON_STRING) continue;
    const json_value_t *remaining = json_get(l, "remaining_ms");
    const json_value_t *kind = json_get(l, "kind");
    ++held;
    LOG_INFO("%s%s%s is held by session %s (client \"%s\"), %.0f ms left", o->name,
             kind ? ": " : "", kind ? json_string(l, "kind") : "", holder->string,
             json_string(l, "holder_client"),
             remaining && remaining->type == JSON_NUMBER ? remaining->number : -1.0);
  }
  if (root && !held) LOG_INFO("%s is free now", o->name);
  json_free(root);
  simba_free(text);
}

/* Starts waiting for what `o` takes; the outcome goes to on_lock(ud). */
static int lock_acquire_async(simba_client_t *c, const options_t *o, void *ud) {
  if (o->permits) {
    return simba_semaphore_acquire_async(c, o->name, o->permits, o->timeout_ms, on_lock, ud);
  }
  if (o->rw_mode)
    return simba_rwlock_acquire_async(c, o->name, o->rw_mode, o->timeout_ms, on_lock, ud);
  return simba_lock_acquire_async(c, o->name, o->timeout_ms, on_lock, ud);
}

int cli_lock(cli_common_t *common, int argc, char **argv) {
  options_t o;
  memset(&o, 0, sizeof o);
  int status = parse(common, argc, argv, false, &o);
  if (status >= 0) return status;

  int signal_fd = -1;
  int handoff[2] = {-1, -1};
  if (!open_signals(&signal_fd, handoff)) return EXIT_SIMBA_FAILED;
  simba_client_t *c = cli_open_client(common);
  if (!c) return EXIT_SIMBA_FAILED;
  status = EXIT_SIMBA_FAILED;
  int signo = 0;
  handoff_t h = {SIMBA_ECANCELED, NULL, ""};
  char what[300];
  lock_what(&o, what);
  if (lock_acquire_async(c, &o, &handoff[1]) != SIMBA_OK) {
    LOG_ERROR("cannot wait for %s: %s", what, simba_last_error());
  } else if (!wait_handoff(handoff[0], signal_fd, &h, &signo)) {
    LOG_INFO("stopped by signal %d while waiting for %s", signo, what);
    status = EXIT_SIGNAL_BASE + signo;
  } else if (h.err == SIMBA_ETIMEDOUT) {
    LOG_ERROR("timed out after %" PRId64 " ms waiting for %s", o.timeout_ms, what);
    log_holder(c, &o);
    status = EXIT_LOCK_TIMEOUT;
  } else if (h.err != SIMBA_OK) {
    /* SIMBA_ESTATE: the semaphore has another size, which the detail names. */
    LOG_ERROR("cannot acquire %s: %s (%s)", what, simba_strerror(h.err), h.detail);
  } else {
    simba_term_t *term = h.term;
    LOG_INFO("holding %s with token %" PRIu64 " (%" PRId64 " ms left): starting %s", what,
             simba_term_token(term), simba_term_remaining_ms(term), o.cmd[0]);
    cli_child_t child;
    status = cli_child_start(&child, o.cmd, term);
    if (status == 0) {
      cli_supervise(&child, term, o.grace_ms, signal_fd, &signo);
      status = cli_child_exit_code(&child);
      LOG_INFO("%s exited with status %d; releasing %s", o.cmd[0], status, what);
    }
    simba_lock_release(term); /* waits for the backend: the lock is free on return */
    if (signo) status = EXIT_SIGNAL_BASE + signo;
  }
  simba_client_close(c); /* cancels a wait still pending */
  drain_handoffs(handoff[0]);
  close(handoff[0]);
  close(handoff[1]);
  return status;
}

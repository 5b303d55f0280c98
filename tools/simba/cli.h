/* The simba command-line tool: shared declarations. Written against the public
 * ABI (simba.h) only. */
#ifndef SIMBA_TOOLS_CLI_H
#define SIMBA_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "simba.h"

/* Exit statuses of simba itself (docs/cli.md). A supervised command's own
 * status passes through unchanged; these follow the convention of env(1) and
 * timeout(1). */
enum {
  EXIT_LOCK_TIMEOUT = 124, /* lock: the timeout passed before the lock was ours */
  EXIT_SIMBA_FAILED = 125, /* usage, configuration, backend or internal error */
  EXIT_CANNOT_RUN = 126,   /* the command was found but could not be executed */
  EXIT_NOT_FOUND = 127,    /* the command was not found */
  EXIT_SIGNAL_BASE = 128   /* + N: the command died of signal N, or simba was interrupted */
};

/* --- logging (util.c) --------------------------------------------------- */

extern int cli_verbosity; /* 0: info, 1: -v (debug), -1: -q (warnings only) */

/* One line to stderr: "2026-11-30T07:50:01.123Z simba[PID] LEVEL message". */
void cli_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define LOG_DEBUG(...) cli_log(SIMBA_LOG_DEBUG, __VA_ARGS__)
#define LOG_INFO(...) cli_log(SIMBA_LOG_INFO, __VA_ARGS__)
#define LOG_WARN(...) cli_log(SIMBA_LOG_WARN, __VA_ARGS__)
#define LOG_ERROR(...) cli_log(SIMBA_LOG_ERROR, __VA_ARGS__)

/* The library's log sink: its lines go through cli_log. */
void cli_library_log(void *ud, int level, const char *msg);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t cli_now_ms(void);

/* Parses a duration as the library does: a whole number of milliseconds with
 * an optional suffix "ms", "s" or "m". Returns false on bad text. */
bool cli_parse_duration(const char *text, int64_t *out_ms);

/* --- signals (util.c) --------------------------------------------------- */

/* Installs handlers for SIGINT, SIGTERM, SIGHUP and SIGCHLD that write the
 * signal number to a non-blocking pipe; returns its read end, or -1. */
int cli_signals_install(void);
/* Reads every pending signal number from the pipe; returns the last of
 * SIGINT/SIGTERM/SIGHUP seen (0 if none); SIGCHLD only wakes the reader. */
int cli_signals_drain(int fd);

/* --- the supervised command (child.c) ------------------------------------- */

typedef struct {
  pid_t pid;   /* also its process group */
  bool exited; /* reaped */
  int status;  /* waitpid status once exited */
} cli_child_t;

/* Starts argv[0] in a process group of its own with the term's variables
 * (SIMBA_LEASE, SIMBA_TOKEN, SIMBA_DEADLINE_MS) added to the environment; it is
 * killed if simba dies. Returns 0, or EXIT_NOT_FOUND / EXIT_CANNOT_RUN with a
 * logged reason. */
int cli_child_start(cli_child_t *child, char *const argv[], const simba_term_t *term);

/* The exit status a shell would report for the child: its code, or 128 + N. */
int cli_child_exit_code(const cli_child_t *child);

/* Why supervision ended. */
typedef enum {
  CLI_WORK_DONE,       /* the command exited while the term was still valid */
  CLI_WORK_TERM_LOST,  /* the term ended (or nearly): the command was stopped */
  CLI_WORK_INTERRUPTED /* simba got SIGINT/SIGTERM/SIGHUP: the command was stopped */
} cli_work_end_t;

/* Supervises the child while `term` lasts: when the term is revoked, or its
 * remaining time falls below grace_ms, or simba is interrupted, sends SIGTERM to
 * the child's process group; SIGKILL when the term's local deadline arrives.
 * Returns once the child was reaped; *signo is the interrupting signal. */
cli_work_end_t cli_supervise(cli_child_t *child, simba_term_t *term, int64_t grace_ms,
                             int signal_fd, int *signo);

/* --- the options every command takes (common.c) ------------------------------ */

/* Options every command takes, already applied to `cfg`. */
typedef struct {
  const char *backend; /* --backend or SIMBA_BACKEND */
  simba_config_t *cfg;
  bool client_named; /* client.name came from the user */
} cli_common_t;

/* Fills `common` from the environment: SIMBA_BACKEND and the variables of the
 * options that set a configuration key (SIMBA_SESSION_LEASE_DURATION, ...).
 * False (logged) on failure; common->cfg is to be freed either way. */
bool cli_common_init(cli_common_t *common);

/* Consumes the common option at argv[*i] (and its value, "--opt VALUE" or
 * "--opt=VALUE"). Returns 1 if it was one, 0 if not, -1 on a bad value (logged). */
int cli_common_option(cli_common_t *common, int argc, char **argv, int *i);

/* Opens a client on common->backend; logs the reason and returns NULL on
 * failure. */
simba_client_t *cli_open_client(const cli_common_t *common);

/* About the least remaining time a live term has just before a renewal:
 * lease-duration x (1 - drift) - margin - renew-interval. A --grace must be
 * below it, or the command would be stopped in every renew interval. */
int64_t cli_remaining_floor_ms(const simba_config_t *cfg);

/* --- commands (run.c, status.c, schema.c, watch.c) --------------------------- */

int cli_run(cli_common_t *common, int argc, char **argv);
int cli_lock(cli_common_t *common, int argc, char **argv);
int cli_status(cli_common_t *common, int argc, char **argv);
int cli_schema(cli_common_t *common, int argc, char **argv);
int cli_watch(cli_common_t *common, int argc, char **argv);

/* --- simba run --listen: /healthz, /leader, /metrics (http.c) -------------- */

typedef struct cli_http cli_http_t;

/* False when the tool was built without libmicrohttpd: --listen is refused. */
bool cli_http_available(void);

/* Serves the endpoints on `addr` (HOST:PORT, [V6]:PORT; port 0 picks a free one)
 * for the client `c`, which contends for `name`; logs "listening on HOST:PORT".
 * Follows `name`'s holder with an observer polling every `poll_ms` (0: the renew
 * interval). Logs the reason and returns NULL on failure. */
cli_http_t *cli_http_start(const char *addr, simba_client_t *c, const char *name, int64_t poll_ms);

/* The term this process holds now (retained until replaced), or NULL. */
void cli_http_set_term(cli_http_t *h, simba_term_t *term);

/* Stops serving and frees `h` (NULL: no-op); before the client is closed. */
void cli_http_stop(cli_http_t *h);

#endif

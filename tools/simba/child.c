/* The command simba runs under a term: started in a process group of its own,
 * stopped with SIGTERM when the term ends (or nearly), killed with SIGKILL at
 * the term's local deadline, so it never outlives the term. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

/* Why the term ended, as the library names it; a term invalid but not yet
 * revoked (NONE) ended at its local deadline. buf holds "UNKNOWN(N)" for a
 * reason this libsimba does not name. */
static const char *term_end_reason(simba_revoke_reason_t r, char buf[32]) {
  if (r == SIMBA_REVOKE_NONE) return "its local deadline passed";
  const char *name = simba_revoke_reason_name(r);
  if (strcmp(name, "UNKNOWN") != 0) return name;
  snprintf(buf, 32, "UNKNOWN(%d)", (int)r);
  return buf;
}

static bool is_term_variable(const char *entry) {
  static const char *const names[] = {
      "SIMBA_LEASE=", "SIMBA_TOKEN=", "SIMBA_DEADLINE_MS=", "SIMBA_TERM_KIND="};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    if (strncmp(entry, names[i], strlen(names[i])) == 0) return true;
  }
  return false;
}

/* The environment with the term's variables, built before fork: after fork a
 * multi-threaded process may only call async-signal-safe functions. */
static char **term_environment(const simba_term_t *term, char vars[4][512]) {
  size_t n = 0;
  while (environ[n]) ++n;
  char **envp = calloc(n + 5, sizeof *envp);
  if (!envp) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!is_term_variable(environ[i])) envp[k++] = environ[i];
  }
  snprintf(vars[0], 512, "SIMBA_LEASE=%s", simba_term_name(term));
  snprintf(vars[1], 512, "SIMBA_TOKEN=%" PRIu64, simba_term_token(term));
  snprintf(vars[2], 512, "SIMBA_DEADLINE_MS=%" PRId64, simba_term_remaining_ms(term));
  /* ELECTION, LOCK, SEMAPHORE, READ or WRITE: how to read SIMBA_TOKEN (docs/fencing.md). */
  snprintf(vars[3], 512, "SIMBA_TERM_KIND=%s", simba_term_kind_name(simba_term_kind(term)));
  for (int v = 0; v < 4; ++v) envp[k++] = vars[v];
  envp[k] = NULL;
  return envp;
}

int cli_child_start(cli_child_t *child, char *const argv[], const simba_term_t *term) {
  memset(child, 0, sizeof *child);
  char vars[4][512];
  char **envp = term_environment(term, vars);
  int errpipe[2];
  if (!envp || pipe2(errpipe, O_CLOEXEC) != 0) {
    free(envp);
    LOG_ERROR("cannot start %s: %s", argv[0], strerror(errno));
    return EXIT_SIMBA_FAILED;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    close(errpipe[0]);
    setpgid(0, 0);
    /* If simba dies (kill -9), the command dies with it: it must not outlive
     * the term that simba can no longer watch. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(EXIT_SIGNAL_BASE + SIGKILL);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvpe(argv[0], argv, envp);
    const int err = errno;
    ssize_t w = write(errpipe[1], &err, sizeof err);
    (void)w;
    _exit(EXIT_NOT_FOUND);
  }
  free(envp);
  close(errpipe[1]);
  if (pid < 0) {
    close(errpipe[0]);
    LOG_ERROR("cannot start %s: %s", argv[0], strerror(errno));
    return EXIT_SIMBA_FAILED;
  }
  setpgid(pid, pid); /* also here: no window where a signal misses the group */
  child->pid = pid;
  int err = 0;
  ssize_t got;
  do {
    got = read(errpipe[0], &err, sizeof err);
  } while (got < 0 && errno == EINTR);
  close(errpipe[0]);
  if (got == (ssize_t)sizeof err) {
    while (waitpid(pid, &child->status, 0) < 0 && errno == EINTR) {
    }
    child->exited = true;
    LOG_ERROR("cannot run %s: %s", argv[0], strerror(err));
    return err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
  }
  LOG_DEBUG("started %s as pid %ld", argv[0], (long)pid);
  return 0;
}

int cli_child_exit_code(const cli_child_t *child) {
  if (WIFEXITED(child->status)) return WEXITSTATUS(child->status);
  if (WIFSIGNALED(child->status)) return EXIT_SIGNAL_BASE + WTERMSIG(child->status);
  return EXIT_SIMBA_FAILED;
}

static void reap(cli_child_t *child) {
  if (child->exited) return;
  const pid_t r = waitpid(child->pid, &child->status, WNOHANG);
  if (r == child->pid) child->exited = true;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

cli_work_end_t cli_supervise(cli_child_t *child, simba_term_t *term, int64_t grace_ms,
                             int signal_fd, int *signo) {
  const int revoke_fd = simba_term_revoke_fd(term);
  /* The last deadline seen while the term was valid: a deadline only moves
   * later, so killing by it never kills after the term's true deadline. */
  int64_t deadline = cli_now_ms() + simba_term_remaining_ms(term);
  bool terminated = false, killed = false;
  cli_work_end_t why = CLI_WORK_DONE;
  *signo = 0;
  for (;;) {
    reap(child);
    if (child->exited) break;
    const int64_t now = cli_now_ms();
    const bool valid = simba_term_is_valid(term) != 0;
    int64_t remaining = 0;
    if (valid) {
      remaining = simba_term_remaining_ms(term);
      deadline = now + remaining;
    }
    if (!terminated && (*signo || !valid || remaining < grace_ms)) {
      if (*signo) {
        why = CLI_WORK_INTERRUPTED;
        LOG_INFO("got signal %d: stopping the command (SIGTERM), killing it in %" PRId64
                 " ms "
                 "if it is still running",
                 *signo, clamp(deadline - now, 0, INT64_MAX));
      } else if (!valid) {
        char buf[32];
        why = CLI_WORK_TERM_LOST;
        LOG_INFO("term of %s (token %" PRIu64 ") ended: %s; stopping the command (SIGTERM)",
                 simba_term_name(term), simba_term_token(term),
                 term_end_reason(simba_term_revoke_reason(term), buf));
      } else {
        why = CLI_WORK_TERM_LOST;
        LOG_INFO("term of %s (token %" PRIu64 ") has %" PRId64
                 " ms left, less than the grace "
                 "of %" PRId64 " ms; stopping the command (SIGTERM)",
                 simba_term_name(term), simba_term_token(term), remaining, grace_ms);
      }
      kill(-child->pid, SIGTERM);
      terminated = true;
    }
    if (terminated && !killed && now >= deadline) {
      LOG_WARN("the term's local deadline arrived and the command is still running: SIGKILL");
      kill(-child->pid, SIGKILL);
      killed = true;
    }
    int timeout_ms = -1;
    if (!terminated) {
      /* Wake at the grace point, and at least every second: renewals move it. */
      timeout_ms = (int)clamp(remaining - grace_ms, 0, 1000);
    } else if (!killed) {
      timeout_ms = (int)clamp(deadline - now, 0, 1000);
    }
    struct pollfd fds[2] = {{signal_fd, POLLIN, 0}, {revoke_fd, POLLIN, 0}};
    /* Once revoked the fd stays readable: stop watching it. */
    const nfds_t nfds = (!terminated && revoke_fd >= 0) ? 2 : 1;
    if (poll(fds, nfds, timeout_ms) > 0 && (fds[0].revents & POLLIN)) {
      const int s = cli_signals_drain(signal_fd);
      if (s && !*signo) *signo = s;
    }
  }
  return why;
}

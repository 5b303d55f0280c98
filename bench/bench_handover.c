/* simba_bench's handover scenario: two forked processes contend for one
 * election; the leader steps down, and the time from just before its
 * simba_election_step_down() to the other process's on_elected is measured,
 * both read on CLOCK_MONOTONIC (shared by the processes of one machine) and
 * passed through a pipe. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <simba.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "simba_bench.h"

enum {
  MSG_READY = 1,
  MSG_ELECTED = 2,
  MSG_RELEASE = 3,  /* t: just before simba_election_step_down() */
  MSG_RETURNED = 4, /* t: when it returned (the request reached the loop thread) */
  MSG_REVOKED = 5,  /* t: the old leader's on_revoked (its release was answered) */
  MSG_BYE = 6,
  MSG_ERROR = 7
};

/* Children -> parent, one write each (smaller than PIPE_BUF, so atomic). */
typedef struct msg {
  int32_t who;
  int32_t kind;
  int64_t t_ns;
  uint64_t token;
  int64_t rc;
} msg_t;

typedef struct child_ctx {
  int who;
  int report_fd;
} child_ctx_t;

static void send_msg(int fd, int who, int kind, int64_t t_ns, uint64_t token, int64_t rc) {
  msg_t m = {who, kind, t_ns, token, rc};
  ssize_t n;
  do {
    n = write(fd, &m, sizeof m);
  } while (n < 0 && errno == EINTR);
}

static void child_on_elected(void *ud, simba_term_t *term) {
  const int64_t now = bench_now_ns(); /* first: this is the measured moment */
  child_ctx_t *cx = ud;
  send_msg(cx->report_fd, cx->who, MSG_ELECTED, now, simba_term_token(term), 0);
}

static void child_on_revoked(void *ud, simba_term_t *term, simba_revoke_reason_t reason) {
  const int64_t now = bench_now_ns();
  child_ctx_t *cx = ud;
  send_msg(cx->report_fd, cx->who, MSG_REVOKED, now, simba_term_token(term), reason);
}

/* The contending process: reports READY, every election, and the moment it
 * starts each step-down the parent asks for ('S'); 'Q' ends it. */
static void child_main(int who, int cmd_fd, int report_fd, const options_t *o) {
  char name[32];
  snprintf(name, sizeof name, "bench-handover-%c", 'A' + who);
  simba_client_t *c = open_client(o->url, o, name);
  child_ctx_t cx = {who, report_fd};
  simba_listener_t l = {child_on_elected, child_on_revoked, &cx};
  simba_election_t *e = NULL;
  int rc = simba_election_start(&e, c, "bench-handover", &l);
  if (rc != SIMBA_OK) {
    send_msg(report_fd, who, MSG_ERROR, 0, 0, rc);
    _exit(1);
  }
  send_msg(report_fd, who, MSG_READY, bench_now_ns(), 0, 0);
  for (;;) {
    char cmd;
    ssize_t n = read(cmd_fd, &cmd, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || cmd == 'Q') break;
    if (cmd == 'S') {
      const int64_t t = bench_now_ns();
      rc = simba_election_step_down(e, o->handover_cooldown_ms, NULL, NULL);
      const int64_t returned = bench_now_ns();
      send_msg(report_fd, who, MSG_RELEASE, t, 0, rc);
      send_msg(report_fd, who, MSG_RETURNED, returned, 0, rc);
    }
  }
  simba_election_stop_wait(e, 5000);
  simba_election_free(e);
  simba_client_close(c);
  send_msg(report_fd, who, MSG_BYE, bench_now_ns(), 0, 0);
  _exit(0);
}

/* Reads one message, waiting at most timeout_ms; 0, or -1 (timeout, EOF). */
static int read_msg(int fd, msg_t *m, int timeout_ms) {
  const int64_t until = bench_now_ns() + (int64_t)timeout_ms * 1000000;
  for (;;) {
    int64_t left = (until - bench_now_ns()) / 1000000;
    if (left < 0) return -1;
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, (int)left + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    ssize_t n = read(fd, m, sizeof *m);
    if (n < 0 && errno == EINTR) continue;
    return n == (ssize_t)sizeof *m ? 0 : -1;
  }
}

/* Waits for a message of `kind` from `who`, keeping the other messages' effect
 * on *elected (who was last elected, and when). */
typedef struct handover_state {
  int leader;            /* last process elected, -1 before */
  int64_t elected_at[2]; /* its on_elected time */
  uint64_t token[2];
  int64_t release_at[2];  /* its last step-down start */
  int64_t returned_at[2]; /* when that simba_election_step_down() returned */
  int64_t revoked_at[2];  /* its last on_revoked */
  int have_elected[2], have_release[2], have_returned[2], have_revoked[2];
} handover_state_t;

static int pump(int fd, handover_state_t *st, int timeout_ms, char *err, size_t errlen) {
  msg_t m;
  if (read_msg(fd, &m, timeout_ms) != 0) {
    snprintf(err, errlen, "no message from the contending processes within %d ms", timeout_ms);
    return -1;
  }
  if (m.who < 0 || m.who > 1) {
    snprintf(err, errlen, "garbled message");
    return -1;
  }
  switch (m.kind) {
    case MSG_ELECTED:
      st->leader = m.who;
      st->elected_at[m.who] = m.t_ns;
      st->token[m.who] = m.token;
      st->have_elected[m.who] = 1;
      break;
    case MSG_RELEASE:
      if (m.rc != SIMBA_OK) {
        snprintf(err, errlen, "simba_election_step_down: %s", simba_strerror((int)m.rc));
        return -1;
      }
      st->release_at[m.who] = m.t_ns;
      st->have_release[m.who] = 1;
      break;
    case MSG_RETURNED:
      st->returned_at[m.who] = m.t_ns;
      st->have_returned[m.who] = 1;
      break;
    case MSG_REVOKED:
      st->revoked_at[m.who] = m.t_ns;
      st->have_revoked[m.who] = 1;
      break;
    case MSG_ERROR:
      snprintf(err, errlen, "process %c failed: %s", 'A' + m.who, simba_strerror((int)m.rc));
      return -1;
    default:
      break;
  }
  return m.kind;
}

/* One run of run_handover(): the pipes, the two processes, what they reported,
 * and the samples. */
typedef struct handover_run {
  int report[2], cmd[2][2];
  pid_t pid[2];
  handover_state_t st;
  bench_samples_t s, s_in, s_rel, s_take;
} handover_run_t;

/* A first, alone, so that it is the first leader; then B, which waits. 0, or
 * -1 with err set. */
static int start_contenders(const options_t *o, handover_run_t *h, char *err, size_t errlen) {
  for (int who = 0; who < 2; who++) {
    h->pid[who] = fork();
    if (h->pid[who] < 0) {
      snprintf(err, errlen, "fork: %s", strerror(errno));
      return -1;
    }
    if (h->pid[who] == 0) {
      close(h->report[0]);
      close(h->cmd[who][1]);
      close(h->cmd[1 - who][0]);
      close(h->cmd[1 - who][1]);
      child_main(who, h->cmd[who][0], h->report[1], o);
    }
    close(h->cmd[who][0]);
    int ready = 0;
    while (!ready || (who == 0 && !h->st.have_elected[0])) {
      int k = pump(h->report[0], &h->st, 15000, err, errlen);
      if (k < 0) return -1;
      if (k == MSG_READY) ready = 1;
    }
  }
  return 0;
}

/* Handover i: the leader steps down and the other takes over. 1 when measured,
 * 0 when the old leader won its lease back (to be done again), -1 with
 * out->error set. */
static int one_handover(const options_t *o, handover_run_t *h, int i, handover_result_t *out) {
  char *err = out->error;
  const size_t errlen = sizeof out->error;
  handover_state_t *st = &h->st;
  bench_sleep_ns((int64_t)o->handover_gap_ms * 1000000);
  const int from = st->leader, to = 1 - from;
  const uint64_t prev_token = st->token[from];
  st->have_elected[to] = st->have_elected[from] = 0;
  st->have_release[from] = st->have_returned[from] = st->have_revoked[from] = 0;
  if (write(h->cmd[from][1], "S", 1) != 1) {
    snprintf(err, errlen, "cannot signal process %c", 'A' + from);
    return -1;
  }
  while (!st->have_elected[to] || !st->have_release[from] || !st->have_returned[from] ||
         !st->have_revoked[from]) {
    if (pump(h->report[0], st, 5000, err, errlen) < 0) {
      snprintf(err + strlen(err), errlen - strlen(err), " (handover %d, %c -> %c)", i + 1,
               'A' + from, 'A' + to);
      return -1;
    }
    if (st->have_elected[from]) break;
  }
  if (st->have_elected[from]) {
    /* The new leader was not elected before the old one's cooldown ended,
     * and the old one won the lease back (as it may): count it, no sample. */
    out->regained++;
    if (out->regained > o->handovers / 10 + 1) {
      snprintf(err, errlen,
               "the old leader won its lease back %d times (raise "
               "--handover-cooldown-ms)",
               out->regained);
      return -1;
    }
    return 0;
  }
  if (st->token[to] <= prev_token) out->tokens_increasing = 0;
  if (i == 0) out->first_token = prev_token;
  out->last_token = st->token[to];
  bench_samples_push(&h->s, st->elected_at[to] - st->release_at[from]);
  bench_samples_push(&h->s_in, st->returned_at[from] - st->release_at[from]);
  bench_samples_push(&h->s_rel, st->revoked_at[from] - st->release_at[from]);
  bench_samples_push(&h->s_take, st->elected_at[to] - st->revoked_at[from]);
  return 1;
}

/* Asks both processes to end, waits for them (at most 10 s each, then
 * SIGKILL), and closes the pipes. */
static void stop_contenders(handover_run_t *h) {
  for (int who = 0; who < 2; who++) {
    if (h->pid[who] > 0) {
      if (write(h->cmd[who][1], "Q", 1) != 1) {
      }
    }
  }
  for (int who = 0; who < 2; who++) {
    if (h->pid[who] <= 0) continue;
    int status = 0;
    const int64_t until = bench_now_ns() + 10 * 1000000000LL;
    while (waitpid(h->pid[who], &status, WNOHANG) == 0) {
      if (bench_now_ns() > until) {
        kill(h->pid[who], SIGKILL); /* our own child only */
        waitpid(h->pid[who], &status, 0);
        break;
      }
      bench_sleep_ns(10 * 1000000);
    }
    close(h->cmd[who][1]);
  }
  close(h->report[0]);
  if (h->report[1] >= 0) close(h->report[1]);
}

void run_handover(const options_t *o, handover_result_t *out) {
  handover_run_t h;
  memset(&h, 0, sizeof h);
  h.pid[0] = h.pid[1] = -1;
  memset(out, 0, sizeof *out);
  out->tokens_increasing = 1;
  if (pipe(h.report) != 0 || pipe(h.cmd[0]) != 0 || pipe(h.cmd[1]) != 0) {
    snprintf(out->error, sizeof out->error, "pipe: %s", strerror(errno));
    out->failed = 1;
    return;
  }
  fflush(NULL);
  h.st.leader = -1;
  bench_samples_init(&h.s);
  bench_samples_init(&h.s_in);
  bench_samples_init(&h.s_rel);
  bench_samples_init(&h.s_take);

  int ok = start_contenders(o, &h, out->error, sizeof out->error) == 0;
  if (ok) {
    close(h.report[1]);
    h.report[1] = -1;
  }
  /* B's first attempt (answered "held") is over well within the gap. */
  for (int i = 0; ok && i < o->handovers; i++) {
    const int r = one_handover(o, &h, i, out);
    if (r < 0) ok = 0;
    if (r == 0) i--;
  }
  if (ok) {
    out->done = 1;
  } else {
    out->failed = 1;
  }
  out->handovers = (int)h.s.n;
  out->h = bench_summarize(&h.s);
  out->hop_in = bench_summarize(&h.s_in);
  out->release_done = bench_summarize(&h.s_rel);
  out->takeover = bench_summarize(&h.s_take);
  bench_samples_free(&h.s);
  bench_samples_free(&h.s_in);
  bench_samples_free(&h.s_rel);
  bench_samples_free(&h.s_take);
  stop_contenders(&h);
}

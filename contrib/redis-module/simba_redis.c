/*
 * simba_redis: a Redis 7.0 module that makes a redis-server a Simba contender.
 *
 *   loadmodule /path/simba_redis.so backend redis://10.0.0.5:6379 contend app.primary \
 *              session.lease-duration 6s channel simba.leadership
 *
 * One client per server, opened in RedisModule_OnLoad in EXTERNAL mode
 * ("loop.mode" = "external"): the module registers simba_client_fd() with
 * RedisModule_EventLoopAdd and, after every simba_client_process() (and every
 * command that called the library), re-arms one RedisModule_CreateTimer to
 * simba_client_timeout_ms(). Everything runs on the server's main thread; the
 * client has no thread of its own, so election callbacks run inside
 * simba_client_process(), between two commands.
 *
 * Commands: SIMBA.CONTEND name, SIMBA.RESIGN name, SIMBA.TOKEN name,
 * SIMBA.STATUS, SIMBA.SNAPSHOT, SIMBA.CLOSE (before MODULE UNLOAD). Each election and revocation is
 * published on the channel (default "simba.leadership") as one JSON object. On SHUTDOWN the client
 * is closed: every term is revoked and its lease released, so another contender takes over at once
 * instead of after the lease duration.
 *
 * SIMBA.CLOSE blocks only its caller (RedisModule_BlockClient): it starts the
 * close with simba_client_close_async() (EXTERNAL mode since libsimba 1.5), the fd
 * and the timer keep driving it, and the close's done (inside
 * simba_client_process()) says whether the backend confirmed it: the module then
 * frees the client and answers +OK or the error. Meanwhile other SIMBA.* commands
 * answer "closing", a second SIMBA.CLOSE joins, MODULE UNLOAD is refused. SHUTDOWN
 * and MODULE UNLOAD close blocking (no event loop runs there); a SHUTDOWN finishes
 * a SIMBA.CLOSE in progress (its done runs inside that simba_client_close()).
 *
 * See docs/embedding.md.
 */
#define _GNU_SOURCE /* dladdr, RTLD_DEFAULT */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <simba.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rm_api.h"

#define MODULE_NAME "simba"
#define MODULE_VERSION 10500 /* libsimba 1.5.0 */
/* The two entry points the server looks up; everything else stays hidden. */
#define RM_EXPORT __attribute__((visibility("default")))

#define MAX_NAME 128 /* a name simba_lease_name_check() accepts fits */

/* One SIMBA.CONTEND: an election and, while this server leads, its term. */
typedef struct contender {
  char name[MAX_NAME + 1];
  simba_election_t *election;
  simba_term_t *term;  /* retained while leading; NULL otherwise */
  uint64_t last_token; /* token of the last term, 0 if never elected */
  int stopping;        /* SIMBA.RESIGN started the stop */
  int stopped;         /* the stop's done ran: free outside simba_client_process() */
  struct contender *next;
} contender_t;

/* A SIMBA.CLOSE caller, blocked until the close completes. */
typedef struct waiter {
  RedisModuleBlockedClient *bc;
  struct waiter *next;
} waiter_t;

static struct {
  RedisModuleCtx *ctx; /* detached context: timers, publish, log outside commands */
  simba_client_t *client;
  int fd;
  RedisModuleTimerID timer;
  int timer_set;
  char channel[256];
  contender_t *contenders;
  /* SIMBA.CLOSE in progress: 1 from the command until its callers are answered. */
  int closing;
  int close_done; /* the close's done ran: free the client, answer the callers */
  int close_err;  /* its err: SIMBA_OK when the backend confirmed the close */
  waiter_t *waiters;
} g = {NULL, NULL, -1, 0, 0, "simba.leadership", NULL, 0, 0, SIMBA_OK, NULL};

/* --- helpers ----------------------------------------------------------------------- */

/* A name of the library (simba_*_name) in the module's documented lowercase
   ("stopped", "live", "session_suspended"); "unknown(N)" for a value this
   libsimba does not name. buf holds the result. */
static const char *lower_name(const char *name, int value, char buf[48]) {
  size_t i;
  if (strcmp(name, "UNKNOWN") == 0) {
    snprintf(buf, 48, "unknown(%d)", value);
    return buf;
  }
  for (i = 0; name[i] != '\0' && i < 47; i++)
    buf[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
  buf[i] = '\0';
  return buf;
}

/* The lease-name argument of a command, checked by the library's rule (counted
   bytes: a NUL inside is refused, not cut); NULL with the reply's error in err. */
static const char *name_arg(RedisModuleString *arg, size_t *len, char *err, size_t errlen) {
  const char *name = RedisModule_StringPtrLen(arg, len);
  if (simba_lease_name_check(name, *len) != SIMBA_OK) {
    snprintf(err, errlen, "ERR %s", simba_last_error());
    return NULL;
  }
  return name;
}

/* The contender of a checked name (len bytes, no NUL inside). */
static contender_t *find(const char *name, size_t len) {
  contender_t *c;
  for (c = g.contenders; c != NULL; c = c->next)
    if (strlen(c->name) == len && memcmp(c->name, name, len) == 0) return c;
  return NULL;
}

static void publish(const char *fmt, ...) {
  char msg[512];
  va_list ap;
  int n;
  RedisModuleString *ch, *m;
  if (g.channel[0] == '\0' || g.ctx == NULL) return;
  va_start(ap, fmt);
  n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof msg) n = (int)sizeof msg - 1;
  ch = RedisModule_CreateString(g.ctx, g.channel, strlen(g.channel));
  m = RedisModule_CreateString(g.ctx, msg, (size_t)n);
  RedisModule_PublishMessage(g.ctx, ch, m);
  RedisModule_FreeString(g.ctx, ch);
  RedisModule_FreeString(g.ctx, m);
}

/* The library's log lines go to the server's log. */
static void on_log(void *ud, int level, const char *msg) {
  static const char *levels[] = {"debug", "notice", "warning", "warning"};
  (void)ud;
  if (level < 0 || level > 3) level = 3;
  RedisModule_Log(g.ctx, levels[level], "simba: %s", msg);
}

static void on_event(void *ud, simba_event_type_t type, const char *detail_json) {
  char buf[48];
  const char *n = lower_name(simba_event_name(type), (int)type, buf);
  (void)ud;
  RedisModule_Log(g.ctx,
                  type == SIMBA_EVENT_SESSION_SUSPENDED || type == SIMBA_EVENT_SESSION_EXPIRED
                      ? "warning"
                      : "verbose",
                  "simba: %s %s", n, detail_json ? detail_json : "");
  publish("{\"event\":\"%s\"}", n);
}

/* --- driving the client on the server's loop ----------------------------------------- */

static void on_timer(RedisModuleCtx *ctx, void *data);

/* Free the contenders whose stop completed; never inside simba_client_process(). */
static void sweep(void) {
  contender_t **p = &g.contenders;
  while (*p != NULL) {
    contender_t *c = *p;
    if (c->stopped) {
      *p = c->next;
      simba_election_free(c->election); /* stopped: returns at once */
      free(c);
    } else {
      p = &c->next;
    }
  }
}

/* One timer, always re-created: the library's next deadline may be earlier or
   later than the one armed. */
static void arm(void) {
  int64_t to;
  if (g.timer_set) {
    RedisModule_StopTimer(g.ctx, g.timer, NULL);
    g.timer_set = 0;
  }
  if (g.client == NULL) return;
  to = simba_client_timeout_ms(g.client);
  if (to < 0) return; /* nothing pending: the fd will wake us */
  g.timer = RedisModule_CreateTimer(g.ctx, (rm_mstime_t)to, on_timer, NULL);
  g.timer_set = 1;
}

static void finish_close(void);

static void drive(void) {
  int rc;
  if (g.client == NULL) return;
  rc = simba_client_process(g.client);
  if (g.close_done) {
    finish_close(); /* outside simba_client_process(), as the library asks */
    return;
  }
  if (rc != SIMBA_OK)
    RedisModule_Log(g.ctx, "warning", "simba: simba_client_process: %s (%s)", simba_strerror(rc),
                    simba_last_error());
  sweep();
  arm();
}

static void on_fd(int fd, void *user_data, int mask) {
  (void)fd;
  (void)user_data;
  (void)mask;
  drive();
}

static void on_timer(RedisModuleCtx *ctx, void *data) {
  (void)ctx;
  (void)data;
  g.timer_set = 0; /* it fired: nothing to stop */
  drive();
}

/* --- election callbacks (inside simba_client_process(), on the main thread) ---------- */

static void on_elected(void *ud, simba_term_t *t) {
  contender_t *c = ud;
  simba_term_retain(t);
  if (c->term != NULL) simba_term_release(c->term);
  c->term = t;
  c->last_token = simba_term_token(t);
  RedisModule_Log(g.ctx, "notice", "simba: elected for '%s' with token %" PRIu64, c->name,
                  c->last_token);
  publish("{\"event\":\"elected\",\"name\":\"%s\",\"token\":%" PRIu64 "}", c->name, c->last_token);
}

static void on_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t reason) {
  contender_t *c = ud;
  uint64_t token = simba_term_token(t);
  char buf[48];
  const char *why = lower_name(simba_revoke_reason_name(reason), (int)reason, buf);
  if (c->term == t) {
    simba_term_release(c->term);
    c->term = NULL;
  }
  RedisModule_Log(g.ctx, "notice", "simba: term of '%s' (token %" PRIu64 ") revoked: %s", c->name,
                  token, why);
  publish("{\"event\":\"revoked\",\"name\":\"%s\",\"token\":%" PRIu64 ",\"reason\":\"%s\"}",
          c->name, token, why);
}

static void on_stopped(void *ud, int err) {
  contender_t *c = ud;
  (void)err;
  c->stopped = 1;
}

/* Start contending for a checked name; *err gets a message on failure. */
static contender_t *contend(const char *name, size_t len, char *err, size_t errlen) {
  contender_t *c;
  simba_listener_t l;
  int rc;
  c = calloc(1, sizeof *c);
  if (c == NULL) {
    snprintf(err, errlen, "ERR out of memory");
    return NULL;
  }
  memcpy(c->name, name, len);
  c->name[len] = '\0';
  if (find(name, len) != NULL) {
    snprintf(err, errlen,
             find(name, len)->stopping ? "ERR SIMBA.RESIGN of '%s' is still in progress"
                                       : "ERR already contending for '%s'",
             c->name);
    free(c);
    return NULL;
  }
  l.on_elected = on_elected;
  l.on_revoked = on_revoked;
  l.ud = c;
  rc = simba_election_start(&c->election, g.client, c->name, &l);
  if (rc != SIMBA_OK) {
    snprintf(err, errlen, "ERR cannot contend for '%s': %s (%s)", c->name, simba_strerror(rc),
             simba_last_error());
    free(c);
    return NULL;
  }
  c->next = g.contenders;
  g.contenders = c;
  return c;
}

/* --- commands --------------------------------------------------------------------------- */

static int reply_not_open(RedisModuleCtx *ctx) {
  return RedisModule_ReplyWithError(ctx, "ERR the simba client is closed");
}

static int reply_closing(RedisModuleCtx *ctx) {
  return RedisModule_ReplyWithError(ctx,
                                    "ERR the simba client is closing (SIMBA.CLOSE in progress)");
}

/* SIMBA.CONTEND name: contend for the lease (idempotent names are refused). */
static int cmd_contend(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  char err[512];
  size_t len;
  const char *name;
  if (argc != 2) return RedisModule_WrongArity(ctx);
  if (g.closing) return reply_closing(ctx);
  if (g.client == NULL) return reply_not_open(ctx);
  name = name_arg(argv[1], &len, err, sizeof err);
  if (name == NULL || contend(name, len, err, sizeof err) == NULL) {
    arm();
    return RedisModule_ReplyWithError(ctx, err);
  }
  arm();
  return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* SIMBA.RESIGN name: stop contending: the term is revoked and the lease released. */
static int cmd_resign(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  size_t len;
  const char *name;
  char err[512];
  contender_t *c;
  int rc;
  if (argc != 2) return RedisModule_WrongArity(ctx);
  if (g.closing) return reply_closing(ctx);
  if (g.client == NULL) return reply_not_open(ctx);
  name = name_arg(argv[1], &len, err, sizeof err);
  if (name == NULL) return RedisModule_ReplyWithError(ctx, err);
  c = find(name, len);
  if (c == NULL || c->stopping)
    return RedisModule_ReplyWithError(ctx, "ERR not contending for that name");
  rc = simba_election_stop(c->election, on_stopped, c);
  if (rc != SIMBA_OK) {
    snprintf(err, sizeof err, "ERR cannot resign '%s': %s (%s)", c->name, simba_strerror(rc),
             simba_last_error());
    return RedisModule_ReplyWithError(ctx, err);
  }
  c->stopping = 1;
  arm();
  return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* SIMBA.TOKEN name: the fencing token while this server holds a valid term, else nil. */
static int cmd_token(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  size_t len;
  const char *name;
  char err[512];
  contender_t *c;
  if (argc != 2) return RedisModule_WrongArity(ctx);
  if (g.closing) return reply_closing(ctx);
  name = name_arg(argv[1], &len, err, sizeof err);
  if (name == NULL) return RedisModule_ReplyWithError(ctx, err);
  c = find(name, len);
  /* The term's validity is a pure function of the monotonic clock: a server that
     was paused past the deadline answers nil here even before the loop ran. */
  if (c == NULL || c->term == NULL || !simba_term_is_valid(c->term))
    return RedisModule_ReplyWithNull(ctx);
  return RedisModule_ReplyWithLongLong(ctx, (long long)simba_term_token(c->term));
}

/* SIMBA.STATUS: the session and every contended name. */
static int cmd_status(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  contender_t *c;
  long n = 0;
  char buf[48];
  simba_session_status_t s = simba_client_status(g.client);
  (void)argv;
  if (argc != 1) return RedisModule_WrongArity(ctx);
  if (g.closing) return reply_closing(ctx);
  for (c = g.contenders; c != NULL; c = c->next) n++;
  RedisModule_ReplyWithMap(ctx, 2);
  RedisModule_ReplyWithCString(ctx, "session");
  RedisModule_ReplyWithCString(ctx, lower_name(simba_session_status_name(s), (int)s, buf));
  RedisModule_ReplyWithCString(ctx, "leases");
  RedisModule_ReplyWithArray(ctx, n);
  for (c = g.contenders; c != NULL; c = c->next) {
    int leading = c->term != NULL && simba_term_is_valid(c->term);
    RedisModule_ReplyWithMap(ctx, 5);
    RedisModule_ReplyWithCString(ctx, "name");
    RedisModule_ReplyWithCString(ctx, c->name);
    RedisModule_ReplyWithCString(ctx, "state");
    RedisModule_ReplyWithCString(ctx, c->stopping ? "stopping" : leading ? "leader" : "candidate");
    RedisModule_ReplyWithCString(ctx, "leader");
    RedisModule_ReplyWithLongLong(ctx, leading);
    RedisModule_ReplyWithCString(ctx, "token");
    RedisModule_ReplyWithLongLong(ctx,
                                  (long long)(leading ? simba_term_token(c->term) : c->last_token));
    RedisModule_ReplyWithCString(ctx, "remaining_ms");
    RedisModule_ReplyWithLongLong(ctx, leading ? (long long)simba_term_remaining_ms(c->term) : 0);
  }
  return RM_OK;
}

/* SIMBA.SNAPSHOT: the client's JSON snapshot (simba_client_snapshot_json). */
static int cmd_snapshot(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  char *json;
  int rc;
  (void)argv;
  if (argc != 1) return RedisModule_WrongArity(ctx);
  if (g.closing) return reply_closing(ctx);
  if (g.client == NULL) return reply_not_open(ctx);
  json = simba_client_snapshot_json(g.client);
  if (json == NULL) {
    char err[512];
    snprintf(err, sizeof err, "ERR no snapshot: %s", simba_last_error());
    return RedisModule_ReplyWithError(ctx, err);
  }
  rc = RedisModule_ReplyWithStringBuffer(ctx, json, strlen(json));
  simba_free(json);
  return rc;
}

/* A redis:// backend makes libsimba call hiredis. Inside redis-server, when
   libsimba links libhiredis.so (as built today), those calls bind to the
   server's own copy of hiredis (a different version, exported by the executable
   for its modules), not to libhiredis.so, and the first connect crashes the
   server. Refuse such a backend then; postgresql:// and zookeeper:// do not have
   the problem, nor does a libsimba with hiredis linked in privately (see
   docs/embedding.md, "Known limits", and contrib/.repro/). Returns NULL when the
   backend is usable, else the reason. */
static int find_libhiredis(struct dl_phdr_info *info, size_t size, void *found) {
  (void)size;
  if (info->dlpi_name != NULL && strstr(info->dlpi_name, "libhiredis") != NULL) {
    *(int *)found = 1;
    return 1;
  }
  return 0;
}

static const char *hiredis_conflict(const char *backend) {
  void *sym;
  Dl_info info;
  int shared_hiredis = 0;
  if (strncmp(backend, "redis://", 8) != 0 && strncmp(backend, "rediss://", 9) != 0) return NULL;
  sym = dlsym(RTLD_DEFAULT, "redisAsyncConnect");
  if (sym == NULL) return NULL; /* the host has no hiredis of its own */
  if (dladdr(sym, &info) != 0 && info.dli_fname != NULL && strstr(info.dli_fname, "libhiredis"))
    return NULL; /* the first definition is libhiredis.so itself */
  dl_iterate_phdr(find_libhiredis, &shared_hiredis);
  if (!shared_hiredis) return NULL; /* libsimba carries its own hiredis */
  return "a redis:// backend cannot be used from inside redis-server with this libsimba: its "
         "hiredis calls would bind to the server's own hiredis and crash it; contend on a "
         "postgresql:// or zookeeper:// backend (docs/embedding.md)";
}

static void close_client(void);

/* What the blocked SIMBA.CLOSE callers are answered; NULL privdata means +OK. */
static int close_reply(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  const char *err = RedisModule_GetBlockedClientPrivateData(ctx);
  (void)argv;
  (void)argc;
  if (err != NULL) return RedisModule_ReplyWithError(ctx, err);
  return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static void close_free_privdata(RedisModuleCtx *ctx, void *privdata) {
  (void)ctx;
  free(privdata);
}

/* Answer every blocked SIMBA.CLOSE caller with the close's err and leave the
   closing state. */
static void answer_closers(void) {
  char err[160];
  if (g.close_err != SIMBA_OK)
    snprintf(err, sizeof err,
             "ERR closing the session failed (%s); its leases free when it expires on the "
             "backend",
             simba_strerror(g.close_err));
  while (g.waiters != NULL) {
    waiter_t *w = g.waiters;
    g.waiters = w->next;
    RedisModule_UnblockClient(w->bc, g.close_err != SIMBA_OK ? strdup(err) : NULL);
    free(w);
  }
  g.closing = 0;
  g.close_done = 0;
  g.close_err = SIMBA_OK;
}

/* The close completed: free the client (simba_client_close() returns at once
   now), then answer the callers. */
static void finish_close(void) {
  RedisModule_Log(g.ctx, "notice", "simba: SIMBA.CLOSE: closed%s",
                  g.close_err != SIMBA_OK ? " (the backend did not confirm it)" : "");
  close_client();
  answer_closers();
}

/* The close's done: the client's last callback, inside simba_client_process()
   (or inside SHUTDOWN's blocking simba_client_close()); drive() finishes. */
static void close_done(void *ud, int err) {
  (void)ud;
  g.close_done = 1;
  g.close_err = err;
}

/* SIMBA.CLOSE: close the client (every lease released, the session closed)
   without stalling the server: the caller is blocked until the close completes
   (+OK, or an error when the backend did not answer before the session's local
   deadline, ADR 0030) while the server's loop keeps driving the client. A second
   SIMBA.CLOSE during the close joins it (blocked too, same answer); the other
   SIMBA.* commands answer a "closing" error. Afterwards the module keeps no timer,
   so MODULE UNLOAD is allowed (refused while the close is in flight). */
static int cmd_close(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  waiter_t *w;
  (void)argv;
  if (argc != 1) return RedisModule_WrongArity(ctx);
  if (g.client == NULL) return reply_not_open(ctx);
  w = calloc(1, sizeof *w);
  if (w == NULL) return RedisModule_ReplyWithError(ctx, "ERR out of memory");
  if (!g.closing) {
    RedisModule_Log(g.ctx, "notice", "simba: SIMBA.CLOSE: releasing leases");
    if (simba_client_close_async(g.client, close_done, NULL) != SIMBA_OK) {
      /* Nothing started: close blocking, as SHUTDOWN does. */
      RedisModule_Log(g.ctx, "warning", "simba: SIMBA.CLOSE blocks: %s", simba_last_error());
      free(w);
      close_client();
      return RedisModule_ReplyWithSimpleString(ctx, "OK");
    }
    g.closing = 1;
    arm();
  }
  w->bc = RedisModule_BlockClient(ctx, close_reply, NULL, close_free_privdata, 0);
  if (w->bc == NULL) {
    free(w);
    return RedisModule_ReplyWithError(ctx, "ERR cannot block the client");
  }
  w->next = g.waiters;
  g.waiters = w;
  return RM_OK;
}

/* --- load, shutdown, unload -------------------------------------------------------------- */

/* Close the client on the main thread: terms revoked (published), leases released,
   session closed. Blocks until the close is answered, at most until the session's local
   deadline when the backend does not answer (ADR 0030); returns at once when an
   asynchronous close already completed. */
static void close_client(void) {
  contender_t *c;
  if (g.client == NULL) return;
  if (g.timer_set) {
    RedisModule_StopTimer(g.ctx, g.timer, NULL);
    g.timer_set = 0;
  }
  if (g.fd >= 0) {
    RedisModule_EventLoopDel(g.fd, RM_EVENTLOOP_READABLE);
    g.fd = -1;
  }
  simba_client_close(g.client);
  g.client = NULL;
  while ((c = g.contenders) != NULL) {
    g.contenders = c->next;
    if (c->term != NULL) simba_term_release(c->term);
    simba_election_free(c->election);
    free(c);
  }
}

static void on_shutdown(RedisModuleCtx *ctx, RedisModuleEvent eid, uint64_t subevent, void *data) {
  (void)ctx;
  (void)eid;
  (void)subevent;
  (void)data;
  RedisModule_Log(g.ctx, "notice", "simba: server shutting down: releasing leases");
  /* No event loop runs any more: a SIMBA.CLOSE in progress is finished blocking. */
  close_client();
  if (g.closing) answer_closers();
}

RM_EXPORT int RedisModule_OnUnload(RedisModuleCtx *ctx);
RM_EXPORT int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

int RedisModule_OnUnload(RedisModuleCtx *ctx) {
  if (g.closing) {
    /* Its callers wait for an answer, and the loop must keep driving the close. */
    RedisModule_Log(ctx, "warning", "simba: MODULE UNLOAD refused: SIMBA.CLOSE is in progress");
    return RM_ERR;
  }
  close_client();
  if (g.ctx != NULL) {
    RedisModule_FreeThreadSafeContext(g.ctx);
    g.ctx = NULL;
  }
  return RM_OK;
}

static int load_error(RedisModuleCtx *ctx, simba_config_t *cfg, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  RedisModule_Log(ctx, "warning", "simba: %s", msg);
  simba_config_free(cfg);
  if (g.ctx != NULL) {
    RedisModule_FreeThreadSafeContext(g.ctx);
    g.ctx = NULL;
  }
  return RM_ERR;
}

/* What the module arguments ask for, besides the library keys (set on the config). */
typedef struct {
  const char *backend;
  const char *names[64];
  size_t name_lens[64];
  int n_names;
} load_args_t;

/* The API, the module name and the libsimba version; RM_ERR (logged) when unusable. */
static int check_host(RedisModuleCtx *ctx) {
  const char *missing = NULL;
  if (rm_api_load(ctx, &missing) != RM_OK) {
    /* Without the API there is no RedisModule_Log: say it on stderr (the log). */
    fprintf(stderr, "simba: this server lacks %s (simba_redis needs Redis 7.0 or later)\n",
            missing);
    return RM_ERR;
  }
  if (RedisModule_IsModuleNameBusy(MODULE_NAME)) {
    RedisModule_Log(ctx, "warning", "simba: a module named '%s' is already loaded", MODULE_NAME);
    return RM_ERR;
  }
  RedisModule_SetModuleAttribs(ctx, MODULE_NAME, MODULE_VERSION, RM_APIVER_1);

  /* 1.5: simba_client_close_async() of an EXTERNAL-mode client (SIMBA.CLOSE). */
  if (simba_version() >> 16 != SIMBA_VERSION_MAJOR || simba_version() < 0x010500)
    return load_error(ctx, NULL, "libsimba %s is loaded, simba_redis needs 1.5 or later",
                      simba_version_string());
  return RM_OK;
}

/* One KEY VALUE pair into *a or cfg; on RM_ERR cfg is freed (load_error). */
static int parse_arg(RedisModuleCtx *ctx, simba_config_t *cfg, const char *key, const char *val,
                     size_t vlen, load_args_t *a) {
  if (strcmp(key, "backend") == 0) {
    a->backend = val;
  } else if (strcmp(key, "channel") == 0) {
    if (vlen >= sizeof g.channel)
      return load_error(ctx, cfg, "channel name is longer than %zu bytes", sizeof g.channel - 1);
    memcpy(g.channel, val, vlen);
    g.channel[vlen] = '\0';
  } else if (strcmp(key, "contend") == 0) {
    if (simba_lease_name_check(val, vlen) != SIMBA_OK)
      return load_error(ctx, cfg, "contend '%s': %s", val, simba_last_error());
    if (a->n_names == (int)(sizeof a->names / sizeof a->names[0]))
      return load_error(ctx, cfg, "at most 64 'contend' arguments");
    a->names[a->n_names] = val;
    a->name_lens[a->n_names] = vlen;
    a->n_names++;
  } else if (strcmp(key, "loop.mode") == 0 || strncmp(key, "callback.", 9) == 0) {
    return load_error(
        ctx, cfg, "'%s' is set by the module (EXTERNAL mode, callbacks on the main thread)", key);
  } else if (strchr(key, '.') != NULL) {
    if (simba_config_set(cfg, key, val) != SIMBA_OK)
      return load_error(ctx, cfg, "%s %s: %s", key, val, simba_last_error());
  } else {
    return load_error(ctx, cfg,
                      "unknown module argument '%s' (backend, contend, channel, or a library "
                      "key such as session.lease-duration)",
                      key);
  }
  return RM_OK;
}

/* All the module arguments, then the backend's and the module's own settings and
   the config's validation; on RM_ERR cfg is freed (load_error). */
static int parse_args(RedisModuleCtx *ctx, simba_config_t *cfg, RedisModuleString **argv, int argc,
                      load_args_t *a) {
  int i;
  if (argc % 2 != 0)
    return load_error(ctx, cfg,
                      "module arguments are pairs (backend URL [contend NAME]... [KEY VALUE]...): "
                      "'%s' has no value",
                      RedisModule_StringPtrLen(argv[argc - 1], NULL));
  for (i = 0; i < argc; i += 2) {
    size_t klen, vlen;
    const char *key = RedisModule_StringPtrLen(argv[i], &klen);
    const char *val = RedisModule_StringPtrLen(argv[i + 1], &vlen);
    const char *knul = memchr(key, '\0', klen), *vnul = memchr(val, '\0', vlen);
    /* Passed on as C strings: a NUL inside would cut them silently. */
    if (knul != NULL)
      return load_error(ctx, cfg, "module argument '%s' has a NUL byte at index %zu", key,
                        (size_t)(knul - key));
    if (vnul != NULL)
      return load_error(ctx, cfg, "the value of module argument '%s' has a NUL byte at index %zu",
                        key, (size_t)(vnul - val));
    if (parse_arg(ctx, cfg, key, val, vlen, a) != RM_OK) return RM_ERR;
  }
  if (a->backend == NULL)
    return load_error(ctx, cfg,
                      "missing module argument: backend URL (e.g. backend redis://host:6379)");
  if (hiredis_conflict(a->backend) != NULL)
    return load_error(ctx, cfg, "%s", hiredis_conflict(a->backend));
  if (simba_config_set(cfg, "loop.mode", "external") != SIMBA_OK ||
      simba_config_set_logger(cfg, on_log, NULL, SIMBA_LOG_INFO) != SIMBA_OK)
    return load_error(ctx, cfg, "cannot configure the client: %s", simba_last_error());
  if (simba_config_validate(cfg) != SIMBA_OK)
    return load_error(ctx, cfg, "bad configuration: %s", simba_last_error());
  return RM_OK;
}

/* The SIMBA.* commands; on RM_ERR cfg is freed (load_error). */
static int register_commands(RedisModuleCtx *ctx, simba_config_t *cfg) {
  static const struct {
    const char *name;
    RedisModuleCmdFunc fn;
    const char *flags;
  } commands[] = {
      /* None touches the keyspace: not "write", so that replicas may contend too. */
      {"simba.contend", cmd_contend, "deny-script allow-stale"},
      {"simba.resign", cmd_resign, "deny-script allow-stale"},
      {"simba.token", cmd_token, "readonly fast allow-stale"},
      {"simba.status", cmd_status, "readonly allow-stale"},
      {"simba.snapshot", cmd_snapshot, "readonly allow-stale"},
      {"simba.close", cmd_close, "deny-script allow-stale"},
  };
  int i;
  for (i = 0; i < (int)(sizeof commands / sizeof commands[0]); i++) {
    if (RedisModule_CreateCommand(ctx, commands[i].name, commands[i].fn, commands[i].flags, 0, 0,
                                  0) != RM_OK)
      return load_error(ctx, cfg, "cannot register command %s", commands[i].name);
  }
  return RM_OK;
}

/* Opens the client (cfg is freed in every case) and hooks it to the server's loop
   and shutdown; RM_ERR (logged, client closed) on failure. */
static int open_client(RedisModuleCtx *ctx, const char *backend, simba_config_t *cfg) {
  RedisModuleEvent shutdown_event = {RM_EVENT_SHUTDOWN, 1};
  int rc = simba_client_open(&g.client, backend, cfg);
  simba_config_free(cfg);
  if (rc != SIMBA_OK) {
    g.client = NULL;
    return load_error(ctx, NULL, "cannot open a client on the backend: %s (%s)", simba_strerror(rc),
                      simba_last_error());
  }
  simba_client_on_event(g.client, on_event, NULL);
  g.fd = simba_client_fd(g.client);
  if (g.fd < 0 || RedisModule_EventLoopAdd(g.fd, RM_EVENTLOOP_READABLE, on_fd, NULL) != RM_OK) {
    int e = errno;
    close_client();
    return load_error(ctx, NULL, "cannot watch the client's fd on the event loop: %s", strerror(e));
  }
  if (RedisModule_SubscribeToServerEvent(ctx, shutdown_event, on_shutdown) != RM_OK) {
    close_client();
    return load_error(ctx, NULL, "cannot subscribe to the shutdown event");
  }
  return RM_OK;
}

/* Starts contending for each 'contend' argument; RM_ERR (logged, client closed). */
static int contend_all(RedisModuleCtx *ctx, const load_args_t *a) {
  int i;
  for (i = 0; i < a->n_names; i++) {
    char err[512];
    if (contend(a->names[i], a->name_lens[i], err, sizeof err) == NULL) {
      close_client();
      return load_error(ctx, NULL, "%s", err + 4); /* without "ERR " */
    }
  }
  return RM_OK;
}

/* Module arguments, as pairs: backend URL (required), channel NAME ("" for none),
   contend NAME (repeatable), and any library key ("session.lease-duration 6s",
   "client.name cache-1", ...; loop.mode and callback.* are the module's). */
int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  simba_config_t *cfg = NULL;
  load_args_t a;

  if (check_host(ctx) != RM_OK) return RM_ERR;
  if (simba_config_new(&cfg) != SIMBA_OK) return load_error(ctx, NULL, "out of memory");
  memset(&a, 0, sizeof a);
  if (parse_args(ctx, cfg, argv, argc, &a) != RM_OK) return RM_ERR;

  g.ctx = RedisModule_GetDetachedThreadSafeContext(ctx);
  if (g.ctx == NULL) return load_error(ctx, cfg, "no detached context");

  if (register_commands(ctx, cfg) != RM_OK) return RM_ERR;
  if (open_client(ctx, a.backend, cfg) != RM_OK) return RM_ERR;
  if (contend_all(ctx, &a) != RM_OK) return RM_ERR;
  arm();
  RedisModule_Log(ctx, "notice",
                  "simba: libsimba %s, EXTERNAL mode on the server's loop, %d name(s)",
                  simba_version_string(), a.n_names);
  return RM_OK;
}

/*
 * simba: the Lua 5.4 binding of libsimba (include/simba.h), a C module; this
 * private header is shared by its source files (lua_*.c, simba_lua.c).
 *
 * Threading. The Lua C API is not thread-safe, so every client is opened in
 * EXTERNAL loop mode ("loop.mode" = "external"): the client has no thread of
 * its own, the Lua thread that opened it drives it (client:process(),
 * client:run(ms), or simba.luv), and every callback runs on the Lua thread,
 * inside a call the Lua code made into this module.
 *
 * Lua errors in callbacks. A callback runs inside libsimba's C++ frames, so a
 * Lua error must never longjmp out of it: every trampoline calls the Lua
 * function with lua_pcall, stores the first error in the client, and the
 * binding function that called into libsimba re-raises it with lua_error()
 * once libsimba has returned.
 *
 * Lifetime. The C structs given to libsimba as user data (lclient, lhandle,
 * small per-callback records) are malloc'ed, never Lua memory, so that a
 * callback can never reach memory the collector freed. Lua values a callback
 * needs (functions, the election's userdata) are anchored in the client's
 * "anchors" table (the client userdata's user value), keyed by a light
 * userdata; the client userdata is found from C through a weak registry table
 * (so an unreferenced client can still be collected), or through a strong
 * reference while the client closes.
 */
#ifndef SIMBA_LUA_H
#define SIMBA_LUA_H

#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "lauxlib.h"
#include "lua.h"
#include "simba.h"

#define CLIENT_MT "simba.client"
#define ELECTION_MT "simba.election"
#define TERM_MT "simba.term"
#define TASK_MT "simba.task"
#define OBSERVER_MT "simba.observer"
#define CONFIG_BOX_MT "simba.config_box"
#define WEAK_KEY "simba.clients"

/* The result of one call into libsimba: its code and, on failure, the detail
 * read right after it (simba_last_error() is only valid until the next call). */
typedef struct {
  int rc;
  char msg[512];
} result_t;

/* Client state */

typedef struct lclient {
  simba_client_t *c; /* NULL once closed */
  lua_State *L;      /* the state of the call into libsimba now running, or NULL */
  int pending;       /* registry ref of the first error raised by a callback */
  int self_ref;      /* strong ref of the userdata while closing from __gc */
  int depth;         /* callbacks running now (nesting) */
  int closing;       /* close started from a callback, to be finished */
  int64_t lease_ms;  /* the session lease, for run() defaults */
  /* Leader work: the library runs it on threads of its own; each run is
   * queued here (mutex + eventfd) and run on the Lua thread as a coroutine. */
  int epfd; /* epoll over the library's fd and evfd: client:fd() */
  int evfd; /* written when a run is queued */
  pthread_mutex_t mu;
  struct work_req *queued; /* runs not yet picked up by the Lua thread (under mu) */
  struct work_req *active; /* runs whose coroutine exists (Lua thread only) */
  int pumping;             /* lua_loop.c resumes leader work now */
  int shutting;            /* closing: new runs are skipped (under mu) */
  int deferred_close;      /* close() was called from leader work */
  pthread_t host;          /* the Lua thread that opened the client */
  unsigned long foreign;   /* callbacks that arrived on another thread (dropped) */
} lclient;

/* One run of leader work: shared by the library's work thread and the Lua
 * thread; freed by the last of them (refs under cl->mu). */
typedef struct work_req {
  struct work_req *next;
  struct lhandle *task;
  simba_term_t *term; /* retained by the work thread for the run */
  pthread_cond_t cv;
  int finished;    /* the coroutine ended (under mu) */
  int refs;        /* 2: work thread and Lua side */
  int64_t wake_at; /* Lua thread: when to resume next */
  int started;
} work_req;

typedef struct {
  lclient *cl;
} client_ud;

/* A call into libsimba that may run callbacks (slua_enter, slua_leave). */
typedef struct {
  lclient *cl;
  lua_State *prev;
} call_t;

/* A lock's, an election's or a task run's term. The reference is kept until
 * the userdata is collected, so that an ended term stays readable (name,
 * token, reason; valid false, remaining 0). */
typedef struct {
  simba_term_t *t; /* our reference, never NULL */
  lclient *cl;
  int is_lock;
  int released; /* release() was called (a lock: the lease was released) */
} term_ud;

/* Elections, tasks and observers: one handle type and one stop / step-down /
 * close path (lua_handle.c); a kind says which library functions it calls. */
typedef struct slua_kind {
  const char *mt;                                     /* metatable name */
  const char *what;                                   /* "election", "task", "observer" */
  int (*stop)(void *h, simba_done_fn done, void *ud); /* NULL: nothing to stop (observer) */
  int (*step_down)(void *h, int64_t cooldown, simba_done_fn done, void *ud);
  void (*free)(void *h); /* simba_election_free, simba_task_close, simba_observer_free */
  int (*close_async)(void *h, simba_done_fn done, void *ud); /* the SIMBA_1.4 close */
} slua_kind;

typedef struct lhandle {
  const slua_kind *kind;
  void *h; /* simba_election_t *, simba_task_t * or simba_observer_t *; NULL once freed */
  lclient *cl;
  simba_term_t *term;   /* elections: the current term (retained), or NULL */
  int stopping;         /* a stop was started */
  int stop_done;        /* that stop completed (its done ran) */
  int closing;          /* close_async was called: h is the library's now */
  int close_done;       /* that close's done ran (the handle's last callback) */
  int close_after_stop; /* close() waits for the stop: its done starts the close */
} lhandle;

typedef struct {
  lhandle *hd;
} handle_ud;

/* Completion of stop / step_down: rec anchored to a function (or false). */
typedef struct {
  lclient *cl;
  lhandle *stop_of; /* for a stop: the handle it stops (its anchor is dropped) */
} done_rec;

/* Every function below is private to the module: only luaopen_simba is
 * exported (also when built without -fvisibility=hidden, e.g. by LuaRocks). */
#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* lua_common.c: names, checked strings, results, anchors, calls into
 * libsimba, callbacks */
int64_t slua_now_ms(void);
const char *slua_name(char *buf, size_t n, const char *lib, int v);
void slua_push_name(lua_State *L, const char *lib, int v);
void slua_push_code(lua_State *L, int rc);
void slua_check_nul(lua_State *L, const char *s, size_t len, const char *fn, const char *what);
const char *slua_check_text(lua_State *L, int i, const char *fn, const char *what);
const char *slua_check_name(lua_State *L, int i, const char *fn);
void slua_capture(result_t *r, int rc);
int slua_push_fail(lua_State *L, const result_t *r);
int slua_raise_misuse(lua_State *L, const char *what, const result_t *r);
int slua_fail(lua_State *L, const char *what, const result_t *r);
int slua_push_client(lua_State *L, lclient *cl);
void slua_anchor_set(lua_State *L, int cidx, const void *key);
void slua_anchor_clear(lua_State *L, lclient *cl, const void *key);
void slua_anchor_get(lua_State *L, lclient *cl, const void *key);
int slua_anchor_fn(lua_State *L, lclient *cl, const void *key);
call_t slua_enter(lclient *cl, lua_State *L);
void slua_leave_noraise(call_t k);
void slua_leave(lua_State *L, call_t k);
int slua_leave_result(lua_State *L, call_t k, const char *what, const result_t *r);
int slua_leave_rec_result(lua_State *L, call_t k, void *rec, const char *what, const result_t *r);
int slua_leave_started(lua_State *L, call_t k, const void *obj, const char *what, const result_t *r,
                       int top);
void slua_drop_pending(lua_State *L, lclient *cl);
void slua_keep_error(lua_State *L, lclient *cl);
lua_State *slua_cb_state(lclient *cl);
void slua_cb_invoke(lclient *cl, lua_State *L, int nargs);
void slua_cb_invoke_done(lclient *cl, lua_State *L, int err);
void slua_invoke_hook(lclient *cl, const void *key, const char *a, const char *b);
void slua_push_owner_table(lua_State *L);
void slua_push_owner_name(lua_State *L);

/* lua_term.c */
void slua_push_term(lua_State *L, lclient *cl, simba_term_t *t, int owned, int is_lock);
term_ud *slua_check_term(lua_State *L, int i);
int slua_term_name(lua_State *L);
int slua_term_token(lua_State *L);
int slua_term_valid(lua_State *L);
int slua_term_remaining(lua_State *L);
int slua_term_ensure_valid(lua_State *L);
int slua_term_reason(lua_State *L);
int slua_term_is_lock(lua_State *L);
int slua_term_on_revoked(lua_State *L);
int slua_term_revoke_fd(lua_State *L);
int slua_term_wait_revoked(lua_State *L);
int slua_term_release(lua_State *L);
int slua_term_close_async(lua_State *L);
int slua_term_gc(lua_State *L);
int slua_term_tostring(lua_State *L);
int slua_term_eq(lua_State *L);

/* lua_loop.c: the host loop's turn (libsimba's ready work, then the leader
 * work runs as coroutines), waiting on client:fd(), driving until a flag */
void slua_tr_work(void *ud, simba_term_t *term);
int64_t slua_next_timeout(lclient *cl);
int slua_poll_client(lclient *cl, int64_t wait_ms);
void slua_process_ready(lua_State *L, lclient *cl, result_t *r);
void slua_turn(lua_State *L, lclient *cl, result_t *r);
int slua_inside(const lclient *cl);
void slua_check_may_wait(lua_State *L, lclient *cl, const char *what);
typedef int (*slua_until_fn)(const void *arg);
int slua_drive_until(lua_State *L, lclient *cl, slua_until_fn until, const void *arg,
                     int64_t deadline);
void slua_end_all_runs(lua_State *L, lclient *cl);
int slua_sleep(lua_State *L);

/* lua_options.c: the options of simba.open() and the client's hooks */
int slua_apply_options(lua_State *L, int oidx, simba_config_t *cfg, lclient *cl, result_t *r);
void slua_anchor_hooks(lua_State *L, int oidx, int cidx);
int slua_set_on_event(lua_State *L, lclient *cl, int fidx, result_t *r);
int slua_check_config(lua_State *L);
int slua_config_box_gc(lua_State *L);

/* lua_client.c: open, the loop driven by the Lua thread, close, orphans */
client_ud *slua_check_client_ud(lua_State *L, int i);
lclient *slua_live_client(lua_State *L, int i);
int slua_open(lua_State *L);
int slua_client_fd(lua_State *L);
int slua_client_timeout(lua_State *L);
int slua_client_process(lua_State *L);
int slua_client_run(lua_State *L);
int slua_client_wait_live(lua_State *L);
int slua_client_status(lua_State *L);
int slua_client_is_closed(lua_State *L);
int slua_client_is_closing(lua_State *L);
int slua_client_foreign(lua_State *L);
int slua_client_snapshot(lua_State *L);
int slua_client_metrics(lua_State *L);
int slua_client_inspect(lua_State *L);
int slua_client_on_event(lua_State *L);
int slua_client_close(lua_State *L);
int slua_client_gc(lua_State *L);
int slua_client_tostring(lua_State *L);
void slua_finish_orphans(lua_State *L);
int slua_orphans(lua_State *L);
int slua_sentinel_gc(lua_State *L);

/* lua_handle.c: elections, tasks and observers alike (stop, step_down,
 * stop_wait, close, name) */
lhandle *slua_new_handle(lua_State *L, lclient *cl, const slua_kind *kind);
int slua_start_handle(lua_State *L, lhandle *hd, int top, const char *what,
                      int (*call)(lua_State *L, lhandle *hd));
lhandle *slua_check_handle(lua_State *L, int i);
int slua_handle_stop(lua_State *L);
int slua_handle_step_down(lua_State *L);
int slua_handle_stop_wait(lua_State *L);
int slua_handle_close(lua_State *L);
int slua_handle_close_async(lua_State *L);
int slua_handle_is_closed(lua_State *L);
int slua_handle_name(lua_State *L);
int slua_handle_gc(lua_State *L);
int slua_handle_tostring(lua_State *L);

/* lua_election.c */
int slua_client_election(lua_State *L);
int slua_election_term(lua_State *L);
int slua_election_is_leader(lua_State *L);

/* lua_task.c: leader work (run_while_leader, schedule, join_group) */
int slua_client_run_while_leader(lua_State *L);
int slua_client_schedule(lua_State *L);
int slua_client_join_group(lua_State *L);

/* lua_lock.c */
int slua_client_lock(lua_State *L);
int slua_client_try_lock(lua_State *L);
int slua_client_unlock(lua_State *L);
int slua_client_lock_async(lua_State *L);
int slua_client_semaphore(lua_State *L);
int slua_client_try_semaphore(lua_State *L);
int slua_client_semaphore_async(lua_State *L);
int slua_client_read_lock(lua_State *L);
int slua_client_try_read_lock(lua_State *L);
int slua_client_read_lock_async(lua_State *L);
int slua_client_write_lock(lua_State *L);
int slua_client_try_write_lock(lua_State *L);
int slua_client_write_lock_async(lua_State *L);
int slua_term_kind(lua_State *L);
int slua_kind_name(lua_State *L);
void slua_resolve_1_5(void);
int slua_client_bench_c_cycle(lua_State *L);

/* lua_observe.c: following a name's holder */
int slua_client_observe(lua_State *L);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif /* SIMBA_LUA_H */

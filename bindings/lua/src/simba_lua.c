/*
 * simba: the Lua 5.4 binding of libsimba (include/simba.h), a C module.
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
 * Lifetime. The C structs given to libsimba as user data (lclient, lelection,
 * small per-callback records) are malloc'ed, never Lua memory, so that a
 * callback can never reach memory the collector freed. Lua values a callback
 * needs (functions, the election's userdata) are anchored in the client's
 * "anchors" table (the client userdata's user value), keyed by a light
 * userdata; the client userdata is found from C through a weak registry table
 * (so an unreferenced client can still be collected), or through a strong
 * reference while the client closes.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lauxlib.h"
#include "lua.h"
#include "simba.h"

#define CLIENT_MT "simba.client"
#define ELECTION_MT "simba.election"
#define TERM_MT "simba.term"
#define TASK_MT "simba.task"
#define CONFIG_BOX_MT "simba.config_box"
#define WEAK_KEY "simba.clients"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------- */
/* Codes */

static const char *code_name(int rc) {
  switch (rc) {
    case SIMBA_OK: return "OK";
    case SIMBA_EINVAL: return "EINVAL";
    case SIMBA_ESTATE: return "ESTATE";
    case SIMBA_EEXPIRED: return "EEXPIRED";
    case SIMBA_ETIMEDOUT: return "ETIMEDOUT";
    case SIMBA_EBACKEND: return "EBACKEND";
    case SIMBA_ECLOSED: return "ECLOSED";
    case SIMBA_ENOMEM: return "ENOMEM";
    case SIMBA_EWOULDBLOCK: return "EWOULDBLOCK";
    case SIMBA_EBUSY: return "EBUSY";
    case SIMBA_EUNSUPPORTED: return "EUNSUPPORTED";
    case SIMBA_ECANCELED: return "ECANCELED";
    default: return "EUNKNOWN";
  }
}

static const char *reason_name(simba_revoke_reason_t r) {
  switch (r) {
    case SIMBA_REVOKE_STOPPED: return "STOPPED";
    case SIMBA_REVOKE_STEPPED_DOWN: return "STEPPED_DOWN";
    case SIMBA_REVOKE_DEADLINE_PASSED: return "DEADLINE_PASSED";
    case SIMBA_REVOKE_SESSION_EXPIRED: return "SESSION_EXPIRED";
    case SIMBA_REVOKE_TAKEN_OVER: return "TAKEN_OVER";
    default: return NULL;
  }
}

static const char *event_name(simba_event_type_t t) {
  switch (t) {
    case SIMBA_EVENT_SESSION_OPENED: return "SESSION_OPENED";
    case SIMBA_EVENT_SESSION_LIVE: return "SESSION_LIVE";
    case SIMBA_EVENT_SESSION_SUSPENDED: return "SESSION_SUSPENDED";
    case SIMBA_EVENT_SESSION_EXPIRED: return "SESSION_EXPIRED";
    case SIMBA_EVENT_SESSION_CLOSED: return "SESSION_CLOSED";
    case SIMBA_EVENT_SESSION_LEASE_SHORTENED: return "SESSION_LEASE_SHORTENED";
    default: return "UNKNOWN";
  }
}

static const char *status_name(simba_session_status_t s) {
  switch (s) {
    case SIMBA_SESSION_OPENING: return "OPENING";
    case SIMBA_SESSION_LIVE: return "LIVE";
    case SIMBA_SESSION_SUSPENDED: return "SUSPENDED";
    default: return "CLOSED";
  }
}

/* The result of one call into libsimba: its code and, on failure, the detail
 * read right after it (simba_last_error() is only valid until the next call). */
typedef struct {
  int rc;
  char msg[512];
} result_t;

static void capture(result_t *r, int rc) {
  r->rc = rc;
  r->msg[0] = '\0';
  if (rc < 0) {
    const char *d = simba_last_error();
    snprintf(r->msg, sizeof r->msg, "%s%s%s", simba_strerror(rc), (d && *d) ? ": " : "",
             d ? d : "");
  }
}

/* nil, message, code: an operational failure. */
static int push_fail(lua_State *L, const result_t *r) {
  lua_pushnil(L);
  lua_pushstring(L, r->msg);
  lua_pushstring(L, code_name(r->rc));
  return 3;
}

/* error(): misuse (bad argument, wrong state, a blocking call from a callback). */
static int raise_misuse(lua_State *L, const char *what, const result_t *r) {
  return luaL_error(L, "simba: %s: %s (%s)", what, r->msg, code_name(r->rc));
}

static int is_misuse(int rc) {
  return rc == SIMBA_EINVAL || rc == SIMBA_ESTATE || rc == SIMBA_EWOULDBLOCK;
}

/* Either misuse (raises) or nil, msg, code. */
static int fail(lua_State *L, const char *what, const result_t *r) {
  if (is_misuse(r->rc)) return raise_misuse(L, what, r);
  return push_fail(L, r);
}

/* ------------------------------------------------------------------------- */
/* Client state */

typedef struct lclient {
  simba_client_t *c;   /* NULL once closed */
  lua_State *L;        /* the state of the call into libsimba now running, or NULL */
  int pending;         /* registry ref of the first error raised by a callback */
  int self_ref;        /* strong ref of the userdata while closing from __gc */
  int depth;           /* callbacks running now (nesting) */
  int closing;         /* close started from a callback, to be finished */
  int64_t lease_ms;    /* the session lease, for run() defaults */
  /* Leader work: the library runs it on threads of its own; each run is
   * queued here (mutex + eventfd) and run on the Lua thread as a coroutine. */
  int epfd;            /* epoll over the library's fd and evfd: client:fd() */
  int evfd;            /* written when a run is queued */
  pthread_mutex_t mu;
  struct work_req *queued; /* runs not yet picked up by the Lua thread (under mu) */
  struct work_req *active; /* runs whose coroutine exists (Lua thread only) */
  int pumping;         /* pump() is running (a run is being resumed) */
  int shutting;        /* closing: new runs are skipped (under mu) */
  int deferred_close;  /* close() was called from leader work */
  pthread_t host;      /* the Lua thread that opened the client */
  unsigned long foreign; /* callbacks that arrived on another thread (dropped) */
} lclient;

/* One run of leader work: shared by the library's work thread and the Lua
 * thread; freed by the last of them (refs under cl->mu). */
typedef struct work_req {
  struct work_req *next;
  struct ltask *task;
  simba_term_t *term; /* retained by the work thread for the run */
  pthread_cond_t cv;
  int finished;       /* the coroutine ended (under mu) */
  int refs;           /* 2: work thread and Lua side */
  int64_t wake_at;    /* Lua thread: when to resume next */
  int started;
} work_req;

static int64_t pump(lua_State *L, lclient *cl);
static int do_close(lua_State *L, lclient *cl, int raise);
static void end_all_runs(lua_State *L, lclient *cl);
static void finish_orphans(lua_State *L);

/* coroutine.close() from C (5.4.6 renamed lua_resetthread). */
static int co_close(lua_State *co, lua_State *from) {
#if LUA_VERSION_RELEASE_NUM >= 50406
  return lua_closethread(co, from);
#else
  (void)from;
  return lua_resetthread(co);
#endif
}

static void work_unref(lclient *cl, work_req *q) {
  int last;
  pthread_mutex_lock(&cl->mu);
  last = --q->refs == 0;
  pthread_mutex_unlock(&cl->mu);
  if (last) {
    pthread_cond_destroy(&q->cv);
    free(q);
  }
}

typedef struct {
  lclient *cl;
} client_ud;

/* Push the client userdata of @p cl, or nothing and return 0. */
static int push_client(lua_State *L, lclient *cl) {
  if (cl->self_ref != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, cl->self_ref);
    return 1;
  }
  lua_getfield(L, LUA_REGISTRYINDEX, WEAK_KEY);
  lua_rawgetp(L, -1, cl);
  lua_remove(L, -2);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

/* anchors[key] = value at top (popped). Client userdata at @p cidx. */
static void anchor_set(lua_State *L, int cidx, const void *key) {
  cidx = lua_absindex(L, cidx);
  lua_getiuservalue(L, cidx, 1);
  lua_insert(L, -2);
  lua_rawsetp(L, -2, key);
  lua_pop(L, 1);
}

static void anchor_clear(lua_State *L, lclient *cl, const void *key) {
  if (!push_client(L, cl)) return;
  lua_getiuservalue(L, -1, 1);
  lua_pushnil(L);
  lua_rawsetp(L, -2, key);
  lua_pop(L, 2);
}

/* Push anchors[key] (nil if none or the client is unreachable). */
static void anchor_get(lua_State *L, lclient *cl, const void *key) {
  if (!push_client(L, cl)) {
    lua_pushnil(L);
    return;
  }
  lua_getiuservalue(L, -1, 1);
  lua_rawgetp(L, -1, key);
  lua_replace(L, -3);
  lua_pop(L, 1);
}

/* Calls into libsimba that may run callbacks: enter() records the Lua state
 * they run on; leave() restores it and re-raises a callback's error. */
typedef struct {
  lclient *cl;
  lua_State *prev;
} call_t;

static call_t enter(lclient *cl, lua_State *L) {
  call_t k;
  k.cl = cl;
  k.prev = cl->L;
  cl->L = L;
  return k;
}

static void leave_noraise(call_t k) { k.cl->L = k.prev; }

static void leave(lua_State *L, call_t k) {
  lclient *cl = k.cl;
  cl->L = k.prev;
  if (cl->pending != LUA_NOREF && cl->depth == 0) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, cl->pending);
    luaL_unref(L, LUA_REGISTRYINDEX, cl->pending);
    cl->pending = LUA_NOREF;
    lua_error(L);
  }
}

/* Drop a stored callback error (finalizers cannot raise). */
static void drop_pending(lua_State *L, lclient *cl) {
  if (cl->pending != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, cl->pending);
    lua_warning(L, "simba: error in a callback during collection: ", 1);
    lua_warning(L, lua_isstring(L, -1) ? lua_tostring(L, -1) : "(not a string)", 0);
    lua_pop(L, 1);
    luaL_unref(L, LUA_REGISTRYINDEX, cl->pending);
    cl->pending = LUA_NOREF;
  }
}

/* The Lua state a callback may use: the current call's, and only on the host
 * thread (EXTERNAL mode runs every callback there; anything else is counted
 * and dropped rather than touching Lua from a second thread). */
static lua_State *cb_state(lclient *cl) {
  if (!pthread_equal(pthread_self(), cl->host)) {
    __atomic_add_fetch(&cl->foreign, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  return cl->L;
}

/* Trampoline core: function and @p nargs arguments are on cl->L; call them
 * protected; keep the first error. Never raises. */
static void cb_invoke(lclient *cl, lua_State *L, int nargs) {
  int rc;
  cl->depth++;
  rc = lua_pcall(L, nargs, 0, 0);
  cl->depth--;
  if (rc != LUA_OK) {
    if (cl->pending == LUA_NOREF) {
      cl->pending = luaL_ref(L, LUA_REGISTRYINDEX);
    } else {
      lua_pop(L, 1);
    }
  }
}

/* ------------------------------------------------------------------------- */
/* Terms */

typedef struct {
  simba_term_t *t; /* our reference; NULL once dropped */
  lclient *cl;
  int is_lock;
} term_ud;

/* Push a term userdata holding a reference to @p t (retained unless @p owned);
 * its user value is the client userdata (pushed by the caller at @p cidx, or
 * looked up). */
static void push_term(lua_State *L, lclient *cl, simba_term_t *t, int owned, int is_lock) {
  term_ud *u = (term_ud *)lua_newuserdatauv(L, sizeof *u, 1);
  u->t = t;
  u->cl = cl;
  u->is_lock = is_lock;
  if (!owned) simba_term_retain(t);
  luaL_setmetatable(L, TERM_MT);
  if (push_client(L, cl)) lua_setiuservalue(L, -2, 1);
}

static term_ud *check_term(lua_State *L, int i) {
  return (term_ud *)luaL_checkudata(L, i, TERM_MT);
}

static term_ud *live_term(lua_State *L, int i) {
  term_ud *u = check_term(L, i);
  if (!u->t) luaL_error(L, "simba: term already released");
  return u;
}

static int term_name(lua_State *L) {
  lua_pushstring(L, simba_term_name(live_term(L, 1)->t));
  return 1;
}

static int term_token(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)simba_term_token(live_term(L, 1)->t));
  return 1;
}

static int term_valid(lua_State *L) {
  lua_pushboolean(L, simba_term_is_valid(live_term(L, 1)->t));
  return 1;
}

static int term_remaining(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)simba_term_remaining_ms(live_term(L, 1)->t));
  return 1;
}

static int term_ensure_valid(lua_State *L) {
  term_ud *u = live_term(L, 1);
  lua_Integer min = luaL_optinteger(L, 2, 0);
  result_t r;
  if (min < 0) luaL_argerror(L, 2, "negative minimum");
  capture(&r, simba_term_ensure_valid(u->t, (int64_t)min));
  if (r.rc != SIMBA_OK) return fail(L, "ensure_valid", &r);
  lua_pushvalue(L, 1);
  return 1;
}

static int term_reason(lua_State *L) {
  const char *n = reason_name(simba_term_revoke_reason(live_term(L, 1)->t));
  if (n) {
    lua_pushstring(L, n);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

static int term_is_lock(lua_State *L) {
  lua_pushboolean(L, check_term(L, 1)->is_lock);
  return 1;
}

static int term_revoke_fd(lua_State *L) {
  term_ud *u = live_term(L, 1);
  int fd = simba_term_revoke_fd(u->t);
  result_t r;
  if (fd < 0) {
    capture(&r, SIMBA_ENOMEM);
    return push_fail(L, &r);
  }
  lua_pushinteger(L, fd);
  return 1;
}

/* term:on_revoked(fn): fn(term, reason) runs exactly once. */
typedef struct {
  lclient *cl;
} revoked_rec;

static void tr_term_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t reason) {
  revoked_rec *rec = (revoked_rec *)ud;
  lclient *cl = rec->cl;
  lua_State *L = cb_state(cl);
  if (L && lua_checkstack(L, 6)) {
    anchor_get(L, cl, rec);
    if (lua_isfunction(L, -1)) {
      anchor_clear(L, cl, rec);
      push_term(L, cl, t, 0, 0);
      lua_pushstring(L, reason_name(reason) ? reason_name(reason) : "NONE");
      cb_invoke(cl, L, 2);
    } else {
      lua_pop(L, 1);
      anchor_clear(L, cl, rec);
    }
  }
  free(rec);
}

static int term_on_revoked(lua_State *L) {
  term_ud *u = live_term(L, 1);
  revoked_rec *rec;
  result_t r;
  call_t k;
  luaL_checktype(L, 2, LUA_TFUNCTION);
  if (!push_client(L, u->cl)) return luaL_error(L, "simba: the term's client is gone");
  rec = (revoked_rec *)malloc(sizeof *rec);
  if (!rec) return luaL_error(L, "simba: out of memory");
  rec->cl = u->cl;
  lua_pushvalue(L, 2);
  anchor_set(L, -2, rec);
  k = enter(u->cl, L);
  capture(&r, simba_term_on_revoked(u->t, tr_term_revoked, rec));
  if (r.rc != SIMBA_OK) {
    anchor_clear(L, u->cl, rec);
    free(rec);
  }
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "on_revoked", &r);
  lua_pushboolean(L, 1);
  return 1;
}

/* Release: a lock term's release (waits for the backend); any other term
 * only drops our reference. */
static int term_release(lua_State *L) {
  term_ud *u = check_term(L, 1);
  simba_term_t *t = u->t;
  result_t r;
  call_t k;
  if (!t) {
    lua_pushboolean(L, 1);
    return 1;
  }
  u->t = NULL;
  if (!u->is_lock) {
    simba_term_release(t);
    lua_pushboolean(L, 1);
    return 1;
  }
  k = enter(u->cl, L);
  capture(&r, simba_lock_release(t));
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "release", &r);
  lua_pushboolean(L, 1);
  return 1;
}

static int term_gc(lua_State *L) {
  term_ud *u = check_term(L, 1);
  if (u->t) {
    call_t k = enter(u->cl, L);
    /* The last reference of a held lock term releases it (asynchronously). */
    simba_term_release(u->t);
    u->t = NULL;
    leave_noraise(k);
  }
  return 0;
}

static int term_tostring(lua_State *L) {
  term_ud *u = check_term(L, 1);
  if (!u->t) {
    lua_pushstring(L, "simba.term(released)");
  } else {
    const char *rn = reason_name(simba_term_revoke_reason(u->t));
    lua_pushfstring(L, "simba.term(%s, token %I, %s)", simba_term_name(u->t),
                    (lua_Integer)simba_term_token(u->t),
                    simba_term_is_valid(u->t) ? "valid" : (rn ? rn : "invalid"));
  }
  return 1;
}

static int term_eq(lua_State *L) {
  term_ud *a = (term_ud *)luaL_testudata(L, 1, TERM_MT);
  term_ud *b = (term_ud *)luaL_testudata(L, 2, TERM_MT);
  lua_pushboolean(L, a && b && a->t && a->t == b->t);
  return 1;
}

/* ------------------------------------------------------------------------- */
/* Elections */

typedef struct lelection {
  simba_election_t *e; /* NULL once freed */
  lclient *cl;
  simba_term_t *term;  /* the current term (retained), or NULL */
  int stopped;         /* a stop was requested or the client closed */
} lelection;

typedef struct {
  lelection *el;
} election_ud;

/* User value 1 of the election userdata: {client = ud, on_elected = f, on_revoked = f}. */
static void push_election_field(lua_State *L, lelection *el, const char *field) {
  anchor_get(L, el->cl, el);
  if (lua_isnil(L, -1)) return;
  lua_getiuservalue(L, -1, 1);
  lua_getfield(L, -1, field);
  lua_replace(L, -3);
  lua_pop(L, 1);
}

static void tr_elected(void *ud, simba_term_t *t) {
  lelection *el = (lelection *)ud;
  lclient *cl = el->cl;
  lua_State *L = cb_state(cl);
  if (el->term) simba_term_release(el->term);
  simba_term_retain(t);
  el->term = t;
  if (!L || !lua_checkstack(L, 8)) return;
  push_election_field(L, el, "on_elected");
  if (lua_isfunction(L, -1)) {
    push_term(L, cl, t, 0, 0);
    cb_invoke(cl, L, 1);
  } else {
    lua_pop(L, 1);
  }
}

static void tr_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t reason) {
  lelection *el = (lelection *)ud;
  lclient *cl = el->cl;
  lua_State *L = cb_state(cl);
  if (el->term == t) {
    el->term = NULL;
    simba_term_release(t);
  }
  if (!L || !lua_checkstack(L, 8)) return;
  push_election_field(L, el, "on_revoked");
  if (lua_isfunction(L, -1)) {
    push_term(L, cl, t, 0, 0);
    lua_pushstring(L, reason_name(reason) ? reason_name(reason) : "NONE");
    cb_invoke(cl, L, 2);
  } else {
    lua_pop(L, 1);
  }
}

/* Completion of stop / step_down: rec anchored to a function (or false). */
typedef struct {
  lclient *cl;
  const void *drop; /* for stop: the anchor to drop (its last callback) */
} done_rec;

static void tr_done(void *ud, int err) {
  done_rec *rec = (done_rec *)ud;
  lclient *cl = rec->cl;
  lua_State *L = cb_state(cl);
  if (L && lua_checkstack(L, 6)) {
    anchor_get(L, cl, rec);
    anchor_clear(L, cl, rec);
    if (rec->drop) anchor_clear(L, cl, rec->drop); /* stop done: nothing more comes */
    if (lua_isfunction(L, -1)) {
      if (err == SIMBA_OK) {
        lua_pushboolean(L, 1);
        lua_pushnil(L);
      } else {
        lua_pushnil(L);
        lua_pushstring(L, code_name(err));
      }
      cb_invoke(cl, L, 2);
    } else {
      lua_pop(L, 1);
    }
  }
  free(rec);
}

/* A done record for the function at fidx (or none), anchored. */
static done_rec *new_done_for(lua_State *L, lclient *cl, int fidx, const void *drop) {
  done_rec *rec;
  if (!lua_isnoneornil(L, fidx)) luaL_checktype(L, fidx, LUA_TFUNCTION);
  if (!push_client(L, cl)) luaL_error(L, "simba: the client is gone");
  rec = (done_rec *)malloc(sizeof *rec);
  if (!rec) luaL_error(L, "simba: out of memory");
  rec->cl = cl;
  rec->drop = drop;
  if (!lua_isnoneornil(L, fidx)) {
    lua_pushvalue(L, fidx);
  } else {
    lua_pushboolean(L, 0);
  }
  anchor_set(L, -2, rec);
  lua_pop(L, 1);
  return rec;
}

static election_ud *check_election(lua_State *L, int i) {
  return (election_ud *)luaL_checkudata(L, i, ELECTION_MT);
}

static lelection *live_election(lua_State *L, int i) {
  election_ud *u = check_election(L, i);
  if (!u->el || !u->el->e) luaL_error(L, "simba: election closed");
  return u->el;
}

static done_rec *new_done(lua_State *L, lelection *el, int fidx, int is_stop) {
  return new_done_for(L, el->cl, fidx, is_stop ? (const void *)el : NULL);
}

/* election:stop([done]) : starts the stop; done(ok, code) runs after the last on_revoked. */
static int election_stop(lua_State *L) {
  lelection *el;
  lua_settop(L, 2);
  el = live_election(L, 1);
  done_rec *rec = new_done(L, el, 2, 1);
  result_t r;
  call_t k = enter(el->cl, L);
  capture(&r, simba_election_stop(el->e, tr_done, rec));
  if (r.rc != SIMBA_OK) {
    anchor_clear(L, el->cl, rec);
    free(rec);
  } else {
    el->stopped = 1;
  }
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "stop", &r);
  lua_pushboolean(L, 1);
  return 1;
}

/* election:step_down(cooldown_ms[, done]) */
static int election_step_down(lua_State *L) {
  lelection *el;
  lua_Integer cooldown;
  lua_settop(L, 3);
  el = live_election(L, 1);
  cooldown = luaL_checkinteger(L, 2);
  done_rec *rec;
  result_t r;
  call_t k;
  if (cooldown < 0) luaL_argerror(L, 2, "negative cooldown");
  rec = new_done(L, el, 3, 0);
  k = enter(el->cl, L);
  capture(&r, simba_election_step_down(el->e, (int64_t)cooldown, tr_done, rec));
  if (r.rc != SIMBA_OK) {
    anchor_clear(L, el->cl, rec);
    free(rec);
  }
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "step_down", &r);
  lua_pushboolean(L, 1);
  return 1;
}

/* election:stop_wait([timeout_ms]) : blocking stop, drives the loop. */
static int election_stop_wait(lua_State *L) {
  lelection *el = live_election(L, 1);
  lua_Integer ms = luaL_optinteger(L, 2, -1);
  result_t r;
  call_t k = enter(el->cl, L);
  el->stopped = 1;
  capture(&r, simba_election_stop_wait(el->e, (int64_t)ms));
  if (r.rc == SIMBA_OK) anchor_clear(L, el->cl, el); /* stop completed: no callback comes */
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "stop_wait", &r);
  lua_pushboolean(L, 1);
  return 1;
}

static void election_free_now(lua_State *L, lelection *el, int raise) {
  call_t k;
  simba_election_t *e = el->e;
  if (!e) return;
  k = enter(el->cl, L);
  /* simba_election_free() detaches the listener before it stops the election,
   * so that the last term's on_revoked would not be delivered: outside
   * callbacks, stop and wait first (a no-op wait when already stopped), so
   * every on_elected keeps its on_revoked. */
  if (raise && el->cl->depth == 0 && el->cl->c) (void)simba_election_stop_wait(e, -1);
  simba_election_free(e); /* outside callbacks: waits for the stop and every callback */
  el->e = NULL;
  if (el->term) {
    simba_term_release(el->term);
    el->term = NULL;
  }
  anchor_clear(L, el->cl, el);
  if (raise) {
    leave(L, k);
  } else {
    leave_noraise(k);
  }
}

/* election:close() : stop (if needed), wait, free. Idempotent. */
static int election_close(lua_State *L) {
  election_ud *u = check_election(L, 1);
  if (u->el) election_free_now(L, u->el, 1);
  lua_pushboolean(L, 1);
  return 1;
}

static int election_gc(lua_State *L) {
  election_ud *u = check_election(L, 1);
  lelection *el = u->el;
  if (el) {
    election_free_now(L, el, 0);
    drop_pending(L, el->cl);
    /* Called from a callback, simba_election_free starts the stop and returns
     * with no further callback of the election starting: freeing is safe. */
    free(el);
    u->el = NULL;
  }
  return 0;
}

/* election:term() : the current term, or nil. */
static int election_term(lua_State *L) {
  lelection *el = check_election(L, 1)->el;
  if (!el || !el->term) {
    lua_pushnil(L);
    return 1;
  }
  push_term(L, el->cl, el->term, 0, 0);
  return 1;
}

static int election_is_leader(lua_State *L) {
  lelection *el = check_election(L, 1)->el;
  lua_pushboolean(L, el && el->term && simba_term_is_valid(el->term));
  return 1;
}

static int election_name(lua_State *L) {
  election_ud *u = check_election(L, 1);
  lua_getiuservalue(L, 1, 1);
  lua_getfield(L, -1, "name");
  (void)u;
  return 1;
}

static int election_tostring(lua_State *L) {
  election_ud *u = check_election(L, 1);
  lua_getiuservalue(L, 1, 1);
  lua_getfield(L, -1, "name");
  lua_pushfstring(L, "simba.election(%s%s)", lua_tostring(L, -1),
                  !u->el || !u->el->e ? ", closed" : (u->el->term ? ", leader" : ""));
  return 1;
}

/* ------------------------------------------------------------------------- */
/* Client */

static client_ud *check_client_ud(lua_State *L, int i) {
  return (client_ud *)luaL_checkudata(L, i, CLIENT_MT);
}

static lclient *live_client(lua_State *L, int i) {
  client_ud *u = check_client_ud(L, i);
  if (!u->cl || !u->cl->c) luaL_error(L, "simba: client closed");
  return u->cl;
}

/* Event sink and logger: anchored under these keys. */
static char EVENT_KEY, LOG_KEY;

static void tr_event(void *ud, simba_event_type_t type, const char *detail) {
  lclient *cl = (lclient *)ud;
  lua_State *L = cb_state(cl);
  if (!L || !lua_checkstack(L, 6)) return;
  anchor_get(L, cl, &EVENT_KEY);
  if (lua_isfunction(L, -1)) {
    lua_pushstring(L, event_name(type));
    lua_pushstring(L, detail ? detail : "{}");
    cb_invoke(cl, L, 2);
  } else {
    lua_pop(L, 1);
  }
}

static void tr_log(void *ud, int level, const char *msg) {
  lclient *cl = (lclient *)ud;
  lua_State *L = cb_state(cl);
  static const char *const names[] = {"debug", "info", "warn", "error"};
  if (!L || !lua_checkstack(L, 6)) return;
  anchor_get(L, cl, &LOG_KEY);
  if (lua_isfunction(L, -1)) {
    lua_pushstring(L, (level >= 0 && level <= 3) ? names[level] : "info");
    lua_pushstring(L, msg ? msg : "");
    cb_invoke(cl, L, 2);
  } else {
    lua_pop(L, 1);
  }
}

/* Options of simba.open(url, opts): Lua name -> config key. Numbers are
 * milliseconds for durations; strings are passed as text ("1.5s"). */
static const struct {
  const char *opt;
  const char *key;
  int duration;
} OPTIONS[] = {
    {"lease", "session.lease-duration", 1},
    {"renew", "session.renew-interval", 1},
    {"drift", "session.drift", 0},
    {"margin", "session.margin", 1},
    {"retry_jitter", "session.retry-jitter", 1},
    {"min_backoff", "session.min-backoff", 1},
    {"name", "client.name", 0},
    {NULL, NULL, 0},
};

static int apply_options(lua_State *L, int oidx, simba_config_t *cfg, lclient *cl, result_t *r,
                         int *log_level) {
  int i;
  capture(r, SIMBA_OK);
  if (lua_isnoneornil(L, oidx)) return SIMBA_OK;
  luaL_checktype(L, oidx, LUA_TTABLE);
  /* Unknown option names are misuse: catch typos. */
  lua_pushnil(L);
  while (lua_next(L, oidx)) {
    int known = 0;
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING) {
      const char *k = lua_tostring(L, -1);
      for (i = 0; OPTIONS[i].opt; ++i) known |= strcmp(k, OPTIONS[i].opt) == 0;
      known |= strcmp(k, "logger") == 0 || strcmp(k, "log_level") == 0 ||
               strcmp(k, "on_event") == 0 || strcmp(k, "config") == 0;
      if (!known) {
        lua_pop(L, 1);
        return luaL_error(L, "simba.open: unknown option '%s'", k);
      }
    }
  }
  for (i = 0; OPTIONS[i].opt; ++i) {
    int t = lua_getfield(L, oidx, OPTIONS[i].opt);
    int rc = SIMBA_OK;
    if (t == LUA_TNUMBER && OPTIONS[i].duration) {
      if (!lua_isinteger(L, -1)) {
        double d = lua_tonumber(L, -1);
        rc = simba_config_set_ms(cfg, OPTIONS[i].key, (int64_t)d);
      } else {
        rc = simba_config_set_ms(cfg, OPTIONS[i].key, (int64_t)lua_tointeger(L, -1));
      }
    } else if (t == LUA_TNUMBER || t == LUA_TSTRING) {
      rc = simba_config_set(cfg, OPTIONS[i].key, lua_tostring(L, -1));
    } else if (t != LUA_TNIL) {
      return luaL_error(L, "simba.open: option '%s' must be a number or a string", OPTIONS[i].opt);
    }
    lua_pop(L, 1);
    if (rc != SIMBA_OK) {
      capture(r, rc);
      return rc;
    }
  }
  /* Raw keys: config = {["session.drift"] = "0.02", ...} */
  if (lua_getfield(L, oidx, "config") == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      const char *k = luaL_checkstring(L, -2);
      const char *v = luaL_tolstring(L, -1, NULL);
      int rc;
      if (strcmp(k, "loop.mode") == 0 || strcmp(k, "callback.executor") == 0 ||
          strcmp(k, "callback.threads") == 0) {
        return luaL_error(L, "simba.open: '%s' is fixed by the Lua binding (external loop)", k);
      }
      rc = simba_config_set(cfg, k, v);
      lua_pop(L, 2);
      if (rc != SIMBA_OK) {
        capture(r, rc);
        return rc;
      }
    }
  }
  lua_pop(L, 1);
  if (lua_getfield(L, oidx, "logger") != LUA_TNIL) {
    static const char *const lv[] = {"debug", "info", "warn", "error", NULL};
    luaL_checktype(L, -1, LUA_TFUNCTION);
    lua_getfield(L, oidx, "log_level");
    *log_level = lua_isnil(L, -1) ? SIMBA_LOG_INFO : luaL_checkoption(L, -1, NULL, lv);
    lua_pop(L, 1);
    {
      int rc = simba_config_set_logger(cfg, tr_log, cl, *log_level);
      if (rc != SIMBA_OK) {
        lua_pop(L, 1);
        capture(r, rc);
        return rc;
      }
    }
  }
  lua_pop(L, 1);
  return SIMBA_OK;
}

static int config_box_gc(lua_State *L) {
  simba_config_t **box = (simba_config_t **)luaL_checkudata(L, 1, CONFIG_BOX_MT);
  simba_config_free(*box);
  *box = NULL;
  return 0;
}

/* simba.open(url[, opts]) -> client | nil, msg, code */
static int l_open(lua_State *L) {
  const char *url = luaL_checkstring(L, 1);
  simba_config_t *cfg = NULL;
  lclient *cl;
  client_ud *u;
  result_t r;
  int log_level = -1;
  int rc;
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  finish_orphans(L);
  cl = (lclient *)calloc(1, sizeof *cl);
  if (!cl) return luaL_error(L, "simba: out of memory");
  cl->pending = LUA_NOREF;
  cl->self_ref = LUA_NOREF;
  cl->epfd = cl->evfd = -1;
  cl->host = pthread_self();
  pthread_mutex_init(&cl->mu, NULL);
  /* The userdata first, so that a raise below frees cl through __gc. */
  u = (client_ud *)lua_newuserdatauv(L, sizeof *u, 1);
  u->cl = cl;
  luaL_setmetatable(L, CLIENT_MT);
  lua_newtable(L);
  lua_setiuservalue(L, -2, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, WEAK_KEY);
  lua_pushvalue(L, -2);
  lua_rawsetp(L, -2, cl);
  lua_pop(L, 1); /* stack: url opts ud */

  rc = simba_config_new(&cfg);
  if (rc != SIMBA_OK) {
    capture(&r, rc);
    return push_fail(L, &r);
  }
  {
    /* A box at index 4 frees cfg if an option raises below. */
    simba_config_t **box = (simba_config_t **)lua_newuserdatauv(L, sizeof *box, 0);
    *box = cfg;
    luaL_setmetatable(L, CONFIG_BOX_MT);
  }
  rc = simba_config_set(cfg, "loop.mode", "external");
  if (rc == SIMBA_OK) {
    /* luaL_error inside apply_options would leak cfg: keep it on the stack in
     * a to-be-freed box? Simpler: apply options first into a copy we own. */
    rc = apply_options(L, 2, cfg, cl, &r, &log_level);
  } else {
    capture(&r, rc);
  }
  if (rc == SIMBA_OK) {
    rc = simba_config_validate(cfg);
    if (rc != SIMBA_OK) capture(&r, rc);
  }
  if (rc == SIMBA_OK) {
    int64_t lease = 0;
    simba_config_get_ms(cfg, "session.lease-duration", &lease);
    cl->lease_ms = lease;
    capture(&r, simba_client_open(&cl->c, url, cfg));
    rc = r.rc;
  }
  simba_config_free(cfg);
  *(simba_config_t **)lua_touserdata(L, 4) = NULL;
  lua_settop(L, 3);
  if (rc != SIMBA_OK) {
    cl->c = NULL;
    if (rc == SIMBA_EINVAL || rc == SIMBA_EUNSUPPORTED) return raise_misuse(L, "open", &r);
    return push_fail(L, &r);
  }
  {
    struct epoll_event ev;
    int sfd = simba_client_fd(cl->c);
    cl->epfd = epoll_create1(EPOLL_CLOEXEC);
    cl->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    if (cl->epfd < 0 || cl->evfd < 0 || epoll_ctl(cl->epfd, EPOLL_CTL_ADD, sfd, &ev) != 0 ||
        epoll_ctl(cl->epfd, EPOLL_CTL_ADD, cl->evfd, &ev) != 0) {
      lua_pushnil(L);
      lua_pushfstring(L, "simba.open: cannot make the client's fd: %s", strerror(errno));
      lua_pushstring(L, "ENOMEM");
      simba_client_close(cl->c);
      cl->c = NULL;
      return 3;
    }
  }
  if (log_level >= 0) {
    lua_getfield(L, 2, "logger");
    anchor_set(L, 3, &LOG_KEY);
  }
  if (lua_istable(L, 2) && lua_getfield(L, 2, "on_event") != LUA_TNIL) {
    luaL_checktype(L, -1, LUA_TFUNCTION);
    anchor_set(L, 3, &EVENT_KEY);
    capture(&r, simba_client_on_event(cl->c, tr_event, cl));
    if (r.rc != SIMBA_OK) return fail(L, "on_event", &r);
  }
  lua_settop(L, 3);
  return 1;
}

/* client:fd(): readable when process() has something to do (an epoll fd over
 * the library's fd and the leader-work queue). */
static int client_fd(lua_State *L) {
  lua_pushinteger(L, live_client(L, 1)->epfd);
  return 1;
}

/* ms before process() must run although the fd is not readable; -1: no timer. */
static int64_t next_timeout(lclient *cl) {
  int64_t to = simba_client_timeout_ms(cl->c);
  if (cl->active) {
    work_req *q;
    for (q = cl->active; q; q = q->next) {
      int64_t due = q->wake_at - now_ms();
      if (due < 0) due = 0;
      if (due > 20) due = 20;
      if (to < 0 || due < to) to = due;
    }
  }
  return to;
}

static int client_timeout(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)next_timeout(live_client(L, 1)));
  return 1;
}

/* client:process() -> true | nil, msg, code (ECLOSED once a close started in a
 * callback has completed). Runs what is ready, callbacks included. */
static int client_process(lua_State *L) {
  lclient *cl = live_client(L, 1);
  result_t r;
  call_t k;
  if (cl->depth == 0 && !cl->pumping) finish_orphans(L);
  k = enter(cl, L);
  capture(&r, simba_client_process(cl->c));
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "process", &r);
  (void)pump(L, cl);
  if (cl->depth == 0 && !cl->pumping) finish_orphans(L);
  if (cl->deferred_close && !cl->pumping && cl->depth == 0) {
    cl->deferred_close = 0;
    if (do_close(L, cl, 1)) return 3;
    lua_pushnil(L);
    lua_pushstring(L, "the client closed (close() from leader work)");
    lua_pushstring(L, "ECLOSED");
    return 3;
  }
  k = enter(cl, L);
  leave(L, k); /* raise a run's error */
  lua_pushboolean(L, 1);
  return 1;
}


/* client:run(ms[, until]) : drive the client for up to ms milliseconds (a
 * negative ms: without bound), or until until() returns true. Returns true if
 * until held, false when the time ran out; nil, msg, code on failure. */
static int client_run(lua_State *L) {
  lclient *cl = live_client(L, 1);
  lua_Integer ms = luaL_checkinteger(L, 2);
  int has_until = !lua_isnoneornil(L, 3);
  int64_t deadline = ms < 0 ? INT64_MAX : now_ms() + (int64_t)ms;
  if (has_until) luaL_checktype(L, 3, LUA_TFUNCTION);
  if (cl->depth > 0) return luaL_error(L, "simba: run() called from a callback");
  if (!cl->pumping) finish_orphans(L);
  for (;;) {
    struct pollfd p;
    int64_t wait, to;
    result_t r;
    call_t k;
    if (has_until) {
      int holds;
      lua_pushvalue(L, 3);
      lua_call(L, 0, 1);
      holds = lua_toboolean(L, -1);
      lua_pop(L, 1);
      if (holds) {
        lua_pushboolean(L, 1);
        return 1;
      }
    }
    if (!cl->c) {
      lua_pushnil(L);
      lua_pushstring(L, "the client was closed while it ran");
      lua_pushstring(L, "ECLOSED");
      return 3;
    }
    wait = deadline == INT64_MAX ? INT64_MAX : deadline - now_ms();
    if (wait <= 0) {
      lua_pushboolean(L, 0);
      return 1;
    }
    to = next_timeout(cl);
    if (to >= 0 && to < wait) wait = to;
    if (has_until && wait > 50) wait = 50; /* re-check the condition now and then */
    if (wait > 1000) wait = 1000;
    p.fd = cl->epfd;
    p.events = POLLIN;
    p.revents = 0;
    if (poll(&p, 1, (int)wait) < 0 && errno != EINTR) {
      lua_pushnil(L);
      lua_pushstring(L, strerror(errno));
      lua_pushstring(L, "EBACKEND");
      return 3;
    }
    k = enter(cl, L);
    capture(&r, simba_client_process(cl->c));
    leave(L, k);
    if (r.rc != SIMBA_OK) return fail(L, "run", &r);
    (void)pump(L, cl);
    if (!cl->pumping) finish_orphans(L);
    if (cl->deferred_close && !cl->pumping && cl->depth == 0) {
      cl->deferred_close = 0;
      if (do_close(L, cl, 1)) return 3;
    }
    k = enter(cl, L);
    leave(L, k);
  }
}

static int client_wait_live(lua_State *L) {
  lclient *cl = live_client(L, 1);
  lua_Integer ms = luaL_optinteger(L, 2, -1);
  result_t r;
  call_t k = enter(cl, L);
  capture(&r, simba_client_wait_live(cl->c, (int64_t)ms));
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "wait_live", &r);
  lua_pushboolean(L, 1);
  return 1;
}

static int client_status(lua_State *L) {
  client_ud *u = check_client_ud(L, 1);
  lua_pushstring(L, status_name(u->cl && u->cl->c ? simba_client_status(u->cl->c)
                                                  : SIMBA_SESSION_CLOSED));
  return 1;
}

/* True between a close() from a callback and the close() that finishes it. */
static int client_is_closing(lua_State *L) {
  client_ud *u = check_client_ud(L, 1);
  lua_pushboolean(L, u->cl && u->cl->c && u->cl->closing);
  return 1;
}

/* Callbacks that arrived on a thread other than the Lua thread (dropped);
 * always 0 unless libsimba breaks its EXTERNAL-mode promise. */
static int client_foreign(lua_State *L) {
  client_ud *u = check_client_ud(L, 1);
  lua_pushinteger(L, u->cl ? (lua_Integer)__atomic_load_n(&u->cl->foreign, __ATOMIC_RELAXED) : 0);
  return 1;
}

static int client_is_closed(lua_State *L) {
  client_ud *u = check_client_ud(L, 1);
  lua_pushboolean(L, !u->cl || !u->cl->c);
  return 1;
}

static int client_snapshot(lua_State *L) {
  lclient *cl = live_client(L, 1);
  char *js = simba_client_snapshot_json(cl->c);
  result_t r;
  if (!js) {
    capture(&r, simba_client_status(cl->c) == SIMBA_SESSION_CLOSED ? SIMBA_ECLOSED : SIMBA_ENOMEM);
    return push_fail(L, &r);
  }
  lua_pushstring(L, js);
  simba_free(js);
  return 1;
}

/* client:inspect([names][, timeout_ms]) -> json | nil, msg, code */
static int client_inspect(lua_State *L) {
  lclient *cl = live_client(L, 1);
  const char **names = NULL;
  size_t n = 0, i;
  lua_Integer ms = luaL_optinteger(L, 3, cl->lease_ms > 0 ? cl->lease_ms : 5000);
  char *out = NULL;
  result_t r;
  call_t k;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    n = (size_t)luaL_len(L, 2);
    names = (const char **)lua_newuserdatauv(L, (n ? n : 1) * sizeof *names, 0);
    for (i = 0; i < n; ++i) {
      lua_geti(L, 2, (lua_Integer)i + 1);
      names[i] = luaL_checkstring(L, -1);
      lua_pop(L, 1); /* the string stays alive in the table */
    }
  }
  k = enter(cl, L);
  capture(&r, simba_client_inspect_json(cl->c, names, n, (int64_t)ms, &out));
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "inspect", &r);
  lua_pushstring(L, out);
  simba_free(out);
  return 1;
}

/* client:on_event(fn | nil) */
static int client_on_event(lua_State *L) {
  lclient *cl = live_client(L, 1);
  result_t r;
  if (lua_isnoneornil(L, 2)) {
    capture(&r, simba_client_on_event(cl->c, NULL, NULL));
    lua_pushnil(L);
  } else {
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2);
    capture(&r, simba_client_on_event(cl->c, tr_event, cl));
  }
  anchor_set(L, 1, &EVENT_KEY);
  if (r.rc != SIMBA_OK) return fail(L, "on_event", &r);
  lua_pushboolean(L, 1);
  return 1;
}

/* Close: stops every election and lock, closes the session, frees the handle.
 * From a callback it starts the close and returns nil, msg, "EWOULDBLOCK":
 * call close() again outside callbacks (run() and process() report ECLOSED
 * once it completed). */
static int do_close(lua_State *L, lclient *cl, int raise) {
  result_t r;
  call_t k;
  if (!cl->c) return 0;
  if (cl->pumping) {
    /* From leader work: the close would wait for this very coroutine. It
     * runs when the work yields or returns, at the end of this process(). */
    cl->deferred_close = 1;
    lua_pushnil(L);
    lua_pushstring(L, "the close runs once the leader work yields (called from leader work)");
    lua_pushstring(L, "EWOULDBLOCK");
    return 3;
  }
  k = enter(cl, L);
  if (cl->depth == 0 && !cl->pumping) {
    /* Leader work first (handover order): its coroutines end, then the
     * close revokes the terms and releases the leases. */
    pthread_mutex_lock(&cl->mu);
    cl->shutting = 1;
    pthread_mutex_unlock(&cl->mu);
    end_all_runs(L, cl);
  }
  capture(&r, simba_client_close(cl->c));
  if (r.rc == SIMBA_OK && raise) finish_orphans(L);
  if (r.rc == SIMBA_OK) {
    pthread_mutex_lock(&cl->mu);
    cl->c = NULL;
    pthread_mutex_unlock(&cl->mu);
    end_all_runs(L, cl);
    /* Every election is stopped and no callback runs any more: drop the
     * anchors but the client's own (nothing can call them). */
    if (push_client(L, cl)) {
      lua_newtable(L);
      lua_setiuservalue(L, -2, 1);
      lua_pop(L, 1);
    }
  } else {
    cl->closing = 1;
  }
  if (raise) {
    leave(L, k);
  } else {
    leave_noraise(k);
  }
  if (r.rc != SIMBA_OK) return push_fail(L, &r);
  return 0;
}

static int client_close(lua_State *L) {
  client_ud *u = check_client_ud(L, 1);
  int n;
  if (!u->cl) {
    lua_pushboolean(L, 1);
    return 1;
  }
  n = do_close(L, u->cl, 1);
  if (n) return n;
  lua_pushboolean(L, 1);
  return 1;
}

/* Orphans: clients collected while a callback ran (of another client, or
 * leader work), whose close libsimba started but could only finish outside
 * callbacks (EXTERNAL mode). Their Lua side is gone: their callbacks find no
 * Lua value and do nothing. The next call into the module on their host thread
 * outside callbacks (open, process, run, close, or the module's own finalizer
 * at lua_close) finishes each close and frees it. */
typedef struct orphan {
  lclient *cl;
  struct orphan *next;
} orphan;

static pthread_mutex_t orphans_mu = PTHREAD_MUTEX_INITIALIZER;
static orphan *orphans;
static size_t orphans_n;

static void free_lclient(lclient *cl) {
  if (cl->epfd >= 0) close(cl->epfd);
  if (cl->evfd >= 0) close(cl->evfd);
  pthread_mutex_destroy(&cl->mu);
  free(cl);
}

static void add_orphan(lclient *cl) {
  orphan *o = (orphan *)malloc(sizeof *o);
  if (!o) return; /* out of memory: the handle leaks, as it would have */
  o->cl = cl;
  pthread_mutex_lock(&orphans_mu);
  o->next = orphans;
  orphans = o;
  orphans_n++;
  pthread_mutex_unlock(&orphans_mu);
}

/* Finish the close of this thread's orphans (libsimba refuses with
 * EWOULDBLOCK while a callback runs: those stay for the next time). */
static void finish_orphans(lua_State *L) {
  orphan *mine = NULL, **pp, *o;
  pthread_t me = pthread_self();
  pthread_mutex_lock(&orphans_mu);
  if (!orphans) {
    pthread_mutex_unlock(&orphans_mu);
    return;
  }
  pp = &orphans;
  while ((o = *pp) != NULL) {
    if (pthread_equal(o->cl->host, me)) {
      *pp = o->next;
      o->next = mine;
      mine = o;
      orphans_n--;
    } else {
      pp = &o->next;
    }
  }
  pthread_mutex_unlock(&orphans_mu);
  while ((o = mine) != NULL) {
    lclient *cl = o->cl;
    mine = o->next;
    end_all_runs(L, cl); /* wake its work threads: their coroutines are gone */
    if (simba_client_close(cl->c) == SIMBA_OK) {
      pthread_mutex_lock(&cl->mu);
      cl->c = NULL;
      pthread_mutex_unlock(&cl->mu);
      end_all_runs(L, cl);
      drop_pending(L, cl);
      free_lclient(cl);
      free(o);
    } else {
      pthread_mutex_lock(&orphans_mu);
      o->next = orphans;
      orphans = o;
      orphans_n++;
      pthread_mutex_unlock(&orphans_mu);
    }
  }
}

/* simba._orphans(): closes waiting to be finished (for tests). */
static int l_orphans(lua_State *L) {
  size_t n;
  pthread_mutex_lock(&orphans_mu);
  n = orphans_n;
  pthread_mutex_unlock(&orphans_mu);
  lua_pushinteger(L, (lua_Integer)n);
  return 1;
}

/* The module's finalizer (lua_close): finish what can be finished. */
static int sentinel_gc(lua_State *L) {
  finish_orphans(L);
  return 0;
}

static int client_gc(lua_State *L) {
  client_ud *u = check_client_ud(L, 1);
  lclient *cl = u->cl;
  if (!cl) return 0;
  if (cl->c) {
    lua_pushvalue(L, 1);
    cl->self_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, 1);
    do_close(L, cl, 0);
    lua_settop(L, 1);
    luaL_unref(L, LUA_REGISTRYINDEX, cl->self_ref);
    cl->self_ref = LUA_NOREF;
    drop_pending(L, cl);
  }
  if (cl->c) {
    /* Collected inside a callback of the library: the close goes on; the
     * handle and cl stay allocated (its callbacks find no Lua value and do
     * nothing) until the next call outside callbacks finishes the close. */
    u->cl = NULL;
    add_orphan(cl);
    return 0;
  }
  free_lclient(cl);
  u->cl = NULL;
  return 0;
}

static int client_tostring(lua_State *L) {
  client_ud *u = check_client_ud(L, 1);
  lua_pushfstring(L, "simba.client(%s)",
                  status_name(u->cl && u->cl->c ? simba_client_status(u->cl->c)
                                                : SIMBA_SESSION_CLOSED));
  return 1;
}

/* client:election(name, {on_elected = f(term), on_revoked = f(term, reason)}) */
static int client_election(lua_State *L) {
  lclient *cl = live_client(L, 1);
  const char *name = luaL_checkstring(L, 2);
  lelection *el;
  election_ud *u;
  simba_listener_t lis;
  result_t r;
  call_t k;
  int i;
  static const char *const fields[] = {"on_elected", "on_revoked", NULL};
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);
  for (i = 0; fields[i]; ++i) {
    int t = lua_getfield(L, 3, fields[i]);
    if (t != LUA_TNIL && t != LUA_TFUNCTION)
      return luaL_error(L, "simba: election listener field '%s' must be a function", fields[i]);
    lua_pop(L, 1);
  }
  el = (lelection *)calloc(1, sizeof *el);
  if (!el) return luaL_error(L, "simba: out of memory");
  el->cl = cl;
  u = (election_ud *)lua_newuserdatauv(L, sizeof *u, 1);
  u->el = el;
  luaL_setmetatable(L, ELECTION_MT); /* from here __gc frees el */
  lua_createtable(L, 0, 4);
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, "client");
  lua_pushvalue(L, 2);
  lua_setfield(L, -2, "name");
  for (i = 0; fields[i]; ++i) {
    lua_getfield(L, 3, fields[i]);
    lua_setfield(L, -2, fields[i]);
  }
  lua_setiuservalue(L, 4, 1);
  /* While started, the client's anchors keep the election (and its listener). */
  lua_pushvalue(L, 4);
  anchor_set(L, 1, el);
  lis.on_elected = tr_elected;
  lis.on_revoked = tr_revoked;
  lis.ud = el;
  k = enter(cl, L);
  capture(&r, simba_election_start(&el->e, cl->c, name, &lis));
  if (r.rc != SIMBA_OK) {
    el->e = NULL;
    anchor_clear(L, cl, el);
  }
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "election", &r);
  lua_settop(L, 4);
  return 1;
}

/* client:lock(name[, timeout_ms]) -> term | nil, msg, code. Without a timeout
 * it waits without bound. */
static int client_lock(lua_State *L) {
  lclient *cl = live_client(L, 1);
  const char *name = luaL_checkstring(L, 2);
  lua_Integer ms = luaL_optinteger(L, 3, -1);
  simba_term_t *t = NULL;
  result_t r;
  call_t k = enter(cl, L);
  capture(&r, simba_lock_acquire(&t, cl->c, name, (int64_t)ms));
  if (r.rc == SIMBA_OK) push_term(L, cl, t, 1, 1); /* before a raise: __gc releases it */
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "lock", &r);
  return 1;
}

static int client_try_lock(lua_State *L) {
  lclient *cl = live_client(L, 1);
  const char *name = luaL_checkstring(L, 2);
  simba_term_t *t = NULL;
  result_t r;
  call_t k = enter(cl, L);
  capture(&r, simba_lock_try_acquire(&t, cl->c, name));
  if (r.rc == SIMBA_OK) push_term(L, cl, t, 1, 1);
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "try_lock", &r);
  return 1;
}

static int client_unlock(lua_State *L) {
  term_ud *u = check_term(L, 2);
  if (!u->is_lock) return luaL_argerror(L, 2, "not a lock term");
  lua_settop(L, 2);
  lua_remove(L, 1);
  return term_release(L);
}

/* client:lock_async(name, timeout_ms, fn(term | nil, msg, code)) */
typedef struct {
  lclient *cl;
} lock_rec;

static void tr_lock(void *ud, int err, simba_term_t *t) {
  lock_rec *rec = (lock_rec *)ud;
  lclient *cl = rec->cl;
  lua_State *L = cb_state(cl);
  if (L && !lua_checkstack(L, 8)) L = NULL;
  if (L) anchor_get(L, cl, rec);
  if (!L || !lua_isfunction(L, -1)) {
    if (L) lua_pop(L, 1);
    if (err == SIMBA_OK) simba_term_release(t); /* nobody can take it: release */
    free(rec);
    return;
  }
  anchor_clear(L, cl, rec);
  if (err == SIMBA_OK) {
    push_term(L, cl, t, 1, 1);
    lua_pushnil(L);
    lua_pushnil(L);
  } else {
    lua_pushnil(L);
    lua_pushstring(L, simba_strerror(err));
    lua_pushstring(L, code_name(err));
  }
  cb_invoke(cl, L, 3);
  free(rec);
}

static int client_lock_async(lua_State *L) {
  lclient *cl = live_client(L, 1);
  const char *name = luaL_checkstring(L, 2);
  lua_Integer ms = luaL_checkinteger(L, 3);
  lock_rec *rec;
  result_t r;
  call_t k;
  luaL_checktype(L, 4, LUA_TFUNCTION);
  rec = (lock_rec *)malloc(sizeof *rec);
  if (!rec) return luaL_error(L, "simba: out of memory");
  rec->cl = cl;
  lua_pushvalue(L, 4);
  anchor_set(L, 1, rec);
  k = enter(cl, L);
  capture(&r, simba_lock_acquire_async(cl->c, name, (int64_t)ms, tr_lock, rec));
  if (r.rc != SIMBA_OK) {
    anchor_clear(L, cl, rec);
    free(rec);
  }
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "lock_async", &r);
  lua_pushboolean(L, 1);
  return 1;
}

/* ------------------------------------------------------------------------- */
/* Leader work: run_while_leader, schedule, join_group.
 *
 * The library calls work(ud, term) on a thread of its own. That thread never
 * touches Lua: it queues the run (cl->queued, cl->evfd wakes client:fd()) and
 * waits until the Lua side finished it. The Lua thread, in client:process()
 * (and run(), and the luv driver), starts each queued run as a coroutine
 * fn(term), resumes it when it is due, and ends it: when fn returns, raises,
 * or, the first time it is due after its term stopped being valid, by closing
 * the coroutine (coroutine.close: its to-be-closed variables run). A run is
 * never resumed once its term is invalid, so no step of the work runs after
 * the revocation, and the work thread returns only once the coroutine is
 * gone: the library releases the lease after that (handover order).
 * Inside fn, coroutine.yield(ms) sleeps ms milliseconds (no argument: until
 * the next turn of the loop); simba.sleep(ms) is the same. */

typedef struct ltask {
  simba_task_t *t; /* NULL once closed */
  lclient *cl;
  int stopped;
} ltask;

typedef struct {
  ltask *tk;
} task_ud;

static void tr_work(void *ud, simba_term_t *term) {
  ltask *tk = (ltask *)ud;
  lclient *cl = tk->cl;
  work_req *q = (work_req *)calloc(1, sizeof *q);
  uint64_t one = 1;
  if (!q) return; /* the run is skipped: the library contends again */
  pthread_cond_init(&q->cv, NULL);
  q->task = tk;
  q->term = term;
  q->refs = 2;
  simba_term_retain(term);
  pthread_mutex_lock(&cl->mu);
  if (cl->evfd < 0 || cl->c == NULL || cl->shutting) {
    pthread_mutex_unlock(&cl->mu);
    simba_term_release(term);
    pthread_cond_destroy(&q->cv);
    free(q);
    return;
  }
  q->next = cl->queued;
  cl->queued = q;
  if (write(cl->evfd, &one, sizeof one) < 0) {
    /* the counter is saturated: the fd is readable anyway */
  }
  while (!q->finished) pthread_cond_wait(&q->cv, &cl->mu);
  pthread_mutex_unlock(&cl->mu);
  simba_term_release(term);
  work_unref(cl, q);
}

/* The Lua side is done with q: wake its work thread. */
static void run_finish(lclient *cl, work_req *q) {
  pthread_mutex_lock(&cl->mu);
  q->finished = 1;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&cl->mu);
  work_unref(cl, q);
}

/* Push the coroutine of run q (stored in the task's user value "runs"), or nil. */
static void push_run_thread(lua_State *L, lclient *cl, work_req *q) {
  anchor_get(L, cl, q->task);
  if (lua_isnil(L, -1)) return;
  lua_getiuservalue(L, -1, 1);
  lua_getfield(L, -1, "runs");
  lua_rawgetp(L, -1, q);
  lua_replace(L, -4);
  lua_pop(L, 2);
}

static void set_run_thread(lua_State *L, lclient *cl, work_req *q, int vidx) {
  vidx = lua_absindex(L, vidx);
  anchor_get(L, cl, q->task);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_getiuservalue(L, -1, 1);
  lua_getfield(L, -1, "runs");
  lua_pushvalue(L, vidx);
  lua_rawsetp(L, -2, q);
  lua_pop(L, 3);
}

/* End run q: close its coroutine (if any), forget it, wake the work thread. */
static void run_end(lua_State *L, lclient *cl, work_req *q, int close_thread) {
  if (close_thread) {
    push_run_thread(L, cl, q);
    if (lua_isthread(L, -1)) {
      lua_State *co = lua_tothread(L, -1);
      if (co_close(co, L) != LUA_OK) {
        /* an error in a __close of the work: keep it like a callback's */
        lua_xmove(co, L, 1);
        if (cl->pending == LUA_NOREF) {
          cl->pending = luaL_ref(L, LUA_REGISTRYINDEX);
        } else {
          lua_pop(L, 1);
        }
      }
    }
    lua_pop(L, 1);
  }
  lua_pushnil(L);
  set_run_thread(L, cl, q, -1);
  lua_pop(L, 1);
  run_finish(cl, q);
}

/* Take queued runs, start, resume and end runs. Lua thread only, outside
 * libsimba. Returns the ms until the next run is due (-1: none). */
static int64_t pump(lua_State *L, lclient *cl) {
  work_req *take, **pp;
  uint64_t v;
  int64_t now, next = -1;
  if (cl->pumping || cl->evfd < 0) return -1;
  cl->pumping = 1;
  if (read(cl->evfd, &v, sizeof v) < 0) {
    /* EAGAIN: nothing queued */
  }
  pthread_mutex_lock(&cl->mu);
  take = cl->queued;
  cl->queued = NULL;
  pthread_mutex_unlock(&cl->mu);
  while (take) {
    work_req *q = take;
    take = q->next;
    q->next = cl->active;
    cl->active = q;
  }
  lua_checkstack(L, 10);
  now = now_ms();
  pp = &cl->active;
  while (*pp) {
    work_req *q = *pp;
    int ended = 0;
    if (!simba_term_is_valid(q->term) || !cl->c) {
      *pp = q->next;
      run_end(L, cl, q, q->started);
      continue;
    }
    if (q->wake_at <= now) {
      lua_State *co;
      int nargs = 0, nres = 0, st;
      if (!q->started) {
        anchor_get(L, cl, q->task);
        if (lua_isnil(L, -1)) {
          lua_pop(L, 1);
          *pp = q->next;
          run_end(L, cl, q, 0);
          continue;
        }
        lua_getiuservalue(L, -1, 1);
        co = lua_newthread(L);
        set_run_thread(L, cl, q, -1);
        lua_getfield(L, -2, "fn");
        lua_xmove(L, co, 1);
        push_term(L, cl, q->term, 0, 0);
        lua_xmove(L, co, 1);
        lua_pop(L, 3);
        q->started = 1;
        nargs = 1;
      } else {
        push_run_thread(L, cl, q);
        co = lua_tothread(L, -1);
        lua_pop(L, 1); /* still referenced by the runs table */
        if (!co) {
          *pp = q->next;
          run_end(L, cl, q, 0);
          continue;
        }
      }
      st = lua_resume(co, L, nargs, &nres);
      if (st == LUA_YIELD) {
        lua_Integer ms = 0;
        if (nres > 0 && lua_isinteger(co, -nres)) ms = lua_tointeger(co, -nres);
        else if (nres > 0 && lua_isnumber(co, -nres)) ms = (lua_Integer)lua_tonumber(co, -nres);
        lua_pop(co, nres);
        q->wake_at = now_ms() + (ms > 0 ? ms : 0);
      } else if (st == LUA_OK) {
        lua_pop(co, nres);
        ended = 1;
        *pp = q->next;
        run_end(L, cl, q, 0);
      } else {
        lua_xmove(co, L, 1);
        if (cl->pending == LUA_NOREF) {
          cl->pending = luaL_ref(L, LUA_REGISTRYINDEX);
        } else {
          lua_pop(L, 1);
        }
        ended = 1;
        *pp = q->next;
        run_end(L, cl, q, 1);
      }
      if (ended) continue;
    }
    {
      int64_t due = q->wake_at - now_ms();
      if (due < 0) due = 0;
      /* a sleeping run is checked at least every 20 ms for revocation */
      if (due > 20) due = 20;
      if (next < 0 || due < next) next = due;
    }
    pp = &q->next;
  }
  cl->pumping = 0;
  return next;
}

/* Close every run before the client closes (their terms are revoked by it). */
static void end_all_runs(lua_State *L, lclient *cl) {
  work_req *take;
  pthread_mutex_lock(&cl->mu);
  take = cl->queued;
  cl->queued = NULL;
  pthread_mutex_unlock(&cl->mu);
  while (take) {
    work_req *q = take;
    take = q->next;
    run_finish(cl, q);
  }
  while (cl->active) {
    work_req *q = cl->active;
    cl->active = q->next;
    run_end(L, cl, q, q->started);
  }
}

static task_ud *check_task(lua_State *L, int i) {
  return (task_ud *)luaL_checkudata(L, i, TASK_MT);
}

static ltask *live_task(lua_State *L, int i) {
  task_ud *u = check_task(L, i);
  if (!u->tk || !u->tk->t) luaL_error(L, "simba: task closed");
  return u->tk;
}

typedef int (*task_start_fn)(lua_State *L, lclient *cl, ltask *tk, const char *name);

static int start_task(lua_State *L, const char *what, int fidx, task_start_fn start) {
  lclient *cl = live_client(L, 1);
  const char *name = luaL_checkstring(L, 2);
  ltask *tk;
  task_ud *u;
  result_t r;
  call_t k;
  int top;
  luaL_checktype(L, fidx, LUA_TFUNCTION);
  tk = (ltask *)calloc(1, sizeof *tk);
  if (!tk) return luaL_error(L, "simba: out of memory");
  tk->cl = cl;
  u = (task_ud *)lua_newuserdatauv(L, sizeof *u, 1);
  u->tk = tk;
  luaL_setmetatable(L, TASK_MT);
  top = lua_gettop(L);
  lua_createtable(L, 0, 4);
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, "client");
  lua_pushvalue(L, 2);
  lua_setfield(L, -2, "name");
  lua_pushvalue(L, fidx);
  lua_setfield(L, -2, "fn");
  lua_newtable(L);
  lua_setfield(L, -2, "runs");
  lua_setiuservalue(L, top, 1);
  lua_pushvalue(L, top);
  anchor_set(L, 1, tk);
  k = enter(cl, L);
  capture(&r, start(L, cl, tk, name));
  if (r.rc != SIMBA_OK) {
    tk->t = NULL;
    anchor_clear(L, cl, tk);
  }
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, what, &r);
  lua_settop(L, top);
  return 1;
}

static int start_rwl(lua_State *L, lclient *cl, ltask *tk, const char *name) {
  (void)L;
  return simba_run_while_leader(&tk->t, cl->c, name, tr_work, tk);
}

/* client:run_while_leader(name, fn(term)) -> task */
static int client_run_while_leader(lua_State *L) {
  lua_settop(L, 3);
  return start_task(L, "run_while_leader", 3, start_rwl);
}

static int start_schedule(lua_State *L, lclient *cl, ltask *tk, const char *name) {
  return simba_schedule(&tk->t, cl->c, name, (int64_t)lua_tointeger(L, 3),
                        (int64_t)lua_tointeger(L, 4), tr_work, tk);
}

/* client:schedule(name, initial_delay_ms, period_ms, fn(term)) -> task */
static int client_schedule(lua_State *L) {
  lua_settop(L, 5);
  luaL_checkinteger(L, 3);
  luaL_checkinteger(L, 4);
  return start_task(L, "schedule", 5, start_schedule);
}

static int start_group(lua_State *L, lclient *cl, ltask *tk, const char *name) {
  return simba_group_join(&tk->t, cl->c, name, (uint32_t)lua_tointeger(L, 3), tr_work, tk);
}

/* client:join_group(group, partitions, fn(term)) -> task */
static int client_join_group(lua_State *L) {
  lua_Integer n;
  lua_settop(L, 4);
  n = luaL_checkinteger(L, 3);
  if (n < 0 || n > 0xffffffffLL) return luaL_argerror(L, 3, "partitions out of range");
  return start_task(L, "join_group", 4, start_group);
}

static int task_stop(lua_State *L) {
  ltask *tk;
  done_rec *rec;
  result_t r;
  call_t k;
  lua_settop(L, 2);
  tk = live_task(L, 1);
  rec = new_done_for(L, tk->cl, 2, tk);
  k = enter(tk->cl, L);
  capture(&r, simba_task_stop(tk->t, tr_done, rec));
  if (r.rc != SIMBA_OK) {
    anchor_clear(L, tk->cl, rec);
    free(rec);
  } else {
    tk->stopped = 1;
  }
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "stop", &r);
  lua_pushboolean(L, 1);
  return 1;
}

static int task_step_down(lua_State *L) {
  ltask *tk;
  lua_Integer cooldown;
  done_rec *rec;
  result_t r;
  call_t k;
  lua_settop(L, 3);
  tk = live_task(L, 1);
  cooldown = luaL_checkinteger(L, 2);
  if (cooldown < 0) luaL_argerror(L, 2, "negative cooldown");
  rec = new_done_for(L, tk->cl, 3, NULL);
  k = enter(tk->cl, L);
  capture(&r, simba_task_step_down(tk->t, (int64_t)cooldown, tr_done, rec));
  if (r.rc != SIMBA_OK) {
    anchor_clear(L, tk->cl, rec);
    free(rec);
  }
  leave(L, k);
  if (r.rc != SIMBA_OK) return fail(L, "step_down", &r);
  lua_pushboolean(L, 1);
  return 1;
}

static void stop_done_flag(void *ud, int err) {
  (void)err;
  *(int *)ud = 1;
}

/* task:close() : stop, wait until every run ended and the lease is handed
 * over, free. Outside leader work and callbacks it drives the client (and
 * its runs) itself; from inside them it starts the stop and returns. */
static int task_close(lua_State *L) {
  task_ud *u = check_task(L, 1);
  ltask *tk = u->tk;
  lclient *cl;
  call_t k;
  if (!tk || !tk->t) {
    lua_pushboolean(L, 1);
    return 1;
  }
  cl = tk->cl;
  if (cl->c && (cl->depth > 0 || cl->pumping)) {
    /* From a callback or leader work: waiting here would wait for itself (a
     * work thread waits for a coroutine only this thread resumes). Start the
     * stop; the handle is freed once it completed and the task is collected,
     * or by a close() outside. */
    done_rec *rec = new_done_for(L, cl, lua_gettop(L) + 1, tk);
    result_t r;
    k = enter(cl, L);
    capture(&r, simba_task_stop(tk->t, tr_done, rec));
    if (r.rc != SIMBA_OK) {
      anchor_clear(L, cl, rec);
      free(rec);
    }
    leave(L, k);
    tk->stopped = 1;
    lua_pushboolean(L, 1);
    return 1;
  }
  if (cl->c) {
    int done = 0;
    int rc;
    k = enter(cl, L);
    rc = simba_task_stop(tk->t, stop_done_flag, &done);
    leave(L, k);
    if (rc == SIMBA_OK) {
      /* Drive the loop and the runs until the stop completed: the work
       * threads wait for their coroutine to end, which only this thread does. */
      while (!done && cl->c) {
        struct pollfd p;
        int64_t wait = simba_client_timeout_ms(cl->c), due;
        result_t r;
        due = pump(L, cl);
        if (due >= 0 && (wait < 0 || due < wait)) wait = due;
        if (wait < 0 || wait > 20) wait = 20;
        p.fd = cl->epfd;
        p.events = POLLIN;
        p.revents = 0;
        (void)poll(&p, 1, (int)wait);
        k = enter(cl, L);
        capture(&r, simba_client_process(cl->c));
        leave(L, k);
        if (r.rc != SIMBA_OK) break;
        (void)pump(L, cl);
      }
    }
  }
  k = enter(cl, L);
  simba_task_close(tk->t);
  tk->t = NULL;
  anchor_clear(L, cl, tk);
  leave(L, k);
  lua_pushboolean(L, 1);
  return 1;
}

static int task_gc(lua_State *L) {
  task_ud *u = check_task(L, 1);
  ltask *tk = u->tk;
  if (tk) {
    if (tk->t) {
      /* Not anchored any more: stopped, or its client closed. */
      call_t k = enter(tk->cl, L);
      simba_task_close(tk->t);
      tk->t = NULL;
      leave_noraise(k);
    }
    free(tk);
    u->tk = NULL;
  }
  return 0;
}

static int task_close_tbc(lua_State *L) {
  lua_settop(L, 1);
  task_close(L);
  return 0;
}

static int task_name(lua_State *L) {
  check_task(L, 1);
  lua_getiuservalue(L, 1, 1);
  lua_getfield(L, -1, "name");
  return 1;
}

static int task_tostring(lua_State *L) {
  task_ud *u = check_task(L, 1);
  lua_getiuservalue(L, 1, 1);
  lua_getfield(L, -1, "name");
  lua_pushfstring(L, "simba.task(%s%s)", lua_tostring(L, -1),
                  !u->tk || !u->tk->t ? ", closed" : "");
  return 1;
}

/* simba.sleep(ms): inside leader work, yield for ms milliseconds. */
static int l_sleep(lua_State *L) {
  lua_Integer ms = luaL_optinteger(L, 1, 0);
  if (!lua_isyieldable(L)) return luaL_error(L, "simba.sleep: only inside leader work");
  lua_settop(L, 0);
  lua_pushinteger(L, ms);
  return lua_yield(L, 1);
}

/* ------------------------------------------------------------------------- */
/* Benchmark helper: the raw C lock cycle on the same client, same process. */
static int client_bench_c_cycle(lua_State *L) {
  lclient *cl = live_client(L, 1);
  const char *name = luaL_checkstring(L, 2);
  lua_Integer n = luaL_checkinteger(L, 3), i;
  int64_t t0 = now_ms();
  result_t r;
  call_t k = enter(cl, L);
  capture(&r, SIMBA_OK);
  for (i = 0; i < n; ++i) {
    simba_term_t *t = NULL;
    int rc = simba_lock_acquire(&t, cl->c, name, 10000);
    if (rc == SIMBA_OK) rc = simba_lock_release(t);
    if (rc != SIMBA_OK) {
      capture(&r, rc);
      break;
    }
  }
  leave(L, k);
  if (r.rc != SIMBA_OK) return push_fail(L, &r);
  lua_pushinteger(L, (lua_Integer)(now_ms() - t0));
  return 1;
}

/* ------------------------------------------------------------------------- */
/* Module */

static int l_version(lua_State *L) {
  lua_pushstring(L, simba_version_string());
  lua_pushinteger(L, (lua_Integer)simba_version());
  return 2;
}

static int l_strerror(lua_State *L) {
  lua_pushstring(L, simba_strerror((int)luaL_checkinteger(L, 1)));
  return 1;
}

/* simba.schema(url) -> sql | nil, msg, code */
static int l_schema(lua_State *L) {
  const char *url = luaL_checkstring(L, 1);
  char *out = NULL;
  result_t r;
  capture(&r, simba_backend_schema(url, &out));
  if (r.rc != SIMBA_OK) return push_fail(L, &r);
  lua_pushstring(L, out);
  simba_free(out);
  return 1;
}

static int l_now_ms(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)now_ms());
  return 1;
}

static const luaL_Reg term_methods[] = {
    {"name", term_name},
    {"token", term_token},
    {"valid", term_valid},
    {"remaining", term_remaining},
    {"ensure_valid", term_ensure_valid},
    {"reason", term_reason},
    {"is_lock", term_is_lock},
    {"on_revoked", term_on_revoked},
    {"revoke_fd", term_revoke_fd},
    {"release", term_release},
    {NULL, NULL},
};

static const luaL_Reg election_methods[] = {
    {"stop", election_stop},
    {"stop_wait", election_stop_wait},
    {"step_down", election_step_down},
    {"close", election_close},
    {"term", election_term},
    {"is_leader", election_is_leader},
    {"name", election_name},
    {NULL, NULL},
};

static const luaL_Reg task_methods[] = {
    {"stop", task_stop},
    {"step_down", task_step_down},
    {"close", task_close},
    {"name", task_name},
    {NULL, NULL},
};

static const luaL_Reg client_methods[] = {
    {"fd", client_fd},
    {"timeout", client_timeout},
    {"process", client_process},
    {"run", client_run},
    {"wait_live", client_wait_live},
    {"status", client_status},
    {"is_closed", client_is_closed},
    {"is_closing", client_is_closing},
    {"foreign_callbacks", client_foreign},
    {"snapshot", client_snapshot},
    {"inspect", client_inspect},
    {"on_event", client_on_event},
    {"close", client_close},
    {"election", client_election},
    {"lock", client_lock},
    {"try_lock", client_try_lock},
    {"unlock", client_unlock},
    {"lock_async", client_lock_async},
    {"run_while_leader", client_run_while_leader},
    {"schedule", client_schedule},
    {"join_group", client_join_group},
    {"_bench_c_cycle", client_bench_c_cycle},
    {NULL, NULL},
};

static const luaL_Reg module_fns[] = {
    {"open", l_open},
    {"version", l_version},
    {"strerror", l_strerror},
    {"schema", l_schema},
    {"now_ms", l_now_ms},
    {"_orphans", l_orphans},
    {"sleep", l_sleep},
    {NULL, NULL},
};

static void new_class(lua_State *L, const char *mt, const luaL_Reg *methods, lua_CFunction gc,
                      lua_CFunction close, lua_CFunction tostring) {
  luaL_newmetatable(L, mt);
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, close);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushstring(L, mt);
  lua_setfield(L, -2, "__name");
  lua_pop(L, 1);
}

/* A term's __close: release (a lock is released; an election term only drops
 * the reference). Errors of a to-be-closed variable's __close propagate. */
static int term_close(lua_State *L) {
  lua_settop(L, 1);
  return term_release(L) > 1 ? 0 : 0;
}

static int client_close_tbc(lua_State *L) {
  lua_settop(L, 1);
  client_close(L);
  return 0;
}

static int election_close_tbc(lua_State *L) {
  lua_settop(L, 1);
  election_close(L);
  return 0;
}

#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
int luaopen_simba(lua_State *L) {
  unsigned v = simba_version();
  if ((v >> 16) != SIMBA_VERSION_MAJOR || v < 0x010200u)
    return luaL_error(L, "simba: libsimba %s is too old (need 1.2 or later)",
                      simba_version_string());
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushstring(L, "v");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, WEAK_KEY);

  new_class(L, CLIENT_MT, client_methods, client_gc, client_close_tbc, client_tostring);
  new_class(L, ELECTION_MT, election_methods, election_gc, election_close_tbc, election_tostring);
  new_class(L, TERM_MT, term_methods, term_gc, term_close, term_tostring);
  new_class(L, TASK_MT, task_methods, task_gc, task_close_tbc, task_tostring);
  luaL_newmetatable(L, CONFIG_BOX_MT);
  lua_pushcfunction(L, config_box_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_getmetatable(L, TERM_MT);
  lua_pushcfunction(L, term_eq);
  lua_setfield(L, -2, "__eq");
  lua_pop(L, 1);

  /* A sentinel finalized at lua_close, after every client (finalizers run in
   * the reverse order of their marking): it finishes pending orphan closes. */
  lua_getfield(L, LUA_REGISTRYINDEX, "simba.sentinel");
  if (lua_isnil(L, -1)) {
    lua_newuserdatauv(L, 1, 0);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, sentinel_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, "simba.sentinel");
  }
  lua_pop(L, 1);

  luaL_newlib(L, module_fns);
  lua_pushstring(L, simba_version_string());
  lua_setfield(L, -2, "VERSION");
  {
    static const int codes[] = {SIMBA_EINVAL,      SIMBA_ESTATE,  SIMBA_EEXPIRED,
                                SIMBA_ETIMEDOUT,   SIMBA_EBACKEND, SIMBA_ECLOSED,
                                SIMBA_ENOMEM,      SIMBA_EWOULDBLOCK, SIMBA_EBUSY,
                                SIMBA_EUNSUPPORTED, SIMBA_ECANCELED};
    size_t i;
    lua_createtable(L, 0, (int)(sizeof codes / sizeof codes[0]));
    for (i = 0; i < sizeof codes / sizeof codes[0]; ++i) {
      lua_pushinteger(L, codes[i]);
      lua_setfield(L, -2, code_name(codes[i]));
    }
    lua_setfield(L, -2, "codes");
  }
  return 1;
}
